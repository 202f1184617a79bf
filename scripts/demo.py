"""The demo behind ``make demo``: write a sample cube, build its blob, read a window, validate.

Every step goes through the public API a user would call, and prints what it did.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import rumi_core
from rumi_core.testing import CountingSource, synthetic_cube


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo-out"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "sample.rumi"

    data = synthetic_cube(6, 4, 1024, 1024, seed=42)
    bands = ["B2, Blue, 492nm", "B3, Green, 560nm", "B4, Red, 665nm", "B8, NIR, 833nm"]
    times = [np.datetime64("2024-05-01T10:30:00") + np.timedelta64(5 * i, "D") for i in range(6)]
    t0 = time.perf_counter()
    blob = rumi_core.write(
        path, data, bands=bands, times=times, crs="EPSG:32633", transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5800020.0), tile_size=256
    )
    dt = time.perf_counter() - t0
    size = path.stat().st_size
    print(
        f"wrote   {path}: cube {data.shape} {data.dtype}, {data.nbytes / 1e6:.1f} MB -> {size / 1e6:.1f} MB "
        f"(ratio {data.nbytes / size:.2f}x) in {dt:.2f} s"
    )

    blob_path = path.with_suffix(".rumih")
    built = rumi_core.build_header(path)
    assert built == blob, "the blob built from the finished file differs from the writer's"
    blob_path.write_bytes(built)
    print(f"header  {blob_path}: {len(built)} bytes for {rumi_core.HeaderBlob.from_bytes(built).layout.frame_count} frames")

    window = ((256, 768), (512, 1024))
    with CountingSource(rumi_core.LocalFileSource(path)) as src:
        t0 = time.perf_counter()
        got = rumi_core.read(src, blob_path.read_bytes(), bands=[2, 3], times=[0, 5], window=window)
        dt = time.perf_counter() - t0
    expected = data[[0, 5]][:, [2, 3], 256:768, 512:1024]
    same = bool(np.array_equal(got, expected))
    print(
        f"read    window rows 256:768 cols 512:1024, bands [2, 3], times [0, 5] -> {got.shape} in {dt * 1e3:.1f} ms; "
        f"{src.requests} range requests, {src.bytes_read / 1e3:.1f} kB, no metadata reads; bit-exact: {same}"
    )

    t0 = time.perf_counter()
    rumi_core.validate(path, built)
    print(f"valid   {path}: structure, blob and all frames checked in {time.perf_counter() - t0:.2f} s")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
