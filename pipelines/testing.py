"""Test helpers shipped with the pipeline: generated scene archives on disk.

Tests, ``make demo`` and ``benchmarks/convert.py`` convert GeoTIFFs written
here from :func:`rumi_core.testing.synthetic_cube`: Sentinel-2-like uint16
reflectance with spatial structure, noise and clouds that move from date to
date. :func:`write_series` writes one file per date and band, named like
Sentinel-2 products (``<prefix>_<YYYYMMDD>T103021_B04.tif``) and dated by
their ``TIFFTAG_DATETIME`` tag, so the pipeline stacks the bands and dates
them exactly as it does real archives. :func:`make_scene` builds scene
metadata without a file, for the pure planning functions.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import rasterio

from catalog.grid import Grid
from pipelines.planning.scene import Scene, SourceBand
from rumi_core.testing import synthetic_cube
from rumi_core.times import parse_time

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["S2_BANDS", "garble_first_block", "make_scene", "write_geotiff", "write_huge_block", "write_series"]

S2_BANDS = ("B02", "B03", "B04", "B08")
"""Band tokens of the generated scenes: Sentinel-2 blue, green, red and near infrared."""


def write_geotiff(
    path: str,
    data: np.ndarray[Any, Any],
    *,
    epsg: int | None,
    transform: Sequence[float],
    nodata: float | None = None,
    tags: dict[str, str] | None = None,
    descriptions: Sequence[str | None] | None = None,
    tiled: bool = True,
    compress: str | None = "deflate",
) -> str:
    """Write a ``(bands, rows, cols)`` array as a GeoTIFF and return its path."""
    bands, height, width = data.shape
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": width,
        "height": height,
        "count": bands,
        "dtype": data.dtype.name,
        "crs": f"EPSG:{epsg}" if epsg else None,
        "transform": rasterio.Affine(*transform[:6]),
        "nodata": nodata,
    }
    if tiled and height >= 256 and width >= 256:
        profile.update(tiled=True, blockxsize=256, blockysize=256)
    if compress:
        profile["compress"] = compress
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
        if tags:
            dst.update_tags(**tags)
        for i, text in enumerate(descriptions or (), start=1):
            if text:
                dst.set_band_description(i, text)
    return path


def write_series(
    directory: str,
    *,
    dates: Sequence[str],
    size: int | tuple[int, int] = 256,
    bands: Sequence[str] = S2_BANDS,
    epsg: int = 32632,
    origin: tuple[float, float] = (600000.0, 5300040.0),
    resolution: float = 10.0,
    prefix: str = "S2_T32UPU",
    seed: int = 0,
    nodata: float | None = 0,
    dtype: str = "uint16",
) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Write one single-band GeoTIFF per date and band; return the paths and the ``(T, B, Y, X)`` data.

    ``dates`` are ``YYYY-MM-DD`` days; each scene is dated 10:30:21 UTC that
    day through ``TIFFTAG_DATETIME``.
    """
    height, width = (size, size) if isinstance(size, int) else size
    os.makedirs(directory, exist_ok=True)
    cube = synthetic_cube(len(dates), len(bands), height, width, seed=seed, dtype=dtype)
    transform = (resolution, 0.0, origin[0], 0.0, -resolution, origin[1])
    paths: list[str] = []
    for t, day in enumerate(dates):
        moment = dt.datetime.fromisoformat(day).replace(hour=10, minute=30, second=21)
        for b, token in enumerate(bands):
            name = f"{prefix}_{moment:%Y%m%dT%H%M%S}_{token}.tif"
            paths.append(
                write_geotiff(
                    os.path.join(directory, name),
                    cube[t, b][np.newaxis],
                    epsg=epsg,
                    transform=transform,
                    nodata=nodata,
                    tags={"TIFFTAG_DATETIME": f"{moment:%Y:%m:%d %H:%M:%S}"},
                )
            )
    return paths, cube


def make_scene(
    href: str,
    time: str = "2023-01-05",
    *,
    transform: Sequence[float] = (10.0, 0.0, 600000.0, 0.0, -10.0, 5300000.0),
    shape: tuple[int, int] = (64, 64),
    bands: Sequence[str] = ("B1",),
    dtype: str = "uint16",
    nodata: float | None = 0,
    stack: str | None = None,
    epsg: int = 32632,
) -> Scene:
    """Scene metadata without a file, for testing the pure planning functions (:mod:`pipelines.planning.grouping`)."""
    a, b, c, d, e, f = (float(v) for v in transform[:6])
    return Scene(
        href=href,
        grid=Grid(f"EPSG:{epsg}", (a, b, c, d, e, f), shape[0], shape[1]),
        dtype=dtype,
        nodata=nodata,
        bands=tuple(SourceBand(name, index=i) for i, name in enumerate(bands, start=1)),
        time=parse_time(time),
        stack=stack or href,
        size=100,
    )


def garble_first_block(path: str, fill: bytes = b"\xff") -> None:
    """Overwrite the first block of band 1 of a GeoTIFF with ``fill`` bytes: its metadata still reads, its pixels do not.

    The first block, not the last one, which reading a scene's metadata checks.
    """
    with rasterio.open(path) as ds:
        offset = int(ds.get_tag_item("BLOCK_OFFSET_0_0", "TIFF", bidx=1))
        size = int(ds.get_tag_item("BLOCK_SIZE_0_0", "TIFF", bidx=1))
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(fill * size)


def write_huge_block(path: str, *, size: int = 25000, epsg: int = 32632, origin: tuple[float, float] = (600000.0, 5300000.0)) -> str:
    """Write a dated GeoTIFF of ``size`` x ``size`` uint16 pixels in one deflated strip, left sparse (about 400 bytes
    on disk), and return its path: a block of 1.2 GiB decoded at the default size, past what a worker may decode."""
    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "uint16", "crs": f"EPSG:{epsg}"}
    transform = rasterio.Affine(10.0, 0.0, origin[0], 0.0, -10.0, origin[1])
    with rasterio.open(path, "w", transform=transform, compress="deflate", blockysize=size, sparse_ok=True, **profile) as dst:
        dst.update_tags(TIFFTAG_DATETIME="2020:01:01 00:00:00")
    return path
