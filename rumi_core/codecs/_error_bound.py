"""Error bounds: an L∞ bound on every sample, and its exact check.

A rumi frame is any self-contained OpenZL frame (specification section
*Frames*), so a lossy frame needs nothing from the format. This module holds
what the format does not promise and a catalogue must be able to rely on:

* an :class:`ErrorBound`, absolute (``max_abs_error=E``: ``|x - x̂| <= E``) or
  relative (``max_rel_error="P%"``: ``|x - x̂| <= P/100 * |x|``), for integer and
  floating point samples;
* :func:`within_bound`, an exact check of that bound, sample by sample, that
  also requires nodata sentinels, NaNs (with their payload) and infinities to
  come back bit for bit.

A bound of zero or below, or a relative bound of 100 % or more, is refused
with :class:`~rumi_core.errors.InvalidInputError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rumi_core.codecs._frames import UINT_BY_WIDTH
from rumi_core.codecs._nodata import nodata_mask
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy.typing as npt

__all__ = ["ErrorBound", "parse_error_bound", "within_bound"]

_PERCENT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*%\s*")


@dataclass(frozen=True)
class ErrorBound:
    """An L∞ error bound, absolute or relative to each value.

    >>> ErrorBound("relative", "0.5").geozl_error
    'LOG:MAX_ERROR=0.5%'
    >>> ErrorBound("absolute", "2").to_dict()
    {'max_abs_error': 2.0}
    """

    kind: Literal["absolute", "relative"]
    """``absolute``: ``|x - x̂| <= value``. ``relative``: ``|x - x̂| <= value/100 * |x|``."""
    value: str
    """The bound as an exact decimal: sample units, or percent for ``relative``."""

    def __post_init__(self) -> None:
        if self.kind not in ("absolute", "relative"):
            raise InvalidInputError(f"an error bound is absolute or relative, got {self.kind!r}", field="error_bound")
        try:
            number = Decimal(self.value)
        except (InvalidOperation, TypeError) as err:
            raise InvalidInputError(f"error bound {self.value!r} is not a decimal number", field="error_bound") from err
        if not number.is_finite() or number <= 0:
            raise InvalidInputError(f"an error bound is a positive finite number, got {self.value!r}", field="error_bound")
        if self.kind == "relative" and number >= 100:
            raise InvalidInputError(
                f"a relative bound is below 100%, got {self.value}%; geozl's LOG quantizer takes 0 < P < 100",
                field="max_rel_error",
            )

    @property
    def exact(self) -> Fraction:
        """The bound as an exact fraction: ``E`` for absolute, ``P/100`` for relative."""
        number = Decimal(self.value)
        if self.kind == "relative":
            return Fraction(number) / 100
        # An absolute bound given as a float means that float, exactly.
        return Fraction(number) if number == number.to_integral_value() else Fraction(float(number))

    @property
    def geozl_error(self) -> str:
        """The geozl quantizer recipe that honours this bound."""
        if self.kind == "absolute":
            return f"LINEAR:MAX_ERROR={self.value}"
        return f"LOG:MAX_ERROR={self.value}%"

    def to_dict(self) -> dict[str, float | str]:
        """Return ``{"max_abs_error": E}`` or ``{"max_rel_error": "P%"}``, as :func:`rumi_core.write` takes them."""
        if self.kind == "absolute":
            return {"max_abs_error": float(self.value)}
        return {"max_rel_error": f"{self.value}%"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErrorBound:
        """Read the JSON form written by :meth:`to_dict`.

        Raises:
            InvalidInputError: not exactly one of the two members.
        """
        bound = parse_error_bound(max_abs_error=data.get("max_abs_error"), max_rel_error=data.get("max_rel_error"))
        if bound is None or set(data) - {"max_abs_error", "max_rel_error"}:
            raise InvalidInputError(
                f"an error bound is {{'max_abs_error': E}} or {{'max_rel_error': 'P%'}}, got {data!r}", field="error_bound"
            )
        return bound


def parse_error_bound(*, max_abs_error: object = None, max_rel_error: object = None) -> ErrorBound | None:
    """Turn :func:`rumi_core.write`'s two bound arguments into an :class:`ErrorBound`.

    ``max_abs_error`` is a number of sample units; ``max_rel_error`` a
    percentage such as ``"1%"`` or ``"0.25 %"``. A bound of exactly zero means
    lossless and returns None, as does giving neither.

    Raises:
        InvalidInputError: both are given, or one is negative, not finite, a
            boolean, or not in the expected form.

    >>> parse_error_bound(max_rel_error="1%")
    ErrorBound(kind='relative', value='1')
    >>> parse_error_bound(max_abs_error=0) is None
    True
    """
    if max_abs_error is not None and max_rel_error is not None:
        raise InvalidInputError("give max_abs_error or max_rel_error, not both", field="max_abs_error")
    if max_abs_error is not None:
        if isinstance(max_abs_error, (bool, np.bool_)) or not isinstance(max_abs_error, (int, float, np.integer, np.floating)):
            raise InvalidInputError(f"max_abs_error is a number of sample units, got {max_abs_error!r}", field="max_abs_error")
        number = float(max_abs_error)
        if not math.isfinite(number) or number < 0:
            raise InvalidInputError(f"max_abs_error is a finite number >= 0, got {max_abs_error!r}", field="max_abs_error")
        if number == 0:
            return None
        if isinstance(max_abs_error, (int, np.integer)):
            text = str(int(max_abs_error))
        else:
            text = str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)
        return ErrorBound("absolute", text)
    if max_rel_error is not None:
        match = _PERCENT.fullmatch(max_rel_error) if isinstance(max_rel_error, str) else None
        if match is None:
            raise InvalidInputError(f"max_rel_error is a percentage such as '1%', got {max_rel_error!r}", field="max_rel_error")
        if Decimal(match.group(1)) == 0:
            return None
        return ErrorBound("relative", match.group(1))
    return None


def within_bound(
    original: npt.NDArray[Any],
    decoded: npt.NDArray[Any],
    bound: ErrorBound,
    *,
    nodata: int | float | None = None,
) -> npt.NDArray[np.bool_]:
    """Return, per sample, whether ``decoded`` honours ``bound`` for ``original``.

    Nodata samples, NaNs and infinities must come back bit for bit, and no
    valid sample may come back as the nodata value (the nodata mask is kept
    exactly). Every other sample must satisfy ``|x - x̂| <= E`` (absolute) or
    ``|x - x̂| <= P/100 * |x|`` (relative), evaluated exactly: rounding can only
    make the check stricter, and the few samples that land on the bound are
    settled with rationals.

    Args:
        original: The samples before compression, one of geozl's eleven dtypes.
        decoded: The reconstruction, same shape and dtype.
        bound: The bound to check.
        nodata: The sentinel (or NaN) that must round-trip exactly.

    Returns:
        A boolean array of ``original``'s shape, True where the sample is fine.
    """
    x = np.asarray(original)
    y = np.asarray(decoded).reshape(x.shape)
    uint = UINT_BY_WIDTH[x.dtype.itemsize]
    ok = np.asarray(x.view(uint) == y.view(uint))
    if ok.all():
        return ok
    # A valid sample decoded as nodata would become a hole: only exact will do.
    exact_only = nodata_mask(x, nodata) | nodata_mask(y, nodata)
    if x.dtype.kind == "f":
        exact_only |= ~np.isfinite(x) | ~np.isfinite(y)
    todo = ~ok & ~exact_only
    if not todo.any():
        return ok
    xs, ys = x[todo], y[todo]
    limit = bound.exact
    if x.dtype.kind in "iu":
        # Exact integer arithmetic: Python ints for 64-bit samples, int64 otherwise.
        if x.dtype.itemsize == 8:
            xo, yo = xs.astype(object), ys.astype(object)
            diff = np.abs(xo - yo)
            within = diff <= math.floor(limit) if bound.kind == "absolute" else diff * limit.denominator <= np.abs(xo) * limit.numerator
            passed = np.asarray(within, dtype=bool)
        else:
            xi, yi = xs.astype(np.int64), ys.astype(np.int64)
            diff = np.abs(xi - yi)
            if bound.kind == "absolute":
                passed = diff <= math.floor(limit)
            else:
                passed = np.asarray(diff.astype(object) * limit.denominator <= np.abs(xi).astype(object) * limit.numerator, dtype=bool)
    else:
        xf, yf = xs.astype(np.float64), ys.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            diff = np.abs(xf - yf)  # correctly rounded, so monotonic in the exact difference
            if bound.kind == "absolute":
                allowed = np.full(diff.shape, float(limit))
                clear_ok, clear_bad = diff < allowed, diff > allowed
            else:
                allowed = np.abs(xf) * float(limit)
                clear_ok = diff < allowed * (1 - 2.0**-40)
                clear_bad = diff > allowed * (1 + 2.0**-40)
        passed = clear_ok.copy()
        for i in np.flatnonzero(~clear_ok & ~clear_bad):
            fx, fy = Fraction(float(xf[i])), Fraction(float(yf[i]))
            passed[i] = abs(fx - fy) <= (limit if bound.kind == "absolute" else limit * abs(fx))
    result = ok.copy()
    result[todo] = passed
    return result
