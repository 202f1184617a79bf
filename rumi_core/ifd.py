"""The file header and the fixed IFD: everything before the first frame.

Specification sections *File header*, *Fixed IFD*, *Placement* and *Deriving
base_frame_offset*. A file starts with a 16-byte header (``RUMI``, version 1,
reserved 0, ``ifd_offset`` 16), then one IFD of exactly 13 entries in rising
tag order (276 bytes), then the values larger than 8 bytes in rising tag order
without gaps. Frame data starts right after, at ``base_frame_offset``, which
depends on ``B`` and ``N`` only.

The head's bytes are a pure function of the :class:`~rumi_core.layout.Layout`,
the :class:`~rumi_core.georef.Georeferencing` and the frame byte counts, which
is what lets separate workers produce the parts of a file
(:func:`encode_head`). :func:`decode_head` checks every MUST of these sections
and reports the tag and byte offset of the first violation.

>>> base_frame_offset(samples_per_pixel=4, frame_count=192)
2756
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np

from rumi_core.encodings import RESERVED_PAIRS, encoding_for_pair
from rumi_core.errors import InvalidFileError, InvalidInputError
from rumi_core.georef import Georeferencing
from rumi_core.layout import Layout
from rumi_core.limits import DEFAULT_LIMITS, Limits

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from numpy.typing import NDArray

    from rumi_core.encodings import SampleEncoding

__all__ = [
    "FILE_MAGIC",
    "FILE_VERSION",
    "HEAD_FIXED_SIZE",
    "IFD_OFFSET",
    "ParsedHead",
    "TAGS",
    "base_frame_offset",
    "decode_head",
    "encode_head",
    "file_kind",
    "frame_offsets",
]

FILE_MAGIC = b"RUMI"
FILE_VERSION = 1
IFD_OFFSET = 16
ENTRY_COUNT = 13
IFD_SIZE = 8 + 20 * ENTRY_COUNT + 8
HEAD_FIXED_SIZE = IFD_OFFSET + IFD_SIZE
"""292: the file header plus the IFD, before any external value."""

SHORT, LONG, DOUBLE, LONG8 = 3, 4, 12, 16
_TYPE_CODE = {SHORT: "<u2", LONG: "<u4", DOUBLE: "<f8", LONG8: "<u8"}
_TYPE_NAME = {SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE", LONG8: "LONG8"}

TAGS: tuple[tuple[int, str, int], ...] = (
    (256, "ImageWidth", LONG),
    (257, "ImageLength", LONG),
    (258, "BitsPerSample", SHORT),
    (277, "SamplesPerPixel", SHORT),
    (322, "TileWidth", SHORT),
    (323, "TileLength", SHORT),
    (324, "TileOffsets", LONG8),
    (325, "TileByteCounts", LONG),
    (339, "SampleFormat", SHORT),
    (34264, "ModelTransformationTag", DOUBLE),
    (34735, "GeoKeyDirectoryTag", SHORT),
    (65000, "FrameUnit", SHORT),
    (65001, "TimeCount", LONG),
)
"""``(tag, name, type)`` of the 13 entries, in the required order."""

_FILE_HEADER = struct.Struct("<4sHHQ")
_ENTRY = struct.Struct("<HHQ8s")
_U64 = struct.Struct("<Q")


def base_frame_offset(*, samples_per_pixel: int, frame_count: int) -> int:
    """Return the byte where frame data starts, from ``B`` and ``N`` alone."""
    b, n = samples_per_pixel, frame_count
    external = (2 * b if b >= 5 else 0) + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0) + (2 * b if b >= 5 else 0) + 128 + 32
    return HEAD_FIXED_SIZE + external


def _exact_sum(counts: NDArray[np.uint64]) -> int:
    """The sum of ``counts`` as a Python integer, however large.

    NumPy sums uint64 modulo 2**64. When the largest count times their number
    fits in 64 bits (always for a blob's uint32 counts: fewer than 2**32 of
    them), that sum is exact and 40x faster than summing Python integers,
    which remains the path for anything else.
    """
    if not counts.size:
        return 0
    if int(counts.max()) * counts.size <= 0xFFFF_FFFF_FFFF_FFFF:
        return int(counts.sum(dtype=np.uint64))
    return int(counts.sum(dtype=object))


def end_of_frames(base: int, frame_byte_counts: NDArray[np.uint64]) -> int:
    """The offset after the last frame (the trailer's), exact however many frames there are.

    Raises:
        InvalidInputError: it does not fit in uint64 (*Offset reconstruction*: every reconstructed offset MUST).
    """
    return _checked_offset(base + _exact_sum(frame_byte_counts))


def _checked_offset(offset: int) -> int:
    if offset > 0xFFFF_FFFF_FFFF_FFFF:
        raise InvalidInputError("a reconstructed offset does not fit in uint64", field="TileOffsets")
    return offset


def uniform_end_of_frames(base: int, count: int, frame_count: int) -> int:
    """:func:`end_of_frames` of ``frame_count`` frames of ``count`` bytes each."""
    return _checked_offset(base + count * frame_count)


def frame_offsets(base: int, frame_byte_counts: NDArray[np.uint64] | Sequence[int]) -> NDArray[np.uint64]:
    """Return ``N + 1`` offsets: every frame's start, then the trailer's.

    Raises:
        InvalidInputError: an offset does not fit in uint64.
    """
    counts = np.asarray(frame_byte_counts, dtype=np.uint64)
    end_of_frames(base, counts)
    out = np.empty(counts.size + 1, dtype=np.uint64)
    out[0] = base
    np.cumsum(counts, out=out[1:])
    out[1:] += np.uint64(base)
    return out


def _values(layout: Layout, georef: Georeferencing, counts: NDArray[np.uint64]) -> dict[int, NDArray[np.generic]]:
    b = layout.samples_per_pixel
    enc = layout.encoding
    n = layout.frame_count
    offsets = frame_offsets(base_frame_offset(samples_per_pixel=b, frame_count=n), counts)[:-1]
    matrix, keys = georef.to_tags()
    raw = {
        256: [layout.image_width],
        257: [layout.image_length],
        258: [enc.bits_per_sample] * b,
        277: [b],
        322: [layout.tile_width],
        323: [layout.tile_length],
        324: offsets,
        325: counts,
        339: [enc.sample_format] * b,
        34264: matrix,
        34735: keys,
        65000: [layout.frame_unit],
        65001: [layout.time_count],
    }
    return {tag: np.asarray(raw[tag], dtype=_TYPE_CODE[typ]) for tag, _, typ in TAGS}


def encode_head(layout: Layout, georef: Georeferencing, tile_byte_counts: Sequence[int] | NDArray[np.integer]) -> bytes:
    """Return the canonical bytes from offset 0 to ``base_frame_offset``.

    Raises:
        InvalidInputError: the number of byte counts is not ``N``, or a count
            is zero or above uint32.
    """
    counts = np.asarray(tile_byte_counts, dtype=np.int64)
    n = layout.frame_count
    if counts.shape != (n,):
        raise InvalidInputError(f"expected {n} frame byte counts, got {counts.size}", field="TileByteCounts")
    if counts.size and (counts.min() <= 0 or counts.max() > 0xFFFF_FFFF):
        raise InvalidInputError("every frame byte count MUST be greater than zero and fit in uint32", field="TileByteCounts")
    values = _values(layout, georef, counts.astype(np.uint64))
    base = base_frame_offset(samples_per_pixel=layout.samples_per_pixel, frame_count=n)
    entries = []
    external = []
    cursor = HEAD_FIXED_SIZE
    for tag, _, typ in TAGS:
        data = values[tag].tobytes()
        if len(data) <= 8:
            inline = data.ljust(8, b"\x00")
        else:
            inline = _U64.pack(cursor)
            external.append(data)
            cursor += len(data)
        entries.append(_ENTRY.pack(tag, typ, values[tag].size, inline))
    assert cursor == base, (cursor, base)
    return b"".join(
        [
            _FILE_HEADER.pack(FILE_MAGIC, FILE_VERSION, 0, IFD_OFFSET),
            _U64.pack(ENTRY_COUNT),
            *entries,
            _U64.pack(0),
            *external,
        ]
    )


@dataclass(frozen=True)
class ParsedHead:
    """What a validated head says about a file."""

    layout: Layout
    georef: Georeferencing
    tile_byte_counts: NDArray[np.uint64]
    """``TileByteCounts``, in frame-index order."""
    base_frame_offset: int

    @property
    def offsets(self) -> NDArray[np.uint64]:
        """Every frame's offset followed by the trailer offset."""
        return frame_offsets(self.base_frame_offset, self.tile_byte_counts)

    @property
    def trailer_offset(self) -> int:
        """The byte just past the last frame."""
        return int(self.offsets[-1])


def _fail(msg: str, *, field: str, rule: str, offset: int | None = None) -> InvalidFileError:
    return InvalidFileError(msg, field=field, rule=rule, offset=offset)


class _Entry(NamedTuple):
    """One IFD entry as stored, with the byte offset it starts at."""

    tag: int
    name: str
    typ: int
    value_count: int
    raw: bytes
    at: int


_KNOWN_STARTS: Final = (
    (FILE_MAGIC, "a rumi file"),
    (b"LOVE", "a rumi header blob"),  # rumi_core.header.HEADER_MAGIC, little-endian
    (b"{", "JSON text"),
    (b"II*\x00", "a little-endian TIFF"),
    (b"MM\x00*", "a big-endian TIFF"),
    (b"II+\x00", "a BigTIFF"),
    (b"MM\x00+", "a BigTIFF"),
)
"""Starts of files often given where another of them is expected, and what they are."""


def file_kind(start: bytes) -> str | None:
    r"""What a file whose first bytes are ``start`` is, if it is one of :data:`_KNOWN_STARTS`; None otherwise.

    For messages about a file given in the wrong place: a GeoTIFF where a
    rumi file is read, a rumi file where its header blob is, a blob where an item is.

    >>> file_kind(b"II*\x00\x08"), file_kind(b' {"type"'), file_kind(b"LOVE"), file_kind(b"\x89PNG")
    ('a little-endian TIFF', 'JSON text', 'a rumi header blob', None)
    """
    return next((name for prefix, name in _KNOWN_STARTS if start.lstrip().startswith(prefix)), None)


def _looks_like(start: bytes) -> str:
    """``": the file is ..."`` for a file that starts like one of :data:`_KNOWN_STARTS`, else ``""``.

    >>> _looks_like(b'{"type"'), _looks_like(FILE_MAGIC)  # a truncated rumi file is said to be short, no more
    (': the file is JSON text, not a rumi file', '')
    """
    what = file_kind(start)
    return f": the file is {what}, not a rumi file" if what and what != "a rumi file" else ""


def _check_file_header(fixed: bytes) -> None:
    """Check the 16-byte file header, the IFD's entry count and its next-IFD offset (*File header*, *Fixed IFD*)."""
    magic, version, reserved, ifd_offset = _FILE_HEADER.unpack_from(fixed, 0)
    rule_hdr = "A reader MUST reject any other value"
    if magic != FILE_MAGIC:
        raise _fail(f"magic is {magic!r}, expected b'RUMI'{_looks_like(magic)}", field="magic", rule=rule_hdr, offset=0)
    if version != FILE_VERSION:
        raise _fail(f"version is {version}, expected 1", field="version", rule=rule_hdr, offset=4)
    if reserved != 0:
        raise _fail(f"reserved is {reserved}, expected 0", field="reserved", rule=rule_hdr, offset=6)
    if ifd_offset != IFD_OFFSET:
        raise _fail(f"ifd_offset is {ifd_offset}, expected 16", field="ifd_offset", rule=rule_hdr, offset=8)
    (count,) = _U64.unpack_from(fixed, IFD_OFFSET)
    if count != ENTRY_COUNT:
        raise _fail(
            f"the IFD has {count} entries, expected 13",
            field="IFD entry count",
            rule="A rumi IFD MUST contain exactly the tags below",
            offset=IFD_OFFSET,
        )
    (next_ifd,) = _U64.unpack_from(fixed, HEAD_FIXED_SIZE - 8)
    if next_ifd != 0:
        raise _fail(
            f"the next-IFD offset is {next_ifd}, expected 0",
            field="next IFD offset",
            rule="contains exactly one rumi IFD",
            offset=HEAD_FIXED_SIZE - 8,
        )


def _read_entries(fixed: bytes) -> list[_Entry]:
    """The 13 entries, each checked for its tag and type (*Fixed IFD*)."""
    entries = []
    for i, (tag, name, typ) in enumerate(TAGS):
        at = IFD_OFFSET + 8 + 20 * i
        got_tag, got_type, n, raw = _ENTRY.unpack_from(fixed, at)
        if got_tag != tag:
            raise _fail(
                f"IFD entry {i} has tag {got_tag}, expected {tag} ({name})",
                field=name,
                rule="A rumi IFD MUST contain exactly the tags below, in rising tag order",
                offset=at,
            )
        if got_type != typ:
            raise _fail(f"{name} has type {got_type}, expected {typ} ({_TYPE_NAME[typ]})", field=name, rule="Fixed IFD type", offset=at + 2)
        entries.append(_Entry(tag, name, typ, n, raw, at))
    return entries


class _Scalars(NamedTuple):
    """The count-1 entries, read in tag order (``FrameUnit`` before ``TimeCount``).

    Named as the spec and :class:`~rumi_core.layout.Layout` name them: they are the layout's fields but its encoding.
    """

    image_width: int
    image_length: int
    samples_per_pixel: int
    tile_width: int
    tile_length: int
    frame_unit: int
    time_count: int


_POSITIVE_SCALARS = frozenset({"ImageWidth", "ImageLength", "TimeCount", "TileWidth", "TileLength", "SamplesPerPixel"})


def _check_padding(entry: _Entry, size: int) -> None:
    """Refuse an inline value of ``size`` bytes whose unused bytes are not zero."""
    if entry.raw[size:] != b"\x00" * (8 - size):
        raise _fail(
            f"unused bytes of the inline {entry.name} value are not zero",
            field=entry.name,
            rule="Unused bytes in an inline value MUST be zero",
            offset=entry.at + 12 + size,
        )


def _scalar(entry: _Entry) -> int:
    """The value of a count-1 entry, checked for its count, padding and (where required) being non-zero."""
    if entry.value_count != 1:
        name, count = entry.name, entry.value_count
        raise _fail(f"{name} has count {count}, expected 1", field=name, rule="Fixed IFD count", offset=entry.at + 4)
    width = np.dtype(_TYPE_CODE[entry.typ]).itemsize
    _check_padding(entry, width)
    value = int(np.frombuffer(entry.raw[:width], dtype=_TYPE_CODE[entry.typ])[0])
    if value == 0 and entry.name in _POSITIVE_SCALARS:
        raise _fail(f"{entry.name} is 0", field=entry.name, rule=f"{entry.name} MUST be greater than zero", offset=entry.at + 12)
    return value


def _frame_count(entries: Sequence[_Entry], scalars: _Scalars) -> int:
    """``N``, once the per-band and per-frame counts agree with ``B`` and the frame unit (*Fixed IFD*, *Validating frame_unit*)."""
    b = scalars.samples_per_pixel
    # Expected counts and the external layout follow from B and the frame unit.
    expected_counts = {258: b, 339: b, 34264: 16, 34735: 16}
    for idx in (2, 8, 9, 10):
        tag, name, _, n, _, at = entries[idx]
        if n != expected_counts[tag]:
            want = "B" if tag in (258, 339) else "16"
            raise _fail(
                f"{name} has count {n}, expected {want} = {expected_counts[tag]}", field=name, rule="Fixed IFD count", offset=at + 4
            )
    try:
        from rumi_core.frame_units import parse_frame_unit

        unit = parse_frame_unit(scalars.frame_unit, bands=b, times=scalars.time_count)
    except InvalidInputError as err:
        raise _fail(err.message, field="FrameUnit", rule=err.rule or "Validating frame_unit", offset=entries[11].at + 12) from err
    tiles = -(-scalars.image_width // scalars.tile_width) * -(-scalars.image_length // scalars.tile_length)
    n_frames = tiles * b * scalars.time_count if unit.holds == "tile" else tiles
    for idx in (6, 7):
        _, name, _, n, _, at = entries[idx]
        if n != n_frames:
            holds = "g * B * T" if unit.holds == "tile" else "g"
            raise _fail(
                f"{name} has {n} entries, frame_unit {scalars.frame_unit} needs {holds} = {n_frames}",
                field=name,
                rule="A reader MUST reject a file when either count is wrong",
                offset=at + 4,
            )
    return n_frames


def _read_values(entries: Sequence[_Entry], external: bytes) -> dict[int, NDArray[np.generic]]:
    """Every entry's values: inline ones zero-padded, external ones after the IFD in tag order (*Placement*)."""
    values: dict[int, NDArray[np.generic]] = {}
    cursor = HEAD_FIXED_SIZE
    for entry in entries:
        dtype = np.dtype(_TYPE_CODE[entry.typ])
        size = entry.value_count * dtype.itemsize
        if size <= 8:
            _check_padding(entry, size)
            values[entry.tag] = np.frombuffer(entry.raw[:size], dtype=dtype)
            continue
        (where,) = _U64.unpack(entry.raw)
        if where != cursor:
            raise _fail(
                f"{entry.name} is stored at {where}, expected {cursor}",
                field=entry.name,
                rule="Larger values MUST follow the IFD in rising tag order, without gaps",
                offset=entry.at + 12,
            )
        start = cursor - HEAD_FIXED_SIZE
        values[entry.tag] = np.frombuffer(external[start : start + size], dtype=dtype)
        cursor += size
    return values


def _sample_encoding(values: dict[int, NDArray[np.generic]], at: int) -> SampleEncoding:
    """The one ``(SampleFormat, BitsPerSample)`` pair of every band (*Sample encodings*)."""
    bits, formats = values[258], values[339]
    pair = (int(formats[0]), int(bits[0]))
    if not (bits == bits[0]).all() or not (formats == formats[0]).all():
        raise _fail(
            "BitsPerSample and SampleFormat differ between bands",
            field="BitsPerSample",
            rule="All bands and time steps in a file MUST use the same pair",
        )
    try:
        return encoding_for_pair(*pair)
    except InvalidInputError as err:
        kind = "reserved" if pair in RESERVED_PAIRS else "not listed"
        raise _fail(
            f"(SampleFormat, BitsPerSample) = {pair} is {kind}",
            field="SampleFormat",
            rule="A reader MUST reject any pair not listed",
            offset=at,
        ) from err


def _tile_byte_counts(values: dict[int, NDArray[np.generic]], base: int) -> NDArray[np.uint64]:
    """``TileByteCounts``, each non-zero, with ``TileOffsets`` equal to the offsets they reconstruct (*Offset reconstruction*)."""
    counts = values[325].astype(np.uint64)
    if counts.size and int(counts.min()) == 0:
        first = int(np.argmin(counts))
        raise _fail(f"TileByteCounts[{first}] is 0", field="TileByteCounts", rule="every byte count is greater than zero")
    offsets = frame_offsets(base, counts)
    stored = values[324].astype(np.uint64)
    bad = np.nonzero(stored != offsets[:-1])[0]
    if bad.size:
        i = int(bad[0])
        raise _fail(
            f"TileOffsets[{i}] is {int(stored[i])}, reconstructed offset is {int(offsets[i])}",
            field="TileOffsets",
            rule="A reader MUST reject a file whose TileOffsets do not match the reconstructed offsets in frame-index order",
        )
    return counts


def decode_head(
    read_at: Callable[[int, int], bytes],
    *,
    size: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> ParsedHead:
    """Parse and check the head of a file.

    ``read_at(offset, length)`` returns file bytes; it is called twice: for the
    fixed 292 bytes and for the external values. It must return exactly
    ``length`` bytes, or fewer at the end of the file. ``size`` is the file
    size, when known: the external values are then refused before they are
    read if the file is too short to hold them (*Resource limits*).

    Raises:
        ResourceLimitError: ``N`` exceeds ``limits.max_frames``.
        InvalidFileError: a MUST of *File header*, *Fixed IFD*, *Placement*,
            *Sample encodings*, *Georeferencing* or *Validating frame_unit* is
            broken. The message names the tag and byte offset.
    """
    fixed = read_at(0, HEAD_FIXED_SIZE)
    if len(fixed) < HEAD_FIXED_SIZE:
        raise _fail(
            f"the file is {len(fixed)} bytes, shorter than the 292-byte header and IFD{_looks_like(fixed[:4])}",
            field="file",
            rule="It begins with the rumi file header and contains exactly one rumi IFD",
        )
    _check_file_header(fixed)
    entries = _read_entries(fixed)
    scalars = _Scalars(*(_scalar(entries[i]) for i in (0, 1, 3, 4, 5, 11, 12)))
    n_frames = _frame_count(entries, scalars)

    base = base_frame_offset(samples_per_pixel=scalars.samples_per_pixel, frame_count=n_frames)
    # Resource limits: base derives from counts the file declares (N can reach
    # 2**64), so check it against the file before asking for that many bytes.
    if size is not None and base > size:
        raise _fail(
            f"the file is {size} bytes, but its IFD's external values end at {base}",
            field="file",
            rule="Larger values MUST follow the IFD",
            offset=size,
        )
    limits.check("max_frames", n_frames, "the file's frame count N")
    external = read_at(HEAD_FIXED_SIZE, base - HEAD_FIXED_SIZE) if base > HEAD_FIXED_SIZE else b""
    if len(external) < base - HEAD_FIXED_SIZE:
        raise _fail(
            "the file ends inside the IFD's external values",
            field="file",
            rule="Larger values MUST follow the IFD",
            offset=HEAD_FIXED_SIZE + len(external),
        )
    values = _read_values(entries, external)
    encoding = _sample_encoding(values, entries[8].at)
    try:
        layout = Layout(**scalars._asdict(), encoding=encoding)
    except InvalidInputError as err:
        raise _fail(err.message, field=err.field or "IFD", rule=err.rule or "Fixed IFD") from err

    georef = Georeferencing.from_tags(tuple(float(v) for v in values[34264]), tuple(int(v) for v in values[34735]))
    return ParsedHead(layout, georef, _tile_byte_counts(values, base), base)
