"""End to end on generated archives: several grids, periods and broken files; outputs equal the sources."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
import xarray as xr
from click.testing import CliRunner

import rumi_core
from catalog.items import file_sha256
from pipelines import main
from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.sentinel2.testing import l2a_metadata, write_safe
from pipelines.testing import garble_first_block, write_geotiff, write_huge_block, write_series
from rumi_core.cli.main import cli


def _read(out: Path, entry: dict[str, Any]) -> np.ndarray[Any, Any]:
    path = out / entry["file"]
    blob = (out / entry["blob"]).read_bytes()
    rumi_core.validate(path, blob)
    return rumi_core.read(path, blob)


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    """Two grids (10 m in 32632, 20 m in 32633) over five months, plus broken and off-grid files."""
    root = tmp_path / "archive"
    _, a = write_series(
        str(root / "a"), dates=["2023-01-05", "2023-01-25", "2023-02-14", "2023-04-10", "2023-05-30"], size=(70, 90), seed=1
    )
    _, b = write_series(
        str(root / "b"),
        dates=["2023-01-07", "2023-03-08"],
        size=(50, 40),
        bands=("B05", "B06"),
        epsg=32633,
        resolution=20.0,
        prefix="S2_T33",
        seed=2,
    )
    broken = root / "broken"
    broken.mkdir()
    (broken / "S2_X_20230101T000000_B02.tif").write_bytes(b"II*\x00 this is no tiff")
    write_geotiff(
        str(broken / "nocrs.tif"), a[0, :1], epsg=None, transform=(10, 0, 0, 0, -10, 0), tags={"TIFFTAG_DATETIME": "2023:01:01 00:00:00"}
    )
    write_geotiff(str(broken / "undated.tif"), a[0, :1], epsg=32632, transform=(10, 0, 600000, 0, -10, 5300040))
    off = (10.0, 0.0, 600005.0, 0.0, -10.0, 5300040.0)
    for token in ("B02", "B03", "B04", "B08"):
        write_geotiff(
            str(broken / f"S2_T32UPU_20230301T103021_{token}.tif"),
            a[0, :1],
            epsg=32632,
            transform=off,
            nodata=0,
            tags={"TIFFTAG_DATETIME": "2023:03:01 10:30:21"},
        )
    return root, {"a": a, "b": b}


def test_archive_by_quarter(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, data = archive
    out = tmp_path / "out"
    options = ConvertOptions(out=str(out), tile_size=32, cube_period="P3M")
    summary = run([str(root)], options)
    entries = {e["cube_id"]: e for e in load_jsonl(str(out / "manifest.jsonl"))}
    assert len(entries) == 3  # grid a: Q1 and Q2; grid b: Q1 (January and March)
    by_shape = {tuple(e["shape"]): e for e in entries.values()}
    assert np.array_equal(_read(out, by_shape[(3, 4, 70, 90)]), data["a"][:3])
    assert np.array_equal(_read(out, by_shape[(2, 4, 70, 90)]), data["a"][3:])
    assert np.array_equal(_read(out, by_shape[(2, 2, 50, 40)]), data["b"])
    letters = {(Path(d["href"]).name, d["reason"]) for d in load_jsonl(str(out / "dead-letter.jsonl"))}
    assert letters == {
        ("S2_X_20230101T000000_B02.tif", "unreadable"),
        ("nocrs.tif", "missing-crs"),
        ("undated.tif", "unknown-time"),
        *((f"S2_T32UPU_20230301T103021_{t}.tif", "off-grid") for t in ("B02", "B03", "B04", "B08")),
    }
    assert summary.produced and len(summary.dead_letters) == 7
    assert summary.counters.get("ReadSceneMetadata/dead_letter.unreadable") == 1
    assert summary.counters.get("PlanCubes/dead_letter.off-grid") == 4
    assert "dead letters: 7 (missing-crs: 1, off-grid: 4, unknown-time: 1, unreadable: 1)" in summary.table()
    assert not (out / ".parts").exists() and not (out / ".staging").exists()
    entry = by_shape[(3, 4, 70, 90)]
    assert entry["bands"][0]["name"] == "B02" and entry["crs"] == "EPSG:32632" and entry["nodata"] == 0
    assert entry["times"][0] == "2023-01-05T10:30:21Z" and entry["time_range"] == ["2023-01-05T10:30:21Z", "2023-02-14T10:30:21Z"]
    assert entry["codec"]["name"] in {"stack", "geozl", "openzl"} and len(entry["sha256"]) == 64
    # --frame-unit auto (the default) measured the units valid for B=4, T=3 and recorded the winner.
    assert entry["frame_unit"] in {0, 3, 4, 5, 6, 7, 8}
    assert entry["extra"] == {"mode": "lossless", "compression": "auto"}
    assert entry["file_bytes"] == os.path.getsize(out / entry["file"])


def test_one_cube_per_grid_and_reproject(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, data = archive
    out = tmp_path / "out"
    run(
        [str(root / "a"), str(root / "b"), str(root / "broken" / "S2_T32UPU_*")],
        ConvertOptions(out=str(out), tile_size=64, align="reproject", extent="union"),
    )
    entries = load_jsonl(str(out / "manifest.jsonl"))
    shapes = sorted(tuple(e["shape"]) for e in entries)
    assert shapes == [(2, 2, 50, 40), (6, 4, 70, 91)]
    big = next(e for e in entries if e["shape"][0] == 6)
    cube = _read(out, big)
    assert np.array_equal(cube[[0, 1, 2, 4, 5], :, :, :90], data["a"])
    assert not load_jsonl(str(out / "dead-letter.jsonl"))


def test_frame_units_and_codecs(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, data = archive
    for unit, compression in (
        (4, "openzl"),
        (9, "auto"),
        (7, '{"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy"}}'),
    ):
        out = tmp_path / f"out{unit}"
        run([str(root / "a")], ConvertOptions(out=str(out), tile_size=48, frame_unit=unit, compression=compression))
        (entry,) = load_jsonl(str(out / "manifest.jsonl"))
        assert entry["frame_unit"] == unit
        assert np.array_equal(_read(out, entry), data["a"])
        if compression == "openzl":
            assert entry["codec"] == {"name": "openzl", "configuration": {"graph": "compress"}}


def test_rerun_skips_and_overwrite_rewrites(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, _ = archive
    out = tmp_path / "out"
    options = ConvertOptions(out=str(out), tile_size=64)
    first = run([str(root / "a")], options)
    (entry,) = first.entries
    mtime = os.stat(out / entry.file).st_mtime_ns
    second = run([str(root / "a")], options)
    assert [e.status for e in second.entries] == ["skipped"]
    assert second.entries[0].sha256 == entry.sha256 and second.entries[0].codec == entry.codec
    assert os.stat(out / entry.file).st_mtime_ns == mtime
    (out / entry.blob).write_bytes(b"corrupt")
    third = run([str(root / "a")], options)
    assert [e.status for e in third.entries] == ["written"] and third.entries[0].sha256 == entry.sha256
    # A flipped byte keeps every frame size: the damaged file is written again, not taken for this run's own.
    damaged = bytearray((out / entry.file).read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (out / entry.file).write_bytes(bytes(damaged))
    healed = run([str(root / "a")], options)
    assert [e.status for e in healed.entries] == ["written"] and file_sha256(str(out / entry.file)) == entry.sha256
    fourth = run([str(root / "a")], ConvertOptions(out=str(out), tile_size=64, overwrite=True))
    assert [e.status for e in fourth.entries] == ["written"] and fourth.entries[0].sha256 == entry.sha256


def test_cli(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, _ = archive
    runner = CliRunner()
    out = tmp_path / "cli"
    ok = runner.invoke(cli, ["convert", str(root / "a"), "--out", str(out), "--tile-size", "64", "--no-progress"])
    assert ok.exit_code == 0, ok.output
    assert "total: 1 cube" in ok.output and "dead letters: none" in ok.output
    strict = runner.invoke(cli, ["convert", str(root / "a"), str(root / "broken" / "nocrs.tif"), "--out", str(out), "--strict"])
    assert strict.exit_code == 1 and "--strict: 1 input went" in strict.output
    nothing = runner.invoke(cli, ["convert", str(root / "broken" / "nocrs.tif"), "--out", str(tmp_path / "none")])
    assert nothing.exit_code == 1 and "nothing was produced" in nothing.output
    bad = runner.invoke(cli, ["convert", str(root / "a"), "--out", str(out), "--cube-period", "P2W"])
    assert bad.exit_code == 2 and "Invalid value for '--cube-period'" in bad.output
    beam_value = runner.invoke(cli, ["convert", str(root / "a"), "--out", str(out), "--direct_num_workers", "2"])
    assert beam_value.exit_code == 2 and "--direct_num_workers=2" in beam_value.output
    assert main([str(root / "a"), "--out", str(out), "--frame-unit", "12"]) == 2
    # Options neither rumi nor Beam knows would be dropped by Beam with a log line, and the run go on without them.
    # A typo given its value after a space was told to write it as a Beam option (--tile_size=512), which Beam does not know.
    for typo, message in [
        ("--tile_size=16", "no such option: --tile_size (did you mean --tile-size?)"),
        ("--tile_size 512", "no such option: --tile_size (did you mean --tile-size?)"),
        ("--tile-szie 256", "no such option: --tile-szie (did you mean --tile-size?)"),
        ("--cube_period P1M", "no such option: --cube_period (did you mean --cube-period?)"),
        ("--direct_runing_mode in_memory", "no such option: --direct_runing_mode (did you mean --direct_running_mode?)"),
        ("--bogus-option 3", "no such option: --bogus-option; neither rumi convert nor Beam knows it"),
        # Beam's own reason on one line, where argparse printed the usage of every Beam option before it.
        ("--direct_num_workers=abc", "Error: argument --direct_num_workers: invalid int value: 'abc'"),
        ("--direct_runing_mode=in_memory", "no such option: --direct_runing_mode (did you mean --direct_running_mode?)"),
        ("--bogus-option", "no such option: --bogus-option; neither rumi convert nor Beam knows it"),
        # Beam finds these out once the run has started, and answered the worker count with "list index out of range".
        ("--runner=Foo", "--runner Foo: Beam knows no such runner; give one of"),
        ("--direct_num_workers=-1", "--direct_num_workers=-1: give a worker count from 1 to"),
        # Beam started workers one after another, never finishing; and dropped a dashed option as "unparseable".
        ("--direct_num_workers=99999999999999999999", "--direct_num_workers=99999999999999999999: give a worker count from 1 to"),
        ("--direct-num-workers=2", "no such option: --direct-num-workers (did you mean --direct_num_workers?)"),
        # Beam failed with "No module named 'foo'" and "Empty module name" once the run had started.
        ("--runner=foo.Bar", "--runner foo.Bar: Beam cannot load it here (ModuleNotFoundError: No module named 'foo')"),
        ("--runner=.", "--runner .: Beam cannot load it here (ValueError: Empty module name)"),
        ("--runner=collections.OrderedDict", "--runner collections.OrderedDict: OrderedDict is no Beam runner"),
        ("--runner=DataflowRunner", "Dataflow workers cannot write into a local folder; give --out gs://BUCKET/PREFIX"),
        # Docker workers from apache/beam_python3.11_sdk, which has no rumi: Beam failed once the job ran.
        ("--runner=PortableRunner", "--runner PortableRunner starts its workers in Docker from Beam's stock SDK image, which lacks rumi"),
        ("--runner=apache_beam.runners.portability.portable_runner.PortableRunner", "from Beam's stock SDK image, which lacks rumi"),
    ]:
        refused = runner.invoke(cli, ["convert", str(root / "a"), "--out", str(tmp_path / "typo"), *typo.split()])
        assert refused.exit_code == 2 and message in refused.output, refused.output
        assert "is no input" not in refused.output and "--dask_client_address" not in refused.output, refused.output
    # A job service or worker pool that is not there: Beam waited five minutes, then said FutureTimeoutError.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"  # a port nothing listens on once closed
    for name, service in (("PortableRunner", f"--job_endpoint={closed}"), ("FlinkRunner", f"--flink_master={closed}")):
        args = ["convert", str(root / "a"), "--out", str(tmp_path / "typo"), "--runner", name, service]
        refused = runner.invoke(cli, args)
        assert refused.exit_code == 2 and f"{service}: cannot connect (Connection refused)" in refused.output, refused.output
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    ("runner", "args", "stock"),
    [
        ("PortableRunner", [], True),
        ("apache_beam.runners.portability.portable_runner.PortableRunner", [], True),
        ("PortableRunner", ["--environment_type=LOOPBACK"], False),
        ("PortableRunner", ["--environment_type=PROCESS", "--environment_config={}"], False),
        ("PortableRunner", ["--environment_type=DOCKER"], True),
        ("PortableRunner", ["--environment_config=registry/rumi:1"], False),
        ("PortableRunner", ["--environment_options=docker_container_image=registry/rumi:1"], False),
        ("FlinkRunner", [], False),  # [auto]: Beam runs LOOPBACK
        ("FlinkRunner", ["--flink_master=[local]"], False),
        ("FlinkRunner", ["--flink_master=flink:8081"], True),
        ("FlinkRunner", ["--flink_master=flink:8081", "--environment_type=EXTERNAL", "--environment_config=localhost:50000"], False),
        ("SparkRunner", [], False),  # local[4]
        ("SparkRunner", ["--spark_master_url=spark://spark:7077"], True),
        ("PrismRunner", [], False),
        ("FnApiRunner", [], False),
    ],
)
def test_which_runners_would_start_beams_stock_worker_image(runner: str, args: list[str], stock: bool) -> None:
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.runners import resolve_runner, stock_worker_image

    assert stock_worker_image(resolve_runner(runner), PipelineOptions(args).get_all_options()) is stock


def test_an_undated_name_with_a_date_gets_the_time_pattern_that_reads_it(tmp_path: Path) -> None:
    """The dead letter offers a ``--time-pattern``; given back as it stands in the file, it dates the scene."""
    path = write_geotiff(str(tmp_path / "ndvi_20230612.tif"), np.ones((1, 8, 8), np.uint16), epsg=32632, transform=(10, 0, 0, 0, -10, 0))
    refused = CliRunner().invoke(cli, ["convert", path, "--out", str(tmp_path / "refused"), "--no-progress"])
    assert refused.exit_code == 1
    (letter,) = load_jsonl(str(tmp_path / "refused" / "dead-letter.jsonl"))
    assert letter["reason"] == "unknown-time"
    (pattern,) = re.findall(r"--time-pattern '([^']+)' reads", letter["message"])
    out = tmp_path / "out"
    ok = CliRunner().invoke(cli, ["convert", path, "--out", str(out), "--time-pattern", pattern, "--no-progress"])
    assert ok.exit_code == 0, ok.output
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["times"] == ["2023-06-12T00:00:00Z"]


def test_progress_monitor(tmp_path: Path) -> None:
    import io

    from pipelines.transforms.frames import FrameKey
    from pipelines.transforms.write_parts import PART_RECORD, PartWriter, ProgressMonitor

    parts = tmp_path / ".parts"
    (parts / "c1").mkdir(parents=True)
    (parts / "c1" / ".frames").write_text("5")
    with PartWriter(str(parts)) as killed:  # an earlier run's frames 0-3
        for i in range(4):
            killed.write(FrameKey("c1", i), b"old")
    stream = io.StringIO()
    monitor = ProgressMonitor(str(parts), stream, interval=0.01)
    with monitor, PartWriter(str(parts)) as first, PartWriter(str(parts)) as retry:
        assert monitor.poll() == (0, 5)  # what was there when the run started is not this run's
        written = [first.write(FrameKey("c1", i), b"x" * (i + 1)) for i in range(3)]
        retry.write(FrameKey("c1", 2), b"xxx")  # a retried bundle writes frame 2 again
        assert monitor.poll() == (3, 5)
        with open(written[0].path, "ab") as f:  # a record whose frame is still being written does not count
            f.write(PART_RECORD.pack(3, 4) + b"xx")
        assert monitor.poll() == (3, 5)
        retry.write(FrameKey("c1", 3), b"y")
        retry.write(FrameKey("c1", 4), b"zz")
    assert stream.getvalue().splitlines()[-1].endswith("100%  5/5 frames")
    (parts / "c1").rename(tmp_path / "gone")
    assert monitor.poll() == (5, 5)  # an assembled cube's parts are gone: it counts as complete


def test_manifest_is_json_lines(archive: tuple[Path, dict[str, np.ndarray[Any, Any]]], tmp_path: Path) -> None:
    root, _ = archive
    out = tmp_path / "out"
    run([str(root / "b")], ConvertOptions(out=str(out)))
    text = (out / "manifest.jsonl").read_text()
    assert text.count("\n") == 1 and json.loads(text)["dtype"] == "uint16"


@pytest.mark.parametrize(("nodata", "text"), [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_a_non_finite_nodata_is_stac_text_in_the_manifest_and_the_item(tmp_path: Path, nodata: float, text: str) -> None:
    """JSON has no NaN or infinity: the manifest and the STAC item spell the value as STAC 1.1 does, the file keeps it."""
    data = np.random.default_rng(5).random((1, 40, 50), dtype=np.float32)
    data[0, :7, :9] = nodata
    path = write_geotiff(str(tmp_path / "scene.tif"), data, epsg=32632, transform=(10, 0, 600000, 0, -10, 5300000), nodata=nodata)
    out = tmp_path / "out"
    summary = run([path], ConvertOptions(out=str(out), time="2023-01-01", tile_size=32))
    assert not summary.dead_letters
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["nodata"] == text
    (item,) = (out / "stac").rglob(f"{entry['cube_id']}.json")
    (band,) = json.loads(item.read_text())["assets"]["data"]["bands"]
    assert band["nodata"] == text
    np.testing.assert_array_equal(_read(out, entry), data)


def test_heights_above_different_vertical_crss_make_separate_cubes_that_name_them(tmp_path: Path) -> None:
    """DEMs in compound CRSs: the files and proj:code hold the horizontal CRS, the items the vertical one, and datums never mix."""
    rng = np.random.default_rng(5)
    heights = {}
    for day, crs in (("20230101", "EPSG:32633+5773"), ("20230102", "EPSG:32633+3855"), ("20230103", "EPSG:32633+3855")):
        heights[day] = rng.normal(300, 50, (1, 40, 50)).astype(np.float32)
        profile = {"driver": "GTiff", "width": 50, "height": 40, "count": 1, "dtype": "float32", "nodata": -32767.0}
        with rasterio.open(
            tmp_path / f"dem_{day}.tif", "w", crs=crs, transform=rasterio.Affine(30, 0, 300000, 0, -30, 5800020), **profile
        ) as d:
            d.write(heights[day])
    out = tmp_path / "out"
    summary = run([str(tmp_path / "dem_*.tif")], ConvertOptions(out=str(out), time_pattern=r"_(?P<date>\d{8})\.tif$"))
    assert not summary.dead_letters
    entries = {tuple(e["times"]): e for e in load_jsonl(str(out / "manifest.jsonl"))}
    assert sorted(entries) == [("2023-01-01T00:00:00Z",), ("2023-01-02T00:00:00Z", "2023-01-03T00:00:00Z")]
    for times, entry in entries.items():
        assert entry["crs"] == "EPSG:32633"
        vertical = "EPSG:5773" if len(times) == 1 else "EPSG:3855"
        assert entry["extra"]["properties"] == {"rumi:vertical_crs": vertical}
        (item_path,) = (out / "stac").rglob(f"{entry['cube_id']}.json")
        item = json.loads(item_path.read_text())
        assert item["properties"]["rumi:vertical_crs"] == vertical and item["properties"]["proj:code"] == "EPSG:32633"
        expected = np.stack([heights[t[:10].replace("-", "")] for t in times])
        data = rumi_core.read(str(out / entry["file"]))
        assert np.array_equal(data if data.ndim == 4 else data[None], expected)  # one time step is an Image (B, Y, X)
        exported = tmp_path / vertical.replace(":", "") / "dem.tif"
        exported.parent.mkdir()
        assert CliRunner().invoke(cli, ["export", str(item_path), "--output", str(exported)]).exit_code == 0
        compound = rasterio.crs.CRS.from_user_input(f"EPSG:32633+{vertical[5:]}")
        for path in sorted(exported.parent.glob("*.tif")):  # the compound CRS again, as the source had it
            with rasterio.open(path) as ds:
                assert ds.crs == compound
        with xr.open_dataset(item_path, engine="rumi") as dataset:
            assert rasterio.crs.CRS.from_wkt(dataset["spatial_ref"].attrs["crs_wkt"]) == compound


def test_gdal_settings_in_the_environment_change_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four GDAL settings change what a GeoTIFF says; a user's environment holding them changed the cubes.

    ``GTIFF_POINT_GEO_IGNORE=YES`` moved a PixelIsPoint cube half a pixel, ``GTIFF_REPORT_COMPD_CS=NO`` dropped a
    DEM's vertical CRS, ``GDAL_PAM_ENABLED=NO`` a band name stated in a ``.aux.xml``, and
    ``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR`` that too and a ``.msk``, whose masked pixels became data.
    """
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    rng = np.random.default_rng(8)
    grid = (10.0, 0.0, 300000.0, 0.0, -10.0, 5800020.0)
    write_geotiff(str(scenes / "point_20230101.tif"), rng.integers(1, 900, (1, 20, 30), dtype=np.uint16), epsg=32633, transform=grid,
                  tags={"AREA_OR_POINT": "Point"})  # fmt: skip
    with rasterio.open(scenes / "dem_20230102.tif", "w", driver="GTiff", width=30, height=20, count=1, dtype="float32",
                       crs="EPSG:32633+3855", transform=rasterio.Affine(*grid), nodata=-32767.0) as dem:  # fmt: skip
        dem.write(rng.normal(300, 50, (1, 20, 30)).astype(np.float32))
    pam = write_geotiff(str(scenes / "pam_20230103.tif"), rng.integers(1, 900, (1, 20, 30), dtype=np.uint16), epsg=32633, transform=grid)
    Path(pam + ".aux.xml").write_text('<PAMDataset><PAMRasterBand band="1"><Description>blue</Description></PAMRasterBand></PAMDataset>')
    masked = str(scenes / "masked_20230104.tif")
    write_geotiff(masked, rng.integers(1, 900, (1, 20, 30), dtype=np.uint16), epsg=32633, transform=grid)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False), rasterio.open(masked, "r+") as ds:
        ds.write_mask(np.where(np.arange(30) < 10, 0, 255).astype(np.uint8)[None].repeat(20, 0))
    assert Path(masked + ".msk").is_file()

    def converted(name: str) -> dict[str, bytes]:
        out = tmp_path / name
        run([str(scenes)], ConvertOptions(out=str(out), time_pattern=r"_(?P<date>\d{8})\.tif$"))
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    baseline = converted("baseline")
    assert b'"reason": "masked"' in baseline["dead-letter.jsonl"]
    settings = ("GTIFF_POINT_GEO_IGNORE=YES", "GTIFF_REPORT_COMPD_CS=NO", "GDAL_PAM_ENABLED=NO", "GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR")
    for setting in settings:
        key, value = setting.split("=")
        with monkeypatch.context() as env:
            env.setenv(key, value)
            changed = converted(key.lower())
        assert changed.keys() == baseline.keys(), setting
        assert [name for name in baseline if changed[name] != baseline[name]] == [], setting


