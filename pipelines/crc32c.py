"""CRC-32C (Castagnoli) of bytes, and of a concatenation from its parts' CRCs without their bytes.

GCS reports each object's CRC-32C. A file composed server-side from parts
(:mod:`pipelines.bucket`) is checked against :func:`crc32c_combine` of the
parts' own CRCs, so no byte of it has to be downloaded.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["crc32c_combine", "crc32c_of"]

_CRC32C_POLY: Final = 0x82F63B78
"""CRC-32C (Castagnoli) polynomial, reflected."""


def crc32c_of(data: bytes) -> int:
    """CRC-32C of ``data`` (google-crc32c, the C implementation GCS's clients use)."""
    import google_crc32c

    return int(google_crc32c.value(data))


def _times(matrix: Sequence[int], vector: int) -> int:
    out = 0
    i = 0
    while vector:
        if vector & 1:
            out ^= matrix[i]
        vector >>= 1
        i += 1
    return out


def _square(matrix: Sequence[int]) -> list[int]:
    return [_times(matrix, matrix[n]) for n in range(32)]


@functools.cache
def _zero_operators() -> tuple[tuple[int, ...], ...]:
    """GF(2) operators that append 2**k zero bytes to a CRC-32C, k = 0..63 (zlib's crc32_combine method)."""
    one_bit = [_CRC32C_POLY] + [1 << n for n in range(31)]
    op = _square(_square(_square(one_bit)))  # 8 zero bits: one byte
    ops = [tuple(op)]
    for _ in range(63):
        op = _square(op)
        ops.append(tuple(op))
    return tuple(ops)


def crc32c_combine(crc1: int, crc2: int, length2: int) -> int:
    """CRC-32C of ``a ‖ b`` from ``crc(a)``, ``crc(b)`` and ``len(b)``, without the bytes.

    google-crc32c offers no combine, so this is zlib's ``crc32_combine``
    with the Castagnoli polynomial and precomputed operators: one
    matrix-vector product per set bit of ``length2``.

    >>> a, b = b"head", b"frames"
    >>> crc32c_combine(crc32c_of(a), crc32c_of(b), len(b)) == crc32c_of(a + b)
    True
    """
    ops = _zero_operators()
    k = 0
    while length2:
        if length2 & 1:
            crc1 = _times(ops[k], crc1)
        length2 >>= 1
        k += 1
    return crc1 ^ crc2
