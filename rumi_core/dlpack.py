"""DLPack export of decoded samples, for every sample encoding.

Specification section *DLPack representation*: a tensor exported through
DLPack MUST carry the listed ``(code, bits, lanes)`` for its encoding, be
native-endian CPU memory with one element per rumi sample, and nothing may be
cast, reinterpreted or widened to suit the consumer.

NumPy exports its own types, but refuses the ML types rumi reads into
:mod:`ml_dtypes` arrays (bfloat16 and the five float8s) and has no complex
type with 16-bit parts. :class:`DLPackArray` wraps any array that
:func:`rumi_core.read` returns and exports it with the specification's
type: NumPy builds the ``DLManagedTensorVersioned`` (DLPack 1.x) or legacy
``DLManagedTensor`` capsule (of same-width unsigned integers for the types it
lacks), and rumi relabels its type. The wrapped array is shared, never copied unless ``copy=True`` is
asked for or the array is not native-endian.

:func:`rumi_core.read` keeps returning NumPy arrays; wrap one to hand it on:

>>> import numpy as np, ml_dtypes
>>> samples = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
>>> exported = DLPackArray(samples)
>>> exported.__dlpack_device__()
(1, 0)
>>> exported.dlpack_dtype
(4, 16, 1)
>>> bool((from_dlpack(exported) == samples).all())
True

With PyTorch installed, ``torch.from_dlpack(DLPackArray(samples))`` returns a
``torch.bfloat16`` tensor over the same memory.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Final

import numpy as np

from rumi_core.encodings import ENCODINGS, SampleEncoding, encoding_for_dtype
from rumi_core.errors import RumiError

__all__ = ["KDL_CPU", "DLPackArray", "DLPackError", "from_dlpack", "to_dlpack"]

KDL_CPU: Final = 1
"""``kDLCPU``, the only device rumi tensors live on."""

DLPACK_VERSION: Final = (1, 1)
"""The DLPack ABI version exported; float8 codes need 1.1."""

_FLAG_IS_COPIED: Final = 1 << 1

_LEGACY_NAME: Final = b"dltensor"
_VERSIONED_NAME: Final = b"dltensor_versioned"
_USED_LEGACY: Final = b"used_dltensor"
_USED_VERSIONED: Final = b"used_dltensor_versioned"


class DLPackError(RumiError, BufferError):
    """An array cannot be exported or imported as asked (device, stream, version, dtype)."""


# --------------------------------------------------------------------------- #
# dlpack.h, as ctypes structures
# --------------------------------------------------------------------------- #


class _DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = (("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER))


class _DLPackVersion(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint32), ("minor", ctypes.c_uint32))


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = (
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    )


# CPython's capsule API, each function with a prototype of its own: ctypes.pythonapi's function objects
# are shared by the whole process, and another library setting their argtypes (py_object, say) would
# change what these calls pass.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))


def _managed(capsule: Any) -> tuple[Any, bytes]:
    """The managed tensor a capsule holds, and the name a consumer renames it to; raises if it holds none."""
    raw = id(capsule)  # the PyObject's address, as CPython's capsule API takes it
    if _capsule_is_valid(raw, _VERSIONED_NAME):
        return _DLManagedTensorVersioned.from_address(_capsule_pointer(raw, _VERSIONED_NAME)), _USED_VERSIONED
    if _capsule_is_valid(raw, _LEGACY_NAME):
        return _DLManagedTensor.from_address(_capsule_pointer(raw, _LEGACY_NAME)), _USED_LEGACY
    raise DLPackError("the producer returned no DLPack capsule")


_NUMPY_LACKS: Final = frozenset(
    {"bfloat16", "complex32", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"}
)
"""Encodings NumPy neither exports nor imports through DLPack."""


def _native(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The array in native byte order; a byte swap of a non-native array, never a cast."""
    fields = array.dtype.fields
    swapped = any(not f[0].isnative for f in fields.values()) if fields else not array.dtype.isnative
    return array.astype(array.dtype.newbyteorder("="), copy=True) if swapped else array


