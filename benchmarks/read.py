"""Read throughput of rumi_core against rumi-eo 0.26.1 on the same files.

A 4-band 2048 x 2048 uint16 Sentinel-2-like scene
(:func:`rumi_core.testing.synthetic_scene`) is written twice with 512 x 512
tiles and one frame per band and tile (``frame_unit`` 0): once by rumi-eo with
geozl's ``planar>zigzag>zstd`` recipe, once by rumi_core with its default
codec. Both readers then read both files, the whole image and 512 x 512
windows, with 1 and 2 threads, with OpenZL checksum verification off
(rumi-eo's default) and on (rumi_core's default).

rumi-eo pins an older geozl and OpenZL than rumi_core, so it runs in its own
virtual environment (``<repo>/.venv-peer``, created like the interoperability
tests do, or ``RUMI_PEER_PYTHON``) through ``tests/peer/rumi_eo_bench.py``,
which times its reads with the same loop as this script: a warm-up, then
``reps`` timed calls of the public read function on a local path (the file
sits in the page cache), each including opening the file. rumi_core is timed
the same way in a child process of its own (``read.py serve ...``), so that
both readers' CPU time and peak memory are those of a process that only reads.
Each reader runs one such process per setting (threads, checksums) for the
whole run (rumi-eo fixes both per process), and the two readers' blocks of
reads of one scenario follow each other, 1 thread then 2, before the next
scenario (:func:`time_side_by_side`); which reader goes first alternates
over ``rounds`` rounds. Throughput is decoded bytes returned per second at
the median time over all rounds. The ratio is also
given at the best times, and each reader's CPU seconds per GB of samples
returned (``time.process_time`` per read, every thread of the process, at the
median), which other processes on the machine disturb far less than wall
time. Each reader's peak resident memory added by its reads (peak RSS after
the last read minus RSS after its imports, per setting, both files) is printed too,
and its minor page faults per timed read (``getrusage``, the worst block):
memory the C heap gave back and the next read faults in again.
The control is SHA-256, which releases the GIL, on 1 and 2 threads before
and after the runs: no reader can scale better than it does on this machine
at that moment. The load average is printed, since load skews the
wall-time numbers, the 2-thread ones most.

Usage::

    .venv/bin/python benchmarks/read.py [--reps N] [--rounds N] [--json OUT.json]

No assertion is made on the numbers; the goals (rumi_core / rumi-eo at least
1.0x on the 512 x 512 one-tile window on 2 threads; rumi_core's 2-thread
speed-up at least 0.9x the control's) are printed with the measured values.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import numpy as np
from read_timing import serve  # benchmarks/ is on sys.path: this file runs as a script

import rumi_core
from rumi_core.codecs import RasterCodec
from rumi_core.encodings import encoding_for_dtype
from rumi_core.testing import RUMI_EO_VERSION, rumi_eo_environment, synthetic_scene

REPO = Path(__file__).resolve().parents[1]
PEER_SCRIPT = REPO / "tests" / "peer" / "rumi_eo_bench.py"
RECIPE = "planar>zigzag>zstd"
BANDS, SIZE, TILE = 4, 2048, 512


PEER = rumi_eo_environment(REPO)


def _peer_env() -> dict[str, str]:
    """The peer's environment, without the variables that would set its threads or checksum verification."""
    return {k: v for k, v in PEER.environ().items() if k not in ("RUMI_NUM_THREADS", "RUMI_VERIFY")}


def peer_python() -> Path:
    """The interpreter of rumi-eo's virtual environment (``RUMI_PEER_PYTHON``, or built on first use)."""
    override = os.environ.get("RUMI_PEER_PYTHON")
    if override:
        if PEER.probe_output(Path(override)) != RUMI_EO_VERSION:
            raise SystemExit(f"RUMI_PEER_PYTHON={override} has no rumi-eo {RUMI_EO_VERSION}")
        return Path(override)
    print(f"using {PEER.path} with rumi-eo {RUMI_EO_VERSION} (built on first use) ...", file=sys.stderr)
    reason = PEER.build()
    if reason is not None:
        raise SystemExit(reason)
    return PEER.python


