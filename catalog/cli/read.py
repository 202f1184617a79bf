"""``rumi read``: read bands, times and a window of a cube, local or remote, to ``.npy`` or ``.tif``.

The first argument is a STAC item or a .rumi file, as a local path or an
``http(s)://`` or ``gs://`` URL. Bands are positions or names, times are
positions or an ``A/B`` range, and the window is a pixel window or a
``--bbox`` in ``--bbox-crs`` (longitude/latitude by default). A ``.npy``
holds ``(T, B, h, w)`` for a Cube and ``(B, h, w)`` for an Image; a ``.tif``
holds one band per selected (time, band), described as ``"<band text> @ <time>"``
when several time steps are read, with the CRS and the window's transform.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from catalog.cli.npy import write_npy
from catalog.cli.options import check_datetime, command_storage, parse_bbox
from catalog.cli.read_catalog import read_catalog
from catalog.cube import Cube
from catalog.errors import SelectorError
from catalog.geotiff import write_geotiff
from catalog.grid import epsg_code
from catalog.selectors import parse_band_selector, parse_time_selector
from rumi_core.cli.options import OptionError, check_output_file, failure, parse_window, progress_bar, read_header_file, timeout_option
from rumi_core.errors import RumiError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["read_command"]


def _locked(update: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """``update`` made safe to call from the decoding threads."""
    if update is None:
        return None
    lock = threading.Lock()

    def locked(n: int) -> None:
        with lock:
            update(n)

    return locked


def _check_grid_options(crs: str | None, resolution: float | None) -> None:
    """Check ``--crs`` and ``--resolution`` of ``rumi read --catalog`` before any search.

    Raises:
        OptionError: a CRS that is not an EPSG code, a resolution without a
            CRS, or one that is not positive.
    """
    if crs is not None and epsg_code(crs) is None:
        raise OptionError(f"--crs {crs}: not an EPSG CRS (give EPSG:n, or WKT or a URN that is one)")
    if resolution is None:
        return
    if crs is None:
        raise OptionError(f"--resolution {resolution:g} needs --crs: without one the items' own lattice is used, at its own pixel size")
    if not resolution > 0:
        raise OptionError(f"--resolution {resolution:g}: a pixel size is positive")


@click.command("read")
@click.argument("target", metavar="ITEM_OR_FILE", required=False)
@click.option(
    "--catalog",
    help="Instead of ITEM_OR_FILE: search this catalogue (directory, catalog.json, index or STAC API) with --bbox and "
    "--datetime, and read every hit as one mosaic.",
)
@click.option("--datetime", "when", callback=check_datetime, help="With --catalog: ISO 8601 range A/B (open ends '..'), or one date.")
@click.option("--crs", help="With --catalog: output CRS (EPSG:n), to warp items from several grids onto one.")
@click.option("--resolution", type=float, help="With --catalog and --crs: output pixel size in CRS units.")
@click.option(
    "--header",
    "header_path",
    metavar="PATH_OR_URL",
    default=None,
    help="The file's header blob (.rumih). By default the item's, or <file>h, or one built from the file.",
)
@click.option("--bands", help="Band positions or names, e.g. 0,2 or red,nir.")
@click.option("--times", help="Time positions (1,3) or an ISO 8601 range (2021-01-01/2021-03-31, open ends '..').")
@click.option("--window", callback=parse_window, help="Pixel window y0:y1,x0:x1.")
@click.option(
    "--bbox",
    callback=parse_bbox,
    help="Bounding box minx,miny,maxx,maxy in --bbox-crs (in degrees, minx > maxx crosses the antimeridian).",
)
@click.option("--bbox-crs", default="EPSG:4326", show_default=True, is_eager=True, help="CRS of --bbox.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Fetch-and-decode threads (default: every CPU).")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: when stderr is a terminal).")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Output .npy or .tif file.")
@timeout_option
def read_command(
    target: str | None,
    header_path: str | None,
    bands: str | None,
    times: str | None,
    window: tuple[tuple[int, int], tuple[int, int]] | None,
    bbox: tuple[float, float, float, float] | None,
    bbox_crs: str,
    threads: int | None,
    progress: bool | None,
    output: Path,
    timeout: float | None,
    catalog: str | None,
    when: str | None,
    crs: str | None,
    resolution: float | None,
) -> None:
    """Read a selection of ITEM_OR_FILE statelessly and save it as OUTPUT (.npy or .tif).

    A window or bbox reaching past the image is clipped to it, and the
    window read is reported. A .tif keeps the source's transform,
    AREA_OR_POINT and no-data value (from the item; a bare file has none).

    With --catalog instead, search the catalogue for --bbox and --datetime and
    read the hits as one mosaic (see catalog.load).
    """
    suffix = output.suffix.lower()
    if suffix not in (".npy", ".tif", ".tiff"):
        raise OptionError(f"-o {output}: the output must end in .npy or .tif")
    try:
        band_sel = parse_band_selector(bands) if bands is not None else None
    except SelectorError as err:
        raise OptionError(f"--bands: {err}") from err
    try:
        time_sel = parse_time_selector(times) if times is not None else None
    except SelectorError as err:
        raise OptionError(f"--times: {err}") from err
    if (catalog is None) == (target is None):
        raise OptionError("give ITEM_OR_FILE or --catalog, not both and not neither")
    if catalog is not None:
        if bbox is None or window is not None or times is not None or header_path is not None:
            raise OptionError("--catalog reads by --bbox and --datetime: give --bbox, and no --window, --times or --header")
        _check_grid_options(crs, resolution)
        check_output_file(output)
        read_catalog(
            catalog,
            bands=band_sel,
            bbox=bbox,
            bbox_crs=bbox_crs,
            datetime=when,
            crs=crs,
            resolution=resolution,
            output=output,
            storage=command_storage(timeout),
            threads=threads,
            progress=progress,
        )
        return
    if when is not None or crs is not None or resolution is not None:
        raise OptionError("--datetime, --crs and --resolution go with --catalog; use --times to select time steps of one item")
    assert target is not None
    if bbox is not None and window is not None:
        raise OptionError("give --bbox or --window, not both")
    check_output_file(output)
    blob = read_header_file(header_path)
    storage = command_storage(timeout)
    try:
        with Cube.open(target, header=blob, storage=storage) as cube:
            frames = cube.frame_count(cube.selection(bands=band_sel, times=time_sel, bbox=bbox, bbox_crs=bbox_crs, window=window))
            with progress_bar(frames, label=f"read {frames} frames", enabled=progress) as update:
                result = cube.read(
                    bands=band_sel,
                    times=time_sel,
                    bbox=bbox,
                    bbox_crs=bbox_crs,
                    window=window,
                    threads=threads,
                    labels=suffix != ".npy",
                    progress=_locked(update),
                )
            bare = cube.item is None
            if suffix == ".npy":
                write_npy(output, result.data)
            else:
                stack = result.as_cube()
                t, b, h, w = stack.shape
                texts = [band.description or band.name for band in result.bands]
                several = t > 1 and bool(result.times)
                descriptions = [f"{text} @ {when}" for when in result.times for text in texts] if several else texts * t
                band_tags = [{"TIME": when} for when in result.times for _ in texts] if result.times else None
                write_geotiff(
                    output,
                    stack.reshape(t * b, h, w),
                    crs=cube.crs if result.crs is not None else None,
                    transform=result.transform,
                    descriptions=descriptions,
                    band_tags=band_tags,
                    nodata=result.nodata,
                    pixel_is_point=result.pixel_is_point,
                    radiometry=list(result.bands) * t,
                )
    except (RumiError, OSError) as err:
        raise failure(target, err) from err
    data = result.data
    (r0, r1), (c0, c1) = result.window
    click.echo(f"{output}: {data.dtype} {tuple(data.shape)} window {r0}:{r1},{c0}:{c1}")
    if window is not None and result.window != window:
        (w0, w1), (w2, w3) = window
        click.echo(f"note: --window {w0}:{w1},{w2}:{w3} clipped to the image: {r0}:{r1},{c0}:{c1}", err=True)
    if suffix != ".npy" and bare and result.nodata is None:
        click.echo("note: a bare .rumi file carries no no-data value; read its STAC item to keep it", err=True)
