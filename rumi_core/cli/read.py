"""``rumi read``: read bands, times and a window of a file to a ``.npy``."""

from __future__ import annotations

import io
from pathlib import Path

import click
import numpy as np

from rumi_core.cli.header import write_atomic
from rumi_core.cli.options import header_option, parse_int_list, parse_window, read_header_file
from rumi_core.errors import RumiError
from rumi_core.reader import read

__all__ = ["read_command"]


@click.command("read")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@header_option
@click.option("--bands", callback=parse_int_list, help="Band positions, e.g. 0,2.")
@click.option("--times", callback=parse_int_list, help="Time positions, e.g. 1,3.")
@click.option("--window", callback=parse_window, help="Pixel window y0:y1,x0:x1.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Output .npy file.")
def read_command(
    file: Path,
    header_path: Path | None,
    bands: list[int] | None,
    times: list[int] | None,
    window: tuple[tuple[int, int], tuple[int, int]] | None,
    output: Path,
) -> None:
    """Read a selection of FILE statelessly and save it as OUTPUT (.npy)."""
    if output.suffix != ".npy":
        raise click.BadParameter("the output must end in .npy", param_hint="-o")
    try:
        data = read(file, read_header_file(header_path), bands=bands, times=times, window=window)
    except RumiError as err:
        raise click.ClickException(f"{file}: {err}") from err
    buf = io.BytesIO()
    np.save(buf, data, allow_pickle=False)
    write_atomic(output, buf.getvalue())
    click.echo(f"{output}: {data.dtype} {tuple(data.shape)}")
    if data.dtype.kind == "V" and data.dtype.fields is None:
        # .npy has no code for the ml_dtypes types: numpy stores their exact
        # bits as opaque void items. Say how to get the type back.
        click.echo(f"note: .npy stores {data.dtype} as raw {data.dtype.itemsize}-byte items; "
                   f"load with np.load(...).view(ml_dtypes.{data.dtype})", err=True)
