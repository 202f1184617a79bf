"""No-data through every path: source file -> pipeline -> item -> index, read, export, xarray.

A run mixes a NaN-nodata float cube and a -9999 int16 cube: its catalogue
and stac-geoparquet index are written (the index once failed on the mix), and
nothing is left in ``.parts/`` or ``.staging/``. A bare ``.rumi`` file cannot
carry no-data, and the commands say so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pytest
import rasterio
import xarray as xr
from click.testing import CliRunner

from catalog.cube import Cube
from catalog.index import query_index, read_index_table
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.testing import write_geotiff
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from pathlib import Path


def _same(a: float | None, b: float) -> bool:
    return a is not None and (a == b or (math.isnan(a) and math.isnan(b)))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """Two cubes of one run: float32 with NaN no-data, int16 with -9999; item path by no-data kind."""
    root = tmp_path_factory.mktemp("nodata")
    src = root / "in"
    src.mkdir()
    rng = np.random.default_rng(11)
    floats = rng.random((1, 40, 50), dtype="float32")
    floats[0, :4, :4] = np.nan
    ints = rng.integers(0, 5000, (1, 30, 20), dtype="int16")
    ints[0, -3:, -3:] = -9999
    tags = {"TIFFTAG_DATETIME": "2021:05:17 10:00:00"}
    write_geotiff(str(src / "sar_VV.tif"), floats, epsg=32632, transform=(20, 0, 600000, 0, -20, 5300000), nodata=float("nan"), tags=tags)
    write_geotiff(str(src / "refl_B04.tif"), ints, epsg=32613, transform=(30, 0, 336375, 0, -30, 4462425), nodata=-9999, tags=tags)
    out = root / "out"
    summary = run([str(src)], ConvertOptions(out=str(out)))
    assert not summary.dead_letters
    items = {}
    for entry in load_jsonl(str(out / "manifest.jsonl")):
        (item,) = out.glob(f"stac/*/{entry['cube_id']}/{entry['cube_id']}.json")
        items["nan" if entry["dtype"] == "float32" else "int"] = item
    return out, items


def test_mixed_nodata_run_writes_its_index_and_leaves_nothing_behind(converted: tuple[Path, dict[str, Path]]) -> None:
    out, _ = converted
    assert (out / "stac" / "items.parquet").is_file()
    assert not (out / ".parts").exists() and not (out / ".staging").exists()
    assert not [p for p in (out / "stac").parent.iterdir() if "staging" in p.name]
    found = query_index(read_index_table(out / "stac" / "items.parquet"))
    nodata = sorted(str(b.get("nodata")) for it in found for b in it["assets"]["data"]["bands"])
    assert nodata == ["-9999.0", "nan"]  # STAC's text for NaN comes back from the index


@pytest.mark.parametrize("kind", ["nan", "int"])
def test_nodata_survives_read_export_and_xarray(converted: tuple[Path, dict[str, Path]], kind: str, tmp_path: Path) -> None:
    _, items = converted
    item = items[kind]
    expected = float("nan") if kind == "nan" else -9999.0
    with Cube.open(str(item)) as cube:
        assert _same(cube.read().nodata, expected)
    tif = tmp_path / "read.tif"
    result = CliRunner().invoke(cli, ["read", str(item), "-o", str(tif)])
    assert result.exit_code == 0, result.output
    with rasterio.open(tif) as ds:
        assert _same(ds.nodata, expected)
    exported = tmp_path / "export.tif"
    result = CliRunner().invoke(cli, ["export", str(item), "-o", str(exported)])
    assert result.exit_code == 0, result.output
    with rasterio.open(exported) as ds:
        assert _same(ds.nodata, expected)
    with xr.open_dataset(item, engine="rumi") as ds:
        assert _same(float(ds["data"].attrs["_FillValue"]), expected)
        assert _same(ds["data"].rio.nodata, expected)
    if kind == "int":
        with xr.open_dataset(item, engine="rumi", mask_and_scale=True) as ds:
            assert np.isnan(ds["data"].values[0, 0, -1, -1]) and ds["data"].rio.encoded_nodata == -9999


def test_a_bare_file_says_it_has_no_nodata(converted: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    out, items = converted
    data = next(out.glob("EPSG32613*.rumi"))
    exported = tmp_path / "bare.tif"
    result = CliRunner().invoke(cli, ["export", str(data), "-o", str(exported)])
    assert result.exit_code == 0, result.output
    assert "carries no no-data value" in result.output
    with rasterio.open(exported) as ds:
        assert ds.nodata is None
    result = CliRunner().invoke(cli, ["read", str(data), "-o", str(tmp_path / "bare_read.tif")])
    assert result.exit_code == 0 and "carries no no-data value" in result.output
    assert items  # the item of the same file keeps it (test above)


def test_int64_samples_next_to_a_nodata_of_int64s_fill_stay_valid(tmp_path: Path) -> None:
    """NumPy compared int64 samples with the float nodata -2**63 as doubles: -2**63 + 1 to -2**63 + 512 equalled it, and
    catalog.load replaced them by the fill. Only the fill itself is nodata now."""
    import rumi_core
    from catalog import load
    from catalog.extra_metadata import ExtraMetadata
    from catalog.items import create_item

    fill = np.iinfo(np.int64).min
    data = np.full((1, 1, 8, 8), 5, np.int64)
    data[0, 0, 0, :4] = (fill, fill + 1, fill + 512, fill + 513)
    path = tmp_path / "wide.rumi"
    rumi_core.write(path, data, bands=["b"], times=["2020-01-01"], crs="EPSG:32633", transform=(10, 0, 500000, 0, -10, 4000000))
    item = create_item(path, extra=ExtraMetadata(id="wide", nodata=float(fill)), thumbnail=False).to_dict()
    with load([item]) as ds:
        assert ds.data.dtype == np.int64
        np.testing.assert_array_equal(ds.data.values, data)
