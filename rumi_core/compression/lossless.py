"""The lossless strategy: the candidate codecs of one layout, built from the screen.

Specification section *Frames* leaves every frame's graph to the writer. From
the screened sizes (:mod:`rumi_core.compression.screening`) this assembles and
measures (:func:`~rumi_core.compression.candidates.measure`):

* a :class:`~rumi_core.codecs.StackCodec` with each plane's pick; when it is
  predicted to decode below the floor it is rebuilt from faster predictors and
  back ends, tier by tier (:data:`_TIERS`), for frames of one plane as for several;
* the best single coding for all planes, as a stack and as a one-stream geozl
  recipe;
* when the sample holds ``nodata`` (or NaN), the per-plane stack behind
  geozl's nodata stage;
* OpenZL's ``compress`` graph (probed on one frame first).

``mode="max"`` keeps each plane's best three chains, among which OpenZL
picks on every frame; ``mode="portable"`` admits only OpenZL's built-in codecs.
Every function here returns a new tuple of candidates, in the order measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from rumi_core.codecs import GEOZL_ENCODINGS, FrameCodec, GeoZLGraph, OpenZLGraph, PlaneCoding, StackCodec
from rumi_core.compression.candidates import Candidate, Mode, measure, meets_floor
from rumi_core.compression.screening import FAST_HEADS, HEADS, PORTABLE_HEADS, PlaneOption, option_cost, refine, screen_classes, terminals
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping, Sequence

    from rumi_core.compression.sampling import SampleFrames
    from rumi_core.compression.screening import SizeCache

__all__ = ["choose_lossless", "probe_interleaved"]

_MAX_ALTERNATIVES: Final = 3
"""Chains kept per plane with ``mode="max"``."""
_BUILTIN_MARGIN: Final = 1.05
"""A built-in graph is measured on the whole sample only if its first frame is this close to the best."""


@dataclass(frozen=True)
class _Tier:
    """The options admitted when a per-plane stack is rebuilt to decode faster."""

    variants: frozenset[str]
    """Plane variants admitted (``x``, ``d``, ``px``)."""
    heads: frozenset[str]
    """Predictors admitted."""
    huffman_2byte: bool
    """Whether Huffman over whole 2-byte symbols (``entropy`` at width 2, about 100 MB/s) is admitted."""

    def admits(self, option: PlaneOption, width: int) -> bool:
        """Whether ``option`` may code a plane of ``width``-byte components in this tier."""
        slow_huffman = width == 2 and option.terminal == "entropy"
        return option.variant in self.variants and option.head in self.heads and (self.huffman_2byte or not slow_huffman)


_ALL_HEADS: Final = frozenset((*HEADS, *PORTABLE_HEADS))
_TIERS: Final = (
    _Tier(frozenset({"x", "d", "px"}), _ALL_HEADS, huffman_2byte=True),
    _Tier(frozenset({"x", "d"}), _ALL_HEADS - {"wp_static"}, huffman_2byte=False),
    _Tier(frozenset({"x", "d"}), frozenset(FAST_HEADS), huffman_2byte=False),
    _Tier(frozenset({"x"}), frozenset({"delta_w", "delta_1d", "id"}), huffman_2byte=False),
)
"""From the smallest to the fastest: the first tier admits every option screened."""


def _stack_from(
    per_plane: Sequence[Mapping[PlaneOption, float]],
    screened: Sequence[Mapping[PlaneOption, float]],
    tier: _Tier,
    width: int,
    alternatives: int,
    nodata: int | float | None,
) -> StackCodec | None:
    """The per-plane stack of each plane's best options in ``tier``; None when a plane has none.

    A plane's options are those measured on it (``per_plane``); where ``tier``
    admits none of them, the screen's options of its class (``screened``):
    re-measuring keeps only a plane's best few, often all of them slow.
    """
    codings = []
    for plane, (options, fallback) in enumerate(zip(per_plane, screened, strict=True)):
        ranked = _ranked(options, tier, width, plane) or _ranked(fallback, tier, width, plane)
        if not ranked:
            return None
        best = ranked[0][0]
        chains = [o.chain for o, _ in ranked if o.reference == best.reference][:alternatives]
        codings.append(PlaneCoding(tuple(chains), best.reference))
    if len(set(codings)) == 1 and not codings[0].reference:
        return StackCodec((codings[0],), nodata)
    return StackCodec(tuple(codings), nodata)


def _ranked(options: Mapping[PlaneOption, float], tier: _Tier, width: int, plane: int) -> list[tuple[PlaneOption, float]]:
    """``options`` that ``tier`` admits for plane ``plane`` (the first has no previous plane to reference), best first."""
    admitted = ((o, s) for o, s in options.items() if tier.admits(o, width) and (plane > 0 or not o.reference))
    return sorted(admitted, key=lambda kv: option_cost(*kv))


def _uniform(table: Mapping[Hashable, Mapping[PlaneOption, float]], alternatives: int) -> list[PlaneOption]:
    """The best options for all planes at once (no references)."""
    tables = list(table.values())
    totals: dict[PlaneOption, float] = {}
    for option in tables[0]:
        if not option.reference and all(option in options for options in tables):
            totals[option] = sum(options[option] for options in tables)
    return [o for o, _ in sorted(totals.items(), key=lambda kv: option_cost(*kv))[:alternatives]]


def _with(measured: tuple[Candidate, ...], codec: FrameCodec | None, frames: SampleFrames, unit: int | None) -> tuple[Candidate, ...]:
    """``measured`` plus ``codec`` measured on the sample, unless it is None, already there, or refuses the sample."""
    if codec is None or any(c.codec == codec for c in measured):
        return measured
    found = measure(codec, frames.frames, frames.axes, unit)
    return measured if found is None else (*measured, found)


def _with_fast_stack(
    measured: tuple[Candidate, ...],
    frames: SampleFrames,
    per_plane: Sequence[Mapping[PlaneOption, float]],
    screened: Sequence[Mapping[PlaneOption, float]],
    *,
    unit: int | None,
    alternatives: int,
    nodata: int | float | None,
    floor: float,
) -> tuple[Candidate, ...]:
    """``measured`` plus the per-plane stacks of each tier, until one is predicted to hold the floor (options: :func:`_stack_from`)."""
    width = frames.encoding.component_bytes
    for tier in _TIERS:
        more = _with(measured, _stack_from(per_plane, screened, tier, width, alternatives, nodata), frames, unit)
        if len(more) > len(measured) and (floor <= 0 or meets_floor(more[-1], floor)):
            return more
        measured = more
    return measured


def _with_builtin(
    measured: tuple[Candidate, ...], codec: FrameCodec, frames: SampleFrames, unit: int | None, floor: float
) -> tuple[Candidate, ...]:
    """``measured`` plus one of OpenZL's generic graphs, which encode slowly: probed on the first sample frame.

    The whole sample is measured only if the first frame comes within 5 % of
    the candidates known to hold the floor: a smaller one that decodes too
    slowly must not hide a built-in graph that does not.
    """
    first = [c.first_frame_bytes for c in measured if floor <= 0 or meets_floor(c, floor)]
    if first and len(frames.frames) > 1:
        try:
            own = len(codec.encode(frames.frames[0], axes=frames.axes))
        except InvalidInputError:
            return measured
        if own > min(first) * _BUILTIN_MARGIN:
            return measured
    return _with(measured, codec, frames, unit)


def _single_codings(options: Iterable[PlaneOption], nodata: int | float | None = None) -> StackCodec | None:
    """A stack coding every plane alike with ``options``' chains; None when there are none."""
    chains = tuple(o.chain for o in options)
    return StackCodec((PlaneCoding(chains),), nodata) if chains else None


