"""Re-processed Sentinel-2 products among local files: the newest processing of a datatake is kept, whatever ``--duplicates`` says.

Two processings of one datatake (a SAFE of baseline ``N0510`` and its
``N0511`` re-processing, or Earth Search's ``S2A_31UGT_20240315_9_L2A`` and
``..._10_L2A``) are two versions of one acquisition. Before, the default
``--duplicates error`` made both of them dead letters, so their date was
missing from the cube, and ``--duplicates last`` kept ``_9_`` (the later
path). Two different datatakes at one time still follow ``--duplicates``.
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import rumi_core
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.planning.grouping import plan_cubes
from pipelines.sentinel2.products import product_of
from pipelines.testing import make_scene, synthetic_cube, write_geotiff

if TYPE_CHECKING:
    from pathlib import Path

    from pipelines.summary import Summary

BANDS = ("B02", "B04")
SIZE = (48, 64)
OPTIONS: dict[str, Any] = {"tile_size": 32, "frame_unit": 0, "compression": "raster", "write_catalog": False}


def _safe_files(root: Path, day: str, *, baseline: str, generated: str) -> list[str]:
    """The band files of a SAFE product, as GeoTIFFs at the paths a granule's JP2s have."""
    product = f"S2A_MSIL2A_{day}T103421_N{baseline}_R051_T32ULC_{generated}.SAFE"
    folder = root / product / "GRANULE" / f"L2A_T32ULC_A040000_{day}T103421" / "IMG_DATA" / "R10m"
    return [str(folder / f"T32ULC_{day}T103421_{band}_10m.tif") for band in BANDS]


def _earth_search_files(root: Path, day: str, *, sequence: int) -> list[str]:
    """The band files of an Earth Search COG folder, in the bucket's tree."""
    folder = root / "sentinel-s2-l2a-cogs" / "31" / "U" / "GT" / day[:4] / str(int(day[4:6])) / f"S2A_31UGT_{day}_{sequence}_L2A"
    return [str(folder / f"{band}.tif") for band in BANDS]


def _write(paths: list[str], data: np.ndarray[Any, Any], *, epsg: int) -> None:
    """One single-band GeoTIFF per path, from ``data`` of shape ``(bands, rows, cols)``."""
    for path, band in zip(paths, data, strict=True):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_geotiff(path, band[np.newaxis], epsg=epsg, transform=(10.0, 0.0, 600000.0, 0.0, -10.0, 5300040.0), nodata=0)


def _archive(root: Path, layout: str) -> tuple[list[str], list[str], np.ndarray[Any, Any]]:
    """Three dates, the second processed twice; return every file, the older processing's files and the expected cube.

    The newer processing's pixels differ from the older's (+7), so the cube shows which one it holds.
    """
    days = ["20240103", "20240110", "20240117"]
    cube = synthetic_cube(len(days), len(BANDS), *SIZE, seed=11, dtype="uint16")
    every: list[str] = []
    if layout == "safe":
        epsg, older = 32632, _safe_files(root, days[1], baseline="0510", generated=f"{days[1]}T122345")
        products = [_safe_files(root, day, baseline="0511", generated="20240610T090000") for day in days]
    else:
        epsg, older = 32631, _earth_search_files(root, days[1], sequence=9)
        products = [_earth_search_files(root, day, sequence=10 if day == days[1] else 0) for day in days]
    _write(older, cube[1] - 7, epsg=epsg)  # the first processing of the second date
    for paths, data in zip(products, cube, strict=True):
        _write(paths, data, epsg=epsg)
        every += paths
    return every + older, older, cube


def _convert(inputs: list[str], out: Path, **kwargs: Any) -> Summary:
    return run(inputs, ConvertOptions(out=str(out), **OPTIONS, **kwargs))


def _cube(out: Path) -> tuple[dict[str, Any], np.ndarray[Any, Any]]:
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    path = out / entry["file"]
    return entry, rumi_core.read(path, (out / entry["blob"]).read_bytes())


def _hashes(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir()) if p.suffix in (".rumi", ".rumih")}


@pytest.mark.parametrize("layout", ["safe", "earth-search"])
@pytest.mark.parametrize("duplicates", ["error", "last"])
def test_the_newest_processing_of_a_datatake_is_kept_and_the_older_dropped(tmp_path: Path, layout: str, duplicates: str) -> None:
    """Every date is in the cube, the re-processed date with the newer product's pixels; the older is dropped, no dead letter.

    Earth Search's ``_10_`` is newer than its ``_9_``, though ``_9_`` sorts after it as text.
    """
    inputs, older, expected = _archive(tmp_path / "archive", layout)
    summary = _convert(inputs, tmp_path / "out", duplicates=duplicates)
    assert summary.dead_letters == ()
    entry, pixels = _cube(tmp_path / "out")
    assert len(entry["times"]) == 3 and pixels.shape == (3, len(BANDS), *SIZE)
    assert np.array_equal(pixels, expected)  # the second date is the newer processing's, not the older's (-7)
    assert sorted(entry["dropped"]) == sorted(older)
    assert not set(older) & set(entry["inputs"])
    table = summary.table()
    assert "dropped: 2 input files (older-processing: 2), listed as dropped in " in table
    assert "a newer processing of their Sentinel-2 datatake is in the cube" in table
    assert "dead letters: none" in table and "left out" not in table


