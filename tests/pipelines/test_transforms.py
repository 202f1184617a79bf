"""Each Beam transform on its own, with TestPipeline and assert_that on the FnApiRunner."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to, is_not_empty

from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.planning.codec_choice import measure_frame_unit
from pipelines.planning.grouping import plan_cubes
from pipelines.planning.plan import sample_indices
from pipelines.planning.scene import Scene, SceneRef
from pipelines.rasters import RasterCache
from pipelines.testing import write_series
from pipelines.transforms import compress as compress_module
from pipelines.transforms import frames as frames_module
from pipelines.transforms.assemble_files import AssembleFiles, SkipExisting
from pipelines.transforms.compress import ChooseCodecs, CompressFrames, select_codec
from pipelines.transforms.dead_letters import DeadLetter, WriteDeadLetters
from pipelines.transforms.discover import DiscoverScenes
from pipelines.transforms.frames import FrameKey, LazyCube, SourceRuns, SplitFrames, read_frame
from pipelines.transforms.manifest import ManifestEntry, WriteManifest
from pipelines.transforms.plan_cubes import PlanCubes
from pipelines.transforms.read_metadata import ReadSceneMetadata, read_scene
from pipelines.transforms.write_parts import PART_RECORD, FramePart, PrepareParts, WriteParts, part_path
from rumi_core import DEFAULT_CODEC, decode_frame
from rumi_core.compression.sampling import crop_frames
from rumi_core.frame_units import FRAME_UNITS
from rumi_core.writer import frame_samples

if TYPE_CHECKING:
    from collections.abc import Callable

    from apache_beam.testing.test_pipeline import TestPipeline

    from pipelines.planning.plan import CubePlan

Series = tuple["Path", list[str], np.ndarray[Any, Any]]


def _plan(series: Series, options: ConvertOptions) -> CubePlan:
    _, paths, _ = series
    (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], options)
    return plan


def _measured_plan(series: Series, options: ConvertOptions) -> CubePlan:
    """The plan as the pipeline converts it: with ``--frame-unit auto``, the measured unit (``ChooseFrameUnits``)."""
    plan = _plan(series, options)
    if options.frame_unit != "auto":
        return plan
    rasters = RasterCache()
    try:
        return dataclasses.replace(plan, frame_unit=measure_frame_unit(plan, LazyCube(plan, rasters), access=options.access))
    finally:
        rasters.close()


def test_discover_scenes(pipeline: Callable[[], TestPipeline], series: Series, tmp_path: Path) -> None:
    directory, paths, _ = series
    missing = str(tmp_path / "nothing*.tif")
    with pipeline() as p:
        found = p | beam.Create([str(directory), missing]) | DiscoverScenes()
        expected = [SceneRef(path) for path in paths] + [
            DeadLetter(missing, "no-match", "no file matches this path or pattern", "DiscoverScenes")
        ]
        assert_that(found, equal_to(expected))


def test_read_scene_metadata(pipeline: Callable[[], TestPipeline], series: Series, tmp_path: Path) -> None:
    _, paths, _ = series
    junk = tmp_path / "junk.tif"
    junk.write_bytes(b"not a tiff")
    letter = DeadLetter("x", "no-match", "m", "DiscoverScenes")
    with pipeline() as p:
        out = p | beam.Create([SceneRef(paths[0]), SceneRef(str(junk)), letter]) | ReadSceneMetadata()
        kinds = out | beam.Map(lambda x: (type(x).__name__, getattr(x, "reason", None)))
        assert_that(kinds, equal_to([("Scene", None), ("DeadLetter", "unreadable"), ("DeadLetter", "no-match")]))


def test_plan_cubes(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    _, paths, _ = series
    scenes: list[Scene | DeadLetter] = [read_scene(SceneRef(p)) for p in paths]
    letter = DeadLetter("x", "no-match", "m", "DiscoverScenes")
    expected = _plan(series, options)
    with pipeline() as p:
        out = p | beam.Create([*scenes, letter]) | PlanCubes(options)
        assert_that(out, equal_to([expected, letter]))


def test_source_runs_and_split_frames(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    plan = _plan(series, options)
    _, _, cube = series
    n = plan.layout.frame_count
    with pipeline() as p:
        plans = p | "Plans" >> beam.Create([plan])
        runs = plans | "Runs" >> SourceRuns(shards=5)
        keys = runs | beam.FlatMap(lambda run: [FrameKey(run[0], i) for i in run[1]])
        assert_that(keys, equal_to([FrameKey(plan.cube_id, i) for i in range(n)]), label="AllKeys")
        frames = plans | "Split" >> SplitFrames(shards=3)
        checked = frames | beam.Map(lambda kv: (kv[0].index, bool(np.array_equal(kv[1], frame_samples(cube, plan.layout, kv[0].index)))))
        assert_that(checked, equal_to([(i, True) for i in range(n)]), label="Samples")


def test_choose_and_compress(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    plan = _plan(series, options)
    _, _, cube = series
    layout = plan.layout
    with pipeline() as p:
        plans = p | "Plans" >> beam.Create([plan])
        codecs = plans | ChooseCodecs()
        expected = select_codec(plan, RasterCache()).to_dict()  # the selection is deterministic
        assert_that(codecs, equal_to([(plan.cube_id, expected)]), label="Codec")
        frames = p | "Frames" >> beam.Create([(FrameKey(plan.cube_id, i), frame_samples(cube, layout, i)) for i in (0, 5)])
        compressed = frames | CompressFrames(codecs, plans)
        decoded = compressed | beam.Map(
            lambda kv: (kv[0].index, decode_frame(kv[1], decoded_frame_bytes=layout.decoded_frame_bytes(kv[0].index)).tobytes())
        )
        assert_that(decoded, equal_to([(i, frame_samples(cube, layout, i).tobytes()) for i in (0, 5)]), label="RoundTrip")


@pytest.mark.parametrize(("unit", "budget"), [(0, 20000), (3, 20000), (3, 1 << 22)], ids=["tiles-cropped", "cells-cropped", "cells-whole"])
def test_the_codec_sample_reads_only_the_crops_it_measures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unit: int, budget: int) -> None:
    paths, _ = write_series(str(tmp_path / "scenes"), dates=("2023-01-05", "2023-02-04"), size=(300, 280), seed=5)
    (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], ConvertOptions(out=str(tmp_path / "out"), tile_size=256))
    plan = dataclasses.replace(plan, frame_unit=unit)
    layout = plan.layout
    read: list[int] = []
    real_read = frames_module.read_band_window
    monkeypatch.setattr(frames_module, "read_band_window", lambda *a, out, **kw: read.append(out.size) or real_read(*a, out=out, **kw))
    chosen: list[tuple[list[np.ndarray[Any, Any]], int]] = []
    real_choose = compress_module.choose_codec

    def choose(plan: CubePlan, samples: list[np.ndarray[Any, Any]], budget: int) -> Any:
        chosen.append((samples, budget))
        return real_choose(plan, samples, budget=budget)

    monkeypatch.setattr(compress_module, "choose_codec", choose)
    rasters = RasterCache()
    try:
        codec = select_codec(plan, rasters, budget=budget)
        read_for_choice = sum(read)
        whole = [read_frame(plan, i, rasters) for i in sample_indices(layout.frame_count, 4)]
    finally:
        rasters.close()
    ((samples, passed),) = chosen
    expected, _ = crop_frames(whole, layout.frame_axes, budget)
    assert [s.tobytes() for s in samples] == [e.tobytes() for e in expected]  # what measuring whole frames measured
    assert read_for_choice == sum(s.size for s in samples)  # and nothing else was read
    assert (read_for_choice < sum(w.size for w in whole)) == (budget < 1 << 22)
    assert passed >= read_for_choice  # not cropped a second time
    assert codec == real_choose(plan, whole, budget=budget)  # the same choice as on whole frames


def test_prepare_write_parts_and_assemble(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    plan = _plan(series, options)
    _, _, cube = series
    layout = plan.layout
    os.makedirs(os.path.join(options.parts_dir, plan.cube_id), exist_ok=True)
    stale = part_path(options.parts_dir, plan.cube_id, 999)
    Path(stale).touch()
    frames = [
        (FrameKey(plan.cube_id, i), DEFAULT_CODEC.encode(frame_samples(cube, layout, i), axes=layout.frame_axes))
        for i in range(layout.frame_count)
    ]
    with pipeline() as p:
        plans = p | "Plans" >> beam.Create([plan]) | PrepareParts(options.parts_dir)
        codecs = plans | beam.Map(lambda plan: (plan.cube_id, {"name": "raster"}))
        parts = (
            p
            | "Frames" >> beam.Create(frames)
            | "Wait" >> beam.Map(lambda kv, ready: kv, ready=beam.pvalue.AsList(plans))
            | WriteParts(options.parts_dir)
        )
        assert_that(
            parts | beam.Map(lambda kv: (kv[0], kv[1].index, kv[1].size, os.path.dirname(kv[1].path))),
            equal_to([(plan.cube_id, k.index, len(f), os.path.join(options.parts_dir, plan.cube_id)) for k, f in frames]),
            label="Parts",
        )
        entries = parts | AssembleFiles(options, plans, codecs)
        assert_that(
            entries | beam.Map(lambda e: (e.cube_id, e.status, e.frames)),
            equal_to([(plan.cube_id, "written", layout.frame_count)]),
            label="Entry",
        )
    assert not os.path.exists(stale) and not os.path.exists(os.path.join(options.parts_dir, plan.cube_id))
    import rumi_core

    path = os.path.join(options.out, f"{plan.cube_id}.rumi")
    assert np.array_equal(rumi_core.read(path, Path(path + "h").read_bytes()), cube)


def test_assemble_reports_read_failures(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    from pipelines.transforms.frames import FrameFailure

    plan = _plan(series, options)
    with pipeline() as p:
        plans = p | "Plans" >> beam.Create([plan])
        codecs = p | "Codecs" >> beam.Create([(plan.cube_id, {})])
        failed = (plan.cube_id, FrameFailure("/x_B02.tif", "boom"))
        parts = p | "Parts" >> beam.Create([failed, (plan.cube_id, FramePart(0, 10, "/nowhere.part", PART_RECORD.size))])
        out = parts | AssembleFiles(options, plans, codecs)
        assert_that(out | beam.Map(lambda d: (d.href, d.reason)), equal_to([("/x_B02.tif", "read-failed")]))


def test_skip_existing(pipeline: Callable[[], TestPipeline], series: Series, options: ConvertOptions) -> None:
    from pipelines.convert import run

    directory, _, _ = series
    run([str(directory)], options)
    plan = _measured_plan(series, options)
    other = _plan(series, type(options)(out=options.out, tile_size=64))  # same name, other layout: not skipped
    with pipeline() as p:
        out = p | beam.Create([plan, other]) | SkipExisting(options)
        assert_that(
            out | beam.Map(lambda x: (type(x).__name__, getattr(x, "status", None))),
            equal_to([("ManifestEntry", "skipped"), ("CubePlan", None)]),
        )


def test_sinks(pipeline: Callable[[], TestPipeline], tmp_path: Path) -> None:
    entry = ManifestEntry(
        "c",
        "written",
        "c.rumi",
        "c.rumih",
        (1, 1, 2, 2),
        "uint8",
        ({"name": "a"},),
        ("2020-01-01T00:00:00Z",),
        "EPSG:4326",
        (1, 0, 0, 0, -1, 0),
        None,
        512,
        0,
        {},
        1,
        10,
        33,
        4,
        4,
        "0" * 64,
    )
    letters = [DeadLetter("b", "no-match", "m", "S"), DeadLetter("a", "unreadable", "m", "S"), DeadLetter("a", "unreadable", "m", "S")]
    with pipeline() as p:
        counts = p | "E" >> beam.Create([entry]) | WriteManifest(str(tmp_path / "m.jsonl"))
        assert_that(counts, equal_to([1]), label="Manifest")
        dead = p | "D" >> beam.Create(letters) | WriteDeadLetters(str(tmp_path / "d.jsonl"))
        assert_that(dead, is_not_empty(), label="Dead")
    assert [ManifestEntry.from_dict(d) for d in load_jsonl(str(tmp_path / "m.jsonl"))] == [entry]
    assert [d["href"] for d in load_jsonl(str(tmp_path / "d.jsonl"))] == ["a", "b"]


def test_frame_unit_measured_only_when_several_fit(series: Series, options: ConvertOptions) -> None:
    """``--access tile`` leaves unit 0 alone (9 compresses identically): no pixel is read; ``--access any`` measures."""
    plan = _plan(series, dataclasses.replace(options, frame_unit="auto"))
    rasters = RasterCache()
    reads: list[object] = []

    class Counted(LazyCube):
        def __getitem__(self, key: tuple[Any, ...]) -> np.ndarray[Any, Any]:
            reads.append(key)
            return super().__getitem__(key)

    try:
        assert measure_frame_unit(plan, Counted(plan, rasters), access="tile") == 0
        assert reads == []
        unit = measure_frame_unit(plan, Counted(plan, rasters), access=None)
        assert reads
        assert FRAME_UNITS[unit].is_valid(bands=len(plan.bands), times=len(plan.times))
    finally:
        rasters.close()


def test_assembly_refuses_a_part_of_another_size_or_a_missing_part(series: Series, options: ConvertOptions) -> None:
    """A part file that does not hold what the frame stage reported never reaches a published file."""
    import pytest

    from pipelines.errors import AssemblyError
    from pipelines.transforms.assemble_files import assemble_cube
    from pipelines.transforms.cube_parts import CubeParts
    from pipelines.transforms.write_parts import PartWriter, prepare_parts

    plan = _plan(series, options)
    _, _, cube = series
    layout = plan.layout
    prepare_parts(options.parts_dir, plan)
    frames = [DEFAULT_CODEC.encode(frame_samples(cube, layout, i), axes=layout.frame_axes) for i in range(layout.frame_count)]
    with PartWriter(options.parts_dir) as writer:
        parts = [writer.write(FrameKey(plan.cube_id, i), f) for i, f in enumerate(frames)]
    rasters = RasterCache()

    def assemble(parts: list[FramePart]) -> None:
        assemble_cube(plan, CubeParts.of(parts), codec={"name": "raster"}, options=options, rasters=rasters)

    longer = [dataclasses.replace(p, size=p.size + 1) if p.index == 1 else p for p in parts]
    with pytest.raises(AssemblyError, match=r"\.part: the record at byte \d+ holds frame 1 of \d+ bytes, not frame 1 of \d+ bytes"):
        assemble(longer)
    shifted = [dataclasses.replace(p, offset=p.offset + 1) if p.index == 1 else p for p in parts]
    with pytest.raises(AssemblyError, match=r"holds frame \d+ of \d+ bytes, not frame 1 of"):
        assemble(shifted)
    os.truncate(parts[-1].path, parts[-1].offset + parts[-1].size - 1)
    with pytest.raises(AssemblyError, match=rf"part {parts[-1].index}: a frame's source ended 1 bytes early"):
        assemble(parts)
    os.unlink(parts[0].path)
    with pytest.raises(AssemblyError, match=r"the part file of frame 0 is missing"):
        assemble(parts)
    rasters.close()
    assert not any(name.endswith((".rumi", ".rumih")) for name in os.listdir(options.out))


def test_band_windows_read_in_place_or_cast_as_numpy_casts(series: Series, options: ConvertOptions) -> None:
    """A window one source covers is read straight into the caller's array; samples of another type are cast by NumPy."""
    from pipelines.transforms.frames import read_band_window

    plan = _plan(series, options)
    _, _, cube = series
    rasters = RasterCache()
    try:
        whole = ((0, 96), (0, 80))
        out = np.full((96, 80), 7, plan.dtype)
        assert read_band_window(plan, rasters, 1, 2, *whole, out=out) is out
        assert np.array_equal(out, cube[1, 2])
        edge = ((64, 96), (48, 80))  # a window on the cube's last tile
        assert np.array_equal(read_band_window(plan, rasters, 2, 0, *edge), cube[2, 0, 64:, 48:])
        narrow = dataclasses.replace(plan, dtype="int8")  # GDAL would clamp to 127; a NumPy cast wraps, as the mosaic path does
        got = read_band_window(narrow, rasters, 0, 3, *whole, out=np.empty((96, 80), "int8"))
        assert np.array_equal(got, cube[0, 3].astype("int8"))
    finally:
        rasters.close()


