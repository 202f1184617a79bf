"""Conversion benchmark: ``rumi convert`` on 2 workers against GDAL's COG driver.

Generates 20 dates (``--dates``) x 4 bands of Sentinel-2-like 2048 x 2048
uint16 scenes (one DEFLATE GeoTIFF per date and band, 80 files), then in the
same run

* converts one date of 512 x 512 scenes the same way, to show the pipeline's
  fixed cost (starting Beam and its workers, the planning and publishing
  stages, stopping the workers) apart from the per-GB cost;
* converts them with the pipeline on the FnApiRunner, in a process of its
  own, twice: as ``rumi convert`` runs by default here (two worker threads,
  one per core) and on two worker processes
  (``--direct_running_mode=multi_processing``);
* converts each scene to a Cloud Optimized GeoTIFF with rasterio/GDAL
  (ZSTD, predictor 2, 512 px blocks) on a pool of two processes;

in ``--rounds`` rounds (3), each contender once per round in that order, so
that a burst of another tenant's load on this shared machine slows one round
rather than one contender; the tables give the median over rounds and each
round's ratio is printed too, with the CPU steal time (:class:`StolenTime`)
during each conversion. It samples, for all, the resident memory (RSS) and CPU time (user + system)
of every child process. It prints input MB/s (uncompressed pixels per second
of wall time) and the same-run ratio rumi / COG, CPU seconds per GB of pixels
(summed over every process of the conversion), the peak RSS of each process
that converted and what conversion added over a process that imported the
same modules (:class:`WorkerImports`), per worker, output sizes and compression
ratios, as Markdown for ``benchmarks/README.md``, with the load average before
and after. Not a timed test: run it by hand (``python benchmarks/convert.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psutil
import rasterio
import rasterio.shutil

from pipelines.testing import write_series
from rumi_core.cli.options import counted

DATES = [f"2023-{m:02d}-{d:02d}" for m in range(3, 13) for d in (5, 20)]
"""The default series: 20 dates, twice a month from March to December."""


def series_dates(count: int) -> list[str]:
    """``count`` acquisition days: :data:`DATES` for up to 20, else one every 5 days from 1 January 2023.

    Sentinel-2's two satellites revisit every 5 days, so 73 dates are one year of one tile.
    """
    if count <= len(DATES):
        return DATES[:count]
    first = dt.date(2023, 1, 1)
    return [(first + dt.timedelta(days=5 * i)).isoformat() for i in range(count)]


def _cpu_jiffies() -> tuple[int, int]:
    """``(steal, total)`` clock ticks of every CPU since boot, from ``/proc/stat``; ``(0, 0)`` without it."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return (0, 0)
    return (ticks[7] if len(ticks) > 7 else 0, sum(ticks))


class StolenTime:
    """The share of this machine's CPU time the hypervisor ran other guests instead, during a block (``steal``).

    On a shared virtual machine a neighbour's burst can show here; a contender
    measured during one is slower for reasons of its own. 0 where the kernel
    does not account steal time.
    """

    percent = 0.0

    def __enter__(self) -> StolenTime:
        self._start = _cpu_jiffies()
        return self

    def __exit__(self, *exc: object) -> None:
        steal, total = (b - a for a, b in zip(self._start, _cpu_jiffies(), strict=True))
        self.percent = 100 * steal / total if total else 0.0


class ChildMonitor(threading.Thread):
    """Sample the RSS and CPU time of every child process (Beam or pool workers) every ``interval`` seconds.

    A worker's CPU time is the last sample seen before it exits, so at most one
    interval of each worker's work goes uncounted.
    """

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self.launcher_rss = 0
        self._launcher_cpu = time.process_time()
        self.launcher_cpu = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self._halt.wait(self.interval):
            self.launcher_rss = max(self.launcher_rss, me.memory_info().rss)
            for child in me.children(recursive=True):
                try:
                    with child.oneshot():
                        rss = child.memory_info().rss
                        times = child.cpu_times()
                except psutil.Error:
                    continue
                self.peaks[child.pid] = max(self.peaks.get(child.pid, 0), rss)
                self.cpu[child.pid] = times.user + times.system

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.launcher_cpu = time.process_time() - self._launcher_cpu

    @property
    def total_cpu(self) -> float:
        """CPU seconds of every child process seen, and of this process while sampling."""
        return sum(self.cpu.values()) + self.launcher_cpu

    def busiest(self, n: int) -> list[tuple[int, int]]:
        """The ``n`` children with the highest peak RSS, as ``(pid, bytes)``."""
        return sorted(self.peaks.items(), key=lambda kv: -kv[1])[:n]


