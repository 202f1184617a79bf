"""Sentinel-2 L2A STAC items: recognition, radiometry, duplicates, filters, and scene references.

An item is Sentinel-2 L2A when its **properties** say so (:func:`is_s2_l2a`):
a Sentinel-2 ``constellation`` or ``platform``, a processing baseline
(``s2:processing_baseline``, or ``processing:version`` as CDSE writes it),
and an MGRS tile (``s2:mgrs_tile``, the grid extension's ``grid:code``, or the
MGRS extension's ``mgrs:utm_zone``, ``mgrs:latitude_band`` and
``mgrs:grid_square``); a product type (``s2:product_type``,
``product:type``) or processing level, where given, must be L2A. File names
are never consulted.

Radiometry (:func:`radiometry`): DNs are stored unchanged. Reflectance bands
record ``scale`` 0.0001 and ``offset`` -0.1 from processing baseline 04.00 on
(which adds 1000 to every L2A DN), 0 before it, and 0 as well when Earth
Search already removed the offset (``earthsearch:boa_offset_applied``), so it
is never applied twice. The offset is part of the cube family, so a month that
straddles baseline 04.00 becomes two cubes, one per offset.

Duplicates (:func:`keep_newest`): items of one datatake (platform, tile and
sensing time) are reprocessings of each other; the one with the newest
processing (baseline, then generation time, then id) is kept. Items of the
newest baseline whose files name SAFE products are all kept: ESA cuts a
datatake's tile into such products where it spans two datastrips, and
planning mosaics them (:attr:`pipelines.sentinel2.products.S2Product.version`). Acquisitions of
different relative orbits on one tile differ in time, so they simply follow
each other in the tile's cube.

:func:`scene_refs` turns the kept items' band assets into
:class:`~pipelines.planning.scene.SceneRef` objects whose :class:`~pipelines.planning.scene.ProductBand`
carries the band text, radiometry, nodata 0 and the family
``S2L2A_T<tile>_<group>[_o1000]``; with ``resolution=10`` every band is read
on the 10 m grid through GDAL's ``vrt://`` with nearest-neighbour
upsampling (integer factors 2 and 6: every stored value is an original DN and
nodata stays exact, which bilinear or cubic would break at every nodata edge).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from catalog.storage import join_href
from pipelines.planning.scene import ProductBand, SceneRef
from pipelines.planning.timestamps import ONE_PASS_SECONDS
from pipelines.rasters import gdal_path
from pipelines.sentinel2.bands import S2Band, asset_resolution, band_for_asset, band_text
from pipelines.sentinel2.products import product_of
from rumi_core.errors import InvalidInputError
from rumi_core.times import parse_time

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "OFFSET_BASELINE",
    "REFLECTANCE_SCALE",
    "S2Item",
    "baseline_of",
    "datatakes",
    "is_s2_l2a",
    "keep_newest",
    "not_s2_l2a",
    "parse_item",
    "radiometry",
    "resolution_group",
    "scene_refs",
]

REFLECTANCE_SCALE: Final = 0.0001
"""L2A DN to surface reflectance."""
OFFSET_BASELINE: Final = (4, 0)
"""Processing baseline from which L2A DNs carry +1000 (``BOA_ADD_OFFSET`` -1000)."""
_OFFSET: Final = -0.1
_PROCESSED: Final = ("s2:generation_time", "processing:datetime", "updated", "created")


_BASELINE: Final = re.compile(r"\d{1,2}\.\d{1,2}")
"""A processing baseline as ESA writes it: ``05.10``."""


def _baseline(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


def tile_of(props: Mapping[str, Any]) -> str | None:
    """The MGRS tile (``33UUU``): ``s2:mgrs_tile``, ``grid:code`` (``MGRS-33UUU``, CDSE) or the MGRS extension's fields; or None."""
    tile = props.get("s2:mgrs_tile")
    if isinstance(tile, str) and tile:
        return tile.upper().removeprefix("T")
    code = props.get("grid:code")
    if isinstance(code, str) and code.upper().startswith("MGRS-") and len(code) > 5:
        return code[5:].upper().removeprefix("T")
    zone, band, square = props.get("mgrs:utm_zone"), props.get("mgrs:latitude_band"), props.get("mgrs:grid_square")
    if isinstance(zone, int) and not isinstance(zone, bool) and isinstance(band, str) and band and isinstance(square, str) and square:
        return f"{zone:02d}{band}{square}".upper()
    return None


