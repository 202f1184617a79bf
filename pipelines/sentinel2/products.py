"""Sentinel-2 product names: which datatake a file holds, and which processing of it.

A datatake (one platform's pass over one MGRS tile at one sensing time) may
be processed more than once: ESA reprocesses its archive with a newer
processing baseline, and distributors publish a corrected product beside the
first. Each processing is a product of its own, with a name that says which
datatake it holds and which processing it is:

* a SAFE product (Level-1C or Level-2A) names its platform, level, sensing
  start, processing baseline, relative orbit, tile and generation time:
  ``S2A_MSIL2A_20240103T103421_N0511_R051_T32ULC_20240610T090000.SAFE``. The
  newer processing has the higher baseline (``N0511`` is 05.11), then the
  later generation time. Products of one baseline that differ in generation
  time alone are not reprocessings of each other: ESA cuts a datatake's tile
  into two such products where it spans two datastrips, each covering a part
  of the tile, so both are kept (:attr:`S2Product.version`).
* a SAFE product of the format before December 2016 held several tiles; its
  name gives the sensing start (``..._R116_V20160117T002243_...``), each
  granule's the tile, baseline and generation time
  (``S2A_OPER_MSI_L1C_TL_SGS__20160117T051155_A002973_T55KES_N02.01``).
* an Earth Search (element84) COG folder or item names its platform, tile,
  sensing date, a sequence number and its level: ``S2A_31UGT_20240315_1_L2A``.
  The newer processing has the higher sequence number, compared as a number
  (10 after 9). The number also counts the images of a tile on one day,
  which at high latitudes, where orbits overlap, may be two passes: such a
  datatake is not surely one pass (:attr:`S2Product.one_pass`).

:func:`product_of` reads that from any path or URL of a product's files (the
product's folder or item name in it), the way
:func:`pipelines.sentinel2.items.keep_newest` reads it from a STAC item's
properties. Names of other forms, and a SAFE's granule file names alone
(``T32ULC_20240103T103421_B02_10m.tif``), say nothing of the processing.

>>> old = product_of("S2A_31UGT_20240315_9_L2A/B02.tif")
>>> new = product_of("https://host/sentinel-s2-l2a-cogs/31/U/GT/2024/3/S2A_31UGT_20240315_10_L2A/B02.tif")
>>> old.datatake == new.datatake and new.processing > old.processing
True
>>> product_of("S2A_MSIL2A_20240103T103421_N0510_R051_T32ULC_20240103T122345.SAFE/GRANULE/x/IMG_DATA/R10m/B02.tif").processing
(5, 10, 20240103122345)
>>> product_of("scene_20240103_B02.tif") is None
True
>>> granule = "S2A_OPER_MSI_L1C_TL_SGS__20160117T051155_A002973_T55KES_N02.01"
>>> product_of(f"S2A_OPER_PRD_MSIL1C_PDMC_20160119T013846_R116_V20160117T002243_20160117T002334.SAFE/GRANULE/{granule}/IMG_DATA/x.jp2")[1:]
(('SAFE', 'S2A', 'L1C', 'T55KES', '20160117T002243', 'R116'), (2, 1, 20160117051155), True)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, NamedTuple

from pipelines.planning.hrefs import href_path

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["S2Product", "newest_versions", "product_of", "product_tags"]

_NOT_AFTER_ALNUM: Final = r"(?<![A-Za-z0-9])"
_NOT_BEFORE_ALNUM: Final = r"(?![A-Za-z0-9])"

_SAFE: Final = re.compile(
    _NOT_AFTER_ALNUM + r"(?P<name>(?P<platform>S2[A-D])_MSI(?P<level>L1C|L2A)_(?P<sensing>\d{8}T\d{6})_N(?P<major>\d{2})(?P<minor>\d{2})"
    r"_(?P<orbit>R\d{3})_(?P<tile>T\d{2}[A-Z]{3})_(?P<generated>\d{8})T(?P<generated_time>\d{6})(?:\.SAFE)?)" + _NOT_BEFORE_ALNUM,
    re.IGNORECASE,
)
"""A SAFE product's name (``S2A_MSIL2A_<sensing>_N0511_R051_T32ULC_<generation>``, with ``.SAFE`` when its folder's)."""

_OLD_SAFE: Final = re.compile(
    _NOT_AFTER_ALNUM + r"(?P<platform>S2[A-D])_OPER_PRD_MSI(?P<level>L1C|L2A)_[A-Z0-9_]{4}_\d{8}T\d{6}_(?P<orbit>R\d{3})"
    r"_V(?P<sensing>\d{8}T\d{6})_\d{8}T\d{6}(?:\.SAFE)?/GRANULE/(?P<name>S2[A-D]_OPER_MSI_(?:L1C|L2A)_TL_[A-Z0-9_]{4}_(?P<generated>\d{8})T(?P<generated_time>\d{6})"
    r"_A\d{6}_(?P<tile>T\d{2}[A-Z]{3})_N(?P<major>\d{2})\.(?P<minor>\d{2}))" + _NOT_BEFORE_ALNUM,
    re.IGNORECASE,
)
"""A granule of a SAFE product of the format before December 2016, which held several tiles: the product names the
platform, level, orbit and sensing start (``V...``), the granule its generation time, tile and baseline."""

_EARTH_SEARCH: Final = re.compile(
    _NOT_AFTER_ALNUM
    + r"(?P<name>(?P<platform>S2[A-D])_(?P<tile>\d{2}[A-Z]{3})_(?P<date>\d{8})_(?P<sequence>\d+)_(?P<level>L1C|L2A))"
    + _NOT_BEFORE_ALNUM,
    re.IGNORECASE,
)
"""An Earth Search COG folder's or item's name (``S2A_31UGT_20240315_0_L2A``), as
:data:`pipelines.planning.timestamps.SCENE_ID_PATTERNS` dates it."""


class S2Product(NamedTuple):
    """The product a file belongs to, as its path names it."""

    name: str
    """The product's folder or item name: ``S2A_MSIL2A_..._20240610T090000.SAFE``, ``S2A_31UGT_20240315_1_L2A``."""
    datatake: tuple[str, ...]
    """What every processing of one datatake shares, in one naming: the naming, platform, level, tile and sensing
    time (SAFE, with its relative orbit) or date (Earth Search). Names of the two forms never share one, since their
    processings cannot be compared."""
    processing: tuple[int, ...]
    """Orders the processings of one datatake, the newest greatest: ``(baseline major, minor, generation time as
    YYYYMMDDhhmmss)`` of a SAFE, ``(sequence number,)`` of an Earth Search item."""
    one_pass: bool
    """Whether products of one :attr:`datatake` are surely processings of one pass (a SAFE's, named to the sensing
    second and orbit), not possibly two passes of one day (an Earth Search item's date and number)."""

    @property
    def version(self) -> tuple[int, ...]:
        """What a newer processing replaces: a SAFE's baseline ``(major, minor)``, an Earth Search item's number.

        SAFE products of one datatake and baseline are parts of one processing
        (or a regeneration of it): they are mosaicked, the latest generation's
        pixels first, never dropped for each other.

        >>> product_of("S2A_MSIL2A_20190305T101021_N0207_R022_T32SMJ_20190305T153109.SAFE").version
        (2, 7)
        """
        return self.processing[:2] if self.one_pass else self.processing


