"""Radiometry and band names of the files of a Sentinel-2 SAFE product, from its product metadata and file names.

A Level-1C or Level-2A product stores reflectance as integers,
``reflectance = (DN + offset) / quantification``: the quantification value
(10000) and, from processing baseline 04.00, a per-band additive offset
(-1000) are in the product's ``MTD_MSIL1C.xml`` or ``MTD_MSIL2A.xml`` at the
root of the ``.SAFE`` folder, not in its JP2 files. A cube of those files
would record scale 1 and offset 0, and a series across baseline 04.00 would
mix two meanings of one DN. :func:`file_radiometry` gives a file in
``IMG_DATA`` the ``(scale, offset, unit)`` its product declares: 1 /
quantification and offset / quantification for the spectral bands, 1 /
quantification for Level-2A's aerosol optical thickness (``AOT``) and water
vapour (``WVP``, in cm). Planning then splits a series where they change
(:class:`pipelines.planning.grouping.CubeKey`). Files outside ``IMG_DATA``
(the masks of ``QI_DATA``, which carry the bands' tokens) and products
without a metadata file keep what their files say. The JP2s have no band
descriptions: :func:`file_band_texts` names their bands from the band table
and the files' names. Nor do they state a nodata value: the product declares
DN 0 ``NODATA`` in its ``Special_Values``, for every image of the granule
(:func:`file_nodata`), as a STAC item's bands state it.

>>> product_radiometry(_EXAMPLE)["B8A"], product_radiometry(_EXAMPLE)["WVP"]
((0.0001, -0.1, None), (0.001, 0.0, 'cm'))
>>> product_nodata(_EXAMPLE)
0.0
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

from pipelines.planning.hrefs import href_path
from pipelines.sentinel2.bands import BANDS, band_text
from pipelines.sentinel2.items import radiometry
from pipelines.sidecars import MetadataError, parsed_sidecar

if TYPE_CHECKING:
    from collections.abc import Callable

    from pipelines.planning.scene import Radiometry

__all__ = ["NODATA", "file_band_texts", "file_nodata", "file_radiometry", "holds_classes", "product_nodata", "product_radiometry"]

T = TypeVar("T")

_METADATA_NAMES: Final = ("MTD_MSIL2A.xml", "MTD_MSIL1C.xml")
"""The product metadata file at the root of a Level-2A or Level-1C SAFE."""

_BAND_IDS: Final = ("B01", "B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B09", "B10", "B11", "B12")
"""Bands by ``band_id``, as every product's ``Spectral_Information_List`` numbers them, named as the image files
and the band table (:data:`pipelines.sentinel2.bands.BANDS`) name them."""

_EXAMPLE: Final = """<n1:Level-2A_User_Product xmlns:n1="https://psd-14.sentinel2.eo.esa.int/PSD/User_Product_Level-2A.xsd">
<n1:General_Info><Product_Image_Characteristics><QUANTIFICATION_VALUES_LIST>
<BOA_QUANTIFICATION_VALUE unit="none">10000</BOA_QUANTIFICATION_VALUE>
<AOT_QUANTIFICATION_VALUE unit="none">1000.0</AOT_QUANTIFICATION_VALUE>
<WVP_QUANTIFICATION_VALUE unit="cm">1000.0</WVP_QUANTIFICATION_VALUE>
</QUANTIFICATION_VALUES_LIST><BOA_ADD_OFFSET_VALUES_LIST><BOA_ADD_OFFSET band_id="8">-1000</BOA_ADD_OFFSET>
</BOA_ADD_OFFSET_VALUES_LIST><Special_Values><SPECIAL_VALUE_TEXT>NODATA</SPECIAL_VALUE_TEXT>
<SPECIAL_VALUE_INDEX>0</SPECIAL_VALUE_INDEX></Special_Values><Special_Values><SPECIAL_VALUE_TEXT>SATURATED</SPECIAL_VALUE_TEXT>
<SPECIAL_VALUE_INDEX>65535</SPECIAL_VALUE_INDEX></Special_Values>
</Product_Image_Characteristics></n1:General_Info></n1:Level-2A_User_Product>"""

NODATA: Final = 0.0
"""The DN of no data in every image of a SAFE product: what ``Special_Values`` declares in products of every baseline,
and what a product whose metadata file is absent or declares none is taken to hold."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _number(element: ET.Element, what: str) -> float:
    try:
        return float((element.text or "").strip())
    except ValueError:
        raise MetadataError(f"{what} is {element.text!r}, not a number") from None


