"""Take a valid file, trailer or header blob apart and rebuild it with one rule broken.

A validator test needs input that is consistent in every respect but one: a
file whose ``TileOffsets`` still match its frames after a frame was replaced,
or a trailer whose ``time_bits`` is minimal although its residuals were
crafted by hand. These helpers rebuild such bytes from their parts.

They follow the specification's arithmetic directly and never call the
encoders and decoders of :mod:`rumi_core`, so a test may use them as an
independent oracle.

>>> pack_bits([1, 2, 3], 2).hex()
'39'
>>> pack_bits([1], 1, spare=0b1).hex()
'03'
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence


TYPE_DTYPE = {3: "<u2", 4: "<u4", 12: "<f8", 16: "<u8"}
"""IFD type code to the little-endian dtype of its values."""

_FILE_HEADER = struct.Struct("<4sHHQ")
_ENTRY = struct.Struct("<HHQ8s")
_U64 = struct.Struct("<Q")
_IFD_START = 16
_TIME_FIELDS = struct.Struct("<BBqqI")
_BLOB = struct.Struct("<IHIIIHHHBBBIB")
_DAY = 86400


def pack_bits(values: Sequence[int], bits: int, *, spare: int = 0) -> bytes:
    """Pack ``values`` at ``bits`` bits each (*Bit-packed arrays*).

    ``spare`` is OR-ed into the unused high bits of the final byte, to break
    the rule that they are zero; it is ignored when there are none.
    """
    acc = 0
    for i, v in enumerate(values):
        acc |= int(v) << (i * bits)
    used = len(values) * bits
    size = (used + 7) // 8
    if size and used % 8:
        acc |= (int(spare) << used) & ((1 << (size * 8)) - 1)
    return acc.to_bytes(size, "little")


def _zigzag(x: int) -> int:
    return 2 * x if x >= 0 else -2 * x - 1


def flip_bit(data: bytes, offset: int, bit: int = 0) -> bytes:
    """Return ``data`` with one bit of the byte at ``offset`` inverted."""
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


# --------------------------------------------------------------------------- #
# The file: header, IFD, external values, frames, trailer
# --------------------------------------------------------------------------- #


@dataclass
class RawEntry:
    """One IFD entry with its values, and knobs to store it wrongly."""

    tag: int
    type: int
    values: list[int] | list[float]
    """The decoded values; encoded with the dtype of ``type`` (``<u2`` for unknown types)."""
    count: int | None = None
    """The count field; None writes ``len(values)``."""
    fill: int = 0
    """The byte written into the unused bytes of an inline value."""
    external: bool | None = None
    """Force the value out of (True) or into (False) the entry; None decides by size."""
    offset: int | None = None
    """Write this file offset for an external value instead of where it really is."""

    def encoded(self) -> bytes:
        """The value bytes, without padding."""
        dtype = TYPE_DTYPE.get(self.type, "<u2")
        return np.asarray(self.values, dtype=dtype).tobytes()


@dataclass
class FileParts:
    """Every part of a ``.rumi`` file, rebuilt canonically by :meth:`to_bytes`.

    With ``auto_offsets`` (the default), ``TileByteCounts`` and ``TileOffsets``
    are recomputed from :attr:`frames` and where they land, so a change to any
    other part leaves the IFD consistent with the frame data.
    """

    entries: list[RawEntry]
    frames: list[bytes]
    trailer: bytes
    magic: bytes = b"RUMI"
    version: int = 1
    reserved: int = 0
    ifd_offset: int = 16
    entry_count: int | None = None
    """The IFD's entry-count field; None writes ``len(entries)``."""
    next_ifd: int = 0
    gaps: dict[int, int] = field(default_factory=dict)
    """Zero bytes inserted before the external value of a tag."""
    padding: int = 0
    """Zero bytes between the last external value and the first frame."""
    frame_order: list[int] | None = None
    """Physical order of the frames; None stores them in frame-index order."""
    auto_offsets: bool = True

    @classmethod
    def from_bytes(cls, data: bytes) -> FileParts:
        """Split a structurally valid file into its parts."""
        (count,) = _U64.unpack_from(data, _IFD_START)
        entries = []
        for i in range(count):
            tag, typ, n, raw = _ENTRY.unpack_from(data, _IFD_START + 8 + 20 * i)
            dtype = np.dtype(TYPE_DTYPE[typ])
            size = n * dtype.itemsize
            where = _U64.unpack(raw)[0] if size > 8 else None
            buf = raw[:size] if where is None else data[where : where + size]
            entries.append(RawEntry(tag, typ, np.frombuffer(buf, dtype=dtype).tolist()))
        parts = cls(entries, [], b"")
        offsets = [int(v) for v in parts.entry(324).values]
        counts = [int(v) for v in parts.entry(325).values]
        parts.frames = [data[o : o + c] for o, c in zip(offsets, counts, strict=True)]
        parts.trailer = data[offsets[-1] + counts[-1] :]
        return parts

    def copy(self) -> FileParts:
        """A deep copy, to mutate freely."""
        return copy.deepcopy(self)

    def entry(self, tag: int) -> RawEntry:
        """The first entry with ``tag``."""
        for e in self.entries:
            if e.tag == tag:
                return e
        raise KeyError(tag)

    @property
    def base_frame_offset(self) -> int:
        """Where :meth:`to_bytes` puts the first frame."""
        return self._layout()[1]

    def external_offsets(self) -> dict[int, int]:
        """Where :meth:`to_bytes` puts each external value, by tag."""
        where, _ = self._layout()
        return {e.tag: at for e, at in zip(self.entries, where, strict=True) if at is not None}

    def _layout(self) -> tuple[list[int | None], int]:
        cursor = _IFD_START + 8 + 20 * len(self.entries) + 8
        where: list[int | None] = []
        for e in self.entries:
            size = (self.count_of(e) if e.tag in (324, 325) else len(e.values)) * np.dtype(TYPE_DTYPE.get(e.type, "<u2")).itemsize
            if e.external if e.external is not None else size > 8:
                cursor += self.gaps.get(e.tag, 0)
                where.append(cursor)
                cursor += size
            else:
                where.append(None)
        return where, cursor + self.padding

    def count_of(self, e: RawEntry) -> int:
        """How many values :meth:`to_bytes` stores for ``e``."""
        if self.auto_offsets and e.tag in (324, 325):
            return len(self.frames)
        return len(e.values)

    def frame_offsets(self) -> list[int]:
        """Offset of each frame, in frame-index order, as :meth:`to_bytes` places them."""
        _, base = self._layout()
        order = self.frame_order if self.frame_order is not None else list(range(len(self.frames)))
        offsets = [0] * len(self.frames)
        cursor = base
        for i in order:
            offsets[i] = cursor
            cursor += len(self.frames[i])
        return offsets

    def to_bytes(self) -> bytes:
        """Assemble the file."""
        where, base = self._layout()
        with_offsets = {324: self.frame_offsets(), 325: [len(f) for f in self.frames]} if self.auto_offsets else {}
        head = [
            _FILE_HEADER.pack(self.magic, self.version, self.reserved, self.ifd_offset),
            _U64.pack(len(self.entries) if self.entry_count is None else self.entry_count),
        ]
        external = bytearray()
        external_start = _IFD_START + 8 + 20 * len(self.entries) + 8
        for e, at in zip(self.entries, where, strict=True):
            values = with_offsets.get(e.tag, e.values)
            data = RawEntry(e.tag, e.type, values).encoded()
            count = len(values) if e.count is None else e.count
            if at is None:
                inline = data + bytes([e.fill]) * (8 - len(data))
            else:
                pad = at - external_start - len(external)
                external += bytes(pad) + data
                inline = _U64.pack(at if e.offset is None else e.offset)
            head.append(_ENTRY.pack(e.tag, e.type, count, inline))
        head.append(_U64.pack(self.next_ifd))
        head.append(bytes(external))
        head.append(bytes(self.padding))
        order = self.frame_order if self.frame_order is not None else list(range(len(self.frames)))
        out = b"".join(head) + b"".join(self.frames[i] for i in order) + self.trailer
        assert len(b"".join(head)) == base
        return out


