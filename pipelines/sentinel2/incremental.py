"""Scheduled, incremental Sentinel-2 runs: the catalogue is the state.

A nightly ``rumi convert --stac-api ...`` searches the area again.
:func:`held_acquisitions` reads, from the STAC catalogue the earlier runs
wrote, which acquisitions each tile and resolution group already holds (the
items' ``s2:mgrs_tile``, ``s2:resolution_group`` and datacube ``time``
values). :func:`increment` then keeps

* every acquisition the catalogue does not hold for its tile and group:
  these are what the run adds; the periods they fall in (per tile and group)
  are the *touched* periods. That includes late arrivals, older than the
  latest acquisition held (a datatake published days after a newer one):
  their period's cube is rewritten with them;
* the held acquisitions of the touched periods, so that their cubes are
  planned whole: the cube of a period that gains acquisitions (the open
  month) keeps its name, is rewritten atomically (staged, verified, renamed
  over the old file) and its item is replaced in place in the catalogue and
  its index; a cube of a touched period that gained nothing (the other side
  of the 04.00 split) validates against its file and is skipped.

Everything else is left alone: cubes of untouched periods are neither planned
nor read, and their items are carried over into the new catalogue
(:func:`pipelines.transforms.publish.incremental_catalog_publisher`). A
reprocessing of a held datatake (same time, newer baseline) is not new: the
run never replaces pixels the catalogue holds. A search window that misses
held acquisitions of a touched period would rewrite that cube without them,
so it is an error (:class:`IncompleteSearchError`): start ``--datetime`` at
or before the beginning of the open period. A late arrival whose period the
window covers only in part waits instead (the run says so and how far back
to search): a nightly window of the open month must not fail on a datatake
of last month published today.

When nothing is newer, :func:`stac_api_input` returns None and the command
says so and writes nothing at all.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.bucket import is_gs, output_store, read_output
from pipelines.errors import PipelineError
from pipelines.planning.timestamps import period_label
from pipelines.sentinel2.bands import select_bands
from pipelines.sentinel2.items import resolution_group
from pipelines.sentinel2.search import search_items, select_items
from rumi_core.files import write_atomic
from rumi_core.times import format_seconds, parse_time

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pipelines.options import ConvertOptions
    from pipelines.sentinel2.items import S2Item

__all__ = ["SEARCH_FILE", "Held", "IncompleteSearchError", "Increment", "held_acquisitions", "increment", "stac_api_input"]

SEARCH_FILE = "stac-search.json"
"""The ItemCollection a ``--stac-api`` run converts, written in the output directory (or bucket prefix)."""


class IncompleteSearchError(PipelineError):
    """The search misses acquisitions the catalogue holds in a period this run would rewrite."""


@dataclass(frozen=True)
class Held:
    """Acquisition times (POSIX seconds) the catalogue holds, per ``(tile, resolution group)``."""

    times: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    def latest(self, key: tuple[str, str]) -> int | None:
        """The newest acquisition held for a tile and group, or None."""
        held = self.times.get(key)
        return max(held) if held else None


def held_acquisitions(catalog_dir: str) -> Held:
    """What a catalogue written by earlier runs holds, in a folder or a bucket; empty when there is none yet.

    Raises:
        catalog.errors.CatalogError: a document of the catalogue is not STAC's shape; the message names it.
    """
    from catalog.walk import walk_items

    times: dict[tuple[str, str], set[int]] = defaultdict(set)
    for _, item in walk_items(os.path.join(catalog_dir, "catalog.json"), read_output):
        props = item.get("properties") or {}
        tile, group = props.get("s2:mgrs_tile"), props.get("s2:resolution_group")
        if not tile or not group:
            continue
        values = props.get("cube:dimensions", {}).get("time", {}).get("values", [])
        times[(str(tile), str(group))].update(parse_time(str(v)) for v in values)
    return Held(dict(times))


def _groups(item: S2Item, bands: str | None, resolution: int | None) -> set[str]:
    present = {band_id for band_id, _ in item.assets}
    return {resolution_group(b, resolution) for b in select_bands(bands) if b.id in present}


@dataclass(frozen=True)
class Increment:
    """What one ``--stac-api`` run does with the acquisitions its search found (:func:`increment`)."""

    run: list[S2Item]
    """The items to plan: the new ones and the held ones of the periods they touch."""
    new: list[S2Item]
    """The acquisitions the catalogue does not hold, that this run adds."""
    waiting: list[S2Item]
    """Late acquisitions (older than the latest held one) of a period the search covers only in part: left out, since
    rewriting that period's cube would drop the held acquisitions the search did not find."""
    waiting_from: str | None = None
    """The first period of :attr:`waiting`, for the message that says how far back to search."""