def _nodata_of(frames: SampleFrames, nodata: int | float | None) -> int | float | None:
    """The nodata value the nodata stage is tried with: NaN for float samples holding NaN when none is given."""
    if nodata is None and frames.encoding.name in ("float32", "float64") and any(np.isnan(f).any() for f in frames.frames):
        return math.nan
    return nodata


def choose_lossless(
    cache: SizeCache,
    frames: SampleFrames,
    *,
    unit: int | None,
    mode: Mode,
    nodata: int | float | None,
    floor: float,
    builtins: bool = True,
) -> tuple[Candidate, ...]:
    """Measure this layout's lossless candidates, in the order measured.

    The pick among them is :func:`~rumi_core.compression.candidates.pick`.
    ``builtins`` measures OpenZL's built-in graphs too.
    """
    portable = mode == "portable"
    alternatives = _MAX_ALTERNATIVES if mode == "max" else 1
    table = screen_classes(cache, frames, portable=portable)
    planes = frames.planes[0].shape[0]
    measured: tuple[Candidate, ...] = ()
    screened = [table[c] for c in frames.classes[0]]
    if planes > 1:
        per_plane = refine(cache, frames, table, portable=portable, alternatives=alternatives)
        measured = _with_fast_stack(measured, frames, per_plane, screened, unit=unit, alternatives=alternatives, nodata=None, floor=floor)
    uniform = _uniform(table, alternatives)
    if uniform:
        measured = _with(measured, _single_codings(uniform), frames, unit)
        if uniform[0].variant == "x" and frames.encoding.name in GEOZL_ENCODINGS and not portable:
            measured = _with(measured, GeoZLGraph(uniform[0].recipe), frames, unit)
    if planes == 1 and floor > 0 and not any(meets_floor(c, floor) for c in measured):
        # One plane's per-plane stack is the single coding just measured; only when it and its one-stream
        # recipe both decode below the floor are the faster tiers tried. Else OpenZL's generic graph won,
        # e.g. on 64-pixel tiles of a 20-date series: 'compress' at 1.65:1 and 265 us a frame to encode,
        # where 'planar>zigzag>transpose>entropy' gives 1.90:1 and decodes above the floor.
        measured = _with_fast_stack(measured, frames, screened, screened, unit=unit, alternatives=alternatives, nodata=None, floor=floor)
    nodata = _nodata_of(frames, nodata)
    filled = None
    if nodata is not None and not portable and frames.encoding.name in GEOZL_ENCODINGS:
        filled = frames.with_nodata_filled(nodata)
    if filled is not None:
        filled_table = screen_classes(cache, filled, portable=portable)
        if planes == 1:
            measured = _with(measured, _single_codings(_uniform(filled_table, alternatives), nodata), frames, unit)
        else:
            per_plane = refine(cache, filled, filled_table, portable=portable, alternatives=alternatives)
            filled_screened = [filled_table[c] for c in filled.classes[0]]
            measured = _with_fast_stack(
                measured, frames, per_plane, filled_screened, unit=unit, alternatives=alternatives, nodata=nodata, floor=floor
            )
    if builtins:
        for graph in ("compress", "zstd") if portable else ("compress",):
            measured = _with_builtin(measured, OpenZLGraph(graph), frames, unit, floor)
    return measured


def probe_interleaved(frames: SampleFrames, *, unit: int | None, mode: Mode) -> tuple[Candidate, ...]:
    """Measure an interleaved layout with one whole-frame predictor, unscreened.

    Rows there interleave bands or dates sample by sample, which the row
    predictors model poorly (on one cube 2.14:1 against 3.67:1 for ``t b h w``),
    so a probe settles whether such a unit can win at a fraction of the cost.
    """
    terminal = terminals(frames.encoding.component_bytes)[0]
    option = PlaneOption("x", "delta_1d" if mode == "portable" else "med", terminal)
    geozl_ok = frames.encoding.name in GEOZL_ENCODINGS and mode != "portable"
    codec: FrameCodec = GeoZLGraph(option.chain) if geozl_ok else StackCodec((PlaneCoding((option.chain,)),))
    return _with((), codec, frames, unit)
