"""Sentinel-2 L2A from STAC: recognition, band table, radiometry, resolution groups, SCL, incremental runs.

Everything runs offline: the items (Earth Search v1 and Planetary Computer shapes) are served by a
static STAC API on 127.0.0.1 and their COG assets by a range-request server; see :mod:`pipelines.sentinel2.testing`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pystac
import pytest
from click.testing import CliRunner

import rumi_core
from catalog import Cube
from catalog.errors import ChangedFileError
from catalog.testing import RangeRequestServer, StaticStacApi
from pipelines.sentinel2.bands import BANDS, band_for_asset, band_text, select_bands
from pipelines.sentinel2.items import is_s2_l2a, keep_newest, parse_item, radiometry
from pipelines.sentinel2.safe import NODATA, file_band_texts, file_nodata, file_radiometry, product_nodata, product_radiometry
from pipelines.sentinel2.search import search_items, select_items
from pipelines.sentinel2.testing import ACQUISITIONS, source_pixels, write_archive
from pipelines.sidecars import MetadataError
from pipelines.transforms.dead_letters import DeadLetter
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from collections.abc import Iterator

    from catalog.testing import GCSEmulator

BBOX = "14.9,52.2,15.1,52.4"
SHARED_DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """The assets on a range server, and their items (real 20 m pixels where ../shared/data exists)."""
    root = tmp_path_factory.mktemp("s2")
    shared = SHARED_DATA if (SHARED_DATA / "MANIFEST.md").is_file() else None
    with RangeRequestServer(root) as files:
        yield root, write_archive(root, files.base_url, shared)


@pytest.fixture
def api(archive: tuple[Path, list[dict[str, Any]]]) -> Iterator[StaticStacApi]:
    """The items as a STAC API, two per page."""
    with StaticStacApi(archive[1], page_size=2) as server:
        yield server


def _item(out: Path, cube_id: str) -> dict[str, Any]:
    found = list(out.glob(f"stac/*/{cube_id}/{cube_id}.json"))
    assert len(found) == 1, f"{cube_id}: {found}"
    return dict(json.loads(found[0].read_text()))


def _convert(*args: str) -> str:
    result = CliRunner().invoke(cli, ["convert", *args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def _snapshot(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(out.rglob("*"))}


# -- the band table and the items, without a pipeline ---------------------------------------


def test_band_table_maps_both_catalogues_naming_to_one_band_id() -> None:
    assert [b.id for b in BANDS.values() if b.group == "10m"] == ["B02", "B03", "B04", "B08"]
    assert [b.id for b in BANDS.values() if b.group == "20m"] == ["B05", "B06", "B07", "B8A", "B11", "B12"]
    assert [b.id for b in BANDS.values() if b.group == "60m"] == ["B01", "B09"]
    earth_search = [
        "blue",
        "green",
        "red",
        "nir",
        "rededge1",
        "rededge2",
        "rededge3",
        "nir08",
        "swir16",
        "swir22",
        "coastal",
        "nir09",
        "scl",
    ]
    planetary = ["B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12", "B01", "B09", "SCL"]
    assert [band_for_asset(k).id for k in earth_search] == planetary  # type: ignore[union-attr]
    assert band_for_asset("red-jp2") is None and band_for_asset("visual") is None
    assert band_text(BANDS["B04"]) == "B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C)"
    assert band_text(BANDS["SCL"]) == "SCL, scene classification"
    assert [b.id for b in select_bands("nir,red,scl")] == ["B04", "B08", "SCL"]
    with pytest.raises(ValueError, match="no Sentinel-2 L2A band"):
        select_bands("red,thermal")


def test_items_are_recognised_by_their_properties_never_their_names(archive: tuple[Path, list[dict[str, Any]]]) -> None:
    items = archive[1]
    assert all(is_s2_l2a(i) for i in items)  # Earth Search and Planetary Computer shapes
    l1c = {**items[0], "properties": {**items[0]["properties"], "s2:product_type": "S2MSI1C"}}
    landsat = {**items[0], "properties": {"datetime": "2023-06-05T10:00:00Z", "platform": "landsat-8"}}
    named_only = {**items[0], "properties": {"datetime": "2023-06-05T10:00:00Z"}}  # an S2 id and S2 file names, nothing else
    assert not any(is_s2_l2a(i) for i in (l1c, landsat, named_only))
    parsed = [parse_item(i) for i in items]
    assert {p.tile for p in parsed} == {"33UUU", "33UVU"}
    assert {p.platform for p in parsed} == {"sentinel-2a", "sentinel-2b"}
    kept, dropped = keep_newest(parsed)
    assert [d.baseline for d in dropped] == ["05.00"]  # the older processing of the 2023-06-08 datatake
    assert len(kept) == len(ACQUISITIONS) - 1
    # One datatake, its time written to the microsecond by one catalogue and to the second by another.
    (newer,) = [p for p in kept if p.datetime.startswith("2023-06-08")]
    finer = replace(newer, id="finer", datetime=newer.datetime.replace("Z", ".024000Z"), baseline="05.00")
    assert {d.id for d in keep_newest([*parsed, finer])[1]} == {"finer", dropped[0].id}
    # ESA's two parts of one datatake's tile (one baseline, two generation times), as Planetary Computer's hrefs name
    # them: both kept, for planning to mosaic; the same two named by no product: the later generation alone.
    safe = "https://host/S2B_MSIL2A_20230608T101559_N0509_R065_T33UUU_{}.SAFE/GRANULE/g/IMG_DATA/R10m/T33UUU_B04_10m.tif"
    halves = [
        replace(newer, id=f"part{n}", processed=when, assets=(("B04", safe.format(when)),))
        for n, when in enumerate(("20240301T120000", "20240301T160000"))
    ]
    others = [p for p in parsed if p.second != newer.second]
    assert [i.id for i in keep_newest([*others, *halves])[0] if i.second == newer.second] == ["part0", "part1"]
    unnamed = [replace(half, assets=(("B04", f"https://host/{half.id}/B04.tif"),)) for half in halves]
    assert [i.id for i in keep_newest([*others, *unnamed])[0] if i.second == newer.second] == ["part1"]
    assert keep_newest([*halves, halves[0]])[0] == halves  # one item listed twice is kept once
    # One pass stated by two catalogues minutes apart (Earth Search: the tile's sensing time; the Planetary Computer: its
    # datatake's start) was two time steps of the same pixels; another pass over the tile is 100 minutes on at least.
    datatake_start = replace(newer, id="pc", datetime="2023-06-08T10:09:59Z", processed="20240301T170000")
    kept_now, dropped_now = keep_newest([newer, datatake_start])
    assert [i.id for i in kept_now] == ["pc"] and [i.id for i in dropped_now] == [newer.id]
    next_pass = replace(newer, id="next", datetime="2023-06-08T11:56:35Z")
    assert {i.id for i in keep_newest([newer, next_pass])[0]} == {newer.id, "next"}


def test_cdse_items_are_recognised_and_read_at_each_bands_own_resolution(archive: tuple[Path, list[dict[str, Any]]]) -> None:
    """CDSE's shape: grid, processing and product extensions instead of ``s2:*``, and ``B01_20m`` beside ``B01_60m``."""
    pc = next(i for i in archive[1] if "s2:product_type" in i["properties"])
    props = pc["properties"]
    cdse_props = {
        "datetime": props["datetime"], "platform": "sentinel-2b", "constellation": "sentinel-2", "eo:cloud_cover": 3.0,
        "grid:code": f"MGRS-{props['s2:mgrs_tile']}", "processing:version": props["s2:processing_baseline"], "product:type": "S2MSI2A",
    }  # fmt: skip
    assets: dict[str, Any] = {}
    for key, asset in pc["assets"].items():
        band = BANDS.get(key)
        if band is None:
            continue
        assets[f"{key}_{band.resolution}m"] = asset
        for coarser in (r for r in (20, 60) if r > band.resolution):  # CDSE's resampled copies: never read
            assets[f"{key}_{coarser}m"] = {**asset, "href": f"decoy_{coarser}.tif"}
    cdse = {**pc, "properties": cdse_props, "assets": assets}
    assert is_s2_l2a(cdse)
    parsed, original = parse_item(cdse), parse_item(pc)
    assert (parsed.tile, parsed.baseline, parsed.assets) == (original.tile, original.baseline, original.assets)
    assert not is_s2_l2a({**cdse, "properties": {**cdse_props, "product:type": "S2MSI1C"}})


