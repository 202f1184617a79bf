"""Inputs named as users name them: glob characters, ``?`` and linked folders in a real archive's paths.

A name is read as a pattern only when no file or folder has it; a ``?`` is a
query only in an ``http(s)://`` URL; a folder is searched through the folders
linked into it, as ``**`` searches.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import pytest
from click.testing import CliRunner

from pipelines.convert import run
from pipelines.jsonl import load_jsonl
from pipelines.options import ConvertOptions
from pipelines.testing import write_geotiff, write_series
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from pathlib import Path

    from catalog.testing import GCSEmulator

TRANSFORM = (10.0, 0.0, 600000.0, 0.0, -10.0, 5300040.0)
OPTIONS = {"tile_size": 32, "frame_unit": 0, "compression": "raster", "write_catalog": False}


def _inputs(out: Path) -> list[list[str]]:
    return [sorted(entry["inputs"]) for entry in load_jsonl(str(out / "manifest.jsonl"))]


def test_a_name_with_glob_characters_names_its_own_file(tmp_path: Path) -> None:
    """``scene[1]_…tif`` exists: as a pattern it named ``scene1_…tif`` instead, and a shell's ``*.tif`` (which gives
    each name) read the ``scene1`` series twice and the ``scene[1]`` one never, with no dead letter."""
    odd, _ = write_series(str(tmp_path / "in"), dates=["2023-01-05"], bands=("B04",), size=(48, 64), seed=3, prefix="scene[1]")
    plain, _ = write_series(str(tmp_path / "in"), dates=["2023-02-04"], bands=("B04",), size=(48, 64), seed=4, prefix="scene1")
    summary = run(odd, ConvertOptions(out=str(tmp_path / "one"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == () and _inputs(tmp_path / "one") == [odd]
    summary = run(sorted(odd + plain), ConvertOptions(out=str(tmp_path / "shell"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == () and _inputs(tmp_path / "shell") == [sorted(odd + plain)]
    result = CliRunner().invoke(cli, ["convert", *odd, "--out", str(tmp_path / "cli"), "--no-catalog", "--tile-size", "32"])
    assert result.exit_code == 0, result.output
    # A pattern is still a pattern where no file has its name.
    run([str(tmp_path / "in" / "scene?_*.tif")], ConvertOptions(out=str(tmp_path / "pattern"), **OPTIONS))  # type: ignore[arg-type]
    assert _inputs(tmp_path / "pattern") == [plain]


def test_a_question_mark_in_a_local_name_is_part_of_it(tmp_path: Path) -> None:
    """Cut at ``?`` as if it were a URL's query, ``q?dir/T32UPU_20230105T103021_B04.tif`` lost its date and band token:
    ``unknown-time`` dead letters."""
    folder = tmp_path / "q?dir"
    folder.mkdir()
    for day in ("20230105", "20230204"):
        for band in ("B04", "B08"):
            pixels = np.full((1, 48, 64), int(day[-2:]), dtype="uint16")
            write_geotiff(str(folder / f"T32UPU_{day}T103021_{band}.tif"), pixels, epsg=32632, transform=TRANSFORM, nodata=0)
    summary = run([str(folder)], ConvertOptions(out=str(tmp_path / "out"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == ()
    (entry,) = load_jsonl(str(tmp_path / "out" / "manifest.jsonl"))
    assert entry["times"] == ["2023-01-05T10:30:21Z", "2023-02-04T10:30:21Z"]
    assert [b["name"] for b in entry["bands"]] == ["B04", "B08"]


def test_a_folder_is_searched_through_the_folders_linked_into_it(tmp_path: Path) -> None:
    """``feb -> elsewhere/feb``: February's scenes were left out of the cube without a word; a link back up is searched once."""
    jan, _ = write_series(str(tmp_path / "series" / "jan"), dates=["2023-01-05"], size=(48, 64), seed=6)
    feb, _ = write_series(str(tmp_path / "elsewhere" / "feb"), dates=["2023-02-04"], size=(48, 64), seed=7)
    (tmp_path / "series" / "feb").symlink_to(tmp_path / "elsewhere" / "feb")
    (tmp_path / "series" / "jan" / "up").symlink_to(tmp_path / "series")  # a cycle
    summary = run([str(tmp_path / "series")], ConvertOptions(out=str(tmp_path / "out"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == ()
    (entry,) = load_jsonl(str(tmp_path / "out" / "manifest.jsonl"))
    assert len(entry["times"]) == 2 and len(entry["inputs"]) == len(jan) + len(feb)
    only_link = tmp_path / "links"
    only_link.mkdir()
    (only_link / "plain").symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(cli, ["convert", str(only_link), "--out", str(tmp_path / "cli"), "--no-catalog", "--tile-size", "32"])
    assert result.exit_code == 0, result.output  # was refused: "the directory holds no .tif … file"


@pytest.mark.parametrize("name", ["cat;c=d", "o\nx", "xo%20x"])
def test_an_output_name_stac_hrefs_would_misread_is_refused(tmp_path: Path, name: str) -> None:
    """pystac wrote a catalogue ``cat;c=d``'s documents into ``.cat`` and one ``o\\nx``'s into ``ox``; ``%20`` is a
    space to an HTTP reader. The run is refused before it starts, naming the option."""
    write_series(str(tmp_path / "in"), dates=["2023-01-05"], size=(48, 64), seed=8)
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--catalog", str(tmp_path / name)])
    assert result.exit_code == 2 and "--catalog" in result.output and "which STAC hrefs read as URL syntax" in result.output
    assert not (tmp_path / "out").exists()


def test_a_name_starting_with_a_dash_is_told_how_to_give_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every token starting with "-" is an option, even after "--": the error named no way out."""
    write_series(str(tmp_path / "-in"), dates=["2023-01-05"], size=(48, 64), seed=9)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["convert", "--out", "out", "--no-catalog", "--", "-in"])
    assert result.exit_code == 2 and "(a file or folder whose name starts with '-' is given as ./-in)" in result.output, result.output
    result = CliRunner().invoke(cli, ["convert", "--out", "out", "--no-catalog", "--tile-size", "32", "./-in"])
    assert result.exit_code == 0, result.output


def test_a_url_with_a_space_is_read_as_a_browser_would_send_it(tmp_path: Path) -> None:
    """libcurl refused "my scene…tif" ("Malformed input to a URL function"): every scene an unreadable dead letter."""
    from catalog.testing import RangeRequestServer

    paths, _ = write_series(str(tmp_path / "served"), dates=["2023-01-05", "2023-02-04"], size=(48, 64), seed=10, prefix="my scene")
    with RangeRequestServer(tmp_path / "served") as server:
        urls = [server.url(os.path.basename(p)) for p in paths]
        assert all(" " in url for url in urls)
        summary = run(urls, ConvertOptions(out=str(tmp_path / "out"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == () and [e.status for e in summary.entries] == ["written"]
    assert _inputs(tmp_path / "out") == [sorted(urls)]  # recorded as given


def test_a_double_star_over_a_cycle_of_links_ends(tmp_path: Path) -> None:
    """Python's recursive glob follows a link back up for ever: rumi convert 'tree/**/*.tif' ran until killed."""
    paths, _ = write_series(str(tmp_path / "tree" / "jan"), dates=["2023-01-05"], size=(48, 64), seed=11)
    (tmp_path / "tree" / "jan" / "up").symlink_to(tmp_path / "tree")
    (tmp_path / "tree" / "self").symlink_to(".")
    summary = run([str(tmp_path / "tree" / "**" / "*.tif")], ConvertOptions(out=str(tmp_path / "out"), **OPTIONS))  # type: ignore[arg-type]
    assert summary.dead_letters == () and _inputs(tmp_path / "out") == [sorted(paths)]


def test_a_bucket_name_with_glob_characters_names_its_own_object_or_folder(emulator: GCSEmulator, tmp_path: Path) -> None:
    from pipelines.bucket import output_store
    from pipelines.transforms.discover import discover

    paths, _ = write_series(str(tmp_path / "in"), dates=["2023-01-05"], bands=("B04",), size=(48, 64), seed=12)
    with open(paths[0], "rb") as f:
        data = f.read()
    for url in ("gs://rumi/names/dir[1]/S2[1]_B04.tif", "gs://rumi/names/dir1/S21_B04.tif"):
        output_store().write(url, data)
    assert [s.href for s in discover("gs://rumi/names/dir[1]/S2[1]_B04.tif")] == ["gs://rumi/names/dir[1]/S2[1]_B04.tif"]
    assert [s.href for s in discover("gs://rumi/names/dir[1]/")] == ["gs://rumi/names/dir[1]/S2[1]_B04.tif"]
    assert [s.href for s in discover("gs://rumi/names/dir?/*.tif")] == ["gs://rumi/names/dir1/S21_B04.tif"]  # still a pattern


def test_a_pattern_through_a_folder_whose_name_holds_brackets_says_how_to_write_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``in[1]/*.tif`` is a pattern whose ``[1]`` matches ``in1``: "no file matches" named no way out."""
    write_series(str(tmp_path / "in[1]"), dates=["2023-01-05"], size=(48, 64), seed=13)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["convert", "in[1]/*.tif", "--out", "out"])
    assert result.exit_code == 2, result.output
    assert (
        "no file matches this pattern (the folder in[1] exists: in a pattern, its name is written in[[]1], as in in[[]1]/*.tif)"
        in result.output
    )
    result = CliRunner().invoke(cli, ["convert", "in[[]1]/*.tif", "--out", "out", "--no-catalog", "--tile-size", "32"])
    assert result.exit_code == 0, result.output


def test_names_are_read_as_utf8_under_any_locale(tmp_path: Path) -> None:
    """Under an ASCII or Latin-1 locale Python read ``Zürich`` with the locale's codec, and GDAL, which takes names as
    UTF-8, was asked for another file: every input was a dead letter ("the name is not UTF-8 text"). The command starts
    again in Python's UTF-8 mode, and writes what it writes under a UTF-8 locale."""
    import subprocess
    import sys

    write_series(str(tmp_path / "in" / "Zürich"), dates=["2023-01-05"], bands=("B04",), size=(48, 64), seed=3)
    rumi = os.path.join(os.path.dirname(sys.executable), "rumi")
    ascii_locale = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}  # file names read as ASCII
    for name, env in (("ascii", ascii_locale), ("utf8", {**os.environ, "PYTHONUTF8": "1"})):
        done = subprocess.run(
            [rumi, "convert", str(tmp_path / "in"), "--out", str(tmp_path / name), "--tile-size", "32"],
            env=env, capture_output=True, text=True, encoding="utf-8", errors="replace", check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = load_jsonl(str(tmp_path / "ascii" / "manifest.jsonl"))
    assert all("/Zürich/" in href for href in entry["inputs"])
    assert (tmp_path / "ascii" / "manifest.jsonl").read_bytes() == (tmp_path / "utf8" / "manifest.jsonl").read_bytes()


def test_what_is_no_file_in_a_folder_is_a_dead_letter_not_a_wait(tmp_path: Path) -> None:
    """A FIFO named x.tif in an input folder held its worker for ever (GDAL opening it waits for a writer); given
    alone it was "no such file or directory", though it exists."""
    import subprocess
    import sys

    paths, _ = write_series(str(tmp_path / "in"), dates=["2023-01-05"], bands=("B04",), size=(48, 64), seed=3)
    os.mkfifo(tmp_path / "in" / "pipe_20230110.tif")
    rumi = os.path.join(os.path.dirname(sys.executable), "rumi")
    # The timeout guards against the hang; the run itself takes seconds.
    done = subprocess.run([rumi, "convert", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--tile-size", "32"],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (letter,) = load_jsonl(str(tmp_path / "out" / "dead-letter.jsonl"))
    assert letter["reason"] == "unreadable" and letter["href"].endswith("pipe_20230110.tif")
    assert "it is a FIFO, not a file" in letter["message"]
    assert _inputs(tmp_path / "out") == [sorted(paths)]
    alone = CliRunner().invoke(cli, ["convert", str(tmp_path / "in" / "pipe_20230110.tif"), "--out", str(tmp_path / "o2")])
    assert alone.exit_code == 2 and "pipe_20230110.tif: it is a FIFO, not a file" in alone.output, alone.output


def test_a_folder_that_cannot_be_listed_is_a_dead_letter(tmp_path: Path) -> None:
    """os.walk passes over a folder it may not list, without a word: its scenes were lost with exit 0."""
    import json
    import shutil
    import subprocess
    import sys

    write_series(str(tmp_path / "in"), dates=["2023-01-05"], bands=("B04",), size=(48, 64), seed=3)
    write_series(str(tmp_path / "in" / "closed"), dates=["2023-01-10"], bands=("B04",), size=(48, 64), seed=4)
    code = (
        "import json, sys; from pipelines.transforms.discover import discover; "
        "print(json.dumps([d.to_dict() for d in discover(sys.argv[1]) if hasattr(d, 'reason')]))"
    )
    command = [sys.executable, "-c", code, str(tmp_path / "in")]
    if os.geteuid() == 0:  # root lists any folder: without the capabilities that let it, as any user would
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without util-linux's setpriv to drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH")
        drop = "-dac_override,-dac_read_search"
        command = [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}", *command]
    (tmp_path / "in" / "closed").chmod(0)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    finally:
        (tmp_path / "in" / "closed").chmod(0o755)
    (letter,) = json.loads(done.stdout)
    assert (letter["href"], letter["reason"]) == (str(tmp_path / "in" / "closed"), "unreadable")
    assert "the folder cannot be listed: Permission denied" in letter["message"]


def test_a_name_holding_a_newline_stays_on_the_one_line_that_names_it(tmp_path: Path) -> None:
    """The dead-letter file's JSON escaped it; the terminal's "nothing was produced" line was cut in two."""
    bad = tmp_path / "new\nline.tif"
    bad.write_text("no raster")
    result = CliRunner().invoke(cli, ["convert", str(bad), "--out", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 1, result.output
    (line,) = [line for line in result.stderr.splitlines() if "nothing was produced" in line]
    assert "new\\nline.tif" in line and "no raster" not in line
