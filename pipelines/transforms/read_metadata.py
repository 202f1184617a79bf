"""Reading scene metadata with rasterio.

:func:`read_scene` opens one scene and returns its
:class:`~pipelines.planning.scene.Scene`: CRS as an EPSG code, transform, shape, dtype,
nodata, raster type, band descriptions, scale, offset and unit, and the
acquisition time (:mod:`pipelines.planning.timestamps`). It also reads the file's last
block, so a truncated or corrupt GeoTIFF is caught here rather than halfway
through a cube.

A scene that cannot be used raises :class:`~pipelines.errors.SceneError`
with a reason code; :class:`ReadSceneMetadata` turns that into a dead letter
and counts it.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
import numpy as np
import rasterio
from apache_beam.pvalue import PCollection
from rasterio.enums import ColorInterp, MaskFlags
from rasterio.errors import RasterioError
from rasterio.windows import Window

from catalog.credentials import unsigned
from catalog.errors import ItemError
from catalog.extension import VERTICAL_CRS
from catalog.grid import Grid
from pipelines import landsat
from pipelines.crs import closest_epsg, horizontal_crs, is_engineering
from pipelines.errors import SceneError
from pipelines.planning.bands import band_name, band_token, stack_id
from pipelines.planning.hrefs import href_path
from pipelines.planning.scene import Radiometry, Scene, SceneRef, SourceBand, nodata_key
from pipelines.planning.timestamps import resolve_time, suggest_time_pattern
from pipelines.rasters import (
    MAX_BLOCK_BYTES,
    block_bytes,
    file_stat,
    gdal_env,
    gdal_path,
    has_internal_mask,
    mask_location,
    raster_error_text,
    read_failures,
    retry_network,
)
from pipelines.sentinel2 import safe
from pipelines.sentinel2.products import product_tags
from pipelines.sidecars import MetadataError
from pipelines.transforms import frames
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.dead_letters import DeadLetter
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["STAGE", "ReadSceneMetadata", "read_or_reject", "read_scene"]

STAGE: Final = "ReadSceneMetadata"
"""The stage named by the dead letters of scenes whose metadata could not be read or is refused."""


def _check_blocks(ds: rasterio.io.DatasetReader, href: str) -> None:
    """Refuse blocks larger than :data:`~pipelines.rasters.MAX_BLOCK_BYTES`, then read the last one.

    Raises:
        SceneError: ``large-blocks``.
    """
    need = block_bytes(ds)
    if need > MAX_BLOCK_BYTES:
        block_h, block_w = max(ds.block_shapes, key=lambda shape: shape[0] * shape[1])
        raise SceneError(
            f"its blocks of {block_w} x {block_h} pixels decode to {need / 2**30:.1f} GiB each, and GDAL decodes a whole block "
            f"to read any pixel of it; a block may decode to at most {MAX_BLOCK_BYTES >> 30} GiB. Tile it first "
            "(e.g. gdal_translate -co TILED=YES -co COMPRESS=DEFLATE in.tif out.tif)",
            href=href,
            reason="large-blocks",
        )
    block_h, block_w = ds.block_shapes[-1]
    row = (ds.height - 1) // block_h * block_h
    col = (ds.width - 1) // block_w * block_w
    ds.read(ds.count, window=Window(col, row, min(block_w, ds.width - col), min(block_h, ds.height - row)))


def _placed_grid(crs: str, transform: tuple[float, ...], height: int, width: int, point: bool, href: str) -> Grid:
    """The scene's grid, once its footprint is known to lie on the Earth (what its catalogue item will show).

    Raises:
        SceneError: ``bad-transform``: a coefficient is not finite, the
            corners collapse to a point or a line in float64 or lie at
            infinity (a pixel size of 1e-300 or 1e300, an origin of 1e308),
            or they have no longitude and latitude in the CRS.
    """
    try:
        grid = Grid(crs, transform, height, width, point)  # type: ignore[arg-type]
        grid.footprint(densify=8)  # as the item draws it
    except ItemError as err:
        raise SceneError(
            f"its georeferencing places it nowhere on the Earth: {err}; "
            "correct the geotransform (e.g. gdal_edit.py -a_ullr ulx uly lrx lry)",
            href=href,
            reason="bad-transform",
        ) from err
    return grid


def _band_texts(ds: rasterio.io.DatasetReader, href: str) -> tuple[tuple[str | None, ...], tuple[str | None, ...]]:
    """The bands' descriptions and units.

    Raises:
        SceneError: ``bad-metadata``, one of them is not UTF-8 text.
    """
    try:
        return tuple(ds.descriptions), tuple(ds.units)
    except UnicodeDecodeError as err:
        raise SceneError(
            f"a band description or unit is not UTF-8 text ({err.object[max(0, err.start - 20) : err.end + 20]!r}); "
            "rewrite it as UTF-8 and convert again",
            href=href,
            reason="bad-metadata",
        ) from err


def _finite(value: float, what: str, href: str) -> float:
    """``value``, which the file states as ``what``.

    Raises:
        SceneError: ``bad-metadata``, the value is not finite.
    """
    if not math.isfinite(value):
        raise SceneError(
            f"{what} is {value}, not a finite number; correct it (e.g. gdal_edit.py -scale 1 -offset 0)", href=href, reason="bad-metadata"
        )
    return value


def _no_bands(ds: rasterio.io.DatasetReader) -> str:
    """Why ``ds``, which has no bands, is not a scene: a container of subdatasets (NetCDF, HDF) names a few of them."""
    names = list(ds.subdatasets)
    if not names:
        return "the file has no raster bands"
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"the file holds {len(names)} subdatasets ({shown}) and no bands of its own;"
        f" extract the variables to convert as GeoTIFFs first (e.g. gdal_translate {names[0]} out.tif)"
    )


def _check_one_image(ds: rasterio.io.DatasetReader, href: str) -> None:
    """Refuse a file that is not one image of bands: a container of subdatasets, or a GeoTIFF of several full-size
    images (pages; not overviews or masks), of which GDAL opens the first alone.

    Raises:
        SceneError: ``subdatasets`` or ``unreadable``.
    """
    if ds.count == 0:
        raise SceneError(_no_bands(ds), href=href, reason="subdatasets" if ds.subdatasets else "unreadable")
    if ds.driver == "GTiff" and ds.subdatasets:
        raise SceneError(
            f"the file holds {len(ds.subdatasets)} images (TIFF pages), and GDAL reads only the first as the file's bands, "
            f"so the others would be lost; split them into one GeoTIFF each (e.g. gdal_translate {ds.subdatasets[-1]} out.tif)",
            href=href,
            reason="subdatasets",
        )


def _no_geotransform(ds: rasterio.io.DatasetReader) -> str | None:
    """Why ``ds`` has no geotransform to place its pixels with, or None when it has one.

    GDAL gives the identity transform (pixel coordinates, rows running south)
    to a raster without a geotransform, such as a Sentinel-1 SLC located by
    ground control points or a satellite image located by RPCs. Such a file
    is not on any grid until it is warped, whatever its CRS; saying so names
    the fix, where "no CRS" or "not north-up" would name another. A file that
    declares the identity as its geotransform gets the same answer.
    """
    if not ds.transform.is_identity:
        return None
    if ds.rpcs is not None:
        return (
            "the file is located by rational polynomial coefficients (RPCs), not a geotransform;"
            " orthorectify it first (e.g. gdalwarp -rpc -t_srs EPSG:n)"
        )
    gcps, gcp_crs = ds.gcps
    if len(gcps) == 1:
        # A GeoTIFF tiepoint without a usable ModelPixelScaleTag (absent, or 0): GDAL gives it as one GCP.
        return (
            "the file has one tiepoint and no pixel size (its ModelPixelScale is 0 or missing), so nothing places its other "
            "pixels; set the pixel size (e.g. gdal_edit.py -tr xres yres) and convert again"
        )
    if gcps:
        where = f" in {gcp_crs.to_string()[:80]}" if gcp_crs else ""
        return (
            f"the file is located by {len(gcps)} ground control points{where}, not a geotransform;"
            " warp it first (e.g. gdalwarp -t_srs EPSG:n)"
        )
    return (
        "the file has no geotransform (GDAL gives the identity, pixel coordinates);"
        " assign one (e.g. gdal_edit.py -a_ullr ulx uly lrx lry) and convert again"
    )


def _declared_radiometry(href: str) -> Radiometry | None:
    """The ``(scale, offset, unit)`` a product's metadata file declares for a single-band file, or None.

    A Sentinel-2 SAFE's ``MTD_MSIL2A.xml`` (:mod:`pipelines.sentinel2.safe`) or a
    Landsat Collection 2 Level-2 ``_MTL.json`` (:mod:`pipelines.landsat`); a
    file it exists for but cannot say is a dead letter that names it.
    """
    try:
        return safe.file_radiometry(href) or landsat.file_radiometry(href)
    except MetadataError as err:
        raise SceneError(f"the product metadata does not say what the values mean: {err}", href=href, reason="bad-metadata") from err


def _declared_nodata(href: str, dtype: str) -> float | None:
    """The nodata value a product's metadata declares for a single-band file that states none (a SAFE's JP2s), or None.

    Raises:
        SceneError: ``bad-metadata``, the metadata file cannot be read;
            ``bad-nodata``, its value is no sample of the file's type.
    """
    try:
        declared = safe.file_nodata(href)
    except MetadataError as err:
        raise SceneError(f"the product metadata does not say what the values mean: {err}", href=href, reason="bad-metadata") from err
    return None if declared is None else _file_nodata(declared, dtype, href)


def _described_bands(
    ref: SceneRef, bands: tuple[SourceBand, ...], nodata: float | None, dtype: str
) -> tuple[tuple[SourceBand, ...], float | None]:
    """The file's ``bands`` and ``nodata`` with what is known of them beside the file.

    In order: the radiometry and nodata the STAC asset states; for a single-band file
    of a known product, its band table's text, radiometry and nodata
    (:class:`~pipelines.planning.scene.ProductBand`), or else the nodata
    (where the file states none) and radiometry its product's metadata file
    declares (:func:`_declared_nodata`, :func:`_declared_radiometry`).

    Raises:
        SceneError: the STAC asset or the product contradicts the file, or
            the product's metadata file cannot say.
    """
    href = ref.href
    if ref.band_radiometry is not None:
        bands = _with_stated_radiometry(bands, ref.band_radiometry, href)
    if ref.nodata is not None:
        nodata = _with_stated_nodata(nodata, ref.nodata, dtype, href)
    product = ref.product
    if product is not None:
        if len(bands) != 1:
            raise SceneError(
                f"expected a single-band file for {product.name!r}, got {len(bands)} bands", href=href, reason="band-count-mismatch"
            )
        # The product's band table knows the text, radiometry and nodata better than the file.
        own = bands[0]
        band = SourceBand(product.name, own.description, product.scale, product.offset, own.unit, product.categorical, index=1)
        return (band,), product.nodata
    if nodata is None and len(bands) == 1:
        nodata = _declared_nodata(href, dtype)
    if ref.band_radiometry is None and len(bands) == 1 and (declared := _declared_radiometry(href)) is not None:
        # The product's metadata file knows what the file's values mean; the file does not say.
        scale, offset, unit = declared
        return (replace(bands[0], scale=scale, offset=offset, unit=unit),), nodata
    return bands, nodata


def _with_stated_radiometry(bands: tuple[SourceBand, ...], stated: tuple[Radiometry | None, ...], href: str) -> tuple[SourceBand, ...]:
    """``bands`` with the scale, offset and unit their STAC asset states (:func:`~pipelines.transforms.discover.asset_radiometry`).

    What the asset states is recorded as the file's own scale and offset
    would be (the raster extension defines them alike: value = DN * scale +
    offset): a catalogue's COGs often carry none of their own (Landsat
    Collection 2 on the Planetary Computer). A unit the asset does not state
    is the file's. Where the file states another scale or offset than the asset,
    neither is taken for the other: the scene is refused, naming both.

    Raises:
        SceneError: ``bad-metadata``, the asset describes another number of
            bands than the file has, or a band's scale or offset that the file
            states otherwise.
    """
    if len(stated) != len(bands):
        raise SceneError(
            f"the STAC asset states the radiometry of {len(stated)} bands, the file has {len(bands)}", href=href, reason="bad-metadata"
        )
    out = []
    for band, radiometry in zip(bands, stated, strict=True):
        if radiometry is None:
            out.append(band)
            continue
        scale, offset, unit = radiometry
        own = (band.scale, band.offset)
        agree = math.isclose(own[0], scale, rel_tol=1e-9) and math.isclose(own[1], offset, rel_tol=1e-9, abs_tol=1e-12)
        if own != (1.0, 0.0) and not agree:
            raise SceneError(
                f"band {band.index}: the STAC asset states scale {scale} and offset {offset}, the file scale {own[0]} and offset {own[1]}",
                href=href,
                reason="bad-metadata",
            )
        out.append(replace(band, scale=scale, offset=offset, unit=unit or band.unit))
    return tuple(out)


def _as_sample(value: float, dtype: str) -> float | None:
    """``value`` as a ``dtype`` sample would hold it, or None when none can (NaN or 0.5 or 70000 for uint16).

    A float is rounded to the samples' precision, as GDAL's nodata mask
    compares it (``static_cast<float>`` for Float32): ``-3.4e+38``, as GDAL
    writes the text, is the float32 ``-3.3999999521443642e+38``, and
    ``-3.40282346638529e+38`` (float32's lowest to 15 digits) that lowest.

    >>> _as_sample(-0.0, "uint16"), _as_sample(0.5, "uint16"), _as_sample(float("nan"), "float32")
    (0.0, None, nan)
    >>> _as_sample(0.1, "float32"), _as_sample(-3.40282346638529e38, "float32"), _as_sample(1e39, "float32")
    (0.10000000149011612, -3.4028234663852886e+38, None)
    """
    kind = np.dtype(dtype).kind
    if kind in "iu":
        info = np.iinfo(dtype)
        holds = value.is_integer() and info.min <= value <= info.max
        return float(int(value)) if holds else None  # -0.0 is 0 as an integer sample, and keys as one
    if not math.isfinite(value):
        return value
    with np.errstate(over="ignore"):
        sample = float(np.array(value).astype(dtype).real)  # a complex sample's parts are of its float type
    return sample if math.isfinite(sample) else None


def _shown(value: float) -> str:
    """``value`` as a message shows it: short where that is exact (70000, 0.5), else every digit (-3.40282346638529e+38).

    >>> _shown(70000.0), _shown(0.5), _shown(-3.40282346638529e38)
    ('70000', '0.5', '-3.40282346638529e+38')
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _file_nodata(nodata: float, dtype: str, href: str) -> float:
    """The file's nodata value as its samples hold it.

    GDAL keeps a value no sample can hold, such as 0.5 for uint16, and then
    masks the samples it truncates to (0); the item would state 0.5, and a
    reader casting it to the samples' type would mask 0 where one comparing
    values would mask nothing. Neither is taken for the file's meaning.

    Raises:
        SceneError: ``bad-nodata``, no ``dtype`` sample holds the value.
    """
    sample = _as_sample(nodata, dtype)
    if sample is None:
        raise SceneError(
            f"its nodata value {_shown(nodata)} is no {dtype} sample, and GDAL and readers of the catalogue would take it for "
            "different ones; set one the samples can hold (e.g. gdal_edit.py -a_nodata 0) and convert again",
            href=href,
            reason="bad-nodata",
        )
    return sample


def _check_wide_nodata(ds: Any, dtype: str, href: str) -> None:
    """Refuse a 64-bit integer band whose nodata no double is.

    rasterio hands nodata over as a double, and the catalogue states one;
    GDAL masks by the exact integer. ``-2**63`` (int64's fill) is a double
    and converts; ``2**53 + 1`` came back as ``2**53``, masking other pixels,
    and uint64's largest value as no nodata at all. GDAL's exact value is
    read from the band as its VRT driver writes it.

    Raises:
        SceneError: ``bad-nodata``, a band of ``int64`` or ``uint64`` samples
            has a nodata value that is no double.
    """
    if dtype not in ("int64", "uint64") or not any(MaskFlags.nodata in flags for flags in ds.mask_flag_enums):
        return
    exact = _gdal_nodata_text(ds)
    try:
        value = int(exact or "")
    except ValueError:
        return  # no integer text: GDAL has no 64-bit nodata of its own, and rasterio's is the band's
    if ds.nodata is None or float(value) != value or ds.nodata != value:
        raise SceneError(
            f"its {dtype} nodata is {value}, which no double is, and rasterio and the catalogue hold nodata as a double: "
            "the item would state another value than GDAL masks with; set one that is (e.g. gdal_edit.py -a_nodata 0, "
            "or a value within 2**53) and convert again",
            href=href,
            reason="bad-nodata",
        )


def _gdal_nodata_text(ds: Any) -> str | None:
    """Band 1's nodata exactly as GDAL holds it: the text of the ``NoDataValue`` a VRT copy of ``ds`` states.

    rasterio has no exact getter for 64-bit integers; GDAL's VRT driver writes
    the integer whole. The copy describes the bands only (no pixel is read).
    """
    import tempfile
    from pathlib import Path

    import rasterio.shutil

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "band.vrt"
        rasterio.shutil.copy(ds, str(path), driver="VRT")
        found = re.search(r"<NoDataValue>([^<]*)</NoDataValue>", path.read_text(encoding="utf-8"))
    return found.group(1).strip() if found else None


def _with_stated_nodata(nodata: float | None, stated: float, dtype: str, href: str) -> float:
    """The file's ``nodata``, or where it has none the value its STAC asset states (:func:`~pipelines.transforms.discover.asset_nodata`).

    A catalogue's COGs may carry no nodata tag of their own, and the item says
    which value marks missing pixels. A value no ``dtype`` sample can hold
    (NaN or 70000 for uint16) says the asset describes another file; and
    where the file states another value, neither is taken for the other.

    Raises:
        SceneError: ``bad-metadata``, the stated value is no ``dtype`` sample,
            or the file states another one.
    """
    sample = _as_sample(stated, dtype)
    if sample is None:
        raise SceneError(
            f"the STAC asset states nodata {_shown(stated)}, which no {dtype} sample can hold", href=href, reason="bad-metadata"
        )
    stated = sample
    if nodata is None or nodata_key(nodata) == nodata_key(stated):
        return stated
    raise SceneError(f"the STAC asset states nodata {_shown(stated)}, the file {_shown(nodata)}", href=href, reason="bad-metadata")


_SRTM_TILE: Final = re.compile(r"[NS]\d{2}[EW]\d{3}(\.SRTMGL\d)?\.hgt", re.IGNORECASE)
"""The names GDAL's SRTMHGT driver reads: the tile's south-west corner (``N46E007.hgt``)."""


def read_scene(ref: SceneRef, *, time_pattern: str | None = None, time: str | None = None) -> Scene:
    """Read the metadata of one scene.

    Args:
        ref: The scene, with what STAC said about it.
        time_pattern: ``--time-pattern``, searched in the href.
        time: ``--time``, the time of a scene nothing else dates.

    Raises:
        SceneError: the file is unreadable (``unreadable``), has no
            geotransform (``no-geotransform``: located by GCPs, RPCs or
            nothing), has no CRS (``missing-crs``) or none with an EPSG code
            (``crs-not-epsg``),
            holds samples rumi cannot store (``unsupported-dtype``), states
            different nodata values for its bands or one no sample holds
            (``bad-nodata``), has an
            internal mask but no nodata value for its masked pixels
            (``masked``), or has no valid time (``unknown-time``, ``bad-time``).
    """
    return retry_network(lambda: _read_scene(ref, time_pattern=time_pattern, time=time))


def _refuse_read_failures(failed: list[str], href: str) -> None:
    """Refuse a file GDAL opened without what it failed to read (:func:`pipelines.rasters.read_failures`).

    A file cut short in its georeferencing opened as one with no geotransform,
    and its dead letter advised assigning one.
    """
    if failed:
        text = f"the file is cut short or damaged: GDAL could not read its metadata ({failed[0]})"
        raise SceneError(text, href=href, reason="unreadable")


def _read_scene(ref: SceneRef, *, time_pattern: str | None, time: str | None) -> Scene:
    """:func:`read_scene`, tried once."""
    href = ref.href
    try:
        with read_failures() as failed, gdal_env(href), rasterio.open(gdal_path(href)) as ds:
            _refuse_read_failures(failed, href)
            _check_one_image(ds, href)
            # Before the CRS: a file located by GCPs often has no CRS of its
            # own, and assigning one would not put it on a grid.
            unplaced = _no_geotransform(ds)
            if unplaced is not None:
                raise SceneError(unplaced, href=href, reason="no-geotransform")
            if ds.crs is None:
                raise SceneError(
                    "the file has no CRS; assign one (e.g. gdal_edit.py -a_srs EPSG:n) and convert again", href=href, reason="missing-crs"
                )
            epsg, vertical, wkt = horizontal_crs(ds.crs)
            if not epsg and is_engineering(wkt):
                raise SceneError(
                    f"the CRS {ds.crs.to_string()[:80]} is an engineering (local) one, tied to no place on the Earth, and rumi "
                    "stores EPSG codes only, which no warp reaches from it; assign the CRS its coordinates are in, if known "
                    "(e.g. gdal_edit.py -a_srs EPSG:n)",
                    href=href,
                    reason="crs-not-epsg",
                )
            if not epsg:
                closest = closest_epsg(wkt)
                target = "EPSG:n" if closest is None else f"EPSG:{closest}, the EPSG CRS closest to it but not the same"
                what = "the CRS" if vertical is None else "the horizontal part of the CRS"
                raise SceneError(
                    f"{what} {ds.crs.to_string()[:80]} has no EPSG code, and rumi stores EPSG codes only;"
                    f" warp it to one first (e.g. gdalwarp -t_srs {target})",
                    href=href,
                    reason="crs-not-epsg",
                )
            if len(set(ds.dtypes)) != 1:
                raise SceneError(f"bands differ in sample type {sorted(set(ds.dtypes))}", href=href, reason="unsupported-dtype")
            dtype = ds.dtypes[0]
            try:
                encoding_for_dtype(dtype)
            except InvalidInputError as err:
                # GDAL's CInt16 and CInt32: the specification's complex samples have IEEE float components only.
                widen = " (complex samples are IEEE floating point); widen it first, e.g. gdal_translate -ot CFloat32"
                raise SceneError(
                    f"sample type {dtype} is not a rumi sample encoding" + (widen if dtype.startswith("complex_int") else f": {err}"),
                    href=href,
                    reason="unsupported-dtype",
                ) from err
            values = sorted({nodata_key(v) for v in ds.nodatavals})
            if len(values) > 1:
                # A cube's bands share one nodata value: taking band 1's would make another band's
                # nodata pixels valid, and its valid pixels of band 1's value nodata.
                raise SceneError(
                    f"its bands state different nodata values ({', '.join(values)}), and the bands of a cube share one; "
                    "give every band the same one (e.g. gdal_edit.py -a_nodata N) and convert again",
                    href=href,
                    reason="bad-nodata",
                )
            tags = {**ds.tags(ns="IMAGERY"), **ds.tags()}
            point = tags.get("AREA_OR_POINT", "Area").lower() == "point"
            grid = _placed_grid(f"EPSG:{int(epsg)}", tuple(float(v) for v in ds.transform[:6]), ds.height, ds.width, point, href)
            token = band_token(href) if ds.count == 1 else None
            hints = ref.band_names if ref.band_names and len(ref.band_names) == ds.count else None
            if hints is None:
                hints = safe.file_band_texts(href, ds.count)  # a SAFE's JP2s have no band descriptions
            descriptions, units = _band_texts(ds, href)
            bands = tuple(
                SourceBand(
                    index=i,
                    name=band_name(description=descriptions[i - 1], hint=hints[i - 1] if hints else None, token=token, index=i),
                    description=descriptions[i - 1],
                    scale=_finite(float(ds.scales[i - 1]), f"band {i}'s scale", href),
                    offset=_finite(float(ds.offsets[i - 1]), f"band {i}'s offset", href),
                    unit=units[i - 1] or None,
                    # Classes: a palette's indices, or a SAFE's scene classification and masks.
                    categorical=ds.colorinterp[i - 1] == ColorInterp.palette or safe.holds_classes(href),
                )
                for i in range(1, ds.count + 1)
            )
            _check_blocks(ds, href)
            _check_wide_nodata(ds, dtype, href)
            nodata = None if ds.nodata is None else _file_nodata(float(ds.nodata), dtype, href)
            bands, nodata = _described_bands(ref, bands, nodata, dtype)
            if nodata is None and has_internal_mask(ds):
                # rumi marks invalid pixels only with a nodata value: converting the pixels
                # alone would make the masked ones valid, so the file names the value first.
                raise SceneError(
                    f"the file has a mask band ({mask_location(ds)}) and no nodata value, and rumi marks invalid "
                    "pixels only with nodata; declare the value masked pixels should take "
                    "(e.g. gdal_edit.py -a_nodata 0) and convert again",
                    href=href,
                    reason="masked",
                )
    except RasterioError as err:
        hint = ""
        if href_path(href).lower().endswith(".hgt") and not _SRTM_TILE.fullmatch(posixpath.basename(href_path(href))):
            hint = "; GDAL reads an SRTM height tile by its name, such as N46E007.hgt: give it back that name"
        elif href.startswith("s3://eodata/"):
            # Copernicus Data Space's items name their files in its own S3 service, which GDAL takes for AWS's.
            hint = (
                "; s3://eodata/ is Copernicus Data Space's S3 service: set AWS_S3_ENDPOINT=eodata.dataspace.copernicus.eu, "
                "AWS_VIRTUAL_HOSTING=FALSE and its S3 keys as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        text = raster_error_text(err)
        raise SceneError(f"cannot read the raster: {text.rstrip('.') if hint else text}{hint}", href=href, reason="unreadable") from err
    try:
        seconds = resolve_time(href=href, stac=ref.time, tags=tags, pattern=time_pattern, fallback=time)
    except ValueError as err:
        raise SceneError(f"invalid acquisition time: {err}", href=href, reason="bad-time") from err
    if seconds is None:
        suggestion = suggest_time_pattern(href)
        advice = f"; its name holds a date, which --time-pattern '{suggestion}' reads" if suggestion else ""
        raise SceneError(
            "no acquisition time: no STAC datetime, scene ID, --time-pattern match or TIFFTAG_DATETIME; pass --time or --time-pattern"
            + advice,
            href=href,
            reason="unknown-time",
        )
    stat = file_stat(href)
    return Scene(
        href=href,
        grid=grid,
        dtype=dtype,
        nodata=nodata,
        bands=bands,
        time=seconds,
        stack=ref.stack or stack_id(href),
        size=stat.size,
        version=stat.version,
        family=ref.product.family if ref.product else None,
        tags=tuple(sorted((ref.product.tags if ref.product else product_tags(href)) + (((VERTICAL_CRS, vertical),) if vertical else ()))),
        replaces=ref.product.replaces if ref.product else (),
    )


@dataclass
class ReadSceneMetadata(DataclassPTransform[PCollection[SceneRef | DeadLetter], PCollection[Scene | DeadLetter]]):
    """Read each scene's metadata; unusable scenes become dead letters.

    Dead letters already in the input pass through unchanged.
    """

    time_pattern: str | None = None
    """``--time-pattern``."""
    time: str | None = None
    """``--time``."""
    unreadable: tuple[tuple[str, str], ...] = ()
    """``(href, message)`` of scenes whose pixels could not be read: each becomes a ``read-failed`` dead letter unread."""

    def expand(self, refs: PCollection[SceneRef | DeadLetter]) -> PCollection[Scene | DeadLetter]:
        """One Map step."""
        out: PCollection[Scene | DeadLetter] = refs | "Read" >> beam.Map(
            read_or_reject, time_pattern=self.time_pattern, time=self.time, unreadable=dict(self.unreadable)
        )
        return out


def read_or_reject(
    ref: SceneRef | DeadLetter, *, time_pattern: str | None = None, time: str | None = None, unreadable: Mapping[str, str] | None = None
) -> Scene | DeadLetter:
    """Read one scene, or return its dead letter; dead letters, and scenes named in ``unreadable``, go to the dead letters."""
    if isinstance(ref, DeadLetter):
        return ref
    failed = unreadable.get(unsigned(ref.href)) if unreadable else None  # named as the dead letters name it
    if failed is not None:
        inc(ReadSceneMetadata, "dead_letter.read-failed")
        return DeadLetter(ref.href, "read-failed", failed, frames.STAGE)
    try:
        scene = read_scene(ref, time_pattern=time_pattern, time=time)
    except SceneError as err:
        inc(ReadSceneMetadata, f"dead_letter.{err.reason}")
        return DeadLetter.from_error(err, STAGE)
    inc(ReadSceneMetadata, "scenes")
    inc(ReadSceneMetadata, "file_bytes", scene.size or 0)
    return scene
