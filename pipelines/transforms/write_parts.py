"""Writing compressed frames to part files, and the progress drawn from them.

Workers append each compressed frame to a part file of its cube,
``OUT/.parts/<cube_id>/<attempt>.part``: one file per cube and bundle, under a
name no other attempt uses, holding a :data:`PART_RECORD` (frame index and byte
count) before each frame. A retried bundle writes a file of its own, so no
frame ever reaches assembly from an attempt the runner discarded, and half a
frame never does either: a part says where its frame's bytes are
(:class:`FramePart`) and assembly checks the record in front of them. With
``--out gs://…`` each frame is a temporary object of its own
(:mod:`pipelines.bucket`), because GCS ``compose`` joins whole objects. Only
the frames' places and sizes travel on through the pipeline, to
:class:`~pipelines.transforms.assemble_files.AssembleFiles`.

One file per bundle rather than per frame, because creating a file is what a
local file system charges for: on this project's machine (ext4) a create
cost 0.9 ms of CPU while frames were being written, 1.4 of the 16 CPU
seconds of the 20-date cube of ``benchmarks/convert.py`` when every frame had
a file of its own.

On the local runner ``rumi convert`` shows progress
(:class:`ProgressMonitor`). Runners report no live metrics to the launcher,
but the part directory of a cube holds its part files next to the cube's
frame count (:data:`FRAME_COUNT_FILE`), so a thread of the launcher counts the
frame indices of the complete records in them, each index once and only in
files this run wrote. A cube whose part directory has gone was assembled and
counts as complete. On a terminal the bar redraws in place; elsewhere a
line is printed at every quarter.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.bucket import is_gs, output_store
from pipelines.errors import AssemblyError
from pipelines.transforms.base import DataclassPTransform
from pipelines.transforms.collect import inc
from pipelines.transforms.frames import FrameFailure
from rumi_core.files import naming_errors, write_atomic

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType
    from typing import TextIO

    from pipelines.planning.plan import CubePlan
    from pipelines.transforms.frames import FrameKey

__all__ = [
    "FRAME_COUNT_FILE",
    "PART_RECORD",
    "FramePart",
    "PartReader",
    "PartWriter",
    "PrepareParts",
    "ProgressMonitor",
    "WriteParts",
    "frame_records",
    "part_path",
    "prepare_parts",
    "remove_parts",
    "render_bar",
]

FRAME_COUNT_FILE: Final = ".frames"
"""In a cube's part directory: its frame count, for the progress display."""

PART_RECORD: Final = struct.Struct("<QI")
"""In front of each frame in a local part file: its frame index (uint64) and byte count (uint32), little-endian."""

PART_SUFFIX: Final = ".part"
"""The name ending of local part files."""


@dataclass(frozen=True, order=True)
class FramePart:
    """A compressed frame written to a part file: which frame, how large, and where its bytes are."""

    index: int
    """Frame index."""
    size: int
    """Bytes of the compressed frame."""
    path: str
    """The part file holding it; in a bucket, the folder of the cube's temporary objects (the frame's is :func:`part_path`)."""
    offset: int
    """Where the frame's bytes start in that file; 0 for an object."""


def part_path(parts_dir: str, cube_id: str, index: int) -> str:
    """The temporary object of one frame in a bucket: ``<parts_dir>/<cube_id>/<index>``, the index zero-padded to 10 digits."""
    return os.path.join(parts_dir, cube_id, f"{index:010d}")


@dataclass
class _OpenPart:
    """A part file a writer appends to: its descriptor, path and length so far."""

    fd: int
    path: str
    end: int = 0