def to_dlpack(
    array: Any,
    *,
    max_version: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """Return a DLPack capsule of ``array`` with the specification's ``(code, bits, lanes)``.

    Args:
        array: Samples of one of the 21 sample encodings (as :func:`rumi_core.read` returns).
        max_version: The consumer's highest DLPack version. None (a legacy
            consumer) gets a ``"dltensor"`` capsule; 1.0 or newer a versioned
            ``"dltensor_versioned"`` one of version 1.1, the first to define
            the float8 codes (minor versions are ABI-compatible).
        copy: True to export a copy; False to refuse a copy (raises for a
            non-native byte order); None to copy only when needed.

    Returns:
        A ``PyCapsule``.

    Raises:
        DLPackError: the array cannot be exported as asked (read-only to a
            legacy consumer, float8 to a 1.0 consumer, a needed copy refused).
        InvalidInputError: the dtype is not one of the 21 sample encodings.
    """
    arr = np.asarray(array)
    encoding = encoding_for_dtype(arr.dtype)
    native = _native(arr)
    copied = native is not arr
    if copied and copy is False:
        raise DLPackError(f"a {arr.dtype} array is not native-endian; exporting it needs a copy, and copy=False refuses one")
    if copy and not copied:
        native = native.copy()
        copied = True
    if any(s % native.dtype.itemsize or s < 0 for s in native.strides):
        # Strides must be whole elements, and consumers such as PyTorch
        # cannot take negative ones.
        if copy is False:
            raise DLPackError("the array's strides are negative or not whole elements; exporting it needs a copy")
        native, copied = np.ascontiguousarray(native), True
    if max_version is None:
        if not native.flags.writeable and not copied:
            raise DLPackError("a read-only array cannot go to a legacy DLPack consumer, which cannot be told it is read-only")
    elif int(max_version[0]) < 1:
        raise DLPackError(f"rumi exports DLPack 1.x tensors, the consumer reads up to {max_version[0]}.{max_version[1]}")
    # NumPy builds the capsule, so its C deleter and destructor free the
    # memory: a deleter written in Python (a ctypes callback) would run when a
    # consumer frees the tensor, which may be while an exception is being
    # raised, and would replace that exception with a SystemError. The types
    # NumPy cannot export go as unsigned integers of their width, and the
    # capsule is relabelled before anyone sees it.
    carrier = native.view(f"u{native.dtype.itemsize}") if encoding.name in _NUMPY_LACKS else native
    capsule = carrier.__dlpack__(max_version=max_version)
    managed, _ = _managed(capsule)
    managed.dl_tensor.dtype = _DLDataType(*encoding.dlpack)
    if max_version is not None:
        # Minor versions only add to the ABI: a 1.0 consumer reads a 1.1
        # tensor, and one that knows the float8 codes (PyTorch asks for 1.0)
        # gets them.
        managed.version = _DLPackVersion(*DLPACK_VERSION)
        managed.flags |= _FLAG_IS_COPIED if copied else 0
    return capsule


def _check_device(dl_device: Any) -> None:
    if dl_device is not None and tuple(dl_device) != (KDL_CPU, 0):
        raise DLPackError(f"rumi arrays live on the CPU (device ({KDL_CPU}, 0)), not {tuple(dl_device)}")


class DLPackArray:
    """An array of rumi samples that exports itself through DLPack.

    Wraps (never copies) the NumPy array ``rumi_core.read`` returns, of any of
    the 21 sample encodings, and implements ``__dlpack__`` and
    ``__dlpack_device__`` with the ``(code, bits, lanes)`` of the
    specification's *DLPack representation* table: ``torch.from_dlpack``,
    ``jax.dlpack.from_dlpack`` or ``numpy.from_dlpack`` (for the types NumPy
    has) take it directly.
    """

    __slots__ = ("array", "encoding")

    array: np.ndarray[Any, Any]
    """The wrapped samples."""
    encoding: SampleEncoding
    """Their sample encoding."""

    def __init__(self, array: Any) -> None:
        """Wrap ``array``.

        Raises:
            InvalidInputError: its dtype is not one of the 21 sample encodings.
        """
        self.array = np.asarray(array)
        self.encoding = encoding_for_dtype(self.array.dtype)

    @property
    def dlpack_dtype(self) -> tuple[int, int, int]:
        """The DLPack ``(code, bits, lanes)`` exported."""
        return self.encoding.dlpack

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return tuple(self.array.shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        if dtype is not None and np.dtype(dtype) != self.array.dtype:
            raise DLPackError(f"rumi samples are {self.array.dtype}; converting them to {np.dtype(dtype)} would cast")
        return self.array.copy() if copy else self.array

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Return a DLPack capsule of the samples (the array API's ``__dlpack__``).

        Raises:
            DLPackError: a stream or a non-CPU device was asked for, or see :func:`to_dlpack`.
        """
        if stream is not None and stream != -1:
            raise DLPackError(f"CPU tensors take no stream, got {stream!r}")
        _check_device(dl_device)
        return to_dlpack(self.array, max_version=max_version, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """Return ``(kDLCPU, 0)``."""
        return (KDL_CPU, 0)

    def __repr__(self) -> str:
        return f"DLPackArray({self.encoding.name}, shape={self.shape}, dlpack={self.dlpack_dtype})"


_BY_DLPACK: Final = {e.dlpack: e for e in ENCODINGS}


def from_dlpack(producer: Any) -> np.ndarray[Any, Any]:
    """Copy any DLPack CPU tensor of a rumi sample encoding into a NumPy array.

    The inverse of :class:`DLPackArray` for every encoding, including those
    ``numpy.from_dlpack`` refuses (bfloat16, float8, complex32): the
    ``(code, bits, lanes)`` must be one of the specification's table, and the
    array gets that encoding's dtype, bit for bit.

    Raises:
        DLPackError: the producer is not on the CPU, or its dtype is not in the table.
    """
    device_type, device_id = producer.__dlpack_device__()
    if int(device_type) != KDL_CPU:
        raise DLPackError(f"only CPU tensors are read, got device ({device_type}, {device_id})")
    capsule = producer.__dlpack__(max_version=DLPACK_VERSION)
    managed, used = _managed(capsule)
    _capsule_set_name(id(capsule), used)
    try:
        tensor = managed.dl_tensor
        key = (int(tensor.dtype.code), int(tensor.dtype.bits), int(tensor.dtype.lanes))
        encoding = _BY_DLPACK.get(key)
        if encoding is None:
            raise DLPackError(f"DLPack dtype {key} is not a rumi sample encoding")
        shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
        itemsize = encoding.dtype.itemsize
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if tensor.strides:
            strides = tuple(int(tensor.strides[i]) * itemsize for i in range(tensor.ndim))
        else:
            strides = tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) * itemsize for i in range(len(shape)))
        out = np.empty(shape, encoding.dtype.newbyteorder("="))
        if count:
            base = (tensor.data or 0) + int(tensor.byte_offset)
            span = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if n > 1) + itemsize
            low = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0 and n > 1)
            buffer = memoryview((ctypes.c_char * (span - low)).from_address(base + low)).cast("B")
            view = np.ndarray(shape, encoding.dtype.newbyteorder("="), buffer=buffer, offset=-low, strides=strides)
            out[...] = view
        return out.astype(encoding.dtype, copy=False) if sys.byteorder == "little" else out
    finally:
        if managed.deleter:
            managed.deleter(ctypes.addressof(managed))
