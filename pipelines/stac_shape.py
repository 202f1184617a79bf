"""The shape of a STAC item where the pipeline reads it, checked before it is read.

STAC documents come from files users write and from APIs; a list where an
object belongs, or a number for an href, must be a dead letter naming the
item and the field, not an ``AttributeError`` that fails the whole run.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["json_kind", "malformed"]

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
    props = item.get("properties")
    if props is not None and not isinstance(props, dict):
        return f"properties is {json_kind(props)}, not an object"
    for key, kind, wanted in (("datetime", str, "a text"), ("start_datetime", str, "a text"), ("eo:cloud_cover", (int, float), "a number")):
        value = (props or {}).get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"properties.{key} is {json_kind(value)}, not {wanted}"
    assets = item.get("assets")
    if assets is not None and not isinstance(assets, dict):
        return f"assets is {json_kind(assets)}, not an object"
    for key, asset in (assets or {}).items():
        if not isinstance(asset, dict):
            return f"assets.{key} is {json_kind(asset)}, not an object"
        if not isinstance(asset.get("href"), str):
            return f"assets.{key}.href is {json_kind(asset.get('href'))}, not a text"
        for field, entry_type, wanted in (("roles", str, "a text"), *((f, dict, "an object") for f in _BAND_LISTS)):
            listed = asset.get(field)
            if listed is None:
                continue
            if not isinstance(listed, list):
                return f"assets.{key}.{field} is {json_kind(listed)}, not a list"
            for j, entry in enumerate(listed):
                if not isinstance(entry, entry_type):
                    return f"assets.{key}.{field}[{j}] is {json_kind(entry)}, not {wanted}"
    return None


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, with an article: ``"a list"``, ``"null"``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a text"
    return "a list" if isinstance(value, list) else "an object"
