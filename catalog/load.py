"""Many cubes as one lazy array: :func:`load` mosaics items in space and stacks them in time.

:func:`load` takes STAC items (or the hits of :func:`catalog.search`) and
returns one :class:`xarray.Dataset` whose ``data`` variable is
``(time, band, y, x)`` and backed by dask. Nothing but what opening needs
is fetched until values are computed (an item's JSON when given by href,
its header blob unless inline; a bare ``.rumi`` file's head and trailer); each
dask chunk then reads, through :meth:`catalog.Cube.read`, only the frames it
overlaps, so a computation sends one request per frame or run of frames.

The output grid:

* when ``crs`` is None, every item must lie on one pixel lattice (same CRS,
  same pixel size, origins a whole number of pixels apart): the output is
  that lattice over ``bbox``, and pixels are copied, never resampled. Chunks
  follow the first item's tiles, so each chunk is a union of whole frames.
* with ``crs`` (and ``resolution``, unless every item already has it), the
  output is the north-up lattice of that resolution, snapped to whole
  multiples of it, over ``bbox``. Items already on that lattice are copied;
  the others (a neighbouring UTM zone, say) are warped with
  :func:`rasterio.warp.reproject`, in fixed squares of the output lattice,
  each from the window of the item it covers, never from the whole item.

The grid and the blocks are computed by :mod:`catalog.mosaic`.

Overlaps follow the **first valid** rule: a pixel takes its value from the
first item, in the order given, that has a valid value there. A value is
invalid when it equals its band's ``nodata`` or is NaN. Pixels no item
covers hold the output ``nodata``: the first item's nodata for the first
selected band, else NaN for floating-point data; else they are 0, and the
output declares no ``nodata`` (as gdalwarp leaves one out), since 0 is then
a value of the items.

The time axis is the union of the selected time steps of every item, in
time order; items sharing a time step are mosaicked there. Intervals keep
their ends in a CF ``time_bounds`` coordinate. Band names, common names and
descriptions come from the first item; every item must have each selected
band.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import numpy as np

from catalog.cube import Cube
from catalog.errors import ItemError, LoadError, SelectorError
from catalog.mosaic import WARP_TILE, Member, Mosaic, lattice_index, lattice_offsets, output_grid
from catalog.search import SearchHit
from catalog.selectors import TimeRange, band_positions, time_positions
from catalog.storage import Storage
from rumi_core.times import INTERVAL

if TYPE_CHECKING:
    from collections.abc import Sequence

    import xarray as xr

    from catalog.grid import Grid
    from rumi_core.limits import Limits

__all__ = ["CLASS_RESAMPLING", "item_list", "load", "open_cube"]


def open_cube(target: Any, *, storage: Storage) -> Cube:
    """Open one item, item href, ``.rumi`` href or :class:`SearchHit` as a :class:`Cube`.

    A hit opens through its item when the search knew the item's href, else
    through its data file and header blob.

    Raises:
        ItemError: the target describes no rumi file.
        StorageError: the item, blob or file cannot be reached.
    """
    if isinstance(target, SearchHit):
        if target.item_href is not None:
            return Cube.open(target.item_href, storage=storage)
        if target.data_href is None:
            raise ItemError(f"search hit {target.id!r} has neither an item nor a data href")
        header = storage.read(target.header_href) if target.header_href is not None else None
        return Cube.open(target.data_href, storage=storage, header=header)
    return Cube.open(target, storage=storage)


def _time_keys(cube: Cube, positions: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, end)`` seconds of time steps (``end == start`` for instants)."""
    times = cube.times
    secs = times.seconds
    if times.time_type == INTERVAL:
        return [(secs[2 * p], secs[2 * p + 1]) for p in positions]
    return [(secs[p], secs[p]) for p in positions]


_DIMS: Final = ("time", "band", "y", "x")
"""The dimensions of a load, in order."""


