"""The output lattice of a load, and its blocks mosaicked from many cubes, first valid wins.

:func:`output_grid` chooses the :class:`~catalog.grid.Grid` a
:func:`catalog.load` returns: the items' own lattice, or the north-up
lattice of a given CRS and resolution, over a bbox. :class:`Mosaic`
computes one block of it: each :class:`Member` on that lattice is copied
(:func:`lattice_offset` places it), any other is warped with
:func:`rasterio.warp.reproject` in fixed squares of the lattice
(:data:`WARP_TILE`), so that its values do not depend on the blocks asked
for; warped values going to an integer type are rounded, and clamped to it.
A pixel takes the value of the first member, in order, that holds a valid
value there (:func:`valid_mask`).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from catalog.errors import LoadError, SelectorError
from catalog.grid import Grid, box_in, check_unwrapped, epsg_code, longitude_turns
from catalog.selectors import lonlat_union, lonlat_wrapped

if TYPE_CHECKING:
    from collections.abc import Sequence

    from affine import Affine
    from numpy.typing import NDArray

    from catalog.cube import Cube

__all__ = ["WARP_TILE", "Member", "Mosaic", "lattice_index", "lattice_offset", "nodata_sample", "output_grid", "valid_mask"]

_EPS = 1e-6

# rasterio's in-memory warp datasets are not safe to create from several threads at
# once (it intermittently reports a missing geotransform it was given): dask's
# threads warp one block at a time, and fetch and decode in parallel.
_WARP_LOCK = threading.Lock()

WARP_TILE = 512
"""Output pixels along each side of the squares a warped member is warped in (:meth:`Mosaic._warp`)."""

_WARP_MEMORY_MB = 1024
"""GDAL's working memory for one tile's warp, in MB: it splits a warp that needs more, which a tile never does short of
a reduction of about 20 (a source window of 11,000² float64 samples)."""

_KERNEL_RADIUS = {"nearest": 0, "bilinear": 1, "cubic": 2, "cubic_spline": 2, "lanczos": 3}
"""Source pixels a resampling kernel reaches past the one under a pixel's centre (GDAL's kernels), when
the output is no coarser than the source; 1 for the methods over a pixel's footprint (average, mode, ...)."""


@dataclass(frozen=True)
class Member:
    """One item of a load: its cube and how its axes map onto the output's."""

    cube: Cube
    grid: Grid
    bands: tuple[int, ...]
    """Item band position of each output band."""
    times: dict[int, int]
    """Output time index -> item time position."""
    nodata: tuple[float | None, ...]
    """Nodata of each selected band."""
    offsets: tuple[tuple[int, int], ...] | None
    """``(row, col)`` of the item's origin on the output lattice, each way round the Earth it meets the output
    (:func:`lattice_offsets`), or None when it must be warped."""


def lattice_offset(grid: Grid, out: Grid, turn: float = 0.0) -> tuple[int, int] | None:
    """The item's origin, ``turn`` on in x, in whole output pixels, or None when its pixels are not the output's."""
    if grid.crs != out.crs:
        return None
    a, b, c, d, e, f = grid.area_affine[:6]
    oa, _, oc, _, oe, of = out.transform
    if abs(b) > _EPS or abs(d) > _EPS or abs(a - oa) > _EPS * abs(oa) or abs(e - oe) > _EPS * abs(oe):
        return None
    col, row = (c + turn - oc) / oa, (f - of) / oe
    if abs(col - round(col)) > 1e-3 or abs(row - round(row)) > 1e-3:
        return None
    return round(row), round(col)


def lattice_offsets(grid: Grid, out: Grid) -> tuple[tuple[int, int], ...] | None:
    """Each placement of the item on the output lattice that meets the output; None when it must be warped.

    On a geographic output an item meets it as it lies, or 360° round
    (:func:`~catalog.grid.longitude_turns`), or both: a global item under an
    output across 180° fills the output's west part as it lies and its east
    part 360° on. None also when a placement that meets the output is off the
    lattice (a pixel size that does not divide 360°): the item is warped.
    """
    if lattice_offset(grid, out) is None:
        return None
    placed = []
    res, left = out.area_affine.a, out.area_affine.c
    for turn in longitude_turns(out.crs):
        x0 = grid.area_affine.c + turn
        x1 = x0 + grid.area_affine.a * grid.width
        # Meets the output where it holds an output pixel's centre: a global item that ends 0.003° past
        # 180° (0.007° pixels) does not meet it again 360° round, where no centre lies in that sliver.
        first = max(0, math.ceil((x0 - left) / res - 0.5))
        if not (first < out.width and left + (first + 0.5) * res < x1):
            continue
        offset = lattice_offset(grid, out, turn)
        if offset is None:
            return None
        placed.append(offset)
    return tuple(placed)


