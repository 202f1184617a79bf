"""Small windows of a cube of hundreds of thousands of frames: rumi_core against rumi-eo on the same file.

A reader computes every frame's offset from the header blob, so the blob of
a cube of many frames is large (one bit-packed count per frame) and a reader
that parses it, or rebuilds its offsets, on every read pays for the whole
cube on every window. This benchmark writes a 20-date x 4-band 1024 x 1024
uint16 cube (:func:`rumi_core.testing.synthetic_cube`) with 16 x 16 tiles
and one frame per band, date and tile (``frame_unit`` 0): 327,680 frames,
a blob of 369 kB. Both readers then read windows of every band and date
from it, given the blob's bytes, as a training loader holding the blob of
a STAC item does: one tile location (80 frames) and 4 x 4 of them (1,280
frames), on 1 and 2 threads, checksums on, side by side for ``--rounds``
rounds, each reader in processes that only read
(:func:`read.time_side_by_side`). Times are medians over all rounds.

Usage::

    .venv/bin/python benchmarks/many_frames.py [--reps N] [--rounds N]

No assertion is made on the numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from read import peer_python, time_side_by_side  # benchmarks/ is on sys.path: this file runs as a script

import rumi_core
from rumi_core.testing import synthetic_cube

DATES, BANDS, SIZE, TILE = 20, 4, 1024, 16


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20, help="timed reads of the one-location window per round (4 x 4: a quarter)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating the two readers")
    args = parser.parse_args()
    if args.reps < 1 or args.rounds < 1:
        parser.error("--reps and --rounds must be at least 1")
    scenarios = [
        {"name": "16x16 window, 1 location, 80 frames", "window": [512, 256, 16, 16], "reps": args.reps, "warmup": 2},
        {"name": "64x64 window, 16 locations, 1280 frames", "window": [512, 256, 64, 64], "reps": max(1, args.reps // 4), "warmup": 1},
    ]
    python = peer_python()
    cube = synthetic_cube(DATES, BANDS, SIZE, SIZE, seed=1)
    with tempfile.TemporaryDirectory(prefix="rumi-bench-") as tmp:
        work = Path(tmp)
        path = work / "many.rumi"
        start = time.perf_counter()
        bands, dates = [f"band {b}" for b in range(BANDS)], [f"2024-01-{d + 1:02d}" for d in range(DATES)]
        blob = rumi_core.write(path, cube, bands=bands, times=dates, tile_size=TILE)
        written = time.perf_counter() - start
        with open(path, "rb") as f:  # written back before timing: the first round would share the disk with it
            os.fsync(f.fileno())
        frames = rumi_core.HeaderBlob.from_bytes(blob).layout.frame_count
        print(
            f"cube: {DATES} x {BANDS} x {SIZE} x {SIZE} uint16, tiles {TILE}: {frames} frames, blob {len(blob)} bytes, "
            f"file {path.stat().st_size} bytes (written in {written:.0f} s)"
        )
        print(f"machine: {len(os.sched_getaffinity(0))} CPUs; load average {os.getloadavg()[0]:.2f} before")
        runs = time_side_by_side(python, {"many": (path, blob)}, scenarios, cube, args.rounds, settings=[(True, 1), (True, 2)])
    print()
    print("| read | threads | rumi_core ms | rumi-eo ms | rumi_core / rumi-eo (speed) | rumi_core CPU ms | rumi-eo CPU ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        print(
            f"| {run['scenario']} | {run['threads']} | {run['rumi_core'] * 1e3:.2f} | {run['rumi-eo'] * 1e3:.2f} "
            f"| {run['rumi-eo'] / run['rumi_core']:.2f}x | {run['rumi_core_cpu'] * 1e3:.2f} | {run['rumi-eo_cpu'] * 1e3:.2f} |"
        )
    print(f"\nload average {os.getloadavg()[0]:.2f} after; {args.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
