"""Zip and tar archives as inputs (pipelines.archives): their rasters read in place, their product metadata from inside."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

import rumi_core
from pipelines.archives import ArchiveError, extracted_paths, member_size, raster_members, read_member
from pipelines.cli import check_inputs
from pipelines.convert import run
from pipelines.errors import SceneError
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.planning.scene import SceneRef
from pipelines.rasters import RASTER_SUFFIXES, file_size
from pipelines.sentinel2.testing import l2a_metadata, write_safe
from pipelines.testing import write_geotiff
from pipelines.transforms.dead_letters import DeadLetter
from pipelines.transforms.discover import discover
from pipelines.transforms.read_metadata import read_scene

T = (30.0, 0.0, 300000.0, 0.0, -30.0, 5800020.0)

PRODUCT = "LC09_L2SP_034032_20230612_20230614_02_T1"

MTL = {
    "LANDSAT_METADATA_FILE": {
        "LEVEL2_SURFACE_REFLECTANCE_PARAMETERS": {"REFLECTANCE_MULT_BAND_4": "2.75e-05", "REFLECTANCE_ADD_BAND_4": "-0.2"}
    }
}
"""The part of a Collection 2 Level-2 ``_MTL.json`` that scales SR_B4."""


def _zip(folder: Path, archive: Path) -> Path:
    """``folder`` and everything below it as a deflated zip, members named from ``folder``'s own name."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(folder.parent).as_posix())
    return archive


def _files(out: Path) -> dict[bytes, str]:
    """Each .rumi file below ``out`` by its bytes."""
    return {p.read_bytes(): p.name for p in out.glob("*.rumi")}


def test_a_zipped_safe_converts_to_the_bytes_of_its_folder(tmp_path: Path) -> None:
    """A Copernicus Data Space download is a zipped SAFE: read in place, with the radiometry its MTD_MSIL2A.xml declares."""
    safe = write_safe(tmp_path / "folder", "20220125", "04.00", l2a_metadata(-1000))
    archive = _zip(safe, tmp_path / "zips" / f"{safe.stem}.zip")
    run([str(tmp_path / "folder")], ConvertOptions(out=str(tmp_path / "from-folder")))
    run([str(tmp_path / "zips")], ConvertOptions(out=str(tmp_path / "from-zip")))
    assert not (tmp_path / "from-zip" / "dead-letter.jsonl").exists() or not load_jsonl(str(tmp_path / "from-zip" / "dead-letter.jsonl"))
    from_folder, from_zip = _files(tmp_path / "from-folder"), _files(tmp_path / "from-zip")
    assert len(from_zip) == 3 and from_zip.keys() == from_folder.keys()  # the same cubes, byte for byte
    entries = load_jsonl(str(tmp_path / "from-zip" / "manifest.jsonl"))
    assert all(href.startswith(f"/vsizip/{{{archive}}}/{safe.name}/GRANULE/") for e in entries for href in e["inputs"])
    (reflectance,) = [e for e in entries if e["dtype"] == "uint16" and e["bands"][0]["name"].startswith("B02")]
    assert [(b["scale"], b["offset"]) for b in reflectance["bands"]] == [(0.0001, -0.1)] * 2


def test_a_landsat_tar_bundle_takes_its_mtl(tmp_path: Path) -> None:
    """An EarthExplorer Collection 2 bundle is a tar of the product's files: SR_B4 is scaled as the MTL inside says."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    data = np.random.default_rng(3).integers(7000, 20000, (1, 40, 50), dtype=np.uint16)
    write_geotiff(str(bundle / f"{PRODUCT}_SR_B4.TIF"), data, epsg=32613, transform=T, nodata=0)
    (bundle / f"{PRODUCT}_MTL.json").write_text(json.dumps(MTL))
    archive = tmp_path / "in" / f"{PRODUCT}.tar"
    archive.parent.mkdir()
    with tarfile.open(archive, "w") as tar:
        for path in sorted(bundle.iterdir()):
            tar.add(path, path.name)
    out = tmp_path / "out"
    run([str(archive)], ConvertOptions(out=str(out)))
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert [(b["scale"], b["offset"]) for b in entry["bands"]] == [(2.75e-05, -0.2)]
    assert entry["times"] == ["2023-06-12T00:00:00Z"]
    (path,) = out.glob("*.rumi")
    assert np.array_equal(rumi_core.read(str(path)), data)


@pytest.mark.parametrize("given", ["downloads", "downloads/*"], ids=["folder", "shell-expanded"])
def test_a_zip_beside_its_unzipped_product_counts_once(tmp_path: Path, given: str) -> None:
    """``unzip x.zip`` leaves the zip beside the SAFE: the folder is read, the zip's copies are not duplicate times."""
    safe = write_safe(tmp_path / "downloads", "20220125", "04.00", l2a_metadata(-1000))
    _zip(safe, tmp_path / "downloads" / f"{safe.stem}.zip")
    run(sorted(str(p) for p in tmp_path.glob(given)), ConvertOptions(out=str(tmp_path / "both")))
    run([str(safe)], ConvertOptions(out=str(tmp_path / "folder")))
    assert not (tmp_path / "both" / "dead-letter.jsonl").exists() or not load_jsonl(str(tmp_path / "both" / "dead-letter.jsonl"))
    assert _files(tmp_path / "both").keys() == _files(tmp_path / "folder").keys() and len(_files(tmp_path / "both")) == 3
    entries = load_jsonl(str(tmp_path / "both" / "manifest.jsonl"))
    assert all(href.startswith(str(safe)) for e in entries for href in e["inputs"])


