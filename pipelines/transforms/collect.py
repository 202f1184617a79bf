"""Collecting a PCollection into one list, on every runner.

Planning, the manifest and the dead-letter output each need all their elements
in one place. Beam's ``combiners.ToList`` does that through a side input (to
emit a default for an empty input), and the Dask runner computes a side input
by recomputing its whole lineage, which would run the steps before it (frame
writes, file assembly) a second time. :class:`Collect` uses a GroupByKey on a
constant key instead, seeded with one marker so that an empty input still
gives one (empty) list.

:func:`inc` counts what flows through each transform (style guide, *Beam
transforms*: elements, bytes, milliseconds). The namespace of every counter is
the class name of the transform, so ``ReadSceneMetadata/scenes`` counts the
scenes that transform read and ``PlanCubes/dead_letter.off-grid`` the
off-grid scenes it rejected. Runners that report metrics (FnApiRunner, the
portable runner) show them in the run summary; others (the Dask runner)
ignore them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.metrics.metric import Metrics
from apache_beam.pvalue import PCollection

from pipelines.transforms.base import DataclassPTransform

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Collect", "WriteCollected", "inc"]


class _Seed:
    """Marks the element that makes an empty input produce an empty list."""


def _key(item: Any) -> tuple[int, Any]:
    return 0, item


def _unseed(kv: tuple[int, Any]) -> list[Any]:
    return [v for v in kv[1] if not isinstance(v, _Seed)]


@dataclass
class Collect(DataclassPTransform[PCollection[Any], PCollection[list[Any]]]):
    """Every element of the input as one list (one element, also for an empty input)."""

    def expand(self, items: PCollection[Any]) -> PCollection[list[Any]]:
        """Key by a constant, add the seed, group, drop the seed."""
        keyed = items | "Key" >> beam.Map(_key)
        seed = items.pipeline | "Seed" >> beam.Create([(0, _Seed())])
        out: PCollection[list[Any]] = (keyed, seed) | "Join" >> beam.Flatten() | "Group" >> beam.GroupByKey() | "List" >> beam.Map(_unseed)
        return out


@dataclass
class WriteCollected(DataclassPTransform[PCollection[Any], PCollection[int]]):
    """Collect every element, then write them all to one file; the output is the count written.

    A subclass overrides :meth:`write_all`, the writer of its file (or
    :meth:`writer`, when the write takes more than the file).
    """

    path: str
    """The output file."""
    temp_dir: str | None = None
    """Where a local file's temporary is made (the run's work folder, removed with it); None: beside the file."""

    @staticmethod
    def write_all(items: list[Any], path: str, temp_dir: str | None) -> int:
        """Write the collected items to ``path`` (its temporary in ``temp_dir``) and return how many were written.

        A static method, so the write step pickles without the transform.
        """
        raise NotImplementedError(f"a WriteCollected subclass writes {len(items)} items to {path}")

    def writer(self) -> Callable[[list[Any]], int]:
        """The write step: :meth:`write_all` of this transform's file (a partial, so it pickles without the transform)."""
        return functools.partial(self.write_all, path=self.path, temp_dir=self.temp_dir)

    def expand(self, items: PCollection[Any]) -> PCollection[int]:
        """Collect, write."""
        out: PCollection[int] = items | "Collect" >> Collect() | "Write" >> beam.Map(self.writer())
        return out


def inc(transform: type | str, name: str, value: int = 1) -> None:
    """Add ``value`` to the counter ``name`` of ``transform``'s namespace.

    ``transform`` is the transform class, or its name where importing the
    class would be circular (a module the transform's own module imports).
    """
    _counter(transform if isinstance(transform, str) else transform.__name__, name).inc(value)


@functools.cache
def _counter(namespace: str, name: str) -> Metrics.DelegatingCounter:
    """One counter object per name: it adds to the current bundle's metrics when incremented, so it can be made once.

    Making one per call (a metric name and a counter object) cost about 10 us
    a call, a tenth of a frame's time at 64-pixel tiles, where each frame is
    counted nine times.
    """
    return Metrics.counter(namespace, name)
