"""Opening input rasters: local paths, and URLs through GDAL's virtual file systems.

rasterio opens ``https://`` URLs through
``/vsicurl/`` and ``gs://`` URLs through ``/vsigs/`` (credentials and
endpoints come from GDAL's usual configuration, such as
``GS_NO_SIGN_REQUEST`` or ``CPL_GS_ENDPOINT``; with ``STORAGE_EMULATOR_HOST``
set, both point at the emulator). For URLs the directory
listing on open is disabled, so opening a file costs one request, not a
listing of its bucket.

:class:`RasterCache` keeps a few datasets open per worker, so consecutive
frames of one file do not reopen it; :func:`gdal_env` bounds GDAL's block
cache so a worker's memory stays near the size of the frames it holds.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import rasterio
from rasterio.enums import Resampling
from rasterio.vrt import WarpedVRT

if TYPE_CHECKING:
    from pipelines.planning.plan import Warp

__all__ = ["GDAL_CACHE_BYTES", "GDAL_HTTP_MAX_RETRY", "RASTER_SUFFIXES", "RasterCache", "file_size", "gdal_env", "is_url"]

RASTER_SUFFIXES: Final = (".tif", ".tiff")
"""File suffixes a directory input is searched for (case-insensitive)."""

GDAL_CACHE_BYTES: Final = 16 << 20
"""GDAL block cache per worker process."""

GDAL_HTTP_MAX_RETRY: Final = 5
"""Retries of one HTTP request by GDAL (``/vsicurl/``, ``/vsigs/``) on 429 and 5xx."""

_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_url(href: str) -> bool:
    """Whether ``href`` is a URL (``https://``, ``gs://``...) rather than a local path."""
    return bool(_URL.match(href)) and not href.startswith("file://")


def gdal_env(href: str) -> rasterio.Env:
    """The GDAL configuration to open ``href`` with."""
    options: dict[str, Any] = {"GDAL_CACHEMAX": GDAL_CACHE_BYTES}
    if is_url(href):
        options["GDAL_DISABLE_READDIR_ON_OPEN"] = "EMPTY_DIR"
        # GDAL's own retry policy for 429 and 5xx answers (exponential backoff from the delay).
        options["GDAL_HTTP_MAX_RETRY"] = GDAL_HTTP_MAX_RETRY
        options["GDAL_HTTP_RETRY_DELAY"] = 0.5
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if href.startswith("gs://") and emulator:
        # As google-cloud-storage does: requests go to the emulator, unsigned, and no credentials are looked up.
        options["CPL_GS_ENDPOINT"] = emulator.rstrip("/") + "/"
        options["GS_NO_SIGN_REQUEST"] = "YES"
    return rasterio.Env(**options)


def file_size(href: str) -> int | None:
    """Size of a local file or a URL's object in bytes; None when it cannot be learnt.

    A URL costs one request (HTTP ``HEAD`` or a GCS metadata ``GET``) through
    :class:`catalog.storage.Storage`, so the run summary reports the input
    size of remote scenes too.
    """
    if is_url(href):
        from catalog.storage import Storage
        from rumi_core.errors import RumiError

        try:
            source = Storage().open(href)
            try:
                return source.size()
            finally:
                source.close()
        except (OSError, RumiError):
            return None
    try:
        return os.path.getsize(href)
    except OSError:
        return None


class RasterCache:
    """Open datasets of one worker, least recently used closed first.

    Datasets of off-grid files are :class:`rasterio.vrt.WarpedVRT` objects
    that resample onto the cube's grid on read.
    """

    def __init__(self, max_open: int = 16) -> None:
        self.max_open = max_open
        """How many datasets stay open at most."""
        self._open: OrderedDict[tuple[str, Warp | None], tuple[Any, ...]] = OrderedDict()

    def get(self, href: str, warp: Warp | None = None) -> Any:
        """Return an open dataset (or warped view) of ``href``.

        Raises:
            rasterio.errors.RasterioIOError: the file cannot be opened.
        """
        key = (href, warp)
        found = self._open.get(key)
        if found is not None:
            self._open.move_to_end(key)
            return found[-1]
        with gdal_env(href):
            src = rasterio.open(href)
        handles: tuple[Any, ...] = (src,)
        if warp is not None:
            vrt = WarpedVRT(
                src,
                crs=src.crs,
                transform=rasterio.Affine(*warp.transform),
                width=warp.width,
                height=warp.height,
                resampling=Resampling[warp.resampling],
            )
            handles = (src, vrt)
        self._open[key] = handles
        while len(self._open) > self.max_open:
            _, old = self._open.popitem(last=False)
            for handle in reversed(old):
                handle.close()
        return handles[-1]

    def close(self) -> None:
        """Close every open dataset."""
        while self._open:
            _, old = self._open.popitem()
            for handle in reversed(old):
                handle.close()
