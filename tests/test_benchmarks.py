"""The benchmark scripts start: each imports what it uses (some import each other) and parses its options.

They are run by hand and no test times them, so a rename in one script or in
the packages they use would otherwise go unnoticed until the next run.
``--help`` imports a script's modules and exits before any work.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_") and "argparse" in p.read_text(encoding="utf-8"))
"""Every benchmark a user runs (``_training_peer.py`` runs inside another environment), by its file name."""


def test_every_benchmark_script_is_listed() -> None:
    assert {"convert.py", "convert_gcs.py", "decode_cost.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_help(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} --help failed: {done.stderr[-2000:]}"
    assert done.stdout.startswith("usage:")
