"""GeoTIFF output: the way back out of rumi.

:func:`write_geotiff` writes an ``(B, h, w)`` array as a tiled, compressed
GeoTIFF that keeps the CRS, the transform of the window read, one
description per band and each band's scale, offset and unit (which GDAL
applies to get physical values, as ``gdalinfo`` shows them). :func:`export_geotiffs` writes a whole cube as one
GeoTIFF per time step (``rumi export``), reading one time step at a time.
Samples are written as they are; encodings GeoTIFF cannot hold (boolean,
complex with 16-bit parts, bfloat16, float8) are refused rather than cast.

GDAL reads some of its settings from the environment, and four of them
change what a GeoTIFF says: where a PixelIsPoint raster lies, whether a
compound CRS keeps its vertical part, whether a ``.aux.xml`` is read (and
written), and whether a ``.msk`` beside the file is seen. GeoTIFFs are
written, and the converter's inputs read, with them pinned to GDAL's defaults
(:data:`PINNED_GDAL_CONFIG`), so that the same bytes come out whatever the
environment says.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from catalog.bands import Band, common_nodata
from catalog.errors import CatalogError
from rumi_core.errors import SourceError
from rumi_core.files import atomic_path

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from affine import Affine
    from numpy.typing import NDArray

    from catalog.cube import Cube

__all__ = ["GEOTIFF_DTYPES", "PINNED_GDAL_CONFIG", "export_geotiffs", "export_targets", "write_geotiff"]

GEOTIFF_DTYPES = frozenset(
    {"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64", "complex64", "complex128"}
)
"""Sample encodings a GeoTIFF holds without conversion."""

PINNED_GDAL_CONFIG = {
    "GTIFF_POINT_GEO_IGNORE": "NO",
    "GTIFF_REPORT_COMPD_CS": "YES",
    "GDAL_PAM_ENABLED": "YES",
    "GDAL_DISABLE_READDIR_ON_OPEN": "FALSE",
}
"""GDAL's defaults for the settings that change what a GeoTIFF says (the module docstring); a ``rasterio.Env`` of them
overrides the environment's."""


def write_geotiff(
    path: str | os.PathLike[str],
    data: NDArray[Any],
    *,
    crs: str | None,
    transform: Affine | None,
    descriptions: Sequence[str] | None = None,
    nodata: float | None = None,
    tags: dict[str, str] | None = None,
    band_tags: Sequence[dict[str, str]] | None = None,
    pixel_is_point: bool = False,
    radiometry: Sequence[Band] | None = None,
) -> str:
    """Write ``(B, h, w)`` samples as a GeoTIFF, atomically.

    Args:
        path: Output path.
        data: ``(B, h, w)`` array (``(h, w)`` is one band).
        crs: ``"EPSG:n"``, or None for no CRS.
        transform: Transform of the top-left pixel corner, as rasterio
            reports it (also for a PixelIsPoint raster), or None.
        descriptions: One description per band.
        nodata: The no-data value, if any.
        tags: Dataset-level metadata tags.
        band_tags: Metadata tags per band.
        pixel_is_point: Write ``AREA_OR_POINT=Point``: GDAL then stores the
            pixel-centre tiepoint, and rasterio reads ``transform`` back.
        radiometry: One band per output band, whose ``scale``, ``offset`` and
            ``unit`` the file states (rasterio's ``scales``, ``offsets`` and
            ``units``); a file whose bands state none is written without them.

    Returns:
        The path written.

    Raises:
        CatalogError: the dtype has no GeoTIFF equivalent, or the description count is wrong.
    """
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning, RasterioError

    array = data[np.newaxis] if data.ndim == 2 else data
    if array.ndim != 3:
        raise CatalogError(f"a GeoTIFF takes (bands, rows, cols) samples, got shape {data.shape}")
    if array.dtype.name not in GEOTIFF_DTYPES:
        raise CatalogError(f"GeoTIFF cannot hold {array.dtype.name} samples without conversion; read to .npy instead")
    count, height, width = array.shape
    if descriptions is not None and len(descriptions) != count:
        raise CatalogError(f"{len(descriptions)} band descriptions for {count} bands")
    if radiometry is not None and len(radiometry) != count:
        raise CatalogError(f"the radiometry of {len(radiometry)} bands for {count} bands")
    target = os.fspath(path)
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": count,
        "dtype": array.dtype.name,
        "crs": crs,
        "transform": transform,
        "nodata": nodata,
        "compress": "deflate",
        "interleave": "band",
        # GDAL takes a 4th band of 3 or 4 of Byte for alpha by default, and masks every pixel where it is 0 (the
        # near-infrared of an RGBN scene); unspecified, the 4th band is data, and the first three still show as RGB.
        "alpha": "UNSPECIFIED",
    }
    if height >= 256 and width >= 256:
        profile.update(tiled=True, blockxsize=256, blockysize=256)
    import warnings

    try:
        with warnings.catch_warnings(), atomic_path(target) as tmp, rasterio.Env(**PINNED_GDAL_CONFIG):
            if transform is None:
                warnings.simplefilter("ignore", NotGeoreferencedWarning)
            with rasterio.open(tmp, "w", **profile) as dst:
                dst.write(array)
                for i in range(count):
                    if descriptions is not None:
                        dst.set_band_description(i + 1, descriptions[i])
                    if band_tags is not None and band_tags[i]:
                        dst.update_tags(i + 1, **band_tags[i])
                dst.update_tags(**(tags or {}), AREA_OR_POINT="Point" if pixel_is_point else "Area")
                if radiometry is not None:
                    _state_radiometry(dst, radiometry)
    except RasterioError as err:
        raise CatalogError(f"cannot write {target}: {err}") from err
    return target


