"""Dead letters: inputs that could not be converted, and why.

An unreadable or corrupt GeoTIFF, a missing CRS, a dtype
or band-count mismatch inside a group, an off-grid scene or an unknown time
does not stop the run: the input becomes a :class:`DeadLetter`, written as
one JSON line to ``OUT/dead-letter.jsonl``, and counted by a Beam counter of
the transform that rejected it. Every other cube still completes.
:class:`WriteDeadLetters` writes them sorted and without repeats, so the
bytes do not depend on the runner.

>>> DeadLetter("a.tif", "missing-crs", "the file has no CRS", "ReadSceneMetadata").to_dict()["reason"]
'missing-crs'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from catalog.credentials import redacted, unsigned
from pipelines.errors import PipelineError, SceneError
from pipelines.jsonl import write_jsonl
from pipelines.transforms.collect import WriteCollected, inc

__all__ = ["REASONS", "DeadLetter", "WriteDeadLetters"]

REASONS: Final = {
    "no-match": "an input path or glob matches no file",
    "not-sentinel2": (
        "a STAC item whose properties do not make it Sentinel-2 L2A, in a run whose --bands, --resolution, --mgrs or --max-cloud "
        "select among those"
    ),
    "bad-stac": "a STAC ItemCollection cannot be read",
    "bad-name": "the path is not UTF-8 text, which GDAL and STAC hrefs need",
    "unreadable": "rasterio cannot open or read the file (corrupt, truncated, not a raster)",
    "large-blocks": "a tile or strip of the file decodes to more than 1 GiB, which GDAL decodes whole to read any pixel of it",
    "subdatasets": "the file is a container of subdatasets (NetCDF, HDF) with no bands of its own, or a GeoTIFF of several images",
    "no-geotransform": "the file is located by ground control points, RPCs or nothing, not by a geotransform",
    "missing-crs": "the file has no CRS",
    "crs-not-epsg": "the CRS has no EPSG code",
    "unsupported-dtype": "the sample type is not a rumi sample encoding, or bands differ in type",
    "bad-nodata": "the file's nodata value is no sample of its type, or its bands state different ones (a cube's bands share one)",
    "masked": "the file has a mask band (internal or .msk) but no nodata value for the pixels it masks",
    "bad-transform": "the geotransform places the file nowhere on the Earth (not finite, no area, or outside its CRS's domain)",
    "rotated": "the transform is rotated, sheared or not north-up (see --align reproject)",
    "unknown-time": "no acquisition time was found and --time gives none",
    "bad-time": "a time source holds an invalid time",
    "bad-metadata": (
        "a product's metadata file (a SAFE's MTD_MSIL2A.xml, a Landsat _MTL.json) cannot be read or lacks a band's factors, "
        "or the file's own band metadata is not UTF-8 text or not finite"
    ),
    "incomplete-scene": "another band file of its scene could not be read, so the scene is left out whole",
    "dtype-mismatch": "the dtype or nodata differs from the other scenes of its group",
    "band-count-mismatch": "the band set differs from the other scenes of its group",
    "off-grid": "the grid alignment differs from its group's (see --align reproject)",
    "extracted": "an archive is also extracted beside it, and the extraction lacks this member",
    "duplicate-time": "another scene of the same grid has the same time (see --duplicates)",
    "family-extent": "a product's cube of this period is already planned on another extent of the same grid",
    "held-times": "the cube of this name already holds time steps these inputs lack; it is kept, not replaced by fewer",
    "invalid-cube": "the cube cannot be stored as a rumi file",
    "tile-size": "--tile-size would cut the cube into frames so small that their own bytes outweigh their pixels",
    "read-failed": "reading pixels failed during conversion; the cube was planned again without the scene (not with --detach)",
    "verification-failed": "the written file does not decode to the source pixels; it was not published",
}
"""Every reason code, with what it means."""


@dataclass(frozen=True, order=True)
class DeadLetter:
    """One rejected input."""

    href: str
    """The input path, URL or pattern."""
    reason: str
    """A key of :data:`REASONS`."""
    message: str
    """What was expected, what was found, and the fix when one is known."""
    stage: str
    """The transform that rejected it."""

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise PipelineError(f"unknown dead-letter reason {self.reason!r}; known reasons are {', '.join(sorted(REASONS))}")

    @classmethod
    def from_error(cls, err: SceneError, stage: str) -> DeadLetter:
        """The dead letter of a :class:`~pipelines.errors.SceneError`."""
        return cls(err.href, err.reason, err.detail, stage)

    def to_dict(self) -> dict[str, Any]:
        """JSON form, one line of the dead-letter output."""
        return {"href": self.href, "reason": self.reason, "message": self.message, "stage": self.stage}

    def unsigned(self) -> DeadLetter:
        """This dead letter without the credentials of its URLs (:mod:`catalog.credentials`), as it is written.

        A signature is a credential: the file holds the inputs as the
        manifest does, and a later pass of the run names its unreadable
        scenes by these hrefs.
        """
        return DeadLetter(unsigned(self.href), self.reason, redacted(self.message), self.stage)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeadLetter:
        """Inverse of :meth:`to_dict`."""
        return cls(data["href"], data["reason"], data["message"], data["stage"])


@dataclass
class WriteDeadLetters(WriteCollected):
    """Write every dead letter of the run (usually ``OUT/dead-letter.jsonl``), sorted and without repeats, and count them by reason."""

    @staticmethod
    def write_all(letters: list[DeadLetter], path: str, temp_dir: str | None) -> int:
        """Sort, drop repeats, write, count by reason."""
        count = write_jsonl(path, [d.to_dict() for d in sorted({d.unsigned() for d in letters})], temp_dir=temp_dir)
        for letter in letters:
            inc(WriteDeadLetters, f"dead_letter.{letter.reason}")
        return count
