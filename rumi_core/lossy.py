"""Error-bounded lossy compression: an L∞ bound that holds for every sample.

A rumi frame is any self-contained OpenZL frame (specification section
*Frames*), so a lossy frame needs nothing from the format: geozl's quantizers
run before the predictor inside the frame's graph, and any reader that decodes
the frame gets the reconstruction. This module adds what the format does not
promise and a catalogue must be able to rely on:

* an :class:`ErrorBound`, absolute (``max_abs_error=E``: ``|x - x̂| <= E``) or
  relative (``max_rel_error="P%"``: ``|x - x̂| <= P/100 * |x|``), for integer and
  floating point samples;
* :func:`within_bound`, an exact check of that bound, sample by sample, that
  also requires nodata sentinels, NaNs (with their payload) and infinities to
  come back bit for bit;
* :class:`BoundedCodec`, a registered frame codec that quantizes with geozl
  (``LINEAR`` for absolute bounds, ``LOG`` for relative ones), decodes its own
  frame, checks it with :func:`within_bound` and, where a frame breaks the bound
  (an infinity, NaNs with several payloads, subnormals under a relative
  bound), stores that frame losslessly instead. The bound therefore holds for
  every sample of every frame, by construction and by check.

A bound the quantizers cannot honour at all (an encoding they have no kernel
for, a relative bound of 100 % or more, a bound of zero or below) is refused
with :class:`~rumi_core.errors.InvalidInputError`.

>>> import numpy as np
>>> codec = BoundedCodec("planar>zigzag>transpose>entropy", max_abs_error=2)
>>> tile = np.arange(64, dtype="<u2").reshape(8, 8) * 3
>>> back = decode_frame(codec.encode(tile, axes=("h", "w")), decoded_bytes=128).view("<u2").reshape(8, 8)
>>> bool(within_bound(tile, back, codec.bound).all())
True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

import geozl
import numpy as np

from rumi_core.codecs import (
    FrameCodec,
    RasterCodec,
    _check_recipe,
    _prepare,
    codec_from_dict,
    decode_frame,
    nodata_to_json,
    parse_nodata,
    register_codec,
)
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["BoundedCodec", "EncodedFrame", "ErrorBound", "parse_error_bound", "within_bound"]

QUANTIZED_ENCODINGS: Final = frozenset(
    {"uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64"}
)
"""Encodings geozl's quantizers have kernels for; lossy writes of any other are refused."""

_PERCENT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*%\s*")

