"""Beam's own output during ``rumi convert`` goes to a file; the terminal gets one line per outcome."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipelines.testing import write_series

if TYPE_CHECKING:
    from collections.abc import Sequence


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, check=False, env=env)


def test_beam_logs_and_raw_output_go_to_the_file_and_this_process_logs_stay_on_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "beam.log"
    code = """
import logging, os, subprocess, sys
from pipelines.worker_output import worker_output_to
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
with worker_output_to(sys.argv[1]) as terminal:
    os.write(2, b"raw bytes on descriptor 2\\n")
    print("printed to sys.stderr", file=sys.stderr)
    subprocess.run([sys.executable, "-c", "import sys; print('a child process', file=sys.stderr)"], check=True)
    logging.getLogger("apache_beam.runners.common").error("a step failed")
    logging.getLogger("pipelines.convert").warning("ours")
    print("progress", file=terminal)
print("after", file=sys.stderr)
logging.getLogger("apache_beam").error("beam again, after")
"""
    done = _python(code, str(log))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["WARNING pipelines.convert: ours", "progress", "after", "ERROR apache_beam: beam again, after"]
    kept = log.read_text()
    beams = ("raw bytes on descriptor 2", "printed to sys.stderr", "a child process", "ERROR apache_beam.runners.common: a step failed")
    assert all(line in kept for line in beams)
    assert "ours" not in kept and "after" not in kept


def _convert(
    scenes: str, out: Path, *beam_args: str, verbose: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    code = "import sys; from rumi_core.cli.main import main; sys.exit(main())"
    command = ["convert", scenes, "--out", str(out), "--tile-size", "64", "--no-progress", *beam_args]
    return _python(code, *(["-vv"] if verbose else []), *command, env=env)


def _logs(stderr: str, pattern: str) -> Sequence[Path]:
    return [Path(m) for m in re.findall(pattern, stderr)]


@pytest.fixture
def scenes(tmp_path: Path) -> str:
    write_series(str(tmp_path / "scenes"), dates=["2024-04-02", "2024-04-20"], size=(128, 128), seed=5)
    return str(tmp_path / "scenes" / "*.tif")


def test_a_failed_step_is_one_line_and_its_tracebacks_are_in_a_file(scenes: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / ".parts").write_text("a file where the run's work folder goes")
    done = _convert(scenes, out)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: the conversion failed: ") and "Not a directory" in line and "Traceback" not in line
    # The exception first, without Beam's RuntimeError around it, then the step it was raised in.
    assert re.match(r"Error: the conversion failed: \w+: .* \(in the step Convert/[\w/]+\) \(rerun with -vv", line), line
    (log,) = _logs(line, r"Beam's output is in (\S+)\)")
    assert "Traceback (most recent call last)" in log.read_text()
    log.unlink()
    verbose = _convert(scenes, out, verbose=True)
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr
    assert not _logs(verbose.stderr, r"Beam's output is in (\S+)\)")


@pytest.mark.slow
def test_a_run_that_succeeds_shows_none_of_it_and_keeps_no_file(scenes: str, tmp_path: Path) -> None:
    # A temporary folder of the run's own: other runs (the other test worker's) make and keep logs in the shared one.
    private = tmp_path / "tmp"
    private.mkdir()
    env = {**os.environ, "TMPDIR": str(private)}
    for mode in ("multi_processing", "multi_threading"):
        done = _convert(scenes, tmp_path / mode, f"--direct_running_mode={mode}", "--direct_num_workers=2", env=env)
        # Without the file, worker processes log their start and stop here: 42 lines.
        assert done.returncode == 0 and done.stderr == "", done.stderr
    assert not list(private.glob("rumi-convert-*.log"))
