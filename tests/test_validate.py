"""Rejection tests for rumi_core.validate: one test per MUST of the specification about files.

Each test takes a small valid file, breaks exactly one rule (rebuilding the rest
consistently with :mod:`rumi_core.testing` helpers) and checks the error class,
its message and, where the error is located, its field. Sections follow the
specification: File header, Fixed IFD, Placement, Frame order, Sample
encodings, Validating frame_unit, Georeferencing, Trailer, Frames, Resource
limits; then truncation and fuzzing, then the ``rumi validate`` command.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumi_core
from rumi_core.assemble import assemble
from rumi_core.cli.main import cli
from rumi_core.codecs import parse_codec
from rumi_core.encodings import RESERVED_PAIRS, encoding_for_dtype
from rumi_core.errors import FrameDecodeError, HeaderMismatchError, InvalidFileError, RumiError, SourceError
from rumi_core.georef import Georeferencing
from rumi_core.header import build_header
from rumi_core.layout import Layout
from rumi_core.sources import LocalFileSource
from rumi_core.testing import BlobParts, CountingSource, FileParts, RawEntry, TrailerParts, flip_bit, patch_value, value_offset
from rumi_core.time_coordinates import TimeCoordinates
from rumi_core.trailer import Trailer
from rumi_core.validate import validate

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

INT64_MAX = 2**63 - 1
DAY = 86400
T0 = 1_609_459_200  # 2021-01-01T00:00:00Z

TAG_NAMES = {
    256: "ImageWidth",
    257: "ImageLength",
    258: "BitsPerSample",
    277: "SamplesPerPixel",
    322: "TileWidth",
    323: "TileLength",
    324: "TileOffsets",
    325: "TileByteCounts",
    339: "SampleFormat",
    34264: "ModelTransformationTag",
    34735: "GeoKeyDirectoryTag",
    65000: "FrameUnit",
    65001: "TimeCount",
}
TAG_TYPES = {256: 4, 257: 4, 258: 3, 277: 3, 322: 3, 323: 3, 324: 16, 325: 4, 339: 3, 34264: 12, 34735: 3, 65000: 3, 65001: 4}
TAG_ORDER = list(TAG_NAMES)
SCALARS = (256, 257, 277, 322, 323, 65000, 65001)


def _samples(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 100, shape).astype(dtype)


# name: (data shape, dtype, write keywords). Every file is 10 x 12 with 8 x 8
# tiles (a 2 x 2 grid with clipped edge tiles) unless noted.
FILES: dict[str, tuple[tuple[int, ...], str, dict[str, Any]]] = {
    # One frame, B = T = 1: every IFD value but the georeferencing is inline.
    "single": ((1, 3, 3), "uint16", {"bands": ["only"], "times": ["2020-01-01"], "crs": 32633, "transform": (10, 0, 5e5, 0, -10, 4e6)}),
    # An Image of three bands in tile frames, projected CRS.
    "image": (
        (3, 10, 12),
        "uint16",
        {"bands": ["B2", "B3", "B4"], "times": ["2020-06-01"], "crs": "EPSG:32633", "transform": (10, 0, 5e5, 0, -10, 4e6)},
    ),
    # A Cube of five bands (BitsPerSample and SampleFormat stored externally),
    # instants in seconds, geographic CRS, N = 4 * 5 * 3 = 60.
    "cube": (
        (3, 5, 10, 12),
        "int16",
        {
            "bands": ["b0", "b1", "b2", "b3", "b4"],
            "times": [f"2021-01-{d:02d}T10:30:00Z" for d in (1, 11, 21)],
            "crs": 4326,
            "transform": (0.01, 0, 10.0, 0, -0.01, 50.0),
        },
    ),
    # A Cube in cell frames (frame_unit 4), interval times, no CRS.
    "cells": (
        (2, 3, 10, 12),
        "float32",
        {"bands": ["r", "g", "b"], "times": [("2020-01-01", "2021-01-01"), ("2021-01-01", "2022-01-01")], "frame_unit": 4},
    ),
    # One band, four time steps, frame_unit 1 (t h w), PixelIsPoint.
    "series": (
        (4, 1, 10, 12),
        "uint8",
        {
            "bands": ["ndvi"],
            "times": ["2020-01-01", "2020-01-02", "2020-01-04", "2020-01-05"],
            "frame_unit": 1,
            "crs": 3857,
            "transform": (20, 0, 0, 0, -20, 0),
            "pixel_is_point": True,
        },
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The bytes of every file in :data:`FILES`."""
    out = {}
    directory = tmp_path_factory.mktemp("valid")
    for seed, (name, (shape, dtype, kw)) in enumerate(FILES.items()):
        path = directory / f"{name}.rumi"
        rumi_core.write(path, _samples(shape, dtype, seed), tile_size=8, **kw)
        out[name] = path.read_bytes()
    return out


def parts_of(files: dict[str, bytes], name: str) -> FileParts:
    return FileParts.from_bytes(files[name])


E = TypeVar("E", bound=RumiError)


def invalid(data: bytes, exc: type[E], match: str, *, quick: bool = True) -> E:
    """Validate ``data`` and return the error, which must be ``exc`` and match ``match``."""
    with pytest.raises(exc, match=match) as info:
        validate(data, quick=quick, threads=1)
    return info.value


def put(data: bytes, offset: int, raw: bytes) -> bytes:
    return data[:offset] + raw + data[offset + len(raw) :]


def entry_at(index: int) -> int:
    """File offset of IFD entry ``index``."""
    return 16 + 8 + 20 * index


# --------------------------------------------------------------------------- #
# The fixtures and helpers themselves
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", list(FILES))
def test_fixture_files_are_valid_and_rebuild_byte_for_byte(files: dict[str, bytes], name: str) -> None:
    data = files[name]
    validate(data, threads=1)
    assert FileParts.from_bytes(data).to_bytes() == data


@pytest.mark.parametrize("name", list(FILES))
def test_trailer_parts_rebuild_the_written_trailer(files: dict[str, bytes], name: str) -> None:
    parts = parts_of(files, name)
    _, _, kw = FILES[name]
    times = TimeCoordinates.from_values(kw["times"])
    rebuilt = TrailerParts.for_seconds(kw["bands"], list(times.seconds), time_type=times.time_type).to_bytes()
    assert rebuilt == parts.trailer


# --------------------------------------------------------------------------- #
# File header: magic, version, reserved, ifd_offset
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("offset", "raw", "field", "match"),
    [
        pytest.param(0, b"RUMX", "magic", r"magic is b'RUMX', expected b'RUMI'", id="magic-RUMX"),
        pytest.param(0, b"rumi", "magic", r"magic is b'rumi', expected b'RUMI'", id="magic-lowercase"),
        pytest.param(0, b"II*\x00", "magic", r"magic is b'II\*\\x00', expected b'RUMI'", id="magic-tiff"),
        pytest.param(0, b"II+\x00", "magic", r"magic is b'II\+\\x00', expected b'RUMI'", id="magic-bigtiff"),
        pytest.param(4, struct.pack("<H", 0), "version", r"version is 0, expected 1", id="version-0"),
        pytest.param(4, struct.pack("<H", 2), "version", r"version is 2, expected 1", id="version-2"),
        pytest.param(4, struct.pack("<H", 0x100), "version", r"version is 256, expected 1", id="version-big-endian-1"),
        pytest.param(6, struct.pack("<H", 1), "reserved", r"reserved is 1, expected 0", id="reserved-1"),
        pytest.param(6, struct.pack("<H", 0x8000), "reserved", r"reserved is 32768, expected 0", id="reserved-high-bit"),
        pytest.param(8, struct.pack("<Q", 0), "ifd_offset", r"ifd_offset is 0, expected 16", id="ifd_offset-0"),
        pytest.param(8, struct.pack("<Q", 8), "ifd_offset", r"ifd_offset is 8, expected 16", id="ifd_offset-8"),
        pytest.param(8, struct.pack("<Q", 17), "ifd_offset", r"ifd_offset is 17, expected 16", id="ifd_offset-17"),
        pytest.param(8, struct.pack("<Q", 1 << 63), "ifd_offset", r"ifd_offset is 9223372036854775808, expected 16", id="ifd_offset-huge"),
    ],
)
def test_file_header_rejects_any_other_value(files: dict[str, bytes], offset: int, raw: bytes, field: str, match: str) -> None:
    err = invalid(put(files["image"], offset, raw), InvalidFileError, match)
    assert err.field == field
    assert err.offset == offset


# --------------------------------------------------------------------------- #
# Fixed IFD: entry count, next IFD, tags, order, types, counts
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("count", [0, 1, 12, 14, 2**64 - 1])
def test_ifd_entry_count_must_be_13(files: dict[str, bytes], count: int) -> None:
    err = invalid(put(files["image"], 16, struct.pack("<Q", count)), InvalidFileError, rf"the IFD has {count} entries, expected 13")
    assert err.field == "IFD entry count"


