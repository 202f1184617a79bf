"""One end-to-end ``rumi convert`` on each Beam runner; every runner writes the same bytes.

Every output is compared by SHA-256: the ``.rumi`` files, their ``.rumih``
header blobs, the manifest and the STAC catalogue (items, collections, the
parquet index, thumbnails). None of them holds a timestamp of the run, so no
field is exempt. ``compression="auto"`` and ``--frame-unit auto`` decide from
the data alone (the decode-speed floor is a cost model, not a clock), which is
what lets two runs and four runners agree.

Runners: the FnApiRunner in memory and with two worker
processes, the portable runner against a local job service with an external
worker pool (how Flink runs Python; both started here as subprocesses on free
127.0.0.1 ports and stopped after), and the Dask runner on a two-process
``LocalCluster``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from pipelines.cli import convert_command
from pipelines.convert import run
from pipelines.options import ConvertOptions
from pipelines.testing import write_series
from rumi_core.compression import library_versions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from catalog.testing import GCSEmulator

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited with status {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@contextlib.contextmanager
def _service(args: list[str], port: int, log: Path) -> Iterator[None]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])  # the worker pool runs `python`
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for_port(port, process)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


IN_MEMORY = ["--direct_running_mode=in_memory"]


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("runner-scenes")
    write_series(str(directory), dates=["2023-01-05", "2023-02-04", "2023-03-06"], size=(150, 130), seed=5)
    return str(directory)


@pytest.fixture(scope="module")
def reference(scenes: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """sha256 of every output of the in-memory FnApiRunner (one worker, in the calling thread)."""
    return _convert(scenes, tmp_path_factory.mktemp("fnapi"), IN_MEMORY)


def _convert(scenes: str, out: Path, beam_args: list[str], runner: str = "FnApiRunner") -> dict[str, str]:
    """Run ``rumi convert`` (compression and frame unit ``auto``); return the SHA-256 of every output file."""
    result = CliRunner().invoke(convert_command, [scenes, "--out", str(out), "--tile-size", "64", "--runner", runner, *beam_args])
    assert result.exit_code == 0, result.output
    digests = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*")) if p.is_file()}
    assert any(k.endswith(".rumi") for k in digests) and any(k.endswith(".rumih") for k in digests)
    assert any(k.startswith("stac") and k.endswith(".json") for k in digests)
    return digests


def test_fnapi_in_memory_twice_writes_identical_files(scenes: str, reference: dict[str, str], tmp_path: Path) -> None:
    # Every file, STAC items included, is byte-identical in a second output directory.
    assert _convert(scenes, tmp_path, IN_MEMORY) == reference
    items = [json.loads(p.read_text()) for p in (tmp_path / "stac").rglob("*.json") if "rumi:frame_unit" in p.read_text()]
    assert items and all(i["properties"]["rumi:libraries"] == library_versions() for i in items)


def test_default_runs_a_worker_thread_per_core(scenes: str, reference: dict[str, str], tmp_path: Path) -> None:
    """Without Beam options, ``rumi convert`` runs the FnApiRunner on one worker thread per usable core: same bytes."""
    from apache_beam.options.pipeline_options import DirectOptions

    from pipelines.convert import _build
    from pipelines.options import ConvertOptions
    from pipelines.runners import usable_cores
    from pipelines.threaded_runner import ThreadedRunner

    pipeline = _build([scenes], ConvertOptions(out=str(tmp_path / "built")), [], None, None)
    direct = pipeline.options.view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ("multi_threading", usable_cores())
    assert isinstance(pipeline.runner, ThreadedRunner)
    given = _build([scenes], ConvertOptions(out=str(tmp_path / "built")), ["--direct_running_mode=multi_processing"], None, None)
    assert given.options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    assert _convert(scenes, tmp_path / "out", []) == reference


def test_fnapi_multi_threading_on_more_threads_than_cores(scenes: str, reference: dict[str, str], tmp_path: Path) -> None:
    assert _convert(scenes, tmp_path, ["--direct_num_workers=5"]) == reference


def test_fnapi_multi_processing(scenes: str, reference: dict[str, str], tmp_path: Path) -> None:
    args = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    assert _convert(scenes, tmp_path, args, runner="FnApiRunner") == reference


def test_portable_runner_with_external_worker_pool(scenes: str, reference: dict[str, str], tmp_path: Path) -> None:
    job_port, pool_port = _free_port(), _free_port()
    job = ["apache_beam.runners.portability.local_job_service_main", "--port", str(job_port)]
    pool = ["apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)]
    with _service(job, job_port, tmp_path / "job.log"), _service(pool, pool_port, tmp_path / "pool.log"):
        args = [f"--job_endpoint=localhost:{job_port}", "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}"]
        assert _convert(scenes, tmp_path / "out", args, runner="PortableRunner") == reference


def test_dask_runner_on_local_cluster(scenes: str, reference: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Same bytes as the in-memory runner; and none of dask's warnings that Beam's stages came again with another
    ``run_spec``, which a run of a few cubes printed up to hundreds of times."""
    from dask.distributed import LocalCluster

    # The scheduler always serves HTTP; with no address it tries port 8787 and
    # warns when another cluster holds it. Port 0 takes a free one.
    cluster: Any = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0")
    try:
        args = [f"--dask_client_address={cluster.scheduler_address}", "--dask_npartitions=4"]
        with caplog.at_level(logging.WARNING, logger="distributed"):
            assert _convert(scenes, tmp_path, args, runner="DaskRunner") == reference  # Beam knows it only by its qualified name
    finally:
        cluster.close()
    assert not [r for r in caplog.records if "run_spec" in r.getMessage()]


