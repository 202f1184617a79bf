"""Training chips: fixed-size ``(T, B, size, size)`` windows of cubes, sampled and read frame by frame.

This module holds what :mod:`catalog.torch` needs without importing PyTorch:

* :class:`ChipSampler` turns a sample index into a chip position, with no
  state: random positions are a pure function of ``(seed, epoch, index)``,
  so sample ``i`` of an epoch is the same chip whichever process draws it,
  and grid positions step by ``size`` and end flush with each item's last
  row and column;
* :class:`ChipReader` reads chips. Per process it opens each item once (the
  header blob is fetched once, or not at all when inline), keeps one HTTP
  connection pool, and keeps decoded frames in a bounded LRU so that frames
  shared by neighbouring chips are fetched and decoded once. A chip's
  missing frames are fetched with one range request per run of adjacent
  frames (as rumi_core's :func:`~rumi_core.reader.plan_requests` plans it),
  concurrently, and no request is made for metadata;
* :class:`Chip` is one chip with its georeference: the area (pixel-corner)
  transform of its window, as rasterio's ``window_transform`` gives it, also
  for a PixelIsPoint item.

Random positions are uniform over every valid top-left pixel of every item
(an item is drawn with probability proportional to its number of positions).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, SupportsIndex

import numpy as np

from catalog.deadlines import budget
from catalog.errors import SelectorError
from catalog.load import item_list, open_cube
from catalog.selectors import TimeRange, band_positions, time_positions
from catalog.storage import Storage, href_kind
from rumi_core.arguments import whole_number
from rumi_core.errors import FrameDecodeError, RumiError
from rumi_core.reader import decode_checked, describe_frame, plan_requests
from rumi_core.selection import output_positions, place_frame, resolve_selection
from rumi_core.times import INTERVAL

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from affine import Affine
    from numpy.typing import NDArray

    from catalog.cube import Cube

__all__ = ["Chip", "ChipPosition", "ChipReader", "ChipSampler", "FrameCache", "SmallItemWarning"]

DEFAULT_CACHE_BYTES = 256 << 20
"""Decoded frames kept per process by default."""


class SmallItemWarning(UserWarning):
    """An item is smaller than the chip size on a side, so no chip is drawn from it."""


def _absolute(item: Any) -> Any:
    """A local path as an absolute one; any other item as it is."""
    return os.path.abspath(item) if isinstance(item, (str, os.PathLike)) and href_kind(os.fspath(item)) == "local" else item


def parse_int(name: str, value: object, *, least: int) -> int:
    """Return the argument ``name`` as an int of at least ``least``.

    Anything with ``__index__`` is an integer (a NumPy or PyTorch one too); a bool is not.

    Raises:
        SelectorError: ``value`` is not such an integer.

    >>> parse_int("size", 64.0, least=1)
    Traceback (most recent call last):
    ...
    catalog.errors.SelectorError: size is an integer of at least 1, got 64.0
    """
    try:
        return whole_number(name, value, least=least)
    except RumiError:
        raise SelectorError(f"{name} is an integer of at least {least}, got {value!r}") from None


@dataclass(frozen=True)
class ChipPosition:
    """Where a chip lies: an item and the top-left pixel of its window."""

    item: int
    """Position of the item in the dataset's item list."""
    row: int
    """First row of the window."""
    col: int
    """First column of the window."""


@dataclass(frozen=True)
class Chip:
    """One chip: samples and where they come from."""

    index: int
    """The sample index that drew it."""
    data: NDArray[Any]
    """``(T, B, size, size)`` in the file's sample dtype."""
    item: str
    """Where the item's file is."""
    window: tuple[tuple[int, int], tuple[int, int]]
    """``((row0, row1), (col0, col1))`` in the item's pixel grid."""
    crs: str | None
    """``"EPSG:n"`` of the item's grid."""
    transform: Affine | None
    """Area transform of the window: where its top-left pixel corner lies (half a pixel off a PixelIsPoint item's own transform)."""
    times: tuple[int, ...]
    """POSIX seconds of each time step (interval starts)."""
    nodata: tuple[float | None, ...]
    """Each band's no-data value, from the item (``raster:bands``); None where it has none."""
    scale: tuple[float, ...]
    """Each band's scale, from the item (1 where it states none): a physical value is ``data * scale + offset``."""
    offset: tuple[float, ...]
    """Each band's offset, from the item (0 where it states none). Items of one dataset may differ in it (a Sentinel-2
    series across processing baseline 04.00: its DNs carry +1000 from then on), so each chip carries its own."""


