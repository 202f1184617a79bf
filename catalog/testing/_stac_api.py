"""A static STAC API on 127.0.0.1: enough of ``/search`` for pystac-client.

:class:`StaticStacApi` serves a fixed list of item dicts as one API with a
landing page, ``/conformance``, ``/collections`` and ``/search`` (``GET`` and
``POST``). A search filters by ``collections``, ``ids``, ``bbox`` (the item's
bbox intersects), ``datetime`` (an instant or an ``a/b`` range, ``..`` open),
the query extension (``{"eo:cloud_cover": {"lte": 30}}``: ``eq``, ``lt``,
``lte``, ``gt``, ``gte``) and CQL2-JSON comparisons joined by ``and``
(``{"op": "<=", "args": [{"property": "eo:cloud_cover"}, 30]}``), and pages
its answer by ``limit`` with a ``next`` link holding a ``token``. Items are
answered in datetime-then-id order. It counts the searches it answered.

No STAC server library could serve here: stac-fastapi-static answers nothing
when bbox and datetime are combined, and the others need a database.
"""

from __future__ import annotations

import json
import operator
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from catalog.testing._background import BackgroundServer
from rumi_core.times import parse_time

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


_CONFORMANCE: Final = [
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/collections",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0/item-search#query",
]
_FILTER_CONFORMANCE: Final = [
    "https://api.stacspec.org/v1.0.0/item-search#filter",
    "http://www.opengis.net/spec/cql2/1.0/conf/cql2-json",
    "http://www.opengis.net/spec/cql2/1.0/conf/basic-cql2",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/item-search",
]
_COMPARE: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "eq": operator.eq,
    "=": operator.eq,
    "lt": operator.lt,
    "<": operator.lt,
    "lte": operator.le,
    "<=": operator.le,
    "gt": operator.gt,
    ">": operator.gt,
    "gte": operator.ge,
    ">=": operator.ge,
}


def _in_range(props: Mapping[str, Any], datetime: str | None) -> bool:
    if not datetime:
        return True
    when = parse_time(str(props.get("datetime")))
    if "/" not in datetime:
        return when == parse_time(datetime)
    start, end = datetime.split("/", 1)
    return (start in ("", "..") or when >= parse_time(start)) and (end in ("", "..") or when <= parse_time(end))


def _intersects(item: Mapping[str, Any], bbox: Sequence[float] | None) -> bool:
    if not bbox:
        return True
    w, s, e, n = (float(v) for v in bbox)
    iw, is_, ie, in_ = (float(v) for v in item["bbox"])
    return iw <= e and ie >= w and is_ <= n and in_ >= s


def _query_ok(props: Mapping[str, Any], query: Mapping[str, Mapping[str, Any]] | None) -> bool:
    for name, tests in (query or {}).items():
        value = props.get(name)
        if value is None or not all(_COMPARE[op](value, want) for op, want in tests.items()):
            return False
    return True


