"""The header blob: 32 bytes plus bit-packed frame byte counts.

Specification section *Header blob*. The blob lives outside the ``.rumi``
file and holds the raster fields and the frame byte counts. From it alone a
reader derives ``base_frame_offset`` and the offset of every frame, and where
the trailer starts. It stores no offsets.

Layout (little-endian)::

    magic 0x45564F4C | version 1 | image_width | image_length | time_count
    tile_width | tile_length | samples_per_pixel | bits_per_sample
    sample_format | frame_unit | count_min (uint32) | count_bits (uint8)
    frame_byte_counts[N] - count_min, packed at count_bits bits each

:func:`build_header` creates a blob from a finalized file, after checking
every duplicated value against the IFD. :meth:`HeaderBlob.from_bytes` checks
every MUST of a blob, including minimal ``count_min`` and ``count_bits``, zero
unused bits and the exact size.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from rumi_core.bitpack import bit_length, pack, packed_size, unpack
from rumi_core.encodings import encoding_for_pair
from rumi_core.errors import HeaderMismatchError, InvalidHeaderError, InvalidInputError, RumiError, SourceError
from rumi_core.ifd import ParsedHead, base_frame_offset, end_of_frames, file_kind, frame_offsets, uniform_end_of_frames
from rumi_core.layout import Layout
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.sources import deadline, open_source, url_scheme

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

__all__ = [
    "BlobArgument",
    "HEADER_MAGIC",
    "check_blob_fits",
    "HEADER_SIZE",
    "HEADER_VERSION",
    "HeaderBlob",
    "blob_beside",
    "blob_bytes",
    "build_header",
    "header_from_head",
]

HEADER_MAGIC = 0x45564F4C
HEADER_VERSION = 1
_FIXED = struct.Struct("<IHIIIHHHBBBIB")
HEADER_SIZE = _FIXED.size
assert HEADER_SIZE == 32


class HeaderBlob:
    """A parsed, checked header blob: the layout and every frame's byte count.

    When every frame has the same size (``count_bits = 0``) the counts are
    held as that one number, never as ``N`` entries: a 32-byte blob may
    describe millions of frames (*Resource limits*). Offsets of the frames a
    read needs are then pure arithmetic.
    """

    def __init__(self, layout: Layout, frame_byte_counts: NDArray[np.uint64] | Sequence[int]) -> None:
        counts = np.asarray(frame_byte_counts, dtype=np.uint64).reshape(-1)
        if counts.size != layout.frame_count:
            raise InvalidInputError(f"expected {layout.frame_count} byte counts, got {counts.size}", field="frame_byte_counts")
        if counts.size and (int(counts.min()) == 0 or int(counts.max()) > 0xFFFF_FFFF):
            raise InvalidInputError("every frame byte count MUST be greater than zero and fit in uint32", field="frame_byte_counts")
        counts.flags.writeable = False
        self._layout = layout
        self._counts: NDArray[np.uint64] | None = counts
        self._count_min = int(counts.min()) if counts.size else 0
        self._offsets: NDArray[np.uint64] | None = None
        self._trailer_offset = end_of_frames(self.base_frame_offset, counts)

    @classmethod
    def uniform(cls, layout: Layout, count: int) -> HeaderBlob:
        """A blob whose ``N`` frames are all ``count`` bytes, held without an ``N``-entry table.

        Raises:
            InvalidInputError: ``count`` is zero or above uint32.
        """
        if not 0 < count <= 0xFFFF_FFFF:
            raise InvalidInputError("every frame byte count MUST be greater than zero and fit in uint32", field="frame_byte_counts")
        blob = cls.__new__(cls)
        blob._layout = layout
        blob._counts = None
        blob._count_min = count
        blob._offsets = None
        blob._trailer_offset = uniform_end_of_frames(blob.base_frame_offset, count, layout.frame_count)
        return blob

    @property
    def layout(self) -> Layout:
        """Dimensions, tiling, sample encoding and frame unit."""
        return self._layout

    @property
    def frame_byte_counts(self) -> NDArray[np.uint64]:
        """``frame_byte_counts``, in frame-index order (``N`` entries, built on demand)."""
        if self._counts is None:
            counts = np.full(self._layout.frame_count, self._count_min, dtype=np.uint64)
            counts.flags.writeable = False
            return counts
        return self._counts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HeaderBlob):
            return NotImplemented
        if self.layout != other.layout:
            return False
        if self._counts is None and other._counts is None:
            return self._count_min == other._count_min
        return np.array_equal(self.frame_byte_counts, other.frame_byte_counts)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HeaderBlob({self.layout!r}, N={self.layout.frame_count}, count_min={self.count_min}, count_bits={self.count_bits})"

    # -- derived -----------------------------------------------------------------

    @property
    def count_min(self) -> int:
        """``min(c)``."""
        return self._count_min

    @property
    def count_bits(self) -> int:
        """Bits per packed residual: ``bit_length(max(c) - count_min)``."""
        if self._counts is None or not self._counts.size:
            return 0
        return bit_length(int(self._counts.max()) - self._count_min)

    @property
    def base_frame_offset(self) -> int:
        """Where frame data starts, from ``B`` and ``N``."""
        return base_frame_offset(samples_per_pixel=self.layout.samples_per_pixel, frame_count=self.layout.frame_count)

    @property
    def offsets(self) -> NDArray[np.uint64]:
        """``N + 1`` offsets: every frame's start, then the trailer's (built on demand)."""
        if self._offsets is None:
            self._offsets = frame_offsets(self.base_frame_offset, self.frame_byte_counts)
        return self._offsets

    @property
    def trailer_offset(self) -> int:
        """``offset[N-1] + frame_byte_counts[N-1]``.

        Summed once, when the blob is made: every read checks it against the
        file's size, and the counts never change.
        """
        return self._trailer_offset

    def frame_ranges(self, frames: NDArray[np.int64] | Sequence[int]) -> tuple[NDArray[np.uint64], NDArray[np.uint64]]:
        """Return the offsets and byte counts of ``frames``.

        With uniform counts this is arithmetic on the requested frames only;
        otherwise it indexes the offsets, built once from the blob's counts
        (whose size is proportional to the blob's length).
        """
        index = np.asarray(frames, dtype=np.int64)
        if self._counts is None:
            count = np.uint64(self._count_min)
            starts = np.uint64(self.base_frame_offset) + index.astype(np.uint64) * count
            return starts, np.full(index.shape, count, dtype=np.uint64)
        return self.offsets[index], self._counts[index]

    def frame_range(self, index: int) -> tuple[int, int]:
        """Return ``(offset, length)`` of frame ``index``."""
        starts, lengths = self.frame_ranges([index])
        return int(starts[0]), int(lengths[0])

    # -- bytes ---------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Return the canonical blob."""
        lay = self.layout
        enc = lay.encoding
        cmin, bits = self.count_min, self.count_bits
        fixed = _FIXED.pack(
            HEADER_MAGIC, HEADER_VERSION, lay.image_width, lay.image_length, lay.time_count,
            lay.tile_width, lay.tile_length, lay.samples_per_pixel, enc.bits_per_sample,
            enc.sample_format, lay.frame_unit, cmin, bits,
        )  # fmt: skip
        if self._counts is None:
            return fixed
        return fixed + pack(self._counts - np.uint64(cmin), bits)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, *, limits: Limits = DEFAULT_LIMITS) -> HeaderBlob:
        """Parse a blob and check every MUST of *Header blob*.

        The blob's size is checked against ``N`` and ``count_bits`` before the
        counts are unpacked, so the work is proportional to the blob's length;
        a blob with ``count_bits = 0`` is held as one count (*Resource limits*).

        Raises:
            InvalidHeaderError: the blob is malformed; the message names the field.
            ResourceLimitError: ``N`` exceeds ``limits.max_frames``.
        """
        data = bytes(data)
        if len(data) < HEADER_SIZE:
            raise InvalidHeaderError(
                f"the blob is {len(data)} bytes, shorter than its 32-byte header",
                field="blob size",
                rule="The blob size MUST be exactly 32 + ceil(N * count_bits / 8) bytes",
            )
        layout, cmin, bits = _fixed_fields(data)
        n = layout.frame_count
        expected = HEADER_SIZE + packed_size(n, bits)
        if len(data) != expected:
            raise _fail(
                f"the blob is {len(data)} bytes, expected 32 + ceil(N * count_bits / 8) = {expected}",
                "blob size",
                0,
                "The blob size MUST be exactly 32 + ceil(N * count_bits / 8) bytes and contain no padding",
            )
        limits.check("max_frames", n, "the blob's frame count N")
        # The constructors' other refusals (a count of zero or past uint32) are checked above as the blob's
        # own rules; what is left for them to refuse is an end of frames past uint64.
        fld, at = ("count_min", 27) if bits == 0 else ("frame_byte_counts", HEADER_SIZE)
        try:
            return cls.uniform(layout, cmin) if bits == 0 else cls(layout, _packed_counts(data, n, cmin, bits))
        except InvalidInputError as err:
            raise _fail(err.message, fld, at, "Every reconstructed offset MUST fit in uint64") from err

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, limits: Limits = DEFAULT_LIMITS) -> HeaderBlob:
        """Read and parse a ``.rumih`` file (:func:`blob_bytes`)."""
        return cls.from_bytes(blob_bytes(path, limits=limits), limits=limits)

    @classmethod
    def given(cls, header: BlobArgument, *, limits: Limits = DEFAULT_LIMITS) -> HeaderBlob:
        """``header`` as a parsed blob: a :class:`HeaderBlob`, a blob's bytes, or the path of a ``.rumih`` file."""
        return header if isinstance(header, HeaderBlob) else cls.from_bytes(blob_bytes(header, limits=limits), limits=limits)