def lattice_index(out: Grid) -> tuple[int, int]:
    """``(row, col)`` of the output's first pixel on its lattice, counted from the lattice's origin.

    With a CRS given the lattice starts at the CRS's origin (:func:`output_grid`), so
    two loads of one CRS and resolution share it whatever their bboxes.
    """
    t = out.affine
    return round(t.f / t.e), round(t.c / t.a)


def _lattice(
    grids: Sequence[Grid], crs: str | None, resolution: float | tuple[float, float] | None
) -> tuple[str, float, float, float, float]:
    """The output lattice's CRS, origin and pixel size ``(crs, origin_x, origin_y, res_x, res_y)``."""
    first = grids[0]
    if crs is None:
        if resolution is not None:
            raise LoadError("a resolution needs a CRS (crs=, --crs): without one the items' own lattice is used")
        if first.crs is None:
            raise LoadError("the first item has no CRS; a load needs georeferenced items")
        t = first.area_affine
        lattice = Grid(first.crs, (t.a, t.b, t.c, t.d, t.e, t.f), first.height, first.width)
        for g in grids[1:]:
            if lattice_offset(g, lattice) is None:
                raise LoadError(
                    f"the items lie on different grids ({first.crs} at {first.transform[:6]} and {g.crs} at {g.transform[:6]}); "
                    "give a CRS and a resolution (crs= and resolution=, --crs and --resolution) to reproject them onto one"
                )
        return first.crs, t.c, t.f, t.a, -t.e
    code = epsg_code(crs)
    if code is None:
        raise LoadError(f"crs {crs!r} is not an EPSG CRS: give EPSG:n (or WKT or a URN that is one)")
    crs = code
    if resolution is None:
        same = {(g.crs, g.transform[0], g.transform[4]) for g in grids}
        if len(same) != 1 or next(iter(same))[0] != crs:
            raise LoadError(f"the items do not all have one pixel size in {crs}: give a resolution (resolution=, --resolution)")
        res_x, res_y = first.transform[0], -first.transform[4]
    elif isinstance(resolution, (int, float)):
        res_x = res_y = float(resolution)
    else:
        res_x, res_y = (float(v) for v in resolution)
    if not (res_x > 0 and res_y > 0 and math.isfinite(res_x) and math.isfinite(res_y)):
        raise LoadError(f"resolution is positive, got {resolution!r}")
    return crs, 0.0, 0.0, res_x, res_y


def output_grid(
    grids: Sequence[Grid],
    *,
    bbox: Sequence[float] | None,
    bbox_crs: str,
    crs: str | None,
    resolution: float | tuple[float, float] | None,
) -> Grid:
    """The grid a load returns: the lattice of ``crs`` (or the items'), snapped outwards over ``bbox`` (or the items).

    Raises:
        LoadError: the items do not fit one lattice as asked.
        SelectorError: the bbox is malformed, overlaps no item or covers no whole pixel.
    """
    out_crs, origin_x, origin_y, res_x, res_y = _lattice(grids, crs, resolution)
    corners = []
    for g in grids:
        if g.crs is None:
            raise LoadError("every item of a load needs a CRS")
        corners.append(box_in(g.bounds(), g.crs, out_crs, refuse_past_poles=False))
    # In a geographic CRS an item and the box meet wherever they do 360° round, and the items'
    # union is the shortest stretch of longitude holding them: one just east of 180° and one
    # just west of it make a box across it, not one round the Earth.
    turns = longitude_turns(out_crs)
    if bbox is not None:
        check_unwrapped(bbox, bbox_crs, out_crs)
        minx, miny, maxx, maxy = box_in(bbox, bbox_crs, out_crs)
        if not any(minx < c[2] + t and c[0] + t < maxx and miny < c[3] and c[1] < maxy for c in corners for t in turns):
            raise SelectorError(f"bbox {tuple(bbox)} ({bbox_crs}) overlaps no item: it selects nothing")
    elif len(turns) > 1:
        union = lonlat_union(lonlat_wrapped(c) for c in corners)
        assert union is not None
        minx, miny, maxx, maxy = union
        maxx += 360.0 if minx > maxx else 0.0
    else:
        minx, miny = min(c[0] for c in corners), min(c[1] for c in corners)
        maxx, maxy = max(c[2] for c in corners), max(c[3] for c in corners)
    # Snap outwards to whole pixels of the lattice (a tolerance absorbs rounding of reprojected bounds).
    c0 = math.floor((minx - origin_x) / res_x + _EPS)
    c1 = math.ceil((maxx - origin_x) / res_x - _EPS)
    r0 = math.floor((origin_y - maxy) / res_y + _EPS)
    r1 = math.ceil((origin_y - miny) / res_y - _EPS)
    if r1 <= r0 or c1 <= c0:
        raise SelectorError(f"bbox {bbox} covers no whole pixel of the output grid")
    transform = (res_x, 0.0, origin_x + c0 * res_x, 0.0, -res_y, origin_y - r0 * res_y)
    return Grid(out_crs, transform, r1 - r0, c1 - c0)


