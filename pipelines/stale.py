"""Cubes of earlier runs left in an output folder, which nothing lists any more.

A generic cube's name carries its time range and a hash of its inputs, so a
run over more scenes (the next night's) writes its cube under a new name.
The earlier file stays in ``OUT``, and the catalogue, which a run rewrites for
the files under its own ``OUT``, no longer lists it. A nightly run over a
growing archive would leave one such cube a night. :func:`stale_cubes` finds
them: ``.rumi`` files directly in ``OUT`` that are neither in this run's
manifest nor the data of an item of its catalogue (an incremental
``--stac-api`` run carries the items of untouched periods over, and their
files are not stale). ``rumi convert --prune`` removes them, with their
header blobs, once the run has published its own outputs; without it the
summary names them.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from pipelines.bucket import is_gs, output_store, read_output

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pipelines.options import ConvertOptions

__all__ = ["remove_cubes", "stale_cubes"]


def _location(path: str) -> str:
    """A path or URL in one spelling, for comparing locations."""
    return path if is_gs(path) else os.path.realpath(path)


def _cubes_in(out: str) -> list[str]:
    """The ``.rumi`` files directly in the output folder or bucket prefix, sorted."""
    if is_gs(out):
        prefix = out.rstrip("/") + "/"
        return sorted(url for url in output_store().listing(out) if url.endswith(".rumi") and "/" not in url[len(prefix) :])
    try:
        names = os.listdir(out)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(out, n) for n in names if n.endswith(".rumi") and os.path.isfile(os.path.join(out, n)))


def _catalogued(catalog_dir: str) -> set[str]:
    """The locations of the data files the items of the catalogue at ``catalog_dir`` point to (none without one)."""
    from catalog.storage import join_href
    from catalog.walk import walk_items

    root = f"{catalog_dir}/catalog.json" if is_gs(catalog_dir) else os.path.join(catalog_dir, "catalog.json")
    found = set()
    for url, item in walk_items(root, read_output):
        data = (item.get("assets") or {}).get("data") or {}
        if isinstance(data.get("href"), str):
            found.add(_location(join_href(url, data["href"])))
    return found


def stale_cubes(options: ConvertOptions, produced: Iterable[str]) -> list[str]:
    """The cubes in ``options.out`` that are neither ``produced`` (file names relative to it) nor in the catalogue.

    Raises:
        catalog.errors.CatalogError: a document of the catalogue is malformed.
    """
    listed = {_location(os.path.join(options.out, name) if not is_gs(options.out) else f"{options.out}/{name}") for name in produced}
    candidates = [path for path in _cubes_in(options.out) if _location(path) not in listed]
    if not candidates:
        return []
    catalogued = _catalogued(options.catalog_dir)
    return [path for path in candidates if _location(path) not in catalogued]


def remove_cubes(paths: Iterable[str]) -> None:
    """Remove each cube and its header blob (``<file>h``); one already gone is no error."""
    for path in paths:
        for target in (path, path + "h"):
            if is_gs(target):
                output_store().delete(target)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
