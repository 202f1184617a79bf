"""Cube plans: everything decided about one output file before a frame is read.

A
:class:`CubePlan` is the unit of work of the frame stage. It names the file
(:func:`cube_name`), fixes its shape, bands, times, grid, tiling and frame
unit, and maps every ``(time, band)`` of the cube to the file bands that fill
it (:class:`Source`), each at an integer offset on the cube's grid or through a
warp (:class:`Warp`). Workers derive each frame's window from the plan's
:class:`~rumi_core.Layout`, so a plan is all a worker needs to read and
compress any frame.

The module is pure: no I/O, no Beam.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from affine import Affine

from pipelines.planning.hrefs import input_identity
from pipelines.planning.lattice import OnGrid
from pipelines.planning.timestamps import compact
from rumi_core.codecs import BoundedCodec, ErrorBound, codec_from_dict, parse_error_bound
from rumi_core.compression import MODES
from rumi_core.writer import WritePlan, plan_write

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from catalog.grid import Grid
    from rumi_core.layout import Layout

__all__ = ["CubeBand", "CubePlan", "Source", "Warp", "cube_name", "inputs_hash", "inputs_version", "sample_indices"]


@dataclass(frozen=True)
class Warp:
    """How an off-grid file is resampled onto the cube's grid (``--align reproject``)."""

    transform: tuple[float, float, float, float, float, float]
    """Transform of the warped raster, aligned with the cube's grid."""
    height: int
    """Rows of the warped raster."""
    width: int
    """Columns of the warped raster."""
    resampling: str
    """A :class:`rasterio.enums.Resampling` member name."""


