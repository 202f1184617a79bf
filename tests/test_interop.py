"""Interoperability with rumi-eo 0.26.1, the reference implementation, in both directions.

rumi-eo pins an older geozl and OpenZL than rumi_core, so it cannot be imported
here. A session fixture creates a separate virtual environment for it (cached
in ``<repo>/.venv-peer``), and one call of ``tests/peer/rumi_eo_batch.py``
runs every case on the rumi-eo side; files, arrays and JSON are exchanged
through ``tmp_path``. Without network access to install rumi-eo the tests are
skipped, unless ``RUMI_REQUIRE_PEER=1`` turns that into a failure.
``RUMI_PEER_PYTHON`` may name an existing interpreter that has rumi-eo 0.26.1.

Direction 1, rumi_core writes and rumi-eo reads: all 21 sample encodings, every
frame unit for Image B=1, Image B>1, Cube B=1 and Cube B>1, square and
non-square tiles with edge tiles, B >= 5 (external BitsPerSample), N = 1, 2, 3
and more, several codecs, time and georeferencing variants. Each file's blob
must equal ``rumi.info(source=path).header`` byte for byte; a full read and
two selective reads must return the exact bytes; and where rumi-eo can write
the same frames, its file must be identical to ours byte for byte.

Direction 2, rumi-eo writes (frames compressed by geozl 0.18 recipes or
OpenZL 0.2 graphs) and rumi_core reads: the read is bit-exact, the file passes
:func:`rumi_core.validate` with every frame decoded, and
:func:`rumi_core.build_header` returns rumi-eo's header.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumi_core
from rumi_core.encodings import ENCODINGS, encoding_for_dtype
from rumi_core.header import HeaderBlob
from rumi_core.testing import RUMI_EO_VERSION, random_samples, rumi_eo_environment, synthetic_cube

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
PEER_SCRIPT = Path(__file__).resolve().parent / "peer" / "rumi_eo_batch.py"
PEER_ENV = rumi_eo_environment(REPO)

# --------------------------------------------------------------------------- #
# The peer environment
# --------------------------------------------------------------------------- #


def _unavailable(reason: str) -> None:
    if os.environ.get("RUMI_REQUIRE_PEER") == "1":
        pytest.fail(f"rumi-eo {RUMI_EO_VERSION} is required (RUMI_REQUIRE_PEER=1) but unavailable: {reason}")
    pytest.skip(f"rumi-eo {RUMI_EO_VERSION} peer environment unavailable: {reason}")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@pytest.fixture(scope="session")
def peer_python() -> Path:
    """An interpreter with rumi-eo 0.26.1, in its own virtual environment."""
    override = os.environ.get("RUMI_PEER_PYTHON")
    if override:
        version = PEER_ENV.probe_output(Path(override))
        if version != RUMI_EO_VERSION:
            pytest.fail(f"RUMI_PEER_PYTHON={override} has rumi-eo {version}, expected {RUMI_EO_VERSION}")
        return Path(override)
    reason = PEER_ENV.build()
    if reason is not None:
        _unavailable(reason)
    return PEER_ENV.python


def _run_peer(python: Path, manifest: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Run the whole manifest in one peer process and return its results."""
    manifest_path, results_path = workdir / "manifest.json", workdir / "results.json"
    manifest_path.write_text(json.dumps(manifest))
    cmd = [str(python), str(PEER_SCRIPT), str(manifest_path), str(results_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=PEER_ENV.environ(), cwd=workdir, check=False)
    if proc.returncode != 0 or not results_path.exists():
        pytest.fail(f"the rumi-eo peer script exited {proc.returncode}:\n{_tail(proc.stderr + proc.stdout, 40)}")
    results: dict[str, Any] = json.loads(results_path.read_text())
    return results


# --------------------------------------------------------------------------- #
# Cases
# --------------------------------------------------------------------------- #

NUMPY_NATIVE = frozenset(
    {
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    }
)
"""Encodings rumi-eo's Python writer (``rumi.frames``) and NumPy reader take; the others only travel by DLPack."""

DEFAULT_TIMES = ("2021-01-01", "2021-01-11", "2021-01-21T10:30:00Z", "2021-02-01", "2021-02-02", "2021-03-01")
GAPPY_INTERVALS = (("2020-01-01T00:00:01Z", "2020-01-02"), ("2020-02-01", "2020-03-01"), ("2020-03-05", "2020-03-05T12:00:00Z"))
WIDE_TIMES = ("0001-01-01", "1900-01-01", "1950-06-15T01:02:03Z", "9999-12-31")
"""Instants whose residuals need 39 bits."""
EVERY_THIRD_DAY = tuple(str(np.datetime64("2020-01-01") + 3 * i + i % 4) for i in range(100))
UTM = {"crs": 32633, "transform": (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)}
GEOGRAPHIC = {"crs": 4326, "transform": (0.0001, 0.0, -3.7, 0.0, -0.0001, 40.4)}
NO_CRS: dict[str, Any] = {"crs": None, "transform": None}


@dataclass(frozen=True)
class Case:
    """One file: its array, layout, labels and how it is compressed."""

    id: str
    shape: tuple[int, ...]
    """``(B, Y, X)`` Image or ``(T, B, Y, X)`` Cube."""
    dtype: str
    frame_unit: int
    tile: int | tuple[int, int]
    codec: Any = None
    """rumi_core codec for direction 1; a peer codec dict for direction 2."""
    times: tuple[Any, ...] | None = None
    georef: dict[str, Any] = field(default_factory=lambda: dict(UTM))
    pixel_is_point: bool = False
    bands: tuple[str, ...] | None = None
    scene: bool = False
    """Sentinel-2-like data instead of random bit patterns."""
    zeros: str = ""
    """``"all"`` for an all-zero array; ``"left"`` to zero the left half (frames of very different sizes)."""
    seed: int = 0

    @property
    def tbyx(self) -> tuple[int, int, int, int]:
        t, b, y, x = (1, *self.shape) if len(self.shape) == 3 else self.shape
        return t, b, y, x

    @property
    def band_texts(self) -> list[str]:
        b = self.tbyx[1]
        return list(self.bands) if self.bands is not None else [f"B{i + 1}, band {i} of {self.id}" for i in range(b)]

    @property
    def time_values(self) -> list[Any]:
        t = self.tbyx[0]
        return list(self.times) if self.times is not None else list(DEFAULT_TIMES[:t])

    def data(self) -> np.ndarray:
        t, b, y, x = self.tbyx
        if self.scene:
            arr = synthetic_cube(t, b, y, x, seed=self.seed, dtype=self.dtype)
            return arr if len(self.shape) == 4 else arr[0]
        arr = random_samples(self.shape, self.dtype, seed=self.seed)
        if self.zeros == "all":
            arr = np.zeros_like(arr)
        elif self.zeros == "left":
            arr[..., : x // 2] = np.zeros((), arr.dtype)
        return arr


CUBE_UNITS = (0, 3, 4, 5, 6, 7, 8, 9)
"""Frame units valid when B > 1 and T > 1."""
TILE_UNITS = {(1, 1): (0,), (2, 1): (0, 1, 2), (1, 2): (0, 1, 2), (2, 2): CUBE_UNITS}


def units_for(b: int, t: int) -> tuple[int, ...]:
    return TILE_UNITS[(min(b, 2), min(t, 2))]


def peer_pattern(shape: tuple[int, ...], unit: int) -> tuple[str, bool]:
    """rumi-eo's frame pattern for ``frame_unit``, and whether the array's band axis is dropped.

    rumi-eo records singleton band and time axes as absent, so a Cube with one
    band is handed over as ``(T, Y, X)``.
    """
    b = shape[0] if len(shape) == 3 else shape[1]
    spatial = "(row h) (col w)"
    if len(shape) == 3:
        out = {0: "row col b (h w)", 1: "row col (b h w)", 2: "row col (h w b)"}[unit]
        return f"b {spatial} -> {out}", False
    if b == 1:
        out = {0: "row col t (h w)", 1: "row col (t h w)", 2: "row col (h w t)"}[unit]
        return f"t {spatial} -> {out}", True
    cell = {3: "b t h w", 4: "t b h w", 5: "b h w t", 6: "t h w b", 7: "h w b t", 8: "h w t b"}
    out = {0: "row col b t (h w)", 9: "row col t b (h w)"}.get(unit) or f"row col ({cell[unit]})"
    return f"t b {spatial} -> {out}", False


def subsets(case: Case) -> list[dict[str, Any]]:
    """Selective reads: a window across tile edges with bands reversed and later times; one corner pixel."""
    t, b, y, x = case.tbyx
    r0, r1 = y // 3, max(y // 3 + 1, y - y // 5)
    c0, c1 = x // 4, max(x // 4 + 1, x - 1)
    first: dict[str, Any] = {"window": [r0, c0, r1 - r0, c1 - c0]}
    if b > 1:
        first["bands"] = list(range(b - 1, -1, -2))
    if t > 1:
        first["time_range"] = [1, t]
    corner: dict[str, Any] = {"window": [y - 1, x - 1, 1, 1], "bands": [b - 1]}
    if t > 1:
        corner["time"] = [0]
    return [{}, first, corner]


def expected_subset(data: np.ndarray, spec: dict[str, Any]) -> np.ndarray:
    cube = data if data.ndim == 4 else data[np.newaxis]
    if spec.get("time_range"):
        cube = cube[spec["time_range"][0] : spec["time_range"][1]]
    elif spec.get("time") is not None:
        cube = cube[spec["time"]]
    if spec.get("bands") is not None:
        cube = cube[:, spec["bands"]]
    if spec.get("window"):
        r, c, h, w = spec["window"]
        cube = cube[:, :, r : r + h, c : c + w]
    return cube if data.ndim == 4 else cube[0]


def our_window(spec: dict[str, Any]) -> dict[str, Any]:
    """The same selection as rumi_core.read keyword arguments."""
    kwargs: dict[str, Any] = {}
    if spec.get("window"):
        r, c, h, w = spec["window"]
        kwargs["window"] = ((r, r + h), (c, c + w))
    if spec.get("bands") is not None:
        kwargs["bands"] = spec["bands"]
    if spec.get("time_range"):
        kwargs["times"] = list(range(*spec["time_range"]))
    elif spec.get("time") is not None:
        kwargs["times"] = spec["time"]
    return kwargs


def _ours_cases() -> list[Case]:
    cases: list[Case] = []
    # Every encoding: a Cube through all eight frame units valid for it in turn, and an Image
    # of five bands (external BitsPerSample) with non-square tiles.
    for i, enc in enumerate(ENCODINGS):
        unit = CUBE_UNITS[i % len(CUBE_UNITS)]
        cases.append(Case(f"dtype-{enc.name}-cube-u{unit}", (2, 3, 33, 41), enc.name, unit, 16, seed=i))
        cases.append(Case(f"dtype-{enc.name}-image-b5-u{i % 3}", (5, 20, 18), enc.name, i % 3, (8, 12), seed=100 + i))
    # Every frame unit for each kind of (B, T), on Sentinel-2-like data.
    for shape, tile in (
        ((1, 45, 37), 16),
        ((3, 45, 37), (16, 24)),
        ((3, 1, 45, 37), (24, 16)),
        ((3, 4, 45, 37), 16),
        ((2, 5, 30, 20), (16, 8)),
    ):
        t, b = (1, shape[0]) if len(shape) == 3 else shape[:2]
        for unit in units_for(b, t):
            name = f"unit{unit}-t{t}-b{b}-tile{tile if isinstance(tile, int) else 'x'.join(map(str, tile))}"
            cases.append(Case(name, shape, "uint16", unit, tile, scene=True, seed=unit))
    # N at the external-value boundaries (TileOffsets from N=2, TileByteCounts from N=3) and beyond.
    cases += [
        Case("n1-image-b1", (1, 20, 30), "uint16", 0, 32),
        Case("n1-image-b4-cell", (4, 20, 30), "int16", 1, 32),
        Case("n2-image-b1", (1, 20, 30), "uint16", 0, (20, 16)),
        Case("n2-image-b2", (2, 10, 10), "uint8", 0, 16),
        Case("n3-image-b3", (3, 20, 30), "float32", 0, 32),
        Case("n3-image-b1", (1, 5, 40), "int32", 0, (8, 16)),
        Case("n4-image-b2", (2, 10, 10), "uint16", 0, (5, 10)),
        Case("n35-tile1x1", (1, 5, 7), "uint8", 0, 1),
        Case("tile1x7", (2, 3, 20), "int16", 2, (1, 7)),
        Case("tile-wider-than-image", (2, 9, 50), "uint16", 1, (16, 8)),
        Case("b17-image", (17, 4, 5), "uint16", 2, 4),
        Case("b17-image-u0", (17, 4, 5), "int8", 0, 3),
        Case("b6-cube-u9", (2, 6, 12, 10), "uint16", 9, (5, 7)),
        Case("t7-cube-b1", (7, 1, 10, 9), "float32", 1, 4, times=tuple(f"2020-0{m}-0{m}" for m in range(1, 8))),
        Case("edge-tiles-512", (2, 600, 520), "uint16", 0, 512, scene=True),
        Case("b256-image-u2", (256, 3, 2), "uint8", 2, 2),
        Case("t100-cube-b1", (100, 1, 3, 4), "int16", 1, 2, times=EVERY_THIRD_DAY),
        Case(
            "equal-frame-sizes", (3, 2, 16, 16), "uint16", 0, 8, codec={"name": "openzl", "configuration": {"graph": "store"}}, zeros="all"
        ),
        Case("count-bits-wide", (2, 64, 64), "uint64", 0, 8, codec={"name": "openzl", "configuration": {"graph": "zstd"}}, zeros="left"),
    ]
    # Codecs: every OpenZL graph and several geozl recipes that rumi_core writes.
    graphs = ("compress", "field_lz", "zstd", "entropy", "huffman", "bitpack", "store")
    recipes = (
        "planar>zigzag>transpose>entropy",
        "delta_w>zigzag>field_lz",
        "med>zigzag>pfor",
        "planar>zigzag>zstd",
        "average>zigzag>categorical",
        "wp_static>zigzag>transpose>zstd",
        "delta_n>zigzag>entropy",
        "delta_1d>pfor",
        "id>field_lz",
    )
    for i, graph in enumerate(graphs):
        codec = {"name": "openzl", "configuration": {"graph": graph}}
        cases.append(Case(f"openzl-{graph}", (2, 3, 30, 26), "uint16", CUBE_UNITS[i], 16, codec=codec, scene=True, seed=i))
    for i, recipe in enumerate(recipes):
        codec = {"name": "geozl", "configuration": {"recipe": recipe}}
        cases.append(Case(f"geozl-{recipe}", (3, 2, 30, 26), "uint16", CUBE_UNITS[(i + 3) % 8], (16, 12), codec=codec, scene=True, seed=i))
    for dtype, recipe, unit in (
        ("int32", "planar>zigzag>transpose>zstd", 2),
        ("float32", "planar>zigzag>field_lz", 1),
        ("int8", "delta_w>zigzag>entropy", 0),
        ("uint64", "med>zigzag>pfor", 2),
        ("float64", "delta_1d>zstd", 1),
    ):
        codec = {"name": "geozl", "configuration": {"recipe": recipe}}
        cases.append(Case(f"geozl-{dtype}-{recipe}", (3, 21, 19), dtype, unit, 8, codec=codec, seed=7))
    for dtype in ("float16", "complex128", "bool", "uint32"):
        codec = {"name": "openzl", "configuration": {"graph": "field_lz"}}
        cases.append(Case(f"openzl-field_lz-{dtype}", (2, 2, 17, 23), dtype, 5, 8, codec=codec, seed=3))
    # Time axes, georeferencing and band texts.
    cases += [
        Case("time-intervals", (2, 1, 12, 12), "uint16", 1, 8, times=(("2020-01-01", "2021-01-01"), ("2021-01-01", "2021-07-01"))),
        Case("time-intervals-gaps-seconds", (3, 2, 12, 12), "uint16", 4, 8, times=GAPPY_INTERVALS),
        Case("time-before-1970", (3, 1, 8, 8), "uint8", 2, 8, times=("1969-07-20T20:17:40Z", "1970-01-01", "2038-01-19T03:14:08Z")),
        Case("time-equal-instants", (3, 2, 8, 8), "uint8", 0, 8, times=("2022-05-05", "2022-05-05", "2022-05-05")),
        Case("time-half-step", (3, 1, 4, 4), "uint8", 0, 4, times=("1970-01-01T00:00:00Z", "1970-01-01T00:00:01Z", "1970-01-01T00:00:03Z")),
        Case("time-wide-residuals", (4, 1, 4, 4), "uint8", 2, 4, times=WIDE_TIMES),
        Case("time-regular-seconds", (4, 1, 8, 8), "uint8", 0, 8, times=tuple(f"2022-05-05T00:00:{s:02d}Z" for s in (0, 10, 20, 30))),
        Case("georef-geographic", (2, 16, 16), "uint16", 0, 8, georef=dict(GEOGRAPHIC)),
        Case("georef-none", (2, 16, 16), "uint16", 0, 8, georef=dict(NO_CRS)),
        Case("georef-pixel-is-point", (2, 16, 16), "uint16", 1, 8, pixel_is_point=True),
        Case("georef-none-pixel-is-point", (1, 16, 16), "uint16", 0, 8, georef=dict(NO_CRS), pixel_is_point=True),
        Case("georef-rotated", (1, 16, 16), "float32", 0, 8, georef={"crs": 3857, "transform": (9.5, 0.25, -1e5, -0.5, -9.5, 6.1e6)}),
        Case("bands-unicode", (3, 8, 8), "uint16", 2, 8, bands=("B4, Red, 664.5nm (S2A) / 665nm (S2B)", "Ñandú 🛰", "x" * 300)),
    ]
    return cases


def _peer_cases() -> list[Case]:
    cases: list[Case] = []

    # rumi-eo has no codec of its own: the caller compresses every frame. Its
    # documentation uses geozl's planar>zigzag>zstd with one graph per frame shape.
    def geozl(recipe: str, geometry: str = "layout") -> dict[str, Any]:
        return {"kind": "geozl", "recipe": recipe, "geometry": geometry}

    def openzl(graph: str, version: int = 24) -> dict[str, Any]:
        return {"kind": "openzl", "graph": graph, "format_version": version}

    # Every frame unit of a Cube with B > 1 and T > 1, each with another recipe; geozl's default geometry every other time.
    unit_recipes = (
        "planar>zigzag>zstd",
        "delta_w>zigzag>field_lz",
        "planar>zigzag>transpose>entropy",
        "med>zigzag>pfor",
        "delta_n>zigzag>blocked_transpose_zstd",
        "average>zigzag>entropy",
        "wp_static>zigzag>transpose>zstd",
        "delta_1d>zstd",
        "id>field_lz",
        "planar>zigzag>categorical",
    )
    for i, recipe in enumerate(unit_recipes):
        unit = CUBE_UNITS[i % len(CUBE_UNITS)]
        codec = geozl(recipe, "layout" if i % 2 == 0 else "default")
        cases.append(Case(f"unit{unit}-cube-{recipe}", (3, 4, 60, 70), "uint16", unit, 32, codec=codec, scene=True, seed=unit))
    for shape, unit in (
        ((1, 40, 50), 0),
        ((3, 40, 50), 1),
        ((3, 40, 50), 2),
        ((3, 40, 50), 0),
        ((4, 1, 40, 50), 0),
        ((4, 1, 40, 50), 1),
        ((4, 1, 40, 50), 2),
    ):
        t, b = (1, shape[0]) if len(shape) == 3 else shape[:2]
        cases.append(Case(f"unit{unit}-t{t}-b{b}", shape, "uint16", unit, 16, codec=geozl("planar>zigzag>zstd"), scene=True))
    # Every geozl 0.18 recipe for 2-byte samples.
    predictors = ("delta_w>zigzag", "delta_n>zigzag", "planar>zigzag", "med>zigzag", "average>zigzag", "wp_static>zigzag", "delta_1d", "id")
    tails = ("entropy", "field_lz", "zstd", "categorical", "transpose>entropy", "transpose>zstd", "blocked_transpose_zstd", "pfor")
    for i, (pred, tail) in enumerate((p, t) for p in predictors for t in tails):
        recipe = f"{pred}>{tail}"
        cases.append(Case(f"recipe-{recipe}", (2, 24, 20), "uint16", i % 3, 16, codec=geozl(recipe), scene=True, seed=i))
    # Every encoding rumi-eo's Python writer takes.
    per_dtype = {
        "uint8": geozl("delta_w>zigzag>entropy"),
        "int8": geozl("planar>zigzag>categorical"),
        "uint16": geozl("planar>zigzag>zstd"),
        "int16": geozl("med>zigzag>transpose>entropy"),
        "uint32": geozl("planar>zigzag>transpose>zstd"),
        "int32": geozl("delta_w>zigzag>pfor"),
        "uint64": geozl("average>zigzag>field_lz"),
        "int64": geozl("planar>zigzag>zstd"),
        "float16": geozl("delta_1d>transpose>zstd"),
        "float32": geozl("planar>zigzag>field_lz"),
        "float64": geozl("id>zstd"),
        "bool": geozl("delta_w>zigzag>entropy"),
        "complex64": geozl("id>field_lz", "default"),
        "complex128": openzl("Compress"),
    }
    for i, (dtype, codec) in enumerate(per_dtype.items()):
        unit = CUBE_UNITS[i % len(CUBE_UNITS)]
        cases.append(Case(f"dtype-{dtype}-cube-u{unit}", (2, 3, 33, 41), dtype, unit, 16, codec=codec, seed=i))
        cases.append(Case(f"dtype-{dtype}-image-b6", (6, 17, 19), dtype, i % 3, 8, codec=codec, seed=50 + i))
    # The same bytes compressed through another dtype of the same component width.
    for dtype, view, recipe in (
        ("complex128", "<f8", "planar>zigzag>zstd"),
        ("complex64", "<f4", "delta_w>zigzag>field_lz"),
        ("int16", "<u2", "med>zigzag>pfor"),
    ):
        codec = {**geozl(recipe), "view": view}
        cases.append(Case(f"view-{dtype}-as-{view[1:]}", (2, 3, 20, 18), dtype, 4, 8, codec=codec, seed=11))
    # OpenZL graphs and older format versions.
    for graph, version, dtype in (
        ("Compress", 24, "bool"),
        ("Compress", 24, "complex64"),
        ("Zstd", 21, "uint16"),
        ("FieldLz", 20, "int32"),
        ("Store", 16, "float64"),
        ("Entropy", 14, "uint8"),
        ("Bitpack", 24, "uint8"),
    ):
        cases.append(
            Case(
                f"openzl-{graph}-v{version}-{dtype}",
                (2, 2, 20, 18),
                dtype,
                CUBE_UNITS[version % 8],
                8,
                codec=openzl(graph, version),
                seed=version,
            )
        )
    # N at the boundaries, many bands, edge tiles.
    planar = geozl("planar>zigzag>zstd")
    cases += [
        Case("n1-image-b1", (1, 20, 30), "uint16", 0, 32, codec=planar),
        Case("n2-image-b1", (1, 20, 30), "uint16", 0, 16, codec=planar),
        Case("n3-image-b3", (3, 20, 30), "uint16", 0, 32, codec=planar),
        Case("n3-image-b1", (1, 5, 40), "uint16", 0, 16, codec=planar),
        Case("n1-cube-cell", (3, 5, 20, 30), "uint16", 7, 32, codec=planar),
        Case("b6-cube-u9", (2, 6, 12, 10), "uint16", 9, 4, codec=planar),
        Case("b17-image-u2", (17, 4, 5), "uint16", 2, 4, codec=planar),
        Case("edge-tiles", (2, 100, 130), "uint16", 1, 64, codec=planar, scene=True),
        Case("tile1", (1, 3, 5), "int16", 0, 1, codec=planar),
        Case("t100-cube-b1", (100, 1, 3, 4), "int16", 2, 2, codec=planar, times=EVERY_THIRD_DAY),
        Case("count-bits-wide", (2, 64, 64), "uint64", 0, 8, codec=openzl("Zstd"), zeros="left"),
    ]
    # Time axes and georeferencing.
    cases += [
        Case(
            "time-intervals",
            (2, 1, 12, 12),
            "uint16",
            1,
            8,
            codec=planar,
            times=(("2020-01-01", "2021-01-01"), ("2021-01-01", "2021-07-01")),
        ),
        Case(
            "time-seconds", (3, 2, 8, 8), "uint16", 6, 8, codec=planar, times=("2020-01-01T00:00:01Z", "2020-01-02", "2021-06-30T23:59:59Z")
        ),
        Case("time-before-1970", (2, 1, 8, 8), "uint16", 0, 8, codec=planar, times=("1969-07-20T20:17:40Z", "1970-01-01")),
        Case("time-wide-residuals", (4, 1, 4, 4), "uint8", 1, 4, codec=planar, times=WIDE_TIMES),
        Case("georef-geographic", (2, 16, 16), "uint16", 0, 8, codec=planar, georef=dict(GEOGRAPHIC)),
        Case("georef-none", (2, 16, 16), "uint16", 1, 8, codec=planar, georef=dict(NO_CRS)),
        Case("georef-pixel-is-point", (2, 16, 16), "uint16", 2, 8, codec=planar, pixel_is_point=True),
        Case(
            "bands-unicode", (3, 8, 8), "uint16", 1, 8, codec=planar, bands=("B4, Red, 664.5nm (S2A) / 665nm (S2B)", "Ñandú 🛰", "x" * 300)
        ),
    ]
    return cases


OURS = _ours_cases()
PEER = _peer_cases()
for _cases in (OURS, PEER):
    for _case in _cases:
        _t, _b = _case.tbyx[:2]
        assert _case.frame_unit in units_for(_b, _t), _case
    assert len({c.id for c in _cases}) == len(_cases)


# --------------------------------------------------------------------------- #
# Diagnostics
# --------------------------------------------------------------------------- #

BLOB_FIELDS = (
    (0, 4, "magic"), (4, 6, "version"), (6, 10, "image_width"), (10, 14, "image_length"), (14, 18, "time_count"),
    (18, 20, "tile_width"), (20, 22, "tile_length"), (22, 24, "samples_per_pixel"), (24, 25, "bits_per_sample"),
    (25, 26, "sample_format"), (26, 27, "frame_unit"), (27, 31, "count_min"), (31, 32, "count_bits"),
)  # fmt: skip


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def blob_difference(ours: bytes, theirs: bytes) -> str:
    """Describe where two header blobs first differ."""
    at = _first_difference(ours, theirs)
    where = next((name for lo, hi, name in BLOB_FIELDS if lo <= at < hi), "frame_byte_counts")
    return (
        f"blobs differ at byte {at} ({where}); lengths {len(ours)} vs {len(theirs)}\n"
        f"  ours   {ours[max(0, at - 8) : at + 16].hex(' ')}\n  rumi-eo {theirs[max(0, at - 8) : at + 16].hex(' ')}"
    )


def file_difference(ours: bytes, theirs: bytes, blob: HeaderBlob) -> str:
    """Describe where two rumi files first differ, naming the structure there."""
    at = _first_difference(ours, theirs)
    if at < 16:
        where = "file header"
    elif at < 16 + 8:
        where = "IFD entry count"
    elif at < 16 + 8 + 13 * 20:
        where = f"IFD entry {(at - 24) // 20} (byte {(at - 24) % 20} of the entry)"
    elif at < 292:
        where = "next-IFD offset"
    elif at < blob.base_frame_offset:
        where = "external values"
    elif at < blob.trailer_offset:
        where = "frame data"
    else:
        where = f"trailer (byte {at - blob.trailer_offset})"
    return (
        f"files differ at byte {at} ({where}); sizes {len(ours)} vs {len(theirs)}\n"
        f"  ours    {ours[max(0, at - 8) : at + 24].hex(' ')}\n  rumi-eo {theirs[max(0, at - 8) : at + 24].hex(' ')}"
    )


def array_difference(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """None when the two arrays hold the same bytes in the same shape, else a description."""
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    a = np.ascontiguousarray(actual)
    e = np.ascontiguousarray(expected, dtype=a.dtype)
    if a.tobytes() == e.tobytes():
        return None
    item = a.dtype.itemsize
    diff = (a.reshape(-1).view(np.uint8).reshape(-1, item) != e.reshape(-1).view(np.uint8).reshape(-1, item)).any(axis=1)
    bad = np.flatnonzero(diff)
    first = np.unravel_index(int(bad[0]), a.shape)
    return (
        f"{bad.size} of {a.size} samples differ; first at {tuple(int(i) for i in first)}: "
        f"{a.reshape(-1)[bad[0] : bad[0] + 1].tobytes().hex()} vs expected {e.reshape(-1)[bad[0] : bad[0] + 1].tobytes().hex()}"
    )


# --------------------------------------------------------------------------- #
# One peer run for the whole session
# --------------------------------------------------------------------------- #


@dataclass
class Written:
    case: Case
    data: np.ndarray
    path: Path
    blob: bytes


@dataclass
class InteropRun:
    ours: dict[str, Written]
    peer: dict[str, Written]
    results: dict[str, Any]
    workdir: Path


def _write_ours(case: Case, data: np.ndarray, workdir: Path) -> Written:
    path = workdir / f"ours-{case.id}.rumi".replace(">", "_")
    blob = rumi_core.write(
        path,
        data,
        bands=case.band_texts,
        times=case.time_values,
        crs=case.georef["crs"],
        transform=case.georef["transform"],
        tile_size=case.tile,
        frame_unit=case.frame_unit,
        compression=case.codec,
        pixel_is_point=case.pixel_is_point,
    )
    return Written(case, data, path, blob)


def _labels(case: Case) -> dict[str, Any]:
    return {
        "bands": case.band_texts,
        "time": [list(v) if isinstance(v, tuple) else v for v in case.time_values],
        "crs": case.georef["crs"],
        "transform": None if case.georef["transform"] is None else list(case.georef["transform"]),
        "pixel_is_point": case.pixel_is_point,
    }


@pytest.fixture(scope="session")
def interop(peer_python: Path, tmp_path_factory: pytest.TempPathFactory) -> InteropRun:
    """Write every direction-1 file, prepare every direction-2 array, and run the peer once."""
    workdir = tmp_path_factory.mktemp("interop")
    manifest: dict[str, list[dict[str, Any]]] = {"read": [], "rewrite": [], "write": []}
    ours: dict[str, Written] = {}
    for case in OURS:
        w = ours[case.id] = _write_ours(case, case.data(), workdir)
        header = w.path.with_suffix(".rumih")
        header.write_bytes(w.blob)
        reads = [{**spec, "out": str(w.path.with_suffix(f".read{i}.bin"))} for i, spec in enumerate(subsets(case))]
        manifest["read"].append(
            {"id": case.id, "path": str(w.path), "header": str(header), "reads": reads, "numpy": case.dtype in NUMPY_NATIVE}
        )
        if case.dtype in NUMPY_NATIVE and isinstance(case.tile, int):
            # rumi-eo writes square tiles and NumPy dtypes only: hand it our frames.
            parsed = HeaderBlob.from_bytes(w.blob)
            raw = w.path.read_bytes()
            frames = w.path.with_suffix(".frames")
            frames.write_bytes(raw[parsed.base_frame_offset : parsed.trailer_offset])
            pattern, drop_band = peer_pattern(case.shape, case.frame_unit)
            npy = w.path.with_suffix(".npy")
            np.save(npy, w.data[:, 0] if drop_band else w.data)
            manifest["rewrite"].append(
                {
                    "id": case.id,
                    "data": str(npy),
                    "pattern": pattern,
                    "tile_size": case.tile,
                    "frames": str(frames),
                    "sizes": [int(c) for c in parsed.frame_byte_counts],
                    "path": str(w.path.with_suffix(".rumi-eo.rumi")),
                    **_labels(case),
                }
            )
    peer: dict[str, Written] = {}
    for case in PEER:
        data = case.data()
        path = workdir / f"peer-{case.id}.rumi".replace(">", "_")
        pattern, drop_band = peer_pattern(case.shape, case.frame_unit)
        npy = path.with_suffix(".npy")
        np.save(npy, data[:, 0] if drop_band else data)
        assert isinstance(case.tile, int)
        manifest["write"].append(
            {
                "id": case.id,
                "data": str(npy),
                "pattern": pattern,
                "tile_size": case.tile,
                "codec": case.codec,
                "path": str(path),
                "header": str(path.with_suffix(".rumih")),
                **_labels(case),
            }
        )
        peer[case.id] = Written(case, data, path, b"")
    results = _run_peer(peer_python, manifest, workdir)
    for case_id, w in peer.items():
        if "header" in results["write"].get(case_id, {}):
            w.blob = bytes.fromhex(results["write"][case_id]["header"])
    return InteropRun(ours, peer, results, workdir)


# --------------------------------------------------------------------------- #
# Direction 1: rumi_core writes, rumi-eo reads
# --------------------------------------------------------------------------- #


def _time_json(case: Case) -> list[Any]:
    """The case's time axis as rumi-eo's info reports it, via rumi_core's parser."""
    return rumi_core.TimeCoordinates.from_values(case.time_values).to_json()


@pytest.mark.parametrize("case", OURS, ids=lambda c: c.id)
def test_rumi_eo_reads_our_file(interop: InteropRun, case: Case) -> None:
    w = interop.ours[case.id]
    result = interop.results["read"][case.id]
    enc = encoding_for_dtype(case.dtype)
    problems: list[str] = []

    # The blob rumi-eo rebuilds from our file is ours, byte for byte.
    if "info_error" in result:
        problems.append(f"rumi.info(source=...) refused our file:\n{result['info_error']}")
    else:
        meta = result["info"]
        theirs = bytes.fromhex(meta["header"])
        if theirs != w.blob:
            problems.append(blob_difference(w.blob, theirs))
        ours = rumi_core.info(w.path)
        pairs = {
            "shape": (list(ours.shape), meta["shape"]),
            "dtype": (enc.name, meta["dtype"]),
            "DLPack type": (list(enc.dlpack), meta["dtype_dlpack"]),
            "tile (h, w)": ([ours.layout.tile_length, ours.layout.tile_width], meta["tile"]),
            "frame layout": (" ".join(ours.layout.frame_axes), meta["frame_layout"]),
            "frame count": (ours.layout.frame_count, meta["frames"]),
            "bands": (list(ours.band_texts), meta["bands"]),
            "time kind": ("interval" if ours.times.time_type == 1 else "instant", meta["time_kind"]),
            "time": (_time_json(case), meta["time"]),
            "crs": (case.georef["crs"], meta["crs"]),
            "transform": (None if case.georef["transform"] is None else list(case.georef["transform"]), meta["transform"]),
            "pixel_is_point": (case.pixel_is_point, meta["pixel_is_point"]),
        }
        problems += [f"{name}: ours {a!r}, rumi-eo {b!r}" for name, (a, b) in pairs.items() if a != b]
    if result.get("header_accepted") is not True:
        problems.append(f"rumi.info(source=..., header=our blob) refused it:\n{result.get('header_accepted')}")

    # Full and selective reads return the exact samples.
    for i, (spec, got) in enumerate(zip(subsets(case), result["reads"], strict=True)):
        what = f"rumi.read({', '.join(f'{k}={v}' for k, v in spec.items()) or 'everything'})"
        if "error" in got:
            problems.append(f"{what} failed:\n{got['error']}")
            continue
        if got["dlpack"] != list(enc.dlpack):
            problems.append(f"{what} exported DLPack {got['dlpack']}, the specification says {list(enc.dlpack)}")
        expected = expected_subset(w.data, spec)
        raw = np.fromfile(w.path.with_suffix(f".read{i}.bin"), dtype=np.uint8)
        nbytes = expected.size * enc.bytes_per_sample
        if raw.size != nbytes:
            problems.append(f"{what} returned {raw.size} bytes for shape {got['shape']}, expected {nbytes} for {expected.shape}")
            continue
        diff = array_difference(raw.view(enc.dtype).reshape(got["shape"]), expected)
        if diff:
            problems.append(f"{what}: {diff}")
        if got.get("numpy_same") is False:
            problems.append(f"{what} with framework='numpy' returned other bytes than through DLPack")
    assert not problems, f"{case}\n" + "\n".join(problems)


REWRITTEN = [c for c in OURS if c.dtype in NUMPY_NATIVE and isinstance(c.tile, int)]


def _peer_wrote(interop: InteropRun, kind: str, case: Case, refused: str) -> dict[str, Any]:
    """rumi-eo's result for a ``rewrite`` or ``write`` case: it wrote without error, with the case's ``frame_unit``."""
    result: dict[str, Any] = interop.results[kind][case.id]
    assert "error" not in result, f"{refused}:\n{result['error']}"
    assert result["frame_unit"] == case.frame_unit, f"rumi-eo chose frame_unit {result['frame_unit']} ({result['layout']})"
    return result


@pytest.mark.parametrize("case", REWRITTEN, ids=lambda c: c.id)
def test_rumi_eo_writes_our_frames_into_the_same_file(interop: InteropRun, case: Case) -> None:
    """Given our compressed frames and the same labels, rumi.write produces our file byte for byte."""
    w = interop.ours[case.id]
    result = _peer_wrote(interop, "rewrite", case, "rumi.write refused our frames")
    theirs = w.path.with_suffix(".rumi-eo.rumi").read_bytes()
    ours = w.path.read_bytes()
    assert ours == theirs, file_difference(ours, theirs, HeaderBlob.from_bytes(w.blob))
    assert bytes.fromhex(result["header"]) == w.blob, blob_difference(w.blob, bytes.fromhex(result["header"]))


# --------------------------------------------------------------------------- #
# Direction 2: rumi-eo writes, rumi_core reads
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("case", PEER, ids=lambda c: c.id)
def test_we_read_rumi_eo_file(interop: InteropRun, case: Case) -> None:
    w = interop.peer[case.id]
    result = _peer_wrote(interop, "write", case, "rumi-eo could not write the case")
    problems: list[str] = []
    theirs = w.blob
    if bytes.fromhex(result["info"]["header"]) != theirs:
        problems.append("rumi-eo's own info header differs from the one rumi.write returned")

    ours = rumi_core.build_header(w.path)
    if ours != theirs:
        problems.append(f"build_header: {blob_difference(ours, theirs)}")
    try:
        rumi_core.validate(w.path, theirs)
    except rumi_core.RumiError as err:
        problems.append(f"validate(full decode) refused rumi-eo's file: {type(err).__name__}: {err}")

    for header in (theirs, None):
        for spec in subsets(case):
            kwargs = our_window(spec)
            try:
                got = rumi_core.read(w.path, header, **kwargs)
            except rumi_core.RumiError as err:
                problems.append(f"read({kwargs}, header={'blob' if header else None}) failed: {type(err).__name__}: {err}")
                continue
            diff = array_difference(got, expected_subset(w.data, spec))
            if diff:
                problems.append(f"read({kwargs}, header={'blob' if header else None}): {diff}")

    info = rumi_core.info(w.path)
    pairs = {
        "bands": (case.band_texts, list(info.band_texts)),
        "time": (_time_json(case), info.times.to_json()),
        "time (rumi-eo)": (result["info"]["time"], info.times.to_json()),
        "crs": (None if case.georef["crs"] is None else f"EPSG:{case.georef['crs']}", info.georef.crs),
        "transform": (case.georef["transform"], tuple(info.georef.transform) if info.georef.is_georeferenced else None),
        "pixel_is_point": (case.pixel_is_point, info.georef.raster_type == 2),
        "dtype": (case.dtype, info.dtype),
    }
    problems += [f"{name}: written {a!r}, read {b!r}" for name, (a, b) in pairs.items() if a != b]
    assert not problems, f"{case}\n" + "\n".join(problems)


def test_peer_versions(interop: InteropRun) -> None:
    """The peer really is the pinned rumi-eo with its older geozl."""
    assert interop.results["rumi_eo"] == RUMI_EO_VERSION
    assert interop.results["geozl"].startswith("0.18."), interop.results["geozl"]
