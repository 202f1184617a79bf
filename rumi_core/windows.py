"""Pixel windows of a read: one value, two rules (*Selective read model*).

A window is ``((row_start, row_stop), (col_start, col_stop))``, half-open, in
pixels of the image, or a :class:`rasterio.windows.Window`. The stateless
reader takes it as a contract and refuses a window that reaches outside the
image (:func:`check_window`): a read returns exactly the shape asked for. The
catalogue's ``--window`` and ``--bbox`` instead read the part inside the image,
as rasterio's ``boundless=False`` windows do (:func:`clip_window`), and report
the clip.

>>> clip_window(((-5, 10), (90, 200)), 100, 130)
((0, 10), (90, 130))
>>> check_window(None, 100, 130)
((0, 100), (0, 130))
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from rumi_core.errors import SelectionError

__all__ = ["WindowRanges", "check_window", "clip_window", "window_ranges"]

WindowRanges = tuple[tuple[int, int], tuple[int, int]]
"""``((row_start, row_stop), (col_start, col_stop))``, half-open pixel ranges."""


def _pixel(value: Any) -> int:
    """A window bound as an int: an integer, or a float of a whole number (what ``rasterio.windows.from_bounds`` gives)."""
    if isinstance(value, bool):  # an int to operator.index, no pixel to a caller
        raise TypeError("a bool")
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return operator.index(value)


def window_ranges(window: Any) -> WindowRanges:
    """Normalise a window to integer ``((row_start, row_stop), (col_start, col_stop))``.

    Bounds are whole pixels: integers, or floats of whole numbers. A window of
    fractions of a pixel (``rasterio.windows.from_bounds`` of a box off the
    grid) is refused rather than rounded, since which way to round is the
    caller's choice (``Window.round_offsets()``, ``round_lengths()``).

    Raises:
        SelectionError: the window is neither such a pair nor a rasterio Window of whole pixels.
    """
    given = window
    if hasattr(window, "toranges"):  # rasterio.windows.Window
        window = window.toranges()
    try:
        (r0, r1), (c0, c1) = window
    except (TypeError, ValueError) as err:
        raise SelectionError(f"window is ((row_start, row_stop), (col_start, col_stop)) or a rasterio Window, got {given!r}") from err
    try:
        r0, r1, c0, c1 = _pixel(r0), _pixel(r1), _pixel(c0), _pixel(c1)
    except (TypeError, ValueError) as err:
        fractions = any(isinstance(v, (float, np.floating)) for v in (r0, r1, c0, c1))
        hint = "; round it first (rasterio: Window.round_offsets(), round_lengths())" if fractions else ""
        raise SelectionError(f"window bounds are whole pixels, got {given!r}{hint}") from err
    return (r0, r1), (c0, c1)


def check_window(window: Any, height: int, width: int) -> WindowRanges:
    """The window of a read of a ``height x width`` image; None is the whole image.

    Raises:
        SelectionError: the window is malformed, empty, or reaches outside the image.
    """
    if window is None:
        return (0, height), (0, width)
    (r0, r1), (c0, c1) = window_ranges(window)
    if not (0 <= r0 < r1 <= height and 0 <= c0 < c1 <= width):
        raise SelectionError(f"window rows {r0}:{r1}, cols {c0}:{c1} is empty or outside the {height} x {width} image")
    return (r0, r1), (c0, c1)


def clip_window(window: Any, height: int, width: int) -> WindowRanges:
    """Clip a window to a ``height x width`` image: the part inside it is read.

    The one rule for ``--window`` and ``--bbox`` alike (a bbox is clipped by
    :meth:`catalog.Grid.window_for_bbox`). Callers compare the result with what
    they asked for to report a clip.

    Raises:
        SelectionError: the window is malformed, empty, or entirely outside the image.
    """
    (r0, r1), (c0, c1) = window_ranges(window)
    if r0 >= r1 or c0 >= c1:
        raise SelectionError(f"window rows {r0}:{r1}, cols {c0}:{c1} is empty")
    rows = (max(0, r0), min(height, r1))
    cols = (max(0, c0), min(width, c1))
    if rows[0] >= rows[1] or cols[0] >= cols[1]:
        raise SelectionError(f"window rows {r0}:{r1}, cols {c0}:{c1} lies outside the {height} x {width} image")
    return rows, cols
