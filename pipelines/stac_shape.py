"""The shape of a STAC item where the pipeline reads it, checked before it is read.

STAC documents come from files users write and from APIs; a list where an
object belongs, or a number for an href, must be a dead letter naming the
item and the field, not an ``AttributeError`` that fails the whole run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from catalog.json_shape import NUMBER, item_problems, json_kind, mismatch

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["STAC_SUFFIXES", "is_stac_document", "malformed"]

STAC_SUFFIXES: Final = (".json", ".geojson")
"""Name endings of the inputs read as STAC documents (ItemCollections, items, catalogues, collections)."""


def is_stac_document(text: str) -> bool:
    """Whether an input is read as a STAC document: by its name (a URL's query aside), as discovery tells them from rasters.

    >>> is_stac_document("s2/items.json"), is_stac_document("https://h/c.geojson?sig=1"), is_stac_document("b04.tif")
    (True, True, False)
    """
    return text.lower().split("?", 1)[0].endswith(STAC_SUFFIXES)


def malformed(item: Any) -> str | None:
    """What in ``item`` is not the shape of a STAC item where the pipeline reads it, naming the field; None when all is.

    The checks of every reader (:func:`catalog.json_shape.item_problems`),
    and a cloud cover that is a number.
    """
    if not isinstance(item, dict):
        return f"is {json_kind(item)}, not an object"
    return next((problem for problem in _problems(item) if problem), None)


def _problems(item: dict[str, Any]) -> Iterator[str | None]:
    """Each check of :func:`malformed`, in order, computed as it is asked for."""
    yield from item_problems(item)
    yield mismatch((item.get("properties") or {}).get("eo:cloud_cover"), NUMBER, "properties.eo:cloud_cover")
