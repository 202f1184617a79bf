"""Footprints as RFC 7946 draws them: cut at the antimeridian, reaching a pole they hold, and found by search.

A cube in UTM zone 60 that crosses 180°, a polar stereographic cube round
the North Pole, and a geographic cube past 180° each get an item whose
geometry holds every pixel centre of the cube and nothing on the other side
of the Earth; search finds them by boxes on either side of the antimeridian,
by a box across it, and near the pole, through the index and by walking the
catalogue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
import shapely
from pyproj import Transformer

import rumi_core
from catalog.collections import build_catalog
from catalog.errors import ItemError
from catalog.grid import Grid
from catalog.index import INDEX_NAME
from catalog.items import create_item
from catalog.search import search
from catalog.validation import validate_stac

if TYPE_CHECKING:
    from pathlib import Path

    import pystac

# name: (crs, transform, height, width)
GRIDS: dict[str, tuple[str, tuple[float, float, float, float, float, float], int, int]] = {
    "dateline": ("EPSG:32660", (1000.0, 0.0, 600000.0, 0.0, -1000.0, 5830000.0), 240, 300),
    "pole": ("EPSG:3413", (10000.0, 0.0, -500000.0, 0.0, -10000.0, 500000.0), 100, 100),
    "past180": ("EPSG:4326", (0.01, 0.0, 179.5, 0.0, -0.01, -16.0), 50, 100),
    "plain": ("EPSG:32633", (1000.0, 0.0, 300000.0, 0.0, -1000.0, 5800000.0), 100, 100),
}


def _item(directory: Path, name: str) -> pystac.Item:
    crs, transform, height, width = GRIDS[name]
    data = rumi_core.testing.synthetic_cube(1, 1, height, width, seed=1)
    path = directory / f"{name}.rumi"
    blob = rumi_core.write(path, data, bands=["B1"], times=["2024-01-01"], crs=crs, transform=transform, tile_size=64)
    (directory / f"{name}.rumih").write_bytes(blob)
    return create_item(path, directory / f"{name}.rumih", extra={"dataset": name})


def _centres(name: str) -> list[tuple[float, float]]:
    """Every 7th pixel centre of a grid, and its corners' pixels, in longitude/latitude wrapped to -180..180."""
    crs, transform, height, width = GRIDS[name]
    rows, cols = np.meshgrid([*range(0, height, 7), height - 1], [*range(0, width, 7), width - 1], indexing="ij")
    a, b, c, d, e, f = transform
    xs = c + a * (cols + 0.5) + b * (rows + 0.5)
    ys = f + d * (cols + 0.5) + e * (rows + 0.5)
    lons, lats = Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(xs.ravel(), ys.ravel())
    return [((lon + 180.0) % 360.0 - 180.0, lat) for lon, lat in zip(lons, lats, strict=True)]


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pystac.Item]:
    directory = tmp_path_factory.mktemp("footprints")
    return {name: _item(directory, name) for name in GRIDS}


@pytest.mark.parametrize("name", list(GRIDS))
def test_the_geometry_holds_every_pixel_and_is_valid_stac(items: dict[str, pystac.Item], name: str) -> None:
    item = items[name]
    shape = shapely.geometry.shape(item.geometry)
    assert shape.is_valid
    outside = [p for p in _centres(name) if not shape.covers(shapely.Point(p))]
    assert outside == []
    validate_stac(item)
    minx, miny, maxx, maxy = item.bbox
    assert all(-180.0 <= v <= 180.0 for v in (minx, maxx)) and all(-90.0 <= v <= 90.0 for v in (miny, maxy))


def test_a_footprint_across_the_antimeridian_is_cut_there_and_its_bbox_crosses(items: dict[str, pystac.Item]) -> None:
    for name in ("dateline", "past180"):
        item = items[name]
        assert item.geometry["type"] == "MultiPolygon", name
        minx, _, maxx, _ = item.bbox
        assert 170.0 < minx <= 180.0 and -180.0 <= maxx < -170.0, (name, item.bbox)  # RFC 7946 §5.2: minx > maxx
        assert not shapely.geometry.shape(item.geometry).intersects(shapely.box(-170.0, -89.0, 170.0, 89.0)), name


