"""Scratch files in the system's temporary folder: a later run removes what a killed run left (pipelines.scratch)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from pipelines import scratch

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_killed_runs_leftovers_go_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty log and a mirror of a process that is gone are removed; a log with Beam's output (a failed run named it),
    a live process's files and other files are kept."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    (tmp_path / f"rumi-convert-{dead}-a.log").write_bytes(b"")
    (tmp_path / f"rumi-convert-{dead}-b.log").write_text("Traceback (most recent call last): ...")
    (tmp_path / f"rumi-stac-{dead}-c" / "rumi" / "stac").mkdir(parents=True)
    (tmp_path / f"rumi-stac-{dead}-c" / "rumi" / "stac" / "catalog.json").write_text("{}")
    (tmp_path / f"rumi-convert-{os.getpid()}-d.log").write_bytes(b"")
    (tmp_path / f"rumi-stac-{os.getpid()}-e").mkdir()
    (tmp_path / "rumi-convert-x.log").write_bytes(b"")  # not named by a process: not ours to judge
    assert scratch.sweep() == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"rumi-convert-{dead}-b.log", f"rumi-convert-{os.getpid()}-d.log", f"rumi-stac-{os.getpid()}-e", "rumi-convert-x.log"]
    )


def test_scratch_names_carry_the_process() -> None:
    assert scratch.prefix(scratch.LOG) == f"rumi-convert-{os.getpid()}-"
    assert scratch.prefix(scratch.MIRROR) == f"rumi-stac-{os.getpid()}-"
