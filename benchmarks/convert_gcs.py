"""Bucket conversion benchmark: ``rumi convert`` gs:// → gs:// on the emulator against local disk → local disk.

Generates ``dates`` x ``bands`` Sentinel-2-like ``size`` x ``size`` uint16 scenes
(one DEFLATE GeoTIFF per date and band; the default 20 x 4 x 4096² is about
2.7 GB of pixels), starts gcp-storage-emulator in its own process on
127.0.0.1, uploads the scenes, and in the same run converts them

* from the bucket to the bucket (``--out gs://rumi/cubes``), and
* from local disk to local disk,

each on the FnApiRunner with two worker processes, sampling the resident
memory of every worker. It prints wall time, input MB/s, peak RSS per worker
and the bytes that passed through the assembling step (the Beam counters
``AssembleFiles/bucket_bytes_uploaded`` and ``…_downloaded``: head, trailer
and blob up, head, trailer and the verification's sampled frames down),
against the size of the files, which local assembly reads and writes whole.
The frame unit and codec are pinned (tile frames, ``raster``) so both runs
do the same compression work. Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from convert import ChildMonitor  # the RSS sampler of benchmarks/convert.py: peak RSS of every child process

from pipelines.convert import run
from pipelines.options import ConvertOptions
from pipelines.testing import write_series

WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_emulator(port: int) -> subprocess.Popen[bytes]:
    code = (
        "import sys, time; from catalog.testing import GCSEmulator; "
        "e = GCSEmulator(bucket='rumi'); e.port = int(sys.argv[1]); e.start(); time.sleep(1e9)"
    )
    process = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the emulator did not start")


@dataclass(frozen=True)
class Row:
    """One conversion's measurements."""

    run: str
    frames: int
    seconds: float
    mb_s: float
    workers_mib: list[float]
    file_bytes: int
    through: int


def _measure(label: str, inputs: list[str], out: str, pixel_bytes: int, exclude: set[int]) -> Row:
    options = ConvertOptions(out=out, frame_unit=0, compression="raster", write_catalog=False)
    sampler = ChildMonitor()
    sampler.start()
    start = time.perf_counter()
    summary = run(inputs, options, WORKERS)
    seconds = time.perf_counter() - start
    sampler.stop()
    workers = sorted((rss for pid, rss in sampler.peaks.items() if pid not in exclude), reverse=True)[:2]
    file_bytes = sum(e.file_bytes for e in summary.entries)
    counters = summary.counters
    through = counters.get("AssembleFiles/bucket_bytes_uploaded", 0) + counters.get("AssembleFiles/bucket_bytes_downloaded", 0)
    return Row(
        run=label,
        frames=sum(e.frames for e in summary.entries),
        seconds=seconds,
        mb_s=pixel_bytes / seconds / 1e6,
        workers_mib=[w / 2**20 for w in workers],
        file_bytes=file_bytes,
        # Local assembly reads every part file and writes the whole file.
        through=through if out.startswith("gs://") else 2 * file_bytes,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=20)
    parser.add_argument("--bands", type=int, default=4)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    dates = [f"2023-{1 + i // 2:02d}-{5 + 15 * (i % 2):02d}" for i in range(args.dates)]
    bands = ("B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A")[: args.bands]
    pixel_bytes = args.dates * args.bands * args.size * args.size * 2
    print(
        f"bucket conversion: gs:// → gs:// on the emulator against local → local, {args.dates} dates x {args.bands} bands of "
        f"{args.size}² uint16 ({pixel_bytes / 1e9:.2f} GB of pixels), 2 worker processes; generating the scenes ...",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="rumi-bench-gcs-") as tmp:
        paths, _ = write_series(os.path.join(tmp, "scenes"), dates=dates, size=args.size, bands=bands, seed=0)
        port = _free_port()
        emulator = _start_emulator(port)
        os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
        try:
            from pipelines.bucket import output_store

            bucket = output_store().client.bucket("rumi")
            for path in paths:
                bucket.blob(f"scenes/{Path(path).name}").upload_from_filename(path)
            rows = [
                _measure("gs:// → gs://", ["gs://rumi/scenes/*.tif"], "gs://rumi/cubes", pixel_bytes, {emulator.pid}),
                _measure("local → local", [os.path.join(tmp, "scenes")], os.path.join(tmp, "out"), pixel_bytes, {emulator.pid}),
            ]
        finally:
            emulator.kill()
            emulator.wait()
    print(f"{args.dates} dates x {args.bands} bands x {args.size}², uint16: {pixel_bytes / 1e9:.2f} GB of pixels, 2 worker processes\n")
    print("| run | frames | time s | input MB/s | peak RSS per worker MiB | file MB | bytes through the assembler | of the file |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        rss = " / ".join(f"{w:.0f}" for w in r.workers_mib)
        print(
            f"| {r.run} | {r.frames} | {r.seconds:.1f} | {r.mb_s:.1f} | {rss} | {r.file_bytes / 1e6:.1f} "
            f"| {r.through:,} | {100 * r.through / max(r.file_bytes, 1):.2f} % |"
        )


if __name__ == "__main__":
    main()
