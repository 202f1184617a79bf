"""Tests for rumi_core.georef (spec: Georeferencing)."""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import affine
import numpy as np
import pyproj
import pytest
import rasterio.crs
import rasterio.transform
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rumi_core
from rumi_core.errors import CRSError, InvalidFileError, InvalidInputError
from rumi_core.georef import UNDEFINED_MATRIX, Georeferencing, epsg_kind

if TYPE_CHECKING:
    from pathlib import Path

UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)


# -- the CRS type comes from the PROJ database -------------------------------------------


@pytest.mark.parametrize(
    ("code", "model", "key"),
    [
        (4326, 2, 2048),  # WGS 84
        (4258, 2, 2048),  # ETRS89
        (4269, 2, 2048),  # NAD83
        (32633, 1, 3072),  # WGS 84 / UTM 33N
        (3857, 1, 3072),  # Pseudo-Mercator
        (2056, 1, 3072),  # CH1903+ / LV95: a projected code below 4326
        (27700, 1, 3072),  # British National Grid
        (3035, 1, 3072),  # LAEA Europe
        (32766, 1, 3072),  # the highest allowed code
    ],
)
def test_crs_type_from_the_registry(code: int, model: int, key: int) -> None:
    assert epsg_kind(code) == model
    g = Georeferencing.from_crs(code, UTM)
    assert (g.epsg, g.model_type, g.crs_key) == (code, model, key)
    assert g.geokeys()[12:] == (key, 0, 1, code)
    assert g.crs == f"EPSG:{code}"


@pytest.mark.parametrize(
    ("code", "match"),
    [
        (4978, "EPSG:4978 is a Geocentric CRS"),
        (4979, "EPSG:4979 is a Geographic 3D CRS"),
        (4937, "EPSG:4937 is a Geographic 3D CRS"),
        (5498, "EPSG:5498 is a Compound CRS"),
        (7415, "EPSG:7415 is a Compound CRS"),
        (5703, "EPSG:5703 is a Vertical CRS"),
        (1023, r"EPSG:1023 is outside 1024\.\.32766"),
        (32767, r"EPSG:32767 is outside 1024\.\.32766"),
        (0, r"EPSG:0 is outside 1024\.\.32766"),
        (-4326, r"EPSG:-4326 is outside 1024\.\.32766"),
        (102039, r"EPSG:102039 is outside 1024\.\.32766"),
        (1025, "EPSG:1025 is not defined in the EPSG registry"),
        (9999, "EPSG:9999 is not defined in the EPSG registry"),
    ],
)
def test_codes_rumi_cannot_store(code: int, match: str) -> None:
    with pytest.raises(CRSError, match=match):
        epsg_kind(code)
    with pytest.raises(CRSError, match=match):
        Georeferencing.from_crs(code, UTM)


# -- accepted CRS and transform inputs ---------------------------------------------------


@pytest.mark.parametrize(
    "crs",
    [
        32633,
        np.int64(32633),
        "EPSG:32633",
        "epsg:32633",
        " EPSG:32633 ",
        "32633",
        rasterio.crs.CRS.from_epsg(32633),
        rasterio.crs.CRS.from_string("EPSG:32633"),
        pyproj.CRS.from_epsg(32633),
        pyproj.CRS.from_user_input("EPSG:32633"),
        pyproj.CRS.from_epsg(32633).to_wkt(),  # WKT that names its EPSG authority
    ],
    ids=["int", "np-int", "EPSG:n", "epsg:n", "spaces", "digits", "rasterio", "rasterio-str", "pyproj", "pyproj-str", "wkt"],
)
def test_crs_inputs(crs: Any) -> None:
    g = Georeferencing.from_crs(crs, UTM)
    assert (g.epsg, g.model_type, g.crs_key) == (32633, 1, 3072)