def _convert_to_bucket(scenes: str, prefix: str, beam_args: list[str], runner: str | None = None) -> dict[str, str]:
    """Convert to ``gs://rumi/<prefix>``; sha256 of every object there (none may be a temporary)."""
    import hashlib

    from pipelines.bucket import output_store

    # Frame unit and codec pinned: runners are compared byte for byte, not the measured choices.
    options = ConvertOptions(out=f"gs://rumi/{prefix}", tile_size=64, frame_unit=0, compression="raster", write_catalog=False)
    summary = run([scenes], options, beam_args, runner=runner)
    assert summary.produced and not summary.dead_letters
    found = {
        b.name[len(prefix) + 1 :]: hashlib.sha256(b.download_as_bytes()).hexdigest()
        for b in output_store().client.list_blobs("rumi", prefix=prefix + "/")
    }
    assert not [n for n in found if n.startswith(".rumi-tmp")]
    return found


@pytest.fixture(scope="module")
def bucket_reference(emulator: GCSEmulator, scenes: str) -> dict[str, str]:
    return _convert_to_bucket(scenes, "fnapi", [])


def test_dask_runner_writes_to_a_bucket(emulator: GCSEmulator, scenes: str, bucket_reference: dict[str, str]) -> None:
    from dask.distributed import LocalCluster

    cluster: Any = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0")
    try:
        args = [f"--dask_client_address={cluster.scheduler_address}", "--dask_npartitions=4"]
        assert _convert_to_bucket(scenes, "dask", args, runner="apache_beam.runners.dask.dask_runner.DaskRunner") == bucket_reference
    finally:
        cluster.close()


def test_external_worker_pool_writes_to_a_bucket(
    emulator: GCSEmulator, scenes: str, bucket_reference: dict[str, str], tmp_path: Path
) -> None:
    job_port, pool_port = _free_port(), _free_port()
    job = ["apache_beam.runners.portability.local_job_service_main", "--port", str(job_port)]
    pool = ["apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)]
    with _service(job, job_port, tmp_path / "job.log"), _service(pool, pool_port, tmp_path / "pool.log"):
        args = [
            f"--job_endpoint=localhost:{job_port}",
            "--environment_type=EXTERNAL",
            f"--environment_config=localhost:{pool_port}",
            "--sdk_worker_parallelism=2",  # two workers from the pool
        ]
        assert _convert_to_bucket(scenes, "portable", args, runner="PortableRunner") == bucket_reference


def test_the_cli_imports_beam_only_to_run() -> None:
    """Importing Beam takes seconds and logs through the root logger, which configured logging before ``rumi -vv`` could."""
    import subprocess
    import sys

    code = "import sys, pipelines.cli; sys.exit('apache_beam' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
