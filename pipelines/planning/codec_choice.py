"""Choosing the frame unit and the codec of a cube: :mod:`rumi_core.compression`, wired into the pipeline.

The choice is made once per cube, never per frame:

* :func:`choose_frame_unit` runs when the cube is planned, from its shape;
* :func:`choose_codec` runs once per cube on a deterministic sample of its
  frames (:func:`pipelines.planning.plan.sample_indices`), and its answer reaches every
  worker as a side input.

An explicit ``--frame-unit``/``--compression`` is honoured as given. For the
selection modes (``auto``, ``max``, ``portable``) :func:`choose_codec` measures
candidate graphs on the sample with :func:`rumi_core.compression.profile_codecs`,
under the cube's error bound when it has one. ``--frame-unit auto`` plans
unit 0, then :func:`measure_frame_unit` measures the units valid for the cube
on sample cells it is handed (the caller reads them); this module does no I/O.

Determinism. The runners must write identical bytes, and the Dask runner may
compute the codec side input more than once in one run, so the choice of a
cube is a pure function of its sample, its options and the library versions:
:mod:`rumi_core.compression` predicts decode speeds from a static cost model
(:mod:`rumi_core.compression.decode_cost`) instead of timing them. The pipeline therefore
applies the same floor as :func:`rumi_core.write`
(:data:`rumi_core.compression.DECODE_FLOOR`), and makes the same choice on any
worker, under any load.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rumi_core.codecs import DEFAULT_CODEC, BoundedCodec, FrameCodec, parse_codec
from rumi_core.compression import DECODE_FLOOR, MODES, profile_codecs, select_layout
from rumi_core.compression.sampling import SAMPLE_BUDGET
from rumi_core.frame_units import FRAME_UNITS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from pipelines.planning.plan import CubePlan

__all__ = ["choose_codec", "choose_frame_unit", "known_frame_unit", "measure_frame_unit", "selection_nodata"]


def choose_frame_unit(requested: int | Literal["auto"], *, bands: int, times: int) -> int:
    """Return the ``frame_unit`` a cube is planned with, before any pixel is read.

    An explicit unit is kept. ``auto`` plans unit 0 (one frame per band, time
    and tile, valid for every ``(B, T)``); :func:`measure_frame_unit` then
    replaces it by measuring the units valid for ``(B, T)`` on sample cells.

    >>> choose_frame_unit("auto", bands=4, times=6)
    0
    """
    del bands, times
    return 0 if requested == "auto" else requested


def known_frame_unit(access: Literal["tile", "cell"] | None, *, bands: int, times: int) -> int | None:
    """The unit ``auto`` ends with when only one fits the access pattern, known without reading a pixel; else None.

    Specification, *Choosing a frame unit*: compression SHOULD be measured when
    more than one unit fits the access pattern. Units 0 and 9 hold the same
    tile and compress identically, so with ``--access tile``, or where no cell
    unit is valid (``B = T = 1``, or ``--access cell`` falling back to tiles),
    unit 0 is the answer and measuring it would only spend time.

    >>> known_frame_unit("tile", bands=4, times=6), known_frame_unit(None, bands=1, times=1), known_frame_unit(None, bands=4, times=1)
    (0, 0, None)
    """
    cells = [u for u in FRAME_UNITS.values() if u.holds == "cell" and u.is_valid(bands=bands, times=times)]
    return 0 if access == "tile" or not cells else None


def measure_frame_unit(plan: CubePlan, data: Any, *, access: Literal["tile", "cell"] | None = None) -> int:
    """Choose the frame unit of an ``auto`` cube by measuring it (``frame_unit="auto"``).

    ``data`` is the cube as a sliceable ``(T, B, Y, X)`` array (a
    :class:`~pipelines.transforms.frames.LazyCube`); :func:`rumi_core.compression.select_layout`
    reads a few sample cells of it, compresses them as tiles and as every cell
    unit valid for ``(B, T)`` and returns the smallest that is predicted to
    decode at :data:`~rumi_core.compression.DECODE_FLOOR`. ``access`` (``--access``) keeps tile or
    cell frames whatever their size, since a frame is the smallest thing a
    reader decodes. Nothing is read when :func:`known_frame_unit` knows the answer.
    """
    known = known_frame_unit(access, bands=len(plan.bands), times=len(plan.times))
    if known is not None:
        return known
    spec = plan.compression_spec()
    selection = select_layout(
        data,
        tile_size=(plan.tile_size, plan.tile_size),
        frame_unit="auto",
        access=access,
        mode="auto" if spec is not None else plan.compression,  # type: ignore[arg-type]  # one of MODES
        nodata=selection_nodata(plan),
        bound=plan.error_bound,
        decode_floor=DECODE_FLOOR,
        codec=parse_codec(spec) if spec is not None else None,
    )
    return plan.frame_unit if selection.frame_unit is None else int(selection.frame_unit)


def selection_nodata(plan: CubePlan) -> int | float | None:
    """The cube's nodata as the selection takes it: an integer for integer samples, NaN kept."""
    if plan.nodata is None:
        return None
    value = float(plan.nodata)
    if np.dtype(plan.dtype).kind in "iu" and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def choose_codec(plan: CubePlan, sample_frames: Sequence[NDArray[Any]], *, budget: int = SAMPLE_BUDGET) -> FrameCodec:
    """Return the codec of every frame of ``plan``, chosen on ``sample_frames``.

    Args:
        plan: The cube; :attr:`~pipelines.planning.plan.CubePlan.compression` is a
            selection mode (``auto``, ``max``, ``portable``) or the codec the
            user asked for; :attr:`~pipelines.planning.plan.CubePlan.error_bound` asks for
            geozl's quantized recipes.
        sample_frames: Decoded samples of a deterministic sample of the
            cube's frames, in the layout of ``plan.layout``.
        budget: Samples the choice measures; the frames are cropped to fit
            (:func:`rumi_core.compression.sampling.crop_frames`).

    Returns:
        The requested codec, or the one :func:`rumi_core.compression.profile_codecs`
        picks at :data:`~rumi_core.compression.DECODE_FLOOR`.

    Raises:
        rumi_core.InvalidInputError: no sample frame, or a bound the
            quantizers cannot honour for these samples.
    """
    spec = plan.compression_spec()
    if spec is not None:
        return parse_codec(spec)
    assert plan.compression in MODES
    bound = plan.error_bound
    if not sample_frames:  # no sample frame could be read: the frame stage reports those cubes
        if bound is None:
            return DEFAULT_CODEC
        return BoundedCodec(nodata=selection_nodata(plan), **bound.to_dict())  # type: ignore[arg-type]
    selection = profile_codecs(
        sample_frames,
        axes=plan.layout.frame_axes,
        encoding=plan.layout.encoding,
        mode=plan.compression,  # type: ignore[arg-type]  # one of MODES, checked above
        nodata=selection_nodata(plan),
        bound=bound,
        decode_floor=DECODE_FLOOR,
        budget=budget,
    )
    return selection.codec