class PartWriter:
    """Write compressed frames to part files: on a file system, one file per cube appended to; in a bucket, an object per frame.

    One writer serves one bundle (:class:`WriteParts` opens it when a bundle
    starts and closes it when it finishes), so its files are closed before
    anything downstream reads them. Every frame is handed to the kernel with
    one ``writev`` before :meth:`write` returns.
    """

    def __init__(self, parts_dir: str) -> None:
        self.parts_dir = parts_dir
        self._files: dict[str, _OpenPart] = {}

    def _file(self, cube_id: str) -> _OpenPart:
        found = self._files.get(cube_id)
        if found is None:
            directory = os.path.join(self.parts_dir, cube_id)
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, uuid.uuid4().hex + PART_SUFFIX)  # one name per attempt: retries never share a file
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            found = self._files[cube_id] = _OpenPart(fd, path)
        return found

    def write(self, key: FrameKey, frame: bytes | memoryview) -> FramePart:
        """Write one compressed frame of cube ``key.cube_id``; return where it is."""
        size = memoryview(frame).nbytes
        if is_gs(self.parts_dir):
            path = part_path(self.parts_dir, key.cube_id, key.index)
            output_store().write(path, bytes(frame))
            # The folder, not the object: the place a cube's frames share is
            # recorded once per cube (pipelines.transforms.cube_parts), and
            # assembly names each object from its frame index.
            return FramePart(key.index, size, os.path.dirname(path), 0)
        part = self._file(key.cube_id)
        views = [memoryview(PART_RECORD.pack(key.index, size)), memoryview(frame).cast("B")]
        with naming_errors(part.path):
            while views:  # a regular file takes it in one call; a short write continues where it stopped
                done = os.writev(part.fd, views)
                while views and done >= views[0].nbytes:
                    done -= views.pop(0).nbytes
                if views:
                    views[0] = views[0][done:]
        offset = part.end + PART_RECORD.size
        part.end = offset + size
        return FramePart(key.index, size, part.path, offset)

    def close(self) -> None:
        """Close every part file (idempotent)."""
        files, self._files = self._files, {}
        for part in files.values():
            os.close(part.fd)

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class PartReader:
    """Open local part files for assembly, each once, and check the record in front of each frame.

    Raises AssemblyError from :meth:`open` when the record does not name the
    frame and size the frame stage reported (a damaged or foreign file), and
    FileNotFoundError when the part file is gone.
    """

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def open(self, part: FramePart) -> int:
        """The open part file holding ``part``, once its record is checked."""
        fd = self._fds.get(part.path)
        if fd is None:
            fd = self._fds[part.path] = os.open(part.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        at = part.offset - PART_RECORD.size
        record = os.pread(fd, PART_RECORD.size, at) if at >= 0 else b""
        found = PART_RECORD.unpack(record) if len(record) == PART_RECORD.size else None
        if found != (part.index, part.size):
            held = "no record" if found is None else f"frame {found[0]} of {found[1]} bytes"
            raise AssemblyError(
                f"{part.path}: the record at byte {at} holds {held}, not frame {part.index} of {part.size} bytes as the frame stage wrote"
            )
        return fd

    def close(self) -> None:
        """Close every file opened (idempotent)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)

    def __enter__(self) -> PartReader:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def frame_records(path: str, start: int = 0) -> tuple[list[int], int]:
    """The frame indices of the complete records of a part file from byte ``start``, and where the next record starts.

    A record whose frame is not all written yet ends the walk.
    """
    indices: list[int] = []
    at = start
    with contextlib.suppress(OSError), open(path, "rb", buffering=0) as f:
        end = os.fstat(f.fileno()).st_size
        while at + PART_RECORD.size <= end:
            index, size = PART_RECORD.unpack(os.pread(f.fileno(), PART_RECORD.size, at))
            if at + PART_RECORD.size + size > end:
                break
            indices.append(index)
            at += PART_RECORD.size + size
    return indices, at


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


class _WritePartsFn(beam.DoFn):
    def __init__(self, parts_dir: str) -> None:
        beam.DoFn.__init__(self)
        self.parts_dir = parts_dir
        self.writer: PartWriter | None = None

    def start_bundle(self) -> None:
        self.writer = PartWriter(self.parts_dir)

    def process(self, element: tuple[FrameKey, bytes | FrameFailure]) -> Iterator[tuple[str, FramePart | FrameFailure]]:
        key, frame = element
        if isinstance(frame, FrameFailure):
            yield key.cube_id, frame
            return
        assert self.writer is not None
        part = self.writer.write(key, frame)
        inc(WriteParts, "frames")
        inc(WriteParts, "bytes", part.size)
        yield key.cube_id, part

    def finish_bundle(self) -> None:
        self._close()

    def teardown(self) -> None:
        self._close()  # a bundle that failed never finished

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


@dataclass
class WriteParts(DataclassPTransform[PCollection[tuple["FrameKey", Any]], PCollection[tuple[str, Any]]]):
    """Write each compressed frame to a part file (:class:`PartWriter`, one per bundle); emit ``(cube_id, FramePart)``."""

    parts_dir: str
    """``OUT/.parts``."""

    def expand(self, frames: PCollection[tuple[FrameKey, Any]]) -> PCollection[tuple[str, Any]]:
        """One ParDo."""
        out: PCollection[tuple[str, Any]] = frames | "Write" >> beam.ParDo(_WritePartsFn(self.parts_dir))
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
        self._walked: dict[str, int] = {}
        """Per part file: where its next record starts."""
        self._seen: dict[str, set[int]] = {}
        """Per cube: the frame indices found in its part files (a retried bundle writes some twice)."""
        self._stale: set[str] = set()
        """Part files a killed earlier run left, found when the monitor started: not this run's frames."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rumi-progress", daemon=True)
        self._tty = stream.isatty()
        self._quarter = 0

    def poll(self) -> tuple[int, int]:
        """Update the counts from the part directories; return ``(done, total)``."""
        present = set()
        for name, directory, paths in self._cubes():
            try:
                with open(os.path.join(directory, FRAME_COUNT_FILE), encoding="ascii") as f:
                    self.totals[name] = int(f.read() or 0)
            except (OSError, ValueError):
                continue
            present.add(name)
            seen = self._seen.setdefault(name, set())
            for path in paths:
                if path not in self._stale:
                    indices, self._walked[path] = frame_records(path, self._walked.get(path, 0))
                    seen.update(indices)
            self.done[name] = max(self.done.get(name, 0), len(seen))
        for name in self.totals:
            if name not in present:
                self.done[name] = self.totals[name]
        return sum(self.done.values()), sum(self.totals.values())

    def _cubes(self) -> Iterator[tuple[str, str, list[str]]]:
        """Each cube's name, part directory and part files, as they are now."""
        with contextlib.suppress(OSError):
            for name in os.listdir(self.parts_dir):
                directory = os.path.join(self.parts_dir, name)
                with contextlib.suppress(OSError):
                    yield name, directory, [os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(PART_SUFFIX)]

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
        for _, _, paths in self._cubes():
            self._stale.update(paths)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            self._draw(final=True)