def test_an_item_collections_nodata_reaches_the_catalogue(tmp_path: Path) -> None:
    """A COG without a nodata tag, in an ItemCollection whose raster:bands state 0: the cube and its STAC item have nodata 0."""
    path = write_geotiff(
        str(tmp_path / "r.tif"),
        np.random.default_rng(2).integers(1, 5000, (1, 40, 50), dtype=np.uint16),
        epsg=32632,
        transform=(10.0, 0.0, 600000.0, 0.0, -10.0, 5300000.0),
    )
    asset = {"href": "r.tif", "type": "image/tiff; application=geotiff", "raster:bands": [{"nodata": 0, "scale": 0.0001}]}
    item = {
        "type": "Feature",
        "id": "x",
        "geometry": None,
        "properties": {"datetime": "2023-06-12T10:00:00Z"},
        "assets": {"red": asset},
    }
    (tmp_path / "items.json").write_text(json.dumps({"type": "FeatureCollection", "features": [item]}))
    out = tmp_path / "out"
    run([str(tmp_path / "items.json")], ConvertOptions(out=str(out)))
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["nodata"] == 0.0 and entry["inputs"] == [path]
    (stac_item,) = (json.loads(p.read_text()) for p in (out / "stac").rglob("*.json") if json.loads(p.read_text())["type"] == "Feature")
    assert {b["nodata"] for a in stac_item["assets"].values() for b in a.get("bands", ())} == {0}


