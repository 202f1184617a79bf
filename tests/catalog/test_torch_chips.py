"""catalog.torch: chips streamed over HTTP equal the source GeoTIFFs' windows, with counted requests."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.windows import Window

import rumi_core
from catalog.selectors import parse_datetime

torch = pytest.importorskip("torch", reason="PyTorch is not installed (make install adds the local CPU wheel)")

from catalog.torch import RumiChipDataset, RumiChipGridDataset  # noqa: E402 - needs torch

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import RangeRequestServer, Scene

TILE = 32


def _urls(scene: Scene, served: RangeRequestServer) -> list[str]:
    return [served.url(p) for p in scene.item_paths]


def _check_against_sources(scene: Scene, sample: dict[str, Any], size: int) -> None:
    item = next(it for it in scene.items if sample["item"].endswith(f"cubes/{it.id}.rumi"))
    row, col = (int(v) for v in sample["window"])
    image = sample["image"]
    assert image.dtype == torch.float32
    assert tuple(image.shape) == (len(item.dates), 2, size, size)
    for t, path in enumerate(item.sources):
        with rasterio.open(path) as src:
            window = Window(col, row, size, size)
            expected = src.read(window=window)
            assert tuple(sample["transform"].tolist()) == tuple(src.transform @ Affine.translation(col, row))[:6]
        np.testing.assert_array_equal(image[t].numpy(), expected)
    assert sample["crs"] == item.crs
    assert sample["time"].tolist() == [parse_datetime(d) for d in item.dates]


def test_random_chips_equal_the_source_windows(scene: Scene, served: RangeRequestServer) -> None:
    dataset = RumiChipDataset(_urls(scene, served), bands=["red", "nir"], size=24, length=12, seed=3)
    samples = list(dataset)
    assert [s["index"] for s in samples] == list(range(12))
    assert len({(s["item"], *s["window"].tolist()) for s in samples}) > 6
    for sample in samples:
        _check_against_sources(scene, sample, 24)


def test_one_request_per_run_of_frames_and_none_for_metadata(scene: Scene, served: RangeRequestServer) -> None:
    dataset = RumiChipDataset(_urls(scene, served), size=40, length=10, seed=5, cache_bytes=0)
    served.reset()
    for sample in dataset:
        before = served.requests()
        served_now = served.served
        item = next(it for it in scene.items if sample["item"].endswith(f"cubes/{it.id}.rumi"))
        row, col = sample["window"].tolist()
        # Frame unit 0 stores every band and time step of a tile location together, and
        # locations row by row: a run of frames is a run of consecutive locations.
        across = -(-item.width // TILE)
        locations = sorted(
            r * across + c for r in range(row // TILE, -(-(row + 40) // TILE)) for c in range(col // TILE, -(-(col + 40) // TILE))
        )
        runs = 1 + sum(b != a + 1 for a, b in pairwise(locations))
        assert before == runs, sample["window"]
        assert all(r.path.endswith(".rumi") and r.status == 206 for r in served_now)
        served.reset()


def test_decoded_frames_are_cached_across_chips(scene: Scene, served: RangeRequestServer) -> None:
    dataset = RumiChipDataset(_urls(scene, served), bands=["nir"], size=16, sampler="grid")
    served.reset()
    first = [s["image"].clone() for s in dataset]
    fetched = served.bytes_sent()
    cube_bytes = sum(it.cube.stat().st_size for it in scene.items)
    assert 0 < fetched < cube_bytes, "neighbouring chips share frames, fetched once"
    served.reset()
    again = list(dataset)
    assert served.requests() == 0, "a second epoch is served from the decoded-frame cache"
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b["image"], equal_nan=True, rtol=0, atol=0)


def test_grid_dataset_is_map_style(scene: Scene, served: RangeRequestServer) -> None:
    grid = RumiChipGridDataset(_urls(scene, served), bands=["red", "nir"], size=32)
    stream = RumiChipDataset(_urls(scene, served), bands=["red", "nir"], size=32, sampler="grid")
    # Steps of 32 plus one position flush with the far edge: ceil(extent / 32) per axis.
    assert len(grid) == len(stream) == sum(-(-it.height // 32) * -(-it.width // 32) for it in scene.items)
    last = len(grid) - 1
    _check_against_sources(scene, grid[last], 32)
    assert grid[3]["window"].tolist() == next(s for s in stream if s["index"] == 3)["window"].tolist()


@pytest.mark.parametrize("workers", [2])
def test_reproducible_across_workers(scene: Scene, served: RangeRequestServer, workers: int) -> None:
    from torch.utils.data import DataLoader

    dataset = RumiChipDataset(_urls(scene, served), bands=["red", "nir"], size=24, length=8, seed=11)
    alone = list(DataLoader(dataset, batch_size=None, num_workers=0))
    shared = list(DataLoader(dataset, batch_size=None, num_workers=workers))
    assert [s["index"] for s in shared] == [s["index"] for s in alone] == list(range(8))
    for a, b in zip(alone, shared, strict=True):
        assert a["item"] == b["item"] and a["window"].tolist() == b["window"].tolist()
        torch.testing.assert_close(a["image"], b["image"], equal_nan=True, rtol=0, atol=0)
    other_seed = RumiChipDataset(_urls(scene, served), bands=["red", "nir"], size=24, length=8, seed=12)
    assert [s["window"].tolist() for s in other_seed] != [s["window"].tolist() for s in alone]


@pytest.mark.parametrize("frame_unit", [0, 5])
def test_bfloat16_chips_keep_their_dtype(tmp_path: Path, frame_unit: int) -> None:
    import ml_dtypes

    data = np.linspace(-4, 4, 2 * 3 * 20 * 20).reshape(2, 3, 20, 20).astype(ml_dtypes.bfloat16)
    path = tmp_path / "bf16.rumi"
    # Frame unit 0 stores one band and date per frame; 5, whole (b, h, w, t) cells the chip picks bands and a date out of.
    blob = rumi_core.write(
        path, data, bands=["a", "b", "c"], times=["2021-01-01", "2021-01-02"], crs="EPSG:32633",
        transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), tile_size=8, frame_unit=frame_unit,
    )  # fmt: skip
    path.with_suffix(".rumih").write_bytes(blob)
    dataset = RumiChipDataset([str(path)], bands=["c", "a"], times=[1], size=10, length=3, seed=0)
    for sample in dataset:
        image = sample["image"]
        assert image.dtype == torch.bfloat16
        row, col = sample["window"].tolist()
        expected = data[[1]][:, [2, 0], row : row + 10, col : col + 10]
        np.testing.assert_array_equal(image.view(torch.int16).numpy(), expected.view(np.int16))
