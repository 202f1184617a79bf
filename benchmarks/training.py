"""Training-chip throughput: rumi cubes over HTTP against per-date COGs (TorchGeo, odc-stac).

The same generated 20-date x 4-band uint16 scene (Sentinel-2-like) is stored
as one rumi cube (256 x 256 tiles, one frame per band, date and tile, the
STAC item carrying the header blob inline) and as one Cloud-Optimized
GeoTIFF per date (GDAL, ZSTD + predictor 2, 512 x 512 blocks). A local HTTP
server on 127.0.0.1 (``catalog.testing.RangeRequestServer``) serves both,
waits ``--latency`` seconds (20 ms) before each answer, as object storage
does, and counts requests and body bytes. Then, side by side in one run:

* chips of 256 x 256, 4 bands, 20 dates, through ``DataLoader(num_workers=2)``:
  :class:`catalog.torch.RumiChipDataset` (random sampler) against TorchGeo's
  ``RasterDataset`` + ``RandomGeoSampler`` on the COGs through ``/vsicurl/``
  (one dataset of the 20 dates; each sample stacks the dates, see
  ``benchmarks/_training_peer.py``);
* a lazy load, then one chip at a time: ``catalog.load(...).isel(...)``
  against ``odc.stac.load(...).isel(...)`` on the COGs' STAC items.

Printed per case: chips per second (after one batch per worker, which pays
for starting workers and opening files), requests and MB per chip, and for rumi
the bytes its needed frames hold (the frames a chip's window covers, counted
from the header blob) and the ratio of bytes sent to them.

TorchGeo and odc-stac run in their own virtual environment (PyPI's
torchvision does not import beside the local torch 2.13.0 wheel)::

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.14.1 torchvision==0.29.1 torchgeo odc-stac
    .venv/bin/python benchmarks/training.py [--size 2048] [--dates 20] [--chips 200] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio

import rumi_core
from catalog.chips import ChipSampler
from catalog.items import create_item
from catalog.load import load
from catalog.testing import RangeRequestServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_read import BANDS, CRS, make_cube

ROOT = Path(__file__).resolve().parents[1]
CHIP = 256


def _needed_bytes(blob: rumi_core.HeaderBlob, sampler: ChipSampler, count: int) -> int:
    lay = blob.layout
    total = 0
    for i in range(count):
        p = sampler.position(i)
        frames = lay.frames_for(
            bands=range(lay.samples_per_pixel), times=range(lay.time_count), rows=(p.row, p.row + CHIP), cols=(p.col, p.col + CHIP)
        )
        total += int(sum(int(blob.frame_byte_counts[f]) for f in frames))
    return total


def _rumi_chips(server: RangeRequestServer, args: argparse.Namespace, data: np.ndarray) -> dict[str, float]:
    from torch.utils.data import DataLoader

    from catalog.torch import RumiChipDataset

    dataset = RumiChipDataset([server.url("item.json")], bands=None, size=CHIP, length=args.chips, seed=0, cache_bytes=args.cache_mb << 20)
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers)
    server.reset()
    batches = iter(loader)
    # One batch from each worker first: starting workers and opening the item is not chip time.
    first = next(batches)
    for _ in range(args.workers - 1):
        next(batches)
    start = time.perf_counter()
    count = 0
    for batch in batches:
        count += batch["image"].shape[0]
        last = batch
    wall = time.perf_counter() - start
    # Requests and bytes of the whole epoch (the workers prefetch past the first batch).
    requests = server.requests("cube.rumi")
    sent = server.bytes_sent("cube.rumi")
    for k in range(first["image"].shape[0]):
        row, col = (int(v) for v in first["window"][k])
        assert np.array_equal(first["image"][k].numpy(), data[:, :, row : row + CHIP, col : col + CHIP])
    row, col = (int(v) for v in last["window"][-1])
    assert np.array_equal(last["image"][-1].numpy(), data[:, :, row : row + CHIP, col : col + CHIP])
    blob = rumi_core.HeaderBlob.from_bytes((Path(args.work) / "cube.rumih").read_bytes())
    sampler = ChipSampler([(args.size, args.size)], size=CHIP, sampler="random", length=args.chips, seed=0)
    needed = _needed_bytes(blob, sampler, args.chips)
    return {
        "chips_per_s": count / wall,
        "requests_per_chip": requests / args.chips,
        "mb_per_chip": sent / args.chips / 1e6,
        "needed_mb_per_chip": needed / args.chips / 1e6,
        "sent_over_needed": sent / needed,
    }


def _rumi_load(server: RangeRequestServer, args: argparse.Namespace, data: np.ndarray) -> dict[str, float]:
    rng = np.random.default_rng(1)
    span = args.size - CHIP + 1
    positions = [(int(rng.integers(0, span)), int(rng.integers(0, span))) for _ in range(args.load_chips + 1)]
    server.reset()
    ds = load([server.url("item.json")], bands=None, bbox=None)
    opened = server.requests()
    start = 0.0
    for k, (row, col) in enumerate(positions):
        if k == 1:
            start = time.perf_counter()
            warm = server.requests("cube.rumi"), server.bytes_sent("cube.rumi")
        chip = ds.data.isel(y=slice(row, row + CHIP), x=slice(col, col + CHIP)).values
        if k in (0, len(positions) - 1):
            assert np.array_equal(chip, data[:, :, row : row + CHIP, col : col + CHIP])
    wall = time.perf_counter() - start
    n = len(positions) - 1
    return {
        "chips_per_s": n / wall,
        "requests_per_chip": (server.requests("cube.rumi") - warm[0]) / n,
        "mb_per_chip": (server.bytes_sent("cube.rumi") - warm[1]) / n / 1e6,
        "open_requests": opened,
    }


def _peer(server: RangeRequestServer, args: argparse.Namespace, case: str, dates: list[str]) -> dict[str, float] | None:
    python = Path(args.peer_python)
    if not python.exists():
        print(f"skipping {case}: no {python} (see this script's docstring)", file=sys.stderr)
        return None
    server.reset()
    cmd = [
        str(python), str(ROOT / "benchmarks" / "_training_peer.py"), case, "--base-url", server.base_url, "--dates", ",".join(dates),
        "--chips", str(args.peer_chips if case == "torchgeo" else args.load_chips), "--batch", str(args.batch),
        "--workers", str(args.workers), "--work", str(args.work),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{case} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    served = [r for r in server.served if r.path.startswith("/cog_")]
    measured = int(result.pop("measured_chips"))
    # Requests and bytes of the whole run (warm-up included), per measured chip plus the warm-up's.
    total_chips = measured + int(result.pop("warmup_chips"))
    result["requests_per_chip"] = len(served) / total_chips
    result["mb_per_chip"] = sum(r.body_bytes for r in served) / total_chips / 1e6
    return result


def _write_files(work: Path, data: np.ndarray, args: argparse.Namespace, days: list[np.datetime64], dates: list[str]) -> None:
    """Write the rumi cube, its blob and item, and one COG per date."""
    transform = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    blob = rumi_core.write(work / "cube.rumi", data, bands=BANDS, times=[str(d) for d in days], crs=CRS, transform=transform,
                           tile_size=args.tile)  # fmt: skip
    (work / "cube.rumih").write_bytes(blob)
    item = create_item(work / "cube.rumi", work / "cube.rumih", data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (work / "item.json").write_text(json.dumps(item.to_dict(include_self_link=False)))
    profile = {
        "driver": "COG", "width": args.size, "height": args.size, "count": 4, "dtype": "uint16", "crs": CRS,
        "transform": rasterio.Affine(*transform), "compress": "ZSTD", "predictor": 2, "blocksize": 512,
    }  # fmt: skip
    for t, day in enumerate(dates):
        with rasterio.open(work / f"cog_{day}.tif", "w", **profile) as dst:
            dst.write(data[t])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048, help="image side in pixels")
    parser.add_argument("--dates", type=int, default=20)
    parser.add_argument("--tile", type=int, default=256, help="rumi tile side")
    parser.add_argument("--chips", type=int, default=200, help="chips drawn through the rumi DataLoader")
    parser.add_argument("--peer-chips", type=int, default=60, help="chips drawn through TorchGeo's DataLoader")
    parser.add_argument("--load-chips", type=int, default=20, help="chips cut from each lazy load")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cache-mb", type=int, default=256, help="RumiChipDataset's decoded-frame LRU per worker, MiB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the server waits before each answer")
    parser.add_argument("--peer-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    parser.add_argument("--only", choices=("rumi", "all"), default="all")
    parser.add_argument("--work", help="keep the generated files here, and reuse them when a run with the same options left them")
    args = parser.parse_args(argv)

    warmup = args.workers * args.batch
    if min(args.chips, args.peer_chips) <= warmup:
        parser.error(f"--chips and --peer-chips must exceed the warm-up, one batch per worker ({warmup} chips)")
    keep = args.work is not None
    args.work = args.work or tempfile.mkdtemp(prefix="rumi-training-bench-")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    days = [np.datetime64("2021-01-01") + np.timedelta64(5 * t, "D") for t in range(args.dates)]
    dates = [str(d).replace("-", "") for d in days]
    print(f"generating {args.dates} x 4 x {args.size}^2 uint16 in {work} ...", file=sys.stderr)
    data = make_cube(args.dates, args.size)
    if not (work / "item.json").exists():
        _write_files(work, data, args, days, dates)
    rumi_mb = (work / "cube.rumi").stat().st_size / 1e6
    cog_mb = sum(p.stat().st_size for p in work.glob("cog_*.tif")) / 1e6

    results: dict[str, dict[str, float] | None] = {}
    with RangeRequestServer(work, latency=args.latency) as server:
        print("rumi chips ...", file=sys.stderr)
        results["RumiChipDataset"] = _rumi_chips(server, args, data)
        print(f"rumi load ... (chips: {results['RumiChipDataset']})", file=sys.stderr)
        results["catalog.load(...).isel"] = _rumi_load(server, args, data)
        if args.only == "all":
            print(f"torchgeo ... (load: {results['catalog.load(...).isel']})", file=sys.stderr)
            results["TorchGeo RasterDataset + RandomGeoSampler"] = _peer(server, args, "torchgeo", dates)
            print(f"odc-stac ... (torchgeo: {results['TorchGeo RasterDataset + RandomGeoSampler']})", file=sys.stderr)
            results["odc.stac.load(...).isel"] = _peer(server, args, "odc", dates)

    what = f"{args.dates} dates x 4 bands x {args.size}^2 uint16; chips {CHIP}^2 x 4 bands x {args.dates} dates"
    print(f"\n{what}; latency {args.latency * 1000:.0f} ms per request; {args.workers} workers, batch {args.batch}")
    print(f"stored: rumi {rumi_mb:.1f} MB (tiles {args.tile}); COGs {cog_mb:.1f} MB (blocks 512)\n")
    header = f"{'case':<44} {'chips/s':>8} {'requests/chip':>14} {'MB/chip':>8}"
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        if r is None:
            continue
        print(f"{name:<44} {r['chips_per_s']:>8.2f} {r['requests_per_chip']:>14.1f} {r['mb_per_chip']:>8.2f}")
    r = results["RumiChipDataset"]
    assert r is not None
    print(f"\nRumiChipDataset: needed frames hold {r['needed_mb_per_chip']:.2f} MB per chip; sent / needed = {r['sent_over_needed']:.2f}")
    tg = results.get("TorchGeo RasterDataset + RandomGeoSampler")
    if tg:
        print(f"RumiChipDataset / TorchGeo chips/s = {r['chips_per_s'] / tg['chips_per_s']:.1f}x")
    odc = results.get("odc.stac.load(...).isel")
    if odc:
        print(f"catalog.load / odc-stac chips/s = {results['catalog.load(...).isel']['chips_per_s'] / odc['chips_per_s']:.1f}x")  # type: ignore[index]
    print(json.dumps(results, indent=2))
    if not keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GDAL_NUM_THREADS", "1")
    raise SystemExit(main())