BlobArgument: TypeAlias = "HeaderBlob | bytes | bytearray | memoryview | str | os.PathLike[str]"
"""What a reader takes for a file's header blob: parsed, its bytes, or the path of its ``.rumih`` file."""


def blob_beside(location: str) -> str:
    """Where a file's header blob is kept beside it: the file's name and ``h`` (``x.rumi``, ``x.rumih``).

    The specification keeps the blob outside the file and leaves where to the
    catalogue; this is where ``rumi header`` and ``rumi convert`` put it, and
    where ``rumi read`` and ``rumi validate`` of a bare file look. An HTTP(S)
    URL keeps its query after the name; a ``gs://`` object or a local path has
    none, so a ``?`` there is part of the name.

    >>> blob_beside("https://h/c/x.rumi?token=t"), blob_beside("gs://b/x.rumi"), blob_beside("/d/x.rumi")
    ('https://h/c/x.rumih?token=t', 'gs://b/x.rumih', '/d/x.rumih')
    """
    if url_scheme(location) not in ("http", "https"):
        return location + "h"
    parts = urlsplit(location)
    return urlunsplit(parts._replace(path=parts.path + "h"))


def blob_bytes(
    header: bytes | bytearray | memoryview | str | os.PathLike[str], *, limits: Limits = DEFAULT_LIMITS, timeout: float | None = None
) -> bytes:
    """A blob's bytes: ``header`` itself, or the bytes of the file or URL it names, read whole.

    A file larger than any blob of ``limits.max_frames`` frames is refused
    unread: the rumi file given for its blob may be gigabytes. A URL (any
    scheme a reader opens, :func:`~rumi_core.sources.open_source`) is read
    within ``timeout`` seconds (None: the source's default).

    Raises:
        InvalidHeaderError: the file is larger than a blob can be.
        SourceError: the file cannot be read (its ``strerror`` is the operating system's).
        RumiError: ``header`` is neither bytes nor a path: an integer given here
            would otherwise become that many zero bytes (``bytes(n)``).
    """
    if isinstance(header, (bytes, bytearray, memoryview)):
        return bytes(header)
    if not isinstance(header, (str, os.PathLike)):
        raise RumiError(f"header is a HeaderBlob, a blob's bytes or the path of its .rumih file, not {type(header).__name__}")
    most = HEADER_SIZE + packed_size(limits.max_frames, 32)
    if isinstance(header, str) and url_scheme(header) is not None:
        source, _ = open_source(header)
        try:
            with deadline(source, timeout):
                size = source.size()
                _check_blob_file_size(header, size, most, limits)
                (data,) = source.read_ranges([(0, size)])
                return data
        finally:
            source.close()
    try:
        with open(header, "rb") as f:
            _check_blob_file_size(os.fspath(header), os.fstat(f.fileno()).st_size, most, limits)
            return f.read()
    except OSError as err:
        # A RumiError, as a missing data file is: the blob is the second argument of rasterio's habit
        # open(path, "r"), which would otherwise be a bare FileNotFoundError naming "r".
        hint = "; the second argument is the header blob, and a rumi file opens for reading only" if header in ("r", "rb") else ""
        failure = SourceError(f"cannot read the header blob {os.fspath(header)}: {err.strerror}{hint}")
        failure.strerror = err.strerror  # (not errno: with both set, str() shows them alone)
        raise failure from err


