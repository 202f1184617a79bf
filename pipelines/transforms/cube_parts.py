"""Where a cube's compressed frames are, gathered on their way to assembly.

Every frame leaves :class:`~pipelines.transforms.write_parts.WriteParts` as
a :class:`~pipelines.transforms.write_parts.FramePart` (frame index, byte
count, part file, offset), and the one step per cube that assembles the file
needs all of them. Grouped one element per frame, they cost Beam's local
runner about 4 KiB each at the shuffle however small each one is: a cube of
20,480 frames added 86 MiB to the run's peak at assembly, so a year of a
Sentinel-2 tile (1.75 million frames) would have needed several GB in the
process that groups it.

:class:`GatherParts` combines them instead, into one :class:`CubeParts` per
cube: four 64-bit integers per frame, the part files' paths once each, and
the distinct read failures. A runner that lifts combiners folds each
bundle's frames before the shuffle, so what crosses it is one element per
cube and bundle: the FnApiRunner, Dataflow, and Beam's Python portable runner,
which lifts them before it submits a pipeline to a Flink or Spark job server
(``pre_optimize=default``). A runner that does not (the Dask runner) groups
the frames, then combines them, as before.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Final

import apache_beam as beam
import numpy as np

from pipelines.transforms.frames import FrameFailure
from pipelines.transforms.write_parts import FramePart

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from numpy.typing import NDArray

__all__ = ["CubeParts", "GatherParts"]

_FIELDS: Final = 4
"""Integers recorded per frame: frame index, byte count, offset in its part file, and the part file's number in ``paths``."""

_ROWS_AT_ONCE: Final = 4096
"""Frames turned into Python objects at a time when iterating."""


class CubeParts:
    """The places of a cube's compressed frames, and the reads that failed, as compact arrays.

    Frames are recorded in the order they arrive; :meth:`in_frame_order`
    sorts them. A frame recorded twice (two attempts of a bundle whose output
    a runner kept both of, which hold the same bytes) counts once.
    """

    __slots__ = ("_numbers", "failures", "paths", "records")

    def __init__(self) -> None:
        self.paths: list[str] = []
        """The part files, each once."""
        self.records: array[int] = array("q")
        """Per frame: index, size, offset, and the number of its path in :attr:`paths`, flattened."""
        self.failures: set[tuple[str, str]] = set()
        """``(href, message)`` of each distinct read failure."""
        self._numbers: dict[str, int] = {}

    @classmethod
    def of(cls, items: Iterable[FramePart | FrameFailure]) -> CubeParts:
        """Gather ``items`` into a new record."""
        parts = cls()
        for item in items:
            parts.add(item)
        return parts

    def _number(self, path: str) -> int:
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self.paths)
            self.paths.append(path)
        return number

    def add(self, item: FramePart | FrameFailure) -> None:
        """Record one frame's place, or one failed read."""
        if isinstance(item, FrameFailure):
            self.failures.add((item.href, item.message))
        else:
            self.records.extend((item.index, item.size, item.offset, self._number(item.path)))

    def merge(self, other: CubeParts) -> None:
        """Add everything ``other`` records."""
        self.failures |= other.failures
        numbers = [self._number(path) for path in other.paths]
        if numbers == list(range(len(numbers))):
            self.records.extend(other.records)
            return
        table = self._table(other.records).copy()
        table[:, 3] = np.asarray(numbers, np.int64)[table[:, 3]]
        self.records.frombytes(table.data.cast("B"))

    @staticmethod
    def _table(records: array[int]) -> NDArray[np.int64]:
        return np.frombuffer(records, np.int64).reshape(-1, _FIELDS)

    def __len__(self) -> int:
        """Frames recorded."""
        return len(self.records) // _FIELDS

    def in_frame_order(self, frame_count: int) -> CubeParts:
        """The frames ``0 … frame_count - 1`` recorded here, each once, in frame-index order (the failures are left out)."""
        # Sorted through an index (8 bytes a frame) and gathered once: a cube may have millions of frames.
        table = self._table(self.records)
        order = np.argsort(table[:, 0], kind="stable")
        index = table[order, 0]
        keep = (index >= 0) & (index < frame_count)
        keep[1:] &= index[1:] != index[:-1]
        ordered = CubeParts()
        ordered.paths, ordered._numbers = list(self.paths), dict(self._numbers)  # a part file per bundle: few
        ordered.records.frombytes(table[order[keep]].data.cast("B"))
        return ordered

    def missing(self, frame_count: int) -> NDArray[np.int64]:
        """The frame indices below ``frame_count`` recorded nowhere here, in order."""
        return np.setdiff1d(np.arange(frame_count, dtype=np.int64), self._table(self.records)[:, 0])

    @property
    def counts(self) -> list[int]:
        """The byte count of each frame, in the order recorded."""
        counts: list[int] = self._table(self.records)[:, 1].tolist()
        return counts

    def __iter__(self) -> Iterator[FramePart]:
        """Each frame's place, in the order recorded."""
        paths, table = self.paths, self._table(self.records)
        for start in range(0, len(table), _ROWS_AT_ONCE):  # a few rows as Python integers at a time, not millions
            for index, size, offset, number in table[start : start + _ROWS_AT_ONCE].tolist():
                yield FramePart(index, size, paths[number], offset)

    def __getstate__(self) -> tuple[list[str], bytes, list[tuple[str, str]]]:
        return self.paths, self.records.tobytes(), sorted(self.failures)

    def __setstate__(self, state: tuple[list[str], bytes, list[tuple[str, str]]]) -> None:
        paths, records, failures = state
        self.paths = list(paths)
        self._numbers = {path: number for number, path in enumerate(self.paths)}
        self.records = array("q")
        self.records.frombytes(records)
        self.failures = set(failures)


class GatherParts(beam.CombineFn):
    """Combine a cube's :class:`FramePart` and :class:`FrameFailure` values into one :class:`CubeParts`."""

    def __init__(self) -> None:
        beam.CombineFn.__init__(self)

    def create_accumulator(self) -> CubeParts:
        return CubeParts()

    def add_input(self, mutable_accumulator: CubeParts, element: FramePart | FrameFailure) -> CubeParts:
        mutable_accumulator.add(element)
        return mutable_accumulator

    def merge_accumulators(self, accumulators: Iterable[CubeParts]) -> CubeParts:
        # Beam lets the first accumulator be modified and returned.
        it = iter(accumulators)
        first = next(it, None)
        if first is None:
            return CubeParts()
        for other in it:
            first.merge(other)
        return first

    def extract_output(self, accumulator: CubeParts) -> CubeParts:
        return accumulator
