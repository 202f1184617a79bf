"""The stateless reader: a header blob plus byte ranges give any window.

Specification sections *Selective read model*, *Offset reconstruction* and
*Resource limits*. Given the blob, the reader

1. resolves the selection (band and time positions, a pixel window);
2. computes the frames that intersect it (:meth:`Layout.frames_for`);
3. reconstructs their offsets from the packed byte counts;
4. fetches exactly those ranges: runs of adjacent frames are merged into
   one request, up to ``limits.max_merged_request`` from a remote source
   (each request pays a round trip) and up to :data:`LOCAL_RUN_BYTES` from a local one
   (:func:`~rumi_core.sources.is_local`) that one thread decodes; when
   several threads decode a local read, each frame is a request of its own,
   fetched by the thread that decodes it;
5. decodes each frame as an independent OpenZL frame, on the calling thread
   and ``threads - 1`` helper threads that take frames in turn
   (:func:`~rumi_core.threads.run_together`; OpenZL releases the GIL),
   unless frames are smaller than :data:`PARALLEL_FRAME_BYTES`:
   straight into the output where the whole frame is one contiguous part of
   it (:meth:`~rumi_core.selection.OutputPlan.frame_place`, every frame of a window of
   whole tile columns), else into a new array whose requested samples are
   then copied into the output.

Every size is checked before it is allocated or looped over
(:class:`~rumi_core.Limits`): the output against ``max_output_bytes`` before
"every time step" becomes a list, the largest frame against
``max_frame_bytes``, and the bytes the blob places before the trailer against
the file's size whenever the source knows it. A frame is fetched and decoded
before the output exists, so a blob whose sizes its frames contradict is
refused without the allocation it asks for. A frame that decodes to any
other size, or a boolean byte other than 0 or 1, is an error, as in
:func:`rumi_core.validate`.

Given a blob and band positions, a read fetches no bytes but frames: it never
reads the IFD or the trailer. :func:`read` reads more in two cases: without a blob
it builds one from the file (:func:`resolve_header`), reading and checking
the head and the trailer first; and bands given by name cost one request for
the trailer's band texts, at the blob's ``trailer_offset``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple, SupportsIndex

import numpy as np

from rumi_core.arguments import flag
from rumi_core.codecs import decode_into_place
from rumi_core.errors import FrameDecodeError, InvalidFileError
from rumi_core.header import BlobArgument, HeaderBlob, blob_bytes, check_against_head, check_blob_fits, header_from_head
from rumi_core.heap import keep_heap_slack
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.selection import AxisSelector, OutputPlan, ReadSelection, place_frame, resolve_selection
from rumi_core.sources import ByteSource, deadline, is_local, known_size, open_source
from rumi_core.threads import run_together, thread_count

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Sequence

    from numpy.typing import NDArray

    from rumi_core.layout import Layout

__all__ = [
    "LOCAL_RUN_BYTES",
    "PARALLEL_FRAME_BYTES",
    "FrameRequest",
    "decode_checked",
    "plan_requests",
    "read",
    "read_selection",
    "resolve_header",
]


def resolve_header(source: ByteSource, header: BlobArgument | None, *, limits: Limits = DEFAULT_LIMITS) -> HeaderBlob:
    """Return the blob to read with (:data:`~rumi_core.header.BlobArgument`), building it from the file when none is given.

    Raises:
        InvalidHeaderError: the given blob is malformed.
        InvalidFileError: no blob was given and the file is not compliant.
        OSError: the blob's file cannot be read.
    """
    if isinstance(header, HeaderBlob):
        return header
    if header is not None:
        return _parsed_blob(blob_bytes(header, limits=limits), limits)
    from rumi_core.structure import read_structure

    head = read_structure(source, limits=limits).head
    blob = header_from_head(head)
    check_against_head(blob, head)
    return blob


_PARSED_BLOBS: OrderedDict[bytes, tuple[Limits, HeaderBlob]] = OrderedDict()
"""Each kept blob's bytes, and the limits it was parsed and checked with."""
_PARSED_BLOBS_LOCK = threading.Lock()
_PARSED_BLOBS_KEPT = 16
"""Blobs kept parsed, the least recently read dropped first."""
_PARSED_BLOB_FRAMES = 1 << 21
"""Frames the kept blobs may describe in all: 16 bytes each of byte counts and offsets (32 MiB), plus the blobs' own bytes.

A blob of more frames is parsed on every read, not kept. 2**21 holds one
year of a Sentinel-2 MGRS tile (10980 x 10980, 256 x 256 tiles, 13 bands,
73 dates: 1.75 million frames).
"""


