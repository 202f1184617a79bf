"""What the pipeline knows about a cube beyond the file itself, for its STAC item.

:class:`ExtraMetadata` is the optional input of :func:`catalog.items.create_item`:
an item id and title, a dataset name, per-band overrides of what the
trailer's band texts say (spec "Band descriptions"), the compression graph
and the checksums the pipeline already computed. :meth:`ExtraMetadata.from_dict`
reads a run-manifest line as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.errors import ItemError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ExtraMetadata"]


@dataclass(frozen=True)
class ExtraMetadata:
    """What the pipeline knows about a cube beyond the file itself.

    Every field is optional. :meth:`from_dict` accepts a run-manifest line
    as it is: keys it does not know (``file``, ``blob``, ``shape``...) are
    ignored, because the file is authoritative for them.
    """

    id: str | None = None
    """Item id; the file's stem when None."""
    dataset: str | None = None
    """Dataset name; items of one dataset and grid share a collection."""
    title: str | None = None
    """Item title."""
    bands: tuple[dict[str, Any], ...] = ()
    """Per-band overrides, in band order: ``name``, ``description``,
    ``data_type``, ``nodata``, ``scale``, ``offset``, ``unit``,
    ``common_name``, ``center_wavelength`` (micrometres)."""
    nodata: float | str | None = None
    """No-data value of every band (a band's own value wins)."""
    scale: float | None = None
    """Scale of every band."""
    offset: float | None = None
    """Offset of every band."""
    unit: str | None = None
    """Unit of every band."""
    codec: dict[str, Any] | None = None
    """The compression graph (``{"name": ..., "configuration": {...}}``)."""
    lossy_bound: float | dict[str, Any] | None = None
    """The error bound of a lossy graph."""
    libraries: dict[str, str] | None = None
    """Versions of the libraries that wrote the frames (``{"openzl": ..., "geozl": ...}``), as ``rumi:libraries``."""
    sha256: str | None = None
    """Hex SHA-256 of the file, when already computed."""
    crc32c: str | None = None
    """CRC-32C of a file in a bucket as GCS reports it, 8 hex digits (the run manifest's ``crc32c``)."""
    properties: dict[str, Any] = field(default_factory=dict)
    """Further item properties, copied as they are."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtraMetadata:
        """Read extra metadata from a mapping such as a run-manifest line.

        Raises:
            ItemError: ``bands`` is not a list.
        """
        raw_bands = data.get("bands") or []
        if not isinstance(raw_bands, (list, tuple)):
            raise ItemError(f"extra 'bands' is a list with one entry per band, got {type(raw_bands).__name__}")
        bands = tuple(_normalise_band(b) if isinstance(b, dict) else {} for b in raw_bands)
        codec = data.get("codec")
        if isinstance(codec, str):
            codec = {"name": codec}
        return cls(
            id=data.get("id"),
            dataset=data.get("dataset"),
            title=data.get("title"),
            bands=bands,
            nodata=data.get("nodata"),
            scale=data.get("scale"),
            offset=data.get("offset"),
            unit=data.get("unit"),
            codec=codec,
            lossy_bound=data.get("lossy_bound", data.get("error_bound")),
            libraries=data.get("libraries"),
            sha256=data.get("sha256"),
            crc32c=data.get("crc32c"),
            properties=dict(data.get("properties") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the fields that are set."""
        out: dict[str, Any] = {}
        for key in ("id", "dataset", "title", "nodata", "scale", "offset", "unit", "codec", "lossy_bound", "libraries", "sha256", "crc32c"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.bands:
            out["bands"] = [dict(b) for b in self.bands]
        if self.properties:
            out["properties"] = dict(self.properties)
        return out


_BAND_KEYS = {
    "centre_wavelength": "center_wavelength",
    "eo:center_wavelength": "center_wavelength",
    "eo:common_name": "common_name",
}


def _normalise_band(entry: dict[str, Any]) -> dict[str, Any]:
    return {_BAND_KEYS.get(k, k): v for k, v in entry.items() if k not in ("text", "index")}
