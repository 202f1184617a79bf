"""Inputs whose validity is an internal mask: their masked pixels become the cube's nodata, or the input is refused.

GDAL's per-dataset mask (an internal mask, or a ``.msk`` file beside the
GeoTIFF) marks pixels invalid apart from any nodata value. rumi marks invalid
pixels only with nodata, so a conversion that read the pixels alone would make
the masked ones valid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import rasterio

import rumi_core
from catalog.cube import Cube
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.rasters import has_internal_mask

if TYPE_CHECKING:
    from pathlib import Path

TIME = "2024-03-01"


def _masked_geotiff(
    path: Path, *, nodata: float | None, transform: rasterio.Affine, internal: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """A 2-band uint16 GeoTIFF with a per-dataset mask over a disc and a stripe; returns its pixels and mask."""
    rng = np.random.default_rng(7)
    data = rng.integers(1, 5000, (2, 96, 80), dtype=np.uint16)  # no pixel equals the nodata value 0
    rows, cols = np.mgrid[:96, :80]
    mask = np.where(((rows - 40) ** 2 + (cols - 30) ** 2 < 400) | (cols >= 70), 0, 255).astype(np.uint8)
    profile: dict[str, Any] = {"driver": "GTiff", "width": 80, "height": 96, "count": 2, "dtype": "uint16", "crs": "EPSG:32633"}
    profile.update(transform=transform, nodata=nodata)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=internal), rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
        dst.write_mask(mask)
    return data, mask


def _convert(inputs: list[Path], out: Path, **options: Any) -> tuple[np.ndarray | None, list[Any]]:
    summary = run([str(p) for p in inputs], ConvertOptions(out=str(out), time=TIME, tile_size=32, frame_unit=0, **options))
    entries = list(load_jsonl(str(out / "manifest.jsonl"))) if (out / "manifest.jsonl").exists() else []
    if not entries:
        return None, list(summary.dead_letters)
    (path,) = out.glob(f"**/{entries[0]['cube_id']}.rumi")
    pixels = rumi_core.read(str(path))
    return (pixels[0] if pixels.ndim == 4 else pixels), list(summary.dead_letters)


@pytest.mark.parametrize("internal", [True, False], ids=["internal-mask", "msk-sidecar"])
def test_a_mask_without_nodata_is_refused_naming_the_fix(tmp_path: Path, internal: bool) -> None:
    source = tmp_path / "scene.tif"
    _masked_geotiff(source, nodata=None, transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000), internal=internal)
    with rasterio.open(source) as ds:
        assert has_internal_mask(ds)
    pixels, dead = _convert([source], tmp_path / "out")
    assert pixels is None
    (letter,) = dead
    assert letter.reason == "masked" and letter.stage == "ReadSceneMetadata"
    where = "(in the file)" if internal else "(in scene.tif.msk)"
    assert f"has a mask band {where}" in letter.message and "gdal_edit.py -a_nodata" in letter.message


def test_masked_pixels_take_the_nodata_value(tmp_path: Path) -> None:
    source = tmp_path / "scene.tif"
    data, mask = _masked_geotiff(source, nodata=0, transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000))
    pixels, dead = _convert([source], tmp_path / "out")
    assert not dead and pixels is not None
    assert np.array_equal(pixels, np.where(mask == 0, 0, data))
    with rasterio.open(source) as ds:  # what a rasterio user reads: the masked array, filled with nodata
        assert np.array_equal(pixels, ds.read(masked=True).filled(0))


def test_a_masked_scene_warped_onto_the_grid_keeps_its_mask(tmp_path: Path) -> None:
    """South-up, so --align reproject warps it: the warper writes the source's nodata, not 0, where the mask is 0."""
    source = tmp_path / "scene.tif"
    data, mask = _masked_geotiff(source, nodata=65535, transform=rasterio.Affine(10, 0, 300000, 0, 10, 5799040))
    pixels, dead = _convert([source], tmp_path / "out", align="reproject")
    assert not dead and pixels is not None
    assert np.array_equal(pixels, np.where(mask == 0, 65535, data)[:, ::-1])


def test_a_mask_that_is_nodata_or_alpha_is_not_an_internal_mask(tmp_path: Path) -> None:
    """Validity from nodata is the cube's nodata already, and an alpha band is stored as a band: nothing to burn in."""
    transform = rasterio.Affine(10, 0, 300000, 0, -10, 5800000)
    profile: dict[str, Any] = {"driver": "GTiff", "width": 16, "height": 16, "dtype": "uint8", "crs": "EPSG:32633", "transform": transform}
    with rasterio.open(tmp_path / "nodata.tif", "w", count=1, nodata=0, **profile) as dst:
        dst.write(np.arange(256, dtype=np.uint8).reshape(1, 16, 16))
    with rasterio.open(tmp_path / "rgba.tif", "w", count=4, photometric="RGB", alpha="YES", **profile) as dst:
        dst.write(np.full((4, 16, 16), 200, np.uint8))
    for name in ("nodata.tif", "rgba.tif"):
        with rasterio.open(tmp_path / name) as ds:
            assert not has_internal_mask(ds), name
    pixels, dead = _convert([tmp_path / "rgba.tif"], tmp_path / "out")
    assert not dead and pixels is not None and pixels.shape == (4, 16, 16)


