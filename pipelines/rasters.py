"""Opening input rasters: local paths, and URLs through GDAL's virtual file systems.

rasterio opens ``https://`` URLs through
``/vsicurl/`` and ``gs://`` URLs through ``/vsigs/`` (credentials and
endpoints come from GDAL's usual configuration, such as
``GS_NO_SIGN_REQUEST`` or ``CPL_GS_ENDPOINT``; with ``STORAGE_EMULATOR_HOST``
set, both point at the emulator). For URLs the directory
listing on open is disabled, so opening a file costs one request, not a
listing of its bucket.

:class:`RasterCache` keeps a few datasets open per worker, so consecutive
frames of one file do not reopen it; :func:`fit_block_cache` bounds GDAL's
block cache so a worker's memory stays near the size of the frames it holds.

The bound is what a window read needs (:func:`fit_block_cache`), not a fixed
size. The frame stage reads a source run's window in one read
(:func:`pipelines.transforms.frames.run_frames`), and warped bands and cells
window after window; the only blocks a read can share with the next one
along a row are those straddling their common edge: for a tiled source, one
column of blocks; for a striped one, every strip of the window's rows, which
each window of the row decodes again if they were evicted. GDAL's cache is
least-recently-used, so a cap of the blocks one window touches plus one
column of them keeps exactly those. 512 x 512 uint16
windows of a source tiled in 256 x 256 blocks need at most 1.9 MiB (a fixed
16 MiB held 14 MiB more per worker, of blocks no read looked at again), of
a Sentinel-2 COG's 1024 x 1024 blocks 5-15 MiB, of a striped 10980-wide
band 11 MiB.

GDAL's block cache is one per process, whatever thread reads, so the bound
is set for the process when it grows (``GDAL_CACHEMAX`` through
:func:`rasterio.env.set_gdal_config`), not in a ``rasterio.Env`` around each
read: entering and leaving one took 45 us, 12 % of the CPU of a conversion
in 64-pixel tiles read tile by tile (5.2-5.4 against 4.5-4.6 CPU s for
8,192 frames). :func:`kept_block_cache` gives the caller's process its own
cache back afterwards.

A file whose validity is a mask band of its own (GDAL's per-dataset mask,
such as a COG written with an internal mask; :func:`has_internal_mask`) is
read with that mask: its masked pixels take the cube's nodata value, as
``dataset.read(masked=True).filled(nodata)`` would give them. Warped, GDAL's
warper does the same: it takes the mask as the source's validity and writes
the :class:`~rasterio.vrt.WarpedVRT`'s nodata, the source's, where it is 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import numpy as np
import rasterio
from rasterio.enums import Interleaving, MaskFlags, Resampling
from rasterio.errors import RasterioError
from rasterio.vrt import WarpedVRT
from requests.utils import requote_uri

from catalog.geotiff import PINNED_GDAL_CONFIG
from pipelines.archives import archive_of, member_size
from pipelines.errors import SceneError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pipelines.planning.plan import Warp

__all__ = [
    "read_failures",
    "GDAL_CACHE_BYTES",
    "GDAL_SIDECAR_SUFFIXES",
    "SIDECARS_ONLY",
    "GDAL_HTTP_DEADLINES",
    "GDAL_HTTP_MAX_RETRY",
    "GEOTIFF_SUFFIXES",
    "MAX_BLOCK_BYTES",
    "MIN_GDAL_CACHE_BYTES",
    "NETWORK_ATTEMPTS",
    "NETWORK_RETRY_SECONDS",
    "RASTER_SUFFIXES",
    "FileStat",
    "RasterCache",
    "block_bytes",
    "file_size",
    "file_stat",
    "fit_block_cache",
    "gdal_env",
    "gdal_path",
    "has_band_masks",
    "has_internal_mask",
    "mask_location",
    "is_url",
    "kept_block_cache",
    "raster_error_text",
    "retry_network",
    "sidecar_of",
    "source_href",
    "suffix_list",
]

GEOTIFF_SUFFIXES: Final = (".tif", ".tiff")
"""File suffixes of GeoTIFF (case-insensitive)."""

RASTER_SUFFIXES: Final = (*GEOTIFF_SUFFIXES, ".jp2", ".hgt")
"""File suffixes a directory input is searched for (case-insensitive): GeoTIFF, the JPEG 2000 of Sentinel-2 SAFE
products, and the SRTM height tiles that SRTM and NASADEM ship (``N46E007.hgt``, mostly zipped)."""

GDAL_SIDECAR_SUFFIXES: Final = (".aux.xml", ".ovr", ".msk")
"""Files GDAL writes beside a raster (its statistics and metadata, overviews, mask; case-insensitive): never scenes of their own.