def test_a_tar_beside_a_partial_extraction_names_what_the_folder_lacks(tmp_path: Path) -> None:
    """A desktop extracts ``x.tar`` into ``x/``: the folder is read, and a band it lacks is a dead letter, not a second acquisition."""
    bundle = tmp_path / "in" / PRODUCT
    bundle.mkdir(parents=True)
    rng = np.random.default_rng(4)
    data = {b: rng.integers(7000, 20000, (1, 40, 50), dtype=np.uint16) for b in ("SR_B4", "SR_B5")}
    for band, pixels in data.items():
        write_geotiff(str(bundle / f"{PRODUCT}_{band}.TIF"), pixels, epsg=32613, transform=T, nodata=0)
    archive = tmp_path / "in" / f"{PRODUCT}.tar"
    with tarfile.open(archive, "w") as tar:
        for path in sorted(bundle.iterdir()):
            tar.add(path, path.name)
    (bundle / f"{PRODUCT}_SR_B5.TIF").unlink()
    out = tmp_path / "out"
    run([str(tmp_path / "in")], ConvertOptions(out=str(out)))
    (letter,) = load_jsonl(str(out / "dead-letter.jsonl"))
    assert (letter["href"], letter["reason"]) == (f"/vsitar/{{{archive}}}/{PRODUCT}_SR_B5.TIF", "extracted")
    assert str(bundle / f"{PRODUCT}_SR_B4.TIF") in letter["message"]
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["inputs"] == [str(bundle / f"{PRODUCT}_SR_B4.TIF")]
    (path,) = out.glob("*.rumi")
    assert np.array_equal(rumi_core.read(str(path)), data["SR_B4"])


def test_extracted_paths_are_beside_the_archive_or_in_its_namesake() -> None:
    assert extracted_paths("/vsitar/{/d/L.tar}/L_B4.TIF") == ("/d/L_B4.TIF", "/d/L/L_B4.TIF")
    assert extracted_paths("/vsizip/{/d/X.SAFE.ZIP}/X.SAFE/a/../B.jp2") == ("/d/X.SAFE/B.jp2", "/d/X.SAFE/X.SAFE/B.jp2")
    assert extracted_paths("/d/L_B4.TIF") == ()


