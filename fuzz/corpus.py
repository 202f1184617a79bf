"""The seed corpus: small valid files and their header blobs.

:func:`generated_corpus` writes, with rumi_core, one file per sample encoding
and per frame unit, crossed with the time types (regular and irregular
instants, intervals) and the georeferencing kinds (none, projected EPSG,
geographic EPSG with PixelIsPoint, a rotated transform). Files are a few hundred bytes to a few
KiB, with edge tiles, external IFD values (``B >= 5``) and several frames, so
every part of the format is present for the mutators.

:func:`peer_corpus` adds files written by rumi-eo, the reference
implementation, when its environment (``.venv-peer``, built by
``tests/test_interop.py``) exists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import rumi_core
from rumi_core.testing import random_samples

__all__ = ["Seed", "generated_corpus", "load_corpus", "peer_corpus", "save_corpus"]

_TIMES: dict[str, list[Any]] = {
    "regular": ["2020-01-01", "2020-01-11", "2020-01-21"],
    "irregular": ["2020-01-01T00:00:00Z", "2020-01-01T06:30:00Z", "2020-03-01T00:00:00Z"],
    "interval": [("2020-01-01", "2020-01-02"), ("2020-01-02", "2020-01-05"), ("2020-02-01", "2020-03-01")],
}
_GEOREFS: dict[str, dict[str, Any]] = {
    "none": {},
    "projected": {"crs": 32633, "transform": (10.0, 0.0, 500000.0, 0.0, -10.0, 4600000.0)},
    "geographic-point": {"crs": 4326, "transform": (0.25, 0.0, 10.0, 0.0, -0.25, 50.0), "pixel_is_point": True},
    "rotated": {"crs": 3857, "transform": (9.5, 0.25, -1e5, -0.5, -9.5, 6.1e6)},
}


_CUBE_UNITS = (0, 3, 4, 5, 6, 7, 8, 9)
"""The frame units valid for a Cube with more than one band."""


@dataclass(frozen=True)
class Seed:
    """One valid file and its header blob."""

    name: str
    file: bytes
    blob: bytes


def _write(name: str, data: np.ndarray[Any, Any], times: list[Any], georef: dict[str, Any], unit: int, tile: int, workdir: Path) -> Seed:
    path = workdir / f"{name}.rumi"
    bands = [f"band {b}" for b in range(data.shape[-3])]
    result = rumi_core.write(path, data, bands=bands, times=times, tile_size=tile, frame_unit=unit, **georef)
    return Seed(name, path.read_bytes(), bytes(result))


def generated_corpus() -> list[Seed]:
    """Write the corpus with rumi_core: every encoding, frame unit, time type and georeferencing kind."""
    seeds: list[Seed] = []
    time_kinds = list(_TIMES)
    georefs = list(_GEOREFS)
    with tempfile.TemporaryDirectory(prefix="rumi-fuzz-corpus-") as tmp:
        workdir = Path(tmp)
        for i, enc in enumerate(rumi_core.ENCODINGS):
            # A Cube of each encoding; unit, times and georeferencing rotate.
            unit = _CUBE_UNITS[i % len(_CUBE_UNITS)]
            times = _TIMES[time_kinds[i % 3]]
            bands = 5 if i % 4 == 0 else 2  # B >= 5 stores BitsPerSample and SampleFormat outside the IFD
            data = random_samples((3, bands, 5, 6), enc.name, seed=i)
            seeds.append(
                _write(f"{enc.name}-u{unit}-{time_kinds[i % 3]}-{georefs[i % 4]}", data, times, _GEOREFS[georefs[i % 4]], unit, 4, workdir)
            )
        for unit in range(10):
            for t, kind in enumerate(time_kinds):
                # Units 1 and 2 hold a whole location of one band: a Cube with B = 1.
                data = random_samples((3, 1 if unit in (1, 2) else 2, 7, 5), "uint16", seed=100 + unit)
                georef = georefs[(unit + t) % 4]
                seeds.append(_write(f"cube-u{unit}-{kind}-{georef}", data, _TIMES[kind], _GEOREFS[georef], unit, 4, workdir))
        for unit in range(3):
            for georef in georefs:
                data = random_samples((2, 9, 6), "int16", seed=200 + unit)
                seeds.append(_write(f"image-u{unit}-{georef}", data, ["2021-06-01T10:20:30Z"], _GEOREFS[georef], unit, 4, workdir))
        # One frame only (N = 1: TileOffsets and TileByteCounts are inline).
        seeds.append(_write("single-frame", random_samples((1, 3, 3), "uint8", seed=300), ["2022-01-01"], {}, 0, 8, workdir))
    return seeds


def peer_corpus(peer_python: str | os.PathLike[str]) -> list[Seed]:
    """Files written by rumi-eo through ``tests/peer/rumi_eo_batch.py``, run with ``peer_python``.

    Raises:
        RuntimeError: the peer script failed.
    """
    script = Path(__file__).resolve().parent.parent / "tests" / "peer" / "rumi_eo_batch.py"
    cases = [
        ("peer-image-u0", (2, 8, 8), "b (row h) (col w) -> row col b (h w)", ["2020-01-01"], "uint16"),
        ("peer-image-u2", (3, 8, 8), "b (row h) (col w) -> row col (h w b)", ["2020-01-01"], "int16"),
        ("peer-cube-u0", (3, 2, 8, 8), "t b (row h) (col w) -> row col b t (h w)", _TIMES["irregular"], "uint16"),
        ("peer-cube-u3", (3, 2, 8, 8), "t b (row h) (col w) -> row col (b t h w)", _TIMES["regular"], "float32"),
        ("peer-cube-u9", (3, 2, 8, 8), "t b (row h) (col w) -> row col t b (h w)", _TIMES["interval"], "uint8"),
    ]
    seeds: list[Seed] = []
    with tempfile.TemporaryDirectory(prefix="rumi-fuzz-peer-") as tmp:
        workdir = Path(tmp)
        manifest: dict[str, list[dict[str, Any]]] = {"write": []}
        for name, shape, pattern, times, dtype in cases:
            npy = workdir / f"{name}.npy"
            np.save(npy, random_samples(shape, dtype, seed=len(manifest["write"])))
            manifest["write"].append(
                {
                    "id": name,
                    "data": str(npy),
                    "pattern": pattern,
                    "tile_size": 4,
                    "codec": {"kind": "geozl", "recipe": "planar>zigzag>zstd", "geometry": "layout"},
                    "path": str(workdir / f"{name}.rumi"),
                    "header": str(workdir / f"{name}.rumih"),
                    "bands": [f"b{b}" for b in range(shape[-3])],
                    "time": [list(v) if isinstance(v, tuple) else v for v in times],
                    "crs": None,
                    "transform": None,
                    "pixel_is_point": False,
                }
            )
        (workdir / "manifest.json").write_text(json.dumps(manifest))
        subprocess.run([os.fspath(peer_python), str(script), str(workdir / "manifest.json"), str(workdir / "results.json")], check=True)
        results = json.loads((workdir / "results.json").read_text())
        for name, *_ in cases:
            if "error" in results["write"].get(name, {}):
                raise RuntimeError(f"rumi-eo could not write {name}: {results['write'][name]['error']}")
            seeds.append(Seed(name, (workdir / f"{name}.rumi").read_bytes(), (workdir / f"{name}.rumih").read_bytes()))
    return seeds


def save_corpus(seeds: list[Seed], directory: str | os.PathLike[str]) -> None:
    """Write each seed as ``NAME.rumi`` and ``NAME.rumih``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (out / f"{seed.name}.rumi").write_bytes(seed.file)
        (out / f"{seed.name}.rumih").write_bytes(seed.blob)


def load_corpus(directory: str | os.PathLike[str]) -> list[Seed]:
    """Read a corpus saved by :func:`save_corpus`, in name order (so a run is reproducible)."""
    out = Path(directory)
    return [Seed(p.stem, p.read_bytes(), p.with_suffix(".rumih").read_bytes()) for p in sorted(out.glob("*.rumi"))]


if __name__ == "__main__":  # pragma: no cover - a debugging aid
    save_corpus(generated_corpus(), sys.argv[1])