def _parsed_blob(data: bytes, limits: Limits) -> HeaderBlob:
    """``HeaderBlob.from_bytes(data)``, kept for the next read of the same blob.

    Reads that pass the blob's bytes (``rumi read FILE --header``, a catalog
    item's inline blob) would otherwise parse and check it every time: 28 us
    of a 512 x 512 window read in a warm loop, about 100 us in a read loop
    where decoding has evicted it from the CPU caches (3 % of the read), and
    for a blob of 1.75 million frames 22 ms to parse plus 6 ms to build its
    offsets, whatever the window. A parsed blob is immutable, so sharing it
    between reads and threads changes nothing they return. Kept by its bytes
    alone, whose hash Python computes once per bytes object, not with the
    limits as part of the key: hashing a ``Limits`` runs Python code.
    """
    with _PARSED_BLOBS_LOCK:
        kept = _PARSED_BLOBS.get(data)
        if kept is not None and (kept[0] is limits or kept[0] == limits):
            _PARSED_BLOBS.move_to_end(data)
            return kept[1]
    blob = HeaderBlob.from_bytes(data, limits=limits)
    if blob.layout.frame_count <= _PARSED_BLOB_FRAMES:
        with _PARSED_BLOBS_LOCK:
            _PARSED_BLOBS[data] = (limits, blob)
            _PARSED_BLOBS.move_to_end(data)
            while len(_PARSED_BLOBS) > _PARSED_BLOBS_KEPT or _kept_frames() > _PARSED_BLOB_FRAMES:
                _PARSED_BLOBS.popitem(last=False)
    return blob


def _kept_frames() -> int:
    """Frames the kept blobs describe in all; called with the lock held."""
    return sum(blob.layout.frame_count for _, blob in _PARSED_BLOBS.values())


class FrameRequest(NamedTuple):
    """One byte-range request of a read: a run of adjacent frames."""

    offset: int
    """First byte of the run."""
    length: int
    """Bytes in the run."""
    frames: list[int]
    """The frame indices the run holds, in file order."""


LOCAL_RUN_BYTES = 256 << 10
"""Most bytes of adjacent frames one request to a local source holds when one thread decodes the read.

Each request costs a system call and Python around it (about 15 us), which
a frame of 16 x 16 uint16 samples does not repay. When several threads
decode (:data:`PARALLEL_FRAME_BYTES`), each frame is a request of its own,
fetched by the thread that decodes it while the others decode: a thread
that found its frame's run being fetched by another would sleep until it
was, and waking a thread costs about 0.1 ms on this project's machine.
"""

PARALLEL_FRAME_BYTES = 16 << 10
"""Decoded bytes a read's frames must reach for more than one thread to decode them.

The Python around each frame holds the GIL; below this, decoding a frame
takes little more time than that Python, and a second thread waits for the
GIL more than it decodes. A 256 x 256 window of 4 bands and 4 dates of
uint16, on 2 threads against 1 (this project's 2-core machine, three runs):
tiles of 16 (512 bytes decoded per frame) 0.62-0.76x, of 32 0.63-0.66x, of
64 (8 KiB) 0.75-1.39x, of 128 (32 KiB) 1.22-1.72x, of 256 1.47-1.57x.
"""


def plan_requests(
    blob: HeaderBlob, sel: ReadSelection, *, limits: Limits = DEFAULT_LIMITS, local: bool = False, threads: int | None = None
) -> list[FrameRequest]:
    """Return the requests a stateless read of ``sel`` on ``threads`` makes, in file order.

    The needed frames come from *Selective read model*; runs of frames that
    are adjacent in the file are merged into one request of at most
    ``limits.max_merged_request`` bytes. When the source is ``local``
    (:func:`~rumi_core.sources.is_local`) the runs hold at most
    :data:`LOCAL_RUN_BYTES`, and each frame is a request of its own if
    several threads decode. No request is ever made for metadata.
    """
    frames = blob.layout.frames_for(bands=sel.bands, times=sel.times, rows=sel.rows, cols=sel.cols)
    starts, lengths = blob.frame_ranges(frames)
    workers = _workers(blob.layout, len(frames), threads)
    return _requests(frames, starts.tolist(), lengths.tolist(), limits.max_merged_request, local=local, workers=workers)


