"""Georeferencing: an EPSG code, a raster type and an affine transform.

Specification section *Georeferencing*. Every file carries two tags that
together occupy 160 bytes:

* ``ModelTransformationTag`` (34264): a 4 x 4 matrix of 16 doubles, row-major,
  built from the affine coefficients ``(x_res, row_rot, x_origin, col_rot,
  y_res, y_origin)`` in rasterio's order;
* ``GeoKeyDirectoryTag`` (34735): the header ``(1, 1, 0, 3)`` followed by
  ``GTModelTypeGeoKey``, ``GTRasterTypeGeoKey`` and one CRS key.

A CRS is an EPSG code. Whether it is geographic (key 2048) or projected (key
3072) is looked up in the PROJ database through :mod:`pyproj`, never guessed
from the number. Rasters without a CRS use the *Undefined georeferencing*
values: model type 0, key 2048 with value 0, and a fixed matrix.

>>> g = Georeferencing.from_crs("EPSG:32633", (10, 0, 500000, 0, -10, 4000000))
>>> g.model_type, g.crs_key
(1, 3072)
>>> Georeferencing.from_tags(*g.to_tags()) == g
True
"""

from __future__ import annotations

import math
import numbers
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from affine import Affine

from rumi_core.errors import CRSError, InvalidFileError, InvalidInputError

__all__ = [
    "GEOREF_BYTES",
    "PIXEL_IS_AREA",
    "PIXEL_IS_POINT",
    "UNDEFINED_MATRIX",
    "Georeferencing",
    "epsg_kind",
]

PIXEL_IS_AREA = 1
PIXEL_IS_POINT = 2
MODEL_PROJECTED = 1
MODEL_GEOGRAPHIC = 2
KEY_GEOGRAPHIC = 2048
KEY_PROJECTED = 3072
GEOKEY_HEADER = (1, 1, 0, 3)

