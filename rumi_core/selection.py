"""Choosing how a dataset's frames are compressed: the codec and the frame unit.

Specification sections *Frames* and *Choosing a frame unit*: every frame is a
self-contained OpenZL frame whose graph the writer is free to choose, and
"compression SHOULD be measured when more than one unit fits the access
pattern". This module measures. It is pure computation on sample frames: no
files, no Beam.

How a choice is made (``mode="auto"``):

1. **Sample.** Up to :data:`SAMPLE_LOCATIONS` tile locations, evenly spread
   over the grid (whole tiles before clipped edge tiles), holding a
   thirty-second of the dataset (:func:`sample_budget`, at least :data:`SAMPLE_MIN` and at
   most :data:`SAMPLE_BUDGET` samples); locations are dropped, then crops made
   around tile centres (never below 128 x 128) to fit. The same data always
   gives the same sample.
2. **Screen.** The planes of the sampled frames (the images stacked before
   ``h``) are compressed with each geozl predictor (``planar``, ``med``,
   ``average``, ``delta_w``, ``delta_n``, ``wp_static``, or none); the best
   two of them and the usual leaders (``med``, ``planar``) also run on the
   plane's exact difference from the previous plane (the inter-band or
   inter-date difference) and on the residual of a first ``planar`` stage;
   the best two options then try every back end (``transpose>entropy``,
   ``entropy``, ``field_lz``, ``zstd``, ``transpose>zstd``, as the width
   allows), so a runner-up is never dropped after one stage. Slow coders try
   the centres of two planes first and go on only if they come within 1 %.
   Planes of one band share a class screened on up to four of its planes (a
   long time series has hundreds); each plane then picks among its class's
   two best options of either kind. Sizes are exact frame sizes from geozl.
3. **Assemble.** A :class:`~rumi_core.codecs.StackCodec` with each plane's
   pick; the best single coding for all planes, as a stack and as a
   one-stream geozl recipe; OpenZL's ``compress`` graph (probed on one frame
   first); and, when the sample holds ``nodata`` (or NaN), the per-plane stack
   behind geozl's nodata stage.
4. **Measure.** Each candidate compresses the whole sample for real; its
   decode speed is *predicted* by the static cost model of
   :mod:`rumi_core.decode_cost` (per predictor, back end and sample width,
   fitted once by ``benchmarks/decode_cost.py``). The smallest candidate
   predicted to decode at ``decode_floor`` (with 10 % headroom) wins. A
   per-plane stack that misses the floor is rebuilt from faster predictors
   and back ends, tier by tier.

Every decision above is a pure function of the sample, the options and the
library versions (:func:`library_versions`): nothing reads a clock, depends
on thread scheduling or on the machine, so the same call writes the same
bytes anywhere, under any load.

With ``frame_unit="auto"`` (:func:`select_layout`) this runs for every unit
that fits the access preference: tile units (0; 9 compresses identically),
the cell units that stack bands or dates as planes, and a quick probe of the
interleaved ones. Units are compared by stored bytes per raw byte, every one
on the same sampled planes (tile units see every plane of the sampled cells).

``mode="max"`` keeps the best three chains of each plane and lets OpenZL pick
among them on every frame. ``mode="portable"`` admits only OpenZL's built-in
codecs (no geozl decoder needed). An :class:`~rumi_core.codecs.ErrorBound`
selects among geozl's quantized recipes instead.

:func:`select_codec` chooses a codec for given sample frames (the hook a
pipeline calls once per cube); :func:`select_layout` also chooses the frame
unit from the data, as :func:`rumi_core.write` does with ``frame_unit="auto"``.
Both return or wrap a :class:`Selection`, which records every candidate so a
run can report its choice.

>>> import numpy as np
>>> y, x = np.mgrid[0:64, 0:64]
>>> frames = [(1000 + 3 * y + x + b * 7).astype("<u2")[np.newaxis].repeat(3, 0) for b in range(2)]
>>> codec = select_codec(frames, axes=("b", "h", "w"), decode_floor=0)
>>> codec.name
'stack'
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import geozl
import numpy as np

from rumi_core.codecs import (
    GEOZL_ENCODINGS,
    BoundedCodec,
    ErrorBound,
    FrameCodec,
    GeoZLGraph,
    OpenZLGraph,
    PlaneCoding,
    StackCodec,
    bounded_encoding_check,
    nodata_mask,
    parse_codec,
    parse_error_bound,
    parse_nodata,
)
from rumi_core.decode_cost import MODEL
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FRAME_UNITS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = [
    "DECODE_FLOOR",
    "MODES",
    "SAMPLE_BUDGET",
    "SAMPLE_LOCATIONS",
    "SAMPLE_MIN",
    "Candidate",
    "CompressionChoice",
    "Mode",
    "Selection",
    "choose_compression",
    "describe",
    "library_versions",
    "parse_mode",
    "profile_codecs",
    "sample_budget",
    "sample_locations",
    "select_codec",
    "select_layout",
]

Mode = Literal["auto", "max", "portable"]
MODES: Final[tuple[str, ...]] = ("auto", "max", "portable")
"""The selection modes of :func:`select_codec` and ``rumi_core.write(compression=...)``."""

DECODE_FLOOR: Final = 300e6
"""Slowest decode accepted, in bytes of decoded samples per second on one core,
as predicted by :data:`rumi_core.decode_cost.MODEL`."""

SAMPLE_LOCATIONS: Final = 4
"""Tile locations sampled per dataset."""

SAMPLE_BUDGET: Final = 1 << 20
"""Most samples screened per dataset; sampled tiles are cropped to fit."""

SAMPLE_MIN: Final = 1 << 15
"""Fewest samples screened per dataset (if it has that many); between the two,
a thirty-second of the dataset, so that selection costs about what encoding does."""

_MIN_SIDE: Final = 128

_HEADS: Final = ("planar", "med", "average", "delta_w", "delta_n", "wp_static", "id")
_AFTER_PLANAR: Final = ("planar", "med", "average", "delta_w", "delta_n")
_FAST_HEADS: Final = ("planar", "delta_w", "delta_n", "id")
_SLOW_HEADS: Final = frozenset({"wp_static"})
_SLOW_TERMINALS: Final = frozenset({"field_lz", "zstd", "transpose>zstd"})
_SLOW_PENALTY: Final = 0.005
"""A slow encoder must save more than this fraction to be preferred: wp_static
encodes at 35-80 MB/s against 300-650 for the other predictors."""
_MAX_ALTERNATIVES: Final = 3
_FLOOR_HEADROOM: Final = 1.1
"""The floor is applied to frame decoding with 10 % to spare: a whole read also
fetches, checks and places the frames."""

_UINT: Final[dict[int, np.dtype[Any]]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


# --------------------------------------------------------------------------- #
# Results
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Candidate:
    """One codec measured on the whole sample."""

    codec: FrameCodec
    """The codec, as it would be written."""
    frame_unit: int | None
    """The frame unit its frames were cut with; None when the frames were given."""
    compressed_bytes: int
    """Total size of the sample's frames."""
    raw_bytes: int
    """Total decoded size of the sample's frames."""
    decode_mbps: float
    """Decode speed predicted by the cost model (:mod:`rumi_core.decode_cost`), MB/s on one core."""
    lossless_frames: int = 0
    """Under an error bound: sample frames stored losslessly because the bound failed."""
    first_frame_bytes: int = dataclasses.field(default=0, repr=False, compare=False)
    """Size of the first sample frame, for probes that compress one frame only."""

    @property
    def ratio(self) -> float:
        """``raw_bytes / compressed_bytes``."""
        return self.raw_bytes / self.compressed_bytes

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "compressed_bytes": self.compressed_bytes,
            "raw_bytes": self.raw_bytes,
            "ratio": round(self.ratio, 4),
            "decode_mbps": round(self.decode_mbps, 1),
            "lossless_frames": self.lossless_frames,
        }


