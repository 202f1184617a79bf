"""A read's selection: which bands, times and pixels, and where each frame's samples land.

Specification sections *Selective read model* and *Resource limits*. A
selection is resolved against a :class:`~rumi_core.layout.Layout` once
(positions checked, the window checked, the output size checked against
:class:`~rumi_core.Limits` before any list of positions is built); the reader
(:mod:`rumi_core.reader`) and the catalogue's chip sampler then place each
decoded frame's selected samples into a ``(T', B', h, w)`` output with
:func:`output_positions` and :func:`place_frame`, or decode a frame straight
into the part of the output :func:`frame_target` finds for it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_core.errors import SelectionError
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.windows import check_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from rumi_core.layout import FrameExtent, Layout

__all__ = ["ReadSelection", "frame_target", "output_positions", "place_frame", "resolve_selection"]


@dataclass(frozen=True)
class ReadSelection:
    """A resolved selection: positions along each axis and a pixel window.

    An axis read whole is a ``range``, so selecting every one of 2**32 - 1
    time steps builds no list of them.
    """

    bands: Sequence[int]
    times: Sequence[int]
    rows: tuple[int, int]
    cols: tuple[int, int]


def _positions(value: Sequence[int] | None, total: int, name: str) -> Sequence[int]:
    if value is None:
        return range(total)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [int(value)]
    out = []
    for v in value:
        try:
            i = operator.index(v)
        except TypeError as err:
            raise SelectionError(f"{name} positions are integers, got {v!r}") from err
        if not 0 <= i < total:
            raise SelectionError(f"{name} position {i} is outside 0..{total - 1}")
        out.append(i)
    if not out:
        raise SelectionError(f"select at least one {name} position")
    return tuple(out)


def _is_every(positions: Sequence[int], total: int) -> bool:
    """True when ``positions`` are ``0..total-1`` in order."""
    if isinstance(positions, range):
        return positions == range(total)
    return len(positions) == total and all(p == i for i, p in enumerate(positions))


def resolve_selection(
    layout: Layout,
    *,
    bands: Sequence[int] | None = None,
    times: Sequence[int] | None = None,
    window: Any = None,
    limits: Limits = DEFAULT_LIMITS,
) -> ReadSelection:
    """Check and normalise a selection against a layout.

    The output it describes is checked against ``limits.max_output_bytes``
    before "every band" or "every time" becomes a list of positions: a blob
    may declare 2**32 - 1 time steps (*Resource limits*).

    Raises:
        SelectionError: a position or the window lies outside the raster.
        ResourceLimitError: the selection's output exceeds ``limits``.
    """
    rows, cols = check_window(window, layout.image_length, layout.image_width)
    t_count = layout.time_count if times is None else 1
    b_count = layout.samples_per_pixel if bands is None else 1
    pixels = (rows[1] - rows[0]) * (cols[1] - cols[0])
    limits.check("max_output_bytes", t_count * b_count * pixels * layout.encoding.dtype.itemsize, "the read's output array")
    time_positions = _positions(times, layout.time_count, "time")
    if not layout.is_cube and len(time_positions) != 1:
        # An Image reads as (B', h, w): there is no time axis to repeat along.
        raise SelectionError(f"an Image has one time step; select it once, not {len(time_positions)} times")
    return ReadSelection(_positions(bands, layout.samples_per_pixel, "band"), time_positions, rows, cols)


def output_positions(layout: Layout, sel: ReadSelection) -> tuple[dict[int, list[int]], dict[int, list[int]], bool]:
    """Where each selected band and time lands in the output, for :func:`place_frame`.

    Returns:
        ``(band_pos, time_pos, subset)``: the output positions of each band
        and time (a position may be selected twice), and whether the selection
        is a subset or reordering of the file's bands and times (then cell
        frames, which hold all of them, are picked from).
    """
    band_pos: dict[int, list[int]] = {}
    for i, b in enumerate(sel.bands):
        band_pos.setdefault(b, []).append(i)
    time_pos: dict[int, list[int]] = {}
    for i, t in enumerate(sel.times):
        time_pos.setdefault(t, []).append(i)
    subset = not (_is_every(sel.times, layout.time_count) and _is_every(sel.bands, layout.samples_per_pixel))
    return band_pos, time_pos, subset


def place_frame(
    out: NDArray[Any],
    frame: NDArray[Any],
    index: int,
    layout: Layout,
    sel: ReadSelection,
    band_pos: dict[int, list[int]],
    time_pos: dict[int, list[int]],
    subset: bool,
) -> None:
    """Copy the selected samples of one decoded frame into ``out`` (T', B', h, w)."""
    row, col, band, time = layout.frame_location(index)
    y0, y1, x0, x1 = layout.tile_bounds(row, col)
    (r0, r1), (c0, c1) = sel.rows, sel.cols
    ys, ye = max(y0, r0), min(y1, r1)
    xs, xe = max(x0, c0), min(x1, c1)
    src_y, src_x = slice(ys - y0, ye - y0), slice(xs - x0, xe - x0)
    dst_y, dst_x = slice(ys - r0, ye - r0), slice(xs - c0, xe - c0)
    if band is not None and time is not None:
        tile = frame[src_y, src_x]
        for ti in time_pos.get(time, ()):
            for bi in band_pos.get(band, ()):
                out[ti, bi, dst_y, dst_x] = tile
        return
    axes = layout.frame_axes
    cell = frame
    for a in ("t", "b"):
        if a not in axes:
            cell = cell[np.newaxis]
            axes = (a, *axes)
    cell = cell.transpose([axes.index(a) for a in ("t", "b", "h", "w")])
    if subset:
        cell = cell[np.ix_(sel.times, sel.bands)]
    out[:, :, dst_y, dst_x] = cell[:, :, src_y, src_x]


def frame_target(
    out: NDArray[Any],
    extent: FrameExtent,
    sel: ReadSelection,
    band_pos: dict[int, list[int]],
    time_pos: dict[int, list[int]],
) -> NDArray[Any] | None:
    """The part of ``out`` that a frame of ``extent``, decoded whole, is exactly; None when there is none.

    That is a tile frame (one band, one time step) selected once, whose tile
    lies inside the window and is exactly as wide as it (so the tile's rows
    are contiguous in ``out``), 8 bytes from ``out``'s start times a whole
    number (OpenZL writes numeric streams at 8-byte aligned addresses, and
    ``out`` starts at one, as NumPy allocates arrays). Decoding there spares
    a copy of the frame; a one-tile window of tile frames is made only of
    such frames. Every other frame goes through :func:`place_frame`.
    """
    band, time, y0, y1, x0, x1, _ = extent
    if band is None or time is None:
        return None  # a cell frame's (t, b) axes are picked from and reordered
    (r0, r1), (c0, c1) = sel.rows, sel.cols
    bands, times = band_pos.get(band, ()), time_pos.get(time, ())
    if x0 != c0 or x1 != c1 or y0 < r0 or y1 > r1 or len(bands) != 1 or len(times) != 1:
        return None
    t, b, y = times[0], bands[0], y0 - r0
    strides = out.strides
    if (t * strides[0] + b * strides[1] + y * strides[2]) % 8:
        return None
    return out[t, b, y : y1 - r0]
