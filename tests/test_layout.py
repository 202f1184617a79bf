"""Tests for rumi_core.layout: the tile grid, the frame index and selective reads.

Specification sections *Frame index*, *Selective read model* and *Offset
reconstruction*.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rumi_core
from rumi_core import HeaderBlob, Layout, LocalFileSource
from rumi_core.encodings import ENCODINGS, encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FRAME_UNITS
from rumi_core.testing import CountingSource, random_samples

if TYPE_CHECKING:
    from pathlib import Path

UINT16 = encoding_for_dtype("uint16")
SETTINGS = settings(deadline=None, max_examples=150)


def worked_example() -> Layout:
    return Layout(
        image_width=1024, image_length=1024, time_count=3, samples_per_pixel=4,
        tile_width=256, tile_length=256, encoding=UINT16, frame_unit=0,
    )  # fmt: skip


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    b = draw(st.integers(1, 4))
    t = draw(st.integers(1, 4))
    unit = draw(st.sampled_from([u.value for u in FRAME_UNITS.values() if u.is_valid(bands=b, times=t)]))
    return Layout(
        image_width=draw(st.integers(1, 40)),
        image_length=draw(st.integers(1, 40)),
        time_count=t,
        samples_per_pixel=b,
        tile_width=draw(st.integers(1, 12)),
        tile_length=draw(st.integers(1, 12)),
        encoding=draw(st.sampled_from(ENCODINGS)),
        frame_unit=unit,
    )


@st.composite
def layout_and_selection(draw: st.DrawFn) -> tuple[Layout, list[int], list[int], tuple[int, int], tuple[int, int]]:
    lay = draw(layouts())
    bands = draw(st.lists(st.integers(0, lay.samples_per_pixel - 1), min_size=1, max_size=5))
    times = draw(st.lists(st.integers(0, lay.time_count - 1), min_size=1, max_size=5))
    r0 = draw(st.integers(0, lay.image_length - 1))
    r1 = draw(st.integers(r0 + 1, lay.image_length))
    c0 = draw(st.integers(0, lay.image_width - 1))
    c1 = draw(st.integers(c0 + 1, lay.image_width))
    return lay, bands, times, (r0, r1), (c0, c1)


# -- the worked example of *Selective read model* ---------------------------------------


def test_worked_example_arithmetic() -> None:
    lay = worked_example()
    assert (lay.tiles_across, lay.tiles_down, lay.grid_size) == (4, 4, 16)
    assert lay.frame_count == 192
    assert lay.tile_span((512, 768), (256, 512)) == (range(2, 3), range(1, 2))
    assert lay.frame_index(2, 1, band=1, time=2) == 113
    assert lay.frame_index(2, 1, band=3, time=2) == 119
    assert lay.frames_for(bands=[1, 3], times=[2], rows=(512, 768), cols=(256, 512)) == [113, 119]
    assert lay.frame_location(113) == (2, 1, 1, 2)
    assert lay.frame_location(119) == (2, 1, 3, 2)


def test_worked_example_through_a_file(tmp_path: Path) -> None:
    # A real (T=3, B=4, 1024 x 1024) Cube: the read touches exactly frames 113 and 119.
    t, b, y, x = 3, 4, 1024, 1024
    ramp = (np.arange(y, dtype=np.uint16)[:, None] * 7 + np.arange(x, dtype=np.uint16)[None, :] * 3) % 4093
    data = np.stack([np.stack([ramp + 1000 * (ti * b + bi) for bi in range(b)]) for ti in range(t)]).astype(np.uint16)
    path = tmp_path / "example.rumi"
    blob = rumi_core.write(path, data, bands=["b0", "b1", "b2", "b3"], times=["2020-01-01", "2020-01-02", "2020-01-03"], tile_size=256)
    header = HeaderBlob.from_bytes(blob)
    assert header.layout == worked_example()

    with CountingSource(LocalFileSource(path)) as source:
        out = rumi_core.read(source, blob, times=[2], bands=[1, 3], window=((512, 768), (256, 512)))
        assert source.ranges == [header.frame_range(113), header.frame_range(119)]
        assert source.size_calls == 0
    assert np.array_equal(out, data[2:3, [1, 3], 512:768, 256:512])
    # The offsets come from the blob alone: base_frame_offset + prefix sum of the counts.
    counts = [int(c) for c in header.frame_byte_counts]
    assert header.frame_range(113)[0] == header.base_frame_offset + sum(counts[:113])
    assert header.base_frame_offset == 292 + 8 * 192 + 4 * 192 + 128 + 32


# -- frame index: a bijection over 0..N-1 -----------------------------------------------


@SETTINGS
@given(lay=layouts())
def test_frame_index_and_location_are_inverse_bijections(lay: Layout) -> None:
    n = lay.frame_count
    holds_tile = FRAME_UNITS[lay.frame_unit].holds == "tile"
    g = lay.grid_size
    assert n == (g * lay.samples_per_pixel * lay.time_count if holds_tile else g)

    seen = []
    for row in range(lay.tiles_down):
        for col in range(lay.tiles_across):
            if not holds_tile:
                idx = lay.frame_index(row, col)
                assert lay.frame_location(idx) == (row, col, None, None)
                seen.append(idx)
                continue
            for b in range(lay.samples_per_pixel):
                for t in range(lay.time_count):
                    idx = lay.frame_index(row, col, b, t)
                    assert lay.frame_location(idx) == (row, col, b, t)
                    seen.append(idx)
    assert sorted(seen) == list(range(n))
    for idx in range(n):
        row, col, b, t = lay.frame_location(idx)
        assert lay.frame_index(row, col, b or 0, t or 0) == idx


@SETTINGS
@given(lay=layouts())
def test_frame_index_follows_the_specified_formulas(lay: Layout) -> None:
    bands, times = lay.samples_per_pixel, lay.time_count
    for idx in range(lay.frame_count):
        row, col, b, t = lay.frame_location(idx)
        spatial = row * lay.tiles_across + col
        if lay.frame_unit == 0:
            assert idx == (spatial * bands + b) * times + t
        elif lay.frame_unit == 9:
            assert idx == (spatial * times + t) * bands + b
        else:
            assert idx == spatial


@pytest.mark.parametrize("index", [-1, 192, 10**9])
def test_frame_location_rejects_indices_outside_the_file(index: int) -> None:
    with pytest.raises(IndexError, match=r"outside 0\.\.191"):
        worked_example().frame_location(index)


# -- tiles: clipped at the edges, never padded -------------------------------------------


@SETTINGS
@given(lay=layouts())
def test_tile_bounds_partition_the_image(lay: Layout) -> None:
    covered = np.zeros((lay.image_length, lay.image_width), dtype=np.int32)
    for row in range(lay.tiles_down):
        for col in range(lay.tiles_across):
            y0, y1, x0, x1 = lay.tile_bounds(row, col)
            assert 0 <= y0 < y1 <= lay.image_length
            assert 0 <= x0 < x1 <= lay.image_width
            assert y1 - y0 == (lay.tile_length if row < lay.tiles_down - 1 else lay.image_length - row * lay.tile_length)
            assert x1 - x0 == (lay.tile_width if col < lay.tiles_across - 1 else lay.image_width - col * lay.tile_width)
            covered[y0:y1, x0:x1] += 1
    assert (covered == 1).all()


@SETTINGS
@given(lay=layouts())
def test_frame_shape_and_decoded_frame_bytes(lay: Layout) -> None:
    sizes = {"b": lay.samples_per_pixel, "t": lay.time_count}
    largest = 0
    for idx in range(lay.frame_count):
        row, col, band, time = lay.frame_location(idx)
        assert lay.frame_index(row, col, band or 0, time or 0) == idx
        y0, y1, x0, x1 = lay.tile_bounds(row, col)
        assert lay.frame_extent(idx) == (band, time, y0, y1, x0, x1, lay.decoded_frame_bytes(idx))
        shape = lay.frame_shape(idx)
        axes = lay.frame_axes
        assert len(shape) == len(axes)
        assert shape[axes.index("h")] == y1 - y0
        assert shape[axes.index("w")] == x1 - x0
        samples = (y1 - y0) * (x1 - x0)
        if FRAME_UNITS[lay.frame_unit].holds == "cell":
            samples *= lay.samples_per_pixel * lay.time_count  # absent axes contribute a factor of one
            assert all(shape[axes.index(a)] == sizes[a] for a in axes if a in sizes)
        assert lay.decoded_frame_bytes(idx) == samples * lay.encoding.bytes_per_sample == math.prod(shape) * lay.encoding.bytes_per_sample
        largest = max(largest, lay.decoded_frame_bytes(idx))
    assert lay.max_decoded_frame_bytes == largest


# -- selective reads: exactly the frames that intersect -----------------------------------


@SETTINGS
@given(case=layout_and_selection())
def test_frames_for_covers_exactly_the_intersecting_frames(
    case: tuple[Layout, list[int], list[int], tuple[int, int], tuple[int, int]],
) -> None:
    lay, bands, times, rows, cols = case
    expected = []
    for idx in range(lay.frame_count):
        row, col, b, t = lay.frame_location(idx)
        y0, y1, x0, x1 = lay.tile_bounds(row, col)
        hits = y0 < rows[1] and rows[0] < y1 and x0 < cols[1] and cols[0] < x1
        if hits and (b is None or (b in bands and t in times)):
            expected.append(idx)
    assert lay.frames_for(bands=bands, times=times, rows=rows, cols=cols) == expected


def test_whole_read_of_a_cell_file_is_one_request(tmp_path: Path) -> None:
    data = random_samples((3, 4, 50, 70), "uint16", seed=1)
    path = tmp_path / "cells.rumi"
    blob = rumi_core.write(path, data, bands=list("abcd"), times=["2020-01-01", "2020-01-02", "2020-01-03"], tile_size=16, frame_unit=4)
    header = HeaderBlob.from_bytes(blob)
    assert header.layout.frame_count == 4 * 5
    with CountingSource(LocalFileSource(path)) as source:
        assert np.array_equal(rumi_core.read(source, blob), data)
        assert source.ranges == [(header.base_frame_offset, header.trailer_offset - header.base_frame_offset)]


def test_adjacent_frames_merge_up_to_the_request_limit(tmp_path: Path) -> None:
    data = random_samples((2, 40, 40), "float32", seed=2)
    path = tmp_path / "tiles.rumi"
    blob = rumi_core.write(path, data, bands=["a", "b"], times=["2020-01-01"], tile_size=10)
    header = HeaderBlob.from_bytes(blob)
    n = header.layout.frame_count

    # One row of tiles of one band is a run of adjacent frames only where the index makes it one.
    with CountingSource(LocalFileSource(path)) as source:
        rumi_core.read(source, blob, bands=[0], window=((0, 10), (0, 40)))
        starts = [header.frame_range(header.layout.frame_index(0, c, 0, 0))[0] for c in range(4)]
        assert [o for o, _ in source.ranges] == starts  # frames 0, 2, 4, 6: never adjacent

    with CountingSource(LocalFileSource(path)) as source:
        rumi_core.read(source, blob)
        assert source.requests == 1

    with CountingSource(LocalFileSource(path)) as source:
        rumi_core.read(source, blob, limits=rumi_core.Limits(max_merged_request=1))
        assert source.ranges == [header.frame_range(i) for i in range(n)]

    biggest = int(header.frame_byte_counts.max())
    with CountingSource(LocalFileSource(path)) as source:
        out = rumi_core.read(source, blob, limits=rumi_core.Limits(max_merged_request=2 * biggest))
        assert all(length <= 2 * biggest for _, length in source.ranges)
        assert sum(length for _, length in source.ranges) == header.trailer_offset - header.base_frame_offset
        assert np.array_equal(out.view(np.uint8), data.view(np.uint8))


# -- validation at construction ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("image_width", 0, "image_width must be an integer from 1 to 4294967295, got 0"),
        ("image_length", 2**32, "image_length must be an integer from 1 to 4294967295"),
        ("time_count", -1, "time_count must be an integer from 1"),
        ("samples_per_pixel", 65536, "samples_per_pixel must be an integer from 1 to 65535"),
        ("tile_width", 65536, "tile_width must be an integer from 1 to 65535"),
        ("tile_length", 0, "tile_length must be an integer from 1 to 65535"),
        ("tile_width", True, "tile_width must be an integer"),
        ("image_width", 3.0, "image_width must be an integer"),
        ("frame_unit", 10, "frame_unit 10 is not registered"),
        ("frame_unit", 3, r"frame_unit 3 is not valid for B=4, T=1"),
    ],
)
def test_layout_rejects_fields_outside_their_widths(field: str, value: Any, match: str) -> None:
    fields: dict[str, Any] = dict(
        image_width=10, image_length=10, time_count=1, samples_per_pixel=4, tile_width=5, tile_length=5, encoding=UINT16, frame_unit=0
    )
    fields[field] = value
    with pytest.raises(InvalidInputError, match=match):
        Layout(**fields)


def test_layout_accepts_the_largest_field_values() -> None:
    lay = Layout(
        image_width=2**32 - 1, image_length=2**32 - 1, time_count=2**32 - 1, samples_per_pixel=65535,
        tile_width=65535, tile_length=65535, encoding=UINT16, frame_unit=0,
    )  # fmt: skip
    assert lay.tiles_across == lay.tiles_down == 65537  # (2**32 - 1) = 65535 * 65537
    assert lay.frame_count == 65537 * 65537 * 65535 * (2**32 - 1)
    assert lay.shape == (2**32 - 1, 65535, 2**32 - 1, 2**32 - 1)
