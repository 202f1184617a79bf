"""Sampling a dataset for the choice of its codec and frame unit.

Specification sections *Frames* and *Choosing a frame unit* ("compression
SHOULD be measured when more than one unit fits the access pattern"): the
measurement runs on a deterministic sample. Up to :data:`SAMPLE_LOCATIONS`
tile locations, evenly spread over the grid (:func:`sample_locations`), hold
a thirty-second of the dataset (:func:`sample_budget`); locations are dropped,
then crops made around tile centres (:func:`crop_frames`) to fit. The sampled
cells are cut into the frames of each unit (:func:`unit_frames`), and those
frames split into planes of unsigned components (:class:`SampleFrames`), the
form the screen compresses. The same data always gives the same sample.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from rumi_core.codecs import UINT_BY_WIDTH, nodata_mask
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FRAME_UNITS

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = [
    "SAMPLE_BUDGET",
    "SAMPLE_LOCATIONS",
    "SAMPLE_MIN",
    "SampleFrames",
    "crop_frames",
    "crop_windows",
    "sample_budget",
    "sample_cells",
    "sample_locations",
    "unit_frames",
]

SAMPLE_LOCATIONS: Final = 4
"""Tile locations sampled per dataset."""

SAMPLE_BUDGET: Final = 1 << 20
"""Most samples screened per dataset; sampled tiles are cropped to fit."""

SAMPLE_MIN: Final = 1 << 15
"""Fewest samples screened per dataset (if it has that many); between the two,
a thirty-second of the dataset, so that selection costs about what encoding does."""

MIN_SIDE: Final = 128
"""Smallest crop side: frame headers weigh more in small crops and would skew the ranking."""


def sample_budget(total: int, budget: int = SAMPLE_BUDGET) -> int:
    """Samples to screen for a dataset of ``total`` samples: a thirty-second of it, within bounds.

    >>> sample_budget(6 * 973 * 967)
    176417
    >>> sample_budget(4 * 200 * 300)
    32768
    """
    return int(min(budget, max(SAMPLE_MIN, total // 32)))


def sample_locations(grid: int, count: int = SAMPLE_LOCATIONS) -> tuple[int, ...]:
    """Return ``count`` tile locations spread evenly over a grid of ``grid`` (row-major) locations.

    >>> sample_locations(16, 4)
    (2, 6, 10, 14)
    """
    count = max(1, min(count, grid))
    return tuple(sorted({min(grid - 1, (2 * i + 1) * grid // (2 * count)) for i in range(count)}))


def _kept_spread(sizes: Sequence[int], keep: int) -> list[int]:
    """Positions of ``keep`` frames of ``sizes`` samples, whole tiles before clipped edge tiles, evenly spread among them."""
    largest = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    full = [i for i in largest if sizes[i] == sizes[largest[0]]] if largest else []
    pool = sorted(full) if len(full) >= keep else sorted(largest[:keep])
    return sorted({pool[(2 * k + 1) * len(pool) // (2 * keep)] for k in range(keep)})


def crop_windows(shapes: Sequence[tuple[int, ...]], axes: tuple[str, ...], budget: int) -> tuple[list[int], list[tuple[slice, slice]]]:
    """Decide, from the frames' shapes alone, how :func:`crop_frames` fits them into ``budget`` samples.

    Returns the positions of the frames kept and, for each, the rows and
    columns of its crop, so that a caller reading from storage reads only
    those (:func:`sample_cells`).
    """
    h, w = axes.index("h"), axes.index("w")
    sizes = [math.prod(shape) for shape in shapes]
    kept = list(range(len(shapes)))
    total = sum(sizes)
    if total > budget:

        def smallest(shape: tuple[int, ...]) -> int:
            rows, cols = shape[h], shape[w]
            return math.prod(shape) // (rows * cols) * min(rows, MIN_SIDE) * min(cols, MIN_SIDE)

        floor_total = sum(smallest(shape) for shape in shapes)
        if floor_total > budget and len(shapes) > 1:
            kept = _kept_spread(sizes, max(1, min(len(shapes), budget * len(shapes) // max(floor_total, 1))))
            total = sum(sizes[i] for i in kept)
    scale = math.sqrt(budget / total) if total > budget else 1.0
    windows = []
    for i in kept:
        height, width = shapes[i][h], shapes[i][w]
        rows = min(height, max(min(height, MIN_SIDE), math.ceil(height * scale)))
        cols = min(width, max(min(width, MIN_SIDE), math.ceil(width * scale)))
        r0, c0 = (height - rows) // 2, (width - cols) // 2
        windows.append((slice(r0, r0 + rows), slice(c0, c0 + cols)))
    return kept, windows


def crop_frames(frames: Sequence[npt.NDArray[Any]], axes: tuple[str, ...], budget: int) -> tuple[list[npt.NDArray[Any]], list[int]]:
    """Fit the sample into ``budget`` samples: drop frames, then crop the rest around their centre.

    Crops stay at least :data:`MIN_SIDE` pixels on a side (or the whole frame when
    smaller), since frame headers weigh more in small crops and would skew the
    ranking; frames are dropped (keeping an even spread) before that happens.
    Returns the frames and the positions of those kept.
    """
    arrays = [np.asarray(f) for f in frames]
    if sum(f.size for f in arrays) <= budget:
        return arrays, list(range(len(arrays)))
    kept, windows = crop_windows([f.shape for f in arrays], axes, budget)
    h, w = axes.index("h"), axes.index("w")
    out = []
    for i, (rows, cols) in zip(kept, windows, strict=True):
        index: list[slice] = [slice(None)] * arrays[i].ndim
        index[h], index[w] = rows, cols
        out.append(np.ascontiguousarray(arrays[i][tuple(index)]))
    return out, kept


def sample_cells(data: Any, *, tile_size: tuple[int, int], locations: int, budget: int) -> tuple[list[npt.NDArray[Any]], tuple[int, ...]]:
    """Read the sampled ``(T, B, h, w)`` cells of an Image or Cube, cropped to the budget.

    The crops are decided from the cells' shapes (:func:`crop_windows`) and
    only they are read: ``data`` may read from storage on slicing (the
    pipeline's lazy cube), and a whole cell of a long series is large (73
    dates of 4 bands of 512 x 512 uint16: 146 MiB, where the budget keeps at
    most 2 MiB of it). Returns the cells and their tile locations (row-major
    spatial index).
    """
    shape = tuple(int(d) for d in data.shape)
    height, width = shape[-2:]
    th, tw = tile_size
    across, down = -(-width // tw), -(-height // th)
    picked = sample_locations(across * down, locations)
    planes = math.prod(shape[:-2])
    bounds = []
    for loc in picked:
        row, col = divmod(loc, across)
        bounds.append((row * th, min(height, (row + 1) * th), col * tw, min(width, (col + 1) * tw)))
    shapes = [(planes, y1 - y0, x1 - x0) for y0, y1, x0, x1 in bounds]
    kept, windows = crop_windows(shapes, ("p", "h", "w"), sample_budget(math.prod(shape), budget))
    cells = []
    for i, (rows, cols) in zip(kept, windows, strict=True):
        y0, _, x0, _ = bounds[i]
        block = data[..., y0 + rows.start : y0 + rows.stop, x0 + cols.start : x0 + cols.stop]
        cells.append(np.ascontiguousarray(block if len(shape) == 4 else np.asarray(block)[np.newaxis]))
    return cells, tuple(picked[i] for i in kept)


@dataclass(frozen=True)
class UnitFrames:
    """Sampled cells cut into the frames of one frame unit."""

    frames: list[npt.NDArray[Any]]
    """The frames, in the unit's decoded layout."""
    axes: tuple[str, ...]
    """The unit's decoded axis names (*Frames* / ``frame_unit``)."""
    labels: list[list[Hashable]]
    """Per frame and plane, a label naming the sampled plane, shared with other units."""
    classes: list[list[Hashable]] | None
    """Per frame and plane, its class, or None to derive classes from the layout."""


