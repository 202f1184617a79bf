"""Finding cubes: ``rumi search`` over a catalogue, its index or a STAC API.

:func:`search` takes where to look and what to look for (a lon/lat bounding
box, a time range, band names) and returns one :class:`SearchHit` per
matching cube: its id, time range, band names and the hrefs a read needs.

Where to look:

* a catalogue directory, its ``catalog.json``, their URLs, or a ``gs://``
  prefix holding ``catalog.json``: the catalogue's
  stac-geoparquet index (linked from the root as ``alternate``, or
  ``items.parquet`` beside it) is queried with DuckDB (:mod:`catalog.index`);
  a catalogue without an index is walked item by item;
* an ``items.parquet`` index, local or remote, directly;
* any other ``http(s)://`` URL: a STAC API, searched with pystac-client
  (``/search`` with ``bbox`` and ``datetime``).

Band names are matched like ``rumi read --bands`` matches them: name, EO
common name or description, case-insensitively; a hit has every band asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from time import monotonic
from typing import TYPE_CHECKING, Any

from catalog.bands import Band
from catalog.deadlines import NO_DEADLINE, STAC_API_TIMEOUT
from catalog.errors import CatalogError, SearchError, SelectorError, StorageError
from catalog.http import SIDECAR_ABSENT
from catalog.index import INDEX_NAME, query_index, read_index_table
from catalog.json_shape import OBJECT, json_object, list_mismatch
from catalog.selectors import TimeRange, check_bbox, lonlat_boxes, parse_datetime
from catalog.storage import Storage, href_kind, join_href
from catalog.walk import walk_items
from rumi_core.errors import InvalidInputError
from rumi_core.times import format_seconds, parse_time

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["SearchHit", "search"]


@dataclass(frozen=True)
class SearchHit:
    """One cube found by a search."""

    id: str
    """Item id."""
    collection: str | None
    """Collection id."""
    start: str | None
    """First instant covered (ISO 8601)."""
    end: str | None
    """Last instant covered (ISO 8601)."""
    bands: tuple[str, ...]
    """Band names, in band order."""
    data_href: str | None
    """Absolute href of the ``.rumi`` file."""
    header_href: str | None
    """Absolute href of the ``.rumih`` blob, if the item has one."""
    item_href: str | None
    """Absolute href of the item JSON, if known."""
    inline_header: bool = False
    """Whether the item carries the blob inline (a read needs no request for it)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form printed by ``rumi search --json``."""
        return {
            "id": self.id,
            "collection": self.collection,
            "start": self.start,
            "end": self.end,
            "bands": list(self.bands),
            "data": self.data_href,
            "header": self.header_href,
            "item": self.item_href,
            "inline_header": self.inline_header,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchHit:
        """Read the JSON form."""
        return cls(
            id=data["id"],
            collection=data.get("collection"),
            start=data.get("start"),
            end=data.get("end"),
            bands=tuple(data.get("bands") or ()),
            data_href=data.get("data"),
            header_href=data.get("header"),
            item_href=data.get("item"),
            inline_header=bool(data.get("inline_header", False)),
        )

    @classmethod
    def from_item(cls, item: dict[str, Any], *, base: str | None) -> SearchHit:
        """Summarise an item dict; relative hrefs resolve against ``base``."""

        def absolute(href: str | None) -> str | None:
            if href is None or base is None:
                return href
            return join_href(base, href)

        props = item.get("properties") or {}
        assets = item.get("assets") or {}
        self_href = _self_href(item)
        start = props.get("start_datetime") or props.get("datetime")
        end = props.get("end_datetime") or props.get("datetime")
        return cls(
            id=item["id"],
            collection=item.get("collection"),
            start=_iso(start),
            end=_iso(end),
            bands=tuple(b.name for b in _item_bands(item)),
            data_href=absolute(assets.get("data", {}).get("href")),
            header_href=absolute(assets.get("header", {}).get("href")),
            item_href=absolute(self_href),
            inline_header="rumi:header" in props,
        )


def _iso(value: Any) -> str | None:
    """Normalise a datetime or ISO string to whole seconds, ``YYYY-MM-DDTHH:MM:SSZ``."""
    if value is None:
        return None
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    try:
        return format_seconds(parse_time(text))
    except InvalidInputError:
        return text


def _item_bands(item: dict[str, Any]) -> list[Band]:
    data = (item.get("assets") or {}).get("data") or {}
    raw = data.get("bands") or (item.get("properties") or {}).get("bands")
    if raw:
        return [Band.from_dict(b) for b in raw]
    values = ((item.get("properties") or {}).get("cube:dimensions") or {}).get("band", {}).get("values") or []
    return [Band(str(v)) for v in values]


def _self_href(item: dict[str, Any]) -> str | None:
    """The href of an item's ``self`` link, if it has one."""
    links = item.get("links")
    found = (
        next((ln.get("href") for ln in links if isinstance(ln, dict) and ln.get("rel") == "self"), None)
        if isinstance(links, list)
        else None
    )
    return found if isinstance(found, str) else None


