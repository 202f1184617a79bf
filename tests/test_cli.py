"""The ``rumi info``, ``rumi header`` and ``rumi read`` commands, through click's CliRunner."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
import numpy as np
from click.testing import CliRunner

import rumi_core
from rumi_core.cli.main import cli
from rumi_core.header import HeaderBlob

if TYPE_CHECKING:
    from pathlib import Path


def test_commands_are_registered() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("info", "header", "validate", "read"):
        assert name in result.output


def test_every_command_help_is_plain_text() -> None:
    """A command's help is read in a terminal: no reStructuredText markup from its docstring shows."""
    commands = cli.list_commands(click.Context(cli))
    assert {"convert", "export", "header", "info", "read", "search", "validate"} <= set(commands)
    for name in commands:
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "``" not in result.output, f"rumi {name} --help: {result.output}"


def test_info_json(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, data = cube_file
    result = CliRunner().invoke(cli, ["info", str(path), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert got["shape"] == list(data.shape)
    assert got["dtype"] == "uint16"
    assert got["bands"] == ["B2, Blue", "B3, Green", "B4, Red", "B8, NIR"]
    assert got["times"] == ["2021-01-01T00:00:00Z", "2021-01-11T00:00:00Z", "2021-01-21T10:30:00Z"]
    assert got["crs"] == "EPSG:32633"
    assert got["tile_size"] == [64, 48]
    assert got["frame_count"] == 2 * 3 * 4 * 3
    assert got["file_size"] == path.stat().st_size
    counts = [int(c) for c in HeaderBlob.from_bytes(blob).frame_byte_counts]
    assert got["frame_byte_counts"] == {"total": sum(counts), "min": min(counts), "max": max(counts)}
    assert got["raw_bytes"] == data.nbytes


def test_info_text_lists_bands(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, _, _ = cube_file
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 0
    assert "B8, NIR" in result.output
    assert "EPSG:32633" in result.output


def test_info_shows_control_characters_of_a_band_text_escaped(tmp_path: Path) -> None:
    """A newline, carriage return or terminal escape in a band text broke the listing or drove the terminal."""
    path = tmp_path / "c.rumi"
    rumi_core.write(path, np.zeros((2, 8, 8), "uint8"), bands=["red\nline\r\x1b[31m\x07", "nir"], times=["2020-01-01"])
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 0
    assert "    0: red\\nline\\r\\x1b[31m\\x07\n" in result.output and "\x1b" not in result.output, result.output


def test_info_on_a_broken_file_names_the_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.rumi"
    bad.write_bytes(b"NOPE" + bytes(400))
    result = CliRunner().invoke(cli, ["info", str(bad)])
    assert result.exit_code == 1
    assert "magic" in result.output
    assert "Traceback" not in result.output


def test_info_on_a_json_or_tiff_file_says_what_it_is(tmp_path: Path) -> None:
    """An item or a GeoTIFF given where a rumi file goes: the error says what the file is."""
    item = tmp_path / "item.json"
    item.write_text('{\n  "type": "Feature"}')
    tiff = tmp_path / "scene.tif"
    tiff.write_bytes(b"II*\x00" + bytes(400))
    for path, what in ((item, "JSON text"), (tiff, "a little-endian TIFF")):
        result = CliRunner().invoke(cli, ["info", str(path)])
        assert result.exit_code == 1 and f"the file is {what}, not a rumi file" in result.output, result.output


def test_header_default_output_name(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    path, blob, _ = cube_file
    result = CliRunner().invoke(cli, ["header", str(path)])
    assert result.exit_code == 0, result.output
    out = path.with_suffix(".rumih")
    assert out.read_bytes() == blob
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".partial")]


def test_header_default_output_is_the_blob_rumi_read_looks_for(cube_file: tuple[Path, bytes, np.ndarray]) -> None:
    """Beside any file, its name and h: for x.bin, x.binh, which rumi validate then checks with it (x.rumih it would not)."""
    path, blob, _ = cube_file
    other = path.with_name("cube.bin")
    other.write_bytes(path.read_bytes())
    assert CliRunner().invoke(cli, ["header", str(other)]).exit_code == 0
    assert path.with_name("cube.binh").read_bytes() == blob
    checked = CliRunner().invoke(cli, ["validate", str(other), "--quick"])
    assert checked.exit_code == 0 and f"and header blob {other}h checked" in checked.output, checked.output


def test_header_explicit_output(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, blob, _ = cube_file
    out = tmp_path / "elsewhere.bin"
    result = CliRunner().invoke(cli, ["header", str(path), "-o", str(out)])
    assert result.exit_code == 0
    assert out.read_bytes() == blob


def test_read_selection_to_npy(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, blob, data = cube_file
    (tmp_path / "cube.rumih").write_bytes(blob)
    out = tmp_path / "out.npy"
    args = ["read", str(path), "--header", str(tmp_path / "cube.rumih"), "--bands", "0,2", "--times", "1,2",
            "--window", "10:90,5:120", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), data[[1, 2]][:, [0, 2], 10:90, 5:120])


def test_read_bad_window_is_a_usage_error(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube_file
    result = CliRunner().invoke(cli, ["read", str(path), "--window", "nonsense", "-o", str(tmp_path / "x.npy")])
    assert result.exit_code == 2
    assert "y0:y1,x0:x1" in result.output


def test_read_window_partly_outside_is_clipped_and_reported(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, data = cube_file
    out = tmp_path / "x.npy"
    result = CliRunner().invoke(cli, ["read", str(path), "--window", "-5:5000,0:10", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "clipped to the image: 0:100,0:10" in result.output
    np.testing.assert_array_equal(np.load(out), data[:, :, 0:100, 0:10])


def test_read_window_outside_image_fails_cleanly(cube_file: tuple[Path, bytes, np.ndarray], tmp_path: Path) -> None:
    path, _, _ = cube_file
    out = tmp_path / "x.npy"
    result = CliRunner().invoke(cli, ["read", str(path), "--window", "4000:5000,0:10", "-o", str(out)])
    assert result.exit_code == 1
    assert "outside" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()
