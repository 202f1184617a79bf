"""The conversion pipeline: GeoTIFF scenes to verified rumi files and header blobs.

:class:`Convert` composes the transforms:

==========================  ==================================================
``DiscoverScenes``          paths, globs, URLs, STAC ItemCollections
``ReadSceneMetadata``       rasterio metadata and acquisition times
``PlanCubes``               grouping into cubes (:mod:`pipelines.planning.grouping`)
``SkipExisting``            cubes whose outputs exist and validate, or hold more times
``PrepareParts``            one empty part directory per cube
``ChooseFrameUnits``        ``--frame-unit auto``: measured on samples
``ChooseCodecs``            one codec per cube, on a sample (side input)
``SplitFrames``             ``(cube_id, frame_index)`` elements, windowed reads
``CompressFrames``          one OpenZL frame per element
``WriteParts``              frames appended to part files; only places travel on
``AssembleFiles``           head ‖ frames ‖ trailer, verify, publish
``publish``                 the run manifest (``WriteManifest``) and the STAC
                            catalogue (``WriteCatalog``), replaceable
``WriteDeadLetters``        rejected inputs with their reasons
==========================  ==================================================

Elements that fail carry a :class:`~pipelines.transforms.dead_letters.DeadLetter` down
their branch instead of raising, so one bad scene never stops the other
cubes (and :func:`run` converts the cube of a scene whose pixels fail to read
again without it), and every step is a plain ParDo, Flatten, GroupByKey, CombinePerKey or
side input (no multi-output ParDo), which every runner supports. The pipeline ends in
one step that depends on every output, because the Dask runner computes only
what its last step needs.

:func:`run` launches it on any Beam runner (FnApiRunner by default, which
starts no Prism download), draws progress, and returns a
:class:`~pipelines.summary.Summary`; :func:`submit` starts it and returns at once;
:func:`pipelines.cli.main` is ``rumi convert``.

On the local runner a conversion uses every core it may run on: unless the
Beam options say otherwise, :func:`~pipelines.runners.local_workers` asks for one worker thread
per core (``--direct_running_mode=multi_threading``); Beam's own default is
one worker on one core. Measured on this project's 2-core machine with the
20-date input of ``benchmarks/convert.py`` (671 MB of pixels): one worker
12.6-12.9 s, two worker threads 7.1-10.0 s (13.8-14.2 CPU s) on an idle
machine and 11-14 s when other jobs shared it, two worker processes
9.4-16.5 s; one date of 512² takes 2.0, 2.3-3.4 and 4.7-6.4 s. Threads, because the frames' work runs in GDAL and
OpenZL, which release the GIL, while a worker process costs its start
(importing Beam takes 1.5 s of CPU), its stop, its own copy of every import
and the data plane between processes. On a year of dates (73, 2.4 GB)
processes were faster (23.8-27.7 s against 28.6-31.8 s in the same rounds),
so long local runs, and runs on many cores, may pass
``--direct_running_mode=multi_processing``: Beam's per-element Python work
holds the GIL.
Output bytes do not depend on the mode (``tests/pipelines/test_runners.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.pvalue import PCollection

from catalog.errors import CatalogError
from pipelines.bucket import is_gs, output_store
from pipelines.bucket_claims import claim_detached, claimed, release_detached
from pipelines.jsonl import load_jsonl
from pipelines.planning.plan import CubePlan
from pipelines.rasters import kept_block_cache
from pipelines.run_lock import exclusive
from pipelines.runners import DEFAULT_RUNNER, LOCAL_RUNNERS, RUNNER_NAMES, local_workers, quiet_dask, resolve_runner
from pipelines.stale import earlier_cubes, hold_earlier, release_earlier, settle, superseded_cubes, unlisted_cubes
from pipelines.summary import Summary
from pipelines.threaded_runner import ThreadedRunner
from pipelines.transforms.assemble_files import AssembleFiles, SkipExisting, record_earlier_manifest
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.compress import ChooseCodecs, ChooseFrameUnits, CompressFrames
from pipelines.transforms.dead_letters import DeadLetter, WriteDeadLetters
from pipelines.transforms.discover import DiscoverScenes
from pipelines.transforms.frames import SplitFrames
from pipelines.transforms.manifest import ManifestEntry, WriteManifest
from pipelines.transforms.plan_cubes import PlanCubes
from pipelines.transforms.publish import check_catalog_root
from pipelines.transforms.read_metadata import ReadSceneMetadata
from pipelines.transforms.write_parts import PrepareParts, ProgressMonitor, WriteParts
from rumi_core.cli.options import counted
from rumi_core.heap import limit_arenas
from rumi_core.threads import default_threads

if TYPE_CHECKING:
    from typing import TextIO

    from pipelines.options import ConvertOptions

__all__ = [
    "Convert",
    "Publisher",
    "default_publishers",
    "keep",
    "manifest_publisher",
    "run",
    "submit",
]

logger = logging.getLogger(__name__)

Publisher = Callable[["ConvertOptions"], "beam.PTransform[PCollection[ManifestEntry], PCollection[Any]]"]
"""Builds a transform that publishes the run's manifest entries (the manifest file, a STAC catalogue...)."""


