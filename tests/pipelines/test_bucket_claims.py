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
import time
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import pipelines.bucket_claims
from pipelines.bucket import output_store
from pipelines.bucket_claims import CLAIMS_DIR, claim_detached, claimed
from pipelines.convert import run
from pipelines.errors import OptionError, PipelineError
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


@pytest.mark.parametrize("body", [b"null", b"[1]", b'{"since": "yesterday"}', b'{"since": true, "detached": "no"}'])
def test_a_claim_that_is_no_claims_record_lapses_like_a_killed_runs(emulator: GCSEmulator, body: bytes, short_lease: None) -> None:
    """A claim object whose body is not a claim's (hostile, or written by another tool) is waited out, then deleted."""
    options = _options("odd", write_catalog=False)
    output_store().write(f"{options.out}/{CLAIMS_DIR}/not-a-run", body)
    with claimed(options) as holding:
        assert _bookkeeping("odd") == [f"{CLAIMS_DIR}/{holding.run_id}"]
    assert _bookkeeping("odd") == []


def test_folder_placeholders_are_no_runs_and_a_detached_jobs_temporaries_stay(emulator: GCSEmulator, short_lease: None) -> None:
    """The empty objects a console or gcsfuse writes for a folder name no run: they neither hold a claim nor own temporaries."""
    options = _options("placeholders", write_catalog=False)
    job = claim_detached(options)
    output_store().write(f"{job.parts_dir}/cube/0000000000", b"frame of a running job")
    for folder in (".rumi-tmp", CLAIMS_DIR):
        output_store().write(f"{options.out}/{folder}/", b"")
    with claimed(options):
        pass
    assert f".rumi-tmp/{job.run_id}/cube/0000000000" in _bookkeeping("placeholders")


def test_a_run_whose_claim_lapsed_is_told_and_does_not_take_the_folder_back(
    emulator: GCSEmulator, monkeypatch: pytest.MonkeyPatch, short_lease: None
) -> None:
    """Renewals failing for a lease (the bucket answering 503): another run takes over; the first never re-creates its claim, and fails."""
    options = _options("lapsed", write_catalog=False)
    write_claim = pipelines.bucket_claims._write_claim
    failing: set[str] = set()

    def flaky(folder: str, run_id: str, **kwargs: Any) -> float:
        if run_id in failing:
            raise OSError("503 Service Unavailable")
        return write_claim(folder, run_id, **kwargs)

    monkeypatch.setattr(pipelines.bucket_claims, "_write_claim", flaky)
    with pytest.raises(PipelineError, match=r"^gs://rumi/lapsed: this run's claim was not renewed for 3 s"), claimed(options) as first:
        failing.add(first.run_id)
        with claimed(options) as second:  # waits out the lease of the first, then deletes its claim
            failing.clear()
            time.sleep(4 * pipelines.bucket_claims.HEARTBEAT)  # the first's renewals work again
            assert _bookkeeping("lapsed") == [f"{CLAIMS_DIR}/{second.run_id}"]
    assert _bookkeeping("lapsed") == []


def test_two_runs_sharing_only_a_catalogue_are_ordered_by_their_claims_on_it(
    emulator: GCSEmulator, monkeypatch: pytest.MonkeyPatch, short_lease: None
) -> None:
    """A run whose claim on the shared catalogue came after another's had looked waits its turn there, whatever its --out claim's age."""
    first = _options("race/a", catalog=f"gs://{BUCKET}/race/stac")
    second = _options("race/b", catalog=f"gs://{BUCKET}/race/stac")
    write_claim = pipelines.bucket_claims._write_claim
    catalogue_claimed, second_settled = threading.Event(), threading.Event()

    def late_on_the_catalogue(folder: str, run_id: str, **kwargs: Any) -> float:
        if folder == f"gs://{BUCKET}/race/stac" and threading.current_thread().name == "first" and not catalogue_claimed.is_set():
            catalogue_claimed.set()
            second_settled.wait(30)  # the first run's claim on the catalogue is written after the second has looked
        return write_claim(folder, run_id, **kwargs)

    monkeypatch.setattr(pipelines.bucket_claims, "_write_claim", late_on_the_catalogue)
    outcome: list[BaseException | None] = []

    def claim_first() -> None:
        try:
            with claimed(first):
                outcome.append(None)
        except OptionError as err:
            outcome.append(err)

    thread = threading.Thread(target=claim_first, name="first")
    thread.start()
    assert catalogue_claimed.wait(30)
    with claimed(second):
        second_settled.set()
        thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], OptionError), outcome
    assert str(outcome[0]).startswith("--catalog: another rumi convert")
    assert _bookkeeping("race/a") == _bookkeeping("race/b") == _bookkeeping("race/stac") == []


def test_ctrl_c_withdraws_the_runs_claim(emulator: GCSEmulator, scenes: list[str]) -> None:
    """A run ended by Ctrl-C leaves no claim: the next run into the folder waited for it to lapse, told that a run was killed."""
    out = f"gs://{BUCKET}/interrupted"
    command = [sys.executable, "-c", "from rumi_core.cli.main import main; main()", "convert", *scenes, "--out", out, "--no-catalog"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=os.environ.copy(), start_new_session=True)
    while process.poll() is None and not _bookkeeping("interrupted"):
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before its claim was seen"
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert [n for n in _bookkeeping("interrupted") if n.startswith(CLAIMS_DIR)] == []


@pytest.fixture(autouse=True)
def _no_leftover_threads() -> Iterator[None]:
    before = {t.name for t in threading.enumerate()}
    yield
    assert not [t for t in threading.enumerate() if t.name == "rumi-claim" and t.name not in before]


def test_a_submission_that_fails_is_one_line_and_leaves_no_claim(emulator: GCSEmulator, scenes: list[str]) -> None:
    """``--detach`` to a runner that cannot start (Dataflow without apache-beam[gcp]) showed a traceback, and each
    attempt left a detached claim that kept the folder's temporaries from every later run for 48 hours."""
    from click.testing import CliRunner

    from rumi_core.cli.main import cli

    command = ["convert", *scenes, "--out", f"gs://{BUCKET}/failed-launch", "--no-progress", "--detach", "--runner", "DataflowRunner"]
    result = CliRunner().invoke(cli, [*command, "--project=p", "--region=europe-west4", "--temp_location=gs://rumi/tmp"])
    assert result.exit_code == 1, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert line.startswith("Error: the submission failed: ") and line.endswith("(rerun with -vv for details)")
    assert "Traceback" not in result.output
    assert _bookkeeping("failed-launch") == []
