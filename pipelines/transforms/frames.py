"""Splitting cubes into frames: one element per frame, read through a window.

Every frame of every planned cube becomes one element
keyed :class:`~pipelines.transforms.frames.FrameKey`. Its samples come from windowed
rasterio reads, so no worker ever holds a whole cube or a whole scene: a
tile frame (units 0 and 9) is one window of one band of one file; a cell
frame is that window for every band and time. Tile frames are read a
source run at a time (:func:`run_frames`): the tiles of every band of one
time in a square of about :data:`RUN_SPAN` pixels, each band read as one
window (the bands of a pixel-interleaved file as one) and cut into frames.

:class:`LazyCube` presents a plan as a ``(T, B, Y, X)`` array whose slices
are read on demand, and :func:`read_frame` hands it to
:func:`rumi_core.writer.frame_samples`, so the samples are laid out exactly as
rumi_core's own writer lays them out. Pixels no source covers (unioned
extents, warped edges) hold the nodata value; where several sources fill one
band at one time (``--duplicates mosaic``) the first valid pixel wins.

A frame's key is :class:`FrameKey`, ``(cube_id, frame_index)``; style guide,
*Beam transforms*: a key is an immutable, hashable value object with a
deterministic encoding and a registered coder. :class:`FrameKeyCoder` encodes
it as the UTF-8 cube id, its length, and the frame index, so equal keys give
equal bytes on every runner and worker.

>>> FrameKeyCoder().decode(FrameKeyCoder().encode(FrameKey("cube", 7)))
FrameKey(cube_id='cube', index=7)

Keys are generated in ``shards`` shards on the workers and reshuffled (style
guide, *Beam transforms*), so the frame stage spreads over every worker on
every runner. What crosses the reshuffle is a source run (:func:`run_frames`),
not a frame: a worker reads the run's frames together, and the local runner
holds far fewer elements than it would for single frames. Each element
crossing a reshuffle costs that runner about 2 KiB, whatever its size: with
81,920 frames (20 dates of 4 bands of 2048 x 2048 in 64-pixel tiles) the
keys took a threaded run from 259 to 438 MiB before its first frame was
read, frame keys shrunk from 168 to 92 bytes did not change that, and runs
of 4 frames took it to 302 MiB.
"""

from __future__ import annotations

import functools
import math
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
import numpy as np
from apache_beam.coders import Coder
from apache_beam.coders.typecoders import registry
from apache_beam.pvalue import AsDict, AsList, PCollection
from rasterio.enums import Interleaving
from rasterio.errors import RasterioError
from rasterio.windows import Window

from catalog.mosaic import nodata_sample
from pipelines.errors import PipelineError, SceneError
from pipelines.rasters import RasterCache, fit_block_cache, gdal_env, raster_error_text, retry_network
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from rumi_core.heap import keep_heap_slack, limit_arenas
from rumi_core.threads import default_threads
from rumi_core.writer import frame_samples

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from numpy.typing import NDArray

    from pipelines.planning.plan import CubePlan, Source
    from rumi_core.layout import Layout

__all__ = [
    "FRAME_WORKING_SET",
    "RUN_SPAN",
    "FrameFailure",
    "FrameKey",
    "FrameKeyCoder",
    "LazyCube",
    "RasterDoFn",
    "ReadFrames",
    "STAGE",
    "SourceRuns",
    "SplitFrames",
    "fill_value",
    "read_band_window",
    "read_frame",
    "run_count",
    "run_frames",
    "shard_source_runs",
]

_LENGTH: Final = struct.Struct("<I")
_INDEX: Final = struct.Struct("<Q")


@dataclass(frozen=True, order=True)
class FrameKey:
    """One frame of one cube."""

    cube_id: str
    """The cube's output name (:func:`pipelines.planning.plan.cube_name`)."""
    index: int
    """Frame index in the file (specification, *Frame index*)."""

    def __post_init__(self) -> None:
        if self.index < 0:
            raise PipelineError(f"a frame index is non-negative, got {self.index}")