def baseline_of(props: Mapping[str, Any]) -> str | None:
    """The processing baseline (``05.10``): ``s2:processing_baseline``, or the processing extension's ``processing:version`` (CDSE)."""
    value = props.get("s2:processing_baseline") or props.get("processing:version")
    return str(value) if value else None


def is_s2_l2a(item: Mapping[str, Any]) -> bool:
    """Whether a STAC item (as a dict) is a Sentinel-2 L2A product, judged by its properties alone."""
    return not_s2_l2a(item) is None


def not_s2_l2a(item: Mapping[str, Any]) -> str | None:
    """Why a STAC item (as a dict) is not read as a Sentinel-2 L2A product: the property that says otherwise, or lacks; None if it is.

    >>> not_s2_l2a({"properties": {"platform": "sentinel-2a", "s2:mgrs_tile": "33UUU"}})
    'it states no processing baseline (s2:processing_baseline, processing:version)'
    """
    props = item.get("properties") or {}
    mission = str(props.get("constellation") or props.get("platform") or "").lower().replace(" ", "-")
    if not mission.startswith("sentinel-2"):
        return f"its constellation or platform is {mission or 'not stated'}, not sentinel-2"
    if not baseline_of(props):
        return "it states no processing baseline (s2:processing_baseline, processing:version)"
    if tile_of(props) is None:
        return "it states no MGRS tile (s2:mgrs_tile, grid:code, or the mgrs: fields)"
    kind = props.get("s2:product_type") or props.get("product:type")
    if kind is not None and str(kind).upper() != "S2MSI2A":
        return f"its product type is {kind}, not S2MSI2A"
    level = props.get("processing:level")
    if level is not None and str(level).upper() != "L2A":
        return f"its processing:level is {level}, not L2A"
    return None


def radiometry(band: S2Band, baseline: str, *, boa_offset_applied: bool) -> tuple[float, float]:
    """``(scale, offset)`` of a band's DNs for a processing baseline.

    >>> from pipelines.sentinel2.bands import BANDS
    >>> radiometry(BANDS["B04"], "05.09", boa_offset_applied=False), radiometry(BANDS["B04"], "03.01", boa_offset_applied=False)
    ((0.0001, -0.1), (0.0001, 0.0))
    >>> from pipelines.sentinel2.bands import BANDS
    >>> radiometry(BANDS["B04"], "05.09", boa_offset_applied=True), radiometry(BANDS["SCL"], "05.09", boa_offset_applied=False)
    ((0.0001, 0.0), (1.0, 0.0))
    """
    if band.group == "scl":
        return 1.0, 0.0
    # Not the item's raster:bands offset: Earth Search v1 items state -0.1 there also where the offset was removed, and
    # its maintainers name earthsearch:boa_offset_applied the truth (Element84/earth-search#9).
    offset = _OFFSET if _baseline(baseline) >= OFFSET_BASELINE and not boa_offset_applied else 0.0
    return REFLECTANCE_SCALE, offset


@dataclass(frozen=True)
class S2Item:
    """What a Sentinel-2 L2A item says, in the catalogue-independent form the pipeline uses."""

    id: str
    """Item id."""
    datetime: str
    """Sensing time, ISO 8601."""
    tile: str
    """MGRS tile, ``33UUU``."""
    platform: str
    """``sentinel-2a``, ``sentinel-2b``..."""
    baseline: str
    """Processing baseline, ``05.09``."""
    boa_offset_applied: bool
    """Earth Search removed the +1000 already."""
    cloud_cover: float | None
    """``eo:cloud_cover`` in percent, if given."""
    processed: str
    """When this processing was made, for ordering reprocessings: ``s2:generation_time``,
    ``processing:datetime``, ``updated`` or ``created``."""
    assets: tuple[tuple[str, str], ...]
    """``(band id, href)`` of every band asset, hrefs resolved."""

    @property
    def second(self) -> int | None:
        """The sensing time in whole seconds, or None where it cannot be read (refused where the scene is dated).

        Catalogues write one sensing time as ``10:15:59.024000Z`` or ``10:15:59Z``,
        and a cube stores whole seconds.
        """
        try:
            return parse_time(self.datetime)
        except InvalidInputError:
            return None


