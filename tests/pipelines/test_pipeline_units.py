"""Plain-function tests of the pure modules: bands, times, grids, plan helpers, options, keys."""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.errors import OptionError
from pipelines.options import ConvertOptions, parse_compression
from pipelines.planning.bands import band_name, band_token, natural_key, stack_id, unique_band_texts
from pipelines.planning.lattice import Extent, Lattice, is_north_up, snap_extent
from pipelines.planning.plan import cube_name, inputs_hash, sample_indices
from pipelines.planning.timestamps import (
    compact,
    period_label,
    resolve_time,
    suggest_time_pattern,
    time_from_pattern,
    time_from_tags,
)
from pipelines.transforms.frames import FrameKey, FrameKeyCoder
from rumi_core.times import format_seconds, parse_time


class TestBands:
    @pytest.mark.parametrize(
        ("href", "token"),
        [
            ("/a/T33UUU_20170216T102101_B04.jp2", "B04"),
            ("LE70350322008118EDC00_b3.tif", "b3"),
            ("l8_B8A.tif", "B8A"),
            ("l8_BQA.tif", "BQA"),
            ("https://h/x/scene-B11.tif?sig=1", "B11"),
            ("LE70350322008118EDC00_fmask.tif", None),
            ("plain.tif", None),
            # Sentinel-2 Level-2A SAFE: the pixel size follows the token.
            ("IMG_DATA/R10m/T33UUU_20230612T102031_B02_10m.jp2", "B02"),
            ("IMG_DATA/R20m/T33UUU_20230612T102031_B8A_20m.jp2", "B8A"),
            ("IMG_DATA/R20m/T33UUU_20230612T102031_SCL_20m.jp2", None),
            ("image_2023_12m.tif", None),
            ("LE07_L1TP_035032_20080427_20200914_02_T1_B6_VCID_2.TIF", "B6_VCID_2"),  # Landsat 7's low-gain thermal band
            # Earth Search's Sentinel-2 COGs: the token is the whole stem.
            ("S2A_33UUU_20230612_0_L2A/B8A.tif", "B8A"),
            ("S2A_33UUU_20230612_0_L2A/SCL.tif", None),
            ("AB02.tif", None),
            # USGS ESPA's Landsat Collection 1 products; their per-band angle layers are no band.
            ("LC08_L1TP_033033_20170506_20170515_01_T1_sr_band1.tif", "band1"),
            ("LC08_L1TP_033033_20170506_20170515_01_T1_bt_band10.tif", "band10"),
            ("scene_band_2.tif", "band_2"),
            ("LC08_L1TP_033033_20170506_20170515_01_T1_solar_zenith_band4.tif", None),
            ("LC08_L1TP_033033_20170506_20170515_01_T1_sensor_azimuth_band4.tif", None),
            ("broadband1.tif", None),
        ],
    )
    def test_band_token(self, href: str, token: str | None) -> None:
        assert band_token(href) == token

    def test_stack_id_drops_token_and_keeps_directory(self) -> None:
        assert stack_id("/d/2020/x_B02.tif") == stack_id("/d/2020/x_B03.tif") == "/d/2020/x"
        assert stack_id("/d/2021/x_B02.tif") != stack_id("/d/2020/x_B02.tif")
        assert stack_id("/d/y.tif") == "/d/y"
        assert stack_id("/R10m/T33UUU_20230612T102031_B02_10m.jp2") == stack_id("/R10m/T33UUU_20230612T102031_B08_10m.jp2")
        assert stack_id("/R10m/T33UUU_20230612T102031_B02_10m.jp2") == "/R10m/T33UUU_20230612T102031"

    def test_natural_order(self) -> None:
        assert sorted(["B11", "B8A", "B02", "B8", "BQA", "B1"], key=natural_key) == ["B1", "B02", "B8", "B8A", "B11", "BQA"]

    def test_band_name_precedence(self) -> None:
        assert band_name(description="Red", hint="red", token="B04", index=1) == "Red"
        assert band_name(description=" ", hint="red", token="B04", index=1) == "red"
        assert band_name(description=None, hint=None, token="B04", index=1) == "B04"
        assert band_name(description=None, hint=None, token=None, index=3) == "band 3"

    def test_unique_band_texts(self) -> None:
        assert unique_band_texts(["a", "a", "b", "a"]) == ("a", "a (band 2)", "b", "a (band 4)")


