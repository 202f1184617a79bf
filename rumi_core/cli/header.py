"""``rumi header``: build the header blob of a finalized file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from rumi_core.errors import RumiError
from rumi_core.header import build_header

__all__ = ["header_command", "write_atomic"]


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place."""
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@click.command("header")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the blob (default: FILE with suffix .rumih).",
)
def header_command(file: Path, output: Path | None) -> None:
    """Build the header blob of FILE after checking it against the IFD."""
    try:
        blob = build_header(file)
    except RumiError as err:
        raise click.ClickException(f"{file}: {err}") from err
    out = output or file.with_suffix(".rumih")
    try:
        write_atomic(out, blob)
    except OSError as err:
        raise click.FileError(str(out), hint=err.strerror) from err
    click.echo(f"{out}: {len(blob)} bytes")