_UINT: Final[dict[int, np.dtype[Any]]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


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
    return int(packed.view(_UINT[dtype.itemsize]))


def nodata_mask(samples: npt.NDArray[Any], nodata: int | float | None) -> npt.NDArray[np.bool_]:
    """Return where ``samples`` hold the nodata value, compared by bit pattern (NaN: any NaN)."""
    if nodata is None:
        return np.zeros(samples.shape, bool)
    if isinstance(nodata, float) and math.isnan(nodata):
        return np.isnan(samples) if samples.dtype.kind == "f" else np.zeros(samples.shape, bool)
    bits = _sentinel_bits(nodata, samples.dtype)
    if bits is None:
        return np.zeros(samples.shape, bool)
    return np.asarray(samples.view(_UINT[samples.dtype.itemsize]) == bits)


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
    uint = _UINT[x.dtype.itemsize]
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
                passed = np.asarray(
                    diff.astype(object) * limit.denominator <= np.abs(xi).astype(object) * limit.numerator, dtype=bool
                )
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


@dataclass(frozen=True)
class EncodedFrame:
    """One frame from :meth:`BoundedCodec.encode_frame`, and whether it is lossy."""

    data: bytes
    """The OpenZL frame."""
    lossy: bool
    """False when the frame broke the bound and was stored losslessly instead."""


@register_codec
@dataclass(frozen=True)
class BoundedCodec(FrameCodec):
    """geozl quantizer, predictor and back end under an error bound checked per frame.

    Give exactly one of :attr:`max_abs_error` and :attr:`max_rel_error`. Each
    frame is quantized with a geozl graph built from that frame's own valid
    samples (nodata excluded, so the sentinel does not widen the quantizer's
    domain), decoded again and checked with :func:`within_bound`; a frame that
    breaks the bound is compressed with :attr:`fallback` (lossless) instead.
    Specification section *Frames*.

    >>> BoundedCodec(max_rel_error="1%").to_dict()["configuration"]["max_rel_error"]
    '1%'
    """

    name: ClassVar[str] = "bounded"

    recipe: str = "planar>zigzag>transpose>entropy"
    """geozl recipe run on the quantizer's integer indices."""
    max_abs_error: float | None = None
    """Absolute bound in sample units, or None."""
    max_rel_error: str | None = None
    """Relative bound such as ``"1%"``, or None."""
    nodata: int | float | None = None
    """Sentinel (or NaN) kept exact through geozl's nodata stage; None for none."""
    fallback: FrameCodec = field(default_factory=RasterCodec)
    """Lossless codec for frames that would break the bound."""

    def __post_init__(self) -> None:
        _check_recipe(self.recipe)
        bound = parse_error_bound(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error)
        if bound is None:
            raise InvalidInputError("a bounded codec needs max_abs_error or max_rel_error above zero", field="codec.configuration")
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))
        if not isinstance(self.fallback, FrameCodec):
            raise InvalidInputError(f"'fallback' must be a codec, got {self.fallback!r}", field="codec.configuration.fallback")

    @property
    def bound(self) -> ErrorBound:
        """The error bound every decoded sample honours."""
        bound = parse_error_bound(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error)
        assert bound is not None
        return bound

    def _configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"recipe": self.recipe, **self.bound.to_dict()}
        if self.nodata is not None:
            config["nodata"] = nodata_to_json(self.nodata)
        config["fallback"] = self.fallback.to_dict()
        return config

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from its configuration; ``fallback`` is a codec's JSON form.

        Raises:
            InvalidInputError: A member is unknown or has a bad value.
        """
        known = {"recipe", "max_abs_error", "max_rel_error", "nodata", "fallback"}
        unknown = sorted(set(configuration) - known)
        if unknown:
            raise InvalidInputError(
                f"codec 'bounded' has no configuration member {', '.join(map(repr, unknown))}; it takes {', '.join(sorted(known))}",
                field="codec.configuration",
            )
        kwargs = dict(configuration)
        if "fallback" in kwargs:
            kwargs["fallback"] = codec_from_dict(kwargs["fallback"])
        return cls(**kwargs)

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether geozl's quantizers take ``encoding`` (and the fallback does)."""
        return encoding.name in QUANTIZED_ENCODINGS and self.fallback.accepts(encoding)

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame under the bound; see :meth:`FrameCodec.encode`."""
        return self.encode_frame(samples, axes=axes).data

    def encode_frame(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> EncodedFrame:
        """Compress one frame and tell whether the lossy frame was kept.

        Raises:
            InvalidInputError: the encoding has no quantizer, or geozl refuses
                the bound for these samples and the frame cannot be stored.
        """
        frame = _prepare(samples, axes)
        if frame.encoding.name not in QUANTIZED_ENCODINGS:
            raise InvalidInputError(
                f"geozl's quantizers take {', '.join(sorted(QUANTIZED_ENCODINGS))}, not {frame.encoding.name}; "
                "write it losslessly",
                field="max_abs_error" if self.max_abs_error is not None else "max_rel_error",
            )
        data = self._lossy(frame.samples, frame.width, frame.planes)
        if data is not None:
            decoded = decode_frame(data, decoded_bytes=frame.samples.nbytes).view(frame.samples.dtype)
            if within_bound(frame.samples.reshape(-1), decoded, self.bound, nodata=self.nodata).all():
                return EncodedFrame(data, True)
        return EncodedFrame(self.fallback.encode(samples, axes=axes), False)

    def _lossy(self, samples: npt.NDArray[Any], width: int, planes: int) -> bytes | None:
        """The quantized frame, or None where geozl refuses these samples."""
        build = samples.copy()
        nodata = self.nodata
        if nodata is None and build.dtype.kind == "f" and np.isnan(build).any():
            # geozl keeps NaNs through its nodata stage only when told to.
            nodata = math.nan
        holes = nodata_mask(build, nodata)
        if build.dtype.kind == "f":
            holes |= ~np.isfinite(build)
        if holes.any():
            # The quantizer's domain comes from the graph's raster: build it
            # from valid samples only, or a sentinel would widen it.
            valid = build[~holes]
            build[holes] = valid.flat[0] if valid.size else 0
        try:
            graph = geozl.graph(build, self.recipe, width=width, planes=planes, error=self.bound.geozl_error, nodata=nodata)
            return geozl.compress(samples, graph=graph)
        except (RuntimeError, ValueError, OverflowError):
            return None

    def check(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> str | None:
        """Return geozl's reason for refusing this bound on ``samples``, or None if it takes it."""
        frame = _prepare(samples, axes)
        if frame.encoding.name not in QUANTIZED_ENCODINGS:
            return f"geozl's quantizers have no kernel for {frame.encoding.name}"
        try:
            geozl.graph(frame.samples, self.recipe, width=frame.width, planes=frame.planes, error=self.bound.geozl_error)
        except (RuntimeError, ValueError, OverflowError) as err:
            return str(err)
        return None


def bounded_encoding_check(encoding: SampleEncoding | str, bound: ErrorBound) -> None:
    """Refuse a bound on an encoding the quantizers cannot honour.

    Raises:
        InvalidInputError: ``encoding`` has no geozl quantizer kernel.
    """
    enc = encoding_for_dtype(encoding) if isinstance(encoding, str) else encoding
    if enc.name not in QUANTIZED_ENCODINGS:
        field_name = "max_abs_error" if bound.kind == "absolute" else "max_rel_error"
        raise InvalidInputError(
            f"an error bound needs one of {', '.join(sorted(QUANTIZED_ENCODINGS))}; {enc.name} samples can only be written losslessly",
            field=field_name,
        )
