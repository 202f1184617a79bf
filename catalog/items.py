"""STAC items: one per rumi file, built from the finished file and its header blob.

:func:`create_item` is the hand-off from the conversion pipeline: given a
``.rumi`` file, its ``.rumih`` blob and optionally the extra metadata the
pipeline knows (:class:`ExtraMetadata`), it returns a STAC 1.1
:class:`pystac.Item` with

* ``geometry`` and ``bbox`` in longitude/latitude, from the grid's densified
  outline;
* ``datetime`` for a single instant, otherwise ``start_datetime`` and
  ``end_datetime`` (both included: the last second of an interval axis);
* projection v2: ``proj:code``, ``proj:shape``, ``proj:transform``;
* datacube: dimensions ``x``, ``y``, ``time`` (with its values) and ``band``
  (with its values), and one variable ``data``;
* the ``rumi:`` fields of :mod:`catalog.extension`, including the header blob
  inline when it is at most 4 KiB;
* assets ``data`` (``application/vnd.rumi``, ``file:size``,
  ``file:checksum``, STAC 1.1 ``bands``), ``header`` (roles ``metadata`` and
  ``index``) and ``thumbnail`` (a PNG quicklook).

Only the head and trailer of the file are read (and, for the thumbnail, one
time step at reduced resolution); the checksum streams the file once unless
the pipeline gives it.

The file and its blob may also be ``gs://`` or ``http(s)://`` objects, read
through a :class:`catalog.storage.Storage` with ranged requests: the head,
the trailer and the frames of the thumbnail, never the whole file. A remote
file is therefore given no ``file:checksum`` unless its SHA-256 is already
known: ``file:checksum`` is a multihash of a cryptographic digest, and
computing one would download the whole cube. The strict, honest record is
what the store itself vouches for: the CRC-32C that GCS reports for the
object (composite objects included; GCS keeps MD5 only for objects uploaded
whole), on the data asset as ``rumi:crc32c``. The header asset keeps its
SHA-256 ``file:checksum`` (the blob is small and at hand), and so does
``rumi:header_checksum``, which every item-based read verifies.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import pystac

import rumi_core
from catalog.bands import Band, band_from_text, stac_data_type
from catalog.errors import ChecksumError, ItemError
from catalog.extension import INLINE_HEADER_LIMIT, SCHEMA_URI, RumiFields
from catalog.extra_metadata import ExtraMetadata
from catalog.grid import Grid, file_grid
from catalog.storage import Storage, href_kind
from rumi_core.files import write_atomic
from rumi_core.header import HeaderBlob
from rumi_core.times import INTERVAL, format_seconds

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from rumi_core.info import Info
    from rumi_core.sources import ByteSource
    from rumi_core.time_coordinates import TimeCoordinates

__all__ = [
    "DATA_MEDIA_TYPE",
    "EXTENSIONS",
    "HEADER_MEDIA_TYPE",
    "create_item",
    "file_sha256",
    "multihash_sha256",
    "time_values",
    "verify_header",
]

DATA_MEDIA_TYPE = "application/vnd.rumi"
"""Media type of a ``.rumi`` file."""
HEADER_MEDIA_TYPE = "application/vnd.rumi.header"
"""Media type of a ``.rumih`` header blob."""

PROJECTION_URI = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
DATACUBE_URI = "https://stac-extensions.github.io/datacube/v2.2.0/schema.json"
FILE_URI = "https://stac-extensions.github.io/file/v2.1.0/schema.json"
EO_URI = "https://stac-extensions.github.io/eo/v2.0.0/schema.json"

EXTENSIONS = (PROJECTION_URI, DATACUBE_URI, FILE_URI, EO_URI, SCHEMA_URI)
"""Extension schemas an item declares (EO only when a band has EO fields)."""


def multihash_sha256(digest_hex: str) -> str:
    """Return the multihash of a SHA2-256 digest: ``"1220" + hex``, as ``file:checksum`` wants.

    >>> multihash_sha256("ab" * 32)[:6]
    '1220ab'
    """
    if len(digest_hex) != 64:
        raise ItemError(f"a sha256 digest is 64 hex characters, got {len(digest_hex)}")
    return "1220" + digest_hex.lower()


def verify_header(doc: dict[str, Any], blob: bytes) -> None:
    """Check a header blob against every checksum its item records.

    ``rumi:header_checksum`` and the ``file:checksum`` of a ``header`` asset
    are both SHA2-256 multihashes of the blob. A blob with one byte count
    changed still parses, and a windowed read through it decodes the
    neighbouring frame of the same size to the wrong pixels: the format
    cannot notice, so every item-based read verifies the blob first.

    Raises:
        ChecksumError: a recorded checksum differs from the blob's, or uses
            another hash than SHA2-256 (which this reader cannot verify).
    """
    got = multihash_sha256(hashlib.sha256(blob).hexdigest())
    recorded = [("rumi:header_checksum", (doc.get("properties") or {}).get("rumi:header_checksum"))]
    header_asset = (doc.get("assets") or {}).get("header") or {}
    recorded.append(("the header asset's file:checksum", header_asset.get("file:checksum")))
    for name, expected in recorded:
        if expected is None:
            continue
        if not isinstance(expected, str) or not expected.startswith("1220"):
            raise ChecksumError(
                f"item {doc.get('id')!r}: {name} {expected!r} is not a SHA2-256 multihash, so the header blob cannot be verified"
            )
        if expected.lower() != got:
            raise ChecksumError(
                f"item {doc.get('id')!r}: the header blob's SHA2-256 multihash is {got}, but {name} records {expected}; "
                "the blob or the item was changed after the item was written"
            )


def file_sha256(path: str) -> str:
    """SHA-256 of a file, hex (``hashlib.file_digest``, which reads it in chunks without the GIL)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def time_values(times: TimeCoordinates) -> list[str]:
    """The datacube ``time`` values: ISO instants, or ``start/end`` for intervals.

    >>> from rumi_core.time_coordinates import TimeCoordinates
    >>> time_values(TimeCoordinates.from_values([("2020-01-01", "2021-01-01")]))
    ['2020-01-01T00:00:00Z/2021-01-01T00:00:00Z']
    """
    secs = times.seconds
    if times.time_type == INTERVAL:
        return [f"{format_seconds(secs[i])}/{format_seconds(secs[i + 1])}" for i in range(0, len(secs), 2)]
    return [format_seconds(s) for s in secs]


