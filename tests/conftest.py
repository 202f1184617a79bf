"""Shared fixtures: paths to real test data, and small files written per test."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import rumi_core
from rumi_core.testing import synthetic_cube

if TYPE_CHECKING:
    import numpy as np

SHARED_DATA = Path(os.environ.get("RUMI_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
STAC_SCHEMAS = Path(os.environ.get("RUMI_STAC_SCHEMAS", Path(__file__).resolve().parents[2] / "shared" / "stac-schemas"))


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
