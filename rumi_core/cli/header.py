"""``rumi header``: build the header blob of a finalized file."""

from __future__ import annotations

from pathlib import Path

import click

from rumi_core.cli.options import check_output_file, failure, timeout_option
from rumi_core.errors import RumiError
from rumi_core.files import write_atomic
from rumi_core.header import blob_beside, build_header
from rumi_core.sources import url_scheme

__all__ = ["header_command"]


@click.command("header")
@click.argument("file", metavar="FILE_OR_URL")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the blob (default: beside FILE, its name and h, x.rumih; for a URL, that name in the current directory).",
)
@timeout_option
def header_command(file: str, output: Path | None, timeout: float | None) -> None:
    """Build the header blob of FILE_OR_URL after checking it against the IFD."""
    # Where rumi read and rumi validate look for it; a URL's blob goes to the current directory, named after the file.
    out = output or Path(blob_beside(file.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] if url_scheme(file) else file))
    check_output_file(out)
    try:
        blob = build_header(file, timeout=timeout)
    except RumiError as err:
        raise failure(file, err) from err
    try:
        write_atomic(out, blob)
    except OSError as err:
        raise failure(out, err) from err
    click.echo(f"{out}: {len(blob)} bytes")