def _root(text: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as err:
        raise MetadataError(f"not XML: {err}") from err


def product_nodata(text: str) -> float | None:
    """The ``NODATA`` special value a product metadata document declares, or None where it declares none.

    Raises:
        MetadataError: the document is no XML, or its ``NODATA`` index is not a number.
    """
    for element in _root(text).iter():
        if _local(element.tag) == "Special_Values":
            fields = {_local(child.tag): child for child in element}
            kind, index = fields.get("SPECIAL_VALUE_TEXT"), fields.get("SPECIAL_VALUE_INDEX")
            if kind is not None and (kind.text or "").strip() == "NODATA" and index is not None:
                return _number(index, "the NODATA SPECIAL_VALUE_INDEX")
    return None


def product_radiometry(text: str) -> dict[str, Radiometry]:
    """``(scale, offset, unit)`` by band (``B02``, ``B8A``, ``AOT``, ``WVP``) from a product metadata document.

    Raises:
        MetadataError: the document is no XML, or declares no quantification value.
    """
    root = _root(text)
    quantification: dict[str, float] = {}
    offsets: dict[int, float] = {}
    for element in root.iter():
        name = _local(element.tag)
        if name in ("BOA_QUANTIFICATION_VALUE", "QUANTIFICATION_VALUE", "AOT_QUANTIFICATION_VALUE", "WVP_QUANTIFICATION_VALUE"):
            quantification[name.split("_", 1)[0] if name.startswith(("AOT", "WVP")) else "reflectance"] = _number(element, name)
        elif name in ("BOA_ADD_OFFSET", "RADIO_ADD_OFFSET"):
            band_id = element.get("band_id", "")
            if not band_id.isdigit() or int(band_id) >= len(_BAND_IDS):
                raise MetadataError(f"{name} has band_id {band_id!r}, not one of 0..{len(_BAND_IDS) - 1}")
            offsets[int(band_id)] = _number(element, name)
    if "reflectance" not in quantification:
        raise MetadataError("no BOA_QUANTIFICATION_VALUE or QUANTIFICATION_VALUE")
    if any(value <= 0 for value in quantification.values()):
        raise MetadataError(f"a quantification value is not positive: {quantification}")
    scale = quantification["reflectance"]
    out: dict[str, Radiometry] = {band: (1 / scale, offsets.get(i, 0.0) / scale, None) for i, band in enumerate(_BAND_IDS)}
    for band, unit in (("AOT", None), ("WVP", "cm")):
        if band in quantification:
            out[band] = (1 / quantification[band], 0.0, unit)
    return out


_GRANULE_FILE: Final = re.compile(
    r"^(?P<root>.*(?:\.SAFE|/S2[A-D]_MSIL(?:1C|2A)_[^/]*))/GRANULE/[^/]+/(?P<folder>IMG_DATA|QI_DATA)/(?:R\d+m/)?(?P<stem>[^/]+)\.(?:jp2|tiff?)$",
    re.IGNORECASE,
)
"""A file of a SAFE product's granule (a path or ``gs://`` URL): its product folder, an image or a mask or preview of ``QI_DATA``.

JP2 as ESA writes it, or GeoTIFF where the images were converted in place
(to COGs, say): the product's metadata says what their values mean either way.
The folder is a ``.SAFE``, or one that names its product without the suffix
(as some tools re-zip a download).
"""

_TILE_TIME: Final = re.compile(r"^(?:L[12][AC]_)?T\d{2}[A-Z]{3}_\d{8}T\d{6}_")
"""The ``T33UUU_20230612T102031_`` that starts the name of a granule's images and preview."""

_LEVEL_1C: Final = re.compile(r"MSIL1C[^/]*$", re.IGNORECASE)
"""A Level-1C product's folder (``S2B_MSIL1C_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE``)."""

_PRODUCT_BASELINE: Final = re.compile(r"S2[A-D]_MSIL(?:2A|1C)_\d{8}T\d{6}_N(?P<major>\d{2})(?P<minor>\d{2})_[^/]*$", re.IGNORECASE)
"""The processing baseline in a SAFE product's name (``_N0509_`` is 05.09)."""

_L2A_AUXILIARY: Final[dict[str, Radiometry]] = {"AOT": (0.001, 0.0, None), "WVP": (0.001, 0.0, "cm")}
"""Level-2A's aerosol optical thickness and water vapour, by name: every processing baseline's metadata declares
``AOT_QUANTIFICATION_VALUE`` and ``WVP_QUANTIFICATION_VALUE`` 1000 (WVP in cm), with no offset."""

_TOP_OF_ATMOSPHERE: Final = ", top-of-atmosphere reflectance (L1C)"
"""What a Level-1C image's band text adds to the band table's."""

_RESOLUTION: Final = re.compile(r"_(?P<metres>\d+)m$")
_RESOLUTION_FOLDER: Final = re.compile(r"/R(?P<metres>\d+)m/[^/]+$", re.IGNORECASE)
"""The ``_10m`` that ends the name of a Level-2A image or probability mask."""

_TABLE_BAND: Final = re.compile(r"(?:^|_)(?P<band>B(?:0[1-9]|1[0-2]|8A)|AOT|WVP|SCL)$")
"""A band of the band table, or AOT or WVP, at the end of a file's name once its resolution is cut."""


class _GranuleFile(NamedTuple):
    root: str
    """The ``.SAFE`` folder."""
    in_images: bool
    """Whether the file is in ``IMG_DATA`` (else ``QI_DATA``)."""
    name: str
    """The file's name without the tile, time and resolution (``B04``, ``TCI``, ``MSK_DETFOO_B02``)."""
    band: str | None
    """The band its name ends in (``B04``, ``AOT``, ``SCL``), or None."""
    resolution: int | None
    """The metres of its grid its name or folder states (``_20m``, ``R20m``), or None (a Level-1C image)."""


def _granule_file(href: str) -> _GranuleFile | None:
    """What the path of an image in a SAFE product's granule says of it, or None for any other file."""
    found = _GRANULE_FILE.match(href_path(href))
    if found is None:
        return None
    stem = _TILE_TIME.sub("", found.group("stem"))
    name = _RESOLUTION.sub("", stem)
    band = _TABLE_BAND.search(name)
    stated = _RESOLUTION.search(stem) or _RESOLUTION_FOLDER.search(href_path(href))
    resolution = int(stated.group("metres")) if stated else None
    in_images = found.group("folder").upper() == "IMG_DATA"
    return _GranuleFile(found.group("root"), in_images, name, band.group("band") if band else None, resolution)


def file_band_texts(href: str, count: int) -> tuple[str, ...] | None:
    """The band texts of a file of a SAFE product's granule with ``count`` bands, or None where its name says them.

    - An image of the band table is named as the STAC route names it
      (:func:`pipelines.sentinel2.bands.band_text`): ``T33UUU_<time>_B04_10m.jp2``
      is ``B04, red, 664.6nm (S2A) / ...``, and the catalogue reads its common
      name and wavelength, so ``--bands red`` selects it. A Level-1C image's
      text ends in ``, top-of-atmosphere reflectance (L1C)``. ESA's copy of a
      band on a coarser grid is ``B04 at 60 m, resampled by ESA from 10 m``,
      no common name: the STAC route converts none of them.
    - A mask of ``QI_DATA`` that ends in the band it describes
      (``MSK_DETFOO_B02``) is named in full, never as that band.
    - A file of several bands is named without the tile, time and
      resolution, and its bands numbered: ``TCI 1`` to ``TCI 3``,
      ``MSK_QUALIT_B02 1`` to ``8``. Three-band files of one grid and time
      (the 60 m ``TCI``, ``MSK_CLASSI_B00``) are so told apart.
    - Any other single-band file (``AOT``, ``MSK_CLDPRB_20m``) is None: its
      name is what names it (:func:`pipelines.planning.grouping.name_quantities`).

    >>> file_band_texts("x.SAFE/GRANULE/g/IMG_DATA/R10m/T33UUU_20230612T102031_B04_10m.jp2", 1)
    ('B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C)',)
    >>> file_band_texts("x.SAFE/GRANULE/g/IMG_DATA/R10m/T33UUU_20230612T102031_B04_10m.tif", 1)  # converted in place
    ('B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C)',)
    >>> file_band_texts("x.SAFE/GRANULE/g/IMG_DATA/R60m/T33UUU_20230612T102031_B04_60m.jp2", 1)  # ESA's copy
    ('B04 at 60 m, resampled by ESA from 10 m',)
    >>> file_band_texts("x.SAFE/GRANULE/g/IMG_DATA/R60m/T33UUU_20230612T102031_TCI_60m.jp2", 3)
    ('TCI 1', 'TCI 2', 'TCI 3')
    >>> file_band_texts("x.SAFE/GRANULE/g/QI_DATA/MSK_DETFOO_B02.jp2", 1), file_band_texts("x.SAFE/GRANULE/g/QI_DATA/MSK_CLDPRB_20m.jp2", 1)
    (('MSK_DETFOO_B02',), None)
    >>> file_band_texts("S2B_MSIL1C_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE/GRANULE/g/IMG_DATA/B04.jp2", 1)
    ('B04, red, 664.6nm (S2A) / 664.9nm (S2B) / 665nm (S2C), top-of-atmosphere reflectance (L1C)',)
    """
    found = _granule_file(href)
    if found is None:
        return None
    if count > 1:
        return tuple(f"{found.name} {i}" for i in range(1, count + 1))
    if found.band is None:
        return None
    if not found.in_images:
        return (found.name,)
    table = BANDS.get(found.band)
    if table is None:
        return None
    if found.resolution is not None and found.resolution != table.resolution:
        # ESA's copy of a band on a coarser grid (B02 in R20m and R60m, SCL in R60m): named for what it is, so that
        # a search or load of "blue" takes the band on its own grid, never a copy of it as well, in whichever order.
        return (f"{table.id} at {found.resolution} m, resampled by ESA from {table.resolution} m",)
    # The band table describes Level-2A's surface reflectance; a Level-1C image holds the same band at the top
    # of the atmosphere. Its text says so, which also keeps the two levels out of one cube (planning groups
    # scenes by their band texts).
    return (band_text(table) + (_TOP_OF_ATMOSPHERE if _LEVEL_1C.search(found.root) else ""),)


_OLD_PRODUCT: Final = re.compile(r"(?P<platform>S2[A-D])_OPER_PRD_MSI(?P<level>L1C|L2A)_(?P<rest>[^/]+?)(?:\.SAFE)?$", re.IGNORECASE)
"""A product folder of the format before December 2016, whose metadata file is named after it
(``S2A_OPER_PRD_MSIL1C_PDMC_...SAFE`` holds ``S2A_OPER_MTD_SAFL1C_PDMC_....xml``)."""


def _metadata_paths(root: str) -> list[str]:
    """Where a product folder's metadata file may be: ``MTD_MSIL2A.xml`` or ``MTD_MSIL1C.xml``, or the older format's name."""
    paths = [f"{root}/{name}" for name in _METADATA_NAMES]
    old = _OLD_PRODUCT.search(root)
    if old is not None:
        paths.append(f"{root}/{old['platform']}_OPER_MTD_SAF{old['level']}_{old['rest']}.xml")
    return paths


def file_radiometry(href: str) -> Radiometry | None:
    """``(scale, offset, unit)`` of an image file of a SAFE product, or None where the product says nothing.

    Local folders and archives, ``gs://`` and ``http(s)://`` (Google's public
    Sentinel-2 bucket keeps SAFE folders, reachable either way) are read
    (:func:`pipelines.sidecars.read_sidecar`).

    Raises:
        MetadataError: the product's metadata file exists but cannot be read.
    """
    said = _product_says(href, product_radiometry)
    if said is None:
        return None
    root, band, declared = said
    return _radiometry_by_name(root, band) if declared is None else declared.get(band)


def holds_classes(href: str) -> bool:
    """Whether an image of a SAFE product's granule holds classes rather than measurements: the scene classification
    (``SCL``) or a mask of ``QI_DATA`` (``MSK_CLDPRB`` excepted, a probability), which a reader must never interpolate.

    >>> granule = "S2B_MSIL2A_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE/GRANULE/L2A_T33UUU_A1"
    >>> holds_classes(f"{granule}/IMG_DATA/R20m/T33UUU_20230622T102031_SCL_20m.jp2")
    True
    >>> holds_classes(f"{granule}/IMG_DATA/R20m/T33UUU_20230622T102031_B05_20m.jp2"), holds_classes(f"{granule}/QI_DATA/MSK_CLDPRB_20m.jp2")
    (False, False)
    >>> holds_classes(f"{granule}/QI_DATA/MSK_CLASSI_B00.jp2")
    True
    """
    found = _granule_file(href)
    if found is None:
        return False
    if found.in_images:
        return found.band == "SCL"
    return found.name.upper().startswith("MSK_") and not found.name.upper().startswith(("MSK_CLDPRB", "MSK_SNWPRB"))


def file_nodata(href: str) -> float | None:
    """The nodata value of a single-band image of a SAFE product (a band, ``AOT``, ``WVP``, ``SCL``), or None for other files.

    Its product's declared ``NODATA``, or :data:`NODATA` when the metadata
    file is absent or declares none, as for a product named by its baseline
    alone (:func:`_radiometry_by_name`).

    Raises:
        MetadataError: the product's metadata file exists but cannot be read.
    """
    said = _product_says(href, product_nodata)
    if said is None:
        return None
    return NODATA if said[2] is None else said[2]


def _product_says(href: str, parse: Callable[[str], T]) -> tuple[str, str, T | None] | None:
    """``(product folder, band, parse of its metadata file)`` of a band image of a SAFE's granule; the last None where there is none.

    None for any other file.

    Raises:
        MetadataError: the product's metadata file exists but cannot be read.
    """
    found = _granule_file(href)
    if found is None or not found.in_images or found.band is None:
        return None
    read = parsed_sidecar(_metadata_paths(found.root), parse)
    return found.root, found.band, None if read is None else read[1]


def _radiometry_by_name(root: str, band_id: str) -> Radiometry | None:
    """A band's ``(scale, offset, unit)`` from the processing baseline in its product's name, when no metadata file can be read.

    A SAFE copied without its ``MTD_MSIL2A.xml``, or one in a bucket whose metadata
    file answers 403, still names its baseline (``_N0509_``), and the baseline fixes
    the radiometry as it does for a STAC item (:func:`pipelines.sentinel2.items.radiometry`):
    quantification 10000 and, from 04.00, offset -1000; Level-2A's ``AOT`` and ``WVP``
    1000 (:data:`_L2A_AUXILIARY`).

    >>> _radiometry_by_name("S2B_MSIL2A_20230622T102031_N0509_R065_T33UUU_20230622T123904.SAFE", "B04")
    (0.0001, -0.1, None)
    >>> _radiometry_by_name("S2B_MSIL2A_20190622T102031_N0212_R065_T33UUU_20190622T123904.SAFE", "B04")
    (0.0001, 0.0, None)
    >>> _radiometry_by_name("S2B_MSIL2A_20190622T102031_N0212_R065_T33UUU_20190622T123904.SAFE", "WVP")
    (0.001, 0.0, 'cm')
    """
    named = _PRODUCT_BASELINE.search(root)
    if named is not None and band_id in _L2A_AUXILIARY:
        return _L2A_AUXILIARY[band_id]
    band = BANDS.get(band_id)
    if named is None or band is None or band.group == "scl":
        return None
    scale, offset = radiometry(band, f"{named['major']}.{named['minor']}", boa_offset_applied=False)
    return scale, offset, None
