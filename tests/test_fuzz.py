"""The fuzzing harness: a short fixed-seed run, its own detectors, and every kept finding.

The short run is part of ``make test``: a few thousand structure-aware inputs
against every entry point, under the harness's address-space and time limits,
must give no finding. ``make fuzz`` runs the same harness for longer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.runner import check

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = sorted(p for p in (ROOT / "fuzz" / "regressions").iterdir() if p.is_dir())


def _fuzz(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fuzz", "run", "--report-every", "600", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One written corpus shared by the runs of this module."""
    return tmp_path_factory.mktemp("fuzz-corpus")


def test_a_short_fixed_seed_run_finds_nothing(corpus: Path, tmp_path: Path) -> None:
    proc = _fuzz("--executions", "3000", "--seed", "20261202", "--corpus", str(corpus), "--findings", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "executions: 3000\nfindings: 0\ntime per execution:" in proc.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("self-test:exception", "exception:KeyError"),
        ("self-test:memory", "memory"),
        ("self-test:timeout", "timeout"),
        ("self-test:crash", "crash:-6"),
    ],
)
def test_each_kind_of_finding_is_caught_and_kept(corpus: Path, tmp_path: Path, target: str, kind: str) -> None:
    """A target that misbehaves is reported once per input and saved, and the run goes on."""
    proc = _fuzz("--executions", "2", "--targets", target, "--call-timeout", "1", "--corpus", str(corpus), "--findings", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "executions: 2\nfindings: 2\n" in proc.stdout
    found = sorted(tmp_path.iterdir())
    assert found
    record = json.loads((found[0] / "finding.json").read_text())
    assert (record["target"], record["kind"]) == (target, kind)
    if kind.startswith("exception"):
        # The exception does not depend on the input, so minimising reverts every mutation.
        seed = corpus / f"{record['seed']}.rumi"
        assert (found[0] / "input.rumi").read_bytes() == seed.read_bytes()
        assert record["minimised"]
    # The finding replays under the same limits, and still misbehaves.
    assert check(found[0], call_timeout=1).startswith(kind)


@pytest.mark.parametrize("finding", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_a_kept_finding_stays_fixed(finding: Path) -> None:
    assert check(finding) in ("ok", "rejected")


def test_help_lists_only_the_public_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    """worker and replay are the runner's child-process entry points: --help listed them as ==SUPPRESS==."""
    from fuzz.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    subcommands = shown.split("positional arguments:", 1)[1].split("options:", 1)[0]
    listed = [line.split()[0] for line in subcommands.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert "{run,check}" in shown and listed[:2] == ["run", "check"]
    assert "SUPPRESS" not in shown and "worker" not in listed and "replay" not in listed
