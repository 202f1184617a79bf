"""Choosing the frame unit and the codec of a cube: the hook issue 3 fills in.

Issue 4, *Compressing frames in parallel*, and issue 3, *Lossless by default,
chosen per dataset*. The choice is made once per cube, never per frame:

* :func:`choose_frame_unit` runs when the cube is planned, from its shape;
* :func:`choose_codec` runs once per cube on a deterministic sample of its
  frames (:func:`pipelines.plan.sample_indices`), and its answer reaches every
  worker as a side input.

An explicit ``--frame-unit``/``--compression`` is honoured as given. For
``auto``, both functions return rumi_core's defaults (tile frames, unit 0,
and :data:`rumi_core.DEFAULT_CODEC`) until issue 3 replaces their bodies with
measurements on the sample. The module does no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from rumi_core.codecs import DEFAULT_CODEC, FrameCodec, parse_codec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from pipelines.plan import CubePlan

__all__ = ["choose_codec", "choose_frame_unit"]


def choose_frame_unit(requested: int | Literal["auto"], *, bands: int, times: int) -> int:
    """Return the ``frame_unit`` of a cube with ``bands`` bands and ``times`` time steps.

    ``auto`` gives 0 (one frame per band, time and tile), valid for every
    ``(B, T)``; issue 3 will measure the cell units against it.

    >>> choose_frame_unit("auto", bands=4, times=6)
    0
    """
    del bands, times  # issue 3: the cell units valid for (B, T) are candidates
    return 0 if requested == "auto" else requested


def choose_codec(plan: CubePlan, sample_frames: Sequence[NDArray[Any]]) -> FrameCodec:
    """Return the codec of every frame of ``plan``, chosen on ``sample_frames``.

    Args:
        plan: The cube; :attr:`~pipelines.plan.CubePlan.compression` is
            ``"auto"`` or the codec the user asked for.
        sample_frames: Decoded samples of a deterministic sample of the
            cube's frames, in the layout of ``plan.layout`` (issue 3 measures
            candidate graphs on them).

    Returns:
        The requested codec, or for ``auto`` :data:`rumi_core.DEFAULT_CODEC`.
    """
    del sample_frames  # issue 3: measure candidates on the sample
    spec = plan.compression_spec()
    return DEFAULT_CODEC if spec is None else parse_codec(spec)