@pytest.mark.parametrize(
    "transform",
    [
        UTM,
        list(UTM),
        np.array(UTM),
        affine.Affine(*UTM),
        rasterio.transform.Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0),
        (*UTM, 0.0, 0.0, 1.0),
    ],
    ids=["tuple", "list", "array", "affine", "rasterio", "nine"],
)
def test_transform_inputs(transform: Any) -> None:
    g = Georeferencing.from_crs("EPSG:32633", transform)
    assert g.transform == UTM


def test_a_transform_generator_is_read_once() -> None:
    """A one-shot iterable was consumed by the GDAL-order check and then refused as holding no coefficients."""
    assert Georeferencing.from_crs("EPSG:32633", (v for v in UTM)).transform == UTM


@pytest.mark.parametrize(
    ("crs", "transform", "error", "match"),
    [
        (4326, None, InvalidInputError, "crs and transform must be given together"),
        (None, UTM, InvalidInputError, "crs and transform must be given together"),
        (4326, UTM[:5], InvalidInputError, "six affine coefficients in rasterio order, got 5"),
        (4326, (*UTM, 1.0, 0.0, 1.0), InvalidInputError, r"a nine-value affine transform must end in \(0, 0, 1\)"),
        (4326, (1.0, 0.0, float("inf"), 0.0, -1.0, 0.0), InvalidInputError, "transform coefficients must be finite"),
        (32633, affine.Affine(*UTM).to_gdal(), InvalidInputError, r"looks like GDAL's order .* affine.Affine.from_gdal"),
        (32633, list(affine.Affine(*UTM).to_gdal()), InvalidInputError, r"looks like GDAL's order"),
        (32633, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), InvalidInputError, "is singular: its pixels have no area"),
        (32633, (10.0, 20.0, 0.0, 1.0, 2.0, 0.0), InvalidInputError, "is singular"),
        (32633, "10 0 500000 0 -10 4000000", InvalidInputError, "transform takes six numbers in rasterio order or an affine.Affine"),
        (32633, 10.0, InvalidInputError, "transform takes six numbers"),
        (32633, (10, 0, "x", 0, -10, 0), InvalidInputError, "transform takes six numbers"),
        (True, UTM, CRSError, "crs must be an EPSG code or a CRS, got True"),
        (4326.0, UTM, CRSError, "crs must be an EPSG code, 'EPSG:n' or a CRS object, got float"),
        ("not a crs at all", UTM, CRSError, "'not a crs at all' is not a CRS"),
        ("+proj=ortho +lat_0=10 +lon_0=20 +datum=WGS84", UTM, CRSError, "has no EPSG code"),
        (rasterio.crs.CRS.from_proj4("+proj=ortho +lat_0=10 +lon_0=20 +datum=WGS84"), UTM, CRSError, "has no EPSG code"),
        (pyproj.CRS.from_proj4("+proj=ortho +lat_0=10 +lon_0=20 +datum=WGS84"), UTM, CRSError, "has no EPSG code"),
        (rasterio.crs.CRS.from_epsg(4978), UTM, CRSError, "EPSG:4978 is a Geocentric CRS"),
        (pyproj.CRS.from_epsg(5498), UTM, CRSError, "EPSG:5498 is a Compound CRS"),
    ],
)
def test_refused_inputs(crs: Any, transform: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Georeferencing.from_crs(crs, transform)


def test_custom_wkt_from_rasterio_has_no_epsg_code() -> None:
    wkt = (
        'PROJCS["Europa equirectangular",GEOGCS["Europa",DATUM["Europa",SPHEROID["Europa",1560800,0]],'
        'PRIMEM["Reference_Meridian",0],UNIT["degree",0.0174532925199433]],PROJECTION["Equirectangular"],'
        'PARAMETER["standard_parallel_1",0],PARAMETER["central_meridian",0],PARAMETER["false_easting",0],'
        'PARAMETER["false_northing",0],UNIT["metre",1]]'
    )
    crs = rasterio.crs.CRS.from_wkt(wkt)
    assert crs.to_epsg() is None
    with pytest.raises(CRSError, match="rumi stores a CRS only as an EPSG code"):
        Georeferencing.from_crs(crs, (282.0, 0.0, -1e6, 0.0, -282.0, 1e6))


# -- the two tags ------------------------------------------------------------------------


def test_matrix_and_geokeys_layout() -> None:
    g = Georeferencing.from_crs(32633, (10.0, 0.5, 500000.0, 0.25, -10.0, 4000000.0))
    assert g.matrix() == (
        10.0, 0.5, 0.0, 500000.0,
        0.25, -10.0, 0.0, 4000000.0,
        0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 1.0,
    )  # fmt: skip
    assert g.geokeys() == (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633)
    assert Georeferencing.from_tags(*g.to_tags()) == g


def test_pixel_is_point() -> None:
    g = Georeferencing.from_crs(4326, (0.1, 0, -180, 0, -0.1, 90), pixel_is_point=True)
    assert g.raster_type == 2
    assert g.geokeys() == (1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 2, 2048, 0, 1, 4326)
    assert Georeferencing.from_tags(*g.to_tags()) == g
    u = Georeferencing.from_crs(None, None, pixel_is_point=True)
    assert u.geokeys()[8:12] == (1025, 0, 1, 2)


def test_undefined_georeferencing() -> None:
    g = Georeferencing.from_crs(None, None)
    assert g == Georeferencing.undefined()
    assert not g.is_georeferenced
    assert g.crs is None
    assert g.matrix() == UNDEFINED_MATRIX == (1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1.0)
    assert g.geokeys() == (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 0)
    assert Georeferencing.from_tags(*g.to_tags()) == g


def _geo_block(path: Path) -> bytes:
    """The 160 bytes of ModelTransformationTag and GeoKeyDirectoryTag: the last external values before the frames."""
    base = rumi_core.info(path).base_frame_offset
    return path.read_bytes()[base - 160 : base]


@pytest.mark.parametrize("pixel_is_point", [False, True])
def test_undefined_block_bytes_in_a_file(tmp_path: Path, pixel_is_point: bool) -> None:
    path = tmp_path / "x.rumi"
    rumi_core.write(path, np.zeros((1, 3, 3), "uint8"), bands=["a"], times=["2020-01-01"], pixel_is_point=pixel_is_point)
    raster = 2 if pixel_is_point else 1
    expected = struct.pack("<16d", 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1) + struct.pack(
        "<16H", 1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, raster, 2048, 0, 1, 0
    )
    assert len(expected) == 160
    assert _geo_block(path) == expected


@pytest.mark.parametrize("bands", [1, 7])  # B >= 5 puts BitsPerSample and SampleFormat in the external area too
def test_georeferenced_block_bytes_in_a_file(tmp_path: Path, bands: int) -> None:
    path = tmp_path / "x.rumi"
    t = (20.0, 0.0, 600000.0, 0.0, -20.0, 5000000.0)
    rumi_core.write(
        path, np.zeros((bands, 3, 3), "uint8"), bands=[str(i) for i in range(bands)], times=["2020-01-01"], crs="EPSG:32633", transform=t
    )
    expected = struct.pack("<16d", 20, 0, 0, 600000, 0, -20, 0, 5000000, 0, 0, 0, 0, 0, 0, 0, 1) + struct.pack(
        "<16H", 1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633
    )
    assert _geo_block(path) == expected
    assert rumi_core.info(path).georef == Georeferencing(32633, 1, 1, t)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(deadline=None, max_examples=200)
@given(
    code=st.sampled_from([4326, 4258, 32633, 3857, 2056, 27700]),
    coefficients=st.tuples(finite, finite, finite, finite, finite, finite),
    point=st.booleans(),
)
def test_tags_round_trip(code: int, coefficients: tuple[float, ...], point: bool) -> None:
    a, b, _, d, e, _ = (Fraction(v) for v in coefficients)
    assume(a * e != b * d)  # a singular transform is refused (test_refused_inputs)
    g = Georeferencing.from_crs(code, affine.Affine(*coefficients), pixel_is_point=point)  # an Affine: never GDAL's order
    matrix, keys = g.to_tags()
    assert len(matrix) == 16 and len(keys) == 16
    again = Georeferencing.from_tags(matrix, keys)
    assert again == g
    assert struct.pack("<6d", *again.transform) == struct.pack("<6d", *coefficients)  # -0.0 stays -0.0


# -- reading the tags checks every rule --------------------------------------------------


def _tags(**changes: Any) -> tuple[tuple[float, ...], tuple[int, ...]]:
    matrix, keys = Georeferencing.from_crs(32633, UTM).to_tags()
    m, k = list(matrix), list(keys)
    for index, value in changes.get("matrix", {}).items():
        m[index] = value
    for index, value in changes.get("keys", {}).items():
        k[index] = value
    return tuple(m), tuple(k)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"keys": {0: 2}}, r"GeoKeyDirectoryTag header is \(2, 1, 0, 3\), expected \(1, 1, 0, 3\)"),
        ({"keys": {3: 4}}, "GeoKeyDirectoryTag header is"),
        ({"keys": {4: 1025}}, "GeoKeyDirectoryTag keys are"),
        ({"keys": {13: 1}}, "GeoKeyDirectoryTag keys are"),
        ({"keys": {11: 3}}, "GTRasterTypeGeoKey is 3, expected 1 or 2"),
        ({"keys": {7: 3}}, "GTModelTypeGeoKey is 3, expected 0, 1 or 2"),
        ({"keys": {12: 2048}}, "GTModelTypeGeoKey 1 comes with key 2048, expected 3072"),
        ({"keys": {7: 2, 12: 2048}}, "EPSG:32633 is projected in the EPSG registry, the file says otherwise"),
        ({"keys": {15: 4978}}, "EPSG:4978 is a Geocentric CRS"),
        ({"keys": {15: 1000}}, r"outside 1024\.\.32766"),
        ({"keys": {7: 0, 12: 2048, 15: 32633}}, "undefined georeferencing stores key 2048 = 32633, expected 2048 = 0"),
        ({"keys": {7: 0, 12: 2048, 15: 0}}, "undefined georeferencing has a matrix other than the defined one"),
        ({"matrix": {8: 1.0}}, "ModelTransformationTag is not an affine matrix"),
        ({"matrix": {10: 1.0}}, "ModelTransformationTag is not an affine matrix"),
        ({"matrix": {2: 0.5}}, "ModelTransformationTag is not an affine matrix"),
        ({"matrix": {15: 2.0}}, "ModelTransformationTag is not an affine matrix"),
    ],
)
def test_from_tags_rejects(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidFileError, match=match):
        Georeferencing.from_tags(*_tags(**changes))


def test_undefined_geokeys_need_the_defined_matrix_only() -> None:
    matrix = UNDEFINED_MATRIX
    keys = (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 2, 2048, 0, 1, 0)
    assert Georeferencing.from_tags(matrix, keys) == Georeferencing.undefined(pixel_is_point=True)


def test_an_affine_is_never_taken_for_gdals_order() -> None:
    """As rasterio's guard_transform: only a plain sequence is refused for looking like GDAL's order, so a grid turned
    a quarter with its x origin at 0 is written from an Affine, and the pipeline (which passes one) never refuses it."""
    quarter = affine.Affine(0.0, 10.0, 0.0, 10.0, 0.0, -5.0)
    assert Georeferencing.from_crs(32633, quarter).transform == tuple(quarter)[:6]
    with pytest.raises(InvalidInputError, match="looks like GDAL's order"):
        Georeferencing.from_crs(32633, tuple(quarter)[:6])