def test_a_fourteenth_entry_is_rejected(files: dict[str, bytes]) -> None:
    parts = parts_of(files, "image")
    # ModelPixelScaleTag in its rising-order place: a GeoTIFF habit rumi forbids.
    parts.entries.insert(9, RawEntry(33550, 12, [10.0, 10.0, 0.0]))
    invalid(parts.to_bytes(), InvalidFileError, r"the IFD has 14 entries, expected 13")


@pytest.mark.parametrize("next_ifd", [1, 292, 2**63])
def test_next_ifd_offset_must_be_zero(files: dict[str, bytes], next_ifd: int) -> None:
    parts = parts_of(files, "image")
    parts.next_ifd = next_ifd
    err = invalid(parts.to_bytes(), InvalidFileError, rf"the next-IFD offset is {next_ifd}, expected 0")
    assert err.offset == 284


# For each of the 13 positions, a tag that must not be there: TIFF strip and
# overview tags, the GeoTIFF tags rumi forbids, a neighbour, an unknown private tag.
WRONG_TAGS = [
    (0, 254),  # NewSubfileType
    (1, 273),  # StripOffsets
    (2, 259),  # Compression
    (3, 278),  # RowsPerStrip
    (4, 323),  # TileLength in TileWidth's place
    (5, 322),
    (6, 279),  # StripByteCounts
    (7, 330),  # SubIFDs
    (8, 338),  # ExtraSamples
    (9, 33550),  # ModelPixelScaleTag
    (9, 33922),  # ModelTiepointTag
    (10, 34736),  # GeoDoubleParamsTag
    (10, 34737),  # GeoAsciiParamsTag
    (11, 65002),
    (12, 65000),
]


@pytest.mark.parametrize(("index", "tag"), WRONG_TAGS, ids=[f"entry{i}-tag{t}" for i, t in WRONG_TAGS])
def test_each_entry_must_carry_its_tag(files: dict[str, bytes], index: int, tag: int) -> None:
    data = put(files["image"], entry_at(index), struct.pack("<H", tag))
    want = TAG_ORDER[index]
    err = invalid(data, InvalidFileError, rf"IFD entry {index} has tag {tag}, expected {want} \({TAG_NAMES[want]}\)")
    assert err.field == TAG_NAMES[want]
    assert err.offset == entry_at(index)


@pytest.mark.parametrize("index", range(12))
def test_tags_must_be_in_rising_order(files: dict[str, bytes], index: int) -> None:
    parts = parts_of(files, "cube")
    parts.entries[index], parts.entries[index + 1] = parts.entries[index + 1], parts.entries[index]
    got, want = TAG_ORDER[index + 1], TAG_ORDER[index]
    invalid(parts.to_bytes(), InvalidFileError, rf"IFD entry {index} has tag {got}, expected {want}")


@pytest.mark.parametrize(
    ("tag", "bad_type"),
    [(tag, t) for tag in TAG_ORDER for t in (0, 1, 2, 3, 4, 5, 11, 12, 16, 17) if t != TAG_TYPES[tag]],
)
def test_each_tag_must_have_its_type(files: dict[str, bytes], tag: int, bad_type: int) -> None:
    index = TAG_ORDER.index(tag)
    data = put(files["cube"], entry_at(index) + 2, struct.pack("<H", bad_type))
    err = invalid(data, InvalidFileError, rf"{TAG_NAMES[tag]} has type {bad_type}, expected {TAG_TYPES[tag]}")
    assert err.offset == entry_at(index) + 2


def _count_cases() -> list[Any]:
    cases = []
    for tag in SCALARS:
        for n in (0, 2):
            cases.append(pytest.param(tag, n, rf"{TAG_NAMES[tag]} has count {n}, expected 1", id=f"{TAG_NAMES[tag]}-{n}"))
    for tag in (258, 339):
        for n in (0, 4, 6):
            cases.append(pytest.param(tag, n, rf"{TAG_NAMES[tag]} has count {n}, expected B = 5", id=f"{TAG_NAMES[tag]}-{n}"))
    for tag in (34264, 34735):
        for n in (0, 15, 17, 32):
            cases.append(pytest.param(tag, n, rf"{TAG_NAMES[tag]} has count {n}, expected 16 = 16", id=f"{TAG_NAMES[tag]}-{n}"))
    return cases


@pytest.mark.parametrize(("tag", "count", "match"), _count_cases())
def test_each_tag_must_have_its_count(files: dict[str, bytes], tag: int, count: int, match: str) -> None:
    """The IFD stays internally consistent: the entry really holds ``count`` values."""
    parts = parts_of(files, "cube")
    entry = parts.entry(tag)
    values = list(entry.values) * 3
    entry.values = values[:count]
    invalid(parts.to_bytes(), InvalidFileError, match)


@pytest.mark.parametrize("tag", (*SCALARS, 258, 339, 34264, 34735))
def test_a_count_field_alone_disagreeing_is_rejected(files: dict[str, bytes], tag: int) -> None:
    parts = parts_of(files, "cube")
    parts.entry(tag).count = len(parts.entry(tag).values) + 1
    invalid(parts.to_bytes(), InvalidFileError, rf"{TAG_NAMES[tag]} has count")


# --------------------------------------------------------------------------- #
# Dimensions MUST be greater than zero
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("tag", [256, 257, 277, 322, 323, 65001])
@pytest.mark.parametrize("name", ["single", "cube"])
def test_dimensions_must_be_greater_than_zero(files: dict[str, bytes], name: str, tag: int) -> None:
    data = patch_value(files[name], tag, 0, 0)
    err = invalid(data, InvalidFileError, rf"{TAG_NAMES[tag]} is 0 .*{TAG_NAMES[tag]} MUST be greater than zero")
    assert err.field == TAG_NAMES[tag]


# --------------------------------------------------------------------------- #
# Placement: inline values, external values, frame data
# --------------------------------------------------------------------------- #


def _inline_cases() -> list[Any]:
    """Every (file, tag) whose value is inline with unused bytes."""
    cases = []
    widths = {3: 2, 4: 4, 12: 8, 16: 8}
    frames = {"single": 1, "image": 12, "cube": 60, "series": 4}
    bands = {"single": 1, "image": 3, "cube": 5, "series": 1}
    for name in frames:
        for tag in TAG_ORDER:
            count = {258: bands[name], 339: bands[name], 324: frames[name], 325: frames[name], 34264: 16, 34735: 16}.get(tag, 1)
            if count * widths[TAG_TYPES[tag]] < 8:
                cases.append(pytest.param(name, tag, id=f"{name}-{TAG_NAMES[tag]}"))
    return cases


@pytest.mark.parametrize(("name", "tag"), _inline_cases())
@pytest.mark.parametrize("fill", [0x01, 0xFF])
def test_unused_inline_bytes_must_be_zero(files: dict[str, bytes], name: str, tag: int, fill: int) -> None:
    parts = parts_of(files, name)
    parts.entry(tag).fill = fill
    err = invalid(parts.to_bytes(), InvalidFileError, rf"unused bytes of the inline {TAG_NAMES[tag]} value are not zero")
    assert err.field == TAG_NAMES[tag]


@pytest.mark.parametrize("name", ["single", "image"])
def test_only_the_last_unused_inline_byte_set_is_rejected(files: dict[str, bytes], name: str) -> None:
    index = TAG_ORDER.index(65000)
    data = put(files[name], entry_at(index) + 19, b"\x80")
    invalid(data, InvalidFileError, r"unused bytes of the inline FrameUnit value are not zero")


EXTERNAL_TAGS = [258, 324, 325, 339, 34264, 34735]


@pytest.mark.parametrize("tag", EXTERNAL_TAGS)
@pytest.mark.parametrize("delta", [-2, 1, 8])
def test_external_value_pointer_must_be_where_the_value_belongs(files: dict[str, bytes], tag: int, delta: int) -> None:
    parts = parts_of(files, "cube")
    at = parts.external_offsets()[tag]
    parts.entry(tag).offset = at + delta
    err = invalid(parts.to_bytes(), InvalidFileError, rf"{TAG_NAMES[tag]} is stored at {at + delta}, expected {at}")
    assert err.rule is not None and "without gaps" in err.rule


@pytest.mark.parametrize("tag", EXTERNAL_TAGS)
@pytest.mark.parametrize("gap", [1, 4, 8])
def test_external_values_must_not_leave_gaps(files: dict[str, bytes], tag: int, gap: int) -> None:
    """The pointers are honest and the frames follow; only the gap is wrong."""
    parts = parts_of(files, "cube")
    canonical = parts.external_offsets()[tag]
    parts.gaps = {tag: gap}
    invalid(parts.to_bytes(), InvalidFileError, rf"{TAG_NAMES[tag]} is stored at {canonical + gap}, expected {canonical}")