class FrameKeyCoder(Coder):
    """Deterministic coder of :class:`FrameKey`: ``len(id) ‖ id ‖ index``, little-endian."""

    def encode(self, value: FrameKey) -> bytes:
        """Encode a key."""
        raw = value.cube_id.encode("utf-8")
        return _LENGTH.pack(len(raw)) + raw + _INDEX.pack(value.index)

    def decode(self, encoded: bytes) -> FrameKey:
        """Decode a key."""
        (n,) = _LENGTH.unpack_from(encoded)
        cube_id = encoded[_LENGTH.size : _LENGTH.size + n].decode("utf-8")
        (index,) = _INDEX.unpack_from(encoded, _LENGTH.size + n)
        return FrameKey(cube_id, index)

    def is_deterministic(self) -> bool:
        """Equal keys always encode to equal bytes."""
        return True

    def to_type_hint(self) -> type[FrameKey]:
        """The type this coder encodes."""
        return FrameKey


registry.register_coder(FrameKey, FrameKeyCoder)


@dataclass(frozen=True)
class FrameFailure:
    """A frame that could not be read: the input that failed and why."""

    href: str
    """The input file."""
    message: str
    """What went wrong."""


def fill_value(dtype: str, nodata: float | None) -> Any:
    """The value of pixels no source covers: nodata when the dtype holds it exactly, else 0."""
    if nodata is None:
        return np.zeros((), dtype)[()]
    if math.isnan(nodata):
        return np.array(nodata, dtype)[()] if np.dtype(dtype).kind in "fc" else np.zeros((), dtype)[()]
    with np.errstate(invalid="ignore", over="ignore"):
        cast = np.array(nodata).astype(dtype)
    return cast[()] if float(cast.real if np.iscomplexobj(cast) else cast) == nodata else np.zeros((), dtype)[()]


def _valid(data: NDArray[Any], nodata: float | None) -> NDArray[np.bool_]:
    if nodata is None:
        return np.ones(data.shape, bool)
    valid: NDArray[np.bool_] = ~np.isnan(data) if math.isnan(nodata) else np.asarray(data != nodata_sample(nodata, data.dtype))
    return valid


def _read_source(
    rasters: RasterCache,
    source: Source,
    rows: tuple[int, int],
    cols: tuple[int, int],
    *,
    nodata: float | None,
    out: NDArray[Any] | None = None,
) -> NDArray[Any]:
    """Read a source's pixels under cube rows ``rows`` and columns ``cols``; into ``out`` if given (in place when of its dtype).

    Pixels an internal mask marks invalid (:func:`~pipelines.rasters.has_internal_mask`)
    take the cube's ``nodata`` (:func:`fill_value`); reading the scene's
    metadata refused such a file that declares no nodata.
    """
    window = _source_window(source, rows, cols)
    try:
        dataset, masked = rasters.open(source.href, source.warp)
        # GDAL keeps every block of an open dataset until its cache is full, by default 5 % of the
        # machine's RAM: the process's cache is capped at what this read needs before it reads.
        fit_block_cache(dataset, source.band, window)
        # GDAL converts samples of another type with its own rounding and clamping, NumPy's cast
        # below does not: only samples already of the cube's type are read in place.
        into = out if out is not None and dataset.dtypes[source.band - 1] == out.dtype else None
        with gdal_env(source.href):
            data: NDArray[Any] = dataset.read(source.band, window=window, out=into)
            valid = dataset.read_masks(source.band, window=window) if masked else None
    except RasterioError as err:
        message = f"reading band {source.band} window {window} failed: {raster_error_text(err)}"
        raise SceneError(message, href=source.href, reason="read-failed") from err
    if out is not None and into is None:
        out[...] = data
        data = out
    if valid is not None:
        data[valid == 0] = fill_value(data.dtype.name, nodata)
    return data


