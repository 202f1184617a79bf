"""Assembling, verifying and publishing a cube in a ``gs://`` bucket.

With ``--out gs://…`` the assembly steps run on objects
(:mod:`pipelines.bucket`): part files are temporary objects, the file is
built by GCS ``compose`` from the uploaded head, the frames and the trailer
and checked by size and CRC32C, the blob comes from the composed object's
head and trailer (ranged reads), and publication is the blob, then the file,
each created with ``if_generation_match=0``. No process downloads a whole
cube. A file's mode, lossy bound and codec are recorded as custom object
metadata, so a later run can tell whether a finished file is the one it
would write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any, Final

from catalog.errors import StorageError
from pipelines.bucket import ObjectStat, output_store
from pipelines.crc32c import crc32c_of
from pipelines.errors import AssemblyError, VerificationError
from pipelines.planning.plan import inputs_hash
from pipelines.transforms.collect import inc
from pipelines.transforms.manifest import ManifestEntry, manifest_entry, mode_extra
from pipelines.transforms.verify import check_against_plan, published_paths, verify_file
from pipelines.transforms.write_parts import part_path, remove_parts
from rumi_core.errors import RumiError
from rumi_core.header import HeaderBlob, check_against_head, header_from_head
from rumi_core.ifd import base_frame_offset, encode_head
from rumi_core.structure import read_structure

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from catalog.gcs import GCSSource
    from pipelines.options import ConvertOptions
    from pipelines.planning.plan import CubePlan
    from pipelines.rasters import RasterCache

__all__ = [
    "OBJECT_BOUND",
    "OBJECT_CODEC",
    "OBJECT_COMPRESSION",
    "OBJECT_INPUTS",
    "OBJECT_INPUT_VERSION",
    "OBJECT_MODE",
    "assemble_in_bucket",
    "existing_in_bucket",
    "recorded_in_bucket",
]

OBJECT_MODE: Final = "rumi-mode"
"""Custom metadata of a file in a bucket: ``lossless`` or ``lossy``."""


OBJECT_BOUND: Final = "rumi-lossy-bound"
"""Custom metadata: the lossy bound's JSON, empty for lossless."""


OBJECT_COMPRESSION: Final = "rumi-compression"
"""Custom metadata: the compression request's JSON (``"auto"``, or a codec's JSON; see :func:`mode_extra`)."""


OBJECT_CODEC: Final = "rumi-codec"
"""Custom metadata: the codec's JSON, recorded again when the cube is found finished."""

OBJECT_INPUT_VERSION: Final = "rumi-input-version"
"""Custom metadata: :attr:`~pipelines.planning.plan.CubePlan.input_version`, of the inputs the file was converted from."""


OBJECT_INPUTS: Final = "rumi-inputs"
"""Custom metadata: the hash of the cube's inputs (:func:`~pipelines.planning.plan.inputs_hash`), which a product's
cube's name does not hold (:attr:`~pipelines.planning.plan.CubePlan.named_by_period`)."""


_REQUEST: Final = (OBJECT_MODE, OBJECT_BOUND, OBJECT_COMPRESSION)
"""The metadata a finished file must match to be kept: what this run asks for."""


def _object_metadata(plan: CubePlan, codec: dict[str, Any]) -> dict[str, str]:
    extra = mode_extra(plan)
    bound = extra.get("lossy_bound")
    return {
        OBJECT_MODE: str(extra["mode"]),
        OBJECT_BOUND: "" if bound is None else json.dumps(bound, sort_keys=True),
        OBJECT_COMPRESSION: json.dumps(extra["compression"], sort_keys=True),
        OBJECT_CODEC: json.dumps(codec, sort_keys=True),
        OBJECT_INPUTS: inputs_hash(plan.inputs),
        OBJECT_INPUT_VERSION: plan.input_version,
    }


def _bucket_entry(plan: CubePlan, status: str, codec: dict[str, Any], stat: ObjectStat, blob: bytes) -> ManifestEntry:
    """A manifest entry of a file in a bucket: no SHA-256 (that would mean downloading the cube), GCS's CRC32C instead."""
    entry = manifest_entry(plan, status=status, codec=codec, file_bytes=stat.size, blob_bytes=len(blob), sha256=None)
    crc = None if stat.crc32c is None else f"{stat.crc32c:08x}"
    return dataclasses.replace(entry, extra={**entry.extra, "crc32c": crc})