def test_external_values_must_follow_in_rising_tag_order(files: dict[str, bytes]) -> None:
    data = files["image"]
    m = value_offset(data, 34264)
    k = value_offset(data, 34735)
    assert k == m + 128
    # GeoKeyDirectoryTag first, then ModelTransformationTag; pointers updated.
    swapped = data[:m] + data[k : k + 32] + data[m : m + 128] + data[k + 32 :]
    swapped = put(swapped, entry_at(9) + 12, struct.pack("<Q", m + 32))
    swapped = put(swapped, entry_at(10) + 12, struct.pack("<Q", m))
    invalid(swapped, InvalidFileError, rf"ModelTransformationTag is stored at {m + 32}, expected {m}")


@pytest.mark.parametrize(("tag", "size"), [(258, 2), (324, 8), (325, 4), (339, 2)])
def test_values_of_eight_bytes_or_less_must_be_inline(files: dict[str, bytes], tag: int, size: int) -> None:
    """A small value moved to the external area pushes the next external value along."""
    parts = parts_of(files, "single")
    parts.entry(tag).external = True
    invalid(parts.to_bytes(), InvalidFileError, rf"ModelTransformationTag is stored at {292 + size}, expected 292")


@pytest.mark.parametrize("padding", [1, 4, 8, 64])
@pytest.mark.parametrize("name", ["single", "cube"])
def test_no_padding_between_external_values_and_frames(files: dict[str, bytes], name: str, padding: int) -> None:
    parts = parts_of(files, name)
    base = parts.base_frame_offset
    parts.padding = padding
    err = invalid(parts.to_bytes(), InvalidFileError, rf"TileOffsets\[0\] is {base + padding}, reconstructed offset is {base}")
    assert err.field == "TileOffsets"


# --------------------------------------------------------------------------- #
# Frame order and TileOffsets reconstruction; byte counts
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("index", [0, 5, 59])
@pytest.mark.parametrize("delta", [-1, 1, 1000])
def test_tile_offsets_must_match_reconstruction(files: dict[str, bytes], index: int, delta: int) -> None:
    data = files["cube"]
    stored = struct.unpack_from("<Q", data, value_offset(data, 324, index))[0]
    bad = patch_value(data, 324, index, stored + delta)
    err = invalid(bad, InvalidFileError, rf"^TileOffsets\[{index}\] is {stored + delta}, reconstructed offset is {stored}")
    assert err.field == "TileOffsets"
    assert "frame-index order" in (err.rule or "")


@pytest.mark.parametrize("order", [[1, 0], [3, 2], [5, 4]])
def test_frames_must_be_stored_in_frame_index_order(files: dict[str, bytes], order: list[int]) -> None:
    """Frames swapped on disk, with TileOffsets pointing at them honestly."""
    parts = parts_of(files, "cube")
    n = len(parts.frames)
    lo = min(order)
    parts.frame_order = [*range(lo), *order, *range(lo + 2, n)]
    offsets = parts.frame_offsets()
    invalid(parts.to_bytes(), InvalidFileError, rf"TileOffsets\[{lo}\] is {offsets[lo]}, reconstructed offset is")


def test_a_byte_count_that_disagrees_with_the_frames_breaks_contiguity(files: dict[str, bytes]) -> None:
    data = files["cube"]
    count = struct.unpack_from("<I", data, value_offset(data, 325, 7))[0]
    bad = patch_value(data, 325, 7, count + 1)
    invalid(bad, InvalidFileError, r"TileOffsets\[8\] is \d+, reconstructed offset is \d+")


@pytest.mark.parametrize(("name", "index"), [("single", 0), ("image", 0), ("image", 5), ("cube", 59)])
def test_every_byte_count_must_be_greater_than_zero(files: dict[str, bytes], name: str, index: int) -> None:
    parts = parts_of(files, name)
    parts.frames[index] = b""
    err = invalid(parts.to_bytes(), InvalidFileError, rf"TileByteCounts\[{index}\] is 0")
    assert err.field == "TileByteCounts"


# --------------------------------------------------------------------------- #
# Sample encodings
# --------------------------------------------------------------------------- #


def _set_pairs(parts: FileParts, formats: list[int], bits: list[int]) -> bytes:
    parts.entry(339).values = formats
    parts.entry(258).values = bits
    return parts.to_bytes()


@pytest.mark.parametrize("name", ["image", "cube"])
@pytest.mark.parametrize(
    ("tag", "value"),
    [(258, 8), (258, 32), (339, 3), (339, 6)],
    ids=["bits-8", "bits-32", "format-3", "format-6"],
)
def test_bits_and_format_must_be_b_repetitions_of_one_pair(files: dict[str, bytes], name: str, tag: int, value: int) -> None:
    parts = parts_of(files, name)
    values = list(parts.entry(tag).values)
    values[1] = value
    parts.entry(tag).values = values
    invalid(parts.to_bytes(), InvalidFileError, r"BitsPerSample and SampleFormat differ between bands.*MUST use the same pair")


@pytest.mark.parametrize("name", ["single", "image", "cube"])
@pytest.mark.parametrize("pair", sorted(RESERVED_PAIRS), ids=[f"{f}-{b}" for f, b in sorted(RESERVED_PAIRS)])
def test_reserved_pairs_are_rejected(files: dict[str, bytes], name: str, pair: tuple[int, int]) -> None:
    parts = parts_of(files, name)
    b = len(parts.entry(258).values)
    err = invalid(_set_pairs(parts, [pair[0]] * b, [pair[1]] * b), InvalidFileError, rf"= \({pair[0]}, {pair[1]}\) is reserved")
    assert err.field == "SampleFormat"


UNLISTED = [(0, 0), (0, 8), (1, 0), (1, 7), (1, 128), (2, 1), (3, 8), (3, 128), (4, 8), (5, 8), (6, 16), (6, 256),
            (7, 8), (100, 16), (102, 8), (103, 16), (104, 8), (106, 8), (109, 8), (65535, 65535)]  # fmt: skip


@pytest.mark.parametrize("name", ["image", "cube"])
@pytest.mark.parametrize("pair", UNLISTED, ids=[f"{f}-{b}" for f, b in UNLISTED])
def test_unlisted_pairs_are_rejected(files: dict[str, bytes], name: str, pair: tuple[int, int]) -> None:
    parts = parts_of(files, name)
    b = len(parts.entry(258).values)
    invalid(_set_pairs(parts, [pair[0]] * b, [pair[1]] * b), InvalidFileError, rf"= \({pair[0]}, {pair[1]}\) is not listed")


@pytest.mark.parametrize("pair", [(1, 8), (3, 64), (6, 128), (102, 16), (103, 8)])
def test_a_listed_pair_other_than_the_writers_passes_the_structure_check(files: dict[str, bytes], pair: tuple[int, int]) -> None:
    """The pair is checked against the table, not against the frames (quick mode)."""
    parts = parts_of(files, "cube")
    validate(_set_pairs(parts, [pair[0]] * 5, [pair[1]] * 5), quick=True)


# --------------------------------------------------------------------------- #
# Validating frame_unit
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("unit", [10, 11, 99, 65535])
@pytest.mark.parametrize("name", ["single", "cube"])
def test_unregistered_frame_unit_is_rejected(files: dict[str, bytes], name: str, unit: int) -> None:
    err = invalid(patch_value(files[name], 65000, 0, unit), InvalidFileError, rf"frame_unit {unit} is not registered")
    assert err.field == "FrameUnit"


INVALID_UNITS = {
    "single": ((1, 1), range(1, 10)),
    "image": ((3, 1), range(3, 10)),
    "series": ((1, 4), range(3, 10)),
    "cube": ((5, 3), (1, 2)),
    "cells": ((3, 2), (1, 2)),
}


@pytest.mark.parametrize(
    ("name", "unit"),
    [(name, unit) for name, (_, units) in INVALID_UNITS.items() for unit in units],
)
def test_frame_unit_must_be_valid_for_b_and_t(files: dict[str, bytes], name: str, unit: int) -> None:
    (b, t), _ = INVALID_UNITS[name]
    invalid(patch_value(files[name], 65000, 0, unit), InvalidFileError, rf"frame_unit {unit} is not valid for B={b}, T={t}")


@pytest.mark.parametrize(
    ("name", "unit", "match"),
    [
        *[("cube", u, rf"TileOffsets has 60 entries, frame_unit {u} needs g = 4") for u in range(3, 9)],
        ("cells", 0, r"TileOffsets has 4 entries, frame_unit 0 needs g \* B \* T = 24"),
        ("cells", 9, r"TileOffsets has 4 entries, frame_unit 9 needs g \* B \* T = 24"),
        ("image", 1, r"TileOffsets has 12 entries, frame_unit 1 needs g = 4"),
        ("series", 0, r"TileOffsets has 4 entries, frame_unit 0 needs g \* B \* T = 16"),
    ],
)
def test_offset_and_count_entries_must_match_the_frame_unit(files: dict[str, bytes], name: str, unit: int, match: str) -> None:
    err = invalid(patch_value(files[name], 65000, 0, unit), InvalidFileError, match)
    assert err.field == "TileOffsets"


