"""The raster layout: dimensions, tile grid, sample encoding and frame index.

A :class:`Layout` holds exactly the raster fields that the IFD and the header
blob duplicate (specification sections *Fixed IFD* and *Header blob*): image
width and length, time count, nominal tile size, band count, sample encoding
and frame unit. Everything else about frames is derived from it, following
*Frame index*:

* the spatial grid (``tiles_across``, ``tiles_down``, ``g``), with edge tiles
  clipped to the image and never padded;
* the frame count ``N`` and the frame index of any (row, col, band, time);
* the decoded shape and byte size of any frame;
* which frames a selective read needs (section *Selective read model*).

The module is pure arithmetic: no I/O and no compression.

>>> from rumi_core.encodings import encoding_for_dtype
>>> lay = Layout(image_width=1024, image_length=1024, time_count=3, samples_per_pixel=4,
...              tile_width=256, tile_length=256, encoding=encoding_for_dtype("uint16"), frame_unit=0)
>>> lay.frame_count
192
>>> lay.frames_for(bands=[1, 3], times=[2], rows=(512, 768), cols=(256, 512))
[113, 119]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FrameUnit, parse_frame_unit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rumi_core.encodings import SampleEncoding

__all__ = ["MAX_UINT16", "MAX_UINT32", "FrameExtent", "Layout"]

MAX_UINT16 = 0xFFFF
MAX_UINT32 = 0xFFFF_FFFF

_WIDTHS = {
    "image_width": (MAX_UINT32, "ImageWidth"),
    "image_length": (MAX_UINT32, "ImageLength"),
    "time_count": (MAX_UINT32, "TimeCount"),
    "samples_per_pixel": (MAX_UINT16, "SamplesPerPixel"),
    "tile_width": (MAX_UINT16, "TileWidth"),
    "tile_length": (MAX_UINT16, "TileLength"),
}


class FrameExtent(NamedTuple):
    """What one frame holds: its tile's pixels, its band and time step, and its ``decoded_frame_bytes``."""

    band: int | None
    """The band a tile frame holds; None for a cell frame, which holds every band."""
    time: int | None
    """The time step a tile frame holds; None for a cell frame."""
    y0: int
    """First row of the tile, in the image."""
    y1: int
    """Row after the tile's last, clipped to the image."""
    x0: int
    """First column of the tile."""
    x1: int
    """Column after the tile's last, clipped to the image."""
    decoded_frame_bytes: int
    """``decoded_frame_bytes`` (*Sample encodings*): the product of the frame's shape, times the sample's bytes."""