def _is_integer(value: object) -> TypeGuard[int | np.integer[Any]]:
    """Whether ``value`` is a Python or NumPy integer, not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _chunk_steps(chunks: Mapping[str, int | str | None] | int | str | None) -> dict[str, int | None]:
    """``chunks`` as a step per dimension it names: a number of elements, or None for the whole axis.

    As dask and xarray read them: None or ``"auto"`` for the default, a
    number for every dimension (``-1``: one chunk), or by dimension a
    positive number, ``-1`` or None for one chunk along it, and ``"auto"``
    for the default (a dimension left out is the default too).

    Raises:
        LoadError: a dimension that is not one of ``_DIMS``, or a size
            that is none of the above.
    """
    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        return {}
    if _is_integer(chunks) and not (chunks > 0 or chunks == -1):
        raise LoadError(f"chunks is {chunks!r}: give a positive number of elements, or -1 for one chunk")
    given = dict.fromkeys(_DIMS, chunks) if _is_integer(chunks) else chunks
    if not isinstance(given, Mapping):
        raise LoadError(f"chunks is {chunks!r}: give a mapping of {', '.join(_DIMS)} to sizes, or one size for all")
    steps: dict[str, int | None] = {}
    for dim, size in given.items():
        if dim not in _DIMS:
            raise LoadError(f"chunks names {dim!r}, which is no dimension of a load; they are {', '.join(_DIMS)}")
        if isinstance(size, str) and size == "auto":
            continue
        if size is None or (_is_integer(size) and size == -1):
            steps[dim] = None
        elif _is_integer(size) and size > 0:
            steps[dim] = int(size)
        else:
            raise LoadError(f"chunks[{dim!r}] is {size!r}: give a positive number of elements, -1 or None for the whole axis, or 'auto'")
    return steps


CHUNK_BYTES: Final = 128 << 20
"""The most bytes a default chunk of a load holds: dask's own default (``array.chunk-size``).

A chunk held every date and band of a tile: 1.26 GB for 10 dates of 240
bands in 512² tiles, and reading one pixel of it took 4.4 GiB."""

MIN_CHUNK_SIDE: Final = 256
"""The fewest pixels a default chunk spans down and across: whole tiles of at least this many.

Tiles of 16 pixels made a task per tile: 102,400 of them for a 5120² image, whose whole read took 31.5 s."""


MAX_BLOCKS: Final = 1_000_000
"""The most dask blocks a load plans: about 1.5 KB and 30 µs of planning each, before any is read.

A million blocks of 512² pixels (a 512,000-pixel square) took 30 s and 1.7 GB to plan; a world box on a
10 m item ran out of memory. Dask's scheduler is slow on graphs past a million tasks anyway."""


