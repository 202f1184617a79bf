"""Sample encodings: the ``(sample_format, bits_per_sample)`` pairs of rumi.

Specification section *Sample encodings*. Only 21 pairs are valid. Each maps to
exactly one NumPy dtype whose item size is the pair's *decoded bytes*:

* the ML float types come from :mod:`ml_dtypes` (bfloat16 and five float8s),
  imported the first time one of their dtypes is asked for: importing
  ml_dtypes costs 0.6-0.9 s of CPU, paid otherwise by every process that
  touches rumi_core (each conversion worker, each CLI call) for types most
  files never use;
* boolean is one decoded byte holding 0 or 1 (``numpy.bool_``);
* complex with 16-bit components has no NumPy scalar type. It is represented
  exactly as the structured dtype ``[("real", "<f2"), ("imag", "<f2")]``: four
  bytes per sample, real part first, each part an IEEE binary16. No arithmetic
  is defined on it, and it is never widened to ``complex64``.

Nothing in rumi_core casts, widens or reinterprets samples to fit a consumer:
:func:`encoding_for_dtype` refuses a dtype that is not one of the 21.

Each encoding also carries its DLPack ``(code, bits, lanes)`` from the
specification's *DLPack representation* table.

>>> encoding_for_pair(1, 16).dtype.str
'<u2'
>>> encoding_for_dtype("bfloat16").sample_format
102
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "COMPLEX32",
    "ENCODINGS",
    "RESERVED_PAIRS",
    "RESERVED_SAMPLE_FORMATS",
    "SampleEncoding",
    "encoding_for_dtype",
    "encoding_for_pair",
]

COMPLEX32 = np.dtype([("real", "<f2"), ("imag", "<f2")])
"""Exact representation of complex samples with IEEE binary16 components."""

# DLPack type codes (dlpack.h, DLDataTypeCode).
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6
_DL_E4M3FN, _DL_E4M3FNUZ, _DL_E5M2, _DL_E5M2FNUZ, _DL_E8M0FNU = 10, 11, 12, 13, 14


@dataclass(frozen=True)
class SampleEncoding:
    """One valid ``(sample_format, bits_per_sample)`` pair."""

    name: str
    """Stable name, also the JSON form (``"uint16"``, ``"bfloat16"``...)."""
    sample_format: int
    """Value of the SampleFormat tag (339)."""
    bits_per_sample: int
    """Value of the BitsPerSample tag (258): the logical width."""
    dlpack: tuple[int, int, int]
    """DLPack ``(code, bits, lanes)`` for exported tensors."""
    numpy_type: np.dtype[Any] | str = field(compare=False, repr=False)
    """The NumPy dtype, or the name of an :mod:`ml_dtypes` type resolved on first use (see :attr:`dtype`)."""

    @property
    def dtype(self) -> np.dtype[Any]:
        """The NumPy dtype of one decoded sample, little-endian."""
        if isinstance(self.numpy_type, str):
            return _ml_dtype(self.numpy_type)
        return self.numpy_type

    @property
    def bytes_per_sample(self) -> int:
        """``bytes_per_sample`` (*Sample encodings*): the bytes one decoded sample occupies, its storage stride."""
        return int(self.dtype.itemsize)

    @property
    def component_bytes(self) -> int:
        """Width of one numeric component: half the sample for complex types."""
        return self.bytes_per_sample // 2 if self.sample_format == 6 else self.bytes_per_sample

    def to_dict(self) -> dict[str, int | str]:
        """Return the JSON form of this encoding."""
        return {
            "name": self.name,
            "sample_format": self.sample_format,
            "bits_per_sample": self.bits_per_sample,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SampleEncoding:
        """Look an encoding up from its JSON form."""
        return encoding_for_pair(int(data["sample_format"]), int(data["bits_per_sample"]))


@functools.cache
def _ml_dtype(name: str) -> np.dtype[Any]:
    import ml_dtypes

    dtype: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name)).newbyteorder("<")
    return dtype


def _enc(name: str, fmt: int, bits: int, dtype: DTypeLike, dl: tuple[int, int, int]) -> SampleEncoding:
    return SampleEncoding(name, fmt, bits, dl, np.dtype(dtype).newbyteorder("<"))


def _ml(name: str, fmt: int, bits: int, dl: tuple[int, int, int]) -> SampleEncoding:
    return SampleEncoding(name, fmt, bits, dl, name)


ENCODINGS: tuple[SampleEncoding, ...] = (
    _enc("bool", 1, 1, np.bool_, (_DL_BOOL, 8, 1)),
    _enc("uint8", 1, 8, np.uint8, (_DL_UINT, 8, 1)),
    _enc("uint16", 1, 16, np.uint16, (_DL_UINT, 16, 1)),
    _enc("uint32", 1, 32, np.uint32, (_DL_UINT, 32, 1)),
    _enc("uint64", 1, 64, np.uint64, (_DL_UINT, 64, 1)),
    _enc("int8", 2, 8, np.int8, (_DL_INT, 8, 1)),
    _enc("int16", 2, 16, np.int16, (_DL_INT, 16, 1)),
    _enc("int32", 2, 32, np.int32, (_DL_INT, 32, 1)),
    _enc("int64", 2, 64, np.int64, (_DL_INT, 64, 1)),
    _enc("float16", 3, 16, np.float16, (_DL_FLOAT, 16, 1)),
    _enc("float32", 3, 32, np.float32, (_DL_FLOAT, 32, 1)),
    _enc("float64", 3, 64, np.float64, (_DL_FLOAT, 64, 1)),
    _enc("complex32", 6, 32, COMPLEX32, (_DL_COMPLEX, 32, 1)),
    _enc("complex64", 6, 64, np.complex64, (_DL_COMPLEX, 64, 1)),
    _enc("complex128", 6, 128, np.complex128, (_DL_COMPLEX, 128, 1)),
    _ml("float8_e4m3fn", 100, 8, (_DL_E4M3FN, 8, 1)),
    _ml("float8_e5m2", 101, 8, (_DL_E5M2, 8, 1)),
    _ml("bfloat16", 102, 16, (_DL_BFLOAT, 16, 1)),
    _ml("float8_e8m0fnu", 103, 8, (_DL_E8M0FNU, 8, 1)),
    _ml("float8_e4m3fnuz", 107, 8, (_DL_E4M3FNUZ, 8, 1)),
    _ml("float8_e5m2fnuz", 108, 8, (_DL_E5M2FNUZ, 8, 1)),
)

RESERVED_PAIRS = frozenset({(1, 2), (1, 4), (2, 2), (2, 4), (5, 32), (5, 64), (104, 6), (105, 6), (106, 4)})
"""Pairs the specification reserves; a reader rejects them like any unlisted pair."""

RESERVED_SAMPLE_FORMATS = frozenset({5, 104, 105, 106})
"""SampleFormat values reserved for future use."""

_BY_PAIR = {(e.sample_format, e.bits_per_sample): e for e in ENCODINGS}
_BY_DTYPE = {e.numpy_type: e for e in ENCODINGS if not isinstance(e.numpy_type, str)}
_BY_NAME = {e.name: e for e in ENCODINGS}


def encoding_for_pair(sample_format: int, bits_per_sample: int) -> SampleEncoding:
    """Return the encoding of a ``(sample_format, bits_per_sample)`` pair.

    Raises:
        InvalidInputError: the pair is reserved or not listed.
    """
    try:
        return _BY_PAIR[(sample_format, bits_per_sample)]
    except KeyError:
        kind = "reserved" if (sample_format, bits_per_sample) in RESERVED_PAIRS else "not listed"
        raise InvalidInputError(
            f"(sample_format={sample_format}, bits_per_sample={bits_per_sample}) is {kind}",
            field="SampleFormat/BitsPerSample",
            rule="A reader MUST reject any pair not listed",
        ) from None


def encoding_for_dtype(dtype: DTypeLike | str) -> SampleEncoding:
    """Return the encoding that stores samples of ``dtype`` without conversion.

    ``dtype`` may also be an encoding name such as ``"complex32"``. Big-endian
    dtypes map to the same encoding as their little-endian twin: the writer
    stores little-endian samples, which is a byte order change, not a cast.

    Raises:
        InvalidInputError: no rumi encoding stores this dtype exactly.
    """
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    if dtype is None:  # numpy reads None as float64; nothing here is implied
        raise InvalidInputError("dtype is None; give the dtype of the samples", field="dtype")
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise InvalidInputError(f"{dtype!r} is not a dtype", field="dtype") from err
    dt = dt.newbyteorder("<")
    found = _BY_DTYPE.get(dt)
    if found is None and "ml_dtypes" in sys.modules:  # only an imported ml_dtypes can have made dt
        found = next((e for e in ENCODINGS if isinstance(e.numpy_type, str) and e.dtype == dt), None)
    if found is None:
        names = ", ".join(e.name for e in ENCODINGS)
        raise InvalidInputError(
            f"dtype {dt} has no rumi sample encoding; use one of {names}",
            field="dtype",
        )
    return found