def run_peer(python: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([str(python), str(PEER_SCRIPT), *args], capture_output=True, text=True, env=_peer_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"rumi-eo peer failed ({' '.join(args[:1])}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _window(window: list[int] | None) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A scenario's ``[row, col, height, width]`` as :func:`rumi_core.read`'s ``window``."""
    if window is None:
        return None
    r, c, h, w = window
    return ((r, r + h), (c, c + w))


def serve_child(argv: list[str]) -> int:
    """The child process that answers :func:`read_timing.serve` commands with rumi_core: THREADS VERIFY."""
    threads, verify = int(argv[0]), argv[1] == "1"

    def open_read(path: str, blob: bytes) -> Any:
        return lambda window: rumi_core.read(path, blob, window=window, threads=threads, verify=verify)

    serve(open_read, _window, sys.stdin, lambda line: print(line, flush=True))
    return 0


class TimingServer:
    """One reader with one setting (threads, checksums) in a child process that stays up for the whole run."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.label = label
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed by __exit__, with the child
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)

    def time(self, path: Path, blob: bytes, scenario: dict[str, Any]) -> dict[str, Any]:
        """Time ``scenario`` on ``path`` (:func:`read_timing.time_scenarios`'s result)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps({"path": str(path), "header": blob.hex(), "scenario": scenario}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self._log.seek(0)
            raise SystemExit(f"{self.label} failed:\n{self._log.read()[-3000:]}")
        result: dict[str, Any] = json.loads(line)
        return result

    def __enter__(self) -> TimingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        """End the child (its input closes) and wait for it."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


def parallel_ceiling() -> float:
    """The 2-thread speed-up of SHA-256 (which releases the GIL) on this machine right now.

    A control: on a machine shared with other work, no reader can scale
    better than this.
    """
    from concurrent.futures import ThreadPoolExecutor

    blocks = [bytes(4 << 20) for _ in range(16)]
    serial, parallel = [], []
    with ThreadPoolExecutor(2) as pool:
        for _ in range(5):
            t0 = time.perf_counter()
            for block in blocks:
                hashlib.sha256(block).digest()
            serial.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            list(pool.map(lambda block: hashlib.sha256(block).digest(), blocks))
            parallel.append(time.perf_counter() - t0)
    return statistics.median(serial) / statistics.median(parallel)


def expected_sha(scene: np.ndarray, window: list[int] | None) -> str:
    """SHA-256 of the samples of ``scene`` (an Image or a Cube) a read of ``window`` returns."""
    if window is not None:
        r, c, h, w = window
        scene = scene[..., r : r + h, c : c + w]
    return hashlib.sha256(np.ascontiguousarray(scene).tobytes()).hexdigest()


READERS: Final = ("rumi_core", "rumi-eo")
SETTINGS: Final = [(verify, threads) for verify in (False, True) for threads in (1, 2)]
"""Checksum verification and threads of each pair of timing servers."""


def time_side_by_side(
    python: Path,
    files: dict[str, tuple[Path, bytes]],
    scenarios: list[dict[str, Any]],
    scene: np.ndarray,
    rounds: int,
    settings: list[tuple[bool, int]] = SETTINGS,
) -> list[dict[str, Any]]:
    """Time every reader, setting, file and scenario; return one row per setting, file and scenario.

    One :class:`TimingServer` per reader and setting stays up for the whole
    run. Each scenario is timed by each reader on 1 and then 2 threads, one
    block of reads after another, before the next scenario: the readers'
    ratio and each one's 2-thread speed-up compare reads a second apart, not
    minutes, on a machine whose load changes faster than that. Which reader
    goes first alternates by round. Every block's samples are checked.
    ``settings`` are the ``(verify, threads)`` pairs timed, one server of
    each reader per pair.
    """
    times: dict[tuple[str, bool, int, str, str], list[float]] = {}
    cpu: dict[tuple[str, bool, int, str, str], list[float]] = {}
    faults: dict[tuple[str, bool, int, str, str], float] = {}
    rss: dict[tuple[str, bool, int], int] = {}
    nbytes: dict[str, int] = {}
    with contextlib.ExitStack() as stack:
        servers: dict[tuple[str, bool, int], TimingServer] = {}
        for verify, threads in settings:
            flags = [str(threads), "1" if verify else "0"]
            ours = TimingServer("rumi_core reader", [sys.executable, __file__, "serve", *flags])
            servers["rumi_core", verify, threads] = stack.enter_context(ours)
            peer = TimingServer("rumi-eo peer", [str(python), str(PEER_SCRIPT), "serve", *flags], env=_peer_env())
            servers["rumi-eo", verify, threads] = stack.enter_context(peer)
        for k in range(rounds):
            for verify in dict.fromkeys(v for v, _ in settings):
                for name, (path, blob) in files.items():
                    for scenario in scenarios:
                        sname = scenario["name"]
                        want = expected_sha(scene, scenario["window"])
                        for threads in sorted(t for v, t in settings if v == verify):
                            for reader in READERS if k % 2 == 0 else READERS[::-1]:
                                got = servers[reader, verify, threads].time(path, blob, scenario)
                                timed = got["scenarios"][sname]
                                if timed["sha256"] != want:
                                    raise SystemExit(f"{reader} read other samples from {name} ({sname})")
                                key = (name, verify, threads, sname, reader)
                                times.setdefault(key, []).extend(timed["times"])
                                cpu.setdefault(key, []).extend(timed["cpu"])
                                faults[key] = max(faults.get(key, 0.0), timed["minflt"])
                                added = got["peak_rss"] - got["peak_rss_before"]
                                rss[reader, verify, threads] = max(rss.get((reader, verify, threads), 0), added)
                                nbytes[sname] = timed["nbytes"]
    runs = []
    for verify, threads in settings:
        for name in files:
            for scenario in scenarios:
                sname = scenario["name"]
                run: dict[str, Any] = {"file": name, "verify": verify, "threads": threads, "scenario": sname, "nbytes": nbytes[sname]}
                for reader in READERS:
                    key = (name, verify, threads, sname, reader)
                    run[reader] = statistics.median(times[key])
                    run[f"{reader}_min"] = min(times[key])
                    run[f"{reader}_cpu"] = statistics.median(cpu[key])
                    run[f"{reader}_rss"] = rss[reader, verify, threads]
                    run[f"{reader}_minflt"] = faults[key]
                runs.append(run)
    return runs


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        return serve_child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10, help="timed reads of the whole image per round (windows: 8x as many)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating the two readers")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    args = parser.parse_args()

    scenarios = [
        {"name": "whole image", "window": None, "reps": args.reps, "warmup": 2},
        {"name": "512x512 window, 1 tile", "window": [512, 1024, 512, 512], "reps": 8 * args.reps, "warmup": 5},
        {"name": "512x512 window, 4 tiles", "window": [768, 768, 512, 512], "reps": 8 * args.reps, "warmup": 5},
    ]
    python = peer_python()
    scene = synthetic_scene(BANDS, SIZE, SIZE, seed=0)
    raw_mb = scene.nbytes / 1e6
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_before": os.getloadavg(),
            "sha256_speedup_before": parallel_ceiling(),
        },
        "scenarios": scenarios,
        "files": {},
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="rumi-bench-") as tmp:
        work = Path(tmp)
        np.save(work / "scene.npy", scene)
        theirs = run_peer(python, "write", str(work / "scene.npy"), str(work / "rumi-eo.rumi"), RECIPE, str(TILE))
        files = {
            f"rumi-eo, geozl {RECIPE}": (work / "rumi-eo.rumi", bytes.fromhex(theirs["header"])),
        }
        ours_path = work / "rumi-core.rumi"
        ours_blob = rumi_core.write(ours_path, scene, bands=[f"band {b}" for b in range(BANDS)], times=["2024-06-01"], tile_size=TILE)
        used = rumi_core.DEFAULT_CODEC
        if isinstance(used, RasterCodec):
            used = used.select(encoding_for_dtype(scene.dtype))
        recipe = getattr(used, "recipe", None) or getattr(used, "graph", "?")
        files[f"rumi_core default codec ({used.name} {recipe})"] = (ours_path, ours_blob)
        for name, (path, blob) in files.items():
            assert rumi_core.build_header(path) == blob
            results["files"][name] = {"bytes": path.stat().st_size, "ratio": round(scene.nbytes / path.stat().st_size, 3)}
        results["runs"] = time_side_by_side(python, files, scenarios, scene, args.rounds)
        results["machine"]["load_after"] = os.getloadavg()
        results["machine"]["sha256_speedup_after"] = parallel_ceiling()
    results["rumi_eo"] = {"version": theirs["rumi_eo"], "geozl": theirs["geozl"]}
    report(results, raw_mb)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


GOAL_SCENARIO = "512x512 window, 1 tile"


def report(results: dict[str, Any], raw_mb: float) -> None:
    """Print the tables, the control and the goals' ratios."""
    machine = results["machine"]
    load = f"load average {machine['load_before'][0]:.2f} before, {machine['load_after'][0]:.2f} after"
    print(f"scene: {BANDS} x {SIZE} x {SIZE} uint16 ({raw_mb:.1f} MB), tiles {TILE}, frame_unit 0")
    print(f"machine: {machine['affinity']} CPUs, Python {machine['python']}, {machine['platform']}; {load}")
    print(f"rumi-eo {results['rumi_eo']['version']} with geozl {results['rumi_eo']['geozl']}; rumi_core {rumi_core_version()}")
    for name, f in results["files"].items():
        print(f"  file {name}: {f['bytes']} bytes, ratio {f['ratio']}")
    print()
    print(
        "| file | read | checksums | threads | rumi_core MB/s | rumi-eo MB/s | rumi_core / rumi-eo | at best times "
        "| rumi_core CPU s/GB | rumi-eo CPU s/GB | in CPU time | rumi_core peak RSS added | rumi-eo peak RSS added "
        "| rumi_core page faults per read | rumi-eo page faults per read |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    runs = results["runs"]
    for run in runs:
        ours = run["nbytes"] / run["rumi_core"] / 1e6
        theirs = run["nbytes"] / run["rumi-eo"] / 1e6
        print(
            f"| {run['file']} | {run['scenario']} | {'on' if run['verify'] else 'off'} | {run['threads']} "
            f"| {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x | {run['rumi-eo_min'] / run['rumi_core_min']:.2f}x "
            f"| {run['rumi_core_cpu'] / run['nbytes'] * 1e9:.2f} | {run['rumi-eo_cpu'] / run['nbytes'] * 1e9:.2f} "
            f"| {run['rumi-eo_cpu'] / run['rumi_core_cpu']:.2f}x "
            f"| {run['rumi_core_rss'] / 2**20:.0f} MiB | {run['rumi-eo_rss'] / 2**20:.0f} MiB "
            f"| {run['rumi_core_minflt']:.0f} | {run['rumi-eo_minflt']:.0f} |"
        )
    control = statistics.mean((machine["sha256_speedup_before"], machine["sha256_speedup_after"]))
    print()
    print(
        "| file | read | checksums | rumi_core 2-thread speed-up | rumi-eo 2-thread speed-up | rumi_core / control "
        "| rumi_core at best | rumi-eo at best |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for run in runs:
        if run["threads"] != 1:
            continue
        two = next(r for r in runs if r["threads"] == 2 and all(r[k] == run[k] for k in ("file", "scenario", "verify")))
        speedup = run["rumi_core"] / two["rumi_core"]
        print(
            f"| {run['file']} | {run['scenario']} | {'on' if run['verify'] else 'off'} "
            f"| {speedup:.2f}x | {run['rumi-eo'] / two['rumi-eo']:.2f}x | {speedup / control:.2f} "
            f"| {run['rumi_core_min'] / two['rumi_core_min']:.2f}x | {run['rumi-eo_min'] / two['rumi-eo_min']:.2f}x |"
        )
    before, after = machine["sha256_speedup_before"], machine["sha256_speedup_after"]
    print(f"\ncontrol: SHA-256 ran {before:.2f}x / {after:.2f}x faster on 2 threads than on 1 (before / after), mean {control:.2f}x")
    print(f"goals, {GOAL_SCENARIO} on 2 threads: rumi_core / rumi-eo >= 1.0x; rumi_core 2-thread speed-up >= 0.9x the control's")
    for run in runs:
        if run["threads"] != 2 or run["scenario"] != GOAL_SCENARIO:
            continue
        one = next(r for r in runs if r["threads"] == 1 and all(r[k] == run[k] for k in ("file", "scenario", "verify")))
        cpu = run["rumi-eo_cpu"] / run["rumi_core_cpu"]
        print(
            f"  {run['file']}, checksums {'on' if run['verify'] else 'off'}: rumi_core / rumi-eo {run['rumi-eo'] / run['rumi_core']:.2f}x "
            f"(at best times {run['rumi-eo_min'] / run['rumi_core_min']:.2f}x, in CPU time {cpu:.2f}x; "
            f"{run['rumi_core'] * 1e3:.2f} vs {run['rumi-eo'] * 1e3:.2f} ms per read), "
            f"speed-up {one['rumi_core'] / run['rumi_core']:.2f}x = {one['rumi_core'] / run['rumi_core'] / control:.2f} of the control's"
        )


def rumi_core_version() -> str:
    from importlib.metadata import version

    return version("rumi-forge")


if __name__ == "__main__":
    sys.exit(main())
