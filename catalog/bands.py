"""Band metadata: the STAC 1.1 ``bands`` object of one rumi band.

Every rumi band carries a text in the trailer, recommended to read like
``"B4, Red, 664.5nm (S2A) / 665nm (S2B)"``: a name, a short description and a
wavelength. A :class:`Band` is what the catalogue publishes for it, as a STAC
1.1 band object: ``name``, ``description``, ``data_type``, ``nodata``,
``scale``, ``offset``, ``unit`` and, from the EO extension,
``eo:common_name`` and ``eo:center_wavelength`` (micrometres).

:func:`band_from_text` derives what it can from the text alone; the pipeline's
extra metadata, when given, overrides it field by field
(:meth:`Band.merged`).

>>> b = band_from_text("B4, Red, 665nm", data_type="uint16")
>>> b.name, b.common_name, b.center_wavelength
('B4', 'red', 0.665)
>>> Band.from_dict(b.to_dict()) == b
True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Final

from catalog.errors import ItemError
from catalog.json_shape import BOOLEAN, NUMBER, TEXT, json_kind, mismatch

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["COMMON_NAMES", "NODATA_TEXTS", "Band", "band_from_text", "common_nodata", "nodata_mismatch", "stac_data_type", "stac_nodata"]

COMMON_NAMES = (
    "pan", "coastal", "blue", "green", "green05", "yellow", "red", "rededge", "rededge071", "rededge075",
    "rededge078", "nir", "nir08", "nir09", "cirrus", "swir16", "swir22", "lwir", "lwir11", "lwir12",
)  # fmt: skip
"""The EO extension's band common names."""


def stac_nodata(value: float | str | None) -> float | str | None:
    """The JSON form STAC 1.1 gives a no-data value: a number, or ``"nan"``, ``"inf"``, ``"-inf"``.

    JSON has no non-finite numbers, so STAC spells them as text; a finite
    value, text or None is returned as it is.

    >>> stac_nodata(float("-inf")), stac_nodata(0.0)
    ('-inf', 0.0)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


_ALIASES = {
    "near infrared": "nir",
    "near-infrared": "nir",
    "nir": "nir",
    "red edge": "rededge",
    "red-edge": "rededge",
    "swir1": "swir16",
    "swir 1": "swir16",
    "swir2": "swir22",
    "swir 2": "swir22",
    "coastal aerosol": "coastal",
    "panchromatic": "pan",
}

_WAVELENGTH = re.compile(r"(?<![\d.])(\d{1,9}(?:\.\d+)?)\s*(nm|µm|um)\b", re.IGNORECASE)
"""A wavelength in a band text: a number that starts no later than its first digit, of at most 9 whole digits.