def test_a_zipped_srtm_height_tile_converts(tmp_path: Path) -> None:
    """NASADEM and SRTM ship each 1° tile as a zipped ``.hgt`` that GDAL's SRTMHGT driver reads: int16 heights at pixel centres."""
    import rasterio

    heights = np.random.default_rng(6).integers(-50, 3000, (1, 1201, 1201), dtype=np.int16)
    heights[0, :10, :10] = -32768
    tile = tmp_path / "N46E007.hgt"
    where = rasterio.Affine(1 / 1200, 0, 7 - 0.5 / 1200, 0, -1 / 1200, 47 + 0.5 / 1200)
    with rasterio.open(tile, "w", driver="SRTMHGT", width=1201, height=1201, count=1, dtype="int16", crs="EPSG:4326", transform=where) as f:
        f.write(heights)
    folder = tmp_path / "dem {v1}"  # braces, as in GDAL's /vsizip/{archive}/member
    folder.mkdir()
    with zipfile.ZipFile(folder / "NASADEM_HGT_n46e007.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(tile, tile.name)
        stored = z.getinfo(tile.name).compress_size
    out = tmp_path / "out"
    run([str(folder)], ConvertOptions(out=str(out), time="2000-02-11"))
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["input_bytes"] == stored
    assert (entry["crs"], entry["pixel_is_point"], entry["nodata"], entry["dtype"]) == ("EPSG:4326", True, -32768.0, "int16")
    assert entry["transform"][2:] == pytest.approx([7 - 0.5 / 1200, 0.0, -1 / 1200, 47 + 0.5 / 1200])  # the first pixel's corner
    assert np.array_equal(rumi_core.read(str(out / entry["file"])), heights)
    renamed = tile.rename(tmp_path / "N46E007 copy.hgt")
    with pytest.raises(SceneError, match=r"supported file format; GDAL reads an SRTM height tile by its name, such as N46E007\.hgt"):
        read_scene(SceneRef(str(renamed), time="2000-02-11"))


def test_members_are_the_rasters_in_name_order(tmp_path: Path) -> None:
    archive = tmp_path / "x.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("b/B03.jp2", "a/B02.TIF", "a/notes.txt", "a/", "a/B02.tif.aux.xml"):
            z.writestr(name, b"" if name.endswith("/") else b"bytes of " + name.encode())
    assert raster_members(str(archive), RASTER_SUFFIXES) == [f"/vsizip/{{{archive}}}/a/B02.TIF", f"/vsizip/{{{archive}}}/b/B03.jp2"]
    beside = f"/vsizip/{{{archive}}}/a/notes.txt"
    assert read_member(beside, 1 << 20) == b"bytes of a/notes.txt"
    assert read_member(f"/vsizip/{{{archive}}}/a/missing.xml", 1 << 20) is None
    assert read_member(str(archive), 1 << 20) is None  # not a member href
    assert member_size(beside) == file_size(beside) == len(b"bytes of a/notes.txt")  # stored, not compressed
    with pytest.raises(ArchiveError, match="larger than"):
        read_member(beside, 4)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.zip", b"PK\x03\x04 not really", "cannot read .*bad.zip"),
        ("bad.tar", b"\x00" * 10, "cannot read .*bad.tar: "),
    ],
)
def test_an_unreadable_archive_is_a_dead_letter_naming_it(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    (tmp_path / name).write_bytes(content)
    (letter,) = discover(str(tmp_path / name))
    assert isinstance(letter, DeadLetter) and letter.reason == "unreadable"
    assert re.search(message, letter.message)


def test_a_compressed_tar_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """GDAL reaches into a .tar.gz only by decompressing from its start, once per window read."""
    source = tmp_path / "b"
    source.mkdir()
    write_geotiff(str(source / f"{PRODUCT}_SR_B4.TIF"), np.ones((1, 8, 8), np.uint16), epsg=32613, transform=T)
    archive = Path(shutil.make_archive(str(tmp_path / "bundle"), "gztar", source))
    renamed = tmp_path / "bundle.tar"  # a gzip stream behind a .tar name, as downloads are sometimes saved
    shutil.copy(archive, renamed)
    for path in (archive, renamed):
        (letter,) = discover(str(path))
        assert isinstance(letter, DeadLetter) and letter.reason == "unreadable"
        assert letter.message == f"{path} is a compressed tar, which GDAL reads only from its start; extract it first"


def test_a_directory_of_archives_is_searched_into(tmp_path: Path) -> None:
    folder = tmp_path / "downloads"
    safe = write_safe(tmp_path / "safes", "20220125", "04.00", l2a_metadata(-1000))
    archive = _zip(safe, folder / f"{safe.stem}.zip")
    zipfile.ZipFile(folder / "empty.zip", "w").close()
    check_inputs([str(folder)])  # archives count as inputs of a directory
    found = discover(str(folder))
    refs = [r for r in found if isinstance(r, SceneRef)]
    assert len(refs) == 5 and all(r.href.startswith(f"/vsizip/{{{archive}}}/") for r in refs)
    (letter,) = [r for r in found if isinstance(r, DeadLetter)]
    assert letter.reason == "no-match" and letter.message == "the archive holds no .tif, .tiff, .jp2 or .hgt file"


def test_a_tar_naming_members_in_pax_headers_is_refused_saying_why(tmp_path: Path) -> None:
    """Python's tarfile (and tar --format=pax) keeps a non-ASCII or long name in a PAX header, which GDAL's /vsitar/ does
    not read: each member was listed, then an "unreadable" dead letter saying it "does not exist in the file system"."""
    scene = tmp_path / "S2_é_20230105T103021_B04.tif"
    write_geotiff(str(scene), np.ones((1, 48, 64), dtype="uint16"), epsg=32632, transform=(10.0, 0.0, 600000.0, 0.0, -10.0, 5300040.0))
    for fmt, name in ((tarfile.PAX_FORMAT, "pax.tar"), (tarfile.GNU_FORMAT, "gnu.tar")):
        with tarfile.open(tmp_path / name, "w", format=fmt) as bundle:
            bundle.add(scene, scene.name)
    with pytest.raises(ArchiveError, match=r"in PAX extended headers, .* pack it again with tar --format=gnu"):
        raster_members(str(tmp_path / "pax.tar"), RASTER_SUFFIXES)
    (member,) = raster_members(str(tmp_path / "gnu.tar"), RASTER_SUFFIXES)
    assert member.endswith(scene.name)
    summary = run([str(tmp_path / "pax.tar")], ConvertOptions(out=str(tmp_path / "out"), time="2023-01-05", tile_size=32))
    (letter,) = summary.dead_letters
    assert letter.reason == "unreadable" and "PAX extended headers" in letter.message