WORKER_IMPORTS: Final = (
    "psutil",
    "numpy",
    "rasterio",
    "apache_beam.runners.worker.sdk_worker_main",
    "rumi_core",
    "pipelines.convert",
    "pipelines.transforms.frames",
    "pipelines.transforms.compress",
)
"""What every worker imports before any work: Beam's SDK harness (gRPC, the data plane) and the frame stage."""

_RECORDER = """\
import atexit, os, sys
if "CONTROL_API_SERVICE_DESCRIPTOR" in os.environ or "RUMI_BENCH_LAUNCHER" in os.environ:  # a Beam SDK worker, or the launcher
    def _record():
        with open(os.path.join({folder!r}, f"modules.{{os.getpid()}}"), "w") as f:
            f.write("\\n".join(sorted(sys.modules)))
    atexit.register(_record)
"""


class WorkerImports:
    """Record the modules each process of a conversion has imported when it exits.

    A ``sitecustomize`` module in a temporary folder put first on
    ``PYTHONPATH`` (worker processes inherit the environment) registers an
    exit handler in the launching process and every SDK worker process that
    writes ``sorted(sys.modules)`` to ``modules.<pid>``. A worker that publishes the catalogue also imports
    pystac, GeoPandas and Pillow, one that only compresses frames does not, so
    each worker's memory is compared with a process that imported exactly what
    that worker imported.
    """

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rumi-bench-imports-")
        self._saved: str | None = None

    def __enter__(self) -> WorkerImports:
        Path(self.folder, "sitecustomize.py").write_text(_RECORDER.format(folder=self.folder))
        self._saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (self.folder, self._saved) if p)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = self._saved

    def recorded(self) -> set[int]:
        """The processes that left a record."""
        return {int(p.suffix[1:]) for p in Path(self.folder).glob("modules.*")}

    def modules(self, pid: int) -> list[str]:
        """The modules process ``pid`` (one of :meth:`recorded`) had imported when it exited."""
        return [m for m in Path(self.folder, f"modules.{pid}").read_text().split() if m not in ("__main__", "sitecustomize")]

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def import_baseline(modules: list[str]) -> int:
    """RSS of a fresh Python process that has imported ``modules`` (after :data:`WORKER_IMPORTS`), before any work."""
    code = (
        "import importlib, sys, psutil\n"
        f"for name in {list(WORKER_IMPORTS) + modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        pass\n"
        "print(psutil.Process().memory_info().rss)"
    )
    import subprocess

    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])


_LAUNCHER = """\
import json, sys
from pipelines.convert import run
from pipelines.options import ConvertOptions
scenes, out, tile_size, frame_unit, *beam_args = sys.argv[1:]
summary = run([scenes], ConvertOptions(out=out, tile_size=int(tile_size), frame_unit=frame_unit), beam_args)
entries = [{"cube_id": e.cube_id, "file_bytes": e.file_bytes, "sha256": e.sha256} for e in summary.entries]
print(json.dumps({"seconds": summary.seconds, "entries": entries, "table": summary.table()}))
"""

MODES: Final = {"2 worker threads (default)": [], "2 worker processes": ["--direct_running_mode=multi_processing"]}
"""The runs of ``rumi convert``: label and Beam options (FnApiRunner, two workers, one per core, as on this machine)."""


@dataclass
class Conversion:
    """One ``rumi convert`` run in a process of its own, with its processes' samples."""

    seconds: float
    """Wall time of :func:`pipelines.convert.run`, from the launching process (its imports excluded, as a user's job)."""
    entries: list[dict[str, Any]]
    table: str
    monitor: ChildMonitor
    launcher: int
    """The launching process's id; the others are Beam worker processes."""
    steal: float
    """CPU steal during the run, percent (:class:`StolenTime`)."""


