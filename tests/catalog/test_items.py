"""STAC items of rumi files: fields, assets, thumbnails and validation."""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import rumi_core
from catalog.bands import Band, band_from_text
from catalog.errors import ItemError
from catalog.extension import SCHEMA_URI, RumiFields
from catalog.extra_metadata import ExtraMetadata
from catalog.items import DATA_MEDIA_TYPE, create_item
from catalog.validation import STACValidationError, validate_stac

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def test_item_fields(cube: Any) -> None:
    item = create_item(cube.path, cube.blob_path, extra={"dataset": "s2", "codec": {"name": "openzl", "configuration": {}}})
    d = item.to_dict()
    props = d["properties"]
    assert d["id"] == "cube"
    assert d["stac_version"] == "1.1.0"
    assert props["start_datetime"] == "2021-01-01T00:00:00Z"
    assert props["end_datetime"] == "2021-01-21T10:30:00Z"
    assert props["datetime"] is None
    assert props["proj:code"] == "EPSG:32633"
    assert props["proj:shape"] == [100, 130]
    assert props["proj:transform"] == [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0]
    dims = props["cube:dimensions"]
    assert dims["band"]["values"] == ["B2", "B3", "B4", "B8"]
    assert dims["time"]["values"] == ["2021-01-01T00:00:00Z", "2021-01-11T00:00:00Z", "2021-01-21T10:30:00Z"]
    assert dims["x"]["extent"] == [500000.0, 501300.0] and dims["y"]["extent"] == [3999000.0, 4000000.0]
    assert props["rumi:frame_unit"] == 0 and props["rumi:frame_axes"] == "hw" and props["rumi:tile_size"] == [64, 48]
    assert props["rumi:codec"] == {"name": "openzl", "configuration": {}}
    assert "rumi:lossy_bound" not in props
    assert base64.b64decode(props["rumi:header"]) == cube.blob
    lon0, lat0, lon1, lat1 = d["bbox"]
    assert 14.99 < lon0 < lon1 < 15.02 and 36.13 < lat0 < lat1 < 36.15
    data = d["assets"]["data"]
    assert data["type"] == DATA_MEDIA_TYPE and data["roles"] == ["data"]
    assert data["file:size"] == cube.path.stat().st_size
    assert data["file:checksum"] == "1220" + hashlib.sha256(cube.path.read_bytes()).hexdigest()
    red = data["bands"][2]
    assert red == {
        "name": "B4",
        "description": "B4, Red, 665nm",
        "data_type": "uint16",
        "eo:common_name": "red",
        "eo:center_wavelength": 0.665,
    }
    header = d["assets"]["header"]
    assert header["roles"] == ["metadata", "index"] and header["file:size"] == len(cube.blob)
    assert d["assets"]["thumbnail"]["type"] == "image/png"


def test_items_validate_offline(cube: Any) -> None:
    report = validate_stac(create_item(cube.path, cube.blob_path).to_dict())
    assert "STAC 1.1.0 core" in report.checked
    assert SCHEMA_URI in report.checked


def test_validate_takes_the_pystac_item_create_item_returns(cube: Any) -> None:
    """``validate_stac(create_item(...))`` raised AttributeError ('Item' object has no attribute 'get')."""
    item = create_item(cube.path, cube.blob_path, thumbnail=False)
    assert validate_stac(item) == validate_stac(item.to_dict())
    item.properties["rumi:frame_unit"] = 12
    with pytest.raises(STACValidationError, match="rumi-forge"):
        validate_stac(item)
    with pytest.raises(TypeError, match="a dict or with to_dict"):
        validate_stac(["not", "stac"])  # type: ignore[arg-type]


def test_broken_rumi_field_fails_validation(cube: Any) -> None:
    d = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()
    d["properties"]["rumi:frame_unit"] = 12
    with pytest.raises(STACValidationError, match="rumi-forge"):
        validate_stac(d)


def test_broken_core_field_fails_validation(cube: Any) -> None:
    d = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()
    del d["properties"]["start_datetime"]
    with pytest.raises(STACValidationError, match="core"):
        validate_stac(d)


