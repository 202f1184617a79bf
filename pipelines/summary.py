"""The run summary: what a conversion produced, as a table.

``rumi convert`` ends with a table of cubes, frames,
input bytes, output bytes, ratio and throughput. :class:`Summary` is built
from the run's manifest and dead-letter files (so it is the same on every
runner, including those that report no metrics) plus the wall time and any
Beam counters the runner returned. Formatting is pure.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from pipelines.jsonl import load_jsonl
from pipelines.sentinel2.products import newest_versions, product_of
from pipelines.transforms.dead_letters import DeadLetter
from pipelines.transforms.manifest import ManifestEntry
from rumi_core.cli.options import counted

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["Summary", "format_bytes"]

_DUPLICATE_TIME: Final = re.compile(r"^(?P<step>\S+ on \S+) is also the time of ")
"""The time and grid that begin a ``duplicate-time`` dead letter's message
(:func:`pipelines.planning.grouping._resolve_duplicates`): one time step left out of its cube."""

_WHY_DROPPED: Final = {
    "older-processing": "a newer processing of their Sentinel-2 datatake is in the cube",
    "duplicate-time": "--duplicates kept another acquisition at their time",
}
"""Why an input was dropped (a cube's ``dropped``), by the reason the summary counts it under."""


def format_bytes(n: float) -> str:
    """Bytes in decimal units: ``'1.5 MB'``."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


@dataclass(frozen=True)
class Summary:
    """What one run produced."""

    entries: tuple[ManifestEntry, ...]
    """Manifest entries, written and skipped."""
    dead_letters: tuple[DeadLetter, ...]
    """Rejected inputs."""
    seconds: float
    """Wall time of the pipeline."""
    counters: Mapping[str, int] = field(default_factory=dict)
    """Beam counters ``"Namespace/name"`` the runner reported for the run's last pass (empty where it reports none)."""
    manifest_path: str = "manifest.jsonl"
    """Where the manifest is."""
    dead_letter_path: str = "dead-letter.jsonl"
    """Where the dead letters are."""
    stale: tuple[str, ...] = ()
    """Cubes of earlier runs that this run's supersede (:mod:`pipelines.stale`)."""
    pruned: bool = False
    """Whether :attr:`stale` were removed (``--prune``)."""
    unlisted: tuple[str, ...] = ()
    """Cubes of earlier runs left in ``OUT`` that this run neither wrote, kept nor superseded, so no longer listed."""
    unlisted_gone: tuple[str, ...] = ()
    """The inputs of :attr:`unlisted` that no longer exist."""
    unlisted_failed: tuple[str, ...] = ()
    """The inputs of :attr:`unlisted` that are dead letters of this run."""
    unlisted_path: str = "unlisted.jsonl"
    """Where :attr:`unlisted` are listed (:attr:`pipelines.options.ConvertOptions.unlisted_path`)."""

    @classmethod
    def from_files(
        cls,
        manifest_path: str,
        dead_letter_path: str,
        *,
        seconds: float,
        counters: Mapping[str, int] | None = None,
        statuses: Mapping[str, str] | None = None,
    ) -> Summary:
        """Load a run's manifest and dead letters, with each cube's status by its id (``written`` where not given)."""
        given = statuses or {}
        entries = tuple(ManifestEntry.from_dict(d, status=given.get(d["cube_id"], "written")) for d in load_jsonl(manifest_path))
        letters = tuple(DeadLetter.from_dict(d) for d in load_jsonl(dead_letter_path))
        return cls(entries, letters, seconds, dict(counters or {}), manifest_path, dead_letter_path)

    @property
    def written(self) -> tuple[ManifestEntry, ...]:
        """Cubes this run wrote."""
        return tuple(e for e in self.entries if e.status == "written")

    @property
    def produced(self) -> bool:
        """Whether the run has any cube to show, written now or already valid."""
        return bool(self.entries)

    def dropped(self) -> Counter[str]:
        """The inputs the cubes this run wrote dropped for another acquisition at their time, counted by why (:data:`_WHY_DROPPED`).

        An input is an ``older-processing`` where an input of its cube, kept or
        dropped, is a newer processing of its Sentinel-2 datatake
        (:mod:`pipelines.sentinel2.products`); any other is a ``duplicate-time``
        that ``--duplicates first`` or ``last`` dropped.
        """
        why: dict[str, str] = {}
        for entry in self.written:  # a cube kept from an earlier run dropped its inputs then, and its manifest line says so
            newest = newest_versions(product_of(href) for href in (*entry.inputs, *entry.dropped))
            for href in entry.dropped:
                product = product_of(href)
                older = product is not None and product.version < newest[product.datatake]
                why[href] = "older-processing" if older else "duplicate-time"
        return Counter(why.values())

    def left_out(self) -> tuple[str, ...]:
        """The time steps no cube holds since several acquisitions on one grid share them (``duplicate-time`` dead letters).

        Each is ``<time> on <grid>``, sorted.
        """
        found = (_DUPLICATE_TIME.match(d.message) for d in self.dead_letters if d.reason == "duplicate-time")
        return tuple(sorted({m.group("step") for m in found if m is not None}))

    def throughput(self) -> float:
        """Uncompressed bytes of the written cubes per second of wall time."""
        return sum(e.pixel_bytes for e in self.written) / self.seconds if self.seconds > 0 else 0.0

    def table(self) -> str:
        """The summary table, one row per cube and a total row, then the dead letters."""
        header = ("cube", "status", "shape (T,B,Y,X)", "frames", "input", "pixels", "output", "ratio")
        rows: list[Sequence[str]] = []
        for e in self.entries:
            ratio = e.pixel_bytes / e.file_bytes if e.file_bytes else 0.0
            rows.append(
                (
                    e.cube_id,
                    e.status,
                    "x".join(str(d) for d in e.shape),
                    str(e.frames),
                    format_bytes(e.input_bytes),
                    format_bytes(e.pixel_bytes),
                    format_bytes(e.file_bytes),
                    f"{ratio:.3f}",
                )
            )
        frames = sum(e.frames for e in self.entries)
        inputs = sum(e.input_bytes for e in self.entries)
        pixels = sum(e.pixel_bytes for e in self.entries)
        output = sum(e.file_bytes for e in self.entries)
        ratio = pixels / output if output else 0.0
        rows.append(
            (
                f"total: {counted(len(self.entries), 'cube')}",
                f"{len(self.written)} written",
                "",
                str(frames),
                format_bytes(inputs),
                format_bytes(pixels),
                format_bytes(output),
                f"{ratio:.3f}",
            )
        )
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in [header, *rows]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.insert(len(lines) - 1, "  ".join("-" * w for w in widths))
        written_input = sum(e.input_bytes for e in self.written)
        lines.append(
            f"{self.seconds:.1f} s; throughput {format_bytes(self.throughput())}/s of pixels, "
            f"{format_bytes(written_input / self.seconds if self.seconds > 0 else 0)}/s of input files"
        )
        if self.stale:
            cubes, verb, shown = _earlier_cubes(self.stale)
            if self.pruned:
                lines.append(f"pruned {cubes} of earlier runs that this run's supersede: {shown}")
            else:
                lines.append(
                    f"{cubes} of earlier runs {verb} superseded by this run's, which hold all their inputs, "
                    f"and no longer listed ({shown}): --prune removes them"
                )
        if self.unlisted:
            cubes, verb, shown = _earlier_cubes(self.unlisted)
            # Why no cube of this run holds all their inputs: inputs that left the archive, or are dead letters tonight
            # (a time step left out, a file gone bad); else they were not given.
            causes = []
            for hrefs, singular, plural in (
                (self.unlisted_gone, "no longer exists", "no longer exist"),
                (self.unlisted_failed, "is a dead letter of this run", "are dead letters of this run"),
            ):
                if hrefs:
                    more = ", ..." if len(hrefs) > 1 else ""
                    causes.append(f"{counted(len(hrefs), 'input')} of theirs {singular if len(hrefs) == 1 else plural} ({hrefs[0]}{more})")
            lines.append(
                f"{cubes} of earlier runs {verb} still in the output folder but in no manifest or catalogue, since this run "
                f"wrote no cube holding all their inputs ({'; '.join([shown, *causes])}); they are listed in "
                f"{self.unlisted_path} until a run holds their inputs again. "
                "Convert all inputs in one run to keep them listed, or give each set of inputs its own --out "
                "(they may share a --catalog)"
            )
        dropped = self.dropped()
        if dropped:
            detail = ", ".join(f"{r}: {n}" for r, n in sorted(dropped.items()))
            why = "; ".join(_WHY_DROPPED[r] for r in sorted(dropped))
            lines.append(f"dropped: {counted(dropped.total(), 'input file')} ({detail}), listed as dropped in {self.manifest_path}: {why}")
        if self.dead_letters:
            reasons = Counter(d.reason for d in self.dead_letters)
            detail = ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items()))
            lines.append(f"dead letters: {len(self.dead_letters)} ({detail}), listed in {self.dead_letter_path}")
        else:
            lines.append("dead letters: none")
        left_out = self.left_out()
        if left_out:
            shown = ", ".join(left_out[:3]) + (", ..." if len(left_out) > 3 else "")
            lines.append(
                f"left out: {counted(len(left_out), 'time step')} in no cube ({shown}), since several acquisitions on one grid "
                "share each time (duplicate-time); pass --duplicates first, last or mosaic to keep them"
            )
        return "\n".join(lines)


def _earlier_cubes(paths: Sequence[str]) -> tuple[str, str, str]:
    """``("2 cubes", "are", "a.rumi, b.rumi")`` for a summary line about earlier cubes (the first three named)."""
    shown = ", ".join(os.path.basename(p) for p in paths[:3]) + (", ..." if len(paths) > 3 else "")
    return counted(len(paths), "cube"), "is" if len(paths) == 1 else "are", shown
