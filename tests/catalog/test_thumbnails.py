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
