"""Publishing a run's cubes as a STAC catalogue.

:class:`WriteCatalog` is a publisher (see :data:`pipelines.convert.Publisher`):
it collects the run's :class:`~pipelines.transforms.manifest.ManifestEntry` values in one
place, builds one STAC item per file with :func:`catalog.create_item` (the
manifest line, with its ``extra`` lifted, is the item's extra metadata: bands,
codec, lossy bound) and writes the tree and its ``items.parquet`` index with
:func:`catalog.build_catalog`.

A catalogue may be shared by runs with their own outputs (``--catalog``):
a run rewrites the items of the files under its ``--out`` and keeps the
earlier items of files elsewhere that still exist (:func:`write_catalog`).

The catalogue is built in a temporary sibling of its directory and then
swapped in, so a reader sees the old catalogue or the new one, never half of
one, and a failed build leaves the old one in place. Siblings that a killed
run left behind are removed before the next build. The sibling sits in the
same parent, so the relative links to the files stay valid after the rename.

Files in a bucket (``--out gs://…``) are read for their items through
:class:`catalog.Storage` with ranged requests (head, trailer, the frames of
the thumbnail). A catalogue in a bucket (``--catalog gs://…``, or the
default ``OUT/stac``) is built in a local temporary directory laid out like
the bucket, so the hrefs of files in the same bucket come out relative as
they do on disk, and then uploaded with google-cloud-storage. GCS has no
rename, so there is no swap: the objects are written leaves first (items and
thumbnails, then collections, then the ``items.parquet`` index) and the
root ``catalog.json`` last. Every object a reader can reach from a root it
has read is therefore whole, and a killed publish leaves the earlier root
(or none) in place. Objects whose bytes are already there are not
rewritten; catalogue objects of an earlier run that the new catalogue no
longer has are deleted after the root is written, so a re-run ends
byte-identical to a clean run.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import re
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines import scratch
from pipelines.bucket import DELETE_THREADS, is_gs, output_exists, output_store, read_output
from pipelines.crc32c import crc32c_of
from pipelines.errors import PipelineError
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import Collect, inc

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pystac

    from pipelines.options import ConvertOptions
    from pipelines.transforms.manifest import ManifestEntry

__all__ = ["CATALOG_ID", "WriteCatalog", "catalog_publisher", "check_catalog_root", "incremental_catalog_publisher", "write_catalog"]

CATALOG_ID = "rumi"
"""Id of the catalogue root, and the dataset of items that name none."""


def write_catalog(
    entries: Sequence[ManifestEntry],
    *,
    out: str,
    root: str,
    catalog_id: str = CATALOG_ID,
    carry_over: bool = False,
    license: str | None = None,  # noqa: A002 - the STAC field's name
) -> int:
    """Write the STAC catalogue of ``entries`` (files under ``out``) to ``root``; return the item count.

    No entries write nothing (an earlier catalogue stays). Items are built in
    cube-id order. A local ``root`` is built in a temporary directory beside
    it that then replaces it; a ``gs://`` root is built locally and uploaded
    root last (see the module docstring).

    A run owns the files under its ``out``, and a catalogue there (the
    default ``OUT/stac``), not a catalogue elsewhere: the items of the
    catalogue already at such a ``root`` whose data files lie outside ``out``
    (other runs sharing ``--catalog``) and still exist are kept, with their
    thumbnails, so a second run into a shared catalogue adds to it. With
    ``carry_over`` (incremental runs) the earlier items under ``out`` that
    this run did not produce are kept too: it rewrites only what it
    converted. Without it they go, so a re-run into ``out`` ends as a clean one.
    The items of ``entries`` carry ``license`` when it is given; kept items
    keep theirs.
    """
    if not entries:
        return 0
    if is_gs(root):
        count = _write_bucket_catalog(entries, out=out, root=root, catalog_id=catalog_id, carry_over=carry_over, license=license)
        inc(WriteCatalog, "items", count)
        return count
    import catalog

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
        items = _items(entries, out, os.path.join(staging, "thumbnails"), lambda url: url, license)
        items += _carried_over(
            os.path.join(root, "catalog.json"),
            {e.cube_id for e in entries},
            os.path.join(staging, "thumbnails"),
            Earlier(read_output, output_exists, lambda url: url),
            out=out,
            carry_over=carry_over,
        )
        catalog.build_catalog(items, staging, catalog_id=catalog_id)
        if not _same_tree(staging, root):  # a catalogue that holds these bytes keeps its files' times (rsync sends nothing)
            _swap(staging, root, os.path.join(parent, f".{name}-{token}-old"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    inc(WriteCatalog, "items", len(items))
    return len(items)


def _items(
    entries: Sequence[ManifestEntry],
    out: str,
    thumbnails: str,
    href: Callable[[str], str],
    license: str | None,  # noqa: A002
) -> list[pystac.Item]:
    """One item per entry, in cube-id order, carrying ``license`` when given; ``href`` maps a file's location to its asset href."""
    import catalog

    storage = catalog.Storage()
    items = []
    for entry in sorted(entries, key=lambda e: e.cube_id):
        data = _join(out, entry.file)
        blob = _join(out, entry.blob)
        items.append(
            catalog.create_item(
                data,
                blob,
                extra=entry.catalog_extra,
                data_href=href(data) if is_gs(data) else None,
                header_href=href(blob) if is_gs(blob) else None,
                thumbnail_path=os.path.join(thumbnails, f"{entry.cube_id}.png"),
                storage=storage,
            )
        )
        if license is not None:
            items[-1].properties["license"] = license
    return items


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if is_gs(base) else os.path.join(base, name)


