"""Options and parsers shared by the catalogue's subcommands."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from catalog.errors import SelectorError
from catalog.grid import box_in
from catalog.selectors import TimeRange, check_bbox
from catalog.storage import Storage
from rumi_core.cli.options import OptionError

if TYPE_CHECKING:
    import click

__all__ = ["check_datetime", "command_storage", "parse_bbox", "parse_lonlat_bbox"]


def command_storage(timeout: float | None) -> Storage:
    """The storage of one command: with ``--timeout``, everything it asks (item, blob, frames) ends that many seconds from now.

    ``--timeout`` is the command's whole wait, not each step's: opening an
    item, fetching its blob and reading the frames share it.
    """
    return Storage(timeout=timeout, deadline=None if timeout is None else time.monotonic() + timeout)


def parse_lonlat_bbox(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None
) -> tuple[float, float, float, float] | None:
    """Parse ``"minx,miny,maxx,maxy"``, a longitude/latitude box that may cross the antimeridian (``rumi search``, :func:`check_bbox`)."""
    parts = _numbers(value)
    try:
        return None if parts is None else check_bbox(parts, antimeridian=True, searched=True)
    except SelectorError as err:
        raise OptionError(f"--bbox: {err}") from err


def parse_bbox(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> tuple[float, float, float, float] | None:
    """Parse ``"minx,miny,maxx,maxy"`` in the command's ``--bbox-crs`` (``rumi read``), checked as the read will check it (:func:`box_in`).

    A box in a geographic CRS may cross the antimeridian, as ``rumi search``'s.
    The command declares ``--bbox-crs`` eager, so that it is known here.
    """
    parts = _numbers(value)
    if parts is None:
        return None
    bbox_crs = ctx.params.get("bbox_crs", "EPSG:4326") if ctx is not None else "EPSG:4326"
    try:
        box_in(parts, bbox_crs, None)
    except SelectorError as err:
        raise OptionError(f"--bbox: {err}") from err
    minx, miny, maxx, maxy = parts
    return minx, miny, maxx, maxy


def _numbers(value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(v) for v in value.split(",")]
    except ValueError as err:
        raise OptionError(f"--bbox: expected minx,miny,maxx,maxy such as 14.9,36.0,15.1,36.2, got {value!r}") from err


def check_datetime(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """Check ``--datetime`` (an ISO 8601 instant, date or range ``A/B``, open ends ``..``) before anything is asked of a server.

    The text itself is returned: the search parses it again, as a Python caller's would be.
    """
    if value is not None:
        try:
            TimeRange.parse(value)
        except SelectorError as err:
            raise OptionError(f"--datetime: {err}") from err
    return value