def test_bands_of_different_nodata_are_refused_not_given_band_1s(tmp_path: Path) -> None:
    """GDAL keeps a GeoTIFF band's own nodata beside the file (.aux.xml): a cube's bands share one value, so taking band 1's
    would make band 2's nodata pixels valid. The scene is refused, naming the values; with one value it converts."""
    source = tmp_path / "scene.tif"
    data, _ = _masked_geotiff(source, nodata=None, transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000), internal=False)
    for path in tmp_path.glob("scene.tif.msk"):
        path.unlink()
    aux = tmp_path / "scene.tif.aux.xml"
    bands = "".join(f'<PAMRasterBand band="{b}"><NoDataValue>{v}</NoDataValue></PAMRasterBand>' for b, v in ((1, 0), (2, 7)))
    aux.write_text(f"<PAMDataset>{bands}</PAMDataset>")
    with rasterio.open(source) as ds:
        assert ds.nodatavals == (0.0, 7.0)
    pixels, dead = _convert([source], tmp_path / "out")
    assert pixels is None
    (letter,) = dead
    assert (letter.reason, letter.stage) == ("bad-nodata", "ReadSceneMetadata")
    assert "different nodata values (0.0, 7.0)" in letter.message and "gdal_edit.py -a_nodata" in letter.message
    aux.write_text(f"<PAMDataset>{bands.replace('>7<', '>0<')}</PAMDataset>")
    pixels, dead = _convert([source], tmp_path / "same")
    assert dead == [] and pixels is not None and np.array_equal(pixels, data)


def test_a_nodata_value_no_sample_holds_is_refused(tmp_path: Path) -> None:
    """GDAL keeps nodata 0.5 on uint16 samples and masks the 0s it truncates to; an item stating 0.5 would be read as
    masking nothing, or (cast) the 0s: the scene is refused, naming the value."""
    source = tmp_path / "scene.tif"
    profile: dict[str, Any] = {"driver": "GTiff", "width": 40, "height": 32, "count": 1, "dtype": "uint16", "crs": "EPSG:32633"}
    with rasterio.open(source, "w", transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000), nodata=0.5, **profile) as dst:
        dst.write(np.arange(40 * 32, dtype=np.uint16).reshape(1, 32, 40))
    with rasterio.open(source) as ds:
        assert ds.nodata == 0.5 and ds.read(masked=True).mask.sum() == 1  # GDAL masks the one 0
    pixels, dead = _convert([source], tmp_path / "out")
    assert pixels is None
    (letter,) = dead
    assert letter.reason == "bad-nodata" and "nodata value 0.5 is no uint16 sample" in letter.message