_CATALOG_OBJECT = re.compile(r"(catalog\.json|items\.parquet|thumbnails/[^/]+\.png|[^/]+/collection\.json|[^/]+/[^/]+/[^/]+\.json)")
"""Relative names of the objects a catalogue consists of: only these are ever deleted under a ``gs://`` root,
so a catalogue sharing its prefix with other outputs never removes them."""


def _write_bucket_catalog(
    entries: Sequence[ManifestEntry],
    *,
    out: str,
    root: str,
    catalog_id: str,
    carry_over: bool,
    license: str | None,  # noqa: A002
) -> int:
    """Build the catalogue in a local mirror of the bucket, then upload it leaves first and the root last."""
    import catalog
    from catalog.gcs import split_gs_url

    root = root.rstrip("/")
    root_bucket, _ = split_gs_url(root + "/catalog.json")
    with scratch.mirror() as mirror:  # held, so no other run's sweep removes it meanwhile

        def local(url: str) -> str:
            bucket, name = split_gs_url(url)
            return os.path.join(mirror, bucket, *name.split("/"))

        def href(url: str) -> str:
            # A file in the catalogue's bucket gets a relative href (computed between mirrored paths);
            # one in another bucket keeps its absolute gs:// URL.
            return local(url) if split_gs_url(url)[0] == root_bucket else url

        staging = local(root + "/catalog.json")[: -len("/catalog.json")]
        os.makedirs(os.path.join(staging, "thumbnails"))
        items = _items(entries, out, os.path.join(staging, "thumbnails"), href, license)
        items += _carried_over(
            f"{root}/catalog.json",
            {e.cube_id for e in entries},
            os.path.join(staging, "thumbnails"),
            Earlier(read_output, output_exists, href),
            out=out,
            carry_over=carry_over,
        )
        catalog.build_catalog(items, staging, catalog_id=catalog_id)
        _upload_tree(staging, root)
    return len(items)


