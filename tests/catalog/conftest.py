"""Fixtures for the catalog tests: a small cube, a two-zone scene, counting HTTP servers and a GCS emulator."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

import rumi_core
from catalog.testing import GCSEmulator, RangeRequestServer, Scene, write_scene
from rumi_core.testing import synthetic_cube

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    import numpy as np

BANDS = ["B2, Blue, 490nm", "B3, Green, 560nm", "B4, Red, 665nm", "B8, NIR, 842nm"]
TIMES = ["2021-01-01", "2021-01-11", "2021-01-21T10:30:00Z"]
CRS = "EPSG:32633"
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)


@dataclass(frozen=True)
class CubeFiles:
    """A cube written to disk with its blob."""

    dir: Path
    path: Path
    blob_path: Path
    blob: bytes
    data: np.ndarray


def write_cube(directory: Path, name: str = "cube", *, frame_unit: int = 0, times: list[object] | None = None, seed: int = 7) -> CubeFiles:
    """Write a (3, 4, 100, 130) uint16 cube with 64 x 48 tiles, and its blob beside it."""
    data = synthetic_cube(3, 4, 100, 130, seed=seed)
    path = directory / f"{name}.rumi"
    blob = rumi_core.write(
        path,
        data,
        bands=BANDS,
        times=times or TIMES,
        crs=CRS,
        transform=TRANSFORM,
        tile_size=(64, 48),
        frame_unit=frame_unit,
    )
    blob_path = directory / f"{name}.rumih"
    blob_path.write_bytes(blob)
    return CubeFiles(directory, path, blob_path, blob, data)


@pytest.fixture
def cube(tmp_path: Path) -> CubeFiles:
    """A small cube and its blob in a fresh directory."""
    return write_cube(tmp_path)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RangeRequestServer]:
    """A counting range server over ``tmp_path``."""
    with RangeRequestServer(tmp_path) as srv:
        yield srv


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    """The two-zone scene of :func:`catalog.testing.write_scene`, written once per test module."""
    return write_scene(tmp_path_factory.mktemp("scene"))


@pytest.fixture(scope="module")
def served(scene: Scene) -> Iterator[RangeRequestServer]:
    """A counting range server over :func:`scene`'s directory, one per test module."""
    with RangeRequestServer(scene.root) as server:
        yield server


@pytest.fixture(scope="session")
def gcs() -> Iterator[GCSEmulator]:
    """gcp-storage-emulator on 127.0.0.1, with STORAGE_EMULATOR_HOST pointing at it for the session."""
    pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed (pip install -e '.[test]')")
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    with GCSEmulator(bucket="rumi") as emulator:
        os.environ["STORAGE_EMULATOR_HOST"] = emulator.host
        try:
            yield emulator
        finally:
            if previous is None:
                os.environ.pop("STORAGE_EMULATOR_HOST", None)
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = previous


@pytest.fixture
def make_cube() -> Callable[..., CubeFiles]:
    """The :func:`write_cube` factory, for tests that need several cubes."""
    return write_cube


@pytest.fixture
def gcs_upload(gcs: GCSEmulator) -> Callable[[Path, str], str]:
    """Upload a local file as ``gs://rumi/<name>`` on the emulator; returns the URL."""
    from catalog.gcs import default_client

    def upload(path: Path, name: str) -> str:
        default_client().bucket(gcs.bucket).blob(name).upload_from_filename(str(path))
        return f"gs://{gcs.bucket}/{name}"

    return upload