@pytest.mark.parametrize(
    ("name", "transform", "turn"),
    [
        ("south-up", (10.0, 0.0, 600000.0, 0.0, 10.0, 5300000.0), np.flipud),  # rows run north
        ("transposed", (0.0, 10.0, 600000.0, -10.0, 0.0, 5300000.0), np.transpose),  # rows run east, columns south
    ],
)
@pytest.mark.parametrize("resampling", ["nearest", "bilinear"])
def test_not_north_up_rasters_are_warped_upright_with_align_reproject(
    tmp_path: Path, name: str, transform: tuple[float, ...], turn: Any, resampling: str
) -> None:
    """Every pixel centre of the upright grid falls on a source pixel's centre: resampling moves samples unchanged.

    Each band's nodata is its own: a sample of nodata beside valid samples of other bands stays nodata. GDAL's warper
    took a pixel as nodata only where every band was, and bilinear made such a sample 1, the value after nodata.
    """
    data = np.random.default_rng(3).integers(1, 4000, size=(3, 40, 70), dtype=np.uint16)
    data[0, 5:9, 10:30] = data[1, 20:22, :] = 0  # nodata in one band only
    path = write_geotiff(str(tmp_path / f"{name}.tif"), data, epsg=32632, transform=transform, nodata=0)
    refused = run([path], ConvertOptions(out=str(tmp_path / "refused"), time="2023-01-01"))
    assert [(d.reason, "pass --align reproject" in d.message) for d in refused.dead_letters] == [("rotated", True)]
    out = tmp_path / "out"
    options = ConvertOptions(out=str(out), time="2023-01-01", align="reproject", tile_size=32, resampling=resampling)
    summary = run([path], options)
    assert not summary.dead_letters
    (entry,) = load_jsonl(str(out / "manifest.jsonl"))
    assert entry["transform"][4] < 0 and entry["transform"][1] == entry["transform"][3] == 0.0
    assert np.array_equal(_read(out, entry), np.stack([turn(band) for band in data]))