class Earlier(NamedTuple):
    """How :func:`_carried_over` reaches an earlier catalogue, local or in a bucket."""

    read: Callable[[str], bytes | None]
    """The bytes at a location, or None where there are none."""
    exists: Callable[[str], bool]
    """Whether a data file is there."""
    href: Callable[[str], str]
    """A kept asset's href in the new catalogue, from its absolute location (as new items' are mapped)."""


def _carried_over(root: str, produced: set[str], thumbnails: str, earlier: Earlier, *, out: str, carry_over: bool) -> list[pystac.Item]:
    """The items of the catalogue at ``root`` to keep: not in ``produced``, their data still there, and outside ``out``
    (with ``carry_over``, inside it too; see :func:`write_catalog`). A catalogue under ``out`` is the run's own:
    without ``carry_over`` it is not read.

    Their asset hrefs are mapped with ``earlier.href`` and their thumbnails
    copied to ``thumbnails``, so the rebuilt catalogue holds them as a clean
    build would.

    Raises:
        PipelineError: a document of the earlier catalogue cannot be read
            or is malformed (:func:`catalog.walk.walk_items`). Dropping it
            would lose its entry; the earlier catalogue stays as it is.
    """
    from catalog.errors import CatalogError
    from catalog.walk import READ_THREADS, walk_items

    if not carry_over and _under(out, root):
        return []
    try:
        items = walk_items(root, earlier.read)
    except CatalogError as err:
        raise PipelineError(
            f"{err}; it is in the catalogue this run adds to: repair or remove it and convert again "
            "(the converted cubes are kept, and skipped)"
        ) from err
    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        wanted = [(url, doc) for url, doc in items if doc.get("id") not in produced]
        keep = (lambda where: True) if carry_over else (lambda where: not _under(out, where))
        kept = [item for item in pool.map(lambda pair: _kept(pair[0], pair[1], thumbnails, earlier, keep), wanted) if item is not None]
    inc(WriteCatalog, "earlier_kept", len(kept))
    return kept


def _kept(url: str, doc: dict[str, Any], thumbnails: str, earlier: Earlier, keep: Callable[[str], bool]) -> pystac.Item | None:
    """The earlier item ``doc`` (at ``url``) as the rebuilt catalogue holds it; None where its data is gone or not kept."""
    import pystac

    from catalog.storage import join_href

    assets = doc.get("assets") or {}
    data = assets.get("data")
    where = None if data is None else join_href(url, data["href"])
    if where is None or not keep(where) or not earlier.exists(where):
        return None
    thumb = assets.pop("thumbnail", None)
    for asset in assets.values():
        asset["href"] = earlier.href(join_href(url, asset["href"]))
    png = None if thumb is None else earlier.read(join_href(url, thumb["href"]))
    if png is not None and thumb is not None:
        path = os.path.join(thumbnails, f"{doc['id']}.png")
        with open(path, "wb") as f:
            f.write(png)
        assets["thumbnail"] = {**thumb, "href": path}
    return pystac.Item.from_dict({**doc, "links": []}, preserve_dict=False)


def _under(out: str, location: str) -> bool:
    """Whether ``location`` (a path or ``gs://`` URL) lies under the output ``out``."""
    if is_gs(out) or is_gs(location):
        return location.startswith(out.rstrip("/") + "/")
    base = os.path.abspath(out)
    return os.path.commonpath([base, os.path.abspath(location)]) == base


def _upload_rank(name: str) -> int:
    """Upload order: items and thumbnails, then collections, then the index, then the root."""
    if name == "catalog.json":
        return 3
    if name == "items.parquet":
        return 2
    return 1 if name.endswith("/collection.json") else 0


