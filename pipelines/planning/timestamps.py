"""Acquisition times: from STAC, a path pattern, TIFF tags or an option, and cube periods.

A scene's
time is taken, in this order, from

1. its STAC item (``datetime``, else ``start_datetime``);
2. ``--time-pattern``: a regular expression searched in the input path, with
   named groups ``year``, ``month``, ``day``, ``doy`` (day of year), ``hour``,
   ``minute``, ``second``, or one group ``date``/``time`` holding
   ``YYYYMMDD[THHMMSS]`` or ISO 8601 text;
3. a scene ID in the file name, else in its directories
   (:data:`SCENE_ID_PATTERNS`): Landsat Collection 1 and 2 product IDs
   (``LC08_L1TP_044034_20150502_20200909_02_T1``, the acquisition date),
   pre-collection Landsat scene IDs (``LC81070352015122LGN00``, year and day
   of year), Sentinel-2 SAFE names and tile file names
   (``S2A_MSIL1C_20170216T102101_...``, ``T33UUU_20170216T102101_B04``,
   the sensing start; ``S2A_OPER_PRD_MSIL1C_..._V20160117T002243_...`` before
   December 2016, the start of its validity), Earth Search's Sentinel-2 COG items
   (``S2A_33UUU_20230612_0_L2A/B04.tif``, the date), Harmonized Landsat
   Sentinel-2 granules (``HLS.S30.T33UUU.2023163T102031.v2.0.B02.tif``, the
   sensing time), Sentinel-1 products and HyP3 RTC granules
   (``S1A_IW_GRDH_1SDV_20230612T051234_...``, ``S1A_IW_20230612T051234_DVP_RTC30_...``,
   the start), Planet scene IDs (``20230612_101010_23_2477_3B_AnalyticMS_SR.tif``,
   the acquisition time) and MODIS granules (``MOD09GA.A2015122...``);
4. the TIFF tag ``TIFFTAG_DATETIME`` (``YYYY:MM:DD HH:MM:SS``) or GDAL's
   ``ACQUISITIONDATETIME`` imagery metadata (except 1970-01-01 00:00:00,
   which GDAL writes when it found no date);
5. ``--time``, for scenes nothing else dates.

Scene IDs come before the tags: ``TIFFTAG_DATETIME`` is often the time the
file was processed, while a scene ID names the acquisition.

Text is parsed by :func:`rumi_core.times.parse_time`, whose one rule for a
fraction of a second (the POSIX second that contains the instant) serves
all three packages. The module is pure: no I/O.

>>> time_from_pattern(r"L[ETC]\\d{7}(?P<year>\\d{4})(?P<doy>\\d{3})", "lsts/LE70350322008118EDC00_b3.tif") == parse_time("2008-04-27")
True
>>> time_from_scene_id("LC08_L1TP_044034_20150502_20200909_02_T1_B4.TIF") == parse_time("2015-05-02T00:00:00Z")
True
>>> period_label(parse_time("2021-05-17T10:00:00Z"), "P3M")
'2021-Q2'
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Final

from pipelines.planning.hrefs import href_path
from rumi_core.times import parse_time, to_seconds

if TYPE_CHECKING:
    from collections.abc import Mapping

ONE_PASS_SECONDS: Final = 50 * 60
"""Times of one tile closer than this are one acquisition restated: half a Sentinel-2 orbit (100.6 min), the
least time between two passes over one tile, where catalogues state one pass's time seconds to minutes apart (its
datatake's start, its tile's, a re-ingest's)."""

__all__ = [
    "ONE_PASS_SECONDS",
    "SCENE_ID_PATTERNS",
    "TIME_TAGS",
    "compact",
    "period_label",
    "resolve_time",
    "suggest_time_pattern",
    "time_from_pattern",
    "time_from_scene_id",
    "time_from_tags",
]

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

TIME_TAGS: Final = ("TIFFTAG_DATETIME", "ACQUISITIONDATETIME")
"""Tags (default and ``IMAGERY`` domains) read for an acquisition time, in order."""

_NOT_AFTER_ALNUM = r"(?<![A-Za-z0-9])"

