"""What a STAC item says about its rumi file, resolved and checked before the file is read.

:meth:`ItemParts.from_item` turns an item's JSON into what a
:class:`~catalog.cube.Cube` needs to read without touching the file's head
or trailer:

* the data asset's href (resolved against the item's location);
* the header blob: inline in the item (``rumi:header``), else one ``GET`` of
  the item's ``header`` asset, else one ``GET`` of ``<file>h``; verified
  against the item's checksums (:func:`~catalog.items.verify_header`);
* the bands (``bands``, else the datacube's band values), the time
  coordinates (the datacube's time values) and the grid (projection fields).

Each of them is checked against the blob (spec "Header blob": the blob
alone locates every frame, so an item that disagrees with it would label
frames wrongly), and the blob against the item's ``file:size``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from catalog.bands import Band
from catalog.errors import ItemError
from catalog.extension import SCHEMA_URI_V0_1, TIME_TYPES, RumiFields
from catalog.grid import Grid
from catalog.items import DATA_MEDIA_TYPE, verify_header
from catalog.json_shape import LIST, OBJECT, TEXT, item_problems, json_kind, list_mismatch, mismatch
from catalog.storage import Storage, href_kind, join_href
from rumi_core.errors import RumiError
from rumi_core.header import HeaderBlob, blob_beside, check_blob_fits
from rumi_core.time_coordinates import TimeCoordinates
from rumi_core.times import INSTANT, INTERVAL, to_seconds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["ItemParts", "item_problem", "single_item"]


def single_item(doc: Any, where: str) -> dict[str, Any]:
    """The one item of a JSON document: an item, or a FeatureCollection of exactly one.

    Raises:
        ItemError: the document is no item, or a collection of several.
    """
    if isinstance(doc, dict) and doc.get("type") == "FeatureCollection":
        features = doc.get("features") or []
        problem = mismatch(features, LIST, "features")
        if problem is not None:
            raise ItemError(f"{where}: {problem}")
        if len(features) != 1:
            raise ItemError(f"{where} is a FeatureCollection of {len(features)} items; give one item")
        doc = features[0]
    if not isinstance(doc, dict) or doc.get("type") != "Feature":
        kind = f"type {doc.get('type')!r}" if isinstance(doc, dict) else json_kind(doc)
        raise ItemError(f"{where} is not a STAC item ({kind})")
    return doc


def _problems(doc: dict[str, Any]) -> Iterator[str | None]:
    """Each check of the shape of an item where a read uses it, in order, computed as it is asked for.

    Those of every reader (:func:`catalog.json_shape.item_problems`), then
    the links, geometry, bands, datacube and projection fields a read uses.

    The first problem ends the checks, so each check may rely on those before it.
    """
    yield from item_problems(doc)
    yield list_mismatch(doc.get("links"), OBJECT, "links")
    for j, link in enumerate(doc.get("links") or ()):
        yield mismatch(link.get("href"), TEXT, f"links[{j}].href", required=True)
    yield mismatch(doc.get("geometry"), OBJECT, "geometry")
    props = doc.get("properties") or {}
    yield list_mismatch(props.get("bands"), OBJECT, "properties.bands")
    dims = props.get("cube:dimensions")
    yield mismatch(dims, OBJECT, "properties.cube:dimensions")
    for name in ("band", "time"):
        dim = (dims or {}).get(name)
        yield mismatch(dim, OBJECT, f"properties.cube:dimensions.{name}")
        yield mismatch((dim or {}).get("values"), LIST, f"properties.cube:dimensions.{name}.values")
    yield list_mismatch(((dims or {}).get("time") or {}).get("values"), TEXT, "properties.cube:dimensions.time.values")
    time_type = props.get("rumi:time_type")
    yield None if time_type is None or time_type in TIME_TYPES else f"rumi:time_type is {time_type!r}, not 'instant' or 'interval'"
    yield mismatch(props.get("proj:code"), TEXT, "properties.proj:code")


def item_problem(doc: dict[str, Any]) -> str | None:
    """The first field of an item that is not of the JSON type STAC gives it, where a read or a search uses it; None when all are.

    >>> item_problem({"type": "Feature", "id": "x", "assets": {"data": {"href": 5}}})
    "item 'x': assets.data.href is a number, not a text"
    """
    problem = next((p for p in _problems(doc) if p), None)
    return None if problem is None else f"item {doc.get('id')!r}: {problem}"


def _check_shape(doc: dict[str, Any]) -> None:
    """Fail on the first problem :func:`item_problem` finds.

    Raises:
        ItemError: a field a read uses is not of the JSON type STAC gives it.
    """
    problem = item_problem(doc)
    if problem is not None:
        raise ItemError(problem)


def _self_href(doc: dict[str, Any]) -> str | None:
    for link in doc.get("links", []):
        if link.get("rel") == "self" and link.get("href"):
            return str(link["href"])
    return None


def _times_from_values(values: Sequence[str], time_type: str) -> TimeCoordinates:
    try:
        if time_type == "interval":
            secs: list[int] = []
            for v in values:
                a, _, b = v.partition("/")
                secs += [to_seconds(a), to_seconds(b)]
            return TimeCoordinates(INTERVAL, tuple(secs))
        return TimeCoordinates(INSTANT, tuple(to_seconds(v) for v in values))
    except RumiError as err:
        raise ItemError(f"the item's time values cannot be read: {err}") from err


def _data_asset(doc: dict[str, Any]) -> dict[str, Any]:
    assets = doc.get("assets") or {}
    data = assets.get("data")
    if data is None:
        data = next((a for a in assets.values() if a.get("type") == DATA_MEDIA_TYPE), None)
    if data is None or "href" not in data:
        raise ItemError(f"item {doc.get('id')!r} has no 'data' asset of type {DATA_MEDIA_TYPE}")
    asset: dict[str, Any] = data
    return asset


def _resolver(doc: dict[str, Any], where: str | None) -> Callable[[str], str]:
    """A function resolving the item's hrefs against its location (``where``, else its ``self`` link)."""
    base = where or _self_href(doc)

    def resolve(h: str) -> str:
        if base is None:
            if href_kind(h) == "local" and not os.path.isabs(h):
                raise ItemError(f"item {doc.get('id')!r} has a relative href {h!r} but no location to resolve it against")
            return h
        return join_href(base, h)

    return resolve