@pytest.mark.parametrize("extra", [-1, 1])
@pytest.mark.parametrize("name", ["single", "image", "cube", "cells"])
def test_a_missing_or_extra_frame_is_rejected(files: dict[str, bytes], name: str, extra: int) -> None:
    """Both tables hold N +- 1 consistent entries: the count check fires."""
    parts = parts_of(files, name)
    n = len(parts.frames)
    if extra < 0 and n == 1:
        parts.frames = []
    elif extra < 0:
        parts.frames = parts.frames[:-1]
    else:
        parts.frames = [*parts.frames, parts.frames[-1]]
    invalid(parts.to_bytes(), InvalidFileError, rf"TileOffsets has {n + extra} entries, frame_unit \d needs .* = {n}")


def test_byte_counts_table_alone_with_the_wrong_count(files: dict[str, bytes]) -> None:
    data = put(files["cube"], entry_at(7) + 4, struct.pack("<Q", 59))
    invalid(data, InvalidFileError, r"TileByteCounts has 59 entries, frame_unit 0 needs g \* B \* T = 60")


# --------------------------------------------------------------------------- #
# Georeferencing
# --------------------------------------------------------------------------- #

GEOKEYS = 34735
MATRIX = 34264


def geo(data: bytes, *changes: tuple[int, float], tag: int = GEOKEYS) -> bytes:
    for index, value in changes:
        data = patch_value(data, tag, index, value)
    return data


@pytest.mark.parametrize(("index", "value"), [(0, 0), (0, 2), (1, 0), (1, 2), (2, 1), (3, 2), (3, 4)])
@pytest.mark.parametrize("name", ["image", "cells"])
def test_geokey_header_must_be_1_1_0_3(files: dict[str, bytes], name: str, index: int, value: int) -> None:
    err = invalid(geo(files[name], (index, value)), InvalidFileError, r"GeoKeyDirectoryTag header is .*expected \(1, 1, 0, 3\)")
    assert err.field == "GeoKeyDirectoryTag"


@pytest.mark.parametrize(
    "changes",
    [
        [(4, 1025)],  # the model key's id
        [(5, 1)],  # TIFFTagLocation must be 0
        [(6, 2)],  # count must be 1
        [(8, 1024)],
        [(9, 34736)],  # value in GeoDoubleParamsTag
        [(10, 0)],
        [(13, 34737)],  # value in GeoAsciiParamsTag
        [(14, 2)],
        [(4, 1025), (8, 1024), (7, 1), (11, 1)],  # raster type key before model type key
    ],
    ids=["model-id", "location", "count", "raster-id", "raster-location", "raster-count", "crs-location", "crs-count", "key-order"],
)
@pytest.mark.parametrize("name", ["image", "cells"])
def test_geokeys_must_be_stored_as_id_0_1_value_in_order(files: dict[str, bytes], name: str, changes: list[tuple[int, int]]) -> None:
    invalid(geo(files[name], *changes), InvalidFileError, r"GeoKeyDirectoryTag keys are .*\(key_id, 0, 1, value\)")


@pytest.mark.parametrize(
    ("name", "key", "model"),
    [("image", 2048, 1), ("image", 4096, 1), ("image", 0, 1), ("cube", 3072, 2), ("cube", 4096, 2), ("series", 2048, 1)],
)
def test_crs_key_must_agree_with_model_type(files: dict[str, bytes], name: str, key: int, model: int) -> None:
    want = 3072 if model == 1 else 2048
    invalid(
        geo(files[name], (12, key)),
        InvalidFileError,
        rf"GTModelTypeGeoKey {model} comes with key {key}, expected {want}.*MUST agree with GTModelTypeGeoKey",
    )


@pytest.mark.parametrize("code", [0, 1, 1023, 32767, 32768, 65535])
@pytest.mark.parametrize("name", ["image", "cube"])
def test_epsg_code_must_fall_between_1024_and_32766(files: dict[str, bytes], name: str, code: int) -> None:
    invalid(geo(files[name], (15, code)), InvalidFileError, rf"EPSG:{code} is outside 1024..32766")


@pytest.mark.parametrize("code", [1024, 1999, 5000, 9999])
def test_epsg_code_must_be_defined_by_the_registry(files: dict[str, bytes], code: int) -> None:
    invalid(geo(files["image"], (15, code)), InvalidFileError, rf"EPSG:{code} is not defined in the EPSG registry")


@pytest.mark.parametrize(
    ("name", "changes", "match"),
    [
        ("image", [(7, 2), (12, 2048)], r"EPSG:32633 is projected in the EPSG registry"),
        ("cube", [(7, 1), (12, 3072)], r"EPSG:4326 is geographic in the EPSG registry"),
        ("series", [(7, 2), (12, 2048)], r"EPSG:3857 is projected in the EPSG registry"),
        ("image", [(15, 4326)], r"EPSG:4326 is geographic in the EPSG registry"),
        ("cube", [(15, 32633)], r"EPSG:32633 is projected in the EPSG registry"),
    ],
)
def test_model_type_must_match_the_registry(files: dict[str, bytes], name: str, changes: list[tuple[int, int]], match: str) -> None:
    invalid(geo(files[name], *changes), InvalidFileError, match)


@pytest.mark.parametrize(
    ("code", "kind"),
    [(4978, "Geocentric CRS"), (4979, "Geographic 3D CRS"), (5773, "Vertical CRS"), (7405, "Compound CRS"), (20000, "Vertical CRS")],
)
def test_only_2d_geographic_and_projected_crs_are_allowed(files: dict[str, bytes], code: int, kind: str) -> None:
    invalid(geo(files["image"], (15, code)), InvalidFileError, rf"EPSG:{code} is a {kind}; rumi stores only 2D")


@pytest.mark.parametrize("model", [3, 4, 32767, 65535])
def test_model_type_must_be_0_1_or_2(files: dict[str, bytes], model: int) -> None:
    invalid(geo(files["image"], (7, model)), InvalidFileError, rf"GTModelTypeGeoKey is {model}, expected 0, 1 or 2")


@pytest.mark.parametrize("raster", [0, 3, 65535])
@pytest.mark.parametrize("name", ["image", "cells", "series"])
def test_raster_type_must_be_1_or_2(files: dict[str, bytes], name: str, raster: int) -> None:
    invalid(geo(files[name], (11, raster)), InvalidFileError, rf"GTRasterTypeGeoKey is {raster}, expected 1 or 2")


@pytest.mark.parametrize(
    ("index", "value"),
    [(8, 1.0), (9, -1.0), (10, 1.0), (11, 5.0), (10, float("nan")), (2, 1.0), (6, 0.5), (12, 1.0), (14, 1.0), (15, 2.0), (15, 0.0)],
)
@pytest.mark.parametrize("name", ["image", "cube"])
def test_transformation_matrix_must_be_affine_with_a_zero_third_row(files: dict[str, bytes], name: str, index: int, value: float) -> None:
    err = invalid(geo(files[name], (index, value), tag=MATRIX), InvalidFileError, r"ModelTransformationTag is not an affine matrix")
    assert err.field == "ModelTransformationTag"
    assert err.rule == "The third row MUST be zero"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("index", [0, 1, 3, 4, 5, 7])
def test_affine_coefficients_must_be_finite(files: dict[str, bytes], index: int, value: float) -> None:
    """Strict reading (no explicit MUST): a non-finite coefficient defines no transform."""
    err = invalid(
        geo(files["image"], (index, value), tag=MATRIX), InvalidFileError, r"ModelTransformationTag has a non-finite affine coefficient"
    )
    assert err.field == "ModelTransformationTag"


@pytest.mark.parametrize(("index", "value"), [(0, 10.0), (3, 5.0), (5, -1.0), (7, 1.0), (10, 1.0), (15, 0.0), (1, float("nan"))])
def test_undefined_georeferencing_must_use_the_defined_matrix(files: dict[str, bytes], index: int, value: float) -> None:
    invalid(geo(files["cells"], (index, value), tag=MATRIX), InvalidFileError, r"undefined georeferencing has a matrix other than")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ([(12, 3072)], r"stores key 3072 = 0, expected 2048 = 0"),
        ([(15, 4326)], r"stores key 2048 = 4326, expected 2048 = 0"),
        ([(12, 3072), (15, 32633)], r"stores key 3072 = 32633, expected 2048 = 0"),
    ],
)
def test_undefined_georeferencing_must_use_the_defined_keys(files: dict[str, bytes], changes: list[tuple[int, int]], match: str) -> None:
    invalid(geo(files["cells"], *changes), InvalidFileError, rf"undefined georeferencing {match}")


