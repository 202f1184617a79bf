"""Time coordinates: the time axis of a file and its trailer encoding.

Specification sections *Trailer* / *Time coordinates* and *Time residuals*.
Every time step of an Image or Cube carries a coordinate: an instant
(``time_type = 2``, ``C = T`` coordinates) or a half-open interval
(``time_type = 1``, ``C = 2T``), held here as integer POSIX seconds
(:mod:`rumi_core.times` turns text and datetimes into those seconds).

The trailer stores the axis as five fixed fields (:class:`TimeFields`:
``time_type``, ``time_bits``, ``time_epoch``, ``time_step``, ``time_scale``)
and the zigzag residuals of each coordinate against the line through
``time_epoch`` with slope ``time_step``, packed at the minimum ``time_bits``
(:meth:`TimeCoordinates.encode`, :meth:`TimeCoordinates.decode`).

>>> tc = TimeCoordinates.from_values(["2020-01-01", "2020-01-11", "2020-01-21"])
>>> tc.time_type, tc.seconds[1] - tc.seconds[0]
(2, 864000)
>>> TimeCoordinates.decode(tc.encode()[0], bytes(tc.encode()[1]), time_count=3)[0] == tc
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_core.bitpack import bit_length, pack, packed_size, unpack
from rumi_core.errors import InvalidFileError, InvalidInputError, RumiError
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.times import DAY, INSTANT, INT64_MAX, INT64_MIN, INTERVAL, format_seconds, to_seconds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "TIME_FIELDS",
    "TRAILER_SIZE_RULE",
    "TimeCoordinates",
    "TimeFields",
    "round_half_up",
    "unzigzag",
    "zigzag",
]

TIME_FIELDS = struct.Struct("<BBqqI")
"""``time_type``, ``time_bits``, ``time_epoch``, ``time_step``, ``time_scale`` (22 bytes)."""


def _fits_int64(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def round_half_up(num: int, den: int) -> int:
    """``round(num / den)`` with exact halves toward positive infinity (``den > 0``).

    The rounding of ``time_step`` (*time_epoch, time_step and time_scale*), in
    integer arithmetic: a float division loses exactness beyond 2**53.

    >>> round_half_up(3, 2), round_half_up(-3, 2), round_half_up(-5, 4)
    (2, -1, -1)
    """
    return (2 * num + den) // (2 * den)


def zigzag(x: int) -> int:
    """Map a signed residual to an unsigned integer (*Time residuals* / *Encoding*).

    >>> [zigzag(x) for x in (0, -1, 1, -2, 2)]
    [0, 1, 2, 3, 4]
    """
    return 2 * x if x >= 0 else -2 * x - 1


def unzigzag(p: int) -> int:
    """Invert :func:`zigzag` (*Time residuals* / *Decoding*).

    >>> [unzigzag(p) for p in (0, 1, 2, 3, 4)]
    [0, -1, 1, -2, 2]
    """
    return p >> 1 if p % 2 == 0 else -((p >> 1) + 1)


TRAILER_SIZE_RULE = "The trailer size MUST be exactly 28 + S + ceil(C * time_bits / 8) bytes"
"""The rule (*Trailer*) that a trailer ending early, or followed by more bytes, breaks."""

_UNREPRESENTABLE = "A reader MUST reject an input when a required result cannot be represented by its implementation"
"""The rule a coordinate that fits in int64 breaks when its seconds (coordinate * time_scale) do not: times are held in
int64 seconds here."""


@dataclass(frozen=True)
class TimeFields:
    """The five fixed time fields of the trailer, in the order of the table in *Time coordinates*."""

    time_type: int
    time_bits: int
    time_epoch: int
    time_step: int
    time_scale: int

    def to_bytes(self) -> bytes:
        """Return the 22 packed bytes."""
        return TIME_FIELDS.pack(self.time_type, self.time_bits, self.time_epoch, self.time_step, self.time_scale)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> TimeFields:
        """Unpack the 22 bytes that follow the band texts."""
        return cls(*TIME_FIELDS.unpack(data))


class TimeCoordinates:
    """The time axis of a file: its type and ``C`` coordinates in POSIX seconds.

    An axis is held either as its ``C`` values or, when they are evenly
    spaced (a trailer with ``time_bits = 0``), as first value, step and
    count: a regular axis of millions of steps costs a few integers until a
    caller asks for every value (*Resource limits*).
    """

    __slots__ = ("_count", "_explicit", "_first", "_step", "time_type")

    def __init__(self, time_type: int, seconds: Sequence[int]) -> None:
        if time_type not in (INSTANT, INTERVAL):
            raise InvalidInputError(f"time_type must be 1 or 2, got {time_type}", field="time_type")
        values = tuple(int(s) for s in seconds)
        if not values or (time_type == INTERVAL and len(values) % 2):
            raise InvalidInputError("an interval axis stores two coordinates per time step", field="times")
        for s in values:
            if not _fits_int64(s):
                raise InvalidInputError(f"time coordinate {s} does not fit in int64", field="times")
        _check_order(time_type, values)
        self.time_type = time_type
        """:data:`INSTANT` or :data:`INTERVAL`."""
        self._explicit: tuple[int, ...] | None = values
        self._first = values[0]
        self._step = 0
        self._count = len(values)

    @classmethod
    def regular(cls, time_type: int, first: int, step: int, count: int) -> TimeCoordinates:
        """An axis of ``count`` coordinates ``first + i * step`` seconds, held without its values.

        Raises:
            InvalidInputError: the count, type, range or order is not valid.
        """
        if time_type not in (INSTANT, INTERVAL):
            raise InvalidInputError(f"time_type must be 1 or 2, got {time_type}", field="time_type")
        if count < 1 or (time_type == INTERVAL and count % 2):
            raise InvalidInputError("an interval axis stores two coordinates per time step", field="times")
        step = step if count > 1 else 0
        last = first + (count - 1) * step
        for s in (first, last):
            if not _fits_int64(s):
                raise InvalidInputError(f"time coordinate {s} does not fit in int64", field="times")
        # Evenly spaced values are ordered as the first two steps are.
        _check_order(time_type, [first + i * step for i in range(min(count, 4))])
        axis = cls.__new__(cls)
        axis.time_type = time_type
        axis._explicit = None
        axis._first, axis._step, axis._count = first, step, count
        return axis

    @property
    def is_regular(self) -> bool:
        """True when the axis is held as first value, step and count."""
        return self._explicit is None

    @property
    def coordinate_count(self) -> int:
        """``C``: ``T`` for instants, ``2T`` for intervals."""
        return self._count

    @property
    def time_count(self) -> int:
        """``T``, the number of time steps."""
        return self._count // (2 if self.time_type == INTERVAL else 1)

    def second(self, index: int) -> int:
        """Coordinate ``index`` (negative counts from the end), in seconds."""
        if not -self._count <= index < self._count:
            raise IndexError(f"coordinate {index} is outside 0..{self._count - 1}")
        index %= self._count
        if self._explicit is not None:
            return self._explicit[index]
        return self._first + index * self._step

    @property
    def seconds(self) -> tuple[int, ...]:
        """``C`` coordinates, whole seconds from 1970-01-01T00:00:00Z (built on demand for a regular axis)."""
        if self._explicit is not None:
            return self._explicit
        return tuple(range(self._first, self._first + self._count * self._step, self._step)) if self._step else (self._first,) * self._count

    def array(self, limits: Limits = DEFAULT_LIMITS) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The ``C`` coordinates as an int64 array, once ``C`` is within ``limits`` (*Resource limits*).

        A regular axis is held as three integers whatever its count, and a
        blob may claim any count: a caller that needs every value (a
        coordinate of a dataset) asks here, not :attr:`seconds`.

        Raises:
            ResourceLimitError: ``C`` is above ``limits.max_time_coordinates``.
        """
        limits.check("max_time_coordinates", self._count, "the time coordinate count C")
        if self._explicit is not None:
            return np.asarray(self._explicit, dtype=np.int64)
        return self._first + self._step * np.arange(self._count, dtype=np.int64)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeCoordinates):
            return NotImplemented
        if self.time_type != other.time_type or self._count != other._count:
            return False
        if self._explicit is None and other._explicit is None:
            return (self._first, self._step) == (other._first, other._step)
        return self.seconds == other.seconds

    def __hash__(self) -> int:
        return hash((self.time_type, self._count, self.second(0), self.second(-1)))

    def __repr__(self) -> str:
        if self._explicit is None:
            return f"TimeCoordinates.regular({self.time_type}, {self._first}, {self._step}, {self._count})"
        return f"TimeCoordinates({self.time_type}, {self._explicit!r})"

    @classmethod
    def from_values(cls, values: Iterable[Any]) -> TimeCoordinates:
        """Build the axis from one instant or one ``(start, end)`` pair per step.

        Raises:
            InvalidInputError: mixed instants and intervals, a value that is
                not a time, unordered instants or overlapping intervals.
        """
        items = list(values)
        if not items:
            raise InvalidInputError("every time step needs a coordinate; times is empty", field="times")
        pairs = [isinstance(v, (tuple, list)) for v in items]
        if any(pairs) and not all(pairs):
            raise InvalidInputError("times mixes instants and intervals; use one kind for the whole axis", field="times")
        if all(pairs):
            secs: list[int] = []
            for i, v in enumerate(items):
                if len(v) != 2:
                    raise InvalidInputError(f"interval {i} must be a (start, end) pair, got {len(v)} values", field="times")
                secs.extend((to_seconds(v[0]), to_seconds(v[1])))
            return cls(INTERVAL, tuple(secs))
        return cls(INSTANT, tuple(to_seconds(v) for v in items))

    def to_datetime64(self) -> list[Any]:
        """Return the coordinates as ``datetime64[s]`` instants or ``(start, end)`` pairs.

        Raises:
            InvalidInputError: a coordinate is ``INT64_MIN``, which ``datetime64`` reserves for NaT.
        """
        if self.second(0) == INT64_MIN:
            raise InvalidInputError(
                f"time coordinate 0 is {INT64_MIN} s, which datetime64 cannot hold (it is NaT)",
                field="times",
            )
        values = [np.datetime64(s, "s") for s in self.seconds]
        if self.time_type == INSTANT:
            return values
        return list(zip(values[::2], values[1::2], strict=True))

    def to_json(self) -> list[str] | list[list[str]]:
        """Return ISO 8601 strings (UTC, ``Z``) for instants or ``[start, end]`` pairs."""
        text = [format_seconds(s) for s in self.seconds]
        if self.time_type == INSTANT:
            return text
        return [[a, b] for a, b in zip(text[::2], text[1::2], strict=True)]

    # -- trailer encoding ---------------------------------------------------------

    def encode(self) -> tuple[TimeFields, bytes]:
        """Return the trailer's time fields and packed residuals.

        ``time_scale`` is 86400 when every coordinate is a whole day, else 1;
        ``time_step`` rounds half up; ``time_bits`` is the minimum width.
        """
        if self._explicit is None:
            # Evenly spaced: the residuals are all zero, whatever the count.
            first, step = self._first, self._step
            scale = DAY if first % DAY == 0 and step % DAY == 0 else 1
            return TimeFields(self.time_type, 0, first // scale, step // scale, scale), b""
        scale = DAY if all(s % DAY == 0 for s in self._explicit) else 1
        coords = [s // scale for s in self._explicit]
        count = len(coords)
        epoch = coords[0]
        step = 0 if count < 2 else round_half_up(coords[-1] - coords[0], count - 1)
        if not _fits_int64(step):
            raise InvalidInputError("time_step does not fit in int64", field="times")
        packed = []
        for i, c in enumerate(coords):
            residual = c - (epoch + i * step)
            if not _fits_int64(residual):
                raise InvalidInputError(f"time residual {i} does not fit in int64", field="times")
            packed.append(zigzag(residual))
        bits = bit_length(max(packed))
        return TimeFields(self.time_type, bits, epoch, step, scale), pack(packed, bits)

    @classmethod
    def decode(cls, fields: TimeFields, residuals: bytes, *, time_count: int) -> tuple[TimeCoordinates, int]:
        """Decode and check the time fields and residuals of a trailer.

        Returns the coordinates and the number of residual bytes consumed.

        Raises:
            InvalidFileError: any rule of *Time coordinates* is broken; the
                error names the field and the rule.
        """

        def fail(msg: str, fld: str, rule: str) -> InvalidFileError:
            return InvalidFileError(msg, field=fld, rule=rule)

        if fields.time_type not in (INSTANT, INTERVAL):
            raise fail(
                f"time_type is {fields.time_type}, expected 1 (interval) or 2 (instant)",
                "time_type",
                "A reader MUST reject any other value",
            )
        if fields.time_scale not in (1, DAY):
            raise fail(f"time_scale is {fields.time_scale}, expected 1 or 86400", "time_scale", "A reader MUST reject any other value")
        if fields.time_bits > 64:
            raise fail(f"time_bits is {fields.time_bits}, expected 0..64", "time_bits", "It MUST be between 0 and 64")
        count = time_count * (2 if fields.time_type == INTERVAL else 1)
        size = packed_size(count, fields.time_bits)
        if len(residuals) < size:
            raise fail(
                f"time residuals need {size} bytes, the trailer has {len(residuals)}",
                "time_residuals",
                TRAILER_SIZE_RULE,
            )
        if fields.time_bits == 0:
            axis = cls._decode_regular(fields, count, fail)
        else:
            axis = cls._decode_explicit(fields, residuals[:size], count, fail)
        try:
            expected, _ = axis.encode()
        except InvalidInputError as err:
            raise fail(err.message, "times", "A residual MUST fit in int64") from err
        if expected.time_scale != fields.time_scale:
            raise fail(
                f"time_scale is {fields.time_scale}, the coordinates require {expected.time_scale}",
                "time_scale",
                "time_scale MUST be 86400 when every endpoint is a whole-day offset; otherwise it MUST be 1",
            )
        if expected.time_step != fields.time_step:
            raise fail(
                f"time_step is {fields.time_step}, the coordinates give {expected.time_step}",
                "time_step",
                "time_step = round((time(C-1) - time(0)) / (C-1)), exact halves toward positive infinity",
            )
        if expected.time_bits != fields.time_bits:
            raise fail(
                f"time_bits is {fields.time_bits}, the minimum is {expected.time_bits}",
                "time_bits",
                "A writer MUST use the minimum time_bits",
            )
        return axis, size

    @classmethod
    def _decode_regular(cls, fields: TimeFields, count: int, fail: Callable[[str, str, str], InvalidFileError]) -> TimeCoordinates:
        """Every residual is zero: ``time(i) = time_epoch + i * time_step``, checked at its ends only."""
        step = fields.time_step if count > 1 else 0
        ends = (0, count - 1)
        for i in ends:
            if not _fits_int64(fields.time_epoch + i * step):
                raise fail(f"decoded time coordinate {i} does not fit in int64", "times", "Every decoded coordinate MUST fit in int64")
        for i in ends:
            if not _fits_int64((fields.time_epoch + i * step) * fields.time_scale):
                raise fail("a decoded time in seconds does not fit in int64", "times", _UNREPRESENTABLE)
        try:
            return cls.regular(fields.time_type, fields.time_epoch * fields.time_scale, step * fields.time_scale, count)
        except InvalidInputError as err:
            raise fail(err.message, "times", err.rule or "the ordering required by time_type") from err

    @classmethod
    def _decode_explicit(
        cls, fields: TimeFields, residuals: bytes, count: int, fail: Callable[[str, str, str], InvalidFileError]
    ) -> TimeCoordinates:
        try:
            values = unpack(residuals, count, fields.time_bits)
        except RumiError as err:
            raise fail(str(err), "time_residuals", "Unused bits in the final byte MUST be zero") from err
        coords = []
        for i, p in enumerate(values.tolist()):
            c = fields.time_epoch + i * fields.time_step + unzigzag(int(p))
            if not _fits_int64(c):
                raise fail(
                    f"decoded time coordinate {i} does not fit in int64",
                    "times",
                    "Every decoded coordinate MUST fit in int64",
                )
            coords.append(c)
        if coords[0] != fields.time_epoch:
            raise fail(
                f"time_epoch is {fields.time_epoch} but time(0) decodes to {coords[0]}", "time_epoch", "time_epoch MUST equal time(0)"
            )
        secs = [c * fields.time_scale for c in coords]
        if not all(_fits_int64(s) for s in secs):
            raise fail("a decoded time in seconds does not fit in int64", "times", _UNREPRESENTABLE)
        try:
            return cls(fields.time_type, tuple(secs))
        except InvalidInputError as err:
            raise fail(err.message, "times", err.rule or "the ordering required by time_type") from err


def _check_order(time_type: int, secs: Sequence[int]) -> None:
    """Refuse coordinates out of the order *time_type* requires: instants non-decreasing, intervals non-empty and not overlapping."""
    if time_type == INSTANT:
        for i in range(1, len(secs)):
            if secs[i] < secs[i - 1]:
                raise InvalidInputError(
                    f"instant {i} ({secs[i]} s) is before instant {i - 1} ({secs[i - 1]} s)",
                    field="times",
                    rule="Instant coordinates MUST be non-decreasing",
                )
        return
    for i in range(0, len(secs), 2):
        if not secs[i] < secs[i + 1]:
            raise InvalidInputError(
                f"interval {i // 2} does not end after it starts",
                field="times",
                rule="time(2i) < time(2i + 1)",
            )
        if i + 2 < len(secs) and secs[i + 1] > secs[i + 2]:
            raise InvalidInputError(
                f"interval {i // 2} overlaps interval {i // 2 + 1}",
                field="times",
                rule="Intervals MUST NOT overlap",
            )