def test_input_order_does_not_matter(tmp_path: Path) -> None:
    """The files in any order, the older processing first or last: the same cube, byte for byte."""
    inputs, _, _ = _archive(tmp_path / "archive", "earth-search")
    shuffled = inputs[:]
    random.Random(3).shuffle(shuffled)
    outputs = []
    for name, order in (("sorted", sorted(inputs)), ("reversed", sorted(inputs, reverse=True)), ("shuffled", shuffled)):
        summary = _convert(order, tmp_path / name)
        assert summary.dead_letters == ()
        outputs.append(_hashes(tmp_path / name))
    assert outputs[0] == outputs[1] == outputs[2] and outputs[0]


def _scenes(*folders: str, day: str = "2024-03-15") -> list[Any]:
    """Scene metadata of two bands in each product folder, all at one time on one grid."""
    return [make_scene(f"/a/{folder}/{band}.tif", day, bands=(band,), stack=f"/a/{folder}/") for folder in folders for band in BANDS]


@pytest.mark.parametrize(
    ("folders", "newest"),
    [
        (("S2A_31UGT_20240315_9_L2A", "S2A_31UGT_20240315_10_L2A", "S2A_31UGT_20240315_2_L2A"), 1),
        (
            (
                "S2A_MSIL2A_20240315T103421_N0510_R051_T32ULC_20240315T122345.SAFE",
                "S2A_MSIL2A_20240315T103421_N0511_R051_T32ULC_20240315T090000.SAFE",
                "S2A_MSIL2A_20240315T103421_N0510_R051_T32ULC_20240316T080000.SAFE",
            ),
            1,
        ),
    ],
)
def test_planning_keeps_the_newest_whatever_the_order_and_the_duplicates_option(folders: tuple[str, ...], newest: int) -> None:
    """Earth Search's numbers, which may also count two passes of one day, are mosaicked when ``mosaic`` asks."""
    scenes = _scenes(*folders)
    for duplicates in ("error", "first", "last", "mosaic"):
        for seed in range(4):
            order = scenes[:]
            random.Random(seed).shuffle(order)
            (plan,), rejects = plan_cubes(order, ConvertOptions(out="out", tile_size=32, duplicates=duplicates))
            assert rejects == [] and len(plan.times) == 1, duplicates
            if duplicates == "mosaic" and not folders[0].endswith(".SAFE"):
                assert plan.dropped == () and len(plan.sources[0][0]) == len(folders)
                continue
            assert plan.inputs == tuple(f"/a/{folders[newest]}/{b}.tif" for b in BANDS)
            assert plan.dropped == tuple(sorted(f"/a/{f}/{b}.tif" for i, f in enumerate(folders) if i != newest for b in BANDS))


@pytest.mark.parametrize(
    "folders",
    [
        ("S2A_31UGT_20240315_0_L2A", "S2B_31UGT_20240315_0_L2A"),  # two platforms: two datatakes
        ("S2A_31UGT_20240315_0_L2A", "S2A_31UGU_20240315_0_L2A"),  # two tiles
        ("S2A_31UGT_20240315_0_L2A", "S2A_MSIL2A_20240315T103421_N0510_R051_T31UGT_20240315T122345.SAFE"),  # two namings
        ("S2A_31UGT_20240315_0_L2A", "scene_20240315"),  # a name that says no processing
        ("S2A_31UGT_20240315_0_L2A", "copy/S2A_31UGT_20240315_0_L2A"),  # one product twice: no newer processing
    ],
)
def test_other_acquisitions_at_one_time_still_follow_duplicates(folders: tuple[str, str]) -> None:
    """With ``error`` both are dead letters, in a short message saying the time is left out; ``first``, ``last``, ``mosaic`` as before."""
    scenes = _scenes(*folders)
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32))
    assert plans == [] and len(rejects) == 4 and {r.reason for r in rejects} == {"duplicate-time"}
    when = "2024-03-15T00:00:00Z on "
    for reject in rejects:
        other = folders[1] if f"/{folders[0]}/" in reject.href and "/copy/" not in reject.href else folders[0]
        product = product_of(other)
        named = product.name if product is not None else f"/a/{other}/B02.tif"
        assert reject.message.startswith(when), reject.message
        assert f"is also the time of 1 other acquisition ({named}), so this time step is left out of the cube" in reject.message
        assert reject.message.endswith("pass --duplicates first, last or mosaic to keep it")
        assert "\n" not in reject.message and len(reject.message) < 250
    hrefs = sorted(s.href for s in scenes)
    (first,), rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32, duplicates="first"))
    assert not rejects and first.inputs == tuple(hrefs[:2]) and first.dropped == tuple(hrefs[2:])
    (last,), _ = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32, duplicates="last"))
    assert last.inputs == tuple(hrefs[2:]) and last.dropped == tuple(hrefs[:2])
    (mosaic,), _ = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32, duplicates="mosaic"))
    assert mosaic.inputs == tuple(hrefs) and mosaic.dropped == ()