def _workers(layout: Layout, frame_count: int, threads: int | None) -> int:
    """Threads that decode a read of ``frame_count`` frames: one for frames under :data:`PARALLEL_FRAME_BYTES`."""
    count = thread_count(threads)
    if layout.max_decoded_frame_bytes < PARALLEL_FRAME_BYTES:
        return 1
    return max(1, min(count, frame_count))


def _requests(
    frames: Sequence[int], starts: Sequence[int], lengths: Sequence[int], limit: int, *, local: bool, workers: int
) -> list[FrameRequest]:
    if local:
        limit = min(limit, LOCAL_RUN_BYTES) if workers == 1 else 0
    runs: list[FrameRequest] = []
    for f, start, length in zip(frames, starts, lengths, strict=True):
        if runs:
            last = runs[-1]
            if last.offset + last.length == start and last.length + length <= limit:
                last.frames.append(f)
                runs[-1] = FrameRequest(last.offset, last.length + length, last.frames)
                continue
        runs.append(FrameRequest(start, length, [f]))
    return runs


_CONTENT_CHECKSUM = "Content checksum mismatch"
"""OpenZL's reason when a frame decodes to samples other than those its writer checksummed."""

_LARGE_SELECTION = 1 << 16
"""Frames a read may list before it must know the file's size."""

_SCRATCH_FRAMES = 4
"""Decoded frames of heap one decode uses: its output and OpenZL's streams (measured 2 to 4)."""


def _decode_together(
    frames: Sequence[int],
    runs: Sequence[FrameRequest],
    fetch: Callable[[FrameRequest], bytes],
    decode: Callable[[int, FrameRequest, bytes], None],
    workers: int,
) -> None:
    """Decode ``frames`` on ``workers`` threads: the calling one and ``workers - 1`` helpers (:func:`~rumi_core.threads.run_together`).

    Every participant takes the next frame in frame order; the first one to
    need a request fetches it while the others decode what is already there.
    Frames, not requests, are the unit of work, because a read of adjacent
    frames (a whole image, say) is often a single request. A request's bytes
    are dropped once its last frame is decoded. When every request is one
    frame (a local source, :func:`_requests`), no request is shared, and a
    participant fetches and decodes each without the bookkeeping.
    """
    if len(runs) == len(frames):

        def fetch_and_decode(run: FrameRequest) -> None:
            decode(run[2][0], run, fetch(run))

        run_together(fetch_and_decode, runs, workers)
        return
    run_of = {f: k for k, run in enumerate(runs) for f in run[2]}
    fetched: list[bytes | None] = [None] * len(runs)
    failed = [False] * len(runs)
    left = [len(run[2]) for run in runs]
    run_locks = [threading.Lock() for _ in runs]
    lock = threading.Lock()

    def work(f: int) -> None:
        k = run_of[f]
        with run_locks[k]:
            if failed[k]:
                # Another participant's fetch of this run failed, and its error
                # stops the read: asking again would retry the same range once
                # per thread.
                return
            data = fetched[k]
            if data is None:
                try:
                    data = fetched[k] = fetch(runs[k])
                except BaseException:
                    failed[k] = True  # before the lock is released to a waiting participant
                    raise
        decode(f, runs[k], data)
        with lock:
            left[k] -= 1
            if not left[k]:
                fetched[k] = None

    run_together(work, frames, workers)


def describe_frame(layout: Layout, index: int) -> str:
    """Name a frame for a message: its index, band, time step and tile."""
    row, col, band, time = layout.frame_location(index)
    what = "every band" if band is None else f"band {band}"
    when = "every time step" if time is None else f"time step {time}"
    return f"frame {index} ({what}, {when}, tile row {row} col {col})"