An ``.ovr`` or ``.msk`` opens as a TIFF without georeferencing, so a glob
such as ``scenes/*`` that took them for scenes would report each as a raster
to georeference.
"""


def sidecar_of(path: str) -> str | None:
    """The raster a local file is GDAL's sidecar of (``x.tif`` for ``x.tif.msk``, ``.ovr`` or ``.aux.xml``), if that exists."""
    for suffix in GDAL_SIDECAR_SUFFIXES:
        if path.lower().endswith(suffix) and os.path.isfile(raster := path[: -len(suffix)]):
            return raster
    return None


SIDECARS_ONLY: Final = "the pattern matches only GDAL's sidecar files (.aux.xml, .ovr, .msk), which are not scenes"
"""What a glob that matched nothing else is told."""

GDAL_CACHE_BYTES: Final = 16 << 20
"""The most GDAL block cache a worker process is given (and what warped reads get)."""

MIN_GDAL_CACHE_BYTES: Final = 1 << 20
"""The least GDAL block cache :func:`fit_block_cache` sets (GDAL's own default, before any, is 5 % of RAM)."""

MAX_BLOCK_BYTES: Final = 1 << 30
"""The most a source's block (tile or strip) may decode to, all bands of a pixel-interleaved one.

GDAL decodes a whole block to read any pixel of it, so a worker's memory
follows its sources' blocks whatever the tile size. A few bytes of TIFF
can declare one block of 100,000 x 100,000 pixels (18.6 GiB): read, it
took the worker down, and the run with it. A fixed bound, not a share of
the machine's memory, so that the same scene is refused or converted on
every machine. 1 GiB admits a Sentinel-2 10 m band in one strip (241 MB),
or four of them interleaved (964 MB); a 745 MiB strip converted at a peak
of 1.9 GB."""


def block_bytes(dataset: Any) -> int:
    """The bytes the largest block of ``dataset`` decodes to: every band of a block, for pixel-interleaved files."""
    bands = dataset.count if dataset.interleaving == Interleaving.pixel else 1
    return int(max(h * w * np.dtype(t).itemsize for (h, w), t in zip(dataset.block_shapes, dataset.dtypes, strict=True))) * bands


GDAL_HTTP_DEADLINES: Final = {"GDAL_HTTP_CONNECTTIMEOUT": 30, "GDAL_HTTP_LOW_SPEED_TIME": 60, "GDAL_HTTP_LOW_SPEED_LIMIT": 1}
"""Seconds to connect, and the seconds under 1 byte/s after which GDAL gives a transfer up (libcurl's own default: never)."""

GDAL_HTTP_MAX_RETRY: Final = 5
"""Retries of one HTTP request by GDAL (``/vsicurl/``, ``/vsigs/``) on 429 and 5xx."""


NETWORK_ATTEMPTS: Final = 3
"""Tries of a remote file's open or read that failed other than by the store's answer that it has no such file."""

NETWORK_RETRY_SECONDS: Final = 2.0
"""The wait before a second try, doubled before each further one."""

_NO_SUCH_FILE: Final = re.compile(r"HTTP response code: 4(?!29)\d\d|does not exist in the file system", re.IGNORECASE)
"""What GDAL says where the store answered about the file (404, 403): an answer no retry changes."""

T = TypeVar("T")


def retry_network(attempt: Callable[[], T], *, evict: Callable[[str], None] | None = None) -> T:
    """``attempt()``, tried again up to :data:`NETWORK_ATTEMPTS` times in all where GDAL fails to open or read a URL.

    One dropped connection to the store made a scene ``unreadable`` (or
    ``read-failed``), and a cube of one date fewer was published under another
    name. GDAL retries 429 and 5xx answers (:data:`GDAL_HTTP_MAX_RETRY`) but
    not a dropped connection, and where either fails a file's opening it says
    only that the file is "not recognized as being in a supported file
    format", as of a file that is no raster: so every failure of GDAL's on a
    URL is tried again, but an answer that the file is not there. A try after
    the first reads the failed file afresh (GDAL otherwise answers from what it
    kept of the failed request), and ``evict(href)`` drops it where the caller
    holds it open. The waits decide nothing about the output: a run that
    needed them writes the same bytes.

    Raises:
        SceneError: the last try's, its message saying how many there were, or
            at once one of a local file, of no GDAL failure, or of no such file.
    """
    tries, failed = 1, None
    while True:
        try:
            if failed is None:
                return attempt()
            with rasterio.Env(CPL_VSIL_CURL_NON_CACHED=gdal_path(source_href(failed))):
                return attempt()
        except SceneError as err:
            if not (is_url(source_href(err.href)) and isinstance(err.__cause__, RasterioError)) or _NO_SUCH_FILE.search(err.detail):
                raise
            if tries == NETWORK_ATTEMPTS:
                raise SceneError(f"{err.detail} ({tries} tries)", href=err.href, reason=err.reason) from err
            if evict is not None:
                evict(err.href)
            failed = err.href
            time.sleep(NETWORK_RETRY_SECONDS * 2 ** (tries - 1))
            tries += 1


class _ApproximateNodataFilter(logging.Filter):
    """Drop GDAL's warning that a 64-bit integer nodata is no double, logged by ``rasterio.open`` itself.

    It names GDAL's own C functions to the user; the scene's ``bad-nodata``
    dead letter says what is wrong and what to do, and is what the user sees.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "GetNoDataValue() returns an approximate value" not in record.getMessage()


logging.getLogger("rasterio._env").addFilter(_ApproximateNodataFilter())


_READ_FAILURE: Final = re.compile(r"IO error during reading|Read error at|Cannot read TIFF header|Failed to read directory")
"""libtiff's warnings that a file ended, or failed to read, inside what GDAL was parsing: it goes on without the tag."""


class _ReadFailures(logging.Filter):
    """Take GDAL's read-failure warnings (:data:`_READ_FAILURE`) logged in a thread that gathers them, instead of printing them."""

    def __init__(self) -> None:
        super().__init__()
        self.gathered: dict[int, list[str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        found = self.gathered.get(threading.get_ident())
        if found is None or not _READ_FAILURE.search(record.getMessage()):
            return True
        found.append(record.getMessage().split(": ", 1)[-1])
        return False


_READ_FAILURES: Final = _ReadFailures()
logging.getLogger("rasterio._env").addFilter(_READ_FAILURES)


@contextlib.contextmanager
def read_failures() -> Iterator[list[str]]:
    """Gather GDAL's warnings, in this thread, that a file failed to read inside its metadata.

    GDAL warns and goes on without a tag it could not read: a GeoTIFF cut
    short inside its georeferencing opens as one with no geotransform, whose
    advice (assign one) is wrong. The caller turns what is gathered into the
    scene's ``unreadable`` dead letter; the warnings are not printed apart
    from it (several named no file).
    """
    ident = threading.get_ident()
    found = _READ_FAILURES.gathered[ident] = []
    try:
        yield found
    finally:
        del _READ_FAILURES.gathered[ident]


_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def suffix_list(suffixes: tuple[str, ...]) -> str:
    """File suffixes for a message: ``.tif, .tiff, .jp2 or .hgt``."""
    return f"{', '.join(suffixes[:-1])} or {suffixes[-1]}"


def is_url(href: str) -> bool:
    """Whether ``href`` is a URL (``https://``, ``gs://``...) rather than a local path."""
    return bool(_URL.match(href)) and not href.startswith("file://")


class _BlockCache:
    """The GDAL block cache this module has set for the process, 0 before the first read: it only grows (see :func:`fit_block_cache`)."""

    limit: int = 0
    lock = threading.Lock()


def has_internal_mask(dataset: Any) -> bool:
    """Whether a band of ``dataset`` takes its validity from a mask band of the file's own.

    That is GDAL's per-dataset mask (``MaskFlags.per_dataset`` without
    ``alpha``): an internal or ``.msk`` mask; or a band's own mask
    (:func:`has_band_masks`). Validity from a nodata value is the cube's
    nodata already, and an alpha band is stored as a band like any other, so
    neither loses anything.
    """
    return has_band_masks(dataset) or any(
        MaskFlags.per_dataset in flags and MaskFlags.alpha not in flags for flags in dataset.mask_flag_enums
    )


def has_band_masks(dataset: Any) -> bool:
    """Whether a band of ``dataset`` has a mask of its own: GDAL gives it no mask flag at all.

    A ``.msk`` written with ``INTERNAL_MASK_FLAGS_n=0``, or a VRT band's
    ``<MaskBand>``. ``read_masks`` reads it, but GDAL's warper ignores it.
    """
    return any(not flags for flags in dataset.mask_flag_enums)


def mask_location(dataset: Any) -> str:
    """Where the mask of :func:`has_internal_mask` lives, for a message: its ``.msk`` sidecar's name, or ``"in the file"``."""
    sidecar = next((f for f in dataset.files if f.lower().endswith(".msk")), None)
    return f"in {os.path.basename(sidecar)}" if sidecar else "in the file"


def _block_span(start: int, stop: int, block: int, size: int) -> int:
    """Pixels from the block boundary at or before ``start`` to the one at or after ``stop``, within ``size``."""
    return min(size, -(-stop // block) * block) - start // block * block


def fit_block_cache(dataset: Any, band: int, window: rasterio.windows.Window) -> int:
    """Raise this process's GDAL block cache to what reading ``window`` of ``band`` needs; return the cache in force.

    The need is the bytes of the source blocks the window touches plus one
    more column of them (see the module documentation), times the band count
    for pixel-interleaved files (GDAL decodes and caches every band of a
    block it reads), and a quarter more for GDAL's own bookkeeping, at most
    :data:`GDAL_CACHE_BYTES`. Measured on strips of 1, 2 and 16 rows, tiles
    of 256, 512 and 1024 and pixel-interleaved files, windows on and off the
    block grid: without the quarter, half of them decoded blocks again; with
    it, none did (``tests/pipelines/test_scene_io.py``). A warped view gets
    the maximum, since it reads source blocks of another footprint.

    The cache only ever grows, so threads reading different sources do not
    evict each other's blocks by lowering it; it changes memory and speed,
    never the pixels read. It is GDAL's cache for the whole process, set
    here when it grows and at the first read (at least
    :data:`MIN_GDAL_CACHE_BYTES`); a ``rasterio.Env`` that sets
    ``GDAL_CACHEMAX`` around a read would override it until it ends.
    """
    if isinstance(dataset, WarpedVRT):
        need = GDAL_CACHE_BYTES
    else:
        block_h, block_w = dataset.block_shapes[band - 1]
        rows = _block_span(int(window.row_off), int(window.row_off + window.height), block_h, dataset.height)
        cols = _block_span(int(window.col_off), int(window.col_off + window.width) + block_w, block_w, dataset.width)
        bands = dataset.count if dataset.interleaving == Interleaving.pixel else 1
        need = min(GDAL_CACHE_BYTES, rows * cols * np.dtype(dataset.dtypes[band - 1]).itemsize * bands * 5 // 4)
    if need > _BlockCache.limit:
        with _BlockCache.lock:
            if need > _BlockCache.limit:
                _BlockCache.limit = max(need, MIN_GDAL_CACHE_BYTES)
                rasterio.env.set_gdal_config("GDAL_CACHEMAX", _BlockCache.limit)
    return _BlockCache.limit


@contextlib.contextmanager
def kept_block_cache() -> Iterator[None]:
    """Give the process back the GDAL block cache it had, once reads in it (:func:`fit_block_cache`) are over.

    For runs whose workers are threads of the calling process: their reads
    shrink GDAL's cache to what frames need, which would otherwise stay the
    caller's cache afterwards.
    """
    before = rasterio.env.get_gdal_config("GDAL_CACHEMAX")
    try:
        yield
    finally:
        with _BlockCache.lock:
            if _BlockCache.limit:
                rasterio.env.set_gdal_config("GDAL_CACHEMAX", before)
                _BlockCache.limit = 0


def raster_error_text(err: BaseException) -> str:
    """A rasterio error's message, with GDAL's own text where rasterio only points at it.

    A failed read raises ``Read failed. See previous exception for details.``;
    the previous exception, its cause, holds what GDAL said (the band, the
    block, the decoder that failed).

    >>> try:
    ...     raise ValueError("Read failed. See previous exception for details.") from OSError("band 1: IReadBlock failed")
    ... except ValueError as err:
    ...     raster_error_text(err)
    'Read failed: band 1: IReadBlock failed'
    """
    text, cause = str(err), err.__cause__
    if cause is None or not str(cause) or str(cause) in text:
        return text
    return f"{text.removesuffix(' See previous exception for details.').rstrip('.')}: {cause}"


def gdal_path(href: str) -> str:
    """The GDAL path of an href: ``/vsicurl/`` before an HTTP(S) URL, ``/vsigs/`` for ``gs://``; others as given.

    Opened by such a path, a ``gs://`` object's name is taken whole. Given
    the URL, rasterio parses it as a URL and drops what follows a ``#`` as a
    fragment, which GCS object names may hold. (An HTTP URL keeps its URL
    meaning either way: libcurl sends no fragment.)

    >>> gdal_path("gs://bucket/scenes/a#1.tif"), gdal_path("/data/a.tif"), gdal_path("https://h/my scene.tif")
    ('/vsigs/bucket/scenes/a#1.tif', '/data/a.tif', '/vsicurl/https://h/my%20scene.tif')
    """
    if href.startswith(("http://", "https://")):
        # A space or a non-ASCII character, which a browser or requests escapes on the way out, libcurl
        # refuses ("Malformed input to a URL function"): escaped here as requests escapes it.
        return "/vsicurl/" + requote_uri(href)
    if href.startswith("gs://"):
        return "/vsigs/" + href.removeprefix("gs://")
    return href


def source_href(href: str) -> str:
    """The file ``href`` reads: the one a GDAL ``vrt://`` href (a band resampled as it is opened) wraps, else ``href``.

    ``vrt://{GDAL path}?{options}``: the options come last, so a signed URL's
    own query stays with the path, and the GDAL path is taken back to the
    href :func:`gdal_path` made it of.

    >>> source_href("vrt:///vsigs/b/T33UUU/SCL.tif?outsize=200%,200%&r=nearest"), source_href("/d/a.tif")
    ('gs://b/T33UUU/SCL.tif', '/d/a.tif')
    """
    if not href.startswith("vrt://"):
        return href
    inner = href.removeprefix("vrt://").rpartition("?")[0] or href.removeprefix("vrt://")
    return "gs://" + inner.removeprefix("/vsigs/") if inner.startswith("/vsigs/") else inner.removeprefix("/vsicurl/")


def gdal_env(href: str) -> rasterio.Env:
    """The GDAL configuration to open and read ``href`` with.

    Settings that change what a GeoTIFF says are pinned to GDAL's defaults,
    whatever the environment holds (:data:`catalog.geotiff.PINNED_GDAL_CONFIG`).
    A URL's folder is taken as empty (``EMPTY_DIR``): GDAL would otherwise
    list it, or ask for each sidecar name it knows, for every file opened. So
    a ``.msk`` or ``.aux.xml`` beside a remote file is not read. A ``vrt://``
    href is configured as the file it wraps (:func:`source_href`).
    """
    href = source_href(href)
    if not is_url(href):
        return rasterio.Env(**PINNED_GDAL_CONFIG)
    options: dict[str, Any] = {
        **PINNED_GDAL_CONFIG,
        "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
        # GDAL's own retry policy for 429 and 5xx answers (exponential backoff from the delay).
        "GDAL_HTTP_MAX_RETRY": GDAL_HTTP_MAX_RETRY,
        "GDAL_HTTP_RETRY_DELAY": 0.5,
    }
    # libcurl waits forever by default: a server that accepts a connection and never answers would hold a
    # worker, and the run, without end. A stalled transfer is given up (the scene is a dead letter); the
    # user's own settings in the environment stand.
    options.update({k: v for k, v in GDAL_HTTP_DEADLINES.items() if k not in os.environ})
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if href.startswith("gs://") and emulator:
        # As google-cloud-storage does: requests go to the emulator, unsigned, and no credentials are looked up.
        options["CPL_GS_ENDPOINT"] = emulator.rstrip("/") + "/"
        options["GS_NO_SIGN_REQUEST"] = "YES"
    return rasterio.Env(**options)


class FileStat(NamedTuple):
    """A file's size and what names this version of its bytes, each None when unknown (:func:`file_stat`)."""

    size: int | None
    version: str | None


def file_stat(href: str) -> FileStat:
    """The size of a local file, an archive member (as stored) or a URL's object, and its version.

    The size lets the run summary report the input size of remote scenes too;
    a band GDAL resamples through ``vrt://`` (a Sentinel-2 band brought to
    10 m) is the size of its file. The version lets a later run tell a file
    rewritten in place under the same name: a ``gs://`` object's CRC-32C (its
    content, whatever rewrote it), an HTTP(S) object's ``ETag`` or
    ``Last-Modified``, and a local file's (or archive's) size and
    modification time, as ``make`` and ``rsync`` tell a changed file. Hashing
    every input of a nightly run to find the one that changed would read the
    archive whole. A URL costs one request (HTTP ``HEAD`` or a GCS metadata
    ``GET``) through :class:`catalog.storage.Storage`.
    """
    href = source_href(href)
    if is_url(href):
        from catalog.remote import RemoteRangeSource
        from catalog.storage import Storage
        from rumi_core.errors import RumiError

        try:
            source = Storage().open(href)
            try:
                return FileStat(source.size(), source.version() if isinstance(source, RemoteRangeSource) else None)
            finally:
                source.close()
        except (OSError, RumiError):
            return FileStat(None, None)
    archive = archive_of(href)
    try:
        st = os.stat(archive or href)
    except OSError:
        return FileStat(None, None)
    return FileStat(member_size(href) if archive is not None else st.st_size, f"{st.st_size}@{st.st_mtime_ns}")


def file_size(href: str) -> int | None:
    """:attr:`FileStat.size` of :func:`file_stat`."""
    return file_stat(href).size


def _turned_scales(source: rasterio.Affine, target: rasterio.Affine) -> dict[str, str]:
    """GDAL's ``XSCALE`` and ``YSCALE`` of a warp from a rotated or turned raster onto a north-up grid of its CRS.

    They are target pixels per source pixel along each target axis, which size
    the resampling kernel. GDAL works them out per chunk from how many source
    columns and rows a chunk spans, which is right for a north-up source and
    wrong for a turned one (its columns run along the target's rows): bilinear
    and cubic then smoothed a raster turned by 90 degrees whose pixel centres
    fall on the grid's. Here they come from the two transforms, exactly.
    Empty (GDAL's own) for a north-up source.
    """
    if source.b == 0 and source.d == 0:
        return {}
    back = ~source  # world to source pixel: the linear part maps a target pixel's axes into source pixels
    scales = {}
    for name, (dx, dy) in (("XSCALE", (target.a, target.d)), ("YSCALE", (target.b, target.e))):
        u, v = back.a * dx + back.b * dy, back.d * dx + back.e * dy
        scales[name] = repr(1.0 / float(np.hypot(u, v)))
    return scales


class RasterCache:
    """Open datasets of one worker, least recently used closed first.

    Datasets of off-grid files are :class:`rasterio.vrt.WarpedVRT` objects
    that resample onto the cube's grid on read.
    """

    def __init__(self, max_open: int = 16) -> None:
        self.max_open = max_open
        """How many datasets stay open at most."""
        self._open: OrderedDict[tuple[str, Warp | None], tuple[tuple[Any, ...], bool]] = OrderedDict()
        """Per file and warp: the open handles (the file, then its warped view), and whether reads apply the file's internal mask."""

    def get(self, href: str, warp: Warp | None = None) -> Any:
        """Return an open dataset (or warped view) of ``href``.

        Raises:
            rasterio.errors.RasterioIOError: the file cannot be opened.
        """
        return self.open(href, warp)[0]

    def open(self, href: str, warp: Warp | None = None) -> tuple[Any, bool]:
        """:meth:`get`, and whether reading must apply the file's internal mask (:func:`has_internal_mask`).

        The dataset's ``read_masks`` then gives the mask. Never for a warped
        read, whose warper has applied the mask already.

        Raises:
            rasterio.errors.RasterioIOError: the file cannot be opened.
            SceneError: ``masked``, a warped file has masks of its own bands (:func:`has_band_masks`).
        """
        key = (href, warp)
        found = self._open.get(key)
        if found is not None:
            self._open.move_to_end(key)
            return found[0][-1], found[1]
        with gdal_env(href):
            src = rasterio.open(gdal_path(href))
        masked = warp is None and has_internal_mask(src)
        handles: tuple[Any, ...] = (src,)
        if warp is not None and has_band_masks(src):
            src.close()
            raise SceneError(
                "its bands have masks of their own, which GDAL's warper does not apply, so warping would make their "
                "masked pixels valid; burn the masks into nodata first (e.g. gdalwarp -dstnodata 0) and convert again",
                href=href,
                reason="masked",
            )
        if warp is not None:
            target = rasterio.Affine(*warp.transform)
            vrt = WarpedVRT(
                src,
                crs=src.crs,
                transform=target,
                width=warp.width,
                height=warp.height,
                resampling=Resampling[warp.resampling],
                # Each band's nodata masks that band alone, as an unwarped read does. GDAL's default
                # (since 3.7) takes a pixel as nodata only where every band is, then interpolates a
                # band's nodata sample among valid ones, and a result equal to nodata becomes nodata + 1.
                UNIFIED_SRC_NODATA="NO",
                **_turned_scales(src.transform, target),
            )
            handles = (src, vrt)
        self._open[key] = (handles, masked)
        while len(self._open) > self.max_open:
            _close_handles(self._open.popitem(last=False)[1][0])
        return handles[-1], masked

    def evict(self, href: str) -> None:
        """Close the datasets of ``href`` (any warp), so that the next :meth:`open` opens it again."""
        for key in [k for k in self._open if k[0] == href]:
            _close_handles(self._open.pop(key)[0])

    def close(self) -> None:
        """Close every open dataset."""
        while self._open:
            _close_handles(self._open.popitem()[1][0])


def _close_handles(handles: tuple[Any, ...]) -> None:
    """Close a file's open handles, its warped view before the file under it."""
    for handle in reversed(handles):
        handle.close()
