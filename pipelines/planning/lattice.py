"""Pixel lattices: which scenes share one, and where each sits on it.

Two north-up rasters in one CRS with
the same pixel size share a lattice when their origins differ by a whole number
of pixels, that is, when ``origin mod pixel size`` (the *alignment*) is equal.
On a shared lattice a raster's footprint is an integer :class:`Extent` (first
column, first row, width, height), extents can be unioned, and every raster's
pixels map one-to-one onto the union's.

A raster whose alignment differs is *off grid*; :func:`snap_extent` gives the
extent its warped copy covers on a grid. The module is pure arithmetic.

>>> g = Lattice.from_transform(32633, (10.0, 0.0, 500005.0, 0.0, -10.0, 4000000.0))
>>> g.alignment
(0.5, 0.0)
>>> g.extent((10.0, 0.0, 500005.0, 0.0, -10.0, 4000000.0), 3, 2)
Extent(col=50000, row=-400000, width=2, height=3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from catalog.grid import Grid

__all__ = ["Extent", "Lattice", "OnGrid", "is_north_up", "snap_extent"]

_DIGITS: Final = 6
"""Alignment and pixel size are compared after rounding to this many decimals (of a pixel, of a unit)."""


def is_north_up(transform: Sequence[float]) -> bool:
    """Return whether a transform has no rotation, positive x and negative y pixel size."""
    a, b, _, d, e, _ = transform[:6]
    return b == 0.0 and d == 0.0 and a > 0.0 and e < 0.0


def north_up(transform: Sequence[float], height: int, width: int) -> tuple[tuple[float, float, float, float, float, float], int, int]:
    """The north-up transform and shape that a rotated, sheared, mirrored or south-up raster is warped onto.

    A pixel of it is as wide as the source's step along a row
    (``hypot(a, d)``) and as tall as its step down a column
    (``hypot(b, e)``), and it covers the bounding box of the source's four
    corners from their north-west corner. A south-up raster so maps pixel
    for pixel onto itself turned upright, and one turned by a multiple of 90
    degrees onto itself turned back: every target pixel's centre falls on a
    source pixel's centre, and nearest resampling moves samples without
    changing them. (gdalwarp's default keeps the length of the pixel's
    diagonal instead, which would change the pixel size of a raster turned
    by other angles; the per-axis step keeps the source's resolution.)

    >>> north_up((10.0, 0.0, 500000.0, 0.0, 10.0, 4000000.0), 3, 2)  # south-up: rows run north
    ((10.0, 0.0, 500000.0, 0.0, -10.0, 4000030.0), 3, 2)
    >>> north_up((0.0, 10.0, 500000.0, 10.0, 0.0, 4000000.0), 3, 2)  # rows run east, columns north
    ((10.0, 0.0, 500000.0, 0.0, -10.0, 4000020.0), 2, 3)
    """
    a, b, c, d, e, f = (float(v) for v in transform[:6])
    xs = [c + a * col + b * row for col in (0, width) for row in (0, height)]
    ys = [f + d * col + e * row for col in (0, width) for row in (0, height)]
    res_x, res_y = math.hypot(a, d), math.hypot(b, e)
    eps = 1e-9
    out_width = max(1, math.ceil((max(xs) - min(xs)) / res_x - eps))
    out_height = max(1, math.ceil((max(ys) - min(ys)) / res_y - eps))
    return (res_x, 0.0, min(xs), 0.0, -res_y, max(ys)), out_height, out_width


def _fraction(value: float) -> float:
    frac = round(value % 1.0, _DIGITS)
    return 0.0 if frac >= 1.0 else frac


@dataclass(frozen=True, order=True)
class Extent:
    """An integer footprint on a grid: first column and row, width and height in pixels."""

    col: int
    row: int
    width: int
    height: int

    def union(self, other: Extent) -> Extent:
        """The smallest extent covering both."""
        col, row = min(self.col, other.col), min(self.row, other.row)
        right = max(self.col + self.width, other.col + other.width)
        bottom = max(self.row + self.height, other.row + other.height)
        return Extent(col, row, right - col, bottom - row)

    @staticmethod
    def union_all(extents: Iterable[Extent]) -> Extent:
        """The smallest extent covering all of ``extents`` (at least one)."""
        items = list(extents)
        out = items[0]
        for e in items[1:]:
            out = out.union(e)
        return out


@dataclass(frozen=True, order=True)
class Lattice:
    """A lattice of north-up pixels: CRS, pixel size and alignment, without an extent.

    Scenes on one lattice can share a cube; :class:`catalog.grid.Grid` is the
    raster grid of one file (CRS, transform and size).
    """

    epsg: int
    """EPSG code of the CRS."""
    res_x: float
    """Pixel width, positive."""
    res_y: float
    """Pixel height, positive (the transform's y step is ``-res_y``)."""
    alignment: tuple[float, float]
    """``(x_origin / res_x mod 1, y_origin / res_y mod 1)``, rounded to 6 decimals."""

    @classmethod
    def from_transform(cls, epsg: int, transform: Sequence[float]) -> Lattice:
        """The grid of a north-up transform (check :func:`is_north_up` first)."""
        a, _, c, _, e, f = transform[:6]
        res_x, res_y = round(a, 9), round(-e, 9)
        return cls(epsg, res_x, res_y, (_fraction(c / a), _fraction(f / -e)))

    def extent(self, transform: Sequence[float], height: int, width: int) -> Extent:
        """The extent of a raster on this grid; its origin must be aligned with the grid."""
        a, _, c, _, e, f = transform[:6]
        col = round(c / a - self.alignment[0])
        row = round(f / e + self.alignment[1])
        return Extent(col, row, width, height)

    def transform(self, extent: Extent) -> tuple[float, float, float, float, float, float]:
        """The affine transform of an extent's first pixel."""
        x0 = (extent.col + self.alignment[0]) * self.res_x
        y0 = -(extent.row - self.alignment[1]) * self.res_y
        return (self.res_x, 0.0, x0, 0.0, -self.res_y, y0)

    def slug(self) -> str:
        """A file-name-safe text of the CRS and pixel size, e.g. ``EPSG32633_r10``."""
        res = f"{self.res_x:g}" if self.res_x == self.res_y else f"{self.res_x:g}x{self.res_y:g}"
        return f"EPSG{self.epsg}_r{res.replace('.', 'p')}"


def snap_extent(grid: Lattice, transform: Sequence[float], height: int, width: int) -> Extent:
    """The extent on ``grid`` that covers a raster of another alignment, snapped outwards.

    >>> g = Lattice(32633, 10.0, 10.0, (0.0, 0.0))
    >>> snap_extent(g, (10.0, 0.0, 500003.0, 0.0, -10.0, 4000000.0), 2, 2)
    Extent(col=50000, row=-400000, width=3, height=2)
    """
    a, _, c, _, e, f = transform[:6]
    left, right = c, c + a * width
    top, bottom = f, f + e * height
    eps = 1e-6
    col0 = math.floor(left / grid.res_x - grid.alignment[0] + eps)
    col1 = math.ceil(right / grid.res_x - grid.alignment[0] - eps)
    row0 = math.floor(-top / grid.res_y + grid.alignment[1] + eps)
    row1 = math.ceil(-bottom / grid.res_y + grid.alignment[1] - eps)
    return Extent(col0, row0, col1 - col0, row1 - row0)


class OnGrid:
    """Mixed into the dataclasses that sit on one raster grid (a scene, an acquisition, a cube plan).

    Each holds its CRS, transform, shape and raster type as one
    :class:`catalog.grid.Grid` value, ``grid``; these properties read its fields
    the way planning uses them.
    """

    grid: Grid
    """CRS, transform of the first pixel's corner (rasterio order), shape and raster type."""

    @property
    def epsg(self) -> int:
        """EPSG code of the CRS (a scene without one is a dead letter before planning)."""
        epsg = self.grid.epsg
        assert epsg is not None, "planned rasters always have an EPSG code"
        return epsg

    @property
    def transform(self) -> tuple[float, float, float, float, float, float]:
        """Affine transform of the first pixel's corner, rasterio order."""
        return self.grid.transform

    @property
    def height(self) -> int:
        """Rows (``Y``)."""
        return self.grid.height

    @property
    def width(self) -> int:
        """Columns (``X``)."""
        return self.grid.width

    @property
    def pixel_is_point(self) -> bool:
        """True when the raster declares ``AREA_OR_POINT=Point``."""
        return self.grid.pixel_is_point

    @property
    def lattice(self) -> Lattice:
        """The lattice its pixels sit on (check :func:`is_north_up` first)."""
        return Lattice.from_transform(self.epsg, self.transform)
