"""Tests for rumi_core.bitpack and the zigzag mapping (spec: Bit-packed arrays, Time residuals)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rumi_core.bitpack import bit_length, pack, packed_size, unpack
from rumi_core.errors import RumiError
from rumi_core.time_coordinates import unzigzag, zigzag
from rumi_core.times import INT64_MAX, INT64_MIN

SETTINGS = settings(deadline=None, max_examples=300)


def reference_pack(values: list[int], bits: int) -> bytes:
    """The specification, literally: bit j of value i is bit i * bits + j, LSB first."""
    whole = 0
    for i, v in enumerate(values):
        whole |= v << (i * bits)
    return whole.to_bytes(packed_size(len(values), bits), "little")


@st.composite
def packed_values(draw: st.DrawFn) -> tuple[list[int], int]:
    bits = draw(st.integers(0, 64))
    values = draw(st.lists(st.integers(0, 2**bits - 1), max_size=40))
    return values, bits


@SETTINGS
@given(case=packed_values())
def test_pack_matches_the_specified_bit_order_and_round_trips(case: tuple[list[int], int]) -> None:
    values, bits = case
    packed = pack(values, bits)
    assert packed == reference_pack(values, bits)
    assert len(packed) == -(-len(values) * bits // 8)  # exactly ceil(n * bits / 8) bytes
    assert unpack(packed, len(values), bits).tolist() == values


@pytest.mark.parametrize("bits", range(65))
def test_every_width_round_trips_its_extremes(bits: int) -> None:
    top = 2**bits - 1
    values = [top, 0, top, top >> 1, 1 if bits else 0, top]
    packed = pack(values, bits)
    assert packed == reference_pack(values, bits)
    out = unpack(packed, len(values), bits)
    assert out.dtype == np.uint64
    assert out.tolist() == values
    if bits:
        with pytest.raises(RumiError, match=f"does not fit in {bits} bits" if bits < 64 else "integers from 0 to 2\\*\\*64 - 1"):
            pack([top + 1], bits)


def test_known_bytes() -> None:
    assert pack([1, 2, 3], 2) == bytes([0b00111001])
    assert pack([1, 0, 1], 1) == bytes([0b101])
    assert pack([0x1FF], 9) == bytes([0xFF, 0x01])  # the ninth bit spills into the next byte
    assert pack([5, 6], 3) == bytes([0b110101])
    assert unpack(bytes([0xFF, 0x01]), 1, 9).tolist() == [0x1FF]


def test_zero_bits_is_an_empty_region_of_zeros() -> None:
    assert pack([0, 0, 0], 0) == b""
    assert pack([], 17) == b""
    assert unpack(b"", 5, 0).tolist() == [0] * 5
    assert unpack(b"", 0, 13).tolist() == []
    with pytest.raises(RumiError, match="non-zero but the bit width is 0"):
        pack([0, 1], 0)


@pytest.mark.parametrize(
    ("values", "bits", "match"),
    [
        ([1], 65, "bit width must be between 0 and 64"),
        ([1], -1, "bit width must be between 0 and 64"),
        ([-1], 8, "integers from 0 to 2\\*\\*64 - 1"),
        ([2**64], 64, "integers from 0 to 2\\*\\*64 - 1"),
        ([8], 3, "does not fit in 3 bits"),
    ],
)
def test_pack_rejects_values_that_do_not_fit(values: list[int], bits: int, match: str) -> None:
    with pytest.raises(RumiError, match=match):
        pack(values, bits)


def test_unpack_rejects_a_wrong_size() -> None:
    with pytest.raises(RumiError, match=r"a packed region of 3 x 5 bits is 2 bytes, got 3"):
        unpack(b"\x00\x00\x00", 3, 5)
    with pytest.raises(RumiError, match=r"is 0 bytes, got 1"):
        unpack(b"\x00", 4, 0)


@pytest.mark.parametrize(("count", "bits", "last"), [(3, 5, 0b1000_0000), (1, 1, 0b10), (7, 1, 0b1000_0000), (5, 9, 0b1000_0000)])
def test_unpack_rejects_non_zero_unused_bits(count: int, bits: int, last: int) -> None:
    size = packed_size(count, bits)
    data = bytes(size - 1) + bytes([last])
    with pytest.raises(RumiError, match="unused bits in the final byte of a packed region are not zero"):
        unpack(data, count, bits)


def test_bit_length() -> None:
    assert [bit_length(v) for v in (0, 1, 2, 3, 4, 255, 256, 2**64 - 1)] == [0, 1, 2, 2, 3, 8, 9, 64]


# -- zigzag ---------------------------------------------------------------------------


def test_zigzag_known_values() -> None:
    assert [zigzag(x) for x in (0, -1, 1, -2, 2, INT64_MAX, INT64_MIN)] == [0, 1, 2, 3, 4, 2**64 - 2, 2**64 - 1]


@settings(deadline=None, max_examples=500)
@given(x=st.integers(INT64_MIN, INT64_MAX))
def test_zigzag_is_a_bijection_from_int64_to_uint64(x: int) -> None:
    z = zigzag(x)
    assert 0 <= z <= 2**64 - 1
    assert z == (2 * x if x >= 0 else -2 * x - 1)
    assert unzigzag(z) == x
    # through a 64-bit packed region and back
    assert unzigzag(int(unpack(pack([z], 64), 1, 64)[0])) == x


@settings(deadline=None, max_examples=300)
@given(z=st.integers(0, 2**64 - 1))
def test_unzigzag_inverts_zigzag(z: int) -> None:
    assert zigzag(unzigzag(z)) == z
