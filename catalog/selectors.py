"""Selectors: which bands, time steps and bounding box a user asks for, in words.

Pure functions, no I/O. ``rumi read`` and the Python API accept

* bands as positions (``0,3``) or as names (``red,nir``), matched against a
  band's name, EO common name, description or any comma-separated part of its
  text, case-insensitively (:func:`band_positions`);
* times as positions (``0,2``) or as an ISO 8601 interval ``A/B`` where either
  end may be open (``..`` or empty); a time step is selected when its
  instant, or its interval, meets ``[A, B]``. An end given as a date alone
  includes that whole day (:func:`time_positions`).

>>> parse_time_selector("0,2")
[0, 2]
>>> parse_time_selector("2021-01-01/2021-01-11")
TimeRange(start=1609459200, end=1610409599)
"""

from __future__ import annotations

import calendar
import math
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, SupportsIndex, TypedDict

import numpy as np

from catalog.errors import SelectorError
from rumi_core.errors import InvalidInputError
from rumi_core.times import INTERVAL, format_seconds, parse_time

if TYPE_CHECKING:
    from collections.abc import Sequence

    from catalog.bands import Band
    from rumi_core.time_coordinates import TimeCoordinates

__all__ = [
    "ReadSelectors",
    "TimeRange",
    "band_positions",
    "band_positions_for_texts",
    "bands_from_texts",
    "check_bbox",
    "lonlat_boxes",
    "lonlat_union",
    "lonlat_wrapped",
    "parse_band_selector",
    "parse_datetime",
    "parse_time_selector",
    "selector_list",
    "time_positions",
    "wrap_longitude",
]

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH_ONLY = re.compile(r"^(\d{4})-(\d{2})$")
_YEAR_ONLY = re.compile(r"^\d{4}$")


def check_bbox(bbox: Sequence[float] | str, *, antimeridian: bool = False, searched: bool = False) -> tuple[float, float, float, float]:
    """Check a bounding box ``(minx, miny, maxx, maxy)``; the one rule ``search`` and ``read`` share.

    >>> check_bbox([1, 2, 3, 4])
    (1.0, 2.0, 3.0, 4.0)
    >>> check_bbox([170, -20, -175, -10], antimeridian=True)  # Fiji, across 180°
    (170.0, -20.0, -175.0, -10.0)
    >>> check_bbox([10, 45, 0, 10, 45, 100], antimeridian=True, searched=True)  # a point, with heights
    (10.0, 45.0, 10.0, 45.0)

    Args:
        bbox: The four numbers.
        antimeridian: A longitude/latitude box: longitudes within -180..180
            and latitudes within -90..90, and it may cross the antimeridian
            with ``minx > maxx`` (STAC API, *bbox*; RFC 7946 §5.2).
        searched: A search's box, as a STAC API takes it: also six numbers
            ``minx, miny, minz, maxx, maxy, maxz`` (heights are not searched),
            and it may have no width or height (a point or a line: what
            intersects it is found). A box read needs an area.

    Raises:
        SelectorError: not four (or for a search six) finite numbers, or
            ``minx >= maxx`` (but across the antimeridian) or ``miny >=
            maxy`` (for a search, ``>``), or a longitude or latitude out of
            its range.
    """
    six = " (or six, with minz and maxz after miny and maxy)" if searched else ""
    # A text is "minx,miny,maxx,maxy", as pystac-client and the command line take it, not its characters one by one.
    values: Sequence[Any] = [part.strip() for part in bbox.split(",")] if isinstance(bbox, str) else bbox
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError) as err:
        raise SelectorError(f"a bbox is four numbers minx,miny,maxx,maxy{six}, got {bbox!r}") from err
    if searched and len(numbers) == 6:
        numbers = [numbers[0], numbers[1], numbers[3], numbers[4]]
    if len(numbers) != 4:
        raise SelectorError(f"a bbox is four numbers minx,miny,maxx,maxy{six}, got {list(values)}")
    bbox = numbers
    minx, miny, maxx, maxy = numbers
    if not all(math.isfinite(v) for v in (minx, miny, maxx, maxy)):
        raise SelectorError(f"bbox {list(bbox)} has a value that is not a finite number")
    if antimeridian and not (-180 <= minx <= 180 and -180 <= maxx <= 180 and -90 <= miny <= 90 and -90 <= maxy <= 90):
        raise SelectorError(f"bbox {list(bbox)} is not in degrees: longitudes are within -180..180, latitudes within -90..90")
    crosses = antimeridian and maxx < minx
    below = operator.le if searched else operator.lt
    if not ((below(minx, maxx) or crosses) and below(miny, maxy)):
        across = " (or, across the antimeridian, minx > maxx within -180..180)" if antimeridian else ""
        sign = "<=" if searched else "<"
        raise SelectorError(f"bbox {list(bbox)} is empty or inverted: it needs minx {sign} maxx{across} and miny {sign} maxy")
    return minx, miny, maxx, maxy