class TestTimes:
    def test_parse_formats(self) -> None:
        assert format_seconds(parse_time("2021-06-01")) == "2021-06-01T00:00:00Z"
        assert format_seconds(parse_time("20210601T103021")) == "2021-06-01T10:30:21Z"
        assert format_seconds(parse_time("2021:06:01 10:30:21")) == "2021-06-01T10:30:21Z"
        assert format_seconds(parse_time("2021-06-01T10:30:21.999Z")) == "2021-06-01T10:30:21Z"
        assert format_seconds(parse_time("2021-06-01T12:30:21+02:00")) == "2021-06-01T10:30:21Z"

    def test_parse_rejects_garbage(self) -> None:
        with pytest.raises(ValueError, match="'yesterday' is no time: ISO 8601"):
            parse_time("yesterday")

    def test_a_bad_time_tag_is_named(self) -> None:
        """A malformed tag said only "'2023:13:45 99:00:00' is not an ISO 8601 time", naming neither tag nor file."""
        with pytest.raises(ValueError, match=r"^its TIFFTAG_DATETIME tag: '2023:13:45 99:00:00' is no time: .*TIFF's YYYY:MM:DD HH:MM:SS$"):
            time_from_tags({"TIFFTAG_DATETIME": "2023:13:45 99:00:00"})
        with pytest.raises(ValueError, match=r"HH:MM:SS; --time \(or a --time-pattern its name matches\) dates the file instead$"):
            resolve_time(href="x.tif", stac=None, tags={"TIFFTAG_DATETIME": "2023:13:45 99:00:00"}, pattern=None, fallback=None)

    def test_a_time_tag_with_a_utc_offset_is_taken_at_its_offset(self) -> None:
        """TIFF's DateTime has no zone; a writer that appends one meant it, and the colon form dropped it (2 h off here)."""
        assert format_seconds(time_from_tags({"TIFFTAG_DATETIME": "2024:05:01 10:00:00+02:00"}) or 0) == "2024-05-01T08:00:00Z"
        assert format_seconds(time_from_tags({"TIFFTAG_DATETIME": "2024:05:01 10:00:00.75-05:00"}) or 0) == "2024-05-01T15:00:00Z"
        with pytest.raises(ValueError, match="is no time"):
            time_from_tags({"TIFFTAG_DATETIME": "2024:05:01 10:00:00 o'clock"})

    def test_pattern_year_doy(self) -> None:
        pattern = r"L[ETC]\d{7}(?P<year>\d{4})(?P<doy>\d{3})"
        found = time_from_pattern(pattern, "/x/LE70350322008118EDC00/LE70350322008118EDC00_b3.tif")
        assert format_seconds(found or 0) == "2008-04-27T00:00:00Z"
        assert time_from_pattern(pattern, "/x/other.tif") is None
        with pytest.raises(ValueError, match="day of year 400"):
            time_from_pattern(pattern, "LE70350322008400EDC00")

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            ("s_2019_01_01_25", "hour must be in 0..23"),
            ("s_2019_01_01_23_60", "minute must be in 0..59"),
            ("s_2019_01_01_23_59_61", "second must be in 0..59"),
            ("s_2019_02_29_00", "day is out of range for month"),
        ],
    )
    def test_pattern_clock_fields_are_checked_not_rolled_over(self, name: str, message: str) -> None:
        """Hour 25 is a bad time, not 01:00 the next day."""
        pattern = r"_(?P<year>\d{4})_(?P<month>\d\d)_(?P<day>\d\d)_(?P<hour>\d\d)(?:_(?P<minute>\d\d))?(?:_(?P<second>\d\d))?"
        with pytest.raises(ValueError, match=f"holds no valid time: {message}"):
            time_from_pattern(pattern, f"/x/{name}.tif")
        assert format_seconds(time_from_pattern(pattern, "/x/s_2019_01_01_23_59_58.tif") or 0) == "2019-01-01T23:59:58Z"

    def test_pattern_date_group_and_missing_year(self) -> None:
        assert format_seconds(time_from_pattern(r"_(?P<date>\d{8}T\d{6})_", "S2_20230105T103021_B02.tif") or 0) == "2023-01-05T10:30:21Z"
        with pytest.raises(ValueError, match="has no group year"):
            time_from_pattern(r"(?P<month>\d\d)", "x_05.tif")

    @pytest.mark.parametrize(
        ("href", "expected"),
        [
            ("/archive/ndvi_20230612.tif", "2023-06-12T00:00:00Z"),
            ("/archive/2022/ndvi_2023-06-12_v2.tif", "2023-06-12T00:00:00Z"),
            ("gs://bucket/x/scene_20230612T103021_b4.tif", "2023-06-12T10:30:21Z"),
            ("/archive/orbit_123456789_20230612.tif", "2023-06-12T00:00:00Z"),  # not the first 8 of 9 digits
            ("/archive/20230612/ndvi_42.tif", None),  # a directory's date is the user's to choose
            ("/archive/tile_99999999.tif", None),  # 8 digits, no valid date
            ("/archive/tile_18991231.tif", None),  # a valid date, but not one of an Earth observation
            ("/archive/mosaic_2021-07.tif", "2021-07-01T00:00:00Z"),  # a month
            ("/archive/composite_2021_v2.tif", "2021-01-01T00:00:00Z"),  # a year
            ("/archive/tile_4321.tif", None),  # four digits, but no year of an Earth observation
        ],
    )
    def test_a_date_in_the_file_name_is_offered_as_a_pattern_that_reads_it(self, href: str, expected: str | None) -> None:
        pattern = suggest_time_pattern(href)
        if expected is None:
            assert pattern is None
            return
        assert pattern is not None and "\\" not in pattern  # no backslash to lose between JSON and a shell
        assert format_seconds(resolve_time(href=href, stac=None, tags={}, pattern=pattern, fallback=None) or 0) == expected

    def test_tags_skip_gdal_placeholder(self) -> None:
        assert time_from_tags({"ACQUISITIONDATETIME": "1970-01-01 00:00:00"}) is None
        assert format_seconds(time_from_tags({"TIFFTAG_DATETIME": "2015:08:04 16:19:21"}) or 0) == "2015-08-04T16:19:21Z"

    def test_precedence(self) -> None:
        tags = {"TIFFTAG_DATETIME": "2001:01:01 00:00:00"}
        kw = {"href": "x_20020202.tif", "tags": tags, "fallback": "2003-03-03"}
        assert format_seconds(resolve_time(stac="2000-01-01T00:00:00Z", pattern=r"_(?P<date>\d{8})", **kw) or 0).startswith("2000")  # type: ignore[arg-type]
        assert format_seconds(resolve_time(stac=None, pattern=r"_(?P<date>\d{8})", **kw) or 0).startswith("2002")  # type: ignore[arg-type]
        assert format_seconds(resolve_time(stac=None, pattern=None, **kw) or 0).startswith("2001")  # type: ignore[arg-type]
        assert format_seconds(resolve_time(stac=None, pattern=None, href="x", tags={}, fallback="2003-03-03") or 0).startswith("2003")
        assert resolve_time(stac=None, pattern=None, href="x", tags={}, fallback=None) is None
        junk = {"TIFFTAG_DATETIME": "garbage:99:99 99:99:99"}
        with pytest.raises(ValueError, match="garbage"):
            resolve_time(stac=None, pattern=None, href="x", tags=junk, fallback=None)
        assert format_seconds(resolve_time(stac=None, pattern=None, href="x", tags=junk, fallback="2003-03-03") or 0).startswith("2003")

    @pytest.mark.parametrize(("period", "label"), [("none", ""), ("P1M", "2021-05"), ("P3M", "2021-Q2"), ("P1Y", "2021")])
    def test_period_label(self, period: str, label: str) -> None:
        assert period_label(parse_time("2021-05-17T10:00:00Z"), period) == label

    def test_period_label_rejects_unknown(self) -> None:
        with pytest.raises(ValueError, match="unknown cube period 'P2W'"):
            period_label(0, "P2W")

    def test_compact(self) -> None:
        assert compact(parse_time("2021-05-17")) == "20210517"
        assert compact(parse_time("2021-05-17T10:00:01")) == "20210517T100001"