def unit_frames(cells: Sequence[npt.NDArray[Any]], unit: int, bands: int, times: int, locations: Sequence[int]) -> UnitFrames:
    """Cut sampled ``(T, B, h, w)`` cells into the frames of ``unit``, with plane labels and classes."""
    spec = FRAME_UNITS[unit]
    axes = spec.layout(bands=bands, times=times)
    frames: list[Any] = []
    labels: list[list[Hashable]] = []
    if spec.holds == "tile":
        classes: list[list[Hashable]] = []
        for loc, cell in zip(locations, cells, strict=True):
            for b in range(bands):
                for t in range(times):
                    frames.append(cell[t, b])
                    labels.append([(loc, t, b)])
                    classes.append([(b, False)])
        # Every plane of every sampled cell, as the cell units see them: units
        # are compared on the same samples.
        return UnitFrames(frames, axes, labels, classes)
    before = axes[: axes.index("h")]
    sizes = {"t": times, "b": bands}
    for loc, cell in zip(locations, cells, strict=True):
        current = ["t", "b", "h", "w"]
        block = cell
        for name in ("t", "b"):
            if name not in axes:
                block = block[0] if name == "t" else block[:, 0]
                current.remove(name)
        frames.append(np.ascontiguousarray(block.transpose([current.index(a) for a in axes])))
        names: list[Hashable] = []
        for flat in range(math.prod(sizes[a] for a in before)):
            pos = dict(zip(before, np.unravel_index(flat, [sizes[a] for a in before]), strict=True))
            names.append((loc, int(pos.get("t", 0)), int(pos.get("b", 0))) if axes[-1] == "w" else (loc, unit, flat))
        labels.append(names)
    return UnitFrames(frames, axes, labels, None)


