"""Tests for rumi_core.encodings (spec: Sample encodings, DLPack representation)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from rumi_core.encodings import (
    COMPLEX32,
    ENCODINGS,
    RESERVED_PAIRS,
    RESERVED_SAMPLE_FORMATS,
    SampleEncoding,
    encoding_for_dtype,
    encoding_for_pair,
)
from rumi_core.errors import InvalidInputError

# The specification's table: (sample_format, bits_per_sample, decoded bytes, name).
SPEC_PAIRS = [
    (1, 1, 1, "bool"),
    (1, 8, 1, "uint8"),
    (1, 16, 2, "uint16"),
    (1, 32, 4, "uint32"),
    (1, 64, 8, "uint64"),
    (2, 8, 1, "int8"),
    (2, 16, 2, "int16"),
    (2, 32, 4, "int32"),
    (2, 64, 8, "int64"),
    (3, 16, 2, "float16"),
    (3, 32, 4, "float32"),
    (3, 64, 8, "float64"),
    (6, 32, 4, "complex32"),
    (6, 64, 8, "complex64"),
    (6, 128, 16, "complex128"),
    (100, 8, 1, "float8_e4m3fn"),
    (101, 8, 1, "float8_e5m2"),
    (102, 16, 2, "bfloat16"),
    (103, 8, 1, "float8_e8m0fnu"),
    (107, 8, 1, "float8_e4m3fnuz"),
    (108, 8, 1, "float8_e5m2fnuz"),
]

NUMPY_TYPES = {
    "bool": np.bool_, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
    "complex32": COMPLEX32, "complex64": np.complex64, "complex128": np.complex128,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2, "bfloat16": ml_dtypes.bfloat16,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}  # fmt: skip


def test_the_registry_is_exactly_the_specified_table() -> None:
    assert len(ENCODINGS) == 21
    assert [(e.sample_format, e.bits_per_sample, e.bytes_per_sample, e.name) for e in ENCODINGS] == SPEC_PAIRS
    assert len({e.name for e in ENCODINGS}) == 21


@pytest.mark.parametrize(("fmt", "bits", "size", "name"), SPEC_PAIRS, ids=[p[3] for p in SPEC_PAIRS])
def test_each_encoding(fmt: int, bits: int, size: int, name: str, spec_dlpack: dict[str, tuple[int, int, int]]) -> None:
    enc = encoding_for_pair(fmt, bits)
    assert enc.name == name
    assert enc.dlpack == spec_dlpack[name]
    assert enc.dtype == np.dtype(NUMPY_TYPES[name])
    assert enc.dtype.itemsize == size == enc.bytes_per_sample
    assert enc.dtype.byteorder in "<|="  # little-endian (or byte-order free)
    assert enc.component_bytes == (size // 2 if fmt == 6 else size)
    assert encoding_for_dtype(name) is enc
    assert encoding_for_dtype(enc.dtype) is enc
    assert encoding_for_dtype(NUMPY_TYPES[name]) is enc


@pytest.mark.parametrize("enc", ENCODINGS, ids=[e.name for e in ENCODINGS])
def test_to_dict_from_dict_round_trip(enc: SampleEncoding) -> None:
    as_dict = enc.to_dict()
    assert as_dict == {"name": enc.name, "sample_format": enc.sample_format, "bits_per_sample": enc.bits_per_sample}
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert SampleEncoding.from_dict(as_dict) == enc
    assert SampleEncoding.from_dict(json.loads(json.dumps(as_dict))) is enc


def test_boolean_is_one_byte_with_a_logical_width_of_one_bit() -> None:
    enc = encoding_for_dtype(np.bool_)
    assert (enc.sample_format, enc.bits_per_sample, enc.bytes_per_sample) == (1, 1, 1)
    assert enc.dlpack == (6, 8, 1)  # DLPack's width is the decoded storage width


def test_complex32_is_two_binary16_components_real_first() -> None:
    enc = encoding_for_dtype("complex32")
    assert enc.dtype.names == ("real", "imag")
    assert enc.dtype.fields["real"] == (np.dtype("<f2"), 0)
    assert enc.dtype.fields["imag"] == (np.dtype("<f2"), 2)
    value = np.array([(1.5, -2.0)], dtype=COMPLEX32)
    assert value.tobytes() == np.array([1.5, -2.0], "<f2").tobytes()


@pytest.mark.parametrize("dtype", [">u2", ">i8", ">f4", ">c16", np.dtype([("real", ">f2"), ("imag", ">f2")])])
def test_big_endian_dtypes_map_to_their_little_endian_encoding(dtype: Any) -> None:
    enc = encoding_for_dtype(dtype)
    assert enc.dtype == np.dtype(dtype).newbyteorder("<")


@pytest.mark.parametrize("pair", sorted(RESERVED_PAIRS))
def test_reserved_pairs_are_rejected(pair: tuple[int, int]) -> None:
    with pytest.raises(InvalidInputError, match=rf"\(sample_format={pair[0]}, bits_per_sample={pair[1]}\) is reserved"):
        encoding_for_pair(*pair)


def test_reserved_values_are_those_of_the_specification() -> None:
    assert {(1, 2), (1, 4), (2, 2), (2, 4), (5, 32), (5, 64), (104, 6), (105, 6), (106, 4)} == RESERVED_PAIRS
    assert {5, 104, 105, 106} == RESERVED_SAMPLE_FORMATS
    assert not {e.sample_format for e in ENCODINGS} & RESERVED_SAMPLE_FORMATS


@pytest.mark.parametrize(
    "pair",
    [(0, 8), (1, 0), (1, 128), (2, 1), (3, 8), (3, 128), (4, 8), (6, 16), (6, 256), (100, 16), (102, 8), (109, 8), (255, 8), (1, 255)],
)
def test_unlisted_pairs_are_rejected(pair: tuple[int, int]) -> None:
    with pytest.raises(InvalidInputError, match=rf"\(sample_format={pair[0]}, bits_per_sample={pair[1]}\) is not listed"):
        encoding_for_pair(*pair)


@pytest.mark.parametrize(
    "dtype",
    ["longdouble", "clongdouble", object, "<U4", "S4", "V4", "datetime64[s]", "timedelta64[s]", "(2,)u1", [("re", "<f2"), ("im", "<f2")],
     [("real", "<f4"), ("imag", "<f4")], [("real", "<f2"), ("imag", "<f2"), ("x", "u1")], ml_dtypes.int4, ml_dtypes.float4_e2m1fn],
)  # fmt: skip
def test_dtypes_without_an_encoding_are_refused(dtype: Any) -> None:
    if np.dtype(dtype) in (np.dtype("f8"), np.dtype("c16")):
        pytest.skip("long double is double on this platform")
    with pytest.raises(InvalidInputError, match="has no rumi sample encoding; use one of bool, uint8"):
        encoding_for_dtype(dtype)


@pytest.mark.parametrize(("dtype", "match"), [(None, "dtype is None"), ("not-a-dtype", "'not-a-dtype' is not a dtype")])
def test_not_a_dtype(dtype: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        encoding_for_dtype(dtype)


def test_ml_dtypes_is_imported_only_when_an_ml_type_is_asked_for() -> None:
    """Each conversion worker and CLI call imports the codecs; ml_dtypes (0.6-0.9 s of CPU) waits for an ML type."""
    code = (
        "import sys, rumi_core.codecs, rumi_core.reader, pipelines.convert, pipelines.transforms.compress;"
        "from rumi_core.encodings import encoding_for_pair, encoding_for_dtype;"
        "before = 'ml_dtypes' in sys.modules;"
        "assert encoding_for_dtype('uint16').dtype.str == '<u2' and 'ml_dtypes' not in sys.modules;"
        "bf16 = encoding_for_pair(102, 16).dtype;"
        "import ml_dtypes;"
        "print(before, bf16 == ml_dtypes.bfloat16, encoding_for_dtype(ml_dtypes.float8_e5m2).name)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["False", "True", "float8_e5m2"]
