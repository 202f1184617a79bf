"""A summary of one file: shape, dtype, bands, times, georeferencing, frames.

:func:`info` reads the head and the trailer (never a frame) and returns an
:class:`Info`, whose :meth:`Info.to_dict` is the JSON printed by ``rumi info
--json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rumi_core.georef import PIXEL_IS_POINT
from rumi_core.header import BlobArgument, HeaderBlob, check_against_head
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.sources import ByteSource, deadline, open_source
from rumi_core.structure import read_structure
from rumi_core.times import INTERVAL, format_seconds

if TYPE_CHECKING:
    import os

    from rumi_core.georef import Georeferencing
    from rumi_core.layout import Layout
    from rumi_core.time_coordinates import TimeCoordinates

__all__ = ["LISTED_TIMES", "Info", "info"]

LISTED_TIMES = 100_000
"""A regular time axis with more coordinates is summarised, not listed, by :meth:`Info.to_dict`."""


@dataclass(frozen=True)
class Info:
    """What a file holds, from its head and trailer."""

    layout: Layout
    georef: Georeferencing
    band_texts: tuple[str, ...]
    times: TimeCoordinates
    file_size: int
    frame_byte_counts: tuple[int, ...]
    """Compressed size of every frame, in frame-index order (the IFD's ``TileByteCounts``)."""
    base_frame_offset: int

    @property
    def shape(self) -> tuple[int, ...]:
        """``(T, B, Y, X)`` for a Cube, ``(B, Y, X)`` for an Image."""
        return self.layout.shape

    def __repr__(self) -> str:
        # Not every frame's byte count: to_dict() is the whole summary.
        kind = "Cube" if self.layout.is_cube else "Image"
        bands = ", ".join(self.band_texts[:4]) + (f" and {len(self.band_texts) - 4} more" if len(self.band_texts) > 4 else "")
        return f"<rumi_core.Info {kind} {self.shape} {self.dtype} {self.georef.crs or 'no CRS'}, bands {bands}; {self.file_size} bytes>"

    @property
    def dtype(self) -> str:
        """The sample encoding's name."""
        return self.layout.encoding.name

    def _times_json(self) -> list[str] | list[list[str]] | dict[str, Any]:
        """Every time as ISO 8601, or for a long regular axis its first, last, step and count.

        A regular axis is held as arithmetic (a file of a few bytes may
        declare 2**32 - 1 steps), so the summary lists its values only up to
        :data:`LISTED_TIMES` coordinates.
        """
        times = self.times
        if not times.is_regular or times.coordinate_count <= LISTED_TIMES:
            return times.to_json()
        step = times.second(1) - times.second(0)
        return {
            "first": format_seconds(times.second(0)),
            "last": format_seconds(times.second(-1)),
            "step_seconds": step,
            "coordinates": times.coordinate_count,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable summary.

        ``frame_byte_counts`` gives the total, smallest and largest compressed
        frame; ``raw_bytes`` is the raster decoded: ``T * B * Y * X`` samples
        times the sample's bytes.
        """
        lay = self.layout
        raw_bytes = lay.time_count * lay.samples_per_pixel * lay.image_length * lay.image_width * lay.encoding.bytes_per_sample
        counts = self.frame_byte_counts
        return {
            "shape": list(self.shape),
            "kind": "Cube" if lay.is_cube else "Image",
            "dtype": self.dtype,
            "sample_format": lay.encoding.sample_format,
            "bits_per_sample": lay.encoding.bits_per_sample,
            "bands": list(self.band_texts),
            "time_type": "interval" if self.times.time_type == INTERVAL else "instant",
            "times": self._times_json(),
            "crs": self.georef.crs,
            "transform": list(self.georef.transform) if self.georef.is_georeferenced else None,
            "pixel_is_point": self.georef.raster_type == PIXEL_IS_POINT,
            "frame_unit": lay.frame_unit,
            "frame_axes": "".join(lay.frame_axes),
            "tile_size": [lay.tile_length, lay.tile_width],
            "grid": [lay.tiles_down, lay.tiles_across],
            "frame_count": lay.frame_count,
            "file_size": self.file_size,
            "base_frame_offset": self.base_frame_offset,
            "frame_byte_counts": {"total": sum(counts), "min": min(counts), "max": max(counts)},
            "raw_bytes": raw_bytes,
        }


def info(
    source: ByteSource | str | os.PathLike[str] | bytes,
    header: BlobArgument | None = None,
    *,
    limits: Limits = DEFAULT_LIMITS,
    timeout: float | None = None,
) -> Info:
    """Summarise a file from its head and trailer.

    When ``header`` is given it is checked against the file. ``timeout`` is
    the total seconds a remote source may take (see
    :func:`rumi_core.sources.deadline`); None uses the source's default.

    Raises:
        ResourceLimitError: a size the file declares exceeds ``limits``.
        InvalidFileError: the head or trailer breaks a MUST.
        HeaderMismatchError: the blob disagrees with the file.
        SourceError: the file cannot be read.
    """
    src, owned = open_source(source)
    try:
        with deadline(src, timeout):
            structure = read_structure(src, limits=limits)
    finally:
        if owned:
            src.close()
    head = structure.head
    if header is not None:
        blob = HeaderBlob.given(header, limits=limits)
        check_against_head(blob, head)
    return Info(
        layout=head.layout,
        georef=head.georef,
        band_texts=structure.trailer.band_texts,
        times=structure.trailer.times,
        file_size=structure.size,
        frame_byte_counts=tuple(int(c) for c in head.tile_byte_counts),
        base_frame_offset=head.base_frame_offset,
    )