def lonlat_boxes(bbox: Sequence[float]) -> list[tuple[float, float, float, float]]:
    """A checked longitude/latitude box as boxes that do not cross the antimeridian: itself, or its two halves.

    >>> lonlat_boxes((170, -20, -175, -10))
    [(170.0, -20.0, 180.0, -10.0), (-180.0, -20.0, -175.0, -10.0)]
    """
    minx, miny, maxx, maxy = (float(v) for v in bbox)
    if minx <= maxx:  # a zero-width box is a meridian, not the whole Earth
        return [(minx, miny, maxx, maxy)]
    return [(minx, miny, 180.0, maxy), (-180.0, miny, maxx, maxy)]


def lonlat_wrapped(bbox: Sequence[float]) -> tuple[float, float, float, float]:
    """A longitude/latitude box with ``minx < maxx`` (which may run past ±180°) as RFC 7946 §5.2 writes it.

    Longitudes are taken into -180..180, so a box past 180° crosses the
    antimeridian (``minx > maxx``); a box 360° wide or wider is the whole circle.

    >>> lonlat_wrapped((179.5, -17, 180.5, -16))
    (179.5, -17.0, -179.5, -16.0)
    >>> lonlat_wrapped((-190, 0, 170, 1))
    (-180.0, 0.0, 180.0, 1.0)
    """
    minx, miny, maxx, maxy = (float(v) for v in bbox)
    if maxx - minx >= 360.0:
        return -180.0, miny, 180.0, maxy
    return wrap_longitude(minx), miny, wrap_longitude(maxx), maxy


def wrap_longitude(lon: float) -> float:
    """``lon`` taken into -180..180 (180 itself stays 180)."""
    return lon if -180.0 <= lon <= 180.0 else (lon + 180.0) % 360.0 - 180.0


def lonlat_union(boxes: Iterable[Sequence[float]]) -> tuple[float, float, float, float] | None:
    """The smallest longitude/latitude box that holds each of ``boxes`` (any may cross the antimeridian); None for none.

    Longitudes lie on a circle: the union leaves out the widest stretch of
    longitudes that no box covers, and crosses the antimeridian (``minx >
    maxx``, RFC 7946 §5.2) unless that stretch holds it. Taking the least
    ``minx`` and the greatest ``maxx`` instead would turn a box just across
    the antimeridian into one round the whole Earth, or into an inverted one.
    (``antimeridian.bbox``, which draws an item's bbox, is wrong here: given
    the union of several boxes it takes any parts touching ±180 for one box
    across it, and leaves the others out.)

    >>> lonlat_union([(179, 50, -178, 52), (170, 40, 175, 41)])
    (170.0, 40.0, -178.0, 52.0)
    >>> lonlat_union([(10, 0, 20, 1), (30, 2, 40, 3)])
    (10.0, 0.0, 40.0, 3.0)
    """
    arcs: list[tuple[float, float]] = []
    lats: list[float] = []
    for box in boxes:
        for minx, miny, maxx, maxy in lonlat_boxes(box):
            arcs.append((minx, maxx))
            lats += [miny, maxy]
    if not arcs:
        return None
    merged: list[list[float]] = []
    for start, end in sorted(arcs):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    # The stretch no box covers across the antimeridian first: on a tie the union does not cross it.
    gaps = [(merged[0][0] + 360.0 - merged[-1][1], -1)] + [(merged[i + 1][0] - merged[i][1], i) for i in range(len(merged) - 1)]
    width, after = max(gaps, key=lambda gap: gap[0])
    if width <= 0.0:
        return -180.0, min(lats), 180.0, max(lats)
    if after < 0:
        return merged[0][0], min(lats), merged[-1][1], max(lats)
    return merged[after + 1][0], min(lats), merged[after][1], max(lats)