def test_a_block_that_fails_to_decode_leaves_its_scene_out_of_the_cube(tmp_path: Path) -> None:
    """A source whose header reads but one of whose blocks does not decode: a ``read-failed`` dead letter, and the cube
    is converted again without it, to the same bytes as a run never given that date; another cube of the run is kept.

    Runs on the default two worker threads, where each bundle's frame places and failures are combined before the
    shuffle (pipelines.transforms.cube_parts), so the failure has to survive that combine.
    """

    dates = ["2024-04-02", "2024-04-07", "2024-04-12"]
    paths, _ = write_series(str(tmp_path / "scenes"), dates=dates, size=512, seed=4)
    write_series(str(tmp_path / "scenes"), dates=dates[:1], size=256, seed=5, prefix="S2_T32UQU", origin=(700000.0, 5300040.0))
    broken = sorted(p for p in paths if "20240407" in p)[1]
    garble_first_block(broken)
    out = tmp_path / "out"
    summary = run([str(tmp_path / "scenes")], ConvertOptions(out=str(out), tile_size=256), ["--direct_num_workers=2"])
    assert [(e.shape[0], e.status) for e in summary.entries] == [(2, "written"), (1, "written")]
    letters = load_jsonl(str(out / "dead-letter.jsonl"))
    siblings = {p for p in paths if "20240407" in p} - {broken}
    assert {(d["href"], d["reason"]) for d in letters} == {(broken, "read-failed")} | {(p, "incomplete-scene") for p in siblings}
    (failed,) = (d["message"] for d in letters if d["reason"] == "read-failed")
    assert "was not written" in failed and failed.endswith("its cube was planned again without this scene")
    # GDAL's own words, not only rasterio's pointer to them.
    assert "previous exception" not in failed and "IReadBlock" in failed
    assert not os.path.exists(out / ".parts") or not any((out / ".parts").iterdir())
    # The same bytes as a conversion of the other two dates (whose cube id differs: it hashes the inputs' paths).
    kept = tmp_path / "kept"
    kept.mkdir()
    for p in paths:
        if "20240407" not in p:
            shutil.copy(p, kept)
    clean = run([str(kept)], ConvertOptions(out=str(tmp_path / "clean"), tile_size=256), ["--direct_num_workers=2"])
    (entry,) = clean.entries
    assert file_sha256(str(out / f"{summary.entries[0].cube_id}.rumi")) == file_sha256(str(tmp_path / "clean" / f"{entry.cube_id}.rumi"))


