"""An xarray backend: ``xarray.open_dataset(path_or_item, engine="rumi")``.

The dataset has one variable, ``data``, with dimensions ``(time, band, y,
x)`` (an Image has one time step), read lazily through :class:`catalog.cube.Cube`:
nothing but the header blob (and, for a bare file, its head and trailer)
is fetched until values are asked for. With ``chunks={}`` the dask chunks are
the file's frames: one tile location in ``y``/``x``, and one band and time
step per chunk when a frame holds a tile (frame units 0 and 9), every band
and time step when it holds a cell.

Coordinates:

* ``time``: the instants, or the starts of the intervals, as ``datetime64``;
  intervals have CF bounds, ``time_bounds`` ``(time, nv)``, named by the
  ``bounds`` attribute of ``time`` (as :func:`catalog.load` has them);
* ``band``: band names, with ``common_name`` and ``description`` (the band
  texts) beside them, and each band's ``scale``, ``offset`` and ``unit``
  (1, 0 and "" where the item states none): a physical value is
  ``stored * scale + offset``;
* ``y``, ``x``: pixel centres from the transform (of the identity grid, 0.5, 1.5, …, without one, as rasterio places
  such a raster);
* ``spatial_ref``: a scalar with ``crs_wkt``, ``spatial_ref`` and
  ``GeoTransform`` (of pixel corners, as GDAL has it, also for PixelIsPoint),
  named by the variable's ``grid_mapping`` attribute, which is how rioxarray
  finds the CRS and transform (``ds.data.rio.crs``, ``rio.transform()``).

The variable carries ``AREA_OR_POINT`` and, when every band shares one
(from the STAC item; a bare file has none), the no-data value as CF's
``_FillValue``, which rioxarray reports as ``rio.nodata``. Samples stay as
stored, as with rioxarray's ``open_rasterio``; ``mask_and_scale=True``
turns no-data samples into NaN (then ``rio.encoded_nodata`` holds the value).
Where every band shares one scale and offset, the variable also carries them
as CF's ``scale_factor`` and ``add_offset``, which ``mask_and_scale=True``
applies; bands of several scales keep theirs as band coordinates only.

The target may be a ``.rumi`` path or URL, an item JSON path or URL, an item
dict or a :class:`pystac.Item`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from catalog.bands import Band, common_nodata
from catalog.cube import Cube
from catalog.storage import is_rumi_href
from rumi_core.times import INTERVAL

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from numpy.typing import ArrayLike, NDArray

    from catalog.storage import Storage

__all__ = ["RumiBackendArray", "RumiBackendEntrypoint", "band_coords", "open_cube_dataset", "scale_attrs", "spatial_ref", "time_coords"]


class RumiBackendArray(BackendArray):
    """The samples of a cube as ``(time, band, y, x)``, read on demand."""

    def __init__(self, cube: Cube, *, threads: int | None = None) -> None:
        lay = cube.layout
        self.cube = cube
        self.threads = threads
        self.shape = (lay.time_count, lay.samples_per_pixel, lay.image_length, lay.image_width)
        self.dtype = np.dtype(lay.encoding.dtype)

    def _open_cube(self) -> Cube:
        """The cube, reopened once the dataset was closed: as xarray's own backends (``CachingFileManager``) read the
        lazy data of ``with xr.open_dataset(...) as ds: part = ds.data[0]`` after the block."""
        if self.cube.closed:
            self.cube = self.cube.reopened()
        return self.cube

    def close(self) -> None:
        """Close the cube (the one reopened last, if the dataset was read after a close)."""
        self.cube.close()

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._raw_indexing_method)

    def _raw_indexing_method(self, key: tuple[Any, ...]) -> NDArray[Any]:
        positions: list[NDArray[np.int64]] = []
        squeeze: list[int] = []
        for axis, (k, size) in enumerate(zip(key, self.shape, strict=True)):
            if isinstance(k, (int, np.integer)):
                positions.append(np.array([int(k)]))
                squeeze.append(axis)
            elif isinstance(k, slice):
                positions.append(np.arange(size)[k])
            else:
                positions.append(np.asarray(k, dtype=np.int64).reshape(-1))
        if any(p.size == 0 for p in positions):
            shape = tuple(p.size for i, p in enumerate(positions) if i not in squeeze)
            return np.empty(shape, dtype=self.dtype)
        times, bands, rows, cols = positions
        r0, r1 = int(rows.min()), int(rows.max()) + 1
        c0, c1 = int(cols.min()), int(cols.max()) + 1
        result = self._open_cube().read(
            times=[int(t) for t in times],
            bands=[int(b) for b in bands],
            window=((r0, r1), (c0, c1)),
            threads=self.threads,
            labels=False,
        )
        data = result.as_cube()
        if rows.size != r1 - r0 or not np.array_equal(rows, np.arange(r0, r1)):
            data = data[:, :, rows - r0, :]
        if cols.size != c1 - c0 or not np.array_equal(cols, np.arange(c0, c1)):
            data = data[:, :, :, cols - c0]
        if squeeze:
            data = data.squeeze(axis=tuple(squeeze))
        return data


def spatial_ref(crs: str | None, transform: tuple[float, ...] | None) -> xr.Variable:
    """The CF ``grid_mapping`` variable of a grid: its CRS as CF attributes and WKT, and GDAL's ``GeoTransform``."""
    attrs: dict[str, Any] = {}
    if crs is not None:
        from pyproj import CRS

        proj = CRS.from_user_input(crs)
        attrs.update(proj.to_cf())
        attrs["crs_wkt"] = proj.to_wkt()
        attrs["spatial_ref"] = attrs["crs_wkt"]
    if transform is not None:
        a, b, c, d, e, f = transform
        attrs["GeoTransform"] = " ".join(str(v) for v in (c, a, b, f, d, e))
    return xr.Variable((), np.int64(0), attrs)


