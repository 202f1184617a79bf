"""Shared fixtures: paths to real test data, and small files written per test."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import rumi_core
from rumi_core.testing import synthetic_cube

if TYPE_CHECKING:
    import numpy as np

SHARED_DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
STAC_SCHEMAS = Path(os.environ.get("RUMI_STAC_SCHEMAS", Path(__file__).resolve().parents[2] / "shared" / "stac-schemas"))


SPEC_DLPACK = {
    "int8": (0, 8, 1), "int16": (0, 16, 1), "int32": (0, 32, 1), "int64": (0, 64, 1),
    "uint8": (1, 8, 1), "uint16": (1, 16, 1), "uint32": (1, 32, 1), "uint64": (1, 64, 1),
    "bool": (6, 8, 1),
    "float16": (2, 16, 1), "float32": (2, 32, 1), "float64": (2, 64, 1),
    "complex32": (5, 32, 1), "complex64": (5, 64, 1), "complex128": (5, 128, 1),
    "bfloat16": (4, 16, 1),
    "float8_e4m3fn": (10, 8, 1),
    "float8_e4m3fnuz": (11, 8, 1),
    "float8_e5m2": (12, 8, 1),
    "float8_e5m2fnuz": (13, 8, 1),
    "float8_e8m0fnu": (14, 8, 1),
}  # fmt: skip
"""The specification's DLPack representation table (Sample encodings), name to ``(code, bits, lanes)``.

Written out from the specification, independently of rumi_core, so that the
encodings and DLPack tests check rumi_core against the text, not against itself.
"""

_BACKGROUND: list[subprocess.Popen[bytes]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the Airflow environment now, when its test will run, so the build overlaps other tests.

    The build (``python tests/test_scheduler.py``) takes a minute and a half
    with uv (over five with pip, and as many minutes of CPU), mostly
    downloading and unpacking; the test's fixture waits for its lock.
    """
    script = Path(__file__).with_name("test_scheduler.py")
    if any(Path(str(item.fspath)) == script for item in session.items):
        with open(Path(tempfile.gettempdir()) / "rumi-venv-airflow.log", "w") as log:  # the child keeps its own descriptor
            build = subprocess.Popen([sys.executable, str(script)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _BACKGROUND.append(build)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop a background build the session no longer needs (an interrupted run); a finished one is reaped."""
    for proc in _BACKGROUND:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()


@pytest.fixture(scope="session")
def flex_launcher() -> Any:
    """``deploy/dataflow/main.py``, the Flex Template's launcher, as a module (it is a script, not a package's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("flex_main", Path(__file__).resolve().parents[1] / "deploy" / "dataflow" / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real rasters of ``../shared/data``; tests using it skip where it is absent."""
    if not (SHARED_DATA / "MANIFEST.md").is_file():
        pytest.skip(f"real test data not found at {SHARED_DATA} (set RUMI_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def stac_schemas() -> Path:
    """The STAC extension schemas of ``../shared/stac-schemas`` (``<ext>/<version>/schema.json``); skips where absent."""
    if not STAC_SCHEMAS.is_dir():
        pytest.skip(f"STAC extension schemas not found at {STAC_SCHEMAS} (set RUMI_STAC_SCHEMAS)")
    return STAC_SCHEMAS


@pytest.fixture(scope="session")
def spec_dlpack() -> dict[str, tuple[int, int, int]]:
    """:data:`SPEC_DLPACK`, the specification's DLPack representation table."""
    return SPEC_DLPACK


@pytest.fixture
def cube_file(tmp_path: Path) -> tuple[Path, bytes, np.ndarray]:
    """A small valid Cube (T=3, B=4, 100 x 130, uint16, tiles 64 x 48), its blob and data."""
    data = synthetic_cube(3, 4, 100, 130, seed=7)
    path = tmp_path / "cube.rumi"
    blob = rumi_core.write(
        path,
        data,
        bands=["B2, Blue", "B3, Green", "B4, Red", "B8, NIR"],
        times=["2021-01-01", "2021-01-11", "2021-01-21T10:30:00Z"],
        crs="EPSG:32633",
        transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0),
        tile_size=(64, 48),
    )
    return path, blob, data