def test_undefined_georeferencing_accepts_pixel_is_point(files: dict[str, bytes]) -> None:
    structure = validate(geo(files["cells"], (11, 2)), quick=True)
    assert structure.head.georef == Georeferencing.undefined(pixel_is_point=True)


# --------------------------------------------------------------------------- #
# Trailer
# --------------------------------------------------------------------------- #


def with_trailer(files: dict[str, bytes], name: str, trailer: TrailerParts | bytes) -> bytes:
    parts = parts_of(files, name)
    parts.trailer = trailer if isinstance(trailer, bytes) else trailer.to_bytes()
    return parts.to_bytes()


def cube_trailer(**kw: Any) -> TrailerParts:
    """The "cube" file's trailer (5 bands, 3 instants, not whole days)."""
    base = TrailerParts.for_seconds([f"b{i}" for i in range(5)], [T0 + 37800, T0 + 10 * DAY + 37800, T0 + 20 * DAY + 37800])
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def cells_trailer(**kw: Any) -> TrailerParts:
    """The "cells" file's trailer (3 bands, 2 intervals)."""
    years = [1577836800, 1609459200, 1609459200, 1640995200]
    base = TrailerParts.for_seconds(["r", "g", "b"], years, time_type=1)
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def test_trailer_helpers_reproduce_the_fixture_trailers(files: dict[str, bytes]) -> None:
    assert with_trailer(files, "cube", cube_trailer()) == files["cube"]
    assert with_trailer(files, "cells", cells_trailer()) == files["cells"]


@pytest.mark.parametrize("magic", [0, 0x4C494155, 0x5441494C, 0x494D5552])
def test_trailer_magic_must_be_tail(files: dict[str, bytes], magic: int) -> None:
    err = invalid(with_trailer(files, "cube", cube_trailer(magic=magic)), InvalidFileError, r"trailer magic is .*, expected b'TAIL'")
    assert err.field == "trailer magic"
    assert err.offset == len(files["cube"]) - len(cube_trailer().to_bytes())


@pytest.mark.parametrize("version", [0, 2, 0x100, 0xFFFF])
def test_trailer_version_must_be_1(files: dict[str, bytes], version: int) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(version=version)), InvalidFileError, rf"trailer version is {version}, expected 1")


@pytest.mark.parametrize(
    ("band", "text", "match"),
    [
        (0, b"", r"band 0 text is empty"),
        (4, b"", r"band 4 text is empty"),
        (1, b"\x00", r"band 1 text contains the byte 0x00"),
        (1, b"B4\x00Red", r"band 1 text contains the byte 0x00"),
        (2, b"\xff", r"band 2 text is not valid UTF-8"),
        (2, b"caf\xc3", r"band 2 text is not valid UTF-8"),  # truncated sequence
        (2, b"\xc0\xaf", r"band 2 text is not valid UTF-8"),  # overlong
        (2, b"\xed\xa0\x80", r"band 2 text is not valid UTF-8"),  # surrogate
        (2, b"\xf4\x90\x80\x80", r"band 2 text is not valid UTF-8"),  # above U+10FFFF
        (3, b"b0", r"band 3 text 'b0' repeats band 0"),
        (4, b"b3", r"band 4 text 'b3' repeats band 3"),
    ],
)
def test_band_texts_must_be_non_empty_utf8_without_nul_and_unique(files: dict[str, bytes], band: int, text: bytes, match: str) -> None:
    texts = [f"b{i}".encode() for i in range(5)]
    texts[band] = text
    err = invalid(with_trailer(files, "cube", cube_trailer(texts=texts)), InvalidFileError, match)
    assert err.field == "band_texts"


def test_band_texts_equal_only_after_normalisation_are_distinct(files: dict[str, bytes]) -> None:
    """The rule compares byte sequences: NFC and NFD forms of one name are two texts."""
    texts = [b"b0", "caf\u00e9".encode(), "cafe\u0301".encode(), b"b3", b"b4"]
    structure = validate(with_trailer(files, "cube", cube_trailer(texts=texts)), quick=True)
    assert structure.trailer.band_texts[1] != structure.trailer.band_texts[2]


RESIDUAL_COORDS = [T0 + 7, T0 + 14, T0 + 27]
"""Three instants off the line: residuals [0, -3, 0], 3 bits each, 2 residual bytes."""


@pytest.mark.parametrize(
    ("cut", "match"),
    [
        (lambda t: t[:6], r"the trailer ends inside the length of band text 0"),
        (lambda t: t[:7], r"the trailer ends inside the length of band text 0"),
        (lambda t: t[:9], r"band text 0 of 2 bytes runs past the end of the file"),
        (lambda t: t[:3], r"the trailer is 3 bytes, shorter than its 6-byte magic and version"),
        (lambda t: b"", r"the trailer is 0 bytes, shorter than its 6-byte magic and version"),
        (lambda t: t[: -2 - 22 - 1], r"band text 4 of 2 bytes runs past the end of the file"),
        (lambda t: t[:-3], r"the trailer ends inside its time fields"),
        (lambda t: t[:-1], r"the trailer is \d+ bytes, expected exactly 28 \+ S"),
    ],
    ids=["in-length", "half-length", "in-text", "in-magic", "empty", "in-last-text", "in-time-fields", "in-residuals"],
)
def test_a_trailer_cut_short_is_rejected(files: dict[str, bytes], cut: Callable[[bytes], bytes], match: str) -> None:
    trailer = cube_trailer(coords=RESIDUAL_COORDS).to_bytes()
    validate(with_trailer(files, "cube", trailer), quick=True)
    error = invalid(with_trailer(files, "cube", cut(trailer)), InvalidFileError, match)
    assert error.rule == "The trailer size MUST be exactly 28 + S + ceil(C * time_bits / 8) bytes"


@pytest.mark.parametrize("length", [3, 100, 0xFFFF])
def test_a_band_text_length_past_the_end_is_rejected(files: dict[str, bytes], length: int) -> None:
    trailer = bytearray(cube_trailer().to_bytes())
    # The last band text's length field (bands b0..b3 take 4 bytes each).
    struct.pack_into("<H", trailer, 6 + 4 * 4, length)
    invalid(with_trailer(files, "cube", bytes(trailer)), InvalidFileError, rf"band text 4 of {length} bytes runs past the end|time fields")


@pytest.mark.parametrize("time_type", [0, 3, 255])
def test_time_type_must_be_1_or_2(files: dict[str, bytes], time_type: int) -> None:
    err = invalid(
        with_trailer(files, "cube", cube_trailer(time_type=time_type)),
        InvalidFileError,
        rf"time_type is {time_type}, expected 1 \(interval\) or 2 \(instant\)",
    )
    assert err.field == "time_type"
    assert err.rule == "A reader MUST reject any other value"


def test_time_type_interval_with_instant_data_is_rejected(files: dict[str, bytes]) -> None:
    """Reading 3 instants as intervals needs 6 residuals: the size no longer adds up.

    (Evenly spaced instants need no residual bytes, and read as intervals they
    form a valid axis: no rule is broken then, so this uses uneven instants.)
    """
    invalid(with_trailer(files, "cube", cube_trailer(coords=RESIDUAL_COORDS, time_type=1)), InvalidFileError, r"expected exactly 28 \+ S")


@pytest.mark.parametrize("scale", [0, 2, 60, 3600, 86399, 86401, 2**32 - 1])
def test_time_scale_must_be_1_or_86400(files: dict[str, bytes], scale: int) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(time_scale=scale)), InvalidFileError, rf"time_scale is {scale}, expected 1 or 86400")


@pytest.mark.parametrize("name", ["series", "cells", "single"])
def test_time_scale_must_be_86400_when_every_time_is_a_whole_day(files: dict[str, bytes], name: str) -> None:
    _, _, kw = FILES[name]
    times = TimeCoordinates.from_values(kw["times"])
    assert all(s % DAY == 0 for s in times.seconds)
    trailer = TrailerParts([t.encode() for t in kw["bands"]], list(times.seconds), time_type=times.time_type, time_scale=1)
    invalid(with_trailer(files, name, trailer), InvalidFileError, r"time_scale is 1, the coordinates require 86400")


def test_time_scale_86400_cannot_describe_times_that_are_not_whole_days() -> None:
    """Ambiguity note, no file to reject: with time_scale 86400 every coordinate is a
    whole number of days by construction, so "86400 when not whole days" cannot be
    written. The only testable half of the rule is the one above; here we check the
    decoder's arithmetic agrees (coordinates scale to whole days)."""
    trailer = cube_trailer(coords=[18628, 18638, 18648], time_scale=DAY)
    parsed = Trailer.from_bytes(trailer.to_bytes(), samples_per_pixel=5, time_count=3)
    assert all(s % DAY == 0 for s in parsed.times.seconds)