class TestGrids:
    def test_alignment_and_extent(self) -> None:
        t = (30.0, 0.0, 336375.0, 0.0, -30.0, 4462425.0)
        grid = Lattice.from_transform(32613, t)
        assert grid.alignment == (0.5, 0.5)
        extent = grid.extent(t, 61, 61)
        assert grid.transform(extent) == t

    def test_north_up(self) -> None:
        assert is_north_up((10, 0, 0, 0, -10, 0))
        assert not is_north_up((10, 1, 0, 0, -10, 0))
        assert not is_north_up((10, 0, 0, 0, 10, 0))

    @given(
        col=st.integers(-10_000, 10_000),
        row=st.integers(-10_000, 10_000),
        width=st.integers(1, 500),
        height=st.integers(1, 500),
        fx=st.sampled_from([0.0, 0.25, 0.5]),
    )
    def test_extent_round_trip(self, col: int, row: int, width: int, height: int, fx: float) -> None:
        grid = Lattice(32633, 10.0, 10.0, (fx, 0.0))
        extent = Extent(col, row, width, height)
        assert grid.extent(grid.transform(extent), height, width) == extent

    @given(shift=st.floats(0.01, 0.99), width=st.integers(1, 300), height=st.integers(1, 300))
    def test_snap_covers_the_raster(self, shift: float, width: int, height: int) -> None:
        grid = Lattice(32633, 10.0, 10.0, (0.0, 0.0))
        t = (10.0, 0.0, 500000.0 + 10 * shift, 0.0, -10.0, 4000000.0 - 10 * shift)
        e = snap_extent(grid, t, height, width)
        left, top = grid.transform(e)[2], grid.transform(e)[5]
        assert left <= t[2] and top >= t[5]
        assert left + 10 * e.width >= t[2] + 10 * width
        assert top - 10 * e.height <= t[5] - 10 * height
        assert e.width == width + 1 and e.height == height + 1

    def test_union(self) -> None:
        assert Extent(0, 0, 2, 2).union(Extent(1, -1, 3, 1)) == Extent(0, -1, 4, 3)
        assert Extent.union_all([Extent(5, 5, 1, 1), Extent(0, 0, 1, 1)]) == Extent(0, 0, 6, 6)

    def test_slug(self) -> None:
        assert Lattice(4326, 0.25, 0.25, (0.0, 0.0)).slug() == "EPSG4326_r0p25"
        assert Lattice(32633, 10.0, 20.0, (0.0, 0.0)).slug() == "EPSG32633_r10x20"


