"""An input's CRS as a rumi file can store it: one EPSG code of a 2D geographic or projected CRS.

rumi stores the CRS as GeoTIFF's ``GeographicTypeGeoKey`` or
``ProjectedCSTypeGeoKey`` does (specification, "Georeferencing"): one EPSG
code of a 2D CRS, no other representation. A DEM's CRS is often compound,
its horizontal CRS plus the vertical one its heights are above (the
Copernicus DEM's WGS 84 + EGM2008 height, EPSG:9518; a national DEM's ETRS89
/ UTM 32N + DHHN2016 height, which has no code of its own), as GeoTIFF's
``VerticalCSTypeGeoKey`` adds it; or 3D geographic, WGS 84 with
ellipsoidal heights (EPSG:4979). The grid takes the horizontal CRS, and the
vertical one is recorded beside the cube (:data:`~catalog.extension.VERTICAL_CRS`): it says
what the values mean, so scenes above different ones never share a cube.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pipelines.errors import PipelineError

if TYPE_CHECKING:
    from rasterio.crs import CRS as RasterioCRS

__all__ = ["check_proj_database", "closest_epsg", "horizontal_crs", "is_engineering"]


def check_proj_database() -> None:
    """Fail when GDAL's PROJ cannot read its EPSG database, naming why.

    Every scene's CRS is looked up there. A ``PROJ_DATA`` (or ``PROJ_LIB``)
    that points at another PROJ installation's data, a common mix of conda and
    pip installs, makes each lookup fail: every scene would be a
    ``crs-not-epsg`` dead letter advising a warp to the code it already has.

    Raises:
        PipelineError: the database cannot be read; the message holds PROJ's reason.
    """
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    try:
        CRS.from_epsg(4326)
    except CRSError as err:
        raise PipelineError(
            f"GDAL's PROJ cannot read its EPSG database ({err}); PROJ_DATA or PROJ_LIB may name another PROJ "
            "installation's data: unset it, or point it at the data of the PROJ this GDAL was built with"
        ) from err


def horizontal_crs(crs: RasterioCRS) -> tuple[int | None, str | None, str]:
    """``(EPSG code, vertical CRS, WKT)`` of the horizontal part of ``crs``.

    The code is None where the horizontal CRS has none. The vertical CRS is
    ``"AUTHORITY:code"``, or its name where it has no code, and None for a 2D
    CRS. The WKT is the horizontal CRS's, for advice on a CRS without a code.
    """
    wkt = crs.to_wkt()
    if wkt.startswith(("COMPD_CS", "COMPOUNDCRS")):
        return _compound(wkt)
    code = crs.to_epsg()
    if code is not None and _is_geographic_3d(int(code)):
        return _geographic_2d(int(code)), f"EPSG:{code}", wkt
    return code, None, wkt


@functools.lru_cache(maxsize=64)
def _compound(wkt: str) -> tuple[int | None, str | None, str]:
    """:func:`horizontal_crs` of a compound CRS, by its WKT."""
    from pyproj import CRS
    from rasterio.crs import CRS as RasterioCRS

    parts = CRS.from_wkt(wkt).sub_crs_list
    horizontal = RasterioCRS.from_wkt(parts[0].to_wkt())
    vertical = [part for part in parts[1:] if part.is_vertical]
    authority = vertical[0].to_authority() if vertical else None
    text = ":".join(authority) if authority else (vertical[0].name if vertical else None)
    return horizontal.to_epsg(), text, horizontal.to_wkt()


@functools.lru_cache(maxsize=64)
def _is_geographic_3d(code: int) -> bool:
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        return CRS.from_epsg(code).type_name == "Geographic 3D CRS"
    except CRSError:
        return False


def _geographic_2d(code: int) -> int | None:
    """The EPSG code of the 2D geographic CRS of the 3D one ``code`` (EPSG:4326 of EPSG:4979)."""
    from pyproj import CRS

    found = CRS.from_epsg(code).to_2d().to_epsg()
    return None if found is None else int(found)


def closest_epsg(wkt: str) -> int | None:
    """The EPSG code PROJ finds most like a CRS that has none, for the advice of a ``crs-not-epsg`` dead letter.

    GDAL's EPSG identification (``CRS.to_epsg``) needs an equivalent
    definition; below that, PROJ still ranks candidates (at confidence 20 it
    finds EPSG:3035 for a LAEA Europe whose datum is written as "unknown,
    based on GRS80"). Offered as the target of a warp, never assigned: the
    file's own CRS is not that one.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        code = CRS.from_wkt(wkt).to_epsg(min_confidence=20)
    except CRSError:
        return None
    return None if code is None else int(code)


def is_engineering(wkt: str) -> bool:
    """Whether a CRS is an engineering (local) one (``LOCAL_CS``): coordinates on a plane tied to no datum, which no warp leaves.

    >>> is_engineering('LOCAL_CS["site",UNIT["metre",1],AXIS["Easting",EAST],AXIS["Northing",NORTH]]')
    True
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        return bool(CRS.from_wkt(wkt).type_name == "Engineering CRS")
    except CRSError:
        return False
