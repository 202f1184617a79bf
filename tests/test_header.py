"""Tests for rumi_core.header: the header blob (spec: Header blob, Offset reconstruction).

Expected blobs are built with :class:`rumi_core.testing.BlobParts` from values
read out of the file by :class:`rumi_core.testing.FileParts`, both of which
follow the specification's arithmetic without using rumi_core's encoder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rumi_core
from rumi_core.encodings import RESERVED_PAIRS, encoding_for_dtype
from rumi_core.errors import (
    HeaderMismatchError,
    InvalidFileError,
    InvalidHeaderError,
    InvalidInputError,
    ResourceLimitError,
    RumiError,
    SourceError,
)
from rumi_core.header import HEADER_SIZE, HeaderBlob, build_header, check_against_head
from rumi_core.ifd import ParsedHead, base_frame_offset, frame_offsets
from rumi_core.layout import Layout
from rumi_core.limits import Limits
from rumi_core.sources import BytesSource
from rumi_core.structure import read_structure
from rumi_core.testing import BlobParts, FileParts, flip_bit, patch_value
from rumi_core.validate import validate

if TYPE_CHECKING:
    from pathlib import Path

U32 = 0xFFFF_FFFF

# name: (data shape, dtype, write keywords); every file uses 8 x 8 tiles.
FILES: dict[str, tuple[tuple[int, ...], str, dict[str, Any]]] = {
    "single": ((1, 3, 3), "uint8", {"bands": ["x"], "times": ["2020-01-01"]}),
    "image": ((3, 10, 12), "uint16", {"bands": ["a", "b", "c"], "times": ["2020-01-01"]}),
    "cube": ((2, 3, 10, 12), "int16", {"bands": ["a", "b", "c"], "times": ["2020-01-01", "2020-01-02"]}),
    "cube9": ((2, 3, 10, 12), "int16", {"bands": ["a", "b", "c"], "times": ["2020-01-01", "2020-01-02"], "frame_unit": 9}),
    "cells": ((2, 3, 17, 9), "float32", {"bands": ["a", "b", "c"], "times": ["2020-01-01", "2020-01-02"], "frame_unit": 7}),
    "wide": ((1, 6, 8, 40), "complex64", {"bands": [f"b{i}" for i in range(6)], "times": ["2020-01-01"], "frame_unit": 2}),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, bytes]]:
    """Every file in :data:`FILES`: its path and the blob the writer returned."""
    directory = tmp_path_factory.mktemp("blobs")
    out = {}
    for seed, (name, (shape, dtype, kw)) in enumerate(FILES.items()):
        rng = np.random.default_rng(seed)
        if dtype == "complex64":
            data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            data = rng.integers(0, 50, shape).astype(dtype)
        path = directory / f"{name}.rumi"
        blob = rumi_core.write(path, data, tile_size=8, **kw)
        out[name] = (path, blob)
    return out


def expected_blob(data: bytes) -> bytes:
    """The blob of a file, derived from its IFD with the test helpers only."""
    parts = FileParts.from_bytes(data)

    def scalar(tag: int) -> int:
        return int(parts.entry(tag).values[0])

    return BlobParts(
        image_width=scalar(256),
        image_length=scalar(257),
        time_count=scalar(65001),
        tile_width=scalar(322),
        tile_length=scalar(323),
        samples_per_pixel=scalar(277),
        bits_per_sample=scalar(258),
        sample_format=scalar(339),
        frame_unit=scalar(65000),
        counts=[int(c) for c in parts.entry(325).values],
    ).to_bytes()


def reject(data: bytes, match: str, *, field: str | None = None, offset: int | None = None) -> InvalidHeaderError:
    with pytest.raises(InvalidHeaderError, match=match) as info:
        HeaderBlob.from_bytes(data)
    if field is not None:
        assert info.value.field == field
    if offset is not None:
        assert info.value.offset == offset
    return info.value


def base_parts(**kw: Any) -> BlobParts:
    """A valid blob: 12 x 10 Cube, T=2, B=3, uint16, tiles 8 x 8, frame_unit 0 (N = 24)."""
    counts = [100 + (7 * i) % 13 for i in range(24)]
    parts = BlobParts(12, 10, 2, 8, 8, 3, 16, 1, 0, counts)
    for key, value in kw.items():
        setattr(parts, key, value)
    return parts


# --------------------------------------------------------------------------- #
# Building from a file
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", list(FILES))
def test_build_header_equals_the_expected_blob(written: dict[str, tuple[Path, bytes]], name: str) -> None:
    path, blob = written[name]
    expected = expected_blob(path.read_bytes())
    assert build_header(path) == expected
    assert blob == expected


def test_build_header_of_the_shared_cube(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    data = path.read_bytes()
    parts = FileParts.from_bytes(data)
    counts = [int(c) for c in parts.entry(325).values]
    assert len(counts) == 3 * 2 * 4 * 3  # tiles across * down * B * T
    cmin = min(counts)
    bits = (max(counts) - cmin).bit_length()
    fixed = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, 130, 100, 3, 48, 64, 4, 16, 1, 0, cmin, bits)
    assert fixed[:4] == b"LOVE"
    assert build_header(path) == blob
    assert blob[:HEADER_SIZE] == fixed
    assert len(blob) == 32 + (len(counts) * bits + 7) // 8


def test_single_frame_file_has_count_bits_0(written: dict[str, tuple[Path, bytes]]) -> None:
    path, blob = written["single"]
    assert build_header(path) == blob
    parsed = HeaderBlob.from_bytes(blob)
    assert parsed.layout.frame_count == 1
    assert parsed.count_bits == 0
    assert blob[31] == 0
    assert len(blob) == 32
    assert struct.unpack_from("<I", blob, 27)[0] == parsed.frame_byte_counts[0]


@pytest.mark.parametrize("name", list(FILES))
def test_offsets_and_trailer_offset_equal_the_files(written: dict[str, tuple[Path, bytes]], name: str) -> None:
    path, blob = written[name]
    data = path.read_bytes()
    parts = FileParts.from_bytes(data)
    parsed = HeaderBlob.from_bytes(blob)
    tile_offsets = [int(v) for v in parts.entry(324).values]
    counts = [int(v) for v in parts.entry(325).values]
    assert parsed.offsets[:-1].tolist() == tile_offsets
    assert parsed.base_frame_offset == tile_offsets[0] == parts.base_frame_offset
    assert parsed.trailer_offset == int(parsed.offsets[-1]) == len(data) - len(parts.trailer)
    cmin = min(counts)
    for k in range(len(counts)):
        assert parsed.frame_range(k) == (tile_offsets[k], counts[k])
        # The closed form of Offset reconstruction.
        assert tile_offsets[k] == parsed.base_frame_offset + k * cmin + sum(c - cmin for c in counts[:k])


@pytest.mark.parametrize(
    ("base", "counts", "fits"),
    [
        (1, [2**63 - 1, 2**63 - 1], True),  # the last offset is 2**64 - 1: summed in uint64, exactly
        (2, [2**63 - 1, 2**63 - 1], False),
        (0, [2**63, 2**63], False),  # their uint64 sum wraps to 0
        (0, [2**62] * 5, False),
    ],
    ids=["last-fits", "one-over", "wraps-to-zero", "wraps-past-max"],
)
def test_offsets_that_do_not_fit_uint64_are_refused_however_the_sum_wraps(base: int, counts: list[int], fits: bool) -> None:
    if fits:
        assert frame_offsets(base, counts).tolist() == [base, base + counts[0], base + sum(counts)]
    else:
        with pytest.raises(InvalidInputError, match="does not fit in uint64"):
            frame_offsets(base, counts)


def test_a_blob_whose_frames_end_past_uint64_is_refused() -> None:
    """2**33 - 2 frames of 2**32 - 1 bytes end past 2**64: its offsets would wrap, so it is invalid (*Offset
    reconstruction*), once limits let a blob hold that many frames at all."""
    # magic, version, width, length, T, tile width and length, B, bits, format, frame_unit, count_min, count_bits
    data = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, 2**32 - 1, 2, 1, 1, 1, 1, 8, 1, 0, 2**32 - 1, 0)
    with pytest.raises(InvalidHeaderError, match="does not fit in uint64") as info:
        HeaderBlob.from_bytes(data, limits=Limits(max_frames=2**34))
    assert info.value.rule == "Every reconstructed offset MUST fit in uint64" and info.value.field == "count_min"
    layout = HeaderBlob.from_bytes(data[:-5] + struct.pack("<IB", 1, 0), limits=Limits(max_frames=2**34)).layout
    with pytest.raises(InvalidInputError, match="does not fit in uint64"):
        HeaderBlob.uniform(layout, 2**32 - 1)


@pytest.mark.parametrize("uniform", [False, True])
def test_the_trailer_offset_of_a_blob_of_millions_of_frames_is_its_last_offset(uniform: bool) -> None:
    layout = Layout(10980, 10980, 73, 13, 256, 256, encoding_for_dtype(np.uint16), 0)
    counts = np.random.default_rng(0).integers(1, 1 << 20, layout.frame_count, dtype=np.uint64)
    blob = HeaderBlob.uniform(layout, 70_000) if uniform else HeaderBlob(layout, counts)
    parsed = HeaderBlob.from_bytes(blob.to_bytes())
    assert parsed == blob
    assert parsed.trailer_offset == blob.trailer_offset == int(parsed.offsets[-1])
    assert parsed.frame_range(layout.frame_count - 1) == (int(parsed.offsets[-2]), 70_000 if uniform else int(counts[-1]))


@pytest.mark.parametrize(
    ("b", "n", "expected"),
    [(1, 1, 452), (4, 192, 2756), (1, 2, 468), (4, 2, 468), (4, 3, 488), (5, 1, 472), (5, 3, 508), (65535, 1, 452 + 4 * 65535)],
)
def test_base_frame_offset_follows_the_formula(b: int, n: int, expected: int) -> None:
    assert base_frame_offset(samples_per_pixel=b, frame_count=n) == expected


def test_files_with_the_same_b_and_n_start_frames_at_the_same_byte(written: dict[str, tuple[Path, bytes]]) -> None:
    # "cube" (tile frames, N = 4 * 3 * 2) and "cube9" have the same B and N.
    a = HeaderBlob.from_bytes(written["cube"][1])
    b = HeaderBlob.from_bytes(written["cube9"][1])
    assert a.layout.frame_count == b.layout.frame_count == 24
    assert a.base_frame_offset == b.base_frame_offset


# --------------------------------------------------------------------------- #
# Round trips
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", list(FILES))
def test_blob_bytes_round_trip(written: dict[str, tuple[Path, bytes]], name: str) -> None:
    _, blob = written[name]
    parsed = HeaderBlob.from_bytes(blob)
    assert parsed.to_bytes() == blob
    assert HeaderBlob.from_bytes(bytearray(blob)) == parsed
    assert HeaderBlob.from_bytes(memoryview(blob)) == parsed


@pytest.mark.parametrize(
    "counts",
    [
        [5] * 24,
        [1] * 24,
        [U32] * 24,
        [1] * 23 + [U32],
        list(range(1, 25)),
        [U32 - i for i in range(24)],
        [2**k for k in range(24)],
    ],
    ids=["equal", "ones", "max", "extremes", "ramp", "top", "powers"],
)
def test_header_blob_object_round_trip(counts: list[int]) -> None:
    layout = Layout(12, 10, 2, 3, 8, 8, encoding_for_dtype("uint16"), 0)
    blob = HeaderBlob(layout, np.array(counts, dtype=np.uint64))
    raw = blob.to_bytes()
    assert raw == base_parts(counts=counts).to_bytes()
    assert HeaderBlob.from_bytes(raw) == blob
    assert blob.count_min == min(counts)
    assert blob.count_bits == (max(counts) - min(counts)).bit_length()


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 40),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 16),
    st.integers(1, 16),
    st.sampled_from([e.name for e in rumi_core.ENCODINGS]),
    st.data(),
)
def test_blob_round_trip_property(width: int, length: int, t: int, b: int, tw: int, tl: int, dtype: str, data: st.DataObject) -> None:
    units = [u for u, fu in rumi_core.FRAME_UNITS.items() if fu.is_valid(bands=b, times=t)]
    unit = data.draw(st.sampled_from(units))
    layout = Layout(width, length, t, b, tw, tl, encoding_for_dtype(dtype), unit)
    n = layout.frame_count
    low = data.draw(st.integers(1, U32))
    counts = data.draw(st.lists(st.integers(low, min(U32, low + data.draw(st.integers(0, 2**20)))), min_size=n, max_size=n))
    blob = HeaderBlob(layout, np.array(counts, dtype=np.uint64))
    raw = blob.to_bytes()
    enc = layout.encoding
    assert raw == BlobParts(width, length, t, tw, tl, b, enc.bits_per_sample, enc.sample_format, unit, counts).to_bytes()
    assert HeaderBlob.from_bytes(raw) == blob


# --------------------------------------------------------------------------- #
# Rejection of malformed blobs
# --------------------------------------------------------------------------- #


def test_base_parts_is_valid() -> None:
    HeaderBlob.from_bytes(base_parts().to_bytes())


@pytest.mark.parametrize("magic", [0, 0x4556464C, 0x494D5552, 0x4C4F5645])
def test_magic_must_be_love(magic: int) -> None:
    reject(base_parts(magic=magic).to_bytes(), r"magic is b'.*', expected b'LOVE'", field="magic", offset=0)


@pytest.mark.parametrize("version", [0, 2, 0x100, 0xFFFF])
def test_version_must_be_1(version: int) -> None:
    reject(base_parts(version=version).to_bytes(), rf"version is {version}, expected 1", field="version", offset=4)


@pytest.mark.parametrize(
    ("name", "offset"),
    [("image_width", 6), ("image_length", 10), ("time_count", 14), ("tile_width", 18), ("tile_length", 20), ("samples_per_pixel", 22)],
)
def test_dimensions_must_be_greater_than_zero(name: str, offset: int) -> None:
    err = reject(base_parts(**{name: 0}).to_bytes(), rf"{name} is 0", field=name, offset=offset)
    assert err.rule == f"{name} MUST be greater than zero"


@pytest.mark.parametrize("pair", sorted(RESERVED_PAIRS), ids=[f"{f}-{b}" for f, b in sorted(RESERVED_PAIRS)])
def test_reserved_pairs_are_rejected(pair: tuple[int, int]) -> None:
    fmt, bits = pair
    reject(base_parts(sample_format=fmt, bits_per_sample=bits).to_bytes(), rf"\(sample_format={fmt}, bits_per_sample={bits}\) is reserved")


@pytest.mark.parametrize("pair", [(0, 8), (1, 0), (1, 7), (2, 1), (3, 8), (4, 16), (6, 16), (100, 16), (102, 8), (255, 255)])
def test_unlisted_pairs_are_rejected(pair: tuple[int, int]) -> None:
    fmt, bits = pair
    reject(
        base_parts(sample_format=fmt, bits_per_sample=bits).to_bytes(), rf"\(sample_format={fmt}, bits_per_sample={bits}\) is not listed"
    )


@pytest.mark.parametrize(
    ("time_count", "bands", "unit", "match"),
    [
        (2, 3, 10, r"frame_unit 10 is not registered"),
        (2, 3, 255, r"frame_unit 255 is not registered"),
        (2, 3, 1, r"frame_unit 1 is not valid for B=3, T=2"),
        (2, 3, 2, r"frame_unit 2 is not valid for B=3, T=2"),
        (1, 3, 3, r"frame_unit 3 is not valid for B=3, T=1"),
        (1, 3, 9, r"frame_unit 9 is not valid for B=3, T=1"),
        (1, 1, 1, r"frame_unit 1 is not valid for B=1, T=1"),
        (4, 1, 9, r"frame_unit 9 is not valid for B=1, T=4"),
    ],
)
def test_frame_unit_must_be_registered_and_valid(time_count: int, bands: int, unit: int, match: str) -> None:
    err = reject(base_parts(time_count=time_count, samples_per_pixel=bands, frame_unit=unit).to_bytes(), match, offset=26)
    assert err.field == "FrameUnit"


@pytest.mark.parametrize("bits", [33, 40, 64, 255])
def test_count_bits_must_not_exceed_32(bits: int) -> None:
    reject(base_parts(count_bits=bits).to_bytes(), rf"count_bits is {bits}, expected 0..32", field="count_bits", offset=31)


def test_count_min_must_not_be_zero() -> None:
    reject(base_parts(count_min=0).to_bytes(), r"count_min is 0", field="count_min")


@pytest.mark.parametrize("below", [1, 50, 99])
def test_count_min_must_be_the_minimum(below: int) -> None:
    parts = base_parts()
    real = min(parts.counts)
    parts.count_min = real - below  # residuals are taken from this min: none is 0
    reject(parts.to_bytes(), rf"count_min is {real - below}, but the smallest decoded count is {real}", field="count_min")


@pytest.mark.parametrize("extra", [1, 2, 8, 32 - 4])
def test_count_bits_must_be_minimal(extra: int) -> None:
    parts = base_parts()
    minimum = (max(parts.counts) - min(parts.counts)).bit_length()
    parts.count_bits = minimum + extra
    reject(parts.to_bytes(), rf"count_bits is {minimum + extra}, the minimum width is {minimum}", field="count_bits")


@pytest.mark.parametrize("bits", [1, 7, 32])
def test_one_frame_blob_must_have_count_bits_0(bits: int) -> None:
    parts = BlobParts(3, 3, 1, 8, 8, 1, 8, 1, 0, [37], count_bits=bits)
    reject(parts.to_bytes(), rf"count_bits is {bits}, the minimum width is 0")


def test_equal_counts_must_have_count_bits_0() -> None:
    reject(base_parts(counts=[9] * 24, count_bits=1).to_bytes(), r"count_bits is 1, the minimum width is 0")


@pytest.mark.parametrize("spare", [0b1, 0b1000, 0b1111])
def test_unused_bits_must_be_zero(spare: int) -> None:
    # N = 24 leaves no spare bits at any width, so use an Image of N = 4 frames
    # (12 x 10, B = T = 1) with 3-bit residuals: 12 bits in 2 bytes, 4 spare.
    parts = BlobParts(12, 10, 1, 8, 8, 1, 16, 1, 0, [10, 12, 17, 11], spare=spare)
    HeaderBlob.from_bytes(dataclasses.replace(parts, spare=0).to_bytes())
    reject(parts.to_bytes(), r"unused bits in the final byte", field="frame_byte_counts")


@pytest.mark.parametrize(
    ("cut", "match"),
    [
        (lambda b: b[:0], r"the blob is 0 bytes, shorter than its 32-byte header"),
        (lambda b: b[:31], r"the blob is 31 bytes, shorter than its 32-byte header"),
        (lambda b: b[:32], r"the blob is 32 bytes, expected 32 \+ ceil\(N \* count_bits / 8\) = \d+"),
        (lambda b: b[:-1], r"the blob is \d+ bytes, expected 32 \+ ceil"),
        (lambda b: b + b"\x00", r"the blob is \d+ bytes, expected 32 \+ ceil.*no padding"),
        (lambda b: b + bytes(7), r"the blob is \d+ bytes, expected 32 \+ ceil.*no padding"),
        (lambda b: b + b"LOVE", r"the blob is \d+ bytes, expected 32 \+ ceil.*no padding"),
    ],
    ids=["empty", "31", "fixed-only", "one-short", "one-padding", "seven-padding", "appended"],
)
def test_blob_size_must_be_exact(cut: Any, match: str) -> None:
    reject(cut(base_parts().to_bytes()), match, field="blob size")


def test_a_single_frame_blob_with_padding_is_rejected() -> None:
    raw = BlobParts(3, 3, 1, 8, 8, 1, 8, 1, 0, [37]).to_bytes()
    HeaderBlob.from_bytes(raw)
    reject(raw + b"\x00", r"the blob is 33 bytes, expected 32 \+ ceil\(N \* count_bits / 8\) = 32")


@pytest.mark.parametrize(
    ("count_min", "residuals"),
    [(U32, [0, 1] + [0] * 22), (U32 - 15, [0] * 23 + [16]), (2**31, [0] * 23 + [2**31])],
)
def test_reconstructed_counts_must_fit_in_uint32(count_min: int, residuals: list[int]) -> None:
    parts = base_parts(count_min=count_min, residuals=residuals)
    reject(parts.to_bytes(), r"a reconstructed count does not fit in uint32", field="frame_byte_counts")


def test_a_huge_frame_count_is_refused_before_allocation() -> None:
    parts = BlobParts(U32, U32, 1, 1, 1, 1, 8, 1, 0, [1])  # N ~ 1.8e19
    with pytest.raises(ResourceLimitError, match=r"frame count N is \d+, above Limits.max_frames"):
        HeaderBlob.from_bytes(parts.to_bytes())
    with pytest.raises(ResourceLimitError, match=r"above Limits.max_frames = 10;"):
        HeaderBlob.from_bytes(base_parts().to_bytes(), limits=Limits(max_frames=10))


def test_truncated_blob_at_every_length_is_rejected(written: dict[str, tuple[Path, bytes]]) -> None:
    _, blob = written["cube"]
    for size in range(len(blob)):
        with pytest.raises(InvalidHeaderError, match=r"the blob is \d+ bytes"):
            HeaderBlob.from_bytes(blob[:size])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_blob_corruption_yields_a_rumi_error_or_a_blob(data: st.DataObject) -> None:
    blob = base_parts().to_bytes()
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(0, 7)), min_size=1, max_size=3))
    for at, bit in flips:
        blob = flip_bit(blob, at, bit)
    with contextlib.suppress(InvalidHeaderError, ResourceLimitError):
        parsed = HeaderBlob.from_bytes(blob)
        assert parsed.to_bytes() == blob  # anything accepted is canonical


def test_header_blob_constructor_validates() -> None:
    layout = Layout(12, 10, 2, 3, 8, 8, encoding_for_dtype("uint16"), 0)
    with pytest.raises(InvalidInputError, match=r"expected 24 byte counts, got 23"):
        HeaderBlob(layout, np.ones(23, np.uint64))
    with pytest.raises(InvalidInputError, match=r"greater than zero and fit in uint32"):
        HeaderBlob(layout, np.zeros(24, np.uint64))
    with pytest.raises(InvalidInputError, match=r"greater than zero and fit in uint32"):
        HeaderBlob(layout, np.full(24, U32 + 1, np.uint64))


# --------------------------------------------------------------------------- #
# A blob against its file
# --------------------------------------------------------------------------- #


MISMATCHES: list[tuple[str, str, dict[str, Any]]] = [
    ("image_width", "ImageWidth", {"image_width": 13}),
    ("image_length", "ImageLength", {"image_length": 9}),
    ("time_count", "TimeCount", {"time_count": 3}),
    ("tile_width", "TileWidth", {"tile_width": 16}),
    ("tile_length", "TileLength", {"tile_length": 4}),
    ("samples_per_pixel", "SamplesPerPixel", {"samples_per_pixel": 2}),
    ("bits_per_sample", "BitsPerSample", {"encoding": encoding_for_dtype("int32")}),
    ("sample_format", "SampleFormat", {"encoding": encoding_for_dtype("uint16")}),
    ("frame_unit", "FrameUnit", {"frame_unit": 9}),
]


def _mismatched(blob: HeaderBlob, change: dict[str, Any]) -> HeaderBlob:
    layout = dataclasses.replace(blob.layout, **change)
    counts = np.resize(blob.frame_byte_counts, layout.frame_count)
    return HeaderBlob(layout, counts)


def _head(path: Path) -> ParsedHead:
    with BytesSource(path.read_bytes()) as src:
        return read_structure(src).head


@pytest.mark.parametrize(("field", "tag", "change"), MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_check_against_head_names_every_duplicated_field(
    written: dict[str, tuple[Path, bytes]], field: str, tag: str, change: dict[str, Any]
) -> None:
    path, raw = written["cube"]  # 12 x 10, T=2, B=3, int16, frame_unit 0
    head = _head(path)
    blob = HeaderBlob.from_bytes(raw)
    check_against_head(blob, head)
    wrong = _mismatched(blob, change)
    ours = getattr(wrong.layout, field, None)
    if ours is None:
        ours = getattr(wrong.layout.encoding, field)
    theirs = getattr(head.layout, field, None)
    if theirs is None:
        theirs = getattr(head.layout.encoding, field)
    match = rf"header blob {field} is {ours}, the file's {tag} is {theirs}"
    with pytest.raises(HeaderMismatchError, match=match) as info:
        check_against_head(wrong, head)
    assert info.value.field == field
    assert info.value.rule == "Every duplicated value MUST match"
    # The same through validate(), with the blob as bytes and as an object.
    with pytest.raises(HeaderMismatchError, match=match):
        validate(path, wrong.to_bytes(), quick=True)
    with pytest.raises(HeaderMismatchError, match=match):
        validate(path, wrong)


@pytest.mark.parametrize("index", [0, 7, 23])
@pytest.mark.parametrize("delta", [-1, 1])
def test_check_against_head_compares_every_byte_count(written: dict[str, tuple[Path, bytes]], index: int, delta: int) -> None:
    path, raw = written["cube"]
    blob = HeaderBlob.from_bytes(raw)
    counts = blob.frame_byte_counts.copy()
    counts[index] = int(counts[index]) + delta
    wrong = HeaderBlob(blob.layout, counts)
    match = (
        rf"header blob frame_byte_counts\[{index}\] is {int(counts[index])}, "
        rf"the file's TileByteCounts\[{index}\] is {int(blob.frame_byte_counts[index])}"
    )
    with pytest.raises(HeaderMismatchError, match=match) as info:
        validate(path, wrong.to_bytes(), quick=True)
    assert info.value.field == "frame_byte_counts"


def test_check_against_head_compares_the_number_of_counts(written: dict[str, tuple[Path, bytes]]) -> None:
    path, raw = written["cube"]
    head = _head(path)
    short = ParsedHead(head.layout, head.georef, head.tile_byte_counts[:-1], head.base_frame_offset)
    with pytest.raises(HeaderMismatchError, match=r"header blob has 24 frame byte counts, the file's TileByteCounts has 23"):
        check_against_head(HeaderBlob.from_bytes(raw), short)


@pytest.mark.parametrize(
    ("file", "blob_of"), [("cube", "cube9"), ("cube9", "cube"), ("image", "cube"), ("cells", "wide"), ("single", "image")]
)
def test_validate_with_another_files_blob_fails(written: dict[str, tuple[Path, bytes]], file: str, blob_of: str) -> None:
    path, _ = written[file]
    _, other = written[blob_of]
    with pytest.raises(HeaderMismatchError, match=r"header blob \w+(\[\d+\])? is \d+, the file's \w+(\[\d+\])? is \d+"):
        validate(path, other)


@pytest.mark.parametrize("name", list(FILES))
def test_validate_with_the_right_blob_passes(written: dict[str, tuple[Path, bytes]], name: str) -> None:
    path, blob = written[name]
    validate(path, blob)
    validate(path, HeaderBlob.from_bytes(blob), quick=True)


def test_validate_with_a_malformed_blob_raises_invalid_header(written: dict[str, tuple[Path, bytes]]) -> None:
    path, blob = written["cube"]
    with pytest.raises(InvalidHeaderError, match=r"magic is b'NOPE', expected b'LOVE'"):
        validate(path, b"NOPE" + blob[4:])
    with pytest.raises(InvalidHeaderError, match=r"the blob is \d+ bytes, expected 32 \+ ceil"):
        validate(path, blob + b"\x00")


# --------------------------------------------------------------------------- #
# build_header refuses files that are not compliant
# --------------------------------------------------------------------------- #


BROKEN_FILES = {
    "magic": (lambda d: b"RUMX" + d[4:], r"magic is b'RUMX'"),
    "trailing-byte": (lambda d: d + b"\x00", r"expected exactly 28 \+ S"),
    "truncated": (lambda d: d[:-1], r"the trailer|time fields"),
    "tile-offset": (lambda d: patch_value(d, 324, 3, 1), r"TileOffsets\[3\] is 1, reconstructed offset is \d+"),
    "frame-unit": (lambda d: patch_value(d, 65000, 0, 3), r"TileOffsets has 24 entries, frame_unit 3 needs g = 4"),
    "pair": (lambda d: patch_value(d, 258, 1, 8), r"differ between bands"),
    "reserved-pair": (lambda d: patch_value(patch_value(patch_value(d, 258, 0, 2), 258, 1, 2), 258, 2, 2), r"\(2, 2\) is reserved"),
    "epsg": (lambda d: patch_value(d, 34735, 7, 1), r"GTModelTypeGeoKey 1 comes with key 2048, expected 3072"),
    "width-0": (lambda d: patch_value(d, 256, 0, 0), r"ImageWidth is 0"),
}


@pytest.mark.parametrize("case", list(BROKEN_FILES))
def test_build_header_refuses_an_invalid_file(written: dict[str, tuple[Path, bytes]], tmp_path: Path, case: str) -> None:
    path, _ = written["cube"]
    mutate, match = BROKEN_FILES[case]
    bad = tmp_path / "bad.rumi"
    bad.write_bytes(mutate(path.read_bytes()))
    with pytest.raises(InvalidFileError, match=match):
        build_header(bad)


def test_build_header_of_a_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"cannot open .*absent\.rumi"):
        build_header(tmp_path / "absent.rumi")


def test_every_header_error_is_a_rumi_error() -> None:
    for exc in (InvalidHeaderError, HeaderMismatchError, ResourceLimitError):
        assert issubclass(exc, RumiError)
        assert issubclass(exc, ValueError)
