"""``python -m fuzz``: run the fuzzer, or replay a finding.

Examples::

    python -m fuzz run --executions 100000 --seed 1
    python -m fuzz check fuzz/regressions/read-memory-0123abcd4567
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from fuzz.runner import DEFAULT_ADDRESS_SPACE, DEFAULT_CALL_TIMEOUT, check, replay, run, worker
from rumi_core.testing import rumi_eo_environment


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run a subcommand."""
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # worker and replay are the runner's own entry points (its child processes), unlisted: a subcommand
    # without help= stays out of the list below the usage line, and the metavar names only the public ones.
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,check}")
    p_run = sub.add_parser("run", help="fuzz a fixed number of inputs and print executions, findings and time per execution")
    p_run.add_argument("--executions", type=int, default=10_000)
    p_run.add_argument("--seed", type=int, default=1)
    p_run.add_argument("--findings", default=str(Path(__file__).resolve().parent / "regressions"), help="where findings are written")
    p_run.add_argument("--corpus", help="a corpus directory to reuse (written there when empty)")
    p_run.add_argument("--targets", nargs="+", help="entry points to fuzz (default: all)")
    p_run.add_argument("--peer-python", help="python of the rumi-eo environment; default .venv-peer/bin/python when present")
    p_run.add_argument("--address-space", type=int, default=DEFAULT_ADDRESS_SPACE, help="RLIMIT_AS of the worker, in bytes")
    p_run.add_argument("--call-timeout", type=float, default=DEFAULT_CALL_TIMEOUT, help="seconds one call may take")
    p_run.add_argument("--report-every", type=float, default=60.0, help="seconds between progress lines")
    p_check = sub.add_parser("check", help="replay saved findings; exit 1 if any still misbehaves")
    p_check.add_argument("directories", nargs="+")
    p_worker = sub.add_parser("worker")
    p_worker.add_argument("args")
    p_replay = sub.add_parser("replay")
    p_replay.add_argument("directory")
    p_replay.add_argument("call_timeout", type=float)
    ns = parser.parse_args(argv)

    if ns.command == "worker":
        return worker(json.loads(ns.args))
    if ns.command == "replay":
        print(replay(ns.directory, ns.call_timeout))
        return 0
    if ns.command == "check":
        bad = 0
        for d in ns.directories:
            outcome = check(d)
            print(f"{d}: {outcome}")
            bad += outcome not in ("ok", "rejected")
        return 1 if bad else 0
    peer = ns.peer_python
    default_peer = rumi_eo_environment(Path(__file__).resolve().parent.parent).python
    if peer is None and default_peer.exists():
        peer = os.fspath(default_peer)
    summary = run(
        executions=ns.executions,
        seed=ns.seed,
        findings=ns.findings,
        corpus=ns.corpus,
        targets=ns.targets,
        peer_python=peer,
        address_space=ns.address_space,
        call_timeout=ns.call_timeout,
        report_every=ns.report_every,
    )
    print(summary.report())
    return 1 if summary.findings else 0


if __name__ == "__main__":
    sys.exit(main())
