"""Resource limits come before allocation (spec: Resource limits), and read agrees with validate.

A hostile header blob or file of a few bytes may declare any shape. Each test
below builds such an input and checks the invariant: the operation is refused
(or completes) with memory proportional to the bytes given plus the output
asked for, never to what the input claims. Memory is measured with
tracemalloc, which sees NumPy's allocations.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tracemalloc
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import rumi_core
from rumi_core import HeaderBlob, Limits
from rumi_core.errors import FrameDecodeError, HeaderMismatchError, InvalidFileError, InvalidInputError, ResourceLimitError, RumiError
from rumi_core.limits import usable_memory
from rumi_core.testing import patch_value, random_samples
from rumi_core.time_coordinates import TimeCoordinates
from rumi_core.times import INSTANT, INT64_MAX, INT64_MIN, INTERVAL

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_BLOB = struct.Struct("<IHIIIHHHBBBIB")
_MiB = 1 << 20


def peak(fn: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """Run ``fn``; return the peak traced allocation and what it raised."""
    tracemalloc.start()
    error: BaseException | None = None
    try:
        fn()
    except BaseException as err:
        error = err
    finally:
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return top, error


def blob_bytes(*, width: int, length: int, times: int, tile: int, bands: int, bits: int, fmt: int, unit: int, count_min: int) -> bytes:
    """A 32-byte header blob (count_bits = 0: every frame has ``count_min`` bytes)."""
    return _BLOB.pack(0x45564F4C, 1, width, length, times, tile, tile, bands, bits, fmt, unit, count_min, 0)


@pytest.fixture
def small_image(tmp_path: Path) -> tuple[Path, bytes]:
    """A uint16 8 x 8 Image of one frame."""
    path = tmp_path / "small.rumi"
    blob = rumi_core.write(path, random_samples((1, 8, 8), "uint16"), bands=["a"], times=["2020-01-01"], tile_size=8)
    return path, bytes(blob)


def test_a_32_byte_blob_of_2_32_time_steps_is_refused_without_building_them(small_image: tuple[Path, bytes]) -> None:
    path, real = small_image
    frame = HeaderBlob.from_bytes(real).frame_byte_counts[0]
    # frame_unit 1 holds (t h w) of one band: N = g = 1 whatever T is.
    blob = blob_bytes(width=8, length=8, times=0xFFFF_FFFF, tile=8, bands=1, bits=16, fmt=1, unit=1, count_min=int(frame))
    used, err = peak(lambda: rumi_core.read(path, blob, threads=1))
    assert isinstance(err, ResourceLimitError) and "Limits.max_output_bytes" in str(err)
    assert used < _MiB
    # One time step is a small output, but its frame holds all 2**32 - 1 of them.
    used, err = peak(lambda: rumi_core.read(path, blob, times=[0], threads=1))
    assert isinstance(err, ResourceLimitError) and "Limits.max_frame_bytes" in str(err)
    assert used < _MiB


def test_a_blob_claiming_gigabytes_of_a_tiny_file_allocates_no_output(small_image: tuple[Path, bytes]) -> None:
    path, real = small_image
    frame = int(HeaderBlob.from_bytes(real).frame_byte_counts[0])
    blob = blob_bytes(width=65535, length=65535, times=1, tile=65535, bands=1, bits=8, fmt=1, unit=0, count_min=frame)
    # 4 GiB of output, within the limits: the first frame is decoded before the output exists.
    used, err = peak(lambda: rumi_core.read(path, blob, threads=1, limits=Limits(max_output_bytes=8 << 30, max_frame_bytes=8 << 30)))
    assert isinstance(err, FrameDecodeError)
    assert used < 4 * _MiB


def test_no_thread_allocates_the_output_before_a_frame_decodes(tmp_path: Path) -> None:
    path = tmp_path / "twins.rumi"
    # Two equal tiles make two equal frames, which a blob of one count (count_bits 0) can describe.
    real = rumi_core.write(path, np.zeros((1, 8, 16), np.uint8), bands=["a"], times=["2020-01-01"], tile_size=8, compression=None)
    frame = int(HeaderBlob.from_bytes(real).frame_byte_counts[0])
    assert HeaderBlob.from_bytes(real).count_bits == 0
    # 2 frames, 8 GiB of output: both threads decode before anything is allocated, and both frames refuse.
    blob = blob_bytes(width=2 * 65535, length=65535, times=1, tile=65535, bands=1, bits=8, fmt=1, unit=0, count_min=frame)
    used, err = peak(lambda: rumi_core.read(path, blob, threads=2, limits=Limits(max_output_bytes=16 << 30, max_frame_bytes=8 << 30)))
    assert isinstance(err, FrameDecodeError) and "frame declares 64 decoded bytes, expected 4294836225" in str(err)
    assert used < 4 * _MiB


def test_millions_of_frames_a_small_file_cannot_hold_are_refused_before_looping(small_image: tuple[Path, bytes]) -> None:
    path, _ = small_image
    blob = blob_bytes(width=4096, length=4096, times=1, tile=1, bands=1, bits=8, fmt=1, unit=0, count_min=1)  # N = 2**24
    used, err = peak(lambda: rumi_core.read(path, blob, threads=1))
    assert isinstance(err, HeaderMismatchError) and "end of the last frame" in str(err)
    assert used < _MiB


def test_a_blob_of_equal_counts_is_held_as_one_count() -> None:
    data = blob_bytes(width=8192, length=8192, times=1, tile=1, bands=1, bits=8, fmt=1, unit=0, count_min=7)  # N = 2**26
    blob: HeaderBlob | None = None

    def parse() -> None:
        nonlocal blob
        blob = HeaderBlob.from_bytes(data)

    used, err = peak(parse)
    assert err is None and blob is not None
    assert used < _MiB
    n = 1 << 26
    assert blob.count_bits == 0 and blob.count_min == 7
    assert blob.trailer_offset == blob.base_frame_offset + 7 * n
    assert blob.frame_range(n - 1) == (blob.base_frame_offset + 7 * (n - 1), 7)
    assert blob.to_bytes() == data
    assert HeaderBlob.from_bytes(data) == blob


def test_a_file_declaring_2_24_time_steps_costs_what_its_bytes_do(tmp_path: Path) -> None:
    """TimeCount 2**24 with cell frames (N = g) and a regular axis (time_bits = 0): a valid head and trailer."""
    path = tmp_path / "cells.rumi"
    data = random_samples((2, 2, 7, 5), "uint16")
    rumi_core.write(path, data, bands=["a", "b"], times=["2020-01-01", "2020-01-02"], tile_size=4, frame_unit=3)
    raw = patch_value(path.read_bytes(), 65001, 0, 1 << 24)
    path.write_bytes(raw)
    assert len(raw) < 4096

    summary: dict[str, Any] = {}
    used, err = peak(lambda: summary.update(rumi_core.info(path).to_dict()))
    assert err is None and used < 4 * _MiB
    assert summary["shape"][0] == 1 << 24
    last = f"{np.datetime64('2020-01-01') + np.timedelta64((1 << 24) - 1, 'D')}T00:00:00Z"
    assert summary["times"] == {"first": "2020-01-01T00:00:00Z", "last": last, "step_seconds": 86400, "coordinates": 1 << 24}
    json.dumps(summary)

    used, blob_err = peak(lambda: rumi_core.build_header(path))
    assert blob_err is None and used < 4 * _MiB
    for call in (
        lambda: rumi_core.validate(path, threads=1),
        lambda: rumi_core.read(path, threads=1),
        lambda: rumi_core.read(path, times=[5], window=((0, 2), (0, 2)), threads=1),
    ):
        used, err = peak(call)
        assert isinstance(err, RumiError), err
        assert used < 8 * _MiB


def test_default_limits_follow_the_memory_the_process_may_use() -> None:
    assert Limits().max_output_bytes == usable_memory() // 4
    code = "import rumi_core, json; l = rumi_core.Limits(); print(json.dumps([l.max_output_bytes, l.max_frame_bytes]))"
    script = f"import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); {code}"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [(2 << 30) // 4, (2 << 30) // 8]


def test_a_limit_is_named_in_the_error_and_can_be_raised(small_image: tuple[Path, bytes]) -> None:
    path, blob = small_image
    named = r"above Limits\.max_output_bytes = 64; raise it with rumi_core\.Limits\(max_output_bytes="
    with pytest.raises(ResourceLimitError, match=named) as info:
        rumi_core.read(path, blob, limits=Limits(max_output_bytes=64))
    assert info.value.field == "max_output_bytes"
    assert rumi_core.read(path, blob, limits=Limits(max_output_bytes=128)).shape == (1, 8, 8)


# -- read enforces the decode-time MUSTs that validate enforces -------------------------


def test_band_texts_past_the_limit_are_a_resource_limit_not_an_invalid_file(tmp_path: Path) -> None:
    """20 texts of 65535 bytes are valid (a text is bounded by its uint16 length alone) and total more than
    Limits.max_band_text_bytes: the writer writes them (its own check refused its output as invalid), and a reader
    under the default limits refuses with ResourceLimitError, which raised limits lift (*Resource limits*)."""
    path = tmp_path / "texts.rumi"
    bands = [chr(0x41 + b) * 65535 for b in range(20)]
    data = np.arange(20 * 4, dtype="uint8").reshape(20, 2, 2)
    blob = rumi_core.write(path, data, bands=bands, times=["2020-01-01"], tile_size=2)
    np.testing.assert_array_equal(rumi_core.read(path, blob), data)
    for call in (lambda: rumi_core.validate(path), lambda: rumi_core.info(path), lambda: rumi_core.read(path)):
        with pytest.raises(ResourceLimitError, match="max_band_text_bytes"):
            call()
    roomy = Limits(max_band_text_bytes=2 << 20)
    rumi_core.validate(path, blob, limits=roomy)
    assert list(rumi_core.info(path, limits=roomy).band_texts) == bands
    np.testing.assert_array_equal(rumi_core.read(path, blob, bands=[bands[3]], limits=roomy), data[3:4])
    # One byte more than any trailer of the file can hold is still a malformed file.
    with path.open("ab") as f:
        f.write(bytes(28 + 20 * 65537 + 1))
    with pytest.raises(InvalidFileError, match="more than any trailer"):
        rumi_core.validate(path, limits=roomy)


def test_the_writer_keeps_a_file_of_more_frames_than_the_default_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of more than Limits.max_frames frames is valid: the writer keeps it (its own check refused and deleted it
    once every frame was compressed), and a reader refuses it until the limit is raised. The default (2**26 frames) is
    lowered to 8 here, as a 67-million-frame file is no test's to write."""
    import importlib

    monkeypatch.setattr(importlib.import_module("rumi_core.assemble"), "DEFAULT_LIMITS", Limits(max_frames=8))
    path = tmp_path / "many.rumi"
    data = random_samples((3, 4, 4, 4), "uint8")
    blob = rumi_core.write(path, data, bands=["a", "b", "c", "d"], times=["2020-01-01", "2020-01-02", "2020-01-03"], tile_size=4)
    assert HeaderBlob.from_bytes(blob).layout.frame_count == 12
    with pytest.raises(ResourceLimitError, match=r"the file's frame count N is 12, above Limits\.max_frames = 8"):
        rumi_core.validate(path, limits=Limits(max_frames=8))
    rumi_core.validate(path, blob, limits=Limits(max_frames=12))
    np.testing.assert_array_equal(rumi_core.read(path, blob), data)


