"""Write and time rumi files with rumi-eo, for ``benchmarks/read.py``.

Runs in the rumi-eo peer environment (see ``tests/test_interop.py``), never
beside rumi_core. Two commands, each printing one JSON document::

    python rumi_eo_bench.py write DATA.npy PATH RECIPE TILE
    python rumi_eo_bench.py time PATH HEADER_HEX THREADS VERIFY SCENARIOS_JSON

``write`` splits a ``(B, Y, X)`` array into one frame per band and tile
(``frame_unit`` 0), compresses each with the geozl ``RECIPE`` and writes it.
``time`` sets rumi-eo's thread count and checksum verification (both are
process-wide and fixed at the first read, hence one process per setting),
then times ``rumi.read`` for each scenario ``{"name", "window", "reps",
"warmup"}`` with the same loop ``benchmarks/read.py`` uses for rumi_core, and
reports every time in seconds, a SHA-256 of the samples read, and the
process's resident memory before the first read and its peak after the last.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import geozl
import numpy as np
import rumi


def write(data_path: str, path: str, recipe: str, tile: int) -> dict[str, Any]:
    data = np.load(data_path)
    tf = rumi.frames(data, "b (row h) (col w) -> row col b (h w)", tile)
    graphs: dict[tuple[int, ...], Any] = {}
    for frame in tf:
        samples = frame.data
        if samples.shape not in graphs:
            graphs[samples.shape] = geozl.graph(samples, recipe)
        frame.compressed = geozl.compress(samples, graph=graphs[samples.shape])
    _, header = rumi.write(path, tf, bands=[f"band {b}" for b in range(data.shape[0])], time=["2024-06-01"])
    return {"header": header.hex(), "frames": len(tf), "compressed_bytes": int(tf.nbytes), "frame_unit": int(tf.frame_unit)}


def _status_kib(field: str) -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_rss() -> int:
    """Peak resident memory of this process so far, in bytes (Linux ``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over ``exec`` from
    the parent, so a child would report the benchmark process's peak.
    """
    return _status_kib("VmHWM")


def current_rss() -> int:
    """Resident memory of this process now, in bytes (Linux ``VmRSS``)."""
    return _status_kib("VmRSS")


def time_reads(path: str, header: bytes, threads: int, verify: bool, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    rss_before = current_rss()
    rumi.set_num_threads(threads)
    rumi.set_checksum_verification(verify)
    out: dict[str, Any] = {"threads": rumi.get_num_threads(), "verify": rumi.get_checksum_verification(), "scenarios": {}}
    for scenario in scenarios:
        window = None if scenario["window"] is None else tuple(scenario["window"])
        arr = rumi.read(path, header, window=window)
        for _ in range(scenario["warmup"]):
            rumi.read(path, header, window=window)
        times, cpu = [], []
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(scenario["reps"]):
            c0, t0 = time.process_time(), time.perf_counter()
            rumi.read(path, header, window=window)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out["scenarios"][scenario["name"]] = {
            "times": times,
            "cpu": cpu,
            "minflt": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / scenario["reps"],
            "nbytes": int(arr.nbytes),
            "shape": list(arr.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest(),
        }
    out["peak_rss_before"], out["peak_rss"] = rss_before, peak_rss()
    return out


def main(argv: list[str]) -> int:
    """Dispatch ``write`` or ``time`` and print the JSON result."""
    if argv[1] == "write":
        result = write(argv[2], argv[3], argv[4], int(argv[5]))
    elif argv[1] == "time":
        result = time_reads(argv[2], bytes.fromhex(argv[3]), int(argv[4]), argv[5] == "1", json.loads(Path(argv[6]).read_text()))
    else:
        raise SystemExit(f"unknown command {argv[1]!r}; use write or time")
    result["medians"] = {k: float(np.median(v["times"])) for k, v in result.get("scenarios", {}).items()}
    result["rumi_eo"] = rumi.__version__
    result["geozl"] = geozl.__version__
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