Matched from inside a run of digits, a search tried every start in it and
backtracked over the rest: a band text of 16,000 digits (the specification
allows 65,535 bytes) took 20 s, and one of 65,535 hours. Bounded, a number
too long for a wavelength is none (and never a float too large for JSON).
"""

_DATA_TYPES = {
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "float32": "float32", "float64": "float64",
    "complex64": "cfloat32", "complex128": "cfloat64",
}  # fmt: skip


def stac_data_type(encoding_name: str) -> str:
    """Map a rumi sample encoding name to a STAC ``data_type``.

    Encodings STAC has no word for (boolean, complex with 16-bit parts,
    bfloat16 and the float8 types) map to ``"other"``.

    >>> stac_data_type("uint16"), stac_data_type("complex64"), stac_data_type("bfloat16")
    ('uint16', 'cfloat32', 'other')
    """
    return _DATA_TYPES.get(encoding_name, "other")


def _common_name(parts: list[str]) -> str | None:
    for part in parts:
        word = part.strip().lower()
        if word in COMMON_NAMES:
            return word
        if word in _ALIASES:
            return _ALIASES[word]
    return None


def _wavelength_um(text: str) -> float | None:
    m = _WAVELENGTH.search(text)
    if m is None:
        return None
    value = float(m.group(1))
    return round(value / 1000.0, 6) if m.group(2).lower() == "nm" else value


@dataclass(frozen=True)
class Band:
    """One band as STAC 1.1 describes it."""

    name: str
    """Short unique name, such as ``"B4"``."""
    description: str | None = None
    """The band text, or a longer description."""
    data_type: str | None = None
    """STAC ``data_type`` (``"uint16"``, ``"float32"``, ``"other"``...)."""
    nodata: float | str | None = None
    """The no-data value: a number, or ``"nan"``, ``"inf"``, ``"-inf"``."""
    scale: float | None = None
    """Multiply a stored value by this to get the physical value."""
    offset: float | None = None
    """Add this after scaling."""
    unit: str | None = None
    """Unit of the physical value."""
    common_name: str | None = None
    """EO common name (``"red"``, ``"nir"``...)."""
    center_wavelength: float | None = None
    """EO centre wavelength, in micrometres."""
    categorical: bool = False
    """Whether the values are classes (a scene classification, a palette's indices): never averaged or interpolated,
    ``rumi:categorical`` in the item."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ItemError(f"a band needs a non-empty name, got {self.name!r}")
        object.__setattr__(self, "nodata", stac_nodata(self.nodata))

    @property
    def scale_offset(self) -> tuple[float, float]:
        """``(scale, offset)`` of a physical value ``stored * scale + offset``: 1 and 0 where the item states none.

        >>> Band("B1", scale=1e-4).scale_offset
        (0.0001, 0.0)
        """
        return (1.0 if self.scale is None else float(self.scale), 0.0 if self.offset is None else float(self.offset))

    @property
    def nodata_value(self) -> float | None:
        """The no-data value as a number (``"nan"``, ``"inf"`` and ``"-inf"`` as floats), as rasterio gives ``nodata``; None for none.

        >>> Band("B1", nodata="nan").nodata_value, Band("B1", nodata=0).nodata_value, Band("B1").nodata_value
        (nan, 0.0, None)
        """
        if self.nodata is None:
            return None
        try:
            return float(self.nodata)
        except ValueError:  # a text other than STAC's three: as if none
            return None

    @property
    def labels(self) -> tuple[str, ...]:
        """Every text a user may select this band by: name, common name, description."""
        return tuple(x for x in (self.name, self.common_name, self.description) if x)

    def matches(self, selector: str) -> bool:
        """Whether ``selector`` names this band (case-insensitive).

        It matches the name, the common name, the description, any
        comma-separated part of the name or the description (``B04`` names
        ``"B04, red, 664.6nm (S2A) / ..."``, the whole text being a STAC
        band's name), or the end of the name after a ``_``, ``-``, ``.`` or
        space: ``VV`` names ``IW_DVP_G_gpuned_VV`` and ``PIXEL`` names
        ``QA_PIXEL``, the names that layers without a band token take from
        their files (``pipelines.planning.grouping``).
        """
        s = selector.strip().lower()
        candidates = {x.lower() for x in self.labels}
        for text in (self.name, self.description or ""):
            candidates.update(p.strip().lower() for p in text.split(",") if p.strip())
        name = self.name.lower()
        return s in candidates or (bool(s) and any(name.endswith(sep + s) for sep in "_-. "))

    def merged(self, overrides: dict[str, Any]) -> Band:
        """Return a copy with the fields given in ``overrides`` replaced.

        Keys are the attribute names, or their STAC spellings
        (``eo:common_name``, ``eo:center_wavelength``); unknown keys are refused.

        Raises:
            ItemError: a key is not a band field.
        """
        known = {f.name for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            attr = key.removeprefix("eo:").removeprefix("rumi:")
            if attr not in known:
                raise ItemError(f"band metadata has no field {key!r}; expected one of {sorted(known)}")
            changes[attr] = value
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the STAC 1.1 band object (absent fields omitted)."""
        fields_ = {key: getattr(self, key) for key in ("name", "description", "data_type", "nodata", "scale", "offset", "unit")}
        fields_.update({"eo:common_name": self.common_name, "eo:center_wavelength": self.center_wavelength})
        fields_["rumi:categorical"] = True if self.categorical else None
        return {key: value for key, value in fields_.items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Band:
        """Read a STAC band object.

        Raises:
            ItemError: the object is not an object, has no text name, or a
                field of another JSON type than STAC's.
        """
        if not isinstance(data, dict) or "name" not in data:
            keys = f"keys {sorted(data)}" if isinstance(data, dict) else json_kind(data)
            raise ItemError(f"a STAC band object needs a name, got {keys}")
        problem = (
            mismatch(data["name"], TEXT, "name", required=True)
            or next((p for key, kind in _BAND_FIELD_KINDS if (p := mismatch(data.get(key), kind, key))), None)
            or nodata_mismatch(data.get("nodata"), "nodata")
        )
        if problem is not None:
            raise ItemError(f"band {data['name']!r}: {problem}")
        return cls(
            name=data["name"],
            description=data.get("description"),
            data_type=data.get("data_type"),
            nodata=data.get("nodata"),
            scale=data.get("scale"),
            offset=data.get("offset"),
            unit=data.get("unit"),
            common_name=data.get("eo:common_name"),
            center_wavelength=data.get("eo:center_wavelength"),
            categorical=data.get("rumi:categorical") is True,
        )


_BAND_FIELD_KINDS: Final = (
    ("description", TEXT), ("data_type", TEXT), ("scale", NUMBER), ("offset", NUMBER), ("unit", TEXT),
    ("eo:common_name", TEXT), ("eo:center_wavelength", NUMBER), ("rumi:categorical", BOOLEAN),
)  # fmt: skip
"""The JSON kind of each field of a STAC band object that :meth:`Band.from_dict` reads."""

NODATA_TEXTS: Final = ("nan", "inf", "-inf")
"""STAC's spellings of the non-finite no-data values."""


def nodata_mismatch(value: Any, field: str) -> str | None:
    """What is wrong with ``value`` as STAC's no-data value, naming ``field``; None for a number, ``"nan"``, ``"inf"``, ``"-inf"`` or None.

    >>> nodata_mismatch("zero", "nodata")
    "nodata is 'zero', not a number or one of nan, inf, -inf"
    """
    if value is None or json_kind(value) == NUMBER or (isinstance(value, str) and value in NODATA_TEXTS):
        return None
    return f"{field} is {value!r}, not a number or one of {', '.join(NODATA_TEXTS)}"


def band_from_text(text: str, *, data_type: str | None = None, nodata: float | str | None = None) -> Band:
    """Derive a band from its trailer text.

    The name is the first comma-separated part, the description the whole
    text; a common name is taken from any part that is one (``"Red"``,
    ``"NIR"``, ``"SWIR1"``...), and the first ``"665nm"`` or ``"1.61um"`` gives
    the centre wavelength.

    >>> band_from_text("elevation").to_dict()
    {'name': 'elevation', 'description': 'elevation'}
    """
    parts = [p.strip() for p in text.split(",")]
    name = parts[0] or text
    return Band(
        name=name,
        description=text,
        data_type=data_type,
        nodata=nodata,
        common_name=_common_name(parts),
        center_wavelength=_wavelength_um(text),
    )


def common_nodata(values: Iterable[float | str | None]) -> float | None:
    """The no-data value of a set of bands, from each band's value, as a float when they share one.

    A GeoTIFF (and a CF ``_FillValue``) holds one no-data value for all its
    bands, so bands that disagree, or where some have none, give None: a
    value that is valid data in one band must not mask it.

    >>> common_nodata([-9999.0, -9999])
    -9999.0
    >>> common_nodata(["nan"])
    nan
    >>> common_nodata([0.0, None]) is None
    True
    """
    finite: set[float] = set()
    nan = missing = False
    for nodata in values:
        if nodata is None:
            missing = True
            continue
        try:
            value = float(nodata)
        except ValueError:
            return None
        if math.isnan(value):
            nan = True
        else:
            finite.add(value)
    if missing or (nan and finite) or len(finite) > 1:
        return None
    return math.nan if nan else (next(iter(finite)) if finite else None)
