"""The pure planning algorithm: stacking, series, alignment, extents, periods, duplicates (no Beam; files only to resolve links)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pipelines.options import ConvertOptions
from pipelines.planning.grouping import MIN_FRAME_SAMPLES, name_quantities, plan_cubes, smallest_tile_size, stack_scenes
from pipelines.testing import make_scene
from rumi_core.times import format_seconds, parse_time

if TYPE_CHECKING:
    from pathlib import Path

T = (10.0, 0.0, 600000.0, 0.0, -10.0, 5300000.0)


def opts(**kwargs: Any) -> ConvertOptions:
    return ConvertOptions(out="out", tile_size=32, **kwargs)


def bands_of(day: str, *, stack: str = "/s/x", tokens: tuple[str, ...] = ("B04", "B02", "B03"), **kw: Any) -> list[Any]:
    return [make_scene(f"{stack}_{day}_{t}.tif", day, bands=(t,), stack=f"{stack}_{day}", **kw) for t in tokens]


def test_single_band_files_stack_into_one_acquisition_in_band_order() -> None:
    acqs, rejects = stack_scenes(bands_of("2023-01-05"))
    assert not rejects
    assert [a.names for a in acqs] == [("B02", "B03", "B04")]


def test_one_cube_sorted_by_time() -> None:
    scenes = bands_of("2023-03-01") + bands_of("2023-01-01") + bands_of("2023-02-01")
    plans, rejects = plan_cubes(scenes, opts())
    assert not rejects
    (plan,) = plans
    assert plan.shape == (3, 3, 64, 64)
    assert [format_seconds(t)[:10] for t in plan.times] == ["2023-01-01", "2023-02-01", "2023-03-01"]
    assert [b.name for b in plan.bands] == ["B02", "B03", "B04"]
    assert plan.sources[1][2][0].href.endswith("2023-02-01_B04.tif")
    assert plan.cube_id.startswith("EPSG32632_r10_x600000_y5300000_20230101_20230301_")
    assert plan.layout.frame_count == 3 * 3 * 4


def test_planning_is_order_independent() -> None:
    scenes = bands_of("2023-03-01") + bands_of("2023-01-01")
    assert plan_cubes(scenes, opts()) == plan_cubes(list(reversed(scenes)), opts())


@pytest.mark.parametrize(("period", "count"), [("none", 1), ("P1Y", 2), ("P3M", 3), ("P1M", 4)])
def test_periods(period: str, count: int) -> None:
    days = ["2022-12-30", "2023-01-05", "2023-01-20", "2023-02-10", "2023-05-01"]
    scenes = [s for d in days for s in bands_of(d)]
    plans, _ = plan_cubes(scenes, opts(cube_period=period))
    assert len(plans) == count
    assert sum(len(p.times) for p in plans) == len(days)


def test_grids_crs_and_resolution_make_separate_cubes() -> None:
    scenes = [
        make_scene("/a.tif", "2023-01-01"),
        make_scene("/b.tif", "2023-01-01", epsg=32633),
        make_scene("/c.tif", "2023-01-01", transform=(20.0, 0, 600000.0, 0, -20.0, 5300000.0)),
    ]
    plans, rejects = plan_cubes(scenes, opts())
    assert len(plans) == 3 and not rejects


def test_dtype_mismatch_inside_a_stack() -> None:
    scenes = bands_of("2023-01-01", tokens=("B02", "B03"))
    scenes.append(make_scene("/s/x_2023-01-01_B04.tif", "2023-01-01", bands=("B04",), stack="/s/x_2023-01-01", dtype="int16"))
    plans, rejects = plan_cubes(scenes, opts())
    assert [r.reason for r in rejects] == ["dtype-mismatch"]
    assert rejects[0].href.endswith("B04.tif")
    assert [b.name for b in plans[0].bands] == ["B02", "B03"]


def test_dtype_mismatch_between_acquisitions_of_one_series() -> None:
    scenes = [make_scene(f"/d{i}.tif", f"2023-01-0{i}") for i in range(1, 5)]
    scenes.append(make_scene("/odd.tif", "2023-01-09", dtype="int16"))
    plans, rejects = plan_cubes(scenes, opts())
    assert [(r.href, r.reason) for r in rejects] == [("/odd.tif", "dtype-mismatch")]
    assert plans[0].shape[0] == 4


def test_series_of_other_places_never_compete_on_dtype_nodata_or_bands() -> None:
    """The mismatch rules find the odd acquisitions of one place: a series 10 km east, on the same CRS and pixel size,
    with no nodata or one band fewer, is a cube of its own (it was made dead letters of the larger series)."""
    east = (10.0, 0.0, 610000.0, 0.0, -10.0, 5300000.0)
    scenes = [make_scene(f"/a{i}.tif", f"2023-01-0{i}") for i in range(1, 5)]
    scenes += [make_scene(f"/b{i}.tif", f"2023-01-0{i}", transform=east, nodata=None) for i in range(1, 3)]
    scenes += [s for i in (1, 2) for s in bands_of(f"2023-02-0{i}", stack="/c/x", transform=east, tokens=("B02", "B03"))]
    scenes += [s for i in (3, 4, 5) for s in bands_of(f"2023-02-0{i}", stack="/c/x")]
    plans, rejects = plan_cubes(scenes, opts())
    assert rejects == []
    assert sorted((p.transform[2], p.shape[:2], p.nodata) for p in plans) == [
        (600000.0, (3, 3), 0.0),
        (600000.0, (4, 1), 0.0),
        (610000.0, (2, 1), None),
        (610000.0, (2, 2), 0.0),
    ]
    # Overlapping the first series by one pixel is the same place: the odd ones out are refused again.
    near = (10.0, 0.0, 600630.0, 0.0, -10.0, 5300000.0)
    odd = [make_scene(f"/n{i}.tif", f"2023-01-1{i}", transform=near, nodata=None) for i in range(1, 3)]
    _, rejects = plan_cubes([s for s in scenes if not s.href.startswith("/b")] + odd, opts())
    assert sorted((r.href, r.reason) for r in rejects) == [("/n1.tif", "dtype-mismatch"), ("/n2.tif", "dtype-mismatch")]


def test_a_scene_with_a_band_file_that_could_not_be_read_is_left_out_whole() -> None:
    """Alone in its period (the first scene of a month, in a monthly run), its other bands made a cube short of the band:
    published, and replaced once the file was mended. Files of other scenes, and files without a band token, are kept."""
    scenes = bands_of("2023-04-06", tokens=("B02", "B04")) + bands_of("2023-05-02") + [make_scene("/s/dem.tif", "2023-04-06")]
    plans, rejects = plan_cubes(scenes, opts(cube_period="P1M"), unread=["/s/x_2023-04-06_B03.tif", "/s/other.tif"])
    assert [(r.href, r.reason) for r in rejects] == [(f"/s/x_2023-04-06_{t}.tif", "incomplete-scene") for t in ("B02", "B04")]
    assert rejects[0].message.startswith("/s/x_2023-04-06_B03.tif, a band file of the same scene, could not be read")
    assert sorted(p.shape[:2] for p in plans) == [(1, 1), (1, 3)]  # May's scene, and the DEM


def test_band_count_mismatch() -> None:
    scenes = [s for d in ("2023-01-01", "2023-01-02", "2023-01-03") for s in bands_of(d)]
    scenes += bands_of("2023-01-04", tokens=("B02", "B03"))
    plans, rejects = plan_cubes(scenes, opts())
    assert {r.reason for r in rejects} == {"band-count-mismatch"}
    assert len(rejects) == 2
    assert rejects[0].message.endswith(
        "2 bands (B02, B03), while 3 other acquisitions on EPSG:32632 at 10 x 10 have 3 (B02, B03, B04): it lacks B04"
    )
    assert plans[0].shape[:2] == (3, 3)


def _offset(scenes: list[Any], offset: float) -> list[Any]:
    return [replace(s, bands=tuple(replace(b, scale=1e-4, offset=offset) for b in s.bands)) for s in scenes]


def test_a_change_of_radiometry_splits_the_series() -> None:
    """A cube records one scale and offset per band: values that mean other things from some date on are another cube.

    (Sentinel-2 from processing baseline 04.00 adds 1000 to every reflectance: offset -0.1 instead of 0.)
    """
    before = [s for d in ("2021-12-01", "2021-12-11") for s in _offset(bands_of(d), 0.0)]
    after = [s for d in ("2022-01-25", "2022-02-04", "2022-02-14") for s in _offset(bands_of(d), -0.1)]
    plans, rejects = plan_cubes(before + after, opts())
    assert not rejects
    assert sorted((len(p.times), {b.offset for b in p.bands}.pop()) for p in plans) == [(2, 0.0), (3, -0.1)]
    # Nested band sets of another radiometry do not compete either: no band-count mismatch.
    plans, rejects = plan_cubes(after + _offset(bands_of("2021-12-01", tokens=("B02", "B03")), 0.0), opts())
    assert not rejects and sorted(p.shape[:2] for p in plans) == [(1, 2), (3, 3)]


def test_disjoint_band_sets_are_separate_cubes() -> None:
    scenes = [make_scene("/a.tif", bands=("B1",)), make_scene("/m.tif", bands=("fmask",), dtype="uint8")]
    plans, rejects = plan_cubes(scenes, opts())
    assert len(plans) == 2 and not rejects


def test_off_grid_is_a_dead_letter_unless_reprojected() -> None:
    scenes = [make_scene(f"/g{i}.tif", f"2023-01-0{i}") for i in range(1, 4)]
    scenes.append(make_scene("/off.tif", "2023-01-05", transform=(10.0, 0, 600003.0, 0, -10.0, 5300000.0)))
    plans, rejects = plan_cubes(scenes, opts())
    assert [(r.href, r.reason) for r in rejects] == [("/off.tif", "off-grid")]
    assert "--align reproject" in rejects[0].message
    # The advice names both options that put it in the series' cube: warped alone, it was a cube of its own.
    assert "pass --align reproject to warp it onto that grid, with --extent union to put it in their cube" in rejects[0].message
    alone, _ = plan_cubes(scenes, opts(align="reproject"))
    assert sorted(len(plan.times) for plan in alone) == [1, 3]
    plans, rejects = plan_cubes(scenes, opts(align="reproject", extent="union"))
    assert not rejects
    (plan,) = plans
    assert plan.width == 65  # the warped scene covers one more column on the group grid
    warped = plan.sources[3][0][0]
    assert warped.warp is not None and warped.warp.resampling == "nearest"
    assert warped.warp.transform[2] == 600000.0


@pytest.mark.parametrize(
    ("transform", "how", "north_up"),
    [
        ((10.0, 1.0, 0, 0, -10.0, 0), "rotated, sheared or mirrored", ((10.0, 0.0, 0.0, 0.0, -(101**0.5), 0.0), 64, 71)),
        ((10.0, 0, 600000.0, 0, 10.0, 5300000.0), "south-up \\(rows run north\\)", ((10.0, 0.0, 600000.0, 0.0, -10.0, 5300640.0), 64, 64)),
    ],
)
def test_not_north_up_scene(transform: tuple[float, ...], how: str, north_up: tuple[Any, int, int]) -> None:
    """A dead letter naming which way the transform is off, or with --align reproject a warp onto a north-up grid."""
    plans, rejects = plan_cubes([make_scene("/r.tif", transform=transform)], opts())
    assert not plans and [r.reason for r in rejects] == ["rotated"]
    expected = f"is {how}; pass --align reproject to warp it onto a north-up grid, or warp it first \\(e.g. gdalwarp"
    assert re.search(expected, rejects[0].message)
    plans, rejects = plan_cubes([make_scene("/r.tif", transform=transform)], opts(align="reproject", resampling="bilinear"))
    assert not rejects
    (plan,) = plans
    (target, height, width) = north_up
    ((source,),) = plan.sources[0]
    assert source.warp is not None and source.warp.resampling == "bilinear"
    assert source.warp.transform == pytest.approx(target, abs=1e-4) and (source.warp.height, source.warp.width) == (height, width)
    assert plan.transform == pytest.approx(target, abs=1e-4) and (plan.height, plan.width) == (height, width)


def test_a_scene_without_nodata_is_warped_only_where_the_warp_covers_every_pixel() -> None:
    """--align reproject fills what no source pixel covers with nodata, or 0 without one, which would pass for data: a
    rotated or off-grid scene without nodata stays refused, naming the fix; mirrored or quarter-turned ones map pixel for
    pixel, and are warped."""
    for transform in ((10.0, 1.0, 0, 0, -10.0, 0), (10.0, 0, 600003.0, 0, -10.0, 5300000.0)):
        scenes = [make_scene(f"/g{i}.tif", f"2023-01-0{i}", nodata=None) for i in range(1, 4)]
        scenes.append(make_scene("/odd.tif", "2023-01-05", transform=transform, nodata=None))
        plans, rejects = plan_cubes(scenes, opts(align="reproject"))
        assert [(r.href, r.reason) for r in rejects] == [("/odd.tif", "rotated" if transform[1] else "off-grid")]
        assert "which it has no nodata value to mark (0 would pass for data)" in rejects[0].message
        assert "gdal_edit.py -a_nodata" in rejects[0].message and [p.shape[0] for p in plans] == [3]
        # Without --align reproject, the advice to pass it says what it needs first, rather than send the user into that refusal.
        _, rejects = plan_cubes(scenes, opts())
        assert "pass --align reproject to warp it onto" in rejects[0].message
        assert (
            "once it has a nodata value to mark the pixels the warp leaves uncovered (e.g. gdal_edit.py -a_nodata N)" in rejects[0].message
        )
    for transform in ((10.0, 0, 600000.0, 0, 10.0, 5300000.0), (0.0, 10.0, 600000.0, 10.0, 0.0, 5300000.0)):
        plans, rejects = plan_cubes([make_scene("/turned.tif", transform=transform, nodata=None)], opts(align="reproject"))
        assert not rejects and plans[0].sources[0][0][0].warp is not None


def test_warped_and_north_up_scenes_of_one_grid_stack_apart() -> None:
    """A south-up file and a north-up file that cover the same grid are read differently, so they are not one acquisition."""
    up = make_scene("/s_2023-01-05_B02.tif", bands=("B02",), stack="/s", transform=(10.0, 0, 600000.0, 0, -10.0, 5300640.0))
    down = make_scene("/s_2023-01-05_B03.tif", bands=("B03",), stack="/s", transform=(10.0, 0, 600000.0, 0, 10.0, 5300000.0))
    acqs, rejects = stack_scenes([up, down], align="reproject")
    assert not rejects and len(acqs) == 2
    assert {a.grid for a in acqs} == {up.grid} and sorted(a.warp is not None for a in acqs) == [False, True]


def test_extents_separate_or_unioned() -> None:
    a = make_scene("/a.tif", "2023-01-01")
    b = make_scene("/b.tif", "2023-01-02", transform=(10.0, 0, 600320.0, 0, -10.0, 5299680.0))
    plans, _ = plan_cubes([a, b], opts())
    assert len(plans) == 2
    (plan,), _ = plan_cubes([a, b], opts(extent="union"))
    assert (plan.height, plan.width) == (96, 96)
    assert plan.transform == T
    assert (plan.sources[1][0][0].row, plan.sources[1][0][0].col) == (32, 32)
    no_nodata = [replace(s, nodata=None) for s in (a, b)]
    plans, _ = plan_cubes(no_nodata, opts(extent="union"))
    assert len(plans) == 2  # nothing to fill with, so extents stay separate


def test_duplicates() -> None:
    scenes = [make_scene("/a.tif", "2023-01-01"), make_scene("/b.tif", "2023-01-01"), make_scene("/c.tif", "2023-01-02")]
    plans, rejects = plan_cubes(scenes, opts())
    assert sorted(r.href for r in rejects) == ["/a.tif", "/b.tif"] and {r.reason for r in rejects} == {"duplicate-time"}
    assert "--duplicates" in rejects[0].message and plans[0].inputs == ("/c.tif",)
    (first,), _ = plan_cubes(scenes, opts(duplicates="first"))
    assert first.sources[0][0][0].href == "/a.tif" and first.dropped == ("/b.tif",)
    (last,), _ = plan_cubes(scenes, opts(duplicates="last"))
    assert last.sources[0][0][0].href == "/b.tif"
    (mosaic,), _ = plan_cubes(scenes, opts(duplicates="mosaic"))
    assert [s.href for s in mosaic.sources[0][0]] == ["/a.tif", "/b.tif"]
    assert mosaic.inputs == ("/a.tif", "/b.tif", "/c.tif")


def test_duplicates_are_ordered_by_their_files_not_the_links_they_are_given_through(tmp_path: Path) -> None:
    """A cube's name hashes its files with links resolved: its mosaic order and kept file must not follow the link's name."""
    for folder in ("x", "y"):
        (tmp_path / "real" / folder).mkdir(parents=True)
        (tmp_path / "real" / folder / "s.tif").touch()
    (tmp_path / "0y").symlink_to(tmp_path / "real" / "y")  # sorts before real/x, where its file sorts after
    x, y, linked = (str(p) for p in (tmp_path / "real" / "x" / "s.tif", tmp_path / "real" / "y" / "s.tif", tmp_path / "0y" / "s.tif"))
    direct = [make_scene(x, "2023-01-01"), make_scene(y, "2023-01-01")]
    through = [make_scene(x, "2023-01-01"), make_scene(linked, "2023-01-01")]
    for duplicates in ("mosaic", "first", "last"):
        (a,), _ = plan_cubes(direct, opts(duplicates=duplicates))
        (b,), _ = plan_cubes(through, opts(duplicates=duplicates))
        assert a.cube_id == b.cube_id
        assert [s.href.replace(linked, y) for s in b.sources[0][0]] == [s.href for s in a.sources[0][0]], duplicates
    (mosaic,), _ = plan_cubes(through, opts(duplicates="mosaic"))
    assert [s.href for s in mosaic.sources[0][0]] == [x, linked]


def test_repeated_href_counts_once() -> None:
    plans, rejects = plan_cubes([make_scene("/a.tif"), make_scene("/a.tif")], opts())
    assert len(plans) == 1 and not rejects


def test_invalid_cube_is_a_dead_letter() -> None:
    plans, rejects = plan_cubes([make_scene("/a.tif")], opts(frame_unit=9))
    assert not plans
    assert rejects[0].reason == "invalid-cube"
    assert "frame_unit 9" in rejects[0].message


def test_a_codec_that_does_not_take_a_cubes_samples_refuses_that_cube_alone() -> None:
    """An explicit --compression that one cube's samples cannot take is that cube's dead letter; the others are planned
    (the first frame's encode failed the whole run, after every scene had been read)."""
    elsewhere = (10.0, 0.0, 700000.0, 0.0, -10.0, 5300000.0)
    scenes = [make_scene("/mask.tif", dtype="uint8"), make_scene("/b04.tif", "2023-01-06", transform=elsewhere)]
    plans, rejects = plan_cubes(scenes, opts(compression="geozl"))
    assert [plan.inputs for plan in plans] == [("/b04.tif",)]
    assert [(r.href, r.reason) for r in rejects] == [("/mask.tif", "invalid-cube")]
    assert "does not take uint8 samples" in rejects[0].message
    plans, rejects = plan_cubes(scenes, opts())
    assert len(plans) == 2 and not rejects


def test_tiles_whose_frames_hold_too_few_samples_are_refused_whatever_the_cube_size() -> None:
    """Frames of fewer than 256 samples are refused; the cube's frame count plays no part."""
    scenes = bands_of("2023-01-05", tokens=("B04",))  # 64 x 64
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=15))
    assert not plans
    (reject,) = rejects
    assert reject.reason == "tile-size"
    assert "into frames of 225 samples, fewer than 256" in reject.message
    assert reject.message.endswith("use --tile-size 16 or more")
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=16))  # 16 frames of 256 samples
    assert plans and not rejects
    # A cell frame holds every band and date of its tile: 8 x 8 pixels x 4 bands x 10 dates.
    series = [s for day in range(1, 11) for s in bands_of(f"2023-01-{day:02d}", tokens=("B02", "B03", "B04", "B08"))]
    plans, rejects = plan_cubes(series, ConvertOptions(out="out", tile_size=8, frame_unit=3))
    assert plans and not rejects
    # One tile holds the whole image: its frames are as small as the image, and nothing is gained by refusing.
    plans, rejects = plan_cubes([make_scene("/tiny_B04.tif", "2023-01-05", shape=(10, 10), bands=("B04",))], opts())
    assert plans and not rejects
    # A thin image needs wide tiles: 3 rows take tiles of 86 columns to reach 256 samples, which the advice names.
    thin = [make_scene("/thin_B04.tif", "2023-01-05", shape=(3, 5000), bands=("B04",))]
    (reject,) = plan_cubes(thin, ConvertOptions(out="out", tile_size=64))[1]
    assert "frames of 192 samples" in reject.message and reject.message.endswith("use --tile-size 86 or more")
    plans, rejects = plan_cubes(thin, ConvertOptions(out="out", tile_size=86))
    assert plans and not rejects


