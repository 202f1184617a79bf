"""Error-bounded lossy compression: geozl's quantizers under an :class:`ErrorBound`.

A rumi frame is any self-contained OpenZL frame (specification section
*Frames*), so a lossy frame needs nothing from the format: geozl's quantizers
run before the predictor inside the frame's graph, and any reader that decodes
the frame gets the reconstruction. :class:`BoundedCodec` is a registered frame
codec that quantizes with geozl (``LINEAR`` for absolute bounds, ``LOG`` for
relative ones), decodes its own frame, checks it with :func:`within_bound` and,
where a frame breaks the bound (an infinity, NaNs with several payloads,
subnormals under a relative bound), stores that frame losslessly instead. The
bound therefore holds for every sample of every frame, by construction and by
check.

A bound the quantizers cannot honour at all (an encoding they have no kernel
for) is refused with :class:`~rumi_core.errors.InvalidInputError`.

>>> import numpy as np
>>> codec = BoundedCodec("planar>zigzag>transpose>entropy", max_abs_error=2)
>>> tile = np.arange(64, dtype="<u2").reshape(8, 8) * 3
>>> back = decode_frame(codec.encode(tile, axes=("h", "w")), decoded_frame_bytes=128).view("<u2").reshape(8, 8)
>>> bool(within_bound(tile, back, codec.bound).all())
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import geozl
import numpy as np

from rumi_core.codecs._decoding import decode_frame
from rumi_core.codecs._error_bound import ErrorBound, parse_error_bound, within_bound
from rumi_core.codecs._frames import prepare_frame
from rumi_core.codecs._geozl import GEOZL_ENCODINGS, check_recipe
from rumi_core.codecs._nodata import nodata_mask, nodata_to_json, parse_nodata
from rumi_core.codecs._raster import RasterCodec
from rumi_core.codecs._registry import FrameCodec, codec_from_dict, register_codec
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["QUANTIZED_ENCODINGS", "BoundedCodec", "EncodedFrame", "bounded_encoding_check"]

QUANTIZED_ENCODINGS: Final = GEOZL_ENCODINGS
"""Encodings geozl's quantizers have kernels for (every encoding geozl has a
dtype code for); lossy writes of any other are refused."""


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
        check_recipe(self.recipe)
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
        frame = prepare_frame(samples, axes)
        if frame.encoding.name not in QUANTIZED_ENCODINGS:
            raise InvalidInputError(
                f"geozl's quantizers take {', '.join(sorted(QUANTIZED_ENCODINGS))}, not {frame.encoding.name}; write it losslessly",
                field="max_abs_error" if self.max_abs_error is not None else "max_rel_error",
            )
        data = self._lossy(frame.samples, frame.width, frame.planes)
        if data is not None:
            decoded = decode_frame(data, decoded_frame_bytes=frame.samples.nbytes).view(frame.samples.dtype)
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
        frame = prepare_frame(samples, axes)
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
