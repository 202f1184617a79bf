"""Every pixel where it belongs: convert, then export / read / open in xarray, and compare with rasterio.

The truth is what rasterio reports for the source: its transform (of pixel
corners, also for ``AREA_OR_POINT=Point`` files, which GDAL shifts by half a
pixel), ``AREA_OR_POINT``, the pixel centres (``src.xy``) and the no-data
value. Each check runs on generated PixelIsArea and PixelIsPoint rasters, and
on every raster of ``../shared/data`` that a rumi file can hold.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr
from click.testing import CliRunner

from catalog.cube import Cube
from catalog.geotiff import export_geotiffs
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.testing import write_geotiff
from rumi_core.cli.main import cli

# rasterio 1.4 and rioxarray 0.19 compose affines with '*', which affine 3 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning")

TOLERANCE = 1e-9
"""Largest allowed difference, in pixels, between two transforms' coefficients."""

# Reasons a raster cannot become a rumi file at all; every other raster is checked.
UNSTORABLE = {"no-geotransform", "missing-crs", "crs-not-epsg", "rotated", "unsupported-dtype", "masked", "unreadable"}


def _close(a: Any, b: Any, pixel: float) -> bool:
    return all(abs(x - y) <= TOLERANCE * pixel for x, y in zip(tuple(a)[:6], tuple(b)[:6], strict=True))


def _convert(files: list[Path], tmp_path: Path) -> tuple[Path, dict[str, Path], list[dict[str, Any]]]:
    """Convert each file as its own acquisition (a distinct date in a link's name); return out, item per source, dead letters."""
    links = tmp_path / "in"
    links.mkdir()
    by_link: dict[str, Path] = {}
    for i, source in enumerate(files):
        day = (dt.date(2000, 1, 1) + dt.timedelta(days=i)).strftime("%Y%m%d")
        link = links / f"r{i:04d}D{day}_{source.name}"
        link.symlink_to(source)
        by_link[str(link)] = source
    out = tmp_path / "out"
    summary = run(
        sorted(by_link),
        ConvertOptions(out=str(out), time_pattern=r"r\d{4}D(?P<date>\d{8})_", compression="portable", frame_unit=0, tile_size=256),
    )
    items: dict[str, Path] = {}
    by_file = {os.path.realpath(source): source for source in by_link.values()}  # the manifest records files, links resolved
    for entry in load_jsonl(str(out / "manifest.jsonl")):
        (item,) = out.glob(f"stac/*/{entry['cube_id']}/{entry['cube_id']}.json")
        for path in entry["inputs"]:
            items[str(by_file[path])] = item
    dead = [{"href": str(by_link[d.href]), "reason": d.reason} for d in summary.dead_letters]
    return out, items, dead