@pytest.mark.parametrize(("height", "width", "per_pixel"), [(64, 64, 1), (3, 5000, 1), (5000, 3, 4), (10, 10, 1), (1, 1, 1), (64, 64, 40)])
def test_the_smallest_tile_size_is_the_first_whose_frames_are_large_enough(height: int, width: int, per_pixel: int) -> None:
    size = smallest_tile_size(height, width, per_pixel)

    def enough(t: int) -> bool:
        return t >= max(height, width) or min(t, height) * min(t, width) * per_pixel >= MIN_FRAME_SAMPLES

    assert enough(size) and (size == 1 or not enough(size - 1))


def test_a_long_series_of_many_bands_in_256_pixel_tiles_is_planned() -> None:
    """A year of 13 bands over a Sentinel-2 tile (10980 px) in 256-pixel tiles: 1.75 million frames of 65,536 pixels."""
    days = [format_seconds(parse_time("2023-01-01") + 5 * 86400 * i)[:10] for i in range(73)]
    tokens = tuple(f"B{b:02d}" for b in range(1, 14))
    scenes = [s for day in days for s in bands_of(day, stack="/s2/T32UPU", tokens=tokens, shape=(10980, 10980))]
    plans, rejects = plan_cubes(scenes, ConvertOptions(out="out", tile_size=256, frame_unit=0))
    assert not rejects
    (plan,) = plans
    assert plan.layout.frame_count == 43 * 43 * 13 * 73


