"""``xarray.open_dataset(..., engine="rumi")``: lazy, frame-aligned, georeferenced."""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest
import xarray as xr

from catalog.items import create_item

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def test_engine_is_registered() -> None:
    assert "rumi" in xr.backends.list_engines()


def test_open_local_file(cube: Any) -> None:
    with xr.open_dataset(cube.path, engine="rumi") as ds:
        assert ds["data"].dims == ("time", "band", "y", "x")
        assert ds["data"].shape == (3, 4, 100, 130)
        assert list(ds.band.values) == ["B2", "B3", "B4", "B8"]
        assert str(ds.time.values[2])[:19] == "2021-01-21T10:30:00"
        assert ds.x.values[0] == 500005.0 and ds.y.values[0] == 3999995.0
        np.testing.assert_array_equal(ds["data"].values, cube.data)
        sub = ds["data"].isel(time=1, band=[0, 2], y=slice(10, 90, 3), x=[5, 7, 100]).values
        np.testing.assert_array_equal(sub, cube.data[1][[0, 2]][:, 10:90:3][:, :, [5, 7, 100]])
        assert ds["data"].sel(band="B8").isel(time=0, y=0, x=0).item() == cube.data[0, 3, 0, 0]


@pytest.mark.parametrize(
    "decoders",
    [{"decode_times": True}, {"decode_coords": "all"}, {"use_cftime": False, "decode_timedelta": False}, {"concat_characters": True}],
)
def test_xarrays_decoder_arguments_are_taken(cube: Any, decoders: dict[str, Any]) -> None:
    """The times are datetime64 already and spatial_ref a coordinate: what xr.open_dataset asks to decode is as stored."""
    with xr.open_dataset(cube.path, engine="rumi", **decoders) as ds, xr.open_dataset(cube.path, engine="rumi") as plain:
        xr.testing.assert_identical(ds, plain)


def test_decode_times_false_gives_the_files_seconds_which_decode_cf_decodes(cube: Any) -> None:
    """``decode_times=False`` was taken and ignored: the times came as datetime64 all the same."""
    with xr.open_dataset(cube.path, engine="rumi", decode_times=False) as raw, xr.open_dataset(cube.path, engine="rumi") as plain:
        assert raw.time.dtype == np.int64
        assert raw.time.attrs == {"units": "seconds since 1970-01-01T00:00:00", "calendar": "proleptic_gregorian"}
        assert raw.time.values[0] == 1609459200  # 2021-01-01
        xr.testing.assert_identical(xr.decode_cf(raw).time.reset_coords(drop=True), plain.time.reset_coords(drop=True))


@pytest.mark.parametrize("chunks", [None, {}])
def test_lazy_data_taken_inside_the_with_block_reads_after_it(cube: Any, chunks: dict[str, Any] | None) -> None:
    """As netCDF4's and rasterio's engines: ``sub.values`` after ``with xr.open_dataset(...)`` was "the cube is closed"."""
    with xr.open_dataset(cube.path, engine="rumi", chunks=chunks) as ds:
        sub = ds["data"].isel(time=[0, 2], y=slice(10, 20))
    np.testing.assert_array_equal(sub.values, cube.data[[0, 2], :, 10:20])
    ds.close()  # the cube reopened for the read is closed with the dataset
    np.testing.assert_array_equal(sub.values, cube.data[[0, 2], :, 10:20])


def test_chunks_align_to_frames(cube: Any, make_cube: Callable[..., Any], tmp_path: Path) -> None:
    with xr.open_dataset(cube.path, engine="rumi", chunks={}) as ds:
        assert ds["data"].chunks == ((1, 1, 1), (1, 1, 1, 1), (64, 36), (48, 48, 34))
        np.testing.assert_array_equal(ds["data"].mean(dim="time").compute().values, cube.data.mean(axis=0))
    (tmp_path / "cells").mkdir()
    cells = make_cube(tmp_path / "cells", frame_unit=4)
    with xr.open_dataset(cells.path, engine="rumi", chunks={}) as ds:
        assert ds["data"].chunks == ((3,), (4,), (64, 36), (48, 48, 34))