def datatakes(items: Sequence[S2Item]) -> dict[S2Item, str]:
    """Each item's datatake: its platform, tile and the first sensing second of the items of that platform and tile
    within :data:`~pipelines.planning.timestamps.ONE_PASS_SECONDS` of it. Reprocessings share it.

    Within minutes of each other, two items of one platform and tile are one pass over the tile stated twice, as two
    catalogues state it: Earth Search dates an item by the tile's sensing time (``10:06:19Z``), the Planetary Computer
    by its datatake's start (``10:00:21Z``). Keyed by the second alone, one acquisition from both became two time
    steps of identical pixels.
    """
    found: dict[S2Item, str] = {}
    timed = sorted((i for i in items if i.second is not None), key=lambda i: (i.platform, i.tile, i.second, i.id))
    start: tuple[str, str, int] | None = None
    for item in timed:
        second = item.second
        assert second is not None
        if start is None or start[:2] != (item.platform, item.tile) or second - start[2] >= ONE_PASS_SECONDS:
            start = (item.platform, item.tile, second)
        found[item] = f"{item.platform}/{item.tile}/{start[2]}"
    for item in items:
        found.setdefault(item, f"{item.platform}/{item.tile}/{item.datetime}")
    return found


def parse_item(item: Mapping[str, Any], base: str | None = None) -> S2Item:
    """Read a Sentinel-2 L2A item (check :func:`is_s2_l2a` first).

    Args:
        item: The STAC item as a dict.
        base: Where the item was read from; relative asset hrefs resolve against it.

    Raises:
        ValueError: the item has no datetime, or its processing baseline is no ``NN.NN`` number.
    """
    props = item.get("properties") or {}
    when = props.get("datetime") or props.get("start_datetime")
    if not when:
        raise ValueError(f"STAC item {item.get('id')!r} has no datetime")
    baseline = baseline_of(props) or ""
    if not _BASELINE.fullmatch(baseline):
        # Strict: ESA names every baseline NN.NN, and whether it is before 04.00 decides the offset of every
        # reflectance band, so a value read any other way ("5" as 05.00) would be a guess at the pixels' meaning.
        raise ValueError(
            f"STAC item {item.get('id')!r}: its processing baseline {baseline!r} (s2:processing_baseline, processing:version) "
            "is no NN.NN number such as 05.10"
        )
    assets: dict[str, str] = {}
    for key in sorted((item.get("assets") or {}).keys()):
        band = band_for_asset(key)
        asset = item["assets"][key]
        # CDSE keeps each band at its own resolution and resampled to coarser ones (B01_20m beside
        # B01_60m): the band's own is its cube's grid; the others are copies, never read.
        if band is None or "href" not in asset or band.id in assets or asset_resolution(key) not in (None, band.resolution):
            continue
        assets[band.id] = str(asset["href"]) if base is None else join_href(base, str(asset["href"]))
    cloud = props.get("eo:cloud_cover")
    return S2Item(
        id=str(item.get("id")),
        datetime=str(when),
        tile=tile_of(props) or "",
        platform=str(props.get("platform") or props.get("constellation") or "sentinel-2").lower(),
        baseline=baseline,
        boa_offset_applied=bool(props.get("earthsearch:boa_offset_applied", False)),
        cloud_cover=None if cloud is None else float(cloud),
        processed=str(next((props[k] for k in _PROCESSED if props.get(k)), "")),
        assets=tuple(sorted(assets.items())),
    )


def _names_safe_products(item: S2Item) -> bool:
    """Whether every asset of the item lies in a SAFE product its href names (Planetary Computer's and CDSE's do)."""
    return bool(item.assets) and all((p := product_of(href)) is not None and p.one_pass for _, href in item.assets)


