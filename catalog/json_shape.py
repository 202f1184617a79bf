"""JSON values checked against the shape a reader expects, with messages that name the field.

STAC items and ItemCollections come from files users write and from APIs.
A list where an object belongs, or a number for an href, must fail with the
field that is wrong (``assets.data.href is a number, not a text``), not with
an ``AttributeError`` deep in the code that reads it.

>>> mismatch([1], OBJECT, "properties")
'properties is a list, not an object'
>>> list_mismatch(["data", 5], TEXT, "assets.red.roles")
'assets.red.roles[1] is a number, not a text'
>>> mismatch(None, TEXT, "datetime") is None
True
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "BAND_LISTS",
    "BOOLEAN",
    "LIST",
    "NUMBER",
    "OBJECT",
    "OVERSIZED_NUMBER",
    "TEXT",
    "fits_double",
    "item_problems",
    "json_kind",
    "json_object",
    "json_value",
    "list_mismatch",
    "mismatch",
]

OBJECT: Final = "an object"
LIST: Final = "a list"
TEXT: Final = "a text"
NUMBER: Final = "a number"
BOOLEAN: Final = "a boolean"
OVERSIZED_NUMBER: Final = "a number past a double's range"
"""An integer JSON holds but no reader's double does (``1e400`` written out): never a number a field can take."""

BAND_LISTS: Final = ("eo:bands", "bands", "raster:bands")
"""The lists of band objects a STAC asset may hold (EO 1.x, STAC 1.1, raster 1.x)."""


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, with an article: ``"a list"``, ``"null"``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, float):
        return NUMBER
    if isinstance(value, int):
        return NUMBER if fits_double(value) else OVERSIZED_NUMBER
    if isinstance(value, str):
        return TEXT
    return LIST if isinstance(value, list) else OBJECT


def fits_double(value: int) -> bool:
    """Whether a double holds an integer, if not exactly: Python's JSON reads ``1`` followed by 400 zeros as an int.

    >>> fits_double(2**1023), fits_double(10**400)
    (True, False)
    """
    try:
        float(value)
    except OverflowError:
        return False
    return True


def mismatch(value: Any, expected: str, field: str, *, required: bool = False) -> str | None:
    """``"{field} is {kind}, not {expected}"`` when ``value`` is not of JSON kind ``expected``; None when it is.

    An absent value (None) passes, unless ``required``.
    """
    kind = json_kind(value)
    if value is None and not required:
        return None
    return None if kind == expected else f"{field} is {'missing' if value is None else kind}, not {expected}"


def list_mismatch(value: Any, entries: str, field: str) -> str | None:
    """:func:`mismatch` of a list whose every entry is of JSON kind ``entries``, naming the first that is not (``field[j]``)."""
    problem = mismatch(value, LIST, field)
    if problem is not None or value is None:
        return problem
    for j, entry in enumerate(value):
        if json_kind(entry) != entries:
            return f"{field}[{j}] is {json_kind(entry)}, not {entries}"
    return None


def json_value(data: bytes | str) -> Any:
    """The JSON value ``data`` holds.

    Raises:
        ValueError: ``data`` is not UTF-8 JSON (``"is not JSON: ..."``), or
            nests arrays and objects deeper than Python's parser goes (about
            a thousand levels), which it raised as a ``RecursionError``.
    """
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"is not JSON: {err}") from err
    except RecursionError as err:
        raise ValueError("is not JSON this reader can take: its arrays and objects nest deeper than Python's parser goes") from err


def json_object(data: bytes) -> dict[str, Any]:
    """The JSON object ``data`` holds, a STAC catalogue, collection or item.

    Raises:
        ValueError: ``data`` is not JSON (:func:`json_value`), or holds
            another value than an object (``"is a list, not an object"``).
    """
    doc = json_value(data)
    problem = mismatch(doc, OBJECT, "it", required=True)
    if problem is not None:
        raise ValueError(problem.removeprefix("it "))
    return doc  # type: ignore[no-any-return]


def item_problems(item: dict[str, Any]) -> Iterator[str | None]:
    """The checks every reader of a STAC item makes, in order, each computed as it is asked for; None where one passes.

    Its ``properties`` and ``assets`` are objects; each asset is an object
    with a text ``href``, its ``roles`` texts and its band lists objects;
    its times are texts. Take the first problem: each check relies on
    those before it.
    """
    props, assets = item.get("properties"), item.get("assets")
    yield mismatch(props, OBJECT, "properties")
    yield mismatch(assets, OBJECT, "assets")
    for key, asset in (assets or {}).items():
        yield mismatch(asset, OBJECT, f"assets.{key}", required=True)
        yield mismatch(asset.get("href"), TEXT, f"assets.{key}.href", required=True)
        yield list_mismatch(asset.get("roles"), TEXT, f"assets.{key}.roles")
        for field in BAND_LISTS:
            yield list_mismatch(asset.get(field), OBJECT, f"assets.{key}.{field}")
    for key in ("datetime", "start_datetime", "end_datetime"):
        yield mismatch((props or {}).get(key), TEXT, f"properties.{key}")
