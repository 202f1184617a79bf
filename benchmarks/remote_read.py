"""Remote window reads: rumi over HTTP ranges against per-date COGs through GDAL's /vsicurl/.

A 20-date, 4-band uint16 cube (generated, Sentinel-2-like) is written once as
a rumi file (its STAC item carries the header blob inline) and once as 20
Cloud-Optimized GeoTIFFs (one per date, ZSTD + predictor 2, 512 blocks). A
local HTTP server on 127.0.0.1 serves both and counts every request and byte.
Then a 512 x 512 window of every date, all bands, is read:

* rumi, one read of all dates (``Cube.read(times=None, window=...)``);
* rumi, one read per date (20 reads);
* COG, one ``rasterio.open("/vsicurl/...")`` window read per date.

Printed per case: HTTP requests, bytes transferred, wall time (cold: each
case opens fresh readers; GDAL's caches are off). rumi's requests are all
frame runs, none for metadata; COG pays a header read per date.

    python benchmarks/remote_read.py [--size 2048] [--dates 20] [--tile 512] [--frame-unit 0|9]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

import rumi_core
from catalog.cube import Cube
from catalog.items import create_item
from catalog.storage import Storage
from catalog.testing import RangeRequestServer
from rumi_core.testing import synthetic_scene

BANDS = ["B2, Blue, 490nm", "B3, Green, 560nm", "B4, Red, 665nm", "B8, NIR, 842nm"]
CRS = "EPSG:32633"


def make_cube(dates: int, size: int) -> np.ndarray:
    """``(dates, 4, size, size)`` uint16: one ground scene, changing clouds and noise per date."""
    ground = synthetic_scene(4, size, size, seed=1, clouds=False, dtype=np.float64)
    out = np.empty((dates, 4, size, size), dtype=np.uint16)
    rng = np.random.default_rng(2)
    for t in range(dates):
        clouds = synthetic_scene(1, size, size, seed=100 + t, clouds=True, dtype=np.float64)[0]
        frame = ground * (1.0 + 0.05 * np.sin(t)) + rng.normal(0, 20, ground.shape)
        frame[:, clouds > 5500] = clouds[clouds > 5500]
        out[t] = np.clip(np.rint(frame), 0, 65535).astype(np.uint16)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048, help="image side in pixels")
    parser.add_argument("--dates", type=int, default=20)
    parser.add_argument("--tile", type=int, default=512)
    parser.add_argument("--window", type=int, default=512, help="window side in pixels")
    parser.add_argument("--offset", type=int, default=256, help="window row/col offset (256 straddles four 512 tiles)")
    parser.add_argument(
        "--frame-unit", type=int, default=0, choices=(0, 9), help="0: a location's frames run band by band; 9: date by date"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="rumi-remote-bench-"))
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    times = [str(np.datetime64("2021-01-01") + np.timedelta64(5 * t, "D")) for t in range(args.dates)]
    print(f"generating {args.dates} x 4 x {args.size}^2 uint16 in {work} ...", file=sys.stderr)
    data = make_cube(args.dates, args.size)

    blob = rumi_core.write(
        work / "cube.rumi", data, bands=BANDS, times=times, crs=CRS, transform=transform, tile_size=args.tile, frame_unit=args.frame_unit
    )
    (work / "cube.rumih").write_bytes(blob)
    item = create_item(work / "cube.rumi", work / "cube.rumih", data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (work / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    profile = {
        "driver": "COG", "width": args.size, "height": args.size, "count": 4, "dtype": "uint16", "crs": CRS,
        "transform": rasterio.Affine(*transform), "compress": "ZSTD", "predictor": 2, "blocksize": args.tile,
    }  # fmt: skip
    for t in range(args.dates):
        with rasterio.open(work / f"date_{t:02d}.tif", "w", **profile) as dst:
            dst.write(data[t])
    cog_bytes = sum(p.stat().st_size for p in work.glob("date_*.tif"))
    rumi_bytes = (work / "cube.rumi").stat().st_size

    o, w = args.offset, args.window
    window = ((o, o + w), (o, o + w))
    expected = data[:, :, o : o + w, o : o + w]
    results = []
    with RangeRequestServer(work) as server:
        # rumi: one read of every date.
        server.reset()
        start = time.perf_counter()
        with Cube.open(server.url("item.json"), storage=Storage()) as cube:
            opened = server.requests()
            got = cube.read(window=window, labels=False).data
        wall = time.perf_counter() - start
        assert np.array_equal(got, expected)
        results.append(("rumi, one read of all dates", server.requests("cube.rumi"), server.bytes_sent("cube.rumi"), wall, opened))

        # rumi: one read per date.
        server.reset()
        start = time.perf_counter()
        with Cube.open(server.url("item.json"), storage=Storage()) as cube:
            opened = server.requests()
            for t in range(args.dates):
                got_t = cube.read(times=[t], window=window, labels=False).data
                assert np.array_equal(got_t[0], expected[t])
        wall = time.perf_counter() - start
        results.append(("rumi, one read per date", server.requests("cube.rumi"), server.bytes_sent("cube.rumi"), wall, opened))

        # COG: one /vsicurl/ window read per date.
        server.reset()
        env = {
            "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
            "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
            "VSI_CACHE": "FALSE",
            "CPL_VSIL_CURL_NON_CACHED": "/vsicurl/" + server.base_url,
            "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
        }
        start = time.perf_counter()
        with rasterio.Env(**env):
            for t in range(args.dates):
                with rasterio.open("/vsicurl/" + server.url(f"date_{t:02d}.tif")) as src:
                    got_t = src.read(window=Window(o, o, w, w))
                assert np.array_equal(got_t, expected[t])
        wall = time.perf_counter() - start
        cog_requests = sum(1 for r in server.served if r.path.startswith("/date_"))
        cog_sent = sum(r.body_bytes for r in server.served if r.path.startswith("/date_"))
        cog_meta = sum(1 for r in server.served if r.path.startswith("/date_") and (r.range or "").startswith("bytes=0-"))
        results.append(("COG /vsicurl/, one read per date", cog_requests, cog_sent, wall, cog_meta))

    layout = rumi_core.HeaderBlob.from_bytes(blob).layout
    frames = layout.frames_for(bands=range(4), times=range(args.dates), rows=window[0], cols=window[1])
    what = f"cube {args.dates} x 4 x {args.size}^2 uint16, tiles {args.tile}, frame_unit {args.frame_unit}"
    print(f"\n{what}, window {w}^2 at ({o}, {o}) of every date, all bands")
    print(f"stored: rumi {rumi_bytes / 1e6:.1f} MB in one file; COG {cog_bytes / 1e6:.1f} MB in {args.dates} files")
    print(f"frames needed by the rumi read: {len(frames)}\n")
    header = f"{'case':<34} {'requests':>8} {'of which header':>15} {'MB sent':>8} {'wall s':>7}"
    print(header)
    print("-" * len(header))
    for name, requests, sent, wall, meta in results:
        meta_text = str(meta) if name.startswith("COG") else "0"
        print(f"{name:<34} {requests:>8} {meta_text:>15} {sent / 1e6:>8.2f} {wall:>7.3f}")
    print("\nrumi: the blob is inline in the item (the item is one GET of its own, not counted); every request is a frame run.")
    print("COG: 'header' counts requests starting at byte 0 (GDAL's first read of each file).")
    if args.json:
        print(json.dumps([{"case": n, "requests": r, "bytes": b, "wall_s": round(s, 4)} for n, r, b, s, _ in results], indent=2))
    for p in work.iterdir():
        p.unlink()
    os.rmdir(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