def _check_blob_file_size(where: str, size: int, most: int, limits: Limits) -> None:
    if size > most:
        raise InvalidHeaderError(
            f"{where} is {size} bytes, more than a blob of at most {limits.max_frames} frames can be ({most}); "
            "is it a rumi file rather than its .rumih?",
            field="blob size",
            rule="The blob size MUST be exactly 32 + ceil(N * count_bits / 8) bytes",
        )


def _fail(msg: str, fld: str, at: int, rule: str) -> InvalidHeaderError:
    return InvalidHeaderError(msg, field=fld, offset=at, rule=rule)


def _fixed_fields(data: bytes) -> tuple[Layout, int, int]:
    """The layout, ``count_min`` and ``count_bits`` of the blob's 32-byte header, each checked (*Header blob*)."""
    (magic, version, width, length, times, tile_w, tile_l, spp, bps, fmt, unit, cmin, bits) = _FIXED.unpack_from(data)
    if magic != HEADER_MAGIC:
        what = file_kind(data[:4])
        given = f": the bytes given are {what}, not a header blob" if what else ""
        raise _fail(f"magic is {data[:4]!r}, expected b'LOVE'{given}", "magic", 0, "A reader MUST reject any other value")
    if version != HEADER_VERSION:
        raise _fail(f"version is {version}, expected 1", "version", 4, "A reader that implements version 1 MUST reject any other value")
    for name, value, at in (("image_width", width, 6), ("image_length", length, 10), ("time_count", times, 14),
                            ("tile_width", tile_w, 18), ("tile_length", tile_l, 20), ("samples_per_pixel", spp, 22)):  # fmt: skip
        if value == 0:
            raise _fail(f"{name} is 0", name, at, f"{name} MUST be greater than zero")
    try:
        encoding = encoding_for_pair(fmt, bps)
    except InvalidInputError as err:
        raise _fail(err.message, "sample_format", 24, "A reader MUST reject any pair not listed") from err
    try:
        layout = Layout(width, length, times, spp, tile_w, tile_l, encoding, unit)
    except InvalidInputError as err:
        raise _fail(err.message, err.field or "frame_unit", 26, err.rule or "frame_unit") from err
    if bits > 32:
        raise _fail(f"count_bits is {bits}, expected 0..32", "count_bits", 31, "count_bits MUST be between 0 and 32")
    if cmin == 0:
        raise _fail("count_min is 0", "count_min", 27, "Every count MUST be greater than zero")
    return layout, cmin, bits