def value_offset(data: bytes, tag: int, index: int = 0) -> int:
    """Return the file offset of value ``index`` of ``tag``, inline or external."""
    (count,) = _U64.unpack_from(data, _IFD_START)
    for i in range(count):
        at = _IFD_START + 8 + 20 * i
        got, typ, n, raw = _ENTRY.unpack_from(data, at)
        if got != tag:
            continue
        width = np.dtype(TYPE_DTYPE[typ]).itemsize
        if n * width <= 8:
            return at + 12 + index * width
        return int(_U64.unpack(raw)[0]) + index * width
    raise KeyError(tag)


def patch_value(data: bytes, tag: int, index: int, value: float) -> bytes:
    """Overwrite value ``index`` of ``tag`` in place, in the tag's own type."""
    (count,) = _U64.unpack_from(data, _IFD_START)
    for i in range(count):
        got, typ, _, _ = _ENTRY.unpack_from(data, _IFD_START + 8 + 20 * i)
        if got == tag:
            at = value_offset(data, tag, index)
            raw = np.asarray([value], dtype=TYPE_DTYPE[typ]).tobytes()
            return data[:at] + raw + data[at + len(raw) :]
    raise KeyError(tag)


# --------------------------------------------------------------------------- #
# The trailer
# --------------------------------------------------------------------------- #