def _self_url(item: dict[str, Any]) -> str | None:
    """An item's ``self`` link, when it is a URL."""
    found = _self_href(item)
    return found if found is not None and href_kind(found) != "local" else None


def _has_bands(item: dict[str, Any], wanted: Sequence[str]) -> bool:
    bands = _item_bands(item)
    return all(any(b.matches(w) for b in bands) for w in wanted)


def _in_time(item: dict[str, Any], time: TimeRange) -> bool:
    props = item.get("properties") or {}
    start = props.get("start_datetime") or props.get("datetime")
    end = props.get("end_datetime") or props.get("datetime")
    if start is None or end is None:
        return False
    try:
        return time.meets(parse_datetime(str(start)), parse_datetime(str(end)))
    except SelectorError as err:
        raise SearchError(f"item {item.get('id')!r}: {err}") from err


def _in_bbox(item: dict[str, Any], bbox: Sequence[float]) -> bool:
    import shapely

    geometry = item.get("geometry")
    if geometry is None:
        return False
    shape = shapely.geometry.shape(geometry)
    return any(shape.intersects(shapely.box(*box)) for box in lonlat_boxes(bbox))


def _index_href(catalog_href: str, doc: dict[str, Any]) -> str:
    problem = list_mismatch(doc.get("links"), OBJECT, "links")
    if problem is not None:
        raise SearchError(f"{catalog_href}: {problem}")
    for link in doc.get("links") or ():
        if link.get("rel") == "alternate" and str(link.get("href", "")).endswith(".parquet"):
            return join_href(catalog_href, link["href"])
    return join_href(catalog_href, INDEX_NAME)


def _index_table(index_href: str, storage: Storage, *, required: bool) -> Any:
    """The index at ``index_href``; unless ``required``, None where there is none, and the catalogue is walked instead.

    A remote catalogue's index may be missing as a local one's may: the
    server answers 404, or 403 to a reader who may not list a bucket.

    Raises:
        StorageError: the index cannot be read.
    """
    if href_kind(index_href) == "local":
        return read_index_table(index_href) if required or os.path.isfile(index_href) else None
    try:
        data = storage.read(index_href)
    except StorageError as err:
        if required or err.status not in SIDECAR_ABSENT:
            raise
        return None
    return read_index_table(data)


def _read_stac(href: str, storage: Storage) -> dict[str, Any]:
    """The JSON object at ``href``, a catalogue, collection or item.

    Raises:
        SearchError: it is not JSON, or not an object.
        StorageError: it cannot be read.
    """
    data = storage.read(href)
    try:
        return json_object(data)
    except ValueError as err:
        raise SearchError(f"{href} {err}") from err


def _is_api(href: str) -> bool:
    path = href.split("?", 1)[0]
    return href_kind(href) == "http" and not path.endswith((".json", ".parquet"))


