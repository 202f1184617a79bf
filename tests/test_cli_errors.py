"""Errors a user can act on: one line, the right exit status, nothing left behind.

Each test drives a ``rumi`` command the way a user would and checks that the
message is a single line that says what failed and where, that the exit
status is 2 for a command line that cannot be used (checked before any work)
and 1 for a failure while working, and that no output is left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import numpy as np
import pytest
from click.testing import CliRunner, Result

import rumi_core
from rumi_core.cli.main import cli
from rumi_core.header import HeaderBlob
from rumi_core.testing import synthetic_cube

if TYPE_CHECKING:
    from pathlib import Path

UNWRITABLE = "/sys"
"""A directory no process may create files in, even as root (sysfs)."""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def one_line(result: Result) -> str:
    """The output, which must be exactly one line starting with ``Error:``, and no traceback."""
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return lines[0]


def files_in(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


@pytest.fixture
def cube(tmp_path: Path) -> tuple[Path, bytes, np.ndarray]:
    """A (3, 2, 40, 50) cube of 16 x 16 tiles, its blob beside it, and its samples."""
    data = synthetic_cube(3, 2, 40, 50, seed=3)
    path = tmp_path / "cube.rumi"
    blob = rumi_core.write(
        path, data, bands=["B4, Red", "B8, NIR"], times=["2021-01-01", "2021-02-01", "2021-03-01"], crs="EPSG:32633",
        transform=(10, 0, 500000, 0, -10, 4000000), tile_size=16,
    )  # fmt: skip
    (tmp_path / "cube.rumih").write_bytes(blob)
    return path, blob, data


def corrupt_frame(path: Path, blob: bytes, index: int) -> None:
    offset, length = HeaderBlob.from_bytes(blob).frame_range(index)
    raw = bytearray(path.read_bytes())
    for i in range(offset + length // 3, offset + length):
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))


# -- output locations, checked before any work -----------------------------------------


@pytest.mark.parametrize("command", ["read", "export"])
@pytest.mark.parametrize("where", ["missing-dir", "a-file-as-dir", "a-directory", "unwritable", "dev-null"])
def test_unusable_output_is_one_line_before_any_work(cube: tuple[Path, bytes, np.ndarray], command: str, where: str) -> None:
    path, _, _ = cube
    before = files_in(path.parent)
    suffix = "tif"
    target = {
        "missing-dir": str(path.parent / "nowhere" / f"x.{suffix}"),
        "a-file-as-dir": str(path / f"x.{suffix}"),
        "a-directory": str(path.parent),
        "unwritable": f"{UNWRITABLE}/x.{suffix}",
        "dev-null": os.devnull,
    }[where]
    if where == "dev-null":
        result = invoke(command, str(path), "-o", target)
        assert result.exit_code == 2
        assert "must end in" in one_line(result) or "not a regular file" in one_line(result)
        return
    result = invoke(command, str(path), "-o", target)
    assert result.exit_code == 2, result.output
    assert f"-o {target}" in one_line(result)
    assert files_in(path.parent) == before


def test_dev_null_is_not_an_output_file(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube
    (tmp_path / "dev").mkdir()
    os.symlink(os.devnull, tmp_path / "dev" / "null.npy")
    result = invoke("read", str(path), "-o", str(tmp_path / "dev" / "null.npy"))
    assert result.exit_code == 2 and "is not a regular file" in one_line(result)


def test_header_output_is_checked_before_the_blob_is_built(cube: tuple[Path, bytes, np.ndarray]) -> None:
    path, _, _ = cube
    result = invoke("header", str(path), "-o", str(path.parent / "nowhere" / "x.rumih"))
    assert result.exit_code == 2 and "does not exist" in one_line(result)


@pytest.mark.parametrize(
    ("out", "why"),
    [("{file}/sub", "is a file, not a directory"), (os.devnull, "exists and is not a directory"), (f"{UNWRITABLE}/out", "cannot write")],
    ids=["under-a-file", "dev-null", "unwritable"],
)
def test_convert_out_is_checked_before_beam_starts(tmp_path: Path, out: str, why: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    scene = tmp_path / "s_B04.tif"
    scene.write_bytes(b"not read: the --out check comes first")
    target = out.format(file=afile)
    result = invoke("convert", str(scene), "--out", target)
    assert result.exit_code == 2
    line = one_line(result)
    assert f"--out {target}" in line and why in line


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("{d}/nonexistent.tif", "no such file"),
        ("{d}/*.nothing", "no file matches"),
        ("{d}/empty", "holds no .tif"),
        ("{d}/sidecars/*", "matches only GDAL's sidecar files (.aux.xml, .ovr, .msk), which are not scenes"),
        # Given alone, as a shell expands beside/*.msk: it expanded to nothing, and the run said "nothing was produced".
        ("{d}/beside/x.tif.msk", "it is GDAL's sidecar file of {d}/beside/x.tif, read through it, not a scene; give {d}/beside/x.tif"),
    ],
    ids=["missing-path", "empty-glob", "empty-directory", "sidecars-only", "a-sidecar-alone"],
)
def test_convert_inputs_are_checked_first_and_no_output_is_created(tmp_path: Path, given: str, why: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "sidecars").mkdir()
    for name in ("x.tif.ovr", "x.tif.msk", "x.TIF.aux.xml"):
        (tmp_path / "sidecars" / name).write_bytes(b"II*\x00")
    (tmp_path / "beside").mkdir()
    for name in ("x.tif", "x.tif.msk"):
        (tmp_path / "beside" / name).write_bytes(b"II*\x00")
    out = tmp_path / "out"
    result = invoke("convert", given.format(d=tmp_path), "--out", str(out))
    assert result.exit_code == 2
    assert why.format(d=tmp_path) in one_line(result)
    assert not out.exists()


@pytest.mark.parametrize("proj_data", ["missing", "pyproj"], ids=["no-proj-db", "another-proj"])
def test_a_proj_data_gdal_cannot_read_is_named_before_any_output(tmp_path: Path, proj_data: str) -> None:
    """A PROJ_DATA of another PROJ install made every scene a crs-not-epsg dead letter advising a warp to its own code."""
    from pyproj.datadir import get_data_dir

    from pipelines.testing import write_geotiff

    scene = write_geotiff(str(tmp_path / "s_20230101.tif"), np.ones((1, 8, 8), np.uint16), epsg=32633, transform=(10, 0, 0, 0, -10, 80))
    out = tmp_path / "out"
    data = str(tmp_path / "nothing") if proj_data == "missing" else get_data_dir()  # pyproj's PROJ is not GDAL's here
    env = {**os.environ, "PROJ_DATA": data, "PROJ_LIB": data}
    code = "import sys; from rumi_core.cli.main import cli; sys.exit(cli())"
    result = subprocess.run([sys.executable, "-c", code, "convert", scene, "--out", str(out)], env=env, capture_output=True, text=True)
    if proj_data == "pyproj" and result.returncode == 0:
        pytest.skip("pyproj ships the PROJ data of GDAL's own PROJ version here")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "GDAL's PROJ cannot read its EPSG database" in result.stderr and "PROJ_DATA" in result.stderr
    assert not out.exists()


def test_option_errors_name_the_option_once(tmp_path: Path) -> None:
    scene = tmp_path / "s_B04.tif"
    scene.write_bytes(b"x")
    line = one_line(invoke("convert", str(scene), "--out", str(tmp_path / "out"), "--tile-size", "0"))
    assert line.count("--tile-size") == 1
    assert not (tmp_path / "out").exists()


# -- failures while working ------------------------------------------------------------


def test_missing_input_is_named_once(tmp_path: Path) -> None:
    missing = str(tmp_path / "nonexist.rumi")
    for args in (["read", missing, "-o", str(tmp_path / "x.npy")], ["info", missing], ["export", missing, "-o", str(tmp_path / "x.tif")]):
        result = invoke(*args)
        assert result.exit_code == 1
        line = one_line(result)
        assert line.count("nonexist.rumi") == 1 and "No such file" in line, line
        assert line.count("cannot open") == 1


def test_corrupt_frame_names_frame_band_and_time(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, blob, _ = cube
    layout = HeaderBlob.from_bytes(blob).layout
    index = next(i for i in range(layout.frame_count) if layout.frame_location(i) == (0, 1, 1, 2))  # tile (0, 1), band 1, time 2
    corrupt_frame(path, blob, index)
    out = tmp_path / "x.npy"
    result = invoke("read", str(path), "-o", str(out))
    assert result.exit_code == 1
    line = one_line(result)
    assert f"frame {index} (band 1, time step 2, tile row 0 col 1)" in line
    assert not out.exists()


def test_export_with_a_corrupt_frame_leaves_no_geotiff(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, blob, _ = cube
    layout = HeaderBlob.from_bytes(blob).layout
    last = next(i for i in range(layout.frame_count) if layout.frame_location(i)[3] == 2)  # a frame of the last time step
    corrupt_frame(path, blob, last)
    before = files_in(tmp_path)
    result = invoke("export", str(path), "-o", str(tmp_path / "x.tif"))
    assert result.exit_code == 1
    assert f"frame {last} " in one_line(result)
    assert files_in(tmp_path) == before  # the two good time steps were not published either


def test_a_blob_of_another_file_is_refused_before_decoding(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, data = cube
    other = tmp_path / "other.rumi"
    bigger = np.repeat(data, 2, axis=0)
    blob = rumi_core.write(other, bigger, bands=["a", "b"], times=[f"2021-01-{d:02d}" for d in range(1, 7)], tile_size=16)
    (tmp_path / "other.rumih").write_bytes(blob)
    result = invoke("read", str(path), "--header", str(tmp_path / "other.rumih"), "-o", str(tmp_path / "x.npy"))
    assert result.exit_code == 1
    line = one_line(result)
    assert "does not fit" in line and "OpenZL" not in line


# -- windows: one clipping rule ----------------------------------------------------------


def test_window_and_bbox_are_clipped_alike_and_reported(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, data = cube
    out = tmp_path / "w.npy"
    result = invoke("read", str(path), "--window", "30:60,-5:10", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "clipped to the image: 30:40,0:10" in result.output
    np.testing.assert_array_equal(np.load(out), data[:, :, 30:40, 0:10])
    # The same area as a bbox, reaching past the image the same way.
    bbox = "499950,3999600,500100,3999700"  # cols -5..10, rows 30..40 of 10 m pixels
    result = invoke("read", str(path), "--bbox", bbox, "--bbox-crs", "EPSG:32633", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "window 30:40,0:10" in result.output
    np.testing.assert_array_equal(np.load(out), data[:, :, 30:40, 0:10])


@pytest.mark.parametrize("command", ["search", "read"])
def test_inverted_bbox_is_refused_alike(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path, command: str) -> None:
    path, _, _ = cube
    # Latitudes inverted: minx > maxx alone is a search box across the antimeridian.
    args = [command, str(path if command == "read" else tmp_path), "--bbox", "14,41,15,40"]
    if command == "read":
        args += ["-o", str(tmp_path / "x.npy")]
    result = invoke(*args)
    assert result.exit_code == 2
    assert "--bbox: bbox [14.0, 41.0, 15.0, 40.0] is empty or inverted" in one_line(result)


@pytest.mark.parametrize("command", ["search", "read"])
def test_a_bad_datetime_is_an_option_error_before_any_search(tmp_path: Path, command: str) -> None:
    """Exit 2 and the option named, as for --bbox and --times; the catalogue need not even exist."""
    args = [command, str(tmp_path / "nowhere"), "--datetime", "2008-99"]
    if command == "read":
        args = ["read", "--catalog", str(tmp_path / "nowhere"), "--bbox", "1,2,3,4", "--datetime", "2008-99", "-o", str(tmp_path / "x.npy")]
    result = invoke(*args)
    assert result.exit_code == 2
    assert one_line(result) == "Error: --datetime: '2008-99' is not an ISO 8601 month: month 99 is not in 1..12"


def test_a_file_given_in_the_wrong_place_is_named_for_what_it_is(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    """A GeoTIFF where a rumi file or item goes, a blob where a file goes, a file where its blob goes: each is said to be what it
    is, with no decoder's message about bytes; a rumi file under another name is read as one."""
    import rasterio

    path, blob, data = cube
    tif = tmp_path / "scene.tif"
    with rasterio.open(tif, "w", driver="GTiff", width=8, height=8, count=1, dtype="uint8", crs="EPSG:32633",
                       transform=rasterio.Affine(10, 0, 0, 0, -10, 0)) as dst:  # fmt: skip
        dst.write(np.zeros((1, 8, 8), dtype=np.uint8))
    for command in ("read", "export"):
        result = invoke(command, str(tif), "-o", str(tmp_path / ("x.npy" if command == "read" else "x.tif")))
        assert result.exit_code == 1
        assert one_line(result) == (
            f"Error: {tif} is neither a rumi file nor a STAC item: it is a little-endian TIFF (rumi convert makes rumi files of GeoTIFFs)"
        )
    blob_path = tmp_path / "cube.rumih"
    blob_path.write_bytes(blob)
    result = invoke("read", str(blob_path), "-o", str(tmp_path / "x.npy"))
    assert one_line(result) == f"Error: {blob_path} is neither a rumi file nor a STAC item: it is a rumi header blob"
    result = invoke("validate", str(path), "--header", str(path))
    assert result.exit_code == 1 and "the bytes given are a rumi file, not a header blob" in result.output
    renamed = tmp_path / "cube.bin"
    renamed.write_bytes(path.read_bytes())
    result = invoke("read", str(renamed), "--header", str(blob_path), "-o", str(tmp_path / "renamed.npy"))
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "renamed.npy"), data)


