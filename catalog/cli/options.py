"""Options and parsers shared by the catalogue's subcommands."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from catalog.errors import SelectorError
from catalog.selectors import check_bbox
from catalog.storage import Storage
from rumi_core.cli.options import OptionError

if TYPE_CHECKING:
    import click

__all__ = ["command_storage", "parse_bbox", "parse_lonlat_bbox"]


def command_storage(timeout: float | None) -> Storage:
    """The storage of one command: with ``--timeout``, everything it asks (item, blob, frames) ends that many seconds from now.

    ``--timeout`` is the command's whole wait, not each step's: opening an
    item, fetching its blob and reading the frames share it.
    """
    return Storage(timeout=timeout, deadline=None if timeout is None else time.monotonic() + timeout)


def parse_lonlat_bbox(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None
) -> tuple[float, float, float, float] | None:
    """:func:`parse_bbox` of a longitude/latitude box, which may cross the antimeridian (``rumi search``)."""
    return parse_bbox(ctx, param, value, antimeridian=True)


def parse_bbox(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None, *, antimeridian: bool = False
) -> tuple[float, float, float, float] | None:
    """Parse ``"minx,miny,maxx,maxy"`` and check it as ``rumi search`` and ``rumi read`` both do (:func:`check_bbox`)."""
    if value is None:
        return None
    try:
        parts = [float(v) for v in value.split(",")]
    except ValueError as err:
        raise OptionError(f"--bbox: expected minx,miny,maxx,maxy such as 14.9,36.0,15.1,36.2, got {value!r}") from err
    try:
        return check_bbox(parts, antimeridian=antimeridian)
    except SelectorError as err:
        raise OptionError(f"--bbox: {err}") from err