def test_a_band_without_a_name_takes_its_files_shared_stem() -> None:
    scenes = [make_scene(f"/s/{scene}/{scene}_fmask.tif", day, bands=("band 1",)) for scene, day in
              (("LE70350322008118EDC00", "2008-04-27"), ("LT50350322008126PAC01", "2008-05-05"))]  # fmt: skip
    (plan,), _ = plan_cubes(scenes, opts())
    assert [b.name for b in plan.bands] == ["fmask"]
    other = [make_scene("/s/north.tif", "2023-01-01", bands=("band 1",)), make_scene("/s/south.tif", "2023-02-01", bands=("band 1",))]
    (plan,), _ = plan_cubes(other, opts())
    assert [b.name for b in plan.bands] == ["band 1"]  # different stems: no shared name, still one cube


LANDSAT_C2 = "LC08_L2SP_035032_20230612_20230620_02_T1"
"""A Landsat Collection 2 Level-2 product ID: its files are ``<id>_<layer>.TIF``."""


def _landsat_c2_scenes(day: str, directory: str) -> list[Any]:
    """The layers of one Collection 2 Level-2 scene: banded SR_B*/ST_B10, and unnamed QA and ST layers of three kinds."""
    kinds = {"QA_PIXEL": ("uint16", 1.0), "QA_RADSAT": ("uint16", None), "SR_QA_AEROSOL": ("uint8", 1.0)}
    kinds.update({f"ST_{x}": ("int16", -9999.0) for x in ("URAD", "ATRAN", "TRAD", "QA", "EMIS")})
    scenes = [
        make_scene(f"{directory}/{LANDSAT_C2}_SR_B{i}.TIF", day, bands=(f"B{i}",), stack=f"{directory}/{LANDSAT_C2}_SR") for i in (1, 2)
    ]
    scenes += [
        make_scene(f"{directory}/{LANDSAT_C2}_{layer}.TIF", day, bands=("band 1",), dtype=dt, nodata=nd)
        for layer, (dt, nd) in kinds.items()
    ]
    return scenes