UNDEFINED_MATRIX = (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
"""``ModelTransformationTag`` of a file without georeferencing."""

_IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

GEOREF_BYTES = 160
"""Size of the two georeferencing values, which are always the last external values of the head.

*Deriving base_frame_offset*: ``ModelTransformationTag`` (128 bytes) and
``GeoKeyDirectoryTag`` (32 bytes) are the last values before the frames, so
they occupy ``[base_frame_offset - 160, base_frame_offset)``, a range a reader
holding the header blob computes without reading the head.
"""


def epsg_kind(code: int) -> int:
    """Return ``GTModelTypeGeoKey`` for an EPSG code: 1 projected, 2 geographic.

    The type comes from the PROJ database. Codes outside 1024..32766, unknown
    to the EPSG registry, or naming another kind of CRS (geocentric, vertical,
    compound, engineering, 3D geographic) are refused.

    Raises:
        CRSError: the code cannot be stored in a rumi file.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError as ProjCRSError

    if not 1024 <= code <= 32766:
        raise CRSError(
            f"EPSG:{code} is outside 1024..32766", field="GeoKeyDirectoryTag", rule="The EPSG code MUST fall between 1024 and 32766"
        )
    try:
        crs = CRS.from_epsg(code)
    except ProjCRSError as err:
        raise CRSError(
            f"EPSG:{code} is not defined in the EPSG registry",
            field="GeoKeyDirectoryTag",
            rule="The EPSG code MUST be defined by the EPSG registry",
        ) from err
    if crs.type_name == "Projected CRS":
        return MODEL_PROJECTED
    if crs.type_name == "Geographic 2D CRS":
        return MODEL_GEOGRAPHIC
    # Strict reading for a 3D geographic CRS (EPSG:4979), which rumi-eo 0.26.1 writes under
    # GTModelTypeGeoKey 2: that value is GeoTIFF's ModelTypeGeographic, a 2D latitude-longitude
    # system, and the third axis is an ellipsoidal height, the vertical component the
    # specification excludes ("No other CRS representation"). rumi convert stores such an
    # input under its 2D CRS (EPSG:4326) and records the height's CRS beside the cube.
    raise CRSError(
        f"EPSG:{code} is a {crs.type_name}; rumi stores only 2D geographic and projected CRSs",
        field="GeoKeyDirectoryTag",
        rule="No other CRS representation is permitted",
    )


def _epsg_of(crs: Any) -> int:
    """Return the EPSG code of an int, ``"EPSG:n"`` string or CRS object."""
    if isinstance(crs, bool):
        raise CRSError(f"crs must be an EPSG code or a CRS, got {crs!r}", field="crs")
    if isinstance(crs, numbers.Integral):  # int, numpy integers
        return int(crs)
    if isinstance(crs, str):
        text = crs.strip()
        if text.upper().startswith("EPSG:") and text[5:].isdigit():
            return int(text[5:])
        if text.isdigit():
            return int(text)
    to_epsg = getattr(crs, "to_epsg", None)
    if callable(to_epsg):
        code = to_epsg()
        if code:
            return int(code)
        raise CRSError(
            f"the CRS {crs!s:.80} has no EPSG code; rumi stores a CRS only as an EPSG code. "
            "Reproject to an EPSG CRS (for example with rasterio.warp) first",
            field="crs",
        )
    if isinstance(crs, str):
        from pyproj import CRS
        from pyproj.exceptions import CRSError as ProjCRSError

        try:
            code = CRS.from_user_input(crs).to_epsg()
        except ProjCRSError as err:
            raise CRSError(f"{crs!r} is not a CRS", field="crs") from err
        if code:
            return int(code)
        raise CRSError(f"the CRS {crs!r:.80} has no EPSG code; rumi stores a CRS only as an EPSG code", field="crs")
    raise CRSError(f"crs must be an EPSG code, 'EPSG:n' or a CRS object, got {type(crs).__name__}", field="crs")


def _coefficients(transform: Any) -> tuple[float, ...]:
    # Strict reading: the specification sets no rule on the coefficients, but
    # two mistakes write a file whose pixels are placed wrongly without a word.
    # A sequence in GDAL's order (x_origin, x_res, row_rot, y_origin, col_rot,
    # y_res) is refused as rasterio.transform.guard_transform refuses it (an
    # Affine never is); and a singular transform gives every pixel zero area.
    try:
        given = tuple(transform)  # once: a generator is read once
        values = tuple(float(v) for v in given)
    except (TypeError, ValueError) as err:
        raise InvalidInputError(
            f"transform takes six numbers in rasterio order or an affine.Affine, got {transform!r:.80}", field="transform"
        ) from err
    if not isinstance(transform, Affine) and len(values) == 6 and values[2] == values[4] == 0.0 and values[1] > 0 and values[5] < 0:
        raise InvalidInputError(  # rasterio.transform.tastes_like_gdal's test
            f"transform {given} looks like GDAL's order (x_origin, x_res, 0, y_origin, 0, y_res); "
            "give rasterio's (x_res, 0, x_origin, 0, y_res, y_origin), e.g. affine.Affine.from_gdal(*gt)",
            field="transform",
        )
    if len(values) == 9:
        if values[6:] != (0.0, 0.0, 1.0):
            raise InvalidInputError("a nine-value affine transform must end in (0, 0, 1)", field="transform")
        values = values[:6]
    if len(values) != 6:
        raise InvalidInputError(f"transform takes six affine coefficients in rasterio order, got {len(values)}", field="transform")
    if not all(math.isfinite(v) for v in values):
        raise InvalidInputError(f"transform coefficients must be finite, got {values}", field="transform")
    a, b, _, d, e, _ = values
    if Fraction(a) * Fraction(e) == Fraction(b) * Fraction(d):  # exact: a * e - b * d underflows for tiny pixels
        raise InvalidInputError(f"transform {values} is singular: its pixels have no area", field="transform")
    return values


@dataclass(frozen=True)
class Georeferencing:
    """The georeferencing block of one file."""

    epsg: int
    """EPSG code, 0 when the raster has no CRS."""
    model_type: int
    """``GTModelTypeGeoKey``: 0 none, 1 projected, 2 geographic."""
    raster_type: int = PIXEL_IS_AREA
    """``GTRasterTypeGeoKey``: 1 PixelIsArea, 2 PixelIsPoint."""
    transform: tuple[float, ...] = _IDENTITY
    """Affine coefficients ``(x_res, row_rot, x_origin, col_rot, y_res, y_origin)``."""

    @property
    def crs_key(self) -> int:
        """The id of the CRS geokey: 2048 geographic or undefined, 3072 projected."""
        return KEY_PROJECTED if self.model_type == MODEL_PROJECTED else KEY_GEOGRAPHIC

    @property
    def is_georeferenced(self) -> bool:
        """False for *Undefined georeferencing*."""
        return self.model_type != 0

    @property
    def crs(self) -> str | None:
        """``"EPSG:n"``, or None without a CRS."""
        return f"EPSG:{self.epsg}" if self.is_georeferenced else None

    @classmethod
    def undefined(cls, *, pixel_is_point: bool = False) -> Georeferencing:
        """The georeferencing of a raster without a CRS."""
        return cls(0, 0, PIXEL_IS_POINT if pixel_is_point else PIXEL_IS_AREA)

    @classmethod
    def from_crs(cls, crs: Any, transform: Any, *, pixel_is_point: bool = False) -> Georeferencing:
        """Build georeferencing from a CRS and an affine transform.

        ``crs`` is an EPSG integer, an ``"EPSG:n"`` string, or a rasterio or
        pyproj CRS. ``transform`` is six coefficients in rasterio order or an
        :class:`affine.Affine`. With both None, the raster is ungeoreferenced.

        Raises:
            CRSError: the CRS has no EPSG code, or is not a 2D geographic or
                projected CRS in the EPSG registry.
            InvalidInputError: only one of ``crs`` and ``transform`` was given,
                or the transform is malformed.
        """
        if crs is None and transform is None:
            return cls.undefined(pixel_is_point=pixel_is_point)
        if crs is None or transform is None:
            raise InvalidInputError("crs and transform must be given together", field="crs")
        code = _epsg_of(crs)
        return cls(code, epsg_kind(code), PIXEL_IS_POINT if pixel_is_point else PIXEL_IS_AREA, _coefficients(transform))

    def matrix(self) -> tuple[float, ...]:
        """The 16 doubles of ``ModelTransformationTag``."""
        if not self.is_georeferenced:
            return UNDEFINED_MATRIX
        a, b, c, d, e, f = self.transform
        return (a, b, 0.0, c, d, e, 0.0, f, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)

    def geokeys(self) -> tuple[int, ...]:
        """The 16 shorts of ``GeoKeyDirectoryTag``."""
        return (
            *GEOKEY_HEADER,
            1024, 0, 1, self.model_type,
            1025, 0, 1, self.raster_type,
            self.crs_key, 0, 1, self.epsg,
        )  # fmt: skip

    def to_tags(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """Return ``(matrix, geokeys)``."""
        return self.matrix(), self.geokeys()

    @classmethod
    def from_bytes(cls, data: bytes) -> Georeferencing:
        """Parse the :data:`GEOREF_BYTES` that precede the frames (16 doubles, then 16 shorts, little-endian).

        Raises:
            InvalidFileError: the bytes are short or break *Georeferencing*.
        """
        if len(data) != GEOREF_BYTES:
            raise InvalidFileError(
                f"the georeferencing values are {GEOREF_BYTES} bytes before the frames, got {len(data)}",
                field="ModelTransformationTag",
                rule="The two tags always occupy 160 bytes",
            )
        matrix = struct.unpack("<16d", data[:128])
        keys = struct.unpack("<16H", data[128:])
        return cls.from_tags(matrix, keys)

    @classmethod
    def from_tags(cls, matrix: tuple[float, ...], keys: tuple[int, ...]) -> Georeferencing:
        """Parse and check the two georeferencing tags.

        Raises:
            InvalidFileError: a value breaks *Georeferencing*; the message names
                the tag.
        """

        def fail(msg: str, tag: str, rule: str) -> InvalidFileError:
            return InvalidFileError(msg, field=tag, rule=rule)

        if tuple(keys[:4]) != GEOKEY_HEADER:
            raise fail(
                f"GeoKeyDirectoryTag header is {tuple(keys[:4])}, expected (1, 1, 0, 3)",
                "GeoKeyDirectoryTag",
                "The four-short header MUST be (1, 1, 0, 3)",
            )
        k_model, k_raster, k_crs = keys[4:8], keys[8:12], keys[12:16]
        if k_model[:3] != (1024, 0, 1) or k_raster[:3] != (1025, 0, 1) or k_crs[1:3] != (0, 1):
            raise fail(
                f"GeoKeyDirectoryTag keys are {tuple(keys[4:])}",
                "GeoKeyDirectoryTag",
                "Each key is stored as (key_id, 0, 1, value), in the order shown",
            )
        model, raster, key_id, code = k_model[3], k_raster[3], k_crs[0], k_crs[3]
        if raster not in (PIXEL_IS_AREA, PIXEL_IS_POINT):
            raise fail(
                f"GTRasterTypeGeoKey is {raster}, expected 1 or 2",
                "GeoKeyDirectoryTag",
                "GTRasterTypeGeoKey is 1 PixelIsArea or 2 PixelIsPoint",
            )
        if model == 0:
            # Strict reading: a reader MUST ignore the matrix of an undefined
            # CRS, but a *compliant* file MUST carry the defined values, so the
            # validator checks them.
            if key_id != KEY_GEOGRAPHIC or code != 0:
                raise fail(
                    f"undefined georeferencing stores key {key_id} = {code}, expected 2048 = 0",
                    "GeoKeyDirectoryTag",
                    "Undefined georeferencing",
                )
            if tuple(matrix) != UNDEFINED_MATRIX:
                raise fail(
                    "undefined georeferencing has a matrix other than the defined one", "ModelTransformationTag", "Undefined georeferencing"
                )
            return cls(0, 0, raster)
        if model not in (MODEL_PROJECTED, MODEL_GEOGRAPHIC):
            raise fail(
                f"GTModelTypeGeoKey is {model}, expected 0, 1 or 2",
                "GeoKeyDirectoryTag",
                "GTModelTypeGeoKey is 1 projected or 2 geographic",
            )
        expected_key = KEY_PROJECTED if model == MODEL_PROJECTED else KEY_GEOGRAPHIC
        if key_id != expected_key:
            raise fail(
                f"GTModelTypeGeoKey {model} comes with key {key_id}, expected {expected_key}",
                "GeoKeyDirectoryTag",
                "The key MUST agree with GTModelTypeGeoKey",
            )
        try:
            kind = epsg_kind(code)
        except CRSError as err:
            raise fail(err.message, "GeoKeyDirectoryTag", err.rule or "EPSG registry") from err
        if kind != model:
            raise fail(
                f"EPSG:{code} is {'projected' if kind == 1 else 'geographic'} in the EPSG registry, the file says otherwise",
                "GeoKeyDirectoryTag",
                "A writer MUST obtain the CRS type from the EPSG registry",
            )
        m = tuple(matrix)
        if m[2] != 0.0 or m[6] != 0.0 or m[8:12] != (0.0,) * 4 or m[12:16] != (0.0, 0.0, 0.0, 1.0):
            raise fail(f"ModelTransformationTag is not an affine matrix: {m}", "ModelTransformationTag", "The third row MUST be zero")
        coefficients = (m[0], m[1], m[3], m[4], m[5], m[7])
        # Strict reading: the specification sets no rule on the coefficient
        # values, but a NaN or infinite one defines no affine transform: no
        # pixel has a place, and every footprint, window and warp of the file
        # would be NaN. This writer refuses one (_coefficients); rumi-eo 0.26.1
        # writes and reads it, and its files with one are refused here, by name.
        if not all(math.isfinite(v) for v in coefficients):
            raise fail(
                f"ModelTransformationTag has a non-finite affine coefficient: {coefficients}",
                "ModelTransformationTag",
                "ModelTransformationTag stores an affine matrix (strict reading: finite coefficients)",
            )
        return cls(code, model, raster, coefficients)
