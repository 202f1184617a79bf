"""``rumi search``: find cubes in a catalogue, its index or a STAC API."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from catalog.cli.options import check_datetime, command_storage, parse_lonlat_bbox
from catalog.credentials import unsigned
from catalog.search import search
from rumi_core.cli.options import OptionError, failure, printable, timeout_option
from rumi_core.errors import RumiError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["search_command"]


@click.command("search")
@click.argument("target", metavar="CATALOG_OR_API")
@click.option(
    "--bbox",
    callback=parse_lonlat_bbox,
    help="Longitude/latitude box minx,miny,maxx,maxy (minx > maxx crosses the antimeridian; a point or line is allowed).",
)
@click.option("--datetime", "when", callback=check_datetime, help="ISO 8601 range A/B (open ends '..'), or one date.")
@click.option("--bands", help="Band names every hit must have, e.g. red,nir.")
@click.option("--limit", type=click.IntRange(min=1, max=2**63 - 1), default=None, help="Most hits to print.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@timeout_option
def search_command(
    target: str,
    bbox: tuple[float, float, float, float] | None,
    when: str | None,
    bands: str | None,
    limit: int | None,
    as_json: bool,
    timeout: float | None,
) -> None:
    """Search CATALOG_OR_API (a catalogue directory or catalog.json, an items.parquet, or a STAC API URL).

    The table shows each file's href without a password or signature, as errors do: it goes to terminals and
    logs; control characters in a catalogue's texts are escaped. --json prints each hit as found, hrefs whole,
    for a program to read them with.
    """
    wanted = [b.strip() for b in bands.split(",") if b.strip()] if bands is not None else None
    if wanted == []:  # as rumi read takes it: "" is no band, not every cube
        raise OptionError(f"--bands {bands!r} names no band; give names such as red,nir, or leave --bands out")
    try:
        hits = search(target, bbox=bbox, datetime=when, bands=wanted, limit=limit, storage=command_storage(timeout))
    except RumiError as err:
        raise failure(target, err) from err
    if as_json:
        click.echo(json.dumps([h.to_dict() for h in hits], indent=2))
        return
    if not hits:
        click.echo("no cube matches", err=True)
        return
    rows = [tuple(map(printable, (h.id, f"{h.start} .. {h.end}", _listed(h.bands), unsigned(h.data_href or "")))) for h in hits]
    header = ("id", "time", "bands", "data")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for r in [header, *rows]:
        click.echo("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])


def _listed(names: Sequence[str]) -> str:
    """Band names joined by commas, a name that holds one quoted (``rumi convert`` names bands by their whole text).

    >>> _listed(["B2", "B4, Red, 665nm"])
    'B2,"B4, Red, 665nm"'
    """
    return ",".join(f'"{name}"' if "," in name else name for name in names)