def test_unnamed_layers_of_one_scene_are_named_by_their_stems_and_stacked_by_dtype_and_nodata() -> None:
    """Before, every unnamed layer was "band 1": the QA and ST layers of one scene were duplicates and dtype mismatches."""
    scenes = _landsat_c2_scenes("2023-06-12", "/l/a") + _landsat_c2_scenes("2023-06-28", "/l/b")
    plans, rejects = plan_cubes(scenes, opts())
    assert not rejects
    by_names = {tuple(b.name for b in plan.bands): plan for plan in plans}
    assert sorted(by_names) == [
        ("B1", "B2"),
        ("QA_PIXEL",),
        ("QA_RADSAT",),
        ("SR_QA_AEROSOL",),
        ("ST_ATRAN", "ST_EMIS", "ST_QA", "ST_TRAD", "ST_URAD"),
    ]
    assert all(plan.shape[0] == 2 for plan in plans)  # both dates in every cube
    assert by_names[("SR_QA_AEROSOL",)].dtype == "uint8" and by_names[("QA_RADSAT",)].nodata is None
    stacked = by_names[("ST_ATRAN", "ST_EMIS", "ST_QA", "ST_TRAD", "ST_URAD")]
    assert stacked.dtype == "int16" and stacked.nodata == -9999.0
    assert [src[0].href.rsplit("_", 1)[1] for src in stacked.sources[0]] == ["ATRAN.TIF", "EMIS.TIF", "QA.TIF", "TRAD.TIF", "URAD.TIF"]