def test_hostile_scenes_are_dead_letters_and_the_others_convert(tmp_path: Path) -> None:
    """A scene declaring a 1.2 GiB block, one whose pixels are 1e-300 m, one scaled by NaN and one whose description is
    not UTF-8 each become a dead letter, and the run converts the rest. Before, each ended the whole run (the block after
    an attempt to allocate it whole; the NaN scale after its cube's files had their final names, with no manifest)."""
    scenes = tmp_path / "scenes"
    paths, data = write_series(str(scenes), dates=["2024-04-02"], size=64, seed=6)
    dated = {"TIFFTAG_DATETIME": "2024:05:01 00:00:00"}
    write_huge_block(str(scenes / "huge.tif"))
    write_geotiff(str(scenes / "tiny.tif"), data[0, :1], epsg=32632, transform=(1e-300, 0, 600000, 0, -1e-300, 5300000), tags=dated)
    write_geotiff(str(scenes / "nan_scale.tif"), data[0, :1], epsg=32632, transform=(10, 0, 600000, 0, -10, 5300000), tags=dated)
    with rasterio.open(scenes / "nan_scale.tif", "r+") as dst:
        dst.scales = (float("nan"),)
    write_geotiff(str(scenes / "text.tif"), data[0, :1], epsg=32632, transform=(10, 0, 600000, 0, -10, 5300000), tags=dated,
                  descriptions=["BADBADBAD"])  # fmt: skip
    (scenes / "text.tif").write_bytes((scenes / "text.tif").read_bytes().replace(b"BADBADBAD", b"B\xffD\xfeBADBA"))
    out = tmp_path / "out"
    summary = run([str(scenes)], ConvertOptions(out=str(out), tile_size=32), ["--direct_num_workers=2"])
    letters = {(Path(d["href"]).name, d["reason"]) for d in load_jsonl(str(out / "dead-letter.jsonl"))}
    assert letters == {("huge.tif", "large-blocks"), ("tiny.tif", "bad-transform"), ("nan_scale.tif", "bad-metadata"),
                       ("text.tif", "bad-metadata")}  # fmt: skip
    (entry,) = summary.entries
    assert entry.status == "written" and len(paths) == 4
    np.testing.assert_array_equal(_read(out, load_jsonl(str(out / "manifest.jsonl"))[0]), data[0])  # one date: an Image
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".rumi", ".rumih")) == [f"{entry.cube_id}.rumi", f"{entry.cube_id}.rumih"]


def test_the_second_pass_keeps_overwrite_and_what_the_manifest_recorded(tmp_path: Path) -> None:
    """A cube that only the second pass plans may already exist from an earlier run: ``--overwrite`` still rewrites it
    (the second pass skipped it), and a re-run that fails on the same scene skips it, where it was rewritten every run
    because the first pass had replaced the manifest that recorded it."""

    write_series(str(tmp_path / "scenes"), dates=["2024-04-02", "2024-04-07"], size=512, bands=("B02", "B03"), seed=9)
    out = tmp_path / "out"
    options = ConvertOptions(out=str(out), tile_size=256, frame_unit=0)
    (first,) = run([str(tmp_path / "scenes")], options).entries
    later, _ = write_series(str(tmp_path / "scenes"), dates=["2024-04-12"], size=512, bands=("B02", "B03"), seed=10)
    garble_first_block(later[0])
    rewritten = run([str(tmp_path / "scenes")], dataclasses.replace(options, overwrite=True, compression="raster"))
    (entry,) = rewritten.entries
    assert (entry.cube_id, entry.status) == (first.cube_id, "written")
    assert entry.codec != first.codec and entry.codec["name"] == "raster"
    again = run([str(tmp_path / "scenes")], dataclasses.replace(options, compression="raster"))
    assert [(e.cube_id, e.status) for e in again.entries] == [(first.cube_id, "skipped")]
    assert [d.reason for d in again.dead_letters].count("read-failed") == 1


def test_a_landsat_collection_2_level_2_archive_converts_every_layer(tmp_path: Path) -> None:
    """Two dates of Collection 2 Level-2: SR_B* and ST_B10 by band token, the unnamed QA and ST layers by their names.

    SR_B* and ST_B10 record the scale and offset of the product's _MTL.json.

    The unnamed layers (uint16 QA_PIXEL with nodata 1, uint16 QA_RADSAT
    without, uint8 SR_QA_AEROSOL, int16 ST_* with nodata -9999) were each
    ``band 1``: duplicates of one another and dtype mismatches, all dead letters.
    """
    layers: dict[str, tuple[str, float | None]] = {f"SR_B{i}": ("uint16", 0) for i in range(1, 4)}
    layers.update({"ST_B10": ("uint16", 0), "QA_PIXEL": ("uint16", 1), "QA_RADSAT": ("uint16", None), "SR_QA_AEROSOL": ("uint8", 1)})
    layers.update({f"ST_{x}": ("int16", -9999) for x in ("ATRAN", "QA", "TRAD")})
    rng = np.random.default_rng(3)
    truth: dict[tuple[str, str], np.ndarray[Any, Any]] = {}
    for day, processed in (("20230612", "20230620"), ("20230628", "20230705")):
        product = f"LC08_L2SP_035032_{day}_{processed}_02_T1"
        (tmp_path / "in" / product).mkdir(parents=True)
        for layer, (dtype, nodata) in layers.items():
            data = rng.integers(2, 250, (1, 40, 50)).astype(dtype)
            write_geotiff(
                str(tmp_path / "in" / product / f"{product}_{layer}.TIF"),
                data,
                epsg=32613,
                transform=(30, 0, 336375, 0, -30, 4462425),
                nodata=nodata,
            )
            truth[(day, layer)] = data[0]
        level2 = {
            "LEVEL2_SURFACE_REFLECTANCE_PARAMETERS": {
                **{f"REFLECTANCE_MULT_BAND_{i}": "2.75e-05" for i in range(1, 4)},
                **{f"REFLECTANCE_ADD_BAND_{i}": "-0.2" for i in range(1, 4)},
            },
            "LEVEL2_SURFACE_TEMPERATURE_PARAMETERS": {"TEMPERATURE_MULT_BAND_ST_B10": "0.00341802", "TEMPERATURE_ADD_BAND_ST_B10": "149.0"},
        }
        (tmp_path / "in" / product / f"{product}_MTL.json").write_text(json.dumps({"LANDSAT_METADATA_FILE": level2}))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "in" / "*" / "*.TIF"), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    entries = load_jsonl(str(out / "manifest.jsonl"))
    assert sorted(tuple(b["name"] for b in e["bands"]) for e in entries) == [
        ("B1", "B2", "B3"), ("B10",), ("QA_PIXEL",), ("QA_RADSAT",), ("SR_QA_AEROSOL",), ("ST_ATRAN", "ST_QA", "ST_TRAD"),
    ]  # fmt: skip
    # The MTL's factors: reflectance and kelvin; the layers it gives none for keep the files' (none).
    radiometry = {b["name"]: (b["scale"], b["offset"], b["unit"]) for e in entries for b in e["bands"]}
    assert radiometry["B2"] == (2.75e-05, -0.2, None) and radiometry["B10"] == (0.00341802, 149.0, "K")
    assert radiometry["QA_PIXEL"] == radiometry["ST_TRAD"] == (1.0, 0.0, None)
    for entry in entries:
        pixels = _read(out, entry)
        assert pixels.shape[:2] == (2, len(entry["bands"]))
        for t, day in enumerate(("20230612", "20230628")):
            for b, band in enumerate(entry["bands"]):
                layer = {"B10": "ST_B10"}.get(band["name"], f"SR_{band['name']}" if band["name"][1:].isdigit() else band["name"])
                assert np.array_equal(pixels[t, b], truth[(day, layer)]), (day, layer)


