"""Assembling, verifying and publishing files from compressed frames.

Workers write each compressed frame to a part
file ``OUT/.parts/<cube_id>/<frame_index>`` (written to a temporary name and
renamed, so a retried bundle overwrites it with the same bytes and never
leaves half a frame). Only the frame sizes travel through the pipeline to the
one step per cube that

1. checks every frame index is present;
2. writes ``head ‖ frames ‖ trailer`` with :class:`rumi_core.FileAssembler`
   into ``OUT/.staging`` (the head comes from the sizes; the header blob is
   built from the finalized file with the specification's cross-checks);
3. verifies the staged file: structure and blob (:func:`rumi_core.validate`),
   then a deterministic sample of windows read back through the blob
   (:func:`rumi_core.read`) and compared byte for byte with the source pixels;
4. publishes the blob as ``OUT/<name>.rumih`` and the file as
   ``OUT/<name>.rumi``, each by an atomic rename;
5. removes the cube's part files.

With ``--out gs://…`` the same steps run on objects (:mod:`pipelines.bucket`):
part files are temporary objects, the file is built by GCS ``compose`` from
the uploaded head, the frames and the trailer and checked by size and CRC32C,
the blob comes from the composed object's head and trailer (ranged reads), and
publication is the blob, then the file, each created with
``if_generation_match=0``. No process downloads a whole cube.

A retry of this step after publication finds the published file with the same
frame sizes and leaves it as it is. A cube whose outputs already exist and
validate against its plan is skipped (:func:`existing_entry`) unless
``--overwrite``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
import numpy as np
from apache_beam.pvalue import AsDict, PCollection

from catalog.errors import StorageError
from catalog.gcs import GCSSource
from pipelines.bucket import ObjectStat, crc32c_of, is_gs, output_store
from pipelines.counters import inc
from pipelines.deadletter import DeadLetter
from pipelines.errors import AssemblyError, SceneError, VerificationError
from pipelines.frames import FrameFailure, LazyCube
from pipelines.manifest import ManifestEntry, lossy_extra, manifest_entry
from pipelines.plan import sample_indices
from pipelines.selection import selection_nodata
from pipelines.sources import RasterCache
from rumi_core.assemble import FileAssembler
from rumi_core.codecs import within_bound
from rumi_core.errors import RumiError
from rumi_core.header import HeaderBlob, check_against_head, header_from_head
from rumi_core.ifd import base_frame_offset, encode_head
from rumi_core.reader import read
from rumi_core.structure import read_structure
from rumi_core.validate import validate

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from numpy.typing import NDArray

    from pipelines.keys import FrameKey
    from pipelines.options import ConvertOptions
    from pipelines.plan import CubePlan
    from rumi_core.sources import ByteSource

__all__ = [
    "FRAME_COUNT_FILE",
    "AssembleFiles",
    "FramePart",
    "PrepareParts",
    "SkipExisting",
    "WriteParts",
    "assemble_cube",
    "existing_entry",
    "file_sha256",
    "part_path",
    "prepare_parts",
    "remove_parts",
    "verify_file",
    "write_atomic",
    "write_part",
]

FRAME_COUNT_FILE: Final = ".frames"
"""In a cube's part directory: its frame count, for the progress display."""


@dataclass(frozen=True, order=True)
class FramePart:
    """A compressed frame written to its part file."""

    index: int
    """Frame index."""
    size: int
    """Bytes of the compressed frame."""


def part_path(parts_dir: str, cube_id: str, index: int) -> str:
    """``<parts_dir>/<cube_id>/<index>``, the index zero-padded to 10 digits."""
    return os.path.join(parts_dir, cube_id, f"{index:010d}")


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to a unique temporary name beside ``path``, then rename it into place."""
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_part(parts_dir: str, key: FrameKey, frame: bytes) -> FramePart:
    """Write one compressed frame to its part file or temporary object (idempotent); return its size."""
    path = part_path(parts_dir, key.cube_id, key.index)
    if is_gs(path):
        output_store().write(path, frame)
        return FramePart(key.index, len(frame))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, frame)
    return FramePart(key.index, len(frame))


def prepare_parts(parts_dir: str, plan: CubePlan) -> CubePlan:
    """Create a cube's part directory and record its frame count; safe to repeat.

    Nothing is deleted here: a runner may run this step again while frames
    are being written (the Dask runner recomputes side inputs). Parts left by
    an earlier run cannot reach a file either, because every frame of this
    run is rewritten before assembly and each part's size is checked against
    the size this run reported.
    """
    if is_gs(parts_dir):
        return plan  # objects need no folder
    directory = os.path.join(parts_dir, plan.cube_id)
    os.makedirs(directory, exist_ok=True)
    write_atomic(os.path.join(directory, FRAME_COUNT_FILE), str(plan.layout.frame_count).encode())
    return plan


def file_sha256(path: str) -> str:
    """SHA-256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_against_plan(path: str | ByteSource, blob: bytes, plan: CubePlan) -> None:
    """Validate structure and blob, and compare layout, georeferencing and trailer with the plan."""
    structure = validate(path, blob, quick=True)
    expected = plan.write_plan
    if structure.head.layout != expected.layout:
        raise VerificationError(f"{path}: layout {structure.head.layout} differs from the plan's {expected.layout}")
    if structure.head.georef != expected.georef:
        raise VerificationError(f"{path}: georeferencing {structure.head.georef} differs from the plan's {expected.georef}")
    if structure.trailer != expected.trailer:
        raise VerificationError(f"{path}: band texts or times differ from the plan's")