SCENE_ID_PATTERNS: Final = (
    # Landsat Collection 1 and 2 product ID: LXSS_LLLL_PPPRRR_YYYYMMDD_yyyymmdd_CC_TX (acquisition, then processing date).
    ("Landsat product ID", _NOT_AFTER_ALNUM + r"L[COTEM]0\d_L[12][A-Z0-9]{2}_\d{6}_(?P<date>\d{8})_\d{8}_\d{2}_[A-Z0-9]{2}"),
    # Pre-collection Landsat scene ID: LXSPPPRRRYYYYDDDGSIVV.
    ("Landsat scene ID", _NOT_AFTER_ALNUM + r"L[COTEM][1-9]\d{6}(?P<year>\d{4})(?P<doy>\d{3})[A-Z]{3}\d{2}"),
    # Sentinel-2 SAFE product: MMM_MSIXXX_YYYYMMDDTHHMMSS_... (datatake sensing start).
    ("Sentinel-2 product", _NOT_AFTER_ALNUM + r"S2[A-D]_MSI(?:L1B|L1C|L2A|L2B)_(?P<date>\d{8}T\d{6})_"),
    # Sentinel-2 product before December 2016 (several tiles, named after the processing):
    # MMM_OPER_PRD_MSIXXX_CCCC_<processing>_Rnnn_V<sensing start>_<sensing stop>; its granules' names hold processing times.
    (
        "Sentinel-2 product (2015-2016 format)",
        _NOT_AFTER_ALNUM + r"S2[A-D]_OPER_PRD_MSI(?:L1C|L2A)_[A-Z0-9_]{4}_\d{8}T\d{6}_R\d{3}_V(?P<date>\d{8}T\d{6})_",
    ),
    # Sentinel-2 COG item of Earth Search (AWS sentinel-cogs): MMM_xxXXX_YYYYMMDD_N_LLL (the acquisition date).
    ("Sentinel-2 COG item", _NOT_AFTER_ALNUM + r"S2[A-D]_\d{2}[A-Z]{3}_(?P<date>\d{8})_\d+_L[12][A-C]"),
    # Sentinel-2 tile file (granule band): TxxXXX_YYYYMMDDTHHMMSS_Bnn.
    ("Sentinel-2 tile", _NOT_AFTER_ALNUM + r"T\d{2}[A-Z]{3}_(?P<date>\d{8}T\d{6})(?![0-9])"),
    # Sentinel-1 product (ESA: S1A_IW_GRDH_1SDV_YYYYMMDDTHHMMSS_..., or HyP3 RTC: S1A_IW_YYYYMMDDTHHMMSS_...): the start.
    ("Sentinel-1 product", _NOT_AFTER_ALNUM + r"S1[A-D]_[A-Z0-9]{2}_(?:[A-Z0-9]{4}_[A-Z0-9]{4}_)?(?P<date>\d{8}T\d{6})_"),
    # Harmonized Landsat Sentinel-2 granule: HLS.{L30,S30}.TxxXXX.YYYYDDDTHHMMSS.vN.N (the sensing time, day of year).
    (
        "HLS granule",
        r"(?:^|[/_.])HLS\.[LS]30\.T\d{2}[A-Z]{3}\.(?P<year>\d{4})(?P<doy>\d{3})T(?P<hour>\d{2})(?P<minute>\d{2})(?P<second>\d{2})",
    ),
    # Planet scene ID: YYYYMMDD_HHMMSS[_ss]_<satellite> (PlanetScope: 4 hex digits, 20230612_101010_23_2477; SkySat:
    # its camera, 20200101_101010_ssc1d1_0001), the acquisition time; ss is hundredths of a second, dropped as rumi's
    # times are whole seconds.
    (
        "Planet scene ID",
        _NOT_AFTER_ALNUM + r"(?P<year>\d{4})(?P<month>\d{2})(?P<day>\d{2})_(?P<hour>\d{2})(?P<minute>\d{2})(?P<second>\d{2})(?:_\d{2})?"
        r"_(?:[0-9a-f]{4}|ssc\d{1,2}d\d)(?![0-9A-Za-z])",
    ),
    # MODIS granule: PRODUCT.AYYYYDDD.hHHvVV... (year and day of year of the acquisition).
    ("MODIS granule", r"(?:^|[._/])A(?P<year>(?:19|20)\d{2})(?P<doy>\d{3})(?=[._])"),
)
"""``(name, regular expression)`` of the scene IDs whose dates are read without ``--time-pattern``."""