def parse_datetime(text: str, *, end: bool = False) -> int:
    """Parse an ISO 8601 date or datetime into POSIX seconds (UTC when no offset).

    With ``end=True`` a bare date means the last second of that day.

    Raises:
        SelectorError: the text is not an ISO 8601 date or datetime.

    A month (``2021-02``) or a year (``2021``), ISO 8601's reduced
    precision, means its first second, or with ``end=True`` its last.

    >>> parse_datetime("2021-01-01"), parse_datetime("2021-01-01", end=True)
    (1609459200, 1609545599)
    >>> parse_datetime("2020-12", end=True) == parse_datetime("2020", end=True) == parse_datetime("2020-12-31", end=True)
    True
    """
    value = text.strip()
    try:
        days = _days(value)
        seconds = parse_time(value if days is None else days[end])  # a fraction of a second names the second it falls in
    except SelectorError:
        raise
    except (InvalidInputError, ValueError) as err:
        examples = "2021, 2021-01, 2021-01-31 or 2021-01-31T10:00:00Z"
        raise SelectorError(f"{text!r} is not an ISO 8601 year, month, date or datetime such as {examples}") from err
    return seconds + 86400 - 1 if end and days is not None else seconds


def _days(value: str) -> tuple[str, str] | None:
    """The first and last day a year, month or date means (ISO 8601's reduced precision: ``2021``, ``2021-02``); None for a datetime.

    Raises:
        SelectorError: a month not in 1..12.
        ValueError: a month of a year the calendar does not hold (year 0).
    """
    if _YEAR_ONLY.match(value):
        return f"{value}-01-01", f"{value}-12-31"
    if month := _MONTH_ONLY.match(value):
        year, number = int(month[1]), int(month[2])
        if not 1 <= number <= 12:
            raise SelectorError(f"{value!r} is not an ISO 8601 month: month {number} is not in 1..12")
        return f"{value}-01", f"{value}-{calendar.monthrange(year, number)[1]:02d}"
    return (value, value) if _DATE_ONLY.match(value) else None


@dataclass(frozen=True)
class TimeRange:
    """A closed time range ``[start, end]`` in POSIX seconds; None is open."""

    start: int | None
    end: int | None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start > self.end:
            raise SelectorError(f"time range starts at {format_seconds(self.start)}, after its end {format_seconds(self.end)}")

    @classmethod
    def parse(cls, text: str) -> TimeRange:
        """Parse ``A/B``, ``A/..``, ``../B`` or a single ``A`` (that instant, or that whole day).

        Raises:
            SelectorError: the text is not such a range.
        """
        if "/" not in text:
            return cls(parse_datetime(text), parse_datetime(text, end=True))
        a, _, b = text.partition("/")
        start = None if a.strip() in ("", "..") else parse_datetime(a)
        end = None if b.strip() in ("", "..") else parse_datetime(b, end=True)
        return cls(start, end)

    @classmethod
    def given(cls, value: str | TimeRange | None, what: str = "datetime") -> TimeRange | None:
        """``value``, a range or its text (:meth:`parse`), as a range; None stays None.

        Raises:
            SelectorError: ``value`` is neither (a ``datetime.datetime``, a
                tuple), or text that is not a range.
        """
        if value is None or isinstance(value, TimeRange):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        raise SelectorError(f"{what} is a {type(value).__name__}: give 'A/B' text (open ends '..'), one date, or a TimeRange")

    def meets(self, start: int, end: int) -> bool:
        """Whether ``[start, end]`` intersects this range."""
        return (self.end is None or start <= self.end) and (self.start is None or end >= self.start)

    def to_interval(self) -> str:
        """Return the STAC API ``datetime`` parameter form, ``A/B`` with ``..`` for open ends."""
        a = format_seconds(self.start) if self.start is not None else ".."
        b = format_seconds(self.end) if self.end is not None else ".."
        return f"{a}/{b}"