def _state_radiometry(dst: Any, bands: Sequence[Band]) -> None:
    """Set the scales, offsets and units of an open dataset from ``bands``, where any band states one."""
    scales = [b.scale_offset[0] for b in bands]
    offsets = [b.scale_offset[1] for b in bands]
    if any(s != 1.0 for s in scales) or any(o != 0.0 for o in offsets):
        dst.scales, dst.offsets = scales, offsets
    if any(b.unit for b in bands):
        dst.units = [b.unit or "" for b in bands]


def _stamp(value: str) -> str:
    start = value.split("/", 1)[0]
    return re.sub(r"[^0-9T]", "", start.replace("Z", ""))


def export_targets(cube: Cube, output: str | os.PathLike[str]) -> list[Path]:
    """The paths :func:`export_geotiffs` writes, in time order.

    An Image (one time step) goes to ``output`` itself; a Cube's time step
    ``t`` goes to ``<stem>_<YYYYMMDDTHHMMSS>.tif`` beside it (the start of
    the step), or ``<stem>_<tttt>.tif`` when two steps share a stamp.
    """
    out = Path(output)
    count = cube.layout.time_count
    if count == 1:
        return [out]
    stamps = [_stamp(v) for v in _time_values(cube)]
    if len(set(stamps)) != len(stamps):
        stamps = [f"{i:04d}" for i in range(count)]
    return [out.with_name(f"{out.stem}_{stamp}{out.suffix or '.tif'}") for stamp in stamps]


def export_geotiffs(
    cube: Cube,
    output: str | os.PathLike[str],
    *,
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Write every time step of a cube as its own GeoTIFF.

    Paths are those of :func:`export_targets`. Each file keeps the CRS, the
    transform and ``AREA_OR_POINT`` of the source, the no-data value the
    bands share, each band's scale, offset and unit (all three from the item;
    a bare ``.rumi`` file carries none), one description per band (the band
    text) and a ``TIME`` tag.

    Every file is first written into a hidden staging directory beside
    ``output`` and moved into place only once all of them are written, so
    a failure (a corrupt frame, a full disk) leaves no GeoTIFF behind.

    Args:
        cube: The cube to export.
        output: The output ``.tif`` (a Cube adds ``_<time>`` per step).
        threads: Decoding threads.
        progress: Called with 1 after each time step is written.

    Returns:
        The paths written, in time order.

    Raises:
        CatalogError: the samples cannot be stored in a GeoTIFF, or the
            files cannot be written.
    """
    targets = export_targets(cube, output)
    grid, crs = cube.grid, cube.crs
    bands = cube.bands
    values = _time_values(cube)
    descriptions = [b.description or b.name for b in bands]
    nodata = common_nodata(b.nodata for b in bands)
    parent = targets[0].parent
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{targets[0].stem}.", suffix=".partial", dir=parent))
    except OSError as err:
        raise CatalogError(f"cannot write into {parent or '.'}: {err.strerror}") from err
    try:
        staged: list[Path] = []
        for t, target in enumerate(targets):
            result = cube.read(times=[t], threads=threads, labels=False)
            path = staging / target.name
            write_geotiff(
                path,
                result.as_cube()[0],
                crs=crs,
                transform=grid.area_affine if grid is not None else None,
                descriptions=descriptions,
                nodata=nodata,
                tags={"TIME": values[t]},
                pixel_is_point=grid.pixel_is_point if grid is not None else False,
                radiometry=bands,
            )
            staged.append(path)
            if progress is not None:
                progress(1)
        for path, target in zip(staged, targets, strict=True):
            os.replace(path, target)
    except SourceError:
        raise  # reading the cube failed (an OSError too): its own message names the source
    except OSError as err:
        raise CatalogError(f"cannot write {targets[0]}: {err.strerror or err}") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [os.fspath(t) for t in targets]


def _time_values(cube: Cube) -> list[str]:
    from catalog.items import time_values

    return time_values(cube.times)
