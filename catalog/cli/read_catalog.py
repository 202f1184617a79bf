"""``rumi read --catalog``: search a catalogue and read the hits as one mosaic.

The search takes ``--bbox`` (in ``--bbox-crs``, turned into longitude and
latitude for the search), ``--datetime`` and the band names of ``--bands``
(so that a catalogue whose cubes hold other bands, as ``rumi convert``
writes a Landsat QA band or a Sentinel-2 resolution apart, gives the cubes
that have them); the hits are loaded with
:func:`catalog.load` (one lattice mosaicked, or warped onto ``--crs`` and
``--resolution``; overlaps take the first valid item in search order) and
written as a ``.npy`` of ``(T, B, h, w)`` or a ``.tif`` with one band per
(time, band).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from catalog.bands import Band
from catalog.cli.npy import write_npy
from catalog.geotiff import write_geotiff
from catalog.grid import box_in
from catalog.load import load
from catalog.search import search
from catalog.selectors import lonlat_wrapped
from rumi_core.cli.options import counted, failure, progress_bar, shown
from rumi_core.errors import ResourceLimitError, RumiError
from rumi_core.limits import DEFAULT_LIMITS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from numpy.typing import NDArray

    from catalog.storage import Storage

__all__ = ["read_catalog"]


def _lonlat(bbox: tuple[float, float, float, float], bbox_crs: str) -> tuple[float, float, float, float]:
    """The box search takes: longitudes within -180..180, across the antimeridian as ``minx > maxx``."""
    return lonlat_wrapped(box_in(bbox, bbox_crs, "EPSG:4326"))


def _computed(array: Any, update: Callable[[int], None] | None) -> NDArray[Any]:
    """The dask ``array`` computed, calling ``update(1)`` as each of its blocks is done."""
    if update is None:
        return np.asarray(array)
    from dask.callbacks import Callback

    name = array.name

    def finished(key: Any, *_: Any) -> None:
        if isinstance(key, tuple) and key and key[0] == name:
            update(1)

    with Callback(posttask=finished):
        return np.asarray(array)


def read_catalog(
    catalog: str,
    *,
    bands: Sequence[int | str] | None,
    bbox: tuple[float, float, float, float],
    bbox_crs: str,
    datetime: str | None,
    crs: str | None,
    resolution: float | None,
    output: Path,
    storage: Storage,
    threads: int | None = None,
    progress: bool | None = None,
) -> None:
    """Search ``catalog``, load the hits over ``bbox`` and save them as ``output``, asking everything through ``storage``.

    ``threads`` fetch and decode each block; ``progress`` draws a bar of the
    blocks computed (:func:`~rumi_core.cli.options.progress_bar`).

    Raises:
        click.ClickException: nothing matches, or a search, load or read failed.
    """
    # Positions mean each cube's own bands: only names can say which cubes have them.
    names = [str(b) for b in bands] if bands and all(isinstance(b, str) for b in bands) else None
    try:
        hits = search(catalog, bbox=_lonlat(bbox, bbox_crs), datetime=datetime, bands=names, storage=storage)
        if not hits:
            asked = "the bbox, datetime and bands" if names else "the bbox and datetime"
            raise click.ClickException(shown(f"{catalog}: no cube matches {asked}"))
        # The whole output is computed: it is refused before any of it is planned when larger than one read's may be.
        ds = load(
            hits,
            bands=bands,
            bbox=bbox,
            bbox_crs=bbox_crs,
            datetime=datetime,
            crs=crs,
            resolution=resolution,
            storage=storage,
            threads=threads,
            limits=DEFAULT_LIMITS,
        )
        blocks = math.prod(len(c) for c in ds.data.chunks or ())
        with progress_bar(blocks, label=f"read {counted(blocks, 'block')}", enabled=progress) as update:
            data = _computed(ds.data.data, update)
    except ResourceLimitError as err:
        size = err.message.split(";", 1)[0]  # the library's advice is for Python callers
        raise click.ClickException(shown(f"{catalog}: {size}; narrow --bbox, or give a coarser --resolution with --crs")) from err
    except RumiError as err:
        raise failure(catalog, err) from err
    if output.suffix.lower() == ".npy":
        write_npy(output, data)
    else:
        from affine import Affine

        c, a, b, f, d, e = (float(v) for v in ds.spatial_ref.attrs["GeoTransform"].split())
        t, nb, h, w = data.shape
        whens = [str(v)[:19] + "Z" for v in ds.time.values]
        texts = [str(v) for v in ds.description.values]
        radiometry = [
            Band(str(name), scale=float(scale), offset=float(offset), unit=str(unit) or None)
            for name, scale, offset, unit in zip(ds.band.values, ds.scale.values, ds.offset.values, ds.unit.values, strict=True)
        ]
        write_geotiff(
            output,
            data.reshape(t * nb, h, w),
            crs=str(ds.attrs["crs"]),
            transform=Affine(a, b, c, d, e, f),
            descriptions=[f"{text} @ {when}" for when in whens for text in texts],
            nodata=ds.data.attrs.get("nodata"),
            band_tags=[{"TIME": when} for when in whens for _ in texts],
            radiometry=radiometry * t,
        )
    click.echo(f"{output}: {data.dtype} {tuple(data.shape)} from {counted(len(hits), 'item')}")