def _upload_tree(staging: str, root: str) -> None:
    """Upload every file under ``staging`` to ``root``, root last; then delete catalogue objects it no longer has."""
    from concurrent.futures import ThreadPoolExecutor

    store = output_store()
    present = {url[len(root) + 1 :]: stat for url, stat in store.listing(root).items()}
    files: dict[str, bytes] = {}
    for name, path in _tree_files(staging).items():
        with open(path, "rb") as f:
            files[name] = f.read()

    def upload(name: str) -> None:
        data = files[name]
        old = present.get(name)
        if old is None or old.size != len(data) or old.crc32c != crc32c_of(data):
            store.write(f"{root}/{name}", data)

    with ThreadPoolExecutor(max_workers=DELETE_THREADS) as pool:
        for rank in range(4):
            # Each rank is written completely before the next starts.
            list(pool.map(upload, sorted(n for n in files if _upload_rank(n) == rank)))
        stale = sorted(f"{root}/{n}" for n in present if n not in files and _CATALOG_OBJECT.fullmatch(n))
        list(pool.map(store.delete, stale))


def _other_run_output(root: str, out: str) -> str | None:
    """The nearest folder at or above the local ``root`` that is another run's ``--out``, if any.

    A run's ``--out`` holds its ``manifest.jsonl``, whose lines name cubes: a
    stray file of that name (or a run that made no cube) marks nothing. A
    ``root`` inside this run's own ``out`` is this run's.
    """
    if not is_gs(out) and _under(os.path.realpath(out), root):
        return None
    folder = root
    while True:
        if _names_cubes(os.path.join(folder, "manifest.jsonl")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _names_cubes(manifest: str) -> bool:
    """Whether ``manifest`` is a run manifest: its first line a JSON object naming a ``cube_id``."""
    try:
        with open(manifest, "rb") as f:
            first = json.loads(f.readline(1 << 16))
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and isinstance(first.get("cube_id"), str)


def check_catalog_root(root: str, out: str) -> None:
    """Refuse a local ``--catalog`` folder that is not the catalogue's alone: each run replaces it whole.

    The catalogue is built beside its folder and swapped in (:func:`write_catalog`),
    so whatever else the folder held is gone: ``--catalog`` naming ``--out``
    itself, or a folder above it, removed the run's own cubes, and a folder of
    other files (no ``catalog.json``) lost them all. The default ``OUT/stac``,
    a new or empty folder and an earlier catalogue are the catalogue's own.
    A catalogue under another run's ``--out`` is that run's: it rebuilds it
    from its own cubes alone (:func:`_carried_over`), dropping this run's items.

    Raises:
        OptionError: names ``--catalog`` and why.
    """
    from pipelines.errors import OptionError

    if is_gs(root):
        return  # a bucket catalogue replaces only the objects a catalogue is made of (_write_bucket_catalog)
    real = os.path.realpath(root)
    if not is_gs(out):
        holds = os.path.realpath(out)
        if holds == real or holds.startswith(real.rstrip(os.sep) + os.sep):
            raise OptionError(
                f"{root} holds --out {out}, and each run replaces the catalogue folder whole, which would remove the cubes; "
                "give the catalogue a folder of its own (by default OUT/stac)",
                option="--catalog",
            )
    owner = _other_run_output(real, out)
    if owner is not None:
        raise OptionError(
            f"{root} is in the output folder of another run ({owner} holds its manifest.jsonl), and that run "
            "rebuilds a catalogue under its --out from its own cubes alone, dropping this run's items; give a "
            "catalogue folder outside every --out, and to both runs",
            option="--catalog",
        )
    if os.path.isdir(real) and os.listdir(real) and not os.path.isfile(os.path.join(real, "catalog.json")):
        raise OptionError(
            f"{root} holds other files and no catalog.json, and each run replaces the catalogue folder whole; "
            "give a new or empty folder, or an earlier catalogue",
            option="--catalog",
        )


def _remove_stale(parent: str, name: str) -> None:
    """Remove the ``.<name>-<token>-staging`` and ``-old`` folders that a killed run left beside the catalogue.

    The catalogue is written by one step of one run at a time (the run owns its
    catalogue folder), so any such sibling is a leftover, never work in progress.
    A run killed inside :func:`_swap`, after it moved the catalogue aside and
    before the new one took its place, leaves the only copy of the earlier
    catalogue in ``-old``: it is put back first, since this run carries its
    items over (a shared catalogue holds other runs' items).
    """
    root = os.path.join(parent, name)
    # The exact names write_catalog gives: a prefix would take a neighbour's (".stac-eu-…" beside "stac").
    ours = re.compile(rf"\.{re.escape(name)}-[0-9a-f]{{32}}-(?P<kind>staging|old)")
    found = [(entry, match["kind"]) for entry in os.listdir(parent) if (match := ours.fullmatch(entry))]
    moved_aside = [entry for entry, kind in found if kind == "old"]
    if moved_aside and not os.path.exists(os.path.join(root, "catalog.json")):
        _put_back(os.path.join(parent, max(moved_aside, key=lambda entry: os.stat(os.path.join(parent, entry)).st_mtime_ns)), root)
    for entry, _ in found:
        shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _put_back(old: str, root: str) -> None:
    """Move the entries of catalogue folder ``old`` into ``root``, ``catalog.json`` last.

    Into the folder, not in its place: the run made it when it took its lock
    (:mod:`pipelines.run_lock`). A root with its ``catalog.json`` is whole, so
    a run killed while putting back finishes the move on its next run.
    """
    os.makedirs(root, exist_ok=True)
    for entry in sorted(os.listdir(old), key=lambda entry: entry == "catalog.json"):
        if not os.path.lexists(os.path.join(root, entry)):
            os.rename(os.path.join(old, entry), os.path.join(root, entry))


def _tree_files(top: str) -> dict[str, str]:
    """The files below folder ``top``: each path by its name relative to ``top``, with ``/`` separators."""
    found = {}
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, top).replace(os.sep, "/")] = path
    return found