def manifest_publisher(options: ConvertOptions) -> beam.PTransform[PCollection[ManifestEntry], PCollection[Any]]:
    """The default publisher: :class:`~pipelines.transforms.manifest.WriteManifest` to ``OUT/manifest.jsonl``."""
    return WriteManifest(options.manifest_path, options.staging_dir, statuses=options.statuses_path)


def default_publishers(options: ConvertOptions) -> tuple[Publisher, ...]:
    """The manifest, and the STAC catalogue unless ``--no-catalog``."""
    from pipelines.transforms.publish import catalog_publisher

    return (manifest_publisher, catalog_publisher) if options.write_catalog else (manifest_publisher,)


def keep(item: object, kind: type | tuple[type, ...]) -> list[Any]:
    """``[item]`` when it is a ``kind``, else ``[]``: a one-type branch of a mixed PCollection."""
    return [item] if isinstance(item, kind) else []


@dataclass
class Convert(DataclassPTransform[PCollection[str], PCollection[int]]):
    """Convert input paths, globs, URLs and STAC files into rumi files.

    Input: the input texts. Output: one count per sink (published entries
    and dead letters), the pipeline's final step.
    """

    options: ConvertOptions
    """The conversion's options."""
    publish: tuple[Publisher, ...] | None = None
    """Transforms applied to the manifest entries; None for :func:`default_publishers`."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.publish is None:
            self.publish = default_publishers(self.options)

    def expand(self, inputs: PCollection[str]) -> PCollection[int]:
        """Wire the stages; see the module docstring."""
        o = self.options
        planned = (
            inputs
            | "DiscoverScenes" >> DiscoverScenes(o.s2_request)
            | "ReadSceneMetadata" >> ReadSceneMetadata(o.time_pattern, o.time, o.unreadable)
            | "PlanCubes" >> PlanCubes(o)
        )
        rejected = planned | "Rejected" >> beam.FlatMap(keep, kind=DeadLetter)
        # The side inputs (plans, codecs) depend on the inputs alone, never on which outputs exist yet,
        # so a runner that recomputes a side input mid-run (the Dask runner) gets the same answer.
        plans = planned | "Plans" >> beam.FlatMap(keep, kind=CubePlan)
        if o.frame_unit == "auto":
            plans = plans | "ChooseFrameUnits" >> ChooseFrameUnits(o.access)
        codecs = plans | "ChooseCodecs" >> ChooseCodecs()
        checked = plans | "SkipExisting" >> SkipExisting(o)
        skipped = checked | "Skipped" >> beam.FlatMap(keep, kind=ManifestEntry)
        todo = checked | "ToConvert" >> beam.FlatMap(keep, kind=CubePlan) | "PrepareParts" >> PrepareParts(o.parts_dir)
        assembled = (
            todo
            | "SplitFrames" >> SplitFrames(o.shards, lookup=plans)
            | "CompressFrames" >> CompressFrames(codecs, plans)
            | "WriteParts" >> WriteParts(o.parts_dir)
            | "AssembleFiles" >> AssembleFiles(o, plans, codecs)
        )
        written = assembled | "Written" >> beam.FlatMap(keep, kind=ManifestEntry)
        failed = assembled | "Failed" >> beam.FlatMap(keep, kind=DeadLetter)
        entries = (written, skipped) | "Entries" >> beam.Flatten()
        counts = [entries | f"Publish{i}" >> make(o) for i, make in enumerate(self.publish or ())]
        write_letters = WriteDeadLetters(o.dead_letter_path, o.staging_dir)
        kept = checked | "KeptWhole" >> beam.FlatMap(keep, kind=DeadLetter)
        letters = (rejected, kept, failed) | "DeadLetters" >> beam.Flatten() | "WriteDeadLetters" >> write_letters
        done: PCollection[int] = (*counts, letters) | "Done" >> beam.Flatten()
        return done


def _counters(result: Any) -> dict[str, int]:
    try:
        query = result.metrics().query()
    except (NotImplementedError, AttributeError):
        return {}
    out: dict[str, int] = {}
    for counter in query.get("counters", []):
        name = f"{counter.key.metric.namespace}/{counter.key.metric.name}"
        out[name] = out.get(name, 0) + int(counter.committed or counter.attempted or 0)
    return out


def _close(result: Any) -> None:
    """Release what a runner left open (the Dask runner's client)."""
    client = getattr(result, "client", None)
    if client is not None and hasattr(client, "close"):
        client.close()


def _remove_work_folder(path: str) -> None:
    """Remove a finished run's work folder (``.parts``, ``.staging``) with whatever a killed earlier run left in it.

    Once the pipeline has finished, every cube is published or dead-lettered,
    and a later run rewrites every frame it needs, so nothing in it is still useful.
    """
    shutil.rmtree(path, ignore_errors=True)


def _build(
    inputs: Sequence[str], options: ConvertOptions, beam_args: Sequence[str], runner: str | None, publish: tuple[Publisher, ...] | None
) -> beam.Pipeline:
    """Prepare a local output folder and build the pipeline."""
    if not is_gs(options.out):
        os.makedirs(options.out, exist_ok=True)
    args = list(beam_args)
    if not any(a.startswith("--default_sdk_harness_log_level") for a in args):
        args.append("--default_sdk_harness_log_level=ERROR")  # keep worker processes' INFO chatter off the terminal
    given = runner or PipelineOptions(args).view_as(StandardOptions).runner or DEFAULT_RUNNER
    runner = resolve_runner(given) or given  # an unknown name is Beam's to refuse
    if runner in LOCAL_RUNNERS:
        args += local_workers(args)
    if runner == RUNNER_NAMES["DaskRunner"]:
        quiet_dask()
    pipeline_options = PipelineOptions(args)
    standard = pipeline_options.view_as(StandardOptions)
    standard.runner = runner
    logger.info("converting %d inputs to %s on %s", len(inputs), options.out, standard.runner)
    threads = runner in LOCAL_RUNNERS and pipeline_options.view_as(DirectOptions).direct_running_mode == "multi_threading"
    # Beam's own worker threads can split an element between two chunks of a GroupByKey's input (pipelines.threaded_runner).
    pipeline = beam.Pipeline(runner=ThreadedRunner() if threads else None, options=pipeline_options)
    _ = pipeline | "Inputs" >> beam.Create(sorted(set(inputs))) | "Convert" >> Convert(options, publish)
    return pipeline


def submit(
    inputs: Sequence[str],
    options: ConvertOptions,
    beam_args: Sequence[str] = (),
    *,
    runner: str | None = None,
    publish: tuple[Publisher, ...] | None = None,
) -> Any:
    """Start a conversion and return the runner's ``PipelineResult`` without waiting for it.

    For launchers that return once the job is submitted (a Dataflow Flex
    Template): the job cleans up after itself except the bucket's folder of
    temporaries, which every cube's assembler empties. Its claim on the bucket
    (:func:`pipelines.bucket_claims.claim_detached`) keeps later runs from
    deleting that folder while the job may run, and stops none of them.
    """
    if not is_gs(options.out):
        return _build(inputs, options, beam_args, runner, publish).run()
    options = claim_detached(options)
    try:
        return _build(inputs, options, beam_args, runner, publish).run()
    except BaseException:
        release_detached(options)  # no job holds the claim: it would keep later runs from its folder's temporaries for days
        raise


def run(
    inputs: Sequence[str],
    options: ConvertOptions,
    beam_args: Sequence[str] = (),
    *,
    runner: str | None = None,
    progress: TextIO | None = None,
    publish: tuple[Publisher, ...] | None = None,
) -> Summary:
    """Run a conversion to completion and summarise it.

    Args:
        inputs: Paths, globs, URLs and STAC files.
        options: The conversion's options.
        beam_args: Any Beam pipeline options, ``--name=value``.
        runner: Beam runner name; overrides ``--runner`` in ``beam_args``;
            None keeps that, or :data:`~pipelines.runners.DEFAULT_RUNNER`.
        progress: Where to draw a progress bar; None draws none.
        publish: Publishers of the manifest entries (see :class:`Convert`); None for
            :func:`default_publishers` (the manifest and, unless turned off, the catalogue).

    A scene whose pixels cannot be read (a corrupt block past the one its
    metadata read checks) fails its whole cube, because every other frame of
    the cube depends on its time axis: the pipeline then runs again with that
    scene left out (:attr:`ConvertOptions.unreadable`), as a ``read-failed``
    dead letter, and the cubes it already wrote are kept. :func:`submit` makes
    one pass, so there such a cube waits for its scene to be fixed or removed.

    A local ``--out`` (and ``--catalog``) takes one run at a time
    (:func:`pipelines.run_lock.exclusive`), and so does a ``gs://`` one
    (:func:`pipelines.bucket_claims.claimed`): a second run raises
    :class:`~pipelines.errors.OptionError` before it starts.

    The calling process's malloc arenas are capped at one per CPU
    (:func:`rumi_core.heap.limit_arenas`), as every worker's are.

    Returns:
        The summary of the run, read from its manifest and dead-letter files.
    """

    def one_pass(options: ConvertOptions) -> Summary:
        return _run_pass(inputs, options, beam_args, runner, progress, publish)

    if options.write_catalog and options.catalog is not None:
        check_catalog_root(os.fspath(options.catalog), options.out)
    claim = claimed(options) if is_gs(options.out) else contextlib.nullcontext(options)
    with exclusive(_local_folders(options), swapped=[options.catalog_dir]), claim as options:
        return _run_locked(options, one_pass)


def _local_folders(options: ConvertOptions) -> list[tuple[str, str]]:
    """The local folders a run writes into, with their options: ``--out``, and its catalogue's folder.

    The catalogue's folder is locked also where it is the default ``OUT/stac``: another run
    may name it with ``--catalog``, and the lock on ``OUT`` alone did not stop that run.
    """
    folders = [] if is_gs(options.out) else [(options.out, "--out")]
    if options.write_catalog and not is_gs(options.catalog_dir):
        folders.append((options.catalog_dir, "--out" if options.catalog is None else "--catalog"))
    return folders


def _run_locked(options: ConvertOptions, one_pass: Callable[[ConvertOptions], Summary]) -> Summary:
    """:func:`run`, once its output folders are its own: ``one_pass`` runs the pipeline with the options it is given."""
    before = earlier_cubes(options)  # what this run may supersede
    hold_earlier(options, before)
    start = time.monotonic()
    # Before the local runner starts its worker threads (see RasterDoFn.setup).
    limit_arenas(default_threads())
    summary = one_pass(options)
    written = {e.cube_id for e in summary.written}
    # A scene whose pixels fail to read takes its cube down, and the cube's other scenes with it:
    # the cube is planned again without it. Which scenes fail depends on the files alone, so the
    # passes, and the bytes they write, are the same on every run and runner. Each pass adds at
    # least one scene to leave out, so they end. Cubes an earlier pass wrote are kept as written,
    # also with --overwrite; what the manifest before the run recorded still counts, though the
    # first pass replaced it (a cube skipped before the failure is skipped again, not rewritten).
    while unread := _newly_unread(summary, options.unreadable):
        which = "its cube again without it" if len(unread) == 1 else "their cubes again without them"
        logger.warning("%s could not be read; planning %s", counted(len(unread), "scene"), which)
        options = dataclasses.replace(options, unreadable=options.unreadable + unread, converted=tuple(sorted(written)))
        if not is_gs(options.out):  # a bucket records each file's mode in its object metadata
            record_earlier_manifest(options, before)
        summary = one_pass(options)
        written |= {e.cube_id for e in summary.written}
    entries = tuple(dataclasses.replace(e, status="written") if e.cube_id in written else e for e in summary.entries)
    summary = dataclasses.replace(summary, entries=entries, seconds=time.monotonic() - start)
    try:
        settled = settle(options, superseded_cubes(options, before, summary.entries), summary.entries)
    except CatalogError as err:  # the run's outputs are published; what they supersede is only unknown
        logger.warning("cannot tell which earlier cubes this run supersedes: %s", err)
        return dataclasses.replace(summary, pruned=options.prune)
    unlisted = unlisted_cubes(options, before, summary.entries, settled, (d.href for d in summary.dead_letters))
    release_earlier(options)
    return dataclasses.replace(
        summary,
        stale=settled.stale,
        pruned=options.prune,
        unlisted=unlisted.files,
        unlisted_gone=unlisted.gone,
        unlisted_failed=unlisted.failed,
        unlisted_path=options.unlisted_path,
    )


def _newly_unread(summary: Summary, known: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``(href, message)`` of the scenes whose pixels failed to read in this pass and not before it."""
    seen = {href for href, _ in known}
    found: dict[str, str] = {}
    for letter in summary.dead_letters:
        if letter.reason == "read-failed" and letter.href not in seen:
            found.setdefault(letter.href, f"{letter.message.rstrip('.')}; its cube was planned again without this scene")
    return tuple(sorted(found.items()))


def _run_pass(
    inputs: Sequence[str],
    options: ConvertOptions,
    beam_args: Sequence[str],
    runner: str | None,
    progress: TextIO | None,
    publish: tuple[Publisher, ...] | None,
) -> Summary:
    """Run the pipeline once to completion, remove its work folders and load its manifest and dead letters."""
    in_bucket = is_gs(options.out)
    start = time.monotonic()
    pipeline = _build(inputs, options, beam_args, runner, publish)
    # The progress display counts part files on disk; a bucket output draws none.
    monitor = ProgressMonitor(options.parts_dir, progress) if progress is not None and not in_bucket else None
    if monitor is not None:
        monitor.__enter__()
    try:
        # Local workers are threads of this process: GDAL's block cache they fit is given back.
        with kept_block_cache():
            result = pipeline.run()
            try:
                result.wait_until_finish()
            finally:
                _close(result)
    except BaseException:
        # A failed run leaves nothing to resume: PrepareParts clears a cube's parts before
        # writing them again, and staged files carry one name per attempt. Remove both, so a
        # failure does not leave .parts/ and .staging/ behind.
        shutil.rmtree(options.parts_dir, ignore_errors=True)
        shutil.rmtree(options.staging_dir, ignore_errors=True)
        raise
    finally:
        if monitor is not None:
            monitor.__exit__(*sys.exc_info())
    seconds = time.monotonic() - start
    statuses = {d["cube_id"]: d["status"] for d in load_jsonl(options.statuses_path)}
    if in_bucket:
        output_store().delete_tree(options.parts_dir)  # this run's; a later pass writes its frames again
    else:
        _remove_work_folder(options.parts_dir)
        _remove_work_folder(options.staging_dir)
        _remove_work_folder(options.published_dir)  # the manifest lists every cube now
    return Summary.from_files(
        options.manifest_path, options.dead_letter_path, seconds=seconds, counters=_counters(result), statuses=statuses
    )
