"""Times outside Python's datetime range (years 1..9999) in catalogue reads and items."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner

import rumi_core
from catalog.cube import Cube
from catalog.errors import ItemError
from catalog.items import create_item
from rumi_core.cli.main import cli
from rumi_core.testing import random_samples

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def far(tmp_path: Path) -> Path:
    path = tmp_path / "far.rumi"
    times = [np.datetime64("9999-12-31T23:59:59"), np.datetime64("10000-01-01")]
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4600000.0)
    rumi_core.write(path, random_samples((2, 1, 4, 4), "uint8"), bands=["a"], times=times, tile_size=4, crs=32633, transform=transform)
    return path


def test_a_labelled_read_and_rumi_read_to_tif_name_times_past_year_9999(far: Path, tmp_path: Path) -> None:
    with Cube.open(far) as cube:
        assert cube.read().times == ("9999-12-31T23:59:59Z", "10000-01-01T00:00:00Z")
    out = tmp_path / "x.tif"
    result = CliRunner().invoke(cli, ["read", str(far), "-o", str(out)])
    assert result.exit_code == 0, result.output
    with rasterio.open(out) as ds:
        assert ds.tags(2)["TIME"] == "10000-01-01T00:00:00Z"


def test_an_item_cannot_hold_a_datetime_past_year_9999(tmp_path: Path) -> None:
    path = tmp_path / "one.rumi"
    rumi_core.write(path, random_samples((1, 4, 4), "uint8"), bands=["a"], times=[np.datetime64("10000-01-01")], tile_size=4)
    with pytest.raises(ItemError, match=r"time 10000-01-01T00:00:00Z is outside the years 1\.\.9999"):
        create_item(path, thumbnail=False)


def test_xarray_keeps_times_nanoseconds_cannot_hold(far: Path, tmp_path: Path) -> None:
    """Outside 1677..2262 the coordinates stay in seconds, as stored: a cast to nanoseconds wrapped round, and an
    interval from 1600 to 2300 came out as 2184 to 1715. Inside that range they are nanoseconds, as xarray's default."""
    import xarray as xr

    path = tmp_path / "long.rumi"
    rumi_core.write(path, random_samples((1, 1, 4, 4), "uint8"), bands=["a"], times=[("1600-01-01", "2300-01-01")], tile_size=4)
    with xr.open_dataset(path, engine="rumi") as ds:
        # as text: numpy compares datetimes in the finer unit, where both sides would wrap alike
        assert ds.time_bounds.values.astype("datetime64[D]").astype(str).tolist() == [["1600-01-01", "2300-01-01"]]
    with xr.open_dataset(far, engine="rumi") as ds:
        assert str(ds.time.values[1].astype("datetime64[D]")) == "10000-01-01"
    near = tmp_path / "near.rumi"
    rumi_core.write(near, random_samples((1, 1, 4, 4), "uint8"), bands=["a"], times=["2262-04-11"], tile_size=4)
    with xr.open_dataset(near, engine="rumi") as ds:
        assert ds.time.dtype == np.dtype("datetime64[ns]") and ds.time.values[0] == np.datetime64("2262-04-11")