def test_lazy_over_http(cube: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    with xr.open_dataset(server.url("item.json"), engine="rumi", chunks={}) as ds:
        assert server.requests("cube.rumi") == 0
        window = ds["data"].isel(time=2, band=3, y=slice(0, 64), x=slice(0, 48)).values
        assert server.requests("cube.rumi") == 1
    np.testing.assert_array_equal(window, cube.data[2, 3, :64, :48])


def test_crs_the_way_rioxarray_expects(cube: Any) -> None:
    pytest.importorskip("rioxarray", reason="rioxarray is not installed (pip install -e '.[test]')")
    with xr.open_dataset(cube.path, engine="rumi") as ds:
        assert ds["data"].attrs["grid_mapping"] == "spatial_ref"
        assert ds.spatial_ref.attrs["GeoTransform"] == "500000.0 10.0 0.0 4000000.0 0.0 -10.0"
        assert ds["data"].rio.crs.to_epsg() == 32633
        with warnings.catch_warnings():
            # rioxarray 0.19 composes affines with '*', which affine 3 deprecates.
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            assert tuple(ds["data"].rio.transform())[:6] == (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)


def test_open_an_item_dict(cube: Any) -> None:
    item = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()
    with xr.open_dataset(cast("Any", item), engine="rumi") as ds:
        np.testing.assert_array_equal(ds["data"].isel(time=0).values, cube.data[0])


def test_intervals_have_cf_time_bounds_as_a_load_has(tmp_path: Path) -> None:
    """Intervals: ``time`` holds the starts, ``time_bounds`` ``(time, nv)`` starts and ends, named by ``time.attrs["bounds"]``.

    The same coordinates as :func:`catalog.load` gives.
    """
    import rumi_core
    from catalog import load

    path = tmp_path / "iv.rumi"
    rumi_core.write(path, np.ones((2, 1, 8, 8), "uint8"), bands=["x"], times=[("2020-01-01", "2020-02-01"), ("2020-02-01", "2020-03-01")],
                    crs="EPSG:32633", transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0))  # fmt: skip
    expected = np.array([["2020-01-01", "2020-02-01"], ["2020-02-01", "2020-03-01"]], dtype="datetime64[ns]")
    with xr.open_dataset(path, engine="rumi") as ds:
        assert ds.time.attrs["bounds"] == "time_bounds" and ds.time_bounds.dims == ("time", "nv")
        np.testing.assert_array_equal(ds.time_bounds.values, expected)
        np.testing.assert_array_equal(ds.time.values, expected[:, 0])
        item = create_item(path, thumbnail=False).to_dict()
        with load([item], bands=None, bbox=None) as loaded:
            xr.testing.assert_identical(loaded.time_bounds, ds.time_bounds)
            xr.testing.assert_identical(loaded.common_name, ds.common_name)
    instants = tmp_path / "at.rumi"
    rumi_core.write(instants, np.ones((1, 1, 8, 8), "uint8"), bands=["x"], times=["2020-01-01"])
    with xr.open_dataset(instants, engine="rumi") as ds:
        assert "time_bounds" not in ds.coords and "bounds" not in ds.time.attrs
        assert ds.x.values.tolist() == [i + 0.5 for i in range(8)]  # not georeferenced: rasterio's identity grid


_UNPICKLE_AND_READ = """
import pickle, sys
import numpy as np
with open(sys.argv[1], "rb") as f:
    ds = pickle.load(f)
np.save(sys.argv[2], ds["data"].values)
"""


def _read_in_a_new_process(ds: xr.Dataset, tmp_path: Path) -> np.ndarray:
    """``ds`` pickled, then read in a new interpreter (as by a DataLoader worker started with spawn)."""
    import pickle
    import subprocess
    import sys

    (tmp_path / "ds.pickle").write_bytes(pickle.dumps(ds))
    # Descriptors the new process may open first take the numbers this one's file had.
    # In another folder, as a dask worker may be: a relative path must have been made absolute.
    command = [sys.executable, "-c", _UNPICKLE_AND_READ, str(tmp_path / "ds.pickle"), str(tmp_path / "out.npy")]
    subprocess.run(command, check=True, cwd=tmp_path.anchor)
    return np.load(tmp_path / "out.npy")


def test_a_blob_claiming_more_time_steps_than_the_limits_is_refused_before_allocating(tmp_path: Path, server: RangeRequestServer) -> None:
    """A regular time axis is three integers whatever its count, and a blob may claim any count.

    The engine built a tuple of every coordinate: a 12 KB cell-frame file whose sidecar claimed 2**31 time steps
    raised MemoryError (or took gigabytes), where the readers refuse it by ``Limits.max_time_coordinates``.
    """
    import dataclasses

    import rumi_core
    from rumi_core.errors import ResourceLimitError
    from rumi_core.header import HeaderBlob

    path = tmp_path / "c.rumi"
    days = [f"2020-01-0{d}" for d in range(1, 6)]
    rumi_core.write(path, np.ones((5, 2, 8, 8), "uint8"), bands=["x", "y"], times=days, frame_unit=4, tile_size=8)  # cells: N is 1
    blob = HeaderBlob.from_bytes(rumi_core.build_header(path))
    claimed = dataclasses.replace(blob.layout, time_count=2**31)
    (tmp_path / "c.rumih").write_bytes(HeaderBlob(claimed, blob.frame_byte_counts).to_bytes())
    with pytest.raises(ResourceLimitError, match="max_time_coordinates"):
        xr.open_dataset(server.url("c.rumi"), engine="rumi")  # a URL's blob is not compared with its head


