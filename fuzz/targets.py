"""The entry points a fuzz input is handed to, and what each must do with it.

A target returns normally (the input was accepted) or raises the package's
root error, :class:`~rumi_core.errors.RumiError` (``CatalogError`` derives
from it). Any other outcome is a finding. ``agreement`` adds a differential
check: a read through the blob succeeds, and returns what a read without it
does, whenever ``validate`` accepts file and blob; and it fails whenever
``validate`` refuses a frame (*read enforces every decode-time MUST*).

The ``self-test:*`` targets misbehave on purpose, so the harness's own tests
can show that each kind of finding is caught.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import rumi_core
from fuzz.mutate import Input
from rumi_core.errors import FrameDecodeError, RumiError
from rumi_core.header import HeaderBlob

__all__ = ["SELF_TESTS", "TARGETS", "Disagreement", "Target"]

Target = Callable[[Input, random.Random, Path], None]


class Disagreement(AssertionError):
    """``read`` and ``validate`` disagree about an input."""


def _path(inp: Input, workdir: Path) -> Path:
    path = workdir / "input.rumi"
    path.write_bytes(inp.file)
    return path


def _validate_blob(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.validate(inp.file, inp.blob, threads=1)


def _validate(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.validate(inp.file, threads=1)


def _info(inp: Input, rng: random.Random, workdir: Path) -> None:
    json.dumps(rumi_core.info(inp.file).to_dict())


def _build_header(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.build_header(_path(inp, workdir))


def _blob(inp: Input, rng: random.Random, workdir: Path) -> None:
    HeaderBlob.from_bytes(inp.blob).to_bytes()


def _read(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.read(inp.file, inp.blob, threads=1)


def _read_threads(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.read(_path(inp, workdir), inp.blob, threads=2)


def _read_file(inp: Input, rng: random.Random, workdir: Path) -> None:
    rumi_core.read(inp.file, threads=1)


def _read_window(inp: Input, rng: random.Random, workdir: Path) -> None:
    lay = HeaderBlob.from_bytes(inp.blob).layout
    r0 = rng.randrange(min(lay.image_length, 1 << 20))
    c0 = rng.randrange(min(lay.image_width, 1 << 20))
    window = ((r0, min(lay.image_length, r0 + rng.randint(1, 5))), (c0, min(lay.image_width, c0 + rng.randint(1, 5))))
    bands = [rng.randrange(lay.samples_per_pixel)]
    times = [rng.randrange(lay.time_count)]
    rumi_core.read(inp.file, inp.blob, bands=bands, times=times, window=window, threads=1)


def _catalog_read(inp: Input, rng: random.Random, workdir: Path) -> None:
    from catalog.cube import Cube

    with Cube.open(_path(inp, workdir), header=inp.blob) as cube:
        result = cube.read(threads=1, labels=True)
        json.dumps([str(t) for t in result.times])


def _agreement(inp: Input, rng: random.Random, workdir: Path) -> None:
    try:
        rumi_core.validate(inp.file, inp.blob, threads=1)
    except FrameDecodeError:
        frame_refused = True
    except RumiError as err:
        frame_refused = (getattr(err, "field", None) or "").startswith("frame ")
        if not frame_refused:
            return  # refused before the frames: nothing to compare
    else:
        frame_refused = False
    try:
        through_blob = rumi_core.read(inp.file, inp.blob, threads=1)
    except RumiError as err:
        if frame_refused:
            return
        raise Disagreement(f"validate accepted file and blob, read refused them: {err}") from err
    if frame_refused:
        raise Disagreement("validate refused a frame, read returned the samples")
    without = rumi_core.read(inp.file, threads=1)
    if through_blob.tobytes() != without.tobytes():
        raise Disagreement("a read through the blob and a read without it return different bytes")


TARGETS: dict[str, Target] = {
    "validate_blob": _validate_blob,
    "validate": _validate,
    "info": _info,
    "build_header": _build_header,
    "blob": _blob,
    "read": _read,
    "read_threads": _read_threads,
    "read_file": _read_file,
    "read_window": _read_window,
    "catalog_read": _catalog_read,
    "agreement": _agreement,
}
"""Every entry point fuzzed, by name."""


def _raise_other(inp: Input, rng: random.Random, workdir: Path) -> None:
    raise KeyError("not a RumiError")


def _sleep(inp: Input, rng: random.Random, workdir: Path) -> None:
    time.sleep(3600)


def _allocate(inp: Input, rng: random.Random, workdir: Path) -> None:
    np.ones(1 << 46, dtype=np.uint8)


def _crash(inp: Input, rng: random.Random, workdir: Path) -> None:
    os.abort()


SELF_TESTS: dict[str, Target] = {
    "self-test:exception": _raise_other,
    "self-test:timeout": _sleep,
    "self-test:memory": _allocate,
    "self-test:crash": _crash,
}
"""Targets that misbehave on purpose, one per kind of finding."""
