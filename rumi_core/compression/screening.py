"""Screening: exact geozl frame sizes of the ways each sampled plane can be coded.

Specification section *Frames* leaves every frame's graph to the writer. The
planes of the sampled frames (the images stacked before ``h``) are compressed
with each geozl predictor (:data:`HEADS`); the best two of them and the usual
leaders (``med``, ``planar``) also run on the plane's exact difference from
the previous plane (the inter-band or inter-date difference) and on the
residual of a first ``planar`` stage; the best two options then try every
back end the width allows (:func:`terminals`), so a runner-up is never
dropped after one stage. Slow coders try the centres of two planes first and
go on only if they come within 1 %. Planes of one band share a class screened
on up to four of its planes (a long time series has hundreds); each plane
then gets exact sizes under its class's best options (:func:`refine`).

Sizes are memoised across frame units by plane label (:class:`SizeCache`):
units are compared on the same sampled planes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import geozl
import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    import numpy.typing as npt

    from rumi_core.compression.sampling import SampleFrames

__all__ = [
    "FAST_HEADS",
    "HEADS",
    "PORTABLE_HEADS",
    "PlaneOption",
    "SizeCache",
    "option_cost",
    "refine",
    "screen_classes",
    "terminals",
]

HEADS: Final = ("planar", "med", "average", "delta_w", "delta_n", "wp_static", "id")
"""The geozl predictors screened on every plane (``id``: none)."""
PORTABLE_HEADS: Final = ("id", "delta_1d")
"""The heads OpenZL's built-in codecs offer (``mode="portable"``)."""
FAST_HEADS: Final = ("planar", "delta_w", "delta_n", "id")
"""Predictors kept when a per-plane stack must decode faster."""
_AFTER_PLANAR: Final = ("planar", "med", "average", "delta_w", "delta_n")
_SLOW_HEADS: Final = frozenset({"wp_static"})
_SLOW_TERMINALS: Final = frozenset({"field_lz", "zstd", "transpose>zstd"})
_SLOW_PENALTY: Final = 0.005
"""A slow encoder must save more than this fraction to be preferred: wp_static
encodes at 35-80 MB/s against 300-650 for the other predictors."""
_FINALISTS: Final = 2
"""Options of a class kept alive through every screening stage: a predictor
second on the plane itself may still win on its difference or with another back end."""
_PER_CLASS: Final = 4
"""Planes screened per class (evenly spread); the rest of the class follows them."""
_REFINE: Final = 2
"""Options of its class re-measured on every plane before the per-plane pick."""
_PROBE_SIDE: Final = 64
_PROBE_MARGIN: Final = 1.01
_REFUSED: Final = 1 << 62
"""The size recorded for a recipe geozl refuses: larger than any real frame."""


def terminals(width: int) -> tuple[str, ...]:
    """The back ends screened for samples of ``width``-byte components, the default first.

    >>> terminals(1)
    ('entropy', 'field_lz', 'zstd')
    """
    if width == 1:
        return ("entropy", "field_lz", "zstd")
    if width == 2:
        return ("transpose>entropy", "entropy", "field_lz", "zstd", "transpose>zstd")
    return ("transpose>entropy", "field_lz", "zstd", "transpose>zstd")


@dataclass(frozen=True)
class PlaneOption:
    """One way to code a plane: which input, which predictor, which back end."""

    variant: str
    """``x`` the plane, ``d`` its difference from the previous plane, ``px`` its planar residual."""
    head: str
    """Predictor (or ``id``/``delta_1d``) applied to the variant."""
    terminal: str
    """The back end, one of :func:`terminals`."""

    @property
    def chain(self) -> str:
        """The chain of a :class:`~rumi_core.codecs.PlaneCoding` coding the plane this way."""
        first = "planar>" if self.variant == "px" else ""
        if self.head in PORTABLE_HEADS:
            return f"{self.head}>{self.terminal}"
        return f"{first}{self.head}>zigzag>{self.terminal}"

    @property
    def recipe(self) -> str:
        """The geozl recipe that compresses the variant array exactly like the chain."""
        if self.head in PORTABLE_HEADS:
            return f"{self.head}>{self.terminal}"
        return f"{self.head}>zigzag>{self.terminal}"

    @property
    def reference(self) -> bool:
        """Whether the plane is coded as its difference from the previous plane."""
        return self.variant == "d"

    @property
    def slow(self) -> bool:
        """Whether a slow encoder (wp_static's fit, an LZ back end) is involved."""
        return self.head in _SLOW_HEADS or self.terminal in _SLOW_TERMINALS


def option_cost(option: PlaneOption, size: float) -> float:
    """Size, with slow encoders (wp_static's fit, LZ back ends) charged ``_SLOW_PENALTY``."""
    return size * (1 + _SLOW_PENALTY) if option.slow else size


