"""Tests for rumi_core.dlpack: every sample encoding exported with the spec's (code, bits, lanes), never cast.

PyTorch tests skip where torch is not installed (``pip install torch``; the
CPU wheel is enough).
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import pytest

import rumi_core
from rumi_core.dlpack import DLPackArray, DLPackError, from_dlpack, to_dlpack
from rumi_core.encodings import ENCODINGS, SampleEncoding
from rumi_core.errors import InvalidInputError
from rumi_core.testing import random_samples

if TYPE_CHECKING:
    from pathlib import Path

NUMPY_HAS = {
    *("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"),
    *("float16", "float32", "float64", "complex64", "complex128"),
}

ENCODING_IDS = [e.name for e in ENCODINGS]


def bits_of(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


@pytest.mark.parametrize("enc", ENCODINGS, ids=ENCODING_IDS)
def test_dtype_codes_follow_the_spec(enc: SampleEncoding, spec_dlpack: dict[str, tuple[int, int, int]]) -> None:
    samples = random_samples((2, 3, 5), enc.dtype, seed=1)
    exported = DLPackArray(samples)
    assert exported.dlpack_dtype == spec_dlpack[enc.name]
    assert exported.__dlpack_device__() == (1, 0)
    assert exported.shape == (2, 3, 5)
    assert enc.name in repr(exported)


@pytest.mark.parametrize("enc", ENCODINGS, ids=ENCODING_IDS)
@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 1), (1, 3)])
def test_own_importer_round_trips_every_encoding(enc: SampleEncoding, max_version: tuple[int, int] | None) -> None:
    samples = random_samples((3, 4, 7), enc.dtype, seed=2)

    class Producer:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

        def __dlpack__(self, **kwargs: Any) -> Any:
            return to_dlpack(samples, max_version=max_version)

    back = from_dlpack(Producer())
    assert back.dtype == enc.dtype and back.shape == samples.shape
    assert bits_of(back) == bits_of(samples)


@pytest.mark.parametrize("enc", [e for e in ENCODINGS if e.name in NUMPY_HAS], ids=lambda e: e.name)
def test_numpy_from_dlpack_round_trips_its_types(enc: SampleEncoding) -> None:
    samples = random_samples((4, 6), enc.dtype, seed=3)
    back = np.from_dlpack(DLPackArray(samples))
    assert back.dtype == samples.dtype and bits_of(back) == bits_of(samples)
    assert back.ctypes.data == samples.ctypes.data  # shared, not copied
    copied = np.from_dlpack(DLPackArray(samples), copy=True)
    assert bits_of(copied) == bits_of(samples) and copied.ctypes.data != samples.ctypes.data


def test_numpy_refuses_what_it_lacks_cleanly() -> None:
    samples = np.zeros(3, ml_dtypes.bfloat16)
    with pytest.raises((RuntimeError, BufferError, TypeError), match=r"(?i)dtype"):
        np.from_dlpack(DLPackArray(samples))
    released = weakref.ref(samples)
    del samples
    gc.collect()
    assert released() is None  # the refused capsule let go of its array


def test_strided_and_reversed_views() -> None:
    base = np.arange(2 * 6 * 8, dtype=np.uint16).reshape(2, 6, 8)
    view = base[:, ::2, 1::3]
    assert bits_of(from_dlpack(DLPackArray(view))) == bits_of(view)
    reversed_view = base[:, ::-1, ::-2]
    assert bits_of(from_dlpack(DLPackArray(reversed_view))) == bits_of(reversed_view)
    scalar = np.array(7, np.int32)
    assert from_dlpack(DLPackArray(scalar)).tolist() == 7
    empty = np.zeros((0, 3), np.float32)
    assert from_dlpack(DLPackArray(empty)).shape == (0, 3)


def test_big_endian_samples_are_byte_swapped_not_cast() -> None:
    samples = np.arange(6, dtype=">u2").reshape(2, 3)
    back = from_dlpack(DLPackArray(samples))
    assert back.tolist() == samples.tolist()
    with pytest.raises(DLPackError, match=r"not native-endian; exporting it needs a copy, and copy=False refuses one"):
        DLPackArray(samples).__dlpack__(max_version=(1, 0), copy=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dl_device": (2, 0)}, r"rumi arrays live on the CPU"),
        ({"stream": 1}, r"CPU tensors take no stream"),
        ({"max_version": (0, 8)}, r"rumi exports DLPack 1.x tensors"),
    ],
)
def test_bad_requests_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DLPackError, match=message):
        DLPackArray(np.zeros(3, np.uint8)).__dlpack__(**kwargs)


def test_read_only_arrays() -> None:
    samples = np.arange(5, dtype=np.int16)
    samples.flags.writeable = False
    with pytest.raises(DLPackError, match=r"a read-only array cannot go to a legacy DLPack consumer"):
        to_dlpack(samples)
    assert bits_of(from_dlpack(DLPackArray(samples))) == bits_of(samples)
    assert to_dlpack(samples, copy=True) is not None


def test_refuses_dtypes_without_an_encoding_and_casts() -> None:
    with pytest.raises(InvalidInputError, match=r"dtype <U1 has no rumi sample encoding"):
        DLPackArray(np.zeros(2, "<U1"))
    with pytest.raises(DLPackError, match=r"converting them to float32 would cast"):
        np.asarray(DLPackArray(np.zeros(2, np.uint16)), dtype=np.float32)
    assert np.asarray(DLPackArray(np.zeros(2, np.uint16))).dtype == np.uint16


def _exported_and_dropped(dtype: Any, consume: Any) -> weakref.ref[np.ndarray[Any, Any]]:
    samples = np.zeros(100, dtype)
    consume(DLPackArray(samples))
    return weakref.ref(samples)


@pytest.mark.parametrize(
    "consume",
    [
        lambda a: np.from_dlpack(a) if a.encoding.name in NUMPY_HAS else from_dlpack(a),
        lambda a: a.__dlpack__(max_version=(1, 0)),  # dropped unconsumed
        lambda a: a.__dlpack__(),
        from_dlpack,
    ],
    ids=["numpy-where-it-can", "unconsumed", "unconsumed-legacy", "own-importer"],
)
@pytest.mark.parametrize("dtype", [np.float64, ml_dtypes.float8_e5m2, rumi_core.encoding_for_dtype("complex32").dtype], ids=str)
def test_exported_memory_is_released(consume: Any, dtype: Any) -> None:
    """Every capsule, consumed or not, lets go of its array: none is kept alive."""
    released = _exported_and_dropped(dtype, consume)
    gc.collect()
    assert released() is None


def test_arrays_from_read_export_with_their_encoding(tmp_path: Path) -> None:
    samples = random_samples((2, 20, 30), ml_dtypes.bfloat16, seed=5)
    blob = rumi_core.write(tmp_path / "x.rumi", samples, bands=["a", "b"], times=["2020-01-01"], tile_size=16)
    decoded = rumi_core.read(tmp_path / "x.rumi", blob)
    exported = rumi_core.DLPackArray(decoded)
    assert exported.dlpack_dtype == (4, 16, 1)
    assert bits_of(from_dlpack(exported)) == bits_of(samples)


# --------------------------------------------------------------------------- PyTorch


def _torch() -> Any:
    return pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch, the CPU wheel)")


TORCH_DTYPES = {
    "bool": "bool",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "complex32": "complex32",
    "complex64": "complex64",
    "complex128": "complex128",
    "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2": "float8_e5m2",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu",
}


def _torch_bits(tensor: Any) -> bytes:
    torch = _torch()
    flat = tensor.contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)  # bool to 0/1 bytes is exact
    return bytes(flat.view(torch.uint8).numpy().tobytes())


@pytest.mark.parametrize("enc", ENCODINGS, ids=ENCODING_IDS)
def test_torch_from_dlpack_gets_the_right_type_and_bits(enc: SampleEncoding) -> None:
    torch = _torch()
    samples = random_samples((3, 5, 4), enc.dtype, seed=4)
    tensor = torch.from_dlpack(DLPackArray(samples))
    assert tensor.dtype == getattr(torch, TORCH_DTYPES[enc.name])
    assert tuple(tensor.shape) == samples.shape
    assert _torch_bits(tensor) == bits_of(samples)
    assert tensor.data_ptr() == samples.ctypes.data  # zero copy


def test_torch_legacy_capsules_and_views() -> None:
    torch = _torch()
    samples = random_samples((6, 5), ml_dtypes.float8_e4m3fnuz, seed=6)
    tensor = torch.utils.dlpack.from_dlpack(to_dlpack(samples))
    assert tensor.dtype == torch.float8_e4m3fnuz and _torch_bits(tensor) == bits_of(samples)
    base = random_samples((4, 6, 8), ml_dtypes.bfloat16, seed=7)
    view = base[1:, ::2, ::-1]  # PyTorch takes no negative strides: exported as a copy
    assert _torch_bits(torch.from_dlpack(DLPackArray(view))) == bits_of(view)
    positive = base[:, ::2, 1:]
    shared = torch.from_dlpack(DLPackArray(positive))
    assert shared.data_ptr() == positive.ctypes.data and _torch_bits(shared) == bits_of(positive)
    kept = weakref.ref(positive)
    del positive, tensor, shared
    gc.collect()
    assert kept() is None


def test_tensors_freed_while_an_exception_is_raised_leave_it_alone() -> None:
    """PyTorch frees the tensors of a failed expression before the exception arrives: it must arrive as raised."""
    torch = _torch()
    for dtype in (np.uint16, ml_dtypes.bfloat16):
        with pytest.raises(IndexError, match="list index out of range"):
            _ = [torch.from_dlpack(DLPackArray(np.zeros(4, dtype))) for _ in range(3)][5]


@pytest.mark.skipif(sys.byteorder != "little", reason="the wheel's float8 kernels assume little-endian")
def test_torch_sees_the_values() -> None:
    torch = _torch()
    values = np.array([1.5, -2.0, 0.25, 448.0], dtype=ml_dtypes.float8_e4m3fn)
    tensor = torch.from_dlpack(DLPackArray(values))
    assert tensor.float().tolist() == [1.5, -2.0, 0.25, 448.0]
    halves = np.array([(1.0, -2.0), (0.5, 3.0)], dtype=rumi_core.encoding_for_dtype("complex32").dtype)
    assert torch.from_dlpack(DLPackArray(halves)).to(torch.complex64).tolist() == [complex(1, -2), complex(0.5, 3)]


def test_another_librarys_capsule_prototypes_change_nothing() -> None:
    """ctypes.pythonapi's functions are one object per process: a library that gives PyCapsule_GetPointer the common
    ``(py_object, c_char_p)`` made every export fail ('called with invalid PyCapsule object')."""
    import ctypes

    shared = ctypes.pythonapi.PyCapsule_GetPointer
    before = shared.argtypes, shared.restype
    shared.argtypes, shared.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    try:
        data = np.arange(12, dtype="uint16").reshape(3, 4)
        np.testing.assert_array_equal(from_dlpack(DLPackArray(data)), data)
    finally:
        shared.argtypes, shared.restype = before
