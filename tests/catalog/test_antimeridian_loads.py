"""Reads and loads across the antimeridian: boxes written across it, items past 180°, and geographic outputs that cross it.

A box across 180° is written as STAC API writes it (``minx > maxx``) or with
its east end past 180°; both read the same pixels. Each source pixel holds
its own row and column, so a warped output is checked pixel by pixel against
the source pixel whose footprint holds its centre (exact pyproj maths), and
a copied one against NumPy slices of the source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from click.testing import CliRunner
from pyproj import Transformer

import rumi_core
from catalog import SelectorError, load
from catalog.collections import build_catalog
from catalog.items import create_item
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from pathlib import Path

    import pystac

# name: (crs, transform, height, width)
GRIDS: dict[str, tuple[str, tuple[float, float, float, float, float, float], int, int]] = {
    # 1° over the whole Earth, -180..180.
    "globe": ("EPSG:4326", (1.0, 0.0, -180.0, 0.0, -1.0, 90.0), 180, 360),
    # 0.01° from 179.5 to 180.5, past the antimeridian.
    "past180": ("EPSG:4326", (0.01, 0.0, 179.5, 0.0, -0.01, -16.0), 50, 100),
    # 1 km in UTM zone 60, from about 178.4° to -177.1°.
    "dateline": ("EPSG:32660", (1000.0, 0.0, 600000.0, 0.0, -1000.0, 5830000.0), 240, 300),
}


CAP = ("EPSG:4326", (0.1, 0.0, -180.0, 0.0, -0.1, -60.0), 300, 3600)
"""0.1° round the South Pole, from -60° (its own test)."""


def _indices(height: int, width: int) -> np.ndarray:
    """``(1, 2, height, width)`` uint16: band 0 holds each pixel's row + 1, band 1 its column + 1 (0 is nodata)."""
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([rows + 1, cols + 1])[None].astype(np.uint16)


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pystac.Item]:
    directory = tmp_path_factory.mktemp("antimeridian")
    out = {}
    for name, (crs, transform, height, width) in GRIDS.items():
        path = directory / f"{name}.rumi"
        blob = rumi_core.write(
            path, _indices(height, width), bands=["row", "col"], times=["2024-01-01"], crs=crs, transform=transform, tile_size=64, nodata=0
        )
        (directory / f"{name}.rumih").write_bytes(blob)
        out[name] = create_item(path, directory / f"{name}.rumih", extra={"dataset": name}, thumbnail=False)
    return out