class SizeCache:
    """Compressed sizes of plane variants, memoised across layouts by plane label.

    Only the sizes are memoised, and only the last geozl graph is kept: a
    graph keeps the working buffers of the compression it ran, so the twenty
    graphs a search of four 512 x 512 uint16 frames with nodata builds held
    11 MiB at once (the search's peak went from +28 to +18 MiB with one kept).
    Screening asks for one recipe many times in a row, so keeping one graph
    builds 41 instead of 20, at 0.03-0.1 ms each.
    """

    def __init__(self) -> None:
        self._sizes: dict[tuple[Hashable, ...], int] = {}
        self._graph_key: tuple[str, int, str] | None = None
        self._last_graph: Any = None

    def _graph(self, recipe: str, row: int, dtype: np.dtype[Any]) -> Any:
        key = (recipe, row, dtype.str)
        if key != self._graph_key:
            self._last_graph = None  # its buffers go before the next graph's are allocated
            self._last_graph = geozl.graph(np.zeros((1, row), dtype), recipe, width=row, planes=1)
            self._graph_key = key
        return self._last_graph

    def size(self, key: tuple[Hashable, ...], array: Callable[[], npt.NDArray[Any]], recipe: str) -> int:
        """Exact frame size of ``recipe`` on ``array()``, or a huge number if geozl refuses it."""
        found = self._sizes.get((*key, recipe))
        if found is None:
            arr = array()
            try:
                found = len(geozl.compress(arr, graph=self._graph(recipe, arr.shape[-1], arr.dtype)))
            except (RuntimeError, ValueError):
                found = _REFUSED
            self._sizes[(*key, recipe)] = found
        return found


