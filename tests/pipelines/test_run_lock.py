"""One conversion at a time per local output folder (:mod:`pipelines.run_lock`).

Two runs into one ``--out`` removed each other's work folders and catalogue
staging, and one failed midway on a file the other had removed. A second run
now stops before it starts, naming the folder; the lock goes with the process
that holds it, however that process ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from pipelines.convert import _local_folders
from pipelines.errors import OptionError
from pipelines.options import ConvertOptions
from pipelines.run_lock import exclusive
from pipelines.testing import write_series
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from pathlib import Path


def test_a_second_run_into_a_busy_out_or_catalog_stops_before_it_starts(tmp_path: Path) -> None:
    write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=64, seed=2)
    out, shared = tmp_path / "out", tmp_path / "stac"
    command = ["convert", str(tmp_path / "scenes"), "--out", str(out), "--no-progress"]
    with exclusive([(str(out), "--out")]):
        busy = CliRunner().invoke(cli, command)
    assert busy.exit_code == 1, busy.output
    assert f"Error: --out: another rumi convert is writing into {out}; wait for it to end" in busy.output
    assert not out.exists()  # nothing of the refused run, and the holder's folder, empty, went with its lock
    with exclusive([(str(shared), "--catalog")]):
        busy = CliRunner().invoke(cli, [*command, "--catalog", str(shared)])
    assert busy.exit_code == 1 and "--catalog: another rumi convert is writing into" in busy.output, busy.output
    done = CliRunner().invoke(cli, [*command, "--catalog", str(shared)])  # both free again
    assert done.exit_code == 0 and "1 written" in done.output, done.output
    (tmp_path / "link").symlink_to(out)
    for same in (out, tmp_path / "link", f"{out}/"):  # one folder named twice is locked once
        with exclusive([(str(out), "--out"), (str(same), "--catalog")]):
            pass


def test_a_run_naming_another_runs_default_catalogue_stops_before_it_starts(tmp_path: Path) -> None:
    """A run into ``X`` writes its catalogue into ``X/stac``; a run into ``Y`` with ``--catalog X/stac`` beside it was
    not stopped (each locked another folder): one of them lost its items, or failed on the other's staging folder."""
    write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=64, seed=2)
    first = ConvertOptions(out=str(tmp_path / "X"))
    command = ["convert", str(tmp_path / "scenes"), "--out", str(tmp_path / "Y"), "--catalog", first.catalog_dir, "--no-progress"]
    with exclusive(_local_folders(first)):  # the folders the run into X holds while it runs
        busy = CliRunner().invoke(cli, command)
    assert busy.exit_code == 1 and f"--catalog: another rumi convert is writing into {first.catalog_dir}" in busy.output, busy.output


def test_a_run_that_writes_no_catalogue_leaves_no_catalogue_folder(tmp_path: Path) -> None:
    """The lock on the default OUT/stac made the folder: a run of unreadable inputs left it empty, and ``rumi search``
    then looked for its catalog.json. A refused run leaves nothing of its own at all."""
    (tmp_path / "scenes").mkdir()
    (tmp_path / "scenes" / "bad.tif").write_text("not a raster")
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["convert", str(tmp_path / "scenes"), "--out", str(out), "--no-progress"])
    assert done.exit_code == 1 and "nothing was produced" in done.output, done.output
    assert (out / "dead-letter.jsonl").is_file() and not (out / "stac").exists()
    other = tmp_path / "other"
    with exclusive(_local_folders(ConvertOptions(out=str(out)))):
        refused = CliRunner().invoke(cli, ["convert", str(tmp_path / "scenes"), "--out", str(other), "--catalog", str(out / "stac")])
    assert refused.exit_code == 1 and not other.exists() and not (out / "stac").exists(), refused.output


def test_a_catalogue_a_killed_run_had_moved_aside_is_put_back(tmp_path: Path) -> None:
    """A run killed between moving the catalogue aside and putting the new one in its place left the earlier
    catalogue only in ``.NAME-*-old``, which the next run removed as litter: a shared catalogue lost other runs' items."""
    shared = tmp_path / "shared"
    for name, origin in (("a", (600000.0, 5300040.0)), ("b", (700000.0, 5300040.0))):
        write_series(str(tmp_path / name), dates=["2023-01-05"], size=64, seed=2, origin=origin)
    runs = [
        ["convert", str(tmp_path / name), "--out", str(tmp_path / f"out-{name}"), "--catalog", str(shared), "--no-progress"]
        for name in ("a", "b")
    ]
    assert CliRunner().invoke(cli, runs[0]).exit_code == 0

    def items() -> list[str]:
        return sorted(p.name for p in shared.rglob("*.json") if p.name not in ("catalog.json", "collection.json"))

    assert len(items()) == 1
    os.rename(shared, tmp_path / f".shared-{'0' * 32}-old")  # where a kill inside the swap leaves it
    shared.mkdir()  # and the folder the next run's lock makes
    neighbour = tmp_path / f".shared-eu-{'1' * 32}-old"  # another catalogue's, "shared-eu", killed alike
    neighbour.mkdir()
    (neighbour / "catalog.json").write_text("{}")
    done = CliRunner().invoke(cli, runs[1])
    assert done.exit_code == 0, done.output
    assert len(items()) == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted([".shared.lock", neighbour.name])