def decode_checked(
    frame: bytes | memoryview,
    layout: Layout,
    index: int,
    *,
    decoded_frame_bytes: int,
    where: str | Callable[[], str],
    offset: int,
    verify: bool = True,
    place: Callable[[], NDArray[np.uint8] | None] | None = None,
    by_blob: bool = False,
) -> NDArray[np.uint8]:
    """Decode frame ``index`` and check the decode-time MUSTs that a read and :func:`rumi_core.validate` share.

    The frame must declare and decode to exactly its size (*Frames*, and
    ``decoded_frame_bytes`` in *Sample encodings*), and a boolean frame must
    hold no byte other than 0 or 1 (*Sample encodings*: a NumPy bool holding
    any other byte is not a valid bool).

    Args:
        frame: The frame's bytes, as stored in the file.
        layout: The file's layout; a frame of boolean samples is checked to
            hold no byte other than 0 or 1.
        index: The frame's index, which an error names as its field.
        decoded_frame_bytes: The frame's ``decoded_frame_bytes`` (:meth:`~rumi_core.layout.Layout.frame_extent`).
        where: What the message names first (the source and frame), ending
            without a colon; a callable is called only when a message is made.
        offset: The frame's byte offset in the file.
        verify: Check the frame's OpenZL checksums
            (:func:`~rumi_core.codecs.decode_frame`).
        place: Where to decode: called once the frame's header has declared
            the size the blob gives it, so a caller allocates nothing for a
            frame that contradicts it (*Resource limits*); it returns a flat,
            writable, 8-byte aligned ``uint8`` array of exactly that size, or
            None for a new one (:func:`~rumi_core.codecs.decode_into_place`).
        by_blob: The frame was located by a header blob (a read), not by the
            file's own ``TileOffsets``: a failure then names the blob as a cause.

    Raises:
        FrameDecodeError: the frame is corrupt or decodes to the wrong size; the
            decoder's text is put on one line.
        InvalidFileError: a boolean byte is neither 0 nor 1.
    """
    try:
        data = frame if isinstance(frame, bytes) else bytes(frame)
        raw = decode_into_place(data, decoded_frame_bytes, place, verify=verify)
    except FrameDecodeError as err:
        text = where if isinstance(where, str) else where()
        if _CONTENT_CHECKSUM in err.message:
            # The frame was found and decoded (a misplaced frame fails before), to samples other than those
            # its writer checksummed: seen in rumi-eo's files of floats with several NaN payloads, which
            # geozl's NaN stage writes back as one.
            hint = (
                "; the frame decodes, but not to the samples its writer checksummed: the writer changed them after"
                " checksumming (geozl's NaN stage folds NaN payloads into one), or the file is corrupt;"
                " rumi_core.read(..., verify=False) returns the samples as decoded, for the frame"  # " at byte N"
            )
        elif by_blob:
            # A blob placed this frame: a blob of another file, or of this file before it was rewritten
            # (same name, other frame sizes), fails here as a corrupt file does. Name both causes.
            hint = (
                "; the file is corrupt, or the header blob describes another file or an earlier version of this one"
                " (rumi header FILE builds its blob), for the frame it places"  # the error appends " at byte N"
            )
        else:
            hint = ""
        message = f"{text}: {' '.join(err.message.split())}{hint}"
        raise FrameDecodeError(message, field=f"frame {index}", rule=err.rule, offset=offset) from err
    if layout.encoding.name == "bool" and raw.max(initial=0) > 1:
        raise InvalidFileError(
            f"{where if isinstance(where, str) else where()} holds a boolean byte other than 0 or 1",
            field=f"frame {index}",
            rule="Boolean samples: every byte MUST be 0 or 1",
            offset=offset,
        )
    return raw


def _check_file_holds(source: ByteSource, blob: HeaderBlob, size: int | None = None) -> None:
    """Refuse a blob whose frames need more bytes than the file has (:func:`~rumi_core.header.check_blob_fits`).

    Checked whenever the source knows its size without a request, so that no
    output is allocated and no frame is looped over for a file that cannot
    hold them (*Resource limits*). The trailer is not counted: a stateless
    read never touches it.

    Raises:
        HeaderMismatchError: the file is shorter than the blob says.
    """
    size = known_size(source) if size is None else size
    if size is not None:
        check_blob_fits(blob, size, where=source.name)


def _checked_size(source: ByteSource, blob: HeaderBlob, sel: ReadSelection) -> int | None:
    """The file's size if known before any frame is read, with the blob checked against it (:func:`_check_file_holds`)."""
    size = known_size(source)
    _check_file_holds(source, blob, size)
    if size is not None:
        return size
    layout = blob.layout
    tile_rows, tile_cols = layout.tile_span(sel.rows, sel.cols)
    per_location = len(sel.bands) * len(sel.times) if layout.unit.holds == "tile" else 1
    if len(tile_rows) * len(tile_cols) * per_location > _LARGE_SELECTION:
        # A remote source learns its size from its first answer; before
        # looping over this many frames, ask for it (one request) so that a
        # blob claiming more frames than the file holds is refused first.
        size = source.size()
        _check_file_holds(source, blob, size)
    return size


