"""``rumi export``: write a cube back out as GeoTIFFs, one per time step."""

from __future__ import annotations

from pathlib import Path

import click

from catalog.cli.options import command_storage
from catalog.cube import Cube
from catalog.geotiff import export_geotiffs, export_targets
from rumi_core.cli.options import OptionError, check_output_file, failure, progress_bar, timeout_option
from rumi_core.errors import RumiError
from rumi_core.sources import deadline

__all__ = ["export_command"]


@click.command("export")
@click.argument("target", metavar="FILE_OR_ITEM")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Output .tif (a Cube adds _<time> per step).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Decoding threads (default: every CPU).")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: when stderr is a terminal).")
@timeout_option
def export_command(target: str, output: Path, threads: int | None, progress: bool | None, timeout: float | None) -> None:
    """Write every time step of FILE_OR_ITEM as a GeoTIFF with band descriptions.

    Each GeoTIFF keeps the source's CRS, transform, AREA_OR_POINT and
    the no-data value of its STAC item (a bare .rumi file carries none,
    which is reported). Nothing is published unless every file was written.
    """
    if output.suffix.lower() not in (".tif", ".tiff"):
        raise OptionError(f"-o {output}: the output must end in .tif")
    check_output_file(output)
    storage = command_storage(timeout)
    try:
        with Cube.open(target, storage=storage) as cube, deadline(cube.source, None):
            for target_path in export_targets(cube, output):
                check_output_file(target_path)
            steps = cube.layout.time_count
            with progress_bar(steps, label=f"export {steps} time steps", enabled=progress) as update:
                written = export_geotiffs(cube, output, threads=threads, progress=update)
            bare = cube.item is None
    except (RumiError, OSError) as err:
        raise failure(target, err) from err
    for path in written:
        click.echo(path)
    if bare:
        click.echo("note: a bare .rumi file carries no no-data value; export its STAC item to keep it", err=True)