def _matches(expected: NDArray[Any], decoded: NDArray[Any], plan: CubePlan) -> bool:
    """Whether decoded samples are the source's: bit for bit, or within a lossy cube's bound."""
    bound = plan.error_bound
    if bound is None or decoded.tobytes() == expected.tobytes():
        return decoded.tobytes() == expected.tobytes()
    return bool(within_bound(expected, decoded, bound, nodata=selection_nodata(plan)).all())


def verify_file(path: str | ByteSource, blob: bytes, plan: CubePlan, rasters: RasterCache, *, frames: int) -> None:
    """Check a file against its plan and compare a sample of its frames with the source pixels.

    ``path`` is a local path or any byte source (a composed object in a
    bucket is read with ranged requests). Each sampled frame's window is read back through the blob with
    :func:`rumi_core.read` (for its band and time, or every band and time of a
    cell) and compared byte for byte with the same window read from the sources
    (for a lossy cube: every sample within the bound, nodata and NaN exact).

    Raises:
        VerificationError: the file, its blob or a frame disagrees with the plan or the sources.
        SceneError: a source cannot be read.
    """
    try:
        _check_against_plan(path, blob, plan)
    except RumiError as err:
        if isinstance(err, VerificationError):
            raise
        raise VerificationError(f"{path}: {err}") from err
    layout = plan.layout
    source = LazyCube(plan, rasters)
    for index in sample_indices(layout.frame_count, frames):
        row, col, band, t = layout.frame_location(index)
        y0, y1, x0, x1 = layout.tile_bounds(row, col)
        bands = None if band is None else [band]
        times = None if t is None else [t]
        decoded = read(path, blob, bands=bands, times=times, window=((y0, y1), (x0, x1)), threads=1)
        expected = source[slice(None) if t is None else t, slice(None) if band is None else band, y0:y1, x0:x1]
        if layout.time_count == 1 and t is None:
            expected = expected[0]
        if not _matches(np.ascontiguousarray(expected), decoded, plan):
            raise VerificationError(f"{path}: frame {index} (tile {row},{col}, band {band}, time {t}) does not decode to the source pixels")


def _published(options: ConvertOptions, plan: CubePlan) -> tuple[str, str]:
    return os.path.join(options.out, f"{plan.cube_id}.rumi"), os.path.join(options.out, f"{plan.cube_id}.rumih")


