"""``rumi validate``: check a file (and its blob) against every MUST.

Exit status: 0 valid, 1 invalid (with a one-line reason), 2 usage or I/O error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rumi_core.cli.options import header_option, read_header_file
from rumi_core.errors import RumiError, SourceError
from rumi_core.validate import validate

__all__ = ["validate_command"]


@click.command("validate")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@header_option
@click.option("--quick", is_flag=True, help="Check structure only; do not decode frames.")
def validate_command(file: Path, header_path: Path | None, quick: bool) -> None:
    """Check FILE against the rumi 0.1.0 specification."""
    blob = read_header_file(header_path)
    try:
        structure = validate(file, blob, quick=quick)
    except SourceError as err:
        click.echo(f"{file}: cannot read: {err}", err=True)
        sys.exit(2)
    except RumiError as err:
        click.echo(f"{file}: invalid: {err}", err=True)
        sys.exit(1)
    lay = structure.head.layout
    what = "structure" if quick else f"structure and {lay.frame_count} frames"
    extra = " and header blob" if blob is not None else ""
    click.echo(f"{file}: valid ({what}{extra} checked)")