def test_a_landsat_collection_1_espa_archive_converts_every_layer(tmp_path: Path) -> None:
    """Two dates of a USGS ESPA Collection 1 order: one cube per product (sr, toa, bt) by ``_band<n>``, the rest by name.

    The ``_band<n>`` files had no band token, so every one was ``band 1`` of its own acquisition: duplicates, all
    dead letters but one per date. The angle layers name the band they were computed for (``_solar_zenith_band4``):
    quantities of the scene, not its band 4.
    """
    layers: dict[str, tuple[str, float | None]] = {f"sr_band{i}": ("int16", -9999) for i in range(1, 4)}
    layers.update({f"toa_band{i}": ("int16", -9999) for i in range(1, 3)})
    layers.update({"bt_band10": ("int16", -9999), "bt_band11": ("int16", -9999), "pixel_qa": ("uint16", 1), "sr_aerosol": ("uint8", None)})
    layers.update({f"{a}_band4": ("int16", -32768) for a in ("sensor_azimuth", "solar_zenith")})
    rng = np.random.default_rng(4)
    truth: dict[tuple[str, str], np.ndarray[Any, Any]] = {}
    for day in ("20170506", "20170522"):
        product = f"LC08_L1TP_033033_{day}_20170515_01_T1"
        (tmp_path / "in" / product).mkdir(parents=True)
        for layer, (dtype, nodata) in layers.items():
            data = rng.integers(2, 250, (1, 30, 40)).astype(dtype)
            path = str(tmp_path / "in" / product / f"{product}_{layer}.tif")
            write_geotiff(path, data, epsg=32613, transform=(30, 0, 300000, 0, -30, 4000020), nodata=nodata)
            truth[(day, layer)] = data[0]
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "in"), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    entries = load_jsonl(str(out / "manifest.jsonl"))
    layer_of: dict[tuple[str, ...], Any] = {
        ("band1", "band2", "band3"): lambda name: f"sr_{name}",
        ("band1", "band2"): lambda name: f"toa_{name}",
        ("band10", "band11"): lambda name: f"bt_{name}",
        ("pixel_qa",): str,
        ("sensor_azimuth", "solar_zenith"): lambda name: f"{name}_band4",
        ("sr_aerosol",): str,
    }
    assert sorted(tuple(b["name"] for b in e["bands"]) for e in entries) == sorted(layer_of)
    for entry in entries:
        pixels, names = _read(out, entry), tuple(b["name"] for b in entry["bands"])
        for t, day in enumerate(("20170506", "20170522")):
            for b, name in enumerate(names):
                assert np.array_equal(pixels[t, b], truth[(day, layer_of[names](name))]), (day, name)


