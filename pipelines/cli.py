"""``rumi convert``: the command-line face of :func:`pipelines.convert.run`.

Registered in the ``rumi.commands`` entry-point group,
so ``rumi convert`` works wherever the package is installed. Any option the
command does not define is a Beam pipeline option and goes to the runner; it
must be written ``--name=value`` (``--direct_num_workers=2``) so it cannot be
mistaken for an input.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

import click

from catalog.cli.options import parse_lonlat_bbox
from catalog.credentials import redacted
from pipelines import scratch
from pipelines.archives import ARCHIVE_SUFFIXES
from pipelines.bucket import is_gs, output_store
from pipelines.crs import check_proj_database
from pipelines.errors import OptionError, PipelineError
from pipelines.folders import folder_files, not_a_file, pattern_files
from pipelines.options import ALIGN_MODES, CUBE_PERIODS, DUPLICATE_MODES, EXTENT_MODES, RESAMPLING_METHODS, ConvertOptions
from pipelines.rasters import GDAL_SIDECAR_SUFFIXES, RASTER_SUFFIXES, SIDECARS_ONLY, is_url, sidecar_of, suffix_list
from pipelines.run_lock import remove_empty_made
from pipelines.runners import MAX_WORKERS_PER_CORE, RUNNER_NAMES, resolve_runner, stock_worker_image, usable_cores
from pipelines.stac_shape import is_stac_document
from pipelines.worker_output import worker_output_to
from rumi_core.cli.options import OptionError as LineError
from rumi_core.cli.options import counted, printable, probe_directory

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["check_inputs", "check_out_dir", "convert_command", "main", "split_beam_args"]

logger = logging.getLogger(__name__)


SMALL_TILE = 64
"""``--tile-size`` below this draws a warning (frames of fewer than 4096 pixels compress poorly)."""


def check_out_dir(out: str, *, option: str = "--out") -> None:
    """Check that ``out`` (``--out`` or ``--catalog``) can receive the run's outputs.

    A local directory need not exist (the run creates it), but it must not be
    a file, and its nearest existing ancestor must be a directory that accepts
    a new entry (a probe file is created and removed there). A ``gs://`` URL
    must name a bucket that exists, in a store that answers: a run creates
    objects, never buckets.
    Other URLs are left to their storage. Nothing is created.

    Raises:
        rumi_core.cli.options.OptionError: one line naming ``option`` and why.
    """
    if is_gs(out):
        why = output_store().cannot_write(out)
        if why is not None:
            raise LineError(f"{option} {out}: {why}")
        return
    if is_url(out):
        return
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise LineError(f"{option} {out}: exists and is not a directory")
    ancestor = path if path.exists() else next((p for p in path.absolute().parents if p.exists()), Path("/"))
    if not ancestor.is_dir():
        raise LineError(f"{option} {out}: {ancestor} is a file, not a directory")
    probe_directory(ancestor, what=f"{option} {out}")


def check_inputs(paths: list[str]) -> None:
    """Fail fast on a local input that finds no raster: a missing path, an empty glob or directory.

    URLs and STAC documents behind URLs are not fetched here; they are
    checked when the pipeline reads them.

    Raises:
        rumi_core.cli.options.OptionError: one line naming the first such input.
    """
    for text in paths:
        if is_url(text):
            continue
        if any(c in text for c in "*?[") and not os.path.lexists(text):  # a name of its own, not a pattern (see discover)
            files = pattern_files(text)
            if not files:
                raise LineError(f"input {text}: no file matches this pattern{_escape_hint(text)}")
            if all(p.lower().endswith(GDAL_SIDECAR_SUFFIXES) for p in files):
                raise LineError(f"input {text}: {SIDECARS_ONLY}")
        elif os.path.isdir(text):
            suffixes = RASTER_SUFFIXES + ARCHIVE_SUFFIXES
            if not any(p.lower().endswith(suffixes) for p in folder_files(text)):
                raise LineError(f"input {text}: the directory holds no {suffix_list(suffixes)} file")
        elif (kind := not_a_file(text)) is not None:
            raise LineError(f"input {text}: it is {kind}, not a file")
        elif not os.path.isfile(text):
            raise LineError(f"input {text}: no such file or directory")
    sidecars = [(text, sidecar_of(text)) for text in paths if not is_url(text)]
    if paths and len(sidecars) == len(paths) and all(raster is not None for _, raster in sidecars):
        text, raster = sidecars[0]
        raise LineError(f"input {text}: it is GDAL's sidecar file of {raster}, read through it, not a scene; give {raster}")


def _escape_hint(pattern: str) -> str:
    """A hint for a pattern that matches nothing because a folder it names holds ``[``, ``*`` or ``?`` itself, else ""."""
    folder = os.path.dirname(pattern)
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    if not folder or not any(c in folder for c in "*?["):
        return ""
    escaped = os.path.join(glob.escape(folder), os.path.relpath(pattern, folder))
    return f" (the folder {folder} exists: in a pattern, its name is written {glob.escape(folder)}, as in {escaped})"


def _looks_like_input(token: str) -> bool:
    return is_url(token) or os.path.exists(token) or bool(glob.glob(token))


def split_beam_args(
    tokens: tuple[str, ...] | list[str], *, check: Callable[[list[str]], None] | None = None
) -> tuple[list[str], list[str]]:
    """Separate inputs from Beam pipeline options (``--name=value`` or flags).

    Args:
        tokens: The command's arguments that are not its own options.
        check: Refuses options neither the command nor Beam knows (:func:`_check_beam_args`).
            A bare ``--name`` followed by its value goes to it first, as typed: a
            misspelt option of the command (``--tile_size 512``) is then named as
            such, rather than answered with Beam's spelling, which would not help.

    Raises:
        click.UsageError: a bare ``--name`` is followed by something that is no input,
            most likely its value; the fix is ``--name=value``, or the option ``check``
            names when ``--name`` is no Beam option.

    >>> split_beam_args(["a.tif", "--direct_num_workers=2"])
    (['a.tif'], ['--direct_num_workers=2'])
    """
    inputs: list[str] = []
    beam_args: list[str] = []
    for i, token in enumerate(tokens):
        if token.startswith("-"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if "=" not in token and nxt is not None and not nxt.startswith("-") and not _looks_like_input(nxt):
                if check is not None:
                    check([token, nxt])
                raise click.UsageError(f"{nxt!r} is no input; write Beam pipeline options as {token}={nxt}")
            beam_args.append(token)
        else:
            inputs.append(token)
    return inputs, beam_args


def _check_beam_args(beam_args: list[str], command: click.Command) -> None:
    """Refuse options that neither this command nor Beam knows: Beam would drop them with a log line, and the run go on without them.

    ``--tile_size=16`` would otherwise convert at the default tile size.

    Raises:
        click.UsageError: an option is unknown; names the command's option it spells
            with ``_`` for ``-`` (``--tile_size``), else the closest known one. Or Beam
            refuses an option's value (``--direct_num_workers=abc``): its reason, on one line.
    """
    import difflib
    import io

    from apache_beam.options.pipeline_options import PipelineOptions

    with contextlib.suppress(ImportError):
        import apache_beam.runners.dask.dask_runner  # noqa: F401  # registers DaskOptions (--dask_client_address, ...)
    options = PipelineOptions(beam_args)
    quiet = logging.getLogger("apache_beam.options.pipeline_options")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # get_all_options warns of what it discards: that is the question asked here
    refused = io.StringIO()  # argparse prints every Beam option's usage before its reason, and exits
    try:
        with contextlib.redirect_stderr(refused):
            known = options.get_all_options(retain_unknown_options=False)
            every = options.get_all_options(retain_unknown_options=True)
    except SystemExit:
        reason = refused.getvalue().strip().splitlines()[-1:] or ["Beam refuses its options"]
        raise click.UsageError(reason[0].split("error: ", 1)[-1]) from None
    finally:
        quiet.setLevel(level)
    unknown = set(every) - set(known)
    # Beam's options are all spelt with "_": it drops --direct-num-workers=2 as "unparseable", without keeping it as unknown.
    unknown |= {name for t in beam_args if "-" in (name := t.lstrip("-").split("=", 1)[0])}
    # Beam spells --bogus-option as bogus_option: name the token as typed.
    typed = next((t.split("=", 1)[0] for t in beam_args if t.lstrip("-").split("=", 1)[0].replace("-", "_") in unknown), None)
    typed = typed or (f"--{min(unknown)}" if unknown else None)
    if typed is not None:
        ours = [name for param in command.params for name in param.opts if name.startswith("--")]
        names = ours + [f"--{name}" for name in known]
        spelled, beams = typed.replace("_", "-"), "--" + typed.lstrip("-").replace("-", "_")
        close = [spelled] if spelled in ours else [beams] if beams.removeprefix("--") in known else []
        close = close or difflib.get_close_matches(typed, names, n=1, cutoff=0.7)
        hint = f" (did you mean {close[0]}?)" if close else ""
        named = next((t for t in beam_args if t.split("=", 1)[0] == typed and os.path.lexists(t)), None)
        path = f" (a file or folder whose name starts with '-' is given as ./{named})" if named else ""
        raise click.UsageError(f"no such option: {typed}{hint}; neither rumi convert nor Beam knows it{path}")


def _check_runner(runner: str, beam_args: list[str], out: str) -> None:
    """Refuse a runner Beam does not know or cannot load, a worker count out of range, a Dataflow run into a local folder, workers
    without rumi, and a job service or Flink master the options name that is not there (:func:`_check_reachable`).

    Beam finds out the first two only once the run has started (``--out``
    created), answers "list index out of range" to a negative count and never
    finishes starting billions of workers (the most is
    :data:`~pipelines.runners.MAX_WORKERS_PER_CORE` per usable core); Dataflow
    workers would write the third to their own disks, which are discarded.
    Also a portable runner whose workers would start from Beam's stock image
    (:func:`~pipelines.runners.stock_worker_image`), where Beam fails once the job runs.

    Raises:
        click.UsageError: names the option.
        rumi_core.cli.options.OptionError: a service does not accept a connection.
    """
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.runners.runner import PipelineRunner, create_runner

    resolved = resolve_runner(runner)
    if resolved is None:
        names = ", ".join(sorted((*StandardOptions.KNOWN_RUNNER_NAMES, *RUNNER_NAMES)))
        raise click.UsageError(f"--runner {runner}: Beam knows no such runner; give one of {names}, or a runner's qualified class name")
    try:  # a qualified name Beam imports only once the run has started; InteractiveRunner's module under pandas 3
        loaded = create_runner(resolved)
    except Exception as err:
        raise click.UsageError(f"--runner {runner}: Beam cannot load it here ({type(err).__name__}: {err}); give another runner") from None
    if not isinstance(loaded, PipelineRunner):
        raise click.UsageError(f"--runner {runner}: {type(loaded).__name__} is no Beam runner; give another runner")
    given = PipelineOptions(beam_args).get_all_options()
    workers, most = given.get("direct_num_workers"), MAX_WORKERS_PER_CORE * usable_cores()
    if workers is not None and not 0 <= workers <= most:
        raise click.UsageError(
            f"--direct_num_workers={workers}: give a worker count from 1 to {most} ({MAX_WORKERS_PER_CORE} per usable core), "
            "or 0 for one per core"
        )
    if "dataflow" in runner.lower() and not is_url(out):
        raise click.UsageError(f"--out {out}: Dataflow workers cannot write into a local folder; give --out gs://BUCKET/PREFIX")
    # Not an EXTERNAL worker pool's --environment_config: that address is the worker's own (a
    # TaskManager's localhost), which this machine need not reach.
    for option in ("job_endpoint", "flink_master"):
        _check_reachable(f"--{option}", given.get(option))
    if stock_worker_image(resolved, given):
        raise click.UsageError(
            f"--runner {runner} starts its workers in Docker from Beam's stock SDK image, which lacks rumi: "
            "give --environment_type=LOOPBACK to run them in this process, --environment_config=IMAGE for an image "
            "with rumi installed (deploy/dataflow/Dockerfile builds one), or --environment_type=EXTERNAL with a worker pool"
        )


def _check_reachable(option: str, address: str | None) -> None:
    """Refuse a service address (``host:port``) that refuses connections or does not answer within seconds.

    Beam waits five minutes for a job service that is not there, then says
    ``FutureTimeoutError``. Anything but ``host:port`` (``[auto]``, ``embed``,
    a URL Beam resolves itself) is left to Beam.
    """
    import socket

    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "/" in host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_SECONDS):
            pass
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise LineError(f"{option}={address}: cannot connect ({reason}); start the service first, or give its address") from err


_CONNECT_SECONDS = 10.0
"""How long :func:`_check_reachable` waits for a service to accept a connection."""


@click.command("convert", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("inputs", nargs=-1, type=click.UNPROCESSED)
@click.option("--out", "out", required=True, help="Output directory (a local path, or a URL such as gs://bucket/prefix).")
@click.option("--tile-size", default=512, show_default=True, help="Nominal tile size in pixels.")
@click.option("--frame-unit", default="auto", show_default=True, help="auto (measured per cube), or a frame_unit 0..9.")
@click.option(
    "--access",
    type=click.Choice(["tile", "cell", "any"]),
    default="tile",
    show_default=True,
    help="With --frame-unit auto: frames of one band and date (tile), whole cells (cell), or the smallest unit (any).",
)
@click.option(
    "--compression", default="auto", show_default=True, help="auto, max, portable, a codec name (raster, openzl, geozl) or a codec's JSON."
)
@click.option("--max-abs-error", type=float, default=None, help="Lossy: every decoded sample within E of its source (|x - x̂| <= E).")
@click.option("--max-rel-error", default=None, help="Lossy: every decoded sample within P% of its source value, e.g. 0.5%.")
@click.option("--catalog", "catalog_dir", default=None, type=click.Path(file_okay=False), help="STAC catalogue directory (OUT/stac).")
@click.option("--no-catalog", is_flag=True, help="Do not write the STAC catalogue.")
@click.option(
    "--license",
    "license_",
    metavar="SPDX",
    default=None,
    help="The data's licence for the catalogue, an SPDX identifier (CC-BY-4.0) or 'other' [default: none stated, 'other'].",
)
@click.option(
    "--cube-period",
    type=click.Choice(CUBE_PERIODS),
    default=None,
    help="Split each grid's series into cubes [default: none; P1M with --stac-api].",
)
@click.option(
    "--align",
    type=click.Choice(ALIGN_MODES),
    default="fail",
    show_default=True,
    help="Off-grid, rotated or south-up scenes: dead letter, or warp.",
)
@click.option(
    "--resampling", type=click.Choice(RESAMPLING_METHODS), default="nearest", show_default=True, help="Resampling of --align reproject."
)
@click.option(
    "--duplicates",
    type=click.Choice(DUPLICATE_MODES),
    default="error",
    show_default=True,
    help="Scenes of one grid at one time: leave the time out (error), keep the first or last by path, or mosaic them. "
    "Of a Sentinel-2 datatake processed twice, the newest processing is kept.",
)
@click.option(
    "--extent", type=click.Choice(EXTENT_MODES), default="separate", show_default=True, help="Union differing extents of one grid."
)
@click.option("--time", "time_", default=None, help="ISO 8601 time of scenes nothing else dates.")
@click.option(
    "--time-pattern",
    default=None,
    help="Regex with named groups (year, month, day, doy, hour, minute, second, date) matched in paths as given (links unresolved).",
)
@click.option("--runner", default="FnApiRunner", show_default=True, help="Beam runner (name or fully qualified class).")
@click.option("--shards", default=64, show_default=True, help="Frame-key shards (parallelism of the frame stage).")
@click.option(
    "--verify-frames", default=8, show_default=True, help="Frames per file decoded and compared with the sources before publishing."
)
@click.option("--strict", is_flag=True, help="Exit with status 1 when any input went to the dead-letter output.")
@click.option("--overwrite", is_flag=True, help="Convert cubes whose outputs already exist and validate.")
@click.option(
    "--prune",
    is_flag=True,
    help="Once the run has published, remove the previous run's cubes that its own supersede (they hold all their inputs).",
)
@click.option("--detach", is_flag=True, help="Return once the job is submitted (e.g. from a Dataflow Flex Template launcher).")
@click.option("--progress/--no-progress", default=None, help="Draw a progress bar (default: when stderr is a terminal).")
@click.option("--stac-api", default=None, help="Sentinel-2 L2A: search this STAC API (pystac-client) instead of reading INPUTS.")
@click.option("--collection", default="sentinel-2-l2a", show_default=True, help="--stac-api: the collection searched.")
@click.option(
    "--bbox", callback=parse_lonlat_bbox, help="--stac-api: W,S,E,N in degrees (W > E crosses the antimeridian), as rumi search takes it."
)
@click.option("--datetime", "datetime_", default=None, help="--stac-api: an instant or a range A/B (.. for open).")
@click.option("--mgrs", default=None, help="Sentinel-2 L2A: MGRS tiles to keep, e.g. 33UUU,33UVU.")
@click.option("--max-cloud", type=float, default=None, help="Sentinel-2 L2A: largest eo:cloud_cover kept, percent.")
@click.option("--bands", default=None, help="Sentinel-2 L2A: bands to convert (ids, common names or asset keys), e.g. red,nir,scl.")
@click.option(
    "--resolution", type=click.Choice(["10"]), default=None, help="Sentinel-2 L2A: every band on the 10 m grid (nearest-neighbour)."
)
def convert_command(
    inputs: tuple[str, ...],
    out: str,
    tile_size: int,
    frame_unit: str,
    access: str,
    compression: str,
    max_abs_error: float | None,
    max_rel_error: str | None,
    catalog_dir: str | None,
    no_catalog: bool,
    license_: str | None,
    cube_period: str,
    align: str,
    resampling: str,
    duplicates: str,
    extent: str,
    time_: str | None,
    time_pattern: str | None,
    runner: str,
    shards: int,
    verify_frames: int,
    strict: bool,
    overwrite: bool,
    prune: bool,
    detach: bool,
    progress: bool | None,
    stac_api: str | None,
    collection: str,
    bbox: tuple[float, float, float, float] | None,
    datetime_: str | None,
    mgrs: str | None,
    max_cloud: float | None,
    bands: str | None,
    resolution: str | None,
) -> None:
    """Convert GeoTIFF scenes (INPUTS: paths, globs, URLs, STAC files, .zip or .tar archives) into rumi cubes in OUT.

    Any other --name=value option is passed to Beam (e.g. --runner=DaskRunner,
    or --direct_running_mode=multi_processing; locally the default is one
    worker thread per core).
    """
    command = click.get_current_context().command
    paths, beam_args = split_beam_args(inputs, check=lambda args: _check_beam_args(args, command))
    _check_beam_args(beam_args, command)
    _check_runner(runner, beam_args, out)
    _check_sources(paths, stac_api=stac_api, bbox=bbox, datetime_=datetime_)
    _check_sentinel2_options(paths, stac_api=stac_api, mgrs=mgrs, max_cloud=max_cloud, bands=bands, resolution=resolution)
    try:
        options = ConvertOptions(
            out=out,
            tile_size=tile_size,
            frame_unit=frame_unit,  # type: ignore[arg-type]  # parsed and checked by ConvertOptions
            access=None if access == "any" else access,  # type: ignore[arg-type]  # one of click's choices
            compression=compression,
            max_abs_error=max_abs_error,
            max_rel_error=max_rel_error,
            cube_period=cube_period or ("P1M" if stac_api else "none"),
            align=align,
            resampling=resampling,
            duplicates=duplicates,
            extent=extent,
            time=time_,
            time_pattern=time_pattern,
            overwrite=overwrite,
            prune=prune,
            shards=shards,
            verify_frames=verify_frames,
            catalog=catalog_dir,
            write_catalog=not no_catalog,
            license=license_,
            bands=bands,
            resolution=int(resolution) if resolution else None,
            mgrs=tuple(mgrs.split(",")) if mgrs else (),
            max_cloud=max_cloud,
        )
    except OptionError as err:
        raise LineError(str(err)) from err
    # Everything a user can get wrong is checked before Beam starts and before --out exists.
    check_out_dir(options.out)
    if options.write_catalog and options.catalog is not None:
        check_out_dir(os.fspath(options.catalog), option="--catalog")
        from pipelines.transforms.publish import check_catalog_root

        try:
            check_catalog_root(os.fspath(options.catalog), options.out)
        except OptionError as err:
            raise LineError(str(err)) from err
    if paths:
        check_inputs(paths)
    try:
        check_proj_database()
    except PipelineError as err:
        raise LineError(str(err)) from err
    if tile_size < SMALL_TILE:
        click.echo(
            f"warning: --tile-size {tile_size} is below {SMALL_TILE}: frames this small compress poorly "
            "and a file may come out larger than its pixels",
            err=True,
        )
    if stac_api:
        found = _search_stac_api(options, stac_api, collection=collection, bbox=bbox, datetime_=datetime_)
        if found is None:
            return
        paths = [found]
    if detach:
        from pipelines.convert import submit

        try:
            result = submit(paths, options, beam_args, runner=runner)
        except OptionError as err:
            raise click.ClickException(str(err)) from err
        except Exception as err:  # the command's boundary, as for a run: one line, the traceback only with -vv
            logger.debug("the submission failed", exc_info=True)
            raise click.ClickException(f"the submission failed: {_failure_line(err)} (rerun with -vv for details)") from err
        job_id = getattr(result, "job_id", None)
        click.echo(f"submitted to {runner}" + (f": job {job_id()}" if callable(job_id) else ""))
        return
    _run_and_report(paths, options, beam_args, runner=runner, progress=progress, incremental=bool(stac_api), strict=strict)


def _check_sources(
    paths: list[str], *, stac_api: str | None, bbox: tuple[float, float, float, float] | None, datetime_: str | None
) -> None:
    """Inputs come from INPUTS or from a ``--stac-api`` search, which alone takes ``--bbox`` and ``--datetime``."""
    if not paths and not stac_api:
        raise LineError("give at least one input path, glob, URL or STAC file, or --stac-api")
    if paths and stac_api:
        raise LineError("give either INPUTS or --stac-api, not both")
    if stac_api is None and (bbox is not None or datetime_):
        raise LineError("--bbox and --datetime refine a --stac-api search; give --stac-api URL")


def _check_sentinel2_options(
    paths: list[str], *, stac_api: str | None, mgrs: str | None, max_cloud: float | None, bands: str | None, resolution: str | None
) -> None:
    """Refuse the Sentinel-2 L2A options where they would do nothing, as ``--bbox`` is refused without ``--stac-api``.

    ``--mgrs``, ``--max-cloud``, ``--bands`` and ``--resolution`` select among and
    read Sentinel-2 L2A STAC items, which come from ``--stac-api`` or a STAC
    document among INPUTS; files (GeoTIFFs, SAFE products) are converted as they
    are. ``--collection`` names what ``--stac-api`` searches.
    """
    if stac_api is None and _given("collection"):
        raise LineError("--collection names the collection a --stac-api search reads; give --stac-api URL")
    if stac_api is not None or any(is_stac_document(p) for p in paths):
        return
    named = {"--mgrs": mgrs, "--max-cloud": max_cloud, "--bands": bands, "--resolution": resolution}
    given = [name for name, value in named.items() if value is not None]
    if given:
        raise LineError(
            f"{', '.join(given)} select{'' if len(given) > 1 else 's'} among Sentinel-2 L2A STAC items, which come from --stac-api or a"
            " STAC document (.json, .geojson) among INPUTS, and there are none: files are converted as they are"
        )


def _given(parameter: str) -> bool:
    """Whether the command line gave ``parameter`` (not its default)."""
    return click.get_current_context().get_parameter_source(parameter) == click.core.ParameterSource.COMMANDLINE


def _search_stac_api(
    options: ConvertOptions, stac_api: str, *, collection: str, bbox: tuple[float, float, float, float] | None, datetime_: str | None
) -> str | None:
    """The ItemCollection of the items a ``--stac-api`` search adds to the run, or None when nothing is new."""
    from pystac_client.exceptions import APIError

    from catalog.errors import CatalogError
    from pipelines.sentinel2.incremental import stac_api_input

    try:
        return stac_api_input(options, url=stac_api, collection=collection, bbox=bbox, datetime=datetime_, echo=click.echo)
    except CatalogError as err:  # the catalogue of earlier runs, which says what they hold
        raise click.ClickException(f"{options.catalog_dir}: {err}") from err
    except (APIError, OSError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise click.ClickException(redacted(f"--stac-api {stac_api}: {first}")) from err


def _new_log() -> str:
    """A new, empty file for Beam's output of one run, in the system's temporary folder.

    It is held (:func:`pipelines.scratch.new_log`), so no other run's sweep
    removes it, until :func:`pipelines.scratch.remove` or :func:`_keep_if_written`.
    """
    return scratch.new_log()


def _keep_if_written(log: str) -> bool:
    """Whether Beam wrote anything to ``log``; removes it if not. A log already gone counts as empty."""
    try:
        written = os.path.getsize(log) > 0
    except OSError:
        written = False
    if written:
        scratch.release(log)
    else:
        scratch.remove(log)
    return written


_BEAM_WRAPPED: Final = re.compile(r"^(?:RuntimeError: )?(?P<kind>[\w.]+): (?P<text>.*?) \[while running '(?P<step>[^']+)'\]$")
"""How Beam's local runners report an exception of a step: in a ``RuntimeError``, naming the step after it."""

_OURS: Final = ("pipelines.", "catalog.", "rumi_core.")
"""The packages whose errors are written for the user: their text names the input and what to do."""


def _unwrapped(line: str) -> str:
    """A failed step's last line without Beam's wrapping: the exception first, then the step it was raised in.

    This project's own errors are their message alone: the class's module path
    and Beam's step name say nothing to a user that the message does not.

    >>> _unwrapped("RuntimeError: OSError: [Errno 27] File too large: 'x.part' [while running 'Convert/WriteParts/Write']")
    "OSError: [Errno 27] File too large: 'x.part' (in the step Convert/WriteParts/Write)"
    >>> _unwrapped("pipelines.errors.PipelineError: stac/x.json is not JSON; repair it [while running 'Convert/Publish1/Write']")
    'stac/x.json is not JSON; repair it'
    >>> _unwrapped("the worker fell over")
    'the worker fell over'
    """
    match = _BEAM_WRAPPED.match(line)
    if match is None:
        return line
    if match["kind"].startswith(_OURS):
        return match["text"]
    return f"{match['kind']}: {match['text']} (in the step {match['step']})"


_STOPPING_SIGNALS: Final = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
"""The signals that end a run at once, with the word its message uses: Ctrl-C, and the stop of a service
manager, a scheduler or ``kill``."""


def _stop_workers(grace: float = 2.0) -> None:
    """Stop this process's descendants: the worker processes of Beam's ``multi_processing`` mode or worker pool.

    A signal to the run's process alone (``kill``, ``timeout``, a scheduler
    that does not stop the whole group) left them running, reparented to
    init, for two minutes until their control channel timed out, each with a
    worker's memory. SIGTERM first, then SIGKILL to those still running after
    ``grace`` seconds.
    """
    import psutil  # with distributed, a dependency

    try:
        workers = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            worker.terminate()
    _, alive = psutil.wait_procs(workers, timeout=grace)
    for worker in alive:
        with contextlib.suppress(psutil.Error):
            worker.kill()


@contextlib.contextmanager
def _interrupt_ends_the_process(stream: TextIO, log: str | None) -> Iterator[None]:
    """Ctrl-C (SIGINT) or SIGTERM ends the process at once, with status 130 or 143, for the duration.

    Beam answers a ``KeyboardInterrupt`` by tearing its DoFns down from the
    main thread while worker threads are still inside them: a raster GDAL is
    reading gets closed under it (a segmentation fault), and part writers
    vanish mid-frame. Nothing needs unwinding: every output is written under
    a temporary name and renamed, so no partial file has a final name, and
    the same command resumes (finished cubes are skipped). Claims on bucket
    folders are withdrawn first (for at most 5 s), so that the next run need
    not wait for them to lapse, the run's log is removed, as with SIGINT
    (systemd, Kubernetes and Airflow stop a task with SIGTERM), and the run's
    worker processes are stopped (:func:`_stop_workers`). A signal the
    process was started ignoring (SIGINT under ``nohup``, or with ``&`` by a
    script) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        stream.write(f"\n{_STOPPING_SIGNALS[signal.Signals(signum)]}: no partial output has a final name; run the same command to resume\n")
        stream.flush()
        if log is not None:
            with contextlib.suppress(OSError):
                scratch.remove(log)
        claims = sys.modules.get("pipelines.bucket_claims")  # imported by a run into a bucket, which may hold claims
        if claims is not None:
            claims.release_held(timeout=5.0)  # else the next run into the folder waits for them to lapse
        remove_empty_made()  # the catalogue's folder, made for its lock, when nothing was written into it
        _stop_workers()
        os._exit(128 + signum)

    previous = {sig: signal.getsignal(sig) for sig in _STOPPING_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN}
    for sig in previous:
        signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_and_report(
    paths: list[str],
    options: ConvertOptions,
    beam_args: list[str],
    *,
    runner: str,
    progress: bool | None,
    incremental: bool,
    strict: bool,
) -> None:
    """Run the conversion here, print its summary, and exit 1 when nothing (or, with ``--strict``, not everything) was converted."""
    from pipelines.convert import run

    show = sys.stderr.isatty() if progress is None else progress
    publish = None
    if incremental:
        from pipelines.convert import manifest_publisher
        from pipelines.transforms.publish import incremental_catalog_publisher

        publish = (manifest_publisher, incremental_catalog_publisher) if options.write_catalog else (manifest_publisher,)
    # Beam's own output (worker start and stop, a failed step's traceback per
    # attempt) goes to a file unless -vv asks for everything here. The file is
    # kept, and named, only when the run fails.
    scratch.sweep()  # what killed runs left in the temporary folder: only what no live process holds
    log = None if logging.getLogger().getEffectiveLevel() <= logging.DEBUG else _new_log()
    try:
        with contextlib.ExitStack() as stack:
            stream = sys.stderr if log is None else stack.enter_context(worker_output_to(log))
            stack.enter_context(_interrupt_ends_the_process(stream, log))
            summary = run(paths, options, beam_args, runner=runner, progress=stream if show else None, publish=publish)
    except OptionError as err:  # another run holds --out: found before this one started, so nothing to keep
        if log is not None:
            scratch.remove(log)
        raise click.ClickException(str(err)) from err
    except Exception as err:
        # The command's boundary: one line; the traceback only with -vv.
        logger.debug("the conversion failed", exc_info=True)
        kept = f"; Beam's output is in {log}" if log is not None and _keep_if_written(log) else ""
        raise click.ClickException(f"the conversion failed: {_failure_line(err)} (rerun with -vv for details{kept})") from err
    if log is not None:
        scratch.remove(log)  # a log already gone (removed by something else) is no error
    click.echo(summary.table())
    if options.write_catalog and summary.entries:
        click.echo(f"catalogue: {options.catalog_dir}")
    if not summary.produced:
        # The reasons are in the dead-letter file; a run that made nothing also names the first, so that one bad
        # input given alone says why on the terminal.
        first = summary.dead_letters[0] if summary.dead_letters else None
        why = f": {first.href}: {first.message}" if first is not None else ""
        more = len(summary.dead_letters) - 1
        # One line: an input's name may hold a newline, escaped here as the dead-letter file's JSON escapes it.
        click.echo(
            printable(redacted(f"nothing was produced{why}" + (f" (and {counted(more, 'other dead letter')})" if more > 0 else ""))),
            err=True,
        )
        sys.exit(1)
    if strict and summary.dead_letters:
        click.echo(f"--strict: {counted(len(summary.dead_letters), 'input')} went to the dead-letter output", err=True)
        sys.exit(1)


def _failure_line(err: BaseException) -> str:
    """The one line of a failed run or submission: the last line of ``err`` that says something (gRPC's errors end in a
    lone ">"), this project's errors without Beam's wrapping, at most 500 characters, and without the signature of any
    URL in it (the line goes to terminals and CI logs)."""
    lines = [line.strip() for line in str(err).splitlines() if any(c.isalnum() for c in line)]
    return redacted(_unwrapped(lines[-1] if lines else type(err).__name__)[:500])


def main(argv: Sequence[str] | None = None) -> int:
    """``rumi convert`` with ``argv`` (without the program name); return the exit status.

    0: every input converted (or skipped as already valid); 1: nothing was
    produced, or ``--strict`` and some input went to the dead-letter output;
    2: bad usage.
    """
    try:
        convert_command.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="rumi convert", standalone_mode=False)
    except click.exceptions.Exit as stop:
        return int(stop.exit_code)
    except click.ClickException as err:
        err.show()
        return int(err.exit_code)
    return 0
