"""The structure of a whole file: head, frame region and trailer.

Specification section *File profile*. A compliant file is ``head ‖ frames ‖
trailer``: the head is checked by :func:`rumi_core.ifd.decode_head`, the
frames form one contiguous run in frame-index order from
``base_frame_offset``, and the trailer starts right after the last frame and
ends exactly at the end of the file (so trailing bytes are refused by the
trailer's exact-size rule).

This reads the head and the trailer, never the frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rumi_core.errors import InvalidFileError, ResourceLimitError
from rumi_core.ifd import ParsedHead, decode_head
from rumi_core.layout import MAX_UINT16
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.time_coordinates import TRAILER_SIZE_RULE
from rumi_core.trailer import Trailer

if TYPE_CHECKING:
    from rumi_core.sources import ByteSource

__all__ = ["FileStructure", "read_head", "read_structure", "read_trailer"]


@dataclass(frozen=True)
class FileStructure:
    """A file's checked head and trailer, and its size."""

    head: ParsedHead
    trailer: Trailer
    size: int

    def __repr__(self) -> str:
        # Not every frame's byte count, which a REPL or notebook showed as the last line of a validate.
        lay = self.head.layout
        kind = "Cube" if lay.is_cube else "Image"
        return f"<rumi_core.FileStructure {kind} {lay.shape} {lay.encoding.name}, {lay.frame_count} frames, {self.size} bytes>"


def _read_at(source: ByteSource, offset: int, length: int) -> bytes:
    return source.read_ranges([(offset, length)])[0]


def read_trailer(
    source: ByteSource,
    *,
    trailer_offset: int,
    samples_per_pixel: int,
    time_count: int,
    size: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Trailer:
    """Read and check the trailer that starts at ``trailer_offset``.

    Raises:
        InvalidFileError: the file ends before the trailer offset, or the
            trailer is malformed.
        ResourceLimitError: the trailer exceeds ``limits``.
    """
    size = source.size() if size is None else size
    if size < trailer_offset:
        raise InvalidFileError(
            f"the file is {size} bytes, but its frames end at {trailer_offset}",
            field="file size",
            rule="Every frame is present",
            offset=size,
        )
    # A trailer is 28 bytes, the band texts (2 + at most 65535 bytes each) and at most 8 bytes per
    # coordinate (C <= 2T). Past that the file is malformed. Past what texts and coordinates within
    # the limits can take, it is only more than this reader reads, which does not make it invalid.
    trailing = size - trailer_offset
    if trailing > 28 + samples_per_pixel * (2 + MAX_UINT16) + 16 * time_count:
        raise InvalidFileError(
            f"{trailing} bytes follow the last frame, more than any trailer of this file can hold",
            field="trailer size",
            rule=TRAILER_SIZE_RULE,
            offset=trailer_offset,
        )
    if trailing > 28 + limits.max_band_text_bytes + 8 * min(limits.max_time_coordinates, 2 * time_count):
        raise ResourceLimitError(
            f"the trailer is {trailing} bytes, more than band texts within Limits.max_band_text_bytes = "
            f"{limits.max_band_text_bytes} and coordinates within Limits.max_time_coordinates = {limits.max_time_coordinates} "
            "take; raise them with rumi_core.Limits(max_band_text_bytes=..., max_time_coordinates=...) if this machine can afford it",
            field="max_band_text_bytes",
            offset=trailer_offset,
        )
    data = _read_at(source, trailer_offset, size - trailer_offset)
    return Trailer.from_bytes(data, samples_per_pixel=samples_per_pixel, time_count=time_count, offset=trailer_offset, limits=limits)


def read_head(source: ByteSource, *, size: int | None = None, limits: Limits = DEFAULT_LIMITS) -> ParsedHead:
    """Read and check the head (header and IFD) of a file of ``size`` bytes (asked of the source when None).

    Raises:
        InvalidFileError: a structural MUST of the head is broken.
    """
    size = source.size() if size is None else size
    return decode_head(lambda offset, length: _read_at(source, offset, length), size=size, limits=limits)


def read_structure(source: ByteSource, *, limits: Limits = DEFAULT_LIMITS) -> FileStructure:
    """Read and check the head and trailer of a file.

    Raises:
        InvalidFileError: any structural MUST is broken.
    """
    size = source.size()
    head = read_head(source, size=size, limits=limits)
    trailer = read_trailer(
        source,
        trailer_offset=head.trailer_offset,
        samples_per_pixel=head.layout.samples_per_pixel,
        time_count=head.layout.time_count,
        size=size,
        limits=limits,
    )
    return FileStructure(head, trailer, size)
