"""Discovery, scene metadata and windowed frame reads on real files written per test (no Beam)."""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pytest
from pyproj.crs import CompoundCRS

from pipelines.errors import SceneError
from pipelines.options import ConvertOptions
from pipelines.planning.grouping import plan_cubes
from pipelines.planning.scene import SceneRef
from pipelines.rasters import RasterCache
from pipelines.sentinel2.testing import l2a_metadata, write_safe
from pipelines.testing import write_geotiff, write_huge_block
from pipelines.transforms.dead_letters import DeadLetter
from pipelines.transforms.discover import asset_nodata, asset_radiometry, discover, stac_scene_refs
from pipelines.transforms.frames import LazyCube, fill_value, read_frame
from pipelines.transforms.read_metadata import read_scene
from rumi_core.times import format_seconds

if TYPE_CHECKING:
    from collections.abc import Iterator

T = (10.0, 0.0, 600000.0, 0.0, -10.0, 5300000.0)


def _data(shape: tuple[int, int, int] = (1, 40, 50), dtype: str = "uint16", seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).integers(1, 9000, shape).astype(dtype)


def _write_in_crs(path: str, crs: str) -> None:
    """A dated 8 x 8 GeoTIFF in ``crs`` (any text ``rasterio.crs.CRS.from_user_input`` reads)."""
    import rasterio

    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "uint16", "crs": rasterio.crs.CRS.from_user_input(crs)}
    with rasterio.open(path, "w", transform=rasterio.Affine(100, 0, 4321000, 0, -100, 3210000), **profile) as dst:
        dst.write(_data((1, 8, 8)))
        dst.update_tags(TIFFTAG_DATETIME="2020:01:01 00:00:00")


MOLLWEIDE = "ESRI:54009"
"""Mollweide, as the Global Human Settlement Layer ships: a CRS with no EPSG code, nor any close to it."""

LAEA_UNKNOWN_DATUM = (
    'PROJCS["unknown",GEOGCS["unknown",DATUM["Unknown_based_on_GRS80_ellipsoid",SPHEROID["GRS 1980",6378137,298.257222101004]],'
    'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Lambert_Azimuthal_Equal_Area"],'
    'PARAMETER["latitude_of_center",52],PARAMETER["longitude_of_center",10],PARAMETER["false_easting",4321000],'
    'PARAMETER["false_northing",3210000],UNIT["metre",1]]'
)
"""LAEA Europe on an unnamed GRS80 datum, as some GeoTIFFs carry it: GDAL finds no EPSG code, PROJ ranks EPSG:3035 closest."""


def _write_netcdf(path: str) -> None:
    """A NetCDF of two variables, as GDAL writes a 2-band raster: subdatasets, and no bands of its own."""
    import rasterio
    import rasterio.shutil

    tif = path + ".tif"
    write_geotiff(tif, _data((2, 8, 8)).astype(np.float32), epsg=4326, transform=(0.25, 0, 10, 0, -0.25, 50))
    rasterio.shutil.copy(tif, path, driver="netCDF")


def _write_pages(path: str) -> None:
    """A dated GeoTIFF of two full-size images (a second page appended, as GDAL's APPEND_SUBDATASET writes it)."""
    _write_in_crs(path, "EPSG:32632")
    _write_in_crs(path + ".2.tif", "EPSG:32632")
    import rasterio.shutil

    rasterio.shutil.copy(path + ".2.tif", path, driver="GTiff", APPEND_SUBDATASET="YES")


def _write_cint16(path: str) -> None:
    """A dated GDAL CInt16 GeoTIFF (complex integers, as some SAR products ship): no rumi sample encoding."""
    import rasterio

    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "complex_int16", "crs": "EPSG:32632"}
    with rasterio.open(path, "w", transform=rasterio.Affine(*T), **profile) as dst:
        dst.write(np.ones((1, 8, 8), np.complex64))
        dst.update_tags(TIFFTAG_DATETIME="2020:01:01 00:00:00")


_PIXEL_SCALE: Final = struct.pack("<3d", 10.5, 10.5, 0.0)
"""The ModelPixelScaleTag :func:`_write_hostile` writes, for a test to overwrite in the file's bytes."""


def _write_hostile(
    path: str,
    *,
    pixel: tuple[float, float] = (10.5, -10.5),
    origin: float = 600000.0,
    patch: tuple[bytes, bytes] | None = None,
    scales: tuple[float, ...] | None = None,
    offsets: tuple[float, ...] | None = None,
) -> None:
    """A dated 50 x 40 GeoTIFF in EPSG:32632 described "BADBADBAD", with the given georeferencing and factors, and
    ``patch`` replaced in its bytes (GDAL rewrites the directory on update, so every copy)."""
    import rasterio

    transform = (pixel[0], 0.0, origin, 0.0, pixel[1], 5300000.0)
    write_geotiff(
        path, _data(), epsg=32632, transform=transform, tags={"TIFFTAG_DATETIME": "2020:01:01 00:00:00"}, descriptions=["BADBADBAD"]
    )
    if scales or offsets:
        with rasterio.open(path, "r+") as dst:
            dst.scales = scales or dst.scales
            dst.offsets = offsets or dst.offsets
    if patch:
        data = Path(path).read_bytes()
        assert patch[0] in data
        Path(path).write_bytes(data.replace(*patch))