def test_a_sentinel_2_level_2a_safe_converts_every_band_and_layer(tmp_path: Path) -> None:
    """An L2A SAFE folder of JP2 files (``T33UUU_<time>_B02_10m.jp2``): the pixel size after the band token, SCL/AOT/WVP unnamed.

    Before, no file but the 3-band TCI had a band token, so the bands of one
    resolution were duplicates of one another: every one a dead letter. The
    quality masks beside them (``QI_DATA``) are products of their own: the
    detector masks carry the bands' tokens in uint8, and are no dtype mismatch;
    they are named in full (``MSK_DETFOO_B02``), never as the band itself. The
    60 m ``TCI`` and ``MSK_CLASSI_B00`` are both three bands of uint8 at one
    grid and time: named by their files, they are two cubes, where both were
    duplicate-time dead letters.
    """
    rng = np.random.default_rng(5)
    safe = tmp_path / "S2B_MSIL2A_20230612T102031_N0509_R065_T33UUU_20230612T151249.SAFE"
    granule = safe / "GRANULE" / "L2A_T33UUU"
    files = {
        **{f"IMG_DATA/R10m/T33UUU_20230612T102031_{b}_10m": (10, "uint16", 1) for b in ("B02", "B03", "B04", "B08")},
        **{f"IMG_DATA/R20m/T33UUU_20230612T102031_{b}_20m": (20, "uint16", 1) for b in ("B05", "B8A", "AOT", "WVP")},
        "IMG_DATA/R20m/T33UUU_20230612T102031_SCL_20m": (20, "uint8", 1),
        "IMG_DATA/R60m/T33UUU_20230612T102031_TCI_60m": (60, "uint8", 3),
        "QI_DATA/MSK_CLASSI_B00": (60, "uint8", 3),
        **{f"QI_DATA/MSK_{m}_20m": (20, "uint8", 1) for m in ("CLDPRB", "SNWPRB")},
        **{f"QI_DATA/MSK_DETFOO_{b}": (10, "uint8", 1) for b in ("B02", "B03", "B04", "B08")},
    }
    truth: dict[str, np.ndarray[Any, Any]] = {}
    for name, (res, dtype, count) in files.items():
        (granule / name).parent.mkdir(parents=True, exist_ok=True)
        data = rng.integers(1, 250 if dtype == "uint8" else 9000, (count, 960 // res, 960 // res)).astype(dtype)
        profile = {"width": data.shape[2], "height": data.shape[1], "count": count, "dtype": dtype, "crs": "EPSG:32633", "nodata": 0}
        transform = rasterio.Affine(res, 0, 300000, 0, -res, 5800020)
        with rasterio.open(
            granule / f"{name}.jp2", "w", driver="JP2OpenJPEG", transform=transform, QUALITY=100, REVERSIBLE="YES", **profile
        ) as dst:
            dst.write(data)
        truth.update({name: data[0]} if count == 1 else {f"{name} {i + 1}": data[i] for i in range(count)})
    out = tmp_path / "out"
    # The SAFE folder itself: its .jp2 files are found as .tif files are.
    result = CliRunner().invoke(cli, ["convert", str(safe), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    entries = load_jsonl(str(out / "manifest.jsonl"))
    # The images take the band table's texts ("B04, red, 664.6nm (S2A) / ..."), the masks their files' names.
    cubes = {(round(e["transform"][0]), e["dtype"], tuple(b["name"].split(",")[0] for b in e["bands"])): e for e in entries}
    assert cubes[(10, "uint16", ("B02", "B03", "B04", "B08"))]["bands"][2]["name"].startswith("B04, red, 664.6nm (S2A)")
    assert sorted(cubes) == [
        (10, "uint16", ("B02", "B03", "B04", "B08")),
        (10, "uint8", ("MSK_DETFOO_B02", "MSK_DETFOO_B03", "MSK_DETFOO_B04", "MSK_DETFOO_B08")),
        (20, "uint16", ("AOT", "WVP")),
        (20, "uint16", ("B05", "B8A")),
        (20, "uint8", ("MSK_CLDPRB", "MSK_SNWPRB")),
        (20, "uint8", ("SCL",)),
        (60, "uint8", ("MSK_CLASSI_B00 1", "MSK_CLASSI_B00 2", "MSK_CLASSI_B00 3")),
        (60, "uint8", ("TCI 1", "TCI 2", "TCI 3")),
    ]
    for entry in entries:
        pixels = _read(out, entry)  # one date: an Image (B, Y, X)
        for b, band in enumerate(entry["bands"]):
            text, _, number = band["name"].split(",")[0].partition(" ")
            (path,) = [p for p in entry["inputs"] if re.search(rf"[_/]{text}(_\d+m)?\.jp2$", p)]
            name = str(Path(path).relative_to(granule).with_suffix("")) + (f" {number}" if number else "")
            assert np.array_equal(pixels[b], truth[name]), name


def test_esas_copies_of_a_band_on_coarser_grids_are_named_as_copies(tmp_path: Path) -> None:
    """A SAFE's R20m and R60m hold B02 (and SCL in R60m) resampled by ESA: named as the band itself, a search or load of
    "blue" took a copy as well as the band, and a load gave 60 m pixels or 10 m ones depending on the hits' order."""
    import catalog

    safe = tmp_path / "S2B_MSIL2A_20230612T102031_N0509_R065_T33UUU_20230612T151249.SAFE"
    granule = safe / "GRANULE" / "L2A_T33UUU"
    rng = np.random.default_rng(6)
    for name, res, dtype in (
        ("R10m/T33UUU_20230612T102031_B02_10m", 10, "uint16"),
        ("R20m/T33UUU_20230612T102031_B02_20m", 20, "uint16"),
        ("R20m/T33UUU_20230612T102031_SCL_20m", 20, "uint8"),
        ("R60m/T33UUU_20230612T102031_SCL_60m", 60, "uint8"),
    ):
        (granule / "IMG_DATA" / name).parent.mkdir(parents=True, exist_ok=True)
        data = rng.integers(1, 12 if dtype == "uint8" else 9000, (1, 960 // res, 960 // res)).astype(dtype)
        profile = {"width": data.shape[2], "height": data.shape[1], "count": 1, "dtype": dtype, "crs": "EPSG:32633", "nodata": 0}
        with rasterio.open(
            granule / "IMG_DATA" / f"{name}.jp2",
            "w",
            driver="JP2OpenJPEG",
            transform=rasterio.Affine(res, 0, 300000, 0, -res, 5800020),
            QUALITY=100,
            REVERSIBLE="YES",
            **profile,
        ) as dst:
            dst.write(data)  # fmt: skip
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(safe), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    names = sorted(b["name"] for e in load_jsonl(str(out / "manifest.jsonl")) for b in e["bands"])
    assert names == [
        "B02 at 20 m, resampled by ESA from 10 m",
        "B02, blue, 492.4nm (S2A) / 492.1nm (S2B) / 490nm (S2C)",
        "SCL at 60 m, resampled by ESA from 20 m",
        "SCL, scene classification",
    ]
    (blue,) = catalog.search(out / "stac", bands=["blue"])
    assert blue.bands[0].startswith("B02, blue")
    with catalog.Cube.open(blue.item_href) as cube:
        assert cube.grid is not None and cube.grid.transform[0] == 10
    copies = sorted(h.bands[0] for h in catalog.search(out / "stac") if "resampled by ESA" in h.bands[0])
    assert copies == ["B02 at 20 m, resampled by ESA from 10 m", "SCL at 60 m, resampled by ESA from 20 m"]


def test_safe_products_record_their_metadata_radiometry_and_split_at_the_baseline(tmp_path: Path) -> None:
    """Reflectance is (DN + offset) / 10000, the offset -1000 from baseline 04.00: the SAFE's MTD_MSIL2A.xml says so, not its JP2s.

    Two products before baseline 04.00 and one after: the 10 m bands make a cube of each radiometry, never one cube
    that mixes them; AOT and WVP take their own quantification (and WVP its unit); the detector masks keep scale 1.
    """
    for day, baseline, offset in (("20211201", "03.01", None), ("20211211", "03.01", None), ("20220125", "04.00", -1000)):
        write_safe(tmp_path / "in", day, baseline, l2a_metadata(offset))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "in"), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    entries = load_jsonl(str(out / "manifest.jsonl"))
    found = {
        (e["dtype"], tuple(b["name"].split(",")[0] for b in e["bands"]), len(e["times"])): [
            (b["scale"], b["offset"], b["unit"]) for b in e["bands"]
        ]
        for e in entries
    }
    assert found == {
        ("uint16", ("B02", "B03"), 2): [(0.0001, 0.0, None)] * 2,
        ("uint16", ("B02", "B03"), 1): [(0.0001, -0.1, None)] * 2,
        ("uint16", ("AOT", "WVP"), 3): [(0.001, 0.0, None), (0.001, 0.0, "cm")],
        ("uint8", ("MSK_DETFOO_B02",), 3): [(1.0, 0.0, None)],
    }
    # ESA's JP2s state no nodata: the products declare DN 0 NODATA, and a detector mask's 0 is a value.
    assert {e["bands"][0]["name"].split(",")[0]: e["nodata"] for e in entries} == {"B02": 0, "AOT": 0, "MSK_DETFOO_B02": None}
    (after,) = [e for e in entries if e["times"] == ["2022-01-25T10:20:31Z"]]
    (item,) = (out / "stac").rglob(f"{after['cube_id']}.json")
    document = json.loads(item.read_text())
    bands = document["assets"]["data"]["bands"]
    assert [(b["scale"], b["offset"], b["nodata"]) for b in bands] == [(0.0001, -0.1, 0)] * 2
    # What the product's name says, as the STAC route's items state it, so that a search can filter on it.
    props = document["properties"]
    assert [props[k] for k in ("constellation", "s2:mgrs_tile", "s2:platforms", "s2:processing_baselines")] == [
        "sentinel-2", "33UUU", ["sentinel-2b"], ["04.00"]
    ]  # fmt: skip


def test_a_datatake_esa_cut_into_two_products_is_their_mosaic(tmp_path: Path) -> None:
    """Two SAFE products of one datatake and baseline, generated apart, each a part of the tile and nodata elsewhere.

    ESA cuts a tile so where it spans two datastrips. The later generation was kept as "the newer processing" and the
    other dropped, with ``--duplicates mosaic`` too: 40 % of the tile was lost, and the summary said a newer processing
    of the datatake was in the cube. A second download of one product (``X (1).zip``) is the same case.
    """
    (tmp_path / "in").mkdir()
    parts = []
    for folder, generated, cols, more in (("a", "T151249", slice(0, 20), 0), ("b", "T171354", slice(12, 32), 7)):
        safe = write_safe(tmp_path / folder, "20220125", "04.00", l2a_metadata(-1000))
        for jp2 in sorted((safe / "GRANULE").rglob("IMG_DATA/**/*.jp2")):
            with rasterio.open(jp2) as src:
                profile = {key: src.profile[key] for key in ("driver", "width", "height", "count", "dtype", "crs", "transform")}
                data = src.read()
            scale = 32 // data.shape[2]  # the part's columns on the 10 m grid, at this file's resolution
            part = np.zeros_like(data)
            part[:, :, cols.start // scale : cols.stop // scale] = data[:, :, cols.start // scale : cols.stop // scale] + more
            with rasterio.open(jp2, "w", **profile, QUALITY=100, REVERSIBLE="YES") as dst:
                dst.write(part)
        parts.append(safe.rename(tmp_path / "in" / safe.name.replace("T151249.SAFE", f"{generated}.SAFE")))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "in"), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    (entry,) = [e for e in load_jsonl(str(out / "manifest.jsonl")) if e["bands"][0]["name"].startswith("B02")]
    assert entry["times"] == ["2022-01-25T10:20:31Z"] and entry["dropped"] == [] and len(entry["inputs"]) == 4
    b02 = _read(out, entry).reshape(-1, 32, 32)[0]  # band B02 of its one time
    with rasterio.open(next(parts[0].rglob("*_B02_10m.jp2"))) as first, rasterio.open(next(parts[1].rglob("*_B02_10m.jp2"))) as later:
        first_b02, later_b02 = first.read(1), later.read(1)
    expected = np.where(later_b02 != 0, later_b02, first_b02)  # the later generation's pixels first, then the other part's
    np.testing.assert_array_equal(b02, expected)
    assert (b02 != 0).all() and (later_b02[:, :12] == 0).all() and (first_b02[:, 20:] == 0).all()


def test_an_unreadable_safe_metadata_file_is_a_dead_letter_naming_it(tmp_path: Path) -> None:
    write_safe(tmp_path / "in", "20220125", "04.00", "<n1:Level-2A_User_Product")
    out = tmp_path / "out"
    run([str(tmp_path / "in")], ConvertOptions(out=str(out)))
    letters = load_jsonl(str(out / "dead-letter.jsonl"))
    assert {Path(d["href"]).name.split("_")[2] for d in letters} == {"B02", "B03", "AOT", "WVP"}  # IMG_DATA only
    assert {d["reason"] for d in letters} == {"bad-metadata"} and all("MTD_MSIL2A.xml: not XML" in d["message"] for d in letters)
    (mask,) = load_jsonl(str(out / "manifest.jsonl"))  # the detector mask needs no product metadata
    assert mask["dtype"] == "uint8"


def test_a_level_1c_safe_never_shares_a_cube_with_level_2a(tmp_path: Path) -> None:
    """Top-of-atmosphere and surface reflectance of one band, grid and radiometry: two cubes, the L1C one saying what it holds."""
    for day in ("20220125", "20220204"):
        write_safe(tmp_path / "in", day, "04.00", l2a_metadata(-1000))
    level_2a = write_safe(tmp_path / "l1c", "20220214", "04.00", None)
    level_1c = tmp_path / "in" / level_2a.name.replace("MSIL2A", "MSIL1C")
    level_2a.rename(level_1c)
    (level_1c / "MTD_MSIL1C.xml").write_text(l2a_metadata(-1000).replace("BOA_ADD_OFFSET", "RADIO_ADD_OFFSET"))
    out = tmp_path / "out"
    run([str(tmp_path / "in")], ConvertOptions(out=str(out)))
    reflectance = [e for e in load_jsonl(str(out / "manifest.jsonl")) if e["bands"][0]["name"].startswith("B02")]
    by_times = {len(e["times"]): [b["name"] for b in e["bands"]] for e in reflectance}
    assert sorted(by_times) == [1, 2]
    assert all(name.endswith(", top-of-atmosphere reflectance (L1C)") for name in by_times[1])
    assert not any("L1C" in name for name in by_times[2])


def test_a_folder_of_earth_search_sentinel_2_cogs_converts_every_asset(tmp_path: Path) -> None:
    """``S2A_33UUU_20230612_0_L2A/{B02,B03,AOT,WVP,B05,SCL}.tif``: dated by the folder, banded by the whole stem.

    The band token was only found after a separator, and the folder's name was
    no scene ID: every file was undated, then each one band 1 of its own.
    """
    folder = tmp_path / "S2A_33UUU_20230612_0_L2A"
    folder.mkdir()
    rng = np.random.default_rng(2)
    truth = {}
    assets = {"B02": 10, "B03": 10, "AOT": 10, "WVP": 10, "B05": 20, "SCL": 20}
    for name, res in assets.items():
        dtype = "uint8" if name == "SCL" else "uint16"
        data = rng.integers(1, 200, (1, 960 // res, 960 // res)).astype(dtype)
        write_geotiff(str(folder / f"{name}.tif"), data, epsg=32633, transform=(res, 0, 300000, 0, -res, 5800020), nodata=0)
        truth[name] = data[0]
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["convert", str(folder), "--out", str(out), "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    entries = load_jsonl(str(out / "manifest.jsonl"))
    assert sorted(tuple(b["name"] for b in e["bands"]) for e in entries) == [("AOT", "WVP"), ("B02", "B03"), ("B05",), ("SCL",)]
    assert all(e["times"] == ["2023-06-12T00:00:00Z"] for e in entries)
    for entry in entries:
        pixels = _read(out, entry)  # one date: an Image (B, Y, X)
        for b, band in enumerate(entry["bands"]):
            assert np.array_equal(pixels[b], truth[band["name"]]), band["name"]


def test_prune_removes_the_cubes_a_run_supersedes_and_nothing_else(tmp_path: Path) -> None:
    """A nightly run over a growing folder writes its cube under a new name (time range and inputs): the summary names the
    previous night's cube, which the new one supersedes, and --prune removes it. A cube of another area, one holding a scene
    that failed tonight, a hand-placed file and the outputs before a run that produced nothing are never pruned."""
    scenes = tmp_path / "scenes"
    paths, _ = write_series(str(scenes), dates=["2023-01-05", "2023-02-04", "2023-03-06"], size=(40, 56), seed=6)
    later = [p for p in paths if "20230306" in p]
    for path in later:
        os.rename(path, path + ".later")
    out = tmp_path / "out"
    command = ["convert", str(scenes), "--out", str(out), "--tile-size", "32", "--no-progress"]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0 and "supersede" not in first.output, first.output
    (two_dates,) = out.glob("*.rumi")
    (out / "mine.rumi").write_bytes(b"placed by hand")
    for path in later:
        os.rename(path + ".later", path)
    second = CliRunner().invoke(cli, command)
    named = "1 cube of earlier runs is superseded by this run's, which hold all their inputs, and no longer listed"
    assert f"listed ({two_dates.name})" in second.output
    assert second.exit_code == 0 and named in second.output, second.output
    (three_dates,) = set(out.glob("*.rumi")) - {two_dates, out / "mine.rumi"}
    # The next night, with nothing new: the manifest no longer names the superseded cube, superseded.jsonl does.
    again = CliRunner().invoke(cli, command)
    assert again.exit_code == 0 and f"listed ({two_dates.name})" in again.output, again.output
    assert [line["file"] for line in load_jsonl(str(out / "superseded.jsonl"))] == [two_dates.name]
    # A scene that fails tonight: tonight's cube lacks it, so it supersedes nothing, and the cube holding it stays.
    saved = Path(later[0]).read_bytes()
    Path(later[0]).write_bytes(b"not a raster")
    failing = CliRunner().invoke(cli, [*command, "--prune"])
    assert "pruned" not in failing.output and three_dates.exists(), failing.output
    Path(later[0]).write_bytes(saved)
    pruned = CliRunner().invoke(cli, [*command, "--prune"])
    assert pruned.exit_code == 0 and f"pruned 1 cube of earlier runs that this run's supersede: {two_dates.name}" in pruned.output
    assert sorted(out.glob("*.rumi")) == sorted([three_dates, out / "mine.rumi"]) and not (out / "superseded.jsonl").exists()
    # Another area into the same folder, then a run whose every input fails: neither supersedes what is there.
    write_series(str(tmp_path / "other"), dates=["2023-01-05"], size=(40, 56), seed=7, origin=(700000.0, 5300040.0))
    area = CliRunner().invoke(cli, ["convert", str(tmp_path / "other"), "--out", str(out), "--tile-size", "32", "--no-progress", "--prune"])
    assert area.exit_code == 0 and "supersede" not in area.output, area.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.tif").write_bytes(b"not a raster")
    nothing = CliRunner().invoke(cli, ["convert", str(tmp_path / "bad"), "--out", str(out), "--no-catalog", "--no-progress", "--prune"])
    assert nothing.exit_code == 1 and "pruned" not in nothing.output, nothing.output
    assert three_dates.exists() and (out / "mine.rumi").exists() and len(list(out.glob("*.rumi"))) == 3