def read_band_window(
    plan: CubePlan, rasters: RasterCache, t: int, b: int, rows: tuple[int, int], cols: tuple[int, int], *, out: NDArray[Any] | None = None
) -> NDArray[Any]:
    """Read rows ``[r0, r1)`` and columns ``[c0, c1)`` of band ``b`` at time ``t`` of a cube, into ``out`` if given.

    ``out`` is a C-contiguous array of the window's shape and the cube's
    dtype. A window one source covers whole is read straight into it: no
    fill, no copy (0.4-0.6 ms less CPU per 512 x 512 uint16 window, a third
    of the read, measured on the generated scenes of
    ``benchmarks/convert.py``).

    Raises:
        SceneError: a source file cannot be read (reason ``read-failed``).
    """
    shape = (rows[1] - rows[0], cols[1] - cols[0])
    if out is None:
        out = np.empty(shape, dtype=plan.dtype)
    sources = plan.sources[t][b]
    if len(sources) == 1 and sources[0].window(rows, cols) == (tuple(rows), tuple(cols)):
        _read_source(rasters, sources[0], rows, cols, nodata=plan.nodata, out=out)
        return out
    out.fill(fill_value(plan.dtype, plan.nodata))
    covered: NDArray[np.bool_] | None = None if len(sources) == 1 else np.zeros(out.shape, bool)
    for source in sources:
        part = source.window(rows, cols)
        if part is None:
            continue
        (r0, r1), (c0, c1) = part
        data = _read_source(rasters, source, (r0, r1), (c0, c1), nodata=plan.nodata)
        region = (slice(r0 - rows[0], r1 - rows[0]), slice(c0 - cols[0], c1 - cols[0]))
        if covered is None:
            out[region] = data
            continue
        valid = _valid(data, plan.nodata)
        take = valid & ~covered[region]
        out[region][take] = data[take]
        covered[region] |= valid
    return out


STACK_READ_BYTES: Final = 128 << 20
"""The most a window of every band of a pixel-interleaved file may take when its bands are read together.

A run's window of 240 bands of 512 x 512 uint16 is 126 MB; a larger stack
is read a band at a time, decoding its blocks once per band. Each worker
thread holds one: 120 bands of 2048 x 2048 uint8 converted at a peak of
722 MB, against 333 MB for the same pixels stored band by band."""


def read_stack_window(
    plan: CubePlan, rasters: RasterCache, t: int, b: int, rows: tuple[int, int], cols: tuple[int, int]
) -> dict[int, NDArray[Any]]:
    """Band ``b`` at time ``t`` over the window, by band; with it every other band of its file there, when the file is
    pixel-interleaved.

    Such a file (GDAL's default layout, Planet's, NAIP's) holds every band in
    each block, and GDAL decodes a whole block to read one band of it: read
    band by band, a window of 13 bands cost 13 decodes of its blocks (0.86 s
    against 0.08 s at once, 1024² of 256² blocks). The bands read together
    are those of the cube at time ``t`` whose one source is band of the same
    file, unwarped and unmasked, covering the whole window, in one read of at
    most :data:`STACK_READ_BYTES`; any other is read alone
    (:func:`read_band_window`).

    Raises:
        SceneError: a source file cannot be read (reason ``read-failed``).
    """
    if not _stacked(plan, t, b, rows, cols):
        return {b: read_band_window(plan, rasters, t, b, rows, cols)}
    source = plan.sources[t][b][0]
    window = _source_window(source, rows, cols)
    together = [b]
    try:
        dataset, masked = rasters.open(source.href, None)
        if not masked and dataset.interleaving == Interleaving.pixel and dataset.count > 1:  # only then look for its other bands
            found = [j for j, s in enumerate(plan.sources[t]) if _stacked(plan, t, j, rows, cols) and s[0].href == source.href]
            if len(found) * window.height * window.width * np.dtype(plan.dtype).itemsize <= STACK_READ_BYTES:
                together = found
        if together == [b]:
            return {b: read_band_window(plan, rasters, t, b, rows, cols)}
        fit_block_cache(dataset, source.band, window)
        with gdal_env(source.href):
            data: NDArray[Any] = dataset.read([plan.sources[t][j][0].band for j in together], window=window)
    except RasterioError as err:
        message = f"reading bands {[plan.sources[t][j][0].band for j in together]} window {window} failed: {raster_error_text(err)}"
        raise SceneError(message, href=source.href, reason="read-failed") from err
    # As _read_source: GDAL would convert another type with its own rounding, so NumPy casts it.
    return {j: np.ascontiguousarray(data[i], dtype=plan.dtype) for i, j in enumerate(together)}