def time_from_pattern(pattern: str, href: str) -> int | None:
    """Return the time found by ``pattern`` in ``href``, or None when it does not match.

    Raises:
        ValueError: the pattern matched but the groups are no valid date.
    """
    match = re.search(pattern, href)
    if match is None:
        return None
    return _time_from_match(match)


def _time_from_match(match: re.Match[str]) -> int:
    """The time held by a match's named groups (see :func:`time_from_pattern`).

    Raises:
        ValueError: the groups are no valid date.
    """
    groups = {k: v for k, v in match.groupdict().items() if v}
    for name in ("date", "time"):
        if name in groups:
            return parse_time(groups[name])
    if "year" not in groups:
        raise ValueError(f"--time-pattern matched {match.group(0)!r} but has no group year, date or time")
    year = int(groups["year"])
    try:
        # dt.time checks each field (hour 25 is an error, not the next day at 01:00).
        clock = dt.time(int(groups.get("hour", 0)), int(groups.get("minute", 0)), int(groups.get("second", 0)))
        if "doy" in groups:
            doy = int(groups["doy"])
            if not 1 <= doy <= (366 if year % 4 == 0 and (year % 100 or year % 400 == 0) else 365):
                raise ValueError(f"day of year {doy} does not exist in {year}")
            day = dt.date(year, 1, 1) + dt.timedelta(days=doy - 1)
        else:
            day = dt.date(year, int(groups.get("month", 1)), int(groups.get("day", 1)))
    except ValueError as err:
        raise ValueError(f"{match.group(0)!r} holds no valid time: {err}") from err
    return to_seconds(dt.datetime.combine(day, clock))


def time_from_scene_id(href: str) -> int | None:
    """Return the acquisition time in a scene ID of the file name, else of its directories, or None.

    A name that only looks like a scene ID but holds no valid date (day of
    year 400, month 13) is not one: it is skipped, not an error.

    >>> time_from_scene_id("lsts/LE70350322008118EDC00/LE70350322008118EDC00_b3.tif") == parse_time("2008-04-27T00:00:00Z")
    True
    >>> time_from_scene_id("S2B_MSIL2A_20210517T103619_N0300_R008_T32TQM_20210517T131653.SAFE/B04.jp2") == parse_time("20210517T103619")
    True
    >>> time_from_scene_id("MOD13Q1.A2015122.h18v04.061.2021320.hdf") == parse_time("2015-05-02T00:00:00Z")
    True
    >>> time_from_scene_id("sentinel-s2-l2a-cogs/33/U/UU/2023/6/S2A_33UUU_20230612_0_L2A/B04.tif") == parse_time("2023-06-12")
    True
    >>> product = "S2A_OPER_PRD_MSIL1C_PDMC_20160119T013846_R116_V20160117T002243_20160117T002334.SAFE"
    >>> granule = "S2A_OPER_MSI_L1C_TL_SGS__20160117T051155_A002973_T55KES"
    >>> time_from_scene_id(f"{product}/GRANULE/{granule}_N02.01/IMG_DATA/{granule}_B04.jp2") == parse_time("20160117T002243")
    True
    >>> time_from_scene_id("/data/scene_B04.tif") is None
    True
    """
    path = href_path(href)
    for text in (path.rsplit("/", 1)[-1], path):
        for _, pattern in SCENE_ID_PATTERNS:
            for match in re.finditer(pattern, text):
                try:
                    return _time_from_match(match)
                except ValueError:
                    continue
    return None


_SUGGESTIONS: Final = (
    "(?<![0-9])(?P<date>[0-9]{8}T[0-9]{6})(?![0-9])[^/]*$",
    "(?<![0-9])(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})(?![0-9])[^/]*$",
    "(?<![0-9])(?P<date>[0-9]{8})(?![0-9])[^/]*$",
    "(?<![0-9])(?P<year>[0-9]{4})-(?P<month>[0-9]{2})(?![0-9])[^/]*$",
    "(?<![0-9])(?P<year>[0-9]{4})(?![0-9])[^/]*$",
)
"""``--time-pattern`` values offered for a file name that holds a date no scene ID explains.

Spelled without backslashes, so that they survive being copied out of JSON
(the dead-letter file) into a shell."""


