"""Gathering a cube's frame places (pipelines.transforms.cube_parts)."""

from __future__ import annotations

import pickle

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from pipelines.threaded_runner import ThreadedRunner
from pipelines.transforms.cube_parts import CubeParts, GatherParts
from pipelines.transforms.frames import FrameFailure
from pipelines.transforms.write_parts import FramePart


def _parts(n: int, files: int, *, start: int = 0) -> list[FramePart]:
    """Frames ``start … start + n - 1``, spread over ``files`` part files in turn, of distinct sizes and offsets."""
    return [FramePart(i, 100 + i, f"/parts/c/{i % files}.part", 12 + 7 * i) for i in range(start, start + n)]


def test_merge_renumbers_the_part_files_of_the_other_record() -> None:
    first = CubeParts.of(_parts(5, 2))  # files 0 and 1
    other = CubeParts.of(reversed(_parts(6, 3, start=5)))  # files 1, 0 and 2, numbered in another order
    first.merge(other)
    assert len(first) == 11
    assert sorted(first.paths) == [f"/parts/c/{k}.part" for k in range(3)]
    assert sorted(first) == sorted(_parts(5, 2) + _parts(6, 3, start=5))


def test_in_frame_order_sorts_drops_repeats_and_frames_beyond_the_count() -> None:
    parts = _parts(8, 3)
    gathered = CubeParts.of([*reversed(parts), parts[3], FramePart(8, 1, "/parts/c/x.part", 0), FramePart(-1, 1, "/p", 0)])
    ordered = gathered.in_frame_order(8)
    assert list(ordered) == parts
    assert ordered.counts == [p.size for p in parts]
    assert ordered.missing(8).tolist() == []
    ordered.add(FramePart(8, 1, parts[0].path, 0))  # a path it knows keeps its number
    assert len(ordered.paths) == 5


def test_missing_names_every_frame_recorded_nowhere() -> None:
    parts = [p for p in _parts(10, 2) if p.index not in (0, 4, 9)]
    ordered = CubeParts.of(parts).in_frame_order(10)
    assert len(ordered) == 7
    assert ordered.missing(10).tolist() == [0, 4, 9]


def test_failures_are_kept_once_and_survive_merges_and_pickling() -> None:
    a = CubeParts.of([FrameFailure("/s/B02.tif", "boom"), FrameFailure("/s/B02.tif", "boom")])
    b = CubeParts.of([*_parts(3, 1), FrameFailure("/s/B03.tif", "bang")])
    a.merge(b)
    copy = pickle.loads(pickle.dumps(a))
    assert copy.failures == {("/s/B02.tif", "boom"), ("/s/B03.tif", "bang")}
    assert list(copy) == _parts(3, 1)
    assert len(copy) == 3


def test_pickled_record_costs_32_bytes_a_frame_and_each_path_once() -> None:
    parts = _parts(10_000, 4)
    gathered = CubeParts.of(parts)
    pickled = pickle.dumps(gathered)
    assert len(pickled) < 32 * 10_000 + 1_000
    copy = pickle.loads(pickled)
    copy.add(FramePart(10_000, 1, "/parts/c/0.part", 5))  # a known path keeps its number after unpickling
    assert copy.paths == gathered.paths
    assert list(copy.in_frame_order(10_001)) == [*parts, FramePart(10_000, 1, "/parts/c/0.part", 5)]


def test_large_records_iterate_in_order_across_chunks() -> None:
    parts = _parts(10_000, 7)
    order = np.random.default_rng(0).permutation(len(parts))
    ordered = CubeParts.of(parts[i] for i in order).in_frame_order(len(parts))
    assert list(ordered) == parts


def test_gather_parts_per_cube_on_two_worker_threads() -> None:
    """The runner lifts the combine: each worker's bundle is folded before the shuffle, then the two are merged."""
    a, b = _parts(200, 3), _parts(50, 2)
    elements = [("a", p) for p in a] + [("b", p) for p in b] + [("b", FrameFailure("/s/B04.tif", "gone"))]
    options = PipelineOptions(["--direct_num_workers=2", "--direct_running_mode=multi_threading"])
    with beam.Pipeline(runner=ThreadedRunner(), options=options) as p:
        gathered = p | beam.Create(elements) | beam.Reshuffle() | beam.CombinePerKey(GatherParts())
        assert_that(
            gathered | beam.MapTuple(lambda cube, parts: (cube, list(parts.in_frame_order(len(parts))), sorted(parts.failures))),
            equal_to([("a", a, []), ("b", b, [("/s/B04.tif", "gone")])]),
        )