def test_a_footprint_round_a_pole_reaches_it_over_every_longitude(items: dict[str, pystac.Item]) -> None:
    item = items["pole"]
    minx, miny, maxx, maxy = item.bbox
    assert (minx, maxx, maxy) == (-180.0, 180.0, 90.0) and 83.0 < miny < 85.0
    shape = shapely.geometry.shape(item.geometry)
    assert all(shape.covers(shapely.Point(lon, 89.9)) for lon in range(-180, 181, 15))
    assert not shape.covers(shapely.Point(0.0, 80.0))


def test_a_grid_whose_corners_lie_past_its_crss_domain_has_the_footprint_of_the_rest() -> None:
    """EASE-Grid 1.0 North (EPSG:3408, NSIDC's 25 km grid) reaches just past its sphere's Lambert azimuthal domain at its
    four corners: its outline runs through the other points, round the pole, where a scene of it was refused as placed
    nowhere on the Earth. A grid with no point inside its CRS's domain has no footprint."""
    grid = Grid("EPSG:3408", (25067.525, 0.0, -9036842.762, 0.0, -25067.525, 9036842.762), 721, 721)
    footprint = grid.footprint()
    assert footprint.is_valid and footprint.covers(shapely.Point(0.0, 89.9)) and footprint.covers(shapely.Point(100.0, 0.0))
    with pytest.raises(ItemError, match="the grid's outline has no longitude and latitude: it lies outside EPSG:32632's domain"):
        Grid("EPSG:32632", (10.0, 0.0, 1e12, 0.0, -10.0, 5e6), 40, 50).footprint()