def test_band_names_are_found_under_the_limits_the_read_was_given(tmp_path: Path) -> None:
    """Selecting bands by name reads the trailer's texts: under the read's limits, as a read without a blob does."""
    path = tmp_path / "named.rumi"
    blob = rumi_core.write(path, np.zeros((2, 4, 4), np.uint8), bands=["b1", "b2"], times=["2020-01-01"], tile_size=4)
    tight = Limits(max_band_text_bytes=4)
    for header, bands in ((None, [1]), (blob, ["b2"])):
        with pytest.raises(ResourceLimitError, match="max_band_text_bytes"):
            rumi_core.read(path, header, bands=bands, limits=tight)
    assert rumi_core.read(path, blob, bands=[1], limits=tight).shape == rumi_core.read(path, blob, bands=["b2"]).shape == (1, 4, 4)


def test_a_trailer_too_short_for_what_it_declares_is_invalid_whatever_the_limits(tmp_path: Path) -> None:
    """A file is checked for being invalid before being too large to check: a trailer without the residuals or the band
    text it declares is refused as invalid (*Trailer*), not as past a limit, which raised limits would lift."""
    path = tmp_path / "one.rumi"
    rumi_core.write(path, np.zeros((1, 8, 8), np.uint8), bands=["only"], times=["2020-01-01T00:00:01Z"], tile_size=8)
    # frame_unit 1 keeps one frame for B = 1 whatever T; T = 100 coordinates of time_bits = 1 need 13 residual bytes.
    data = bytearray(patch_value(patch_value(path.read_bytes(), 65000, 0, 1), 65001, 0, 100))
    trailer = len(data) - 34  # magic and version, the text "only" and its length, the 22 bytes of time fields
    data[trailer + 6 + 6 + 1] = 1  # time_bits
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidFileError, match=r"the trailer is 34 bytes, expected exactly 28 \+ S"):
        rumi_core.validate(path, limits=Limits(max_time_coordinates=10))
    struct.pack_into("<H", data, trailer + 6, 0xFFFF)  # the band text's length, past the end of the file
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidFileError, match="band text 0 of 65535 bytes runs past the end of the file"):
        rumi_core.validate(path, limits=Limits(max_band_text_bytes=100))


