"""Assembling, verifying and publishing files from their part files.

Only the frames' places travel through the pipeline, gathered per cube
(:class:`~pipelines.transforms.cube_parts.GatherParts`), to the one step per
cube (:class:`AssembleFiles`) that

1. checks every frame index is present;
2. writes ``head ‖ frames ‖ trailer`` with :class:`rumi_core.FileAssembler`
   into ``OUT/.staging`` (the head comes from the sizes; the header blob is
   built from the finalized file with the specification's cross-checks);
3. verifies the staged file (:func:`pipelines.transforms.verify.verify_file`);
4. publishes the blob as ``OUT/<name>.rumih`` and the file as
   ``OUT/<name>.rumi``, each by an atomic rename;
5. removes the cube's part files.

With ``--out gs://…`` the same steps run on objects
(:mod:`pipelines.transforms.assemble_bucket`).

A retry of this step after publication, which finds the cube's part files
removed and the file published with the same frame sizes, leaves it as it is.
A cube whose outputs already exist and
validate against its plan is skipped (:func:`existing_entry`,
:class:`SkipExisting`) unless ``--overwrite``.

A product's cube keeps its name when its period gains acquisitions
(:attr:`~pipelines.planning.plan.CubePlan.named_by_period`), so two things
its name cannot tell are checked: a cube of other inputs is converted again,
not skipped (a datatake's second part that arrived later), and a published
cube is never replaced by one without some of its acquisitions (a run given
only later inputs). Those inputs are dead letters instead (``held-times``),
also with ``--overwrite``, and the cube is kept, and listed, as it is
(:func:`lost_times`).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.pvalue import AsDict, PCollection

from catalog.errors import StorageError
from catalog.items import file_sha256
from pipelines.bucket import is_gs, output_store
from pipelines.errors import AssemblyError, SceneError, VerificationError
from pipelines.jsonl import write_jsonl
from pipelines.planning.timestamps import ONE_PASS_SECONDS
from pipelines.transforms import frames
from pipelines.transforms.assemble_bucket import assemble_in_bucket, existing_in_bucket, recorded_in_bucket
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.cube_parts import CubeParts, GatherParts
from pipelines.transforms.dead_letters import DeadLetter
from pipelines.transforms.frames import RasterDoFn
from pipelines.transforms.manifest import ManifestEntry, manifest_entry, mode_extra, recorded_inputs
from pipelines.transforms.verify import check_against_plan, published_paths, verify_file
from pipelines.transforms.write_parts import PartReader, remove_parts
from rumi_core.assemble import FileAssembler
from rumi_core.errors import InvalidInputError, RumiError
from rumi_core.files import write_atomic
from rumi_core.header import HeaderBlob
from rumi_core.sources import ByteSource, LocalFileSource
from rumi_core.structure import read_structure
from rumi_core.times import format_seconds

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from pipelines.options import ConvertOptions
    from pipelines.planning.plan import CubePlan
    from pipelines.rasters import RasterCache
    from rumi_core.time_coordinates import TimeCoordinates

__all__ = [
    "STAGE",
    "AssembleFiles",
    "SkipExisting",
    "assemble_cube",
    "existing_entry",
    "lost_times",
    "record_earlier_manifest",
    "record_published",
]


def _previous_entry(options: ConvertOptions, cube_id: str, sha256: str) -> dict[str, Any] | None:
    """The line that records this exact file: in the manifest, in the one this run's first pass replaced
    (:func:`record_earlier_manifest`), or in the record of a cube published since (:func:`record_published`)."""
    for path in (options.manifest_path, os.path.join(options.published_dir, _EARLIER)):
        try:
            stat = os.stat(path)
            found = _lines_by_file(path, (stat.st_ino, stat.st_mtime_ns, stat.st_size)).get((cube_id, sha256))
        except (OSError, ValueError, KeyError, TypeError):  # absent, or not lines this tool wrote
            continue
        if found is not None:
            return dict(json.loads(found))
    with contextlib.suppress(OSError, ValueError, KeyError), open(_record_path(options, cube_id), encoding="utf-8") as f:
        entry = json.loads(f.readline())
        if entry["cube_id"] == cube_id and entry["sha256"] == sha256:
            return dict(entry)
    return None


@functools.lru_cache(maxsize=2)
def _lines_by_file(path: str, stamp: tuple[int, int, int]) -> dict[tuple[str, str], str]:
    """The lines of a manifest file by ``(cube_id, sha256)``, read once per version of it (``stamp``: inode, mtime, size).

    Each cube :class:`SkipExisting` checks looks its file up here: scanning the
    manifest for each one read N lines N times (2,000 cubes took 37 s, against
    0.07 s). The lines are kept as text, so a worker holds the file's size.
    """
    with open(path, encoding="utf-8") as f:
        return {(entry["cube_id"], entry["sha256"]): line for line in f for entry in (json.loads(line),)}


STAGE = "AssembleFiles"
"""The stage named by the dead letters of cubes that failed verification."""

_EARLIER = "earlier-manifest.jsonl"
"""The manifest before the run, in ``OUT/.published``, once a first pass has replaced it."""


def _record_path(options: ConvertOptions, cube_id: str) -> str:
    return os.path.join(options.published_dir, f"{cube_id}.jsonl")


def _record(options: ConvertOptions, name: str, lines: list[dict[str, Any]]) -> None:
    for folder in (options.published_dir, options.staging_dir):
        os.makedirs(folder, exist_ok=True)
    write_jsonl(os.path.join(options.published_dir, name), lines, temp_dir=options.staging_dir)


def record_published(options: ConvertOptions, line: dict[str, Any]) -> None:
    """Record a cube published into a local ``--out`` by its manifest line, until a manifest lists it.

    The run's manifest is written once every cube is done; without this record
    a run killed before it could not tell a finished lossless file from a
    lossy one and would convert it again.
    """
    _record(options, os.path.basename(_record_path(options, line["cube_id"])), [line])


def record_earlier_manifest(options: ConvertOptions, lines: list[dict[str, Any]]) -> None:
    """Keep the lines of the manifest before the run, for a second pass of it: the first pass replaced that manifest,
    and a cube it recorded that only the second pass plans (the one whose scene failed) would be converted again."""
    _record(options, _EARLIER, [line for line in lines if isinstance(line.get("cube_id"), str) and isinstance(line.get("sha256"), str)])


def existing_entry(plan: CubePlan, options: ConvertOptions) -> ManifestEntry | None:
    """The ``skipped`` entry of a cube whose file and blob exist and validate against its plan, else None.

    The file's name does not say whether it was written losslessly or within an
    error bound, nor with which codec request, nor from which version of its
    inputs, so a file is only reused when an earlier manifest recorded this
    exact file (same SHA-256) with the mode, bound and compression asked for now
    (:func:`~pipelines.transforms.manifest.mode_extra`) and the inputs' versions
    of now (:attr:`~pipelines.planning.plan.CubePlan.input_version`); otherwise
    the cube is converted again, which is idempotent.
    """
    path, blob_path = published_paths(options, plan)
    if is_gs(path):
        return existing_in_bucket(plan, path, blob_path)
    if not (os.path.isfile(path) and os.path.isfile(blob_path)):
        return None
    with open(blob_path, "rb") as f:
        blob = f.read()
    try:
        check_against_plan(path, blob, plan)
    except RumiError:
        return None
    sha = file_sha256(path)
    previous = _previous_entry(options, plan.cube_id, sha)
    wanted = mode_extra(plan)
    if previous is None or any(previous.get("extra", {}).get(key) != value for key, value in wanted.items()):
        return None
    if plan.named_by_period and previous.get("inputs") != list(recorded_inputs(plan.inputs)):
        return None  # the same name and shape, other acquisitions or parts of them
    if previous.get("input_version") != plan.input_version:
        return None  # an input rewritten in place (a corrected scene under its old name), or a manifest from before versions
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
    return os.path.isfile(path) and [int(c) for c in blob.frame_byte_counts] == counts


def assemble_cube(
    plan: CubePlan, parts: CubeParts, *, codec: dict[str, Any], options: ConvertOptions, rasters: RasterCache
) -> ManifestEntry:
    """Assemble, verify and publish one cube from its part files; return its manifest entry.

    Raises:
        AssemblyError: a frame is missing.
        VerificationError: the staged file disagrees with its sources; nothing is published.
        SceneError: a source cannot be read during verification.
    """
    frame_count = plan.layout.frame_count
    ordered = parts.in_frame_order(frame_count)
    if len(ordered) != frame_count:
        missing = ordered.missing(frame_count)
        raise AssemblyError(f"cube {plan.cube_id}: {len(missing)} of {frame_count} frames are missing, first {missing[0]}")
    counts = ordered.counts
    path, blob_path = published_paths(options, plan)
    if is_gs(path):
        return assemble_in_bucket(plan, counts, codec=codec, options=options, rasters=rasters)
    sha256 = None
    # Assembled even where a file of the same frame sizes is published: it may be an earlier run's
    # that SkipExisting found damaged (a flipped byte keeps every size), or the one --overwrite
    # replaces. Only when this cube's parts are gone did another attempt publish it meanwhile.
    with contextlib.suppress(_PublishedMeanwhile):
        sha256 = _assemble_and_publish(plan, ordered, counts, options, rasters, path, blob_path)
    shutil.rmtree(os.path.join(options.parts_dir, plan.cube_id), ignore_errors=True)
    entry = manifest_entry(
        plan,
        status="written",
        codec=codec,
        file_bytes=os.path.getsize(path),
        blob_bytes=os.path.getsize(blob_path),
        sha256=sha256 or file_sha256(path),
    )
    record_published(options, entry.to_dict())
    return entry


class _PublishedMeanwhile(Exception):
    """Another attempt at the same cube published the same file while this one was reading parts."""


def _assemble_and_publish(
    plan: CubePlan, parts: CubeParts, counts: list[int], options: ConvertOptions, rasters: RasterCache, path: str, blob_path: str
) -> str:
    """Write the file from its parts, in frame-index order (hashed on the way), verify it, publish it and its blob; return its SHA-256."""
    os.makedirs(options.staging_dir, exist_ok=True)
    staged = os.path.join(options.staging_dir, f"{plan.cube_id}.{uuid.uuid4().hex}.rumi")  # one name per attempt
    write = plan.write_plan
    try:
        with FileAssembler(staged, write.layout, write.georef, write.trailer, counts=counts) as out, PartReader() as reader:
            for part in parts:
                try:
                    out.copy_frame(reader.open(part), part.offset, part.size)
                except FileNotFoundError:
                    if _already_published(path, blob_path, counts):
                        raise _PublishedMeanwhile from None
                    raise AssemblyError(f"cube {plan.cube_id}: the part file of frame {part.index} is missing") from None
                except InvalidInputError as err:  # a part file that ends before the frame the frame stage reported
                    raise AssemblyError(f"cube {plan.cube_id}: part {part.index}: {err}") from err
        assert out.header is not None and out.sha256 is not None
        verify_file(staged, out.header, plan, rasters, frames=options.verify_frames)
        # A run killed while the blob is written leaves its temporary in .staging, which the rerun removes.
        write_atomic(blob_path, out.header, temp_dir=options.staging_dir)
        os.replace(staged, path)
        return out.sha256
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


class _AssembleFn(RasterDoFn):
    def __init__(self, options: ConvertOptions) -> None:
        RasterDoFn.__init__(self)
        self.options = options

    def process(
        self,
        element: tuple[str, CubeParts],
        plans: Mapping[str, CubePlan],
        codecs: Mapping[str, dict[str, Any]],
    ) -> Iterator[ManifestEntry | DeadLetter]:
        cube_id, parts = element
        plan = plans[cube_id]
        failures = sorted(parts.failures)
        if failures:
            remove_parts(self.options.parts_dir, cube_id)
            for href, message in failures:
                inc(AssembleFiles, "dead_letter.read-failed")
                yield DeadLetter(href, "read-failed", f"cube {cube_id} was not written: {message}", frames.STAGE)
            return
        start = time.perf_counter()
        try:
            entry = assemble_cube(plan, parts, codec=codecs[cube_id], options=self.options, rasters=self.rasters)
        except (VerificationError, SceneError) as err:
            remove_parts(self.options.parts_dir, cube_id)
            inc(AssembleFiles, "dead_letter.verification-failed")
            for href in plan.inputs:
                yield DeadLetter(href, "verification-failed", f"cube {cube_id} was not published: {err}", STAGE)
            return
        inc(AssembleFiles, "cubes")
        inc(AssembleFiles, "file_bytes", entry.file_bytes)
        inc(AssembleFiles, "msec", round(1000 * (time.perf_counter() - start)))
        yield entry


@dataclass
class AssembleFiles(DataclassPTransform[PCollection[tuple[str, Any]], PCollection[Any]]):
    """Gather the frames' places per cube (:class:`~pipelines.transforms.cube_parts.GatherParts`), then assemble, verify, publish.

    Output: one :class:`~pipelines.transforms.manifest.ManifestEntry` per published
    cube, or :class:`~pipelines.transforms.dead_letters.DeadLetter` records for a cube that
    could not be read or verified.
    """

    options: ConvertOptions
    """The run's options (output paths, verification sample size)."""
    plans: PCollection[CubePlan]
    """Planned cubes, a dict side input."""
    codecs: PCollection[tuple[str, dict[str, Any]]]
    """Each cube's codec JSON, a dict side input (recorded in the manifest)."""

    def expand(self, parts: PCollection[tuple[str, Any]]) -> PCollection[Any]:
        """CombinePerKey, then one ParDo per cube."""
        by_id = self.plans | "ById" >> beam.Map(lambda plan: (plan.cube_id, plan))
        out: PCollection[Any] = (
            parts
            | "Gather" >> beam.CombinePerKey(GatherParts())
            | "Assemble" >> beam.ParDo(_AssembleFn(self.options), plans=AsDict(by_id), codecs=AsDict(self.codecs))
        )
        return out