def increment(items: Sequence[S2Item], held: Held, *, bands: str | None, resolution: int | None, period: str) -> Increment:
    """What to plan; see the module docstring.

    Raises:
        IncompleteSearchError: a held acquisition of a period that gains a newer one is not among ``items``.
    """

    def keys(item: S2Item) -> list[tuple[str, str]]:
        return [(item.tile, g) for g in sorted(_groups(item, bands, resolution))]

    def fresh(item: S2Item) -> list[tuple[str, str]]:
        when = parse_time(item.datetime)
        return [k for k in keys(item) if when not in held.times.get(k, ())]

    def touches(item: S2Item) -> set[tuple[str, str, str]]:
        label = period_label(parse_time(item.datetime), period)
        return {(*k, label) for k in fresh(item)}

    found = {(k, parse_time(i.datetime)) for i in items for k in keys(i)}
    candidates = [item for item in items if fresh(item)]
    touched = set().union(*(touches(i) for i in candidates))
    missing = sorted((k, t) for k, ts in held.times.items() for t in ts if (*k, period_label(t, period)) in touched and (k, t) not in found)
    partial = {(*k, period_label(t, period)) for k, t in missing}
    # A late acquisition (a datatake published after a newer one was converted) joins its period's cube when the
    # search holds the rest of that period; otherwise it waits for a search that does, rather than fail the run.
    waiting = [
        i
        for i in candidates
        if touches(i) & partial and all((latest := held.latest(k)) is not None and parse_time(i.datetime) < latest for k in fresh(i))
    ]
    new = [i for i in candidates if i not in waiting]
    touched = set().union(*(touches(i) for i in new))
    missing = [(k, t) for k, t in missing if (*k, period_label(t, period)) in touched]
    if missing:
        (tile, group), first = missing[0]
        start = period_label(first, period) or "the series"
        raise IncompleteSearchError(
            f"the search misses {len({t for _, t in missing})} acquisitions the catalogue holds in the periods this run rewrites "
            f"(first: T{tile} {group} {format_seconds(first)}); start --datetime at or before the start of {start}"
        )

    def rebuilt(item: S2Item) -> bool:
        when = parse_time(item.datetime)
        return any((*k, period_label(when, period)) in touched and when in held.times.get(k, ()) for k in keys(item))

    run = [item for item in items if item in new or rebuilt(item)]
    first_waiting = min((parse_time(i.datetime) for i in waiting), default=None)
    return Increment(run, new, waiting, None if first_waiting is None else period_label(first_waiting, period) or "the series")


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
    kept items as the API gave them; :mod:`pipelines.transforms.discover` reads it like
    any ItemCollection file.
    """
    documents = search_items(url, collection=collection, bbox=bbox, datetime=datetime, max_cloud=options.max_cloud)
    selection = select_items(((d, None) for d in documents), tiles=options.mgrs, max_cloud=options.max_cloud)
    held = held_acquisitions(options.catalog_dir) if options.write_catalog else Held()
    step = increment(selection.items, held, bands=options.bands, resolution=options.resolution, period=options.cube_period)
    run, new = step.run, step.new
    echo(
        f"search: {len(documents)} items, {len(selection.items)} Sentinel-2 L2A acquisitions kept "
        f"({len(selection.reprocessed)} older processings, {len(selection.other)} other items and "
        f"{len(selection.unreadable)} unreadable ones left out), {len(new)} new"
    )
    if step.waiting:
        echo(
            f"{len(step.waiting)} late acquisition{'s' * (len(step.waiting) > 1)} (older than the latest held, first "
            f"{min(i.datetime for i in step.waiting)}) not converted: the search misses acquisitions the catalogue holds in "
            f"their period; start --datetime at or before the start of {step.waiting_from} to add them"
        )
    if not new:
        latest = max((max(t) for t in held.times.values() if t), default=None)
        if latest is None:
            echo("nothing to convert: the search found no Sentinel-2 L2A acquisition to keep")
        else:
            echo(f"nothing new since the last run (latest held: {format_seconds(latest)}): nothing was converted or rewritten")
        return None
    keep = {i.id for i in run}
    features = sorted((d for d in documents if d.get("id") in keep), key=lambda d: str(d.get("id")))
    data = json.dumps({"type": "FeatureCollection", "features": features}, sort_keys=True).encode()
    if is_gs(options.out):
        # Where the workers read it: they share no disk with this machine.
        path = f"{options.out}/{SEARCH_FILE}"
        output_store().write(path, data)
        return path
    path = os.path.join(options.out, SEARCH_FILE)
    os.makedirs(options.out, exist_ok=True)
    write_atomic(path, data)
    return path
