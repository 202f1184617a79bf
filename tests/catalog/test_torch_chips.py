"""catalog.torch: chips streamed over HTTP equal the source GeoTIFFs' windows, with counted requests."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.windows import Window

import rumi_core
from catalog.chips import SmallItemWarning
from catalog.errors import SelectorError
from catalog.extra_metadata import ExtraMetadata
from catalog.items import create_item
from catalog.selectors import parse_datetime
from rumi_core.errors import InvalidInputError

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


POINT = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
"""The items' transform; for a PixelIsPoint item it locates pixel centres, and corners lie half a pixel up and left."""


def _write_item(
    directory: Path, name: str, height: int, width: int, *, transform: tuple[float, ...] = POINT, pixel_is_point: bool = False
) -> tuple[str, np.ndarray]:
    """A (1, 3, height, width) float32 cube of bands red, green and nir, with its blob beside it; returns its path and samples."""
    data = np.arange(3 * height * width, dtype=np.float32).reshape(1, 3, height, width)
    path = directory / f"{name}.rumi"
    blob = rumi_core.write(
        path, data, bands=["red", "green", "nir"], times=["2021-01-01"], crs="EPSG:32633", transform=transform, tile_size=16,
        pixel_is_point=pixel_is_point,
    )  # fmt: skip
    path.with_suffix(".rumih").write_bytes(blob)
    return str(path), data


def test_a_chip_transform_locates_pixel_corners_also_for_point_items(tmp_path: Path) -> None:
    point, _ = _write_item(tmp_path, "point", 40, 48, pixel_is_point=True)
    area, _ = _write_item(tmp_path, "area", 40, 48, transform=(10.0, 0.0, 499995.0, 0.0, -10.0, 4000005.0))
    for p, a in zip(RumiChipDataset([point], size=16, sampler="grid"), RumiChipDataset([area], size=16, sampler="grid"), strict=True):
        row, col = p["window"].tolist()
        # rasterio's window_transform: the top-left corner of pixel (row, col), half a pixel off its centre.
        corner = (10.0, 0.0, 500000.0 - 5 + 10 * col, 0.0, -10.0, 4000000.0 + 5 - 10 * row)
        assert tuple(p["transform"].tolist()) == tuple(a["transform"].tolist()) == corner, (row, col)


def test_one_band_name_or_position_is_one_band(tmp_path: Path) -> None:
    path, data = _write_item(tmp_path, "item", 20, 20)
    for bands, expected in (("nir", [2]), (1, [1]), (np.int64(1), [1]), ([np.int64(2), "red"], [2, 0])):
        sample = RumiChipGridDataset([path], bands=bands, size=20)[0]  # type: ignore[arg-type]
        np.testing.assert_array_equal(sample["image"].numpy(), data[:, expected])
    with pytest.raises(SelectorError, match="a band is selected by a name or a position, not by True"):
        RumiChipGridDataset([path], bands=[True], size=20)


def test_negative_indices_count_from_the_end(tmp_path: Path) -> None:
    path, _ = _write_item(tmp_path, "item", 40, 48)
    dataset = RumiChipGridDataset([path], size=16)
    n = len(dataset)
    assert dataset[-1]["window"].tolist() == dataset[n - 1]["window"].tolist() == [24, 32]
    assert dataset[-n]["index"] == 0
    for index in (n, -n - 1):
        with pytest.raises(IndexError, match=f"sample {index} is outside {-n}..{n - 1}"):
            dataset[index]


def test_any_integer_indexes_a_grid_dataset(tmp_path: Path) -> None:
    path, _ = _write_item(tmp_path, "item", 40, 48)
    dataset = RumiChipGridDataset([path], size=16)
    indices: tuple[SupportsIndex, ...] = (torch.tensor(1), np.int64(1), np.uint8(1))
    for index in indices:
        sample = dataset[index]
        assert sample["index"] == 1 and type(sample["index"]) is int
        assert sample["window"].tolist() == [0, 16]
    bad: list[tuple[Any, str]] = [(True, "bool"), (1.0, "float"), ("1", "str")]
    for index, kind in bad:
        with pytest.raises(TypeError, match=f"sample indices are integers, not {kind}"):
            dataset[index]