def keep_newest(items: Iterable[S2Item]) -> tuple[list[S2Item], list[S2Item]]:
    """Keep the newest processing of each datatake; return ``(kept, dropped)``, each sorted by time then id.

    Of the newest baseline, every item whose files name SAFE products is
    kept (the parts of a datatake, for planning to mosaic); of other items,
    the latest generation, then the greatest id.
    """
    every = list(items)
    by_datatake: dict[str, list[S2Item]] = defaultdict(list)
    for item, datatake in datatakes(every).items():
        by_datatake[datatake].append(item)
    kept: list[S2Item] = []
    for group in by_datatake.values():
        top = max(_baseline(i.baseline) for i in group)
        newest = [i for i in group if _baseline(i.baseline) == top]
        kept += dict.fromkeys(newest) if all(_names_safe_products(i) for i in newest) else [max(newest, key=lambda i: (i.processed, i.id))]
    held = set(kept)
    return sorted(kept, key=lambda i: (i.datetime, i.id)), sorted((i for i in every if i not in held), key=lambda i: (i.datetime, i.id))


def filter_items(items: Iterable[S2Item], *, tiles: Sequence[str] = (), max_cloud: float | None = None) -> list[S2Item]:
    """The items on one of ``tiles`` (all when empty) with ``eo:cloud_cover`` at most ``max_cloud`` (unknown cover passes)."""
    wanted = {t.upper().removeprefix("T") for t in tiles}
    return [
        i for i in items if (not wanted or i.tile in wanted) and (max_cloud is None or i.cloud_cover is None or i.cloud_cover <= max_cloud)
    ]


def _on_10m(href: str, band: S2Band) -> str:
    factor = band.resolution // 10
    if factor == 1:
        return href
    return f"vrt://{gdal_path(href)}?outsize={factor * 100}%,{factor * 100}%&r=nearest"


def resolution_group(band: S2Band, resolution: int | None) -> str:
    """The group a band's cube belongs to: its own (``10m``, ``20m``, ``60m``, ``scl``), or ``all10m`` with ``resolution=10``.

    >>> from pipelines.sentinel2.bands import BANDS
    >>> resolution_group(BANDS["B05"], None), resolution_group(BANDS["B05"], 10), resolution_group(BANDS["SCL"], 10)
    ('20m', 'all10m', 'scl')
    """
    return band.group if resolution is None or band.group == "scl" else f"all{resolution}m"


def scene_refs(
    items: Iterable[S2Item], bands: Sequence[S2Band], *, resolution: int | None = None, dropped: Iterable[S2Item] = ()
) -> list[SceneRef]:
    """The scene references of the selected bands of every item.

    Args:
        items: Kept items (see :func:`keep_newest`).
        bands: Bands to convert.
        resolution: None for one cube per resolution group (SCL on its 20 m
            grid), or 10 to put every band on the 10 m grid (SCL stays a cube
            of its own, nearest-neighbour like every band).
        dropped: Older processings :func:`keep_newest` left out: each band's
            files in them are recorded as replaced (:attr:`ProductBand.replaces`),
            so that the cube lists them as dropped, as it lists files planning drops.
    """
    items, dropped = list(items), list(dropped)
    taken = datatakes([*items, *dropped])
    older: dict[str, list[S2Item]] = defaultdict(list)
    for item in dropped:
        older[taken[item]].append(item)
    refs: list[SceneRef] = []
    for item in items:
        hrefs = dict(item.assets)
        for band in bands:
            href = hrefs.get(band.id)
            if href is None:
                continue
            scale, offset = radiometry(band, item.baseline, boa_offset_applied=item.boa_offset_applied)
            group = resolution_group(band, resolution)
            family = f"S2L2A_T{item.tile}_{group}" + ("_o1000" if offset != 0 else "")
            tags = (
                ("constellation", "sentinel-2"),
                ("s2:mgrs_tile", item.tile),
                ("s2:resolution_group", group),
                ("s2:platforms", item.platform),
                ("s2:processing_baselines", item.baseline),
                ("s2:offset_split_at_baseline", "04.00"),
            )
            text = band_text(band)
            replaces = tuple(sorted(h for o in older[taken[item]] if (h := dict(o.assets).get(band.id)) is not None))
            product = ProductBand(text, scale, offset, 0.0, family, tags, replaces, categorical=band.group == "scl")
            source = href if resolution is None else _on_10m(href, band)
            refs.append(SceneRef(source, item.datetime, f"{item.id}#{group}", (text,), product))
    return refs
