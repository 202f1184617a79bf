"""Beam's own output during a local run, kept in a file instead of on the terminal.

Beam's local runner and its workers write to standard error on their own:
every worker process logs its start and stop (42 lines a run on two
processes), and a step that raises has its traceback logged and printed
once per attempt and worker (248 lines for an output folder whose
``.parts`` is a file), before ``rumi convert`` reports the same error in one
line. :func:`worker_output_to` sends file descriptor 2, which worker
processes inherit, to a file for the duration of a run, and gives the
caller a stream on the terminal for what it shows itself: the progress bar
and this process's log records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["worker_output_to"]


@contextlib.contextmanager
def worker_output_to(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """Send Beam's output to ``path`` (appended) for the duration: its log records, and this process's and its children's standard error.

    Yields a stream on the standard error the block started with. The root
    logger's handlers that wrote to standard error write to it meanwhile, so
    this process's own log records stay where the user sees them; records of
    the ``apache_beam`` loggers go to ``path`` instead.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace")
    handlers = [
        h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler) and h.stream in (sys.stderr, sys.__stderr__)
    ]
    streams = [h.setStream(terminal) for h in handlers]
    beam = logging.getLogger("apache_beam")
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    propagate = beam.propagate
    beam.addHandler(to_file)
    beam.propagate = False
    try:
        yield terminal
    finally:
        beam.propagate = propagate
        beam.removeHandler(to_file)
        to_file.close()
        for handler, stream in zip(handlers, streams, strict=True):
            handler.setStream(stream)
        terminal.close()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
