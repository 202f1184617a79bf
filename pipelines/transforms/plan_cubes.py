"""Grouping scenes into cubes, as a Beam transform.

Planning needs every scene's metadata at once (which
scenes share a grid, a band set, a time), and that metadata is small, so
:class:`PlanCubes` collects it in one place and runs the pure
:func:`pipelines.planning.grouping.plan_cubes`. It emits the plans and the dead
letters of the scenes that cannot join a cube, and counts both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.planning.grouping import plan_cubes
from pipelines.transforms import frames, read_metadata
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import Collect, inc
from pipelines.transforms.dead_letters import DeadLetter

if TYPE_CHECKING:
    from pipelines.options import ConvertOptions
    from pipelines.planning.plan import CubePlan
    from pipelines.planning.scene import Scene

__all__ = ["PlanCubes", "plan_all"]

READ_STAGES: Final = (read_metadata.STAGE, frames.STAGE)
"""The stages whose dead letters are files that could not be read (or whose pixels failed to): their scenes are incomplete."""


def plan_all(items: list[Scene | DeadLetter], options: ConvertOptions) -> list[CubePlan | DeadLetter]:
    """Plan the cubes of every scene; dead letters already in ``items`` pass through."""
    passed = [i for i in items if isinstance(i, DeadLetter)]
    unread = [d.href for d in passed if d.stage in READ_STAGES]
    plans, rejects = plan_cubes([i for i in items if not isinstance(i, DeadLetter)], options, unread)
    inc(PlanCubes, "cubes", len(plans))
    for letter in rejects:
        inc(PlanCubes, f"dead_letter.{letter.reason}")
    return [*plans, *rejects, *passed]


@dataclass
class PlanCubes(DataclassPTransform[PCollection[Any], PCollection[Any]]):
    """``Scene | DeadLetter`` elements in, ``CubePlan | DeadLetter`` elements out."""

    options: ConvertOptions
    """Grouping, tiling and compression options."""

    def expand(self, scenes: PCollection[Scene | DeadLetter]) -> PCollection[CubePlan | DeadLetter]:
        """Collect, plan, spread the plans out again."""
        out: PCollection[CubePlan | DeadLetter] = (
            scenes | "Collect" >> Collect() | "Plan" >> beam.FlatMap(plan_all, options=self.options) | "Spread" >> beam.Reshuffle()
        )
        return out
