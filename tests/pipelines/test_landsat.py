"""Landsat Collection 2 Level-2 radiometry from the product's MTL (pipelines.landsat)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from pipelines.landsat import file_radiometry, mtl_groups
from pipelines.sidecars import MetadataError

if TYPE_CHECKING:
    from pathlib import Path

PRODUCT = "LC08_L2SP_035032_20230612_20230620_02_T1"

MTL_JSON = {
    "LANDSAT_METADATA_FILE": {
        "LEVEL2_SURFACE_REFLECTANCE_PARAMETERS": {"REFLECTANCE_MULT_BAND_4": "2.75e-05", "REFLECTANCE_ADD_BAND_4": "-0.2"},
        "LEVEL2_SURFACE_TEMPERATURE_PARAMETERS": {"TEMPERATURE_MULT_BAND_ST_B10": "0.00341802", "TEMPERATURE_ADD_BAND_ST_B10": "149.0"},
        # Level 1's top-of-atmosphere factors, under the same key names, after the Level-2 groups (as USGS writes them).
        "LEVEL1_RADIOMETRIC_RESCALING": {"REFLECTANCE_MULT_BAND_4": "2.0000E-05", "REFLECTANCE_ADD_BAND_4": "-0.100000"},
    }
}

MTL_TEXT = """GROUP = LANDSAT_METADATA_FILE
  GROUP = LEVEL2_SURFACE_REFLECTANCE_PARAMETERS
    REFLECTANCE_MULT_BAND_4 = 2.75E-05
    REFLECTANCE_ADD_BAND_4 = -0.200000
  END_GROUP = LEVEL2_SURFACE_REFLECTANCE_PARAMETERS
  GROUP = LEVEL1_RADIOMETRIC_RESCALING
    REFLECTANCE_MULT_BAND_4 = 2.0000E-05
    REFLECTANCE_ADD_BAND_4 = -0.100000
  END_GROUP = LEVEL1_RADIOMETRIC_RESCALING
END_GROUP = LANDSAT_METADATA_FILE
END
"""


def test_groups_keep_level_2_apart_from_level_1() -> None:
    for text in (json.dumps(MTL_JSON), MTL_TEXT):
        groups = mtl_groups(text)
        assert float(groups["LEVEL2_SURFACE_REFLECTANCE_PARAMETERS"]["REFLECTANCE_MULT_BAND_4"]) == 2.75e-05
        assert float(groups["LEVEL1_RADIOMETRIC_RESCALING"]["REFLECTANCE_MULT_BAND_4"]) == 2e-05


@pytest.mark.parametrize("suffix", ["_MTL.json", "_MTL.txt"])
def test_surface_reflectance_and_temperature_take_their_factors(tmp_path: Path, suffix: str) -> None:
    (tmp_path / f"{PRODUCT}{suffix}").write_text(json.dumps(MTL_JSON) if suffix.endswith("json") else MTL_TEXT)
    assert file_radiometry(str(tmp_path / f"{PRODUCT}_SR_B4.TIF")) == (2.75e-05, -0.2, None)
    if suffix.endswith("json"):
        assert file_radiometry(str(tmp_path / f"{PRODUCT}_ST_B10.TIF")) == (0.00341802, 149.0, "K")
    assert file_radiometry(str(tmp_path / f"{PRODUCT}_QA_PIXEL.TIF")) is None  # no factors for a QA layer
    assert file_radiometry(str(tmp_path / "LC08_L2SP_035032_20230628_20230705_02_T1_SR_B4.TIF")) is None  # no MTL


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"LANDSAT_METADATA_FILE": {}}', "has no REFLECTANCE_MULT_BAND_4"),
        (
            '{"LEVEL2_SURFACE_REFLECTANCE_PARAMETERS": {"REFLECTANCE_MULT_BAND_4": "x", "REFLECTANCE_ADD_BAND_4": "0"}}',
            "REFLECTANCE_MULT_BAND_4 is 'x', not a number",
        ),
    ],
)
def test_an_mtl_that_does_not_say_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / f"{PRODUCT}_MTL.json").write_text(text)
    with pytest.raises(MetadataError, match=message) as info:
        file_radiometry(str(tmp_path / f"{PRODUCT}_SR_B4.TIF"))
    assert f"{PRODUCT}_MTL.json" in str(info.value)