@pytest.mark.parametrize(
    ("name", "value"),
    [("size", 16.0), ("size", 0), ("size", True), ("length", -1), ("length", 2.5), ("seed", -1), ("seed", 1.5),
     ("cache_bytes", -1), ("fetch_threads", 0)],
)  # fmt: skip
def test_bad_arguments_are_named(tmp_path: Path, name: str, value: object) -> None:
    path, _ = _write_item(tmp_path, "item", 40, 48)
    options: dict[str, Any] = {"size": 16, "length": 4, "seed": 0, name: value}
    with pytest.raises(SelectorError, match=f"^{name} is an integer of at least"):
        RumiChipDataset([path], **options)
    if name != "seed":
        options.pop("seed")
        with pytest.raises(SelectorError, match=f"^{name} is an integer of at least"):
            RumiChipGridDataset([path], **options)


def test_items_smaller_than_the_chips_are_named_in_a_warning(tmp_path: Path) -> None:
    large, _ = _write_item(tmp_path, "large", 40, 48)
    small, _ = _write_item(tmp_path, "small", 20, 30)
    with pytest.warns(
        SmallItemWarning, match=r"^1 of 2 items are smaller than 32 x 32 pixels and give no chips: .*small\.rumi \(20 x 30\)$"
    ) as caught:
        dataset = RumiChipDataset([large, small], size=32, sampler="grid")
    assert caught[0].filename == __file__, "the warning points at the caller"
    assert {s["item"] for s in dataset} == {large}
    with pytest.raises(SelectorError, match=r"no item is at least 64 x 64 pixels; the items are \[\(40, 48\), \(20, 30\)\]"):
        RumiChipGridDataset([large, small], size=64)


def test_set_epoch_draws_other_chips_deterministically(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    items = [_write_item(tmp_path, "a", 40, 50)[0], _write_item(tmp_path, "b", 30, 36)[0]]

    def chips(dataset: Any, **loader: Any) -> list[tuple[int, int, int]]:
        return [(items.index(s["item"]), *s["window"].tolist()) for s in DataLoader(dataset, batch_size=None, **loader)]

    dataset = RumiChipDataset(items, size=16, length=6, seed=3)
    # The chips every release before set_epoch drew for this seed.
    before = [(0, 4, 8), (0, 14, 14), (0, 14, 26), (0, 7, 11), (1, 8, 9), (0, 1, 30)]
    assert chips(dataset) == before
    dataset.set_epoch(1)
    first = chips(dataset)
    assert first != before
    assert chips(dataset, num_workers=2, multiprocessing_context="spawn") == first
    dataset.set_epoch(2)
    assert chips(dataset) not in (before, first)
    again = RumiChipDataset(items, size=16, length=6, seed=3)
    again.set_epoch(1)
    assert chips(again) == first
    again.set_epoch(0)
    assert chips(again) == before
    with pytest.raises(SelectorError, match=r"^epoch is an integer of at least 0, got -1$"):
        again.set_epoch(-1)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_a_dataloader_keeps_see_each_set_epoch(tmp_path: Path, context: str) -> None:
    """With ``persistent_workers=True`` the workers kept the epoch of their start: every epoch drew the same chips."""
    from torch.utils.data import DataLoader

    items = [_write_item(tmp_path, "a", 40, 50)[0], _write_item(tmp_path, "b", 30, 36)[0]]
    dataset = RumiChipDataset(items, size=16, length=6, seed=3)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, persistent_workers=True, multiprocessing_context=context)
    fresh = RumiChipDataset(items, size=16, length=6, seed=3)
    for epoch in (0, 1, 2, 1):
        dataset.set_epoch(epoch)
        fresh.set_epoch(epoch)
        kept = sorted((int(s["index"]), s["item"], *s["window"].tolist()) for s in loader)
        expected = sorted((int(s["index"]), s["item"], *s["window"].tolist()) for s in DataLoader(fresh, batch_size=None))
        assert kept == expected, epoch


def test_a_dataset_pickled_outside_a_dataloader_keeps_its_epoch(tmp_path: Path) -> None:
    import pickle

    items = [_write_item(tmp_path, "a", 40, 50)[0]]
    dataset = RumiChipDataset(items, size=16, length=4, seed=3)
    dataset.set_epoch(5)
    copy = pickle.loads(pickle.dumps(dataset))
    dataset.set_epoch(6)  # the copy is a dataset of its own
    assert [s["window"].tolist() for s in copy] == [
        s["window"].tolist() for s in _at_epoch(RumiChipDataset(items, size=16, length=4, seed=3), 5)
    ]


