"""Options and argument parsers shared by the ``rumi`` subcommands."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["header_option", "parse_int_list", "parse_window", "read_header_file", "timeout_option"]


def parse_int_list(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> list[int] | None:
    """Parse ``"0,2,5"`` into ``[0, 2, 5]``."""
    if value is None:
        return None
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated integers such as 0,2, got {value!r}") from err


def parse_window(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Parse ``"y0:y1,x0:x1"`` into ``((y0, y1), (x0, x1))``."""
    if value is None:
        return None
    try:
        rows, cols = value.split(",")
        r0, r1 = (int(v) for v in rows.split(":"))
        c0, c1 = (int(v) for v in cols.split(":"))
    except ValueError as err:
        raise click.BadParameter(f"expected y0:y1,x0:x1 such as 0:512,256:768, got {value!r}") from err
    return (r0, r1), (c0, c1)


def read_header_file(path: Path | None) -> bytes | None:
    """Return the bytes of a header blob file, or None."""
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as err:
        raise click.FileError(str(path), hint=err.strerror) from err


header_option = click.option(
    "--header",
    "header_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The file's header blob (.rumih). Without it, one is built from the file.",
)

timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Total seconds the command may wait on remote storage, every request, thread and retry included "
    "(default: 120 for http(s):// and gs://; local files do not wait).",
)
