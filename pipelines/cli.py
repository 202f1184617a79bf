"""``rumi convert``: the command-line face of :func:`pipelines.convert.run`.

Issue 4, *The command*. Registered in the ``rumi.commands`` entry-point group,
so ``rumi convert`` works wherever the package is installed. Any option the
command does not define is a Beam pipeline option and goes to the runner; it
must be written ``--name=value`` (``--direct_num_workers=2``) so it cannot be
mistaken for an input.
"""

from __future__ import annotations

import glob
import os
import sys

import click

from pipelines.errors import OptionError
from pipelines.options import ALIGN_MODES, CUBE_PERIODS, DUPLICATE_MODES, EXTENT_MODES, RESAMPLING_METHODS, ConvertOptions
from pipelines.sources import is_url

__all__ = ["convert_command", "split_beam_args"]


def _looks_like_input(token: str) -> bool:
    return is_url(token) or os.path.exists(token) or bool(glob.glob(token))


def split_beam_args(tokens: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """Separate inputs from Beam pipeline options (``--name=value`` or flags).

    Raises:
        click.UsageError: a bare ``--name`` is followed by something that is no input,
            most likely its value; the fix is ``--name=value``.

    >>> split_beam_args(["a.tif", "--direct_num_workers=2"])
    (['a.tif'], ['--direct_num_workers=2'])
    """
    inputs: list[str] = []
    beam_args: list[str] = []
    for i, token in enumerate(tokens):
        if token.startswith("-"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if "=" not in token and nxt is not None and not nxt.startswith("-") and not _looks_like_input(nxt):
                raise click.UsageError(f"{nxt!r} is no input; write Beam pipeline options as {token}={nxt}")
            beam_args.append(token)
        else:
            inputs.append(token)
    return inputs, beam_args


@click.command("convert", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("inputs", nargs=-1, type=click.UNPROCESSED)
@click.option("--out", "out", required=True, help="Output directory, or gs://BUCKET/PREFIX.")
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
    "--cube-period", type=click.Choice(CUBE_PERIODS), default="none", show_default=True, help="Split each grid's series into cubes."
)
@click.option("--align", type=click.Choice(ALIGN_MODES), default="fail", show_default=True, help="Off-grid scenes: dead letter, or warp.")
@click.option(
    "--resampling", type=click.Choice(RESAMPLING_METHODS), default="nearest", show_default=True, help="Resampling of --align reproject."
)
@click.option(
    "--duplicates", type=click.Choice(DUPLICATE_MODES), default="error", show_default=True, help="Two scenes of one grid at one time."
)
@click.option(
    "--extent", type=click.Choice(EXTENT_MODES), default="separate", show_default=True, help="Union differing extents of one grid."
)
@click.option("--time", "time_", default=None, help="ISO 8601 time of scenes nothing else dates.")
@click.option(
    "--time-pattern", default=None, help="Regex with named groups (year, month, day, doy, hour, minute, second, date) matched in paths."
)
@click.option("--runner", default="FnApiRunner", show_default=True, help="Beam runner (name or fully qualified class).")
@click.option("--shards", default=64, show_default=True, help="Frame-key shards (parallelism of the frame stage).")
@click.option(
    "--verify-frames", default=8, show_default=True, help="Frames per file decoded and compared with the sources before publishing."
)
@click.option("--strict", is_flag=True, help="Exit with status 1 when any input went to the dead-letter output.")
@click.option("--overwrite", is_flag=True, help="Convert cubes whose outputs already exist and validate.")
@click.option("--detach", is_flag=True, help="Return once the job is submitted (e.g. from a Dataflow Flex Template launcher).")
@click.option("--progress/--no-progress", default=None, help="Draw a progress bar (default: when stderr is a terminal).")
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
    detach: bool,
    progress: bool | None,
) -> None:
    """Convert GeoTIFF scenes (INPUTS: paths, globs, URLs, STAC files) into rumi cubes in OUT.

    Any other --name=value option is passed to Beam (e.g. --direct_num_workers=2
    --direct_running_mode=multi_processing).
    """
    from pipelines.convert import run

    paths, beam_args = split_beam_args(inputs)
    if not paths:
        raise click.UsageError("give at least one input path, glob, URL or STAC file")
    try:
        options = ConvertOptions(
            out=out,
            tile_size=tile_size,
            frame_unit=frame_unit,  # type: ignore[arg-type]  # parsed and checked by ConvertOptions
            access=None if access == "any" else access,  # type: ignore[arg-type]  # one of click's choices
            compression=compression,
            max_abs_error=max_abs_error,
            max_rel_error=max_rel_error,
            cube_period=cube_period,
            align=align,
            resampling=resampling,
            duplicates=duplicates,
            extent=extent,
            time=time_,
            time_pattern=time_pattern,
            overwrite=overwrite,
            shards=shards,
            verify_frames=verify_frames,
            catalog=catalog_dir,
            write_catalog=not no_catalog,
        )
    except OptionError as err:
        raise click.BadParameter(str(err), param_hint=err.option) from err
    if detach:
        from pipelines.convert import submit

        result = submit(paths, options, beam_args, runner=runner)
        job_id = getattr(result, "job_id", None)
        click.echo(f"submitted to {runner}" + (f": job {job_id()}" if callable(job_id) else ""))
        return
    show = sys.stderr.isatty() if progress is None else progress
    summary = run(paths, options, beam_args, runner=runner, progress=sys.stderr if show else None)
    click.echo(summary.table())
    if options.write_catalog and summary.entries:
        click.echo(f"catalogue: {options.catalog_dir}")
    if not summary.produced:
        click.echo("nothing was produced", err=True)
        sys.exit(1)
    if strict and summary.dead_letters:
        click.echo(f"--strict: {len(summary.dead_letters)} inputs went to the dead-letter output", err=True)
        sys.exit(1)
