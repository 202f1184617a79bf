"""``rumi info``: print what a rumi file holds."""

from __future__ import annotations

import json

import click

from rumi_core.cli.options import failure, header_option, printable, read_header_file, timeout_option
from rumi_core.errors import RumiError
from rumi_core.info import info

__all__ = ["info_command"]


@click.command("info")
@click.argument("file", metavar="FILE_OR_URL")
@header_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@timeout_option
def info_command(file: str, header_path: str | None, as_json: bool, timeout: float | None) -> None:
    """Print shape, dtype, bands, times, CRS, tiling and sizes of FILE_OR_URL."""
    try:
        found = info(file, read_header_file(header_path, timeout), timeout=timeout)
    except RumiError as err:
        raise failure(file, err) from err
    data = found.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        if key in ("bands", "times") and isinstance(value, list):
            click.echo(f"{key:<{width}}  {len(value)}")
            for i, v in enumerate(value):
                click.echo(f"{'':<{width}}    {i}: {printable(str(v))}")
            continue
        click.echo(f"{key:<{width}}  {printable(str(value))}")
