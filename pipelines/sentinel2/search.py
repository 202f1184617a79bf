"""Finding Sentinel-2 L2A items: a STAC API through pystac-client, or STAC documents already read.

:func:`search_items` asks a STAC API's ``/search`` (Earth Search v1, the
Planetary Computer, CDSE...) for one collection, bbox and datetime range, with
the cloud-cover limit sent to the server as a CQL2 ``filter`` where the API
conforms to it, else as a ``query``; pystac-client follows the ``next`` links.
:func:`select_items` then keeps the Sentinel-2 L2A items (:func:`~pipelines.sentinel2.items.is_s2_l2a`)
on the asked tiles and under the cloud limit, and the newest processing of
each datatake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.deadlines import STAC_API_TIMEOUT
from catalog.json_shape import json_kind
from pipelines.sentinel2.items import S2Item, filter_items, is_s2_l2a, keep_newest, parse_item
from pipelines.stac_shape import malformed

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = ["S2Request", "SelectedItems", "search_items", "select_items"]


@dataclass(frozen=True)
class S2Request:
    """What a run asks of Sentinel-2 L2A items (``--bands``, ``--resolution``, ``--mgrs``, ``--max-cloud``)."""

    bands: str | None = None
    """Comma-separated band ids, common names or asset keys; None for every band."""
    resolution: int | None = None
    """None: one cube per resolution group; 10: every band on the 10 m grid."""
    tiles: tuple[str, ...] = ()
    """MGRS tiles to keep; empty keeps all."""
    max_cloud: float | None = None
    """Largest ``eo:cloud_cover`` kept, in percent."""

    @property
    def given(self) -> list[str]:
        """The options of the request a user gave, by their command-line names; empty for a request of every item and band."""
        named = {"--bands": self.bands, "--resolution": self.resolution, "--mgrs": self.tiles or None, "--max-cloud": self.max_cloud}
        return [name for name, value in named.items() if value is not None]


@dataclass(frozen=True)
class SelectedItems:
    """The items a run keeps, and why the others were left out."""

    items: list[S2Item]
    """Kept: Sentinel-2 L2A, on the tiles, under the cloud limit, newest processing of their datatake."""
    reprocessed: list[S2Item] = field(default_factory=list)
    """Older processings of a kept datatake."""
    other: list[str] = field(default_factory=list)
    """Ids of items that are not Sentinel-2 L2A, or not the shape of a STAC item (:func:`~pipelines.stac_shape.malformed`)."""
    unreadable: list[str] = field(default_factory=list)
    """What is wrong with each Sentinel-2 L2A item that cannot be read (no datetime), naming it."""


def search_items(
    url: str, *, collection: str, bbox: Sequence[float] | None, datetime: str | None, max_cloud: float | None
) -> list[dict[str, Any]]:
    """Every item of a STAC API search, as dicts, in the order the API pages them.

    Raises:
        pystac_client.exceptions.APIError: the API answered with an error.
    """
    from pystac_client import Client
    from pystac_client.conformance import ConformanceClasses

    client = Client.open(url, timeout=STAC_API_TIMEOUT)
    kwargs: dict[str, Any] = {"collections": [collection], "bbox": list(bbox) if bbox else None, "datetime": datetime}
    if max_cloud is not None:
        if client.conforms_to(ConformanceClasses.FILTER):
            kwargs["filter"] = {"op": "<=", "args": [{"property": "eo:cloud_cover"}, max_cloud]}
            kwargs["filter_lang"] = "cql2-json"
        else:
            kwargs["query"] = {"eo:cloud_cover": {"lte": max_cloud}}
    return list(client.search(**kwargs).items_as_dicts())


def select_items(
    documents: Iterable[tuple[Mapping[str, Any], str | None]], *, tiles: Sequence[str] = (), max_cloud: float | None = None
) -> SelectedItems:
    """Keep the Sentinel-2 L2A items of ``(item, base)`` pairs; see the module docstring."""
    found: list[S2Item] = []
    other: list[str] = []
    unreadable: list[str] = []
    for item, base in documents:
        problem = malformed(item)
        if problem is not None:
            # An item of the wrong shape is no "other item": it could not be judged.
            name = repr(item.get("id")) if isinstance(item, dict) else "?"
            unreadable.append(f"STAC item {name}: {problem}")
        elif is_s2_l2a(item):
            try:
                found.append(parse_item(item, base))
            except ValueError as err:
                unreadable.append(str(err))
        else:
            other.append(str(item.get("id")) if isinstance(item, dict) else json_kind(item))
    kept, dropped = keep_newest(filter_items(found, tiles=tiles, max_cloud=max_cloud))
    return SelectedItems(kept, dropped, sorted(other), sorted(unreadable))
