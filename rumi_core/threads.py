"""Decoding threads: the calling thread and long-lived helpers that work beside it.

A read (:func:`rumi_core.read`) or a validation decodes frames on the calling
thread and on ``workers - 1`` helper threads, every one of them taking the
next frame in turn; OpenZL releases the GIL while it decodes. The helpers live
as long as the process, so each keeps its decompression context from one read
to the next.

:func:`run_together` does what :class:`concurrent.futures.ThreadPoolExecutor`
would with ``submit`` and ``Future.result``, without a ``Future``, whose
condition variable both threads take three times per task. A one-tile window
read (four 512 x 512 frames on two threads) took 2.19 ms with it against
2.23 ms through the executor, on this project's 2-core machine (alternating blocks of
30 reads in one process): 1.5-2 % of the read.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import TYPE_CHECKING, Final, TypeVar

from rumi_core.arguments import whole_number
from rumi_core.errors import RumiError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["default_threads", "run_together", "thread_count"]

T = TypeVar("T")


def default_threads() -> int:
    """Threads used when a read does not say: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def thread_count(threads: int | None) -> int:
    """``threads`` as a count: :func:`default_threads` for None or 0.

    Raises:
        RumiError: ``threads`` is not a whole number of at least 0 (a bool, -1, 1.5).
    """
    if threads is None:
        return default_threads()
    try:
        count = whole_number("threads", threads, least=0)
    except RumiError:
        raise RumiError(f"threads is a number of threads, at least 1 (None or 0 for every CPU), got {threads!r}") from None
    return count or default_threads()


class _Job:
    """One helper's share of a :func:`run_together`: the task, whether it started, how it ended."""

    __slots__ = ("claim", "claimed", "done", "error", "task")

    def __init__(self, task: Callable[[], None]) -> None:
        self.task = task
        self.claim = threading.Lock()
        """Held while :attr:`claimed` is read and set."""
        self.claimed = False
        """Set by whichever comes first: the helper that starts the task, or the caller that skips it."""
        self.done = threading.Lock()
        """Held until the task has returned or raised; the caller waits on it."""
        self.done.acquire()
        self.error: BaseException | None = None


class _Helpers:
    """The process's helper threads and the one queue they take jobs from."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.count = 0
        self.lock = threading.Lock()

    def ensure(self, count: int) -> None:
        """Start helpers until there are at least ``count``."""
        if self.count >= count:
            return
        with self.lock:
            while self.count < count:
                self.count += 1
                threading.Thread(target=self._serve, name=f"rumi-read-{self.count}", daemon=True).start()

    def _serve(self) -> None:
        jobs = self.jobs
        while True:
            job = jobs.get()
            with job.claim:
                if job.claimed:  # skipped by its caller
                    continue
                job.claimed = True
            try:
                job.task()
            except BaseException as err:  # handed to the caller, which raises it
                job.error = err
            finally:
                job.done.release()


_HELPERS = _Helpers()


def _forget_helpers() -> None:
    """In a forked child: the parent's helper threads do not exist here, so start anew."""
    global _HELPERS
    _HELPERS = _Helpers()


os.register_at_fork(after_in_child=_forget_helpers)


_END: Final = object()


def _nothing() -> None:
    """The task of a skipped job."""


def run_together(work: Callable[[T], None], items: Iterable[T], workers: int) -> None:
    """Call ``work(item)`` for every item, on the calling thread and ``workers - 1`` helper threads.

    Each thread takes the next item, in order, until none is left or a call
    has raised; then no thread takes another. Returns once every thread that
    started has stopped. A helper still queued behind another caller's work
    when this caller runs out of items has nothing left to take, and is
    skipped rather than waited for.

    Raises:
        BaseException: the calling thread's error, else the first helper's.
    """
    taken = iter(items)
    lock = threading.Lock()
    failed: list[bool] = []  # not empty once a call has raised; cheaper to test than a threading.Event

    def participate() -> None:
        try:
            while not failed:
                with lock:
                    item = next(taken, _END)
                if item is _END:
                    return
                work(item)  # type: ignore[arg-type]  # not _END
        except BaseException:
            failed.append(True)
            raise

    if workers <= 1:
        participate()
        return
    helpers = _HELPERS
    helpers.ensure(workers - 1)
    jobs = [_Job(participate) for _ in range(workers - 1)]
    for job in jobs:
        helpers.jobs.put(job)
    try:
        participate()
    finally:
        errors = []
        for job in jobs:
            with job.claim:
                started, job.claimed = job.claimed, True
                if not started:
                    # The queue keeps the job until a helper takes it: it must
                    # not keep this call's items and results alive that long.
                    job.task = _nothing
            if started:
                job.done.acquire()
                if job.error is not None:
                    errors.append(job.error)
    if errors:
        raise errors[0]