def valid_mask(data: NDArray[Any], nodata: Sequence[float | None]) -> NDArray[np.bool_]:
    """Where samples (``(..., B, h, w)``) hold data: not their band's nodata, not NaN."""
    valid = np.ones(data.shape, dtype=bool)
    if data.dtype.kind in "fc" or data.dtype.kind == "V":
        with np.errstate(invalid="ignore"):
            valid &= data == data
    for b, value in enumerate(nodata):
        if value is not None and not math.isnan(value):
            valid[..., b, :, :] &= data[..., b, :, :] != nodata_sample(value, data.dtype)
    return valid


def nodata_sample(value: float, dtype: np.dtype[Any]) -> Any:
    """``value`` to compare samples of ``dtype`` with: the integer sample itself where one equals it, else ``value``.

    NumPy compares int64 samples with a float as doubles: with nodata -2**63
    (int64's fill), the 512 samples -2**63 + 1 to -2**63 + 512 would compare
    equal to it.

    >>> int(nodata_sample(-9.223372036854776e18, np.dtype("int64"))) == -(2**63), nodata_sample(0.5, np.dtype("uint8"))
    (True, 0.5)
    """
    if dtype.kind in "iu" and float(value).is_integer() and np.iinfo(dtype).min <= int(value) <= np.iinfo(dtype).max:
        return dtype.type(int(value))
    return value


def _cast(values: NDArray[Any], dtype: np.dtype[Any]) -> NDArray[Any]:
    """``values`` as ``dtype``; warped (float) values going to integers are rounded to the nearest and clamped to its range.

    As GDAL's warper does for an integer output: a cubic kernel's overshoot
    past 255 is 255 in uint8, not 255 wrapped to a small number, and a
    bilinear 7.6 is 8, not 7.
    """
    if values.dtype.kind != "f" or dtype.kind not in "iu":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    # A type's minimum is 0 or a power of two, exact in float64; a 64-bit maximum is not, and rounds up past it.
    high = np.nextafter(float(info.max), 0.0) if int(float(info.max)) > info.max else float(info.max)
    # Halves go up, as GDAL rounds (floor(v + 0.5)), not to even.
    result: NDArray[Any] = np.clip(np.floor(values + 0.5), float(info.min), high).astype(dtype)
    return result


@dataclass(frozen=True)
class _Part:
    """What one member gives one block: its time steps and bands there, and the block being filled."""

    member: Member
    wanted: list[tuple[int, int]]
    """``(block time index, item time position)`` of each time step the member has in the block."""
    band_pos: list[int]
    nodata: list[float | None]
    rows: tuple[int, int]
    cols: tuple[int, int]
    result: NDArray[Any]
    filled: NDArray[np.bool_]

    def merge(self, data: NDArray[Any], nodata: Sequence[float | None], dst: tuple[slice, slice]) -> None:
        """Fill the block's unfilled samples from ``data`` where it is valid (first valid wins)."""
        ks = [k for k, _ in self.wanted]
        take = valid_mask(data, nodata) & ~self.filled[ks][:, :, dst[0], dst[1]]
        for i, k in enumerate(ks):
            view = self.result[k, :, dst[0], dst[1]]
            view[take[i]] = _cast(data[i][take[i]], self.result.dtype)
            self.filled[k, :, dst[0], dst[1]] |= take[i]