def _packed_counts(data: bytes, n: int, cmin: int, bits: int) -> NDArray[np.uint64]:
    """The ``N`` byte counts packed after the header at ``count_bits`` (> 0) each, checked to be minimal (*Header blob*)."""
    try:
        residuals = unpack(data[HEADER_SIZE:], n, bits)
    except RumiError as err:
        raise _fail(str(err), "frame_byte_counts", len(data) - 1, "Unused bits in the final byte MUST be zero") from err
    if n and int(residuals.min()) != 0:
        raise _fail(
            f"count_min is {cmin}, but the smallest decoded count is {cmin + int(residuals.min())}",
            "count_min",
            27,
            "A reader MUST reject a blob if count_min is not the minimum decoded count",
        )
    if bit_length(int(residuals.max()) if n else 0) != bits:
        raise _fail(
            f"count_bits is {bits}, the minimum width is {bit_length(int(residuals.max()))}",
            "count_bits",
            31,
            "A reader MUST reject a blob if count_bits is not the minimum required width",
        )
    counts = residuals + np.uint64(cmin)
    if int(counts.max()) > 0xFFFF_FFFF:
        raise _fail(
            "a reconstructed count does not fit in uint32",
            "frame_byte_counts",
            HEADER_SIZE,
            "Every reconstructed count MUST fit in uint32",
        )
    return counts


