"""What file names tell the pipeline: acquisition dates in scene IDs, and band names from stems."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.planning.timestamps import resolve_time, time_from_scene_id
from pipelines.testing import write_geotiff
from rumi_core.times import format_seconds

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("/l/LC08_L1TP_044034_20150502_20200909_02_T1_B4.TIF", "2015-05-02T00:00:00Z"),  # Collection 2
        ("/l/LC08_L1TP_107035_20150502_20170409_01_T1/LC08_L1TP_107035_20150502_20170409_01_T1_B2.TIF", "2015-05-02T00:00:00Z"),
        ("/l/LE07_L2SP_035032_20080427_20200914_02_T1_SR_B3.TIF", "2008-04-27T00:00:00Z"),
        ("/l/LC81070352015122LGN00_B3.TIF", "2015-05-02T00:00:00Z"),  # pre-collection: year + day of year
        ("/l/LT50350322011278PAC01/LT50350322011278PAC01_b4.tif", "2011-10-05T00:00:00Z"),
        ("/s2/S2A_MSIL1C_20170216T102101_N0204_R065_T33UUU_20170216T102204.SAFE/GRANULE/x/IMG_DATA/B04.jp2", "2017-02-16T10:21:01Z"),
        ("/s2/T33UUU_20170216T102101_B8A.jp2", "2017-02-16T10:21:01Z"),
        ("/s2/T32TQM_20210517T103619_B04_10m.jp2", "2021-05-17T10:36:19Z"),
        ("/m/MOD09GA.A2015122.h18v04.061.2021320182934_b01.tif", "2015-05-02T00:00:00Z"),
        ("/cogs/33/U/UU/2023/6/S2A_33UUU_20230612_0_L2A/B04.tif", "2023-06-12T00:00:00Z"),  # Earth Search COG item
        ("/cogs/S2B_10SEG_20200101_1_L1C/SCL.tif", "2020-01-01T00:00:00Z"),
        ("/hls/HLS.S30.T33UUU.2023163T102031.v2.0.B02.tif", "2023-06-12T10:20:31Z"),  # HLS: year, day of year, time
        ("/hls/HLS.L30.T33UUU.2023163T095512.v2.0.Fmask.tif", "2023-06-12T09:55:12Z"),
        ("/s1/S1A_IW_GRDH_1SDV_20230612T051234_20230612T051259_048953_05E2E5_rtc/iw-vh.tif", "2023-06-12T05:12:34Z"),
        ("/s1/S1A_IW_20230612T051234_DVP_RTC30_G_gpuned_1A2B_VV.tif", "2023-06-12T05:12:34Z"),  # HyP3 RTC
        ("/ps/PSScene/20230612_101010_23_2477/20230612_101010_23_2477_3B_AnalyticMS_SR_8b.tif", "2023-06-12T10:10:10Z"),
        ("/ps/20151119_025740_0c74_3B_AnalyticMS.tif", "2015-11-19T02:57:40Z"),  # PlanetScope, no hundredths
        ("/ss/20200101_101010_ssc1d1_0001_analytic.tif", "2020-01-01T10:10:10Z"),  # SkySat: the camera
    ],
)
def test_scene_ids_carry_dates(href: str, expected: str) -> None:
    found = time_from_scene_id(href)
    assert found is not None and format_seconds(found) == expected
    assert resolve_time(href=href, stac=None, tags={}, pattern=None, fallback=None) == found


@pytest.mark.parametrize(
    "href",
    [
        "/d/scene_B04.tif",
        "/d/A2015999.tif",
        "/d/LC81070352015400LGN00.tif",
        "/d/T33UUU_B04.tif",
        "/d/S2A_33UUU_20231345_0_L2A/B04.tif",
        "/d/20230612_101010_ab.tif",  # no Planet satellite
        "/d/20231312_101010_2477_3B.tif",  # month 13
    ],
)
def test_names_without_a_valid_scene_id(href: str) -> None:
    assert time_from_scene_id(href) is None


def test_precedence_pattern_then_scene_id_then_tags() -> None:
    href = "/l/LC81070352015122LGN00_B3.TIF"
    tags = {"TIFFTAG_DATETIME": "2019:01:01 00:00:00"}
    assert format_seconds(resolve_time(href=href, stac=None, tags=tags, pattern=None, fallback=None) or 0) == "2015-05-02T00:00:00Z"
    got = resolve_time(href=href, stac=None, tags=tags, pattern=r"LC8\d{6}(?P<year>\d{4})", fallback=None)
    assert format_seconds(got or 0) == "2015-01-01T00:00:00Z"


def test_landsat_series_dates_itself_and_names_fmask(tmp_path: Path) -> None:
    """Scene folders as USGS names them: no --time-pattern, no --time, and a mask band with no token."""
    rng = np.random.default_rng(5)
    transform = (30.0, 0.0, 336375.0, 0.0, -30.0, 4462425.0)
    for scene in ("LE70350322008118EDC00", "LT50350322008126PAC01", "LE70350322008150EDC00"):
        folder = tmp_path / "in" / scene
        folder.mkdir(parents=True)
        write_geotiff(str(folder / f"{scene}_fmask.tif"), rng.integers(0, 5, (1, 20, 30), dtype="uint8"), epsg=32613, transform=transform)
    out = tmp_path / "out"
    summary = run([str(tmp_path / "in")], ConvertOptions(out=str(out), write_catalog=False))
    assert not summary.dead_letters
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert [b["name"] for b in entry["bands"]] == ["fmask"]
    assert entry["times"] == ["2008-04-27T00:00:00Z", "2008-05-05T00:00:00Z", "2008-05-29T00:00:00Z"]


def test_a_planetscope_order_dates_itself_and_keeps_the_udm2_beside_the_bands(tmp_path: Path) -> None:
    """A PSScene order: per scene an 8-band surface reflectance file and its 8-band uint8 usable-data mask.

    No --time: the scene ID dates both; the mask, with its own dtype and band names, is a cube of its own.
    """
    rng = np.random.default_rng(6)
    transform = (3.0, 0.0, 600000.0, 0.0, -3.0, 5000000.0)
    masks = ("clear", "snow", "shadow", "light_haze", "heavy_haze", "cloud", "confidence", "udm1")
    for scene in ("20230612_101010_23_2477", "20230618_100955_12_24a3"):
        folder = tmp_path / "PSScene" / scene
        folder.mkdir(parents=True)
        sr = rng.integers(1, 9000, (8, 20, 30), dtype="uint16")
        write_geotiff(str(folder / f"{scene}_3B_AnalyticMS_SR_8b.tif"), sr, epsg=32633, transform=transform, nodata=0)
        udm = rng.integers(0, 2, (8, 20, 30), dtype="uint8")
        write_geotiff(str(folder / f"{scene}_3B_udm2.tif"), udm, epsg=32633, transform=transform, descriptions=masks)
    out = tmp_path / "out"
    summary = run([str(tmp_path / "PSScene")], ConvertOptions(out=str(out), write_catalog=False))
    assert not summary.dead_letters
    entries = sorted(load_jsonl(str(out / "manifest.jsonl")), key=lambda e: e["dtype"])
    assert [(e["dtype"], e["shape"]) for e in entries] == [("uint16", [2, 8, 20, 30]), ("uint8", [2, 8, 20, 30])]
    assert tuple(b["name"] for b in entries[1]["bands"]) == masks
    assert entries[0]["times"] == entries[1]["times"] == ["2023-06-12T10:10:10Z", "2023-06-18T10:09:55Z"]
