"""A read's selection: which bands, times and pixels, and where each frame's samples land.

Specification sections *Selective read model* and *Resource limits*. A
selection is resolved against a :class:`~rumi_core.layout.Layout` once
(positions checked, the window checked, the output size checked against
:class:`~rumi_core.Limits` before any list of positions is built); the reader
(:mod:`rumi_core.reader`) and the catalogue's chip sampler then place each
decoded frame's selected samples into a ``(T', B', h, w)`` output with
:func:`output_positions` and :func:`place_frame`, or decode a frame straight
into the part of the output :meth:`OutputPlan.frame_place` finds for it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, SupportsIndex, TypeAlias

import numpy as np

from rumi_core.errors import SelectionError
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.windows import check_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from rumi_core.layout import FrameExtent, Layout

__all__ = [
    "AxisSelector",
    "OutputPlan",
    "Positions",
    "RangePositions",
    "ReadSelection",
    "output_positions",
    "place_frame",
    "resolve_selection",
]


AxisSelector: TypeAlias = "SupportsIndex | slice | Sequence[SupportsIndex] | NDArray[np.integer[Any]]"
"""Positions along one axis (bands, times): one, a slice of them, or several in the order wanted (NumPy integers too)."""


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


def _positions(value: AxisSelector | None, total: int, name: str) -> Sequence[int]:
    if value is None:
        return range(total)
    if isinstance(value, slice):  # as NumPy indexes an axis
        value = range(total)[value]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [int(value)]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):  # not a text's characters, one by one
        raise SelectionError(f"{name} positions are integers, got {value!r}")
    out = []
    for v in value:
        try:
            if isinstance(v, bool):  # True is 1 to operator.index, and no position to a caller
                raise TypeError(v)
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
    bands: AxisSelector | None = None,
    times: AxisSelector | None = None,
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


class Positions(Protocol):
    """Where each selected value of one axis (a band, a time step) lands in the output: ``get(value, ())``."""

    def get(self, value: int, default: Sequence[int], /) -> Sequence[int]:
        """The output positions of ``value`` (it may be selected more than once), else ``default``."""
        ...


class RangePositions:
    """The positions of values selected as a ``range``: value ``v`` lands at ``values.index(v)``.

    An axis read whole is ``range(total)`` (:func:`resolve_selection`). A
    blob may declare 2**32 - 1 time steps, and a read of all of them is
    refused only once a frame is checked (the output's size alone may pass
    ``max_output_bytes`` when the window is small); positions looked up in
    the range, not listed, cost nothing before that.
    """

    __slots__ = ("values",)

    def __init__(self, values: range) -> None:
        self.values = values

    def get(self, value: int, default: Sequence[int], /) -> Sequence[int]:
        """``(position,)`` for a value in the range, else ``default``."""
        return (self.values.index(value),) if value in self.values else default


def _axis_positions(selected: Sequence[int]) -> Positions:
    if isinstance(selected, range):
        return RangePositions(selected)
    positions: dict[int, list[int]] = {}
    for i, value in enumerate(selected):
        positions.setdefault(value, []).append(i)
    return positions


def output_positions(layout: Layout, sel: ReadSelection) -> tuple[Positions, Positions, bool]:
    """Where each selected band and time lands in the output, for :func:`place_frame`.

    Returns:
        ``(band_pos, time_pos, subset)``: the output positions of each band
        and time (a position may be selected twice), and whether the selection
        is a subset or reordering of the file's bands and times (then cell
        frames, which hold all of them, are picked from).
    """
    subset = not (_is_every(sel.times, layout.time_count) and _is_every(sel.bands, layout.samples_per_pixel))
    return _axis_positions(sel.bands), _axis_positions(sel.times), subset


def place_frame(
    out: NDArray[Any],
    frame: NDArray[Any],
    extent: FrameExtent,
    layout: Layout,
    sel: ReadSelection,
    band_pos: Positions,
    time_pos: Positions,
    subset: bool,
) -> None:
    """Copy the selected samples of one decoded frame into ``out`` (T', B', h, w).

    ``frame`` holds the frame's samples, flat or shaped as
    :meth:`Layout.frame_shape`; ``extent`` is the frame's
    :meth:`Layout.frame_extent`, which a read has already computed.
    """
    band, time, y0, y1, x0, x1, _ = extent
    (r0, r1), (c0, c1) = sel.rows, sel.cols
    ys, ye = max(y0, r0), min(y1, r1)
    xs, xe = max(x0, c0), min(x1, c1)
    src_y, src_x = slice(ys - y0, ye - y0), slice(xs - x0, xe - x0)
    dst_y, dst_x = slice(ys - r0, ye - r0), slice(xs - c0, xe - c0)
    if band is not None and time is not None:
        tile = frame.reshape(y1 - y0, x1 - x0)[src_y, src_x]  # a tile frame's axes are (h, w)
        for ti in time_pos.get(time, ()):
            for bi in band_pos.get(band, ()):
                out[ti, bi, dst_y, dst_x] = tile
        return
    axes = layout.frame_axes
    cell = frame.reshape(layout.extent_shape(extent))
    for a in ("t", "b"):
        if a not in axes:
            cell = cell[np.newaxis]
            axes = (a, *axes)
    cell = cell.transpose([axes.index(a) for a in ("t", "b", "h", "w")])
    if subset:
        cell = cell[np.ix_(sel.times, sel.bands)]
    out[:, :, dst_y, dst_x] = cell[:, :, src_y, src_x]


class OutputPlan:
    """A read's ``(T', B', h, w)`` output before it exists: its shape, where each band and time lands, which frames decode into it.

    Built once per read; :meth:`frame_place` is asked once per frame, on
    whichever thread decodes it, right after a decode has evicted the CPU's
    caches. It is plain integer arithmetic on the C-ordered output's byte
    strides, so the array itself need not exist yet (a read allocates it
    only once a frame has declared its size).
    """

    __slots__ = ("_band_bytes", "_layout", "_row_bytes", "_time_bytes", "band_pos", "cols", "nbytes", "rows", "shape", "subset", "time_pos")

    def __init__(self, layout: Layout, sel: ReadSelection) -> None:
        """Cheap whatever the selection: values selected as a range have no list of positions (:class:`RangePositions`)."""
        self._layout = layout
        (r0, r1), (c0, c1) = self.rows, self.cols = sel.rows, sel.cols
        self.shape = (len(sel.times), len(sel.bands), r1 - r0, c1 - c0)
        """The output's shape."""
        self.band_pos, self.time_pos, self.subset = output_positions(layout, sel)
        """As :func:`output_positions` returns them, for :func:`place_frame`."""
        self._row_bytes = (c1 - c0) * layout.encoding.dtype.itemsize
        self._band_bytes = (r1 - r0) * self._row_bytes
        self._time_bytes = len(sel.bands) * self._band_bytes
        self.nbytes = len(sel.times) * self._time_bytes
        """The output's size in bytes."""

    def frame_place(self, index: int) -> tuple[FrameExtent, int]:
        """Frame ``index``'s :meth:`Layout.frame_extent`, and the byte of the output where it may be decoded whole (-1 where not).

        From that byte on, the output's next ``decoded_frame_bytes`` bytes
        are exactly the frame's samples. That is a tile frame (one band, one
        time step) selected once, whose tile lies inside the window and is
        exactly as wide as it (so the tile's rows are contiguous in the
        output), at a multiple of 8 bytes (OpenZL writes numeric streams at
        8-byte aligned addresses, and the output starts at one, as NumPy
        allocates arrays). Decoding there spares a copy of the frame; a
        one-tile window of tile frames is made only of such frames. Every
        other frame goes through :func:`place_frame`.
        """
        extent = self._layout.frame_extent(index)
        band, time, y0, y1, x0, x1, _ = extent
        if band is None or time is None:
            return extent, -1  # a cell frame's (t, b) axes are picked from and reordered
        (r0, r1), (c0, c1) = self.rows, self.cols
        bands, times = self.band_pos.get(band, ()), self.time_pos.get(time, ())
        if x0 != c0 or x1 != c1 or y0 < r0 or y1 > r1 or len(bands) != 1 or len(times) != 1:
            return extent, -1
        at = times[0] * self._time_bytes + bands[0] * self._band_bytes + (y0 - r0) * self._row_bytes
        return extent, -1 if at % 8 else at
