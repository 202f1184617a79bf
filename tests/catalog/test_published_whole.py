"""Files the catalogue writes by name (GeoTIFFs through GDAL, the stac-geoparquet index): published whole, and as written.

A write that fails, whatever the error, leaves neither a temporary nor a partial file, and a disk that fills names the
file being made. Before, both wrote a fixed ``<target>.partial`` that an OSError left behind.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from catalog.index import write_index

if TYPE_CHECKING:
    from pathlib import Path


def _full_disk(*_: Any, **__: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_geotiff_whose_write_fails_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from catalog import geotiff
    from catalog.bands import Band

    monkeypatch.setattr(geotiff, "_state_radiometry", _full_disk)
    target = tmp_path / "out.tif"
    with pytest.raises(OSError, match="No space left on device") as err:
        geotiff.write_geotiff(target, np.zeros((1, 8, 8), "uint16"), crs="EPSG:32633", transform=None,
                              radiometry=[Band(name="b", scale=0.5)])  # fmt: skip
    assert err.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []


def test_an_index_whose_write_fails_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cube: Any) -> None:
    import stac_geoparquet.arrow

    from catalog.items import create_item

    def half_then_full(table: Any, path: str, **_: Any) -> None:
        with open(path, "wb") as f:
            f.write(b"PAR1")
        _full_disk()

    monkeypatch.setattr(stac_geoparquet.arrow, "to_parquet", half_then_full)
    item = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()
    before = set(tmp_path.iterdir())
    with pytest.raises(OSError, match="No space left on device") as err:
        write_index([item], tmp_path / "items.parquet")
    assert err.value.filename == str(tmp_path / "items.parquet")
    assert set(tmp_path.iterdir()) == before


def test_a_fourth_byte_band_is_data_not_alpha(tmp_path: Path) -> None:
    """GDAL's default makes a GeoTIFF of 4 Byte bands RGB + alpha, masking every pixel whose 4th band (the near-infrared
    of an RGBN scene) is 0. The 4th band is written as data; three bands still show as RGB."""
    import rasterio
    from rasterio.enums import ColorInterp, MaskFlags

    from catalog.geotiff import write_geotiff

    data = np.zeros((4, 8, 8), "uint8")
    data[:3] = 7
    write_geotiff(tmp_path / "rgbn.tif", data, crs="EPSG:32633", transform=rasterio.Affine(10, 0, 500000, 0, -10, 4000000))
    with rasterio.open(tmp_path / "rgbn.tif") as ds:
        assert ds.colorinterp[3] == ColorInterp.undefined
        assert all(flags == [MaskFlags.all_valid] for flags in ds.mask_flag_enums)
        assert not np.ma.getmaskarray(ds.read(masked=True)).any()
    write_geotiff(tmp_path / "rgb.tif", data[:3], crs="EPSG:32633", transform=rasterio.Affine(10, 0, 500000, 0, -10, 4000000))
    with rasterio.open(tmp_path / "rgb.tif") as ds:
        assert ds.colorinterp == (ColorInterp.red, ColorInterp.green, ColorInterp.blue)