def _at_epoch(dataset: RumiChipDataset, epoch: int) -> RumiChipDataset:
    dataset.set_epoch(epoch)
    return dataset


def test_empty_band_or_time_selections_and_relative_paths_are_settled_when_the_dataset_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bands=[]`` failed at the first read inside a worker, naming no argument; a relative item path was opened again
    by each worker, against the folder it was in then (after a notebook's ``%cd``, another file or none)."""
    from torch.utils.data import DataLoader

    path, _ = _write_item(tmp_path, "a", 40, 50)
    with pytest.raises(SelectorError, match=r"^bands is empty: select at least one band \(None for all\)$"):
        RumiChipDataset([path], size=16, length=4, bands=[])
    with pytest.raises(SelectorError, match=r"^times is empty: select at least one time step \(None for all\)$"):
        RumiChipGridDataset([path], size=16, times=[])
    monkeypatch.chdir(tmp_path)
    dataset = RumiChipDataset(["a.rumi"], size=16, length=4, seed=1)
    monkeypatch.chdir(tmp_path.parent)
    samples = list(DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="spawn"))
    assert [s["item"] for s in samples] == [path] * 4


def test_items_of_other_dtypes_or_shapes_are_refused_naming_an_item_of_each_kind(tmp_path: Path) -> None:
    """A batch stacks chips: uint16 and float32 chips were promoted to float32 without workers and refused with them,
    and chips of other time counts failed only when they first met in a batch."""
    floats, _ = _write_item(tmp_path, "floats", 40, 48)
    ints = tmp_path / "ints.rumi"
    ints.with_suffix(".rumih").write_bytes(
        rumi_core.write(ints, np.zeros((2, 3, 40, 48), np.uint16), bands=["red", "green", "nir"], times=["2021-01-01", "2021-01-02"],
                        crs="EPSG:32633", transform=POINT, tile_size=16)
    )  # fmt: skip
    with pytest.raises(SelectorError, match=r"2 kinds \(.*floats\.rumi: float32 with 1 time steps of 3 bands; .*ints\.rumi: uint16"):
        RumiChipDataset([floats, str(ints)], size=16, length=4)
    with pytest.raises(SelectorError, match=r"floats\.rumi: float32 with 1 time steps of 2 bands; .*ints\.rumi: uint16 with 1 time"):
        RumiChipGridDataset([floats, str(ints)], size=16, bands=["red", "nir"], times=[0])
    alike = RumiChipGridDataset([str(ints)], size=16, times=[1])
    assert len(alike) > 0


def test_the_items_argument_and_selectors_fail_naming_the_cause(tmp_path: Path) -> None:
    path, data = _write_item(tmp_path, "item", 40, 48)
    one = RumiChipGridDataset(path, size=16)  # one href, as catalog.load takes it: not its characters
    np.testing.assert_array_equal(one[0]["image"].numpy(), data[:, :, :16, :16])
    with pytest.raises(SelectorError, match=r"^no items were given \(an empty search result\?\)$"):
        RumiChipDataset([], size=16, length=4)
    with pytest.raises(SelectorError, match=r"item\.rumi: no band is called 'swir'"):
        RumiChipGridDataset([path], size=16, bands=["swir"])
    with pytest.raises(SelectorError, match=r"item\.rumi: time positions are integers, not '2021-01-01'; a range of dates is one"):
        RumiChipGridDataset([path], size=16, times=["2021-01-01"])  # type: ignore[list-item]


_RANK = """
import json, os, sys
import torch.distributed as dist
from catalog.torch import RumiChipDataset
dist.init_process_group("gloo", init_method=sys.argv[1], rank=int(sys.argv[2]), world_size=2)
from torch.utils.data import DataLoader
dataset = RumiChipDataset([sys.argv[3]], size=16, length=7, seed=5)
alone = [s["index"] for s in dataset]
# Workers started by spawn have no process group: the rank is the one the dataset took in this process.
loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="spawn")
print(json.dumps({"len": len(dataset), "index": alone, "workers": sorted(s["index"] for s in loader)}))
dist.destroy_process_group()
"""


