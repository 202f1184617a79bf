"""Candidates: codecs measured on the whole sample, and the pick among them.

Specification section *Frames* leaves every frame's graph to the writer;
*Choosing a frame unit* says compression SHOULD be measured. Each candidate
compresses the whole sample for real (:func:`measure`); its decode speed is
*predicted* by the static cost model of
:mod:`rumi_core.compression.decode_cost`, never timed, so the pick
(:func:`pick`: the smallest candidate predicted to decode at the floor) is a
pure function of the sample, the options and the library versions
(:func:`library_versions`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from rumi_core.codecs import BoundedCodec
from rumi_core.compression.decode_cost import MODEL
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from rumi_core.codecs import ErrorBound, FrameCodec

__all__ = [
    "DECODE_FLOOR",
    "MODES",
    "Candidate",
    "CodecMeasurements",
    "CompressionChoice",
    "Mode",
    "library_versions",
    "measure",
    "meets_floor",
    "parse_decode_floor",
    "parse_mode",
    "pick",
]

Mode = Literal["auto", "max", "portable"]
MODES: Final[tuple[str, ...]] = ("auto", "max", "portable")
"""The selection modes of :func:`~rumi_core.compression.profile_codecs` and ``rumi_core.write(compression=...)``."""

DECODE_FLOOR: Final = 300e6
"""Slowest decode accepted, in bytes of decoded samples per second on one core,
as predicted by :data:`rumi_core.compression.decode_cost.MODEL`."""

_FLOOR_HEADROOM: Final = 1.1
"""The floor is applied to frame decoding with 10 % to spare: a whole read also
fetches, checks and places the frames."""


@dataclass(frozen=True)
class Candidate:
    """One codec measured on the whole sample."""

    codec: FrameCodec
    """The codec, as it would be written."""
    frame_unit: int | None
    """The frame unit its frames were cut with; None when the frames were given."""
    compressed_bytes: int
    """Total size of the sample's frames."""
    raw_bytes: int
    """Total decoded size of the sample's frames."""
    decode_mbps: float
    """Decode speed predicted by the cost model (:mod:`rumi_core.compression.decode_cost`), MB/s on one core."""
    lossless_frames: int = 0
    """Under an error bound: sample frames stored losslessly because the bound failed."""
    first_frame_bytes: int = dataclasses.field(default=0, repr=False, compare=False)
    """Size of the first sample frame, for probes that compress one frame only."""

    @property
    def ratio(self) -> float:
        """``raw_bytes / compressed_bytes``."""
        return self.raw_bytes / self.compressed_bytes

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "compressed_bytes": self.compressed_bytes,
            "raw_bytes": self.raw_bytes,
            "ratio": round(self.ratio, 4),
            "decode_mbps": round(self.decode_mbps, 1),
            "lossless_frames": self.lossless_frames,
        }


