"""Compressing frames in parallel, with one codec chosen per cube.

:class:`ChooseCodecs` reads a deterministic sample of
each cube's frames (:func:`pipelines.planning.plan.sample_indices`) and asks
:func:`pipelines.planning.codec_choice.choose_codec` once per cube; the answer, a codec's
JSON form, reaches every worker of :class:`CompressFrames` as a side input.
Each frame then becomes one self-contained OpenZL frame
(:meth:`rumi_core.FrameCodec.encode`), so frames compress independently and in
any order.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import apache_beam as beam
import numpy as np
from apache_beam.pvalue import AsDict, PCollection

from pipelines.errors import SceneError
from pipelines.planning.codec_choice import choose_codec, measure_frame_unit
from pipelines.planning.plan import sample_indices
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.frames import FrameFailure, LazyCube, RasterDoFn, read_frame
from rumi_core.codecs import FrameCodec, codec_from_dict, release_contexts
from rumi_core.compression.sampling import SAMPLE_BUDGET, crop_windows
from rumi_core.heap import release_free_memory

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from numpy.typing import NDArray

    from pipelines.planning.plan import CubePlan
    from pipelines.rasters import RasterCache
    from pipelines.transforms.frames import FrameKey

__all__ = ["CODEC_SAMPLE_FRAMES", "ChooseCodecs", "ChooseFrameUnits", "CompressFrames", "compress_frame", "select_codec"]

CODEC_SAMPLE_FRAMES: Final = 4
"""How many frames of a cube the codec choice sees."""


def select_codec(plan: CubePlan, rasters: RasterCache, *, budget: int = SAMPLE_BUDGET) -> FrameCodec:
    """Read a deterministic sample of a cube's frames and choose its codec.

    Only the part of each frame the choice measures is read: the crops
    :func:`~rumi_core.compression.profile_codecs` would cut from the whole
    frames to fit its sample budget (:func:`~rumi_core.compression.sampling.crop_windows`).
    A frame of a cell unit holds every date, so the four whole sample frames
    of a 73-date cube of 4 bands and 512 x 512 tiles would be 584 MiB. A
    sample frame that cannot be read is left out; the frame stage reports it.
    """
    layout = plan.layout
    indices = sample_indices(layout.frame_count, CODEC_SAMPLE_FRAMES)
    kept, crops = crop_windows([layout.frame_shape(i) for i in indices], layout.frame_axes, budget)
    samples: list[NDArray[Any]] = []
    for position, crop in zip(kept, crops, strict=True):
        try:
            samples.append(read_frame(plan, indices[position], rasters, crop=crop))
        except SceneError:
            continue
    # Already fitted: profile_codecs must not crop them again (its crops of crops differ).
    return choose_codec(plan, samples, budget=max(budget, sum(sample.size for sample in samples)))


def compress_frame(samples: NDArray[Any], codec: FrameCodec, axes: tuple[str, ...]) -> bytes:
    """Compress one frame's samples (in its decoded layout) into one OpenZL frame."""
    return codec.encode(np.ascontiguousarray(samples), axes=axes)


def _release_search() -> None:
    """Free what a codec or frame-unit search built for candidates, before this worker compresses frames.

    The search's contexts stayed in the worker's heap for the rest of the run:
    a worker that chose the codec of a 20-date cube of 2048² scenes held 45 MiB
    more than the other (measured in its RSS through the run).
    """
    release_contexts()
    release_free_memory()


class _FrameUnitFn(RasterDoFn):
    def __init__(self, access: Literal["tile", "cell"] | None) -> None:
        RasterDoFn.__init__(self)
        self.access = access

    def process(self, plan: CubePlan) -> Iterator[CubePlan]:
        try:
            unit = measure_frame_unit(plan, LazyCube(plan, self.rasters), access=self.access)
        except SceneError:
            unit = plan.frame_unit  # an unreadable sample: the frame stage reports the scene
        _release_search()
        inc(ChooseFrameUnits, f"frame_unit.{unit}")
        yield plan if unit == plan.frame_unit else dataclasses.replace(plan, frame_unit=unit)