def test_extension_schemas_when_available(cube: Any, stac_schemas: Path) -> None:
    """Projection, datacube, file and EO schemas are not installable; ../shared/stac-schemas holds them."""
    item = create_item(cube.path, cube.blob_path, thumbnail=False).to_dict()
    report = validate_stac(item, schema_dir=str(stac_schemas), require_all=True)
    assert not report.unchecked
    assert len(report.checked) == 1 + len(item["stac_extensions"])
    broken = {**item, "properties": {**item["properties"], "proj:shape": "not a shape"}}
    with pytest.raises(STACValidationError, match="projection"):
        validate_stac(broken, schema_dir=str(stac_schemas), require_all=True)


def test_extra_metadata_overrides_the_band_texts(cube: Any) -> None:
    extra = {
        "id": "s2-tile",
        "bands": [{"name": "blue", "unit": "1", "scale": 0.0001, "offset": -0.1, "nodata": 0, "centre_wavelength": 0.49}, {}, {}, {}],
        "lossy_bound": 0.5,
        "file": "ignored.rumi",
    }
    d = create_item(cube.path, cube.blob_path, extra=extra, thumbnail=False).to_dict()
    first = d["assets"]["data"]["bands"][0]
    assert d["id"] == "s2-tile"
    assert first["name"] == "blue" and first["scale"] == 0.0001 and first["offset"] == -0.1 and first["nodata"] == 0
    assert first["eo:center_wavelength"] == 0.49
    assert d["properties"]["rumi:lossy_bound"] == 0.5
    validate_stac(d)


def test_extra_with_too_many_bands(cube: Any) -> None:
    with pytest.raises(ItemError, match="describes 5 bands, the file has 4"):
        create_item(cube.path, cube.blob_path, extra={"bands": [{}] * 5}, thumbnail=False)


def test_unknown_band_field(cube: Any) -> None:
    with pytest.raises(ItemError, match="no field 'colour'"):
        create_item(cube.path, cube.blob_path, extra={"bands": [{"colour": "red"}]}, thumbnail=False)


def test_large_blob_is_not_inline(cube: Any) -> None:
    d = create_item(cube.path, cube.blob_path, inline_header_limit=10, thumbnail=False).to_dict()
    assert "rumi:header" not in d["properties"]
    assert "header" in d["assets"]


def test_mismatched_blob_is_refused(cube: Any, tmp_path: Path, make_cube: Callable[..., Any]) -> None:
    (tmp_path / "other").mkdir()
    other = make_cube(tmp_path / "other", seed=99)
    with pytest.raises(rumi_core.HeaderMismatchError, match="frame_byte_counts"):
        create_item(cube.path, other.blob_path, thumbnail=False)


def test_interval_image_has_start_and_end(tmp_path: Path) -> None:
    path = tmp_path / "dem.rumi"
    blob = rumi_core.write(
        path,
        np.arange(2 * 40 * 50, dtype="float32").reshape(2, 40, 50),
        bands=["elevation", "slope"],
        times=[("2020-01-01", "2021-01-01")],
        crs="EPSG:4326",
        transform=(0.01, 0.0, 10.0, 0.0, -0.01, 50.0),
        tile_size=32,
    )
    (tmp_path / "dem.rumih").write_bytes(blob)
    d = create_item(path).to_dict()
    props = d["properties"]
    assert props["start_datetime"] == "2020-01-01T00:00:00Z" and props["end_datetime"] == "2020-12-31T23:59:59Z"  # [start, end) in the file
    assert props["cube:dimensions"]["time"]["values"] == ["2020-01-01T00:00:00Z/2021-01-01T00:00:00Z"]
    assert props["rumi:time_type"] == "interval"
    assert d["bbox"] == pytest.approx([10.0, 49.6, 10.5, 50.0])
    assert "https://stac-extensions.github.io/eo/v2.0.0/schema.json" not in d["stac_extensions"]
    validate_stac(d)


def test_single_instant_has_datetime(tmp_path: Path) -> None:
    path = tmp_path / "img.rumi"
    rumi_core.write(
        path, np.zeros((1, 8, 8), "uint8"), bands=["mask"], times=["2020-05-01T10:00:00Z"], crs=32633, transform=(10, 0, 0, 0, -10, 0)
    )
    d = create_item(path).to_dict()
    assert d["properties"]["datetime"] == "2020-05-01T10:00:00Z"
    assert "header" not in d["assets"]  # no .rumih beside it: blob built in memory, and inline
    assert "rumi:header" in d["properties"]
    validate_stac(d)