def _header_bytes(doc: dict[str, Any], resolve: Callable[[str], str], data_href: str, storage: Storage) -> bytes:
    """The blob: inline, else the ``header`` asset, else ``<file>h`` (spec "Header blob")."""
    props = doc.get("properties") or {}
    fields = RumiFields.from_dict(props) if "rumi:frame_unit" in props else None
    if fields is not None and fields.header is not None:
        return fields.header
    assets = doc.get("assets") or {}
    if "header" in assets:
        return storage.read(resolve(assets["header"]["href"]))
    return storage.read(blob_beside(data_href))


@dataclass(frozen=True)
class ItemParts:
    """The parts of an item a read uses, each checked against the header blob."""

    data_href: str
    """The rumi file, resolved against the item's location."""
    blob: HeaderBlob
    """The verified header blob."""
    bands: list[Band] | None
    """The item's bands, when it lists them."""
    times: TimeCoordinates | None
    """The datacube's time coordinates, when it lists them."""
    grid: Grid | None
    """The projection fields' grid, when the item has ``proj:transform``."""

    @classmethod
    def from_item(cls, doc: dict[str, Any], where: str | None, storage: Storage, header: bytes | HeaderBlob | None) -> ItemParts:
        """Resolve and check an item's parts.

        Args:
            doc: The item as a dict.
            where: The item's href, to resolve relative asset hrefs; its ``self`` link when None.
            storage: Fetches the blob when the item does not inline it.
            header: The blob, when the caller has it (no request for it then).

        Raises:
            ItemError: the item has no data asset, or disagrees with its blob.
            ChecksumError: the blob differs from the item's checksums.
            StorageError: the blob cannot be fetched.
        """
        _check_shape(doc)
        data = _data_asset(doc)
        resolve = _resolver(doc, where)
        data_href: str = resolve(data["href"])
        if header is None:
            header = _header_bytes(doc, resolve, data_href, storage)
        verify_header(doc, header.to_bytes() if isinstance(header, HeaderBlob) else bytes(header))
        blob = header if isinstance(header, HeaderBlob) else HeaderBlob.from_bytes(header)
        props = doc.get("properties") or {}
        bands = [Band.from_dict(b) for b in data.get("bands") or props.get("bands") or []] or None
        dims = props.get("cube:dimensions") or {}
        if bands is None and "band" in dims:
            bands = [Band(str(v)) for v in dims["band"].get("values", [])] or None
        times = None
        if "time" in dims and dims["time"].get("values"):
            times = _times_from_values(dims["time"]["values"], props.get("rumi:time_type", "instant"))
        extensions = doc.get("stac_extensions")
        legacy = isinstance(extensions, list) and SCHEMA_URI_V0_1 in extensions
        grid = Grid.from_dict(props, centre_transform=legacy) if props.get("proj:transform") else None
        parts = cls(data_href, blob, bands, times, grid)
        parts._check(doc.get("id"), data.get("file:size"))
        return parts

    def _check(self, item_id: Any, size: Any) -> None:
        """Fail when the item's bands, times, shape or ``file:size`` disagree with the blob."""
        lay = self.blob.layout
        if self.bands is not None and len(self.bands) != lay.samples_per_pixel:
            raise ItemError(f"item {item_id!r} describes {len(self.bands)} bands, its header blob {lay.samples_per_pixel}")
        if self.times is not None and self.times.time_count != lay.time_count:
            raise ItemError(f"item {item_id!r} lists {self.times.time_count} time steps, its header blob {lay.time_count}")
        grid = self.grid
        if grid is not None and (grid.height, grid.width) != (lay.image_length, lay.image_width):
            raise ItemError(
                f"item {item_id!r} has proj:shape {[grid.height, grid.width]}, its header blob {[lay.image_length, lay.image_width]}"
            )
        if isinstance(size, int) and not isinstance(size, bool):
            check_blob_fits(self.blob, size, where=self.data_href)
