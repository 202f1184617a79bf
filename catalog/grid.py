"""The raster grid of a cube: CRS, affine transform and shape, in STAC terms.

A :class:`Grid` is the spatial part of a rumi file: its EPSG code, its affine
transform (rasterio's coefficient order) and its ``height x width``. It is
what the projection extension publishes (``proj:code``, ``proj:shape``,
``proj:transform``, :meth:`Grid.to_dict`/:meth:`Grid.from_dict`), and it
turns geography into pixels and back:

* :meth:`Grid.footprint` gives the outline in longitude/latitude, densified
  along each edge so that a projected square becomes the right curved shape,
  and drawn as RFC 7946 (GeoJSON, which STAC items use) asks: cut in two
  along the antimeridian where it crosses it, and reaching a pole it holds;
* :meth:`Grid.window_for_bbox` gives the smallest pixel window covering a
  bounding box given in any CRS;
* :meth:`Grid.window_area_transform` gives the transform of a window's pixel
  corners, for GeoTIFF and chip output.

A PixelIsPoint raster's transform locates pixel centres; its footprint is
shifted by half a pixel so that it covers whole pixels, as GDAL does.

>>> g = Grid("EPSG:32633", (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), height=100, width=130)
>>> g.window_for_bbox((500100, 3999500, 500200, 3999900), "EPSG:32633")
((10, 50), (10, 20))
>>> Grid.from_dict(g.to_dict()) == g
True
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from affine import Affine

from catalog.errors import ItemError, SelectorError
from catalog.json_shape import fits_double

if TYPE_CHECKING:
    from collections.abc import Sequence

    import shapely
    from numpy.typing import NDArray

    from rumi_core.georef import Georeferencing
    from rumi_core.layout import Layout

__all__ = ["EPSG_CODE", "Grid", "box_in", "check_unwrapped", "epsg_code", "file_grid", "longitude_turns", "transform_bbox"]

_WGS84 = "EPSG:4326"


EPSG_CODE: Final = re.compile(r"EPSG:[0-9]+")
"""How a CRS is written: ``EPSG:`` and a code."""


def _numbers(value: Any, counts: tuple[int, ...]) -> bool:
    """Whether ``value`` is a list or tuple of ``counts`` numbers, Python's or NumPy's (pystac keeps what it is given:
    ``ds.shape``, ``ds.transform[:6]``); a bool, a text or an integer no double holds is none."""
    return (
        isinstance(value, list | tuple)
        and len(value) in counts
        and all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_) for v in value)
        and all(fits_double(v) for v in value if isinstance(v, int))
    )


@dataclass(frozen=True)
class Grid:
    """CRS, transform and shape of a raster."""

    crs: str | None
    """``"EPSG:n"``, or None for an ungeoreferenced raster."""
    transform: tuple[float, float, float, float, float, float]
    """Affine coefficients ``(a, b, c, d, e, f)``: ``x = a*col + b*row + c``, ``y = d*col + e*row + f``."""
    height: int
    """Rows (``Y``)."""
    width: int
    """Columns (``X``)."""
    pixel_is_point: bool = False
    """True when the transform locates pixel centres (GTRasterTypeGeoKey 2)."""

    def __post_init__(self) -> None:
        if self.crs is not None and (not isinstance(self.crs, str) or EPSG_CODE.fullmatch(self.crs) is None):
            raise ItemError(f"a CRS is 'EPSG:' and a code, got {self.crs!r}")
        if self.crs is not None and not _in_registry(self.crs):
            raise ItemError(f"the CRS {self.crs} is not in the EPSG registry (PROJ's database)")
        coeffs = tuple(float(v) for v in self.transform)
        if len(coeffs) != 6 or not all(math.isfinite(v) for v in coeffs):
            raise ItemError(f"a transform has six finite coefficients, got {self.transform!r}")
        a, b, _, d, e, _ = coeffs
        if a * e - b * d == 0:
            # A pixel of no area: no window of the grid has bounds, and no box a window.
            raise ItemError(f"a transform maps each pixel to an area, and {list(coeffs)} maps it to a point or a line (a*e - b*d is 0)")
        object.__setattr__(self, "transform", coeffs)
        if self.height < 1 or self.width < 1:
            raise ItemError(f"a grid has at least one row and column, got {self.height} x {self.width}")

    @classmethod
    def from_georef(cls, georef: Georeferencing, *, height: int, width: int) -> Grid:
        """Build the grid of a file from its georeferencing block."""
        a, b, c, d, e, f = georef.transform
        return cls(georef.crs, (a, b, c, d, e, f), height, width, georef.raster_type == 2)

    @property
    def affine(self) -> Affine:
        """The transform as an :class:`affine.Affine`."""
        return Affine(*self.transform)

    @property
    def area_affine(self) -> Affine:
        """The transform of pixel corners (half a pixel back for PixelIsPoint)."""
        return self.affine @ Affine.translation(-0.5, -0.5) if self.pixel_is_point else self.affine

    @property
    def epsg(self) -> int | None:
        """The EPSG code, or None."""
        return int(self.crs.split(":")[1]) if self.crs else None

    # -- STAC projection fields ------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return ``proj:code``, ``proj:shape`` and ``proj:transform`` (and ``rumi:pixel_is_point`` when set).

        ``proj:transform`` locates pixel corners, as GDAL's geotransform and
        rasterio's ``transform`` do for every raster, which is how odc-stac,
        stackstac and rio-stac read it: for a PixelIsPoint grid it is half a
        pixel back from the grid's own transform, and ``rumi:pixel_is_point``
        says the file is PixelIsPoint.
        """
        out: dict[str, Any] = {
            "proj:code": self.crs,
            "proj:shape": [self.height, self.width],
            "proj:transform": list(self.area_affine[:6]),
        }
        if self.pixel_is_point:
            out["rumi:pixel_is_point"] = True
        return out

    @classmethod
    def from_dict(cls, properties: dict[str, Any], *, centre_transform: bool = False) -> Grid:
        """Read the projection fields of item properties (:meth:`to_dict`).

        ``centre_transform``: a PixelIsPoint item's ``proj:transform`` is its
        file's own, of pixel centres, as items of the extension's v0.1.0 wrote it
        (:data:`~catalog.extension.SCHEMA_URI_V0_1`); otherwise it locates pixel corners.

        Raises:
            ItemError: ``proj:shape`` or ``proj:transform`` is missing, or not
                two integers and six numbers (as the projection extension's
                schema reads them: 64.0 is an integer, 64.5 and "64" are not).
        """
        try:
            shape, coefficients = properties["proj:shape"], properties["proj:transform"]
        except KeyError as err:
            raise ItemError(f"the item lacks a valid proj:shape and proj:transform ({err})") from err
        if not (_numbers(shape, (2,)) and all(float(v).is_integer() for v in shape)):
            raise ItemError(f"proj:shape is [rows, columns], two integers, got {shape!r}")
        if not _numbers(coefficients, (6, 9)):
            raise ItemError(f"proj:transform is six (or nine) numbers, got {coefficients!r}")
        height, width = (int(v) for v in shape)
        transform = tuple(float(v) for v in coefficients[:6])
        code = properties.get("proj:code")
        if code is None and properties.get("proj:epsg") is not None:
            code = f"EPSG:{int(properties['proj:epsg'])}"
        point = bool(properties.get("rumi:pixel_is_point", False))
        if point and not centre_transform and len(transform) == 6:
            transform = tuple((Affine(*transform) @ Affine.translation(0.5, 0.5))[:6])
        return cls(code, transform, height, width, point)  # type: ignore[arg-type]

    # -- geometry ------------------------------------------------------------------------

    def corners(self) -> list[tuple[float, float]]:
        """The four outer corners in the grid's CRS, clockwise from the origin."""
        t = self.area_affine
        return [t @ (0, 0), t @ (self.width, 0), t @ (self.width, self.height), t @ (0, self.height)]

    def bounds(self) -> tuple[float, float, float, float]:
        """``(minx, miny, maxx, maxy)`` in the grid's CRS."""
        xs, ys = zip(*self.corners(), strict=True)
        return min(xs), min(ys), max(xs), max(ys)

    def outline(self, *, densify: int = 16) -> list[tuple[float, float]]:
        """The outline in the grid's CRS, ``densify`` points per edge, closed."""
        t = self.area_affine
        pixels: list[tuple[float, float]] = []
        edges = [((0, 0), (self.width, 0)), ((self.width, 0), (self.width, self.height)),
                 ((self.width, self.height), (0, self.height)), ((0, self.height), (0, 0))]  # fmt: skip
        for (c0, r0), (c1, r1) in edges:
            for i in range(densify):
                f = i / densify
                pixels.append((c0 + (c1 - c0) * f, r0 + (r1 - r0) * f))
        points = [t @ p for p in pixels]
        return [*points, points[0]]

    def footprint(self, *, densify: int = 16) -> shapely.Polygon | shapely.MultiPolygon:
        """The outline in longitude/latitude (EPSG:4326, x = longitude), as RFC 7946 §3.1.9 draws it.

        Its exterior runs counter-clockwise. Where it crosses the antimeridian it
        is cut in two along it (a MultiPolygon), so that no edge runs the wrong
        way round the Earth; where it holds a pole (a polar stereographic grid)
        it reaches the pole, over every longitude. Longitudes beyond ±180 (a
        geographic grid past the antimeridian) are wrapped into range first.
        The cutting is the ``antimeridian`` package's, which STAC tools share;
        which pole lies inside is decided here, in the grid's own CRS, where
        the outline is a plain polygon.

        Raises:
            ItemError: the grid has no CRS, covers no area (its corners
                collapse to a point or a line in float64, or lie at
                infinity), or has fewer than three points of its outline
                with a longitude and latitude.
        """
        if self.crs is None:
            raise ItemError("an ungeoreferenced raster has no footprint")
        import antimeridian
        import shapely
        from pyproj import CRS

        from catalog.selectors import wrap_longitude

        corners = self.corners()
        area = shapely.Polygon(corners).area
        if not (math.isfinite(area) and area > 0):
            shown = ", ".join(f"({x:g}, {y:g})" for x, y in corners)
            raise ItemError(f"the grid covers {'no' if area == 0 else 'no finite'} area: its corners are {shown}")
        ring = self.outline(densify=densify)
        if not shapely.LinearRing(ring).is_ccw:
            ring.reverse()
        outline = shapely.Polygon(ring)
        poles = {90.0: False, -90.0: False}
        geographic = CRS.from_user_input(self.crs).is_geographic
        if not geographic:
            to_grid = _transformer(_WGS84, self.crs)
            for lat in poles:
                x, y = to_grid.transform(0.0, lat, errcheck=False)
                poles[lat] = math.isfinite(x) and math.isfinite(y) and outline.contains(shapely.Point(x, y))
        if self.crs != _WGS84:
            xs, ys = _transformer(self.crs, _WGS84).transform([p[0] for p in ring], [p[1] for p in ring])
            # Points past the CRS's domain have none (EASE-Grid 1.0's corners lie just beyond its sphere's): the
            # outline runs through the others, as long as they still enclose an area.
            ring = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(x) and math.isfinite(y)]
            if len(set(ring)) < 3:
                raise ItemError(f"the grid's outline has no longitude and latitude: it lies outside {self.crs}'s domain")
            ring.append(ring[0])
        lons = [lon for lon, _ in ring]
        if geographic and max(lons) - min(lons) >= 360.0:
            # A geographic grid round the whole Earth (0..360, -181..179): every longitude, between its latitudes.
            # Wrapped and cut, its outline became two halves sharing a whole meridian (no valid MultiPolygon) and
            # its bbox had no width, so that no search found it.
            lats = [_latitude(lat) for _, lat in ring]
            return shapely.box(-180.0, min(lats), 180.0, max(lats))
        # Latitudes past a pole (a geographic grid's edge half a pixel or more beyond it) lie at the pole: RFC 7946 §4.
        wrapped = [(wrap_longitude(lon), _latitude(lat)) for lon, lat in ring]
        # Cut points at ±180 are interpolated between two outline points as the grid's edges run: along a parallel
        # (a straight line in longitude and latitude) for a geographic grid, whose cut a great circle put up to 0.007°
        # past its edge; along a great circle, as a projected grid's straight edge nearly runs, for any other.
        return antimeridian.fix_polygon(
            shapely.Polygon(wrapped),
            force_north_pole=poles[90.0],
            force_south_pole=poles[-90.0],
            fix_winding=False,
            great_circle=not geographic,
        )

    # -- windows -------------------------------------------------------------------------

    def window_for_bbox(self, bbox: Sequence[float], bbox_crs: str | None = _WGS84) -> tuple[tuple[int, int], tuple[int, int]]:
        """Return the smallest pixel window ``((row0, row1), (col0, col1))`` covering ``bbox``.

        The box is transformed to the grid's CRS with densified edges, then
        to pixels through the inverse transform, rounded outwards and clipped
        to the image. A longitude/latitude box may cross the antimeridian
        (:func:`box_in`). On a geographic grid that runs past ±180° of
        longitude, a box on the other side of the antimeridian is taken 360° round.

        Raises:
            SelectorError: the box is malformed, does not overlap the raster,
                or holds both ends of a grid round the Earth (two windows).
        """
        minx, miny, maxx, maxy = box_in(bbox, bbox_crs, self.crs)
        inverse = ~self.area_affine
        eps = 1e-9
        windows = []
        for turn in longitude_turns(self.crs):
            cols, rows = zip(*(inverse @ (x + turn, y) for x in (minx, maxx) for y in (miny, maxy)), strict=True)
            r0 = max(0, math.floor(min(rows) + eps))
            r1 = min(self.height, math.ceil(max(rows) - eps))
            c0 = max(0, math.floor(min(cols) + eps))
            c1 = min(self.width, math.ceil(max(cols) - eps))
            if r0 < r1 and c0 < c1:
                windows.append(((r0, r1), (c0, c1)))
        if len(windows) > 1:
            # A grid round the whole Earth: the box holds both of its ends, which meet at one meridian. One window
            # holds one side; returning it read half the box without a word.
            shown = " and ".join(f"{c0}..{c1}" for _, (c0, c1) in sorted(windows, key=lambda w: w[1]))
            raise SelectorError(
                f"bbox {list(bbox)} ({bbox_crs}) holds both ends of the raster, which meet round the Earth: it is two windows, "
                f"columns {shown}; read each side of the meridian where they meet on its own, or read through a catalogue "
                "(rumi read --catalog, catalog.load), which joins them"
            )
        if windows:
            return windows[0]
        raise SelectorError(
            f"bbox {list(bbox)} ({bbox_crs}) does not overlap the raster, whose bounds are {list(self.bounds())} ({self.crs})"
        )

    def window_area_transform(self, window: tuple[tuple[int, int], tuple[int, int]]) -> Affine:
        """The transform of a window's top-left pixel corner, as rasterio reports it.

        GDAL (and so rasterio) always reports the transform of pixel corners,
        also for an ``AREA_OR_POINT=Point`` raster, and shifts by half a pixel
        when it writes one; this is the transform to hand to rasterio together
        with ``AREA_OR_POINT``.
        """
        (r0, _), (c0, _) = window
        return self.area_affine @ Affine.translation(c0, r0)

    def x_coords(self, cols: tuple[int, int] | None = None) -> NDArray[np.float64]:
        """Pixel-centre x coordinates of columns ``cols`` (north-up grids)."""
        c0, c1 = cols or (0, self.width)
        t = self.affine
        shift = 0.0 if self.pixel_is_point else 0.5
        return t.c + t.a * (np.arange(c0, c1, dtype=np.float64) + shift)

    def y_coords(self, rows: tuple[int, int] | None = None) -> NDArray[np.float64]:
        """Pixel-centre y coordinates of rows ``rows`` (north-up grids)."""
        r0, r1 = rows or (0, self.height)
        t = self.affine
        shift = 0.0 if self.pixel_is_point else 0.5
        return t.f + t.e * (np.arange(r0, r1, dtype=np.float64) + shift)