def test_unnamed_files_are_still_duplicates_where_their_stems_name_one_quantity_or_they_lie_apart() -> None:
    same_stem = [make_scene(f"/{d}/ndvi_20230101.tif", bands=("band 1",)) for d in ("a", "b")]  # two directories, one stem name
    apart = [make_scene("/a/ndvi_20230101.tif", bands=("band 1",)), make_scene("/b/evi_20230101.tif", bands=("band 1",))]
    unnamed = [make_scene("/a/x_20230101.tif", bands=("band 1",)), make_scene("/a/20230101.tif", bands=("band 1",))]  # one has no name
    no_id = [make_scene("/a/ndvi.tif", bands=("band 1",)), make_scene("/a/evi.tif", bands=("band 1",))]  # nothing says one scene
    other_ids = [make_scene("/a/ndvi_20230101.tif", bands=("band 1",)), make_scene("/a/evi_20230102.tif", bands=("band 1",))]
    for scenes in (same_stem, apart, unnamed, no_id, other_ids):
        assert name_quantities(scenes) == scenes
        _, rejects = plan_cubes(scenes, opts())
        assert {r.reason for r in rejects} == {"duplicate-time"}
    # One directory and scene ID, two stem names: two quantities, one acquisition.
    quantities = [make_scene(f"/a/{q}_20230101.tif", bands=("band 1",)) for q in ("ndvi", "evi")]
    ((plan,), rejects) = plan_cubes(quantities, opts())
    assert not rejects and [b.name for b in plan.bands] == ["evi", "ndvi"]
    # No scene ID in the stems, but a banded file beside them at their time: the folder is the scene (Earth Search).
    folder = [make_scene(f"/S2A_33UUU_20230612_0_L2A/{q}.tif", bands=(q,), stack="/S2A_33UUU_20230612_0_L2A/") for q in ("B02", "B03")]
    folder += [make_scene(f"/S2A_33UUU_20230612_0_L2A/{q}.tif", bands=("band 1",)) for q in ("WVP", "AOT")]
    plans, rejects = plan_cubes(folder, opts())
    assert not rejects and sorted(tuple(b.name for b in plan.bands) for plan in plans) == [("AOT", "WVP"), ("B02", "B03")]
    # A lone unnamed file, or unnamed files at different times, keep the fallback name while grouping.
    lone = [make_scene(f"/a/{q}_20230101.tif", day, bands=("band 1",)) for q, day in (("ndvi", "2023-01-01"), ("evi", "2023-02-01"))]
    assert name_quantities(lone) == lone