def header_from_head(head: ParsedHead) -> HeaderBlob:
    """Build the blob of a parsed, checked head."""
    return HeaderBlob(head.layout, head.tile_byte_counts)


def check_against_head(blob: HeaderBlob, head: ParsedHead) -> None:
    """Compare every value a blob duplicates with the file's IFD.

    Raises:
        HeaderMismatchError: a value differs; the message names both fields.
    """
    a, b = blob.layout, head.layout
    pairs = (
        ("image_width", "ImageWidth", a.image_width, b.image_width),
        ("image_length", "ImageLength", a.image_length, b.image_length),
        ("time_count", "TimeCount", a.time_count, b.time_count),
        ("tile_width", "TileWidth", a.tile_width, b.tile_width),
        ("tile_length", "TileLength", a.tile_length, b.tile_length),
        ("samples_per_pixel", "SamplesPerPixel", a.samples_per_pixel, b.samples_per_pixel),
        ("bits_per_sample", "BitsPerSample", a.encoding.bits_per_sample, b.encoding.bits_per_sample),
        ("sample_format", "SampleFormat", a.encoding.sample_format, b.encoding.sample_format),
        ("frame_unit", "FrameUnit", a.frame_unit, b.frame_unit),
    )
    rule = "Every duplicated value MUST match"
    for blob_name, tag, x, y in pairs:
        if x != y:
            raise HeaderMismatchError(f"header blob {blob_name} is {x}, the file's {tag} is {y}", field=blob_name, rule=rule)
    if blob.frame_byte_counts.size != head.tile_byte_counts.size:
        raise HeaderMismatchError(
            f"header blob has {blob.frame_byte_counts.size} frame byte counts, the file's TileByteCounts has {head.tile_byte_counts.size}",
            field="frame_byte_counts",
            rule="frame_byte_counts and TileByteCounts MUST each contain N entries",
        )
    bad = np.nonzero(blob.frame_byte_counts != head.tile_byte_counts)[0]
    if bad.size:
        i = int(bad[0])
        raise HeaderMismatchError(
            f"header blob frame_byte_counts[{i}] is {int(blob.frame_byte_counts[i])}, "
            f"the file's TileByteCounts[{i}] is {int(head.tile_byte_counts[i])}",
            field="frame_byte_counts",
            rule=rule,
        )


def check_blob_fits(blob: HeaderBlob, file_size: int, *, where: str = "the file") -> None:
    """Refuse a blob whose frames cannot fit a file of ``file_size`` bytes, before any frame is read.

    The blob places the last frame's end at ``trailer_offset``; a shorter
    file is truncated or is not the blob's file (a blob from another file
    would otherwise surface as an OpenZL corruption error). The trailer's own
    size is not checked: a reader MUST NOT use the trailer to read frames.

    Raises:
        HeaderMismatchError: the file is too short for the blob's frames.
    """
    end = blob.trailer_offset
    if file_size < end:
        raise HeaderMismatchError(
            f"the header blob does not fit {where}: the end of the last frame is at byte {end}, but the file has {file_size} bytes "
            "(a truncated file, the blob of another file, or of this one before it was rewritten; rumi header FILE builds the right one)",
            field="frame_byte_counts",
            rule="The blob's frame byte counts MUST equal the file's TileByteCounts",
        )


def build_header(path: str | os.PathLike[str], *, limits: Limits = DEFAULT_LIMITS, timeout: float | None = None) -> bytes:
    """Create the header blob of a finalized ``.rumi`` file.

    The head is parsed with every check of :func:`rumi_core.ifd.decode_head`,
    the trailer is checked, and the file must end exactly where the trailer
    does; only then is the blob produced from the IFD's values. ``timeout`` is
    the total seconds a remote file may take (:func:`rumi_core.sources.deadline`).

    Raises:
        InvalidFileError: the file is not a compliant rumi file.
        ResourceLimitError: a size the file declares (``N``, the trailer's
            band texts or time coordinates) exceeds ``limits``.
        SourceError: the file cannot be read.
    """
    from rumi_core.sources import deadline, open_source
    from rumi_core.structure import read_structure

    source, _ = open_source(os.fspath(path))
    try:
        with deadline(source, timeout):
            structure = read_structure(source, limits=limits)
    finally:
        source.close()
    blob = header_from_head(structure.head)
    check_against_head(blob, structure.head)
    return blob.to_bytes()