class _RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with HTTP Range support, as GDAL's /vsicurl/ needs."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        del format, args

    def send_head(self) -> Any:
        path = self.translate_path(self.path)
        if not os.path.isfile(path) or "Range" not in self.headers:
            return super().send_head()
        size = os.path.getsize(path)
        start, _, end = self.headers["Range"].removeprefix("bytes=").partition("-")
        first, last = int(start), min(int(end) if end else size - 1, size - 1)
        f = open(path, "rb")  # noqa: SIM115 - closed by copyfile's caller
        f.seek(first)
        self.send_response(206)
        self.send_header("Content-Type", "image/tiff")
        self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self._remaining = last - first + 1
        return f

    def copyfile(self, source: Any, outputfile: Any) -> None:
        remaining = getattr(self, "_remaining", None)
        outputfile.write(source.read() if remaining is None else source.read(remaining))


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server on 127.0.0.1 serving ``tmp_path/www``."""
    root = tmp_path / "www"
    root.mkdir()
    handler = lambda *a, **k: _RangeHandler(*a, directory=str(root), **k)  # noqa: E731
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class TestDiscover:
    def test_glob_directory_and_file(self, series: tuple[Path, list[str], Any]) -> None:
        directory, paths, _ = series
        by_glob = discover(str(directory / "*_B0[23].tif"))
        assert len(by_glob) == 6 and all(isinstance(r, SceneRef) for r in by_glob)
        assert [r.href for r in discover(str(directory))] == sorted(paths)  # type: ignore[union-attr]
        assert discover(paths[0]) == [SceneRef(paths[0])]

    def test_a_file_reached_by_several_links_is_found_once(self, tmp_path: Path) -> None:
        """A link to a parent makes ``**`` list a file at every depth; a ``latest`` file link doubles a scene."""
        scenes = tmp_path / "scenes"
        scenes.mkdir()
        path = write_geotiff(str(scenes / "x_B02.tif"), _data(), epsg=32632, transform=T)
        (scenes / "up").symlink_to(tmp_path)
        (scenes / "latest.tif").symlink_to(path)
        assert [r.href for r in discover(str(tmp_path / "**" / "*.tif"))] == [path]  # type: ignore[union-attr]
        assert [r.href for r in discover(str(scenes))] == [path]  # type: ignore[union-attr]

    def test_a_name_that_is_not_utf8_is_a_dead_letter(self, tmp_path: Path) -> None:
        """A Latin-1 name reaches Python as lone surrogates, which GDAL cannot be given: one dead letter, the other scenes found."""
        good = write_geotiff(str(tmp_path / "x_B02.tif"), _data(), epsg=32632, transform=T)
        os.link(good, os.fsencode(tmp_path) + b"/caf\xe9_B03.tif")
        found = discover(str(tmp_path))
        letters = [r for r in found if isinstance(r, DeadLetter)]
        assert [r.href for r in found if isinstance(r, SceneRef)] == [good]
        assert [(d.href, d.reason) for d in letters] == [(f"{tmp_path}/caf\\xe9_B03.tif", "bad-name")]
        assert letters[0].href.encode("utf-8") and "rename it" in letters[0].message
        assert discover(str(tmp_path / "*_B03.tif")) == letters

    def test_a_glob_leaves_out_gdal_sidecars(self, tmp_path: Path) -> None:
        """``x.tif.ovr`` and ``x.tif.msk`` open as TIFFs without georeferencing: taken for scenes, each would be a dead letter."""
        path = write_geotiff(str(tmp_path / "x_B02.tif"), _data(), epsg=32632, transform=T)
        import rasterio

        with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False, TIFF_USE_OVR=True), rasterio.open(path, "r+") as ds:
            ds.write_mask(np.full((ds.height, ds.width), 255, np.uint8))
            ds.build_overviews([2])
        (tmp_path / "x_B02.tif.aux.xml").write_text("<PAMDataset/>")
        (tmp_path / "notes.txt").write_text("not a raster, but asked for by the glob")
        assert {"x_B02.tif.msk", "x_B02.tif.ovr", "x_B02.tif.msk.ovr"} <= {p.name for p in tmp_path.iterdir()}  # what GDAL wrote
        assert [r.href for r in discover(str(tmp_path / "*"))] == [str(tmp_path / "notes.txt"), path]  # type: ignore[union-attr]
        (letter,) = discover(str(tmp_path / "*.tif.*"))
        assert isinstance(letter, DeadLetter) and letter.reason == "no-match"
        assert letter.message == "the pattern matches only GDAL's sidecar files (.aux.xml, .ovr, .msk), which are not scenes"
        # A shell expands scenes/* itself: each sidecar of a raster that exists expands to nothing, where each was a
        # scene to georeference (no-geotransform), or unreadable.
        for name in ("x_B02.tif.msk", "x_B02.tif.ovr", "x_B02.tif.aux.xml", "x_B02.tif.msk.ovr"):
            assert discover(str(tmp_path / name)) == [], name
        (tmp_path / "lone.tif.msk").write_bytes((tmp_path / "x_B02.tif.msk").read_bytes())
        assert [r.href for r in discover(str(tmp_path / "lone.tif.msk"))] == [str(tmp_path / "lone.tif.msk")]  # type: ignore[union-attr]

    def test_nothing_found(self, tmp_path: Path) -> None:
        (found,) = discover(str(tmp_path / "none*.tif"))
        assert isinstance(found, DeadLetter) and found.reason == "no-match"

    def test_urls_pass_through(self) -> None:
        assert discover("gs://bucket/a.tif") == [SceneRef("gs://bucket/a.tif")]

    def test_stac_item_collection(self, tmp_path: Path) -> None:
        doc = {
            "type": "FeatureCollection",
            "features": [
                {
                    "type": "Feature",
                    "id": "S2A_1",
                    "properties": {"datetime": "2023-01-05T10:30:21.024Z"},
                    "assets": {
                        "red": {"href": "data/r.tif", "type": "image/tiff; application=geotiff", "eo:bands": [{"name": "B04"}]},
                        "nir": {"href": "https://h/n.tif", "type": "image/tiff"},
                        "thumbnail": {"href": "t.tif", "type": "image/tiff", "roles": ["thumbnail"]},
                        "meta": {"href": "m.xml", "type": "application/xml"},
                    },
                }
            ],
        }
        path = tmp_path / "items.json"
        path.write_text(json.dumps(doc))
        refs = discover(str(path))
        assert refs == [
            SceneRef("https://h/n.tif", "2023-01-05T10:30:21.024Z", "S2A_1", ("nir",)),
            SceneRef(str(tmp_path / "data" / "r.tif"), "2023-01-05T10:30:21.024Z", "S2A_1", ("B04",)),
        ]
        assert SceneRef.from_dict(refs[0].to_dict()) == refs[0]

    def test_copernicus_data_space_files_name_the_settings_their_s3_needs(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """CDSE's items name s3://eodata/ files; GDAL's own message asked for AWS credentials, which never reach them."""
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_S3_ENDPOINT", "AWS_PROFILE", "AWS_NO_SIGN_REQUEST"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("CPL_AWS_AUTODETECT_EC2", "NO")  # no instance metadata to wait for
        monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        settings = re.escape("AWS_S3_ENDPOINT=eodata.dataspace.copernicus.eu, AWS_VIRTUAL_HOSTING=FALSE")
        with pytest.raises(SceneError, match=settings) as info:
            read_scene(SceneRef("s3://eodata/Sentinel-2/MSI/L2A/2023/06/12/x.SAFE/GRANULE/g/IMG_DATA/R10m/B04.jp2", "2023-06-12"))
        assert info.value.reason == "unreadable"

    def test_an_item_with_no_geotiff_asset_is_named_beside_the_others(self, tmp_path: Path) -> None:
        """Beside items that have GeoTIFFs, one without was left out without a word (a CDSE Level-1C item's JP2s)."""
        geotiff = {"red": {"href": "r.tif", "type": "image/tiff; application=geotiff"}}
        jp2 = {"B04_10m": {"href": "b04.jp2", "type": "image/jp2"}, "thumbnail": {"href": "t.png", "type": "image/png"}}
        level_1c = {"datetime": "2023-01-05T10:30:21Z", "product:type": "S2MSI1C"}
        features = [
            {"type": "Feature", "id": "cog", "properties": {"datetime": "2023-01-05T10:30:21Z"}, "assets": geotiff},
            {"type": "Feature", "id": "l1c", "properties": level_1c, "assets": jp2},
            {"type": "Feature", "id": "bare", "properties": {"datetime": "2023-01-05T10:30:21Z"}, "assets": {}},
        ]
        path = tmp_path / "items.json"
        path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
        found = discover(str(path))
        assert [r.href for r in found if isinstance(r, SceneRef)] == [str(tmp_path / "r.tif")]
        letters = [(d.reason, d.message) for d in found if isinstance(d, DeadLetter)]
        assert letters == [
            (
                "no-match",
                "feature 1 (id 'l1c') has no GeoTIFF asset (its assets: B04_10m (image/jp2), thumbnail (image/png)); it is a Sentinel-2 "
                "Level-1C item, and STAC items are read as Sentinel-2 from Level-2A only: convert its SAFE product",
            ),
            ("no-match", "feature 2 (id 'bare') has no GeoTIFF asset (it has no assets)"),
        ]

    def test_an_item_not_read_as_sentinel2_is_named_where_sentinel2_options_select(self) -> None:
        """An Earth Search item without its s2: properties was converted as a GeoTIFF item: every band, though --bands asked
        for one, and its +1000 DNs under no offset, with only an SCL dtype dead letter to show for it."""
        from pipelines.sentinel2.search import S2Request

        props = {"datetime": "2023-11-01T10:00:21Z", "platform": "sentinel-2a", "constellation": "sentinel-2", "mgrs:utm_zone": 33,
                 "mgrs:latitude_band": "U", "mgrs:grid_square": "UU"}  # fmt: skip
        assets = {key: {"href": f"{key}.tif", "type": "image/tiff; application=geotiff"} for key in ("red", "nir08", "scl")}
        document = {"type": "FeatureCollection", "features": [{"type": "Feature", "id": "bare", "properties": props, "assets": assets}]}
        found = stac_scene_refs(document, "/items/items.json", S2Request(bands="red", tiles=("33UUU",)))
        assert [(d.reason, d.message) for d in found if isinstance(d, DeadLetter)] == [
            (
                "not-sentinel2",
                "feature 0 (id 'bare') is not read as a Sentinel-2 L2A item: it states no processing baseline (s2:processing_baseline, "
                "processing:version); --bands, --mgrs select among those, so it is left out (convert it without --bands, --mgrs to take "
                "its GeoTIFF assets as they are)",
            )
        ]
        assert len(found) == 1
        as_they_are = stac_scene_refs(document, "/items/items.json")
        assert sorted(r.href for r in as_they_are if isinstance(r, SceneRef)) == ["/items/nir08.tif", "/items/red.tif", "/items/scl.tif"]
        props["s2:processing_baseline"] = "05.09"
        assert [r.href for r in stac_scene_refs(document, "/items/items.json", S2Request(bands="red"))] == ["/items/red.tif"]

    @pytest.mark.parametrize(
        ("asset", "stated"),
        [
            ({"raster:bands": [{"scale": 2.75e-05, "offset": -0.2, "nodata": 0}]}, ((2.75e-05, -0.2, None),)),  # raster 1.x
            ({"raster:bands": [{"scale": 0.01, "unit": "K"}, {"nodata": 0}]}, ((0.01, 0.0, "K"), None)),
            ({"bands": [{"name": "B10", "raster:offset": 149.0, "unit": "K"}]}, ((1.0, 149.0, "K"),)),  # STAC 1.1, raster 2.x
            ({"bands": [{"name": "red"}], "raster:scale": 0.0001}, ((0.0001, 0.0, None),)),  # one band: on the asset
            ({"eo:bands": [{"name": "B04"}]}, None),
            ({"raster:bands": [{"nodata": 0}]}, None),
        ],
    )
    def test_stac_assets_state_radiometry(self, asset: dict[str, Any], stated: Any) -> None:
        assert asset_radiometry(asset, "a.tif") == stated

    @pytest.mark.parametrize("bad", [{"scale": 0}, {"scale": "0.1"}, {"offset": float("nan")}, {"scale": True}])
    def test_a_stated_scale_that_is_no_number_is_refused(self, bad: dict[str, Any]) -> None:
        with pytest.raises(ValueError, match="a scale is a finite non-zero number"):
            asset_radiometry({"raster:bands": [bad]}, "a.tif")

    @pytest.mark.parametrize(
        ("file_scale", "stated", "error"),
        [
            (None, (2.75e-05, -0.2, None), None),  # a catalogue's COG without scale of its own: the asset's applies
            ((2.75e-05, -0.2), (2.75e-05, -0.2, "reflectance"), None),  # both say the same: the asset adds the unit
            ((0.0001, 0.0), (2.75e-05, -0.2, None), "band 1: the STAC asset states scale 2.75e-05 and offset -0.2, the file scale 0.0001"),
        ],
    )
    def test_what_the_asset_states_applies_unless_the_file_says_otherwise(
        self, tmp_path: Path, file_scale: tuple[float, float] | None, stated: Any, error: str | None
    ) -> None:
        path = write_geotiff(str(tmp_path / "LC09_L2SP_034032_20230612_20230614_02_T1_SR_B4.TIF"), _data(), epsg=32632, transform=T)
        if file_scale is not None:
            import rasterio

            with rasterio.open(path, "r+") as ds:
                ds.scales, ds.offsets = (file_scale[0],), (file_scale[1],)
        ref = SceneRef(path, "2023-06-12T17:00:00Z", "item", ("red",), band_radiometry=(stated,))
        if error is not None:
            with pytest.raises(SceneError, match=error) as info:
                read_scene(ref)
            assert info.value.reason == "bad-metadata"
            return
        (band,) = read_scene(ref).bands
        assert (band.scale, band.offset, band.unit) == stated
        assert SceneRef.from_dict(ref.to_dict()) == ref

    def test_an_asset_of_other_bands_than_its_file_is_refused(self, tmp_path: Path) -> None:
        path = write_geotiff(str(tmp_path / "x.tif"), _data((2, 8, 8)), epsg=32632, transform=T)
        with pytest.raises(SceneError, match="the STAC asset states the radiometry of 1 bands, the file has 2") as info:
            read_scene(SceneRef(path, "2023-06-12", band_radiometry=((0.1, 0.0, None),)))
        assert info.value.reason == "bad-metadata"

    @pytest.mark.parametrize(
        ("asset", "stated"),
        [
            ({"raster:bands": [{"nodata": 0}, {"nodata": 0.0}]}, 0.0),  # raster 1.x
            ({"raster:bands": [{"nodata": 0}, {}]}, None),  # a GeoTIFF's one value: not one for all bands
            ({"raster:bands": [{"nodata": 0}, {"nodata": 1}]}, None),
            ({"bands": [{"name": "a"}, {"name": "b"}], "nodata": -9999}, -9999.0),  # STAC 1.1: the asset's, for every band
            ({"bands": [{"name": "a", "nodata": 0}, {"name": "b"}], "nodata": -9999}, None),
            ({"nodata": "-inf"}, -math.inf),
            ({"eo:bands": [{"name": "B04"}]}, None),
        ],
    )
    def test_stac_assets_state_nodata(self, asset: dict[str, Any], stated: float | None) -> None:
        assert asset_nodata(asset, "a.tif") == stated
        assert math.isnan(asset_nodata({"bands": [{"nodata": "nan"}, {"nodata": float("nan")}]}, "a.tif") or 0.0)

    @pytest.mark.parametrize("bad", ["none", True, [0]])
    def test_a_stated_nodata_that_is_no_number_is_refused(self, bad: Any) -> None:
        with pytest.raises(ValueError, match=r"its nodata is .*, not a number or one of nan, inf, -inf"):
            asset_nodata({"raster:bands": [{"nodata": bad}]}, "a.tif")

    @pytest.mark.parametrize(
        ("file_nodata", "stated", "nodata", "error"),
        [
            (None, 0.0, 0.0, None),  # a catalogue's COG without a nodata tag: the asset's applies
            (0, 0.0, 0.0, None),
            (None, -0.0, 0.0, None),  # an integer sample has one zero
            (0, 65535.0, None, "the STAC asset states nodata 65535, the file 0"),
            (None, math.nan, None, "the STAC asset states nodata nan, which no uint16 sample can hold"),
            (None, 70000.0, None, "nodata 70000, which no uint16 sample"),
        ],
    )
    def test_a_stated_nodata_applies_where_the_file_has_none(
        self, tmp_path: Path, file_nodata: int | None, stated: float, nodata: float | None, error: str | None
    ) -> None:
        path = write_geotiff(str(tmp_path / "x.tif"), _data(), epsg=32632, transform=T, nodata=file_nodata)
        ref = SceneRef(path, "2023-06-12T17:00:00Z", "item", nodata=stated)
        if error is not None:
            with pytest.raises(SceneError, match=error) as info:
                read_scene(ref)
            assert info.value.reason == "bad-metadata"
            return
        scene = read_scene(ref)
        assert scene.nodata == nodata and math.copysign(1.0, scene.nodata) == 1.0
        assert SceneRef.from_dict(ref.to_dict()) == ref

    @pytest.mark.parametrize(
        ("item", "message"),
        [
            ([1, 2], "feature 0: is a list, not an object"),
            ({"id": "a", "properties": [1]}, "feature 0 \\(id 'a'\\): properties is a list, not an object"),
            ({"id": "a", "properties": {"datetime": 5}}, "properties.datetime is a number, not a text"),
            ({"id": "a", "properties": {"eo:cloud_cover": "low"}}, "properties.eo:cloud_cover is a text, not a number"),
            ({"id": "a", "assets": [1]}, "assets is a list, not an object"),
            ({"id": "a", "assets": {"red": "r.tif"}}, "assets.red is a text, not an object"),
            ({"id": "a", "assets": {"red": {"href": 5}}}, "assets.red.href is a number, not a text"),
            ({"id": "a", "assets": {"red": {"href": "r.tif", "roles": "data"}}}, "assets.red.roles is a text, not a list"),
            ({"id": "a", "assets": {"red": {"href": "r.tif", "eo:bands": ["red"]}}}, "assets.red.eo:bands\\[0\\] is a text, not an object"),
            ({"id": "a", "assets": {"red": {"href": "r.tif", "raster:bands": [{"scale": "x"}]}}}, "a scale is a finite non-zero number"),
        ],
    )
    def test_a_malformed_item_is_a_dead_letter_naming_its_field_and_the_others_are_found(
        self, tmp_path: Path, item: Any, message: str
    ) -> None:
        good = {"type": "Feature", "id": "b", "properties": {"datetime": "2023-01-05T10:30:21Z"}, "assets": {"red": {"href": "r.tif"}}}
        path = tmp_path / "items.json"
        path.write_text(json.dumps({"type": "FeatureCollection", "features": [item, good]}))
        letter, ref = discover(str(path))
        assert isinstance(letter, DeadLetter) and (letter.href, letter.reason) == (str(path), "bad-stac")
        assert re.search(message, letter.message), letter.message
        assert ref == SceneRef(str(tmp_path / "r.tif"), "2023-01-05T10:30:21Z", "b", ("red",))

    @pytest.mark.parametrize(
        ("document", "message"),
        [([1], "got a list"), ({"type": "FeatureCollection", "features": None}, "features is null, not a list")],
    )
    def test_a_document_that_is_no_item_collection_is_refused(self, tmp_path: Path, document: Any, message: str) -> None:
        path = tmp_path / "items.json"
        path.write_text(json.dumps(document))
        (letter,) = discover(str(path))
        assert isinstance(letter, DeadLetter) and letter.reason == "bad-stac" and message in letter.message

    def test_a_static_catalogue_with_a_broken_document_is_a_dead_letter_naming_it(self, tmp_path: Path) -> None:
        links = [{"rel": "item", "href": "items/a.json"}]
        (tmp_path / "catalog.json").write_text(json.dumps({"type": "Catalog", "id": "c", "description": "d", "links": links}))
        (tmp_path / "items").mkdir()
        good = {"type": "Feature", "id": "a", "properties": {"datetime": "2023-01-05T10:30:21Z"}, "assets": {"red": {"href": "../r.tif"}}}
        (tmp_path / "items" / "a.json").write_text(json.dumps(good))
        assert discover(str(tmp_path / "catalog.json")) == [SceneRef(str(tmp_path / "r.tif"), "2023-01-05T10:30:21Z", "a", ("red",))]
        (tmp_path / "items" / "b.json").write_text("[1]")
        links.append({"rel": "child", "href": "items/b.json"})
        (tmp_path / "catalog.json").write_text(json.dumps({"type": "Catalog", "id": "c", "description": "d", "links": links}))
        (letter,) = discover(str(tmp_path / "catalog.json"))
        assert isinstance(letter, DeadLetter) and letter.reason == "bad-stac"
        assert f"{tmp_path / 'items' / 'b.json'} is a list, not an object" in letter.message

    def test_bad_stac(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.json"
        path.write_text('{"type": "Catalog", "links": 5}')
        (found,) = discover(str(path))
        assert isinstance(found, DeadLetter) and found.reason == "bad-stac" and "links is a number, not a list" in found.message
        path.write_text('{"type": "Catalog", "id": "empty", "links": []}')
        (found,) = discover(str(path))
        assert isinstance(found, DeadLetter) and found.reason == "no-match"
        with pytest.raises(ValueError, match="expected a STAC ItemCollection"):
            stac_scene_refs({"type": "Catalog"}, "x.json")
        path.write_text('{"type": "FeatureCollection", "features": ' + "[" * 100_000 + "]" * 100_000 + "}")
        (found,) = discover(str(path))  # Python's parser gives up with a RecursionError, which ended the run
        assert isinstance(found, DeadLetter) and found.reason == "bad-stac"
        assert (
            found.message
            == "the STAC ItemCollection is not JSON this reader can take: its arrays and objects nest deeper than Python's parser goes"
        )

    def test_a_remote_item_collections_hrefs_resolve_as_urls(self) -> None:
        """RFC 3986, as for every remote STAC document (catalog.storage.join_href): a root-relative href is on the same server,
        '..' stays on it, and a file: URL is a bad-stac dead letter naming it, never a local file to open."""
        item = {"type": "Feature", "stac_version": "1.1.0", "id": "a", "geometry": None, "links": [],
                "properties": {"datetime": "2023-06-01T10:00:00Z"},
                "assets": {"B04": {"href": "/scenes/a_B04.tif", "type": "image/tiff; application=geotiff"},
                           "B08": {"href": "../a_B08.tif", "type": "image/tiff; application=geotiff"}}}  # fmt: skip
        found = stac_scene_refs({"type": "FeatureCollection", "features": [item]}, "https://h/stac/items.json")
        assert sorted(r.href for r in found if isinstance(r, SceneRef)) == ["https://h/a_B08.tif", "https://h/scenes/a_B04.tif"]
        item["assets"]["B04"]["href"] = "file:///etc/a_B04.tif"
        found = stac_scene_refs({"type": "FeatureCollection", "features": [item]}, "https://h/stac/items.json")
        (dead,) = [d for d in found if isinstance(d, DeadLetter)]
        assert dead.reason == "bad-stac" and "names 'file:///etc/a_B04.tif', a file on this machine" in dead.message


class TestReadScene:
    def test_series_scene(self, series: tuple[Path, list[str], Any]) -> None:
        _, paths, _ = series
        scene = read_scene(SceneRef(paths[0]))
        assert (scene.epsg, scene.height, scene.width, scene.dtype, scene.nodata) == (32632, 96, 80, "uint16", 0.0)
        assert format_seconds(scene.time) == "2023-01-05T10:30:21Z"
        assert [b.name for b in scene.bands] == ["B02"]
        assert scene.stack.endswith("S2_T32UPU_20230105T103021")
        assert scene.size == os.path.getsize(paths[0])

    def test_descriptions_scale_point_and_stac_hints(self, tmp_path: Path) -> None:
        path = write_geotiff(str(tmp_path / "m.tif"), _data((2, 40, 50)), epsg=32632, transform=T, descriptions=["Red", None])
        import rasterio

        with rasterio.open(path, "r+") as ds:
            ds.scales = (0.0001, 0.0001)
            ds.offsets = (-0.1, -0.1)
            ds.update_tags(AREA_OR_POINT="Point")
        scene = read_scene(SceneRef(path, "2020-01-01", "item", ("red", "green")))
        assert [b.name for b in scene.bands] == ["Red", "green"]
        assert scene.bands[0].scale == 0.0001 and scene.bands[1].offset == -0.1
        assert scene.pixel_is_point and scene.stack == "item"

    @pytest.mark.parametrize(
        ("make", "reason", "message"),
        [
            (
                lambda p: write_geotiff(p, _data(), epsg=None, transform=T, tags={"TIFFTAG_DATETIME": "2020:01:01 00:00:00"}),
                "missing-crs",
                "no CRS",
            ),
            (lambda p: write_geotiff(p, _data(), epsg=32632, transform=T), "unknown-time", "no acquisition time"),
            (
                lambda p: write_geotiff(p, _data(), epsg=32632, transform=T, tags={"TIFFTAG_DATETIME": "soon"}),
                "bad-time",
                "invalid acquisition",
            ),
            (
                lambda p: write_geotiff(p, _data(dtype="int8"), epsg=32632, transform=T, tags={"TIFFTAG_DATETIME": "2020:01:01 00:00:00"}),
                None,
                None,
            ),
            (lambda p: Path(p).write_bytes(b"II*\x00garbage"), "unreadable", "cannot read the raster"),
            (
                lambda p: _write_in_crs(p, MOLLWEIDE),
                "crs-not-epsg",
                r"no EPSG code, and rumi stores EPSG codes only; warp it to one first \(e\.g\. gdalwarp -t_srs EPSG:n\)",
            ),
            (
                lambda p: _write_in_crs(p, LAEA_UNKNOWN_DATUM),
                "crs-not-epsg",
                r"no EPSG code.* \(e\.g\. gdalwarp -t_srs EPSG:3035, the EPSG CRS closest to it but not the same\)",
            ),
            (
                lambda p: _write_in_crs(p, 'LOCAL_CS["site grid",UNIT["metre",1],AXIS["Easting",EAST],AXIS["Northing",NORTH]]'),
                "crs-not-epsg",
                r"is an engineering \(local\) one, tied to no place on the Earth.* \(e\.g\. gdal_edit\.py -a_srs EPSG:n\)$",
            ),
            (
                lambda p: _write_in_crs(p, CompoundCRS("Mollweide + EGM96 height", [MOLLWEIDE, "EPSG:5773"]).to_wkt()),
                "crs-not-epsg",
                r"the horizontal part of the CRS .* has no EPSG code",
            ),
            (_write_netcdf, "subdatasets", r"holds 2 subdatasets \(netcdf:.*:Band1, .*:Band2\) and no bands of its own; .*gdal_translate"),
            # Only its first page was converted, without a word.
            (_write_pages, "subdatasets", r"holds 2 images \(TIFF pages\), .* \(e\.g\. gdal_translate GTIFF_DIR:2:.*bad\.tif out\.tif\)$"),
            (_write_cint16, "unsupported-dtype", r"complex_int16 is not a rumi sample encoding .*gdal_translate -ot CFloat32"),
        ],
    )
    @pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")  # a NetCDF container has no transform
    def test_bad_scenes(self, tmp_path: Path, make: Any, reason: str | None, message: str | None) -> None:
        path = str(tmp_path / "bad.tif")
        make(path)
        if reason is None:
            assert read_scene(SceneRef(path)).dtype == "int8"
            return
        with pytest.raises(SceneError, match=message) as info:
            read_scene(SceneRef(path))
        assert info.value.reason == reason and info.value.href == path

    @pytest.mark.parametrize(
        ("make", "reason", "message"),
        [
            (lambda p: _write_hostile(p, pixel=(1e-300, -1e-300)), "bad-transform", r"nowhere on the Earth: .*to a point or a line"),
            (lambda p: _write_hostile(p, pixel=(1e300, -1e300)), "bad-transform", r"nowhere on the Earth: the grid covers no finite area"),
            (lambda p: _write_hostile(p, origin=1.7e308), "bad-transform", r"covers no area: its corners are \(1\.7e\+308, "),
            (lambda p: _write_hostile(p, origin=1e12), "bad-transform", r"it lies outside EPSG:32632's domain"),
            (
                lambda p: _write_hostile(p, patch=(_PIXEL_SCALE, struct.pack("<3d", math.nan, 10.5, 0.0))),
                "bad-transform",
                r"a transform has six finite coefficients, got \(nan, ",
            ),
            (lambda p: _write_hostile(p, patch=(_PIXEL_SCALE, bytes(24))), "no-geotransform", r"one tiepoint and no pixel size"),
            (
                lambda p: _write_hostile(p, patch=(b"BADBADBAD", b"B\xffD\xfeBADBA")),
                "bad-metadata",
                r"a band description or unit is not UTF-8 text \(b'B\\xffD",
            ),
            (lambda p: _write_hostile(p, scales=(math.inf,)), "bad-metadata", r"band 1's scale is inf, not a finite number"),
            (lambda p: _write_hostile(p, offsets=(math.nan,)), "bad-metadata", r"band 1's offset is nan, not a finite number"),
            (write_huge_block, "large-blocks", r"blocks of 25000 x 25000 pixels decode to 1\.2 GiB each.*at most 1 GiB"),
        ],
        ids=[
            "pixel 1e-300",
            "pixel 1e300",
            "origin 1e308",
            "outside the CRS",
            "NaN pixel",
            "no pixel size",
            "description",
            "scale",
            "offset",
            "one huge strip",
        ],
    )
    def test_hostile_metadata_is_refused_naming_what_failed(self, tmp_path: Path, make: Any, reason: str, message: str) -> None:
        """Georeferencing, band texts, factors and blocks no scene can have are dead letters of their own scene, never an
        error that ended the run (a huge block was allocated whole, and ran the worker out of memory), nor an item with a
        null bbox or a cube whose name held 309 digits."""
        path = str(tmp_path / "hostile.tif")
        make(path)
        with pytest.raises(SceneError, match=message) as info:
            read_scene(SceneRef(path))
        assert info.value.reason == reason and info.value.href == path

    @pytest.mark.parametrize(
        ("crs", "epsg", "vertical"),
        [
            ("EPSG:4326+3855", 4326, "EPSG:3855"),  # the Copernicus DEM's, EPSG:9518
            ("EPSG:25832+7837", 25832, "EPSG:7837"),  # a compound CRS without a code of its own
            ("EPSG:4979", 4326, "EPSG:4979"),  # WGS 84 with ellipsoidal heights
            ("EPSG:32632", 32632, None),
        ],
    )
    def test_a_compound_or_3d_crs_gives_its_horizontal_grid_and_names_its_vertical_crs(
        self, tmp_path: Path, crs: str, epsg: int, vertical: str | None
    ) -> None:
        path = str(tmp_path / "dem.tif")
        _write_in_crs(path, crs)
        scene = read_scene(SceneRef(path))
        assert scene.epsg == epsg and dict(scene.tags).get("rumi:vertical_crs") == vertical

    @pytest.mark.parametrize(
        ("locate", "message"),
        [
            ("gcps", "located by 4 ground control points in EPSG:4326, not a geotransform; warp it first"),
            ("rpcs", "located by rational polynomial coefficients \\(RPCs\\), not a geotransform; orthorectify it first"),
            ("nothing", "no geotransform \\(GDAL gives the identity, pixel coordinates\\); assign one"),
        ],
    )
    @pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
    def test_scene_without_geotransform(self, tmp_path: Path, locate: str, message: str) -> None:
        """A raster located by GCPs, RPCs or nothing is refused for what it lacks, before its (absent) CRS is named."""
        import rasterio
        from rasterio.control import GroundControlPoint
        from rasterio.rpc import RPC

        path = str(tmp_path / "unplaced.tif")
        profile = {"driver": "GTiff", "width": 50, "height": 40, "count": 1, "dtype": "uint16"}
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(_data())
            dst.update_tags(TIFFTAG_DATETIME="2020:01:01 00:00:00")
            if locate == "gcps":
                corners = [(0, 0, 11.0, 48.0), (0, 50, 11.1, 48.0), (40, 0, 11.0, 47.9), (40, 50, 11.1, 47.9)]
                dst.gcps = ([GroundControlPoint(row, col, x, y) for row, col, x, y in corners], rasterio.CRS.from_epsg(4326))
            elif locate == "rpcs":
                dst.rpcs = RPC(
                    height_off=100.0,
                    height_scale=500.0,
                    lat_off=48.0,
                    lat_scale=0.1,
                    line_den_coeff=[1.0] + [0.0] * 19,
                    line_num_coeff=[0.0, 0.0, -1.0] + [0.0] * 17,
                    line_off=20.0,
                    line_scale=20.0,
                    long_off=11.0,
                    long_scale=0.1,
                    samp_den_coeff=[1.0] + [0.0] * 19,
                    samp_num_coeff=[0.0, 1.0] + [0.0] * 18,
                    samp_off=25.0,
                    samp_scale=25.0,
                )
        with pytest.raises(SceneError, match=message) as info:
            read_scene(SceneRef(path))
        assert info.value.reason == "no-geotransform"

    def test_truncated_file_is_unreadable(self, series: tuple[Path, list[str], Any], tmp_path: Path) -> None:
        _, paths, _ = series
        data = Path(paths[0]).read_bytes()
        path = tmp_path / "cut_B02.tif"
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(SceneError, match="cannot read the raster") as info:
            read_scene(SceneRef(str(path)))
        assert info.value.reason == "unreadable"

    def test_fallback_time_and_pattern(self, tmp_path: Path) -> None:
        path = write_geotiff(str(tmp_path / "x_20200202.tif"), _data(), epsg=32632, transform=T)
        assert format_seconds(read_scene(SceneRef(path), time="2021-01-01").time).startswith("2021-01-01")
        assert format_seconds(read_scene(SceneRef(path), time_pattern=r"_(?P<date>\d{8})").time).startswith("2020-02-02")

    def test_a_server_that_never_answers_is_given_up(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """It accepts the connection and stays silent: GDAL gives the read up after its low-speed time (the user's, here 2 s,
        over the 60 s default), and the scene is a dead letter, where libcurl would have waited for ever."""
        import socket
        import time

        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        monkeypatch.setenv("GDAL_HTTP_LOW_SPEED_TIME", "2")
        start = time.monotonic()
        try:
            with pytest.raises(SceneError, match="Operation too slow") as caught:
                read_scene(SceneRef(f"http://127.0.0.1:{listener.getsockname()[1]}/silent_20200101.tif"), time="2020-01-01")
        finally:
            listener.close()
        assert caught.value.reason == "unreadable" and time.monotonic() - start < 30

    def test_http_url(self, http_root: tuple[str, Path], series: tuple[Path, list[str], Any]) -> None:
        url, root = http_root
        _, paths, _ = series
        (root / "a_B02.tif").write_bytes(Path(paths[0]).read_bytes())
        scene = read_scene(SceneRef(f"{url}/a_B02.tif"))
        assert scene.href.startswith("http://") and scene.bands[0].name == "B02"
        assert scene.size == Path(paths[0]).stat().st_size  # the summary's input size, learnt with one request

    @pytest.mark.parametrize(
        ("baseline", "metadata", "radiometry"),
        [("03.01", -1000, (0.0001, -0.1)), ("04.00", None, (0.0001, -0.1)), ("03.01", None, (0.0001, 0.0))],
        ids=["mtd-over-name", "name-after-04.00", "name-before-04.00"],
    )
    def test_a_safe_over_http_takes_its_metadata_radiometry(
        self, http_root: tuple[str, Path], baseline: str, metadata: int | None, radiometry: tuple[float, float]
    ) -> None:
        """Google's public Sentinel-2 bucket serves SAFE folders over HTTPS too: the MTD_MSIL2A.xml beside the images applies,
        and where none can be read (a signed URL signs no sidecar), the baseline the product's name holds."""
        url, root = http_root
        safe = write_safe(root, "20220125", baseline, l2a_metadata(metadata) if metadata is not None else None)
        (image,) = sorted(safe.rglob("*_B02_10m.jp2"))
        (band,) = read_scene(SceneRef(f"{url}/{image.relative_to(root).as_posix()}?X-Goog-Signature=abc")).bands
        assert (band.scale, band.offset) == radiometry


class TestFrames:
    def test_frames_match_the_source_array(self, series: tuple[Path, list[str], np.ndarray[Any, Any]]) -> None:
        _, paths, cube = series
        scenes = [read_scene(SceneRef(p)) for p in paths]
        for unit in (0, 4, 7, 9):
            (plan,), _ = plan_cubes(scenes, ConvertOptions(out="o", tile_size=32, frame_unit=unit))
            from rumi_core.writer import frame_samples

            rasters = RasterCache(max_open=3)
            try:
                for index in range(plan.layout.frame_count):
                    assert np.array_equal(read_frame(plan, index, rasters), frame_samples(cube, plan.layout, index))
            finally:
                rasters.close()

    @pytest.mark.parametrize("unit", [0, 9, 4])
    @pytest.mark.parametrize("span", [64, 1024], ids=["runs of 2x2 tiles", "one run"])
    def test_a_source_run_reads_each_band_and_time_once(
        self, series: tuple[Path, list[str], np.ndarray[Any, Any]], monkeypatch: pytest.MonkeyPatch, unit: int, span: int
    ) -> None:
        """A run's tile frames, every band of one time cut from one window per band, are the frames read one by one; cells
        are read per frame."""
        from pipelines.transforms import frames as frames_module
        from rumi_core.writer import frame_samples

        _, paths, cube = series
        (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], ConvertOptions(out="o", tile_size=32, frame_unit=unit))
        layout = plan.layout
        monkeypatch.setattr(frames_module, "RUN_SPAN", span)
        reads: list[tuple[int, int]] = []
        real = frames_module.read_band_window

        def counted(plan: Any, rasters: Any, t: int, b: int, *args: Any, **kwargs: Any) -> Any:
            reads.append((t, b))
            return real(plan, rasters, t, b, *args, **kwargs)

        monkeypatch.setattr(frames_module, "read_band_window", counted)
        fn = frames_module._ReadFrameFn()
        fn.setup()
        try:
            covered = []
            for run in range(frames_module.run_count(layout)):
                indices = frames_module.run_frames(layout, run)
                reads.clear()
                got = list(fn.process((plan.cube_id, indices), {plan.cube_id: plan}))
                assert [key.index for key, _ in got] == list(indices)
                for key, samples in got:
                    assert np.array_equal(samples, frame_samples(cube, layout, key.index))
                if layout.unit.holds == "cell":
                    assert len(reads) == layout.samples_per_pixel * layout.time_count * len(indices)
                else:
                    (t,) = {time for time, _ in reads}
                    assert reads == [(t, b) for b in range(layout.samples_per_pixel)]
                covered.extend(indices)
            assert sorted(covered) == list(range(layout.frame_count))
        finally:
            fn.teardown()

    @pytest.mark.parametrize("interleave", ["pixel", "band"])
    def test_the_bands_of_a_pixel_interleaved_file_are_read_together(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interleave: str
    ) -> None:
        """A run of a 5-band pixel-interleaved file reads its window once for every band, where band by band GDAL decoded
        each block 5 times (a 240-band scene converted in 124.8 s, 7.9 s so); a band-interleaved one is read band by band.
        The frames are the same."""
        import rasterio

        from pipelines.transforms import frames as frames_module
        from rumi_core.writer import frame_samples

        data = _data((5, 70, 90), seed=4)
        path = str(tmp_path / f"{interleave}.tif")
        profile = {"driver": "GTiff", "width": 90, "height": 70, "count": 5, "dtype": "uint16", "crs": "EPSG:32632"}
        with rasterio.open(path, "w", transform=rasterio.Affine(*T), interleave=interleave, **profile) as dst:
            dst.write(data)
            dst.update_tags(TIFFTAG_DATETIME="2020:01:01 00:00:00")
        (plan,), _ = plan_cubes([read_scene(SceneRef(path))], ConvertOptions(out="o", tile_size=32))
        alone: list[int] = []
        real = frames_module.read_band_window
        monkeypatch.setattr(frames_module, "read_band_window", lambda p, r, t, b, *a, **kw: alone.append(b) or real(p, r, t, b, *a, **kw))
        fn = frames_module._ReadFrameFn()
        fn.setup()
        try:
            (run,) = [frames_module.run_frames(plan.layout, r) for r in range(frames_module.run_count(plan.layout))]
            got = dict(fn.process((plan.cube_id, run), {plan.cube_id: plan}))
        finally:
            fn.teardown()
        assert alone == ([] if interleave == "pixel" else [0, 1, 2, 3, 4])
        assert sorted(key.index for key in got) == list(range(plan.layout.frame_count))
        for key, samples in got.items():
            assert np.array_equal(samples, frame_samples(data[None], plan.layout, key.index))

    def test_a_source_run_that_fails_reports_every_frame_after_one_read(
        self, series: tuple[Path, list[str], np.ndarray[Any, Any]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from pipelines.transforms import frames as frames_module

        _, paths, _ = series
        (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], ConvertOptions(out="o", tile_size=32))
        indices = frames_module.run_frames(plan.layout, 0)
        assert len(indices) == 9 * plan.layout.samples_per_pixel  # 3 x 3 tiles of every band
        os.unlink(plan.sources[0][0][0].href)
        reads: list[int] = []
        real = RasterCache.open
        monkeypatch.setattr(RasterCache, "open", lambda *a, **kw: reads.append(1) or real(*a, **kw))
        fn = frames_module._ReadFrameFn()
        fn.setup()
        try:
            got = list(fn.process((plan.cube_id, indices), {plan.cube_id: plan}))
        finally:
            fn.teardown()
        assert [key.index for key, _ in got] == list(indices)
        failures = {failure for _, failure in got}
        assert len(failures) == 1 and len(reads) == 1
        (failure,) = failures
        assert isinstance(failure, frames_module.FrameFailure) and failure.href == plan.sources[0][0][0].href

    def test_lazy_cube_indexing(self, series: tuple[Path, list[str], np.ndarray[Any, Any]]) -> None:
        _, paths, cube = series
        (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], ConvertOptions(out="o"))
        lazy = LazyCube(plan, RasterCache())
        assert np.array_equal(lazy[1, 2, 5:20, 7:9], cube[1, 2, 5:20, 7:9])
        assert np.array_equal(lazy[:, 3, 0:4, 0:4], cube[:, 3, 0:4, 0:4])
        assert np.array_equal(lazy[2, :, 90:96, 70:80], cube[2, :, 90:96, 70:80])

    def test_union_mosaic_and_warp(self, tmp_path: Path) -> None:
        a = _data((1, 40, 50), seed=1)
        a[0, :5, :5] = 0  # a nodata hole the second scene fills
        b = _data((1, 40, 50), seed=2)
        tags = {"TIFFTAG_DATETIME": "2020:01:01 00:00:00"}
        pa = write_geotiff(str(tmp_path / "a.tif"), a, epsg=32632, transform=T, nodata=0, tags=tags)
        tb = (10.0, 0.0, 600000.0, 0.0, -10.0, 5300000.0)
        pb = write_geotiff(str(tmp_path / "b.tif"), b, epsg=32632, transform=tb, nodata=0, tags=tags)
        shifted = (10.0, 0.0, 600200.0, 0.0, -10.0, 5300000.0)
        pc = write_geotiff(str(tmp_path / "c.tif"), b, epsg=32632, transform=shifted, nodata=0, tags=tags)
        scenes = [read_scene(SceneRef(p)) for p in (pa, pb, pc)]
        (plan,), rejects = plan_cubes(scenes, ConvertOptions(out="o", extent="union", duplicates="mosaic"))
        assert not rejects and plan.shape == (1, 1, 40, 70)
        got = LazyCube(plan, RasterCache())[0, 0, 0:40, 0:70]
        expected = np.zeros((40, 70), "uint16")
        expected[:, :50] = a[0]
        expected[:5, :5] = b[0, :5, :5]
        expected[:, 50:] = b[0, :, 30:]
        assert np.array_equal(got, expected)
        off = (10.0, 0.0, 600004.0, 0.0, -10.0, 5300000.0)
        pd = write_geotiff(
            str(tmp_path / "d.tif"), b, epsg=32632, transform=off, nodata=0, tags={"TIFFTAG_DATETIME": "2020:01:02 00:00:00"}
        )
        more = [*scenes[:1], read_scene(SceneRef(pd))]
        plans, rejects = plan_cubes(more, ConvertOptions(out="o", align="reproject", extent="union"))
        assert not rejects
        warped = LazyCube(plans[0], RasterCache())[1, 0, 0:40, 0:51]
        # Nearest: grid pixel i's centre (i + 0.5) falls in source pixel i of a scene shifted 0.4 px east.
        assert np.array_equal(warped[:, :50], b[0]) and not warped[:, 50].any()
        # Through a region: the mosaic is cut from one window, the warped band read window by window, the same pixels.
        region = LazyCube(plan, RasterCache(), region=((0, 40), (0, 70)))
        assert np.array_equal(region[0, 0, 3:20, 10:60], expected[3:20, 10:60])
        region = LazyCube(plans[0], RasterCache(), region=((0, 40), (0, 51)))
        assert np.array_equal(region[1, 0, 0:40, 0:51], warped) and np.array_equal(region[1, 0, 7:9, 40:51], warped[7:9, 40:51])

    def test_fill_value(self) -> None:
        assert fill_value("uint16", None) == 0
        assert fill_value("uint16", -9999.0) == 0  # not representable: fall back to 0
        assert fill_value("int16", -9999.0) == -9999
        assert np.isnan(fill_value("float32", float("nan")))


def _gdal_cache_used() -> int:
    """Bytes in GDAL's block cache, from the libgdal rasterio loaded (found in this process's memory map)."""
    import ctypes

    import rasterio  # noqa: F401  # loads libgdal

    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {line.split()[-1] for line in maps if "libgdal" in line.rsplit("/", 1)[-1]}
    if not paths:
        pytest.skip("libgdal is not mapped from a file this test can load (no /proc/self/maps entry)")
    gdal = ctypes.CDLL(paths.pop())
    gdal.GDALGetCacheUsed64.restype = ctypes.c_int64
    return int(gdal.GDALGetCacheUsed64())


def test_gdal_block_cache_stays_capped_while_datasets_stay_open(tmp_path: Path) -> None:
    """Frame reads run under :data:`~pipelines.rasters.GDAL_CACHE_BYTES`, however many source datasets stay open."""
    from pipelines.rasters import GDAL_CACHE_BYTES

    files = 16  # 16 x 2 MiB of decoded blocks: twice the cap
    paths = [
        write_geotiff(
            str(tmp_path / f"s{i}_B02.tif"),
            _data((1, 1024, 1024), seed=i),
            epsg=32632,
            transform=T,
            tags={"TIFFTAG_DATETIME": f"2020:01:{1 + i:02d} 00:00:00"},
            compress=None,
        )
        for i in range(files)
    ]
    (plan,), _ = plan_cubes([read_scene(SceneRef(p)) for p in paths], ConvertOptions(out="o", tile_size=1024, frame_unit=0))
    assert plan.layout.frame_count == files
    rasters = RasterCache(max_open=files)
    try:
        for index in range(files):
            read_frame(plan, index, rasters)
        assert _gdal_cache_used() <= GDAL_CACHE_BYTES
    finally:
        rasters.close()


class _CountingOpener:
    """A ``rasterio.open(opener=...)`` that counts the bytes GDAL reads from the file."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def __call__(self, path: str, mode: str = "rb") -> io.FileIO:
        opener = self

        class Counted(io.FileIO):
            def read(self, size: int | None = -1) -> bytes:
                data = super().read(size)
                opener.bytes_read += len(data)
                return data

            def readinto(self, buffer: Any) -> int:
                count = super().readinto(buffer) or 0
                opener.bytes_read += count
                return count

        return Counted(path, "r")


def _read_row_of_windows(path: str, expected: np.ndarray[Any, Any], *, cache: int | None, offset: int) -> int:
    """Read four 512² windows along a row of band 1, GDAL's cache at ``cache`` bytes or fitted to each window; return the bytes read."""
    import rasterio
    from rasterio.windows import Window

    from pipelines.rasters import fit_block_cache

    if cache is not None:
        rasterio.env.set_gdal_config("GDAL_CACHEMAX", cache)
    opener = _CountingOpener()
    with rasterio.open(path, opener=opener) as dataset:
        for i in range(4):
            window = Window(offset + 512 * i, 512 + offset, 512, 512)
            if cache is None:
                fit_block_cache(dataset, 1, window)
            data = dataset.read(1, window=window)
            np.testing.assert_array_equal(data, expected[0, 512 + offset : 1024 + offset, offset + 512 * i : offset + 512 * (i + 1)])
    return opener.bytes_read


@pytest.mark.parametrize(
    ("layout", "bands", "creation"),
    [
        ("strips of 2 rows", 1, {}),
        ("strips of 16 rows", 1, {"blockysize": 16}),
        ("tiles of 256", 1, {"tiled": True, "blockxsize": 256, "blockysize": 256}),
        ("tiles of 1024", 1, {"tiled": True, "blockxsize": 1024, "blockysize": 1024}),
        ("pixel-interleaved strips", 3, {"interleave": "pixel"}),
        ("pixel-interleaved tiles of 256", 3, {"interleave": "pixel", "tiled": True, "blockxsize": 256, "blockysize": 256}),
    ],
)
@pytest.mark.parametrize("offset", [0, 100], ids=["on the block grid", "off it"])
def test_block_cache_fits_a_row_of_windows(tmp_path: Path, layout: str, bands: int, creation: dict[str, Any], offset: int) -> None:
    """The fitted cache decodes each source block once along a row of windows, as the 16 MiB maximum does, and no more memory.

    A striped file is the case a cache too small hurts: every window of the
    row decodes the same full-width strips again (the 1 MiB control shows it).
    """
    import rasterio

    from pipelines import rasters

    data = (np.random.default_rng(3).integers(0, 4000, (bands, 2048, 2560)) // 7).astype(np.uint16)
    path = str(tmp_path / "source.tif")
    profile = {"driver": "GTiff", "width": 2560, "height": 2048, "count": bands, "dtype": "uint16", "compress": "deflate"}
    profile.update(crs="EPSG:32632", transform=rasterio.Affine(*T))
    with rasterio.open(path, "w", **profile, **creation) as dst:
        dst.write(data)

    once = _read_row_of_windows(path, data, cache=rasters.GDAL_CACHE_BYTES, offset=offset)
    fitted = _read_row_of_windows(path, data, cache=None, offset=offset)
    assert fitted == once, layout
    assert rasterio.env.get_gdal_config("GDAL_CACHEMAX") == rasters._BlockCache.limit  # the process's cache, set by the fit
    assert rasters._BlockCache.limit <= rasters.GDAL_CACHE_BYTES
    if layout == "tiles of 256":
        assert rasters._BlockCache.limit <= 2 << 20  # what the fixed 16 MiB held beyond this is gone
    if layout.startswith("strips"):
        control = _read_row_of_windows(path, data, cache=rasters.MIN_GDAL_CACHE_BYTES, offset=offset)
        assert control > 2 * once  # strips decoded again


def test_block_cache_only_grows(tmp_path: Path) -> None:
    """A small window after a large one keeps the larger cache, so one thread cannot evict another's blocks."""
    import rasterio
    from rasterio.windows import Window

    from pipelines import rasters

    path = write_geotiff(str(tmp_path / "s.tif"), _data((1, 2048, 2048)), epsg=32632, transform=T, tiled=False)
    with rasterio.open(path) as dataset:
        assert rasters.fit_block_cache(dataset, 1, Window(0, 0, 16, 1)) == rasters.MIN_GDAL_CACHE_BYTES  # the least it sets
        large = rasters.fit_block_cache(dataset, 1, Window(0, 0, 512, 512))
        assert large == 512 * 2048 * 2 * 5 // 4  # 512 rows of full-width strips, and a quarter more
        assert rasters.fit_block_cache(dataset, 1, Window(0, 0, 16, 16)) == large
        assert rasterio.env.get_gdal_config("GDAL_CACHEMAX") == large


def test_the_block_cache_is_given_back_after_a_run(tmp_path: Path) -> None:
    """Frame reads shrink the process's GDAL cache; :func:`~pipelines.rasters.kept_block_cache` restores what the caller had."""
    import rasterio
    from rasterio.windows import Window

    from pipelines import rasters

    path = write_geotiff(str(tmp_path / "s.tif"), _data((1, 256, 256)), epsg=32632, transform=T)
    before = rasterio.env.get_gdal_config("GDAL_CACHEMAX")
    with rasters.kept_block_cache(), rasterio.open(path) as dataset:
        fitted = rasters.fit_block_cache(dataset, 1, Window(0, 0, 64, 64))
        assert rasterio.env.get_gdal_config("GDAL_CACHEMAX") == fitted != before
    assert rasterio.env.get_gdal_config("GDAL_CACHEMAX") == before
    assert rasters._BlockCache.limit == 0  # the next run sets its own


class TestNetworkRetries:
    """A failed transfer of a URL's bytes is tried again: one dropped connection made a scene unreadable (or its frames
    read-failed), and a cube of one date fewer was published under another name."""

    @pytest.fixture
    def served(self, series: tuple[Path, list[str], Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[str]]]:
        from catalog.testing import RangeRequestServer
        from pipelines import rasters

        monkeypatch.setattr(rasters, "NETWORK_RETRY_SECONDS", 0.0)
        monkeypatch.setattr(rasters, "GDAL_HTTP_MAX_RETRY", 0)  # a 503 reaches the caller at once, as after GDAL's own retries
        directory, paths, _ = series
        with RangeRequestServer(directory) as server:
            yield server, [server.url(os.path.basename(p)) for p in paths]

    @pytest.mark.parametrize("fault", [("status", 2), ("drop", 3)], ids=["503", "dropped connection"])
    def test_a_scene_whose_transfers_fail_twice_is_read_on_the_third_try(
        self, served: tuple[Any, list[str]], fault: tuple[str, int]
    ) -> None:
        from catalog.testing import Fault

        server, urls = served
        kind, times = fault
        server.inject(Fault(kind, times=times))
        scene = read_scene(SceneRef(urls[0]))
        assert format_seconds(scene.time) == "2023-01-05T10:30:21Z" and scene.height == 96

    def test_a_scene_whose_transfers_always_fail_says_how_often_it_was_tried(self, served: tuple[Any, list[str]]) -> None:
        from catalog.testing import Fault

        server, urls = served
        server.inject(Fault("status"))
        with pytest.raises(SceneError, match=r"cannot read the raster: .* \(3 tries\)$") as err:
            read_scene(SceneRef(urls[1]))
        assert err.value.reason == "unreadable"
        server.inject(None)
        missing = urls[0].replace("S2_", "missing_")
        with pytest.raises(SceneError, match=r"cannot read the raster") as err:
            read_scene(SceneRef(missing, "2023-01-05"))
        assert "tries" not in str(err.value)  # the store's answer that there is no such file is not asked again
        assert sum(r.path.endswith(missing.rsplit("/", 1)[-1]) for r in server.served) <= 2

    def test_frames_whose_transfers_fail_are_read_again_from_a_fresh_open(
        self, served: tuple[Any, list[str]], series: tuple[Path, list[str], np.ndarray[Any, Any]]
    ) -> None:
        from catalog.testing import Fault
        from pipelines.transforms.frames import FrameKey, _ReadFrameFn
        from rumi_core.writer import frame_samples

        server, urls = served
        _, _, cube = series
        (plan,), _ = plan_cubes([read_scene(SceneRef(u)) for u in urls], ConvertOptions(out="o", tile_size=32))
        read = _ReadFrameFn()
        read.setup()
        import rasterio

        try:
            server.inject(Fault("status", times=2))
            # As a worker that has not read these files before: GDAL asks the server, not what it kept of planning's reads.
            with rasterio.Env(CPL_VSIL_CURL_NON_CACHED="/vsicurl/"):
                frames = dict(read.process((plan.cube_id, (0, 1)), {plan.cube_id: plan}))
        finally:
            read.teardown()
        assert sum(r.status == 503 for r in server.served) == 2
        for index in (0, 1):
            assert np.array_equal(frames[FrameKey(plan.cube_id, index)], frame_samples(cube, plan.layout, index))


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")  # the cut file has lost its transform
def test_a_geotiff_cut_short_in_its_georeferencing_is_unreadable_not_unplaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """GDAL warns of the tags it could not read and opens the file without them: it was a no-geotransform dead letter
    advising to assign one, beside warnings printed apart (several naming no file)."""
    import logging

    import rasterio

    grid = {"epsg": 32633, "transform": (10, 0, 5e5, 0, -10, 4e6)}
    whole = Path(write_geotiff(str(tmp_path / "whole.tif"), np.ones((1, 256, 256), "uint16"), **grid))  # type: ignore[arg-type]
    data = whole.read_bytes()
    cut = tmp_path / "cut.tif"
    for size in range(64, 2048, 4):  # the first length GDAL opens with a georeferencing tag it could not read
        cut.write_bytes(data[:size])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rasterio._env"):
            try:
                with rasterio.open(cut):
                    pass
            except rasterio.errors.RasterioError:
                continue
        if any("IO error during reading" in r.getMessage() for r in caplog.records):
            break
    else:
        pytest.fail("no cut of the file opens with an unread tag")
    caplog.clear()
    with pytest.raises(SceneError) as caught:
        read_scene(SceneRef(str(cut)), time="2024-01-01")
    assert caught.value.reason == "unreadable" and "the file is cut short or damaged" in caught.value.detail
    assert not any("IO error during reading" in r.getMessage() for r in caplog.records)  # said once, in the dead letter