def test_a_product_beside_the_bands_at_their_times_is_no_mismatch() -> None:
    """A granule's uint8 detector masks carry its bands' tokens; its 8-band quality masks nest a 3-band image's names."""
    bands = bands_of("2023-06-12", stack="/g/R10m/T33UUU", tokens=("B02", "B03"))
    masks = bands_of("2023-06-12", stack="/g/QI_DATA/MSK_DETFOO", tokens=("B02", "B03"), dtype="uint8", nodata=None)
    plans, rejects = plan_cubes(bands + masks, opts())
    assert not rejects and sorted(p.dtype for p in plans) == ["uint16", "uint8"]
    quality = [make_scene("/g/QI_DATA/MSK_QUALIT.tif", "2023-06-12", bands=tuple(f"band {i}" for i in range(1, 9)), dtype="uint8")]
    image = [make_scene("/g/R10m/TCI.tif", "2023-06-12", bands=("band 1", "band 2", "band 3"), dtype="uint8")]
    plans, rejects = plan_cubes(quality + image, opts())
    assert not rejects and sorted(len(p.bands) for p in plans) == [3, 8]
    # At a time the larger series lacks, the smaller is still the odd one out.
    late = [make_scene("/g/R10m/TCI_late.tif", "2023-06-22", bands=("band 1", "band 2", "band 3"), dtype="uint8")]
    _, rejects = plan_cubes(quality + late, opts())
    assert [r.reason for r in rejects] == ["band-count-mismatch"]
    _, rejects = plan_cubes(bands + bands_of("2023-06-22", stack="/g/QI_DATA/MSK_DETFOO", tokens=("B02", "B03"), dtype="uint8"), opts())
    assert {r.reason for r in rejects} == {"dtype-mismatch"}