@dataclass(frozen=True)
class Source:
    """One band of one file, placed on the cube's grid."""

    href: str
    """The file."""
    band: int
    """1-based band index in the file."""
    row: int
    """Cube row of the file's (or the warped raster's) first row; may be outside the cube."""
    col: int
    """Cube column of its first column."""
    height: int
    """Rows of the file or warped raster."""
    width: int
    """Columns of the file or warped raster."""
    warp: Warp | None = None
    """Set when the file is off grid and is warped onto it."""

    def window(self, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The part of a cube window this source covers, in cube pixels, or None."""
        r0, r1 = max(rows[0], self.row), min(rows[1], self.row + self.height)
        c0, c1 = max(cols[0], self.col), min(cols[1], self.col + self.width)
        if r0 >= r1 or c0 >= c1:
            return None
        return (r0, r1), (c0, c1)


@dataclass(frozen=True)
class CubeBand:
    """What the manifest records about one band of a cube (:class:`~pipelines.planning.scene.SourceBand` adds its file index)."""

    name: str
    """The band text stored in the file's trailer."""
    description: str | None = None
    """GeoTIFF description of the band in its first source."""
    scale: float = 1.0
    """Scale to physical values: ``value * scale + offset``."""
    offset: float = 0.0
    """Offset to physical values."""
    unit: str | None = None
    """Unit of the physical values, if the file names one."""
    categorical: bool = False
    """Whether the values are classes (a scene classification, a palette's indices), which a reader never interpolates."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``categorical`` only when true, so that the manifest of other bands reads as before)."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "scale": self.scale,
            "offset": self.offset,
            "unit": self.unit,
        }
        if self.categorical:
            out["categorical"] = True
        return out


def inputs_hash(hrefs: Sequence[str]) -> str:
    """The first 10 hex digits of the SHA-256 of the inputs' sorted identities, one per line.

    An identity is the file an href names (:func:`~pipelines.planning.hrefs.input_identity`):
    the same files through a link, or URLs signed at another time, give the same hash.
    """
    return hashlib.sha256("\n".join(sorted(input_identity(h) for h in hrefs)).encode("utf-8")).hexdigest()[:10]


def inputs_version(versions: Iterable[tuple[str, str]]) -> str:
    """The SHA-256 of ``(identity, version)`` pairs of a cube's inputs, sorted, one per line.

    What a later run compares to tell that an input was rewritten in place (a
    corrected scene delivered under its old name), which the cube's name, a
    hash of the inputs' identities alone, does not change with.
    """
    lines = sorted({f"{identity}\t{version}" for identity, version in versions})
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _coordinate(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text.replace(".", "p")


def cube_name(*, grid_slug: str, transform: Sequence[float], times: Sequence[int], hrefs: Sequence[str]) -> str:
    """The deterministic output name of a cube: grid, origin, time range and inputs hash.

    >>> hrefs = ["gs://archive/b.tif", "gs://archive/a.tif"]
    >>> cube_name(grid_slug="EPSG32613_r30", transform=(30, 0, 336375, 0, -30, 4462425), times=[1209600000, 1369612800], hrefs=hrefs)
    'EPSG32613_r30_x336375_y4462425_20080501_20130527_11aca66426'
    """
    start, end = compact(min(times)), compact(max(times))
    span = start if start == end else f"{start}_{end}"
    return f"{grid_slug}_x{_coordinate(transform[2])}_y{_coordinate(transform[5])}_{span}_{inputs_hash(hrefs)}"


def sample_indices(count: int, k: int) -> tuple[int, ...]:
    """``min(k, count)`` frame indices spread evenly from the first to the last frame.

    >>> sample_indices(100, 4)
    (0, 33, 66, 99)
    >>> sample_indices(2, 8)
    (0, 1)
    """
    if count <= 0 or k <= 0:
        return ()
    if k >= count:
        return tuple(range(count))
    if k == 1:
        return (0,)
    return tuple(sorted({round(i * (count - 1) / (k - 1)) for i in range(k)}))


@dataclass(frozen=True)
class CubePlan(OnGrid):
    """One output file: its name, layout, georeferencing, bands, times and sources."""

    cube_id: str
    """Output name without suffix (:func:`cube_name`)."""
    grid: Grid
    """CRS, transform of the first pixel's corner, shape ``(Y, X)``, and whether to record PixelIsPoint (the stored
    transform then points at the first pixel's centre)."""
    dtype: str
    """Sample dtype."""
    nodata: float | None
    """Nodata value, also the fill of pixels no source covers."""
    bands: tuple[CubeBand, ...]
    """One entry per band (``B``)."""
    times: tuple[int, ...]
    """Acquisition times, POSIX seconds, strictly increasing (``T`` entries)."""
    sources: tuple[tuple[tuple[Source, ...], ...], ...]
    """``sources[t][b]``: the file bands that fill band ``b`` at time ``t``, first valid pixel wins."""
    tile_size: int
    """Nominal tile size."""
    frame_unit: int
    """``frame_unit`` of the file."""
    compression: str
    """A selection mode (``auto``, ``max``, ``portable``) or a codec's JSON text, as in :class:`~pipelines.options.ConvertOptions`."""
    inputs: tuple[str, ...] = ()
    """Every input file, sorted."""
    input_bytes: int = 0
    """Total size of the input files, where known."""
    input_version: str = ""
    """:func:`inputs_version` of the input files."""
    dropped: tuple[str, ...] = ()
    """Inputs left out by ``--duplicates first|last``."""
    max_abs_error: float | None = None
    """Absolute error bound of a lossy cube (``--max-abs-error``), or None."""
    max_rel_error: str | None = None
    """Relative error bound of a lossy cube (``--max-rel-error``), such as ``"1%"``, or None."""
    tags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Facts a product-aware discovery gave about the acquisitions, each key with its distinct values, sorted."""
    named_by_period: bool = False
    """Whether :attr:`cube_id` is a product family's and period's (:class:`~pipelines.planning.scene.ProductBand`), not
    :func:`cube_name`'s of its times and inputs: a run given other acquisitions of the period plans the same name."""

    @property
    def error_bound(self) -> ErrorBound | None:
        """The lossy bound every decoded sample honours (from the options or an explicit bounded codec), or None for lossless."""
        bound = parse_error_bound(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error)
        spec = self.compression_spec()
        if bound is None and spec is not None and spec.get("name") == BoundedCodec.name:
            codec = codec_from_dict(spec)
            assert isinstance(codec, BoundedCodec)
            bound = codec.bound
        return bound

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(T, B, Y, X)``."""
        return (len(self.times), len(self.bands), self.height, self.width)

    @property
    def pixel_bytes(self) -> int:
        """Size of the cube's samples, uncompressed."""
        t, b, y, x = self.shape
        return t * b * y * x * np.dtype(self.dtype).itemsize

    @property
    def stored_transform(self) -> tuple[float, ...]:
        """The transform written to the file: the corner's, or the first pixel centre's for PixelIsPoint."""
        a, b, c, d, e, f = self.transform
        if not self.pixel_is_point:
            return self.transform
        return (a, b, c + a / 2 + b / 2, d, e, f + d / 2 + e / 2)

    @functools.cached_property
    def write_plan(self) -> WritePlan:
        """The checked rumi_core plan (layout, georeferencing, trailer) of the file.

        Raises:
            rumi_core.InvalidInputError: the cube cannot be stored as a rumi file.
        """
        return plan_write(
            self.shape,
            self.dtype,
            bands=[b.name for b in self.bands],
            times=[np.datetime64(s, "s") for s in self.times],
            crs=self.epsg,
            transform=Affine(*self.stored_transform),  # a source's transform, never taken for GDAL's order
            tile_size=self.tile_size,
            frame_unit=self.frame_unit,
            compression=self.compression_spec(),
            pixel_is_point=self.pixel_is_point,
        )

    def check_storable(self) -> None:
        """Check every value against the format (specification, *Data model*, *Fixed IFD*, *Trailer*) before any pixel is read.

        :func:`rumi_core.writer.plan_write` makes the checks; its result is
        cached as :attr:`write_plan`, so they cost nothing later.

        Raises:
            rumi_core.InvalidInputError: the cube cannot be stored as a rumi file.
        """
        _ = self.write_plan

    @property
    def layout(self) -> Layout:
        """The file's layout."""
        return self.write_plan.layout

    def compression_spec(self) -> dict[str, Any] | None:
        """The requested codec's JSON form, or None for a selection mode (``auto``, ``max``, ``portable``)."""
        return None if self.compression in MODES else dict(json.loads(self.compression))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("write_plan", None)  # rebuilt on demand; keeps pickles small and runner-independent
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