def product_of(href: str) -> S2Product | None:
    """The Sentinel-2 product a path or URL names, or None.

    The innermost name counts (the last in the path), so a SAFE inside an
    archive of its own name, or a folder in a bucket's tree, names one product.
    """
    path = href_path(href)
    found = [m for pattern in (_SAFE, _OLD_SAFE, _EARTH_SEARCH) for m in pattern.finditer(path)]
    if not found:
        return None
    last = max(found, key=lambda m: m.end())
    parts = {key: value.upper() for key, value in last.groupdict().items() if value is not None}
    datatake: tuple[str, ...]
    processing: tuple[int, ...]
    if last.re is _EARTH_SEARCH:
        datatake = ("Earth Search", parts["platform"], parts["level"], parts["tile"], parts["date"])
        processing = (int(parts["sequence"]),)
    else:
        # The two SAFE formats name one datatake alike, so that a product of either is a processing of the other's.
        datatake = ("SAFE", parts["platform"], parts["level"], parts["tile"], parts["sensing"], parts["orbit"])
        processing = (int(parts["major"]), int(parts["minor"]), int(parts["generated"] + parts["generated_time"]))
    return S2Product(last.group("name"), datatake, processing, last.re is not _EARTH_SEARCH)


def product_tags(href: str) -> tuple[tuple[str, str], ...]:
    """What the name of a file's Sentinel-2 product says of it, as the STAC route's cubes state it; none for other files.

    >>> product_tags("S2B_MSIL2A_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE/GRANULE/g/IMG_DATA/R10m/B04.jp2")
    (('constellation', 'sentinel-2'), ('s2:mgrs_tile', '33UUU'), ('s2:platforms', 'sentinel-2b'), ('s2:processing_baselines', '05.09'))
    """
    product = product_of(href)
    if product is None:
        return ()
    naming, platform, _, tile = product.datatake[:4]
    tags = [("constellation", "sentinel-2"), ("s2:mgrs_tile", tile.removeprefix("T")), ("s2:platforms", f"sentinel-{platform[1:].lower()}")]
    if naming == "SAFE":
        tags.append(("s2:processing_baselines", "{:02d}.{:02d}".format(*product.version)))
    return tuple(tags)


def newest_versions(products: Iterable[S2Product | None]) -> dict[tuple[str, ...], tuple[int, ...]]:
    """The newest :attr:`~S2Product.version` of each :attr:`~S2Product.datatake` among ``products`` (None counts for none)."""
    newest: dict[tuple[str, ...], tuple[int, ...]] = {}
    for product in products:
        if product is not None and product.version > newest.get(product.datatake, ()):
            newest[product.datatake] = product.version
    return newest