def _same_tree(new: str, root: str) -> bool:
    """Whether folder ``root`` holds exactly the files of ``new``, byte for byte, and nothing else."""
    if not os.path.isdir(root):
        return False
    built, held = _tree_files(new), _tree_files(root)
    if built.keys() != held.keys():
        return False
    return all(filecmp.cmp(path, held[relative], shallow=False) for relative, path in built.items())


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


def _write(entries: list[ManifestEntry], out: str, root: str, carry_over: bool, license: str | None) -> int:  # noqa: A002
    return write_catalog(entries, out=out, root=root, carry_over=carry_over, license=license)


@dataclass
class WriteCatalog(DataclassPTransform[PCollection["ManifestEntry"], PCollection[int]]):
    """Write the run's STAC catalogue and its stac-geoparquet index."""

    out: str
    """The output directory the manifest's file names are relative to."""
    root: str
    """The catalogue directory (``--catalog``, by default ``OUT/stac``)."""
    carry_over: bool = False
    """Keep also the earlier items under ``out`` that this run did not produce (incremental runs; see :func:`write_catalog`)."""
    license: str | None = None
    """The licence this run's items carry (``--license``); None states none."""

    def expand(self, entries: PCollection[ManifestEntry]) -> PCollection[int]:
        """Collect, build, swap in."""
        write = beam.Map(_write, out=self.out, root=self.root, carry_over=self.carry_over, license=self.license)
        out: PCollection[int] = entries | "Collect" >> Collect() | "Write" >> write
        return out


def catalog_publisher(options: ConvertOptions) -> beam.PTransform[PCollection[ManifestEntry], PCollection[int]]:
    """The catalogue publisher: :class:`WriteCatalog` to ``options.catalog_dir``."""
    return WriteCatalog(options.out, options.catalog_dir, license=options.license)


def incremental_catalog_publisher(options: ConvertOptions) -> beam.PTransform[PCollection[ManifestEntry], PCollection[int]]:
    """:class:`WriteCatalog` that keeps every earlier item this run did not produce."""
    return WriteCatalog(options.out, options.catalog_dir, carry_over=True, license=options.license)