@dataclass
class TrailerParts:
    """A trailer given by its band texts and coordinates (in ``time_scale`` units).

    Every field left None is derived as the specification requires; set one
    to break that rule while the others stay consistent.
    """

    texts: list[bytes]
    coords: list[int]
    time_type: int = 2
    time_scale: int = 1
    time_epoch: int | None = None
    time_step: int | None = None
    time_bits: int | None = None
    packed: list[int] | None = None
    """The packed residuals; None derives them from the coordinates."""
    spare: int = 0
    """Bits OR-ed into the unused bits of the last residual byte."""
    magic: int = 0x4C494154
    version: int = 1
    extra: bytes = b""
    """Bytes appended after the residuals."""

    @classmethod
    def for_seconds(cls, texts: Sequence[str], seconds: Sequence[int], *, time_type: int = 2) -> TrailerParts:
        """The canonical trailer of coordinates given in seconds."""
        scale = _DAY if all(s % _DAY == 0 for s in seconds) else 1
        return cls([t.encode() for t in texts], [s // scale for s in seconds], time_type=time_type, time_scale=scale)

    def fields(self) -> tuple[int, int, int, list[int]]:
        """``(time_epoch, time_step, time_bits, packed)`` as they will be written."""
        c = self.coords
        epoch = c[0] if self.time_epoch is None else self.time_epoch
        if self.time_step is not None:
            step = self.time_step
        elif len(c) < 2:
            step = 0
        else:
            num, den = c[-1] - c[0], len(c) - 1
            step = (2 * num + den) // (2 * den)  # nearest, halves toward +inf
        packed = self.packed if self.packed is not None else [_zigzag(v - (epoch + i * step)) for i, v in enumerate(c)]
        bits = max(packed).bit_length() if self.time_bits is None else self.time_bits
        return epoch, step, bits, packed

    def to_bytes(self) -> bytes:
        """Assemble the trailer."""
        epoch, step, bits, packed = self.fields()
        out = [struct.pack("<IH", self.magic, self.version)]
        for t in self.texts:
            out.append(struct.pack("<H", len(t)) + t)
        out.append(_TIME_FIELDS.pack(self.time_type, bits, epoch, step, self.time_scale))
        out.append(pack_bits(packed, min(bits, 64), spare=self.spare))
        out.append(self.extra)
        return b"".join(out)


# --------------------------------------------------------------------------- #
# The header blob
# --------------------------------------------------------------------------- #


@dataclass
class BlobParts:
    """A header blob given by its fields and frame byte counts.

    ``count_min``, ``count_bits`` and the residuals are derived from
    ``counts`` unless set.
    """

    image_width: int
    image_length: int
    time_count: int
    tile_width: int
    tile_length: int
    samples_per_pixel: int
    bits_per_sample: int
    sample_format: int
    frame_unit: int
    counts: list[int]
    magic: int = 0x45564F4C
    version: int = 1
    count_min: int | None = None
    count_bits: int | None = None
    residuals: list[int] | None = None
    spare: int = 0
    """Bits OR-ed into the unused bits of the last byte."""
    extra: bytes = b""
    """Bytes appended after the packed counts."""

    @classmethod
    def from_bytes(cls, data: bytes, counts: Sequence[int]) -> BlobParts:
        """The fields of a blob, with the byte counts given separately."""
        magic, version, width, length, times, tile_w, tile_l, spp, bps, fmt, unit, _, _ = _BLOB.unpack_from(data)
        return cls(width, length, times, tile_w, tile_l, spp, bps, fmt, unit, list(counts), magic=magic, version=version)

    def to_bytes(self) -> bytes:
        """Assemble the blob."""
        cmin = min(self.counts) if self.count_min is None else self.count_min
        residuals = self.residuals if self.residuals is not None else [c - cmin for c in self.counts]
        bits = max(residuals).bit_length() if self.count_bits is None else self.count_bits
        fixed = _BLOB.pack(
            self.magic, self.version, self.image_width, self.image_length, self.time_count,
            self.tile_width, self.tile_length, self.samples_per_pixel, self.bits_per_sample,
            self.sample_format, self.frame_unit, cmin, bits,
        )  # fmt: skip
        return fixed + pack_bits(residuals, bits, spare=self.spare) + self.extra
