"""A progress bar for local runs, drawn by the launcher from the part files.

On the local runner ``rumi convert`` shows progress.
Runners report no live metrics to the launcher, but the frame stage leaves
one part file per compressed frame in ``OUT/.parts/<cube_id>/`` next to the
cube's frame count (:data:`pipelines.assembly.FRAME_COUNT_FILE`), so a thread
of the launcher counts them. A cube whose part directory has gone was
assembled and counts as complete. On a terminal the bar redraws in place;
elsewhere a line is printed at every quarter.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from pipelines.assembly import FRAME_COUNT_FILE

if TYPE_CHECKING:
    from types import TracebackType
    from typing import TextIO

__all__ = ["ProgressMonitor", "render_bar"]


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