def test_offsets_follow_the_processing_baseline_and_are_never_applied_twice() -> None:
    red = BANDS["B04"]
    assert radiometry(red, "03.01", boa_offset_applied=False) == (0.0001, 0.0)
    assert radiometry(red, "04.00", boa_offset_applied=False) == (0.0001, -0.1)
    assert radiometry(red, "05.09", boa_offset_applied=False) == (0.0001, -0.1)
    assert radiometry(red, "05.09", boa_offset_applied=True) == (0.0001, 0.0)
    assert radiometry(BANDS["SCL"], "05.09", boa_offset_applied=False) == (1.0, 0.0)


def test_the_stac_api_answers_pystac_client_with_bbox_datetime_cloud_filter_and_pages(api: StaticStacApi) -> None:
    every = search_items(api.url, collection="sentinel-2-l2a", bbox=None, datetime=None, max_cloud=None)
    assert len(every) == len(ACQUISITIONS)
    assert api.searches == 4  # seven items, two per page
    june_uuu = search_items(
        api.url, collection="sentinel-2-l2a", bbox=(14.9, 52.2, 15.1, 52.4), datetime="2023-06-01/2023-06-10", max_cloud=None
    )
    assert sorted(i["id"] for i in june_uuu) == sorted(a.id for a in ACQUISITIONS if a.tile == "33UUU" and a.datetime < "2023-06-10")
    clear = search_items(api.url, collection="sentinel-2-l2a", bbox=None, datetime=None, max_cloud=30)
    assert all(i["properties"]["eo:cloud_cover"] <= 30 for i in clear) and len(clear) == len(ACQUISITIONS) - 1
    assert search_items(api.url, collection="landsat-c2-l2", bbox=None, datetime=None, max_cloud=None) == []
    with StaticStacApi(every, cql2=False) as query_only:  # an API without CQL2 gets the query extension instead
        assert search_items(query_only.url, collection="sentinel-2-l2a", bbox=None, datetime=None, max_cloud=30) == clear
    selection = select_items(((i, None) for i in every), tiles=("33UUU",), max_cloud=30)
    assert [i.datetime[:10] for i in selection.items] == ["2023-06-05", "2023-06-08", "2023-06-18", "2023-07-05"]
    undated = {**every[0], "id": "undated", "properties": {k: v for k, v in every[0]["properties"].items() if k != "datetime"}}
    junk = [[1], {**every[0], "id": "odd", "properties": [1]}, {**every[0], "id": "text-asset", "assets": {"red": "r.tif"}}, undated]
    with_junk = select_items(((i, None) for i in [*junk, *every]), tiles=("33UUU",), max_cloud=30)  # a broken API answer
    # Items of the wrong shape could not be judged: unreadable, not other items.
    assert with_junk.items == selection.items and with_junk.other == selection.other
    assert with_junk.unreadable == [
        "STAC item 'odd': properties is a list, not an object",
        "STAC item 'text-asset': assets.red is a text, not an object",
        "STAC item 'undated' has no datetime",
        "STAC item ?: is a list, not an object",
    ]


def test_an_unreadable_sentinel_2_item_is_a_dead_letter_and_the_others_are_found(
    archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    from pipelines.sentinel2.search import S2Request
    from pipelines.transforms.discover import discover

    items = archive[1]
    undated = {**items[0], "id": "undated", "properties": {k: v for k, v in items[0]["properties"].items() if k != "datetime"}}
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [undated, *items]}))
    found = discover(str(path), S2Request(bands="red"))
    letters = [f for f in found if isinstance(f, DeadLetter)]
    assert [(d.href, d.reason, d.message) for d in letters] == [(str(path), "bad-stac", "STAC item 'undated' has no datetime")]
    (tmp_path / "good.json").write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    assert [f for f in found if not isinstance(f, DeadLetter)] == discover(str(tmp_path / "good.json"), S2Request(bands="red"))