def time_span(times: TimeCoordinates) -> tuple[int, int]:
    """The first and the last second a file's time steps cover, both included, as STAC's datetimes are.

    An interval covers ``[start, end)`` (spec "Time coordinates"), and STAC's
    ``end_datetime`` is inclusive: coordinates are whole seconds, so the last
    second covered is one before the end. Written as the end itself, a month's
    cube would answer a search for the next month, from its first instant.

    >>> from rumi_core.time_coordinates import TimeCoordinates
    >>> [format_seconds(s) for s in time_span(TimeCoordinates.from_values([("2020-01-01", "2020-02-01")]))]
    ['2020-01-01T00:00:00Z', '2020-01-31T23:59:59Z']
    """
    secs = times.seconds
    return secs[0], secs[-1] - 1 if times.time_type == INTERVAL else secs[-1]


def _to_datetime(seconds: int) -> dt.datetime:
    try:
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    except OverflowError as err:
        # pystac holds an item's datetime as a Python datetime (years 1..9999).
        raise ItemError(f"time {format_seconds(seconds)} is outside the years 1..9999 a STAC item datetime can hold") from err


def _bands(info: Info, extra: ExtraMetadata) -> list[Band]:
    data_type = stac_data_type(info.layout.encoding.name)
    bands = []
    for i, text in enumerate(info.band_texts):
        band = band_from_text(text, data_type=data_type, nodata=extra.nodata)
        shared = {k: getattr(extra, k) for k in ("scale", "offset", "unit") if getattr(extra, k) is not None}
        if shared:
            band = band.merged(shared)
        if i < len(extra.bands) and extra.bands[i]:
            band = band.merged(extra.bands[i])
        bands.append(band)
    if len(extra.bands) > len(bands):
        raise ItemError(f"extra metadata describes {len(extra.bands)} bands, the file has {len(bands)}")
    names = [b.name for b in bands]
    if len(set(names)) != len(names):
        # Band texts are unique by the specification; short names may not be.
        bands = [b.merged({"name": text}) for b, text in zip(bands, info.band_texts, strict=True)]
    return bands


