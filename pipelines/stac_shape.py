"""The shape of a STAC item where the pipeline reads it, checked before it is read.

STAC documents come from files users write and from APIs; a list where an
object belongs, or a number for an href, must be a dead letter naming the
item and the field, not an ``AttributeError`` that fails the whole run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from catalog.json_shape import NUMBER, item_problems, json_kind, mismatch

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["malformed"]


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