class ReadSelectors(TypedDict, total=False):
    """The selectors of one read, every one optional: the keyword arguments of :meth:`catalog.Cube.read`.

    One definition for :meth:`~catalog.Cube.resolve`, :meth:`~catalog.Cube.selection`
    and :meth:`~catalog.Cube.read`, which take the same selectors.
    """

    bands: str | SupportsIndex | slice | Sequence[SupportsIndex | str] | None
    """Positions or names (``"red,nir"``, ``[0, 3]``, ``2``, ``slice(0, 3)``); None for all."""
    times: str | SupportsIndex | slice | Sequence[SupportsIndex] | TimeRange | None
    """Positions, a :class:`TimeRange`, or its text (``"2021-01-01/2021-02-01"``, ``"0,2"``); None for all."""
    bbox: Sequence[float] | None
    """``(minx, miny, maxx, maxy)`` in ``bbox_crs``."""
    bbox_crs: str | None
    """CRS of ``bbox``; longitude/latitude (``EPSG:4326``) when absent."""
    window: tuple[tuple[int, int], tuple[int, int]] | None
    """Pixel window ``((row0, row1), (col0, col1))`` instead of a bbox."""


def _int_list(text: str) -> list[int] | None:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if parts and all(re.fullmatch(r"-?\d+", p) for p in parts):
        return [int(p) for p in parts]
    return None


def parse_time_selector(text: str) -> list[int] | TimeRange:
    """Parse ``--times``: comma-separated positions, or a time range.

    Raises:
        SelectorError: neither form.
    """
    positions = _int_list(text)
    if positions is not None:
        return positions
    return TimeRange.parse(text)


