"""The catalogue: a root catalog, a collection per dataset and grid, the items, and an index.

:func:`build_catalog` takes the items of one run (from
:func:`catalog.items.create_item`) and writes a self-contained STAC tree:

    <root>/catalog.json                      root, links to every collection
    <root>/items.parquet                     stac-geoparquet index of every item
    <root>/<collection>/collection.json      one per dataset and grid
    <root>/<collection>/<item>/<item>.json

Every link and every local asset href is relative, so the tree can be copied
or uploaded as it is (the data files keep their place relative to it). A
collection groups the items of one dataset (``rumi:dataset``, or the
catalogue id) that share a grid (``proj:code``, ``proj:transform`` and
``proj:shape``); its extents are the union of its items'. It also states what
its items hold without opening one (STAC 1.1 collection fields): ``summaries``
of their ``proj:code`` and ``bands``, and ``item_assets``, the asset keys of
its items with the fields they all share.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pystac

from catalog.errors import CatalogError, SearchError
from catalog.index import INDEX_NAME, write_index
from catalog.items import EO_URI, PROJECTION_URI
from catalog.selectors import lonlat_union
from catalog.storage import href_kind

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Iterable, Sequence

__all__ = ["INDEX_MEDIA_TYPE", "build_catalog", "collection_key"]

INDEX_MEDIA_TYPE = "application/vnd.apache.parquet"
"""Media type of the index link."""


def collection_key(item: pystac.Item, *, default_dataset: str) -> str:
    """Return the id of the collection an item belongs to: ``<dataset>-<epsg>-<grid hash>``.

    Items share a collection when they share a dataset, a CRS, a transform
    and a shape.
    """
    props = item.properties
    dataset = props.get("rumi:dataset") or default_dataset
    code = props.get("proj:code")
    grid = json.dumps([code, props.get("proj:transform"), props.get("proj:shape")], sort_keys=True)
    digest = hashlib.sha1(grid.encode(), usedforsecurity=False).hexdigest()[:8]
    epsg = code.split(":")[1] if isinstance(code, str) and ":" in code else "nocrs"
    return f"{dataset}-{epsg}-{digest}"


def _title(dataset: str, props: dict[str, Any]) -> str:
    """A collection's title: its dataset, CRS and grid, so that the collections of one CRS read apart in a list.

    >>> _title("s2", {"proj:code": "EPSG:32633", "proj:transform": [10, 0, 399960, 0, -10, 5800020], "proj:shape": [1024, 2048]})
    's2 on EPSG:32633, 2048 x 1024 pixels of 10 from (399960, 5800020)'
    """
    title = f"{dataset} on {props.get('proj:code')}"
    transform, shape = props.get("proj:transform"), props.get("proj:shape")
    if isinstance(transform, list) and len(transform) >= 6 and isinstance(shape, list) and len(shape) == 2:
        a, _, c, _, _, f = transform[:6]
        title += f", {shape[1]} x {shape[0]} pixels of {a:.15g} from ({c:.15g}, {f:.15g})"
    return title


def _interval(item: pystac.Item) -> tuple[dt.datetime, dt.datetime]:
    common = item.common_metadata
    start = common.start_datetime or item.datetime
    end = common.end_datetime or item.datetime
    if start is None or end is None:
        raise CatalogError(f"item {item.id} has neither datetime nor start_datetime/end_datetime")
    return start, end


def _extent(items: Sequence[pystac.Item]) -> pystac.Extent:
    union = lonlat_union(it.bbox for it in items if it.bbox)
    spatial = [list(union) if union is not None else [-180.0, -90.0, 180.0, 90.0]]
    spans = [_interval(it) for it in items]
    temporal = [[min(s for s, _ in spans), max(e for _, e in spans)]]
    return pystac.Extent(pystac.SpatialExtent(spatial), pystac.TemporalExtent(temporal))


def _summaries(items: Sequence[pystac.Item]) -> dict[str, list[Any]]:
    """The distinct ``proj:code`` and band objects of the items, in the order items list them.

    A band is summarised from the ``data`` asset's ``bands`` (where rumi items
    carry them); bands that differ in any field are listed apart.
    """
    codes: dict[str, None] = {}
    bands: dict[str, dict[str, Any]] = {}
    for it in items:
        code = it.properties.get("proj:code")
        if isinstance(code, str):
            codes[code] = None
        data = it.assets.get("data")
        for band in (data.extra_fields.get("bands") if data is not None else None) or []:
            bands.setdefault(json.dumps(band, sort_keys=True), band)
    summaries: dict[str, list[Any]] = {}
    if codes:
        summaries["proj:code"] = list(codes)
    if bands:
        summaries["bands"] = list(bands.values())
    return summaries


_DEFINITION_FIELDS = ("title", "type", "roles", "bands")
"""The asset fields an item asset definition carries when every item that has the asset agrees on them."""


def _item_assets(items: Sequence[pystac.Item]) -> dict[str, dict[str, Any]]:
    """One definition per asset key of any item, with the fields all its items share.

    STAC 1.1 asks each definition for at least two of ``title``,
    ``description``, ``type`` and ``roles``; a key whose items agree on fewer
    (never the case for what :func:`catalog.items.create_item` writes) is left out.
    """
    keys = sorted({key for it in items for key in it.assets})
    definitions = {}
    for key in keys:
        assets = [it.assets[key].to_dict() for it in items if key in it.assets]
        shared = {
            name: assets[0][name]
            for name in _DEFINITION_FIELDS
            if name in assets[0] and all(a.get(name) == assets[0][name] for a in assets)
        }
        if len(shared.keys() & {"title", "type", "roles"}) >= 2:
            definitions[key] = shared
    return definitions


def _extensions(summaries: dict[str, list[Any]], item_assets: dict[str, dict[str, Any]]) -> list[str]:
    """The extensions whose fields the summaries and item assets use."""
    bands = summaries.get("bands", []) + [b for d in item_assets.values() for b in d.get("bands", [])]
    uses_eo = any(key.startswith("eo:") for band in bands for key in band)
    return [PROJECTION_URI] * ("proj:code" in summaries) + [EO_URI] * uses_eo


def _index_rows(catalog: pystac.Catalog, root_dir: str) -> list[dict[str, Any]]:
    """The index's items: hrefs relative to ``root_dir``, and of the links only ``self`` and ``collection``, both relative too."""
    rows = []
    for item in catalog.get_items(recursive=True):
        if item.geometry is None:
            # stac-geoparquet needs a geometry and a bbox for every row (and fails inside shapely without).
            raise SearchError(
                f"item {item.id!r} has no geometry (its file has no CRS), and a stac-geoparquet index needs one: "
                "build the catalogue with index=False, or write the file with a CRS"
            )
        row = item.to_dict(include_self_link=False, transform_hrefs=False)
        for key, asset in item.assets.items():
            href = asset.get_absolute_href() or asset.href
            if href_kind(href) == "local":
                href = os.path.relpath(href, root_dir)
            row["assets"][key]["href"] = href
        self_href = item.get_self_href()
        links = [ln for ln in row.get("links", []) if ln.get("rel") not in ("self", "root", "parent", "collection")]
        if self_href:
            links.append({"rel": "self", "href": os.path.relpath(self_href, root_dir), "type": "application/geo+json"})
        collection = item.get_collection()
        if collection is not None and (collection_href := collection.get_self_href()):
            # STAC allows an item's "collection" field only beside a link to it.
            links.append({"rel": "collection", "href": os.path.relpath(collection_href, root_dir), "type": "application/json"})
        row["links"] = links
        rows.append(row)
    return rows