def test_datasets_pickle_to_another_process(cube: Any, server: RangeRequestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset of a local file, of an item over HTTP, and a catalog.load, each pickled and read in a new process: a local
    file is opened again by its path (its descriptor number meant another file there), an HTTP source gets a pool of
    its own (a lock failed to pickle), and a load's graph and close hold no closure."""
    from catalog import load

    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    monkeypatch.chdir(cube.path.parent)
    relative = cube.path.name
    targets = ((cube.path, None), (relative, {}), (server.url("item.json"), {}), (server.url("cube.rumi"), None))
    for target, chunks in targets:
        with xr.open_dataset(target, engine="rumi", chunks=chunks) as ds:
            np.testing.assert_array_equal(_read_in_a_new_process(ds, tmp_path), cube.data, err_msg=f"{target} {chunks}")
    loaded = load([str(tmp_path / "item.json")], bands=None, bbox=None)
    np.testing.assert_array_equal(_read_in_a_new_process(loaded, tmp_path), cube.data)


def test_auto_chunks(cube: Any) -> None:
    """Band names and descriptions are text arrays, not objects, which dask cannot size for chunks="auto"."""
    from catalog import load

    with xr.open_dataset(cube.path, engine="rumi", chunks="auto") as ds:
        np.testing.assert_array_equal(ds["data"].values, cube.data)
        assert ds.band.dtype.kind == "U" and ds.description.dtype.kind == "U"
    loaded = load([str(cube.path)], bands=None, bbox=None).chunk("auto")
    np.testing.assert_array_equal(loaded["data"].values, cube.data)


# rioxarray 0.19 composes affines with '*', which affine 3 deprecates.
@pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning")
def test_mask_and_scale_decodes_as_rioxarray_does_where_the_bands_share_a_scale(tmp_path: Path) -> None:
    """One scale and offset for every band: CF's scale_factor and add_offset, which mask_and_scale=True applies as rioxarray
    does to the same GeoTIFF; bands of several scales keep theirs as coordinates only, and their values as stored."""
    import rasterio
    import rioxarray

    import rumi_core

    data = np.arange(2 * 20 * 30, dtype=np.uint16).reshape(1, 2, 20, 30)
    data[0, :, 0, :5] = 0
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    path = tmp_path / "sr.rumi"
    blob = rumi_core.write(path, data, bands=["B4", "B8"], times=["2024-01-01"], crs="EPSG:32633", transform=transform)
    path.with_suffix(".rumih").write_bytes(blob)
    tif = tmp_path / "sr.tif"
    with rasterio.open(tif, "w", driver="GTiff", width=30, height=20, count=2, dtype="uint16", crs="EPSG:32633",
                       transform=rasterio.Affine(*transform), nodata=0) as dst:  # fmt: skip
        dst.write(data[0])
        dst.scales, dst.offsets = (2.75e-05, 2.75e-05), (-0.2, -0.2)
    for name, stated in (("same", [{"scale": 2.75e-05, "offset": -0.2}] * 2), ("apart", [{"scale": 2.75e-05}, {"scale": 0.01}])):
        item = create_item(path, path.with_suffix(".rumih"), extra={"bands": stated, "nodata": 0}, thumbnail=False).to_dict()
        with xr.open_dataset(cast("Any", item), engine="rumi", mask_and_scale=True) as ds:
            decoded = ds["data"].isel(time=0).values
        with xr.open_dataset(cast("Any", item), engine="rumi") as raw:
            attrs = raw["data"].attrs
        if name == "same":
            assert (attrs["scale_factor"], attrs["add_offset"]) == (2.75e-05, -0.2)
            with rioxarray.open_rasterio(tif, mask_and_scale=True) as expected:
                np.testing.assert_allclose(decoded, expected.values, rtol=1e-6)
            assert np.isnan(decoded[:, 0, :5]).all()
        else:
            assert "scale_factor" not in attrs and "add_offset" not in attrs
            np.testing.assert_array_equal(decoded[:, 0, 5:], data[0, :, 0, 5:])


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
@pytest.mark.filterwarnings("ignore:Use `@` matmul:PendingDeprecationWarning")  # rioxarray 0.19 composes affines with '*'
def test_a_raster_without_a_transform_has_rasterios_identity_grid(tmp_path: Path) -> None:
    """Its x and y were pixel indices (0, 1, …), so rioxarray's transform was half a pixel off rasterio's identity."""
    pytest.importorskip("rioxarray", reason="rioxarray is not installed (pip install -e '.[test]')")
    import rasterio
    import rioxarray

    import rumi_core

    data = np.arange(20 * 30, dtype=np.uint16).reshape(1, 20, 30)
    rumi_core.write(tmp_path / "bare.rumi", data, bands=["a"], times=["2024-01-01"])
    with rasterio.open(tmp_path / "bare.tif", "w", driver="GTiff", width=30, height=20, count=1, dtype="uint16") as dst:
        dst.write(data)
    with xr.open_dataset(tmp_path / "bare.rumi", engine="rumi") as ds, rioxarray.open_rasterio(tmp_path / "bare.tif") as tif:
        np.testing.assert_array_equal(ds.x.values, tif.x.values)
        np.testing.assert_array_equal(ds.y.values, tif.y.values)
        assert ds["data"].rio.transform() == tif.rio.transform()
        np.testing.assert_array_equal(ds["data"].sel(x=10.5, y=3.5).values.ravel(), [data[0, 3, 10]])