class TestPlanHelpers:
    @given(count=st.integers(0, 5000), k=st.integers(0, 20))
    def test_sample_indices(self, count: int, k: int) -> None:
        found = sample_indices(count, k)
        assert len(found) == min(count, k)
        assert list(found) == sorted(set(found))
        assert all(0 <= i < count for i in found)
        if count and k >= 2:
            assert found[0] == 0 and found[-1] == count - 1

    def test_inputs_hash_ignores_order(self) -> None:
        assert inputs_hash(["a", "b"]) == inputs_hash(["b", "a"]) != inputs_hash(["a"])

    def test_cube_name_single_time(self) -> None:
        name = cube_name(grid_slug="EPSG4326_r0p5", transform=(0.5, 0, -10.25, 0, -0.5, 50), times=[86400], hrefs=["x"])
        assert name.startswith("EPSG4326_r0p5_x-10p25_y50_19700102_")


class TestOptions:
    def test_defaults(self, tmp_path: object) -> None:
        o = ConvertOptions(out="out")
        assert (o.frame_unit, o.compression, o.cube_period, o.align, o.duplicates, o.extent) == (
            "auto",
            "auto",
            "none",
            "fail",
            "error",
            "separate",
        )

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"tile_size": 0}, "--tile-size: expected an integer"),
            ({"frame_unit": "10"}, "--frame-unit: expected auto or a frame unit"),
            ({"cube_period": "P2W"}, "--cube-period: expected one of none, P1M"),
            ({"align": "warp"}, "--align: expected one of fail, reproject"),
            ({"duplicates": "any"}, "--duplicates: expected one of error"),
            ({"time": "soon"}, "--time: expected an ISO 8601 time"),
            ({"time_pattern": "("}, "--time-pattern: not a regular expression"),
            ({"time_pattern": r"\d+"}, "--time-pattern: the pattern needs a named group year, date or time, e.g."),
            ({"time_pattern": r"(?P<foo>\d+)"}, "--time-pattern: the pattern needs a named group year, date or time (it names foo)"),
            ({"time": "2021-06-01T10:30:00.5Z"}, "--time: '2021-06-01T10:30:00.5Z' has a fraction of a second; rumi stores whole seconds"),
            ({"compression": "lzma"}, "--compression: unknown codec name 'lzma'"),
            ({"compression": "{bad"}, "--compression: not valid JSON"),
            ({"out": ""}, "--out: an output directory is required"),
            (
                {"catalog": "stac", "write_catalog": False},
                "--catalog: --catalog names where to write the catalogue, and --no-catalog writes none",
            ),
            ({"out": "gs://b/run#1"}, "--out: 'gs://b/run#1' holds '#', '?', ';', '%' or a control character"),
            ({"catalog": "cat?x"}, "--catalog: 'cat?x' holds '#', '?', ';', '%' or a control character"),
            # pystac wrote the documents of a catalogue "cat;c=d" into ".cat" (";c=d" read as parameters), and of
            # "o\nx" into "ox", outside --out; "%20" read over HTTP is a space, another folder.
            ({"catalog": "cat&a+b;c=d"}, "--catalog: 'cat&a+b;c=d' holds '#', '?', ';', '%' or a control character"),
            ({"out": "o\nx"}, "--out: 'o\\nx' holds '#', '?', ';', '%' or a control character"),
            ({"out": "xo%20x"}, "--out: 'xo%20x' holds '#', '?', ';', '%' or a control character"),
        ],
    )
    def test_bad_values(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(OptionError, match=re.escape(message)):
            ConvertOptions(**{"out": "out", **kwargs})  # type: ignore[arg-type]

    def test_compression_is_canonical(self) -> None:
        assert parse_compression("openzl") == parse_compression('{"configuration": {"graph": "compress"}, "name": "openzl"}')
        assert ConvertOptions(out="o", frame_unit="4").frame_unit == 4


class TestFrameKeyCoder:
    @given(cube_id=st.text(min_size=1, max_size=40), index=st.integers(0, 2**40))
    def test_round_trip_and_determinism(self, cube_id: str, index: int) -> None:
        coder = FrameKeyCoder()
        key = FrameKey(cube_id, index)
        assert coder.decode(coder.encode(key)) == key
        assert coder.encode(FrameKey(cube_id, index)) == coder.encode(key)
        assert coder.is_deterministic()

    def test_registered_and_picklable(self) -> None:
        from apache_beam.coders.typecoders import registry

        assert isinstance(registry.get_coder(FrameKey), FrameKeyCoder)
        assert pickle.loads(pickle.dumps(FrameKey("c", 1))) == FrameKey("c", 1)

    def test_negative_index(self) -> None:
        with pytest.raises(ValueError, match="non-negative"):
            FrameKey("c", -1)
