"""The decoding threads: the caller and long-lived helpers that take items in turn."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import threading
import time
import weakref
from typing import TYPE_CHECKING

import pytest

from rumi_core import threads
from rumi_core.threads import run_together

if TYPE_CHECKING:
    from collections.abc import Iterator


def test_every_item_is_worked_once_on_the_caller_and_the_helpers() -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def work(item: int) -> None:
        time.sleep(0.002)  # long enough for every helper to take some
        with lock:
            seen.append((item, threading.current_thread().name))

    run_together(work, range(60), 3)
    assert sorted(item for item, _ in seen) == list(range(60))
    names = {name for _, name in seen}
    assert threading.current_thread().name in names and len(names) == 3
    assert all(name.startswith("rumi-read-") for name in names - {threading.current_thread().name})


def test_one_worker_runs_on_the_calling_thread_alone() -> None:
    names: set[str] = set()
    run_together(lambda _: names.add(threading.current_thread().name), range(5), 1)
    assert names == {threading.current_thread().name}


@pytest.mark.parametrize("failing", ["caller", "helper"])
def test_the_first_error_is_raised_and_no_item_is_taken_after_it(failing: str) -> None:
    taken: list[int] = []
    caller = threading.current_thread()

    def work(item: int) -> None:
        taken.append(item)
        on_caller = threading.current_thread() is caller
        if item >= 4 and on_caller == (failing == "caller"):
            raise ValueError(f"item {item} failed on the {failing}")
        time.sleep(0.005)

    with pytest.raises(ValueError, match=f"failed on the {failing}"):
        run_together(work, range(1000), 2)
    # Each thread stops once it sees the failure: at most the item it was
    # working on when the other raised is taken after the failing one.
    assert len(taken) < 12


@contextlib.contextmanager
def every_helper_busy(seconds: float = 30) -> Iterator[None]:
    """Keep every helper thread busy with another caller's work until the block ends, or ``seconds`` pass."""
    helpers = max(1, threads._HELPERS.count)
    busy, release = threading.Semaphore(0), threading.Event()

    def hold(_: int) -> None:
        if threading.current_thread().name.startswith("rumi-read-"):
            busy.release()
            release.wait(seconds)
        else:  # the other caller leaves every item but its first to the helpers
            time.sleep(0.5)

    other = threading.Thread(target=run_together, args=(hold, range(helpers + 1), helpers + 1))
    other.start()
    try:
        for _ in range(helpers):
            assert busy.acquire(timeout=30)
        yield
    finally:
        release.set()
        other.join(30)
    assert not other.is_alive()


def test_a_helper_busy_with_another_callers_work_is_skipped_not_waited_for() -> None:
    done: list[int] = []
    with every_helper_busy(seconds=5):  # were this caller to wait for a helper, 5 s
        t0 = time.monotonic()
        run_together(done.append, range(10), 2)
        elapsed = time.monotonic() - t0
    assert done == list(range(10)) and elapsed < 4


def _in_forked_child(out: multiprocessing.SimpleQueue[set[str]]) -> None:
    names: set[str] = set()

    def work(_: int) -> None:
        time.sleep(0.002)
        names.add(threading.current_thread().name)

    run_together(work, range(40), 2)
    out.put(names)


def test_a_forked_child_starts_its_own_helpers() -> None:
    run_together(lambda _: None, range(4), 2)  # the parent has a helper now
    context = multiprocessing.get_context("fork")
    out = context.SimpleQueue()
    child = context.Process(target=_in_forked_child, args=(out,))
    child.start()
    child.join(60)
    # Without helpers of its own the child's caller would do every item alone.
    assert child.exitcode == 0 and len(out.get()) == 2


def test_a_skipped_helper_keeps_nothing_of_the_call_alive() -> None:
    class Result:
        pass

    def call() -> weakref.ref[Result]:
        result = Result()

        def work(_: int) -> None:
            assert result is not None  # what a read's work holds: its output array

        run_together(work, range(3), 2)  # its helper's job stays queued behind the busy helpers
        return weakref.ref(result)

    with every_helper_busy():
        alive = call()
        gc.collect()
        assert alive() is None