def test_a_duplicate_time_message_names_one_other_acquisition_and_counts_the_rest() -> None:
    scenes = _scenes("S2A_31UGT_20240315_0_L2A", "S2B_31UGT_20240315_0_L2A", "S2C_31UGT_20240315_0_L2A")
    _, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32))
    (message,) = {r.message for r in rejects if "/S2C_" in r.href}
    assert "is also the time of 2 other acquisitions (S2A_31UGT_20240315_0_L2A and 1 more)" in message
    assert "B02.tif" not in message


def test_older_processings_at_a_time_left_out_are_dead_letters_too() -> None:
    """A re-processed datatake beside another datatake at one time: with ``error`` the time step is gone, every product with it."""
    scenes = _scenes("S2A_31UGT_20240315_0_L2A", "S2A_31UGT_20240315_1_L2A", "S2B_31UGT_20240315_0_L2A")
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32))
    assert plans == [] and len(rejects) == 6
    (plan,), rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32, duplicates="last"))
    assert not rejects and plan.inputs == ("/a/S2B_31UGT_20240315_0_L2A/B02.tif", "/a/S2B_31UGT_20240315_0_L2A/B04.tif")
    assert sorted(plan.dropped) == sorted(f"/a/S2A_31UGT_20240315_{n}_L2A/{b}.tif" for n in (0, 1) for b in BANDS)


def test_the_summary_counts_dropped_inputs_and_says_which_times_are_left_out(tmp_path: Path) -> None:
    """Two datatakes at one time: ``last`` drops one (the summary says so), ``error`` leaves the time out (it says that too)."""
    root = tmp_path / "archive"
    data = synthetic_cube(3, len(BANDS), *SIZE, seed=2, dtype="uint16")
    inputs = []
    for i, (platform, day) in enumerate((("S2A", "20240315"), ("S2B", "20240315"), ("S2A", "20240322"))):
        paths = [str(root / f"{platform}_31UGT_{day}_0_L2A" / f"{band}.tif") for band in BANDS]
        _write(paths, data[i], epsg=32631)
        inputs += paths
    summary = _convert(inputs, tmp_path / "last", duplicates="last")
    assert summary.dead_letters == ()
    table = summary.table()
    assert "dropped: 2 input files (duplicate-time: 2)" in table and "--duplicates kept another acquisition at their time" in table
    assert "dead letters: none" in table
    again = _convert(inputs, tmp_path / "last", duplicates="last")  # nothing new: the kept cube's drops were said when written
    assert [e.status for e in again.entries] == ["skipped"] and "dropped:" not in again.table()
    summary = _convert(inputs, tmp_path / "error")
    entry, _ = _cube(tmp_path / "error")
    assert entry["times"] == ["2024-03-22T00:00:00Z"]  # 2024-03-15 is left out
    table = summary.table()
    assert "dead letters: 4 (duplicate-time: 4)" in table and "dropped:" not in table
    assert (
        "left out: 1 time step in no cube (2024-03-15T00:00:00Z on EPSG32631_r10), since several acquisitions on one grid "
        "share each time (duplicate-time); pass --duplicates first, last or mosaic to keep them"
    ) in table


def test_a_newer_processing_not_yet_whole_leaves_the_older_in_the_cube() -> None:
    """A re-processing synchronised in part (two of its three band files) beside its datatake's older processing: it made a
    second cube of that time, of the bands it had so far. It waits, a dead letter naming what it lacks; the older stays."""
    older = "S2A_MSIL2A_20240315T103421_N0510_R051_T32ULC_20240315T122345.SAFE"
    newer = "S2A_MSIL2A_20240315T103421_N0511_R051_T32ULC_20240610T090000.SAFE"
    other = "S2A_MSIL2A_20240322T103421_N0510_R051_T32ULC_20240322T122345.SAFE"

    def files(folder: str, day: str, bands: tuple[str, ...]) -> list[Any]:
        return [make_scene(f"/a/{folder}/{b}.tif", day, bands=(b,), stack=f"/a/{folder}/") for b in bands]

    scenes = files(older, "2024-03-15T10:34:21Z", ("B02", "B03", "B04")) + files(other, "2024-03-22T10:34:21Z", ("B02", "B03", "B04"))
    scenes += files(newer, "2024-03-15T10:34:21Z", ("B02", "B03"))
    for duplicates in ("error", "last"):
        (plan,), rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=32, duplicates=duplicates))
        assert len(plan.times) == 2 and all(older in h or other in h for h in plan.inputs), duplicates
        assert [(r.href, r.reason) for r in rejects] == [(f"/a/{newer}/{b}.tif", "incomplete-scene") for b in ("B02", "B03")]
        assert "it lacks B04 (still being copied?)" in rejects[0].message
    # Whole, it replaces the older processing.
    (plan,), rejects = plan_cubes([*scenes, *files(newer, "2024-03-15T10:34:21Z", ("B04",))], ConvertOptions(out="out", tile_size=32))
    assert not rejects and sorted(plan.dropped) == [f"/a/{older}/{b}.tif" for b in ("B02", "B03", "B04")]