def _filter_ok(props: Mapping[str, Any], expr: Mapping[str, Any] | None) -> bool:
    if not expr:
        return True
    op, args = expr["op"], expr["args"]
    if op == "and":
        return all(_filter_ok(props, a) for a in args)
    prop, want = args
    value = props.get(prop["property"])
    return value is not None and bool(_COMPARE[op](value, want))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """Stay quiet."""

    def _json(self, status: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/geo+json" if status == 200 else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        """Landing page, conformance, collections, or a GET search."""
        url = urlsplit(self.path)
        base = self.server.base_url
        if url.path in ("", "/"):
            links = [
                {"rel": "self", "href": base, "type": "application/json"},
                {"rel": "root", "href": base, "type": "application/json"},
                {"rel": "conformance", "href": base + "conformance", "type": "application/json"},
                {"rel": "data", "href": base + "collections", "type": "application/json"},
                {"rel": "search", "href": base + "search", "type": "application/geo+json", "method": "GET"},
                {"rel": "search", "href": base + "search", "type": "application/geo+json", "method": "POST"},
            ]
            self._json(200, {"type": "Catalog", "stac_version": "1.1.0", "id": "static-api", "description": "test API",
                             "conformsTo": self.server.conformance, "links": links})  # fmt: skip
        elif url.path == "/conformance":
            self._json(200, {"conformsTo": self.server.conformance})
        elif url.path == "/collections":
            self._json(200, {"collections": [self.server.collection(c) for c in self.server.collection_ids], "links": []})
        elif url.path.startswith("/collections/") and url.path.count("/") == 2:
            self._json(200, self.server.collection(url.path.rsplit("/", 1)[1]))
        elif url.path == "/search":
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body: dict[str, Any] = {}
            if "collections" in q:
                body["collections"] = q["collections"].split(",")
            if "bbox" in q:
                body["bbox"] = [float(v) for v in q["bbox"].split(",")]
            for key in ("datetime", "token", "limit"):
                if key in q:
                    body[key] = q[key]
            for key in ("query", "filter"):
                if key in q:
                    body[key] = json.loads(q[key])
            self._search(body)
        else:
            self._json(404, {"code": "NotFound", "description": url.path})

    def do_POST(self) -> None:
        """A POST search."""
        if urlsplit(self.path).path != "/search":
            self._json(404, {"code": "NotFound", "description": self.path})
            return
        length = int(self.headers.get("Content-Length") or 0)
        self._search(json.loads(self.rfile.read(length) or b"{}"))

    def _search(self, body: dict[str, Any]) -> None:
        if body.get("filter") and body.get("filter-lang", "cql2-json") != "cql2-json":
            self._json(400, {"code": "BadRequest", "description": "only cql2-json filters"})
            return
        hits = [
            item
            for item in self.server.items
            if (not body.get("collections") or item.get("collection") in body["collections"])
            and (not body.get("ids") or item["id"] in body["ids"])
            and _intersects(item, body.get("bbox"))
            and _in_range(item["properties"], body.get("datetime"))
            and _query_ok(item["properties"], body.get("query"))
            and _filter_ok(item["properties"], body.get("filter"))
        ]
        start = int(body.get("token") or 0)
        limit = int(body.get("limit") or self.server.page_size)
        page = hits[start : start + limit]
        links: list[dict[str, Any]] = []
        if start + limit < len(hits):
            links.append(
                {"rel": "next", "href": self.server.base_url + "search", "type": "application/geo+json", "method": "POST",
                 "body": {**body, "token": str(start + limit)}, "merge": False}
            )  # fmt: skip
        self.server.count_search()
        self._json(200, {"type": "FeatureCollection", "features": page, "links": links, "numberMatched": len(hits),
                         "numberReturned": len(page)})  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, items: Sequence[Mapping[str, Any]], page_size: int, cql2: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.conformance = _CONFORMANCE + (_FILTER_CONFORMANCE if cql2 else [])
        self.items = sorted((dict(i) for i in items), key=lambda i: (str(i["properties"].get("datetime")), str(i["id"])))
        self.page_size = page_size
        self.collection_ids = sorted({str(i.get("collection")) for i in self.items if i.get("collection")})
        self.searches = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"

    def count_search(self) -> None:
        with self._lock:
            self.searches += 1

    def collection(self, cid: str) -> dict[str, Any]:
        return {
            "type": "Collection", "stac_version": "1.1.0", "id": cid, "description": cid, "license": "proprietary",
            "extent": {"spatial": {"bbox": [[-180, -90, 180, 90]]}, "temporal": {"interval": [[None, None]]}}, "links": [],
        }  # fmt: skip


class StaticStacApi(BackgroundServer[_Server]):
    """Serve ``items`` as a STAC API on 127.0.0.1; see the module docstring.

    Use as a context manager; :attr:`url` is the API's root, :attr:`searches`
    the number of ``/search`` pages answered. With ``cql2=False`` it does not
    advertise the filter extension (only ``query``), as some APIs do not.

    Example:
        >>> item = {"type": "Feature", "stac_version": "1.1.0", "id": "a", "collection": "c", "bbox": [0, 0, 1, 1],
        ...         "geometry": None, "properties": {"datetime": "2023-06-01T10:00:00Z", "eo:cloud_cover": 5}, "links": [], "assets": {}}
        >>> from pystac_client import Client
        >>> with StaticStacApi([item]) as api:
        ...     [i["id"] for i in Client.open(api.url).search(collections=["c"], bbox=[0.5, 0.5, 2, 2]).items_as_dicts()]
        ['a']
    """

    def __init__(self, items: Sequence[Mapping[str, Any]], *, page_size: int = 10, cql2: bool = True) -> None:
        super().__init__(_Server(items, page_size, cql2), "stac-api")

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return self._server.base_url

    @property
    def searches(self) -> int:
        """``/search`` pages answered so far."""
        with self._server._lock:
            return self._server.searches