class Mosaic:
    """Computes one output block from the members, first valid wins."""

    def __init__(
        self,
        members: Sequence[Member],
        out: Grid,
        *,
        dtype: np.dtype[Any],
        fill: float,
        resampling: str,
        threads: int | None,
    ) -> None:
        self.members = members
        self.out = out
        self.dtype = dtype
        self.fill = fill
        self.resampling = resampling
        self.threads = threads

    def compute(self, block_info: dict[Any, Any] | None = None) -> NDArray[Any]:
        """The block :func:`dask.array.map_blocks` asks for, by its ``array-location``.

        A method, not a closure, so that a load's dask graph pickles (DataLoader
        workers started by spawn, dask's process schedulers).
        """
        assert block_info is not None
        (t0, t1), (b0, b1), rows, cols = block_info[None]["array-location"]
        return self.block(range(t0, t1), range(b0, b1), rows, cols)

    def block(self, times: range, bands: range, rows: tuple[int, int], cols: tuple[int, int]) -> NDArray[Any]:
        """The ``(time, band, y, x)`` block at those output positions."""
        shape = (len(times), len(bands), rows[1] - rows[0], cols[1] - cols[0])
        result = np.full(shape, self.fill, dtype=self.dtype)
        filled = np.zeros(shape, dtype=bool)
        for member in self.members:
            wanted = [(k, member.times[t]) for k, t in enumerate(times) if t in member.times]
            if not wanted:
                continue
            band_pos = [member.bands[b] for b in bands]
            nodata = [member.nodata[b] for b in bands]
            part = _Part(member, wanted, band_pos, nodata, rows, cols, result, filled)
            if member.offsets is None:
                self._warp(part)
            for offset in member.offsets or ():
                self._copy(part, offset)
            if filled.all():
                break
        return result

    def _copy(self, part: _Part, offset: tuple[int, int]) -> None:
        dr, dc = offset
        g = part.member.grid
        rows, cols = part.rows, part.cols
        r0, r1 = max(rows[0], dr), min(rows[1], dr + g.height)
        c0, c1 = max(cols[0], dc), min(cols[1], dc + g.width)
        if r0 >= r1 or c0 >= c1:
            return
        data = part.member.cube.read(
            bands=part.band_pos,
            times=[t for _, t in part.wanted],
            window=((r0 - dr, r1 - dr), (c0 - dc, c1 - dc)),
            threads=self.threads,
            labels=False,
        ).as_cube()
        part.merge(data, part.nodata, (slice(r0 - rows[0], r1 - rows[0]), slice(c0 - cols[0], c1 - cols[0])))

    def _warp(self, part: _Part) -> None:
        """Warp the member onto the block, :data:`WARP_TILE` by :data:`WARP_TILE` output pixels at a time.

        The tiles are fixed on the output's lattice, and each is warped from
        the same source window whatever block asks for it, so a pixel's value
        never depends on the chunking: GDAL's warper approximates the
        transformation along each row of what it warps (to 1/8 source pixel),
        and widens kernels by a reduction factor it measures on it too, so the
        same pixel warped as part of another rectangle can take another
        source pixel, or another weighted sum.
        """
        out = self.out
        base_r, base_c = lattice_index(out)
        tiles = [
            (tr * WARP_TILE - base_r, tc * WARP_TILE - base_c)
            for tr in range((base_r + part.rows[0]) // WARP_TILE, -(-(base_r + part.rows[1]) // WARP_TILE))
            for tc in range((base_c + part.cols[0]) // WARP_TILE, -(-(base_c + part.cols[1]) // WARP_TILE))
        ]
        # One read for each way round the Earth the block meets the item: a global item under a
        # block across 180° is read at both its ends, not across its whole width.
        by_turn: dict[float, dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]]] = {}
        for tile in tiles:
            for turn, window in self._source_windows(part.member.grid, tile):
                by_turn.setdefault(turn, {})[tile] = window
        for turn, windows in by_turn.items():
            self._warp_windows(part, windows, turn)

    def _warp_windows(self, part: _Part, windows: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]], turn: float) -> None:
        """Warp the tiles ``windows`` holds from one read of the source pixels they need, taken ``turn`` round."""
        r0, c0 = min(w[0][0] for w in windows.values()), min(w[1][0] for w in windows.values())
        r1, c1 = max(w[0][1] for w in windows.values()), max(w[1][1] for w in windows.values())
        data = part.member.cube.read(
            bands=part.band_pos, times=[t for _, t in part.wanted], window=((r0, r1), (c0, c1)), threads=self.threads, labels=False
        ).as_cube()
        # Work in float64 with NaN for every invalid source sample, so nodata never blends into data.
        source = data.astype(np.float64)
        source[~valid_mask(data, part.nodata)] = np.nan
        for (tile_r, tile_c), ((sr0, sr1), (sc0, sc1)) in windows.items():
            warped = self._warp_tile(
                part.member.grid, (tile_r, tile_c), source[:, :, sr0 - r0 : sr1 - r0, sc0 - c0 : sc1 - c0], (sr0, sc0), turn
            )
            # The tile's part inside the block.
            a0, a1 = max(tile_r, part.rows[0]), min(tile_r + WARP_TILE, part.rows[1])
            b0, b1 = max(tile_c, part.cols[0]), min(tile_c + WARP_TILE, part.cols[1])
            part.merge(
                warped[:, :, a0 - tile_r : a1 - tile_r, b0 - tile_c : b1 - tile_c],
                [None] * len(part.band_pos),
                (slice(a0 - part.rows[0], a1 - part.rows[0]), slice(b0 - part.cols[0], b1 - part.cols[0])),
            )

    def _tile_affine(self, tile: tuple[int, int]) -> Affine:
        from affine import Affine

        return self.out.affine @ Affine.translation(tile[1], tile[0])

    def _source_windows(self, g: Grid, tile: tuple[int, int]) -> list[tuple[float, tuple[tuple[int, int], tuple[int, int]]]]:
        """The source pixels a tile's warp reads, those under it and every one a kernel reaches from them, with the turn
        of longitude (:func:`~catalog.grid.longitude_turns`) at which they lie under it; one for each turn at which any do.

        GDAL widens a kernel by the reduction factor when the output is
        coarser than the source, so the margin grows with it. A function of
        the tile alone.
        """
        affine = self._tile_affine(tile)
        minx, maxy = affine @ (0, 0)
        maxx, miny = affine @ (WARP_TILE, WARP_TILE)
        try:
            box = box_in((minx, miny, maxx, maxy), self.out.crs, g.crs, refuse_past_poles=False)
        except SelectorError:
            return []
        inverse = ~g.area_affine
        found = []
        for turn in longitude_turns(g.crs):
            cols, rows = zip(*(inverse @ (x + turn, y) for x in (box[0], box[2]) for y in (box[1], box[3])), strict=True)
            reduction = max(1.0, (max(rows) - min(rows)) / WARP_TILE, (max(cols) - min(cols)) / WARP_TILE)
            margin = math.ceil(_KERNEL_RADIUS.get(self.resampling, 1) * reduction) + 2
            r0, r1 = max(0, math.floor(min(rows)) - margin), min(g.height, math.ceil(max(rows)) + margin)
            c0, c1 = max(0, math.floor(min(cols)) - margin), min(g.width, math.ceil(max(cols)) + margin)
            if r0 < r1 and c0 < c1:
                found.append((turn, ((r0, r1), (c0, c1))))
        return found

    def _warp_tile(
        self, g: Grid, tile: tuple[int, int], source: NDArray[np.float64], origin: tuple[int, int], turn: float
    ) -> NDArray[np.float64]:
        """``(time, band, WARP_TILE, WARP_TILE)`` warped from ``source``, the window of ``g`` whose first pixel is ``origin``,
        placed ``turn`` degrees of longitude back (where the tile meets it)."""
        from affine import Affine
        from rasterio.enums import Resampling
        from rasterio.warp import reproject

        warped = np.full((*source.shape[:2], WARP_TILE, WARP_TILE), np.nan)
        # Placed where the tile lies, rather than left to GDAL to find 360° round.
        src_transform = Affine.translation(-turn, 0.0) @ g.area_affine @ Affine.translation(origin[1], origin[0])
        # Band by band: GDAL weighs a kernel's invalid samples one way for a single band and another for several bands
        # whose NaN differ (a mask per band), so a band's values at the edge of its NaN changed with the bands loaded
        # beside it. It costs no more: 13 bands of a 512² tile across two UTM zones took 360 ms of CPU so, 373 ms in one call.
        with _WARP_LOCK:
            for i, b in np.ndindex(source.shape[:2]):
                reproject(
                    np.ascontiguousarray(source[i, b]),
                    warped[i, b],
                    src_transform=src_transform,
                    src_crs=g.crs,
                    src_nodata=np.nan,
                    dst_transform=self._tile_affine(tile),
                    dst_crs=self.out.crs,
                    dst_nodata=np.nan,
                    resampling=Resampling[self.resampling],
                    # Never split into smaller rectangles, which would approximate the transformation over them.
                    warp_mem_limit=_WARP_MEMORY_MB,
                )
        return warped