def _source_window(source: Source, rows: tuple[int, int], cols: tuple[int, int]) -> Window:
    """The window of ``source``'s file under cube rows ``rows`` and columns ``cols``."""
    return Window(cols[0] - source.col, rows[0] - source.row, cols[1] - cols[0], rows[1] - rows[0])


def _stacked(plan: CubePlan, t: int, b: int, rows: tuple[int, int], cols: tuple[int, int]) -> bool:
    """Whether band ``b`` at time ``t`` has one unwarped source covering the whole window (so it may be read with others)."""
    sources = plan.sources[t][b]
    return len(sources) == 1 and sources[0].warp is None and sources[0].window(rows, cols) == (tuple(rows), tuple(cols))


class LazyCube:
    """A cube plan as a read-on-demand ``(T, B, Y, X)`` array.

    Supports the indexing :func:`rumi_core.writer.frame_samples` and
    :func:`rumi_core.compression.select_layout` use: an integer or ``:`` for time
    and band (or ``...`` for both), and a slice of rows and of columns.

    With a ``region`` (cube rows and columns), a band at a time is read over
    the whole region the first time a window inside it asks for that band
    and time, and windows inside it are cut from that read: the frames of a
    source run (:func:`run_frames`) cost one GDAL read, which decodes each
    source block once. Only the last band and time read is kept (the bands
    of a pixel-interleaved file together), so a region suits frames that
    each hold one band and time. Bands with a warped source
    are read window by window: GDAL's warper need not give the same pixels
    for a window as for a larger one around it, and verification reads
    frames one by one.
    """

    def __init__(self, plan: CubePlan, rasters: RasterCache, *, region: tuple[tuple[int, int], tuple[int, int]] | None = None) -> None:
        self.plan = plan
        self.rasters = rasters
        self.shape = plan.shape
        self.dtype = np.dtype(plan.dtype)
        self.region = region
        """Cube rows and columns read as one window per band and time, or None."""
        self._kept: tuple[int, dict[int, NDArray[Any]]] | None = None

    def _read(self, t: int, b: int, rows: tuple[int, int], cols: tuple[int, int], out: NDArray[Any]) -> None:
        region = self.region
        if (
            region is not None
            and region[0][0] <= rows[0]
            and rows[1] <= region[0][1]
            and region[1][0] <= cols[0]
            and cols[1] <= region[1][1]
        ):
            layer = self._layer(t, b, region)
            if layer is not None:
                (r0, _), (c0, _) = region
                out[...] = layer[rows[0] - r0 : rows[1] - r0, cols[0] - c0 : cols[1] - c0]
                return
        read_band_window(self.plan, self.rasters, t, b, rows, cols, out=out)

    def _layer(self, t: int, b: int, region: tuple[tuple[int, int], tuple[int, int]]) -> NDArray[Any] | None:
        """Band ``b`` at time ``t`` over ``region``, read once while it is the last asked for; None where a source is warped.

        The bands of one pixel-interleaved file (:func:`read_stack_window`)
        are read together, and kept together while their time is the last
        asked for.
        """
        kept = self._kept
        if kept is not None and kept[0] == t and b in kept[1]:
            return kept[1][b]
        if any(source.warp is not None for source in self.plan.sources[t][b]):
            return None
        self._kept = None  # before the read, so a failed one keeps nothing
        layers = read_stack_window(self.plan, self.rasters, t, b, *region)
        self._kept = (t, layers)
        return layers[b]

    def __getitem__(self, key: tuple[Any, ...]) -> NDArray[Any]:
        if len(key) == 3 and key[0] is Ellipsis:  # data[..., rows, cols]: every time and band
            key = (slice(None), slice(None), *key[1:])
        t, b, ys, xs = key
        rows = ys.indices(self.shape[2])[:2]
        cols = xs.indices(self.shape[3])[:2]
        times = range(self.shape[0]) if isinstance(t, slice) else [int(t)]
        bands = range(self.shape[1]) if isinstance(b, slice) else [int(b)]
        out = np.empty((len(times), len(bands), rows[1] - rows[0], cols[1] - cols[0]), self.dtype)
        for i, ti in enumerate(times):
            for j, bj in enumerate(bands):
                self._read(ti, bj, rows, cols, out[i, j])
        picked: NDArray[Any] = out[(0 if not isinstance(t, slice) else slice(None), 0 if not isinstance(b, slice) else slice(None))]
        return picked


