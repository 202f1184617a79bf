"""Tests for rumi_core.reader and rumi_core.dataset (spec: Selective read model, Resource limits)."""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio.windows
from affine import Affine

import rumi_core
from rumi_core import BytesSource, HeaderBlob, Limits, LocalFileSource, reader
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import HeaderMismatchError, InvalidHeaderError, ResourceLimitError, RumiError, SelectionError, SourceError
from rumi_core.heap import MAX_TOP_PAD, keep_heap_slack
from rumi_core.layout import Layout
from rumi_core.reader import plan_requests, resolve_header
from rumi_core.selection import OutputPlan, RangePositions, output_positions, resolve_selection
from rumi_core.sources import is_local
from rumi_core.testing import CountingSource, random_samples, synthetic_scene

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def frame_ranges(source: CountingSource, blob: bytes) -> list[tuple[int, int]]:
    """The ranges a source was asked for that touch the frame data."""
    header = HeaderBlob.from_bytes(blob)
    start, end = header.base_frame_offset, header.trailer_offset
    return [(o, n) for o, n in source.ranges if o < end and o + n > start]


# -- resource limits come before any allocation or frame read ------------------------


def test_output_limit_is_checked_before_reading_frames(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(ResourceLimitError, match=r"the read's output array is 312000 bytes, above Limits.max_output_bytes = 1000"):
            rumi_core.read(source, blob, limits=Limits(max_output_bytes=1000))
        assert source.ranges == []  # with a blob, nothing at all was read
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(ResourceLimitError, match=r"above Limits\.max_output_bytes = 1000"):
            rumi_core.read(source, limits=Limits(max_output_bytes=1000))
        assert source.ranges  # the head and trailer were read to build the blob...
        assert frame_ranges(source, blob) == []  # ...but no frame
    # exactly at the limit is allowed
    window = ((0, 10), (0, 10))
    exact = 3 * 4 * 10 * 10 * 2
    out = rumi_core.read(path, blob, window=window, limits=Limits(max_output_bytes=exact))
    assert np.array_equal(out, data[:, :, :10, :10])


def test_frame_limit_is_checked_before_reading_frames(tmp_path: Path) -> None:
    data = random_samples((3, 4, 20, 20), "uint16")
    path = tmp_path / "cells.rumi"
    blob = rumi_core.write(path, data, bands=list("abcd"), times=["2020-01-01", "2020-01-02", "2020-01-03"], tile_size=10, frame_unit=3)
    frame_bytes = 3 * 4 * 10 * 10 * 2  # a whole cell is decoded even for one pixel
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(ResourceLimitError, match=f"a decoded frame is {frame_bytes} bytes, above Limits.max_frame_bytes = 1000"):
            rumi_core.read(source, blob, bands=[0], times=[0], window=((0, 1), (0, 1)), limits=Limits(max_frame_bytes=1000))
        assert source.ranges == []
    one_pixel = rumi_core.read(path, blob, bands=[0], times=[0], window=((0, 1), (0, 1)), limits=Limits(max_frame_bytes=frame_bytes))
    assert one_pixel.tolist() == [[[[int(data[0, 0, 0, 0])]]]]


def test_frame_count_limit_applies_to_a_blob(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    n = HeaderBlob.from_bytes(blob).layout.frame_count
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(ResourceLimitError, match=f"the blob's frame count N is {n}, above Limits.max_frames = 10"):
            rumi_core.read(source, blob, limits=Limits(max_frames=10))
        assert source.ranges == []


# -- selections ------------------------------------------------------------------------


def test_a_header_may_be_its_rumih_files_path(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    """read, open, info and validate take the blob's path as ``rumi read --header`` does: a text was a TypeError, and a
    Path's encoded name was parsed as a 7-byte blob. A file larger than any blob is refused unread."""
    path, blob, data = cube_file
    (tmp_path / "cube.rumih").write_bytes(blob)
    for given in (tmp_path / "cube.rumih", str(tmp_path / "cube.rumih")):
        np.testing.assert_array_equal(rumi_core.read(path, given, times=[1]), data[[1]])
        with rumi_core.open(path, given) as ds:
            assert ds.header.to_bytes() == blob
        assert rumi_core.info(path, given).shape == data.shape
        rumi_core.validate(path, given)
    with pytest.raises(InvalidHeaderError, match=r"cube\.rumi is \d+ bytes, more than a blob of at most 4 frames can be \(48\)"):
        rumi_core.read(path, path, limits=Limits(max_frames=4))
    with pytest.raises(SourceError, match=r"cannot read the header blob .*none\.rumih: No such file"):
        rumi_core.read(path, tmp_path / "none.rumih")


def test_a_dataset_takes_band_positions_not_a_name(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    """A text given for positions is refused whole: it was read character by character ("got 'r'")."""
    path, blob, _ = cube_file
    with rumi_core.open(path, blob) as ds, pytest.raises(SelectionError, match="band positions are integers, got 'red'"):
        ds.read(bands="red")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("selection", "match"),
    [
        ({"bands": [4]}, r"band position 4 is outside 0\.\.3"),
        ({"bands": [-1]}, r"band position -1 is outside 0\.\.3"),
        ({"bands": [0, 1, 9]}, r"band position 9 is outside 0\.\.3"),
        ({"bands": []}, "select at least one band position"),
        ({"bands": [1.0]}, "band positions are integers, got 1.0"),
        ({"bands": [True]}, "band positions are integers, got True"),
        ({"window": ((False, True), (0, 10))}, r"window bounds are whole pixels, got \(\(False, True\), \(0, 10\)\)$"),
        ({"times": [3]}, r"time position 3 is outside 0\.\.2"),
        ({"times": [-3]}, r"time position -3 is outside 0\.\.2"),
        ({"times": []}, "select at least one time position"),
        ({"window": ((0, 101), (0, 130))}, "window rows 0:101, cols 0:130 is empty or outside the 100 x 130 image"),
        ({"window": ((0, 100), (0, 131))}, "is empty or outside the 100 x 130 image"),
        ({"window": ((-1, 10), (0, 10))}, "window rows -1:10"),
        ({"window": ((10, 10), (0, 10))}, "window rows 10:10, cols 0:10 is empty"),
        ({"window": ((20, 10), (0, 10))}, "is empty or outside"),
        ({"window": ((0, 10),)}, r"window is \(\(row_start, row_stop\), \(col_start, col_stop\)\) or a rasterio Window"),
        ({"window": ((0.5, 10), (0, 10))}, r"whole pixels, got \(\(0.5, 10\), \(0, 10\)\); round it first"),
        (
            {"window": rasterio.windows.Window(col_off=0.5, row_off=0, width=3, height=3)},
            r"whole pixels, got Window\(col_off=0.5.*round_offsets",
        ),
        ({"window": rasterio.windows.Window(col_off=128, row_off=0, width=3, height=3)}, "outside the 100 x 130 image"),
    ],
)
def test_selection_errors(cube_file: tuple[Path, bytes, np.ndarray], selection: dict[str, Any], match: str) -> None:
    path, blob, _ = cube_file
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(SelectionError, match=match):
            rumi_core.read(source, blob, **selection)
        assert source.ranges == []


@pytest.mark.parametrize("threads", [-1, 1.5, True, "2"])
def test_threads_that_are_no_count_are_refused_before_any_request(cube_file: tuple[Path, bytes, np.ndarray], threads: Any) -> None:
    """-1 and 1.5 were taken for one thread, True for one."""
    path, blob, _ = cube_file
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(
            RumiError, match=re.escape(f"threads is a number of threads, at least 1 (None or 0 for every CPU), got {threads!r}")
        ):
            rumi_core.read(source, blob, threads=threads)
        assert source.ranges == []
    with pytest.raises(RumiError, match="threads is a number of threads"):
        rumi_core.validate(path, blob, threads=threads)


def test_an_unknown_band_name_costs_the_trailer_only(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    with CountingSource(LocalFileSource(path)) as source:
        with pytest.raises(SelectionError, match="no band is called 'B5'; the bands are B2"):
            rumi_core.read(source, blob, bands=["B5"])
        assert [offset for offset, _ in source.ranges] == [rumi_core.HeaderBlob.from_bytes(blob).trailer_offset]


def test_selection_error_is_an_index_error(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    with pytest.raises(IndexError, match="outside"):
        rumi_core.read(path, blob, bands=[7])


def test_selections_match_numpy(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    assert np.array_equal(rumi_core.read(path, blob, bands=2), data[:, [2]])
    assert np.array_equal(rumi_core.read(path, blob, times=np.array([2, 0])), data[[2, 0]])
    got = rumi_core.read(path, blob, bands=[3, 3, 0], times=[1], window=rasterio.windows.Window(col_off=40, row_off=60, width=50, height=7))
    assert np.array_equal(got, data[1:2][:, [3, 3, 0], 60:67, 40:90])


@pytest.mark.parametrize("frame_unit", [0, 9, 3], ids=["band tiles", "time tiles", "cells"])
@pytest.mark.parametrize("dtype", ["uint16", "uint8", "bool"])
def test_frames_decoded_into_the_output_or_placed_match_numpy(tmp_path: Path, frame_unit: int, dtype: str) -> None:
    """Windows one tile column wide (decoded in place where aligned), across columns, and bands selected twice."""
    data = random_samples((3, 4, 37, 29), dtype, seed=frame_unit)
    path = tmp_path / "odd.rumi"
    times = ["2021-01-01", "2021-01-02", "2021-01-03"]
    blob = rumi_core.write(path, data, bands=["a", "b", "c", "d"], times=times, tile_size=(8, 7), frame_unit=frame_unit)
    windows = [((0, 37), (7, 14)), ((8, 16), (7, 14)), ((32, 37), (28, 29)), ((3, 20), (5, 20)), None]
    for threads in (1, 2):
        for window in windows:
            rows, cols = window or ((0, 37), (0, 29))
            for bands, times in ((None, None), ([2], [1]), ([1, 1, 3], [2, 0])):
                got = rumi_core.read(path, blob, bands=bands, times=times, window=window, threads=threads)
                want = data[:, :, rows[0] : rows[1], cols[0] : cols[1]]
                want = want if bands is None else want[:, bands]
                assert np.array_equal(got, want if times is None else want[times])


def test_a_tile_frame_that_fills_its_place_in_the_output_is_decoded_there(tmp_path: Path) -> None:
    data = random_samples((2, 3, 16, 24), "uint16")
    blob = HeaderBlob.from_bytes(
        rumi_core.write(tmp_path / "t.rumi", data, bands=["a", "b", "c"], times=["2021-01-01", "2021-01-02"], tile_size=8)
    )
    layout = blob.layout

    def targets(bands: list[int], times: list[int], rows: tuple[int, int], cols: tuple[int, int]) -> list[bool]:
        sel = resolve_selection(layout, bands=bands, times=times, window=(rows, cols))
        plan = OutputPlan(layout, sel)
        out = np.zeros(plan.shape, np.uint16)
        found = []
        for f in layout.frames_for(bands=sel.bands, times=sel.times, rows=sel.rows, cols=sel.cols):
            extent, at = plan.frame_place(f)
            assert extent == layout.frame_extent(f)
            decoded_frame_bytes = extent.decoded_frame_bytes
            found.append(at >= 0)
            if at >= 0:
                # The frame's bytes, written there, are its tile at its band, time and rows.
                row, _, band, time = layout.frame_location(f)
                out.reshape(-1).view(np.uint8)[at : at + decoded_frame_bytes] = 0xFF
                placed = out[plan.time_pos.get(time, ())[0], plan.band_pos.get(band, ())[0], row * 8 - rows[0] : row * 8 - rows[0] + 8]
                assert (placed == 0xFFFF).all() and np.count_nonzero(out) == placed.size
                out[:] = 0
        return found

    # A column of whole tiles exactly as wide as the window: every frame in place.
    assert targets([0, 1, 2], [0, 1], (0, 16), (8, 16)) == [True] * 12
    # Tiles cut by the window's rows, wider windows, a band twice: placed.
    assert targets([0], [0], (4, 16), (8, 16)) == [False, True]
    assert targets([0], [0], (0, 8), (0, 16)) == [False, False]
    assert targets([1, 1], [0], (0, 8), (8, 16)) == [False]
    # 8 x 8 uint16 is 128 bytes per band; a 4 x 4 window of 2-byte samples is 32: still aligned.
    # A 3 x 3 window of bytes puts band 1 at byte 9, where OpenZL cannot write.
    small = HeaderBlob.from_bytes(
        rumi_core.write(tmp_path / "s.rumi", np.zeros((2, 3, 3), np.uint8), bands=["a", "b"], times=["2021-01-01"], tile_size=3)
    ).layout
    plan = OutputPlan(small, resolve_selection(small, window=((0, 3), (0, 3))))
    assert [plan.frame_place(f)[1] for f in (0, 1)] == [0, -1]


class _LocalCountingSource(CountingSource):
    local = True


@pytest.mark.parametrize(
    ("local_run", "parallel_bytes"),
    [(reader.LOCAL_RUN_BYTES, reader.PARALLEL_FRAME_BYTES), (1, reader.PARALLEL_FRAME_BYTES), (reader.LOCAL_RUN_BYTES, 1)],
    ids=["one-thread-merges-small-frames", "run-of-one-frame", "several-threads-fetch-frame-by-frame"],
)
def test_a_local_source_merges_adjacent_frames_up_to_its_run_and_a_remote_one_up_to_the_limit(
    cube_file: tuple[Path, bytes, np.ndarray], monkeypatch: pytest.MonkeyPatch, local_run: int, parallel_bytes: int
) -> None:
    path, blob_bytes, data = cube_file
    monkeypatch.setattr(reader, "LOCAL_RUN_BYTES", local_run)
    monkeypatch.setattr(reader, "PARALLEL_FRAME_BYTES", parallel_bytes)
    blob = HeaderBlob.from_bytes(blob_bytes)
    sel = resolve_selection(blob.layout)
    merged = [(r.offset, r.length) for r in plan_requests(blob, sel, threads=2)]
    starts, lengths = blob.frame_ranges(range(blob.layout.frame_count))
    per_frame = list(zip(starts.tolist(), lengths.tolist(), strict=True))
    assert len(merged) == 1 and merged[0] == (per_frame[0][0], sum(n for _, n in per_frame))
    assert blob.trailer_offset - blob.base_frame_offset < reader.LOCAL_RUN_BYTES or local_run == 1  # the whole cube fits one local run
    for threads in (1, 2):
        local = [(r.offset, r.length) for r in plan_requests(blob, sel, local=True, threads=threads)]
        alone = local_run == 1 or (threads == 2 and parallel_bytes == 1)
        assert local == (per_frame if alone else merged)
        for source_type, expected in ((_LocalCountingSource, local), (CountingSource, merged)):
            with source_type(LocalFileSource(path)) as source:
                assert np.array_equal(rumi_core.read(source, blob_bytes, threads=threads), data)
                assert sorted(source.ranges) == expected
    assert is_local(LocalFileSource(path)) and is_local(BytesSource(b"")) and not is_local(CountingSource(BytesSource(b"")))


@pytest.mark.parametrize(("parallel_bytes", "pooled"), [(reader.PARALLEL_FRAME_BYTES, False), (1, True)], ids=["small", "large"])
def test_frames_smaller_than_the_parallel_size_decode_on_the_calling_thread_alone(
    cube_file: tuple[Path, bytes, np.ndarray], monkeypatch: pytest.MonkeyPatch, parallel_bytes: int, pooled: bool
) -> None:
    path, blob_bytes, data = cube_file
    assert HeaderBlob.from_bytes(blob_bytes).layout.max_decoded_frame_bytes < reader.PARALLEL_FRAME_BYTES  # 64 x 48 uint16
    monkeypatch.setattr(reader, "PARALLEL_FRAME_BYTES", parallel_bytes)
    together: list[int] = []
    run_together = reader.run_together
    monkeypatch.setattr(reader, "run_together", lambda work, items, workers: together.append(workers) or run_together(work, items, workers))
    assert np.array_equal(rumi_core.read(path, blob_bytes, threads=2), data)
    assert together == ([2] if pooled else [])


class _FailingSource(CountingSource):
    """A remote-like source whose every request fails, slowly enough that other threads queue behind it."""

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        with self._lock:
            self.ranges.extend(ranges)
        time.sleep(0.05)
        raise SourceError(f"the storage refused {list(ranges)}")


def test_a_failed_request_is_asked_once_whatever_the_threads_waiting_for_it(
    cube_file: tuple[Path, bytes, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, blob_bytes, _ = cube_file
    monkeypatch.setattr(reader, "PARALLEL_FRAME_BYTES", 1)  # these small frames on 4 threads
    blob = HeaderBlob.from_bytes(blob_bytes)
    (run,) = plan_requests(blob, resolve_selection(blob.layout), threads=4)  # every frame in one request
    assert len(run.frames) >= 4
    with _FailingSource(LocalFileSource(path)) as source, pytest.raises(SourceError, match="storage refused"):
        rumi_core.read(source, blob_bytes, threads=4)
    assert source.ranges == [(run.offset, run.length)]


def test_a_blob_read_from_bytes_is_parsed_once_per_limits(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob_bytes, data = cube_file
    with LocalFileSource(path) as source:
        first = resolve_header(source, bytearray(blob_bytes))
        assert resolve_header(source, blob_bytes) is first and first == HeaderBlob.from_bytes(blob_bytes)
        assert resolve_header(source, blob_bytes, limits=Limits(max_output_bytes=1 << 20)) is not first
        # A blob kept under looser limits is not reused under stricter ones.
        with pytest.raises(ResourceLimitError, match="max_frames = 10"):
            resolve_header(source, blob_bytes, limits=Limits(max_frames=10))
        assert np.array_equal(rumi_core.read(source, blob_bytes), data)


def test_a_blob_of_many_frames_is_not_kept() -> None:
    side = math.isqrt(reader._PARSED_BLOB_FRAMES) + 1
    layout = Layout(side, side, 1, 1, 1, 1, encoding_for_dtype("uint8"), 0)
    many = HeaderBlob(layout, np.arange(layout.frame_count) % 7 + 1).to_bytes()
    few = HeaderBlob(Layout(256, 256, 1, 1, 1, 1, encoding_for_dtype("uint8"), 0), np.arange(1 << 16) % 7 + 1).to_bytes()
    with BytesSource(b"") as source:
        assert resolve_header(source, many) is not resolve_header(source, many)
        assert resolve_header(source, few) is resolve_header(source, few)


# -- sources and blobs -----------------------------------------------------------------


def test_reading_without_a_blob_builds_one(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    raw = path.read_bytes()
    assert np.array_equal(rumi_core.read(path), data)
    assert np.array_equal(rumi_core.read(str(path)), data)
    assert np.array_equal(rumi_core.read(raw), data)
    assert np.array_equal(rumi_core.read(bytearray(raw)), data)
    assert np.array_equal(rumi_core.read(memoryview(raw), window=((5, 9), (7, 8))), data[:, :, 5:9, 7:8])
    with BytesSource(raw) as source:
        assert np.array_equal(rumi_core.read(source, bands=[1]), data[:, [1]])
    with LocalFileSource(path) as source:
        assert np.array_equal(rumi_core.read(source, times=[2]), data[[2]])
    # the blob built from the file is the writer's blob
    assert rumi_core.build_header(path) == blob


def test_blob_forms(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    for header in (blob, bytearray(blob), memoryview(blob), HeaderBlob.from_bytes(blob)):
        assert np.array_equal(rumi_core.read(path, header), data)


def test_verify_false_reads_the_same_samples(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    assert np.array_equal(rumi_core.read(path, blob, verify=False), data)
    assert np.array_equal(
        rumi_core.read(path, blob, verify=False, bands=[0, 2], window=((50, 100), (0, 48))), data[:, [0, 2], 50:100, 0:48]
    )


@pytest.mark.parametrize("verify", [None, "no", 1, 0])
def test_a_verify_that_is_no_boolean_is_refused_as_an_argument_not_as_a_corrupt_frame(
    cube_file: tuple[Path, bytes, np.ndarray], verify: Any
) -> None:
    """``verify=None`` reached the decoder, and the file was called corrupt."""
    path, blob, _ = cube_file
    with pytest.raises(RumiError, match=re.escape(f"verify is True or False, got {verify!r}")) as raised:
        rumi_core.read(path, blob, verify=verify)
    assert not isinstance(raised.value, rumi_core.FrameDecodeError)
    with rumi_core.open(path, blob) as ds, pytest.raises(RumiError, match="verify is True or False"):
        ds.read(verify=verify)
    assert np.array_equal(rumi_core.read(path, blob, verify=np.True_), rumi_core.read(path, blob))


@pytest.mark.parametrize("header", [500_000_000, 2**62, True, 1.5, object()])
def test_a_header_of_no_blob_type_is_refused_before_anything_is_allocated(cube_file: tuple[Path, bytes, np.ndarray], header: Any) -> None:
    """An int was given to ``bytes()``: 500 million zero bytes, then "magic is b'\\x00\\x00\\x00\\x00'"; 2**62 a bare MemoryError."""
    path, _, _ = cube_file
    with pytest.raises(
        RumiError, match=f"header is a HeaderBlob, a blob's bytes or the path of its .rumih file, not {type(header).__name__}"
    ):
        rumi_core.read(path, header)
    with pytest.raises(RumiError, match="header is a HeaderBlob"):
        rumi_core.open(path, header)


def test_a_header_file_that_cannot_be_read_is_a_source_error(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    """As a data file that cannot be read: a bare FileNotFoundError escaped ``except RumiError``; and rasterio's
    ``open(path, "r")`` names the blob."""
    path, _, _ = cube_file
    missing = tmp_path / "none.rumih"
    with pytest.raises(SourceError, match=re.escape(f"cannot read the header blob {missing}: No such file or directory")) as raised:
        rumi_core.read(path, missing)
    assert raised.value.strerror == "No such file or directory"
    with pytest.raises(SourceError, match=r"cannot read the header blob r: .*the second argument is the header blob"):
        rumi_core.open(path, "r")


@pytest.mark.parametrize(
    ("times", "expected"), [(slice(0, 2), [0, 1]), (slice(None, None, -1), [2, 1, 0]), (slice(1, None), [1, 2]), (np.int64(2), [2])]
)
def test_time_and_band_positions_take_a_slice_or_one_integer(
    cube_file: tuple[Path, bytes, np.ndarray], times: Any, expected: list[int]
) -> None:
    """``times=slice(0, 2)`` was a bare TypeError ('slice' object is not iterable)."""
    path, blob, data = cube_file
    assert np.array_equal(rumi_core.read(path, blob, times=times, bands=slice(1, 3)), data[expected][:, 1:3])
    with rumi_core.open(path, blob) as ds:
        assert np.array_equal(ds.read(times=times), data[expected])
    with pytest.raises(SelectionError, match="select at least one time position"):
        rumi_core.read(path, blob, times=slice(3, None))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"max_output_bytes": "1GB"}, "Limits.max_output_bytes is a whole number of at least 0, got '1GB'"),
        ({"max_output_bytes": None}, "Limits.max_output_bytes is a whole number of at least 0, got None"),
        ({"max_frames": -5}, "Limits.max_frames is a whole number of at least 0, got -5"),
        ({"max_frame_bytes": 1.5e9}, "Limits.max_frame_bytes is a whole number of at least 0, got 1500000000.0"),
        ({"max_merged_request": True}, "Limits.max_merged_request is a whole number of at least 0, got True"),
    ],
)
def test_limits_are_checked_when_they_are_made(fields: dict[str, Any], match: str) -> None:
    """They were checked at the next read, as ``'>' not supported between instances of 'int' and 'str'``."""
    with pytest.raises(RumiError, match=re.escape(match)):
        Limits(**fields)


def test_limits_take_numpy_integers_as_ints() -> None:
    limits = Limits(max_frames=np.int64(7))
    assert type(limits.max_frames) is int and limits == Limits(max_frames=7)


def test_whole_pixel_float_windows_are_read_as_rasterio_gives_them(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    """``rasterio.windows.from_bounds`` gives floats; a window of whole pixels was refused as malformed."""
    path, blob, data = cube_file
    window = rasterio.windows.Window(10.0, 20.0, 30.0, 40.0)
    assert np.array_equal(rumi_core.read(path, blob, window=window), data[:, :, 20:60, 10:40])
    assert np.array_equal(rumi_core.read(path, blob, window=((np.float32(20), 60.0), (10, 40))), data[:, :, 20:60, 10:40])


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot open"):
        rumi_core.read(tmp_path / "missing.rumi")
    with pytest.raises(OSError, match="cannot open"):
        rumi_core.read(tmp_path / "missing.rumi")


def test_unknown_source_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="a source is a path, bytes or a ByteSource, got int"):
        rumi_core.read(42)  # type: ignore[arg-type]


# -- Dataset / open ----------------------------------------------------------------------


def test_open_is_a_context_manager(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    with rumi_core.open(path) as ds:
        assert ds.shape == (3, 4, 100, 130)
        assert ds.dtype == np.dtype("<u2")
        assert ds.info is not None
        assert ds.info.band_texts == ("B2, Blue", "B3, Green", "B4, Red", "B8, NIR")
        assert ds.info.georef.crs == "EPSG:32633"
        assert ds.header == HeaderBlob.from_bytes(blob)
        assert "Cube (3, 4, 100, 130) uint16" in repr(ds)
        assert np.array_equal(ds.read(bands=[1], times=[0, 2], window=((10, 20), (30, 40))), data[[0, 2]][:, [1], 10:20, 30:40])
        source = ds._source
    # the dataset opened the file, so closing the dataset closed it
    with pytest.raises(SourceError, match="is closed"):
        source.read_ranges([(0, 4)])


def test_a_dataset_has_rasterios_names_for_what_it_holds(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    """``count``, ``height``, ``width``, ``crs``, ``transform`` (of pixel corners, as rasterio gives a PixelIsPoint file's)
    and ``descriptions``, where a rasterio user looks; those of the head say why they are missing with metadata=False."""
    from affine import Affine

    path, blob, _ = cube_file
    with rumi_core.open(path) as ds:
        assert (ds.count, ds.height, ds.width, ds.crs, ds.name) == (4, 100, 130, "EPSG:32633", str(path))
        assert ds.transform == Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
        assert ds.descriptions == ("B2, Blue", "B3, Green", "B4, Red", "B8, NIR")
    point = tmp_path / "point.rumi"
    rumi_core.write(point, np.zeros((1, 4, 4), "uint8"), bands=["h"], times=["2020-01-01"], crs="EPSG:32633",
                    transform=(10, 0, 500005, 0, -10, 4000005), pixel_is_point=True)  # fmt: skip
    with rumi_core.open(point) as ds:
        assert ds.transform == Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000010.0)
    with rumi_core.open(path, blob, metadata=False) as ds:
        assert ds.count == 4
        with pytest.raises(RumiError, match="crs is in the file's head and trailer, which a dataset opened with metadata=False"):
            _ = ds.crs


@pytest.mark.parametrize(
    ("transform", "pixel_is_point"),
    [
        ((10, 0, 500000, 0, -10, 4000000), False),
        ((10, 0, 500005, 0, -10, 3999995), True),
        ((0.25, 0, -180, 0, 0.5, -90), False),  # south-up
        ((10, 2, 500000, 3, -10, 4000000), False),  # rotated
    ],
)
def test_bounds_and_res_are_rasterios_for_the_same_grid(tmp_path: Path, transform: tuple[float, ...], pixel_is_point: bool) -> None:
    """``bounds`` and ``res`` equal what rasterio gives a GeoTIFF of the same grid, rotated and south-up ones included."""
    data = np.zeros((1, 7, 9), "uint8")
    rumi_core.write(tmp_path / "a.rumi", data, bands=["b"], times=["2020-01-01"], crs="EPSG:32633", transform=transform,
                    pixel_is_point=pixel_is_point)  # fmt: skip
    # rasterio takes a transform of pixel corners, and writes a PixelIsPoint file's tiepoint half a pixel on
    corners = Affine(*transform) @ Affine.translation(-0.5, -0.5) if pixel_is_point else Affine(*transform)
    with rasterio.open(tmp_path / "a.tif", "w", driver="GTiff", width=9, height=7, count=1, dtype="uint8",
                       crs="EPSG:32633", transform=corners) as tif:  # fmt: skip
        if pixel_is_point:
            tif.update_tags(AREA_OR_POINT="Point")
    with rasterio.open(tmp_path / "a.tif") as tif, rumi_core.open(tmp_path / "a.rumi") as ds:
        assert ds.transform == tif.transform
        with warnings.catch_warnings():  # rasterio maps a rotated grid's corners with affine's deprecated `*`
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            assert ds.bounds == tif.bounds
        assert ds.res == tif.res


def test_a_closed_dataset_says_so_and_reads_nothing_whatever_its_source(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    """As rasterio's: ``closed`` is true after close, a second close does nothing, and a read fails. A dataset of bytes
    (or over HTTP) went on reading after close."""
    path, blob, _ = cube_file
    for source in (path, path.read_bytes()):
        ds = rumi_core.open(source, blob)
        assert not ds.closed
        ds.close()
        ds.close()
        assert ds.closed and repr(ds).startswith("<closed rumi_core.Dataset")
        with pytest.raises(SourceError, match="is closed"):
            ds.read(times=[0])


def test_a_close_while_other_threads_read_fails_their_reads_and_never_gives_them_another_files_bytes(
    cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path
) -> None:
    """The descriptor was closed under reads in flight: the next file opened took its number, and those reads went on
    with that file's bytes (a HeaderMismatchError or FrameDecodeError naming this file, a bare OSError from ``size``)."""
    path, _, data = cube_file
    other = tmp_path / "other.bin"
    other.write_bytes(os.urandom(path.stat().st_size))
    outcomes: set[str] = set()
    for _ in range(25):
        ds = rumi_core.open(path)
        stop = threading.Event()

        def reader(ds: rumi_core.Dataset = ds, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                try:
                    got = ds.read(bands=[0], times=[0], window=((0, 64), (0, 48)), threads=1)
                    outcomes.add("equal" if np.array_equal(got, data[[0]][:, [0], :64, :48]) else "WRONG")
                except SourceError as err:
                    outcomes.add("closed" if str(err).endswith("is closed") else f"SourceError: {err}")
                except Exception as err:
                    outcomes.add(f"{type(err).__name__}: {err}")

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(0.002)
        ds.close()
        reused = [os.open(other, os.O_RDONLY) for _ in range(3)]  # what takes a descriptor number closed too early
        time.sleep(0.002)
        stop.set()
        for thread in threads:
            thread.join()
        for fd in reused:
            os.close(fd)
    assert outcomes <= {"equal", "closed"}, outcomes
    assert "closed" in outcomes


def test_a_dataset_of_bytes_pickles_and_reads_alike(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    """As a dataset of a path does, for DataLoader and dask workers: its memoryview did not pickle."""
    import pickle

    path, blob, data = cube_file
    with rumi_core.open(path.read_bytes(), blob) as ds:
        copy = pickle.loads(pickle.dumps(ds))
    assert copy.name == "<bytes>" and np.array_equal(copy.read(times=[2]), data[[2]])


def test_open_does_not_close_a_source_it_was_given(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    with CountingSource(LocalFileSource(path)) as source:
        with rumi_core.open(source, blob, metadata=False) as ds:
            assert ds.info is None
            assert source.ranges == []  # with a blob and no metadata, nothing but frames is read
            assert np.array_equal(ds.read(times=[1]), data[[1]])
        assert source.read_ranges([(0, 4)]) == [b"RUMI"]


def test_open_checks_a_given_blob_against_the_file(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube_file
    other = rumi_core.write(tmp_path / "other.rumi", np.zeros((4, 100, 130), "uint16"), bands=list("abcd"), times=["2020-01-01"])
    with pytest.raises(HeaderMismatchError, match="header blob time_count is 1, the file's TimeCount is 3"):
        rumi_core.open(path, other)


def test_open_applies_its_limits(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    with rumi_core.open(path, blob, metadata=False, limits=Limits(max_output_bytes=100)) as ds:
        assert ds.read(window=((0, 5), (0, 5)), bands=[0], times=[0]).shape == (1, 1, 5, 5)
        with pytest.raises(ResourceLimitError, match=r"above Limits\.max_output_bytes = 100;"):
            ds.read()


def test_open_an_image(tmp_path: Path) -> None:
    data = random_samples((2, 9, 11), "float8_e5m2", seed=4)
    blob = rumi_core.write(tmp_path / "i.rumi", data, bands=["a", "b"], times=[("2020-01-01", "2021-01-01")], tile_size=4)
    with rumi_core.open(tmp_path / "i.rumi", blob) as ds:
        assert ds.shape == (2, 9, 11)
        assert "Image" in repr(ds)
        out = ds.read(window=((1, 9), (2, 3)))
        assert out.shape == (2, 8, 1)
        assert out.view(np.uint8).tobytes() == data[:, 1:9, 2:3].tobytes()
        with pytest.raises(SelectionError, match="an Image has one time step"):
            ds.read(times=[0, 0])


# -- the C heap keeps a read's pages mapped for the next one -------------------------


def _glibc_untuned() -> bool:
    tuned = any(k.startswith("MALLOC_") for k in os.environ) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")
    return not tuned and sys.platform == "linux" and bool(os.confstr("CS_GNU_LIBC_VERSION"))


def test_every_read_asks_the_heap_to_keep_its_working_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # How many page faults the pad saves (1,231 minor faults per read of these
    # 4 frames without it, none with it on an idle machine) depends on the
    # kernel and on load, so benchmarks/read.py measures it; this checks that
    # every read asks for at least its output, whatever its thread count.
    data = synthetic_scene(4, 512, 512, seed=1)
    path = tmp_path / "scene.rumi"
    blob = rumi_core.write(path, data, bands=list("abcd"), times=["2024-06-01"], tile_size=256, compression=None)
    asked: list[int] = []
    monkeypatch.setattr("rumi_core.reader.keep_heap_slack", asked.append)
    for threads in (1, 2):
        assert np.array_equal(rumi_core.read(path, blob, threads=threads), data)
    window = rumi_core.read(path, blob, window=((0, 256), (0, 256)), threads=1)
    assert len(asked) == 3
    assert all(n >= data.nbytes for n in asked[:2])
    assert window.nbytes <= asked[2] < data.nbytes * 4


@pytest.mark.skipif(not _glibc_untuned(), reason="the heap pad is glibc's M_TOP_PAD, left alone when malloc is tuned")
def test_the_heap_pad_only_grows_and_stays_capped() -> None:
    first = keep_heap_slack(1 << 20)
    assert first == 0 or first >= 1 << 20  # 0 only where glibc's mallopt cannot be used
    assert keep_heap_slack(1 << 40) in (0, MAX_TOP_PAD)
    assert keep_heap_slack(1) == keep_heap_slack(1 << 40)  # never lowered


def test_a_blob_given_as_bytes_is_parsed_once_while_the_kept_blobs_fit_their_frame_budget(
    cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, blob, data = cube_file
    other_path = tmp_path / "other.rumi"
    other = rumi_core.write(other_path, data[:2], bands=list("abcd"), times=["2021-01-01", "2021-01-11"], tile_size=(64, 48))
    assert (HeaderBlob.from_bytes(blob).layout.frame_count, HeaderBlob.from_bytes(other).layout.frame_count) == (72, 48)
    monkeypatch.setattr(reader, "_PARSED_BLOBS", OrderedDict())
    parsed: list[bytes] = []
    parse = HeaderBlob.from_bytes
    monkeypatch.setattr(HeaderBlob, "from_bytes", staticmethod(lambda raw, **kw: parsed.append(bytes(raw)) or parse(raw, **kw)))

    def read_both_twice() -> None:
        for _ in range(2):
            np.testing.assert_array_equal(rumi_core.read(path, blob, window=((0, 10), (0, 10))), data[:, :, :10, :10])
            np.testing.assert_array_equal(rumi_core.read(other_path, other, window=((0, 10), (0, 10))), data[:2, :, :10, :10])

    read_both_twice()
    assert parsed == [blob, other]  # both kept: 120 frames
    monkeypatch.setattr(reader, "_PARSED_BLOBS", OrderedDict())
    monkeypatch.setattr(reader, "_PARSED_BLOB_FRAMES", 100)
    parsed.clear()
    read_both_twice()
    assert parsed == [blob, other, blob, other]  # each evicts the other
    monkeypatch.setattr(reader, "_PARSED_BLOBS", OrderedDict())
    monkeypatch.setattr(reader, "_PARSED_BLOB_FRAMES", 60)
    parsed.clear()
    read_both_twice()
    assert parsed == [blob, other, blob]  # the 72-frame blob is never kept


def test_positions_selected_as_a_range_are_looked_up_in_it_not_listed() -> None:
    positions = RangePositions(range(3, (1 << 32) - 1, 2))  # a dict of these would not fit in memory
    assert positions.get(7, ()) == (2,)
    assert positions.get(4, ()) == () and positions.get(1, ()) == () and positions.get(1 << 32, ()) == ()
    layout = Layout(
        image_width=8, image_length=8, time_count=(1 << 32) - 1, tile_width=8, tile_length=8, samples_per_pixel=2,
        encoding=encoding_for_dtype("uint8"), frame_unit=0,
    )  # fmt: skip
    every = resolve_selection(layout, window=((0, 1), (0, 1)), limits=Limits(max_output_bytes=1 << 40))
    band_pos, time_pos, subset = output_positions(layout, every)
    assert (band_pos.get(1, ()), time_pos.get((1 << 32) - 2, ()), subset) == ((1,), ((1 << 32) - 2,), False)


def test_a_kept_blob_read_with_other_limits_is_checked_against_them(
    cube_file: tuple[Path, bytes, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, blob, data = cube_file
    monkeypatch.setattr(reader, "_PARSED_BLOBS", OrderedDict())
    np.testing.assert_array_equal(rumi_core.read(path, blob, window=((0, 10), (0, 10))), data[:, :, :10, :10])  # kept
    with pytest.raises(ResourceLimitError, match="max_frames"):
        rumi_core.read(path, blob, window=((0, 10), (0, 10)), limits=Limits(max_frames=71))  # the cube has 72
    roomy = Limits(max_frames=72)
    np.testing.assert_array_equal(rumi_core.read(path, blob, window=((0, 10), (0, 10)), limits=roomy), data[:, :, :10, :10])
    assert [kept_limits for kept_limits, _ in reader._PARSED_BLOBS.values()] == [roomy]


def test_reads_from_several_caller_threads_share_the_helpers_and_each_get_their_window(
    cube_file: tuple[Path, bytes, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, blob_bytes, data = cube_file
    monkeypatch.setattr(reader, "PARALLEL_FRAME_BYTES", 1)  # these small frames on several threads
    windows = [((r, r + 37), (c, c + 53)) for r in (0, 30, 63) for c in (0, 41, 77)]

    def reads(k: int) -> bool:
        ok = True
        for i in range(12):
            (r0, r1), (c0, c1) = windows[(k + i) % len(windows)]
            got = rumi_core.read(path, blob_bytes, window=((r0, r1), (c0, c1)), threads=3)
            ok &= np.array_equal(got, data[:, :, r0:r1, c0:c1])
        return ok

    with ThreadPoolExecutor(4) as callers:
        assert all(callers.map(reads, range(4)))