@dataclass(frozen=True)
class Selection:
    """The outcome of a selection, with every candidate that was measured."""

    codec: FrameCodec
    """The chosen codec."""
    frame_unit: int | None
    """The chosen frame unit, or None when :func:`select_codec` was given frames."""
    mode: str
    """``auto``, ``max`` or ``portable``."""
    decode_floor: float
    """The decode-speed floor applied, bytes per second (0 for none)."""
    candidates: tuple[Candidate, ...] = ()
    """Every measured candidate, in the order measured."""
    sample: tuple[int, ...] = ()
    """Sampled tile locations (row-major spatial index) or frame positions."""
    bound: ErrorBound | None = None
    """The error bound, or None for lossless."""

    @property
    def chosen(self) -> Candidate | None:
        """The candidate measured for the chosen codec and unit, if any."""
        for candidate in self.candidates:
            if candidate.codec == self.codec and candidate.frame_unit == self.frame_unit:
                return candidate
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record of the choice and its candidates."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "mode": self.mode,
            "bound": None if self.bound is None else self.bound.to_dict(),
            "decode_floor_mbps": self.decode_floor / 1e6,
            "sample": list(self.sample),
            "candidates": [c.to_dict() for c in self.candidates],
        }


# --------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------- #


def parse_mode(mode: object) -> Mode:
    """Check a selection mode.

    Raises:
        InvalidInputError: ``mode`` is not one of :data:`MODES`.
    """
    if mode == "auto":
        return "auto"
    if mode == "max":
        return "max"
    if mode == "portable":
        return "portable"
    raise InvalidInputError(f"selection mode is one of {', '.join(MODES)}, got {mode!r}", field="compression")


def _parse_floor(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"decode_floor is bytes per second >= 0, got {value!r}", field="decode_floor")
    return float(value)


# --------------------------------------------------------------------------- #
# Screening: sizes of plane variants, memoised by label
# --------------------------------------------------------------------------- #