def build_catalog(
    items: Iterable[pystac.Item],
    root_dir: str | os.PathLike[str],
    *,
    catalog_id: str = "rumi",
    title: str | None = None,
    description: str = "rumi cubes",
    license: str = "other",  # noqa: A002 - the STAC field's name
    index: bool = True,
) -> pystac.Catalog:
    """Write a self-contained STAC catalogue of rumi items under ``root_dir``.

    Args:
        items: Items from :func:`catalog.items.create_item`; they are cloned,
            not changed.
        root_dir: Local directory of the catalogue (created if needed).
        catalog_id: Id of the root catalog, and the dataset of items that name none.
        title: Title of the root catalog.
        description: Description of the root catalog and its collections.
        license: License of a collection whose items do not all carry one
            and the same ``license`` (an SPDX id, or ``"other"``); a
            collection whose items do takes theirs. An SPDX id is linked to
            its text (``rel="license"``).
        index: Also write the stac-geoparquet index ``items.parquet``.

    Returns:
        The root catalog, saved.

    Raises:
        CatalogError: no items, duplicate item ids, or an item without time.
        SearchError: ``index`` is true and an item cannot be indexed (one
            without geometry, from a file without CRS); nothing is written.
    """
    root = os.path.abspath(os.fspath(root_dir))
    clones = [it.clone() for it in items]
    if not clones:
        raise CatalogError("a catalogue needs at least one item")
    seen: set[str] = set()
    groups: dict[str, list[pystac.Item]] = defaultdict(list)
    for it in clones:
        if it.id in seen:
            raise CatalogError(f"two items are called {it.id!r}; item ids must be unique in a catalogue")
        seen.add(it.id)
        groups[collection_key(it, default_dataset=catalog_id)].append(it)
    catalog = pystac.Catalog(id=catalog_id, description=description, title=title)
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda it: it.id)
        dataset = members[0].properties.get("rumi:dataset") or catalog_id
        summaries, item_assets = _summaries(members), _item_assets(members)
        stated = {it.properties.get("license") for it in members}
        chosen = str(stated.pop()) if len(stated) == 1 and None not in stated else license
        collection = pystac.Collection(
            id=key,
            description=f"{description}: dataset {dataset}, grid {members[0].properties.get('proj:code')}",
            extent=_extent(members),
            license=chosen,
            title=_title(dataset, members[0].properties),
            stac_extensions=_extensions(summaries, item_assets),
            summaries=pystac.Summaries(summaries),
        )
        if chosen not in ("other", "proprietary"):
            # STAC 1.1 asks a link to the licence's text beside an SPDX identifier.
            collection.add_link(pystac.Link(rel="license", target=f"https://spdx.org/licenses/{chosen}.html", media_type="text/html"))
        if item_assets:
            collection.item_assets = {key: pystac.ItemAssetDefinition(fields) for key, fields in item_assets.items()}
        collection.add_items(members)
        catalog.add_child(collection)
    if index:
        catalog.add_link(pystac.Link(rel="alternate", target=f"./{INDEX_NAME}", media_type=INDEX_MEDIA_TYPE, title="stac-geoparquet index"))
    os.makedirs(root, exist_ok=True)
    catalog.normalize_hrefs(root)
    catalog.make_all_asset_hrefs_relative()
    if index:  # first: a catalogue whose index cannot be written is not written at all, links to it included
        write_index(_index_rows(catalog, root), os.path.join(root, INDEX_NAME))
    catalog.save(catalog_type=pystac.CatalogType.SELF_CONTAINED, dest_href=root)
    return catalog