@dataclass(frozen=True)
class Layout:
    """Dimensions, tiling, sample encoding and frame unit of one rumi file.

    Construction validates every field against its width and the frame unit
    against ``(B, T)``, raising :class:`~rumi_core.errors.InvalidInputError`.
    """

    image_width: int
    """``X``, in pixels (ImageWidth, uint32)."""
    image_length: int
    """``Y``, in pixels (ImageLength, uint32)."""
    time_count: int
    """``T`` (TimeCount, uint32). 1 is an Image, more is a Cube."""
    samples_per_pixel: int
    """``B``, the band count (SamplesPerPixel, uint16)."""
    tile_width: int
    """Nominal tile width (TileWidth, uint16)."""
    tile_length: int
    """Nominal tile height (TileLength, uint16)."""
    encoding: SampleEncoding
    """The sample encoding shared by every band and time step."""
    frame_unit: int
    """The ``frame_unit`` value (tag 65000)."""

    def __post_init__(self) -> None:
        for name, (limit, tag) in _WIDTHS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
                raise InvalidInputError(
                    f"{name} must be an integer from 1 to {limit}, got {value!r}",
                    field=tag,
                    rule=f"{tag} MUST be greater than zero and fit its field",
                )
        parse_frame_unit(self.frame_unit, bands=self.samples_per_pixel, times=self.time_count)

    # -- derived sizes ---------------------------------------------------------------
    # Cached: a read asks for them once or more per frame, and the fields they
    # derive from never change (the dataclass is frozen).

    @cached_property
    def unit(self) -> FrameUnit:
        """The registered frame unit (parsed once: the read path asks for it per frame)."""
        return parse_frame_unit(self.frame_unit, bands=self.samples_per_pixel, times=self.time_count)

    @cached_property
    def is_cube(self) -> bool:
        """True for a Cube (``T > 1``), False for an Image."""
        return self.time_count > 1

    @cached_property
    def tiles_across(self) -> int:
        """``ceil(image_width / tile_width)``."""
        return -(-self.image_width // self.tile_width)

    @cached_property
    def tiles_down(self) -> int:
        """``ceil(image_length / tile_length)``."""
        return -(-self.image_length // self.tile_length)

    @cached_property
    def grid_size(self) -> int:
        """``g``, the number of tile locations."""
        return self.tiles_across * self.tiles_down

    @cached_property
    def frames_per_location(self) -> int:
        """Frames at one tile location: ``B * T`` for tiles, 1 for cells."""
        return self.samples_per_pixel * self.time_count if self.unit.holds == "tile" else 1

    @cached_property
    def frame_count(self) -> int:
        """``N``, the number of frames."""
        return self.grid_size * self.frames_per_location

    @cached_property
    def frame_axes(self) -> tuple[str, ...]:
        """Axis names of a decoded frame, e.g. ``("h", "w")`` or ``("t", "b", "h", "w")``."""
        return self.unit.layout(bands=self.samples_per_pixel, times=self.time_count)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(T, B, Y, X)`` for a Cube, ``(B, Y, X)`` for an Image."""
        bxy = (self.samples_per_pixel, self.image_length, self.image_width)
        return (self.time_count, *bxy) if self.is_cube else bxy

    # -- frame index -----------------------------------------------------------------

    def frame_index(self, row: int, col: int, band: int = 0, time: int = 0) -> int:
        """Return the index of the frame holding ``(row, col)`` and, for tiles, ``(band, time)``."""
        spatial = row * self.tiles_across + col
        if self.unit.holds == "cell":
            return spatial
        if self._bands_fastest:
            return (spatial * self.time_count + time) * self.samples_per_pixel + band
        return (spatial * self.samples_per_pixel + band) * self.time_count + time

    def frame_location(self, index: int) -> tuple[int, int, int | None, int | None]:
        """Inverse of :meth:`frame_index`: ``(row, col, band, time)``.

        ``band`` and ``time`` are None for a cell frame, which holds all of them.
        """
        extent = self.frame_extent(index)
        return extent.y0 // self.tile_length, extent.x0 // self.tile_width, extent.band, extent.time

    def tile_bounds(self, row: int, col: int) -> tuple[int, int, int, int]:
        """Return ``(y0, y1, x0, x1)`` of a tile location, clipped to the image."""
        y0 = row * self.tile_length
        x0 = col * self.tile_width
        return (y0, min(y0 + self.tile_length, self.image_length), x0, min(x0 + self.tile_width, self.image_width))

    def frame_shape(self, index: int) -> tuple[int, ...]:
        """Decoded shape of frame ``index``, in the order of :attr:`frame_axes`."""
        return self.extent_shape(self.frame_extent(index))

    def extent_shape(self, extent: FrameExtent) -> tuple[int, ...]:
        """Decoded shape of the frame of ``extent`` (:meth:`frame_extent`), in the order of :attr:`frame_axes`."""
        _, _, y0, y1, x0, x1, _ = extent
        sizes = {"b": self.samples_per_pixel, "t": self.time_count, "h": y1 - y0, "w": x1 - x0}
        return tuple(sizes[a] for a in self.frame_axes)

    def frame_extent(self, index: int) -> FrameExtent:
        """Where frame ``index`` lies and what it decodes to: the inverse of :meth:`frame_index`, with the tile's bounds.

        The one place a frame index is taken apart. A read asks once per
        frame, on the thread about to decode it, right after a decode has
        evicted the CPU's caches; there every Python call and attribute
        lookup costs several times what it does in a warm loop, so this is
        one flat function of :attr:`_extent_terms`, clipping the tile to the
        image as :meth:`tile_bounds` does. A one-tile window read (four 512 x
        512 frames on two threads) took 2.160 ms against 2.178 ms through
        ``frame_location`` and ``tile_bounds`` (means of 10 alternating
        pairs of processes of 300 reads each, this project's 2-core machine).

        Raises:
            IndexError: ``index`` is not a frame of this layout.
        """
        per, across, cell, band_fastest, bands, times, tile_length, tile_width, length, width, sample_bytes = self._extent_terms
        if not 0 <= index < self.frame_count:
            raise IndexError(f"frame index {index} is outside 0..{self.frame_count - 1}")
        spatial, rest = divmod(index, per)
        row, col = divmod(spatial, across)
        y0 = row * tile_length
        x0 = col * tile_width
        y1 = min(y0 + tile_length, length)
        x1 = min(x0 + tile_width, width)
        pixels = (y1 - y0) * (x1 - x0)
        if cell:
            return FrameExtent(None, None, y0, y1, x0, x1, pixels * bands * times * sample_bytes)
        if band_fastest:
            time, band = divmod(rest, bands)
        else:
            band, time = divmod(rest, times)
        return FrameExtent(band, time, y0, y1, x0, x1, pixels * sample_bytes)

    @cached_property
    def _bands_fastest(self) -> bool:
        """Whether the frame index of a tile unit walks bands inside time steps (*Frame index*: ``frame_unit`` 9)."""
        return self.unit.index_order == ("t", "b")

    @cached_property
    def _extent_terms(self) -> tuple[int, int, bool, bool, int, int, int, int, int, int, int]:
        """What :meth:`frame_extent` reads, in one tuple.

        Frames at a location, tiles across, whether a frame is a cell, whether
        bands vary fastest (``frame_unit`` 9), bands, time steps, tile length
        and width, image length and width, bytes per sample.
        """
        return (
            self.frames_per_location, self.tiles_across, self.unit.holds == "cell", self._bands_fastest,
            self.samples_per_pixel, self.time_count, self.tile_length, self.tile_width,
            self.image_length, self.image_width, self.encoding.bytes_per_sample,
        )  # fmt: skip

    def decoded_frame_bytes(self, index: int) -> int:
        """``decoded_frame_bytes`` of frame ``index``: the product of :meth:`frame_shape`, times the sample's bytes."""
        return self.frame_extent(index).decoded_frame_bytes

    @cached_property
    def max_decoded_frame_bytes(self) -> int:
        """The largest ``decoded_frame_bytes`` of any frame (a full nominal tile)."""
        h = min(self.tile_length, self.image_length)
        w = min(self.tile_width, self.image_width)
        per_location = self.samples_per_pixel * self.time_count if self.unit.holds == "cell" else 1
        return h * w * per_location * self.encoding.bytes_per_sample

    # -- selective reads -------------------------------------------------------------

    def tile_span(self, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[range, range]:
        """Return the tile rows and columns a half-open pixel window intersects."""
        r0, r1 = rows
        c0, c1 = cols
        return (
            range(r0 // self.tile_length, -(-r1 // self.tile_length)),
            range(c0 // self.tile_width, -(-c1 // self.tile_width)),
        )

    def frames_for(
        self,
        *,
        bands: Sequence[int],
        times: Sequence[int],
        rows: tuple[int, int],
        cols: tuple[int, int],
    ) -> list[int]:
        """Return, in increasing order, the frames a selective read must fetch.

        ``rows`` and ``cols`` are a half-open pixel window inside the image;
        ``bands`` and ``times`` are positions. Tile units need one frame per
        selected ``(b, t)`` at each intersected location; cell units need one
        frame per location.
        """
        tile_rows, tile_cols = self.tile_span(rows, cols)
        found: set[int] = set()
        for row in tile_rows:
            for col in tile_cols:
                if self.unit.holds == "cell":
                    found.add(self.frame_index(row, col))
                    continue
                for b in bands:
                    for t in times:
                        found.add(self.frame_index(row, col, b, t))
        return sorted(found)