_PLAUSIBLE: Final = (to_seconds(dt.datetime(1950, 1, 1)), to_seconds(dt.datetime(2100, 1, 1)))
"""The times a date in a file name is offered as: 1950 to 2099."""


def suggest_time_pattern(href: str) -> str | None:
    """Return a ``--time-pattern`` that dates ``href`` by a date in its file name, or None.

    A bare digit run is not taken as a date without the user's word (it may
    be an orbit, a tile or a version), but a message can offer the pattern
    that would read it: the first of :data:`_SUGGESTIONS` that matches a
    valid date from 1950 to 2099 in the file name.

    >>> print(suggest_time_pattern("/data/ndvi_20230612.tif"))
    (?<![0-9])(?P<date>[0-9]{8})(?![0-9])[^/]*$
    >>> print(suggest_time_pattern("/data/composite_2021.tif"))
    (?<![0-9])(?P<year>[0-9]{4})(?![0-9])[^/]*$
    >>> suggest_time_pattern("/data/20230612/ndvi_42.tif") is None
    True
    """
    path = href_path(href)
    for pattern in _SUGGESTIONS:
        try:
            seconds = time_from_pattern(pattern, path)
        except ValueError:
            continue
        if seconds is not None and _PLAUSIBLE[0] <= seconds < _PLAUSIBLE[1]:
            return pattern
    return None


def time_from_tags(tags: Mapping[str, str]) -> int | None:
    """Return the time of the first of :data:`TIME_TAGS` present in ``tags``, or None.

    Raises:
        ValueError: a tag is present but holds no valid time.
    """
    for name in TIME_TAGS:
        value = tags.get(name)
        if value and value.strip():
            try:
                seconds = parse_time(value)
            except ValueError as err:
                raise ValueError(f"its {name} tag: {err}") from err
            if seconds != 0:  # 1970-01-01 00:00:00 is GDAL's placeholder for "no date found"
                return seconds
    return None


def resolve_time(*, href: str, stac: str | None, tags: Mapping[str, str], pattern: str | None, fallback: str | None) -> int | None:
    """Return a scene's acquisition time by the precedence of this module, or None.

    Raises:
        ValueError: a source that applies holds an invalid time.
    """
    if stac:
        return parse_time(stac)
    if pattern:
        found = time_from_pattern(pattern, href)
        if found is not None:
            return found
    found = time_from_scene_id(href)
    if found is not None:
        return found
    try:
        found = time_from_tags(tags)
    except ValueError as err:
        # A TIFF tag is the file writer's note, not the user's word: a malformed one is
        # an error only when no --time stands in for it.
        if not fallback:
            raise ValueError(f"{err}; --time (or a --time-pattern its name matches) dates the file instead") from err
        found = None
    if found is not None:
        return found
    return parse_time(fallback) if fallback else None


def compact(seconds: int) -> str:
    """Return ``YYYYMMDD`` for a whole day, else ``YYYYMMDDTHHMMSS``, for file names.

    >>> compact(0), compact(-62135596800 + 3661)
    ('19700101', '00010101T010101')
    """
    moment = _EPOCH + dt.timedelta(seconds=seconds)
    # Not strftime("%Y"), which writes year 1 as "1" on glibc: names keep eight digits.
    day = f"{moment.year:04d}{moment.month:02d}{moment.day:02d}"
    return day if seconds % 86400 == 0 else f"{day}T{moment.hour:02d}{moment.minute:02d}{moment.second:02d}"


def period_label(seconds: int, period: str) -> str:
    """Return the cube period a time falls in: ``""`` for ``none``, ``2021-05``, ``2021-Q2`` or ``2021``.

    Raises:
        ValueError: ``period`` is not one of none, P1M, P3M, P1Y.
    """
    moment = _EPOCH + dt.timedelta(seconds=seconds)
    if period == "none":
        return ""
    if period == "P1M":
        return f"{moment.year:04d}-{moment.month:02d}"
    if period == "P3M":
        return f"{moment.year:04d}-Q{(moment.month - 1) // 3 + 1}"
    if period == "P1Y":
        return f"{moment.year:04d}"
    raise ValueError(f"unknown cube period {period!r}; expected none, P1M, P3M or P1Y")
