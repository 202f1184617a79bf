"""Publishing a run's cubes as a STAC catalogue.

:class:`WriteCatalog` is a publisher (see :data:`pipelines.convert.Publisher`):
it collects the run's :class:`~pipelines.manifest.ManifestEntry` values in one
place, builds one STAC item per file with :func:`catalog.create_item` (the
manifest line, with its ``extra`` lifted, is the item's extra metadata: bands,
codec, lossy bound) and writes the tree and its ``items.parquet`` index with
:func:`catalog.build_catalog`.

The catalogue is built in a temporary sibling of its directory and then
swapped in, so a reader sees the old catalogue or the new one, never half of
one, and a failed build leaves the old one in place. Siblings that a killed
run left behind are removed before the next build. The sibling sits in the
same parent, so the relative links to the files stay valid after the rename.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.collect import Collect
from pipelines.counters import inc

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pystac

    from pipelines.manifest import ManifestEntry
    from pipelines.options import ConvertOptions

__all__ = ["CATALOG_ID", "WriteCatalog", "catalog_publisher", "incremental_catalog_publisher", "write_catalog"]

CATALOG_ID = "rumi"
"""Id of the catalogue root, and the dataset of items that name none."""


def write_catalog(entries: Sequence[ManifestEntry], *, out: str, root: str, catalog_id: str = CATALOG_ID, carry_over: bool = False) -> int:
    """Write the STAC catalogue of ``entries`` (files under ``out``) to ``root``; return the item count.

    No entries write nothing (an earlier catalogue stays). Items are built in
    cube-id order, in a temporary directory beside ``root`` that then replaces it.
    With ``carry_over``, the items of the catalogue already at ``root`` that
    this run did not produce (and whose data files still exist) are kept, with
    their thumbnails: an incremental run rewrites only what it converted.
    """
    import catalog

    if not entries:
        return 0
    root = os.path.abspath(root)
    parent, name = os.path.split(root)
    os.makedirs(parent, exist_ok=True)
    _remove_stale(parent, name)
    token = uuid.uuid4().hex
    # No dot-suffix on these names: pystac takes a path ending in ".tmp" for a file and
    # would write the item links relative to its parent.
    staging = os.path.join(parent, f".{name}-{token}-staging")
    os.makedirs(os.path.join(staging, "thumbnails"))
    try:
        items = []
        for entry in sorted(entries, key=lambda e: e.cube_id):
            items.append(
                catalog.create_item(
                    os.path.join(out, entry.file),
                    os.path.join(out, entry.blob),
                    extra=entry.catalog_extra,
                    thumbnail_path=os.path.join(staging, "thumbnails", f"{entry.cube_id}.png"),
                )
            )
        kept = _carried_over(root, {e.cube_id for e in entries}, os.path.join(staging, "thumbnails")) if carry_over else []
        items += kept
        catalog.build_catalog(items, staging, catalog_id=catalog_id)
        _swap(staging, root, os.path.join(parent, f".{name}-{token}-old"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    inc(WriteCatalog, "items", len(items))
    return len(items)


def _remove_stale(parent: str, name: str) -> None:
    """Remove ``.<name>-*-staging`` and ``.<name>-*-old`` folders that a killed run left beside the catalogue.

    The catalogue is written by one step of one run at a time (the run owns its
    catalogue folder), so any such sibling is a leftover, never work in progress.
    """
    for entry in os.listdir(parent):
        if entry.startswith(f".{name}-") and entry.endswith(("-staging", "-old")):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _carried_over(root: str, produced: set[str], thumbnails: str) -> list[pystac.Item]:
    """The items of the catalogue at ``root`` not in ``produced``, hrefs absolute, thumbnails copied to ``thumbnails``."""
    import pystac

    found = os.path.join(root, "catalog.json")
    if not os.path.isfile(found):
        return []
    kept = []
    for item in pystac.Catalog.from_file(found).get_items(recursive=True):
        item.make_asset_hrefs_absolute()
        data = item.assets.get("data")
        if item.id in produced or data is None or not os.path.isfile(data.href):
            continue
        thumb = item.assets.get("thumbnail")
        if thumb is not None and os.path.isfile(thumb.href):
            copy = os.path.join(thumbnails, f"{item.id}.png")
            shutil.copyfile(thumb.href, copy)
            thumb.href = copy
        elif thumb is not None:
            del item.assets["thumbnail"]
        item.clear_links()
        kept.append(item)
    return kept


def _swap(new: str, root: str, old: str) -> None:
    """Put directory ``new`` at ``root``; an existing ``root`` is moved aside first, then removed."""
    moved = False
    if os.path.lexists(root):
        os.rename(root, old)
        moved = True
    try:
        os.rename(new, root)
    except OSError:
        if moved:
            with contextlib.suppress(OSError):
                os.rename(old, root)
        raise
    if moved:
        shutil.rmtree(old, ignore_errors=True)


def _write(entries: list[ManifestEntry], out: str, root: str, carry_over: bool) -> int:
    return write_catalog(entries, out=out, root=root, carry_over=carry_over)


@dataclass
class WriteCatalog(beam.PTransform[PCollection["ManifestEntry"], PCollection[int]]):
    """Write the run's STAC catalogue and its stac-geoparquet index."""

    out: str
    """The output directory the manifest's file names are relative to."""
    root: str
    """The catalogue directory (``--catalog``, by default ``OUT/stac``)."""
    carry_over: bool = False
    """Keep the items of an earlier catalogue that this run did not produce (incremental runs)."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, entries: PCollection[ManifestEntry]) -> PCollection[int]:
        """Collect, build, swap in."""
        write = beam.Map(_write, out=self.out, root=self.root, carry_over=self.carry_over)
        out: PCollection[int] = entries | "Collect" >> Collect() | "Write" >> write
        return out


def catalog_publisher(options: ConvertOptions) -> beam.PTransform[PCollection[ManifestEntry], PCollection[int]]:
    """The catalogue publisher: :class:`WriteCatalog` to ``options.catalog_dir``."""
    return WriteCatalog(options.out, options.catalog_dir)


def incremental_catalog_publisher(options: ConvertOptions) -> beam.PTransform[PCollection[ManifestEntry], PCollection[int]]:
    """:class:`WriteCatalog` that keeps the earlier items this run did not produce."""
    return WriteCatalog(options.out, options.catalog_dir, carry_over=True)