@pytest.mark.parametrize(
    "kw",
    [
        {"packed": [2, 37799, 0]},  # residual(0) = +1
        {"packed": [1, 37799, 0], "time_bits": 16},  # residual(0) = -1
        {"time_epoch": T0 + 37800 + 5},  # residuals follow the wrong epoch, so time(0) != epoch
    ],
    ids=["residual0-plus-1", "residual0-minus-1", "shifted-epoch"],
)
def test_time_epoch_must_equal_time_0(files: dict[str, bytes], kw: dict[str, Any]) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(**kw)), InvalidFileError, r"time_epoch is -?\d+ but time\(0\) decodes to -?\d+")


@pytest.mark.parametrize(
    ("coords", "step", "want"),
    [
        ([0, 1, 1], 0, 1),  # (1 - 0) / 2 = 0.5 rounds up to 1, not to even (0)
        ([0, 3, 3], 1, 2),  # 1.5 rounds up to 2, not down to 1
        ([10, 15, 15], 2, 3),  # 2.5 rounds up to 3, not to even (2)
        ([0, 10, 20], 11, 10),  # plainly wrong
        ([5, 5, 5], 1, 0),
    ],
)
def test_time_step_must_round_half_up(files: dict[str, bytes], coords: list[int], step: int, want: int) -> None:
    coords = [T0 + 7 + c for c in coords]  # not whole days: time_scale 1
    good = cube_trailer(coords=coords)
    assert good.fields()[1] == want
    validate(with_trailer(files, "cube", good), quick=True)
    invalid(
        with_trailer(files, "cube", cube_trailer(coords=coords, time_step=step)),
        InvalidFileError,
        rf"time_step is {step}, the coordinates give {want}",
    )


@pytest.mark.parametrize("step", [1, -1, 86400])
def test_time_step_must_be_0_with_one_coordinate(files: dict[str, bytes], step: int) -> None:
    trailer = TrailerParts([b"only"], [18262], time_scale=DAY, time_step=step)
    invalid(with_trailer(files, "single", trailer), InvalidFileError, rf"time_step is {step}, the coordinates give 0")


@pytest.mark.parametrize("extra", [1, 7, 8, 48])
@pytest.mark.parametrize("name", ["cube", "single"])
def test_time_bits_must_be_minimal(files: dict[str, bytes], name: str, extra: int) -> None:
    base = cube_trailer() if name == "cube" else TrailerParts([b"only"], [18262], time_scale=DAY)
    minimum = base.fields()[2]
    base.time_bits = minimum + extra
    invalid(with_trailer(files, name, base), InvalidFileError, rf"time_bits is {minimum + extra}, the minimum is {minimum}")


@pytest.mark.parametrize("bits", [65, 100, 255])
def test_time_bits_must_not_exceed_64(files: dict[str, bytes], bits: int) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(time_bits=bits)), InvalidFileError, rf"time_bits is {bits}, expected 0..64")


@pytest.mark.parametrize("spare", [0b1, 0b100, 0b1111111])
def test_unused_residual_bits_must_be_zero(files: dict[str, bytes], spare: int) -> None:
    coords = RESIDUAL_COORDS  # 9 bits used in 2 bytes: 7 spare bits
    good = cube_trailer(coords=coords)
    assert good.fields()[2] == 3
    validate(with_trailer(files, "cube", good), quick=True)
    invalid(with_trailer(files, "cube", cube_trailer(coords=coords, spare=spare)), InvalidFileError, r"unused bits in the final byte")


@pytest.mark.parametrize(
    "coords",
    [[T0 + 20, T0 + 10, T0 + 30], [T0 + 10, T0 + 30, T0 + 29], [T0 + 1, T0, T0]],
)
def test_instants_must_be_non_decreasing(files: dict[str, bytes], coords: list[int]) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(coords=coords)), InvalidFileError, r"is before instant .*MUST be non-decreasing")


def test_equal_instants_are_allowed(files: dict[str, bytes]) -> None:
    validate(with_trailer(files, "cube", cube_trailer(coords=[T0 + 1, T0 + 1, T0 + 1])), quick=True)


Y2020, Y2021, Y2022, Y2023 = 18262, 18628, 18993, 19358  # days since 1970


@pytest.mark.parametrize(
    ("coords", "match"),
    [
        ([Y2020, Y2020, Y2021, Y2022], r"interval 0 does not end after it starts"),
        ([Y2021, Y2020, Y2021, Y2022], r"interval 0 does not end after it starts"),
        ([Y2020, Y2021, Y2022, Y2022], r"interval 1 does not end after it starts"),
        ([Y2020, Y2022, Y2021, Y2023], r"interval 0 overlaps interval 1"),
        ([Y2021, Y2022, Y2020, Y2021], r"interval 0 overlaps interval 1"),
    ],
)
def test_intervals_must_be_non_empty_and_must_not_overlap(files: dict[str, bytes], coords: list[int], match: str) -> None:
    invalid(with_trailer(files, "cells", cells_trailer(coords=coords)), InvalidFileError, match)


def test_intervals_may_meet_or_leave_gaps(files: dict[str, bytes]) -> None:
    validate(with_trailer(files, "cells", cells_trailer(coords=[Y2020, Y2021, Y2021, Y2022])), quick=True)
    validate(with_trailer(files, "cells", cells_trailer(coords=[Y2020, Y2021, Y2022, Y2023])), quick=True)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"time_epoch": INT64_MAX, "time_step": 0, "packed": [0, 2, 0]}, r"decoded time coordinate 1 does not fit in int64"),
        ({"time_epoch": -(2**63), "time_step": 0, "packed": [0, 0, 1]}, r"decoded time coordinate 2 does not fit in int64"),
        ({"time_epoch": 0, "time_step": INT64_MAX, "packed": [0, 0, 0]}, r"decoded time coordinate 2 does not fit in int64"),
        ({"coords": [2**62, 2**62, 2**62], "time_scale": DAY}, r"a decoded time in seconds does not fit in int64"),
    ],
)
def test_decoded_coordinates_must_fit_in_int64(files: dict[str, bytes], kw: dict[str, Any], match: str) -> None:
    invalid(with_trailer(files, "cube", cube_trailer(**kw)), InvalidFileError, match)


@pytest.mark.parametrize("extra", [b"\x00", b"TAIL", bytes(64)])
@pytest.mark.parametrize("name", ["single", "cube", "cells"])
def test_no_bytes_may_follow_the_trailer(files: dict[str, bytes], name: str, extra: bytes) -> None:
    err = invalid(files[name] + extra, InvalidFileError, r"the trailer is \d+ bytes, expected exactly 28 \+ S \+ ceil")
    assert err.field == "trailer size"


def test_megabytes_after_the_frames_are_refused_before_reading_them(files: dict[str, bytes]) -> None:
    invalid(files["single"] + bytes(2 << 20), InvalidFileError, r"more than any trailer of this file can hold")


@pytest.mark.parametrize("name", ["single", "cube", "cells"])
def test_a_missing_last_byte_is_rejected(files: dict[str, bytes], name: str) -> None:
    # Without residual bytes, the last byte is part of time_scale.
    invalid(files[name][:-1], InvalidFileError, r"the trailer is \d+ bytes, expected exactly|the trailer ends inside its time fields")


def test_a_missing_trailer_is_rejected(files: dict[str, bytes]) -> None:
    invalid(with_trailer(files, "cube", b""), InvalidFileError, r"the trailer is 0 bytes")