def read_frame(plan: CubePlan, index: int, rasters: RasterCache, *, crop: tuple[slice, slice] | None = None) -> NDArray[Any]:
    """The samples of frame ``index`` of a cube, in the frame's decoded layout; only ``crop`` of its tile if given.

    Raises:
        SceneError: a source file cannot be read (reason ``read-failed``).
    """
    return frame_samples(LazyCube(plan, rasters), plan.layout, index, crop=crop)


STAGE: Final = "ReadFrames"
"""The stage named by the dead letters of frames that could not be read."""

RUN_SPAN: Final = 1024
"""Pixels a source run spans down and across, or one tile where tiles are larger (see :func:`run_frames`).

1024 is the block size of Sentinel-2's COGs and a multiple of the 256 and 512
of most other tiled GeoTIFFs, so a run's window covers whole source blocks
where the cube's grid starts on the source's.
"""


def _run_tiles(layout: Layout) -> tuple[int, int]:
    """Tile rows and columns a whole source run spans: one tile for cells."""
    if layout.unit.holds == "cell":
        return 1, 1
    return max(1, RUN_SPAN // layout.tile_length), max(1, RUN_SPAN // layout.tile_width)


def _run_grid(layout: Layout) -> tuple[int, int]:
    """Source runs down and across the cube."""
    down, across = _run_tiles(layout)
    return -(-layout.tiles_down // down), -(-layout.tiles_across // across)


def _run_times(layout: Layout) -> int:
    """Source runs at one square: one per time step for tiles, one for cells."""
    return layout.time_count if layout.unit.holds == "tile" else 1


def run_count(layout: Layout) -> int:
    """How many source runs (:func:`run_frames`) a layout has."""
    down, across = _run_grid(layout)
    return down * across * _run_times(layout)


def run_frames(layout: Layout, run: int) -> tuple[int, ...]:
    """The frame indices of source run ``run``: the tiles of a square of about :data:`RUN_SPAN` pixels, every band of one time.

    One worker reads a run's frames together, band after band, as one window
    over the run for each band (:class:`LazyCube`'s region) through one open
    dataset: GDAL decodes each source block under it once, where tile by
    tile it decoded a block once per tile row crossing it (64-pixel tiles on
    256-pixel blocks: 4 times), and a file is not reopened for nearly every
    frame (random order, 80 files and 16 open datasets: 1.2 ms of
    ``rasterio.open`` per frame). The bands of one time go together because
    a file that stores them pixel-interleaved (GDAL's default, and Planet's,
    NAIP's, most stacks') has every band in each block: read one band at a
    time, each block was decoded once per band, and GDAL keeps the other
    bands' share in its cache only until another run's reads evict it (13
    bands: 9.2 s, against 5.6 s for the same pixels stored band by band). A
    cell frame, which reads every band and time of its tile, is a run of its
    own. Runs are numbered by row of runs, then run along it, then time; a
    run's frames are band by band, each in tile order, row by row (the
    indices, specification *Frame index*, place a tile's frames by band and
    time).

    >>> from types import SimpleNamespace as NS
    >>> layout = NS(tiles_down=3, tiles_across=3, tile_length=512, tile_width=512, samples_per_pixel=2, time_count=1,
    ...             unit=NS(holds="tile"), frame_index=lambda row, col, band, time: (row * 3 + col) * 2 + band)
    >>> [run_frames(layout, r) for r in range(run_count(layout))]
    [(0, 2, 6, 8, 1, 3, 7, 9), (4, 10, 5, 11), (12, 14, 13, 15), (16, 17)]
    """
    spatial_run, time = divmod(run, _run_times(layout))
    run_row, run_col = divmod(spatial_run, _run_grid(layout)[1])
    down, across = _run_tiles(layout)
    rows = range(run_row * down, min((run_row + 1) * down, layout.tiles_down))
    cols = range(run_col * across, min((run_col + 1) * across, layout.tiles_across))
    if layout.unit.holds == "cell":
        return tuple(row * layout.tiles_across + col for row in rows for col in cols)
    return tuple(layout.frame_index(row, col, band, time) for band in range(layout.samples_per_pixel) for row in rows for col in cols)


def _run_region(layout: Layout, frames: Sequence[int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The cube rows and columns the tiles of ``frames`` span, as ``((y0, y1), (x0, x1))``."""
    extents = [layout.frame_extent(index) for index in frames]
    return (min(e.y0 for e in extents), max(e.y1 for e in extents)), (min(e.x0 for e in extents), max(e.x1 for e in extents))


def shard_source_runs(shard: int, plans: Sequence[CubePlan], shards: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The source runs of shard ``shard``, as ``(cube_id, frame indices)``: every ``shards``-th run of the plans in id order.

    >>> from types import SimpleNamespace as NS
    >>> layout = dict(tiles_down=1, tile_length=512, tile_width=512, samples_per_pixel=1, time_count=1, unit=NS(holds="tile"))
    >>> plans = [NS(cube_id=c, layout=NS(tiles_across=n, frame_index=lambda row, col, band, time: col, **layout))
    ...          for c, n in (("b", 6), ("a", 5))]
    >>> list(shard_source_runs(1, plans, 2))
    [('a', (2, 3)), ('b', (0, 1)), ('b', (4, 5))]
    """
    ordinal = 0
    for plan in sorted(plans, key=lambda p: p.cube_id):
        count = run_count(plan.layout)
        for run in range((shard - ordinal) % shards, count, shards):
            yield plan.cube_id, run_frames(plan.layout, run)
        ordinal += count


@dataclass
class SourceRuns(DataclassPTransform[PCollection["CubePlan"], PCollection[tuple[str, tuple[int, ...]]]]):
    """Every frame of the planned cubes as source runs, ``(cube_id, frame indices)`` (:func:`run_frames`), made in shards and reshuffled."""

    shards: int = 64
    """Number of run-generating shards (the frame stage's maximum parallelism on the Dask runner)."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[tuple[str, tuple[int, ...]]]:
        """Create shards, generate their source runs with the plans as a side input, reshuffle the runs."""
        runs: PCollection[tuple[str, tuple[int, ...]]] = (
            plans.pipeline
            | "Shards" >> beam.Create(list(range(self.shards)))
            | "Runs" >> beam.FlatMap(shard_source_runs, plans=AsList(plans), shards=self.shards)
            | "Spread" >> beam.Reshuffle()
        )
        return runs


class RasterDoFn(beam.DoFn):
    """A DoFn that reads source pixels: one :class:`~pipelines.rasters.RasterCache` per DoFn instance, closed at teardown."""

    def __init__(self) -> None:
        beam.DoFn.__init__(self)

    def setup(self) -> None:
        """Open the cache (Beam calls this once per DoFn instance on a worker), and cap the worker's malloc arenas.

        One arena per CPU the worker may use (:func:`rumi_core.heap.limit_arenas`):
        the heap slack each frame keeps (:data:`FRAME_WORKING_SET`) then stays
        resident once per CPU, not once per thread the runner has used.
        """
        limit_arenas(default_threads())
        self.rasters = RasterCache()

    def teardown(self) -> None:
        """Close every raster the cache holds."""
        self.rasters.close()


FRAME_WORKING_SET: Final = 8
"""A frame's source windows, samples, codec streams and output, in decoded frames: the C heap slack kept per worker.

Without it glibc hands every 512² window and codec stream back to the kernel
and the next frame faults them in again: 445 minor page faults and 7.5-8.3 ms
of CPU per 512² uint16 frame, against 11 faults and 5.9-6.1 ms with the
slack (see :func:`rumi_core.heap.keep_heap_slack`; 8 and 16 decoded frames
measured the same, 4 left 28 faults per frame).
"""


class _ReadFrameFn(RasterDoFn):
    def process(
        self, run: tuple[str, tuple[int, ...]], plans: Mapping[str, CubePlan]
    ) -> Iterator[tuple[FrameKey, NDArray[Any] | FrameFailure]]:
        cube_id, indices = run
        plan = plans[cube_id]
        layout = plan.layout
        # A run's frames share one time, and take the bands in turn: one window over the run per band.
        region = _run_region(layout, indices) if len(indices) > 1 else None
        region_bytes = 0 if region is None else math.prod(hi - lo for lo, hi in region) * np.dtype(plan.dtype).itemsize
        keep_heap_slack(FRAME_WORKING_SET * layout.max_decoded_frame_bytes + region_bytes)
        cube = LazyCube(plan, self.rasters, region=region)
        failure: FrameFailure | None = None
        for index in indices:
            key = FrameKey(cube_id, index)
            if failure is None:
                start = time.perf_counter()
                try:
                    samples = retry_network(functools.partial(frame_samples, cube, layout, index), evict=self.rasters.evict)
                except SceneError as err:
                    # The cube will not be written: the run's other frames are not read.
                    failure = FrameFailure(err.href, err.detail)
            if failure is not None:
                inc(ReadFrames, "dead_letter.read-failed")
                yield key, failure
                continue
            inc(ReadFrames, "frames")
            inc(ReadFrames, "bytes", samples.nbytes)
            inc(ReadFrames, "msec", round(1000 * (time.perf_counter() - start)))
            yield key, samples


@dataclass
class ReadFrames(DataclassPTransform[PCollection[tuple[str, tuple[int, ...]]], PCollection[tuple[FrameKey, Any]]]):
    """Read the frames of each source run (:func:`run_frames`) with windowed reads; a failed read becomes a :class:`FrameFailure`."""

    plans: PCollection[CubePlan]
    """The planned cubes, passed to the workers as a side input."""

    def expand(self, runs: PCollection[tuple[str, tuple[int, ...]]]) -> PCollection[tuple[FrameKey, Any]]:
        """One ParDo with the plans as a dict side input."""
        by_id = self.plans | "ById" >> beam.Map(lambda plan: (plan.cube_id, plan))
        frames: PCollection[tuple[FrameKey, Any]] = runs | "Read" >> beam.ParDo(_ReadFrameFn(), plans=AsDict(by_id))
        return frames


@dataclass
class SplitFrames(DataclassPTransform[PCollection["CubePlan"], PCollection[tuple[FrameKey, Any]]]):
    """Split planned cubes into ``(FrameKey, samples)`` elements."""

    shards: int = 64
    """See :class:`SourceRuns`."""
    lookup: PCollection[CubePlan] | None = None
    """Plans the readers look frames up in (a superset of the input); None for the input itself."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[tuple[FrameKey, Any]]:
        """Generate source runs, then read them."""
        lookup = plans if self.lookup is None else self.lookup
        frames: PCollection[tuple[FrameKey, Any]] = plans | "Runs" >> SourceRuns(self.shards) | "Read" >> ReadFrames(lookup)
        return frames