def parse_band_selector(text: str) -> list[int | str]:
    """Parse ``--bands``: a comma-separated mix of positions and names.

    >>> parse_band_selector("red, nir,0")
    ['red', 'nir', 0]
    """
    out: list[int | str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        out.append(int(part) if re.fullmatch(r"-?\d+", part) else part)
    if not out:
        raise SelectorError(f"--bands {text!r} names no band")
    return out


def bands_from_texts(texts: Sequence[str], *, data_type: str | None = None) -> tuple[Band, ...]:
    """The bands a bare file's trailer texts describe (:func:`~catalog.bands.band_from_text`).

    Names are the texts' first parts; when two bands would share a name,
    every band is named by its whole text instead (texts are unique).
    """
    from catalog.bands import band_from_text

    bands = [band_from_text(t, data_type=data_type) for t in texts]
    if len({b.name for b in bands}) != len(bands):
        bands = [b.merged({"name": t}) for b, t in zip(bands, texts, strict=True)]
    return tuple(bands)


def selector_list(value: object, count: int, axis: Literal["band", "time"]) -> list[Any]:
    """A selector of several positions (or band names) as a list: one integer is a list of it, and a slice the positions
    it takes of ``count``, as NumPy indexes an axis.

    >>> selector_list(2, 4, "band"), selector_list(slice(1, None), 4, "band")
    ([2], [1, 2, 3])

    Raises:
        SelectorError: ``value`` is neither a position, a slice nor a sequence of them.
    """
    if isinstance(value, slice):
        return list(range(count)[value])
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise SelectorError(f"{axis}s are selected by a position or a sequence of them, not by {value!r}")
    return list(value)


def check_positions(positions: Sequence[int], count: int, axis: Literal["band", "time"]) -> None:
    """Refuse a position outside ``0..count-1`` of an axis, naming it.

    >>> check_positions([20200215], 3, "time")
    Traceback (most recent call last):
    ...
    catalog.errors.SelectorError: time position 20200215 is outside 0..2; a date is written 2020-02-15, a range 2020-02-01/2020-02-29

    >>> check_positions(["2020-02-15"], 3, "time")
    Traceback (most recent call last):
    ...
    catalog.errors.SelectorError: time positions are integers, not '2020-02-15'; a range of dates is one text, 2020-02-01/2020-02-29

    Raises:
        SelectorError: a position is not an integer, or is outside the axis.
    """
    odd = next((p for p in positions if isinstance(p, bool) or not isinstance(p, SupportsIndex)), None)
    if odd is not None:
        hint = "; a range of dates is one text, 2020-02-01/2020-02-29" if axis == "time" and isinstance(odd, str) else ""
        raise SelectorError(f"{axis} positions are integers, not {odd!r}{hint}")
    bad = next((p for p in positions if not 0 <= p < count), None)
    if bad is None:
        return
    # A number of four or more digits is a year or a date more often than a position.
    hint = "; a date is written 2020-02-15, a range 2020-02-01/2020-02-29" if axis == "time" and bad >= 1000 else ""
    raise SelectorError(f"{axis} position {bad} is outside 0..{count - 1}{hint}")


def band_positions_for_texts(selectors: Sequence[int | str], texts: Sequence[str]) -> list[int]:
    """Resolve band selectors against a file's band texts, exactly as ``rumi read`` does.

    This is the ``rumi.band_names`` entry point through which
    ``rumi_core.read(..., bands=["red", "nir"])`` accepts the names the
    command line accepts, without rumi_core importing this package.

    Raises:
        SelectorError: a name matches no band or several, or a position is outside the bands.
    """
    return band_positions(selectors, bands_from_texts(texts))


def band_positions(selectors: Sequence[int | str], bands: Sequence[Band]) -> list[int]:
    """Resolve band selectors to positions, in the order given.

    Raises:
        SelectorError: a name matches no band or several, or a position is outside the bands.
    """
    out: list[int] = []
    for sel in selectors:
        if isinstance(sel, bool) or not isinstance(sel, (str, SupportsIndex)):
            raise SelectorError(f"a band is selected by a name or a position, not by {sel!r}")
        if not isinstance(sel, str):  # a position: a Python, NumPy or PyTorch integer
            position = operator.index(sel)
            check_positions([position], len(bands), "band")
            out.append(position)
            continue
        exact = [i for i, b in enumerate(bands) if b.name.lower() == sel.strip().lower()]
        found = exact or [i for i, b in enumerate(bands) if b.matches(sel)]
        if not found:
            names = ", ".join(f"{b.name}" + (f" ({b.common_name})" if b.common_name else "") for b in bands)
            raise SelectorError(f"no band is called {sel!r}; the bands are {names}")
        if len(found) > 1:
            raise SelectorError(f"{sel!r} matches bands {found}; use a position or a longer name")
        out.append(found[0])
    return out


def time_positions(selector: Sequence[int] | TimeRange, times: TimeCoordinates) -> list[int]:
    """Resolve a time selector to positions.

    Raises:
        SelectorError: a position is outside the axis, or the range selects nothing.
    """
    count = times.time_count
    if not isinstance(selector, TimeRange):
        check_positions(selector, count, "time")
        return list(selector)
    secs = times.seconds
    # Intervals are half-open [start, end): the last second they cover is end - 1.
    interval = times.time_type == INTERVAL
    spans = [(secs[2 * i], secs[2 * i + 1] - 1) for i in range(count)] if interval else [(s, s) for s in secs]
    found = [i for i, (a, b) in enumerate(spans) if selector.meets(a, b)]
    if not found:
        first, last = spans[0][0], spans[-1][1]
        covers = f"{format_seconds(first)} to {format_seconds(last)}"
        raise SelectorError(f"no time step falls in {selector.to_interval()}; the cube covers {covers}")
    return found