def _finished_in_bucket(plan: CubePlan, path: str, blob_path: str, counts: list[int] | None) -> tuple[ObjectStat, bytes] | None:
    """The file and blob of a finished cube in a bucket, checked without downloading the file; else None.

    Finished means: both objects exist, the blob describes the plan's layout
    (and ``counts``, when given), the file's size is the one the blob and the
    plan's trailer imply, its head and trailer (two ranged reads) agree with
    the blob and the plan, and its recorded mode and bound are the ones asked for.
    """
    store = output_store()
    stat = store.stat(path)
    blob = store.read(blob_path) if stat is not None else None
    if stat is None or blob is None:
        return None
    try:
        header = HeaderBlob.from_bytes(blob)
    except RumiError:
        return None
    write = plan.write_plan
    if header.layout != write.layout or (counts is not None and [int(c) for c in header.frame_byte_counts] != counts):
        return None
    base = base_frame_offset(samples_per_pixel=write.layout.samples_per_pixel, frame_count=write.layout.frame_count)
    if stat.size != base + int(header.frame_byte_counts.sum()) + len(write.trailer.to_bytes()):
        return None
    wanted = _object_metadata(plan, {})
    if any(stat.metadata.get(k) != wanted[k] for k in _REQUEST):
        return None
    if plan.named_by_period and stat.metadata.get(OBJECT_INPUTS) != wanted[OBJECT_INPUTS]:
        return None  # the same name and shape, other acquisitions or parts of them
    try:
        check_against_plan(store.source(stat), blob, plan)
    except (RumiError, StorageError):
        return None
    return stat, blob


def existing_in_bucket(plan: CubePlan, path: str, blob_path: str) -> ManifestEntry | None:
    found = _finished_in_bucket(plan, path, blob_path, None)
    if found is None:
        return None
    stat, blob = found
    if stat.metadata.get(OBJECT_INPUT_VERSION) != plan.input_version:
        return None  # an input rewritten in place since, or a file of a run from before versions
    codec = json.loads(stat.metadata.get(OBJECT_CODEC) or "{}")
    return _bucket_entry(plan, "skipped", codec, stat, blob)


def recorded_in_bucket(cube_id: str, path: str, manifest_path: str) -> ManifestEntry | None:
    """The line of the bucket's manifest that records the file at ``path`` (by its CRC32C), as a ``skipped`` entry; else None.

    A cube kept as it is (:func:`pipelines.transforms.assemble_files.lost_times`) stays listed as the run before
    recorded it: its plan holds other times, so no entry can be made from the plan.
    """
    store = output_store()
    stat = store.stat(path)
    data = store.read(manifest_path) if stat is not None and stat.crc32c is not None else None
    if stat is None or data is None:
        return None
    crc = f"{stat.crc32c:08x}"
    for line in data.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("cube_id") == cube_id and (entry.get("extra") or {}).get("crc32c") == crc:
                return ManifestEntry.from_dict(entry, status="skipped")
    return None


def assemble_in_bucket(
    plan: CubePlan, counts: list[int], *, codec: dict[str, Any], options: ConvertOptions, rasters: RasterCache
) -> ManifestEntry:
    """Compose, verify and publish one cube in a bucket; remove its temporaries; return its manifest entry.

    Raises:
        AssemblyError: a frame's temporary object is missing or has the wrong
            size, compose gave other bytes than the parts, or another
            assembler published different bytes under the same name.
        VerificationError: the composed file disagrees with its sources; nothing is published.
    """
    path, blob_path = published_paths(options, plan)
    found = _finished_in_bucket(plan, path, blob_path, counts)
    if found is None:
        found = _compose_and_publish(plan, counts, codec, options, rasters, path, blob_path)
    remove_parts(options.parts_dir, plan.cube_id)
    stat, blob = found
    return _bucket_entry(plan, "written", codec, stat, blob)


