"""Fixtures of the pipeline tests: generated scene archives, a ready TestPipeline factory and a GCS emulator.

Scenes are written with :mod:`pipelines.testing` into ``tmp_path``; nothing is
downloaded. :func:`pipelines.testing.make_scene` builds scene metadata in memory for
the pure grouping tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from catalog.testing import GCSEmulator
from pipelines.options import ConvertOptions
from pipelines.testing import write_series

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    import numpy as np

DATES = ("2023-01-05", "2023-02-04", "2023-04-10")


@pytest.fixture(autouse=True)
def _gdal_block_cache() -> Iterator[None]:
    """Each test starts with no block cache fitted to frame reads, and gives GDAL's back afterwards, as ``pipelines.convert.run`` does."""
    from pipelines.rasters import kept_block_cache

    with kept_block_cache():
        yield


@pytest.fixture
def pipeline() -> Callable[[], TestPipeline]:
    """A factory of TestPipelines on the in-process FnApiRunner (no Prism download)."""
    return lambda: TestPipeline(runner="FnApiRunner")


@pytest.fixture
def series(tmp_path: Path) -> tuple[Path, list[str], np.ndarray[Any, Any]]:
    """Three dates x four bands of 96 x 80 uint16 scenes: directory, paths and the (T, B, Y, X) data."""
    directory = tmp_path / "scenes"
    paths, cube = write_series(str(directory), dates=DATES, size=(96, 80), seed=3)
    return directory, paths, cube


@pytest.fixture
def options(tmp_path: Path) -> ConvertOptions:
    """Options writing to ``tmp_path/out`` with 32-pixel tiles."""
    return ConvertOptions(out=str(tmp_path / "out"), tile_size=32)


@pytest.fixture(scope="module")
def emulator() -> Iterator[GCSEmulator]:
    """gcp-storage-emulator on 127.0.0.1 with the bucket ``rumi``, one per test module.

    ``STORAGE_EMULATOR_HOST`` points at it while the module runs, so
    google-cloud-storage, GDAL's ``/vsigs/`` and worker processes started
    after it all use it without credentials.
    """
    with GCSEmulator(bucket="rumi") as emu, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", emu.host)
        yield emu