@pytest.mark.parametrize("baseline", ["N/A", "5", "04-00", ""])
def test_an_item_of_a_malformed_baseline_is_a_dead_letter_and_the_others_are_found(
    archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path, api: StaticStacApi, baseline: str
) -> None:
    """One item of ``s2:processing_baseline: "N/A"`` lost every item of its ItemCollection (``invalid literal for int()``),
    and ended a whole ``--stac-api`` run; "5" was read as 05.00 and given that baseline's offset without a word."""
    from pipelines.sentinel2.search import S2Request
    from pipelines.transforms.discover import discover

    items = archive[1]
    odd = {**items[0], "id": "odd", "properties": {**items[0]["properties"], "s2:processing_baseline": baseline}}
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [odd, *items]}))
    found = discover(str(path), S2Request(bands="red"))
    letters = [(d.href, d.reason, d.message) for d in found if isinstance(d, DeadLetter)]
    if baseline:
        assert letters == [
            (
                str(path),
                "bad-stac",
                f"STAC item 'odd': its processing baseline {baseline!r} (s2:processing_baseline, processing:version) "
                "is no NN.NN number such as 05.10",
            )
        ]
    (tmp_path / "good.json").write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    assert [f for f in found if not isinstance(f, DeadLetter)] == discover(str(tmp_path / "good.json"), S2Request(bands="red"))
    selection = select_items([(odd, None), *((i, None) for i in items)])
    assert {i.id for i in selection.items} | {i.id for i in selection.reprocessed} == {i["id"] for i in items}


