"""The base of the dataclass transforms of ``rumi convert``.

Every step of the pipeline is a small dataclass PTransform (style guide, *Beam
transforms*): its fields are its whole configuration, so a transform prints,
compares and documents itself. The dataclass-generated ``__init__`` sets the
fields but does not run :class:`apache_beam.PTransform`'s own, which gives the
transform its label; :class:`DataclassPTransform` runs it once for all of them.
"""

from __future__ import annotations

from typing import TypeVar

import apache_beam as beam

__all__ = ["DataclassPTransform"]

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")


class DataclassPTransform(beam.PTransform[InputT, OutputT]):
    """A PTransform whose subclasses are dataclasses; decorate each subclass with ``@dataclass``.

    A subclass that needs its own ``__post_init__`` calls this one first.
    """

    def __post_init__(self) -> None:
        super().__init__()
