"""Validation of a file, and of a header blob against it.

Checks every MUST of the specification that concerns a file at rest:

* *File header*, *Fixed IFD*, *Placement*, *Sample encodings*,
  *Georeferencing*, *Validating frame_unit*, *Frame order* and *Trailer*,
  through :func:`rumi_core.structure.read_structure`;
* when a blob is given, every rule of *Header blob* and its agreement with the
  IFD (*Creating the header blob*);
* unless ``quick``, that every frame is a self-contained OpenZL frame whose
  checksums hold and that decodes to exactly ``decoded_frame_bytes``, and that
  boolean samples are 0 or 1.

The first violation is raised as a :class:`~rumi_core.errors.RumiError`
subclass whose message names the rule, e.g. ``TileOffsets[5] is 1234,
reconstructed offset is 1200``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rumi_core.header import BlobArgument, HeaderBlob, check_against_head
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.reader import decode_checked
from rumi_core.sources import ByteSource, deadline, open_source
from rumi_core.structure import FileStructure, read_structure
from rumi_core.threads import run_together, thread_count

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

__all__ = ["validate"]

_BATCH_BYTES = 64 << 20


def _check_frames(source: ByteSource, structure: FileStructure, *, threads: int, limits: Limits) -> None:
    head = structure.head
    layout = head.layout
    limits.check("max_frame_bytes", layout.max_decoded_frame_bytes, "a decoded frame")
    offsets = head.offsets

    def check(index: int, frame: bytes) -> None:
        expected = layout.decoded_frame_bytes(index)
        decode_checked(frame, layout, index, decoded_frame_bytes=expected, where=f"frame {index}", offset=int(offsets[index]))

    index = 0
    n = layout.frame_count
    while index < n:
        # Read a batch of contiguous frames in one request, then decode it.
        stop = index + 1
        while stop < n and int(offsets[stop + 1] - offsets[index]) <= _BATCH_BYTES:
            stop += 1
        start = int(offsets[index])
        (data,) = source.read_ranges([(start, int(offsets[stop]) - start)])
        _check_batch(check, [int(o) - start for o in offsets[index : stop + 1]], memoryview(data), index, threads)
        index = stop


def _check_batch(check: Callable[[int, bytes], None], bounds: list[int], data: memoryview, first: int, threads: int) -> None:
    """Check the frames ``first, first + 1, ...`` whose bytes ``data[bounds[k]:bounds[k + 1]]`` are, on ``threads`` threads."""

    def work(k: int) -> None:
        check(first + k, bytes(data[bounds[k] : bounds[k + 1]]))

    run_together(work, range(len(bounds) - 1), threads)


def validate(
    source: ByteSource | str | os.PathLike[str] | bytes,
    header: BlobArgument | None = None,
    *,
    quick: bool = False,
    threads: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
    timeout: float | None = None,
) -> FileStructure:
    """Check a file (and its blob, when given) against every MUST.

    Args:
        source: Path, bytes or :class:`ByteSource` of the ``.rumi`` file.
        header: The blob that should describe the file, if any: parsed, its bytes, or its ``.rumih`` file's path.
        quick: Skip decoding the frames.
        threads: Decoding threads; None uses every CPU available.
        limits: Resource limits checked before allocating or decoding.
        timeout: Total seconds a remote file may take, every request
            included (:func:`rumi_core.sources.deadline`); None uses the
            source's default.

    Returns:
        The file's checked structure.

    Raises:
        InvalidFileError: the file breaks a MUST.
        InvalidHeaderError: the blob breaks a MUST.
        HeaderMismatchError: the blob disagrees with the file.
        FrameDecodeError: a frame is not a valid OpenZL frame of the right size.
        ResourceLimitError: a size the file declares exceeds ``limits``.
        SourceError: the file cannot be read.
    """
    src, owned = open_source(source)
    try:
        with deadline(src, timeout):
            structure = read_structure(src, limits=limits)
            if header is not None:
                blob = HeaderBlob.given(header, limits=limits)
                check_against_head(blob, structure.head)
            if not quick:
                _check_frames(src, structure, threads=thread_count(threads), limits=limits)
        return structure
    finally:
        if owned:
            src.close()
