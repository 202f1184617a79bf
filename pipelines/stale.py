"""Cubes of earlier runs that this run's cubes supersede, and those it leaves unlisted.

A generic cube's name carries its time range and a hash of its inputs, so a
run over more scenes (the next night's) writes its cube under a new name.
The earlier file stays in ``OUT``, and the catalogue, which a run rewrites
for the files under its own ``OUT``, no longer lists it: a nightly run over a
growing archive would leave one such cube a night.

:func:`superseded_cubes` finds them, strictly: a cube of the manifest that was
in ``OUT`` before the run is superseded when this run wrote or kept another
cube whose inputs, or the inputs it dropped in favour of others at their
times, include every one of its inputs, so nothing it holds is lost with it
but what this run chose to replace. A cube of another area, one whose scene failed tonight, a file
the manifest never listed and the data of any item of the run's catalogue or
of ``OUT/stac`` are never superseded. ``rumi convert --prune`` removes the
superseded cubes, with their header blobs, once the run has published its
own outputs; without it the summary names them, and ``OUT/superseded.jsonl``
lists them, so that a later ``--prune`` still finds them when the manifest
no longer does (:func:`earlier_cubes`).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from pipelines.bucket import is_gs, output_exists, read_output, remove_output
from pipelines.jsonl import load_jsonl, write_jsonl

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pipelines.options import ConvertOptions
    from pipelines.transforms.manifest import ManifestEntry

__all__ = [
    "Settled",
    "Unlisted",
    "earlier_cubes",
    "hold_earlier",
    "release_earlier",
    "remove_cubes",
    "settle",
    "superseded_cubes",
    "unlisted_cubes",
]


def _location(path: str) -> str:
    """A path or URL in one spelling, for comparing locations."""
    return path if is_gs(path) else os.path.realpath(path)


def _catalogued(catalog_dirs: Iterable[str]) -> set[str]:
    """The locations of the data files the items of the catalogues at ``catalog_dirs`` point to (none where there is none)."""
    from catalog.storage import join_href
    from catalog.walk import walk_items

    found = set()
    for catalog_dir in catalog_dirs:
        for url, item in walk_items(os.path.join(catalog_dir, "catalog.json"), read_output):
            data = (item.get("assets") or {}).get("data") or {}
            if isinstance(data.get("href"), str):
                found.add(_location(join_href(url, data["href"])))
    return found


def earlier_cubes(options: ConvertOptions) -> list[dict[str, Any]]:
    """The cubes a run may supersede: the lines of the manifest before it, the superseded and unlisted cubes earlier
    runs kept, and those a killed run had not settled (:func:`hold_earlier`).

    A file that is not whole JSON lines (not one this tool wrote whole) gives none.
    """
    lines: list[dict[str, Any]] = []
    for path in (options.manifest_path, options.superseded_path, options.unlisted_path, options.settling_path):
        with contextlib.suppress(ValueError):
            lines += load_jsonl(path)
    return lines


def hold_earlier(options: ConvertOptions, before: Sequence[dict[str, Any]]) -> None:
    """Keep ``before`` (:func:`earlier_cubes`) in ``OUT/.settling.jsonl`` until :func:`release_earlier`.

    The run replaces the manifest before it settles which earlier cubes it
    supersedes (:func:`settle`) or leaves unlisted (:func:`unlisted_cubes`).
    Killed in between, it would leave them in no manifest and no list, and
    no later run would name or prune them; the next run reads them here.
    """
    lines = {line["file"]: line for line in before if isinstance(line.get("file"), str)}
    if lines:
        write_jsonl(options.settling_path, [lines[name] for name in sorted(lines)])


def release_earlier(options: ConvertOptions) -> None:
    """Drop what :func:`hold_earlier` kept, once the run has settled it."""
    remove_output(options.settling_path)


def superseded_cubes(options: ConvertOptions, before: Sequence[dict[str, Any]], entries: Sequence[ManifestEntry]) -> list[dict[str, Any]]:
    """The cubes of ``before`` (:func:`earlier_cubes`) that ``entries`` (this run's) supersede, as ``{"file", "inputs"}``.

    Raises:
        catalog.errors.CatalogError: a document of a catalogue is malformed.
    """
    kept = {entry.file for entry in entries}
    # What a cube dropped (a scene at a time another one holds, an older processing) it chose to do without.
    covers = [frozenset(entry.inputs) | frozenset(entry.dropped) for entry in entries]
    candidates: dict[str, list[str]] = {}
    for line in before:
        name, inputs = line.get("file"), sorted(line.get("inputs") or ())
        if not isinstance(name, str) or name in kept or not inputs or not any(set(inputs) <= c for c in covers):
            continue
        path = os.path.join(options.out, name)
        if output_exists(path):
            candidates[name] = inputs
    if not candidates:
        return []
    catalogued = _catalogued(dict.fromkeys((options.catalog_dir, os.path.join(options.out, "stac"))))
    return [{"file": n, "inputs": i} for n, i in sorted(candidates.items()) if _location(os.path.join(options.out, n)) not in catalogued]


class Settled(NamedTuple):
    """What :func:`settle` did."""

    stale: tuple[str, ...]
    """The files of this run's superseded cubes (removed with ``--prune``)."""
    listed: frozenset[str]
    """The names ``OUT/superseded.jsonl`` now lists: this run's superseded cubes and earlier runs' still there."""


def settle(options: ConvertOptions, superseded: Sequence[dict[str, Any]], entries: Sequence[ManifestEntry]) -> Settled:
    """Remove the ``superseded`` cubes with ``--prune``, else list them in ``OUT/superseded.jsonl``.

    The list is what lets a later ``--prune`` find them once the manifest no
    longer names them. What earlier runs listed stays listed while its file
    exists, unless this run's ``entries`` hold it again: a run of another
    area supersedes none of them, and must not forget them. The list is
    removed when there is nothing to list.
    """
    paths = tuple(os.path.join(options.out, line["file"]) for line in superseded)
    if options.prune:
        remove_cubes(paths)
    earlier: list[dict[str, Any]] = []
    with contextlib.suppress(ValueError):  # not whole JSON lines: not a list this tool wrote
        earlier = load_jsonl(options.superseded_path)
    mine = {entry.file for entry in entries} | {line["file"] for line in superseded}
    listed = [] if options.prune else list(superseded)
    listed += [
        line
        for line in earlier
        if isinstance(line.get("file"), str) and line["file"] not in mine and output_exists(os.path.join(options.out, line["file"]))
    ]
    if listed:
        write_jsonl(options.superseded_path, sorted(listed, key=lambda line: str(line["file"])))
    else:
        remove_output(options.superseded_path)
    return Settled(paths, frozenset(line["file"] for line in listed))


class Unlisted(NamedTuple):
    """What :func:`unlisted_cubes` found."""

    files: tuple[str, ...]
    """The cubes' files."""
    gone: tuple[str, ...]
    """Their inputs that no longer exist (local files and ``gs://`` objects; a URL is not asked), sorted."""
    failed: tuple[str, ...]
    """Their inputs that are dead letters of this run, sorted."""


def unlisted_cubes(
    options: ConvertOptions,
    before: Sequence[dict[str, Any]],
    entries: Sequence[ManifestEntry],
    settled: Settled,
    dead_letters: Iterable[str] = (),
) -> Unlisted:
    """The cubes of ``before`` still in ``OUT`` that this run neither wrote, kept nor superseded, and that
    ``OUT/superseded.jsonl`` does not list (as :func:`settle` left it); listed in ``OUT/unlisted.jsonl``.

    The run's manifest and catalogue describe its own cubes, so these are no
    longer listed: a run given other inputs than the last (another area, a
    scene that failed tonight or left the archive) leaves the earlier cubes
    in ``OUT`` unfindable by ``rumi search``. They are never removed, since
    one may hold the only copy of a scene deleted since; ``OUT/unlisted.jsonl``
    keeps them, so that every later run's summary names them (not the next
    one's alone), and a run that holds all their inputs again supersedes them.

    ``dead_letters`` are this run's (hrefs): those among the cubes' inputs are named as a cause. A cube an item of
    the run's catalogue points to is listed, whatever the manifest says.
    """
    done = {entry.file for entry in entries} | {os.path.basename(path) for path in settled.stale} | settled.listed
    lines = {
        line["file"]: sorted(line.get("inputs") or ())
        for line in before
        if isinstance(line.get("file"), str) and line["file"] not in done and output_exists(os.path.join(options.out, line["file"]))
    }
    if lines:
        # An incremental run (--stac-api) carries the items of the periods it did not touch over into its catalogue:
        # their cubes are in no manifest of its, and listed all the same (unlisted.jsonl named them, every night).
        from catalog.errors import CatalogError

        with contextlib.suppress(CatalogError):  # a catalogue that cannot be read lists nothing
            catalogued = _catalogued(dict.fromkeys((options.catalog_dir, os.path.join(options.out, "stac"))))
            lines = {name: inputs for name, inputs in lines.items() if _location(os.path.join(options.out, name)) not in catalogued}
    if lines:
        write_jsonl(options.unlisted_path, [{"file": name, "inputs": inputs} for name, inputs in sorted(lines.items())])
    else:
        remove_output(options.unlisted_path)
    inputs = {i for held in lines.values() for i in held if isinstance(i, str)}
    gone = tuple(sorted(i for i in inputs if (is_gs(i) or "://" not in i) and not output_exists(i)))
    failed = tuple(sorted(inputs & set(dead_letters)))
    return Unlisted(tuple(os.path.join(options.out, name) for name in sorted(lines)), gone, failed)


def remove_cubes(paths: Iterable[str]) -> None:
    """Remove each cube and its header blob (``<file>h``); one already gone is no error."""
    for path in paths:
        remove_output(path)
        remove_output(path + "h")
