"""Tests for rumi_core.time_coordinates (spec: Trailer / Time coordinates, Time residuals)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rumi_core.bitpack import pack, packed_size
from rumi_core.errors import InvalidInputError, RumiError
from rumi_core.time_coordinates import (
    TIME_FIELDS,
    TimeCoordinates,
    TimeFields,
    round_half_up,
    zigzag,
)
from rumi_core.times import DAY, INSTANT, INT64_MAX, INT64_MIN, INTERVAL

SETTINGS = settings(deadline=None, max_examples=200)


def round_trip(axis: TimeCoordinates) -> TimeCoordinates:
    fields, residuals = axis.encode()
    decoded, used = TimeCoordinates.decode(TimeFields.from_bytes(fields.to_bytes()), residuals, time_count=axis.time_count)
    assert used == len(residuals)
    return decoded


# -- building the axis ------------------------------------------------------------------


def test_instants_and_intervals() -> None:
    instants = TimeCoordinates.from_values(["2020-01-01", "2020-01-01", "2020-01-03"])  # non-decreasing: repeats allowed
    assert instants.time_type == INSTANT
    assert instants.time_count == 3
    assert instants.to_json() == ["2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z", "2020-01-03T00:00:00Z"]

    intervals = TimeCoordinates.from_values([("2020-01-01", "2020-02-01"), ("2020-02-01", "2020-03-01"), ["2021-01-01", "2022-01-01"]])
    assert intervals.time_type == INTERVAL
    assert intervals.time_count == 3
    assert len(intervals.seconds) == 6  # C = 2T
    assert intervals.to_datetime64()[2] == (np.datetime64("2021-01-01T00:00:00"), np.datetime64("2022-01-01T00:00:00"))
    assert intervals.to_json()[0] == ["2020-01-01T00:00:00Z", "2020-02-01T00:00:00Z"]


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (["2020-01-02", "2020-01-01"], r"instant 1 \(1577836800 s\) is before instant 0"),
        ([("2020-01-01", "2020-01-03"), ("2020-01-02", "2020-01-04")], "interval 0 overlaps interval 1"),
        ([("2020-01-01", "2020-01-01")], "interval 0 does not end after it starts"),
        ([("2020-01-02", "2020-01-01")], "interval 0 does not end after it starts"),
        (["2020-01-01", ("2020-01-02", "2020-01-03")], "mixes instants and intervals"),
        ([("2020-01-01",)], r"must be a \(start, end\) pair, got 1 values"),
        ([], "times is empty"),
    ],
)
def test_from_values_refuses(values: list[Any], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        TimeCoordinates.from_values(values)


def test_direct_construction_is_checked() -> None:
    with pytest.raises(InvalidInputError, match="time_type must be 1 or 2, got 3"):
        TimeCoordinates(3, (0,))
    with pytest.raises(InvalidInputError, match="two coordinates per time step"):
        TimeCoordinates(INTERVAL, (0, 1, 2))
    with pytest.raises(InvalidInputError, match="does not fit in int64"):
        TimeCoordinates(INSTANT, (0, INT64_MAX + 1))
    with pytest.raises(InvalidInputError, match="does not fit in int64"):
        TimeCoordinates(INSTANT, (INT64_MIN - 1, 0))


# -- the trailer encoding ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("num", "den", "expected"),
    [
        (3, 2, 2),
        (1, 2, 1),
        (5, 2, 3),
        (-1, 2, 0),
        (-3, 2, -1),
        (-5, 2, -2),
        (7, 2, 4),
        (-7, 2, -3),
        (4, 3, 1),
        (5, 3, 2),
        (-4, 3, -1),
        (-5, 3, -2),
        (0, 9, 0),
    ],
)
def test_round_half_up_rounds_exact_halves_toward_positive_infinity(num: int, den: int, expected: int) -> None:
    assert round_half_up(num, den) == expected


@settings(deadline=None, max_examples=300)
@given(num=st.integers(-(2**70), 2**70), den=st.integers(1, 2**40))
def test_round_half_up_is_nearest_with_ties_up(num: int, den: int) -> None:
    r = round_half_up(num, den)
    # |num/den - r| <= 1/2, and a tie (exactly 1/2 away) only below num/den
    assert abs(2 * (num - r * den)) <= den
    assert 2 * (num - r * den) != den


@pytest.mark.parametrize(
    ("seconds", "scale", "epoch", "step", "bits"),
    [
        # instants in whole days: scale 86400, coordinates 0, 1, 3 days -> (3 - 0) / 2 = 1.5 -> 2
        ((0, DAY, 3 * DAY), DAY, 0, 2, 1),
        # pre-1970 days -7, -5, -4 -> (-4 - -7) / 2 = 1.5 -> 2; residuals 0, 0, -1
        ((-7 * DAY, -5 * DAY, -4 * DAY), DAY, -7, 2, 1),
        # seconds, -3 .. 2 over 3 steps: 5 / 3 -> 2; residuals 0, 0, -1, -1
        ((-3, -1, 0, 2), 1, -3, 2, 1),
        ((-3, -1, 2), 1, -3, 3, 1),  # (2 - -3) / 2 = 2.5 -> 3; residuals 0, -1, 0
        # intervals: C = 2T coordinates on one line; (7 - 0) / 2 ... an even split is exact
        ((0, 10, 20, 30), 1, 0, 10, 0),
        # a single instant: C < 2, step 0, no residual bits
        ((-86400 * 365,), DAY, -365, 0, 0),
        # a whole day and one second: scale 1
        ((0, DAY + 1), 1, 0, DAY + 1, 0),
    ],
)
def test_encode_fields(seconds: tuple[int, ...], scale: int, epoch: int, step: int, bits: int) -> None:
    time_type = INTERVAL if len(seconds) == 4 and seconds == (0, 10, 20, 30) else INSTANT
    axis = TimeCoordinates(time_type, seconds)
    fields, residuals = axis.encode()
    assert (fields.time_scale, fields.time_epoch, fields.time_step, fields.time_bits) == (scale, epoch, step, bits)
    coords = [s // scale for s in seconds]
    assert fields.time_epoch == coords[0]
    expected = [zigzag(c - (epoch + i * step)) for i, c in enumerate(coords)]
    assert max(expected).bit_length() == bits  # the minimum width
    assert residuals == pack(expected, bits)
    assert len(residuals) == packed_size(len(coords), bits)
    assert round_trip(axis) == axis


def test_exact_half_residuals_are_packed_as_specified() -> None:
    # 0, 1, 3: step 2, predicted 0, 2, 4, residuals 0, -1, -1 -> zigzag 0, 1, 1 -> bits 1 -> 0b110
    fields, residuals = TimeCoordinates(INSTANT, (0, 1, 3)).encode()
    assert (fields.time_step, fields.time_bits, residuals) == (2, 1, b"\x06")


def test_time_fields_are_22_little_endian_bytes() -> None:
    fields = TimeFields(INTERVAL, 7, -2, 86400, 1)
    raw = fields.to_bytes()
    assert TIME_FIELDS.size == len(raw) == 22
    assert raw == bytes([1, 7]) + (-2).to_bytes(8, "little", signed=True) + (86400).to_bytes(8, "little", signed=True) + (1).to_bytes(
        4, "little"
    )
    assert TimeFields.from_bytes(raw) == fields


@pytest.mark.parametrize(
    ("seconds", "scale"),
    [
        ((0, DAY, 2 * DAY), DAY),
        ((-DAY, 0), DAY),
        ((-100 * 365 * DAY, -DAY), DAY),
        ((0, DAY, 2 * DAY + 1), 1),
        ((-1, DAY), 1),
        ((43200,), 1),
        ((-43200,), 1),
    ],
)
def test_time_scale_is_86400_only_for_whole_days(seconds: tuple[int, ...], scale: int) -> None:
    fields, _ = TimeCoordinates(INSTANT, seconds).encode()
    assert fields.time_scale == scale


@st.composite
def axes(draw: st.DrawFn) -> TimeCoordinates:
    days = draw(st.booleans())
    unit = DAY if days else 1
    bound = 10**9 if days else 10**15
    first = draw(st.integers(-bound, bound)) * unit
    kind = draw(st.sampled_from([INSTANT, INTERVAL]))
    count = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(0, 10**6), min_size=2 * count, max_size=2 * count))
    out, t = [first], first
    if kind == INSTANT:
        for g in gaps[: count - 1]:
            t += g * unit
            out.append(t)
    else:
        t += (gaps[0] + 1) * unit
        out.append(t)
        for i in range(1, count):
            t += gaps[2 * i] * unit
            out.append(t)
            t += (gaps[2 * i + 1] + 1) * unit
            out.append(t)
    return TimeCoordinates(kind, tuple(out))


@SETTINGS
@given(axis=axes())
def test_encode_decode_round_trip(axis: TimeCoordinates) -> None:
    fields, _residuals = axis.encode()
    coords = [s // fields.time_scale for s in axis.seconds]
    assert fields.time_scale == (DAY if all(s % DAY == 0 for s in axis.seconds) else 1)
    assert fields.time_epoch == coords[0]
    c = len(coords)
    if c < 2:
        assert fields.time_step == 0
    else:
        exact = (coords[-1] - coords[0]) / (c - 1)
        assert abs(fields.time_step - exact) <= 0.5
    assert round_trip(axis) == axis


@settings(deadline=None, max_examples=100)
@given(
    start=st.integers(-(2**40), 2**40),
    step=st.integers(0, 2**20),
    count=st.integers(1, 50),
    scale=st.sampled_from([1, DAY]),
)
def test_coordinates_on_a_line_need_no_residual_bits(start: int, step: int, count: int, scale: int) -> None:
    axis = TimeCoordinates(INSTANT, tuple((start + i * step) * scale for i in range(count)))
    fields, residuals = axis.encode()
    assert fields.time_bits == 0
    assert residuals == b""
    assert round_trip(axis) == axis


def test_values_near_the_int64_limits() -> None:
    fits = TimeCoordinates(INSTANT, (INT64_MIN + 1, INT64_MIN + 1, INT64_MAX - 1))
    assert round_trip(fits) == fits
    with pytest.raises(InvalidInputError, match="time_step does not fit in int64"):
        TimeCoordinates(INSTANT, (INT64_MIN, INT64_MAX)).encode()
    with pytest.raises(InvalidInputError, match="time residual 1 does not fit in int64"):
        TimeCoordinates(INSTANT, (INT64_MIN, INT64_MAX, INT64_MAX, INT64_MAX)).encode()


# -- decoding checks every rule ---------------------------------------------------------


def encode_with(coords: list[int], *, scale: int, step: int | None = None, time_type: int = INSTANT) -> tuple[TimeFields, bytes]:
    """Encode coordinates (in ``scale`` units) against any line, as a broken writer might."""
    if step is None:
        step = 0 if len(coords) < 2 else round_half_up(coords[-1] - coords[0], len(coords) - 1)
    packed = [zigzag(c - (coords[0] + i * step)) for i, c in enumerate(coords)]
    bits = max(packed).bit_length()
    return TimeFields(time_type, bits, coords[0], step, scale), pack(packed, bits)


@pytest.mark.parametrize(
    ("coords", "scale", "changes", "match"),
    [
        ([0, 1, 3], DAY, {"time_type": 0}, "time_type is 0, expected 1 .interval. or 2 .instant."),
        ([0, 1, 3], DAY, {"time_type": 3}, "time_type is 3"),
        ([0, 1, 3], DAY, {"time_scale": 60}, "time_scale is 60, expected 1 or 86400"),
        ([0, 1, 3], DAY, {"time_bits": 65}, "time_bits is 65, expected 0..64"),
        # whole days stored in seconds: time_scale MUST be 86400
        ([0, DAY, 3 * DAY], 1, {}, "time_scale is 1, the coordinates require 86400"),
        # (3 - 0) / 2 = 1.5 must round up to 2, not down to 1 or away to 3
        ([0, 1, 3], DAY, {"time_step": 1}, "time_step is 1, the coordinates give 2"),
        ([0, 1, 3], DAY, {"time_step": 3}, "time_step is 3, the coordinates give 2"),
        ([-7, -5, -4], DAY, {"time_step": 1}, "time_step is 1, the coordinates give 2"),
    ],
)
def test_decode_rejects_broken_fields(coords: list[int], scale: int, changes: dict[str, int], match: str) -> None:
    fields, residuals = encode_with(coords, scale=scale, step=changes.get("time_step"))
    fields = TimeFields(**{**fields.__dict__, **{k: v for k, v in changes.items() if k != "time_step"}})
    with pytest.raises(RumiError, match=match):
        TimeCoordinates.decode(fields, residuals, time_count=3)


def test_decode_rejects_non_minimal_bits_and_short_residuals() -> None:
    axis = TimeCoordinates(INSTANT, (0, 1, 3))
    fields, _ = axis.encode()
    wide = TimeFields(INSTANT, fields.time_bits + 1, 0, 2, 1)
    with pytest.raises(RumiError, match="time_bits is 2, the minimum is 1"):
        TimeCoordinates.decode(wide, pack([0, 1, 1], 2), time_count=3)
    with pytest.raises(RumiError, match="time residuals need 1 bytes, the trailer has 0"):
        TimeCoordinates.decode(fields, b"", time_count=3)


def test_decode_rejects_a_wrong_epoch_and_disorder() -> None:
    # residual(0) is not zero: time(0) != time_epoch
    with pytest.raises(RumiError, match=r"time_epoch is 0 but time\(0\) decodes to 1"):
        TimeCoordinates.decode(TimeFields(INSTANT, 2, 0, 0, 1), pack([2, 0], 2), time_count=2)
    # decreasing instants
    with pytest.raises(RumiError, match="is before instant 0"):
        TimeCoordinates.decode(TimeFields(INSTANT, 2, 5, 0, 1), pack([0, 1], 2), time_count=2)


def test_decode_rejects_coordinates_outside_int64() -> None:
    with pytest.raises(RumiError, match="decoded time coordinate 1 does not fit in int64"):
        TimeCoordinates.decode(TimeFields(INSTANT, 0, INT64_MAX, 1, 1), b"", time_count=2)
    with pytest.raises(RumiError, match="a decoded time in seconds does not fit in int64"):
        TimeCoordinates.decode(TimeFields(INSTANT, 0, INT64_MAX // DAY + 1, 0, DAY), b"", time_count=1)


def test_array_is_every_coordinate_once_within_the_limits() -> None:
    """A regular axis is held as three integers; :meth:`TimeCoordinates.array` builds its values only within the limits."""
    from rumi_core.errors import ResourceLimitError
    from rumi_core.limits import Limits

    regular = TimeCoordinates.regular(INSTANT, 86400, 3600, 5)
    assert regular.array().tolist() == list(regular.seconds) == [86400 + 3600 * i for i in range(5)]
    assert TimeCoordinates(INSTANT, [3, 9]).array().dtype == np.int64
    with pytest.raises(ResourceLimitError, match="max_time_coordinates"):
        TimeCoordinates.regular(INSTANT, 0, 1, 2**31).array()
    assert TimeCoordinates.regular(INSTANT, 0, 1, 9).array(Limits(max_time_coordinates=9)).size == 9
