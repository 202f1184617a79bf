"""``rumi export``: write a cube back out as GeoTIFFs, one per time step."""

from __future__ import annotations

from pathlib import Path

import click

from catalog.cube import Cube
from catalog.geotiff import export_geotiffs
from catalog.storage import Storage
from rumi_core.cli.options import timeout_option
from rumi_core.errors import RumiError
from rumi_core.sources import deadline

__all__ = ["export_command"]


@click.command("export")
@click.argument("target", metavar="FILE_OR_ITEM")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Output .tif (a Cube adds _<time> per step)."
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Decoding threads (default: every CPU).")
@timeout_option
def export_command(target: str, output: Path, threads: int | None, timeout: float | None) -> None:
    """Write every time step of FILE_OR_ITEM as a GeoTIFF with band descriptions."""
    if output.suffix.lower() not in (".tif", ".tiff"):
        raise click.BadParameter("the output must end in .tif", param_hint="-o")
    try:
        with Cube.open(target, storage=Storage(timeout=timeout)) as cube, deadline(cube.source, timeout):
            written = export_geotiffs(cube, output, threads=threads)
    except RumiError as err:
        raise click.ClickException(f"{target}: {err}") from err
    for path in written:
        click.echo(path)
