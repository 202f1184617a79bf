"""Times as text and as POSIX seconds: parse, format and the whole-second rule.

Specification section *Trailer* / *Time coordinates*: rumi follows POSIX time
in whole seconds, so a time is an integer count of seconds from
1970-01-01T00:00:00Z, negative before that epoch. This module is the one place
where text, :class:`numpy.datetime64`, :class:`datetime.datetime` and
:class:`datetime.date` become such seconds and seconds become ISO 8601 text,
for the writer, the catalogue and the pipelines alike. The time axis of a file
and its trailer encoding are :mod:`rumi_core.time_coordinates`.

Accepted inputs for an instant: :class:`numpy.datetime64`,
:class:`datetime.datetime`, :class:`datetime.date`, or an ISO 8601 string. A
naive datetime or an ISO string without an offset is taken as UTC.

Fractions of a second follow one rule, POSIX's: the time of an instant is the
whole second that contains it (:func:`parse_time`). Text timestamps read from
metadata (a STAC ``datetime`` such as ``2023-06-01T10:30:21.024Z``, a search
range) are parsed into that second; a coordinate given to the writer
(:func:`to_seconds`) must already be that second, or it is refused, since
writing another time than the one given would change the data.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import numpy as np

from rumi_core.errors import InvalidInputError

__all__ = [
    "DAY",
    "INSTANT",
    "INT64_MAX",
    "INT64_MIN",
    "INTERVAL",
    "format_seconds",
    "parse_time",
    "to_seconds",
]

INTERVAL = 1
"""``time_type`` of an interval axis."""
INSTANT = 2
"""``time_type`` of an instant axis."""

DAY = 86400
"""Seconds in a day: POSIX days have no leap seconds; the ``time_scale`` of a whole-day axis."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of every time coordinate, in seconds and in ``time_scale`` units."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_TICKS_PER_SECOND = {"ms": 10**3, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15, "as": 10**18}
_ISO_FRACTION = re.compile(r"\d[.,](\d+)")
"""The decimal fraction of an ISO 8601 time (of its seconds, or of a coarser last field)."""
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})(?:[T_ ]?(\d{2})(\d{2})(\d{2})?)?$")
"""``YYYYMMDD[THHMM[SS]]``, as in scene IDs and file names."""
_TIFF = re.compile(r"^(\d{4}):(\d{2}):(\d{2})[ T](\d{2}):(\d{2}):(\d{2})")
"""``YYYY:MM:DD HH:MM:SS``, the TIFF ``DateTime`` tag, and whatever follows it."""


def to_seconds(value: Any) -> int:
    """Convert one instant to whole POSIX seconds.

    Raises:
        InvalidInputError: the value is not a time, or has a fraction of a second.
    """
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise InvalidInputError("a time coordinate is NaT", field="times")
        unit, count = np.datetime_data(value.dtype)
        if unit in _TICKS_PER_SECOND:
            # Exact integer arithmetic: a cast to a coarser unit would truncate
            # a fraction, and a cast to a finer one can overflow.
            seconds, fraction = divmod(int(value.astype(np.int64)) * count, _TICKS_PER_SECOND[unit])
            if fraction:
                raise InvalidInputError(f"{value} has a fraction of a second; rumi stores whole seconds", field="times")
            return seconds
        return int(value.astype("datetime64[s]").astype(np.int64))
    if isinstance(value, str):
        text = value.strip()
        digits = _ISO_FRACTION.search(text)
        if digits and digits.group(1).strip("0"):
            # Checked on the text: datetime.fromisoformat keeps microseconds only and drops finer digits.
            raise InvalidInputError(f"{text!r} has a fraction of a second; rumi stores whole seconds", field="times")
        return parse_time(text)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta = value - _EPOCH
        if delta.microseconds or getattr(value, "nanosecond", 0):  # pandas.Timestamp carries nanoseconds
            raise InvalidInputError(f"{value.isoformat()} has a fraction of a second; rumi stores whole seconds", field="times")
        return int(delta.days * DAY + delta.seconds)
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days * DAY
    raise InvalidInputError(
        f"a time coordinate is a datetime64, datetime, date or ISO string, got {type(value).__name__}",
        field="times",
    )


def parse_time(text: str) -> int:
    """Parse a timestamp into the POSIX second that contains it (*Time coordinates*).

    Accepted: ISO 8601 (``2021-05-17``, ``2021-05-17T10:36:19Z``, with an
    offset, or none for UTC), the compact ``YYYYMMDD[THHMM[SS]]`` of scene IDs
    and the TIFF ``DateTime`` form ``YYYY:MM:DD HH:MM:SS``.

    The specification stores whole seconds and follows POSIX time, whose
    seconds of an instant are its whole seconds since the epoch with the
    fraction held apart and never negative (``tv_sec`` beside ``tv_nsec``):
    the floor, before 1970 too. A fraction is therefore dropped toward the
    past, in integer arithmetic (a float ``timestamp()`` rounds far from 1970):

    >>> parse_time("2023-06-01T10:30:21.024Z") == parse_time("2023-06-01T10:30:21Z")
    True
    >>> parse_time("1969-12-31T23:59:59.5Z"), parse_time("2021:05:17 10:36:19")
    (-1, 1621247779)
    >>> parse_time("2021:05:17 12:36:19+02:00") == parse_time("2021-05-17T10:36:19Z")
    True

    Raises:
        InvalidInputError: the text is no such timestamp (a :class:`ValueError`).
    """
    value = text.strip()
    compact = _COMPACT.match(value)
    tiff = _TIFF.match(value)
    if tiff:
        # TIFF's DateTime has no zone or fraction, but writers append ISO's (".5", "+02:00", "Z"): the date's
        # colons become ISO's dashes and the rest is read as ISO reads it, never dropped (it moved times by the offset).
        value = "{}-{}-{}T{}:{}:{}".format(*tiff.groups()) + value[tiff.end() :]
    try:
        if compact:
            y, mo, d, h, mi, sec = (int(g) if g else 0 for g in compact.groups())
            moment = dt.datetime(y, mo, d, h, mi, sec)
        else:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise InvalidInputError(
            f"{text.strip()!r} is no time: ISO 8601 (2021-05-17T10:36:19Z), YYYYMMDD[THHMMSS] or TIFF's YYYY:MM:DD HH:MM:SS",
            field="times",
        ) from err
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - _EPOCH  # days, then 0 <= seconds < 86400 and 0 <= microseconds: the floor
    return delta.days * DAY + delta.seconds


def format_seconds(seconds: int) -> str:
    """Format whole POSIX seconds as ISO 8601 UTC, ``YYYY-MM-DDTHH:MM:SSZ``.

    Any int64 is accepted, including years outside 1..9999 (where Python's
    :mod:`datetime` stops) and ``INT64_MIN`` (which ``datetime64[s]`` reserves
    for NaT): the date is formatted by NumPy in days, the time of day here.

    >>> format_seconds(0), format_seconds(253402300800)
    ('1970-01-01T00:00:00Z', '10000-01-01T00:00:00Z')
    >>> format_seconds(-(2**63))
    '-292277022657-01-27T08:29:52Z'
    """
    days, rest = divmod(int(seconds), DAY)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{np.datetime64(days, 'D')}T{hours:02d}:{minutes:02d}:{secs:02d}Z"
