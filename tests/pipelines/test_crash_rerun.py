"""A conversion killed with SIGKILL at several points, then run again, ends byte-identical to a clean run.

Each run is a separate ``rumi convert`` process of a multi-cube archive (four
monthly cubes). The test waits until the output directory shows that a given
stage has been reached (a frame part written, a cube published, the catalogue
being staged, the manifest written), kills the whole process group with
SIGKILL, runs the same command again to completion, and compares every file
of the output directory (files, blobs, dead letters, STAC items and
collections, ``items.parquet``, thumbnails) with a clean run's. Nothing of
the work folders (``.parts``, ``.staging``, ``.stac-*-staging``) may remain.

The codec and frame unit are pinned (``--compression raster --frame-unit 0``)
so the comparison tests the crash-safety logic, not the measured codec choice.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

import pytest

from pipelines.testing import write_series

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = pytest.mark.slow

WORK_FOLDERS = (".parts", ".staging", ".published")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("crash-scenes")
    dates = ["2023-01-05", "2023-02-04", "2023-03-06", "2023-04-05", "2023-04-25"]
    write_series(str(directory), dates=dates, size=(130, 110), seed=11)
    return str(directory)


def _command(scenes: str, out: Path) -> list[str]:
    code = "import sys; from pipelines import main; sys.exit(main())"
    return [
        sys.executable,
        "-c",
        code,
        scenes,
        "--out",
        str(out),
        "--tile-size",
        "32",
        "--cube-period",
        "P1M",
        "--compression",
        "raster",
        "--frame-unit",
        "0",
        "--no-progress",
    ]


def _snapshot(out: Path) -> dict[str, str]:
    """sha256 of every file under ``out``, by relative path."""
    digests: dict[str, str] = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, out)
            with open(path, "rb") as f:
                data = f.read()
            digests[rel] = hashlib.sha256(data).hexdigest()
    return digests


def _has_part(out: Path) -> bool:
    parts = out / ".parts"
    return parts.is_dir() and any(p.is_file() and not p.name.startswith(".") for d in parts.iterdir() if d.is_dir() for p in d.iterdir())


def _has_file(out: Path) -> bool:
    return out.is_dir() and any(p.suffix == ".rumi" for p in out.iterdir())


def _stac_staging(out: Path) -> bool:
    return out.is_dir() and any(p.name.startswith(".stac-") for p in out.iterdir())


def _has_manifest(out: Path) -> bool:
    return (out / "manifest.jsonl").is_file()


def _run_killed(command: list[str], out: Path, reached: Callable[[Path], bool], attempts: int = 3) -> bool:
    """Run ``command`` into a new ``out``, SIGKILL its process group once ``reached(out)``; whether it was killed before finishing.

    A stage that lasts milliseconds (the catalogue's staging folder) can pass
    between two looks on a loaded machine: a run that finished unkilled is
    thrown away and started again, up to ``attempts`` times.
    """
    for _ in range(attempts):
        shutil.rmtree(out, ignore_errors=True)
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while process.poll() is None:
                if reached(out):
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    return True
                time.sleep(0.002)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return False


@pytest.fixture(scope="module")
def clean(scenes: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("clean") / "out"
    subprocess.run(_command(scenes, out), check=True, capture_output=True)
    return _snapshot(out)


@pytest.mark.parametrize(
    "reached",
    [_has_part, _has_file, _stac_staging, _has_manifest],
    ids=["frames-written", "cube-published", "catalogue-staged", "manifest-written"],
)
def test_killed_then_rerun_is_byte_identical(scenes: str, clean: dict[str, str], tmp_path: Path, reached: Callable[[Path], bool]) -> None:
    out = tmp_path / "out"
    command = _command(scenes, out)
    killed = _run_killed(command, out, reached)
    subprocess.run(command, check=True, capture_output=True)
    after = _snapshot(out)
    leftovers = sorted(p for p in after if p.split(os.sep)[0] in WORK_FOLDERS or p.startswith(".stac-"))
    assert not leftovers, f"work files left behind: {leftovers}"
    assert not any(p.name.startswith(".stac-") or p.name in WORK_FOLDERS for p in out.iterdir())
    assert after == clean
    assert killed, f"the run finished before {reached.__name__} was seen; the kill point was not exercised"


def test_cubes_published_before_a_kill_are_skipped_by_the_rerun(scenes: str, clean: dict[str, str], tmp_path: Path) -> None:
    """The manifest is written once every cube is done, so a run killed after publishing a cube leaves only that cube's
    record in ``.published``; the rerun skips the cube (it converted it again before the record) and ends identical."""
    out = tmp_path / "out"
    command = _command(scenes, out)

    def recorded(out: Path) -> bool:
        return (out / ".published").is_dir() and any(p.suffix == ".jsonl" for p in (out / ".published").iterdir())

    assert _run_killed(command, out, recorded), "the run finished before a cube was recorded; the kill point was not exercised"
    kept = {p.stem for p in (out / ".published").iterdir() if p.suffix == ".jsonl"}
    rerun = subprocess.run(command, check=True, capture_output=True, text=True)
    skipped = {line.split()[0] for line in rerun.stdout.splitlines() if line.split()[1:2] == ["skipped"]}
    assert kept <= skipped, rerun.stdout
    assert not (out / ".published").exists()
    assert _snapshot(out) == clean


def test_temporaries_of_files_written_into_the_output_folder_are_made_in_its_work_folder(
    scenes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between creating a blob's, the manifest's or the dead letters' temporary and its rename leaves it in
    ``.staging``, which the rerun removes, so no stray ``.*.partial`` sits beside the cubes (the kill points above
    only catch that window by chance)."""
    import tempfile

    from pipelines.convert import run
    from pipelines.options import ConvertOptions

    out = tmp_path / "out"
    made: list[str] = []
    mkstemp = tempfile.mkstemp

    def recording(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = mkstemp(*args, **kwargs)
        made.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", recording)
    options = ConvertOptions(out=str(out), tile_size=32, cube_period="P1M", compression="raster", frame_unit=0)
    summary = run([scenes], options, ["--direct_num_workers=1"])
    assert summary.entries
    beside = [name for name in made if os.path.dirname(name) == str(out)]
    assert not beside, f"temporaries made beside the outputs: {beside}"
    staged = [os.path.basename(name) for name in made if os.path.dirname(name) == str(out / ".staging")]
    for kind in (".manifest.jsonl.", ".dead-letter.jsonl.", ".rumih."):
        assert any(kind in name for name in staged), f"no {kind} temporary in .staging: {staged}"


def _interrupted_while_reading(command: list[str], out: Path, stop: Callable[[int], None] | None = None, **popen: Any) -> tuple[int, str]:
    """Start ``command``, and once a frame part is written send SIGINT to its process group (or ``stop`` its process
    id); its status and standard error."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, text=True, **popen)
    while process.poll() is None and not _has_part(out):
        time.sleep(0.002)
    assert process.poll() is None, "the run finished before a frame part was seen; the interrupt point was not exercised"
    if stop is None:
        os.killpg(process.pid, signal.SIGINT)
    else:
        stop(process.pid)
    _, stderr = process.communicate(timeout=300)
    return process.returncode, stderr


def test_ctrl_c_ends_the_run_at_once_then_rerun_is_byte_identical(scenes: str, clean: dict[str, str], tmp_path: Path) -> None:
    """SIGINT to the process group (a terminal's Ctrl-C) while frames are read: status 130 and one line, no Beam teardown
    under running workers (which closed rasters GDAL was reading: a segmentation fault), and the same command resumes."""
    out = tmp_path / "out"
    command = _command(scenes, out)
    returncode, stderr = _interrupted_while_reading(command, out)
    assert returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted: no partial output has a final name; run the same command to resume"
    assert "Traceback" not in stderr and "Fatal Python error" not in stderr
    subprocess.run(command, check=True, capture_output=True)
    assert _snapshot(out) == clean


def test_sigterm_ends_the_run_as_ctrl_c_does(scenes: str, clean: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM, as systemd, Kubernetes, Airflow or ``kill`` stop a task, to the run's process alone: it died at once
    without a word, leaving its log behind; now it ends as Ctrl-C does, with status 143 (128 + SIGTERM)."""
    out = tmp_path / "out"
    command = _command(scenes, out)
    stopped: list[int] = []

    def terminate(pid: int) -> None:
        stopped.append(pid)
        os.kill(pid, signal.SIGTERM)

    returncode, stderr = _interrupted_while_reading(command, out, stop=terminate)
    assert returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip().splitlines()[-1] == "terminated: no partial output has a final name; run the same command to resume"
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"rumi-convert-{stopped[0]}-*"))  # its log went with it
    assert not (out / "stac").exists()  # nor the empty catalogue folder its lock made
    subprocess.run(command, check=True, capture_output=True)
    assert _snapshot(out) == clean


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_before_the_run_starts_ends_it_with_128_plus_the_signal(tmp_path: Path, stop: signal.Signals) -> None:
    """Ctrl-C while ``rumi`` still prepares (here, a STAC API search that gets no answer): status 130, as a shell
    reports an interrupted program, not click's "Aborted!" and 1; nothing is written. SIGTERM alike, with 143, where
    the process died on the spot (status -15)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(120)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    code = "from rumi_core.cli.main import main; main()"
    out = tmp_path / "out"
    command = [sys.executable, "-c", code, "convert", "--stac-api", url, "--bbox", "13,52,13.1,52.1", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, text=True)
    try:
        connection, _ = listener.accept()  # the search has started and waits for its answer
        os.killpg(process.pid, stop)
        _, stderr = process.communicate(timeout=60)
        connection.close()
    finally:
        listener.close()
    assert process.returncode == 128 + stop, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr, stderr
    assert not out.exists()


def test_a_run_started_with_sigint_ignored_keeps_ignoring_it(scenes: str, clean: dict[str, str], tmp_path: Path) -> None:
    """A run started with SIGINT ignored (``nohup``, or ``&`` in a script) is not ended by one."""
    out = tmp_path / "out"

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    returncode, stderr = _interrupted_while_reading(_command(scenes, out), out, preexec_fn=ignore_sigint)
    assert returncode == 0, stderr
    assert _snapshot(out) == clean


_WORKING_RUN = """
import subprocess, sys
from pipelines.cli import _interrupt_ends_the_process
with _interrupt_ends_the_process(sys.stderr, None):
    # A worker as Beam's multi_processing mode starts one: a shell, and a Python process below it.
    subprocess.Popen(["sh", "-c", "sleep 300; true"])
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print("working", flush=True)
    sys.stdin.read()
"""


def test_sigterm_to_the_run_alone_stops_its_worker_processes() -> None:
    """SIGTERM to the run's process alone (``kill``, ``timeout``, a scheduler that does not stop the group) left Beam's
    multi_processing workers running, reparented to init, for two minutes, each holding a worker's memory."""
    import psutil

    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    run = subprocess.Popen([sys.executable, "-c", _WORKING_RUN], text=True, **pipes)  # type: ignore[call-overload]
    workers: list[psutil.Process] = []
    try:
        assert run.stdout is not None and run.stdout.readline() == "working\n"
        workers = psutil.Process(run.pid).children(recursive=True)
        assert len(workers) >= 3  # sh, its sleep, and the Python one
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait(timeout=30) == 128 + signal.SIGTERM
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, [w.pid for w in alive]
    finally:
        for worker in workers:  # what outlived the run, reparented to init, holds its pipes open
            with contextlib.suppress(psutil.Error):
                worker.kill()
        run.kill()
        run.communicate()