def test_read_refuses_boolean_bytes_other_than_0_and_1(tmp_path: Path) -> None:
    """A uint8 file relabelled as boolean (BitsPerSample 1): both validate and read refuse it."""
    path = tmp_path / "bool.rumi"
    data = (np.arange(2 * 6 * 6, dtype=np.uint8) % 90).reshape(2, 6, 6)
    rumi_core.write(path, data, bands=["a", "b"], times=["2020-01-01"], tile_size=4)
    path.write_bytes(patch_value(patch_value(path.read_bytes(), 258, 0, 1), 258, 1, 1))
    blob = rumi_core.build_header(path)
    with pytest.raises(InvalidFileError, match="boolean byte other than 0 or 1"):
        rumi_core.validate(path, blob)
    with pytest.raises(InvalidFileError, match="boolean byte other than 0 or 1"):
        rumi_core.read(path, blob)
    with pytest.raises(InvalidFileError, match="boolean byte other than 0 or 1"):
        rumi_core.read(path, blob, bands=[1], window=((4, 6), (4, 6)), threads=2)


# -- times outside Python's datetime range -------------------------------------------------


def test_times_beyond_year_9999_and_int64_min_format_as_iso(tmp_path: Path) -> None:
    path = tmp_path / "far.rumi"
    times = ["2020-01-01", np.datetime64("10000-01-01")]
    rumi_core.write(path, random_samples((2, 1, 4, 4), "uint8"), bands=["a"], times=times, tile_size=4)
    assert rumi_core.info(path).to_dict()["times"] == ["2020-01-01T00:00:00Z", "10000-01-01T00:00:00Z"]
    far = TimeCoordinates(INSTANT, [INT64_MIN])
    assert far.to_json() == ["-292277022657-01-27T08:29:52Z"]
    with pytest.raises(RumiError, match="NaT"):
        far.to_datetime64()