def time_coords(bounds: ArrayLike, *, intervals: bool, decode: bool = True) -> dict[str, Any]:
    """The ``time`` coordinate of steps given as ``(start, end)`` epoch seconds (``(T, 2)``); with ``intervals``, also CF's ``time_bounds``.

    ``time`` holds the starts (the instants); ``time_bounds`` is ``(time, nv)``
    of start and end, named by the ``bounds`` attribute of ``time`` (CF 1.11,
    section 7.1), which xarray's CF decoding and cf_xarray follow. Without
    ``decode`` (``decode_times=False``) they are the file's integer seconds
    with CF ``units`` and ``calendar``, which ``xarray.decode_cf`` decodes.
    """
    seconds = np.asarray(bounds, dtype=np.int64).reshape(-1, 2)
    attrs: dict[str, Any] = {"bounds": "time_bounds"} if intervals else {}
    if not decode:
        attrs.update(units="seconds since 1970-01-01T00:00:00", calendar="proleptic_gregorian")
        bound_attrs: dict[str, Any] = {"units": attrs["units"], "calendar": attrs["calendar"]}
    else:
        # Nanoseconds, as xarray and pandas default to, where every step fits them (1677-09-21 to 2262-04-11);
        # seconds otherwise, as the file stores them: a cast to nanoseconds wraps round without a word (an
        # interval from 1600 to 2300 came out as 2184 to 1715).
        unit = "ns" if np.all(np.abs(seconds) <= np.iinfo(np.int64).max // 10**9) else "s"
        seconds = seconds.astype("datetime64[s]").astype(f"datetime64[{unit}]")
        bound_attrs = {}
    if not intervals:
        return {"time": ("time", seconds[:, 0], attrs)}
    return {"time": ("time", seconds[:, 0], attrs), "time_bounds": (("time", "nv"), seconds, bound_attrs)}


def band_coords(bands: Sequence[Band]) -> dict[str, Any]:
    """``band`` (the names) with ``common_name`` ("" for none), ``description`` (the name for none), ``scale`` (1 for
    none), ``offset`` (0 for none) and ``unit`` ("" for none) beside it."""
    return {
        "band": ("band", np.array([b.name for b in bands], dtype=str)),
        "common_name": ("band", np.array([b.common_name or "" for b in bands], dtype=str)),
        "description": ("band", np.array([b.description or b.name for b in bands], dtype=str)),
        "scale": ("band", np.array([b.scale_offset[0] for b in bands], dtype=np.float64)),
        "offset": ("band", np.array([b.scale_offset[1] for b in bands], dtype=np.float64)),
        "unit": ("band", np.array([b.unit or "" for b in bands], dtype=str)),
    }


def scale_attrs(bands: Sequence[Band]) -> dict[str, float]:
    """CF's ``scale_factor`` and ``add_offset`` where one pair holds for every band, as rioxarray sets them; else none.

    xarray's ``mask_and_scale`` applies them, and rioxarray's ``to_raster``
    writes them back. Bands of several scales keep theirs as band coordinates only.

    >>> scale_attrs([Band("B4", scale=1e-4, offset=-0.1), Band("B8", scale=1e-4, offset=-0.1)])
    {'scale_factor': 0.0001, 'add_offset': -0.1}
    >>> scale_attrs([Band("B4", scale=1e-4), Band("B8")])
    {}
    """
    radiometry = {b.scale_offset for b in bands}
    if len(radiometry) != 1 or radiometry == {(1.0, 0.0)}:
        return {}
    ((scale, offset),) = radiometry
    return {"scale_factor": scale, "add_offset": offset}


def open_cube_dataset(cube: Cube, *, threads: int | None = None, decode_times: bool = True) -> xr.Dataset:
    """Build the lazy dataset of an opened cube (the dataset closes the cube).

    Its data stay readable after the dataset is closed, as those of xarray's
    own backends do (their file managers reopen a closed file): a closed
    cube's reads go through :meth:`Cube.reopened`.
    """
    lay = cube.layout
    grid = cube.grid
    bands = cube.bands
    times = cube.times
    secs = times.array()
    intervals = times.time_type == INTERVAL
    steps = secs.reshape(-1, 2) if intervals else np.repeat(secs, 2).reshape(-1, 2)
    coords: dict[str, Any] = {**time_coords(steps, intervals=intervals, decode=decode_times), **band_coords(bands)}
    if grid is not None and grid.transform[1] == 0.0 and grid.transform[3] == 0.0:
        coords["y"] = ("y", grid.y_coords(), {"axis": "Y"})
        coords["x"] = ("x", grid.x_coords(), {"axis": "X"})
    else:
        # Pixel centres of the identity grid, as rasterio and rioxarray place a raster without a transform:
        # rioxarray's transform from indices (0, 1, …) was half a pixel off rasterio's.
        coords["y"] = ("y", np.arange(lay.image_length, dtype=np.float64) + 0.5)
        coords["x"] = ("x", np.arange(lay.image_width, dtype=np.float64) + 0.5)
    # GDAL's GeoTransform always locates pixel corners, also for PixelIsPoint rasters.
    area = tuple(grid.area_affine)[:6] if grid is not None else None
    coords["spatial_ref"] = spatial_ref(cube.crs, area)
    per_frame = lay.unit.holds == "tile"
    preferred = {
        "time": 1 if per_frame else lay.time_count,
        "band": 1 if per_frame else lay.samples_per_pixel,
        "y": lay.tile_length,
        "x": lay.tile_width,
    }
    attrs: dict[str, Any] = {"grid_mapping": "spatial_ref"}
    if grid is not None:
        attrs["AREA_OR_POINT"] = "Point" if grid.pixel_is_point else "Area"
    nodata = common_nodata(b.nodata for b in bands)
    if nodata is not None:
        # CF's _FillValue, of the variable's dtype: xarray masks it (or keeps it
        # with mask_and_scale=False), and rioxarray reports it as rio.nodata /
        # rio.encoded_nodata.
        attrs["_FillValue"] = np.array(nodata).astype(lay.encoding.dtype)[()]
    attrs.update(scale_attrs(bands))
    backend = RumiBackendArray(cube, threads=threads)
    array = indexing.LazilyIndexedArray(backend)
    variable = xr.Variable(("time", "band", "y", "x"), array, attrs)
    variable.encoding = {"preferred_chunks": preferred, "chunks": tuple(preferred.values()), "dtype": variable.dtype}
    ds = xr.Dataset({"data": variable}, coords=coords, attrs={"source": cube.name, "rumi:frame_unit": lay.frame_unit})
    ds.set_close(backend.close)
    return ds


class RumiBackendEntrypoint(BackendEntrypoint):
    """The ``rumi`` engine of :func:`xarray.open_dataset`."""

    description = "Open rumi files (.rumi) or their STAC items lazily, with frame-aligned chunks"
    url = "https://github.com/rumi-forge/rumi-forge"
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "mask_and_scale",
        "decode_times",
        "decode_timedelta",
        "use_cftime",
        "concat_characters",
        "decode_coords",
        "storage",
        "threads",
    )

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        mask_and_scale: bool | None = None,
        decode_times: Any = None,
        decode_timedelta: Any = None,
        use_cftime: Any = None,
        concat_characters: Any = None,
        decode_coords: Any = None,
        storage: Storage | None = None,
        threads: int | None = None,
    ) -> xr.Dataset:
        """Open a cube lazily; see the module documentation.

        ``mask_and_scale=True`` applies CF decoding: samples equal to
        ``_FillValue`` become NaN (integers become floats), and where every
        band shares one scale and offset (``scale_factor``, ``add_offset``)
        values become physical, as rioxarray's do. Bands of several scales keep
        theirs as band coordinates only (``ds.data * ds.scale + ds.offset``).
        By default the samples stay as stored, like rioxarray's ``open_rasterio``.

        ``decode_times=False`` gives the times as the file's integer seconds
        since 1970 with CF ``units`` and ``calendar``, not as ``datetime64``.
        ``xr.open_dataset``'s other decoders (``decode_timedelta``,
        ``use_cftime``, ``concat_characters``, ``decode_coords``) are taken
        and have nothing to do: no variable holds durations or characters,
        and ``spatial_ref`` is a coordinate already.
        """
        cube = Cube.open(filename_or_obj, storage=storage)
        try:
            ds = open_cube_dataset(cube, threads=threads, decode_times=decode_times is not False)
        except BaseException:
            cube.close()
            raise
        if mask_and_scale:
            ds = xr.decode_cf(ds, mask_and_scale=True, decode_times=False, decode_coords=False)
        if drop_variables is not None:
            ds = ds.drop_vars([drop_variables] if isinstance(drop_variables, str) else list(drop_variables), errors="ignore")
        return ds

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Claim ``.rumi`` paths and URLs, and STAC item dicts with a rumi data asset."""
        if isinstance(filename_or_obj, dict):
            return bool(filename_or_obj.get("assets", {}).get("data", {}).get("type") == "application/vnd.rumi")
        if isinstance(filename_or_obj, (str, os.PathLike)):
            text = os.fspath(filename_or_obj)
            return text.endswith(".rumi") or (os.path.isfile(text) and is_rumi_href(text))
        return False