def _datacube(grid: Grid | None, info: Info, bands: Sequence[Band]) -> dict[str, Any]:
    lay = info.layout
    if grid is not None:
        minx, miny, maxx, maxy = grid.bounds()
        t = grid.affine
        x: dict[str, Any] = {"type": "spatial", "axis": "x", "extent": [minx, maxx], "step": t.a, "reference_system": grid.epsg}
        y: dict[str, Any] = {"type": "spatial", "axis": "y", "extent": [miny, maxy], "step": t.e, "reference_system": grid.epsg}
    else:
        x = {"type": "spatial", "axis": "x", "extent": [0, lay.image_width], "step": 1, "description": "pixel columns, no CRS"}
        y = {"type": "spatial", "axis": "y", "extent": [0, lay.image_length], "step": 1, "description": "pixel rows, no CRS"}
    values = time_values(info.times)
    time = {"type": "temporal", "extent": [format_seconds(s) for s in time_span(info.times)], "values": values}
    band = {"type": "bands", "values": [b.name for b in bands]}
    return {
        "cube:dimensions": {"time": time, "band": band, "y": y, "x": x},
        "cube:variables": {"data": {"dimensions": ["time", "band", "y", "x"], "type": "data"}},
    }


def _geometry(grid: Grid | None) -> tuple[dict[str, Any] | None, list[float] | None]:
    """The item's geometry and bbox (RFC 7946): a bbox across the antimeridian has ``minx > maxx``, one round a pole every longitude."""
    if grid is None or grid.crs is None:
        return None, None
    import antimeridian
    import shapely

    footprint = shapely.transform(grid.footprint(densify=8), lambda coords: coords.round(9))
    geometry = json.loads(json.dumps(shapely.geometry.mapping(footprint)))  # GeoJSON's lists, not shapely's tuples
    return geometry, [float(v) for v in antimeridian.bbox(geometry)]


def _read_blob(rumi_href: str, blob_href: str | os.PathLike[str] | None, storage: Storage) -> tuple[bytes, str | None]:
    """The blob's bytes and href: the one given, ``<file>h`` beside a local file, or one built from the file."""
    if blob_href is None:
        beside = rumi_href + "h"
        if href_kind(rumi_href) == "local" and os.path.isfile(beside):
            blob_href = beside
        else:
            return rumi_core.build_header(rumi_href), None
    text = os.fspath(blob_href)
    if href_kind(text) != "local":
        return storage.read(text), text
    try:
        return Path(text).read_bytes(), os.path.abspath(text)
    except OSError as err:
        raise ItemError(f"cannot read the header blob {text}: {err.strerror}") from err