def search(
    target: str | os.PathLike[str],
    *,
    bbox: Sequence[float] | None = None,
    datetime: str | TimeRange | None = None,
    bands: str | Sequence[str] | None = None,
    limit: int | None = None,
    storage: Storage | None = None,
) -> list[SearchHit]:
    """Search a catalogue, an index or a STAC API for cubes.

    Args:
        target: A catalogue directory or ``catalog.json``, an ``items.parquet``
            index (local or URL), or a STAC API URL.
        bbox: ``(minx, miny, maxx, maxy)`` in longitude/latitude; ``minx > maxx`` crosses the antimeridian.
        datetime: ``"A/B"`` (open ends ``..``) or a :class:`TimeRange`.
        bands: Band names every hit must have; one name alone as a text.
        limit: Most hits returned.
        storage: Storage access for remote catalogues and indexes.

    Returns:
        The hits, in index (or API) order.

    Raises:
        SearchError: the target cannot be searched, or ``limit`` is below 1.
        SelectorError: ``datetime`` is malformed, or neither text nor a :class:`TimeRange`.
        StorageError: a remote catalogue or index cannot be fetched.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise SearchError(f"limit is a number of hits, at least 1 (None for all), got {limit!r}")  # -1 returned none
    storage = storage or Storage()
    time = TimeRange.given(datetime)
    if bbox is not None:
        try:
            bbox = check_bbox(bbox, antimeridian=True, searched=True)
        except SelectorError as err:
            raise SearchError(str(err)) from err
    href = os.fspath(target)
    wanted = [bands] if isinstance(bands, str) else list(bands or [])
    if _is_api(href):
        try:
            found = _search_api(href, bbox=bbox, time=time, limit=None if wanted else limit, deadline=storage.deadline)
        except SearchError as err:
            # A server that answered, but not as a STAC API (a folder's listing, a 404), may serve a static
            # catalogue, given by its folder's URL as a local one is by its folder. One that did not answer is not asked again.
            from pystac_client.exceptions import APIError

            cause = err.__cause__
            if not (isinstance(cause, ValueError) or (isinstance(cause, APIError) and getattr(cause, "status_code", None) is not None)):
                raise
            static = href.split("?", 1)[0].rstrip("/") + "/catalog.json"
            try:
                return search(static, bbox=bbox, datetime=time, bands=bands, limit=limit, storage=storage)
            except StorageError as missing:
                if missing.href != static:
                    raise
                raise SearchError(f"{err}; nor is it the folder of a static catalogue (no {static})") from err
        # An API's items are remote documents: their relative hrefs resolve against their own URL (their
        # self link), or the API's, never to a file on this machine (join_href).
        hits = [SearchHit.from_item(it, base=_self_url(it) or href) for it in found if _has_bands(it, wanted)]
        return hits[:limit] if limit is not None else hits
    if href_kind(href) == "local" and os.path.isdir(href):
        href = os.path.join(href, "catalog.json")
    elif href_kind(href) == "gs" and not href.endswith((".json", ".parquet")):
        # A bucket has no folders to list: a prefix names the catalogue whose root is <prefix>/catalog.json.
        href = href.rstrip("/") + "/catalog.json"
    if href.split("?", 1)[0].endswith(".parquet"):
        index_href, table = href, _index_table(href, storage, required=True)
    else:
        index_href = _index_href(href, _read_stac(href, storage))
        table = _index_table(index_href, storage, required=False)
    if table is not None:
        items = query_index(table, bbox=bbox, time=time, limit=None if wanted else limit)  # bands filter what it returns
        hits = [SearchHit.from_item(it, base=index_href) for it in items if _has_bands(it, wanted)]
    else:
        try:
            walked = walk_items(href, storage.read)
        except CatalogError as err:
            raise SearchError(str(err)) from err
        hits = [
            replace(SearchHit.from_item(it, base=where), item_href=where)
            for where, it in walked
            if (bbox is None or _in_bbox(it, bbox)) and (time is None or _in_time(it, time)) and _has_bands(it, wanted)
        ]
    return hits[:limit] if limit is not None else hits


def _search_api(
    url: str, *, bbox: Sequence[float] | None, time: TimeRange | None, limit: int | None, deadline: float | None
) -> list[dict[str, Any]]:
    """The items a STAC API's search answers, all pages; by ``deadline`` (a :func:`time.monotonic` instant) if one is given.

    pystac-client waits :data:`STAC_API_TIMEOUT` for each answer and retries
    five times: a server that never answers held ``rumi search --timeout 3``
    for six minutes. With a deadline, each request waits at most what is left
    of it, is not retried, and no page is asked for after it.
    """
    from pystac_client import Client
    from pystac_client.exceptions import APIError
    from pystac_client.stac_api_io import StacApiIO

    def left() -> float:
        if deadline is None:
            return NO_DEADLINE
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise SearchError(f"searching the STAC API at {url}: the time allowed ran out")
        return remaining

    try:
        remaining = left()
        waits = (max(round(min(STAC_API_TIMEOUT[0], remaining), 1), 0.1), max(round(min(STAC_API_TIMEOUT[1], remaining), 1), 0.1))
        # Client.open gives the StacApiIO its own timeout again: both are given it.
        client = Client.open(url, stac_io=StacApiIO(timeout=waits, max_retries=None if deadline is not None else 5), timeout=waits)
        result = client.search(
            bbox=list(bbox) if bbox is not None else None,
            datetime=time.to_interval() if time is not None and (time.start is not None or time.end is not None) else None,
            max_items=limit,
        )
        items = []
        for page in result.pages():
            items += [it.to_dict(transform_hrefs=False) for it in page]
            left()
        return items
    except (APIError, OSError, ValueError) as err:
        raise SearchError(f"searching the STAC API at {url} failed: {_answer(err)}") from err


def _answer(err: BaseException) -> str:
    """What a server answered, on one line: pystac-client's APIError is the response's body, a web server's 404 page whole.

    >>> from pystac_client.exceptions import APIError
    >>> page, refusal = APIError("<!DOCTYPE HTML>\\n<html><body>Not Found</body></html>"), APIError('{"description": "bad bbox"}')
    >>> page.status_code, refusal.status_code = 404, 400
    >>> _answer(page), _answer(refusal)
    ('HTTP 404, a web page', 'HTTP 400: {"description": "bad bbox"}')
    """
    text = " ".join(str(err).split())
    status = getattr(err, "status_code", None)
    if status is None:
        return text
    if text.startswith("<"):
        return f"HTTP {status}, a web page"
    return f"HTTP {status}: {text[:300]}" if text else f"HTTP {status}"