@dataclass(frozen=True)
class CodecMeasurements:
    """The codec measurements behind a choice: the codec and unit chosen, and every candidate measured."""

    codec: FrameCodec
    """The chosen codec."""
    frame_unit: int | None
    """The chosen frame unit, or None when :func:`~rumi_core.compression.profile_codecs` was given frames."""
    mode: str
    """``auto``, ``max`` or ``portable``."""
    decode_floor: float
    """The decode-speed floor applied, bytes per second (0 for none)."""
    candidates: tuple[Candidate, ...] = ()
    """Every measured candidate, in the order measured."""
    sample: tuple[int, ...] = ()
    """Sampled tile locations (row-major spatial index) or frame positions."""
    bound: ErrorBound | None = None
    """The error bound, or None for lossless."""

    @property
    def chosen(self) -> Candidate | None:
        """The candidate measured for the chosen codec and unit, if any."""
        for candidate in self.candidates:
            if candidate.codec == self.codec and candidate.frame_unit == self.frame_unit:
                return candidate
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record of the choice and its candidates."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "mode": self.mode,
            "bound": None if self.bound is None else self.bound.to_dict(),
            "decode_floor_mbps": self.decode_floor / 1e6,
            "sample": list(self.sample),
            "candidates": [c.to_dict() for c in self.candidates],
        }


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape the frames' bytes: ``{"openzl": ..., "geozl": ...}``.

    A choice is a pure function of the data, the options and these versions;
    two machines with different versions may write different bytes.
    """
    return {name: importlib.metadata.version(name) for name in ("openzl", "geozl")}


@dataclass(frozen=True)
class CompressionChoice:
    """What :func:`rumi_core.write` decided about compression (codec, frame unit, bound), for the run to report.

    >>> from rumi_core.codecs import OpenZLGraph
    >>> CompressionChoice(OpenZLGraph("zstd"), 0, "explicit").to_dict()["mode"]
    'lossless'
    """

    codec: FrameCodec
    """The codec every frame is written with."""
    frame_unit: int
    """The frame unit."""
    compression: str
    """``auto``, ``max``, ``portable``, or ``explicit`` for a codec the caller gave."""
    bound: ErrorBound | None = None
    """The error bound every sample honours, or None for lossless."""
    selection: CodecMeasurements | None = None
    """The measurements behind the choice, when a selection ran."""
    libraries: dict[str, str] = dataclasses.field(default_factory=library_versions)
    """Versions of openzl and geozl that chose and wrote the frames (:func:`library_versions`)."""

    @property
    def mode(self) -> str:
        """``lossless`` or ``lossy``."""
        return "lossless" if self.bound is None else "lossy"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record (codec, frame unit, mode, bound, library versions, selection)."""
        return {
            "codec": self.codec.to_dict(),
            "frame_unit": self.frame_unit,
            "compression": self.compression,
            "mode": self.mode,
            "bound": None if self.bound is None else self.bound.to_dict(),
            "libraries": dict(self.libraries),
            "selection": None if self.selection is None else self.selection.to_dict(),
        }


def parse_mode(mode: object) -> Mode:
    """Check a selection mode.

    Raises:
        InvalidInputError: ``mode`` is not one of :data:`MODES`.
    """
    if mode == "auto":
        return "auto"
    if mode == "max":
        return "max"
    if mode == "portable":
        return "portable"
    raise InvalidInputError(f"selection mode is one of {', '.join(MODES)}, got {mode!r}", field="compression")


def parse_decode_floor(value: object) -> float:
    """Check a decode-speed floor, bytes per second.

    Raises:
        InvalidInputError: not a finite number >= 0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"decode_floor is bytes per second >= 0, got {value!r}", field="decode_floor")
    return float(value)


def measure(codec: FrameCodec, frames: Sequence[npt.NDArray[Any]], axes: tuple[str, ...], unit: int | None) -> Candidate | None:
    """Compress the sample for real and predict its decode speed; None if the codec refuses it."""
    sizes: list[int] = []
    lossy_kept = 0
    try:
        for frame in frames:
            if isinstance(codec, BoundedCodec):
                result = codec.encode_frame(frame, axes=axes)
                sizes.append(len(result.data))
                lossy_kept += result.lossy
            else:
                sizes.append(len(codec.encode(frame, axes=axes)))
    except InvalidInputError:
        return None
    lossless_frames = len(frames) - lossy_kept if isinstance(codec, BoundedCodec) else 0
    return Candidate(
        codec,
        unit,
        sum(sizes),
        sum(f.nbytes for f in frames),
        MODEL.decode_speed(codec, frames, axes) / 1e6,
        lossless_frames,
        sizes[0],
    )


def pick(candidates: Sequence[Candidate], floor: float) -> Candidate:
    """Smallest candidate predicted to decode at the floor; the fastest predicted if none does.

    Candidates are ranked by stored bytes per raw byte, so units measured on
    different frames compare; equal ones keep their order (earlier wins).

    Raises:
        InvalidInputError: no candidate took the samples.
    """
    if not candidates:
        raise InvalidInputError("no candidate codec takes these samples", field="compression")
    ranked = sorted(candidates, key=lambda c: c.compressed_bytes / c.raw_bytes)
    for candidate in ranked:
        if meets_floor(candidate, floor):
            return candidate
    return max(ranked, key=lambda c: c.decode_mbps)


def meets_floor(candidate: Candidate, floor: float) -> bool:
    """Whether ``candidate`` is predicted to decode at ``floor`` bytes/s, with the headroom."""
    return candidate.decode_mbps * 1e6 >= floor * _FLOOR_HEADROOM