@pytest.fixture(scope="module")
def catalog_root(items: dict[str, pystac.Item], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("antimeridian-catalog")
    build_catalog([items["past180"], items["dateline"]], root)
    return root / "catalog.json"


def _source_pixels(ds_x: np.ndarray, ds_y: np.ndarray, out_crs: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Row and column (+1, as the bands hold them) of the source pixel whose footprint holds each output pixel centre."""
    crs, (a, _, c, _, e, f), _, _ = GRIDS.get(name) or CAP
    x, y = np.meshgrid(ds_x, ds_y)
    sx, sy = Transformer.from_crs(out_crs, crs, always_xy=True).transform(x, y)
    if crs == "EPSG:4326":
        sx = (sx - c) % 360.0 + c  # the source's own turn of longitude
    return np.floor((sy - f) / e) + 1, np.floor((sx - c) / a) + 1


def _check_warped(ds: object, out_crs: str, name: str) -> None:
    """Every valid output pixel holds the source pixel under its centre, but within one pixel where GDAL's
    approximate transformation (1/8 pixel) meets an edge; and most hold exactly it."""
    data = ds.data.values[0]  # type: ignore[attr-defined]
    rows, cols = _source_pixels(ds.x.values, ds.y.values, out_crs, name)  # type: ignore[attr-defined]
    valid = data[0] != 0
    assert valid.mean() > 0.3
    assert np.abs(data[0][valid] - rows[valid]).max() <= 1
    assert np.abs(data[1][valid] - cols[valid]).max() <= 1
    assert (data[1][valid] == cols[valid]).mean() > 0.9


def test_a_global_item_is_copied_on_both_sides_of_180(items: dict[str, pystac.Item]) -> None:
    """On the items' own lattice, the output across 180° takes the globe's east end as it lies and its west end 360° on."""
    globe = _indices(180, 360)[0]
    expected = np.concatenate([globe[:, 80:100, 350:360], globe[:, 80:100, 0:10]], axis=2)
    for bbox in [(170, -10, -170, 10), (170, -10, 190, 10), (-190, -10, -170, 10)]:
        ds = load([items["globe"]], bbox=bbox)
        assert np.array_equal(ds.data.values[0], expected), bbox
        assert ds.sizes["x"] == 20
    # The same through a CRS and resolution equal to the item's.
    ds = load([items["globe"]], bbox=(170, -10, -170, 10), crs="EPSG:4326", resolution=1.0)
    assert np.array_equal(ds.data.values[0], expected)


def test_a_global_item_is_warped_on_both_sides_of_180(items: dict[str, pystac.Item]) -> None:
    ds = load([items["globe"]], bbox=(170, -10, -170, 10), crs="EPSG:4326", resolution=0.5)
    globe = _indices(180, 360)[0]
    expected = np.concatenate([globe[:, 80:100, 350:360], globe[:, 80:100, 0:10]], axis=2).repeat(2, axis=1).repeat(2, axis=2)
    assert np.array_equal(ds.data.values[0], expected)
    ds = load([items["globe"]], bbox=(170, 50, -170, 53), crs="EPSG:32660", resolution=10000)
    assert (ds.data.values != 0).all()
    _check_warped(ds, "EPSG:32660", "globe")


def test_an_item_past_180_is_found_from_the_west(items: dict[str, pystac.Item]) -> None:
    """The item runs from 179.5° to 180.5°: a box at -179.9..-179.6 is its columns 60..90."""
    source = _indices(50, 100)[0]
    for bbox in [(-179.9, -16.15, -179.6, -16.02), (180.1, -16.15, 180.4, -16.02)]:
        ds = load([items["past180"]], bbox=bbox)
        assert np.array_equal(ds.data.values[0], source[:, 2:15, 60:90]), bbox
    ds = load([items["past180"]], bbox=(179.6, -16.15, -179.6, -16.02))
    assert np.array_equal(ds.data.values[0], source[:, 2:15, 10:90])


def test_a_projected_item_across_180_is_warped_into_longitudes_across_it(items: dict[str, pystac.Item]) -> None:
    across = load([items["dateline"]], bbox=(176, 51, -177, 52), crs="EPSG:4326", resolution=0.01)
    past = load([items["dateline"]], bbox=(176, 51, 183, 52), crs="EPSG:4326", resolution=0.01)
    assert np.array_equal(across.data.values, past.data.values)
    assert across.sizes["x"] == 700
    valid = across.data.values[0, 0] != 0
    x = across.x.values
    assert valid[:, (x > 179) & (x < 180)].all() and valid[:, (x > 180) & (x < 181)].all()
    _check_warped(across, "EPSG:4326", "dateline")


def test_the_union_of_items_either_side_of_180_is_the_short_way_round(items: dict[str, pystac.Item]) -> None:
    """With no bbox, a load over the UTM 60 item in longitudes spans about 4.5°, not 360°."""
    ds = load([items["dateline"]], crs="EPSG:4326", resolution=0.05)
    assert 85 < ds.sizes["x"] < 95
    assert 178 < ds.x.values[0] < 179 and 182 < ds.x.values[-1] < 184


def test_an_inverted_box_in_a_projected_crs_is_still_refused(items: dict[str, pystac.Item]) -> None:
    with pytest.raises(SelectorError, match="empty or inverted"):
        load([items["dateline"]], bbox=(800000, 5600000, 700000, 5700000), bbox_crs="EPSG:32660")
    with pytest.raises(SelectorError, match="empty or inverted"):
        load([items["past180"]], bbox=(179.6, -16.15, -181.0, -16.02))


def test_rumi_read_takes_a_box_across_180(items: dict[str, pystac.Item], catalog_root: Path, tmp_path: Path) -> None:
    item_path = str(next(catalog_root.parent.glob("*/past180/past180.json")))
    outputs = []
    for i, bbox in enumerate(["179.9,-16.4,-179.9,-16.1", "179.9,-16.4,180.1,-16.1"]):
        out = tmp_path / f"item{i}.npy"
        result = CliRunner().invoke(cli, ["read", item_path, "--bbox", bbox, "-o", str(out)])
        assert result.exit_code == 0, result.output
        outputs.append(np.load(out))
    assert np.array_equal(outputs[0], outputs[1])
    assert np.array_equal(outputs[0], _indices(50, 100)[0, :, 10:40, 40:60])

    out = tmp_path / "catalog.npy"
    args = ["read", "--catalog", str(catalog_root), "--bbox", "179.6,-16.15,-179.6,-16.02", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert np.array_equal(np.load(out)[0], _indices(50, 100)[0, :, 2:15, 10:90])

    result = CliRunner().invoke(cli, ["read", item_path, "--bbox-crs", "EPSG:32660", "--bbox", "8e5,5.6e6,7e5,5.7e6", "-o", str(out)])
    assert result.exit_code != 0
    assert "--bbox: bbox [800000.0, 5600000.0, 700000.0, 5700000.0] is empty or inverted" in result.output


def test_a_global_item_a_sliver_past_180_is_copied_not_warped(tmp_path: Path) -> None:
    """0.007° pixels do not divide 360°: the item ends 0.003° past 180°. 360° round, that sliver holds no output pixel's
    centre, so the item still lies on the output's lattice once and is copied (int64 beyond 2**53 intact, chunks its tiles)."""
    data = 2**60 + np.arange(4 * 51429, dtype=np.int64).reshape(1, 1, 4, 51429) * 3
    path = tmp_path / "g.rumi"
    blob = rumi_core.write(path, data, bands=["v"], times=["2024-01-01"], crs="EPSG:4326", transform=(0.007, 0, -180.0, 0, -0.007, 0.028))
    (tmp_path / "g.rumih").write_bytes(blob)
    item = create_item(path, tmp_path / "g.rumih", thumbnail=False)
    ds = load([item])
    assert ds.data.chunks[3][0] == 512  # the file's tiles, not the warp's squares
    assert np.array_equal(ds.data.values, data)


def test_a_warp_round_the_south_pole_reads_every_longitude(tmp_path: Path) -> None:
    """EPSG:3031's lattice starts at the pole, so warp squares have a corner on it, where GDAL's bounds of a square
    miss longitudes (-177.4..180 for one): the globe warped there must leave no output pixel empty."""
    path = tmp_path / "cap.rumi"
    blob = rumi_core.write(
        path, _indices(300, 3600), bands=["row", "col"], times=["2024-01-01"], crs="EPSG:4326", transform=CAP[1], nodata=0
    )
    (tmp_path / "cap.rumih").write_bytes(blob)
    cap = create_item(path, tmp_path / "cap.rumih", thumbnail=False)
    # 20 km squares from the pole; the box straddles 180° (negative y in EPSG:3031).
    ds = load([cap], crs="EPSG:3031", resolution=20000, bbox=(-400000, -2000000, 400000, -1200000), bbox_crs="EPSG:3031")
    assert (ds.data.values != 0).all()
    _check_warped(ds, "EPSG:3031", "cap")


def test_a_polar_item_warped_to_longitudes_keeps_the_pixels_round_its_pole(tmp_path: Path) -> None:
    """A warp square of a geographic output reaching past the South Pole was bounded by its edges, and the one past the
    pole had no point: the square's source window left out the pixels round the pole (0 of 40 valid at 1°, 5 % fewer at
    0.05°, where rasterio's reproject filled them)."""
    path = tmp_path / "south.rumi"
    transform = (10000.0, 0.0, -500000.0, 0.0, -10000.0, 500000.0)
    blob = rumi_core.write(
        path, _indices(100, 100), bands=["row", "col"], times=["2024-01-01"], crs="EPSG:3031", transform=transform, nodata=0
    )
    (tmp_path / "south.rumih").write_bytes(blob)
    item = create_item(path, tmp_path / "south.rumih", thumbnail=False)
    ds = load([item], crs="EPSG:4326", resolution=0.05, bbox=(90.0, -90.0, 100.0, -86.0))
    x, y = np.meshgrid(ds.x.values, ds.y.values)
    sx, sy = Transformer.from_crs("EPSG:4326", "EPSG:3031", always_xy=True).transform(x, y)
    inside = (np.abs(sx) < 490000.0) & (np.abs(sy) < 490000.0)  # a pixel clear of the item's edge
    assert inside.sum() > 10000 and (ds.data.values[0, 0][inside] != 0).all()


def test_a_box_across_180_is_refused_where_the_output_crs_tears_there(items: dict[str, pystac.Item]) -> None:
    """In Web Mercator the two sides of the box lie at the two ends of the x axis: the output would be the width of the
    world. Refused, naming the CRS; a CRS continuous there (UTM 60) takes the box."""
    with pytest.raises(SelectorError, match=r"crosses the antimeridian, where EPSG:3857 tears"):
        load([items["globe"]], bbox=(179.5, -0.5, -179.5, 0.5), crs="EPSG:3857", resolution=1000)
    ds = load([items["globe"]], bbox=(179.5, -0.5, -179.5, 0.5), crs="EPSG:32660", resolution=10000)
    assert ds.sizes["x"] < 20
    with pytest.raises(SelectorError, match=r"is empty: across the antimeridian it needs minx > maxx, not 180 and -180"):
        load([items["past180"]], bbox=(180, -16.2, -180, -16.1))
