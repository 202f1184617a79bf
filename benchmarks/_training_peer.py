"""The peers of ``benchmarks/training.py``, run in ``.venv-bench`` (torch 2.14.1, torchvision, TorchGeo, odc-stac).

``torchgeo``: a ``RasterDataset`` over the per-date COGs through ``/vsicurl/``,
sampled by ``RandomGeoSampler`` (256 pixels) and read with
``DataLoader(num_workers, batch_size)`` (spawned workers). TorchGeo 0.8 mosaics the files a
query's time slice overlaps into one ``(B, h, w)`` image and has no time-series
sample, so each sample asks the dataset once per date (the sampler's
spatial slice, that date's time slice) and stacks the answers into
``(T, B, 256, 256)``, what a rumi chip holds.

``odc``: ``odc.stac.load`` of one STAC item per COG (projection fields and
the four bands of its asset), lazily with dask chunks of the COG blocks,
then one ``.isel`` chip of every band and date at a time.

Prints one JSON line: chips per second after one batch per worker (or the first chip),
the chips measured and the warm-up chips.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# The GDAL settings a cloud-native reader uses (GDAL's own advice for COGs over HTTP).
os.environ.update(
    {
        "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
        "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
        "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
        "GDAL_NUM_THREADS": "1",
        "GDAL_HTTP_MAX_RETRY": "3",
        "GDAL_HTTP_RETRY_DELAY": "0.1",
    }
)

import numpy as np
import torch
from torch.utils.data import Dataset
from torchgeo.datasets import RasterDataset


class Cogs(RasterDataset):
    """The per-date COGs, dated by their names."""

    filename_glob = "cog_*.tif"
    filename_regex = r"cog_(?P<date>\d{8})\.tif"
    date_format = "%Y%m%d"
    is_image = True

    @property
    def dtype(self) -> torch.dtype:
        return torch.int32  # uint16 samples, kept integral (TorchGeo has no uint16 tensor path)


class DateStack(Dataset):
    """Answer a sampler's query with every date's image of its window, stacked ``(T, B, h, w)``."""

    def __init__(self, cogs: Cogs) -> None:
        self.cogs = cogs
        self.intervals = [(iv.left, iv.right) for iv in cogs.index.index]

    def __len__(self) -> int:
        return len(self.intervals)

    def __getitem__(self, query: tuple[slice, slice, slice]) -> dict[str, torch.Tensor]:
        x, y, _ = query
        images = [self.cogs[x, y, slice(a, b)]["image"] for a, b in sorted(self.intervals)]
        return {"image": torch.stack(images)}


def torchgeo(args: argparse.Namespace) -> dict[str, float]:
    from torch.utils.data import DataLoader
    from torchgeo.datasets import stack_samples
    from torchgeo.samplers import RandomGeoSampler

    paths = [f"/vsicurl/{args.base_url}cog_{d}.tif" for d in args.dates.split(",")]
    cogs = Cogs(paths=paths)
    assert len(cogs.index) == len(paths), cogs.index
    sampler = RandomGeoSampler(cogs, size=256, length=args.chips)
    # Workers are spawned: forked ones would share the parent's open /vsicurl/ connections
    # (the index is built by opening every file), and hang or read each other's answers.
    loader = DataLoader(
        DateStack(cogs), sampler=sampler, batch_size=args.batch, num_workers=args.workers, collate_fn=stack_samples,
        multiprocessing_context="spawn",
    )  # fmt: skip
    batches = iter(loader)
    # One batch from each worker first: starting workers and opening files is not chip time.
    first = next(batches)
    assert tuple(first["image"].shape[1:]) == (len(paths), 4, 256, 256), first["image"].shape
    warmup = first["image"].shape[0]
    for _ in range(args.workers - 1):
        warmup += next(batches)["image"].shape[0]
    start = time.perf_counter()
    count = 0
    for batch in batches:
        count += batch["image"].shape[0]
    wall = time.perf_counter() - start
    return {"chips_per_s": count / wall, "measured_chips": count, "warmup_chips": warmup}


def odc(args: argparse.Namespace) -> dict[str, float]:
    import datetime as dt

    import odc.stac
    import pystac
    import rasterio

    items = []
    for day in args.dates.split(","):
        url = f"{args.base_url}cog_{day}.tif"
        with rasterio.open(os.path.join(args.work, f"cog_{day}.tif")) as src:
            shape, transform, epsg = src.shape, src.transform, src.crs.to_epsg()
        item = pystac.Item(
            id=day,
            geometry=None,
            bbox=None,
            datetime=dt.datetime.strptime(day, "%Y%m%d").replace(tzinfo=dt.UTC),
            properties={"proj:code": f"EPSG:{epsg}", "proj:shape": list(shape), "proj:transform": list(transform)[:6]},
            stac_extensions=["https://stac-extensions.github.io/projection/v2.0.0/schema.json"],
        )
        item.add_asset(
            "image",
            pystac.Asset(
                href=url,
                media_type=pystac.MediaType.COG,
                roles=["data"],
                extra_fields={"bands": [{"name": f"b{i + 1}", "data_type": "uint16"} for i in range(4)]},
            ),
        )
        items.append(item)
    ds = odc.stac.load(items, chunks={"x": 512, "y": 512}, groupby="time")
    names = list(ds.data_vars)
    assert len(names) == 4 and ds.sizes["time"] == len(items), (names, ds.sizes)
    size_y, size_x = ds.sizes["y"], ds.sizes["x"]
    rng = np.random.default_rng(1)
    positions = [(int(rng.integers(0, size_y - 255)), int(rng.integers(0, size_x - 255))) for _ in range(args.chips + 1)]
    start = 0.0
    for k, (row, col) in enumerate(positions):
        if k == 1:
            start = time.perf_counter()
        chip = ds.isel(y=slice(row, row + 256), x=slice(col, col + 256)).to_array("band").transpose("time", "band", "y", "x").values
        assert chip.shape == (len(items), 4, 256, 256)
    wall = time.perf_counter() - start
    return {"chips_per_s": args.chips / wall, "measured_chips": args.chips, "warmup_chips": 1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=("torchgeo", "odc"))
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--dates", required=True, help="YYYYMMDD,... of the COGs cog_<date>.tif")
    parser.add_argument("--chips", type=int, required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", required=True, help="the local directory served at --base-url")
    args = parser.parse_args()
    result = torchgeo(args) if args.case == "torchgeo" else odc(args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
