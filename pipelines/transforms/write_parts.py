"""Writing compressed frames to part files, and the progress drawn from them.

Workers write each compressed frame to a part file
``OUT/.parts/<cube_id>/<frame_index>`` (written to a temporary name and
renamed, so a retried bundle overwrites it with the same bytes and never
leaves half a frame); with ``--out gs://…`` a part is a temporary object
(:mod:`pipelines.bucket`). Only the frame sizes travel on through the
pipeline, to :class:`~pipelines.transforms.assemble_files.AssembleFiles`.

On the local runner ``rumi convert`` shows progress
(:class:`ProgressMonitor`). Runners report no live metrics to the launcher,
but the part directory of a cube holds one part file per compressed frame
next to the cube's frame count (:data:`FRAME_COUNT_FILE`), so a thread of the
launcher counts them. A cube whose part directory has gone was assembled and
counts as complete. On a terminal the bar redraws in place; elsewhere a line
is printed at every quarter.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.bucket import is_gs, output_store
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.frames import FrameFailure
from rumi_core.files import write_atomic

if TYPE_CHECKING:
    from types import TracebackType
    from typing import TextIO

    from pipelines.planning.plan import CubePlan
    from pipelines.transforms.frames import FrameKey

__all__ = [
    "FRAME_COUNT_FILE",
    "FramePart",
    "PrepareParts",
    "ProgressMonitor",
    "WriteParts",
    "part_path",
    "prepare_parts",
    "remove_parts",
    "render_bar",
    "write_part",
]

FRAME_COUNT_FILE: Final = ".frames"
"""In a cube's part directory: its frame count, for the progress display."""


@dataclass(frozen=True, order=True)
class FramePart:
    """A compressed frame written to its part file."""

    index: int
    """Frame index."""
    size: int
    """Bytes of the compressed frame."""


def part_path(parts_dir: str, cube_id: str, index: int) -> str:
    """``<parts_dir>/<cube_id>/<index>``, the index zero-padded to 10 digits."""
    return os.path.join(parts_dir, cube_id, f"{index:010d}")


def write_part(parts_dir: str, key: FrameKey, frame: bytes) -> FramePart:
    """Write one compressed frame to its part file or temporary object (idempotent); return its size."""
    path = part_path(parts_dir, key.cube_id, key.index)
    if is_gs(path):
        output_store().write(path, frame)
        return FramePart(key.index, len(frame))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, frame)
    return FramePart(key.index, len(frame))


def prepare_parts(parts_dir: str, plan: CubePlan) -> CubePlan:
    """Create a cube's part directory and record its frame count; safe to repeat.

    Nothing is deleted here: a runner may run this step again while frames
    are being written (the Dask runner recomputes side inputs). Parts left by
    an earlier run cannot reach a file either, because every frame of this
    run is rewritten before assembly and each part's size is checked against
    the size this run reported.
    """
    if is_gs(parts_dir):
        return plan  # objects need no folder
    directory = os.path.join(parts_dir, plan.cube_id)
    os.makedirs(directory, exist_ok=True)
    write_atomic(os.path.join(directory, FRAME_COUNT_FILE), str(plan.layout.frame_count).encode())
    return plan


def remove_parts(parts_dir: str, cube_id: str) -> None:
    """Remove a cube's part files (a folder, or temporary objects in a bucket)."""
    directory = os.path.join(parts_dir, cube_id)
    if is_gs(directory):
        output_store().delete_tree(directory)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def _prepare(plan: CubePlan, parts_dir: str) -> CubePlan:
    return prepare_parts(parts_dir, plan)


@dataclass
class PrepareParts(DataclassPTransform[PCollection["CubePlan"], PCollection["CubePlan"]]):
    """Create each cube's part directory before its frames are written; pass the plans on."""

    parts_dir: str
    """``OUT/.parts``."""

    def expand(self, plans: PCollection[CubePlan]) -> PCollection[CubePlan]:
        """One Map."""
        out: PCollection[CubePlan] = plans | "Prepare" >> beam.Map(_prepare, parts_dir=self.parts_dir)
        return out


def _write_part(element: tuple[FrameKey, bytes | FrameFailure], parts_dir: str) -> tuple[str, FramePart | FrameFailure]:
    key, frame = element
    if isinstance(frame, FrameFailure):
        return key.cube_id, frame
    part = write_part(parts_dir, key, frame)
    inc(WriteParts, "frames")
    inc(WriteParts, "bytes", part.size)
    return key.cube_id, part


@dataclass
class WriteParts(DataclassPTransform[PCollection[tuple["FrameKey", Any]], PCollection[tuple[str, Any]]]):
    """Write each compressed frame to its part file; emit ``(cube_id, FramePart)``."""

    parts_dir: str
    """``OUT/.parts``."""

    def expand(self, frames: PCollection[tuple[FrameKey, Any]]) -> PCollection[tuple[str, Any]]:
        """One Map."""
        out: PCollection[tuple[str, Any]] = frames | "Write" >> beam.Map(_write_part, parts_dir=self.parts_dir)
        return out


def render_bar(done: int, total: int, width: int = 30) -> str:
    """``[#########.....]  45%  432/960 frames``.

    >>> render_bar(1, 4, width=8)
    '[##......]  25%  1/4 frames'
    """
    fraction = done / total if total else 0.0
    filled = round(width * fraction)
    return f"[{'#' * filled}{'.' * (width - filled)}] {100 * fraction:3.0f}%  {done}/{total} frames"


class ProgressMonitor:
    """Poll ``parts_dir`` every ``interval`` seconds and draw a bar on ``stream``."""

    def __init__(self, parts_dir: str, stream: TextIO, *, interval: float = 0.5) -> None:
        self.parts_dir = parts_dir
        self.stream = stream
        self.interval = interval
        self.totals: dict[str, int] = {}
        """Frame count of every cube seen so far."""
        self.done: dict[str, int] = {}
        """Frames written of every cube seen so far."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rumi-progress", daemon=True)
        self._tty = stream.isatty()
        self._quarter = 0

    def poll(self) -> tuple[int, int]:
        """Update the counts from the part directories; return ``(done, total)``."""
        try:
            names = os.listdir(self.parts_dir)
        except OSError:
            names = []
        present = set()
        for name in names:
            directory = os.path.join(self.parts_dir, name)
            try:
                with open(os.path.join(directory, FRAME_COUNT_FILE), encoding="ascii") as f:
                    self.totals[name] = int(f.read() or 0)
                files = os.listdir(directory)
            except (OSError, ValueError):
                continue
            present.add(name)
            self.done[name] = max(self.done.get(name, 0), sum(1 for f in files if f.isdigit()))
        for name in self.totals:
            if name not in present:
                self.done[name] = self.totals[name]
        return sum(self.done.values()), sum(self.totals.values())

    def _draw(self, final: bool = False) -> None:
        done, total = self.poll()
        if not total:
            return
        if self._tty:
            self.stream.write("\r" + render_bar(done, total) + ("\n" if final else ""))
            self.stream.flush()
            return
        quarter = 4 * done // total
        if quarter > self._quarter or (final and done == total and self._quarter < 4):
            self._quarter = max(quarter, self._quarter)
            self.stream.write(render_bar(done, total) + "\n")
            self.stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def __enter__(self) -> ProgressMonitor:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            self._draw(final=True)
