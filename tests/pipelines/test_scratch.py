"""Scratch files in the system's temporary folder: a later run removes what a killed run left, and nothing else (pipelines.scratch)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import click
import pytest

from pipelines import cli, scratch

if TYPE_CHECKING:
    from pathlib import Path

OWNER = """
import os, sys, time
from pipelines import scratch
dead, fork = int(sys.argv[1]), sys.argv[2] == "fork"
scratch._prefix = lambda kind: f"{kind}{dead}-"  # names its files by a process that does not run
log = scratch.new_log()
written = scratch.new_log()
with open(written, "w") as f:
    f.write("Traceback (most recent call last): ...")
with scratch.mirror() as mirror:
    os.makedirs(os.path.join(mirror, "bucket", "stac"))
    with open(os.path.join(mirror, "bucket", "stac", "catalog.json"), "w") as f:
        f.write("{}")
    if fork:
        child = os.fork()
        if child == 0:  # unwinds as a forked child leaving the block would
            scratch.remove(log)
            sys.exit(0)
        os.waitpid(child, 0)
    print(log, written, mirror, flush=True)
    while True:  # until SIGKILL; nothing else ends it, so the block is never left
        time.sleep(3600)
"""
"""A run elsewhere: holds an empty log, a log with something in it and a mirror, until it is killed."""


def _dead_pid() -> int:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(gone.stdout)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rp", "--kill-child", "true"], capture_output=True, check=False).returncode == 0


def _own_and_kill(tmp_path: Path, *, launcher: list[str], fork: bool) -> None:
    dead = _dead_pid()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owner = subprocess.Popen(
        [*launcher, sys.executable, "-c", OWNER, str(dead), "fork" if fork else "-"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert owner.stdout is not None
        log, written, mirror = owner.stdout.readline().split()
        assert {os.path.basename(p).split("-")[2] for p in (log, written, mirror)} == {str(dead)}
        assert scratch.sweep() == 0  # the owner lives (its pid in the names does not, nor may it in this namespace)
        assert os.path.exists(log) and os.path.exists(written)
        assert os.path.exists(os.path.join(mirror, "bucket", "stac", "catalog.json"))
    finally:
        owner.kill()  # SIGKILL: the owner removes nothing (unshare --kill-child passes it on)
        owner.communicate(timeout=60)
    removed, deadline = 0, time.monotonic() + 30
    while removed < 2 and time.monotonic() < deadline:  # unshare may end just before its child
        removed += scratch.sweep()
        time.sleep(0.05)
    assert removed == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [os.path.basename(written)]


@pytest.mark.parametrize("namespace", [False, True], ids=["same-pid-namespace", "other-pid-namespace"])
def test_a_live_owners_files_are_kept_and_a_killed_ones_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, namespace: bool) -> None:
    """Files another process holds are kept, whatever process id their names carry; once it is killed (SIGKILL),
    its empty log and its mirror go, and its log with Beam's output stays."""
    if namespace and not _unshare_works():
        pytest.skip("`unshare -rp --kill-child` (a user and a PID namespace) is not available here")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _own_and_kill(tmp_path, launcher=["unshare", "-rp", "--kill-child"] if namespace else [], fork=False)


def test_a_forked_child_leaving_the_block_keeps_its_parents_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked while the files are held, which unwinds through their removal, removes nothing and releases no lock."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _own_and_kill(tmp_path, launcher=[], fork=True)


def test_a_killed_runs_leftovers_go_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty log and a mirror that no process holds are removed, whatever process they name (this one too);
    a log with Beam's output (a failed run named it) and other files are kept."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = _dead_pid()
    (tmp_path / f"rumi-convert-{dead}-a1b2c3d_.log").write_bytes(b"")
    (tmp_path / f"rumi-convert-{dead}-bbbbbbbb.log").write_text("Traceback (most recent call last): ...")
    (tmp_path / f"rumi-stac-{dead}-cccccccc" / "rumi" / "stac").mkdir(parents=True)
    (tmp_path / f"rumi-stac-{dead}-cccccccc" / "rumi" / "stac" / "catalog.json").write_text("{}")
    (tmp_path / f"rumi-convert-{os.getpid()}-dddddddd.log").write_bytes(b"")
    (tmp_path / f"rumi-stac-{os.getpid()}-eeeeeeee").mkdir()
    (tmp_path / "rumi-convert-x.log").write_bytes(b"")  # not a name this module makes
    assert scratch.sweep() == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"rumi-convert-{dead}-bbbbbbbb.log", "rumi-convert-x.log"])