def _check_export(source: Path, item: Path, tmp_path: Path) -> None:
    with rasterio.open(source) as src:
        truth, point, nodata, pixel = src.transform, src.tags().get("AREA_OR_POINT", "Area"), src.nodata, abs(src.res[0])
        window = ((src.height // 3, src.height), (src.width // 4, src.width))
        window_truth = src.window_transform(rasterio.windows.Window.from_slices(*window))
        xs, _ = src.xy([0] * src.width, list(range(src.width)))
        _, ys = src.xy(list(range(src.height)), [0] * src.height)
    # STAC readers (odc-stac, stackstac, rio-stac) take proj:transform as GDAL's, of pixel corners, for every raster.
    props = json.loads(item.read_text())["properties"]
    assert _close(props["proj:transform"], truth, pixel), (source, props["proj:transform"], truth)
    assert props.get("rumi:pixel_is_point", False) == (point == "Point")
    with Cube.open(str(item)) as cube:
        times = cube.times.time_count
        written = export_geotiffs(cube, tmp_path / f"{source.stem}.tif")
    # The source is one time step of its cube; every step shares the grid.
    assert len(written) == times
    with rasterio.open(written[0]) as out:
        assert _close(out.transform, truth, pixel), (source, out.transform, truth)
        assert out.tags().get("AREA_OR_POINT") == point, source
        assert (out.nodata is None and nodata is None) or out.nodata == nodata or (math.isnan(out.nodata) and math.isnan(nodata))
    tif = tmp_path / f"{source.stem}_window.tif"
    args = ["read", str(item), "--window", f"{window[0][0]}:{window[0][1]},{window[1][0]}:{window[1][1]}", "--times", "0", "-o", str(tif)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    with rasterio.open(tif) as out:
        assert _close(out.transform, window_truth, pixel), (source, out.transform, window_truth)
        assert out.tags().get("AREA_OR_POINT") == point
        assert (out.nodata is None and nodata is None) or out.nodata == nodata or (math.isnan(out.nodata) and math.isnan(nodata))
    with xr.open_dataset(item, engine="rumi", mask_and_scale=False) as ds:
        np.testing.assert_allclose(ds.x.values, xs, rtol=0, atol=TOLERANCE * pixel)
        np.testing.assert_allclose(ds.y.values, ys, rtol=0, atol=TOLERANCE * pixel)
        assert ds["data"].attrs["AREA_OR_POINT"] == point
        assert _close(ds["data"].rio.transform(), truth, pixel), (source, ds["data"].rio.transform(), truth)
        got = ds["data"].rio.nodata
        assert (got is None and nodata is None) or got == nodata or (math.isnan(got) and math.isnan(nodata))


@pytest.mark.parametrize("point", [False, True], ids=["PixelIsArea", "PixelIsPoint"])
def test_generated_rasters_round_trip(point: bool, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    src = tmp_path / "src"
    src.mkdir()
    data = rng.integers(0, 3000, (1, 37, 53), dtype="int16")
    data[0, :5, :7] = -9999
    tags = {"AREA_OR_POINT": "Point" if point else "Area"}
    # An origin that is not a multiple of the pixel: a half-pixel error cannot hide in rounding.
    transform = (30, 0, 452490.5, 0, -30, 3408645.25)
    path = Path(write_geotiff(str(src / "scene_B04.tif"), data, epsg=32616, transform=transform, nodata=-9999, tags=tags))
    _, items, dead = _convert([path], tmp_path)
    assert not dead
    _check_export(path, items[str(path)], tmp_path)


@pytest.mark.slow  # about a minute: one conversion of ~50 rasters, then an export, a read and an xarray open of each
def test_every_real_raster_round_trips(shared_data: Path, tmp_path: Path) -> None:
    files = sorted(p for p in shared_data.rglob("*") if p.suffix.lower() in (".tif", ".tiff", ".jp2") and p.is_file())
    # The 420 Landsat series files share one grid (MANIFEST.md); one date of them stands for the rest.
    lsts = [p for p in files if "/lsts/" in str(p)]
    first = min(p.parent for p in lsts)
    files = [p for p in files if "/lsts/" not in str(p) or p.parent == first]
    _, items, dead = _convert(files, tmp_path)
    assert {d["reason"] for d in dead} <= UNSTORABLE, dead
    assert len(items) >= 40
    assert any(rasterio.open(p).tags().get("AREA_OR_POINT") == "Point" for p in map(Path, items))
    for source, item in sorted(items.items()):
        _check_export(Path(source), item, tmp_path)


def test_an_item_of_extension_v0_1_0_keeps_its_meaning(tmp_path: Path) -> None:
    """There a PixelIsPoint item's proj:transform was its file's own, of pixel centres: such an item still reads every
    pixel where it belongs, and validates against the schema it declares."""
    from catalog.extension import SCHEMA_URI, SCHEMA_URI_V0_1
    from catalog.validation import validate_stac

    src = tmp_path / "src"
    src.mkdir()
    data = np.arange(37 * 53, dtype="int16").reshape(1, 37, 53)
    transform = (30, 0, 452490.5, 0, -30, 3408645.25)
    path = Path(write_geotiff(str(src / "scene_B04.tif"), data, epsg=32616, transform=transform, tags={"AREA_OR_POINT": "Point"}))
    _, items, _ = _convert([path], tmp_path)
    item = items[str(path)]
    doc = json.loads(item.read_text())
    a, b, c, d, e, f = doc["properties"]["proj:transform"]
    doc["properties"]["proj:transform"] = [a, b, c + 0.5 * a + 0.5 * b, d, e, f + 0.5 * d + 0.5 * e]  # as v0.1.0 wrote it
    doc["stac_extensions"] = [SCHEMA_URI_V0_1 if uri == SCHEMA_URI else uri for uri in doc["stac_extensions"]]
    item.write_text(json.dumps(doc))
    validate_stac(doc)
    with rasterio.open(path) as source, xr.open_dataset(item, engine="rumi") as ds:
        xs, _ = source.xy([0] * source.width, list(range(source.width)))
        np.testing.assert_allclose(ds.x.values, xs, rtol=0, atol=TOLERANCE * 30)
        assert _close(ds["data"].rio.transform(), source.transform, 30)
