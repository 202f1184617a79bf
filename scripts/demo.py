"""The demo behind ``make demo``: generate a Sentinel-2-like archive, convert it with the pipeline, validate.

1. Writes 6 dates x 4 bands of 1024 x 1024 uint16 GeoTIFFs on one UTM grid
   (spatial structure, noise, moving clouds; one file per date and band, dated
   by TIFFTAG_DATETIME) into OUT/scenes.
2. Runs ``rumi convert`` on them as it runs by default: one worker thread per core.
3. Validates every output file against its header blob, decodes it and
   compares it with the generated pixels, and reads one window statelessly.
4. Searches the STAC catalogue the conversion wrote (OUT/cubes/stac) for the
   cube and reads a window through the item it finds, counting requests.
5. Prints the pipeline's summary table.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import catalog
import rumi_core
from pipelines.convert import run
from pipelines.options import ConvertOptions
from pipelines.testing import write_series
from pipelines.worker_output import worker_output_to
from rumi_core.testing import CountingSource

if TYPE_CHECKING:
    import os

    from rumi_core.sources import ByteSource

DATES = ["2024-04-02", "2024-04-17", "2024-05-02", "2024-05-22", "2024-06-11", "2024-07-01"]


class CountingStorage(catalog.Storage):
    """Storage whose every source counts its range requests."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[CountingSource] = []

    def open(self, href: str | os.PathLike[str], *, size: int | None = None) -> ByteSource:
        source = CountingSource(super().open(href, size=size))
        self.sources.append(source)
        return source

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.sources)


def search_and_read(stac: Path) -> bool:
    """Find the cube in the catalogue and read a window through its item; True when it is found."""
    bbox = (13.55, 52.27, 13.65, 52.32)  # inside the grid (399960 E, 5800020 N, UTM 33N, 10.24 km square)
    when = "2024-05-01/2024-05-31"
    print(f"catalog  {stac} ({sum(1 for _ in stac.rglob('*.json'))} STAC documents, index {stac / 'items.parquet'})")
    hits = catalog.search(stac, bbox=bbox, datetime=when)
    print(f"search   rumi search {stac} --bbox {','.join(map(str, bbox))} --datetime {when} -> {[h.id for h in hits]}")
    if not hits or hits[0].item_href is None:
        return False
    storage = CountingStorage()
    with catalog.Cube.open(hits[0].item_href, storage=storage) as cube:
        before = storage.requests
        got = cube.read(bands="B04,B08", times=when, window=((256, 768), (512, 1024)), threads=2)
        print(
            f"read     item -> B04, B08 of {len(got.times)} date(s), a 512 x 512 window -> {got.data.shape}: "
            f"{storage.requests - before} range requests for frames, {before} before (inline header: {hits[0].inline_header})"
        )
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("demo-out"))
    args = parser.parse_args(argv)
    scenes, cubes = args.out / "scenes", args.out / "cubes"
    shutil.rmtree(args.out, ignore_errors=True)

    t0 = time.perf_counter()
    paths, data = write_series(str(scenes), dates=DATES, size=1024, epsg=32633, origin=(399960.0, 5800020.0), prefix="S2_T33UUU", seed=42)
    size = sum(Path(p).stat().st_size for p in paths)
    print(f"scenes   {len(paths)} GeoTIFFs ({len(DATES)} dates x 4 bands, 1024 x 1024 uint16, DEFLATE) in {scenes}")
    print(f"         {size / 1e6:.1f} MB, generated in {time.perf_counter() - t0:.1f} s")

    print(f"convert  rumi convert {scenes} --out {cubes} --tile-size 512  (one worker thread per core)")
    options = ConvertOptions(out=str(cubes), tile_size=512)
    log = args.out / "workers.log"
    with worker_output_to(log):  # Beam's warnings (and, on worker processes, every start and stop)
        summary = run([str(scenes)], options, progress=sys.stdout)
    if log.stat().st_size:
        print(f"         worker logs in {log}")

    ok = True
    for entry in summary.entries:
        path, blob = cubes / entry.file, (cubes / entry.blob).read_bytes()
        t0 = time.perf_counter()
        rumi_core.validate(path, blob)
        same = bool(np.array_equal(rumi_core.read(path, blob), data))
        ok &= same
        took = time.perf_counter() - t0
        print(f"valid    {entry.file}: structure, blob and {entry.frames} frames in {took:.2f} s; equals the scenes: {same}")
        with CountingSource(rumi_core.LocalFileSource(path)) as src:
            window = rumi_core.read(src, blob, bands=[2, 3], times=[0, 5], window=((256, 768), (512, 1024)))
        print(f"read     B04 and B08 of the first and last date, a 512 x 512 window -> {window.shape}: {src.requests} range requests")
    ok &= search_and_read(Path(options.catalog_dir))
    print()
    print(summary.table())
    return 0 if ok and summary.produced and not summary.dead_letters else 1


if __name__ == "__main__":
    raise SystemExit(main())