# --------------------------------------------------------------------------- #
# Frames: OpenZL content, decoded size, boolean bytes
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("name", ["single", "cube", "cells"])
def test_a_corrupt_frame_fails_full_validation_only(files: dict[str, bytes], name: str, where: str) -> None:
    parts = parts_of(files, name)
    index = len(parts.frames) // 2
    frame = parts.frames[index]
    pos = {"first": 0, "middle": len(frame) // 2, "last": len(frame) - 1}[where]
    parts.frames[index] = flip_bit(frame, pos, 3)
    data = parts.to_bytes()
    validate(data, quick=True)
    err = invalid(data, FrameDecodeError, rf"^frame {index}: ", quick=False)
    assert err.offset == parts.frame_offsets()[index]
    assert err.field == f"frame {index}"


@pytest.mark.parametrize("garbage", [b"\x00", bytes(40), b"not an openzl frame at all", b"\xff" * 64])
def test_a_frame_that_is_not_openzl_fails(files: dict[str, bytes], garbage: bytes) -> None:
    parts = parts_of(files, "image")
    parts.frames[3] = garbage
    data = parts.to_bytes()
    validate(data, quick=True)
    invalid(data, FrameDecodeError, r"^frame 3: ", quick=False)


def test_every_single_bit_flip_in_a_frame_is_caught(files: dict[str, bytes]) -> None:
    parts = parts_of(files, "single")
    frame = parts.frames[0]
    for pos in range(len(frame)):
        for bit in range(8):
            parts.frames[0] = flip_bit(frame, pos, bit)
            with pytest.raises(FrameDecodeError, match=r"^frame 0: "):
                validate(parts.to_bytes(), threads=1)


def _assemble(path: Path, layout: Layout, frames: list[bytes], georef: Georeferencing | None = None) -> bytes:
    trailer = Trailer(
        tuple(f"b{i}" for i in range(layout.samples_per_pixel)), TimeCoordinates.from_values(["2020-01-01"] * layout.time_count)
    )
    return assemble(path, layout=layout, georef=georef or Georeferencing.undefined(), trailer=trailer, frames=frames)


def _zero_frames(layout: Layout) -> list[bytes]:
    codec = parse_codec(None)
    dtype = layout.encoding.dtype
    return [codec.encode(np.zeros(layout.frame_shape(i), dtype), axes=layout.frame_axes) for i in range(layout.frame_count)]


@pytest.mark.parametrize(
    ("shape", "axes", "match"),
    [
        ((8, 7), ("h", "w"), r"^frame 0: frame declares 112 decoded bytes, expected 128"),  # frame 0 is 8 x 8 uint16
        ((8, 9), ("h", "w"), r"^frame 0: frame declares 144 decoded bytes, expected 128"),
        ((1, 1), ("h", "w"), r"^frame 0: frame declares 2 decoded bytes, expected 128"),
        ((2, 8, 8), ("b", "h", "w"), r"^frame 0: frame declares 256 decoded bytes, expected 128"),
    ],
    ids=["narrower", "wider", "one-sample", "two-planes"],
)
def test_a_frame_of_the_wrong_decoded_size_fails(tmp_path: Path, shape: tuple[int, ...], axes: tuple[str, ...], match: str) -> None:
    layout = Layout(12, 10, 1, 1, 8, 8, encoding_for_dtype("uint16"), 0)
    frames = _zero_frames(layout)
    frames[0] = parse_codec(None).encode(np.arange(np.prod(shape), dtype="uint16").reshape(shape), axes=axes)
    blob = _assemble(tmp_path / "f.rumi", layout, frames)
    validate(tmp_path / "f.rumi", blob, quick=True)
    with pytest.raises(FrameDecodeError, match=match) as info:
        validate(tmp_path / "f.rumi", blob)
    assert info.value.field == "frame 0"


def test_only_the_decoded_size_of_a_frame_is_checked(tmp_path: Path) -> None:
    """A frame records its byte size, not its shape: 1 x 64 samples in an 8 x 8 slot decode fine."""
    layout = Layout(12, 10, 1, 1, 8, 8, encoding_for_dtype("uint16"), 0)
    frames = _zero_frames(layout)
    frames[0] = parse_codec(None).encode(np.zeros((1, 64), "uint16"), axes=("h", "w"))
    blob = _assemble(tmp_path / "f.rumi", layout, frames)
    validate(tmp_path / "f.rumi", blob)


def test_a_cell_frame_missing_a_band_fails(tmp_path: Path) -> None:
    layout = Layout(12, 10, 1, 3, 8, 8, encoding_for_dtype("uint8"), 1)
    frames = _zero_frames(layout)
    frames[0] = parse_codec(None).encode(np.zeros((2, 8, 8), "uint8"), axes=("b", "h", "w"))
    blob = _assemble(tmp_path / "f.rumi", layout, frames)
    with pytest.raises(FrameDecodeError, match=r"frame 0: frame declares 128 decoded bytes, expected 192"):
        validate(tmp_path / "f.rumi", blob)


@pytest.mark.parametrize("bad", [2, 3, 0x80, 0xFF])
@pytest.mark.parametrize("frame_unit", [0, 2])
def test_boolean_samples_must_be_0_or_1(tmp_path: Path, bad: int, frame_unit: int) -> None:
    layout = Layout(12, 10, 1, 2, 8, 8, encoding_for_dtype("bool"), frame_unit)
    codec = parse_codec(None)
    frames = []
    for i in range(layout.frame_count):
        samples = np.zeros(layout.frame_shape(i), "uint8")  # uint8 bytes, stored in a bool-typed file
        samples.flat[-1] = bad if i == layout.frame_count - 1 else 1
        frames.append(codec.encode(samples, axes=layout.frame_axes))
    blob = _assemble(tmp_path / "b.rumi", layout, frames)
    validate(tmp_path / "b.rumi", blob, quick=True)
    last = layout.frame_count - 1
    with pytest.raises(InvalidFileError, match=rf"frame {last} holds a boolean byte other than 0 or 1.*MUST be 0 or 1") as info:
        validate(tmp_path / "b.rumi", blob)
    assert info.value.field == f"frame {last}"


def test_boolean_bytes_of_0_and_1_are_valid(tmp_path: Path) -> None:
    data = np.random.default_rng(3).integers(0, 2, (2, 10, 12)).astype(bool)
    blob = rumi_core.write(tmp_path / "ok.rumi", data, bands=["a", "b"], times=["2020-01-01"], tile_size=8)
    validate(tmp_path / "ok.rumi", blob)


# --------------------------------------------------------------------------- #
# Resource limits: sizes derived from the IFD are checked before reading
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(("width", "length"), [(1 << 13, 1 << 13), (1 << 20, 1 << 20), (0xFFFF_FFFF, 0xFFFF_FFFF)])
@pytest.mark.parametrize("as_path", [False, True])
def test_a_huge_declared_frame_count_fails_before_reading(
    files: dict[str, bytes], tmp_path: Path, width: int, length: int, as_path: bool
) -> None:
    """Dimensions and counts agree on N = width * length frames, but the file cannot hold their tables.

    Before the fix, a path source asked os.pread for 12 * N bytes: an
    OverflowError (not a RumiError) or a multi-gigabyte allocation.
    """
    parts = parts_of(files, "single")
    parts.entry(256).values = [width]
    parts.entry(257).values = [length]
    parts.entry(322).values = [1]
    parts.entry(323).values = [1]
    parts.auto_offsets = False
    parts.entry(324).count = width * length
    parts.entry(325).count = width * length
    parts.entry(324).external = parts.entry(325).external = True
    data = parts.to_bytes()
    source: Any = data
    if as_path:
        source = tmp_path / "huge.rumi"
        source.write_bytes(data)
    with pytest.raises(InvalidFileError, match=r"the file is \d+ bytes, but its IFD's external values end at \d+"):
        validate(source, quick=True)
    if as_path:
        with pytest.raises(InvalidFileError, match=r"external values end at"):
            build_header(source)


@pytest.mark.parametrize("count", [0x1000_0000, 0xFFFF_FFFF])
def test_a_blob_declaring_a_huge_frame_reads_no_such_range(files: dict[str, bytes], tmp_path: Path, count: int) -> None:
    """A wrong blob says frame 0 has 4 GiB: it is refused against the file size before any frame is read."""
    path = tmp_path / "single.rumi"
    path.write_bytes(files["single"])
    blob = BlobParts.from_bytes(build_header(path), [count]).to_bytes()
    with pytest.raises(HeaderMismatchError, match=rf"does not fit .*the file has {len(files['single'])} bytes"):
        rumi_core.read(path, blob, threads=1)
    source = CountingSource(LocalFileSource(path))  # a source of unknown kind is not sized up front
    with pytest.raises(InvalidFileError, match=rf"ends at byte {len(files['single'])}, but frame 0 ends at \d+"):
        rumi_core.read(source, blob, threads=1)


# --------------------------------------------------------------------------- #
# Truncation at every byte, and random corruption
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, np.ndarray]:
    """A small Cube with external values, several frames and a trailer: bytes, blob, data."""
    path = tmp_path_factory.mktemp("small") / "small.rumi"
    data = _samples((2, 5, 9, 10), "uint16", 11)
    blob = rumi_core.write(path, data, bands=list("abcde"), times=["2020-01-01", "2020-02-01T12:00:00Z"], tile_size=8, frame_unit=9)
    return path.read_bytes(), blob, data


