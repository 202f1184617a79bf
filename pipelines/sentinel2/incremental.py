"""Scheduled, incremental Sentinel-2 runs: the catalogue is the state.

A nightly ``rumi convert --stac-api ...`` searches the same area and dates
again. :func:`held_acquisitions` reads, from the STAC catalogue the earlier
runs wrote, which acquisitions each tile and resolution group already holds
(the items' ``s2:mgrs_tile``, ``s2:resolution_group`` and datacube ``time``
values). :func:`increment` then keeps

* every acquisition **newer** than the latest one held for its tile and
  group: these are what the run adds;
* the acquisitions already held, so that the cubes they fill are planned
  exactly as before: a cube whose acquisitions did not change validates
  against its file and is skipped, not converted again; the cube of a period
  that gains acquisitions (the open month) keeps its name, is rewritten
  atomically (staged, verified, renamed over the old file) and its item is
  replaced in place in the catalogue and its index.

Acquisitions older than the latest held one that the catalogue does not hold
(late arrivals, reprocessings of held datatakes) are left out: a run never
rewrites the past behind the catalogue's back.

When nothing is newer, :func:`stac_api_input` returns None and the command
says so and writes nothing at all.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.assembly import write_atomic
from pipelines.sentinel2.bands import select_bands
from pipelines.sentinel2.items import resolution_group
from pipelines.sentinel2.search import search_items, select_items
from pipelines.times import iso, parse_time

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pipelines.options import ConvertOptions
    from pipelines.sentinel2.items import S2Item

__all__ = ["SEARCH_FILE", "Held", "held_acquisitions", "increment", "stac_api_input"]

SEARCH_FILE = "stac-search.json"
"""The ItemCollection a ``--stac-api`` run converts, written in the output directory."""


@dataclass(frozen=True)
class Held:
    """Acquisition times (POSIX seconds) the catalogue holds, per ``(tile, resolution group)``."""

    times: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    def latest(self, key: tuple[str, str]) -> int | None:
        """The newest acquisition held for a tile and group, or None."""
        held = self.times.get(key)
        return max(held) if held else None


def held_acquisitions(catalog_dir: str) -> Held:
    """What a catalogue written by earlier runs holds; empty when there is none yet."""
    import pystac

    root = os.path.join(catalog_dir, "catalog.json")
    if not os.path.isfile(root):
        return Held()
    times: dict[tuple[str, str], set[int]] = defaultdict(set)
    for item in pystac.Catalog.from_file(root).get_items(recursive=True):
        props = item.properties
        tile, group = props.get("s2:mgrs_tile"), props.get("s2:resolution_group")
        if not tile or not group:
            continue
        values = props.get("cube:dimensions", {}).get("time", {}).get("values", [])
        times[(str(tile), str(group))].update(parse_time(str(v)) for v in values)
    return Held(dict(times))


def _groups(item: S2Item, bands: str | None, resolution: int | None) -> set[str]:
    present = {band_id for band_id, _ in item.assets}
    return {resolution_group(b, resolution) for b in select_bands(bands) if b.id in present}


def increment(items: Sequence[S2Item], held: Held, *, bands: str | None, resolution: int | None) -> tuple[list[S2Item], list[S2Item]]:
    """``(items to plan, items that are new)``; see the module docstring."""
    run: list[S2Item] = []
    new: list[S2Item] = []
    for item in items:
        when = parse_time(item.datetime)
        keys = [(item.tile, g) for g in sorted(_groups(item, bands, resolution))]
        is_new = any((latest := held.latest(k)) is None or when > latest for k in keys)
        if is_new:
            new.append(item)
        if is_new or any(when in held.times.get(k, ()) for k in keys):
            run.append(item)
    return run, new


def stac_api_input(
    options: ConvertOptions,
    *,
    url: str,
    collection: str,
    bbox: Sequence[float] | None,
    datetime: str | None,
    echo: Callable[[str], Any],
) -> str | None:
    """Search a STAC API and write the ItemCollection this run converts; None when nothing is new.

    The ItemCollection (``OUT/stac-search.json``, items sorted by id) holds the
    kept items as the API gave them; :mod:`pipelines.discovery` reads it like
    any ItemCollection file.
    """
    documents = search_items(url, collection=collection, bbox=bbox, datetime=datetime, max_cloud=options.max_cloud)
    selection = select_items(((d, None) for d in documents), tiles=options.mgrs, max_cloud=options.max_cloud)
    held = held_acquisitions(options.catalog_dir) if options.write_catalog else Held()
    run, new = increment(selection.items, held, bands=options.bands, resolution=options.resolution)
    echo(
        f"search: {len(documents)} items, {len(selection.items)} Sentinel-2 L2A acquisitions kept "
        f"({len(selection.reprocessed)} older processings and {len(selection.other)} other items left out), {len(new)} new"
    )
    if not new:
        latest = max((max(t) for t in held.times.values() if t), default=None)
        since = f" (latest held: {iso(latest)})" if latest is not None else ""
        echo(f"nothing new since the last run{since}: nothing was converted or rewritten")
        return None
    keep = {i.id for i in run}
    features = sorted((d for d in documents if d.get("id") in keep), key=lambda d: str(d.get("id")))
    path = os.path.join(options.out, SEARCH_FILE)
    os.makedirs(options.out, exist_ok=True)
    write_atomic(path, json.dumps({"type": "FeatureCollection", "features": features}, sort_keys=True).encode())
    return path
