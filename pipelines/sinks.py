"""Writing the run's JSON-lines outputs: the manifest and the dead letters.

Both sinks collect their elements in
one place, sort them (by cube id, by href) so the bytes do not depend on the
runner, and replace the file atomically. Each emits the number of lines it
wrote, so a pipeline can end in one step that depends on every sink (the Dask
runner computes only what its last step needs).

:class:`WriteManifest` is the hand-off to the catalogue: a
conversion takes a tuple of publishing transforms, each applied to the
``PCollection`` of :class:`~pipelines.manifest.ManifestEntry`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apache_beam as beam
from apache_beam.pvalue import PCollection

from pipelines.assembly import write_atomic
from pipelines.bucket import is_gs, output_store
from pipelines.collect import Collect
from pipelines.counters import inc

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pipelines.deadletter import DeadLetter
    from pipelines.manifest import ManifestEntry

__all__ = ["WriteDeadLetters", "WriteManifest", "write_jsonl"]


def write_jsonl(path: str, records: Sequence[dict[str, Any]]) -> int:
    """Write one JSON object per line, atomically (a ``gs://`` object appears whole); return the number of lines."""
    text = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records)
    if is_gs(path):
        output_store().write(path, text.encode("utf-8"))
        return len(records)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
    return len(records)


def _write_manifest(entries: list[ManifestEntry], path: str) -> int:
    count = write_jsonl(path, [e.to_dict() for e in sorted(entries, key=lambda e: e.cube_id)])
    inc(WriteManifest, "cubes", count)
    return count


def _write_dead_letters(letters: list[DeadLetter], path: str) -> int:
    count = write_jsonl(path, [d.to_dict() for d in sorted(set(letters))])
    for letter in letters:
        inc(WriteDeadLetters, f"dead_letter.{letter.reason}")
    return count


@dataclass
class WriteManifest(beam.PTransform[PCollection["ManifestEntry"], PCollection[int]]):
    """Write the run manifest: one JSON line per cube, sorted by cube id."""

    path: str
    """Usually ``OUT/manifest.jsonl``."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, entries: PCollection[ManifestEntry]) -> PCollection[int]:
        """Collect, sort, write."""
        out: PCollection[int] = entries | "Collect" >> Collect() | "Write" >> beam.Map(_write_manifest, path=self.path)
        return out


@dataclass
class WriteDeadLetters(beam.PTransform[PCollection["DeadLetter"], PCollection[int]]):
    """Write every dead letter of the run, sorted and without repeats, and count them by reason."""

    path: str
    """Usually ``OUT/dead-letter.jsonl``."""

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, letters: PCollection[DeadLetter]) -> PCollection[int]:
        """Collect, sort, write."""
        out: PCollection[int] = letters | "Collect" >> Collect() | "Write" >> beam.Map(_write_dead_letters, path=self.path)
        return out
