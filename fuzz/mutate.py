"""Structure-aware mutators: break a valid file and blob where the format has structure.

A :class:`Anatomy` records where each part of a seed lies: the 13 IFD entries
and their external values, every frame, the trailer's band texts, time fields
and residuals, and every field of the header blob. A mutator edits the file,
the blob or both at one of those places, with values chosen to hit limits and
boundaries (0, 1, powers of two, type maxima, the original value +/- 1).

:func:`mutate` applies one to four mutators drawn from ``random.Random(key)``,
so an input is a pure function of its seed and key.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rumi_core.header import HeaderBlob
from rumi_core.sources import BytesSource
from rumi_core.structure import read_structure

if TYPE_CHECKING:
    from fuzz.corpus import Seed

__all__ = ["MUTATORS", "Anatomy", "Input", "anatomy", "mutate"]

_ENTRY_AT = 24
_BLOB_FIELDS = (  # (name, offset, width) of the 32-byte blob header
    ("magic", 0, 4), ("version", 4, 2), ("image_width", 6, 4), ("image_length", 10, 4), ("time_count", 14, 4),
    ("tile_width", 18, 2), ("tile_length", 20, 2), ("samples_per_pixel", 22, 2), ("bits_per_sample", 24, 1),
    ("sample_format", 25, 1), ("frame_unit", 26, 1), ("count_min", 27, 4), ("count_bits", 31, 1),
)  # fmt: skip
# The IFD entry index and blob field of each raster value both hold.
_SHARED = (
    (0, "image_width", 4), (1, "image_length", 4), (12, "time_count", 4),
    (4, "tile_width", 2), (5, "tile_length", 2), (11, "frame_unit", 1), (3, "samples_per_pixel", 2),
)  # fmt: skip


@dataclass(frozen=True)
class Anatomy:
    """Where the parts of a valid file and its blob lie."""

    seed: Seed
    entries: tuple[tuple[int, int, int], ...]
    """``(entry offset, count, item size)`` of the 13 IFD entries."""
    externals: tuple[tuple[int, int, int], ...]
    """``(offset, length, item size)`` of every value stored after the IFD."""
    frames: tuple[tuple[int, int], ...]
    """``(offset, length)`` of every frame."""
    trailer: int
    """Offset of the trailer."""
    band_lengths: tuple[int, ...]
    """Offset of each band text's length prefix."""
    time_fields: int
    """Offset of ``time_type``; ``time_bits``, ``time_epoch``, ``time_step`` and ``time_scale`` follow."""


@dataclass(frozen=True)
class Input:
    """One fuzz input: a file, a blob and the mutators that made them."""

    seed: str
    file: bytes
    blob: bytes
    ops: tuple[str, ...]


def anatomy(seed: Seed) -> Anatomy:
    """Locate the parts of a valid seed."""
    structure = read_structure(BytesSource(seed.file))
    head = structure.head
    sizes = {3: 2, 4: 4, 12: 8, 16: 8}
    entries, externals = [], []
    for i in range(13):
        at = _ENTRY_AT + 20 * i
        _, typ, count, raw = struct.unpack_from("<HHQQ", seed.file, at)
        entries.append((at, count, sizes[typ]))
        if count * sizes[typ] > 8:
            externals.append((raw, count * sizes[typ], sizes[typ]))
    offsets = head.offsets
    frames = tuple((int(offsets[i]), int(offsets[i + 1] - offsets[i])) for i in range(len(offsets) - 1))
    trailer = head.trailer_offset
    pos = trailer + 6
    lengths = []
    for _ in range(head.layout.samples_per_pixel):
        lengths.append(pos)
        (n,) = struct.unpack_from("<H", seed.file, pos)
        pos += 2 + n
    HeaderBlob.from_bytes(seed.blob)
    return Anatomy(seed, tuple(entries), tuple(externals), frames, trailer, tuple(lengths), pos)


def _interesting(rng: random.Random, width: int, original: int) -> int:
    top = (1 << (8 * width)) - 1
    choices = [0, 1, 2, 3, 7, 8, 15, 16, 255, 256, 4096, 65535, 65536, 1 << 24, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32,
               (1 << 63) - 1, 1 << 63, top, top >> 1, original + 1, original - 1, original * 2, original // 2,
               rng.getrandbits(8 * width)]  # fmt: skip
    return rng.choice(choices) & top


def _put(buf: bytearray, at: int, width: int, value: int) -> None:
    if at >= 0 and at + width <= len(buf):
        buf[at : at + width] = value.to_bytes(width, "little")


def _get(buf: bytearray, at: int, width: int) -> int:
    return int.from_bytes(buf[at : at + width], "little") if at + width <= len(buf) else 0


def _set(rng: random.Random, buf: bytearray, at: int, width: int) -> None:
    _put(buf, at, width, _interesting(rng, width, _get(buf, at, width)))


Mutator = Callable[[random.Random, Anatomy, bytearray, bytearray], None]