def _planar_residual(plane: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """geozl's ``planar`` predictor residual (``W + N - NW``, missing neighbours zero), wrapping."""
    prediction = np.zeros_like(plane)
    prediction[1:, 1:] = plane[1:, :-1] + plane[:-1, 1:] - plane[:-1, :-1]
    prediction[0, 1:] = plane[0, :-1]
    prediction[1:, 0] = plane[:-1, 0]
    return np.ascontiguousarray(plane - prediction)


def _plane(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return np.ascontiguousarray(planes[p])


def _residual(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return _planar_residual(planes[p])


def _difference(planes: npt.NDArray[Any], p: int) -> npt.NDArray[Any]:
    return np.ascontiguousarray(planes[p] - planes[p - 1])


def _centre(make: Callable[[], npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The central ``_PROBE_SIDE`` square of a plane variant."""
    plane = make()
    rows, cols = plane.shape
    r0, c0 = max(0, (rows - _PROBE_SIDE) // 2), max(0, (cols - _PROBE_SIDE) // 2)
    return np.ascontiguousarray(plane[r0 : r0 + _PROBE_SIDE, c0 : c0 + _PROBE_SIDE])


_Variant = tuple[tuple["Hashable", ...], "Callable[[], npt.NDArray[Any]]"]
"""A plane variant: its memo key and a function making its array."""


def _variants(frames: SampleFrames, *, portable: bool) -> list[list[dict[str, _Variant]]]:
    """Per frame and plane, the variants to screen: name -> (memo key, array maker)."""
    tag = "filled" if frames.filled else "raw"
    out = []
    for planes, labels in zip(frames.planes, frames.labels, strict=True):
        per_plane = []
        for p in range(planes.shape[0]):
            entry: dict[str, _Variant] = {"x": ((tag, labels[p], "x"), functools.partial(_plane, planes, p))}
            if not portable:
                entry["px"] = ((tag, labels[p], "px"), functools.partial(_residual, planes, p))
                if p > 0:
                    entry["d"] = ((tag, labels[p], "d", labels[p - 1]), functools.partial(_difference, planes, p))
            per_plane.append(entry)
        out.append(per_plane)
    return out


def _ranked(table: Mapping[PlaneOption, float]) -> list[PlaneOption]:
    """Options by estimated size, ties in the order screened."""
    return [o for o, _ in sorted(table.items(), key=lambda kv: kv[1])]


@dataclass(frozen=True)
class _ClassScreen:
    """The screened planes of one class, and the cache that sizes them."""

    cache: SizeCache
    variants: list[list[dict[str, _Variant]]]
    subset: list[tuple[int, int]]
    """(frame, plane) positions screened, evenly spread over the class."""
    members: int
    """Planes in the class: an estimate is the mean size over ``subset`` times this."""

    def estimate(self, option: PlaneOption) -> float | None:
        """Estimated size of the class's planes under ``option``; None when no screened plane has the variant."""
        found = [
            self.cache.size(self.variants[f][p][option.variant][0], self.variants[f][p][option.variant][1], option.recipe)
            for f, p in self.subset
            if option.variant in self.variants[f][p]
        ]
        return sum(found) / len(found) * self.members if found else None

    def near_best(self, option: PlaneOption, table: Mapping[PlaneOption, float]) -> bool:
        """Whether a slow coder comes within 1 % of the best option so far on two plane centres.

        Slow coders (wp_static's fit, LZ back ends) try the centres of the
        first and last screened planes first: one plane alone can misjudge a
        class whose planes differ (a cloudy and a clear date).
        """
        if not table:
            return True
        best = min(table.items(), key=lambda kv: kv[1])[0]
        both = [(f, p) for f, p in self.subset if option.variant in self.variants[f][p] and best.variant in self.variants[f][p]]
        probes = list(dict.fromkeys(both[:1] + both[-1:]))
        if not probes:
            return True
        return self._centres(option, probes) <= self._centres(best, probes) * _PROBE_MARGIN

    def _centres(self, option: PlaneOption, probes: Sequence[tuple[int, int]]) -> int:
        total = 0
        for f, p in probes:
            key, make = self.variants[f][p][option.variant]
            total += self.cache.size((*key, "centre"), functools.partial(_centre, make), option.recipe)
        return total

    def extend(self, table: Mapping[PlaneOption, float], options: Iterable[tuple[PlaneOption, bool]]) -> dict[PlaneOption, float]:
        """Return ``table`` with the estimates of ``options`` (option, whether to probe first) added in order."""
        out = dict(table)
        for option, probe in options:
            if probe and not self.near_best(option, out):
                continue
            size = self.estimate(option)
            if size is not None:
                out[option] = size
        return out

    def screen(self, *, portable: bool, width: int) -> dict[PlaneOption, float]:
        """Estimated sizes of the class's planes under every option screened, in the order screened."""
        backs = terminals(width)
        names = {v for f, p in self.subset for v in self.variants[f][p]}
        table = self.extend({}, ((PlaneOption("x", h, backs[0]), h in _SLOW_HEADS) for h in (PORTABLE_HEADS if portable else HEADS)))
        # The plane itself ranks the predictors; its difference from the
        # previous plane and its planar residual try the best two and the two
        # that usually lead, not all seven again.
        leaders = [o.head for o in _ranked(table)[:_FINALISTS]] or ["planar"]
        second = [h for h in dict.fromkeys((*leaders, "med", "planar")) if h in HEADS]
        others = [PlaneOption(v, h, backs[0]) for v in sorted(names - {"x"}) for h in second if v != "px" or h in _AFTER_PLANAR]
        table = self.extend(table, ((o, False) for o in others))
        finalists = _ranked(table)[:_FINALISTS]
        more = [PlaneOption(o.variant, o.head, t) for o in finalists for t in backs[1:]]
        return self.extend(table, ((o, o.terminal in _SLOW_TERMINALS) for o in more))


def _class_members(frames: SampleFrames) -> dict[Hashable, list[tuple[int, int]]]:
    members: dict[Hashable, list[tuple[int, int]]] = {}
    for f, per_frame in enumerate(frames.classes):
        for p, cls in enumerate(per_frame):
            members.setdefault(cls, []).append((f, p))
    return members


def screen_classes(cache: SizeCache, frames: SampleFrames, *, portable: bool) -> dict[Hashable, dict[PlaneOption, float]]:
    """Return, per plane class, the estimated size of its planes under every option screened.

    Each class is screened on up to :data:`_PER_CLASS` of its planes in every
    sample frame; an estimate is the mean size over those planes times the
    class's plane count.
    """
    variants = _variants(frames, portable=portable)
    table: dict[Hashable, dict[PlaneOption, float]] = {}
    for cls, positions in _class_members(frames).items():
        count = min(len(positions), _PER_CLASS)
        step = len(positions) / count
        subset = sorted({positions[int(i * step)] for i in range(count)})
        one = _ClassScreen(cache, variants, subset, len(positions))
        table[cls] = one.screen(portable=portable, width=frames.encoding.component_bytes)
    return table


def refine(
    cache: SizeCache,
    frames: SampleFrames,
    table: Mapping[Hashable, Mapping[PlaneOption, float]],
    *,
    portable: bool,
    alternatives: int,
) -> tuple[dict[PlaneOption, float], ...]:
    """Exact sizes, per plane position, of the best few options of each plane's class.

    The class screen ranks options on a few planes; here every position is
    measured (over all sample frames) under its class's top options, so each
    plane still gets its own pick.
    """
    variants = _variants(frames, portable=portable)
    out: list[dict[PlaneOption, float]] = []
    keep = max(_REFINE, alternatives)
    for p, cls in enumerate(frames.classes[0]):
        ranked = [o for o, _ in sorted(table[cls].items(), key=lambda kv: option_cost(*kv))]
        chosen = [o for o in ranked if not o.reference][:keep] + [o for o in ranked if o.reference][:keep]
        sizes: dict[PlaneOption, float] = {}
        for option in chosen:
            entries = [v[p].get(option.variant) for v in variants]
            if all(e is not None for e in entries):
                sizes[option] = float(sum(cache.size(e[0], e[1], option.recipe) for e in entries if e is not None))
        out.append(sizes)
    return tuple(out)