def _starts(times: TimeCoordinates) -> list[int]:
    """Each time step's first coordinate (its instant, or its interval's start), sorted."""
    seconds = times.array()
    return sorted(int(s) for s in seconds[:: times.coordinate_count // times.time_count])


def _published_times(path: str) -> TimeCoordinates | None:
    """The time axis of the file published at ``path``; None when there is none, or it is no rumi file to keep."""
    source: ByteSource
    if is_gs(path):
        store = output_store()
        stat = store.stat(path)
        if stat is None:
            return None
        source = store.source(stat)
    elif os.path.isfile(path):
        source = LocalFileSource(path)
    else:
        return None
    try:
        with source:
            return read_structure(source).trailer.times
    except (OSError, RumiError, StorageError):
        return None


def lost_times(plan: CubePlan, options: ConvertOptions) -> list[int]:
    """The acquisitions of the published cube of a product's plan that the plan holds none of, sorted: what replacing it would lose.

    An acquisition is its time step's start; the plan holds it when one of its
    own is within :data:`ONE_PASS_SECONDS`. Any other cube's name holds its
    times and inputs, so its plan never drops what its file holds.
    """
    held = _published_times(published_paths(options, plan)[0]) if plan.named_by_period else None
    if held is None:
        return []
    planned = _starts(plan.write_plan.trailer.times)
    return [t for t in _starts(held) if not _near(planned, t)]


def _near(sorted_times: list[int], t: int) -> bool:
    """Whether a time of ``sorted_times`` lies within :data:`ONE_PASS_SECONDS` of ``t``."""
    i = bisect.bisect_left(sorted_times, t - ONE_PASS_SECONDS)
    return i < len(sorted_times) and sorted_times[i] <= t + ONE_PASS_SECONDS


def _kept_entry(plan: CubePlan, options: ConvertOptions) -> ManifestEntry | None:
    """The manifest line of a cube that is kept as it is, as the run before recorded it; None where there is none."""
    path = published_paths(options, plan)[0]
    if is_gs(path):
        return recorded_in_bucket(plan.cube_id, path, options.manifest_path)
    if not os.path.isfile(path):
        return None
    previous = _previous_entry(options, plan.cube_id, file_sha256(path))
    return None if previous is None else ManifestEntry.from_dict(previous, status="skipped")


def _skip_or_convert(plan: CubePlan, options: ConvertOptions) -> list[CubePlan | ManifestEntry | DeadLetter]:
    if not options.overwrite or plan.cube_id in options.converted:
        entry = existing_entry(plan, options)
        if entry is not None:
            inc(SkipExisting, "cubes_skipped")
            return [entry]
    lost = lost_times(plan, options)
    if not lost:
        return [plan]
    inc(SkipExisting, "cubes_kept_whole")
    message = (
        f"cube {plan.cube_id} already holds {len(lost)} acquisition{'s' * (len(lost) > 1)} these inputs lack "
        f"(first {format_seconds(lost[0])}), so it is kept as it is: give the inputs of every acquisition it holds in one "
        "run (the earlier ItemCollection files too), or give this set its own --out"
    )
    kept = _kept_entry(plan, options)
    return [*([kept] if kept is not None else []), *(DeadLetter(href, "held-times", message, "SkipExisting") for href in plan.inputs)]


@dataclass
class SkipExisting(DataclassPTransform[PCollection["CubePlan"], PCollection[Any]]):
    """Replace each plan whose outputs exist and validate by its ``skipped`` manifest entry (unless ``--overwrite``),
    and one that would replace a cube of more time steps by dead letters of its inputs (:func:`lost_times`)."""

    options: ConvertOptions
    """The run's options."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[Any]:
        """One FlatMap."""
        out: PCollection[Any] = plans | "Check" >> beam.FlatMap(_skip_or_convert, options=self.options)
        return out