# -- regular time axes stay arithmetic ------------------------------------------------------


@pytest.mark.parametrize(
    ("time_type", "first", "step", "count"),
    [(INSTANT, 0, 86400, 5), (INSTANT, -7, 0, 3), (INSTANT, 10, 3600, 1), (INTERVAL, 86400, 43200, 6)],
)
def test_a_regular_axis_is_the_explicit_axis_of_its_values(time_type: int, first: int, step: int, count: int) -> None:
    regular = TimeCoordinates.regular(time_type, first, step, count)
    explicit = TimeCoordinates(time_type, [first + i * step for i in range(count)])
    assert regular.is_regular and not explicit.is_regular
    assert regular == explicit and hash(regular) == hash(explicit)
    assert regular.seconds == explicit.seconds and regular.to_json() == explicit.to_json()
    fields, residuals = regular.encode()
    assert (fields, residuals) == explicit.encode()
    decoded, _ = TimeCoordinates.decode(fields, residuals, time_count=regular.time_count)
    assert decoded.is_regular and decoded == explicit


def test_a_regular_axis_keeps_the_ordering_rules() -> None:
    with pytest.raises(InvalidInputError, match="before instant"):
        TimeCoordinates.regular(INSTANT, 0, -1, 2)
    with pytest.raises(InvalidInputError, match="does not end after it starts"):
        TimeCoordinates.regular(INTERVAL, 0, 0, 4)
    with pytest.raises(InvalidInputError, match="does not fit in int64"):
        TimeCoordinates.regular(INSTANT, INT64_MAX, 1, 2)
    huge = TimeCoordinates.regular(INSTANT, 0, 1, 1 << 40)
    assert huge.coordinate_count == 1 << 40 and huge.second(-1) == (1 << 40) - 1