def create_item(
    rumi_path: str | os.PathLike[str],
    blob_path: str | os.PathLike[str] | None = None,
    *,
    extra: ExtraMetadata | Mapping[str, Any] | None = None,
    data_href: str | None = None,
    header_href: str | None = None,
    thumbnail: bool = True,
    thumbnail_path: str | os.PathLike[str] | None = None,
    inline_header_limit: int = INLINE_HEADER_LIMIT,
    threads: int | None = None,
    storage: Storage | None = None,
) -> pystac.Item:
    """Build the STAC item of a finished rumi file.

    Args:
        rumi_path: The ``.rumi`` file: a local path, or a ``gs://`` or
            ``http(s)://`` URL read with ranged requests through ``storage``.
        blob_path: Its header blob (a path or URL); for a local file,
            ``<rumi_path>h`` when None and that file exists; otherwise a blob
            is built from the file (and no ``header`` asset is written).
        extra: Metadata the pipeline knows: an :class:`ExtraMetadata` or a
            mapping such as a run-manifest line.
        data_href: Href of the ``data`` asset; the absolute path when None.
            :func:`catalog.collections.build_catalog` makes local hrefs relative.
        header_href: Href of the ``header`` asset; the blob's absolute path when None.
        thumbnail: Render a PNG quicklook of the first time step.
        thumbnail_path: Local path to write it to; ``<rumi_path stem>.thumb.png`` beside a
            local file when None (a remote file needs one).
        inline_header_limit: Blobs up to this size are also inlined as ``rumi:header``.
        threads: Decoding threads for the thumbnail.
        storage: Reaches remote files and blobs; a default :class:`~catalog.storage.Storage` when None.

    Returns:
        The item, not yet part of any catalogue.

    Raises:
        InvalidFileError: the file is not a compliant rumi file.
        HeaderMismatchError: the blob does not belong to the file.
        ItemError: the extra metadata does not fit the file, or a remote
            file's thumbnail has no ``thumbnail_path``.
        StorageError: a remote file or blob cannot be read.
    """
    storage = storage or Storage()
    path = os.fspath(rumi_path)
    remote = href_kind(path) != "local"
    if not remote:
        path = os.path.abspath(path)
    if remote and thumbnail and thumbnail_path is None:
        raise ItemError(f"{path}: a thumbnail of a remote file is written locally; give thumbnail_path")
    blob_bytes, blob_file = _read_blob(path, blob_path, storage)
    blob = HeaderBlob.from_bytes(blob_bytes)
    meta = extra if isinstance(extra, ExtraMetadata) else ExtraMetadata.from_dict(extra or {})
    with contextlib.closing(storage.open(path)) as source:
        info = rumi_core.info(source, blob)
        bands = _bands(info, meta)
        crc32c = meta.crc32c or _reported_crc32c(source)
        png = None
        if thumbnail:
            from catalog.thumbnails import render_thumbnail

            png = render_thumbnail(source, blob, bands, threads=threads)
    lay = info.layout
    grid = file_grid(info.georef, lay)
    geometry, bbox = _geometry(grid)

    start, end = time_span(info.times)
    single = info.times.time_type != INTERVAL and start == end
    properties: dict[str, Any] = {}
    if not single:
        properties["start_datetime"] = format_seconds(start)
        properties["end_datetime"] = format_seconds(end)
    if meta.title:
        properties["title"] = meta.title
    if grid is not None:
        properties.update(grid.to_dict())
    else:
        properties.update({"proj:code": None, "proj:shape": [lay.image_length, lay.image_width]})
    properties.update(_datacube(grid, info, bands))
    fields_ = RumiFields(
        frame_unit=lay.frame_unit,
        frame_axes="".join(lay.frame_axes),
        tile_size=(lay.tile_length, lay.tile_width),
        time_type="interval" if info.times.time_type == INTERVAL else "instant",
        codec=meta.codec,
        lossy_bound=meta.lossy_bound,
        dataset=meta.dataset,
        header=blob_bytes if len(blob_bytes) <= inline_header_limit else None,
        header_checksum=multihash_sha256(hashlib.sha256(blob_bytes).hexdigest()),
    )
    properties.update(fields_.to_dict())
    if meta.libraries:
        properties["rumi:libraries"] = dict(meta.libraries)
    properties.update(meta.properties)

    has_eo = any(b.common_name or b.center_wavelength is not None for b in bands)
    extensions = [u for u in EXTENSIONS if u != EO_URI or has_eo]
    item = pystac.Item(
        id=meta.id or (PurePosixPath(path) if remote else Path(path)).stem,
        geometry=geometry,
        bbox=bbox,
        datetime=_to_datetime(start) if single else None,
        properties=properties,
        stac_extensions=extensions,
    )

    file_fields: dict[str, Any] = {"file:size": info.file_size}
    if meta.sha256 or not remote:
        file_fields["file:checksum"] = multihash_sha256(meta.sha256 or file_sha256(path))
    if crc32c is not None:
        file_fields["rumi:crc32c"] = crc32c
    data_asset = pystac.Asset(
        href=data_href or path,
        media_type=DATA_MEDIA_TYPE,
        roles=["data"],
        title="rumi " + ("Cube" if lay.is_cube else "Image"),
        extra_fields={**file_fields, "bands": [b.to_dict() for b in bands]},
    )
    item.add_asset("data", data_asset)
    if blob_file is not None:
        item.add_asset(
            "header",
            pystac.Asset(
                href=header_href or blob_file,
                media_type=HEADER_MEDIA_TYPE,
                roles=["metadata", "index"],
                title="rumi header blob",
                extra_fields={
                    "file:size": len(blob_bytes),
                    "file:checksum": fields_.header_checksum,
                },
            ),
        )
    if png is not None:
        png_path = os.fspath(thumbnail_path) if thumbnail_path is not None else str(Path(path).with_suffix(".thumb.png"))
        write_atomic(png_path, png)
        item.add_asset(
            "thumbnail",
            pystac.Asset(href=os.path.abspath(png_path), media_type=pystac.MediaType.PNG, roles=["thumbnail"], title="quicklook"),
        )
    return item


def _reported_crc32c(source: ByteSource) -> str | None:
    """The CRC-32C the store reports for the object (GCS does), as 8 hex digits; None for other sources."""
    report = getattr(source, "crc32c", None)
    if report is None:
        return None
    value = report()
    return None if value is None else f"{value:08x}"
