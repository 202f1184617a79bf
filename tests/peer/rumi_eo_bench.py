"""Write and time rumi files with rumi-eo, for ``benchmarks/read.py`` and ``benchmarks/many_frames.py``.

Runs in the rumi-eo peer environment (see ``tests/test_interop.py``), never
beside rumi_core. Two commands::

    python rumi_eo_bench.py write DATA.npy PATH RECIPE TILE
    python rumi_eo_bench.py serve THREADS VERIFY

``write`` splits a ``(B, Y, X)`` array into one frame per band and tile
(``frame_unit`` 0), compresses each with the geozl ``RECIPE``, writes it and
prints one JSON document (the blob in hex, the frame count, the versions).
``serve`` sets rumi-eo's thread count and checksum verification (both are
process-wide and fixed at the first read, hence one process per setting),
then answers timing commands on standard input, one JSON line each, with
the loop the benchmarks use for rumi_core (``read_timing.serve`` of
``benchmarks/read_timing.py``, loaded by path), until its input ends.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geozl
import numpy as np
import rumi

if TYPE_CHECKING:
    from types import ModuleType


def write(data_path: str, path: str, recipe: str, tile: int) -> dict[str, Any]:
    data = np.load(data_path)
    tf = rumi.frames(data, "b (row h) (col w) -> row col b (h w)", tile)
    graphs: dict[tuple[int, ...], Any] = {}
    for frame in tf:
        samples = frame.data
        if samples.shape not in graphs:
            graphs[samples.shape] = geozl.graph(samples, recipe)
        frame.compressed = geozl.compress(samples, graph=graphs[samples.shape])
    _, header = rumi.write(path, tf, bands=[f"band {b}" for b in range(data.shape[0])], time=["2024-06-01"])
    return {"header": header.hex(), "frames": len(tf), "compressed_bytes": int(tf.nbytes), "frame_unit": int(tf.frame_unit)}


def serve_reads(threads: int, verify: bool) -> None:
    """Answer ``read_timing.serve`` commands with ``rumi.read``, rumi-eo's threads and verification set first."""
    rumi.set_num_threads(threads)
    rumi.set_checksum_verification(verify)

    def open_read(path: str, header: bytes) -> Any:
        return lambda window: rumi.read(path, header, window=window)

    def reply(line: str) -> None:
        print(line, flush=True)

    _read_timing().serve(open_read, _window, sys.stdin, reply)


def _window(window: list[int] | None) -> tuple[int, ...] | None:
    """A scenario's ``[row, col, height, width]`` as rumi-eo's ``window``."""
    return None if window is None else tuple(window)


def _read_timing() -> ModuleType:
    """``benchmarks/read_timing.py``, loaded by path: this environment has none of the repository's packages."""
    source = Path(__file__).resolve().parents[2] / "benchmarks" / "read_timing.py"
    spec = importlib.util.spec_from_file_location("read_timing", source)
    assert spec is not None and spec.loader is not None, source
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    """Dispatch ``write`` (prints one JSON document) or ``serve``."""
    if argv[1] == "serve":
        serve_reads(int(argv[2]), argv[3] == "1")
        return 0
    if argv[1] != "write":
        raise SystemExit(f"unknown command {argv[1]!r}; use write or serve")
    result = write(argv[2], argv[3], argv[4], int(argv[5]))
    result["rumi_eo"] = rumi.__version__
    result["geozl"] = geozl.__version__
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