def read_selection(
    source: ByteSource,
    blob: HeaderBlob,
    sel: ReadSelection,
    *,
    threads: int | None = None,
    verify: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    progress: Callable[[int], None] | None = None,
) -> NDArray[Any]:
    """Read a resolved selection; the engine behind :func:`read`.

    ``progress``, when given, is called with 1 after each frame is placed
    (from the decoding threads), for a progress bar.

    Raises:
        RumiError: ``verify`` is not a boolean.
    """
    verify = flag("verify", verify)
    layout = blob.layout
    dtype = layout.encoding.dtype
    plan = OutputPlan(layout, sel)
    out_bytes = plan.nbytes
    limits.check("max_output_bytes", out_bytes, "the read's output array")
    # The largest frame the layout can hold, an upper bound of every frame
    # this read decodes, known without visiting them.
    limits.check("max_frame_bytes", layout.max_decoded_frame_bytes, "a decoded frame")
    size = _checked_size(source, blob, sel)
    # Every frame adds at least one sample to the output, so this loop and
    # the ones below are bounded by the output checked above.
    frames = layout.frames_for(bands=sel.bands, times=sel.times, rows=sel.rows, cols=sel.cols)
    starts_array, lengths_array = blob.frame_ranges(frames)
    starts, lengths = starts_array.tolist(), lengths_array.tolist()
    workers = _workers(layout, len(frames), threads)
    runs = _requests(frames, starts, lengths, limits.max_merged_request, local=is_local(source), workers=workers)
    # Where each frame lies, for requests of several frames; a request of one frame is its frame.
    where = dict(zip(frames, zip(starts, lengths, strict=True), strict=True)) if len(runs) < len(frames) else {}
    # What this read allocates (output, requests, each thread's frame and its
    # decoding scratch), kept mapped for the next read (rumi_core.heap).
    keep_heap_slack(out_bytes + max(run.length for run in runs) * workers + workers * _SCRATCH_FRAMES * layout.max_decoded_frame_bytes)

    def fetch(run: FrameRequest) -> bytes:
        start, length, members = run
        (data,) = source.read_ranges([(start, length)])
        if len(data) != length:
            raise InvalidFileError(
                f"{source.name} ends at byte {start + len(data)}, but frame {members[-1]} ends at {start + length}",
                field="frame data",
                rule="Every frame is present",
                offset=start + len(data),
            )
        return data

    # The output is allocated only once a frame has been fetched and its
    # header has declared the size the blob gives it: a source that learns
    # its size from an answer (HTTP's Content-Range) can then refuse a blob
    # that claims more bytes than the file has, and a blob whose sizes the
    # frames contradict is refused, before an output sized by the blob alone
    # is allocated. Any frame will do, so on several threads every thread
    # decodes from the start instead of waiting for the first.
    allocated: list[tuple[NDArray[Any], NDArray[np.uint8]]] = []  # the output, and its bytes
    allocate_lock = threading.Lock()

    def output() -> tuple[NDArray[Any], NDArray[np.uint8]]:
        if not allocated:
            with allocate_lock:
                if not allocated:
                    if size is None:  # the first answer may have told it
                        _check_file_holds(source, blob)
                    out = np.empty(plan.shape, dtype=dtype)
                    allocated.append((out, out.reshape(-1).view(np.uint8)))
        return allocated[0]

    def decode(f: int, run: FrameRequest, data: bytes) -> None:
        """Decode frame ``f`` from ``data``, the bytes of ``run``."""
        offset, n = where[f] if len(run[2]) > 1 else run[:2]
        if n != len(data):  # one frame of a merged request
            data = data[offset - run[0] : offset - run[0] + n]
        # A frame that fills its place in the output is decoded there; any
        # other is decoded to a new array and its selected samples copied.
        extent, at = plan.frame_place(f)
        end = at + extent.decoded_frame_bytes
        raw = decode_checked(
            data,
            layout,
            f,
            decoded_frame_bytes=extent.decoded_frame_bytes,
            where=lambda: f"{source.name}: {describe_frame(layout, f)}",
            offset=offset,
            verify=verify,
            place=None if at < 0 else lambda: output()[1][at:end],
            by_blob=True,
        )
        if at < 0:
            place_frame(output()[0], raw.view(dtype), extent, layout, sel, plan.band_pos, plan.time_pos, plan.subset)
        if progress is not None:
            progress(1)

    if workers == 1:
        for run in runs:
            data = fetch(run)
            for f in run[2]:
                decode(f, run, data)
    else:
        _decode_together(frames, runs, fetch, decode, workers)
    out = allocated[0][0]
    return out if layout.is_cube else out[0]