def _band_masked_geotiff(path: Path, *, nodata: float | None, transform: rasterio.Affine) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_masked_geotiff`'s pixels with a mask per band in a ``.msk`` beside it (GDAL's INTERNAL_MASK_FLAGS_n=0)."""
    data, mask = _masked_geotiff(path, nodata=nodata, transform=transform)
    profile: dict[str, Any] = {"driver": "GTiff", "width": 80, "height": 96, "count": 2, "crs": "EPSG:32633", "transform": transform}
    with rasterio.open(path, "w", nodata=nodata, dtype="uint16", **profile) as dst:
        dst.write(data)  # the same pixels, without the per-dataset mask
    masks = np.stack([mask, np.where(np.arange(80) < 10, 0, 255).astype(np.uint8).repeat(96).reshape(80, 96).T])
    with rasterio.open(f"{path}.msk", "w", dtype="uint8", **profile) as msk:
        msk.write(masks)
        msk.update_tags(INTERNAL_MASK_FLAGS_1="0", INTERNAL_MASK_FLAGS_2="0")
    return data, masks


def test_masks_of_each_band_are_applied_or_the_scene_refused(tmp_path: Path) -> None:
    """A mask per band (a ``.msk`` of GDAL's INTERNAL_MASK_FLAGS_n=0, a VRT band's ``<MaskBand>``) masks that band alone:
    its masked pixels take the nodata value, as rasterio's masked read gives them. Before, it was not seen as a mask at
    all, and every masked pixel was stored as valid. Without nodata the scene is refused, as with a per-dataset mask;
    warped, too, since GDAL's warper ignores such masks."""
    transform = rasterio.Affine(10, 0, 300000, 0, -10, 5800000)
    source = tmp_path / "scene.tif"
    data, masks = _band_masked_geotiff(source, nodata=0, transform=transform)
    with rasterio.open(source) as ds:
        assert ds.mask_flag_enums == ([], []) and has_internal_mask(ds)
        expected = ds.read(masked=True).filled(0)
    assert (expected != data).any()
    pixels, dead = _convert([source], tmp_path / "out")
    assert not dead and pixels is not None
    assert np.array_equal(pixels, expected) and np.array_equal(pixels, np.where(masks == 0, 0, data))

    bare = tmp_path / "bare" / "scene.tif"
    bare.parent.mkdir()
    _band_masked_geotiff(bare, nodata=None, transform=transform)
    pixels, dead = _convert([bare], tmp_path / "out-bare")
    assert pixels is None and [letter.reason for letter in dead] == ["masked"]

    south = tmp_path / "south" / "scene.tif"
    south.parent.mkdir()
    _band_masked_geotiff(south, nodata=0, transform=rasterio.Affine(10, 0, 300000, 0, 10, 5799040))
    pixels, dead = _convert([south], tmp_path / "out-south", align="reproject")
    assert pixels is None
    assert {letter.reason for letter in dead} == {"read-failed"}
    assert all("masks of their own, which GDAL's warper does not apply" in letter.message for letter in dead)


@pytest.mark.parametrize("text", ["-3.4e+38", "0.1", "-3.40282346638529e+38"])
def test_a_float32_nodata_is_the_float32_gdal_masks_with(tmp_path: Path, text: str) -> None:
    """GDAL compares a Float32 band with its nodata rounded to float32; ``-3.4e+38`` (as GDAL writes the text) is no
    float32 exactly. The cube's nodata is that float32, and masked pixels take it, as rasterio's masked read fills them.
    Before, they became 0.0, valid data; and float32's lowest written to 15 digits was refused as no float32."""
    source = tmp_path / "scene.tif"
    profile: dict[str, Any] = {"driver": "GTiff", "width": 80, "height": 96, "count": 1, "dtype": "float32", "crs": "EPSG:32633"}
    data = np.random.default_rng(3).normal(100, 50, (1, 96, 80)).astype(np.float32)
    mask = np.full((96, 80), 255, np.uint8)
    mask[10:40, 20:60] = 0
    with (
        rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True),
        rasterio.open(source, "w", transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000), **profile) as dst,
    ):
        dst.write(data)
        dst.write_mask(mask)
    (tmp_path / "scene.tif.aux.xml").write_text(
        f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{text}</NoDataValue></PAMRasterBand></PAMDataset>'
    )
    with rasterio.open(source) as ds:
        expected = ds.read(masked=True).filled(ds.nodata)
    pixels, dead = _convert([source], tmp_path / "out")
    assert not dead and pixels is not None
    assert np.array_equal(pixels.view(np.uint32), expected.view(np.uint32))
    assert (pixels[:, mask == 0] == np.float32(float(text))).all()


@pytest.mark.parametrize(("dtype", "nodata"), [("int64", 2**53 + 1), ("uint64", 2**64 - 1), ("uint64", 2**63 + 1)])
def test_a_64_bit_nodata_no_double_is_is_refused(tmp_path: Path, dtype: str, nodata: int, caplog: pytest.LogCaptureFixture) -> None:
    """rasterio gives nodata as a double: 2**53 + 1 came back as 2**53, and the item stated it, masking valid pixels of
    2**53 where GDAL masks those of 2**53 + 1; uint64's largest came back as none. Such a scene is refused; int64's fill
    -2**63, a double, converts with it. (The value is set as GDAL keeps a band's own, in .aux.xml: rasterio writes nodata
    as a double.)"""
    source = tmp_path / "scene.tif"
    profile: dict[str, Any] = {"driver": "GTiff", "width": 40, "height": 32, "count": 1, "dtype": dtype, "crs": "EPSG:32633"}
    data = np.arange(40 * 32, dtype=dtype).reshape(1, 32, 40)
    data[0, :4] = np.iinfo(dtype).min if dtype == "int64" else 0
    with rasterio.open(source, "w", transform=rasterio.Affine(10, 0, 300000, 0, -10, 5800000), **profile) as dst:
        dst.write(data)
    aux = tmp_path / "scene.tif.aux.xml"
    aux.write_text(f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{nodata}</NoDataValue></PAMRasterBand></PAMDataset>')
    pixels, dead = _convert([source], tmp_path / "out")
    assert pixels is None
    (letter,) = dead
    assert letter.reason == "bad-nodata" and f"its {dtype} nodata is {nodata}, which no double is" in letter.message
    # Only the dead letter: GDAL's warning, logged as rasterio opened the file, named GDAL's C functions to the user.
    assert "GetNoDataValue" not in caplog.text
    fill = np.iinfo(dtype).min if dtype == "int64" else 0
    aux.write_text(f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{fill}</NoDataValue></PAMRasterBand></PAMDataset>')
    with rasterio.open(source) as ds:
        assert ds.read(masked=True).mask.sum() == 160
    pixels, dead = _convert([source], tmp_path / "fill")
    assert not dead and pixels is not None and np.array_equal(pixels, data)
    (item,) = (p for p in (tmp_path / "fill" / "stac").glob("**/*.json") if p.name not in ("catalog.json", "collection.json"))
    with Cube.open(str(item)) as cube:
        assert cube.bands[0].nodata == fill