@pytest.fixture(scope="module")
def catalogue(items: dict[str, pystac.Item], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalogue") / "stac"
    build_catalog([item.clone() for item in items.values()], root, catalog_id="footprints")
    return root


@pytest.mark.parametrize("indexed", [True, False], ids=["index", "walk"])
@pytest.mark.parametrize(
    ("bbox", "found"),
    [
        ((178.5, 50.5, 179.5, 51.5), {"dateline"}),  # west of 180°, inside the UTM cube
        ((-179.0, 50.5, -178.5, 51.5), {"dateline"}),  # east of it
        ((179.5, 50.5, -179.5, 51.5), {"dateline"}),  # across it
        ((179.9, -16.4, -179.9, -16.1), {"past180"}),
        ((-179.9, -16.4, -179.8, -16.1), {"past180"}),
        ((0.0, 50.5, 1.0, 51.5), set()),  # the other side of the Earth, which a footprint round it would hold
        ((-10.0, 89.0, 10.0, 90.0), {"pole"}),
        ((-100.0, 86.0, -80.0, 87.0), {"pole"}),
        ((12.0, 52.0, 13.0, 52.5), {"plain"}),
    ],
)
def test_search_finds_a_cube_on_either_side_of_the_antimeridian_and_at_the_pole(
    catalogue: Path, tmp_path: Path, bbox: tuple[float, ...], found: set[str], indexed: bool
) -> None:
    import shutil

    where = catalogue
    if not indexed:
        where = tmp_path / "stac"
        shutil.copytree(catalogue, where)
        (where / INDEX_NAME).unlink()
    hits = search(where, bbox=bbox)
    assert {hit.collection.split("-")[0] for hit in hits if hit.collection} == found


def test_a_collection_across_the_antimeridian_has_an_extent_across_it(catalogue: Path) -> None:
    import json

    (path,) = catalogue.glob("dateline-*/collection.json")
    ((minx, _, maxx, _),) = json.loads(path.read_text())["extent"]["spatial"]["bbox"]
    assert minx > 170.0 and maxx < -170.0


def test_a_window_on_a_geographic_grid_past_180_is_found_from_either_side() -> None:
    crs, transform, height, width = GRIDS["past180"]
    grid = Grid(crs, transform, height, width)
    assert grid.window_for_bbox((-179.9, -16.4, -179.8, -16.1)) == ((10, 40), (60, 70))
    assert grid.window_for_bbox((179.6, -16.4, 179.7, -16.1)) == ((10, 40), (10, 20))


@pytest.mark.parametrize("west", [0.0, -181.0, -180.0])
def test_a_geographic_grid_round_the_whole_earth_covers_every_longitude(west: float) -> None:
    """0..360 or -181..179: wrapped and cut, its outline was two halves sharing a whole meridian (invalid) and its bbox had no
    width, [0, -90, 0, 90], so that search found it from nowhere but that meridian."""
    import antimeridian

    footprint = Grid("EPSG:4326", (2.0, 0.0, west, 0.0, -2.0, 80.0), 80, 180).footprint()
    assert footprint.is_valid and footprint.geom_type == "Polygon"
    assert [float(v) for v in antimeridian.bbox(footprint)] == [-180.0, -80.0, 180.0, 80.0]


def test_a_geographic_footprint_cut_at_180_keeps_its_parallels_and_stops_at_the_poles() -> None:
    """A grid's edges are parallels: cut along great circles, 170..200 E between -15 and 10 reached 10.0047 and -15.0068 at
    ±180. A grid whose edge lies past a pole (rasterio reports 91) drew latitude 91, which RFC 7946 §4 has not."""
    import antimeridian

    cut = Grid("EPSG:4326", (1.0, 0.0, 170.0, 0.0, -1.0, 10.0), 25, 30).footprint()
    assert cut.geom_type == "MultiPolygon" and (cut.bounds[1], cut.bounds[3]) == (-15.0, 10.0)
    assert [float(v) for v in antimeridian.bbox(cut)] == [170.0, -15.0, -160.0, 10.0]
    past = Grid("EPSG:4326", (1.0, 0.0, 0.0, 0.0, -1.0, 91.0), 20, 40).footprint()
    assert past.is_valid and past.bounds == (0.0, 71.0, 40.0, 90.0)


def test_a_box_over_both_ends_of_a_grid_round_the_earth_is_two_windows_refused() -> None:
    """A window holds one side of the meridian where such a grid's ends meet: 179..-179 on a -180..180 grid read 1 column of 2."""
    from catalog.errors import SelectorError

    whole = Grid("EPSG:4326", (2.0, 0.0, -180.0, 0.0, -2.0, 80.0), 80, 180)
    with pytest.raises(SelectorError, match=r"holds both ends of the raster, .* two windows, columns 0\.\.1 and 179\.\.180; read each"):
        whole.window_for_bbox((179.0, -10.0, -179.0, 10.0))
    shifted = Grid("EPSG:4326", (2.0, 0.0, 0.0, 0.0, -2.0, 80.0), 80, 180)  # 0..360
    with pytest.raises(SelectorError, match=r"two windows, columns 0\.\.5 and 175\.\.180"):
        shifted.window_for_bbox((-10.0, -10.0, 10.0, 10.0))
    assert shifted.window_for_bbox((179.0, -10.0, -179.0, 10.0)) == ((35, 45), (89, 91))
    assert whole.window_for_bbox((170.0, -10.0, 180.0, 10.0)) == ((35, 45), (175, 180))  # up to the meridian, not past it


def test_a_projected_footprint_cut_at_180_lies_on_the_grids_own_edge() -> None:
    """A UTM grid's top edge is straight in metres, nearly a great circle: cut along one, at 180° it lies on the edge to
    1e-5°, where a straight line in longitude and latitude between two outline points missed it by 2e-4° (22 m)."""
    crs, (a, _, c, _, _, f), _, width = GRIDS["dateline"]
    to_lonlat = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    west, east = c, c + a * width
    for _ in range(60):  # the point of the top edge at 180°
        middle = (west + east) / 2
        lon = to_lonlat.transform(middle, f)[0] % 360.0
        west, east = (middle, east) if lon < 180.0 else (west, middle)
    exact = to_lonlat.transform(west, f)[1]
    footprint = Grid(*GRIDS["dateline"]).footprint(densify=8)
    at_180 = [lat for part in footprint.geoms for lon, lat in part.exterior.coords if abs(abs(lon) - 180.0) < 1e-12]
    assert abs(max(at_180) - exact) < 1e-5
