"""The timing loop of ``benchmarks/read.py``, shared by both readers it compares.

Standard library only, on purpose: ``benchmarks/read.py`` imports it to time
rumi_core, and ``tests/peer/rumi_eo_bench.py`` loads it by path inside
rumi-eo's own virtual environment, where neither rumi_core nor this
repository's packages are installed. One loop in one place is what makes the
two readers' numbers comparable.
"""

from __future__ import annotations

import hashlib
import json
import resource
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


class Samples(Protocol):
    """What the loop needs of the array a read returns (a NumPy array has it all)."""

    @property
    def nbytes(self) -> int: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    def tobytes(self) -> bytes: ...


def _status_bytes(field: str) -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_rss() -> int:
    """Peak resident memory of this process so far, in bytes (Linux ``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over ``exec`` from
    the parent, so a child would report the benchmark process's peak.
    """
    return _status_bytes("VmHWM")


def current_rss() -> int:
    """Resident memory of this process now, in bytes (Linux ``VmRSS``)."""
    return _status_bytes("VmRSS")


def header_argument(text: str) -> bytes:
    """A header blob given on a command line: hex digits, or ``@PATH`` of a blob file.

    A blob of a cube with hundreds of thousands of frames is larger than
    one command-line argument may be (128 KiB on Linux).
    """
    return Path(text[1:]).read_bytes() if text.startswith("@") else bytes.fromhex(text)


def time_scenarios(
    read: Callable[[Any], Samples], window_of: Callable[[list[int] | None], Any], scenarios: list[dict[str, Any]]
) -> dict[str, Any]:
    """Time ``read(window_of(scenario["window"]))`` for each scenario.

    Per scenario ``{"name", "window", "reps", "warmup"}``: one untimed read
    (its samples are hashed), ``warmup`` more, then ``reps`` timed reads, each
    timed in wall seconds (``perf_counter``) and in CPU seconds of every
    thread of the process (``process_time``), with the minor page faults per
    timed read (``getrusage``): memory the C heap gave back that the next read
    faults in again.

    Args:
        read: The reader under test, called with one window (or None for all).
        window_of: Turns a scenario's ``[row, col, height, width]`` (or None)
            into the window ``read`` takes.
        scenarios: What to time, in order.

    Returns:
        ``{"scenarios": {name: {"times", "cpu", "minflt", "nbytes", "shape", "sha256"}},
        "peak_rss_before", "peak_rss"}``: the SHA-256 is of the samples in C
        order, and the resident memory is before the first read and the peak
        after the last.
    """
    rss_before = current_rss()
    results: dict[str, Any] = {}
    for scenario in scenarios:
        window = window_of(scenario["window"])
        samples = read(window)
        for _ in range(scenario["warmup"]):
            read(window)
        times, cpu = [], []
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(scenario["reps"]):
            c0, t0 = time.process_time(), time.perf_counter()
            read(window)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        results[scenario["name"]] = {
            "times": times,
            "cpu": cpu,
            "minflt": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / scenario["reps"],
            "nbytes": int(samples.nbytes),
            "shape": list(samples.shape),
            "sha256": hashlib.sha256(samples.tobytes()).hexdigest(),
        }
    return {"scenarios": results, "peak_rss_before": rss_before, "peak_rss": peak_rss()}


def serve(
    open_read: Callable[[str, bytes], Callable[[Any], Samples]],
    window_of: Callable[[list[int] | None], Any],
    commands: Iterable[str],
    reply: Callable[[str], None],
) -> None:
    """Time one scenario per command, for a caller that alternates readers every few reads.

    Each command is one JSON line ``{"path", "header", "scenario"}`` (the
    header as :func:`header_argument` takes it, the scenario as
    :func:`time_scenarios` takes it); each answer is one JSON line,
    :func:`time_scenarios`'s result for that scenario, whose
    ``peak_rss_before`` is this process's resident memory before its first
    command. A reader whose settings are process-wide (rumi-eo's threads and
    checksum verification) thus stays one process for a whole run, and the
    caller can put the two readers' reads of one window side by side within
    a second of each other, where separate processes per round put them
    tens of seconds apart on a machine whose load changes faster than that.
    """
    rss_before = current_rss()
    for line in commands:
        command = json.loads(line)
        read = open_read(command["path"], header_argument(command["header"]))
        result = time_scenarios(read, window_of, [command["scenario"]])
        result["peak_rss_before"] = rss_before
        reply(json.dumps(result))