def _plane_classes(before: tuple[str, ...], sizes: tuple[int, ...], *, interleaved: bool) -> list[Hashable]:
    """Class of each plane: its band, and whether it starts its run (no useful previous plane).

    Planes of one band across dates behave alike, so a cube's planes are
    screened a few per class, and each plane then picks among its class's
    best options. Interleaved layouts keep one class per plane.
    """
    count = math.prod(sizes)
    if interleaved or not before:
        return list(range(count))
    out: list[Hashable] = []
    for flat in range(count):
        pos = dict(zip(before, (int(i) for i in np.unravel_index(flat, sizes)), strict=True))
        out.append((pos.get("b", 0), pos[before[-1]] == 0))
    return out


def _fill_holes(rows: npt.NDArray[Any], holes: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    """Fill holes as geozl's nodata stage does: from the left, a row's first from above, else zero."""
    index = np.arange(rows.shape[0])
    last = np.maximum.accumulate(np.where(holes[:, 0], -1, index))
    first = np.where(last >= 0, rows[np.maximum(last, 0), 0], 0).astype(rows.dtype)
    filled = rows.copy()
    filled[:, 0] = first
    valid = ~holes
    valid[:, 0] = True
    columns = np.maximum.accumulate(np.where(valid, np.arange(rows.shape[1])[np.newaxis, :], 0), axis=1)
    return np.take_along_axis(filled, columns, axis=1)


@dataclass(frozen=True)
class SampleFrames:
    """Sample frames of one layout, split into planes of unsigned components."""

    frames: list[npt.NDArray[Any]]
    """The frames as given (typed), for real measurements."""
    axes: tuple[str, ...]
    """Their decoded axis names (*Frames* / ``frame_unit``)."""
    encoding: SampleEncoding
    """Their sample encoding (*Sample encodings*)."""
    planes: list[npt.NDArray[Any]]
    """Per frame, ``(P, rows, row)`` unsigned components."""
    labels: list[list[Hashable]]
    """Per frame and plane, a hashable label shared with other layouts of the same plane."""
    classes: list[list[Hashable]]
    """Per frame and plane, its class: planes of one class share a coding and are screened by sample."""
    filled: bool = False
    """Whether ``planes`` hold the planes after geozl's nodata fill."""

    @classmethod
    def build(
        cls,
        frames: Sequence[npt.NDArray[Any]],
        axes: tuple[str, ...],
        labels: Sequence[Sequence[Hashable]] | None = None,
        classes: Sequence[Sequence[Hashable]] | None = None,
    ) -> SampleFrames:
        """Split ``frames`` (of one dtype, laid out as ``axes``) into planes.

        Raises:
            InvalidInputError: a boolean sample holds a byte other than 0 or 1
                (*Sample encodings*).
        """
        encoding = encoding_for_dtype(frames[0].dtype)
        if encoding.name == "bool" and any(np.asarray(f).view(np.uint8).max(initial=0) > 1 for f in frames):
            raise InvalidInputError("a sample holds a boolean byte other than 0 or 1", field="data", rule="every byte MUST be 0 or 1")
        h = axes.index("h")
        per_sample = encoding.bytes_per_sample // encoding.component_bytes
        planes: list[npt.NDArray[Any]] = []
        names: list[list[Hashable]] = []
        for position, frame in enumerate(frames):
            arr = np.ascontiguousarray(frame, dtype=encoding.dtype)
            count = math.prod(arr.shape[:h])
            row = math.prod(arr.shape[h + 1 :]) * per_sample
            planes.append(arr.reshape(-1).view(UINT_BY_WIDTH[encoding.component_bytes]).reshape(count, arr.shape[h], row))
            names.append(list(labels[position]) if labels is not None else [(position, p) for p in range(count)])
        if classes is None:
            classes = [_plane_classes(axes[:h], f.shape[:h], interleaved=axes[-1] != "w") for f in frames]
        return cls(list(frames), axes, encoding, planes, names, [list(c) for c in classes])

    @classmethod
    def of_unit(cls, unit: UnitFrames) -> SampleFrames:
        """Split the frames of one frame unit into planes."""
        return cls.build(unit.frames, unit.axes, unit.labels, unit.classes)

    def with_nodata_filled(self, nodata: int | float) -> SampleFrames | None:
        """The same frames with planes filled as geozl's nodata stage fills them; None when no sample holds ``nodata``."""
        filled, seen = [], False
        for frame, planes in zip(self.frames, self.planes, strict=True):
            holes = nodata_mask(np.ascontiguousarray(frame, dtype=self.encoding.dtype), nodata)
            if isinstance(nodata, float) and math.isnan(nodata) and holes.any():
                # Lossless NaN mode marks the first NaN's payload only.
                bits = np.ascontiguousarray(frame, dtype=self.encoding.dtype).view(UINT_BY_WIDTH[self.encoding.bytes_per_sample])
                holes = bits == bits[holes].flat[0]
            seen = seen or bool(holes.any())
            count, rows, row = planes.shape
            flat = planes.reshape(count * rows, row)
            filled.append(_fill_holes(flat, holes.reshape(count * rows, row)).reshape(planes.shape))
        return dataclasses.replace(self, planes=filled, filled=True) if seen else None
