"""Options and parsers shared by the catalogue's subcommands."""

from __future__ import annotations

import click

__all__ = ["parse_bbox"]


def parse_bbox(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> tuple[float, float, float, float] | None:
    """Parse ``"minx,miny,maxx,maxy"``."""
    if value is None:
        return None
    try:
        parts = [float(v) for v in value.split(",")]
    except ValueError as err:
        raise click.BadParameter(f"expected minx,miny,maxx,maxy such as 14.9,36.0,15.1,36.2, got {value!r}") from err
    if len(parts) != 4:
        raise click.BadParameter(f"expected four numbers minx,miny,maxx,maxy, got {len(parts)}")
    minx, miny, maxx, maxy = parts
    return minx, miny, maxx, maxy
