"""Walking a static STAC catalogue: every item below a root, each document checked as it is read.

A static catalogue is a tree of JSON documents (catalogues, collections,
items) joined by ``child`` and ``item`` links. :func:`walk_items` reads it
level by level, several documents at a time (a bucket or a web server
answers one small object per request), and checks each document's shape
where the walk reads it (:mod:`catalog.json_shape`,
:func:`catalog.item_parts.item_problem`), so a broken document is an error
naming it, never an ``AttributeError`` halfway down the tree.

Search, the pipeline's discovery of STAC inputs and its publishing into a
shared catalogue all walk with it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from catalog.errors import CatalogError
from catalog.item_parts import item_problem
from catalog.json_shape import OBJECT, json_object, list_mismatch
from catalog.storage import join_href

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["READ_THREADS", "walk_items"]

READ_THREADS: Final = 8
"""Documents read at a time."""


def walk_items(root: str, read: Callable[[str], bytes | None]) -> list[tuple[str, dict[str, Any]]]:
    """Every item below the catalogue, collection or item at ``root``, as ``(location, item)``, sorted by location.

    Args:
        root: The location of the root document (a path or URL), against
            which relative links resolve.
        read: The bytes at a location, or None where there are none: a
            linked document that is gone is skipped.

    Raises:
        CatalogError: a document is not JSON, not an object, or not STAC's
            shape where the walk reads it (its links, or an item's fields);
            the message names it.
    """
    items: list[tuple[str, dict[str, Any]]] = []
    level, seen = [root], {root}
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        while level:
            below: list[str] = []
            for url, raw in zip(level, pool.map(read, level), strict=True):
                if raw is None:
                    continue
                try:
                    doc = json_object(raw)
                except ValueError as err:
                    raise CatalogError(f"{url} {err}") from err
                problem = item_problem(doc) if doc.get("type") == "Feature" else list_mismatch(doc.get("links"), OBJECT, "links")
                if problem is not None:
                    raise CatalogError(f"{url} is malformed: {problem}")
                if doc.get("type") == "Feature":
                    items.append((url, doc))
                    continue
                for link in doc.get("links") or ():
                    href = link.get("href")
                    target = join_href(url, href) if isinstance(href, str) else None
                    if link.get("rel") in ("child", "item") and target is not None and target not in seen:
                        seen.add(target)
                        below.append(target)
            level = below
    return sorted(items, key=lambda pair: pair[0])