class ChipSampler:
    """Map sample indices to chip positions, statelessly.

    Items smaller than ``size`` on a side give no chips; :attr:`items`
    lists the ones sampled.

    Args:
        shapes: ``(height, width)`` of each item.
        size: Chip side, in pixels.
        sampler: ``"random"`` or ``"grid"``.
        length: Samples drawn (random, at least 1), or the most grid
            positions used (None for all).
        seed: Seed of the random positions (an integer >= 0).

    Raises:
        SelectorError: no item is at least ``size`` pixels on each side, the
            sampler is unknown, or ``size``, ``length`` or ``seed`` is not an
            integer in its range.

    >>> s = ChipSampler([(10, 12)], size=5, sampler="grid", length=None, seed=0)
    >>> len(s), s.position(0), s.position(5)
    (6, ChipPosition(item=0, row=0, col=0), ChipPosition(item=0, row=5, col=7))
    """

    def __init__(
        self,
        shapes: Sequence[tuple[int, int]],
        *,
        size: int,
        sampler: Literal["random", "grid"],
        length: int | None,
        seed: int,
    ) -> None:
        size = parse_int("size", size, least=1)
        if sampler not in ("random", "grid"):
            raise SelectorError(f"sampler is 'random' or 'grid', got {sampler!r}")
        count = None if length is None else parse_int("length", length, least=1)
        self.seed = parse_int("seed", seed, least=0)
        fits = [i for i, (h, w) in enumerate(shapes) if h >= size and w >= size]
        if not fits:
            raise SelectorError(f"no item is at least {size} x {size} pixels; the items are {list(shapes)}")
        self.size = size
        self.sampler = sampler
        self.items = fits
        """Positions of the items chips are drawn from: those at least ``size`` on each side."""
        if sampler == "random":
            if count is None:
                raise SelectorError("a random sampler needs length >= 1, got None")
            counts = np.array([(shapes[i][0] - size + 1) * (shapes[i][1] - size + 1) for i in fits], dtype=np.float64)
            self._weights = counts / counts.sum()
            self._shapes = [shapes[i] for i in fits]
            self._length = count
        else:
            self._grids = [(self._starts(shapes[i][0]), self._starts(shapes[i][1])) for i in fits]
            self._cumulative = np.cumsum([len(r) * len(c) for r, c in self._grids])
            total = int(self._cumulative[-1])
            self._length = total if count is None else min(count, total)

    def _starts(self, extent: int) -> list[int]:
        starts = list(range(0, extent - self.size + 1, self.size))
        if starts[-1] + self.size < extent:
            starts.append(extent - self.size)
        return starts

    def __len__(self) -> int:
        return self._length

    def position(self, index: int, *, epoch: int = 0) -> ChipPosition:
        """The chip of sample ``index`` in epoch ``epoch`` (>= 0; grid positions do not depend on it).

        A random position is drawn from a generator seeded by
        ``SeedSequence((seed, index))``, with spawn key ``(epoch,)`` after epoch 0.

        Raises:
            IndexError: ``index`` is outside ``0..len - 1``.
        """
        if not 0 <= index < self._length:
            raise IndexError(f"sample {index} is outside 0..{self._length - 1}")
        if self.sampler == "random":
            # Epoch 0 keeps the generator of (seed, index), so its chips are those drawn before epochs existed.
            rng = np.random.default_rng(np.random.SeedSequence((self.seed, index), spawn_key=(epoch,) if epoch else ()))
            k = int(rng.choice(len(self.items), p=self._weights))
            h, w = self._shapes[k]
            return ChipPosition(self.items[k], int(rng.integers(0, h - self.size + 1)), int(rng.integers(0, w - self.size + 1)))
        k = int(np.searchsorted(self._cumulative, index, side="right"))
        before = int(self._cumulative[k - 1]) if k else 0
        rows, cols = self._grids[k]
        r, c = divmod(index - before, len(cols))
        return ChipPosition(self.items[k], rows[r], cols[c])


class FrameCache:
    """A bounded LRU of decoded frames, keyed by ``(item, frame_index)``.

    >>> cache = FrameCache(max_bytes=16)
    >>> cache.put((0, 1), np.zeros(2, "int64")); cache.put((0, 2), np.zeros(1, "int64"))
    >>> cache.get((0, 1)) is not None, cache.nbytes
    (False, 8)
    """

    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._frames: OrderedDict[tuple[int, int], NDArray[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int]) -> NDArray[Any] | None:
        """The frame, marked as most recently used, or None."""
        with self._lock:
            frame = self._frames.get(key)
            if frame is not None:
                self._frames.move_to_end(key)
            return frame

    def put(self, key: tuple[int, int], frame: NDArray[Any]) -> None:
        """Keep a frame, dropping the least recently used ones beyond ``max_bytes``."""
        with self._lock:
            old = self._frames.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._frames[key] = frame
            self.nbytes += frame.nbytes
            while self.nbytes > self.max_bytes and self._frames:
                _, dropped = self._frames.popitem(last=False)
                self.nbytes -= dropped.nbytes


