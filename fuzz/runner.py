"""Run the fuzzer: a supervisor process and one worker under resource limits.

The supervisor (:func:`run`) writes the corpus, starts a worker with
``RLIMIT_AS`` set before the interpreter starts (so rumi_core's default
:class:`~rumi_core.Limits` are derived from it), and watches a small progress
file the worker updates before every call. Input ``i`` of a run with seed
``s`` is built from ``random.Random(f"{s}:{i}")`` alone, so:

* an exception other than ``RumiError``, a ``MemoryError``, a call past its
  time limit (``setitimer`` in the worker) or a disagreement is caught by the
  worker, minimised there and written as a finding;
* a crash (the worker dies) or a hang the timer cannot interrupt (no progress
  for several time limits: the supervisor kills the worker) is recorded by
  the supervisor from the index the worker was at, and a new worker carries
  on with the next input.

A finding is a directory holding ``input.rumi``, ``input.rumih`` and
``finding.json`` (target, kind, message, seed name, mutators, run seed and
index); :func:`check` replays one under the same limits.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FuzzSummary", "check", "run", "worker"]

_PROGRESS = struct.Struct("<qqq")  # index being run, inputs finished, minimisation calls (a heartbeat)
DEFAULT_ADDRESS_SPACE = 3 << 30
"""Address-space limit of a worker: the interpreter with every import, plus the limits' share."""
DEFAULT_CALL_TIMEOUT = 10.0
"""Seconds one call may take before it is a finding."""


class CallTimeout(BaseException):
    """A call ran past its time limit."""


@dataclass(frozen=True)
class FuzzSummary:
    """What a run did."""

    executions: int
    findings: int
    seconds: float
    outcomes: dict[str, int]

    def report(self) -> str:
        """One line per figure, as ``make fuzz`` prints it."""
        per = self.seconds / self.executions * 1e3 if self.executions else 0.0
        lines = [
            f"executions: {self.executions}",
            f"findings: {self.findings}",
            f"time per execution: {per:.3f} ms ({self.seconds:.1f} s in all)",
        ]
        lines += [f"  {key}: {count}" for key, count in sorted(self.outcomes.items())]
        return "\n".join(lines)


# -- worker ------------------------------------------------------------------------------