@pytest.mark.parametrize("holds", ["tile", "cell"])
@pytest.mark.parametrize("tile", [64, 300, 512, 2048])
def test_source_runs_of_all_shards_cover_every_frame_once(tile: int, holds: str) -> None:
    """Every frame is in exactly one run of one shard; a run's frames are every band of one time in a RUN_SPAN square,
    band after band; a cell is one."""
    from types import SimpleNamespace

    from pipelines.transforms.frames import RUN_SPAN, shard_source_runs

    shapes = {"a": (3, 40, 2, 2), "b": (1, 1, 1, 1), "c": (17, 4, 3, 2)}  # tiles down, tiles across, bands, times

    def layout(down: int, across: int, bands: int, times: int) -> SimpleNamespace:
        def frame_index(row: int, col: int, band: int, time: int) -> int:  # frame unit 0 (specification, Frame index)
            return ((row * across + col) * bands + band) * times + time

        return SimpleNamespace(tiles_down=down, tiles_across=across, tile_length=tile, tile_width=tile, samples_per_pixel=bands,
                               time_count=times, unit=SimpleNamespace(holds=holds), frame_index=frame_index)  # fmt: skip

    plans = [SimpleNamespace(cube_id=c, layout=layout(*shape)) for c, shape in shapes.items()]
    side = max(1, RUN_SPAN // tile) if holds == "tile" else 1  # tiles a run spans each way
    for shards in (1, 5, 64):
        runs = [run for shard in range(shards) for run in shard_source_runs(shard, plans, shards)]
        for cube, (down, across, bands, times) in shapes.items():
            per = bands * times if holds == "tile" else 1
            frames = [i for c, run in runs if c == cube for i in run]
            assert sorted(frames) == list(range(down * across * per))
            for c, run in runs:
                if c == cube:
                    places = [divmod(i % per, times) if holds == "tile" else (0, 0) for i in run]  # (band, time)
                    assert len({t for _, t in places}) == 1  # one time
                    assert [b for b, _ in places] == sorted(b for b, _ in places)  # band after band
                    in_run = len({b for b, _ in places})
                    assert in_run == (bands if holds == "tile" else 1)  # every band
                    rows = {(i // per) // across for i in run}
                    cols = {(i // per) % across for i in run}
                    assert len(run) == len(rows) * len(cols) * in_run  # a rectangle of tiles for each band
                    assert len({r // side for r in rows}) == 1 and len({c // side for c in cols}) == 1  # within one square
                    # As large as the cube allows.
                    assert len(rows) == min(side, down - min(rows)) and len(cols) == min(side, across - min(cols))