def convert(scenes: Path, out: Path, tile_size: int, frame_unit: str, beam_args: list[str]) -> Conversion:
    """Run ``rumi convert`` on two workers in a child process, sampling it and its workers."""
    shutil.rmtree(out, ignore_errors=True)
    monitor = ChildMonitor()
    monitor.start()
    argv = [sys.executable, "-c", _LAUNCHER, str(scenes), str(out), str(tile_size), frame_unit, "--direct_num_workers=2", *beam_args]
    env = {**os.environ, "RUMI_BENCH_LAUNCHER": "1"}
    with StolenTime() as stolen:
        launcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        stdout, stderr = launcher.communicate()
    monitor.stop()
    if launcher.returncode:
        raise RuntimeError(f"rumi convert failed ({launcher.returncode}): {stderr[-2000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    return Conversion(result["seconds"], result["entries"], result["table"], monitor, launcher.pid, stolen.percent)


def fixed_cost(work: Path, beam_args: list[str]) -> float:
    """Seconds ``rumi convert`` takes for one date of 4 bands of 512² on the same runner: what any run costs."""
    scenes = work / "scenes"
    if not scenes.exists():
        write_series(str(scenes), dates=DATES[:1], size=512, epsg=32633, origin=(399960.0, 5800020.0), seed=7)
    return convert(scenes, work / "rumi", 512, "auto", beam_args).seconds


def to_cog(args: tuple[str, str]) -> int:
    src, dst = args
    with rasterio.Env(GDAL_NUM_THREADS=1):
        rasterio.shutil.copy(src, dst, driver="COG", COMPRESS="ZSTD", PREDICTOR=2, BLOCKSIZE=512, LEVEL=9)
    return os.path.getsize(dst)


COG_LABEL: Final = "COG ZSTD+predictor 2, 2 processes"
"""The peer's row in the table."""


@dataclass
class CogRun:
    """One conversion of every scene to a COG on two processes."""

    seconds: float
    monitor: ChildMonitor
    nbytes: int
    steal: float


def cog(paths: list[str], cogs: Path) -> CogRun:
    """Convert every scene to a COG (:func:`to_cog`) on a pool of two processes, sampling them."""
    shutil.rmtree(cogs, ignore_errors=True)
    cogs.mkdir()
    monitor = ChildMonitor()
    monitor.start()
    with StolenTime() as stolen:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(2) as pool:
            nbytes = sum(pool.map(to_cog, [(p, str(cogs / Path(p).name)) for p in paths]))
        seconds = time.perf_counter() - t0
    monitor.stop()
    return CogRun(seconds, monitor, nbytes, stolen.percent)


@dataclass
class Round:
    """Every contender once, in turn: each ``rumi convert`` mode (:data:`MODES`), then COG."""

    rumi: dict[str, Conversion]
    cog: CogRun
    load: float
    """The 1-minute load average when the round started."""


def report_times(rounds: list[Round], pixels: int, files: int, fixed: dict[str, float], size: int, scenes: int) -> None:
    """Print the conversion table (median wall and CPU over rounds), each round's ratios, and the same-run ratios."""
    gb = pixels / 1e9
    runs: dict[str, list[Conversion | CogRun]] = {label: [r.rumi[label] for r in rounds] for label in MODES}
    runs[COG_LABEL] = [r.cog for r in rounds]
    # (median wall seconds, median CPU seconds) of each contender, computed once for the table and the ratios.
    medians = {
        name: (statistics.median(x.seconds for x in done), statistics.median(x.monitor.total_cpu for x in done))
        for name, done in runs.items()
    }
    sizes = {label: sum(e["file_bytes"] for e in rounds[0].rumi[label].entries) for label in MODES}
    sizes[COG_LABEL] = rounds[0].cog.nbytes
    print(f"| {scenes} scenes of {size}², {pixels / 1e6:.0f} MB | wall time | input MB/s | CPU s/GB | output MB | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in medians.items():
        row = name if name == COG_LABEL else f"rumi convert, {name}"
        print(
            f"| {row} | {wall:.1f} s | {pixels / 1e6 / wall:.1f} | {cpu / gb:.1f} | {sizes[name] / 1e6:.1f} | {pixels / sizes[name]:.3f} |"
        )
    print(f"| input GeoTIFF (DEFLATE) | | | | {files / 1e6:.1f} | {pixels / files:.3f} |")
    print()
    print(f"{len(rounds)} rounds (median above); wall seconds and rumi / COG input MB/s in each, CPU steal %, load average at the start:")
    for k, r in enumerate(rounds, 1):
        modes = "; ".join(
            f"{label} {c.seconds:.1f} s = {r.cog.seconds / c.seconds:.2f}x (steal {c.steal:.0f} %)" for label, c in r.rumi.items()
        )
        print(f"  round {k}: COG {r.cog.seconds:.1f} s (steal {r.cog.steal:.0f} %); {modes}; load {r.load:.2f}")
    cog_s, cog_cpu = medians[COG_LABEL]
    for position, label in enumerate(MODES):
        wall, cpu = medians[label]
        goal = " (goal >= 2x)" if position == 0 else ""
        print(
            f"same run, {label}: rumi / COG input MB/s {cog_s / wall:.2f}x{goal} at the medians; CPU s/GB rumi {cpu / gb:.1f}, "
            f"COG {cog_cpu / gb:.1f} (rumi: {cpu / cog_cpu:.2f}x the CPU); fixed cost {fixed[label]:.1f} s "
            "(one date of 4 bands of 512², start to finish)"
        )


def report_memory(rounds: list[Round], imports: WorkerImports, scene_bytes: int) -> None:
    """Print each rumi process's peak RSS and, for the processes that converted, its growth per worker over its imports."""
    recorded = imports.recorded()
    baselines: dict[tuple[str, ...], int] = {}
    for k, r in enumerate(rounds, 1):
        for label, run in r.rumi.items():
            for pid, peak in sorted(run.monitor.peaks.items()):
                if pid not in recorded:
                    continue
                modules = tuple(imports.modules(pid))
                if modules not in baselines:
                    baselines[modules] = import_baseline(list(modules))
                growth = peak - baselines[modules]
                threads = not MODES[label]
                workers = 2 if threads else int(pid != run.launcher)
                role = "launcher and its 2 worker threads" if threads else "launcher" if pid == run.launcher else "worker process"
                if not workers:
                    print(f"round {k}, rumi, {label}, {role} {pid}: peak RSS {peak / 2**20:.0f} MiB")
                    continue
                print(
                    f"round {k}, rumi, {label}, {role} {pid}: peak RSS {peak / 2**20:.0f} MiB, {growth / 2**20:.0f} MiB over a process "
                    f"with the same {len(modules)} modules imported = {growth / workers / scene_bytes:.2f}x one 4-band scene "
                    f"({scene_bytes / 2**20:.0f} MiB) per worker (goal < 2x)"
                )
    for pid, peak in max((r.cog.monitor.busiest(2) for r in rounds), key=lambda b: max(p for _, p in b)):
        print(f"COG worker {pid}: peak RSS {peak / 2**20:.0f} MiB (the round with the largest)")


def report_files(rounds: list[Round]) -> None:
    """Print each mode's output SHA-256, and any round whose files differ from the first round's."""
    for label in MODES:
        first = [(e["cube_id"], e["sha256"]) for e in rounds[0].rumi[label].entries]
        print(f"rumi files, {label}: " + ", ".join(f"{cube} sha256 {sha}" for cube, sha in first))
        for k, r in enumerate(rounds[1:], 2):
            other = [(e["cube_id"], e["sha256"]) for e in r.rumi[label].entries]
            if other != first:
                print(f"  round {k} wrote other bytes: {other}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None, help="Where to generate scenes (default: a temporary directory).")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--dates", type=int, default=20, help="Dates in the series (73: one year of Sentinel-2 at a 5-day revisit).")
    parser.add_argument("--tile-size", type=int, default=512)
    parser.add_argument(
        "--frame-unit",
        default="auto",
        help="rumi convert's --frame-unit (default auto; 0 gives the same file for this input without measuring units).",
    )
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of every contender in turn (default 3; the tables show medians).")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rumi-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    scenes = work / "scenes"
    imports = WorkerImports()
    print(
        f"conversion: rumi convert ({', '.join(MODES)}) against {COG_LABEL}, {counted(args.rounds, 'round')}, on "
        f"{counted(args.dates, 'date')} x 4 bands"
        f" of {args.size}² uint16 in {scenes} (generated first where absent)",
        file=sys.stderr,
        flush=True,
    )
    try:
        t0 = time.perf_counter()
        if not scenes.exists():
            write_series(str(scenes), dates=series_dates(args.dates), size=args.size, epsg=32633, origin=(399960.0, 5800020.0), seed=7)
        paths = sorted(str(p) for p in scenes.glob("*.tif"))
        with rasterio.open(paths[0]) as first:
            shape = (len(paths), first.height, first.width)
        if shape != (4 * args.dates, args.size, args.size):
            parser.error(f"{scenes} holds {shape[0]} scenes of {shape[1]}x{shape[2]}, not --dates {args.dates} x 4 of --size {args.size}")
        pixels = len(paths) * args.size * args.size * 2
        files = sum(os.path.getsize(p) for p in paths)
        print(
            f"{len(paths)} scenes, {pixels / 1e6:.0f} MB of pixels, {files / 1e6:.0f} MB of DEFLATE GeoTIFF,"
            f" ready in {time.perf_counter() - t0:.0f} s"
        )

        fixed = {label: fixed_cost(work / "fixed", beam_args) for label, beam_args in MODES.items()}
        load_before = os.getloadavg()
        rounds = []
        for _ in range(args.rounds):
            load = os.getloadavg()[0]
            with imports:
                rumi = {
                    label: convert(scenes, work / "rumi", args.tile_size, args.frame_unit, beam_args) for label, beam_args in MODES.items()
                }
            rounds.append(Round(rumi, cog(paths, work / "cog"), load))
        load_after = os.getloadavg()

        print()
        print(rounds[0].rumi[next(iter(MODES))].table)
        print()
        report_times(rounds, pixels, files, fixed, args.size, len(paths))
        print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {os.cpu_count()} CPUs")
        report_memory(rounds, imports, 4 * args.size * args.size * 2)
        report_files(rounds)
    finally:
        imports.cleanup()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