def _limit_address_space(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _input_for(seed: int, index: int, anatomies: list[Any], targets: list[str]) -> tuple[Any, str, random.Random]:
    from fuzz.mutate import mutate

    rng = random.Random(f"{seed}:{index}")
    a = anatomies[rng.randrange(len(anatomies))]
    inp = mutate(a, rng)
    return inp, targets[rng.randrange(len(targets))], rng


def _all_targets() -> dict[str, Any]:
    from fuzz.targets import SELF_TESTS, TARGETS

    return {**TARGETS, **SELF_TESTS}


def _classify(target: Any, inp: Any, rng_state: object, workdir: Path, timeout: float) -> tuple[str, str]:
    """Run one call; return ``(outcome, message)`` where outcome is ok, rejected or a finding kind."""
    from rumi_core.errors import RumiError

    rng = random.Random()
    rng.setstate(rng_state)  # type: ignore[arg-type]
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        target(inp, rng, workdir)
    except RumiError:
        return "rejected", ""
    except CallTimeout:
        return "timeout", f"the call ran past its {timeout} s limit"
    except MemoryError:
        return "memory", traceback.format_exc(limit=-8)
    except AssertionError as err:
        return "disagreement", f"{err}\n{traceback.format_exc(limit=-8)}"
    except Exception as err:
        return f"exception:{type(err).__name__}", traceback.format_exc(limit=-8)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return "ok", ""


def _minimise(
    target: Any,
    inp: Any,
    rng_state: object,
    seed_file: bytes,
    seed_blob: bytes,
    kind: str,
    workdir: Path,
    timeout: float,
    heartbeat: Callable[[], None],
) -> Any:
    """Revert as much of the mutation as keeps the same finding (at most 200 calls).

    ``heartbeat`` is called before each call, so the supervisor sees progress.
    """
    from fuzz.mutate import Input

    # A call that timed out costs its whole time limit: try only the two whole reverts then.
    budget = [2 if kind == "timeout" else 200]

    def same(file: bytes, blob: bytes) -> bool:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        heartbeat()
        return _classify(target, Input(inp.seed, file, blob, inp.ops), rng_state, workdir, timeout)[0] == kind

    file, blob = inp.file, inp.blob
    if blob != seed_blob and same(file, seed_blob):
        blob = seed_blob
    if file != seed_file and same(seed_file, blob):
        file = seed_file
    for which in ("file", "blob"):
        current = file if which == "file" else blob
        original = seed_file if which == "file" else seed_blob
        diffs = [i for i in range(min(len(current), len(original))) if current[i] != original[i]]
        chunk = max(1, len(diffs) // 2)
        while diffs and chunk >= 1 and budget[0] > 0:
            kept: list[int] = []
            for start in range(0, len(diffs), chunk):
                part = diffs[start : start + chunk]
                trial = bytearray(current)
                for i in part:
                    trial[i] = original[i]
                candidate = bytes(trial)
                ok = same(candidate, blob) if which == "file" else same(file, candidate)
                if ok:
                    current = candidate
                else:
                    kept.extend(part)
            diffs = kept
            chunk //= 2
        if which == "file":
            file = current
        else:
            blob = current
    return Input(inp.seed, file, blob, inp.ops)


def _save_finding(directory: Path, inp: Any, record: dict[str, Any]) -> Path:
    digest = hashlib.sha256(inp.file + b"\0" + inp.blob + record["target"].encode()).hexdigest()[:12]
    out = directory / f"{record['target']}-{record['kind'].replace(':', '-')}-{digest}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "input.rumi").write_bytes(inp.file)
    (out / "input.rumih").write_bytes(inp.blob)
    (out / "finding.json").write_text(json.dumps({**record, "seed": inp.seed, "ops": list(inp.ops)}, indent=2) + "\n")
    return out


class _Progress:
    """The worker's side of the progress file: the input it is at, inputs done, and a heartbeat."""

    def __init__(self, view: mmap.mmap) -> None:
        self._view = view
        self._index = self._done = self._beats = 0

    def at(self, index: int, done: int) -> None:
        self._index, self._done, self._beats = index, done, 0
        _PROGRESS.pack_into(self._view, 0, index, done, 0)

    def beat(self) -> None:
        self._beats += 1
        _PROGRESS.pack_into(self._view, 0, self._index, self._done, self._beats)


def worker(args: dict[str, Any]) -> int:
    """Run inputs ``start..stop`` of a run in this process (started by :func:`run`)."""
    from fuzz.corpus import load_corpus
    from fuzz.mutate import anatomy

    def on_alarm(signum: int, frame: object) -> None:
        raise CallTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    seeds = load_corpus(args["corpus"])
    anatomies = [anatomy(s) for s in seeds]
    table = _all_targets()
    targets = list(args["targets"])
    findings = Path(args["findings"])
    seed, timeout = int(args["seed"]), float(args["call_timeout"])
    outcomes: Counter[str] = Counter()
    with open(args["progress"], "r+b") as f, mmap.mmap(f.fileno(), _PROGRESS.size) as view, tempfile.TemporaryDirectory() as tmp:
        progress = _Progress(view)
        workdir = Path(tmp)
        first = int(args["start"])
        for index in range(first, int(args["stop"])):
            progress.at(index, index - first)
            inp, name, rng = _input_for(seed, index, anatomies, targets)
            state = rng.getstate()
            outcome, message = _classify(table[name], inp, state, workdir, timeout)
            outcomes[f"{name}:{outcome if outcome in ('ok', 'rejected') else 'finding'}"] += 1
            if outcome not in ("ok", "rejected"):
                origin = next(a.seed for a in anatomies if a.seed.name == inp.seed)
                small = _minimise(table[name], inp, state, origin.file, origin.blob, outcome, workdir, timeout, progress.beat)
                record = {"target": name, "kind": outcome, "message": message, "run_seed": seed, "index": index, "minimised": True}
                print(
                    f"finding at input {index}: {name} {outcome} -> {_save_finding(findings, small, record)}", file=sys.stderr, flush=True
                )
            progress.at(index, index - first + 1)
    print(json.dumps(dict(outcomes)), flush=True)
    return 0


# -- supervisor ----------------------------------------------------------------------------


def _start_worker(args: dict[str, Any], address_space: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fuzz", "worker", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: _limit_address_space(address_space),
        cwd=Path(__file__).resolve().parent.parent,
    )


def run(
    *,
    executions: int,
    seed: int,
    findings: str | os.PathLike[str],
    corpus: str | os.PathLike[str] | None = None,
    targets: list[str] | None = None,
    peer_python: str | None = None,
    address_space: int = DEFAULT_ADDRESS_SPACE,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    report_every: float = 60.0,
) -> FuzzSummary:
    """Fuzz ``executions`` inputs with one worker; print progress every ``report_every`` seconds."""
    from fuzz.corpus import generated_corpus, load_corpus, peer_corpus, save_corpus
    from fuzz.mutate import anatomy
    from fuzz.targets import TARGETS

    names = targets or list(TARGETS)
    table = _all_targets()
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown targets {unknown}; choose from {sorted(table)}")
    found_dir = Path(findings)
    with tempfile.TemporaryDirectory(prefix="rumi-fuzz-") as tmp:
        corpus_dir = Path(corpus) if corpus is not None else Path(tmp) / "corpus"
        if corpus is None or not any(corpus_dir.glob("*.rumi")):
            seeds = generated_corpus()
            if peer_python:
                seeds += peer_corpus(peer_python)
            save_corpus(seeds, corpus_dir)
        seeds = load_corpus(corpus_dir)
        print(f"corpus: {len(seeds)} files ({sum(s.name.startswith('peer-') for s in seeds)} written by rumi-eo)", flush=True)
        anatomies = [anatomy(s) for s in seeds]
        progress_path = Path(tmp) / "progress"
        progress_path.write_bytes(bytes(_PROGRESS.size))
        outcomes: Counter[str] = Counter()
        crashes = 0
        start_time = time.monotonic()
        next_report = start_time + report_every
        index = 0
        finished = 0
        while index < executions:
            progress_path.write_bytes(_PROGRESS.pack(index, 0, 0))
            args = {"corpus": str(corpus_dir), "seed": seed, "start": index, "stop": executions, "targets": names,
                    "findings": str(found_dir), "progress": str(progress_path), "call_timeout": call_timeout}  # fmt: skip
            proc = _start_worker(args, address_space)
            last_seen, last_change = (-1, -1, -1), time.monotonic()
            while proc.poll() is None:
                time.sleep(0.2)
                current = _PROGRESS.unpack(progress_path.read_bytes())
                now = time.monotonic()
                if current != last_seen:
                    last_seen, last_change = current, now
                elif now - last_change > 4 * call_timeout + 30:
                    proc.kill()
                    proc.wait()
                    break
                if now >= next_report:
                    print(f"... {finished + current[1]} executions, {time.monotonic() - start_time:.0f} s", flush=True)
                    next_report = now + report_every
            at, done, _ = _PROGRESS.unpack(progress_path.read_bytes())
            out = proc.stdout.read() if proc.stdout else ""
            proc.wait()
            if proc.returncode == 0:
                outcomes.update(json.loads(out.strip().splitlines()[-1]))
                finished += done
                break
            # The worker died or hung on input `at`: record it, go on after it.
            inp, name, _ = _input_for(seed, at, anatomies, names)
            kind = "hang" if proc.returncode == -signal.SIGKILL else f"crash:{proc.returncode}"
            record = {"target": name, "kind": kind, "message": f"the worker ended with {proc.returncode}", "run_seed": seed,
                      "index": at, "minimised": False}  # fmt: skip
            where = _save_finding(found_dir, inp, record)
            print(f"finding at input {at}: {name} {kind} -> {where}", file=sys.stderr, flush=True)
            crashes += 1
            outcomes[f"{name}:finding"] += 1
            finished += done + 1
            index = at + 1
        seconds = time.monotonic() - start_time
    found = sum(v for k, v in outcomes.items() if k.endswith(":finding"))
    return FuzzSummary(finished, found, seconds, dict(outcomes))


def check(
    directory: str | os.PathLike[str], *, address_space: int = DEFAULT_ADDRESS_SPACE, call_timeout: float = DEFAULT_CALL_TIMEOUT
) -> str:
    """Replay a finding under the run's limits; return the outcome (``ok`` or ``rejected`` when fixed)."""
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "replay", os.fspath(directory), str(call_timeout)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _limit_address_space(address_space),
        cwd=Path(__file__).resolve().parent.parent,
        timeout=4 * call_timeout + 60,
    )
    if proc.returncode != 0:
        return f"crash:{proc.returncode}"
    return proc.stdout.strip().splitlines()[-1]


def replay(directory: str | os.PathLike[str], call_timeout: float) -> str:
    """Run one saved finding in this process; return its outcome and print any message to stderr."""
    from fuzz.mutate import Input

    def on_alarm(signum: int, frame: object) -> None:
        raise CallTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    where = Path(directory)
    record = json.loads((where / "finding.json").read_text())
    inp = Input(record["seed"], (where / "input.rumi").read_bytes(), (where / "input.rumih").read_bytes(), tuple(record["ops"]))
    rng = random.Random(f"{record['run_seed']}:{record['index']}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
        outcome, message = _classify(_all_targets()[record["target"]], inp, rng.getstate(), Path(tmp), call_timeout)
    if message:
        print(message, file=sys.stderr)
    return outcome
