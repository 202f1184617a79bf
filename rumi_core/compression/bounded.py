"""The bounded strategy: geozl's quantized recipes under an error bound.

Specification section *Frames* leaves every frame's graph to the writer; an
:class:`~rumi_core.codecs.ErrorBound` asks for lossy frames in which every
sample honours the bound (:mod:`rumi_core.codecs`). Each predictor runs with the
default back end, then the pick's predictor tries every other back end
(and ``pfor``); the pick among them is
:func:`~rumi_core.compression.candidates.pick`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from rumi_core.codecs import BoundedCodec, ErrorBound, bounded_encoding_check
from rumi_core.compression.candidates import Candidate, measure, pick
from rumi_core.compression.screening import terminals
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from rumi_core.compression.sampling import SampleFrames

__all__ = ["choose_bounded"]

_BOUNDED_HEADS: Final = ("planar", "med", "average", "delta_w", "delta_n")
"""The predictors geozl's quantizers run behind."""


def _with(measured: tuple[Candidate, ...], codec: BoundedCodec, frames: SampleFrames, unit: int | None) -> tuple[Candidate, ...]:
    found = measure(codec, frames.frames, frames.axes, unit)
    return measured if found is None else (*measured, found)


def _check_honoured(best: Candidate, frames: SampleFrames, bound: ErrorBound) -> None:
    """Refuse a bound geozl refuses on every sample frame.

    Frames that merely hold values the quantizers pass over (infinities,
    several NaN payloads) go lossless yet still honour the bound.

    Raises:
        InvalidInputError: every sample frame went lossless because geozl
            refuses the bound; names ``max_abs_error`` or ``max_rel_error``.
    """
    assert isinstance(best.codec, BoundedCodec)
    if best.lossless_frames != len(frames.frames):
        return
    refusals = [best.codec.check(f, axes=frames.axes) for f in frames.frames]
    if all(refusals):
        field_name = "max_abs_error" if bound.kind == "absolute" else "max_rel_error"
        raise InvalidInputError(
            f"geozl cannot honour {bound.to_dict()} on these {frames.encoding.name} samples: {refusals[0]}",
            field=field_name,
        )


def choose_bounded(
    frames: SampleFrames, *, unit: int | None, bound: ErrorBound, nodata: int | float | None, floor: float
) -> tuple[Candidate, ...]:
    """Measure geozl's quantized recipes on this layout, in the order measured.

    Raises:
        InvalidInputError: the encoding cannot be quantized under ``bound``,
            no recipe takes the samples, or geozl refuses the bound on every
            sample frame.
    """
    bounded_encoding_check(frames.encoding, bound)
    backs = (*terminals(frames.encoding.component_bytes), "pfor")
    kwargs: dict[str, Any] = bound.to_dict()
    measured: tuple[Candidate, ...] = ()
    for head in _BOUNDED_HEADS:
        measured = _with(measured, BoundedCodec(f"{head}>zigzag>{backs[0]}", nodata=nodata, **kwargs), frames, unit)
    if not measured:
        raise InvalidInputError(f"no geozl recipe takes {frames.encoding.name} samples", field="compression")
    best = pick(measured, floor)
    _check_honoured(best, frames, bound)
    assert isinstance(best.codec, BoundedCodec)
    head = best.codec.recipe.split(">")[0]
    for terminal in backs[1:]:
        measured = _with(measured, BoundedCodec(f"{head}>zigzag>{terminal}", nodata=nodata, **kwargs), frames, unit)
    return measured
