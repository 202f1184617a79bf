"""DLPack export of decoded samples, for every sample encoding.

Specification section *DLPack representation*: a tensor exported through
DLPack MUST carry the listed ``(code, bits, lanes)`` for its encoding, be
native-endian CPU memory with one element per rumi sample, and nothing may be
cast, reinterpreted or widened to suit the consumer.

NumPy exports its own types, but refuses the ML types rumi reads into
:mod:`ml_dtypes` arrays (bfloat16 and the five float8s) and has no complex
type with 16-bit parts. :class:`DLPackArray` wraps any array that
:func:`rumi_core.read` returns and exports it itself, with ctypes-built
``DLManagedTensorVersioned`` (DLPack 1.x) or legacy ``DLManagedTensor``
capsules. The wrapped array is shared, never copied unless ``copy=True`` is
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

_FLAG_READ_ONLY: Final = 1 << 0
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


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_api = ctypes.pythonapi
_capsule_new = _api.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)
_capsule_is_valid = _api.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_capsule_pointer = _api.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_capsule_set_name = _api.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = (ctypes.c_void_p, ctypes.c_char_p)

# --------------------------------------------------------------------------- #
# Keeping exported memory alive
# --------------------------------------------------------------------------- #

_LIVE: dict[int, tuple[Any, ...]] = {}
"""Managed-tensor address -> (struct, shape, strides, array), until the tensor is released."""

_CAPSULES: dict[int, tuple[Any, int]] = {}
"""Capsule address -> (a view of its name, managed-tensor address), until the capsule dies."""


def _name_offset() -> int | None:
    """Where CPython keeps a capsule's name pointer, found on a probe capsule; None if not found."""
    anchor = ctypes.c_int(0)
    probe = _capsule_new(ctypes.addressof(anchor), b"rumi-dlpack-probe", _CAPSULE_DESTRUCTOR())
    base = id(probe)
    for offset in range(2 * ctypes.sizeof(ctypes.c_void_p), 8 * ctypes.sizeof(ctypes.c_void_p), ctypes.sizeof(ctypes.c_void_p)):
        pointer = ctypes.c_void_p.from_address(base + offset).value
        if pointer and ctypes.string_at(pointer) == b"rumi-dlpack-probe":
            return offset
    return None


_NAME_OFFSET: Final = _name_offset()


def _release(address: int | None) -> None:
    # The consumer calls this once, when it no longer needs the memory.
    _LIVE.pop(int(address or 0), None)


def _destroy_capsule(capsule: int | None) -> None:
    # A capsule nobody consumed still owns its tensor and frees it here; a
    # consumer renames the capsule to "used_..." and calls the deleter itself.
    # The name is read through a view made at export time, not the C API.
    entry = _CAPSULES.pop(int(capsule or 0), None)
    if entry is not None:
        name, managed = entry
        if name.value in (_LEGACY_NAME, _VERSIONED_NAME):
            _LIVE.pop(managed, None)


_NUMPY_LACKS: Final = frozenset(
    {"bfloat16", "complex32", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"}
)
"""Encodings ``numpy.from_dlpack`` refuses. A consumer that refuses a capsule
drops it with its exception pending, and a Python destructor (ctypes) cannot
run then without replacing that exception, so these capsules get none: torch
and JAX consume them and call the deleter; an unconsumed one keeps its array."""


_deleter = _DELETER(_release)
_capsule_destructor = _CAPSULE_DESTRUCTOR(_destroy_capsule)
_NO_DESTRUCTOR = _CAPSULE_DESTRUCTOR()


def _native(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The array in native byte order; a byte swap of a non-native array, never a cast."""
    fields = array.dtype.fields
    swapped = any(not f[0].isnative for f in fields.values()) if fields else not array.dtype.isnative
    return array.astype(array.dtype.newbyteorder("="), copy=True) if swapped else array


def _tensor(array: np.ndarray[Any, Any], encoding: SampleEncoding, tensor: _DLTensor) -> tuple[Any, Any]:
    """Fill ``tensor`` from ``array``; return the shape and stride buffers to keep alive."""
    code, bits, lanes = encoding.dlpack
    itemsize = array.dtype.itemsize
    ndim = array.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in array.strides))
    tensor.data = array.ctypes.data if array.size else None
    tensor.device = _DLDevice(KDL_CPU, 0)
    tensor.ndim = ndim
    tensor.dtype = _DLDataType(code, bits, lanes)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)) if ndim else None
    tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if ndim else None
    tensor.byte_offset = 0
    return shape, strides


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
        managed: Any = _DLManagedTensor()
        name = _LEGACY_NAME
    else:
        major, minor = (int(v) for v in max_version)
        if major < 1:
            raise DLPackError(f"rumi exports DLPack 1.x tensors, the consumer reads up to {major}.{minor}")
        # Minor versions only add to the ABI: a 1.0 consumer reads a 1.1 tensor,
        # and one that knows the float8 codes (PyTorch asks for 1.0) gets them.
        managed = _DLManagedTensorVersioned()
        managed.version = _DLPackVersion(*DLPACK_VERSION)
        managed.flags = (0 if native.flags.writeable else _FLAG_READ_ONLY) | (_FLAG_IS_COPIED if copied else 0)
        name = _VERSIONED_NAME
    buffers = _tensor(native, encoding, managed.dl_tensor)
    managed.manager_ctx = None
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, *buffers, native)
    if _NAME_OFFSET is None or encoding.name in _NUMPY_LACKS:
        # Without a destructor an unconsumed capsule keeps its array alive.
        return _capsule_new(address, name, _NO_DESTRUCTOR)
    capsule = _capsule_new(address, name, _capsule_destructor)
    _CAPSULES[id(capsule)] = (ctypes.c_char_p.from_address(id(capsule) + _NAME_OFFSET), address)
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
    raw = id(capsule)  # the PyObject's address, as CPython's capsule API takes it
    if _capsule_is_valid(raw, _VERSIONED_NAME):
        managed: Any = _DLManagedTensorVersioned.from_address(_capsule_pointer(raw, _VERSIONED_NAME))
        used = _USED_VERSIONED
    elif _capsule_is_valid(raw, _LEGACY_NAME):
        managed = _DLManagedTensor.from_address(_capsule_pointer(raw, _LEGACY_NAME))
        used = _USED_LEGACY
    else:
        raise DLPackError("the producer returned no DLPack capsule")
    _capsule_set_name(raw, used)
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