def ifd_entry(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change an IFD entry's tag, type, count or inline value."""
    at, _, _ = rng.choice(a.entries)
    field_at, width = rng.choice(((0, 2), (2, 2), (4, 8), (12, 8), (12, 4), (12, 2)))
    _set(rng, file, at + field_at, width)


def tag_value(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change one element of a value stored after the IFD (BitsPerSample, matrix, GeoKeys, ...)."""
    if not a.externals:
        return ifd_entry(rng, a, file, blob)
    at, length, size = rng.choice(a.externals)
    _set(rng, file, at + size * rng.randrange(length // size), size)
    return None


def tile_byte_counts(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change TileByteCounts[i], and sometimes every later TileOffsets entry to stay consistent."""
    at, count, _ = a.entries[7]
    i = rng.randrange(count)
    where = at + 12 if count == 1 else int.from_bytes(file[at + 12 : at + 20], "little") + 4 * i
    old = _get(file, where, 4)
    _set(rng, file, where, 4)
    if rng.random() < 0.5:
        delta = _get(file, where, 4) - old
        oat, ocount, _ = a.entries[6]
        base = int.from_bytes(file[oat + 12 : oat + 20], "little")
        for j in range(i + 1, ocount):
            _put(file, base + 8 * j, 8, (_get(file, base + 8 * j, 8) + delta) % (1 << 64))


def tile_offsets(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change one TileOffsets entry."""
    at, count, _ = a.entries[6]
    where = at + 12 if count == 1 else int.from_bytes(file[at + 12 : at + 20], "little") + 8 * rng.randrange(count)
    _set(rng, file, where, 8)


def trailer_field(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change the trailer's magic, version, a band text length, a text byte, or a time field."""
    t = a.time_fields
    at, width = rng.choice(
        [(a.trailer, 4), (a.trailer + 4, 2), (t, 1), (t + 1, 1), (t + 2, 8), (t + 10, 8), (t + 18, 4)]
        + [(p, 2) for p in a.band_lengths]
        + [(p + 2, 1) for p in a.band_lengths]
    )
    _set(rng, file, at, width)


def time_residuals(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Flip a bit of the time residuals, or set time_bits and time_step to other widths."""
    t = a.time_fields
    if t + 22 < len(file) and rng.random() < 0.5:
        at = rng.randrange(t + 22, len(file))
        file[at] ^= 1 << rng.randrange(8)
    else:
        _put(file, t + 1, 1, rng.choice((0, 1, 2, 63, 64, 65)))
        _put(file, t + 10, 8, rng.choice((0, 1, 86400, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)))


def frame_bytes(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Flip bits of a frame, overwrite a run, or swap two frames of the same length."""
    offset, length = rng.choice(a.frames)
    if offset + length > len(file):  # cut by an earlier mutator
        return
    choice = rng.random()
    if choice < 0.5:
        for _ in range(rng.randint(1, 4)):
            file[offset + rng.randrange(length)] ^= 1 << rng.randrange(8)
    elif choice < 0.8:
        start = offset + rng.randrange(length)
        run = min(rng.randint(1, 16), offset + length - start)
        file[start : start + run] = bytes([rng.choice((0, 0xFF, rng.getrandbits(8)))]) * run
    else:
        same = [f for f in a.frames if f[1] == length and f[0] != offset]
        if same:
            other, _ = rng.choice(same)
            file[offset : offset + length], file[other : other + length] = file[other : other + length], file[offset : offset + length]


def blob_field(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Change one field of the blob's 32-byte header."""
    _, at, width = rng.choice(_BLOB_FIELDS)
    _set(rng, blob, at, width)


def blob_counts(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Flip a bit of the packed counts, or make every count equal (count_bits = 0)."""
    if len(blob) > 32 and rng.random() < 0.6:
        blob[rng.randrange(32, len(blob))] ^= 1 << rng.randrange(8)
    elif len(blob) >= 32:
        del blob[32:]
        blob[31] = 0
        if rng.random() < 0.5:
            _set(rng, blob, 27, 4)


def truncate(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Cut or extend the file or the blob."""
    buf = file if rng.random() < 0.7 else blob
    if rng.random() < 0.8 and buf:
        del buf[rng.randrange(len(buf)) :]
    else:
        buf.extend(bytes(rng.randint(1, 64)))


def shared_field(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Give a raster field the same new value in the IFD and in the blob, so their agreement holds."""
    entry, name, width = rng.choice(_SHARED)
    at, _, _ = a.entries[entry]
    value = _interesting(rng, width, _get(file, at + 12, width))
    _put(file, at + 12, width, value)
    _put(blob, dict((n, o) for n, o, _ in _BLOB_FIELDS)[name], width, value)


def havoc(rng: random.Random, a: Anatomy, file: bytearray, blob: bytearray) -> None:
    """Overwrite random bytes anywhere in the file or the blob."""
    for _ in range(rng.randint(1, 8)):
        buf = file if rng.random() < 0.8 else blob
        if buf:
            buf[rng.randrange(len(buf))] = rng.getrandbits(8)


MUTATORS: dict[str, Mutator] = {
    f.__name__: f
    for f in (
        ifd_entry, tag_value, tile_byte_counts, tile_offsets, trailer_field, time_residuals, frame_bytes,
        blob_field, blob_counts, truncate, shared_field, havoc,
    )
}  # fmt: skip
"""Every mutator, by name."""


def mutate(a: Anatomy, rng: random.Random) -> Input:
    """Apply one to four mutators to a copy of the seed."""
    file, blob = bytearray(a.seed.file), bytearray(a.seed.blob)
    ops = []
    for _ in range(min(4, 1 + int(rng.expovariate(1.2)))):
        name = rng.choice(tuple(MUTATORS))
        MUTATORS[name](rng, a, file, blob)
        ops.append(name)
    return Input(a.seed.name, bytes(file), bytes(blob), tuple(ops))