def test_each_distributed_rank_reads_its_own_share_and_as_many_as_the_others(tmp_path: Path) -> None:
    """Two gloo ranks: samples 0, 2, 4, 6 and 1, 3, 5, 0 (the last taken again from the start), as DistributedSampler shares
    indices, also through DataLoader workers started by spawn; before, every rank read all seven."""
    import json
    import subprocess
    import sys

    path, _ = _write_item(tmp_path, "item", 40, 48)
    init = f"file://{tmp_path / 'rendezvous'}"
    ranks = [subprocess.Popen([sys.executable, "-c", _RANK, init, str(r), path], stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    shares = [json.loads(rank.communicate(timeout=300)[0]) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0]
    assert shares == [
        {"len": 4, "index": [0, 2, 4, 6], "workers": [0, 2, 4, 6]},
        {"len": 4, "index": [1, 3, 5, 0], "workers": [0, 1, 3, 5]},
    ]


def test_a_stalled_server_ends_the_epoch_after_the_datasets_timeout(scene: Scene, served: RangeRequestServer) -> None:
    from catalog.errors import StorageError
    from catalog.testing import Fault

    dataset = RumiChipDataset(_urls(scene, served), bands=["red", "nir"], size=32, length=2, seed=0, timeout=1.5)
    served.inject(Fault("silent"))
    try:
        with pytest.raises(StorageError, match=r"did not finish within the read's 1\.5 s deadline"):
            next(iter(dataset))
    finally:
        served.inject(None)
    with pytest.raises(InvalidInputError, match=r"^timeout is a number of seconds above 0 \(inf for none\), got 0$"):
        RumiChipDataset(_urls(scene, served), size=32, length=2, timeout=0)


def test_a_sample_carries_its_items_scale_and_offset(tmp_path: Path) -> None:
    """Items of one dataset may differ in radiometry (a Sentinel-2 series across baseline 04.00): each sample says its item's,
    where the chips of both items held DNs 1000 apart with nothing to tell them apart."""
    items = []
    for name, offset in (("old", 0.0), ("new", -0.1)):
        path, _ = _write_item(tmp_path, name, 20, 20)
        item = create_item(path, extra=ExtraMetadata(id=name, scale=0.0001, offset=offset), thumbnail=False)
        item.save_object(dest_href=str(tmp_path / f"{name}.json"), include_self_link=False)
        items.append(str(tmp_path / f"{name}.json"))
    samples = {s["item"].rsplit("/", 1)[-1]: s for s in RumiChipGridDataset(items, bands=["nir", "red"], size=20)}
    assert samples["old.rumi"]["offset"].tolist() == [0.0, 0.0] and samples["new.rumi"]["offset"].tolist() == [-0.1, -0.1]
    assert samples["new.rumi"]["scale"].dtype == torch.float64 and samples["new.rumi"]["scale"].tolist() == [0.0001, 0.0001]
    bare = RumiChipGridDataset([_write_item(tmp_path, "bare", 20, 20)[0]], size=20)[0]
    assert bare["scale"].tolist() == [1.0] * 3 and bare["offset"].tolist() == [0.0] * 3


def test_a_sample_carries_each_bands_nodata_to_mask_its_chip(tmp_path: Path) -> None:
    """From the item's raster:bands; NaN for a bare file, which has none."""
    path, _ = _write_item(tmp_path, "item", 20, 20)
    item = create_item(path, extra=ExtraMetadata(id="item", nodata=4.0), thumbnail=False)
    item_path = tmp_path / "item.json"
    item.save_object(dest_href=str(item_path), include_self_link=False)
    sample = RumiChipGridDataset([str(item_path)], bands=["nir", "red"], size=20)[0]
    assert sample["nodata"].dtype == torch.float64 and sample["nodata"].tolist() == [4.0, 4.0]
    image = sample["image"]
    valid = (image != sample["nodata"][:, None, None]) & ~image.isnan()
    assert valid.sum().item() == image.numel() - 1  # red's sample 4
    assert not valid[0, 1, 0, 4]
    bare = RumiChipGridDataset([path], size=20)[0]["nodata"]
    assert bare.shape == (3,) and bare.isnan().all()
    batch = next(iter(torch.utils.data.DataLoader(RumiChipGridDataset([str(item_path)], size=10), batch_size=4)))
    assert batch["nodata"].shape == (4, 3)