def file_grid(georef: Georeferencing, layout: Layout) -> Grid | None:
    """The grid of a rumi file from its georeferencing and layout; None when it is ungeoreferenced.

    Spec "Undefined georeferencing": a raster without a CRS has no grid a
    bbox, a footprint or a transform could be placed on.
    """
    if not georef.is_georeferenced:
        return None
    return Grid.from_georef(georef, height=layout.image_length, width=layout.image_width)


def epsg_code(text: str) -> str | None:
    """``text`` as ``"EPSG:n"``, if it is a CRS PROJ reads ("EPSG:32633", "32633", a URN, WKT) that is exactly EPSG:n; else None.

    A grid's CRS is an EPSG code (``proj:code``). A PROJ string that merely
    resembles one is not taken for it (pyproj's identification at confidence
    100, not its default 70): "+proj=longlat +datum=WGS84" is longitude
    first, EPSG:4326 latitude first, and a towgs84 term may shift by metres.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        code = CRS.from_user_input(text).to_epsg(min_confidence=100)
    except CRSError:
        return None
    return None if code is None else f"EPSG:{code}"


def _latitude(value: float) -> float:
    """A latitude within -90..90: one past a pole is at the pole."""
    return max(-90.0, min(90.0, value))


@functools.lru_cache(maxsize=256)
def _in_registry(crs: str) -> bool:
    """Whether PROJ builds ``crs`` (``"EPSG:n"``); cached, as a grid is made for every item read."""
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        CRS.from_user_input(crs)
    except CRSError:
        return False
    return True


@functools.lru_cache(maxsize=64)
def longitude_turns(crs: str | None) -> tuple[float, ...]:
    """The shifts of longitude under which a box may meet a grid of ``crs``: a geographic grid may run past ±180°,
    where a box on the other side of the antimeridian meets it 360° round; on any other grid, none.

    >>> longitude_turns("EPSG:4326"), longitude_turns("EPSG:32633")
    ((0.0, 360.0, -360.0), (0.0,))

    Cached by CRS: a warp asks it for every block of every item.
    """
    if crs is None:
        return (0.0,)
    from pyproj import CRS

    return (0.0, 360.0, -360.0) if CRS.from_user_input(crs).is_geographic else (0.0,)


def box_in(
    bbox: Sequence[float], bbox_crs: str | None, crs: str | None, *, refuse_past_poles: bool = True
) -> tuple[float, float, float, float]:
    """``bbox``, given in ``bbox_crs``, as a box in ``crs`` with ``minx < maxx`` (edges densified, as in :func:`transform_bbox`).

    A box in a geographic CRS may cross the antimeridian as STAC API and
    RFC 7946 §5.2 write it, ``minx > maxx`` with both within -180..180;
    and GDAL gives the bounds in a geographic CRS of a box across it so. Either
    is returned with its east end 360° on (``179.5, …, -179.5, …`` becomes
    ``179.5, …, 180.5, …``), the longitudes in which a grid past ±180° lies and
    :func:`longitude_turns` turns. A ``None`` CRS on either side means no transformation.
    A box a caller gives in a geographic CRS has latitudes within -90..90
    (``refuse_past_poles``); a grid's own bounds may pass a pole by half a pixel,
    and a geographic lattice's warp square by more: such latitudes are taken at the pole.

    >>> box_in((179.5, -17, -179.5, -16), "EPSG:4326", "EPSG:4326")
    (179.5, -17.0, 180.5, -16.0)

    Raises:
        SelectorError: not four finite numbers; empty, or inverted in
            other than that way; latitudes past a pole; or ``bbox_crs`` is not a CRS.
    """
    from catalog.selectors import check_bbox

    geographic = _is_geographic(bbox_crs)
    # Strict: only a geographic box whose two longitudes are both in -180..180 may cross; anything else inverted is an error.
    crosses = geographic and len(bbox) == 4 and -180.0 <= float(bbox[2]) < float(bbox[0]) <= 180.0
    minx, miny, maxx, maxy = check_bbox(bbox, antimeridian=crosses)
    if refuse_past_poles and geographic and (miny < -90.0 or maxy > 90.0):
        # Strict: PROJ turns a latitude past a pole into NaN (a traceback further on) or clamps part of the box
        # silently; such a box is most often metres given without their CRS.
        raise SelectorError(
            f"bbox {list(bbox)} is not in degrees: latitudes are within -90..90 (a box in a projected CRS's units needs that "
            "CRS as bbox_crs, --bbox-crs of rumi read)"
        )
    if geographic and (miny < -90.0 or maxy > 90.0):
        # A square of a geographic lattice reaching past a pole holds the pole: its edge there lies at the pole, whose
        # point then bounds the box. Transformed as given, that edge had no point (or a wrong one), and a polar grid's
        # pixels round the pole were left out of the square's warp.
        miny, maxy = max(miny, -90.0), min(maxy, 90.0)
        if miny >= maxy:
            raise SelectorError(f"bbox {list(bbox)} lies wholly past a pole")
    if crosses:
        maxx += 360.0
        if maxx <= minx:  # 180,…,-180,…: no longitude at all
            raise SelectorError(f"bbox {list(bbox)} is empty: across the antimeridian it needs minx > maxx, not 180 and -180")
    if bbox_crs is not None and crs is not None and bbox_crs != crs:
        box = (minx, miny, maxx, maxy)
        minx, miny, maxx, maxy = transform_bbox(box, bbox_crs, crs)
        if _is_geographic(crs, "CRS") and not geographic:
            # GDAL bounds a box round a pole by its edges, which miss longitudes (a square with a corner on
            # the South Pole came back as -177.4..180): a box that holds a pole holds every longitude.
            for pole in _poles_in(box, bbox_crs, crs):
                minx, maxx = -180.0, 180.0
                miny, maxy = (miny, 90.0) if pole > 0 else (-90.0, maxy)
        if minx > maxx and _is_geographic(crs, "CRS"):
            maxx += 360.0
    return minx, miny, maxx, maxy


def _poles_in(box: tuple[float, float, float, float], box_crs: str, geographic: str) -> list[float]:
    """The latitudes (90, -90) of the poles of ``geographic`` that lie in ``box``, a box of the projected ``box_crs`` (edges included)."""
    to_box = _transformer(geographic, box_crs)
    held = []
    for lat in (90.0, -90.0):
        x, y = to_box.transform(0.0, lat, errcheck=False)
        if math.isfinite(x) and math.isfinite(y) and box[0] <= x <= box[2] and box[1] <= y <= box[3]:
            held.append(lat)
    return held


@functools.lru_cache(maxsize=64)
def _transformer(source: str, target: str) -> Any:
    """A pyproj transformer, longitude first, cached: a warp asks for one per block of every item."""
    from pyproj import Transformer

    return Transformer.from_crs(source, target, always_xy=True)


def check_unwrapped(bbox: Sequence[float], bbox_crs: str, crs: str) -> None:
    """Refuse a longitude/latitude box across the antimeridian where ``crs`` tears there (Web Mercator, world projections).

    Such a CRS puts the box's two sides at opposite ends of its x axis, and
    the one box in it that holds both is the whole width of the world. A CRS
    continuous across 180° (UTM 60, a polar stereographic one) takes the box whole.

    Raises:
        SelectorError: names the box and the CRS, and what to do.
    """
    if not _is_geographic(bbox_crs) or _is_geographic(crs, "CRS"):
        return
    minx, miny, maxx, maxy = box_in(bbox, bbox_crs, None)
    seam = next((m for m in (180.0, -180.0) if minx < m < maxx), None)
    if seam is None:
        return
    # Each side within -180..180, where the CRS defines it.
    shift = 360.0 if seam < 0 else 0.0
    west = transform_bbox((minx + shift, miny, 180.0, maxy), bbox_crs, crs)
    east = transform_bbox((-180.0, miny, maxx + shift - 360.0, maxy), bbox_crs, crs)
    widths = (west[2] - west[0]) + (east[2] - east[0])
    if max(west[2], east[2]) - min(west[0], east[0]) > 2.0 * widths:
        raise SelectorError(
            f"bbox {list(bbox)} crosses the antimeridian, where {crs} tears: its two sides lie at the two ends of the CRS,"
            " and a box holding both is the width of the world; load each side of 180° on its own, or give a CRS continuous there"
        )


def _is_geographic(crs: str | None, what: str = "bbox CRS") -> bool:
    from pyproj.exceptions import CRSError

    try:
        return len(longitude_turns(crs)) > 1
    except CRSError as err:
        raise SelectorError(f"{what} {crs!r} is not a CRS") from err


def transform_bbox(bbox: tuple[float, float, float, float], bbox_crs: str, crs: str) -> tuple[float, float, float, float]:
    """The bounds in ``crs`` of a box given in ``bbox_crs``, its edges densified (21 points each) so that curved edges are covered.

    ``bbox_crs`` is any text PROJ reads ("EPSG:4326", "32633", a PROJ string,
    WKT); it is handed to GDAL as WKT, since GDAL reads fewer forms.

    Raises:
        SelectorError: ``bbox_crs`` is not a CRS.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError as ProjCRSError
    from rasterio.warp import transform_bounds

    try:
        source = CRS.from_user_input(bbox_crs).to_wkt()
    except ProjCRSError as err:
        raise SelectorError(f"bbox CRS {bbox_crs!r} is not a CRS") from err
    bounds: tuple[float, float, float, float] = transform_bounds(source, crs, *bbox, densify_pts=21)
    return bounds