def test_the_catalogues_lock_holds_after_the_catalogue_is_swapped_in(tmp_path: Path) -> None:
    """The lock was on the catalogue folder's inode, which the publish renames aside: from the first publish on, a
    second run into the same ``--catalog`` got in, removed the first one's staging folder, and the first failed."""
    catalog = str(tmp_path / "stac")
    with exclusive([(catalog, "--catalog")], swapped=[catalog]):
        os.rename(catalog, tmp_path / ".stac-old")  # what publishing does: the new catalogue takes the folder's place
        os.mkdir(catalog)
        with (
            pytest.raises(OptionError, match=f"another rumi convert is writing into {catalog}"),
            exclusive([(catalog, "--catalog")], swapped=[catalog]),
        ):
            pass
    with exclusive([(catalog, "--catalog")], swapped=[catalog]):  # free once the first run ends
        pass
    assert (tmp_path / ".stac.lock").is_file() and (tmp_path / ".stac.lock").stat().st_size == 0


def test_the_lock_ends_with_the_process_that_held_it(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    holder = (
        "import sys, time\nfrom pipelines.run_lock import exclusive\n"
        "with exclusive([(sys.argv[1], '--out')]):\n    print('held', flush=True)\n    time.sleep(600)"
    )
    with subprocess.Popen([sys.executable, "-c", holder, str(folder)], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None and process.stdout.readline() == "held\n"
            with pytest.raises(OptionError, match="another rumi convert is writing into"), exclusive([(str(folder), "--out")]):
                pass
        finally:
            process.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:
        try:
            with exclusive([(str(folder), "--out")]):
                break
        except OptionError:
            assert time.monotonic() < deadline, "the lock outlived the killed process"
            time.sleep(0.05)
    assert os.listdir(folder) == []  # no lock file left behind


def test_a_catalog_folder_that_holds_other_files_is_refused(tmp_path: Path) -> None:
    """Each run replaces the catalogue folder whole: ``--catalog`` naming ``--out`` (or a folder above it) removed the
    run's cubes, manifest and blobs, and a folder of other files lost them. Both are refused before anything is written."""
    write_series(str(tmp_path / "scenes"), dates=["2023-01-05"], size=64, seed=2)
    out = tmp_path / "out"
    command = ["convert", str(tmp_path / "scenes"), "--out", str(out), "--no-progress"]
    assert CliRunner().invoke(cli, command).exit_code == 0
    kept = sorted(p.name for p in out.iterdir())
    (tmp_path / "link").symlink_to(out)
    for folder in (out, tmp_path / "link", f"{out}/", tmp_path):
        refused = CliRunner().invoke(cli, [*command, "--catalog", str(folder)])
        assert refused.exit_code == 2 and "each run replaces the catalogue folder whole" in refused.output, refused.output
        assert sorted(p.name for p in out.iterdir()) == kept
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    refused = CliRunner().invoke(cli, [*command, "--catalog", str(notes)])
    assert refused.exit_code == 2 and "holds other files and no catalog.json" in refused.output, refused.output
    assert (notes / "todo.txt").read_text() == "mine"
    shared = tmp_path / "shared"
    for _ in range(2):  # a new folder, then the catalogue it became
        assert CliRunner().invoke(cli, [*command, "--catalog", str(shared)]).exit_code == 0
    assert (shared / "catalog.json").is_file()
    # Another run's OUT/stac is rebuilt by that run from its own cubes: a run adding to it lost its items at that
    # run's next re-run. It is refused; the run's own OUT/stac, given by name, is not.
    other = [*command[:2], "--out", str(tmp_path / "other"), "--no-progress"]
    refused = CliRunner().invoke(cli, [*other, "--catalog", str(out / "stac")])
    assert refused.exit_code == 2 and f"is in the output folder of another run ({out} holds its manifest.jsonl)" in refused.output
    assert not (tmp_path / "other").exists()
    assert CliRunner().invoke(cli, [*command, "--catalog", str(out / "stac")]).exit_code == 0
    # Only a rumi run's manifest, of cubes, marks its --out: a stray manifest.jsonl above refused every --catalog below
    # it; and a run's own OUT/stac is its own, also where OUT lies in another run's --out.
    home = tmp_path / "home"
    home.mkdir()
    (home / "manifest.jsonl").write_text('{"unrelated": 1}\n')
    assert CliRunner().invoke(cli, [*command[:2], "--out", str(home / "o"), "--catalog", str(home / "cat")]).exit_code == 0
    nested = out / "nested"
    assert CliRunner().invoke(cli, [*command[:2], "--out", str(nested), "--catalog", str(nested / "stac")]).exit_code == 0
