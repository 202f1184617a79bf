"""Thumbnails: every ``step``-th pixel of the first time step, read one tile at a time."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np
import pytest
from PIL import Image

import rumi_core
from catalog.extra_metadata import ExtraMetadata
from catalog.items import _bands
from catalog.thumbnails import _as_float, _stretch, render_thumbnail, thumbnail_bands
from rumi_core.header import HeaderBlob
from rumi_core.sources import LocalFileSource
from rumi_core.testing import synthetic_scene

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(("max_size", "step"), [(100, 7), (700, 1), (64, 11)])
def test_thumbnail_samples_the_whole_image_across_partial_tiles(tmp_path: Path, max_size: int, step: int) -> None:
    # 300 x 700 in 128² tiles: partial tiles on both edges, and steps that do not divide the tile.
    data = np.stack([synthetic_scene(3, 300, 700, seed=s) for s in (1, 2)])
    path = tmp_path / "c.rumi"
    blob = rumi_core.write(path, data, bands=["red", "green", "blue"], times=["2024-01-01", "2024-02-01"], tile_size=128)
    source = LocalFileSource(path)
    header = HeaderBlob.from_bytes(blob)
    bands = _bands(rumi_core.info(source, header), ExtraMetadata.from_dict({}))
    png = render_thumbnail(source, header, bands, max_size=max_size)
    shown = np.asarray(Image.open(io.BytesIO(png)))
    expected = np.stack([_stretch(_as_float(data[0, p, ::step, ::step]), bands[p].nodata_value) for p in thumbnail_bands(bands)], axis=-1)
    assert shown.shape == (-(-300 // step), -(-700 // step), 3)
    np.testing.assert_array_equal(shown, expected)


def _thumbnail_of(tmp_path: Path, data: np.ndarray) -> np.ndarray:
    path = tmp_path / "c.rumi"
    header = HeaderBlob.from_bytes(rumi_core.write(path, data, bands=["b"], times=["2024-01-01"], tile_size=32))
    bands = _bands(rumi_core.info(LocalFileSource(path), header), ExtraMetadata.from_dict({}))
    return np.asarray(Image.open(io.BytesIO(render_thumbnail(LocalFileSource(path), header, bands))))


def test_values_near_the_ends_of_float64_are_drawn_without_overflow(tmp_path: Path) -> None:
    """A band spanning -1.7e308..1.7e308 overflowed the stretch's differences (a RuntimeWarning, and a grey image)."""
    ramp = np.linspace(-1, 1, 64 * 64).reshape(64, 64) * np.finfo(np.float64).max * 0.95
    shown = _thumbnail_of(tmp_path, ramp[np.newaxis, np.newaxis])
    assert shown.min() == 0 and shown.max() == 255
    np.testing.assert_array_equal(shown, _stretch(ramp / 4, None))


@pytest.mark.parametrize(
    ("dtype", "bits"),
    [("<f4", np.array([0x7F800001], "<u4")), ("<f8", np.array([0x7FF0000000000001], "<u8")), ("<c8", np.array([0x7F800001, 0], "<u4"))],
)
def test_signalling_nans_are_not_drawn_and_raise_no_warning(tmp_path: Path, dtype: str, bits: np.ndarray) -> None:
    """Casting a NaN whose quiet bit is clear raises "invalid": a RuntimeWarning in every item's thumbnail."""
    data = np.linspace(0, 1, 64 * 64).reshape(1, 1, 64, 64).astype(dtype)
    data[0, 0, 0, :5] = bits.view(dtype)[0]
    shown = _thumbnail_of(tmp_path, data)
    assert (shown[0, :5] == 0).all() and shown.max() == 255
