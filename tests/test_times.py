"""Tests for rumi_core.times (spec: Trailer / Time coordinates: whole POSIX seconds)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest

from rumi_core.errors import InvalidInputError
from rumi_core.times import to_seconds

# -- to_seconds: one instant to whole POSIX seconds --------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (np.datetime64("1970-01-01T00:00:00"), 0),
        (np.datetime64("2020-01-01"), 1577836800),
        (np.datetime64("2020", "Y"), 1577836800),
        (np.datetime64("2020-01-01T00:00:00.000", "ms"), 1577836800),
        (np.datetime64("2020-01-01T00:00:00.000000000", "ns"), 1577836800),
        (np.datetime64("1970-01-01T00:00:07", "ps"), 7),
        (np.datetime64("1969-12-31T23:59:59"), -1),
        (np.datetime64("1900-01-01T00:00:01"), -2208988799),
        (np.datetime64("1960-03-01", "D"), -310435200),
        (np.datetime64("20000-01-01", "s"), 568971820800),  # beyond datetime.datetime, within int64
        (np.datetime64("0001-01-01", "D"), -62135596800),
        (dt.datetime(2020, 1, 1, 12, 30, 15), 1577881815),  # naive is UTC
        (dt.datetime(2020, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), 1577836800),
        (dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC), -1),
        (dt.date(1960, 3, 1), -310435200),
        ("2020-01-01", 1577836800),
        ("2020-01-01T00:00:00Z", 1577836800),
        ("2020-01-01T05:30:00+05:30", 1577836800),
        ("2020-01-01T00:00:00.000000000Z", 1577836800),  # zero fraction is whole
        ("1969-07-20T20:17:40Z", -14182940),
        ("  1970-01-02  ", 86400),
    ],
)
def test_to_seconds(value: Any, seconds: int) -> None:
    assert to_seconds(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        np.datetime64("2020-01-01T00:00:00.001", "ms"),
        np.datetime64("2020-01-01T00:00:00.000001", "us"),
        np.datetime64("2020-01-01T00:00:00.000000001", "ns"),
        np.datetime64("1970-01-01T00:00:01.000000000001", "ps"),
        np.datetime64("1970-01-01T00:00:01.000000000000001", "fs"),
        np.datetime64("1970-01-01T00:00:01.000000000000000001", "as"),
        np.datetime64("1969-12-31T23:59:59.5"),  # before 1970 a fraction is negative-going
        dt.datetime(2020, 1, 1, 0, 0, 0, 1),
        "2020-01-01T00:00:00.5",
        "2020-01-01T00:00:00,5Z",
        "2020-01-01T00:00:00.000000001Z",  # datetime.fromisoformat would drop these digits
        "1969-12-31T23:59:59.999999999+00:00",
    ],
)
def test_to_seconds_refuses_fractions_of_a_second(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="has a fraction of a second; rumi stores whole seconds"):
        to_seconds(value)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.datetime64("NaT"), "a time coordinate is NaT"),
        ("yesterday", "'yesterday' is no time: ISO 8601"),
        (1577836800, "got int"),
        (1577836800.0, "got float"),
        (None, "got NoneType"),
    ],
)
def test_to_seconds_refuses_what_is_not_a_time(value: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        to_seconds(value)