def test_truncation_at_every_byte_raises_only_rumi_errors(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path) -> None:
    data, blob, array = small
    trailer_offset = rumi_core.HeaderBlob.from_bytes(blob).trailer_offset
    path = tmp_path / "cut.rumi"
    path.write_bytes(data)
    # Shrink one file in place, from len - 1 bytes down to 0: every check then
    # goes through the path source, as it would in production.
    for size in range(len(data) - 1, -1, -1):
        os.truncate(path, size)
        with pytest.raises(InvalidFileError, match=r"file|trailer|band|time|IFD|TileOffsets|bytes"):
            validate(data[:size], threads=1)
        with pytest.raises(InvalidFileError, match=r"file|trailer|band|time|IFD|TileOffsets|bytes") as err:
            validate(path, quick=True)
        assert "not a rumi file" not in str(err.value), err.value  # it is one, cut short
        with pytest.raises(InvalidFileError, match=r"file|trailer|band|time|IFD|TileOffsets|bytes"):
            build_header(path)
        if size < trailer_offset:
            # A frame is missing: the stateless reader must say so, not crash.
            with pytest.raises(RumiError, match=r"frame"):
                rumi_core.read(path, blob, threads=1)
        else:
            # The reader never touches the trailer.
            np.testing.assert_array_equal(rumi_core.read(path, blob, threads=1), array)


def test_truncated_blob_at_every_byte_raises_only_rumi_errors(small: tuple[bytes, bytes, np.ndarray]) -> None:
    data, blob, _ = small
    for size in range(len(blob)):
        with pytest.raises(RumiError, match=r"blob|count|magic"):
            rumi_core.read(data, blob[:size], threads=1)
        with pytest.raises(RumiError, match=r"blob|count|magic"):
            validate(data, blob[:size], threads=1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_corruption_yields_a_rumi_error_or_a_valid_file(data: st.DataObject) -> None:
    original = _small_file()
    size = len(original)
    flips = data.draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)), min_size=1, max_size=4))
    corrupt = bytearray(original)
    for at, mask in flips:
        corrupt[at] ^= mask
    quick = data.draw(st.booleans())
    with contextlib.suppress(RumiError):
        validate(bytes(corrupt), quick=quick, threads=1)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_random_bytes_overwriting_the_head_yield_a_rumi_error(data: st.DataObject) -> None:
    original = _small_file()
    at = data.draw(st.integers(0, 600))
    junk = data.draw(st.binary(min_size=1, max_size=16))
    corrupt = original[:at] + junk + original[at + len(junk) :]
    with contextlib.suppress(RumiError):
        validate(corrupt, quick=True)


_CACHE: dict[str, bytes] = {}


def _small_file() -> bytes:
    """A small valid file for Hypothesis tests, which cannot take function fixtures."""
    if "small" not in _CACHE:
        import tempfile
        from pathlib import Path as _Path

        with tempfile.TemporaryDirectory() as d:
            path = _Path(d) / "h.rumi"
            rumi_core.write(
                path,
                _samples((2, 5, 9, 10), "uint16", 5),
                bands=list("abcde"),
                times=[("2020-01-01", "2020-02-01"), ("2020-02-01", "2020-03-01T06:00:00Z")],
                tile_size=8,
                crs=32633,
                transform=(10, 0, 0, 0, -10, 0),
            )
            _CACHE["small"] = path.read_bytes()
    return _CACHE["small"]


# --------------------------------------------------------------------------- #
# rumi validate
# --------------------------------------------------------------------------- #


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["validate", *args])


def test_cli_valid_file_exits_0(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path) -> None:
    data, blob, _ = small
    (tmp_path / "f.rumi").write_bytes(data)
    (tmp_path / "f.rumih").write_bytes(blob)
    for extra in ([], ["--quick"], ["--header", str(tmp_path / "f.rumih")], ["--quick", "--header", str(tmp_path / "f.rumih")]):
        result = run(str(tmp_path / "f.rumi"), *extra)
        assert result.exit_code == 0, result.output
        assert "valid" in result.stdout
        assert result.stderr == ""
    assert "header blob" in run(str(tmp_path / "f.rumi"), "--header", str(tmp_path / "f.rumih")).stdout


@pytest.mark.parametrize("case", ["bad-blob", "other-blob"])
def test_cli_checks_the_blob_beside_the_file(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path, case: str) -> None:
    """The ``FILE + "h"`` that rumi read locates frames with is checked without --header, and named when it fails."""
    data, blob, _, match = _cli_invalid_cases(small)[case]
    (tmp_path / "f.rumi").write_bytes(data)
    alone = run(str(tmp_path / "f.rumi")).stdout
    assert alone.startswith(f"{tmp_path / 'f.rumi'}: valid (structure and ") and "header blob" not in alone
    (tmp_path / "f.rumih").write_bytes(small[1])
    assert run(str(tmp_path / "f.rumi")).stdout.endswith(f"frames and header blob {tmp_path / 'f.rumih'} checked)\n")
    assert blob is not None
    (tmp_path / "f.rumih").write_bytes(blob)
    result = run(str(tmp_path / "f.rumi"))
    assert result.exit_code == 1 and result.stderr.startswith(f"{tmp_path / 'f.rumi'}: invalid: header blob {tmp_path / 'f.rumih'}: ")
    assert re.search(match, result.stderr), result.stderr


def _cli_invalid_cases(small: tuple[bytes, bytes, np.ndarray]) -> dict[str, tuple[bytes, bytes | None, list[str], str]]:
    data, blob, _ = small
    parts = FileParts.from_bytes(data)
    parts.frames[2] = flip_bit(parts.frames[2], len(parts.frames[2]) // 2)
    corrupt_frame = parts.to_bytes()
    other_blob = bytearray(blob)
    struct.pack_into("<I", other_blob, 6, 11)  # image_width 11 instead of 10
    return {
        "magic": (b"RUMX" + data[4:], None, [], r"magic is b'RUMX'"),
        "trailing": (data + b"\x00", None, [], r"expected exactly 28 \+ S"),
        "truncated": (data[:300], None, [], r"the file is 300 bytes"),
        "empty": (b"", None, [], r"the file is 0 bytes"),
        "frame": (corrupt_frame, None, [], r"frame 2: "),
        "bad-blob": (data, b"NOPE" + blob[4:], [], r"magic is b'NOPE', expected b'LOVE'"),
        "other-blob": (data, bytes(other_blob), [], r"image_width is 11, the file's ImageWidth is 10"),
    }


@pytest.mark.parametrize("case", ["magic", "trailing", "truncated", "empty", "frame", "bad-blob", "other-blob"])
def test_cli_invalid_file_exits_1_with_one_line(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path, case: str) -> None:
    data, blob, extra, match = _cli_invalid_cases(small)[case]
    path = tmp_path / "bad.rumi"
    path.write_bytes(data)
    args = [str(path), *extra]
    if blob is not None:
        (tmp_path / "bad.rumih").write_bytes(blob)
        args += ["--header", str(tmp_path / "bad.rumih")]
    result = run(*args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{path}: invalid: ")
    assert re.search(match, lines[0]), lines[0]
    assert "Traceback" not in result.stderr
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_cli_corrupt_frame_passes_quick(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path) -> None:
    data, _, _, _ = _cli_invalid_cases(small)["frame"]
    (tmp_path / "f.rumi").write_bytes(data)
    assert run(str(tmp_path / "f.rumi"), "--quick").exit_code == 0
    assert run(str(tmp_path / "f.rumi")).exit_code == 1


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["{missing}"], r"cannot read"),
        ([], r"Missing argument"),
        (["{file}", "--header", "{missing}"], r"--header .*cannot read: No such file"),
        (["{file}", "--bogus"], r"No such option"),
        (["{dir}"], r"is a directory"),
        (["{file}", "{file}"], r"unexpected extra argument"),
    ],
    ids=["missing-file", "no-argument", "missing-blob", "unknown-option", "directory", "two-files"],
)
def test_cli_usage_and_io_errors_exit_2(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path, args: list[str], match: str) -> None:
    data, _, _ = small
    (tmp_path / "f.rumi").write_bytes(data)
    names = {"missing": str(tmp_path / "nope.rumi"), "file": str(tmp_path / "f.rumi"), "dir": str(tmp_path)}
    result = run(*(a.format(**names) for a in args))
    assert result.exit_code == 2, result.output
    assert re.search(match, result.stderr, re.IGNORECASE), result.stderr
    assert "Traceback" not in result.stderr


def test_cli_unreadable_blob_exits_2(small: tuple[bytes, bytes, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, blob, _ = small
    (tmp_path / "f.rumi").write_bytes(data)
    (tmp_path / "f.rumih").write_bytes(blob)

    def denied(*args: object, **kwargs: object) -> Any:
        raise PermissionError(13, "Permission denied")

    # The blob is read by rumi_core.header.blob_bytes; root reads a file whatever its mode, so open() is denied there.
    import rumi_core.header

    monkeypatch.setattr(rumi_core.header, "open", denied, raising=False)
    result = run(str(tmp_path / "f.rumi"), "--header", str(tmp_path / "f.rumih"))
    assert result.exit_code == 2, result.output
    assert re.search(r"f\.rumih: cannot read: .*Permission denied", result.stderr), result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_source_error_is_not_an_invalid_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"cannot open"):
        validate(tmp_path / "absent.rumi")
