"""The stateless reader: a header blob plus byte ranges give any window.

Specification sections *Selective read model*, *Offset reconstruction* and
*Resource limits*. Given the blob, the reader

1. resolves the selection (band and time positions, a pixel window);
2. computes the frames that intersect it (:meth:`Layout.frames_for`);
3. reconstructs their offsets from the packed byte counts;
4. fetches exactly those ranges, merging runs of adjacent frames into one
   request, and never reads the IFD or the trailer;
5. decodes each frame as an independent OpenZL frame on a thread pool
   (OpenZL releases the GIL; each thread keeps one decompression context) and
   places the requested samples in the output.

Every size is checked before allocation: the output against
``Limits.max_output_bytes``, each frame against its own
``decoded_frame_bytes``. A frame that decodes to any other size is an error.
"""

from __future__ import annotations

import operator
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_core.codecs import decode_frame
from rumi_core.errors import InvalidFileError, ResourceLimitError, SelectionError
from rumi_core.header import HeaderBlob, check_against_head, header_from_head
from rumi_core.sources import ByteSource, open_source

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from rumi_core.layout import Layout

__all__ = ["Limits", "Selection", "read", "resolve_header", "resolve_selection"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one read, checked before any allocation or decode."""

    max_output_bytes: int = 8 << 30
    """Largest output array, in bytes."""
    max_frames: int = 1 << 26
    """Largest ``N`` accepted from a header blob."""
    max_merged_request: int = 32 << 20
    """Adjacent frames are merged into one request up to this many bytes."""


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Selection:
    """A resolved selection: positions along each axis and a pixel window."""

    bands: tuple[int, ...]
    times: tuple[int, ...]
    rows: tuple[int, int]
    cols: tuple[int, int]


def _positions(value: Sequence[int] | None, total: int, name: str) -> tuple[int, ...]:
    if value is None:
        return tuple(range(total))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [int(value)]
    out = []
    for v in value:
        try:
            i = operator.index(v)
        except TypeError as err:
            raise SelectionError(f"{name} positions are integers, got {v!r}") from err
        if not 0 <= i < total:
            raise SelectionError(f"{name} position {i} is outside 0..{total - 1}")
        out.append(i)
    if not out:
        raise SelectionError(f"select at least one {name} position")
    return tuple(out)


def _window(window: Any, layout: Layout) -> tuple[tuple[int, int], tuple[int, int]]:
    height, width = layout.image_length, layout.image_width
    if window is None:
        return (0, height), (0, width)
    if hasattr(window, "toranges"):  # rasterio.windows.Window
        window = window.toranges()
    try:
        (r0, r1), (c0, c1) = window
        r0, r1, c0, c1 = (operator.index(v) for v in (r0, r1, c0, c1))
    except (TypeError, ValueError) as err:
        raise SelectionError(f"window is ((row_start, row_stop), (col_start, col_stop)) or a rasterio Window, got {window!r}") from err
    if not (0 <= r0 < r1 <= height and 0 <= c0 < c1 <= width):
        raise SelectionError(f"window rows {r0}:{r1}, cols {c0}:{c1} is empty or outside the {height} x {width} image")
    return (r0, r1), (c0, c1)


def resolve_selection(
    layout: Layout, *, bands: Sequence[int] | None = None, times: Sequence[int] | None = None, window: Any = None
) -> Selection:
    """Check and normalise a selection against a layout.

    Raises:
        SelectionError: a position or the window lies outside the raster.
    """
    rows, cols = _window(window, layout)
    return Selection(_positions(bands, layout.samples_per_pixel, "band"), _positions(times, layout.time_count, "time"), rows, cols)


def resolve_header(
    source: ByteSource, header: HeaderBlob | bytes | bytearray | memoryview | None, *, limits: Limits = DEFAULT_LIMITS
) -> HeaderBlob:
    """Return the blob to read with, building it from the file when none is given.

    Raises:
        InvalidHeaderError: the given blob is malformed.
        InvalidFileError: no blob was given and the file is not compliant.
    """
    if isinstance(header, HeaderBlob):
        return header
    if header is not None:
        return HeaderBlob.from_bytes(header, max_frames=limits.max_frames)
    from rumi_core.structure import read_structure

    head = read_structure(source).head
    blob = header_from_head(head)
    check_against_head(blob, head)
    return blob


def _runs(frames: Sequence[int], offsets: NDArray[np.uint64], limit: int) -> list[tuple[int, int, list[int]]]:
    """Group frames into requests of adjacent byte ranges: ``(offset, length, frames)``."""
    runs: list[tuple[int, int, list[int]]] = []
    for f in frames:
        start, end = int(offsets[f]), int(offsets[f + 1])
        if runs:
            o, n, members = runs[-1]
            if o + n == start and n + (end - start) <= limit:
                runs[-1] = (o, n + end - start, [*members, f])
                continue
        runs.append((start, end - start, [f]))
    return runs


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    # One long-lived pool per size keeps each thread's decompression context
    # alive across reads.
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rumi-read")
        return pool


def default_threads() -> int:
    """Threads used when a read does not say: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _place(
    out: NDArray[Any],
    frame: NDArray[Any],
    index: int,
    layout: Layout,
    sel: Selection,
    band_pos: dict[int, list[int]],
    time_pos: dict[int, list[int]],
) -> None:
    """Copy the selected samples of one decoded frame into ``out`` (T', B', h, w)."""
    row, col, band, time = layout.frame_location(index)
    y0, y1, x0, x1 = layout.tile_bounds(row, col)
    (r0, r1), (c0, c1) = sel.rows, sel.cols
    ys, ye = max(y0, r0), min(y1, r1)
    xs, xe = max(x0, c0), min(x1, c1)
    src_y, src_x = slice(ys - y0, ye - y0), slice(xs - x0, xe - x0)
    dst_y, dst_x = slice(ys - r0, ye - r0), slice(xs - c0, xe - c0)
    if band is not None and time is not None:
        tile = frame[src_y, src_x]
        for ti in time_pos.get(time, ()):
            for bi in band_pos.get(band, ()):
                out[ti, bi, dst_y, dst_x] = tile
        return
    axes = layout.frame_axes
    cell = frame
    for a in ("t", "b"):
        if a not in axes:
            cell = cell[np.newaxis]
            axes = (a, *axes)
    cell = cell.transpose([axes.index(a) for a in ("t", "b", "h", "w")])
    if sel.times != tuple(range(layout.time_count)) or sel.bands != tuple(range(layout.samples_per_pixel)):
        cell = cell[np.ix_(sel.times, sel.bands)]
    out[:, :, dst_y, dst_x] = cell[:, :, src_y, src_x]


def read_selection(
    source: ByteSource,
    blob: HeaderBlob,
    sel: Selection,
    *,
    threads: int | None = None,
    verify: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> NDArray[Any]:
    """Read a resolved selection; the engine behind :func:`read`."""
    layout = blob.layout
    dtype = layout.encoding.dtype
    (r0, r1), (c0, c1) = sel.rows, sel.cols
    shape = (len(sel.times), len(sel.bands), r1 - r0, c1 - c0)
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if nbytes > limits.max_output_bytes:
        raise ResourceLimitError(f"the read needs {nbytes} bytes, above the limit of {limits.max_output_bytes}", field="max_output_bytes")
    frames = layout.frames_for(bands=sel.bands, times=sel.times, rows=sel.rows, cols=sel.cols)
    offsets = blob.offsets
    runs = _runs(frames, offsets, limits.max_merged_request)
    out = np.empty(shape, dtype=dtype)
    band_pos: dict[int, list[int]] = {}
    for i, b in enumerate(sel.bands):
        band_pos.setdefault(b, []).append(i)
    time_pos: dict[int, list[int]] = {}
    for i, t in enumerate(sel.times):
        time_pos.setdefault(t, []).append(i)

    def fetch_and_decode(run: tuple[int, int, list[int]]) -> None:
        start, length, members = run
        (data,) = source.read_ranges([(start, length)])
        if len(data) != length:
            raise InvalidFileError(
                f"{source.name} ends at byte {start + len(data)}, but frame {members[-1]} ends at {start + length}",
                field="frame data",
                rule="Every frame is present",
                offset=start + len(data),
            )
        view = memoryview(data)
        for f in members:
            o = int(offsets[f]) - start
            n = int(blob.byte_counts[f])
            raw = decode_frame(view[o : o + n], decoded_bytes=layout.decoded_frame_bytes(f), verify=verify)
            frame = raw.view(dtype).reshape(layout.frame_shape(f))
            _place(out, frame, f, layout, sel, band_pos, time_pos)

    workers = threads or default_threads()
    if workers == 1 or len(runs) == 1:
        for run in runs:
            fetch_and_decode(run)
    else:
        for future in [_pool(workers).submit(fetch_and_decode, run) for run in runs]:
            future.result()
    return out if layout.is_cube else out[0]


def read(
    source: ByteSource | str | os.PathLike[str] | bytes | bytearray | memoryview,
    header: HeaderBlob | bytes | bytearray | memoryview | None = None,
    *,
    bands: Sequence[int] | None = None,
    times: Sequence[int] | None = None,
    window: Any = None,
    threads: int | None = None,
    verify: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> NDArray[Any]:
    """Read bands, times and a window of a rumi file through its header blob.

    Args:
        source: A local path, the file's bytes, or any :class:`ByteSource`.
        header: The file's header blob. When None, it is built from the file
            (which reads the head and trailer once).
        bands: Band positions, in the order wanted; None for all.
        times: Time positions; None for all.
        window: ``((row_start, row_stop), (col_start, col_stop))`` or a
            :class:`rasterio.windows.Window`; None for the whole image.
        threads: Decoding threads; None uses every CPU available.
        verify: Check OpenZL checksums of every frame (the default).
        limits: Resource limits checked before allocating.

    Returns:
        ``(T', B', h, w)`` for a Cube and ``(B', h, w)`` for an Image, in the
        file's sample dtype.

    Raises:
        SelectionError: the selection lies outside the raster.
        InvalidHeaderError: the blob is malformed.
        FrameDecodeError: a frame is corrupt or decodes to the wrong size.
        ResourceLimitError: the read exceeds ``limits``.
        SourceError: the storage failed.
    """
    src, owned = open_source(source)
    try:
        blob = resolve_header(src, header, limits=limits)
        sel = resolve_selection(blob.layout, bands=bands, times=times, window=window)
        return read_selection(src, blob, sel, threads=threads, verify=verify, limits=limits)
    finally:
        if owned:
            src.close()