def _whole_tiles(tile: int) -> int:
    """A default chunk's side along an axis of ``tile``-pixel tiles: the fewest whole tiles spanning :data:`MIN_CHUNK_SIDE`."""
    return tile * -(-MIN_CHUNK_SIDE // tile)


def _layer_steps(times: int, bands: int, layer_bytes: int) -> tuple[int | None, int | None]:
    """Default time and band steps of chunks whose one band at one time takes ``layer_bytes``: every time and band
    while they fit :data:`CHUNK_BYTES`, else one time step and as many bands as fit (at least one).

    >>> _layer_steps(20, 4, 512 * 512 * 2), _layer_steps(10, 240, 512 * 512 * 2), _layer_steps(3, 1000, 512 * 512 * 2)
    ((None, None), (1, None), (1, 256))
    """
    if times * bands * layer_bytes <= CHUNK_BYTES:
        return None, None
    fit = max(1, CHUNK_BYTES // layer_bytes)
    return 1, (None if bands <= fit else fit)


def _axis_chunks(start: int, length: int, step: int | None) -> tuple[int, ...]:
    """Chunk sizes along an axis of ``length`` whose boundaries fall on multiples of ``step`` (from ``start``); one
    chunk when ``step`` is None."""
    if step is None:
        return (length,)
    sizes: list[int] = []
    pos = start
    end = start + length
    while pos < end:
        nxt = min(end, (pos // step + 1) * step)
        sizes.append(nxt - pos)
        pos = nxt
    return tuple(sizes) or (0,)


def item_list(items: Iterable[Any] | Any) -> list[Any]:
    """``items`` as a list: one item (a dict, a :class:`pystac.Item`, an href, a search hit) or an iterable of them.

    A :class:`pystac.ItemCollection` (what pystac-client's ``item_collection()``
    returns) holds its items: it has a ``to_dict`` of its own, as an item has.

    Raises:
        ItemError: ``items`` is none of these (None, a number).
    """
    import pystac

    if isinstance(items, pystac.ItemCollection):
        return list(items)
    if isinstance(items, (str, os.PathLike, dict, SearchHit)) or hasattr(items, "to_dict"):
        return [items]
    if not isinstance(items, Iterable):
        raise ItemError(f"items are an item (a dict, a pystac.Item, an href, a search hit) or an iterable of them, not {items!r}")
    return list(items)


def _open_members(
    targets: Sequence[Any],
    cubes: list[Cube],
    *,
    bands: Sequence[int | str] | None,
    time_range: TimeRange | None,
    storage: Storage,
) -> list[tuple[list[int], list[tuple[int, int]], list[int]]]:
    """Open each target into ``cubes`` (items with no time step in range are closed and left out).

    Returns, per cube kept, its band positions, time keys and time positions.
    """
    selected: list[tuple[list[int], list[tuple[int, int]], list[int]]] = []
    for target in targets:
        cube = open_cube(target, storage=storage)
        if cube.grid is None:
            cube.close()
            raise LoadError(f"{cube.name} is not georeferenced; a load places items by their grid")
        positions = list(range(cube.layout.time_count))
        if time_range is not None:
            try:
                positions = time_positions(time_range, cube.times)
            except SelectorError:
                cube.close()
                continue
        cubes.append(cube)
        band_sel = list(bands) if bands is not None else list(range(len(cube.bands)))
        try:
            chosen = band_positions(band_sel, cube.bands)
        except SelectorError as err:
            # A catalogue holds cubes of other bands (a product's cloud mask, a Landsat QA layer): search picks only
            # the items that hold the bands when it is given them too.
            hint = f"; search with bands={list(bands)!r} to find the items that hold them" if bands is not None else ""
            raise SelectorError(f"{cube.name}: {err}{hint}") from err
        _check_same_bands(cubes[0], selected[0][0] if selected else chosen, cube, chosen)
        selected.append((chosen, _time_keys(cube, positions), positions))
    return selected


CLASS_RESAMPLING: Final = ("nearest", "mode", "min", "max", "med", "q1", "q3")
"""GDAL's methods that give each output pixel a value of its sources, so a class stays a class; the others blend values."""


def _check_resampling_keeps_classes(cube: Cube, positions: Sequence[int], resampling: str) -> None:
    """Refuse to blend a band of classes (``rumi:categorical``: a scene classification, a palette's indices).

    Bilinear resampling of Sentinel-2's SCL gave snow (11) as cloud (9) and
    dark area (2) as vegetation (4), classes no source pixel held, returned
    without a word.

    Raises:
        LoadError: a selected band holds classes and ``resampling`` blends values.
    """
    if resampling in CLASS_RESAMPLING:
        return
    classes = [cube.bands[p].name for p in positions if cube.bands[p].categorical]
    if classes:
        raise LoadError(
            f"band {classes[0]!r} of {cube.name} holds classes (rumi:categorical), which resampling {resampling!r} would blend "
            "into values of other classes; load it with resampling='nearest' or 'mode'"
        )


def _check_same_bands(first: Cube, first_positions: Sequence[int], cube: Cube, positions: Sequence[int]) -> None:
    """Refuse to mosaic different bands into one: the selected bands of every item must have the first item's names and radiometry.

    Positions (and bands=None, every position) select by place, and items of
    another product hold other bands there; a mosaic of a uint16 ``B02`` and
    a float32 ``NDVI`` would be neither.

    Raises:
        LoadError: the names, or the scale and offset of a band, differ.
    """
    names = [first.bands[b].name for b in first_positions]
    theirs = [cube.bands[b].name for b in positions]
    if [n.lower() for n in theirs] != [n.lower() for n in names]:
        raise LoadError(
            f"{cube.name} has bands {', '.join(theirs)} where {first.name} has {', '.join(names)}: "
            "one load mosaics one set of bands: select bands every item names (bands=[...], --bands), or load items of one product"
        )
    # One variable holds one scale and offset per band (its band coordinates and CF attributes): a stored value of
    # an item of other radiometry means another physical value (Sentinel-2 L2A DNs carry +1000 from processing
    # baseline 04.00 on, and converting such a series splits its cubes there, "_o1000"). Mosaicked or stacked
    # under the first item's, they would decode wrong without a word, so they are refused rather than rescaled,
    # which would change the stored values and their dtype.
    for name, mine, wanted in zip(theirs, positions, first_positions, strict=True):
        want, got = first.bands[wanted].scale_offset, cube.bands[mine].scale_offset
        if got != want:
            raise LoadError(
                f"{cube.name} band {name} has scale {got[0]:g} and offset {got[1]:g} where {first.name} has "
                f"{want[0]:g} and {want[1]:g}: one load holds one radiometry per band, and their stored values mean other "
                "physical values: load the items of each radiometry apart and scale each before combining them"
            )


def load(
    items: Iterable[Any] | Any,
    *,
    bands: str | Sequence[int | str] | None = None,
    bbox: Sequence[float] | None = None,
    bbox_crs: str = "EPSG:4326",
    datetime: str | TimeRange | None = None,
    crs: str | None = None,
    resolution: float | tuple[float, float] | None = None,
    chunks: Mapping[str, int | str | None] | int | str | None = None,
    resampling: str = "nearest",
    storage: Storage | None = None,
    threads: int | None = None,
    limits: Limits | None = None,
) -> xr.Dataset:
    """Load items as one lazy, dask-backed ``(time, band, y, x)`` dataset.

    Args:
        items: STAC items (dicts, :class:`pystac.Item`, item hrefs), ``.rumi``
            hrefs or the hits of :func:`catalog.search`. Their order sets the
            priority of overlaps (first valid wins).
        bands: Band names (name, common name or description) or positions,
            resolved in each item (one name alone as a text); None for every
            band of the first item.
        bbox: ``(minx, miny, maxx, maxy)`` in ``bbox_crs``; None for the union
            of the items. In a geographic CRS it may cross the antimeridian
            (``minx > maxx``); a geographic output across it has longitudes
            past 180, and the items' union is the short way round.
        bbox_crs: CRS of ``bbox``.
        datetime: ``"A/B"`` (open ends ``..``) or a :class:`TimeRange`; time
            steps outside it are left out, and items with none are skipped.
            The hits of :func:`catalog.search` are whole cubes, every date of
            them loaded unless the search's ``datetime`` is given here too.
        crs: Output CRS, an EPSG code ("EPSG:32633", or any text PROJ reads as exactly that CRS);
            None keeps the items' common lattice.
        resolution: Output pixel size in ``crs`` units, one number or ``(x, y)``.
        chunks: Chunk sizes by dimension (``time``, ``band``, ``y``, ``x``),
            or one size for all, as dask takes them (``-1``, or None by
            dimension: the whole axis; ``"auto"`` or None: the default). By default a chunk holds
            whole tiles of the first item, at least 256 pixels square (whole
            frames), or 512 pixels square when warping; and every time step
            and band of them, up to 128 MiB (dask's chunk size): past that, one
            time step and as many bands as fit.
        resampling: A :class:`rasterio.enums.Resampling` name GDAL's warper
            takes (:data:`rasterio.warp.SUPPORTED_RESAMPLING`), for warped items;
            for a band of classes (``rumi:categorical``) one of
            :data:`CLASS_RESAMPLING`, which never blend two classes into a third.
        storage: Storage access; a default :class:`Storage` when None.
        threads: Fetch-and-decode threads of each chunk's read.
        limits: For a caller that computes the whole output (``rumi read
            --catalog``): its size is checked against
            ``limits.max_output_bytes`` before any block is planned, as one
            read's output is. The output spans the whole bbox, wherever the
            items lie, and planning the blocks of a bbox of many degrees
            alone takes gigabytes: a load of more than :data:`MAX_BLOCKS`
            blocks is refused whatever ``limits`` says.

    Returns:
        A dataset with one variable, ``data``, and coordinates ``time``
        (``time_bounds`` for intervals), ``band`` (with ``common_name`` and
        ``description``), ``y``, ``x`` and ``spatial_ref``.

    Raises:
        LoadError: the items do not fit one output grid as asked,
            ``chunks`` or ``resampling`` is none of the above (or blends a
            band of classes), or the output is more than :data:`MAX_BLOCKS` blocks.
        SelectorError: a band, the bbox or the datetime selects nothing.
        ItemError: an item does not describe a rumi file.
        StorageError: an item or blob cannot be fetched.
        ResourceLimitError: the output is larger than ``limits`` allow.
    """
    from rasterio.warp import SUPPORTED_RESAMPLING

    steps = _chunk_steps(chunks)
    methods = [method.name for method in SUPPORTED_RESAMPLING]
    if resampling not in methods:
        raise LoadError(f"resampling {resampling!r} is none of GDAL's warper's: {', '.join(methods)}")
    storage = storage or Storage()
    targets = item_list(items)
    if not targets:
        raise LoadError("load needs at least one item, and none were given (an empty search result?)")
    time_range = TimeRange.given(datetime)
    cubes: list[Cube] = []
    try:
        selected = _open_members(targets, cubes, bands=[bands] if isinstance(bands, str) else bands, time_range=time_range, storage=storage)
        if not cubes:
            raise SelectorError(f"no item has a time step in {time_range.to_interval() if time_range else datetime}")
        _check_resampling_keeps_classes(cubes[0], selected[0][0], resampling)
        grids = [c.grid for c in cubes if c.grid is not None]
        out = output_grid(grids, bbox=bbox, bbox_crs=bbox_crs, crs=crs, resolution=resolution)
        if limits is not None:
            samples = len({k for _, tk, _ in selected for k in tk}) * len(selected[0][0]) * out.height * out.width
            itemsize = np.result_type(*(c.layout.encoding.dtype for c in cubes)).itemsize
            limits.check("max_output_bytes", samples * itemsize, f"the output of {out.height} x {out.width} pixels")
        token = (repr(bands), repr(time_range), resampling)
        ds = _lazy_dataset(cubes, selected, out, steps=steps, resampling=resampling, threads=threads, token=token)
    except BaseException:
        _close_all(cubes)
        raise
    ds.set_close(functools.partial(_close_all, cubes))
    return ds


def _lazy_dataset(
    cubes: Sequence[Cube],
    selected: Sequence[tuple[list[int], list[tuple[int, int]], list[int]]],
    out: Grid,
    *,
    steps: Mapping[str, int | None],
    resampling: str,
    threads: int | None,
    token: tuple[str, ...],
) -> xr.Dataset:
    """The dataset of a load's opened cubes on its output grid: one dask block per chunk, each a :class:`Mosaic` read."""
    import dask.array as da
    import xarray as xr
    from dask.base import tokenize

    from catalog.xarray_backend import band_coords, scale_attrs, spatial_ref, time_coords

    keys = sorted({k for _, tk, _ in selected for k in tk})
    key_index = {k: i for i, k in enumerate(keys)}
    members = []
    for cube, (band_pos, tkeys, tpos) in zip(cubes, selected, strict=True):
        grid = cube.grid
        assert grid is not None
        members.append(
            Member(
                cube=cube,
                grid=grid,
                bands=tuple(band_pos),
                times={key_index[k]: p for k, p in zip(tkeys, tpos, strict=True)},
                nodata=tuple(cube.bands[b].nodata_value for b in band_pos),
                offsets=lattice_offsets(grid, out),
            )
        )
    dtype = np.result_type(*(c.layout.encoding.dtype for c in cubes)) if len(cubes) > 1 else cubes[0].layout.encoding.dtype
    first_nodata = members[0].nodata[0]
    fill = first_nodata if first_nodata is not None else (math.nan if dtype.kind == "f" else 0)

    first = members[0]
    n_bands = len(first.bands)
    lay = first.cube.layout
    aligned = first.offsets is not None
    # Blocks fall on the first item's tiles, or for a warped load on the lattice's squares of
    # WARP_TILE (a default block is one of them), so that no square is warped for two blocks.
    step_y = steps.get("y", _whole_tiles(lay.tile_length) if aligned else WARP_TILE)
    step_x = steps.get("x", _whole_tiles(lay.tile_width) if aligned else WARP_TILE)
    start_y, start_x = (-first.offsets[0][0], -first.offsets[0][1]) if first.offsets else lattice_index(out)
    row_chunks = _axis_chunks(start_y % step_y if step_y else 0, out.height, step_y)
    col_chunks = _axis_chunks(start_x % step_x if step_x else 0, out.width, step_x)
    pixels = max(row_chunks) * max(col_chunks) * np.dtype(dtype).itemsize
    time_step, band_step = _layer_steps(len(keys), n_bands, pixels)
    time_chunks = _axis_chunks(0, len(keys), steps.get("time", time_step))
    band_chunks = _axis_chunks(0, n_bands, steps.get("band", band_step))
    blocks = len(row_chunks) * len(col_chunks) * len(time_chunks) * len(band_chunks)
    if blocks > MAX_BLOCKS:
        raise LoadError(
            f"the load's {out.height} x {out.width} pixels are {blocks:,} blocks of up to {max(row_chunks)} x {max(col_chunks)}, "
            f"above the {MAX_BLOCKS:,} a load plans (MAX_BLOCKS): narrow the bbox, load at a coarser resolution, or give larger chunks"
        )
    mosaic = Mosaic(members, out, dtype=np.dtype(dtype), fill=fill, resampling=resampling, threads=threads)

    array = da.map_blocks(
        mosaic.compute,
        chunks=(time_chunks, band_chunks, row_chunks, col_chunks),
        dtype=dtype,
        meta=np.empty((0, 0, 0, 0), dtype=dtype),
        name="rumi-load-"
        + tokenize(
            [c.name for c in cubes],
            out.crs,
            out.transform,
            out.height,
            out.width,
            token,
            (row_chunks, col_chunks, time_chunks, band_chunks),
        ),
    )
    coord_bands = [first.cube.bands[b] for b in first.bands]
    coords: dict[str, Any] = {
        **time_coords(keys, intervals=any(k[0] != k[1] for k in keys)),
        **band_coords(coord_bands),
        "y": ("y", out.y_coords(), {"axis": "Y"}),
        "x": ("x", out.x_coords(), {"axis": "X"}),
        "spatial_ref": spatial_ref(out.crs, out.transform),
    }
    # As open_dataset's variable: the output grid is of pixel areas (a PixelIsPoint item is placed by its corners).
    attrs: dict[str, Any] = {"grid_mapping": "spatial_ref", "AREA_OR_POINT": "Area", **scale_attrs(coord_bands)}
    if first_nodata is not None or dtype.kind == "f":
        # As gdalwarp without a nodata: a gap of items that have none is 0, and 0 is no nodata of theirs.
        # CF's _FillValue too, in the variable's dtype, so that xarray's decoding masks it as an opened file's.
        attrs["nodata"] = fill
        attrs["_FillValue"] = np.array(fill).astype(dtype)[()]
    variable = xr.Variable(("time", "band", "y", "x"), array, attrs)
    return xr.Dataset({"data": variable}, coords=coords, attrs={"crs": out.crs, "overlaps": "first valid, in item order"})


def _close_all(cubes: Sequence[Cube]) -> None:
    """Close the cubes of a load (a module-level function, so a loaded dataset pickles)."""
    for cube in cubes:
        cube.close()