def _frame_name(cube: Cube, index: int) -> str:
    """The item and frame a chip's failed frame is named by."""
    return f"{cube.name}: {describe_frame(cube.layout, index)}"


def _new_storage(headers: Mapping[str, str] | None, timeout: float | None) -> Storage:
    import urllib3
    from urllib3.util.retry import Retry

    # A pool of this process's own: connections inherited through fork() are shared
    # with the parent and must never be used by a DataLoader worker.
    retry = Retry(total=3, backoff_factor=0.1, status_forcelist=(500, 502, 503, 504), allowed_methods=frozenset({"GET", "HEAD"}))
    pool = urllib3.PoolManager(maxsize=16, retries=retry, timeout=urllib3.Timeout(connect=10.0, read=60.0))
    return Storage(http_pool=pool, http_headers=headers, timeout=timeout)


class ChipReader:
    """Read chips of a fixed list of items, one process at a time.

    Everything that holds sockets or threads is created on first use in the
    process that uses it, so a reader may be built in a parent process and
    used, after ``fork`` or pickling, in DataLoader workers.

    Args:
        items: Items, item hrefs, ``.rumi`` hrefs or search hits.
        bands: Band names or positions, or one name or position, resolved
            in each item; None for all.
        times: Time positions, an ``"A/B"`` range or a :class:`TimeRange`,
            resolved in each item; None for all.
        cache_bytes: Decoded frames kept per process (bytes, >= 0).
        fetch_threads: Concurrent range requests per process (>= 1).
        http_headers: Headers sent with every HTTP request.
        timeout: Seconds one remote read (an item, a blob, a chip's frames)
            may take, every request and retry included; the default of
            :mod:`catalog.deadlines` (120) when None.

    Raises:
        SelectorError: ``cache_bytes`` or ``fetch_threads`` is not an
            integer in its range.
        InvalidInputError: ``timeout`` is no number of seconds above 0.
    """

    def __init__(
        self,
        items: Sequence[Any],
        *,
        bands: Sequence[int | str] | int | str | None,
        times: Sequence[int] | str | TimeRange | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        fetch_threads: int = 8,
        http_headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        # A local path as an absolute one: each worker opens the items again, maybe after the caller (a notebook's
        # %cd, a run folder of Hydra's) has changed folder, where a relative one named another file or none.
        self.items = [_absolute(i) for i in item_list(items)]
        if not self.items:
            raise SelectorError("no items were given (an empty search result?)")
        if isinstance(bands, (str, SupportsIndex)):
            bands = [bands]
        self.bands = list(bands) if bands is not None else None
        if self.bands == []:  # refused here, not by the first read in a worker, naming no argument
            raise SelectorError("bands is empty: select at least one band (None for all)")
        self.times = TimeRange.parse(times) if isinstance(times, str) else times
        if not isinstance(self.times, TimeRange) and self.times is not None and len(self.times) == 0:
            raise SelectorError("times is empty: select at least one time step (None for all)")
        self.cache_bytes = parse_int("cache_bytes", cache_bytes, least=0)
        self.fetch_threads = parse_int("fetch_threads", fetch_threads, least=1)
        self.http_headers = dict(http_headers or {})
        if timeout is not None:
            budget(timeout)  # refused here, not in the first worker's first read
        self.timeout = timeout
        self._pid: int | None = None
        self._state: _ProcessState | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pid"] = None
        state["_state"] = None
        return state

    @property
    def state(self) -> _ProcessState:
        """This process's cubes, cache, pool and threads (created on first use)."""
        if self._state is None or self._pid != os.getpid():
            self._state = _ProcessState(self)
            self._pid = os.getpid()
        return self._state

    def shapes(self) -> list[tuple[int, int]]:
        """``(height, width)`` of each item."""
        return [(c.layout.image_length, c.layout.image_width) for c in self.state.cubes]

    def read(self, index: int, position: ChipPosition, size: int) -> Chip:
        """Read one chip.

        Raises:
            SelectorError: the window lies outside the item.
            StorageError: a request failed.
            FrameDecodeError: a frame is corrupt.
        """
        return self.state.read(index, position, size)


class _ProcessState:
    """What one process keeps to read chips."""

    def __init__(self, reader: ChipReader) -> None:
        self.storage = _new_storage(reader.http_headers, reader.timeout)
        self.cubes: list[Cube] = [open_cube(t, storage=self.storage) for t in reader.items]
        self.cache = FrameCache(max_bytes=reader.cache_bytes)
        # Frame offsets, reconstructed once per item rather than per frame.
        self.offsets = [c.header.offsets for c in self.cubes]
        self.pool = ThreadPoolExecutor(max_workers=reader.fetch_threads, thread_name_prefix="rumi-chips")
        self.bands: list[list[int] | None] = []
        self.times: list[list[int] | None] = []
        for cube in self.cubes:
            try:
                self.bands.append(band_positions(reader.bands, cube.bands) if reader.bands is not None else None)
                self.times.append(time_positions(reader.times, cube.times) if reader.times is not None else None)
            except SelectorError as err:
                raise SelectorError(f"{cube.name}: {err}") from err
        self._check_alike()

    def _check_alike(self) -> None:
        """Refuse items whose chips differ in dtype or in their numbers of time steps and bands.

        A batch stacks chips: PyTorch would promote uint16 and float32 chips
        to float32 in one process and refuse them in workers, and chips of
        other shapes fail only when they first meet in a batch, late in an
        epoch. Named here, before any worker starts.

        Raises:
            SelectorError: names an item of each kind.
        """
        kinds: dict[tuple[str, int, int], str] = {}
        for k, cube in enumerate(self.cubes):
            lay = cube.layout
            times = self.times[k]
            bands = self.bands[k]
            kind = (
                lay.encoding.dtype.name,
                lay.time_count if times is None else len(times),
                lay.samples_per_pixel if bands is None else len(bands),
            )
            kinds.setdefault(kind, cube.name)
        if len(kinds) > 1:
            shown = "; ".join(f"{name}: {dtype} with {t} time steps of {b} bands" for (dtype, t, b), name in kinds.items())
            raise SelectorError(
                f"the items give chips of {len(kinds)} kinds ({shown}), and a batch stacks chips of one dtype and shape: "
                "give items of one kind, and select bands and times that each of them has as many of"
            )

    def _fetch(self, k: int, offset: int, length: int, frames: Sequence[int]) -> list[tuple[int, NDArray[Any]]]:
        cube = self.cubes[k]
        blob = cube.header
        lay = blob.layout
        (data,) = cube.source.read_ranges([(offset, length)])
        view = memoryview(data)
        offsets = self.offsets[k]
        out = []
        for f in frames:
            start = int(offsets[f]) - offset
            n = int(blob.frame_byte_counts[f])
            try:
                raw = decode_checked(
                    view[start : start + n],
                    lay,
                    f,
                    decoded_frame_bytes=lay.decoded_frame_bytes(f),
                    where=functools.partial(_frame_name, cube, f),
                    offset=int(offsets[f]),
                    by_blob=True,
                )
            except FrameDecodeError:
                cube.check_unchanged()  # a file rewritten since its item was read: say so, naming the item
                raise
            frame = raw.view(lay.encoding.dtype).reshape(lay.frame_shape(f))
            self.cache.put((k, f), frame)
            out.append((f, frame))
        return out

    def read(self, index: int, position: ChipPosition, size: int) -> Chip:
        k = position.item
        cube = self.cubes[k]
        lay = cube.layout
        blob = cube.header
        rows = (position.row, position.row + size)
        cols = (position.col, position.col + size)
        sel = resolve_selection(lay, bands=self.bands[k], times=self.times[k], window=(rows, cols))
        frames: dict[int, NDArray[Any]] = {}
        jobs = []
        for run in plan_requests(blob, sel):
            missing = []
            for f in run.frames:
                cached = self.cache.get((k, f))
                if cached is None:
                    missing.append(f)
                else:
                    frames[f] = cached
            if missing:
                # The frames of a run are adjacent: fetch from the first missing one to the last.
                start = int(self.offsets[k][missing[0]])
                end = int(self.offsets[k][missing[-1] + 1])
                between = [f for f in run.frames if missing[0] <= f <= missing[-1]]
                jobs.append(self.pool.submit(self._fetch, k, start, end - start, between))
        for job in jobs:
            frames.update(job.result())
        out = np.empty((len(sel.times), len(sel.bands), size, size), dtype=lay.encoding.dtype)
        band_pos, time_pos, subset = output_positions(lay, sel)
        for f, frame in frames.items():
            place_frame(out, frame, lay.frame_extent(f), lay, sel, band_pos, time_pos, subset)
        grid = cube.grid
        secs = cube.times.seconds
        step = 2 if cube.times.time_type == INTERVAL else 1
        return Chip(
            index=index,
            data=out,
            item=cube.name,
            window=(rows, cols),
            crs=grid.crs if grid is not None else None,
            transform=grid.window_area_transform((rows, cols)) if grid is not None else None,
            times=tuple(int(secs[t * step]) for t in sel.times),
            nodata=tuple(cube.bands[b].nodata_value for b in sel.bands),
            scale=tuple(cube.bands[b].scale_offset[0] for b in sel.bands),
            offset=tuple(cube.bands[b].scale_offset[1] for b in sel.bands),
        )