def _planar_residual(plane: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """geozl's ``planar`` predictor residual (``W + N - NW``, missing neighbours zero), wrapping."""
    prediction = np.zeros_like(plane)
    prediction[1:, 1:] = plane[1:, :-1] + plane[:-1, 1:] - plane[:-1, :-1]
    prediction[0, 1:] = plane[0, :-1]
    prediction[1:, 0] = plane[:-1, 0]
    return np.ascontiguousarray(plane - prediction)


def _fill_holes(rows: npt.NDArray[Any], holes: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    """Fill holes as geozl's nodata stage does: from the left, a row's first from above, else zero."""
    index = np.arange(rows.shape[0])
    last = np.maximum.accumulate(np.where(holes[:, 0], -1, index))
    first = np.where(last >= 0, rows[np.maximum(last, 0), 0], 0).astype(rows.dtype)
    filled = rows.copy()
    filled[:, 0] = first
    valid = ~holes
    valid[:, 0] = True
    columns = np.maximum.accumulate(np.where(valid, np.arange(rows.shape[1])[np.newaxis, :], 0), axis=1)
    return np.take_along_axis(filled, columns, axis=1)


def _plane_classes(before: tuple[str, ...], sizes: tuple[int, ...], *, interleaved: bool) -> list[Any]:
    """Class of each plane: its band, and whether it starts its run (no useful previous plane).

    Planes of one band across dates behave alike, so a cube's planes are
    screened a few per class, and each plane then picks among its class's
    best options (:func:`_refine`). Interleaved layouts keep one class per plane.
    """
    count = math.prod(sizes)
    if interleaved or not before:
        return list(range(count))
    out = []
    for flat in range(count):
        pos = dict(zip(before, (int(i) for i in np.unravel_index(flat, sizes)), strict=True))
        out.append((pos.get("b", 0), pos[before[-1]] == 0))
    return out


@dataclass
class _Frames:
    """Sample frames of one layout, split into planes of unsigned components."""

    frames: list[npt.NDArray[Any]]
    """The frames as given (typed), for real measurements."""
    axes: tuple[str, ...]
    encoding: SampleEncoding
    planes: list[npt.NDArray[Any]]
    """Per frame, ``(P, rows, row)`` unsigned components."""
    labels: list[list[Any]]
    """Per frame and plane, a hashable label shared with other layouts of the same plane."""
    classes: list[list[Any]]
    """Per frame and plane, its class: planes of one class share a coding and are screened by sample."""
    filled: list[npt.NDArray[Any]] | None = None
    """Per frame, the planes after geozl's nodata fill, when a nodata stage is considered."""

    @classmethod
    def build(
        cls,
        frames: Sequence[npt.NDArray[Any]],
        axes: tuple[str, ...],
        labels: Sequence[Sequence[Any]] | None = None,
        classes: Sequence[Sequence[Any]] | None = None,
    ) -> _Frames:
        encoding = encoding_for_dtype(frames[0].dtype)
        if encoding.name == "bool" and any(np.asarray(f).view(np.uint8).max(initial=0) > 1 for f in frames):
            raise InvalidInputError("a sample holds a boolean byte other than 0 or 1", field="data", rule="every byte MUST be 0 or 1")
        h = axes.index("h")
        per_sample = encoding.decoded_bytes // encoding.component_bytes
        planes, names = [], []
        for position, frame in enumerate(frames):
            arr = np.ascontiguousarray(frame, dtype=encoding.dtype)
            count = math.prod(arr.shape[:h])
            row = math.prod(arr.shape[h + 1 :]) * per_sample
            planes.append(arr.reshape(-1).view(_UINT[encoding.component_bytes]).reshape(count, arr.shape[h], row))
            names.append(list(labels[position]) if labels is not None else [(position, p) for p in range(count)])
        if classes is None:
            classes = [_plane_classes(axes[:h], f.shape[:h], interleaved=axes[-1] != "w") for f in frames]
        return cls(list(frames), axes, encoding, planes, names, [list(c) for c in classes])

    def with_nodata(self, nodata: int | float) -> bool:
        """Compute the filled planes; return False when no sample holds ``nodata``."""
        filled, seen = [], False
        for frame, planes in zip(self.frames, self.planes, strict=True):
            holes = nodata_mask(np.ascontiguousarray(frame, dtype=self.encoding.dtype), nodata)
            if isinstance(nodata, float) and math.isnan(nodata) and holes.any():
                # Lossless NaN mode marks the first NaN's payload only.
                bits = np.ascontiguousarray(frame, dtype=self.encoding.dtype).view(_UINT[self.encoding.decoded_bytes])
                holes = bits == bits[holes].flat[0]
            seen = seen or bool(holes.any())
            count, rows, row = planes.shape
            flat = planes.reshape(count * rows, row)
            filled.append(_fill_holes(flat, holes.reshape(count * rows, row)).reshape(planes.shape))
        self.filled = filled
        return seen


@dataclass(frozen=True)
class _Option:
    """One way to code a plane: which input, which predictors, which back end."""

    variant: str
    """``x`` the plane, ``d`` its difference from the previous plane, ``px`` its planar residual."""
    head: str
    """Predictor (or ``id``/``delta_1d``) applied to the variant."""
    terminal: str

    @property
    def chain(self) -> str:
        first = "planar>" if self.variant == "px" else ""
        if self.head in ("id", "delta_1d"):
            return f"{self.head}>{self.terminal}"
        return f"{first}{self.head}>zigzag>{self.terminal}"

    @property
    def recipe(self) -> str:
        """The geozl recipe that compresses the variant array exactly like the chain."""
        if self.head in ("id", "delta_1d"):
            return f"{self.head}>{self.terminal}"
        return f"{self.head}>zigzag>{self.terminal}"

    @property
    def reference(self) -> bool:
        return self.variant == "d"


def _terminals(width: int) -> tuple[str, ...]:
    if width == 1:
        return ("entropy", "field_lz", "zstd")
    if width == 2:
        return ("transpose>entropy", "entropy", "field_lz", "zstd", "transpose>zstd")
    return ("transpose>entropy", "field_lz", "zstd", "transpose>zstd")


class _Screen:
    """Compressed sizes of plane variants, memoised across layouts by plane label."""

    def __init__(self) -> None:
        self.sizes: dict[tuple[Any, ...], int] = {}
        self.graphs: dict[tuple[str, int, str], Any] = {}

    def _graph(self, recipe: str, row: int, dtype: np.dtype[Any]) -> Any:
        key = (recipe, row, dtype.str)
        graph = self.graphs.get(key)
        if graph is None:
            graph = self.graphs[key] = geozl.graph(np.zeros((1, row), dtype), recipe, width=row, planes=1)
        return graph

    def size(self, key: tuple[Any, ...], array: Callable[[], npt.NDArray[Any]], recipe: str) -> int:
        """Exact frame size of ``recipe`` on ``array()``, or a huge number if geozl refuses it."""
        found = self.sizes.get((*key, recipe))
        if found is None:
            arr = array()
            try:
                found = len(geozl.compress(arr, graph=self._graph(recipe, arr.shape[-1], arr.dtype)))
            except (RuntimeError, ValueError):
                found = 1 << 62
            self.sizes[(*key, recipe)] = found
        return found


def _plane(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return np.ascontiguousarray(planes[p])


def _residual(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return _planar_residual(planes[p])


def _difference(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return np.ascontiguousarray(planes[p] - planes[p - 1])


_Variant = tuple[tuple[Any, ...], "Callable[[], npt.NDArray[Any]]"]


_PROBE_SIDE: Final = 64


def _centre(make: Callable[[], npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The central ``_PROBE_SIDE`` square of a plane variant."""
    plane = make()
    rows, cols = plane.shape
    r0, c0 = max(0, (rows - _PROBE_SIDE) // 2), max(0, (cols - _PROBE_SIDE) // 2)
    return np.ascontiguousarray(plane[r0 : r0 + _PROBE_SIDE, c0 : c0 + _PROBE_SIDE])


def _variants(frames: _Frames, filled: bool, mode: Mode, references: bool) -> list[list[dict[str, _Variant]]]:
    """Per frame and plane, the variants to screen: name -> (memo key, array maker)."""
    source = frames.filled if filled and frames.filled is not None else frames.planes
    tag = "filled" if filled else "raw"
    out = []
    for planes, labels in zip(source, frames.labels, strict=True):
        per_plane = []
        for p in range(planes.shape[0]):
            entry: dict[str, _Variant] = {"x": ((tag, labels[p], "x"), functools.partial(_plane, planes, p))}
            if mode != "portable":
                entry["px"] = ((tag, labels[p], "px"), functools.partial(_residual, planes, p))
                if references and p > 0:
                    entry["d"] = ((tag, labels[p], "d", labels[p - 1]), functools.partial(_difference, planes, p))
            per_plane.append(entry)
        out.append(per_plane)
    return out


_PER_CLASS: Final = 4
"""Planes screened per class (evenly spread); the rest of the class follows them."""


def _screen(
    screen: _Screen, frames: _Frames, *, mode: Mode, filled: bool, heads: Sequence[str], references: bool, chains: bool = True
) -> dict[Any, dict[_Option, float]]:
    """Return, per plane class, the estimated size of its planes under every option screened.

    Each class is screened on up to :data:`_PER_CLASS` of its planes in every
    sample frame; an estimate is the mean size over those planes times the
    class's plane count.
    """
    width = frames.encoding.component_bytes
    terminals = _terminals(width)
    default = terminals[0]
    variants = _variants(frames, filled, mode, references)
    members: dict[Any, list[tuple[int, int]]] = {}
    for f, per_frame in enumerate(frames.classes):
        for p, cls in enumerate(per_frame):
            members.setdefault(cls, []).append((f, p))
    table: dict[Any, dict[_Option, float]] = {}

    def sizes(subset: list[tuple[int, int]], option: _Option) -> list[int]:
        return [
            screen.size(variants[f][p][option.variant][0], variants[f][p][option.variant][1], option.recipe)
            for f, p in subset
            if option.variant in variants[f][p]
        ]

    def add(cls: Any, subset: list[tuple[int, int]], option: _Option) -> None:
        found = sizes(subset, option)
        if found:
            table[cls][option] = sum(found) / len(found) * len(members[cls])

    def probe(cls: Any, subset: list[tuple[int, int]], option: _Option) -> None:
        # Slow coders (wp_static's fit, LZ back ends) try the centres of the
        # first and last screened planes first, and go on only if they come
        # within 1 % of the best option there: one plane alone can misjudge a
        # class whose planes differ (a cloudy and a clear date).
        best = min(table[cls].items(), key=lambda kv: kv[1])[0] if table[cls] else None
        both = [(f, p) for f, p in subset if option.variant in variants[f][p] and best is not None and best.variant in variants[f][p]]
        probes = list(dict.fromkeys(both[:1] + both[-1:]))
        if best is None or not probes:
            add(cls, subset, option)
            return

        def centre(o: _Option) -> int:
            total = 0
            for f, p in probes:
                key, make = variants[f][p][o.variant]
                total += screen.size((*key, "centre"), functools.partial(_centre, make), o.recipe)
            return total

        if centre(option) <= centre(best) * 1.01:
            add(cls, subset, option)

    portable_heads = ("id", "delta_1d")
    # The runner-up stays alive through every stage: a predictor second on
    # the plane itself may still win on its difference or with another back end.
    finalists = 2
    for cls, positions in members.items():
        step = len(positions) / min(len(positions), _PER_CLASS)
        subset = sorted({positions[int(i * step)] for i in range(min(len(positions), _PER_CLASS))})
        table[cls] = {}
        names = {v for f, p in subset for v in variants[f][p] if chains or v != "px"}
        for head in portable_heads if mode == "portable" else heads:
            (probe if head in _SLOW_HEADS else add)(cls, subset, _Option("x", head, default))
        # The plane itself ranks the predictors; its difference from the
        # previous plane and its planar residual try the best two and the two
        # that usually lead, not all seven again.
        leaders = [o.head for o, _ in sorted(table[cls].items(), key=lambda kv: kv[1])[:finalists]] or ["planar"]
        second = [h for h in dict.fromkeys((*leaders, "med", "planar")) if h in heads]
        for variant in sorted(names - {"x"}):
            for head in second:
                if variant == "px" and head not in _AFTER_PLANAR:
                    continue
                add(cls, subset, _Option(variant, head, default))
        ranked = sorted(table[cls].items(), key=lambda kv: kv[1])[:finalists]
        for option, _ in ranked:
            for terminal in terminals[1:]:
                (probe if terminal in _SLOW_TERMINALS else add)(cls, subset, _Option(option.variant, option.head, terminal))
    return table


_REFINE: Final = 2
"""Options of its class re-measured on every plane before the per-plane pick."""


def _refine(
    screen: _Screen,
    frames: _Frames,
    table: dict[Any, dict[_Option, float]],
    *,
    mode: Mode,
    filled: bool,
    references: bool,
    alternatives: int,
) -> list[dict[_Option, float]]:
    """Exact sizes, per plane position, of the best few options of each plane's class.

    The class screen ranks options on a few planes; here every position is
    measured (over all sample frames) under its class's top options, so each
    plane still gets its own pick.
    """
    variants = _variants(frames, filled, mode, references)
    out: list[dict[_Option, float]] = []
    keep = max(_REFINE, alternatives)
    for p, cls in enumerate(frames.classes[0]):
        ranked = [o for o, _ in sorted(table[cls].items(), key=lambda kv: _cost(*kv))]
        chosen = [o for o in ranked if not o.reference][:keep] + [o for o in ranked if o.reference][:keep]
        sizes: dict[_Option, float] = {}
        for option in chosen:
            entries = [v[p].get(option.variant) for v in variants]
            if all(e is not None for e in entries):
                sizes[option] = float(sum(screen.size(e[0], e[1], option.recipe) for e in entries if e is not None))
        out.append(sizes)
    return out


# --------------------------------------------------------------------------- #
# Measuring candidates
# --------------------------------------------------------------------------- #


def _measure(codec: FrameCodec, frames: Sequence[npt.NDArray[Any]], axes: tuple[str, ...], unit: int | None) -> Candidate | None:
    """Compress the sample for real and predict its decode speed; None if the codec refuses it."""
    sizes: list[int] = []
    lossy_kept = 0
    try:
        for frame in frames:
            if isinstance(codec, BoundedCodec):
                result = codec.encode_frame(frame, axes=axes)
                sizes.append(len(result.data))
                lossy_kept += result.lossy
            else:
                sizes.append(len(codec.encode(frame, axes=axes)))
    except InvalidInputError:
        return None
    lossless_frames = len(frames) - lossy_kept if isinstance(codec, BoundedCodec) else 0
    return Candidate(
        codec,
        unit,
        sum(sizes),
        sum(f.nbytes for f in frames),
        MODEL.decode_speed(codec, frames, axes) / 1e6,
        lossless_frames,
        sizes[0],
    )


def _pick(candidates: list[Candidate], floor: float) -> Candidate:
    """Smallest candidate predicted to decode at the floor; the fastest predicted if none does.

    Candidates are ranked by stored bytes per raw byte, so units measured on
    different frames compare; equal ones keep their order (earlier wins).

    Raises:
        InvalidInputError: no candidate took the samples.
    """
    if not candidates:
        raise InvalidInputError("no candidate codec takes these samples", field="compression")
    ranked = sorted(candidates, key=lambda c: c.compressed_bytes / c.raw_bytes)
    for candidate in ranked:
        if _meets(candidate, floor):
            return candidate
    return max(ranked, key=lambda c: c.decode_mbps)


def _meets(candidate: Candidate, floor: float) -> bool:
    return candidate.decode_mbps * 1e6 >= floor * _FLOOR_HEADROOM


# --------------------------------------------------------------------------- #
# One layout
# --------------------------------------------------------------------------- #


def _cost(option: _Option, size: float) -> float:
    """Size, with slow encoders (wp_static's fit, LZ back ends) charged ``_SLOW_PENALTY``."""
    slow = option.head in _SLOW_HEADS or option.terminal in _SLOW_TERMINALS
    return size * (1 + _SLOW_PENALTY) if slow else size


def _stack_from(
    per_plane: list[dict[_Option, float]], allowed: Callable[[_Option], bool], alternatives: int, nodata: Any
) -> StackCodec | None:
    codings = []
    for plane, options in enumerate(per_plane):
        ranked = sorted(((o, s) for o, s in options.items() if allowed(o) and (plane > 0 or not o.reference)), key=lambda kv: _cost(*kv))
        if not ranked:
            return None
        best = ranked[0][0]
        chains = [o.chain for o, _ in ranked if o.reference == best.reference][:alternatives]
        codings.append(PlaneCoding(tuple(chains), best.reference))
    if len(set(codings)) == 1 and not codings[0].reference:
        return StackCodec((codings[0],), nodata)
    return StackCodec(tuple(codings), nodata)


def _uniform(table: dict[Any, dict[_Option, float]], allowed: Callable[[_Option], bool], alternatives: int) -> list[_Option]:
    """The best options for all planes at once (no references)."""
    tables = list(table.values())
    totals: dict[_Option, float] = {}
    for option in tables[0]:
        if option.reference or not allowed(option):
            continue
        if all(option in options for options in tables):
            totals[option] = sum(options[option] for options in tables)
    return [o for o, _ in sorted(totals.items(), key=lambda kv: _cost(*kv))[:alternatives]]


def _choose_lossless(
    screen: _Screen,
    frames: _Frames,
    *,
    unit: int | None,
    mode: Mode,
    nodata: int | float | None,
    floor: float,
    heads: Sequence[str] = _HEADS,
    references: bool = True,
    chains: bool = True,
    builtins: bool = True,
) -> list[Candidate]:
    """Measure this layout's candidates; return them (the pick is :func:`_pick` of them).

    ``references`` and ``chains`` admit inter-plane differences and a first
    planar stage; ``builtins`` measures OpenZL's built-in graphs too.
    """
    measured: list[Candidate] = []
    alternatives = _MAX_ALTERNATIVES if mode == "max" else 1

    def run(codec: FrameCodec | None) -> Candidate | None:
        if codec is None or any(c.codec == codec for c in measured):
            return None
        found = _measure(codec, frames.frames, frames.axes, unit)
        if found is not None:
            measured.append(found)
        return found

    def probe_builtin(codec: FrameCodec) -> None:
        # OpenZL's generic graphs encode slowly: try the first sample frame,
        # and measure the whole sample only if they come within 5 % there.
        # Compared with candidates known to hold the floor: a smaller one that
        # decodes too slowly must not hide a built-in graph that does not.
        first = [c.first_frame_bytes for c in measured if floor <= 0 or _meets(c, floor)]
        if first and len(frames.frames) > 1:
            try:
                own = len(codec.encode(frames.frames[0], axes=frames.axes))
            except InvalidInputError:
                return
            if own > min(first) * 1.05:
                return
        run(codec)

    def fast_enough(codec: FrameCodec | None) -> bool:
        """Measure a per-plane stack; True when it holds the floor (so slower tiers are not needed)."""
        found = run(codec)
        if found is None:
            return False
        return floor <= 0 or _meets(found, floor)

    # Huffman over whole 2-byte symbols decodes at about 100 MB/s: the
    # terminal the faster tiers drop first.
    slow_terminal = "entropy" if frames.encoding.component_bytes == 2 else None

    def tiers() -> list[Callable[[_Option], bool]]:
        return [
            lambda o: True,
            lambda o: o.variant != "px" and o.head != "wp_static" and o.terminal != slow_terminal,
            lambda o: o.variant != "px" and o.head in _FAST_HEADS and o.terminal != slow_terminal,
            lambda o: o.variant == "x" and o.head in ("delta_w", "delta_1d", "id") and o.terminal != slow_terminal,
        ]

    table = _screen(screen, frames, mode=mode, filled=False, heads=heads, references=references, chains=chains)
    planes = frames.planes[0].shape[0]
    if planes > 1:
        per_plane = _refine(screen, frames, table, mode=mode, filled=False, references=references, alternatives=alternatives)
        for allowed in tiers():
            if fast_enough(_stack_from(per_plane, allowed, alternatives, None)):
                break
    uniform = _uniform(table, lambda o: True, alternatives)
    if uniform:
        run(StackCodec((PlaneCoding(tuple(o.chain for o in uniform)),)))
        first = uniform[0]
        if first.variant == "x" and frames.encoding.name in GEOZL_ENCODINGS and mode != "portable":
            run(GeoZLGraph(first.recipe))
    if nodata is None and frames.encoding.name in ("float32", "float64") and any(np.isnan(f).any() for f in frames.frames):
        nodata = math.nan
    if nodata is not None and mode != "portable" and frames.encoding.name in GEOZL_ENCODINGS and frames.with_nodata(nodata):
        filled = _screen(screen, frames, mode=mode, filled=True, heads=heads, references=references, chains=chains)
        if planes == 1:
            best = _uniform(filled, lambda o: True, alternatives)
            run(StackCodec((PlaneCoding(tuple(o.chain for o in best)),), nodata) if best else None)
        else:
            per_plane = _refine(screen, frames, filled, mode=mode, filled=True, references=references, alternatives=alternatives)
            for allowed in tiers():
                if fast_enough(_stack_from(per_plane, allowed, alternatives, nodata)):
                    break
    if builtins:
        for graph in ("compress", "zstd") if mode == "portable" else ("compress",):
            probe_builtin(OpenZLGraph(graph))
    return measured


def _probe_interleaved(frames: _Frames, *, unit: int | None, mode: Mode) -> list[Candidate]:
    """Measure an interleaved layout with two whole-frame predictors, unscreened.

    Rows there interleave bands or dates sample by sample, which the row
    predictors model poorly (on one cube 2.14:1 against 3.67:1 for ``t b h w``),
    so a probe settles whether such a unit can win at a fraction of the cost.
    """
    terminal = _terminals(frames.encoding.component_bytes)[0]
    heads = ("delta_1d",) if mode == "portable" else ("med",)
    measured = []
    for head in heads:
        chain = f"{head}>{terminal}" if head in ("id", "delta_1d") else f"{head}>zigzag>{terminal}"
        geozl_ok = frames.encoding.name in GEOZL_ENCODINGS and mode != "portable"
        codec: FrameCodec = GeoZLGraph(chain) if geozl_ok else StackCodec((PlaneCoding((chain,)),))
        found = _measure(codec, frames.frames, frames.axes, unit)
        if found is not None:
            measured.append(found)
    return measured


def _choose_bounded(frames: _Frames, *, unit: int | None, bound: ErrorBound, nodata: int | float | None, floor: float) -> list[Candidate]:
    """Measure geozl's quantized recipes on this layout."""
    bounded_encoding_check(frames.encoding, bound)
    width = frames.encoding.component_bytes
    terminals = (*_terminals(width), "pfor")
    kwargs: dict[str, Any] = bound.to_dict()
    measured: list[Candidate] = []

    def run(recipe: str) -> Candidate | None:
        codec = BoundedCodec(recipe, nodata=nodata, **kwargs)
        found = _measure(codec, frames.frames, frames.axes, unit)
        if found is not None:
            measured.append(found)
        return found

    for head in ("planar", "med", "average", "delta_w", "delta_n"):
        run(f"{head}>zigzag>{terminals[0]}")
    if not measured:
        raise InvalidInputError(f"no geozl recipe takes {frames.encoding.name} samples", field="compression")
    best = _pick(measured, floor)
    assert isinstance(best.codec, BoundedCodec)
    if best.lossless_frames == len(frames.frames):
        # Every sample frame went lossless. Frames that merely hold values the
        # quantizers pass over (infinities, several NaN payloads) still honour
        # the bound; a bound geozl refuses for every frame is refused here.
        refusals = [best.codec.check(f, axes=frames.axes) for f in frames.frames]
        if all(refusals):
            field_name = "max_abs_error" if bound.kind == "absolute" else "max_rel_error"
            raise InvalidInputError(
                f"geozl cannot honour {bound.to_dict()} on these {frames.encoding.name} samples: {refusals[0]}",
                field=field_name,
            )
    head = best.codec.recipe.split(">")[0]
    for terminal in terminals[1:]:
        run(f"{head}>zigzag>{terminal}")
    return measured


# --------------------------------------------------------------------------- #
# Public entry points
# --------------------------------------------------------------------------- #


def _crop(
    frames: Sequence[npt.NDArray[Any]], axes: tuple[str, ...], budget: int, min_side: int = _MIN_SIDE
) -> tuple[list[npt.NDArray[Any]], list[int]]:
    """Fit the sample into ``budget`` samples: drop frames, then crop the rest around their centre.

    Crops stay at least ``min_side`` pixels on a side (or the whole frame when
    smaller), since frame headers weigh more in small crops and would skew the
    ranking; frames are dropped (keeping an even spread) before that happens.
    Returns the frames and the positions of those kept.
    """
    frames = [np.asarray(f) for f in frames]
    kept = list(range(len(frames)))
    total = sum(f.size for f in frames)
    if total <= budget:
        return frames, kept
    h, w = axes.index("h"), axes.index("w")

    def smallest(frame: npt.NDArray[Any]) -> int:
        rows, cols = int(frame.shape[h]), int(frame.shape[w])
        return int(frame.size) // (rows * cols) * min(rows, min_side) * min(cols, min_side)

    floor_total = sum(smallest(f) for f in frames)
    if floor_total > budget and len(frames) > 1:
        keep = max(1, min(len(frames), budget * len(frames) // max(floor_total, 1)))
        # Keep whole tiles before clipped edge tiles, evenly spread among them.
        largest = sorted(range(len(frames)), key=lambda i: -frames[i].size)
        full = [i for i in largest if frames[i].size == frames[largest[0]].size] if largest else []
        pool = sorted(full) if len(full) >= keep else sorted(largest[:keep])
        kept = sorted({pool[(2 * k + 1) * len(pool) // (2 * keep)] for k in range(keep)})
        frames = [frames[i] for i in kept]
        total = sum(f.size for f in frames)
    scale = math.sqrt(budget / total) if total > budget else 1.0
    out = []
    for frame in frames:
        rows = min(frame.shape[h], max(min(frame.shape[h], min_side), math.ceil(frame.shape[h] * scale)))
        cols = min(frame.shape[w], max(min(frame.shape[w], min_side), math.ceil(frame.shape[w] * scale)))
        index: list[slice] = [slice(None)] * frame.ndim
        r0, c0 = (frame.shape[h] - rows) // 2, (frame.shape[w] - cols) // 2
        index[h], index[w] = slice(r0, r0 + rows), slice(c0, c0 + cols)
        out.append(np.ascontiguousarray(frame[tuple(index)]))
    return out, kept


def sample_budget(total: int, budget: int = SAMPLE_BUDGET) -> int:
    """Samples to screen for a dataset of ``total`` samples: a thirty-second of it, within bounds.

    >>> sample_budget(6 * 973 * 967)
    176417
    >>> sample_budget(4 * 200 * 300)
    32768
    """
    return int(min(budget, max(SAMPLE_MIN, total // 32)))


def profile_codecs(
    sample_frames: Sequence[npt.NDArray[Any]],
    *,
    axes: Sequence[str],
    encoding: SampleEncoding | str | None = None,
    mode: Mode = "auto",
    nodata: int | float | None = None,
    bound: ErrorBound | None = None,
    decode_floor: float = DECODE_FLOOR,
    budget: int = SAMPLE_BUDGET,
) -> Selection:
    """Measure candidate codecs on sample frames and return the full record.

    Args:
        sample_frames: Frames of one dataset, each in its decoded layout
            (``axes``), with the dtype of the dataset's sample encoding.
        axes: Axis names of every frame, such as ``("b", "h", "w")``.
        encoding: The sample encoding; checked against the frames when given.
        mode: ``auto``, ``max`` or ``portable`` (see the module docstring).
        nodata: The dataset's nodata value, or NaN, if any.
        bound: An error bound for lossy compression; None for lossless.
        decode_floor: Slowest decode accepted, bytes per second; 0 for none.
        budget: Most samples to screen; larger samples are cropped.

    Returns:
        The :class:`Selection`; ``frame_unit`` is None.

    Raises:
        InvalidInputError: no frames, frames of different dtypes or axes
            counts, a bad mode, or a bound the quantizers cannot honour.
    """
    chosen_mode = parse_mode(mode)
    floor = _parse_floor(decode_floor)
    axes_t = tuple(axes)
    frames = [np.asarray(f) for f in sample_frames]
    if not frames:
        raise InvalidInputError("select a codec from at least one sample frame", field="sample_frames")
    if any(f.dtype.newbyteorder("<") != frames[0].dtype.newbyteorder("<") or f.ndim != len(axes_t) for f in frames):
        raise InvalidInputError(f"sample frames must share one dtype and have {len(axes_t)} axes {axes_t}", field="sample_frames")
    enc = encoding_for_dtype(frames[0].dtype)
    if encoding is not None and encoding_for_dtype(encoding if isinstance(encoding, str) else encoding.dtype) != enc:
        raise InvalidInputError(f"sample frames hold {enc.name} samples, not {encoding}", field="encoding")
    nodata = parse_nodata(nodata)
    prepared = _Frames.build(_crop(frames, axes_t, budget)[0], axes_t)
    if bound is not None:
        if chosen_mode == "portable":
            raise InvalidInputError("portable frames cannot be lossy: geozl's quantizers need geozl's decoders", field="compression")
        candidates = _choose_bounded(prepared, unit=None, bound=bound, nodata=nodata, floor=floor)
    else:
        candidates = _choose_lossless(_Screen(), prepared, unit=None, mode=chosen_mode, nodata=nodata, floor=floor)
    best = _pick(candidates, floor)
    return Selection(
        best.codec,
        None,
        chosen_mode,
        floor,
        tuple(candidates),
        tuple(range(len(frames))),
        bound,
    )


def select_codec(
    sample_frames: Sequence[npt.NDArray[Any]],
    *,
    axes: Sequence[str],
    encoding: SampleEncoding | str | None = None,
    mode: Mode = "auto",
    nodata: int | float | None = None,
    bound: ErrorBound | None = None,
    decode_floor: float = DECODE_FLOOR,
) -> FrameCodec:
    """Choose the codec for a dataset from a few of its frames.

    This is the once-per-cube hook: give it a deterministic sample of the
    cube's frames (all with the same ``axes``), write every frame with the
    codec it returns, and keep the codec's JSON form (``codec.to_dict()``) to
    report the choice. :func:`profile_codecs` returns the measurements too.

    Args:
        sample_frames: A few frames of the dataset, in their decoded layout.
        axes: Their axis names, such as ``("h", "w")`` or ``("t", "b", "h", "w")``.
        encoding: The sample encoding, checked against the frames when given.
        mode: ``auto`` (smallest that decodes at ``decode_floor``), ``max``
            (also lets each frame pick among each plane's best three chains)
            or ``portable`` (OpenZL's built-in codecs only).
        nodata: The nodata sentinel or NaN, considered for geozl's nodata stage.
        bound: An :class:`~rumi_core.codecs.ErrorBound` for lossy frames.
        decode_floor: Slowest decode accepted, bytes/s on one core (0: none).

    Returns:
        A registered :class:`~rumi_core.codecs.FrameCodec`.

    Raises:
        InvalidInputError: see :func:`profile_codecs`.
    """
    return profile_codecs(
        sample_frames, axes=axes, encoding=encoding, mode=mode, nodata=nodata, bound=bound, decode_floor=decode_floor
    ).codec


def sample_locations(grid: int, count: int = SAMPLE_LOCATIONS) -> tuple[int, ...]:
    """Return ``count`` tile locations spread evenly over a grid of ``grid`` (row-major) locations.

    >>> sample_locations(16, 4)
    (2, 6, 10, 14)
    """
    count = max(1, min(count, grid))
    return tuple(sorted({min(grid - 1, (2 * i + 1) * grid // (2 * count)) for i in range(count)}))


def _unit_frames(
    cells: list[npt.NDArray[Any]], unit: int, bands: int, times: int, locations: Sequence[int]
) -> tuple[list[Any], tuple[str, ...], list[list[Any]], list[list[Any]] | None]:
    """Cut sampled ``(T, B, h, w)`` cells into the frames of ``unit``, with plane labels and classes."""
    spec = FRAME_UNITS[unit]
    axes = spec.layout(bands=bands, times=times)
    frames: list[Any] = []
    labels: list[list[Any]] = []
    if spec.holds == "tile":
        for loc, cell in zip(locations, cells, strict=True):
            for b in range(bands):
                for t in range(times):
                    frames.append(cell[t, b])
                    labels.append([(loc, t, b)])
        # Every plane of every sampled cell, as the cell units see them: units
        # are compared on the same samples.
        return frames, axes, labels, [[(label[0][2], False)] for label in labels]
    for loc, cell in zip(locations, cells, strict=True):
        current = ["t", "b", "h", "w"]
        block = cell
        for name in ("t", "b"):
            if name not in axes:
                block = block[0] if name == "t" else block[:, 0]
                current.remove(name)
        frame = np.ascontiguousarray(block.transpose([current.index(a) for a in axes]))
        frames.append(frame)
        before = axes[: axes.index("h")]
        sizes = {"t": times, "b": bands}
        names = []
        for flat in range(math.prod(sizes[a] for a in before)):
            pos = dict(zip(before, np.unravel_index(flat, [sizes[a] for a in before]), strict=True))
            names.append((loc, int(pos.get("t", 0)), int(pos.get("b", 0))) if axes[-1] == "w" else (loc, unit, flat))
        labels.append(names)
    return frames, axes, labels, None


def select_layout(
    data: Any,
    *,
    tile_size: tuple[int, int],
    frame_unit: int | Literal["auto"] = "auto",
    access: Literal["tile", "cell"] | None = None,
    mode: Mode = "auto",
    nodata: int | float | None = None,
    bound: ErrorBound | None = None,
    decode_floor: float = DECODE_FLOOR,
    locations: int = SAMPLE_LOCATIONS,
    budget: int = SAMPLE_BUDGET,
    codec: FrameCodec | None = None,
) -> Selection:
    """Choose the frame unit and the codec of a dataset by measuring a sample of it.

    With ``frame_unit="auto"`` every unit valid for ``(B, T)`` that fits
    ``access`` is measured (units 0 and 9 compress identically, so 9 is not)
    and the smallest wins, ties going to the unit with finer access; a frame is
    the smallest thing a reader decodes, so ``access="tile"`` keeps one band and
    date per frame and ``access="cell"`` keeps whole cells.

    Args:
        data: ``(B, Y, X)`` or ``(T, B, Y, X)`` samples (any sliceable array).
        tile_size: ``(tile_length, tile_width)``.
        frame_unit: ``"auto"`` or a frame unit to keep.
        access: ``"tile"``, ``"cell"`` or None (no preference).
        mode, nodata, bound, decode_floor: As for :func:`profile_codecs`.
        locations: Tile locations to sample.
        budget: Most samples to screen.
        codec: A codec to keep; then only the frame unit is chosen.

    Returns:
        The :class:`Selection` with ``frame_unit`` set.

    Raises:
        InvalidInputError: a bad mode, access or unit, or a bound the
            quantizers cannot honour.
    """
    chosen_mode = parse_mode(mode)
    floor = _parse_floor(decode_floor)
    nodata = parse_nodata(nodata)
    shape = tuple(int(d) for d in data.shape)
    times, bands, height, width = (1, *shape) if len(shape) == 3 else shape
    if access not in (None, "tile", "cell"):
        raise InvalidInputError(f"access is 'tile', 'cell' or None, got {access!r}", field="access")
    units = _candidate_units(frame_unit, access, bands=bands, times=times)
    th, tw = tile_size
    across, down = -(-width // tw), -(-height // th)
    picked = sample_locations(across * down, locations)
    cells = []
    for loc in picked:
        row, col = divmod(loc, across)
        block = data[..., row * th : min(height, (row + 1) * th), col * tw : min(width, (col + 1) * tw)]
        cells.append(np.asarray(block if len(shape) == 4 else np.asarray(block)[np.newaxis]))
    cells, kept = _crop(cells, ("t", "b", "h", "w"), sample_budget(math.prod(shape), budget))
    picked = tuple(picked[i] for i in kept)
    screen = _Screen()
    candidates: list[Candidate] = []
    for position, unit in enumerate(units):
        frames, axes, labels, classes = _unit_frames(cells, unit, bands, times, picked)
        prepared = _Frames.build(frames, axes, labels, classes)
        if codec is not None:
            measured = _measure(codec, prepared.frames, axes, unit)
            found = [] if measured is None else [measured]
            if not found:
                continue
        elif bound is not None:
            if chosen_mode == "portable":
                raise InvalidInputError("portable frames cannot be lossy: geozl's quantizers need geozl's decoders", field="compression")
            found = _choose_bounded(prepared, unit=unit, bound=bound, nodata=nodata, floor=floor)
        elif axes[-1] != "w":
            found = _probe_interleaved(prepared, unit=unit, mode=chosen_mode)
        else:
            found = _choose_lossless(screen, prepared, unit=unit, mode=chosen_mode, nodata=nodata, floor=floor, builtins=position == 0)
        candidates.extend(found)
    if not candidates:
        raise InvalidInputError(f"codec {codec!r} takes none of the frame units {units}", field="compression")
    # One pick over every unit: the smallest that holds the floor (earlier,
    # finer units win ties, since sorting is stable).
    best = _pick(candidates, floor)
    return Selection(
        best.codec,
        best.frame_unit,
        chosen_mode,
        floor,
        tuple(candidates),
        picked,
        bound,
    )


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape the frames' bytes: ``{"openzl": ..., "geozl": ...}``.

    A choice is a pure function of the data, the options and these versions;
    two machines with different versions may write different bytes.
    """
    return {name: importlib.metadata.version(name) for name in ("openzl", "geozl")}


@dataclass(frozen=True)
class CompressionChoice:
    """What :func:`rumi_core.write` decided about compression, for the run to report.

    >>> CompressionChoice(OpenZLGraph("zstd"), 0, "explicit").to_dict()["mode"]
    'lossless'
    """

    codec: FrameCodec
    """The codec every frame is written with."""
    frame_unit: int
    """The frame unit."""
    compression: str
    """``auto``, ``max``, ``portable``, or ``explicit`` for a codec the caller gave."""
    bound: ErrorBound | None = None
    """The error bound every sample honours, or None for lossless."""
    selection: Selection | None = None
    """The measurements behind the choice, when a selection ran."""
    libraries: dict[str, str] = dataclasses.field(default_factory=library_versions)
    """Versions of openzl and geozl that chose and wrote the frames (:func:`library_versions`)."""

    @property
    def mode(self) -> str:
        """``lossless`` or ``lossy``."""
        return "lossless" if self.bound is None else "lossy"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record (codec, frame unit, mode, bound, library versions, selection)."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "compression": self.compression,
            "mode": self.mode,
            "bound": None if self.bound is None else self.bound.to_dict(),
            "libraries": dict(self.libraries),
            "selection": None if self.selection is None else self.selection.to_dict(),
        }


def choose_compression(
    data: Any,
    *,
    tile_size: tuple[int, int],
    frame_unit: int | Literal["auto"] = 0,
    compression: Any = "auto",
    access: Literal["tile", "cell"] | None = None,
    max_abs_error: float | None = None,
    max_rel_error: str | None = None,
    nodata: int | float | None = None,
    decode_floor: float = DECODE_FLOOR,
) -> CompressionChoice:
    """Resolve :func:`rumi_core.write`'s compression arguments into a codec and a frame unit.

    ``compression`` is ``"auto"`` (or None), ``"max"`` or ``"portable"`` to
    select by measuring (:func:`select_layout`), or a codec, codec name or JSON
    form to use as given. ``frame_unit="auto"`` measures the units too; an
    integer keeps that unit. ``max_abs_error``/``max_rel_error`` ask for an
    error-bounded lossy write. No selection runs when both the codec and the
    unit are given.

    Raises:
        InvalidInputError: a bad mode, unit, access or bound, a bound on an
            encoding the quantizers cannot honour, or a bound with a codec
            that is not a :class:`~rumi_core.codecs.BoundedCodec`.
    """
    bound = parse_error_bound(max_abs_error=max_abs_error, max_rel_error=max_rel_error)
    nodata = parse_nodata(nodata)
    if compression is None or (isinstance(compression, str) and compression in MODES):
        mode = parse_mode("auto" if compression is None else compression)
        if bound is not None:
            bounded_encoding_check(encoding_for_dtype(data.dtype), bound)
        selection = select_layout(
            data,
            tile_size=tile_size,
            frame_unit=frame_unit,
            access=access,
            mode=mode,
            nodata=nodata,
            bound=bound,
            decode_floor=decode_floor,
        )
        assert selection.frame_unit is not None
        return CompressionChoice(selection.codec, selection.frame_unit, mode, bound, selection)
    codec = parse_codec(compression)
    if bound is not None and not (isinstance(codec, BoundedCodec) and codec.bound == bound):
        raise InvalidInputError(
            f"an error bound needs compression='auto' or 'max' (or a bounded codec with that bound), got {codec!r}",
            field="compression",
        )
    if isinstance(codec, BoundedCodec):
        bound = codec.bound
    if frame_unit == "auto":
        selection = select_layout(data, tile_size=tile_size, access=access, codec=codec, decode_floor=decode_floor, nodata=nodata)
        assert selection.frame_unit is not None
        return CompressionChoice(codec, selection.frame_unit, "explicit", bound, selection)
    if isinstance(frame_unit, bool) or not isinstance(frame_unit, int):
        raise InvalidInputError(f"frame_unit is 'auto' or an integer 0..9, got {frame_unit!r}", field="frame_unit")
    return CompressionChoice(codec, frame_unit, "explicit", bound)


def _candidate_units(frame_unit: object, access: str | None, *, bands: int, times: int) -> list[int]:
    if frame_unit != "auto":
        if isinstance(frame_unit, bool) or not isinstance(frame_unit, int):
            raise InvalidInputError(f"frame_unit is 'auto' or an integer 0..9, got {frame_unit!r}", field="frame_unit")
        return [frame_unit]
    valid = [u for u in FRAME_UNITS.values() if u.is_valid(bands=bands, times=times) and u.value != 9]
    if access == "tile":
        valid = [u for u in valid if u.holds == "tile"]
    elif access == "cell":
        valid = [u for u in valid if u.holds == "cell"] or [u for u in valid if u.holds == "tile"]
    return [u.value for u in valid]


def describe(selection: Selection) -> Iterable[str]:
    """Yield a readable table of a selection's candidates, the chosen one marked."""
    for c in selection.candidates:
        mark = "*" if c.codec == selection.codec and c.frame_unit == selection.frame_unit else " "
        yield (f"{mark} unit {c.frame_unit!s:>4} ratio {c.ratio:7.4f} predicted decode {c.decode_mbps:7.1f} MB/s  {c.codec.to_dict()}")
