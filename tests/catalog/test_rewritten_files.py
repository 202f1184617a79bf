"""A file rewritten after its header blob (or item) was read: errors say so, and name the item and frame.

``rumi convert --overwrite`` replaces a cube in place, under the same name. A
reader that kept the old blob finds no frame where the blob places one: a
chip reader said only "Corruption detected", naming no item, and a caller of
``rumi_core.read`` with a kept blob was told the file was corrupt.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

import rumi_core
from catalog.chips import ChipPosition, ChipReader
from catalog.errors import ChangedFileError
from catalog.items import create_item
from rumi_core.errors import FrameDecodeError

from .conftest import BANDS, CRS, TIMES, TRANSFORM, CubeFiles, write_cube

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def _write(path: Path, data: object, compression: str) -> bytes:
    blob: bytes = rumi_core.write(
        path, data, bands=BANDS, times=TIMES, crs=CRS, transform=TRANSFORM, tile_size=(64, 48), compression=compression
    )
    return blob


def _first_and_rewritten(tmp_path: Path) -> CubeFiles:
    """A cube written with the ``raster`` codec, its blob beside it, then the same pixels written again with the
    default codec, whose frames are larger: the old blob's frames still lie inside the file, at the wrong offsets."""
    cube = write_cube(tmp_path)
    cube.blob_path.write_bytes(_write(cube.path, cube.data, "raster"))
    return cube


def test_a_kept_blob_of_an_earlier_version_is_named_as_the_likely_cause(tmp_path: Path) -> None:
    cube = _first_and_rewritten(tmp_path)
    kept = cube.blob_path.read_bytes()
    _write(cube.path, cube.data, "auto")
    assert cube.path.stat().st_size >= rumi_core.HeaderBlob.from_bytes(kept).trailer_offset  # no size check catches it
    with pytest.raises(FrameDecodeError, match="the header blob describes another file or an earlier version of this one"):
        rumi_core.read(cube.path, kept)
    assert (rumi_core.read(cube.path) == cube.data).all()


def test_a_chip_reader_over_http_names_the_rewritten_item(tmp_path: Path, server: RangeRequestServer) -> None:
    cube = _first_and_rewritten(tmp_path)
    item = create_item(cube.path, cube.blob_path, data_href="cube.rumi", header_href="cube.rumih", thumbnail=False)
    (tmp_path / "cube.json").write_text(json.dumps(item.to_dict()))
    reader = ChipReader([server.url("cube.json")], bands=None, cache_bytes=0)
    first = reader.read(0, ChipPosition(0, 0, 0), 32)
    assert (first.data == cube.data[:, :, :32, :32]).all()
    _write(cube.path, cube.data, "auto")
    with pytest.raises(ChangedFileError, match=r"cube\.rumi: the file is \d+ bytes, its item says file:size"):
        reader.read(0, ChipPosition(0, 40, 50), 32)
