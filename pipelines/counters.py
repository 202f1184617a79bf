"""Beam counters, named after the transform class that counts.

Style guide, *Beam transforms*: count what flows through each transform
(elements, bytes, milliseconds). The namespace of every counter is the class
name of the transform, so ``ReadSceneMetadata/scenes`` counts the scenes that
transform read and ``PlanCubes/dead_letter.off-grid`` the off-grid scenes it
rejected. Runners that report metrics (FnApiRunner, the portable runner)
show them in the run summary; others (the Dask runner) ignore them.
"""

from __future__ import annotations

from apache_beam.metrics.metric import Metrics

__all__ = ["inc"]


def inc(transform: type, name: str, value: int = 1) -> None:
    """Add ``value`` to the counter ``name`` of ``transform``'s namespace."""
    Metrics.counter(transform.__name__, name).inc(value)
