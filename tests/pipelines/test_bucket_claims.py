"""One attached ``rumi convert`` at a time per ``gs://`` folder (pipelines.bucket_claims), on gcp-storage-emulator.

A run holding its claim is the real thing (:func:`claimed`, renewed by its
thread) or a claim left by a run killed with SIGKILL. The lease and the
renewal interval are shortened so that a lapse takes seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import pipelines.bucket_claims
from pipelines.bucket import output_store
from pipelines.bucket_claims import CLAIMS_DIR, claim_detached, claimed
from pipelines.convert import run
from pipelines.errors import OptionError
from pipelines.options import ConvertOptions
from pipelines.testing import write_series
from rumi_core.cli.main import cli

if TYPE_CHECKING:
    from collections.abc import Iterator

    from catalog.testing import GCSEmulator

BUCKET = "rumi"


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipelines.bucket_claims, "HEARTBEAT", 0.5)
    monkeypatch.setattr(pipelines.bucket_claims, "LEASE", 3.0)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    paths, _ = write_series(str(tmp_path_factory.mktemp("scenes")), dates=["2023-01-05", "2023-02-04"], size=(64, 80), seed=7)
    return sorted(paths)


def _names(prefix: str) -> list[str]:
    return sorted(b.name[len(prefix) + 1 :] for b in output_store().client.list_blobs(BUCKET, prefix=prefix + "/"))


def _options(out: str, **kwargs: Any) -> ConvertOptions:
    return ConvertOptions(out=f"gs://{BUCKET}/{out}", tile_size=32, frame_unit=0, compression="raster", **kwargs)


def _bookkeeping(prefix: str) -> list[str]:
    return [n for n in _names(prefix) if n.startswith((".rumi-tmp/", f"{CLAIMS_DIR}/"))]


def test_a_run_into_a_bucket_folder_another_run_writes_into_is_refused(emulator: GCSEmulator, scenes: list[str], short_lease: None) -> None:
    """The second run stops before it writes anything, naming the first; once the first ends, it runs and leaves no claim."""
    options = _options("busy", write_catalog=False)
    with claimed(options) as holding:
        with pytest.raises(
            OptionError, match=rf"^--out: another rumi convert \(run {holding.run_id} on .*\) is writing into gs://rumi/busy;"
        ):
            run(scenes, options)
        assert _names("busy") == [f"{CLAIMS_DIR}/{holding.run_id}"]  # the refused run withdrew its claim
        result = CliRunner().invoke(cli, ["convert", *scenes, "--out", options.out, "--no-catalog", "--no-progress"])
        assert result.exit_code == 1 and result.output.startswith("Error: --out: another rumi convert (run "), result.output
    summary = run(scenes, options)
    assert [e.status for e in summary.entries] == ["written"]
    assert _bookkeeping("busy") == []


def test_a_shared_bucket_catalogue_takes_one_run_at_a_time(emulator: GCSEmulator, scenes: list[str], short_lease: None) -> None:
    """Two --out folders with one --catalog: each run replaces the catalogue's objects, so the second waits its turn."""
    first = _options("shared/a", catalog=f"gs://{BUCKET}/shared/stac")
    with claimed(first), pytest.raises(OptionError, match=r"^--catalog: another rumi convert .* is writing into gs://rumi/shared/stac;"):
        run(scenes, _options("shared/b", catalog=f"gs://{BUCKET}/shared/stac"))
    assert _bookkeeping("shared/a") == _bookkeeping("shared/stac") == []


def test_of_two_runs_started_together_one_goes_on(emulator: GCSEmulator, short_lease: None) -> None:
    """Both write their claims, then read the other's: the one first written goes on, the other withdraws."""
    options = _options("together", write_catalog=False)
    start = threading.Barrier(2)
    refused = threading.Event()
    outcomes: list[str] = []

    def claim() -> None:
        start.wait()
        try:
            with claimed(options):
                outcomes.append("claimed")
                refused.wait(30)  # hold the claim until the other run has withdrawn (if both claimed, each waits 30 s)
        except OptionError as err:
            outcomes.append(str(err))
            refused.set()

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert sorted(o == "claimed" for o in outcomes) == [False, True], outcomes
    assert _bookkeeping("together") == []


def test_a_killed_runs_claim_lapses_and_its_temporaries_go(emulator: GCSEmulator, scenes: list[str], short_lease: None) -> None:
    """SIGKILL leaves a claim and temporaries; the next run waits out the lease, then removes both and converts."""
    options = _options("killed", write_catalog=False)
    code = (
        "import os, signal, sys\n"
        "import pipelines.bucket_claims as c\n"
        "from pipelines.bucket import output_store\n"
        "from pipelines.options import ConvertOptions\n"
        "c.HEARTBEAT = 0.5\n"
        f"with c.claimed(ConvertOptions(out={options.out!r})) as o:\n"
        "    output_store().write(o.parts_dir + '/cube/0000000000', b'frame')\n"
        "    print(o.run_id, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=False)
    assert killed.returncode == -signal.SIGKILL
    left = killed.stdout.strip()
    assert _bookkeeping("killed") == [f"{CLAIMS_DIR}/{left}", f".rumi-tmp/{left}/cube/0000000000"]
    summary = run(scenes, options)
    assert [e.status for e in summary.entries] == ["written"]
    assert _bookkeeping("killed") == []


def test_a_detached_jobs_temporaries_are_kept_and_stop_no_run(emulator: GCSEmulator, scenes: list[str], short_lease: None) -> None:
    """A Flex Template job outlives its launcher: its claim is never renewed, yet no later run deletes its frames."""
    options = _options("detached", write_catalog=False)
    job = claim_detached(options)
    output_store().write(f"{job.parts_dir}/cube/0000000000", b"frame of a running job")
    summary = run(scenes, options)
    assert [e.status for e in summary.entries] == ["written"]
    assert _bookkeeping("detached") == [f"{CLAIMS_DIR}/{job.run_id}", f".rumi-tmp/{job.run_id}/cube/0000000000"]


@pytest.fixture(autouse=True)
def _no_leftover_threads() -> Iterator[None]:
    before = {t.name for t in threading.enumerate()}
    yield
    assert not [t for t in threading.enumerate() if t.name == "rumi-claim" and t.name not in before]
