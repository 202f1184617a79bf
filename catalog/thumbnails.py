"""Quicklooks: a small PNG of one time step, so people look before they download.

:func:`render_thumbnail` reads one time step of a cube through the stateless
reader, one tile row at a time, keeping every ``k``-th pixel so that the
longer side is at most ``max_size`` pixels; memory stays at one tile row.
Bands whose common names are ``red``, ``green`` and ``blue`` become an RGB
image; otherwise the first band is a grey image. Each channel is stretched
linearly between its 2nd and 98th percentiles, ignoring no-data and
non-finite values, which are drawn black.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import numpy as np

from rumi_core.reader import read_selection
from rumi_core.selection import resolve_selection

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from numpy.typing import NDArray

    from catalog.bands import Band
    from rumi_core.header import HeaderBlob
    from rumi_core.sources import ByteSource

__all__ = ["render_thumbnail", "thumbnail_bands"]


def thumbnail_bands(bands: Sequence[Band]) -> list[int]:
    """Return the band positions drawn: red, green, blue when all exist, else the first band.

    >>> from catalog.bands import band_from_text
    >>> thumbnail_bands([band_from_text(t) for t in ("B2, Blue", "B3, Green", "B4, Red", "B8, NIR")])
    [2, 1, 0]
    >>> thumbnail_bands([band_from_text("elevation")])
    [0]
    """
    by_name = {b.common_name: i for i, b in enumerate(bands) if b.common_name}
    if all(c in by_name for c in ("red", "green", "blue")):
        return [by_name["red"], by_name["green"], by_name["blue"]]
    return [0]


def _as_float(data: NDArray[Any]) -> NDArray[np.float64]:
    """The values drawn: complex samples by their magnitude.

    A signalling NaN (a NaN payload with the quiet bit clear) raises
    floating-point "invalid" when cast or taken the magnitude of; it stays a
    NaN, which is not drawn, so that is worth no warning.
    """
    with np.errstate(invalid="ignore"):
        if data.dtype.names is not None:  # complex with binary16 parts
            real: NDArray[np.float64] = data["real"].astype(np.float64)
            imag: NDArray[np.float64] = data["imag"].astype(np.float64)
            return np.hypot(real, imag)
        if np.iscomplexobj(data):
            magnitude: NDArray[np.float64] = np.abs(data).astype(np.float64)
            return magnitude
        return data.astype(np.float64)


def _stretch(channel: NDArray[np.float64], nodata: float | None) -> NDArray[np.uint8]:
    valid = np.isfinite(channel)
    if nodata is not None:
        valid &= channel != nodata
    out = np.zeros(channel.shape, dtype=np.uint8)
    if not valid.any():
        return out
    values = channel[valid]  # NaNs left out before any arithmetic: a signalling one raises "invalid" in it
    if np.abs(values).max() > np.finfo(np.float64).max / 4:
        # Values spanning more than a float64 holds (float64 data near ±1.8e308) would overflow the
        # percentiles' and the stretch's differences; a quarter keeps every ratio.
        values = values / 4
    lo, hi = np.percentile(values, [2.0, 98.0])
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    out[valid] = np.rint(np.clip((values - lo) * scale, 0, 255)).astype(np.uint8) if scale else 128
    return out


def _spans(kept: NDArray[np.int64], extent: int, tile: int) -> Iterator[tuple[int, int, NDArray[np.int64]]]:
    """``(start, end, kept positions inside)`` of each tile span along one axis that keeps a position."""
    for start in range(0, extent, tile):
        end = min(start + tile, extent)
        inside = kept[(kept >= start) & (kept < end)]
        if inside.size:
            yield start, end, inside


def render_thumbnail(
    source: ByteSource,
    blob: HeaderBlob,
    bands: Sequence[Band],
    *,
    time: int = 0,
    max_size: int = 256,
    threads: int | None = None,
) -> bytes:
    """Return PNG bytes of time step ``time``.

    Args:
        source: The file's bytes.
        blob: Its header blob.
        bands: Its band metadata (for common names and no-data values).
        time: Time position to draw.
        max_size: Longest side of the image, in pixels.
        threads: Decoding threads.

    Raises:
        SelectionError: ``time`` is outside the cube.
        FrameDecodeError: a frame is corrupt.
    """
    from PIL import Image

    layout = blob.layout
    positions = thumbnail_bands(bands)
    height, width = layout.image_length, layout.image_width
    step = max(1, -(-max(height, width) // max_size))
    rows_kept = np.arange(0, height, step)
    cols_kept = np.arange(0, width, step)
    # One tile at a time: the working set is one tile of each band, not a strip of the image.
    strips: list[NDArray[np.float64]] = []
    for r0, r1, rows in _spans(rows_kept, height, layout.tile_length):
        tiles: list[NDArray[np.float64]] = []
        for c0, c1, cols in _spans(cols_kept, width, layout.tile_width):
            sel = resolve_selection(layout, bands=positions, times=[time], window=((r0, r1), (c0, c1)))
            data = read_selection(source, blob, sel, threads=threads)
            tile = data[0] if layout.is_cube else data
            tiles.append(_as_float(tile[:, rows - r0][:, :, cols - c0]))
        strips.append(np.concatenate(tiles, axis=2))
    image = np.concatenate(strips, axis=1)
    channels = [_stretch(image[i], bands[p].nodata_value) for i, p in enumerate(positions)]
    buf = io.BytesIO()
    if len(channels) == 3:
        Image.fromarray(np.stack(channels, axis=-1)).save(buf, format="PNG", optimize=True)
    else:
        Image.fromarray(channels[0]).save(buf, format="PNG", optimize=True)
    return buf.getvalue()