def _previous_entry(options: ConvertOptions, cube_id: str, sha256: str) -> dict[str, Any] | None:
    """The entry an earlier run's manifest recorded for this exact file, if any."""
    with contextlib.suppress(OSError, ValueError, KeyError), open(options.manifest_path, encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if entry["cube_id"] == cube_id and entry["sha256"] == sha256:
                return dict(entry)
    return None


def existing_entry(plan: CubePlan, options: ConvertOptions) -> ManifestEntry | None:
    """The ``skipped`` entry of a cube whose file and blob exist and validate against its plan, else None.

    The file's name does not say whether it was written losslessly or within an
    error bound, so a file is only reused when an earlier manifest recorded this
    exact file (same SHA-256) with the mode and bound asked for now; otherwise
    the cube is converted again, which is idempotent.
    """
    path, blob_path = _published(options, plan)
    if is_gs(path):
        return _existing_in_bucket(plan, path, blob_path)
    if not (os.path.isfile(path) and os.path.isfile(blob_path)):
        return None
    with open(blob_path, "rb") as f:
        blob = f.read()
    try:
        _check_against_plan(path, blob, plan)
    except RumiError:
        return None
    sha = file_sha256(path)
    previous = _previous_entry(options, plan.cube_id, sha)
    wanted = lossy_extra(plan)
    if previous is None or any(previous.get("extra", {}).get(key) != value for key, value in wanted.items()):
        return None
    return manifest_entry(
        plan,
        status="skipped",
        codec=dict(previous.get("codec", {})),
        file_bytes=os.path.getsize(path),
        blob_bytes=len(blob),
        sha256=sha,
    )


def _already_published(path: str, blob_path: str, counts: list[int]) -> bool:
    try:
        blob = HeaderBlob.from_file(blob_path)
    except (OSError, RumiError):
        return False
    return os.path.isfile(path) and [int(c) for c in blob.byte_counts] == counts


def assemble_cube(
    plan: CubePlan, parts: Iterable[FramePart], *, codec: dict[str, Any], options: ConvertOptions, rasters: RasterCache
) -> ManifestEntry:
    """Assemble, verify and publish one cube from its part files; return its manifest entry.

    Raises:
        AssemblyError: a frame is missing.
        VerificationError: the staged file disagrees with its sources; nothing is published.
        SceneError: a source cannot be read during verification.
    """
    layout = plan.layout
    sizes = {p.index: p.size for p in parts}
    missing = [i for i in range(layout.frame_count) if i not in sizes]
    if missing:
        raise AssemblyError(f"cube {plan.cube_id}: {len(missing)} of {layout.frame_count} frames are missing, first {missing[0]}")
    counts = [sizes[i] for i in range(layout.frame_count)]
    path, blob_path = _published(options, plan)
    if is_gs(path):
        return _assemble_in_bucket(plan, counts, codec=codec, options=options, rasters=rasters)
    if not _already_published(path, blob_path, counts):
        with contextlib.suppress(_PublishedMeanwhile):
            _assemble_and_publish(plan, counts, options, rasters, path, blob_path)
    shutil.rmtree(os.path.join(options.parts_dir, plan.cube_id), ignore_errors=True)
    return manifest_entry(
        plan,
        status="written",
        codec=codec,
        file_bytes=os.path.getsize(path),
        blob_bytes=os.path.getsize(blob_path),
        sha256=file_sha256(path),
    )


class _PublishedMeanwhile(Exception):
    """Another attempt at the same cube published the same file while this one was reading parts."""


def _assemble_and_publish(
    plan: CubePlan, counts: list[int], options: ConvertOptions, rasters: RasterCache, path: str, blob_path: str
) -> None:
    os.makedirs(options.staging_dir, exist_ok=True)
    staged = os.path.join(options.staging_dir, f"{plan.cube_id}.{uuid.uuid4().hex}.rumi")  # one name per attempt
    write = plan.write_plan
    try:
        with FileAssembler(staged, write.layout, write.georef, write.trailer) as out:
            for index, count in enumerate(counts):
                try:
                    with open(part_path(options.parts_dir, plan.cube_id, index), "rb") as f:
                        frame = f.read()
                except FileNotFoundError:
                    if _already_published(path, blob_path, counts):
                        raise _PublishedMeanwhile from None
                    raise AssemblyError(f"cube {plan.cube_id}: the part file of frame {index} is missing") from None
                if len(frame) != count:
                    raise AssemblyError(f"cube {plan.cube_id}: part {index} holds {len(frame)} bytes, the frame stage wrote {count}")
                out.write_frame(frame)
        assert out.header is not None
        verify_file(staged, out.header, plan, rasters, frames=options.verify_frames)
        write_atomic(blob_path, out.header)
        os.replace(staged, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def remove_parts(parts_dir: str, cube_id: str) -> None:
    """Remove a cube's part files (a folder, or temporary objects in a bucket)."""
    directory = os.path.join(parts_dir, cube_id)
    if is_gs(directory):
        output_store().delete_tree(directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


OBJECT_MODE: Final = "rumi-mode"
"""Custom metadata of a file in a bucket: ``lossless`` or ``lossy``."""
OBJECT_BOUND: Final = "rumi-lossy-bound"
"""Custom metadata: the lossy bound's JSON, empty for lossless."""
OBJECT_CODEC: Final = "rumi-codec"
"""Custom metadata: the codec's JSON, recorded again when the cube is found finished."""


def _object_metadata(plan: CubePlan, codec: dict[str, Any]) -> dict[str, str]:
    extra = lossy_extra(plan)
    bound = extra.get("lossy_bound")
    return {
        OBJECT_MODE: str(extra["mode"]),
        OBJECT_BOUND: "" if bound is None else json.dumps(bound, sort_keys=True),
        OBJECT_CODEC: json.dumps(codec, sort_keys=True),
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
    if header.layout != write.layout or (counts is not None and [int(c) for c in header.byte_counts] != counts):
        return None
    base = base_frame_offset(samples_per_pixel=write.layout.samples_per_pixel, frame_count=write.layout.frame_count)
    if stat.size != base + int(header.byte_counts.sum()) + len(write.trailer.to_bytes()):
        return None
    wanted = _object_metadata(plan, {})
    if any(stat.metadata.get(k) != wanted[k] for k in (OBJECT_MODE, OBJECT_BOUND)):
        return None
    try:
        _check_against_plan(GCSSource(path, client=store.client, size=stat.size), blob, plan)
    except (RumiError, StorageError):
        return None
    return stat, blob


def _existing_in_bucket(plan: CubePlan, path: str, blob_path: str) -> ManifestEntry | None:
    found = _finished_in_bucket(plan, path, blob_path, None)
    if found is None:
        return None
    stat, blob = found
    codec = json.loads(stat.metadata.get(OBJECT_CODEC) or "{}")
    return _bucket_entry(plan, "skipped", codec, stat, blob)


def _assemble_in_bucket(
    plan: CubePlan, counts: list[int], *, codec: dict[str, Any], options: ConvertOptions, rasters: RasterCache
) -> ManifestEntry:
    """Compose, verify and publish one cube in a bucket; remove its temporaries; return its manifest entry.

    Raises:
        AssemblyError: a frame's temporary object is missing or has the wrong
            size, compose gave other bytes than the parts, or another
            assembler published different bytes under the same name.
        VerificationError: the composed file disagrees with its sources; nothing is published.
    """
    path, blob_path = _published(options, plan)
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
    source = _CountedSource(GCSSource(assembled.url, client=store.client, size=assembled.size))
    try:
        structure = read_structure(source)
        header = header_from_head(structure.head)
        check_against_head(header, structure.head)
    except RumiError as err:
        raise VerificationError(f"{assembled.url}: {err}") from err
    blob = header.to_bytes()
    verify_file(source, blob, plan, rasters, frames=options.verify_frames)
    _remove_stale(path, blob_path, assembled, blob, _object_metadata(plan, codec))
    if not store.write(blob_path, blob, if_absent=True) and store.read(blob_path) != blob:
        raise AssemblyError(f"{blob_path}: another assembler published a different header blob meanwhile")
    if not store.compose([assembled.url], path, if_absent=True, metadata=_object_metadata(plan, codec)):
        other = store.stat(path)
        if other is None or (other.size, other.crc32c) != (assembled.size, assembled.crc32c):
            raise AssemblyError(f"{path}: another assembler published a different file meanwhile")
    final = store.stat(path)
    if final is None or (final.size, final.crc32c) != (assembled.size, assembled.crc32c):
        raise AssemblyError(f"{path}: the published object is not the verified one")
    # What passed through this process: head, trailer and blob up; head, trailer and the sampled frames down.
    inc(AssembleFiles, "bucket_bytes_uploaded", sum(e.size for e in ends) + len(blob))
    inc(AssembleFiles, "bucket_bytes_downloaded", source.bytes_read)
    return final, blob


def _remove_stale(path: str, blob_path: str, assembled: ObjectStat, blob: bytes, metadata: Mapping[str, str]) -> None:
    """Delete a published pair that differs from what is about to be published (another mode, bound or codec).

    The file goes first, so no file is ever left without its blob. A pair equal
    to this one (published meanwhile by a concurrent attempt) is left alone, so
    the publishing writes' preconditions keep it.
    """
    store = output_store()
    old = store.stat(path)
    same_file = old is not None and (old.size, old.crc32c) == (assembled.size, assembled.crc32c)
    if old is not None and not (same_file and all(old.metadata.get(k) == metadata[k] for k in (OBJECT_MODE, OBJECT_BOUND))):
        store.delete(path, generation=old.generation)
        old = None
    if old is None:
        existing = store.stat(blob_path)
        if existing is not None and store.read(blob_path) != blob:
            store.delete(blob_path, generation=existing.generation)


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


def _prepare(plan: CubePlan, parts_dir: str) -> CubePlan:
    return prepare_parts(parts_dir, plan)


@dataclass
class PrepareParts(beam.PTransform[PCollection["CubePlan"], PCollection["CubePlan"]]):
    """Create each cube's part directory before its frames are written; pass the plans on."""

    parts_dir: str
    """``OUT/.parts``."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[CubePlan]:
        """One Map."""
        out: PCollection[CubePlan] = plans | "Prepare" >> beam.Map(_prepare, parts_dir=self.parts_dir)
        return out


def _write_part(element: tuple[FrameKey, bytes | FrameFailure], parts_dir: str) -> tuple[str, FramePart | FrameFailure]:
    key, frame = element
    if isinstance(frame, FrameFailure):
        return key.cube_id, frame
    part = write_part(parts_dir, key, frame)
    inc(WriteParts, "frames")
    inc(WriteParts, "bytes", part.size)
    return key.cube_id, part


@dataclass
class WriteParts(beam.PTransform[PCollection[tuple["FrameKey", Any]], PCollection[tuple[str, Any]]]):
    """Write each compressed frame to its part file; emit ``(cube_id, FramePart)``."""

    parts_dir: str
    """``OUT/.parts``."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, frames: PCollection[tuple[FrameKey, Any]]) -> PCollection[tuple[str, Any]]:
        """One Map."""
        out: PCollection[tuple[str, Any]] = frames | "Write" >> beam.Map(_write_part, parts_dir=self.parts_dir)
        return out


class _AssembleFn(beam.DoFn):
    def __init__(self, options: ConvertOptions) -> None:
        beam.DoFn.__init__(self)
        self.options = options

    def setup(self) -> None:
        self.rasters = RasterCache()

    def process(
        self,
        element: tuple[str, Iterable[FramePart | FrameFailure]],
        plans: Mapping[str, CubePlan],
        codecs: Mapping[str, dict[str, Any]],
    ) -> Iterator[ManifestEntry | DeadLetter]:
        cube_id, items = element
        plan = plans[cube_id]
        values = list(items)
        failures = sorted({(f.href, f.message) for f in values if isinstance(f, FrameFailure)})
        if failures:
            remove_parts(self.options.parts_dir, cube_id)
            for href, message in failures:
                inc(AssembleFiles, "dead_letter.read-failed")
                yield DeadLetter(href, "read-failed", f"cube {cube_id} was not written: {message}", "ReadFrames")
            return
        start = time.perf_counter()
        try:
            entry = assemble_cube(
                plan, [p for p in values if isinstance(p, FramePart)], codec=codecs[cube_id], options=self.options, rasters=self.rasters
            )
        except (VerificationError, SceneError) as err:
            remove_parts(self.options.parts_dir, cube_id)
            inc(AssembleFiles, "dead_letter.verification-failed")
            for href in plan.inputs:
                yield DeadLetter(href, "verification-failed", f"cube {cube_id} was not published: {err}", "AssembleFiles")
            return
        inc(AssembleFiles, "cubes")
        inc(AssembleFiles, "file_bytes", entry.file_bytes)
        inc(AssembleFiles, "msec", round(1000 * (time.perf_counter() - start)))
        yield entry

    def teardown(self) -> None:
        self.rasters.close()


@dataclass
class AssembleFiles(beam.PTransform[PCollection[tuple[str, Any]], PCollection[Any]]):
    """Group frame sizes per cube, then assemble, verify and publish each file.

    Output: one :class:`~pipelines.manifest.ManifestEntry` per published
    cube, or :class:`~pipelines.deadletter.DeadLetter` records for a cube that
    could not be read or verified.
    """

    options: ConvertOptions
    """The run's options (output paths, verification sample size)."""
    plans: PCollection[CubePlan]
    """Planned cubes, a dict side input."""
    codecs: PCollection[tuple[str, dict[str, Any]]]
    """Each cube's codec JSON, a dict side input (recorded in the manifest)."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, parts: PCollection[tuple[str, Any]]) -> PCollection[Any]:
        """GroupByKey, then one ParDo per cube."""
        by_id = self.plans | "ById" >> beam.Map(lambda plan: (plan.cube_id, plan))
        out: PCollection[Any] = (
            parts
            | "Group" >> beam.GroupByKey()
            | "Assemble" >> beam.ParDo(_AssembleFn(self.options), plans=AsDict(by_id), codecs=AsDict(self.codecs))
        )
        return out


def _skip_or_convert(plan: CubePlan, options: ConvertOptions) -> CubePlan | ManifestEntry:
    if options.overwrite:
        return plan
    entry = existing_entry(plan, options)
    if entry is None:
        return plan
    inc(SkipExisting, "cubes_skipped")
    return entry


@dataclass
class SkipExisting(beam.PTransform[PCollection["CubePlan"], PCollection[Any]]):
    """Replace each plan whose outputs exist and validate by its ``skipped`` manifest entry (unless ``--overwrite``)."""

    options: ConvertOptions
    """The run's options."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[Any]:
        """One Map."""
        out: PCollection[Any] = plans | "Check" >> beam.Map(_skip_or_convert, options=self.options)
        return out
