"""Bit-packed arrays of unsigned integers.

Specification section *Bit-packed arrays*. Value ``i`` occupies bits
``i * bits .. i * bits + bits - 1`` of the region, bits numbered from the
least significant bit of each byte. ``n`` values take exactly
``ceil(n * bits / 8)`` bytes, and unused bits of the last byte are zero. With
``bits == 0`` the region is empty and every value is zero.

Both directions are vectorised with :func:`numpy.packbits` and
:func:`numpy.unpackbits` in little bit order, which express this layout
exactly for any width up to 64 bits.

>>> pack([1, 2, 3], 2).hex()
'39'
>>> unpack(bytes.fromhex("39"), 3, 2).tolist()
[1, 2, 3]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rumi_core.errors import RumiError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

__all__ = ["bit_length", "pack", "packed_size", "unpack"]


def bit_length(value: int) -> int:
    """Return the minimum number of bits that represent ``value`` (0 for 0)."""
    return int(value).bit_length()


def packed_size(count: int, bits: int) -> int:
    """Return the size in bytes of ``count`` values of ``bits`` bits each."""
    return (count * bits + 7) // 8


def pack(values: Sequence[int] | NDArray[np.uint64], bits: int) -> bytes:
    """Pack non-negative integers below ``2**bits`` at ``bits`` bits each.

    Raises:
        RumiError: a value does not fit in ``bits`` bits.
    """
    if not 0 <= bits <= 64:
        raise RumiError(f"bit width must be between 0 and 64, got {bits}")
    try:
        arr = np.asarray(values, dtype=np.uint64).reshape(-1)
    except (OverflowError, TypeError, ValueError) as err:
        raise RumiError(f"packed values are integers from 0 to 2**64 - 1: {err}") from err
    if bits == 0 or arr.size == 0:
        if arr.size and arr.any():
            raise RumiError("a value is non-zero but the bit width is 0")
        return b""
    if bits < 64 and arr.size and int(arr.max()) >> bits:
        raise RumiError(f"a value does not fit in {bits} bits")
    as_bytes = arr.astype("<u8").view(np.uint8).reshape(-1, 8)
    as_bits = np.unpackbits(as_bytes, axis=1, bitorder="little")[:, :bits]
    return np.packbits(as_bits.reshape(-1), bitorder="little").tobytes()


def unpack(data: bytes | memoryview, count: int, bits: int) -> NDArray[np.uint64]:
    """Unpack ``count`` values of ``bits`` bits each from ``data``.

    Raises:
        RumiError: ``data`` is not exactly ``ceil(count * bits / 8)`` bytes, or
            the unused bits of its last byte are not zero.
    """
    expected = packed_size(count, bits)
    if len(data) != expected:
        raise RumiError(f"a packed region of {count} x {bits} bits is {expected} bytes, got {len(data)}")
    if bits == 0 or count == 0:
        return np.zeros(count, dtype=np.uint64)
    raw = np.frombuffer(data, dtype=np.uint8)
    used = count * bits
    spare = expected * 8 - used
    if spare and int(raw[-1]) >> (8 - spare):
        raise RumiError("unused bits in the final byte of a packed region are not zero")
    if bits <= 56:
        # Value i starts at bit i * bits, so it lies within the 8 bytes from
        # byte (i * bits) // 8, shifted by (i * bits) % 8 <= 7 (7 + 56 <= 64).
        # Values i, i + 8, i + 16... start exactly ``bits`` bytes apart at the
        # same shift, so each of the 8 phases is one strided little-endian
        # view of the bytes: a shift and a mask per value, with no index array
        # (1.75 million 13- to 17-bit values: 13-15 ms, against 28-30 by gathering).
        padded = np.zeros(expected + 8, dtype=np.uint8)
        padded[:expected] = raw
        values = np.empty(count, dtype=np.uint64)
        mask = np.uint64((1 << bits) - 1)
        for phase in range(min(8, count)):
            first = phase * bits
            lanes = values[phase::8]
            words = np.ndarray(shape=lanes.shape, dtype="<u8", buffer=padded, offset=first // 8, strides=(bits,))
            np.right_shift(words, np.uint64(first % 8), out=lanes)
            lanes &= mask
        return values
    as_bits = np.unpackbits(raw, bitorder="little")[:used].reshape(count, bits)
    padded = np.zeros((count, 64), dtype=np.uint8)
    padded[:, :bits] = as_bits
    return np.packbits(padded, axis=1, bitorder="little").view("<u8").reshape(-1).astype(np.uint64)