# -- small things ------------------------------------------------------------------------


def test_outputs_follow_the_umask(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube
    previous = os.umask(0o027)
    try:
        assert invoke("read", str(path), "-o", str(tmp_path / "x.npy")).exit_code == 0
        assert invoke("header", str(path), "-o", str(tmp_path / "x.rumih")).exit_code == 0
        assert invoke("read", str(path), "-o", str(tmp_path / "x.tif")).exit_code == 0
        rumi_core.write(tmp_path / "x.rumi", np.zeros((1, 8, 8), "uint8"), bands=["a"], times=["2021-01-01"])
    finally:
        os.umask(previous)
    for name in ("x.npy", "x.rumih", "x.tif", "x.rumi"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o640, name


def test_export_progress_bar_on_request(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube
    shown = invoke("export", str(path), "-o", str(tmp_path / "p.tif"), "--progress")
    assert shown.exit_code == 0 and "export 3 time steps" in shown.output
    quiet = invoke("export", str(path), "-o", str(tmp_path / "q.tif"))
    assert quiet.exit_code == 0 and "export 3 time steps" not in quiet.output


def test_the_command_group_imports_neither_beam_nor_ml_dtypes() -> None:
    """``rumi --version`` and ``rumi --help`` stay fast and print no Beam warning."""
    code = "import sys, rumi_core.cli.main; print('apache_beam' in sys.modules, 'ml_dtypes' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["False", "False"]
    helped = subprocess.run(
        [sys.executable, "-c", "from rumi_core.cli.main import main; main()", "--help"], capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0 and "convert" in helped.stdout
    assert "apitools" not in helped.stderr + helped.stdout


def test_read_progress_bar_on_request(cube: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, blob, data = cube
    frames = HeaderBlob.from_bytes(blob).layout.frame_count
    shown = invoke("read", str(path), "-o", str(tmp_path / "p.npy"), "--progress", "--threads", "2")
    assert shown.exit_code == 0 and f"read {frames} frames" in shown.output
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), data)
    quiet = invoke("read", str(path), "-o", str(tmp_path / "q.npy"))
    assert quiet.exit_code == 0 and "frames" not in quiet.output


def test_tiny_tiles_warn_and_a_cube_they_would_bloat_is_refused(tmp_path: Path) -> None:
    from pipelines.testing import write_geotiff

    scene = write_geotiff(
        str(tmp_path / "s_20210517_B04.tif"), np.ones((1, 64, 64), "uint16"), epsg=32632, transform=(10, 0, 600000, 0, -10, 5300000)
    )
    out = tmp_path / "out"
    result = invoke("convert", scene, "--out", str(out), "--tile-size", "7", "--time", "2021-05-17", "--no-catalog")
    assert "warning: --tile-size 7 is below 64" in result.output
    assert result.exit_code == 1 and "nothing was produced" in result.output
    assert "into frames of 49 samples, fewer than 256" in (out / "dead-letter.jsonl").read_text()
    # The run that made nothing says why on the terminal too, not only in the dead-letter file.
    assert f"nothing was produced: {scene}: --tile-size 7 cuts cube" in result.output and "other dead letter" not in result.output
    assert not list(out.glob("*.rumi"))


def test_convert_errors_show_no_password_or_signature(tmp_path: Path) -> None:
    """A --stac-api that cannot be reached is named, and the library's message quoting it, without its credentials."""
    url = "http://alice:pw123@127.0.0.1:9/api?X-Goog-Credential=svc&X-Goog-Signature=deadbeef&v=1"
    result = CliRunner().invoke(cli, ["convert", "--stac-api", url, "--bbox", "13,52,13.1,52.1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "--stac-api http://alice@127.0.0.1:9/api?v=1: " in result.output, result.output
    assert "pw123" not in result.output and "deadbeef" not in result.output and "X-Goog" not in result.output


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full to stand for a full disk")
@pytest.mark.parametrize("command", [["validate"], ["info", "--json"], ["header", "-o", "{out}.rumih"], ["read", "-o", "{out}.npy"]])
def test_a_standard_output_that_cannot_be_written_is_one_line_and_status_2(
    cube: tuple[Path, bytes, np.ndarray], tmp_path: Path, command: list[str]
) -> None:
    """``> /dev/full`` (a full disk) gave a traceback and status 1, which ``rumi validate`` gives an invalid file."""
    path = cube[0]
    rumi = os.path.join(os.path.dirname(sys.executable), "rumi")
    args = [rumi, command[0], str(path), *(a.format(out=tmp_path / "x") for a in command[1:])]
    with open("/dev/full", "w") as full:
        done = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert done.returncode == 2 and done.stderr == "Error: cannot write to standard output: No space left on device\n", done.stderr


def test_o_dash_is_refused_not_written_as_a_file_named_dash(
    cube: tuple[Path, bytes, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rumi header x.rumi -o -`` wrote a file called "-" where a user meant standard output."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["header", str(cube[0]), "-o", "-"])
    assert result.exit_code == 2 and "-o -: the output is written to a file, not to standard output" in result.output
    assert not (tmp_path / "-").exists()