def _band_positions(source: ByteSource, blob: HeaderBlob, bands: Any, limits: Limits) -> Any:
    """Band positions of a selection that names bands (one request for the trailer's texts); others unchanged."""
    if isinstance(bands, str):
        bands = [bands]
    if not isinstance(bands, (list, tuple)) or not any(isinstance(b, str) for b in bands):
        return bands
    from rumi_core.band_names import band_positions
    from rumi_core.structure import read_trailer

    lay = blob.layout
    trailer = read_trailer(
        source, trailer_offset=blob.trailer_offset, samples_per_pixel=lay.samples_per_pixel, time_count=lay.time_count, limits=limits
    )
    return band_positions(bands, trailer.band_texts)


def read(
    source: ByteSource | str | os.PathLike[str] | bytes | bytearray | memoryview,
    header: BlobArgument | None = None,
    *,
    bands: AxisSelector | str | Sequence[SupportsIndex | str] | None = None,
    times: AxisSelector | None = None,
    window: Any = None,
    threads: int | None = None,
    verify: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    timeout: float | None = None,
) -> NDArray[Any]:
    """Read bands, times and a window of a rumi file through its header blob.

    Args:
        source: A local path, the file's bytes, or any :class:`ByteSource`.
        header: The file's header blob: parsed, its bytes, or the path of its
            ``.rumih`` file. When None, it is built from the file (which reads
            the head and trailer once).
        bands: Band positions or names (``["red", "nir"]``, ``[0, "B8"]``), in
            the order wanted; None for all. Names are matched as ``rumi read``
            matches them (the band's name, EO common name or any part of its
            text; see :mod:`rumi_core.band_names`), which costs one request
            for the trailer.
        times: Time positions; None for all.
        window: ``((row_start, row_stop), (col_start, col_stop))`` or a
            :class:`rasterio.windows.Window`; None for the whole image.
        threads: Decoding threads, at most one per frame read; None (or 0)
            uses every CPU this process may use
            (:func:`~rumi_core.threads.default_threads`). A file whose frames
            decode to less than :data:`PARALLEL_FRAME_BYTES` (its largest,
            :attr:`~rumi_core.layout.Layout.max_decoded_frame_bytes`) is
            decoded on the calling thread alone, whatever ``threads`` is.
        verify: Check OpenZL checksums of every frame (the default).
        limits: Resource limits checked before allocating.
        timeout: Total seconds a remote source may take for the whole read,
            every thread and retry included (see :func:`rumi_core.sources.deadline`);
            None uses the source's default.

    Returns:
        ``(T', B', h, w)`` for a Cube and ``(B', h, w)`` for an Image, in the
        file's sample dtype.

    Raises:
        SelectionError: the selection lies outside the raster, or a band name
            matches no band or several.
        InvalidHeaderError: the blob is malformed.
        InvalidFileError: with no blob, the file's head or trailer breaks a
            MUST (a file too short to hold them, say); the file ends inside a
            frame the read needs; a boolean byte is neither 0 nor 1; or, for
            bands given by name, the trailer is malformed.
        HeaderMismatchError: the file is shorter than the blob's frames
            (checked whenever the source knows its size).
        FrameDecodeError: a frame is corrupt or decodes to the wrong size.
        ResourceLimitError: the read exceeds ``limits``.
        SourceError: the storage failed, or the blob's file cannot be read.
        RumiError: ``header`` is of no type above, or ``threads`` or ``verify`` is not a count or a boolean.
    """
    src, owned = open_source(source)
    try:
        with deadline(src, timeout):
            blob = resolve_header(src, header, limits=limits)
            positions = _band_positions(src, blob, bands, limits)
            sel = resolve_selection(blob.layout, bands=positions, times=times, window=window, limits=limits)
            return read_selection(src, blob, sel, threads=threads, verify=verify, limits=limits)
    finally:
        if owned:
            src.close()
