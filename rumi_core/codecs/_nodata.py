"""Nodata values in codec configurations, and where samples hold them.

A codec's ``nodata`` member names a sentinel (or NaN) that geozl's nodata stage
splits off into a mask before prediction, and that an error bound must keep
bit for bit. Its JSON form spells non-finite values as Zarr writes fill
values. Specification section *Frames*.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from rumi_core.codecs._frames import UINT_BY_WIDTH
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["check_nodata_sample", "nodata_cache_key", "nodata_mask", "nodata_to_json", "parse_nodata"]

_NODATA_WORDS: Final[dict[str, float]] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""JSON spellings of the non-finite nodata values, as Zarr writes fill values."""


def parse_nodata(value: object) -> int | float | None:
    """Normalise a nodata value: None, an integer, a float or ``"NaN"``.

    Every NaN becomes :data:`math.nan` itself, so two codecs with a NaN
    sentinel compare equal and hash alike.

    Raises:
        InvalidInputError: ``value`` is a boolean, a string other than
            ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, or not a number.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise InvalidInputError(f"nodata is a number or NaN, not a boolean ({value!r})", field="nodata")
    if isinstance(value, str):
        if value in _NODATA_WORDS:
            return _NODATA_WORDS[value]
        raise InvalidInputError(f"nodata is a number or one of {', '.join(_NODATA_WORDS)}, got {value!r}", field="nodata")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return math.nan if math.isnan(number) else number
    raise InvalidInputError(f"nodata is a number or NaN, got {type(value).__name__}", field="nodata")


def check_nodata_sample(value: int | float | None, dtype: np.dtype[Any]) -> None:
    """Refuse a nodata value that no sample of ``dtype`` can hold.

    Integers take whole numbers in their range, booleans 0 and 1, and
    floating types any value that does not overflow them (NaN included).
    A sentinel no sample equals marks nothing, and a reader casting it to the
    samples' type would mask another value: 300 as uint8 is 44.

    >>> check_nodata_sample(300, np.dtype("uint8"))
    Traceback (most recent call last):
    ...
    rumi_core.errors.InvalidInputError: nodata 300 is no uint8 sample (0 to 255)

    Raises:
        InvalidInputError: no ``dtype`` sample holds ``value``.
    """
    if value is None:
        return
    if dtype.kind in "iub":
        info = np.iinfo(np.uint8) if dtype.kind == "b" else np.iinfo(dtype)
        low, high = (0, 1) if dtype.kind == "b" else (int(info.min), int(info.max))
        if not (math.isfinite(value) and value == int(value) and low <= value <= high):
            raise InvalidInputError(f"nodata {value!r} is no {dtype} sample ({low} to {high})", field="nodata")
        return
    with np.errstate(over="ignore", invalid="ignore"):
        held = float(np.array(value, dtype=np.float64).astype(dtype))
    if math.isfinite(value) and not math.isfinite(held):
        raise InvalidInputError(f"nodata {value!r} overflows {dtype} samples", field="nodata")


def nodata_to_json(value: int | float) -> int | float | str:
    """Return the JSON form of a nodata value: non-finite floats become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def nodata_cache_key(value: int | float | None) -> str:
    """Return a hashable spelling of a nodata value that tells NaN, -0.0 and 0.0 apart."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float.hex(value)
    return str(value)


def _sentinel_bits(nodata: int | float, dtype: np.dtype[Any]) -> int | None:
    """Bit pattern of a nodata sentinel at ``dtype``, or None if it is NaN or does not fit."""
    if isinstance(nodata, float) and math.isnan(nodata):
        return None
    try:
        if dtype.kind in "iu" and (not float(nodata).is_integer()):
            return None
        with np.errstate(over="raise", invalid="raise"):
            packed = np.asarray(nodata, dtype=dtype)
    except (OverflowError, FloatingPointError, ValueError):
        return None
    return int(packed.view(UINT_BY_WIDTH[dtype.itemsize]))


def nodata_mask(samples: npt.NDArray[Any], nodata: int | float | None) -> npt.NDArray[np.bool_]:
    """Return where ``samples`` hold the nodata value, compared by bit pattern (NaN: any NaN)."""
    if nodata is None:
        return np.zeros(samples.shape, bool)
    if isinstance(nodata, float) and math.isnan(nodata):
        return np.isnan(samples) if samples.dtype.kind == "f" else np.zeros(samples.shape, bool)
    bits = _sentinel_bits(nodata, samples.dtype)
    if bits is None:
        return np.zeros(samples.shape, bool)
    return np.asarray(samples.view(UINT_BY_WIDTH[samples.dtype.itemsize]) == bits)
