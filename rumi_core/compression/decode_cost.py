"""A static model of how fast a frame decodes: the decode-speed floor without a stopwatch.

Specification section *Frames* leaves the graph of every frame to the writer;
:mod:`rumi_core.compression` keeps the smallest candidate whose frames decode at
a floor speed. That choice shapes the file's bytes, so it must be a pure
function of the data, the options and the library versions: timing decodes on
the writing machine made the same call write different files under load. The
decode speed of a candidate is therefore *predicted* from a committed table,
never measured while writing.

The model is additive. Decoding one frame costs ``frame_ns``, each plane of a
:class:`~rumi_core.codecs.StackCodec` (its own OpenZL segment) ``plane_ns``,
each segment its back end's ``segment_ns`` (a Huffman table over 2-byte
symbols is costly to build, so small frames decode far slower per byte), and
each sample the sum of its stages' costs, looked up per stage and sample
component width (1, 2, 4 or 8 bytes):

* a predictor (``planar``, ``med``, ``average``, ``delta_w``, ``delta_n``,
  ``wp_static``) with the zigzag after it, or ``delta_1d``, or ``zigzag``
  alone, ``id`` costing nothing;
* a back end (``transpose>entropy``, ``entropy``, ``field_lz``, ``zstd``,
  ``transpose>zstd``, ``compress``, ``pfor`` and OpenZL's other graphs);
* ``reference`` (the exact difference from the previous plane), ``nodata``
  (geozl's nodata stage) and ``quantize`` (geozl's dequantizer).

A plane coded with several chains (``mode="max"``, OpenZL keeps the smallest
per frame) is charged its slowest chain. The table
(``rumi_core/compression/decode_cost.json``) records the date, machine and library versions
it was fitted with; ``python benchmarks/decode_cost.py --write`` measures the
stages again, refits it, and prints how well it predicts measured speeds.

>>> import numpy as np
>>> from rumi_core.codecs import GeoZLGraph, OpenZLGraph
>>> frames = [np.zeros((256, 256), "<u2")]
>>> fast = MODEL.decode_speed(GeoZLGraph("planar>zigzag>transpose>entropy"), frames, ("h", "w"))
>>> slow = MODEL.decode_speed(GeoZLGraph("wp_static>zigzag>transpose>entropy"), frames, ("h", "w"))
>>> fast > slow > 0
True
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final

from rumi_core.codecs import BoundedCodec, FrameCodec, GeoZLGraph, OpenZLGraph, RasterCodec, StackCodec
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

__all__ = ["MODEL", "WIDTHS", "DecodeCostModel", "recipe_stages"]

WIDTHS: Final = (1, 2, 4, 8)
"""Sample component widths the table covers, in bytes."""

_PREDICTORS: Final = frozenset({"planar", "med", "average", "delta_w", "delta_n", "wp_static"})


def recipe_stages(recipe: str) -> tuple[str, ...]:
    """Split a chain or geozl recipe into the stages the model prices.

    A predictor swallows the zigzag after it (geozl fuses them), ``id`` costs
    nothing, and ``transpose>entropy`` and ``transpose>zstd`` are one back end.

    >>> recipe_stages("planar>med>zigzag>transpose>entropy")
    ('planar', 'med', 'transpose>entropy')
    >>> recipe_stages("id>field_lz")
    ('field_lz',)
    """
    parts = recipe.split(">")
    split = 2 if len(parts) >= 3 and parts[-2] == "transpose" else 1
    head, terminal = parts[:-split], ">".join(parts[-split:])
    out = [s for s in head if s != "id" and not (s == "zigzag" and any(p in _PREDICTORS for p in head))]
    return (*out, terminal)


@dataclass(frozen=True)
class DecodeCostModel:
    """Nanoseconds to decode a frame, per frame, per plane and per sample and stage."""

    frame_ns: float
    """Fixed cost of one frame (header, checksums, the call)."""
    plane_ns: float
    """Fixed cost of one plane segment of a stack."""
    stages: Mapping[str, Mapping[int, float]]
    """Per stage, per component width, nanoseconds per sample."""
    segment_ns: Mapping[str, Mapping[int, float]]
    """Per back end, per component width, nanoseconds per segment it decodes."""
    fitted: Mapping[str, Any] = field(default_factory=dict)
    """When, where and with which libraries the table was fitted."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecodeCostModel:
        """Read the JSON form written by :meth:`to_dict`."""

        def table(key: str) -> dict[str, dict[int, float]]:
            return {name: {int(w): float(ns) for w, ns in per.items()} for name, per in data[key].items()}

        return cls(float(data["frame_ns"]), float(data["plane_ns"]), table("stages"), table("segment_ns"), dict(data.get("fitted", {})))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form, stages sorted, nanoseconds to three decimals."""
        return {
            "fitted": dict(self.fitted),
            "frame_ns": round(self.frame_ns, 3),
            "plane_ns": round(self.plane_ns, 3),
            "stages": _rounded(self.stages),
            "segment_ns": _rounded(self.segment_ns),
        }

    def stage_ns(self, stage: str, width: int) -> float:
        """Nanoseconds per sample of ``stage`` on components of ``width`` bytes.

        Raises:
            InvalidInputError: a stage or width the table does not cover.
        """
        return _lookup(self.stages, stage, width)

    def stages_ns(self, stages: Sequence[str], width: int) -> float:
        """Nanoseconds per sample of a sequence of stages."""
        return sum(self.stage_ns(s, width) for s in stages)

    def segment_seconds(self, stages: Sequence[str], width: int, components: int) -> float:
        """Seconds to decode one segment of ``components`` samples through ``stages`` (back end last)."""
        return (_lookup(self.segment_ns, stages[-1], width) + components * self.stages_ns(stages, width)) * 1e-9

    def plane_stages(self, codec: FrameCodec, width: int, planes: int) -> tuple[tuple[str, ...], ...]:
        """The priced stages of each segment of a frame of ``planes`` planes written with ``codec``, back end last.

        Only a :class:`~rumi_core.codecs.StackCodec` cuts a frame into one
        segment per plane; the other codecs give one entry for the whole frame.

        Raises:
            InvalidInputError: a codec the model has no stages for.
        """
        if isinstance(codec, StackCodec):
            extra = ("nodata",) if codec.nodata is not None else ()
            out = []
            for coding in codec.codings(planes):
                chains = [recipe_stages(c) for c in coding.chains]
                # OpenZL tries every chain and keeps one per frame: price the slowest.
                slowest = max(chains, key=lambda stages: self.stages_ns(stages, width))
                out.append((*extra, *(("reference",) if coding.reference else ()), *slowest))
            return tuple(out)
        if isinstance(codec, BoundedCodec):
            return ((*(("nodata",) if codec.nodata is not None else ()), "quantize", *recipe_stages(codec.recipe)),)
        if isinstance(codec, GeoZLGraph):
            return ((*(("nodata",) if codec.nodata is not None else ()), *recipe_stages(codec.recipe)),)
        if isinstance(codec, OpenZLGraph):
            return ((codec.graph,),)
        raise InvalidInputError(f"the decode-cost model has no stages for codec {codec.name!r}", field="codec")

    def frame_seconds(self, codec: FrameCodec, shape: Sequence[int], axes: Sequence[str], dtype: Any) -> float:
        """Predicted seconds to decode one frame of ``shape`` (axes ``axes``) written with ``codec``."""
        encoding = encoding_for_dtype(dtype)
        if isinstance(codec, RasterCodec):
            codec = codec.select(encoding)
        width = encoding.component_bytes
        h = list(axes).index("h")
        planes = math.prod(shape[:h])
        components = math.prod(shape) * (encoding.bytes_per_sample // width)
        segments = self.plane_stages(codec, width, planes)
        planes_ns = self.plane_ns * len(segments) if isinstance(codec, StackCodec) else 0.0
        share = components // len(segments)
        return (self.frame_ns + planes_ns) * 1e-9 + sum(self.segment_seconds(stages, width, share) for stages in segments)

    def decode_speed(self, codec: FrameCodec, frames: Sequence[npt.NDArray[Any]], axes: Sequence[str]) -> float:
        """Predicted decode speed of ``frames`` written with ``codec``, bytes of decoded samples per second on one core."""
        seconds = sum(self.frame_seconds(codec, f.shape, axes, f.dtype) for f in frames)
        return sum(f.nbytes for f in frames) / seconds


def _lookup(table: Mapping[str, Mapping[int, float]], stage: str, width: int) -> float:
    per = table.get(stage)
    if per is None or width not in per:
        raise InvalidInputError(f"the decode-cost table has no stage {stage!r} for {width}-byte samples", field="codec")
    return per[width]


def _rounded(table: Mapping[str, Mapping[int, float]]) -> dict[str, dict[str, float]]:
    return {name: {str(w): round(ns, 3) for w, ns in sorted(per.items())} for name, per in sorted(table.items())}


def _load() -> DecodeCostModel:
    text = files("rumi_core.compression").joinpath("decode_cost.json").read_text(encoding="utf-8")
    return DecodeCostModel.from_dict(json.loads(text))


MODEL: Final = _load()
"""The committed table, ``rumi_core/compression/decode_cost.json``."""