def test_thumbnail_rgb_and_grey(cube: Any, tmp_path: Path) -> None:
    from PIL import Image

    item = create_item(cube.path, cube.blob_path)
    with Image.open(item.assets["thumbnail"].href) as png:
        assert png.mode == "RGB" and png.size == (130, 100)
    path = tmp_path / "grey.rumi"
    rumi_core.write(path, np.arange(600 * 500, dtype="int16").reshape(1, 600, 500), bands=["dem"], times=["2020-01-01"], tile_size=128)
    item2 = create_item(path, thumbnail_path=tmp_path / "grey.png")
    with Image.open(item2.assets["thumbnail"].href) as grey:
        assert grey.mode == "L" and max(grey.size) <= 256
        pixels = np.asarray(grey)
    assert pixels.min() == 0 and pixels.max() == 255


def test_band_text_parsing() -> None:
    assert band_from_text("B4, Red, 664.5nm (S2A) / 665nm (S2B)").center_wavelength == pytest.approx(0.6645)
    assert band_from_text("B11, SWIR1, 1.61um").common_name == "swir16"
    assert band_from_text("NDVI").common_name is None
    b = Band("B8", description="B8, NIR, 842nm", common_name="nir")
    assert b.matches("nir") and b.matches("B8") and b.matches("NIR") and not b.matches("red")
    # The end of a name after a separator: the layers named after their files.
    vv = Band("IW_DVP_G_gpuned_VV")
    assert vv.matches("vv") and vv.matches("gpuned_VV") and not vv.matches("V") and not vv.matches("") and not vv.matches("DVP")
    assert not Band("B8A").matches("8A") and not Band("QA_PIXEL").matches("QA")
    # A STAC band named by its whole text (rumi convert's Sentinel-2 bands) answers to its id.
    s2 = Band("B04, red, 664.6nm (S2A) / 664.9nm (S2B)", common_name="red")
    assert s2.matches("B04") and s2.matches("b04") and s2.matches("red") and not s2.matches("B4") and not s2.matches("B08")
    assert Band.from_dict(b.to_dict()) == b


def test_band_nan_nodata_is_a_string() -> None:
    assert Band("x", nodata=float("nan")).to_dict()["nodata"] == "nan"


def test_rumi_fields_round_trip_and_errors() -> None:
    f = RumiFields(frame_unit=4, frame_axes="tbhw", tile_size=(256, 256), time_type="interval", lossy_bound={"abs": 1.0}, dataset="x")
    assert RumiFields.from_dict(f.to_dict()) == f
    with pytest.raises(ItemError, match=r"frame_unit is 0\.\.9"):
        RumiFields(frame_unit=10, frame_axes="hw", tile_size=(1, 1), time_type="instant")
    with pytest.raises(ItemError, match="no rumi:frame_unit property"):
        RumiFields.from_dict({})


def test_extra_metadata_round_trip() -> None:
    extra = ExtraMetadata.from_dict({"dataset": "s2", "codec": "openzl", "bands": [{"eo:common_name": "red"}], "sha256": "0" * 64})
    assert extra.codec == {"name": "openzl"}
    assert extra.bands == ({"common_name": "red"},)
    assert ExtraMetadata.from_dict(extra.to_dict()) == extra


def test_band_texts_of_the_longest_digit_runs_read_in_one_pass(tmp_path: Path) -> None:
    """A wavelength is searched from the start of a number only: a band text of 65,535 digits (the most the
    specification allows) made every search start inside the run and backtrack, hours for ``rumi read``."""
    import subprocess
    import sys

    assert band_from_text("x1234567890nm").center_wavelength is None  # too long a number for a wavelength
    assert band_from_text("B8A, 865 NM").center_wavelength == 0.865
    path = tmp_path / "digits.rumi"
    texts = [str(b) * 65535 for b in range(1, 6)]
    rumi_core.write(path, np.zeros((5, 2, 2), "uint8"), bands=texts, times=["2020-01-01"])
    code = "import sys; from rumi_core.cli.main import main; sys.exit(main())"
    # A hang guard, not a timing: the read takes a fraction of a second, and took hours.
    done = subprocess.run([sys.executable, "-c", code, "read", str(path), "-o", str(tmp_path / "x.tif")], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
