"""Frame units: what one compressed frame holds and in which sample order.

Specification section *Frames* / *frame_unit*. The registry is complete:
ten values, each with the ``(B, T)`` combinations it is valid for and the axis
order of its decoded frame. Units 0 and 9 hold one *tile* (one band and one
time step); every other unit holds one *cell* (all bands and time steps at one
tile location).

>>> FRAME_UNITS[4].layout(bands=3, times=2)
('t', 'b', 'h', 'w')
>>> FRAME_UNITS[1].layout(bands=1, times=5)
('t', 'h', 'w')
>>> FRAME_UNITS[9].is_valid(bands=3, times=1)
False
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rumi_core.errors import InvalidInputError

__all__ = ["FRAME_UNITS", "FrameUnit", "parse_frame_unit"]

_Validity = Literal["any", "one", "both"]
_ANY: _Validity = "any"
_ONE_AXIS: _Validity = "one"
_BOTH: _Validity = "both"


@dataclass(frozen=True)
class FrameUnit:
    """One registered ``frame_unit`` value."""

    value: int
    """The number stored in tag 65000 and in the header blob."""
    holds: Literal["tile", "cell"]
    """Whether a frame holds one tile or one whole cell."""
    pattern: tuple[str, ...]
    """Decoded axis order. ``"x"`` stands for the one non-spatial axis of
    units 1 and 2 (``b`` when ``B > 1``, ``t`` when ``T > 1``)."""
    valid_when: _Validity
    """``any``: every ``(B, T)``; ``one``: exactly one of B, T exceeds 1;
    ``both``: B > 1 and T > 1."""

    def is_valid(self, *, bands: int, times: int) -> bool:
        """Return whether this unit is registered for ``(B, T)``."""
        if self.valid_when == _ANY:
            return True
        if self.valid_when == _ONE_AXIS:
            return (bands > 1) != (times > 1)
        return bands > 1 and times > 1

    def layout(self, *, bands: int, times: int) -> tuple[str, ...]:
        """Return the decoded axis names, for example ``("h", "w", "b")``.

        Tile units decode to ``("h", "w")``. Axes of length one are not part
        of a cell layout except where the registry names them.
        """
        axis = "b" if bands > 1 else "t"
        return tuple(axis if a == "x" else a for a in self.pattern)

    @property
    def index_order(self) -> tuple[str, str]:
        """For tile units, the non-spatial axes the frame index walks, outer first."""
        return ("t", "b") if self.value == 9 else ("b", "t")


FRAME_UNITS: dict[int, FrameUnit] = {
    u.value: u
    for u in (
        FrameUnit(0, "tile", ("h", "w"), _ANY),
        FrameUnit(1, "cell", ("x", "h", "w"), _ONE_AXIS),
        FrameUnit(2, "cell", ("h", "w", "x"), _ONE_AXIS),
        FrameUnit(3, "cell", ("b", "t", "h", "w"), _BOTH),
        FrameUnit(4, "cell", ("t", "b", "h", "w"), _BOTH),
        FrameUnit(5, "cell", ("b", "h", "w", "t"), _BOTH),
        FrameUnit(6, "cell", ("t", "h", "w", "b"), _BOTH),
        FrameUnit(7, "cell", ("h", "w", "b", "t"), _BOTH),
        FrameUnit(8, "cell", ("h", "w", "t", "b"), _BOTH),
        FrameUnit(9, "tile", ("h", "w"), _BOTH),
    )
}
"""The complete, append-only registry of ``frame_unit`` values."""


def parse_frame_unit(value: int, *, bands: int, times: int) -> FrameUnit:
    """Return the registered unit ``value`` after checking it fits ``(B, T)``.

    Raises:
        InvalidInputError: the value is not registered, or not valid for
            ``(B, T)``. The message lists the units that are.
    """
    unit = FRAME_UNITS.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if unit is None or not unit.is_valid(bands=bands, times=times):
        allowed = [u.value for u in FRAME_UNITS.values() if u.is_valid(bands=bands, times=times)]
        what = "is not registered" if unit is None else f"is not valid for B={bands}, T={times}"
        raise InvalidInputError(
            f"frame_unit {value!r} {what}; valid units here are {allowed}",
            field="FrameUnit",
            rule="A reader MUST reject any frame_unit value or (B, T) combination not listed",
        )
    return unit