def _compose_and_publish(
    plan: CubePlan, counts: list[int], codec: dict[str, Any], options: ConvertOptions, rasters: RasterCache, path: str, blob_path: str
) -> tuple[ObjectStat, bytes]:
    store = output_store()
    scratch = os.path.join(options.parts_dir, plan.cube_id)
    listing = store.listing(scratch)
    frames: list[ObjectStat] = []
    for index, count in enumerate(counts):
        part = listing.get(part_path(options.parts_dir, plan.cube_id, index))
        if part is None:
            raise AssemblyError(f"cube {plan.cube_id}: the temporary object of frame {index} is missing")
        if part.size != count:
            raise AssemblyError(f"cube {plan.cube_id}: part {index} holds {part.size} bytes, the frame stage wrote {count}")
        frames.append(part)
    write = plan.write_plan
    ends = []
    for name, data in (("head", encode_head(write.layout, write.georef, counts)), ("trailer", write.trailer.to_bytes())):
        url = f"{scratch}/{name}"
        store.write(url, data)
        ends.append(ObjectStat(url, len(data), crc32c_of(data), None, {}))
    assembled = store.compose_tree([ends[0], *frames, ends[1]], f"{scratch}/assembled", scratch)
    source = _CountedSource(store.source(assembled))
    try:
        structure = read_structure(source)
        header = header_from_head(structure.head)
        check_against_head(header, structure.head)
    except RumiError as err:
        raise VerificationError(f"{assembled.url}: {err}") from err
    blob = header.to_bytes()
    verify_file(source, blob, plan, rasters, frames=options.verify_frames)
    _publish(path, blob_path, assembled, blob, _object_metadata(plan, codec))
    final = store.stat(path)
    if final is None or (final.size, final.crc32c) != (assembled.size, assembled.crc32c):
        raise AssemblyError(f"{path}: the published object is not the verified one")
    # Counted under AssembleFiles, the transform running this step (it imports this module).
    # What passed through this process: head, trailer and blob up; head, trailer and the sampled frames down.
    inc("AssembleFiles", "bucket_bytes_uploaded", sum(e.size for e in ends) + len(blob))
    inc("AssembleFiles", "bucket_bytes_downloaded", source.bytes_read)
    return final, blob


def _publish(path: str, blob_path: str, assembled: ObjectStat, blob: bytes, metadata: Mapping[str, str]) -> None:
    """Publish the header blob, then the file, each in place of what is there.

    A pair of another mode, bound or codec is replaced object by object, never
    deleted first: a run killed in between leaves the earlier file where its
    item points, and the next run replaces it. The blob goes first, so the
    item's own copy of the earlier header still reads the earlier file. A pair
    equal to this one (published meanwhile by a concurrent attempt) is left
    alone, and a write that finds another generation than the one it replaces
    compares what is there with its own.

    Raises:
        AssemblyError: another assembler published different bytes meanwhile.
    """
    store = output_store()
    held = store.stat(blob_path)
    if held is None or store.read(blob_path) != blob:
        replaced = 0 if held is None else held.generation
        if not store.write(blob_path, blob, if_generation=replaced) and store.read(blob_path) != blob:
            raise AssemblyError(f"{blob_path}: another assembler published a different header blob meanwhile")
    old = store.stat(path)
    if (
        old is not None
        and (old.size, old.crc32c) == (assembled.size, assembled.crc32c)
        and all(old.metadata.get(k) == metadata[k] for k in (*_REQUEST, OBJECT_INPUTS))
    ):
        return
    replaced = 0 if old is None else old.generation
    if not store.compose([assembled.url], path, if_generation=replaced, metadata=metadata):
        other = store.stat(path)
        if other is None or (other.size, other.crc32c) != (assembled.size, assembled.crc32c):
            raise AssemblyError(f"{path}: another assembler published a different file meanwhile")


class _CountedSource:
    """A byte source that counts the bytes it returned (the assembler's downloads)."""

    def __init__(self, source: GCSSource) -> None:
        self._source = source
        self.bytes_read = 0

    @property
    def name(self) -> str:
        return self._source.name

    def size(self) -> int:
        return self._source.size()

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        out = self._source.read_ranges(ranges)
        self.bytes_read += sum(len(b) for b in out)
        return out

    def close(self) -> None:
        self._source.close()