@dataclass
class ChooseFrameUnits(DataclassPTransform[PCollection["CubePlan"], PCollection["CubePlan"]]):
    """Replace each planned cube's frame unit by the one measured on its sample cells (``--frame-unit auto``)."""

    access: Literal["tile", "cell"] | None = None
    """``--access``: keep tile or cell frames; None keeps the smallest."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[CubePlan]:
        """One ParDo."""
        measured: PCollection[CubePlan] = plans | "Measure" >> beam.ParDo(_FrameUnitFn(self.access))
        return measured


class _ChooseFn(RasterDoFn):
    def process(self, plan: CubePlan) -> Iterator[tuple[str, dict[str, Any]]]:
        codec = select_codec(plan, self.rasters)
        _release_search()
        inc(ChooseCodecs, "cubes")
        yield plan.cube_id, codec.to_dict()


@dataclass
class ChooseCodecs(DataclassPTransform[PCollection["CubePlan"], PCollection[tuple[str, dict[str, Any]]]]):
    """``(cube_id, codec JSON)`` for every planned cube, chosen once per cube on a sample."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[tuple[str, dict[str, Any]]]:
        """One ParDo."""
        codecs: PCollection[tuple[str, dict[str, Any]]] = plans | "Choose" >> beam.ParDo(_ChooseFn())
        return codecs


class _CompressFn(beam.DoFn):
    def __init__(self) -> None:
        beam.DoFn.__init__(self)

    def setup(self) -> None:
        self.codecs: dict[str, FrameCodec] = {}
        self.axes: dict[str, tuple[str, ...]] = {}

    def process(
        self,
        element: tuple[FrameKey, NDArray[Any] | FrameFailure],
        codecs: Mapping[str, dict[str, Any]],
        plans: Mapping[str, CubePlan],
    ) -> Iterator[tuple[FrameKey, bytes | FrameFailure]]:
        key, samples = element
        if isinstance(samples, FrameFailure):
            yield key, samples
            return
        codec = self.codecs.get(key.cube_id)
        if codec is None:
            codec = self.codecs[key.cube_id] = codec_from_dict(codecs[key.cube_id])
            self.axes[key.cube_id] = plans[key.cube_id].layout.frame_axes
        start = time.perf_counter()
        frame = compress_frame(samples, codec, self.axes[key.cube_id])
        inc(CompressFrames, "frames")
        inc(CompressFrames, "input_bytes", samples.nbytes)
        inc(CompressFrames, "output_bytes", len(frame))
        inc(CompressFrames, "msec", round(1000 * (time.perf_counter() - start)))
        yield key, frame


@dataclass
class CompressFrames(DataclassPTransform[PCollection[tuple["FrameKey", Any]], PCollection[tuple["FrameKey", Any]]]):
    """Compress ``(FrameKey, samples)`` into ``(FrameKey, frame bytes)`` .

    :class:`~pipelines.transforms.frames.FrameFailure` values pass through.
    """

    codecs: PCollection[tuple[str, dict[str, Any]]]
    """Output of :class:`ChooseCodecs`, a dict side input."""
    plans: PCollection[CubePlan]
    """The planned cubes (for each frame's axes), a dict side input."""

    def expand(self, frames: PCollection[tuple[FrameKey, Any]]) -> PCollection[tuple[FrameKey, Any]]:
        """One ParDo with the codecs as a side input."""
        by_id = self.plans | "ById" >> beam.Map(lambda plan: (plan.cube_id, plan))
        out: PCollection[tuple[FrameKey, Any]] = frames | "Compress" >> beam.ParDo(
            _CompressFn(), codecs=AsDict(self.codecs), plans=AsDict(by_id)
        )
        return out