def test_names_of_another_shape_are_never_touched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the exact names this module makes are removed: a user's folder that looks like a mirror is kept,
    and so are links, and anything that is not a plain file where a log would be."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "inside").mkdir(parents=True)
    (tmp_path / "rumi-stac-2024-06-12-backup").mkdir()
    (tmp_path / "rumi-stac-2024-06-12-backup" / "catalog.json").write_text("{}")
    (tmp_path / "rumi-stac-1-final").mkdir()
    (tmp_path / "rumi-stac-0123-abcdefgh").mkdir()  # no process id starts with 0
    (tmp_path / "rumi-stac-123-ABCDEFGH").mkdir()  # not tempfile's alphabet
    (tmp_path / "rumi-stac-123-abcdefgh.log").mkdir()
    (tmp_path / "rumi-convert-123-abcdefgh.log.bak").write_bytes(b"")
    (tmp_path / "rumi-convert-123-abcdefghi.log").write_bytes(b"")
    (tmp_path / "rumi-convert-123-abcdefgh").write_bytes(b"")
    (tmp_path / "rumi-stac-124-abcdefgh").symlink_to(elsewhere / "inside")
    (tmp_path / "rumi-convert-125-abcdefgh.log").symlink_to(elsewhere / "nothing")
    (tmp_path / "rumi-convert-126-abcdefgh.log").mkdir()
    (tmp_path / "rumi-stac-127-abcdefgh").write_bytes(b"")
    os.mkfifo(tmp_path / "rumi-convert-128-abcdefgh.log")  # opening it must not wait for a writer
    before = sorted(p.name for p in tmp_path.iterdir())
    assert scratch.sweep() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "rumi-stac-2024-06-12-backup" / "catalog.json").read_text() == "{}"
    assert (elsewhere / "inside").is_dir()


def test_absurd_numbers_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name whose number no process id reaches is not this module's: skipped, never an error (anyone can write /tmp)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "rumi-convert-99999999999-x.log").write_bytes(b"")
    (tmp_path / "rumi-convert-99999999999-abcdefgh.log").write_bytes(b"")
    (tmp_path / f"rumi-stac-{'9' * 200}-abcdefgh").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert scratch.sweep() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_this_process_holds_what_it_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep in the owner's own process keeps what it holds (and closing its descriptors releases nothing);
    once released, an empty log goes with the next sweep and a written one stays."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    empty, written = scratch.new_log(), scratch.new_log()
    assert os.path.basename(empty).startswith(f"rumi-convert-{os.getpid()}-")
    with open(written, "w") as f:
        f.write("Traceback (most recent call last): ...")
    with scratch.mirror() as mirror:
        assert os.path.basename(mirror).startswith(f"rumi-stac-{os.getpid()}-")
        os.mkdir(os.path.join(mirror, "bucket"))
        assert scratch.sweep() == 0
        assert scratch.sweep() == 0  # the first sweep's closed descriptors left the locks in place
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(os.path.basename(p) for p in (empty, written, mirror))
    assert not os.path.exists(mirror)
    scratch.release(empty)
    scratch.release(written)
    assert scratch.sweep() == 1
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(written)]


def test_a_held_file_already_gone_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    log = scratch.new_log()
    os.unlink(log)
    scratch.remove(log)
    scratch.remove(log)
    with scratch.mirror() as mirror:
        shutil.rmtree(mirror)
    assert list(tmp_path.iterdir()) == []


def test_a_run_whose_log_vanished_still_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose log something else removed prints its summary (success) or its one-line error (failure), not a traceback."""
    import pipelines.convert

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    summary = SimpleNamespace(table=lambda: "the summary table", entries=[], produced=1, dead_letters=[])
    outcome: dict[str, Any] = {}

    def run(*args: object, **kwargs: object) -> object:
        (log,) = glob.glob(os.path.join(tmp_path, "rumi-convert-*.log"))
        os.unlink(log)
        if "error" in outcome:
            raise outcome["error"]
        return summary

    monkeypatch.setattr(pipelines.convert, "run", run)
    options = cast("Any", SimpleNamespace(write_catalog=False))
    cli._run_and_report(["scene.tif"], options, [], runner="ThreadedRunner", progress=False, incremental=False, strict=False)
    assert "the summary table" in capsys.readouterr().out

    outcome["error"] = RuntimeError("the worker fell over")
    with pytest.raises(click.ClickException) as failed:
        cli._run_and_report(["scene.tif"], options, [], runner="ThreadedRunner", progress=False, incremental=False, strict=False)
    assert failed.value.message == "the conversion failed: the worker fell over (rerun with -vv for details)"
    assert list(tmp_path.iterdir()) == []


def test_keeping_a_log_that_vanished_names_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    written = cli._new_log()
    with open(written, "w") as f:
        f.write("Traceback (most recent call last): ...")
    assert cli._keep_if_written(written)
    assert os.path.exists(written)
    gone = cli._new_log()
    os.unlink(gone)
    assert not cli._keep_if_written(gone)
