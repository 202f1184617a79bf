"""Tests for rumi_core.frame_units (spec: Frames / frame_unit, Validating frame_unit)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FRAME_UNITS, parse_frame_unit

# The specification's table: decoded frame, written with "x" for the one non-spatial axis of units 1 and 2.
SPEC = {
    0: ("hw", "any"),
    1: ("xhw", "one"),
    2: ("hwx", "one"),
    3: ("bthw", "both"),
    4: ("tbhw", "both"),
    5: ("bhwt", "both"),
    6: ("thwb", "both"),
    7: ("hwbt", "both"),
    8: ("hwtb", "both"),
    9: ("hw", "both"),
}


def spec_valid(unit: int, bands: int, times: int) -> bool:
    rule = SPEC[unit][1]
    if rule == "any":
        return True
    if rule == "one":
        return (bands > 1) != (times > 1)
    return bands > 1 and times > 1


def test_the_registry_is_complete() -> None:
    assert sorted(FRAME_UNITS) == list(range(10))
    for value, unit in FRAME_UNITS.items():
        assert unit.value == value
        assert unit.holds == ("tile" if value in (0, 9) else "cell")
        assert "".join(unit.pattern) == SPEC[value][0]
        assert unit.valid_when == SPEC[value][1]


@pytest.mark.parametrize(
    ("bands", "times", "valid"),
    [
        (1, 1, [0]),
        (3, 1, [0, 1, 2]),
        (1, 3, [0, 1, 2]),
        (2, 2, [0, 3, 4, 5, 6, 7, 8, 9]),
        (65535, 2**32 - 1, [0, 3, 4, 5, 6, 7, 8, 9]),
    ],
)
def test_valid_units_for_band_and_time_counts(bands: int, times: int, valid: list[int]) -> None:
    assert [v for v, u in FRAME_UNITS.items() if u.is_valid(bands=bands, times=times)] == valid
    for v in valid:
        assert parse_frame_unit(v, bands=bands, times=times) is FRAME_UNITS[v]


@pytest.mark.parametrize(
    ("unit", "bands", "times", "axes"),
    [
        (0, 1, 1, "hw"),
        (0, 4, 3, "hw"),
        (9, 4, 3, "hw"),
        (1, 4, 1, "bhw"),
        (1, 1, 4, "thw"),
        (2, 4, 1, "hwb"),
        (2, 1, 4, "hwt"),
        (3, 2, 3, "bthw"),
        (4, 2, 3, "tbhw"),
        (5, 2, 3, "bhwt"),
        (6, 2, 3, "thwb"),
        (7, 2, 3, "hwbt"),
        (8, 2, 3, "hwtb"),
    ],
)
def test_decoded_layouts(unit: int, bands: int, times: int, axes: str) -> None:
    assert "".join(FRAME_UNITS[unit].layout(bands=bands, times=times)) == axes


def test_index_order_of_tile_units() -> None:
    assert FRAME_UNITS[0].index_order == ("b", "t")
    assert FRAME_UNITS[9].index_order == ("t", "b")


@settings(deadline=None, max_examples=200)
@given(bands=st.integers(1, 65535), times=st.integers(1, 2**32 - 1))
def test_validity_and_layouts_follow_the_table(bands: int, times: int) -> None:
    for value, unit in FRAME_UNITS.items():
        assert unit.is_valid(bands=bands, times=times) == spec_valid(value, bands, times)
        if not unit.is_valid(bands=bands, times=times):
            with pytest.raises(InvalidInputError, match=f"frame_unit {value} is not valid for B={bands}, T={times}"):
                parse_frame_unit(value, bands=bands, times=times)
            continue
        axes = unit.layout(bands=bands, times=times)
        text = "".join(axes)
        assert "hw" in text  # h w stay together and in that order
        assert len(set(axes)) == len(axes)
        if unit.holds == "cell":
            # every axis longer than one is in the frame
            assert ("b" in axes) == (bands > 1)
            assert ("t" in axes) == (times > 1)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (10, r"frame_unit 10 is not registered; valid units here are \[0, 3, 4, 5, 6, 7, 8, 9\]"),
        (-1, "frame_unit -1 is not registered"),
        (255, "frame_unit 255 is not registered"),
        (True, "frame_unit True is not registered"),
        ("0", "frame_unit '0' is not registered"),
        (0.0, "frame_unit 0.0 is not registered"),
        (None, "frame_unit None is not registered"),
    ],
)
def test_unregistered_values_are_rejected(value: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_frame_unit(value, bands=2, times=2)


@pytest.mark.parametrize(
    ("value", "bands", "times", "match"),
    [
        (9, 3, 1, r"frame_unit 9 is not valid for B=3, T=1; valid units here are \[0, 1, 2\]"),
        (9, 1, 1, r"frame_unit 9 is not valid for B=1, T=1; valid units here are \[0\]"),
        (1, 1, 1, "frame_unit 1 is not valid for B=1, T=1"),
        (2, 2, 2, r"frame_unit 2 is not valid for B=2, T=2; valid units here are \[0, 3, 4, 5, 6, 7, 8, 9\]"),
        (4, 1, 5, r"frame_unit 4 is not valid for B=1, T=5; valid units here are \[0, 1, 2\]"),
    ],
)
def test_units_invalid_for_band_and_time_counts(value: int, bands: int, times: int, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_frame_unit(value, bands=bands, times=times)
