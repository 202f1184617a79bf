"""An open rumi file: :func:`rumi_core.open` returns a :class:`Dataset`.

Modelled on ``rasterio.open``: a context-managed object that holds the byte
source and the header blob, exposes what the file describes and reads windows
statelessly. Opening reads the head and trailer once (through
:func:`rumi_core.info.info`) unless a blob is given and ``metadata=False``, in
which case nothing but frames is ever read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from affine import Affine

from rumi_core.errors import RumiError, SourceError
from rumi_core.georef import PIXEL_IS_POINT
from rumi_core.header import BlobArgument, HeaderBlob
from rumi_core.info import Info, info
from rumi_core.limits import DEFAULT_LIMITS, Limits
from rumi_core.reader import read_selection, resolve_header
from rumi_core.selection import AxisSelector, resolve_selection
from rumi_core.sources import ByteSource, open_source

if TYPE_CHECKING:
    import os
    from types import TracebackType

    from numpy.typing import NDArray

    from rumi_core.layout import Layout

__all__ = ["BoundingBox", "Dataset", "open"]


class BoundingBox(NamedTuple):
    """``(left, bottom, right, top)``; equal to rasterio's ``BoundingBox`` of the same numbers.

    Not rasterio's own class, which would load GDAL (0.12 s) into every reader for a named tuple.
    """

    left: float
    bottom: float
    right: float
    top: float


class Dataset:
    """A rumi file opened for reading."""

    def __init__(
        self,
        source: ByteSource | str | os.PathLike[str] | bytes,
        header: BlobArgument | None = None,
        *,
        metadata: bool = True,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._source, self._owned = open_source(source)
        self._limits = limits
        self._closed = False
        try:
            self.info: Info | None = info(self._source, header, limits=limits) if metadata else None
            """Head and trailer summary, or None when opened with ``metadata=False``."""
            if header is None and self.info is not None:
                header = HeaderBlob(self.info.layout, np.asarray(self.info.frame_byte_counts, dtype=np.uint64))
            self.header: HeaderBlob = resolve_header(self._source, header, limits=limits)
            """The header blob used to locate frames."""
        except BaseException:
            self.close()
            raise

    @property
    def layout(self) -> Layout:
        """Dimensions, tiling, sample encoding and frame unit."""
        return self.header.layout

    @property
    def shape(self) -> tuple[int, ...]:
        """``(T, B, Y, X)`` or ``(B, Y, X)``."""
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """NumPy dtype of the samples."""
        return self.layout.encoding.dtype

    @property
    def name(self) -> str:
        """The path or URL the dataset reads."""
        return self._source.name

    @property
    def count(self) -> int:
        """Bands (``B``), as rasterio's ``count``."""
        return self.layout.samples_per_pixel

    @property
    def height(self) -> int:
        """Rows (``Y``)."""
        return self.layout.image_length

    @property
    def width(self) -> int:
        """Columns (``X``)."""
        return self.layout.image_width

    @property
    def crs(self) -> str | None:
        """``"EPSG:n"``, or None for a raster without a CRS (*Undefined georeferencing*).

        Raises:
            RumiError: the dataset was opened with ``metadata=False``, so the head was not read.
        """
        return self._info("crs").georef.crs

    @property
    def transform(self) -> Affine:
        """The transform of pixel corners, as rasterio gives it: half a pixel back for a PixelIsPoint file.

        Raises:
            RumiError: the dataset was opened with ``metadata=False``.
        """
        georef = self._info("transform").georef
        shift = Affine.translation(-0.5, -0.5) if georef.raster_type == PIXEL_IS_POINT else Affine.identity()
        return Affine(*georef.transform[:6]) @ shift

    @property
    def bounds(self) -> BoundingBox:
        """``(left, bottom, right, top)`` of the pixel corners, as rasterio's ``bounds``.

        Raises:
            RumiError: the dataset was opened with ``metadata=False``.
        """
        # As rasterio.transform.array_bounds, which maps corners with `*`, deprecated in affine 3 (a warning).
        t = self.transform
        if t.b == t.d == 0:  # rasterio keeps a south-up grid's bottom above its top
            return BoundingBox(t.c, t.f + t.e * self.height, t.c + t.a * self.width, t.f)
        xs, ys = zip(*(t @ (col, row) for col in (0, self.width) for row in (0, self.height)), strict=True)
        return BoundingBox(min(xs), min(ys), max(xs), max(ys))

    @property
    def res(self) -> tuple[float, float]:
        """``(width, height)`` of a pixel in CRS units, as rasterio's ``res``.

        Raises:
            RumiError: the dataset was opened with ``metadata=False``.
        """
        a, b, _, d, e, _ = self.transform[:6]
        if b == d == 0:
            return abs(a), abs(e)
        return math.hypot(a, d), math.hypot(b, e)

    @property
    def descriptions(self) -> tuple[str, ...]:
        """The band texts, as rasterio's ``descriptions``.

        Raises:
            RumiError: the dataset was opened with ``metadata=False``.
        """
        return self._info("descriptions").band_texts

    def _info(self, what: str) -> Info:
        if self.info is None:
            raise RumiError(f"{what} is in the file's head and trailer, which a dataset opened with metadata=False does not read")
        return self.info

    def read(
        self,
        *,
        bands: AxisSelector | None = None,
        times: AxisSelector | None = None,
        window: Any = None,
        threads: int | None = None,
        verify: bool = True,
    ) -> NDArray[Any]:
        """Read band positions, time positions and a window through the dataset's blob.

        As :func:`rumi_core.read` with a blob given, except that bands are
        positions only (no names), there is no ``timeout`` (the source's own
        applies), and the limits are those the dataset was opened with.

        Args:
            bands: Band positions, in the order wanted; None for all.
            times: Time positions; None for all.
            window: ``((row_start, row_stop), (col_start, col_stop))`` or a
                :class:`rasterio.windows.Window`; None for the whole image.
            threads: Decoding threads, as :func:`rumi_core.read` uses them.
            verify: Check OpenZL checksums of every frame (the default).

        Returns:
            ``(T', B', h, w)`` for a Cube and ``(B', h, w)`` for an Image, in
            the file's sample dtype.

        Raises:
            SelectionError: a position or the window lies outside the raster,
                or a band is given by name.
            HeaderMismatchError: the file is shorter than the blob's frames.
            InvalidFileError: the file ends inside a frame the read needs, or
                a boolean byte is neither 0 nor 1.
            FrameDecodeError: a frame is corrupt or decodes to the wrong size.
            ResourceLimitError: the read exceeds the dataset's limits.
            SourceError: the storage failed, or the dataset is closed.
        """
        if self._closed:
            raise SourceError(f"{self._source.name} is closed")
        sel = resolve_selection(self.layout, bands=bands, times=times, window=window, limits=self._limits)
        return read_selection(self._source, self.header, sel, threads=threads, verify=verify, limits=self._limits)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: reads then fail, whatever the source (as rasterio's ``closed``)."""
        return self._closed

    def close(self) -> None:
        """Close the source if this dataset opened it; a second call does nothing."""
        if self._owned and not self._closed:
            self._source.close()
        self._closed = True

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        lay = self.layout
        kind = "Cube" if lay.is_cube else "Image"
        state = "closed " if self._closed else ""
        return f"<{state}rumi_core.Dataset {kind} {lay.shape} {lay.encoding.name} {self._source.name!r}>"


def open(  # noqa: A001 - mirrors the built-in, as rasterio.open does
    source: ByteSource | str | os.PathLike[str] | bytes,
    header: BlobArgument | None = None,
    *,
    metadata: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> Dataset:
    """Open a rumi file for reading.

    Args:
        source: A local path, the file's bytes, or any :class:`ByteSource`.
        header: The file's header blob: parsed, its bytes, or the path of its
            ``.rumih`` file. When None, it is built from the file's head
            (*Creating the header blob*).
        metadata: Read the head and trailer now, for :attr:`Dataset.info`
            (and check ``header`` against the file). With ``False`` and a
            ``header``, opening reads nothing and every read fetches frames
            only; without a ``header`` the head and trailer are still read, to
            build the blob.
        limits: Resource limits checked when opening and by every read.

    Returns:
        A :class:`Dataset`; close it, or use it as a context manager.

    Raises:
        InvalidHeaderError: ``header`` is malformed.
        HeaderMismatchError: ``header`` disagrees with the file (checked
            when ``metadata`` is True).
        InvalidFileError: the head or trailer the open reads breaks a MUST.
        ResourceLimitError: a size the blob or the file declares exceeds
            ``limits``.
        SourceError: the source cannot be opened or read.

    Example:
        >>> import numpy as np, tempfile, os, rumi_core
        >>> path = os.path.join(tempfile.mkdtemp(), "x.rumi")
        >>> _ = rumi_core.write(path, np.ones((1, 4, 4), "uint8"), bands=["a"], times=["2020-01-01"])
        >>> with rumi_core.open(path) as ds:
        ...     ds.shape, ds.read(window=((0, 2), (1, 3))).sum()
        ((1, 4, 4), np.uint64(4))
    """
    return Dataset(source, header, metadata=metadata, limits=limits)
