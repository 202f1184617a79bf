"""Conversion benchmark: ``rumi convert`` on 2 workers against GDAL's COG driver.

Generates 20 dates x 4 bands of Sentinel-2-like 2048 x 2048 uint16 scenes (one
DEFLATE GeoTIFF per date and band, 80 files), then in the same run

* converts them with the pipeline on the FnApiRunner with two worker
  processes;
* converts each scene to a Cloud Optimized GeoTIFF with rasterio/GDAL
  (ZSTD, predictor 2, 512 px blocks) on a pool of two processes;

sampling, for both, the resident memory (RSS) and CPU time (user + system)
of every child process. It prints input MB/s (uncompressed pixels per second
of wall time) and the same-run ratio rumi / COG, CPU seconds per GB of pixels
(summed over the worker processes, plus the launching process), the peak RSS
of each worker and what conversion added over a process with the same
imports, output sizes and compression ratios, as Markdown for
``benchmarks/README.md``, with the load average before and after. Not a timed
test: run it by hand (``python benchmarks/convert.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil
import rasterio
import rasterio.shutil

from pipelines.convert import run
from pipelines.options import ConvertOptions
from pipelines.testing import write_series

DATES = [f"2023-{m:02d}-{d:02d}" for m in range(3, 13) for d in (5, 20)]


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
    def workers_cpu(self) -> float:
        """CPU seconds of every child process seen."""
        return sum(self.cpu.values())

    def busiest(self, n: int) -> list[tuple[int, int]]:
        """The ``n`` children with the highest peak RSS, as ``(pid, bytes)``."""
        return sorted(self.peaks.items(), key=lambda kv: -kv[1])[:n]


def import_baseline() -> int:
    """RSS of a fresh Python process that has imported what a worker imports, before any work.

    A worker process runs Beam's SDK harness (``sdk_worker_main``: gRPC, the
    data plane), so the baseline imports it too.
    """
    code = (
        "import psutil, numpy, rasterio, apache_beam.runners.worker.sdk_worker_main, rumi_core,"
        " pipelines.convert, pipelines.transforms.frames, pipelines.transforms.compress;"
        "print(psutil.Process().memory_info().rss)"
    )
    import subprocess

    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def to_cog(args: tuple[str, str]) -> int:
    src, dst = args
    with rasterio.Env(GDAL_NUM_THREADS=1):
        rasterio.shutil.copy(src, dst, driver="COG", COMPRESS="ZSTD", PREDICTOR=2, BLOCKSIZE=512, LEVEL=9)
    return os.path.getsize(dst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None, help="Where to generate scenes (default: a temporary directory).")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--dates", type=int, default=20)
    parser.add_argument("--tile-size", type=int, default=512)
    parser.add_argument(
        "--frame-unit",
        default="auto",
        help="rumi convert's --frame-unit (default auto; 0 gives the same file for this input without measuring units).",
    )
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rumi-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    scenes = work / "scenes"
    try:
        t0 = time.perf_counter()
        if not scenes.exists():
            write_series(str(scenes), dates=DATES[: args.dates], size=args.size, epsg=32633, origin=(399960.0, 5800020.0), seed=7)
        paths = sorted(str(p) for p in scenes.glob("*.tif"))
        pixels = len(paths) * args.size * args.size * 2
        files = sum(os.path.getsize(p) for p in paths)
        scene_bytes = 4 * args.size * args.size * 2
        print(
            f"{len(paths)} scenes, {pixels / 1e6:.0f} MB of pixels, {files / 1e6:.0f} MB of DEFLATE GeoTIFF,"
            f" ready in {time.perf_counter() - t0:.0f} s"
        )

        load_before = os.getloadavg()
        out = work / "rumi"
        shutil.rmtree(out, ignore_errors=True)
        rumi_monitor = ChildMonitor()
        rumi_monitor.start()
        options = ConvertOptions(out=str(out), tile_size=args.tile_size, frame_unit=args.frame_unit)
        summary = run([str(scenes)], options, ["--direct_num_workers=2", "--direct_running_mode=multi_processing"])
        rumi_monitor.stop()
        rumi_s = summary.seconds
        rumi_bytes = sum(e.file_bytes for e in summary.entries)

        cogs = work / "cog"
        shutil.rmtree(cogs, ignore_errors=True)
        cogs.mkdir()
        cog_monitor = ChildMonitor()
        cog_monitor.start()
        t0 = time.perf_counter()
        with ProcessPoolExecutor(2) as pool:
            cog_bytes = sum(pool.map(to_cog, [(p, str(cogs / Path(p).name)) for p in paths]))
        cog_s = time.perf_counter() - t0
        cog_monitor.stop()
        load_after = os.getloadavg()

        gb = pixels / 1e9
        print()
        print(summary.table())
        print()
        print(
            f"| {len(paths)} scenes of {args.size}², {pixels / 1e6:.0f} MB | wall time | input MB/s "
            "| CPU s/GB, workers | CPU s/GB, launcher | output MB | ratio |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, seconds, monitor, nbytes in (
            ("rumi convert, 2 workers (FnApiRunner)", rumi_s, rumi_monitor, rumi_bytes),
            ("COG ZSTD+predictor 2, 2 processes", cog_s, cog_monitor, cog_bytes),
        ):
            print(
                f"| {name} | {seconds:.1f} s | {pixels / 1e6 / seconds:.1f} | {monitor.workers_cpu / gb:.1f} "
                f"| {monitor.launcher_cpu / gb:.1f} | {nbytes / 1e6:.1f} | {pixels / nbytes:.3f} |"
            )
        print(f"| input GeoTIFF (DEFLATE) | | | | | {files / 1e6:.1f} | {pixels / files:.3f} |")
        print()
        rumi_cpu = rumi_monitor.workers_cpu + rumi_monitor.launcher_cpu
        cog_cpu = cog_monitor.workers_cpu + cog_monitor.launcher_cpu
        print(
            f"same run: rumi / COG input MB/s {cog_s / rumi_s:.2f}x (goal >= 2x); "
            f"CPU s/GB, workers and launcher: rumi {rumi_cpu / gb:.1f}, COG {cog_cpu / gb:.1f} (rumi: {rumi_cpu / cog_cpu:.2f}x the CPU)"
        )
        print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {os.cpu_count()} CPUs")
        baseline = import_baseline()
        for pid, peak in rumi_monitor.busiest(2):
            growth = peak - baseline
            print(
                f"rumi worker {pid}: peak RSS {peak / 2**20:.0f} MiB; one with the same imports holds {baseline / 2**20:.0f} MiB, "
                f"so {growth / 2**20:.0f} MiB were added = {growth / scene_bytes:.2f}x one 4-band scene "
                f"({scene_bytes / 2**20:.0f} MiB; goal < 2x)"
            )
        for pid, peak in cog_monitor.busiest(2):
            print(f"COG worker {pid}: peak RSS {peak / 2**20:.0f} MiB")
        print(f"launcher: peak RSS {rumi_monitor.launcher_rss / 2**20:.0f} MiB")
        print("rumi files: " + ", ".join(f"{e.cube_id} sha256 {e.sha256}" for e in summary.entries))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
