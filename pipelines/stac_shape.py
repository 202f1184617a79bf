"""The shape of a STAC item where the pipeline reads it, checked before it is read.

STAC documents come from files users write and from APIs; a list where an
object belongs, or a number for an href, must be a dead letter naming the
item and the field, not an ``AttributeError`` that fails the whole run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from catalog.json_shape import NUMBER, OBJECT, TEXT, json_kind, list_mismatch, mismatch

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["malformed"]

_BAND_LISTS: Final = ("eo:bands", "bands", "raster:bands")
"""The lists of band objects an asset may hold."""


def malformed(item: Any) -> str | None:
    """What in ``item`` is not the shape of a STAC item where the pipeline reads it, naming the field; None when all is.

    An item is an object; its ``properties`` and ``assets`` objects; each
    asset an object with a text ``href``, its ``roles`` a list of texts and
    its band lists lists of objects; a time a text, a cloud cover a number.
    """
    if not isinstance(item, dict):
        return f"is {json_kind(item)}, not an object"
    return next((problem for problem in _problems(item) if problem), None)


def _problems(item: dict[str, Any]) -> Iterator[str | None]:
    """Each check of :func:`malformed`, in order, computed as it is asked for."""
    props, assets = item.get("properties"), item.get("assets")
    yield mismatch(props, OBJECT, "properties")
    for key, wanted in (("datetime", TEXT), ("start_datetime", TEXT), ("eo:cloud_cover", NUMBER)):
        yield mismatch((props or {}).get(key), wanted, f"properties.{key}")
    yield mismatch(assets, OBJECT, "assets")
    for key, asset in (assets or {}).items():
        yield mismatch(asset, OBJECT, f"assets.{key}", required=True)
        yield mismatch(asset.get("href"), TEXT, f"assets.{key}.href", required=True)
        yield list_mismatch(asset.get("roles"), TEXT, f"assets.{key}.roles")
        for field in _BAND_LISTS:
            yield list_mismatch(asset.get(field), OBJECT, f"assets.{key}.{field}")