def test_a_static_catalogue_is_discovered_like_an_item_collection(archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    from pipelines.sentinel2.search import S2Request
    from pipelines.transforms.discover import discover

    catalogue = pystac.Catalog(id="s2", description="Sentinel-2 L2A items")
    for item in archive[1]:
        catalogue.add_item(pystac.Item.from_dict(item))
    catalogue.normalize_and_save(str(tmp_path / "static"), catalog_type=pystac.CatalogType.SELF_CONTAINED)
    refs = discover(str(tmp_path / "static" / "catalog.json"), S2Request(bands="red,scl", tiles=("33UUU",)))
    kept = [a for a in ACQUISITIONS if a.tile == "33UUU" and a.baseline != "05.00"]  # the 05.00 processing is superseded
    assert len(refs) == 2 * len(kept)
    assert {r.product.name for r in refs if not isinstance(r, DeadLetter) and r.product} == {
        band_text(BANDS["B04"]),
        band_text(BANDS["SCL"]),
    }


# -- end to end ------------------------------------------------------------------------------


def test_an_item_collection_becomes_one_cube_per_tile_group_period_and_offset(
    archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    root, items = archive
    collection = tmp_path / "items.json"
    june = [i for i in items if i["properties"]["datetime"] < "2023-07"]
    collection.write_text(json.dumps({"type": "FeatureCollection", "features": june}))
    out = tmp_path / "out"
    output = _convert(str(collection), "--mgrs", "33UUU", "--max-cloud", "30", "--cube-period", "P1M", "--out", str(out))
    entries = {e["cube_id"]: e for e in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    # The older processing of 2023-06-08 is left out, and said so, as a folder of its files would be.
    older = "S2B_MSIL2A_20230608T101559_R065_T33UUU_20230608T150000"
    assert [h.rsplit("/", 2)[1] for h in entries["S2L2A_T33UUU_20m_o1000_2023-06"]["dropped"]] == [older] * 6
    assert "dropped: 13 input files" in output
    # 03.01 (offset 0) and 05.09 (offset -0.1) in one month: split, so each cube has one offset; SCL has none to split.
    assert sorted(entries) == sorted(
        [f"S2L2A_T33UUU_{g}_2023-06" for g in ("10m", "20m", "60m", "scl")]
        + [f"S2L2A_T33UUU_{g}_o1000_2023-06" for g in ("10m", "20m", "60m")]
    )
    shapes = {cid: tuple(e["shape"]) for cid, e in entries.items()}
    assert shapes["S2L2A_T33UUU_10m_2023-06"] == (1, 4, 96, 96)
    assert shapes["S2L2A_T33UUU_20m_o1000_2023-06"] == (2, 6, 48, 48)  # relative orbits 65 and 22, merged by datetime
    assert shapes["S2L2A_T33UUU_60m_o1000_2023-06"] == (2, 2, 16, 16)
    assert shapes["S2L2A_T33UUU_scl_2023-06"] == (3, 1, 48, 48)

    twenty = out / "S2L2A_T33UUU_20m_o1000_2023-06.rumi"
    info = rumi_core.info(twenty, (out / "S2L2A_T33UUU_20m_o1000_2023-06.rumih").read_bytes())
    assert info.band_texts == tuple(band_text(BANDS[b]) for b in ("B05", "B06", "B07", "B8A", "B11", "B12"))
    item = _item(out, "S2L2A_T33UUU_20m_o1000_2023-06")
    bands = item["assets"]["data"]["bands"]
    assert [b["eo:common_name"] for b in bands] == ["rededge071", "rededge075", "rededge078", "nir08", "swir16", "swir22"]
    assert bands[3]["eo:center_wavelength"] == pytest.approx(0.8647)
    assert {(b["scale"], b["offset"], b["nodata"]) for b in bands} == {(0.0001, -0.1, 0)}
    assert item["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-08T10:15:59Z", "2023-06-18T10:00:21Z"]
    assert item["properties"]["s2:processing_baselines"] == ["05.09"]  # the reprocessing, not 05.00
    assert item["properties"]["s2:offset_split_at_baseline"] == "04.00"
    old = _item(out, "S2L2A_T33UUU_20m_2023-06")["assets"]["data"]["bands"]
    assert {(b["scale"], b["offset"]) for b in old} == {(0.0001, 0.0)}

    # DNs unchanged, nodata 0 exact, and the kept processing's pixels (05.09, not 05.00).
    blob = (out / "S2L2A_T33UUU_20m_o1000_2023-06.rumih").read_bytes()
    cube = rumi_core.read(twenty, blob)
    newest = "S2B_MSIL2A_20230608T101559_R065_T33UUU_20240301T120000"
    np.testing.assert_array_equal(cube[0, 3], source_pixels(root, newest, "B8A"))
    np.testing.assert_array_equal(cube[1, 4], source_pixels(root, "S2B_33UUU_20230618_0_L2A", "B11"))
    assert (cube[:, :, :6] == 0).all()

    scl_path = out / "S2L2A_T33UUU_scl_2023-06.rumi"
    scl = _item(out, "S2L2A_T33UUU_scl_2023-06")["assets"]["data"]["bands"]
    assert scl == [
        {"name": "SCL, scene classification", "data_type": "uint8", "nodata": 0, "scale": 1.0, "offset": 0.0, "rumi:categorical": True}
    ]  # classes: catalog.load never blends them
    scl_data = rumi_core.read(scl_path, (out / "S2L2A_T33UUU_scl_2023-06.rumih").read_bytes())
    assert scl_data.dtype == np.uint8 and (scl_data[:, :, :6] == 0).all()


def test_a_later_item_collection_never_replaces_a_cube_by_one_of_fewer_times(
    archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """A product's cube is named by tile, group and period, not by its times or inputs.

    A run given only later items rewrote it without the earlier ones; one given the same acquisitions again with a
    restated time, or a datatake's part that arrived later, must still rewrite it, and not skip it.
    """
    by_id = {i["id"]: i for i in archive[1]}
    june, july = "S2B_33UUU_20230618_0_L2A", "S2A_33UUU_20230705_0_L2A"
    restated = {**by_id[june], "properties": {**by_id[june]["properties"], "datetime": "2023-06-18T10:00:22Z"}}
    files = {"early": [by_id[june]], "late": [by_id[july]], "both": [by_id[june], by_id[july]], "restated": [restated, by_id[july]]}
    for name, features in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    out = tmp_path / "out"
    common = ["--bands", "red", "--mgrs", "33UUU", "--out", str(out), "--no-progress"]

    def run(name: str, *more: str) -> Any:
        return CliRunner().invoke(cli, ["convert", str(tmp_path / f"{name}.json"), *common, *more])

    assert run("early").exit_code == 0
    cube = out / "S2L2A_T33UUU_10m_o1000.rumi"
    held, listed = cube.read_bytes(), (out / "manifest.jsonl").read_text()
    for more in ((), ("--overwrite",), ("--strict",)):
        result = run("late", *more)
        assert result.exit_code == (1 if more == ("--strict",) else 0), result.output  # dead letters fail a --strict run
        assert "held-times: 1" in result.output and " skipped " in result.output, result.output
        assert cube.read_bytes() == held and (out / "manifest.jsonl").read_text() == listed  # kept, and still listed
    (letter,) = map(json.loads, (out / "dead-letter.jsonl").read_text().splitlines())
    assert letter["reason"] == "held-times" and "S2L2A_T33UUU_10m_o1000 already holds 1 acquisition" in letter["message"]
    assert "2023-06-18T10:00:21Z" in letter["message"] and letter["href"].endswith(".tif")
    # Both sets in one run: the cube gains the later time, as a --stac-api run's open period does.
    assert run("both").exit_code == 0
    (entry,) = map(json.loads, (out / "manifest.jsonl").read_text().splitlines())
    assert entry["times"] == ["2023-06-18T10:00:21Z", "2023-07-05T10:00:21Z"]
    # The same acquisitions, June's time restated a second later: one acquisition, so the cube is rewritten.
    assert run("restated").exit_code == 0
    (entry,) = map(json.loads, (out / "manifest.jsonl").read_text().splitlines())
    assert entry["times"] == ["2023-06-18T10:00:22Z", "2023-07-05T10:00:21Z"]


def test_a_products_cube_of_other_inputs_is_converted_again_not_skipped(archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    """Earth Search's ``_1_`` of a datatake arriving after ``_0_`` was converted: same name, times and shape.

    The file validated against the new plan and was skipped: the manifest listed ``_0_`` as dropped while the cube
    held ``_0_``'s pixels. A product's cube is only skipped when the run before recorded the same inputs.
    """
    import copy

    import rasterio

    root, items = archive
    first = next(i for i in items if i["id"] == "S2B_33UUU_20230618_0_L2A")
    later = copy.deepcopy(first)
    later["id"] = "S2B_33UUU_20230618_1_L2A"
    for asset in later["assets"].values():
        asset["href"] = asset["href"].replace(first["id"], later["id"])
    shutil.copytree(root / first["id"], root / later["id"], dirs_exist_ok=True)
    with rasterio.open(root / later["id"] / "B04.tif", "r+", IGNORE_COG_LAYOUT_BREAK="YES") as ds:
        ds.write(ds.read() // 2 + 1)
    out = tmp_path / "out"
    for name, features in (("first", [first]), ("both", [first, later])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"type": "FeatureCollection", "features": features}))
        _convert(str(tmp_path / f"{name}.json"), "--bands", "red", "--mgrs", "33UUU", "--out", str(out))
    (entry,) = map(json.loads, (out / "manifest.jsonl").read_text().splitlines())
    assert [h.rsplit("/", 2)[1] for h in entry["dropped"]] == [first["id"]]
    np.testing.assert_array_equal(rumi_core.read(out / entry["file"]).reshape(-1, 96, 96)[0], source_pixels(root, later["id"], "B04"))


def test_stac_api_runs_are_incremental_and_bands_are_selected_by_common_name(
    archive: tuple[Path, list[dict[str, Any]]], api: StaticStacApi, tmp_path: Path
) -> None:
    root, _ = archive
    out = tmp_path / "out"
    common = ["--stac-api", api.url, "--bbox", BBOX, "--max-cloud", "30", "--bands", "red,nir,scl", "--out", str(out)]
    # Before any run, a search that finds nothing: nothing to convert, no "last run" to speak of.
    empty = _convert(*common, "--datetime", "2020-01-01/2020-01-31")
    assert "nothing to convert: the search found no Sentinel-2 L2A acquisition to keep" in empty and "last run" not in empty
    first = _convert(*common, "--datetime", "2023-06-01/2023-06-10")
    assert "2 new" in first
    # A window that starts after held acquisitions of the month it would rewrite: refused, nothing written.
    before_refusal = _snapshot(out)
    refused = CliRunner().invoke(cli, ["convert", *common, "--datetime", "2023-06-15/2023-06-30", "--no-progress"])
    assert refused.exit_code == 1 and "misses 2 acquisitions" in refused.output and "2023-06" in refused.output, refused.output
    assert _snapshot(out) == before_refusal
    open_id = "S2L2A_T33UUU_10m_o1000_2023-06"
    before = _item(out, open_id)
    assert before["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-08T10:15:59Z"]
    assert [b["eo:common_name"] for b in before["assets"]["data"]["bands"]] == ["red", "nir"]
    closed = out / "S2L2A_T33UUU_10m_2023-06.rumi"
    closed_stat = closed.stat().st_mtime_ns
    served = RangeRequestServer(out).start()
    # A remote reader holding the old item and its inline blob.
    old_cube = Cube.open(served.url("stac/" + "/".join(_item_path(out, open_id))))

    # The next night: one more acquisition (2023-06-18) in the open month.
    second = _convert(*common, "--datetime", "2023-06-01/2023-06-30")
    assert "1 new" in second
    after = _item(out, open_id)
    assert after["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-08T10:15:59Z", "2023-06-18T10:00:21Z"]
    ids = [i.id for i in pystac.Catalog.from_file(str(out / "stac" / "catalog.json")).get_items(recursive=True)]
    assert sorted(ids) == sorted(set(ids)) and open_id in ids  # replaced in place: one item per cube
    assert closed.stat().st_mtime_ns == closed_stat  # the cube that gained nothing was not rewritten
    data = rumi_core.read(out / f"{open_id}.rumi", (out / f"{open_id}.rumih").read_bytes())
    np.testing.assert_array_equal(data[1, 0], source_pixels(root, "S2B_33UUU_20230618_0_L2A", "B04"))
    with pytest.raises(ChangedFileError, match="file:size"):
        old_cube.read(bands="red")  # never the wrong pixels
    old_cube.close()
    served.stop()

    # The index knows the new dates; search and read select bands by common name.
    hits = CliRunner().invoke(cli, ["search", str(out / "stac"), "--bands", "red", "--datetime", "2023-06-15/2023-06-30", "--json"])
    assert hits.exit_code == 0, hits.output
    assert [h["id"] for h in json.loads(hits.output)] == [open_id]
    npy = tmp_path / "rn.npy"
    read = CliRunner().invoke(cli, ["read", str(out / "stac" / Path(*_item_path(out, open_id))), "--bands", "red,nir", "-o", str(npy)])
    assert read.exit_code == 0, read.output
    red_nir = np.load(npy)
    assert red_nir.shape == (2, 2, 96, 96)
    np.testing.assert_array_equal(red_nir[1, 1], source_pixels(root, "S2B_33UUU_20230618_0_L2A", "B08"))

    # The same night again: nothing new, nothing written.
    snapshot = _snapshot(out)
    third = _convert(*common, "--datetime", "2023-06-01/2023-06-30")
    assert "nothing new" in third and "nothing was converted or rewritten" in third
    assert _snapshot(out) == snapshot

    # July: a new period. June's cubes are neither planned nor read, their items are carried over.
    june_files = {k: v for k, v in snapshot.items() if k.endswith((".rumi", ".rumih"))}
    july = _convert(*common, "--datetime", "2023-07-01/2023-07-31")
    assert "1 new" in july
    assert "supersede" not in july  # June's cubes are not July's
    # ...and they are listed: their items are carried over (unlisted.jsonl named them every night after June).
    assert "in no manifest or catalogue" not in july and not (out / "unlisted.jsonl").exists(), july
    manifest = [json.loads(line)["cube_id"] for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert manifest == ["S2L2A_T33UUU_10m_o1000_2023-07", "S2L2A_T33UUU_scl_2023-07"]
    assert {k: v for k, v in _snapshot(out).items() if k in june_files} == june_files
    ids = sorted(i.id for i in pystac.Catalog.from_file(str(out / "stac" / "catalog.json")).get_items(recursive=True))
    assert ids == sorted([*manifest, "S2L2A_T33UUU_10m_2023-06", open_id, "S2L2A_T33UUU_scl_2023-06"])
    hits = CliRunner().invoke(cli, ["search", str(out / "stac"), "--bands", "red", "--json"])
    assert sorted(h["id"] for h in json.loads(hits.output)) == sorted(i for i in ids if "_scl_" not in i)
    carried = _item(out, open_id)
    assert carried["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-08T10:15:59Z", "2023-06-18T10:00:21Z"]
    assert (out / "stac" / Path(*_item_path(out, open_id))).parent.joinpath(carried["assets"]["thumbnail"]["href"]).resolve().is_file()


def test_a_late_acquisition_joins_its_period_when_the_search_covers_it(archive: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    """A datatake published after a newer one was converted was never added: each night said "nothing new" (only what
    was newer than the latest held acquisition counted). It now joins its period's cube; where the search window holds
    only part of that period, it waits, and the run says how far back to search."""
    root, items = archive
    late_id = "S2B_MSIL2A_20230608T101559_R065_T33UUU_20240301T120000"
    out = tmp_path / "out"
    common = ["--bbox", BBOX, "--max-cloud", "30", "--bands", "red", "--out", str(out)]
    with StaticStacApi([i for i in items if "20230608" not in i["id"]], page_size=2) as api:
        assert "2 new" in _convert("--stac-api", api.url, *common, "--datetime", "2023-06-01/2023-06-30")
    cube_id = "S2L2A_T33UUU_10m_o1000_2023-06"
    assert _item(out, cube_id)["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-18T10:00:21Z"]
    with StaticStacApi(items, page_size=2) as api:
        waits = _convert("--stac-api", api.url, *common, "--datetime", "2023-06-07/2023-06-30")
        assert "1 late acquisition (older than the latest held, first 2023-06-08T10:15:59Z) not converted" in waits, waits
        assert "start --datetime at or before the start of 2023-06 to add them" in waits and "nothing new" in waits
        joins = _convert("--stac-api", api.url, *common, "--datetime", "2023-06-01/2023-06-30")
    assert "1 new" in joins
    assert _item(out, cube_id)["properties"]["cube:dimensions"]["time"]["values"] == ["2023-06-08T10:15:59Z", "2023-06-18T10:00:21Z"]
    data = rumi_core.read(out / f"{cube_id}.rumi")
    np.testing.assert_array_equal(data[0, 0], source_pixels(root, late_id, "B04"))


def _item_path(out: Path, cube_id: str) -> tuple[str, ...]:
    (found,) = out.glob(f"stac/*/{cube_id}/{cube_id}.json")
    return found.relative_to(out / "stac").parts


def test_resolution_10_puts_every_band_on_the_10m_grid_with_nearest_neighbour(
    archive: tuple[Path, list[dict[str, Any]]], api: StaticStacApi, tmp_path: Path
) -> None:
    root, _ = archive
    out = tmp_path / "out"
    args = ["--stac-api", api.url, "--datetime", "2023-06-18", "--bands", "red,nir08,coastal,scl", "--resolution", "10"]
    _convert(*args, "--out", str(out))
    entries = {e["cube_id"]: e for e in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert sorted(entries) == ["S2L2A_T33UUU_all10m_o1000_2023-06", "S2L2A_T33UUU_scl_2023-06"]
    assert entries["S2L2A_T33UUU_all10m_o1000_2023-06"]["shape"] == [1, 3, 96, 96]
    assert entries["S2L2A_T33UUU_scl_2023-06"]["shape"] == [1, 1, 96, 96]
    # Bands GDAL resamples (vrt://...?outsize=) count the bytes of their files, as the others do: they counted 0.
    acq_dir = root / "S2B_33UUU_20230618_0_L2A"
    assert entries["S2L2A_T33UUU_scl_2023-06"]["input_bytes"] == (acq_dir / "SCL.tif").stat().st_size
    band_files = sum((acq_dir / f"{b}.tif").stat().st_size for b in ("B01", "B04", "B8A"))
    assert entries["S2L2A_T33UUU_all10m_o1000_2023-06"]["input_bytes"] == band_files
    data = rumi_core.read(out / "S2L2A_T33UUU_all10m_o1000_2023-06.rumi", (out / "S2L2A_T33UUU_all10m_o1000_2023-06.rumih").read_bytes())
    acq = "S2B_33UUU_20230618_0_L2A"
    assert data.shape == (3, 96, 96)  # one date: read back as an image, bands in band-table order B01, B04, B8A
    np.testing.assert_array_equal(data[0], np.repeat(np.repeat(source_pixels(root, acq, "B01"), 6, 0), 6, 1))
    np.testing.assert_array_equal(data[1], source_pixels(root, acq, "B04"))
    np.testing.assert_array_equal(data[2], np.repeat(np.repeat(source_pixels(root, acq, "B8A"), 2, 0), 2, 1))
    scl = rumi_core.read(out / "S2L2A_T33UUU_scl_2023-06.rumi", (out / "S2L2A_T33UUU_scl_2023-06.rumih").read_bytes())
    np.testing.assert_array_equal(scl[0], np.repeat(np.repeat(source_pixels(root, acq, "SCL"), 2, 0), 2, 1))
    assert os.path.isfile(out / "stac-search.json")


def test_a_band_resampled_through_vrt_is_read_and_sized_as_the_file_it_wraps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resolution 10 reads a 20 m band as vrt://{GDAL path}?outsize=...: GDAL's settings and the input size are its
    file's (a bucket's object went without the emulator's endpoint, a local file was configured as a URL's)."""
    from pipelines.rasters import file_size, gdal_env
    from pipelines.sentinel2.bands import BANDS
    from pipelines.sentinel2.items import _on_10m

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9023")
    remote = gdal_env(_on_10m("gs://bucket/S2B_33UUU_20230618_0_L2A/SCL.tif", BANDS["SCL"])).options
    assert remote["CPL_GS_ENDPOINT"] == "http://127.0.0.1:9023/" and remote["GDAL_DISABLE_READDIR_ON_OPEN"] == "EMPTY_DIR"
    local = tmp_path / "SCL.tif"
    local.write_bytes(b"0123456789")
    wrapped = _on_10m(str(local), BANDS["SCL"])
    assert wrapped.startswith("vrt://") and gdal_env(wrapped).options["GDAL_DISABLE_READDIR_ON_OPEN"] == "FALSE"
    assert file_size(wrapped) == 10


def test_bad_sentinel2_options_are_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, needle in (
        (["--stac-api", "http://127.0.0.1:1/", "--bands", "red,thermal"], "--bands"),
        (["--stac-api", "http://127.0.0.1:1/", "--mgrs", "33UU"], "--mgrs"),
        (["--stac-api", "http://127.0.0.1:1/", "--max-cloud", "120"], "--max-cloud"),
        (["--stac-api", "http://127.0.0.1:1/", "--bbox", "1,2,3"], "--bbox"),
        # The rule rumi search applies: an inverted box, or one out of degrees, is refused (a point or a line is searched).
        (["--stac-api", "http://127.0.0.1:1/", "--bbox", "13,53,13.5,52"], "--bbox: bbox [13.0, 53.0, 13.5, 52.0] is empty or inverted"),
        (["--stac-api", "http://127.0.0.1:1/", "--bbox", "13,52,193,53"], "is not in degrees"),
        (["--datetime", "2023-06-01/2023-06-30", str(tmp_path)], "--stac-api"),
        # Where no STAC item can come from, the options that select among them would do nothing.
        ([str(tmp_path), "--resolution", "10"], "--resolution selects among Sentinel-2 L2A STAC items"),
        ([str(tmp_path), "--mgrs", "33UUU", "--max-cloud", "30"], "--mgrs, --max-cloud select among Sentinel-2 L2A STAC items"),
        ([str(tmp_path), "--collection", "sentinel-2-l2a"], "--collection names the collection a --stac-api search reads"),
    ):
        result = runner.invoke(cli, ["convert", *args, "--out", str(tmp_path / "out")])
        assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output, result.output
    unreachable = runner.invoke(cli, ["convert", "--stac-api", "http://127.0.0.1:1/", "--out", str(tmp_path / "out")])
    assert unreachable.exit_code == 1 and "Error: --stac-api http://127.0.0.1:1/" in unreachable.output
    assert not (tmp_path / "out").exists()


def test_one_family_and_period_on_two_extents_keeps_one_cube_and_dead_letters_the_other() -> None:
    from catalog.grid import Grid
    from pipelines.options import ConvertOptions
    from pipelines.planning.grouping import plan_cubes
    from pipelines.planning.scene import Scene, SourceBand

    def scene(href: str, x0: float, day: int) -> Scene:
        band = SourceBand(band_text(BANDS["B04"]), None, 0.0001, -0.1, index=1)
        grid = Grid("EPSG:32633", (10.0, 0.0, x0, 0.0, -10.0, 5800020.0), 8, 8)
        return Scene(href, grid, "uint16", 0.0, (band,), 1685577600 + day * 86400, href, family="S2L2A_T33UUU_10m_o1000")

    scenes = [scene("a.tif", 300000.0, 1), scene("b.tif", 300000.0, 2), scene("c.tif", 400000.0, 3)]
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="/tmp/unused", cube_period="P1M", frame_unit=0))
    assert [(p.cube_id, p.inputs) for p in plans] == [("S2L2A_T33UUU_10m_o1000_2023-06", ("a.tif", "b.tif"))]
    assert [(r.href, r.reason) for r in rejects] == [("c.tif", "family-extent")]


L1C_METADATA = """<n1:Level-1C_User_Product xmlns:n1="https://psd-14.sentinel2.eo.esa.int/PSD/User_Product_Level-1C.xsd">
<n1:General_Info><Product_Image_Characteristics><QUANTIFICATION_VALUE unit="none">10000</QUANTIFICATION_VALUE>
<Radiometric_Offset_List><RADIO_ADD_OFFSET band_id="0">-1000</RADIO_ADD_OFFSET><RADIO_ADD_OFFSET band_id="8">-1000</RADIO_ADD_OFFSET>
<RADIO_ADD_OFFSET band_id="12">-2000</RADIO_ADD_OFFSET></Radiometric_Offset_List>
</Product_Image_Characteristics></n1:General_Info></n1:Level-1C_User_Product>"""


class TestSafeMetadata:
    def test_level_1c_offsets_by_band_id(self) -> None:
        found = product_radiometry(L1C_METADATA)
        assert found["B01"] == found["B8A"] == (0.0001, -0.1, None)  # band_id 8 is B8A, not B09
        assert found["B09"] == (0.0001, 0.0, None) and found["B12"] == (0.0001, -0.2, None)
        assert "AOT" not in found

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("<a", "not XML"),
            ("<a><b/></a>", "no BOA_QUANTIFICATION_VALUE or QUANTIFICATION_VALUE"),
            ("<a><QUANTIFICATION_VALUE>ten</QUANTIFICATION_VALUE></a>", "QUANTIFICATION_VALUE is 'ten', not a number"),
            ("<a><QUANTIFICATION_VALUE>0</QUANTIFICATION_VALUE></a>", "not positive"),
            ('<a><QUANTIFICATION_VALUE>1</QUANTIFICATION_VALUE><RADIO_ADD_OFFSET band_id="13">1</RADIO_ADD_OFFSET></a>', "band_id '13'"),
        ],
    )
    def test_metadata_that_does_not_say_what_values_mean_is_refused(self, text: str, message: str) -> None:
        with pytest.raises(MetadataError, match=message):
            product_radiometry(text)

    def test_only_images_of_a_safe_with_metadata_take_it(self, tmp_path: Path) -> None:
        safe = tmp_path / "S2A_MSIL1C_20230612T102031_N0300_R065_T33UUU_20230612T120000.SAFE"
        images = safe / "GRANULE" / "L1C_T33UUU" / "IMG_DATA"
        # No MTD_MSIL1C.xml (yet): the baseline of the name (03.00, before offsets); the file then says otherwise.
        assert file_radiometry(str(images / "T33UUU_20230612T102031_B8A.jp2")) == (0.0001, 0.0, None)
        safe.mkdir()
        (safe / "MTD_MSIL1C.xml").write_text(L1C_METADATA)
        assert file_radiometry(str(images / "T33UUU_20230612T102031_B8A.jp2")) == (0.0001, -0.1, None)  # no stale answer
        other = tmp_path / "other.SAFE"
        other.mkdir()
        (other / "MTD_MSIL1C.xml").write_text(L1C_METADATA)
        assert file_radiometry(str(other / "GRANULE" / "g" / "IMG_DATA" / "T33UUU_20230612T102031_B12.jp2")) == (0.0001, -0.2, None)
        assert file_radiometry(str(other / "GRANULE" / "g" / "IMG_DATA" / "T33UUU_20230612T102031_B02.jp2")) == (0.0001, 0.0, None)
        assert file_radiometry(str(other / "GRANULE" / "g" / "QI_DATA" / "MSK_DETFOO_B02.jp2")) is None
        assert file_radiometry(str(other / "GRANULE" / "g" / "IMG_DATA" / "T33UUU_20230612T102031_TCI.jp2")) is None
        # Images converted to GeoTIFF in place keep their product's metadata: a series across baseline 04.00 stays two cubes.
        assert file_radiometry(str(other / "GRANULE" / "g" / "IMG_DATA" / "T33UUU_20230612T102031_B12.tif")) == (0.0001, -0.2, None)
        assert file_radiometry(str(images / "T33UUU_20230612T102031_B8A.TIFF")) == (0.0001, -0.1, None)
        # A product folder re-zipped without its .SAFE suffix is the same product; any other folder is none.
        bare = tmp_path / "S2B_MSIL1C_20230622T102031_N0509_R065_T33UUU_20230622T123904" / "GRANULE" / "g" / "IMG_DATA"
        assert file_radiometry(str(bare / "T33UUU_20230622T102031_B04.jp2")) == (0.0001, -0.1, None)
        assert file_band_texts(str(bare / "T33UUU_20230622T102031_B04.jp2"), 1) == (
            band_text(BANDS["B04"]) + ", top-of-atmosphere reflectance (L1C)",
        )
        assert file_radiometry(str(tmp_path / "download" / "GRANULE" / "g" / "IMG_DATA" / "T33UUU_20230622T102031_B04.jp2")) is None
        # A Level-2A product's aerosol and water-vapour images without the metadata file: 1/1000, as every baseline's declares.
        l2a = tmp_path / "S2B_MSIL2A_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE" / "GRANULE" / "g" / "IMG_DATA" / "R20m"
        assert file_radiometry(str(l2a / "T33UUU_20230622T102031_AOT_20m.jp2")) == (0.001, 0.0, None)
        assert file_radiometry(str(l2a / "T33UUU_20230622T102031_WVP_20m.jp2")) == (0.001, 0.0, "cm")
        # Before December 2016 the metadata file was named after its product, and so were the granules' images.
        name = "PDMC_20160119T013846_R116_V20160117T002243_20160117T002334"
        old = tmp_path / f"S2A_OPER_PRD_MSIL1C_{name}.SAFE"
        old.mkdir()
        (old / f"S2A_OPER_MTD_SAFL1C_{name}.xml").write_text(L1C_METADATA)
        granule = "S2A_OPER_MSI_L1C_TL_SGS__20160117T051155_A002973_T55KES"
        image = str(old / "GRANULE" / f"{granule}_N02.01" / "IMG_DATA" / f"{granule}_B12.jp2")
        assert file_radiometry(image) == (0.0001, -0.2, None)
        assert file_band_texts(image, 1) == (band_text(BANDS["B12"]) + ", top-of-atmosphere reflectance (L1C)",)

    def test_images_take_the_nodata_their_product_declares(self, tmp_path: Path) -> None:
        """ESA's JP2s state no nodata; the product's Special_Values declare DN 0 NODATA (and 65535 SATURATED, not nodata)."""
        assert product_nodata(L1C_METADATA) is None
        declared = L1C_METADATA.replace(
            "</Radiometric_Offset_List>",
            "</Radiometric_Offset_List><Special_Values><SPECIAL_VALUE_TEXT>SATURATED</SPECIAL_VALUE_TEXT>"
            "<SPECIAL_VALUE_INDEX>65535</SPECIAL_VALUE_INDEX></Special_Values><Special_Values><SPECIAL_VALUE_TEXT>NODATA"
            "</SPECIAL_VALUE_TEXT><SPECIAL_VALUE_INDEX>1</SPECIAL_VALUE_INDEX></Special_Values>",
        )
        assert product_nodata(declared) == 1.0
        with pytest.raises(MetadataError, match="NODATA SPECIAL_VALUE_INDEX is 'x'"):
            product_nodata(declared.replace(">1<", ">x<"))
        safe = tmp_path / "S2A_MSIL1C_20230612T102031_N0500_R065_T33UUU_20230612T120000.SAFE"
        granule = safe / "GRANULE" / "L1C_T33UUU"
        image, scl = granule / "IMG_DATA" / "T33UUU_20230612T102031_B8A.jp2", granule / "IMG_DATA" / "R20m" / "T33UUU_SCL_20m.jp2"
        assert file_nodata(str(image)) == NODATA == 0  # no metadata file: ESA's value for every baseline
        safe.mkdir()
        (safe / "MTD_MSIL1C.xml").write_text(declared)
        assert file_nodata(str(image)) == file_nodata(str(scl)) == 1.0
        assert file_nodata(str(granule / "QI_DATA" / "MSK_DETFOO_B02.jp2")) is None  # 0 is a mask's value, not nodata
        assert file_nodata(str(granule / "IMG_DATA" / "T33UUU_20230612T102031_TCI.jp2")) is None
        assert file_nodata(str(tmp_path / "B04.tif")) is None


def test_stac_api_runs_into_a_bucket_are_incremental(
    archive: tuple[Path, list[dict[str, Any]]], api: StaticStacApi, emulator: GCSEmulator
) -> None:
    """The nightly job's own setting, --out gs://…: the search's ItemCollection goes where the workers read it (it was
    written to a local folder named gs:), and the catalogue in the bucket says what earlier nights hold (it was taken
    for none, so every night converted everything again)."""
    from pipelines.bucket import output_store

    out = f"gs://{emulator.bucket}/s2-nightly"
    common = ["--stac-api", api.url, "--bbox", BBOX, "--max-cloud", "30", "--bands", "red,nir", "--out", out]
    assert "2 new" in _convert(*common, "--datetime", "2023-06-01/2023-06-10")
    store = output_store()
    assert store.stat(f"{out}/stac-search.json") is not None and not Path("gs:").exists()
    assert "1 new" in _convert(*common, "--datetime", "2023-06-01/2023-06-30")
    again = _convert(*common, "--datetime", "2023-07-01/2023-07-31", "--prune")
    assert "1 new" in again and "pruned" not in again  # June's cubes in the bucket are the catalogue's
    assert store.stat(f"{out}/S2L2A_T33UUU_10m_o1000_2023-06.rumi") is not None
    hits = CliRunner().invoke(cli, ["search", f"{out}/stac", "--bands", "red", "--json"])
    assert hits.exit_code == 0, hits.output
    assert "S2L2A_T33UUU_10m_o1000_2023-06" in [h["id"] for h in json.loads(hits.output)]


def test_a_products_cube_kept_in_a_bucket_stays_listed(
    archive: tuple[Path, list[dict[str, Any]]], emulator: GCSEmulator, tmp_path: Path
) -> None:
    """An ItemCollection of July after one of June, into gs://: June's cube is kept, and still in the manifest and catalogue.

    Its plan holds other times, so its entry is the line the bucket's manifest holds for the object (by its CRC32C);
    without it the run's catalogue was rebuilt without the cube.
    """
    from pipelines.bucket import output_store

    by_id = {i["id"]: i for i in archive[1]}
    out = f"gs://{emulator.bucket}/collections"
    common = ["--bands", "red", "--mgrs", "33UUU", "--out", out]
    for name, item_id in (("june", "S2B_33UUU_20230618_0_L2A"), ("july", "S2A_33UUU_20230705_0_L2A")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"type": "FeatureCollection", "features": [by_id[item_id]]}))
    _convert(str(tmp_path / "june.json"), *common)
    store = output_store()
    listed = store.read(f"{out}/manifest.jsonl")
    assert "held-times: 1" in _convert(str(tmp_path / "july.json"), *common)
    assert store.read(f"{out}/manifest.jsonl") == listed
    hits = CliRunner().invoke(cli, ["search", f"{out}/stac", "--json"])
    assert [h["id"] for h in json.loads(hits.output)] == ["S2L2A_T33UUU_10m_o1000"], hits.output
