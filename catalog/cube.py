"""A rumi file reached through its STAC item or its URL, ready for stateless reads.

:meth:`Cube.open` accepts a STAC item (a path or URL of its JSON, a dict or a
:class:`pystac.Item`) or a ``.rumi`` file (a local path, an ``http(s)://`` or a
``gs://`` URL). It resolves what a read needs before touching the file
(for an item, through :class:`~catalog.item_parts.ItemParts`):

* the header blob: inline in the item (``rumi:header``), else one ``GET`` of
  the item's ``header`` asset, else one ``GET`` of ``<file>h``;
* the band metadata and time coordinates: from the item's ``bands`` and
  ``cube:dimensions``; for a bare file, from its trailer, fetched with one
  request only when a selection names bands or times;
* the grid: from the item's projection fields; for a bare file, from the
  160 georeferencing bytes before its frames, fetched with one request only
  when a read uses ``bbox`` or labels its result (the head itself, which
  the blob replaces, is never read).

A blob is checked against what is known before any frame is decoded: the
item's bands, times and shape, and the file size where it costs nothing (a
local file, or the item's ``file:size``).

A read of an item therefore sends requests for frames only: one per frame,
or per run of adjacent frames, which rumi_core's reader merges and fetches
concurrently.
"""

from __future__ import annotations

import contextlib
import copy
import operator
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from catalog.bands import Band, common_nodata, stac_data_type
from catalog.errors import ChangedFileError, ItemError, SelectorError, StorageError
from catalog.extension import VERTICAL_CRS
from catalog.grid import EPSG_CODE, Grid, file_grid
from catalog.http import SIDECAR_ABSENT
from catalog.item_parts import ItemParts, single_item
from catalog.items import time_values
from catalog.json_shape import TEXT, json_object, mismatch
from catalog.selectors import (
    ReadSelectors,
    TimeRange,
    band_positions,
    bands_from_texts,
    check_positions,
    parse_band_selector,
    parse_time_selector,
    selector_list,
    time_positions,
)
from catalog.storage import Storage, href_kind, is_rumi_href
from rumi_core.errors import FrameDecodeError, HeaderMismatchError, InvalidHeaderError, RumiError, SourceError
from rumi_core.georef import GEOREF_BYTES, Georeferencing
from rumi_core.header import HeaderBlob, blob_beside, blob_bytes, check_against_head, check_blob_fits
from rumi_core.ifd import FILE_MAGIC, file_kind
from rumi_core.reader import read_selection
from rumi_core.selection import resolve_selection
from rumi_core.sources import deadline
from rumi_core.structure import read_head, read_trailer
from rumi_core.trailer import Trailer
from rumi_core.windows import clip_window

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Unpack

    import pystac
    from affine import Affine
    from numpy.typing import NDArray

    from rumi_core.layout import Layout
    from rumi_core.selection import ReadSelection
    from rumi_core.sources import ByteSource
    from rumi_core.time_coordinates import TimeCoordinates

__all__ = ["Cube", "CubeRead"]

_UNSET: Any = object()


@dataclass(frozen=True)
class CubeRead:
    """The result of :meth:`Cube.read`: samples plus what locates and labels them."""

    data: NDArray[Any]
    """``(T', B', h, w)`` for a Cube, ``(B', h, w)`` for an Image."""
    bands: tuple[Band, ...]
    """The selected bands, in output order (positional names when unknown)."""
    times: tuple[str, ...]
    """The selected time steps' values (ISO instants, or ``start/end``), when known."""
    window: tuple[tuple[int, int], tuple[int, int]]
    """``((row0, row1), (col0, col1))`` in the file's pixel grid."""
    crs: str | None
    """``"EPSG:n"`` of the grid, when known."""
    transform: Affine | None
    """Transform of the window's top-left pixel corner, as rasterio reports it, when known.

    For a PixelIsPoint raster this is half a pixel up and left of the stored
    transform, which locates the first pixel's centre; GDAL writes it back
    as the stored one when ``AREA_OR_POINT=Point`` is set.
    """
    pixel_is_point: bool = False
    """Whether the raster is PixelIsPoint (``AREA_OR_POINT=Point``)."""
    nodata: float | None = None
    """The no-data value shared by the selected bands, when known (NaN for a NaN no-data)."""

    def as_cube(self) -> NDArray[Any]:
        """Return the data as ``(T', B', h, w)`` even for an Image."""
        return self.data if self.data.ndim == 4 else self.data[np.newaxis]


def _open_checked(storage: Storage, href: str, blob: HeaderBlob) -> ByteSource:
    """Open a file, checking a local one's size against the frames its blob locates (free for a local file)."""
    source = storage.open(href)
    if href_kind(href) == "local":
        try:
            check_blob_fits(blob, source.size(), where=href)
        except BaseException:
            source.close()
            raise
    return source


def _sidecar_blob(storage: Storage, href: str) -> bytes | None:
    """The bytes of the ``<file>h`` blob beside a file, or None when there is none (the file's own head is read then)."""
    blob_href = blob_beside(href)
    if href_kind(href) == "local":
        return storage.read(blob_href) if os.path.isfile(blob_href) else None
    try:
        return storage.read(blob_href)
    except StorageError as err:
        if err.status in SIDECAR_ABSENT:
            return None
        raise


class Cube:
    """A rumi file, its header blob and what its item says about it.

    Use :meth:`open`; the constructor takes already-resolved parts.
    """

    def __init__(
        self,
        source: ByteSource,
        blob: HeaderBlob,
        *,
        bands: Sequence[Band] | None = None,
        times: TimeCoordinates | None = None,
        grid: Grid | None = _UNSET,
        item: dict[str, Any] | None = None,
        owned: bool = True,
    ) -> None:
        self._source = source
        self.header = blob
        """The header blob used to locate frames."""
        self._bands = tuple(bands) if bands is not None else None
        self._times = times
        self._grid = grid
        self.item = item
        """The item this cube was opened from, as a dict, or None."""
        self._owned = owned
        self._closed = False
        self._sidecar: str | None = None
        """The remote ``<file>h`` the blob was read from, unchecked against the file's head, when it was found beside the file."""

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str] | dict[str, Any] | pystac.Item,
        *,
        storage: Storage | None = None,
        header: bytes | HeaderBlob | str | os.PathLike[str] | None = None,
    ) -> Cube:
        """Open a cube from its item or its file.

        Args:
            target: An item (path or URL of its JSON, a dict, a
                :class:`pystac.Item`) or a ``.rumi`` file (path or URL).
            storage: Storage access; a default :class:`Storage` when None.
            header: The header blob, when the caller has it (skips every
                request for it): parsed, its bytes, or the path or URL of its
                ``.rumih`` file, as :func:`rumi_core.read` takes it.

        Raises:
            ItemError: the item does not describe a rumi file.
            StorageError: the item, blob or file cannot be reached.
            InvalidHeaderError: the blob is malformed.
        """
        storage = storage or Storage()
        if isinstance(header, (str, os.PathLike)):  # its bytes were parsed as the blob: "magic is b'/tmp'"
            location = os.fspath(header)
            try:
                header = blob_bytes(location)
            except StorageError:
                raise
            except SourceError as err:  # a local file's
                raise StorageError(f"cannot read the header blob: {err.strerror}", href=location) from err
        if isinstance(target, dict):
            return cls._from_item(target, None, storage, header)
        if not isinstance(target, (str, os.PathLike)):
            to_dict = getattr(target, "to_dict", None)
            if not callable(to_dict):
                raise ItemError(f"cannot open a cube from a {type(target).__name__}")
            return cls._from_item(to_dict(), target.get_self_href(), storage, header)
        href = os.fspath(target)
        if is_rumi_href(href):
            return cls._from_file(href, storage, header)
        # A local file is known by its first bytes before it is read whole: a GeoTIFF given here may be gigabytes.
        # (is_rumi_href took a local rumi file under another name by its magic already.)
        start = _local_start(href) if href_kind(href) == "local" else None
        if start is not None and file_kind(start) not in (None, "JSON text"):
            raise ItemError(f"{href} is neither a rumi file nor a STAC item: it is {_kind_text(start)}")
        data = storage.read(href)
        if data.startswith(FILE_MAGIC):
            return cls._from_file(href, storage, header)  # a remote rumi file under another name
        try:
            doc = json_object(data)
        except ValueError as err:
            what = _kind_text(data[:16]) if file_kind(data[:16]) not in (None, "JSON text") else None  # JSON: the parser's words
            raise ItemError(f"{href} is neither a rumi file nor a STAC item: it {f'is {what}' if what else err}") from err
        return cls._from_item(single_item(doc, href), href, storage, header)

    @classmethod
    def _from_file(cls, href: str, storage: Storage, header: bytes | HeaderBlob | None) -> Cube:
        if header is not None:
            blob = header if isinstance(header, HeaderBlob) else HeaderBlob.from_bytes(header)
            return cls(_open_checked(storage, href, blob), blob)
        sidecar = _sidecar_blob(storage, href)
        if sidecar is None:
            source = storage.open(href)
            try:
                return cls._from_head(source)
            except BaseException:
                source.close()
                raise
        try:
            blob = HeaderBlob.from_bytes(sidecar)
            source = _open_checked(storage, href, blob)
            try:
                if href_kind(href) == "local":
                    # No item's checksum vouches for a blob found beside a file: one of another file, or of this
                    # one before it was rewritten, with the same frame sizes would read other bands, times or
                    # sample types without a word. Every value it duplicates is compared with the file's head, a
                    # local read. A URL's is not read: its blob is what saves a remote reader that request.
                    check_against_head(blob, read_head(source))
                cube = cls(source, blob)
            except BaseException:
                source.close()
                raise
            if href_kind(href) != "local":
                cube._sidecar = blob_beside(href)
            return cube
        except (InvalidHeaderError, HeaderMismatchError) as err:
            # Name the blob the frames were to be located with: the file may be sound.
            where = f" at byte {err.offset}" if err.offset is not None else ""
            advice = "" if "rumi header FILE" in err.message else "; rumi header FILE rebuilds it"
            raise type(err)(f"header blob {blob_beside(href)}: {err.message}{where}{advice}", field=err.field, rule=err.rule) from err

    @classmethod
    def _from_head(cls, source: ByteSource) -> Cube:
        from rumi_core.structure import read_structure

        structure = read_structure(source)
        head = structure.head
        bands = bands_from_texts(structure.trailer.band_texts, data_type=stac_data_type(head.layout.encoding.name))
        blob = HeaderBlob(head.layout, head.tile_byte_counts)
        try:
            grid = file_grid(head.georef, head.layout)
        except ItemError:
            # A transform of no area (a*e - b*d = 0) breaks no rule of the specification, and the pixels
            # read: the grid is refused where a read needs one (a box, a GeoTIFF), by :attr:`grid`.
            return cls(source, blob, bands=bands, times=structure.trailer.times)
        return cls(source, blob, bands=bands, times=structure.trailer.times, grid=grid)

    @classmethod
    def _from_item(cls, doc: dict[str, Any], where: str | None, storage: Storage, header: bytes | HeaderBlob | None) -> Cube:
        parts = ItemParts.from_item(doc, where, storage, header)
        source = _open_checked(storage, parts.data_href, parts.blob)
        return cls(source, parts.blob, bands=parts.bands, times=parts.times, grid=parts.grid, item=doc)

    # -- lazily known metadata ----------------------------------------------------------

    @property
    def name(self) -> str:
        """Where the file is."""
        return self._source.name

    @property
    def layout(self) -> Layout:
        """Dimensions, tiling, encoding and frame unit, from the blob."""
        return self.header.layout

    def _bands_from_texts(self, texts: Sequence[str]) -> tuple[Band, ...]:
        return bands_from_texts(texts, data_type=stac_data_type(self.layout.encoding.name))

    def _load_trailer(self) -> None:
        lay = self.layout
        offset = self.header.trailer_offset
        guess = max(4096, 28 + lay.samples_per_pixel * 130 + 16 * lay.time_count)
        (data,) = self._source.read_ranges([(offset, guess)])
        if len(data) < guess:
            trailer = Trailer.from_bytes(data, samples_per_pixel=lay.samples_per_pixel, time_count=lay.time_count, offset=offset)
        else:
            trailer = read_trailer(self._source, trailer_offset=offset, samples_per_pixel=lay.samples_per_pixel, time_count=lay.time_count)
        self._bands = self._bands_from_texts(trailer.band_texts)
        self._times = trailer.times

    @property
    def bands(self) -> tuple[Band, ...]:
        """Band metadata: from the item, else from the trailer (one request)."""
        if self._bands is None:
            self._load_trailer()
        assert self._bands is not None
        return self._bands

    @property
    def times(self) -> TimeCoordinates:
        """Time coordinates: from the item, else from the trailer (one request)."""
        if self._times is None:
            self._load_trailer()
        assert self._times is not None
        return self._times

    @property
    def grid(self) -> Grid | None:
        """CRS, transform and shape: from the item, else from the file (one 160-byte request).

        The header blob replaced the head, so the head is never read: the two
        georeferencing values are the last 160 bytes before the frames
        (:data:`~rumi_core.georef.GEOREF_BYTES`), a range the blob locates.
        None for an ungeoreferenced raster.
        """
        if self._grid is _UNSET:
            end = self.header.base_frame_offset
            (data,) = self._source.read_ranges([(end - GEOREF_BYTES, GEOREF_BYTES)])
            self._grid = file_grid(Georeferencing.from_bytes(data), self.layout)
        grid: Grid | None = self._grid
        return grid

    @property
    def crs(self) -> str | None:
        """The CRS of the values: the grid's, compound with the vertical CRS the item names, as the source's was; None ungeoreferenced.

        A rumi file holds a 2D CRS only; its item's ``rumi:vertical_crs``
        (:data:`~catalog.extension.VERTICAL_CRS`) keeps what its heights are
        above. An EPSG vertical CRS joins the grid's again
        (``"EPSG:32633+5773"``), a 3D geographic one takes its place
        (``"EPSG:4979"``); any other is left out, as GeoTIFF keys hold EPSG
        codes. GeoTIFFs and xarray datasets of the cube carry this CRS.

        Raises:
            ItemError: ``rumi:vertical_crs`` is not a text, or an EPSG code the registry does not hold.
        """
        grid = self.grid
        if grid is None:
            return None
        vertical = (self.item or {}).get("properties", {}).get(VERTICAL_CRS)
        problem = mismatch(vertical, TEXT, VERTICAL_CRS)
        if problem is not None:
            raise ItemError(problem)
        if vertical is None or EPSG_CODE.fullmatch(vertical) is None:
            return grid.crs
        from pyproj import CRS
        from pyproj.exceptions import CRSError

        try:
            kind = CRS.from_user_input(vertical).type_name
        except CRSError as err:
            raise ItemError(f"{VERTICAL_CRS} is {vertical}, which is not in the EPSG registry") from err
        if kind == "Vertical CRS":
            return f"{grid.crs}+{vertical.removeprefix('EPSG:')}"
        return vertical if kind == "Geographic 3D CRS" else grid.crs

    # -- reading -------------------------------------------------------------------------

    def _band_positions(self, bands: str | SupportsIndex | slice | Sequence[SupportsIndex | str] | None) -> list[int] | None:
        band_sel = parse_band_selector(bands) if isinstance(bands, str) else bands
        if band_sel is None:
            return None
        band_sel = selector_list(band_sel, self.layout.samples_per_pixel, "band")
        if any(isinstance(b, str) for b in band_sel):
            return band_positions(band_sel, self.bands)
        check_positions(band_sel, self.layout.samples_per_pixel, "band")  # positions alone need no band metadata
        return [operator.index(b) for b in band_sel]

    def _time_positions(self, times: str | SupportsIndex | slice | Sequence[SupportsIndex] | TimeRange | None) -> list[int] | None:
        time_sel = parse_time_selector(times) if isinstance(times, str) else times
        if time_sel is None:
            return None
        if isinstance(time_sel, TimeRange):
            return time_positions(time_sel, self.times)
        time_pos = selector_list(time_sel, self.layout.time_count, "time")
        check_positions(time_pos, self.layout.time_count, "time")
        return [operator.index(t) for t in time_pos]

    def resolve(
        self, **selectors: Unpack[ReadSelectors]
    ) -> tuple[list[int] | None, list[int] | None, tuple[tuple[int, int], tuple[int, int]] | None]:
        """Turn selectors (:class:`~catalog.selectors.ReadSelectors`) into band positions, time positions and a pixel window.

        Raises:
            TypeError: a keyword is no selector (``band=`` for ``bands=``
                would otherwise read every band, over HTTP the whole cube).
            SelectorError: a selector matches nothing, or ``bbox`` and ``window`` are both given.
        """
        unknown = sorted(set(selectors) - set(ReadSelectors.__annotations__))
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r}; the selectors are {', '.join(ReadSelectors.__annotations__)}")
        band_pos = self._band_positions(selectors.get("bands"))
        time_pos = self._time_positions(selectors.get("times"))
        bbox = selectors.get("bbox")
        window = selectors.get("window")
        if bbox is not None:
            if window is not None:
                raise SelectorError("give a bbox or a window, not both")
            grid = self.grid
            if grid is None:
                raise SelectorError("the raster has no CRS, so a bbox cannot be placed on it; use a pixel window")
            window = grid.window_for_bbox(bbox, selectors.get("bbox_crs", "EPSG:4326"))
        elif window is not None:
            window = clip_window(window, self.layout.image_length, self.layout.image_width)
        return band_pos, time_pos, window

    def selection(self, **selectors: Unpack[ReadSelectors]) -> ReadSelection:
        """The checked rumi_core selection that :meth:`read` reads (see :meth:`resolve`).

        Raises:
            SelectorError: a selector matches nothing.
            SelectionError: the selection lies outside the raster.
        """
        band_pos, time_pos, win = self.resolve(**selectors)
        return resolve_selection(self.layout, bands=band_pos, times=time_pos, window=win)

    def frame_count(self, selection: ReadSelection) -> int:
        """How many frames a read of ``selection`` decodes."""
        return len(self.layout.frames_for(bands=selection.bands, times=selection.times, rows=selection.rows, cols=selection.cols))

    def read(
        self,
        *,
        threads: int | None = None,
        labels: bool = True,
        progress: Callable[[int], None] | None = None,
        timeout: float | None = None,
        **selectors: Unpack[ReadSelectors],
    ) -> CubeRead:
        """Read a selection.

        Args:
            bands: Positions or names (``"red,nir"``, ``[0, 3]``); None for all.
            times: Positions, a :class:`TimeRange`, or its text (``"2021-01-01/2021-02-01"``, ``"0,2"``); None for all.
            bbox: ``(minx, miny, maxx, maxy)`` in ``bbox_crs``.
            bbox_crs: CRS of ``bbox``; longitude/latitude by default.
            window: Pixel window ``((row0, row1), (col0, col1))`` instead of a bbox.
                (These five are :class:`~catalog.selectors.ReadSelectors`.)
            threads: Fetch-and-decode threads; every CPU when None.
            labels: Also resolve band metadata, time values and the window
                transform for the result (may cost one request each for a bare file).
            progress: Called with 1 after each frame is decoded (from the
                decoding threads); :meth:`frame_count` says how many to expect.
            timeout: Total seconds the read may take over the network, every
                thread and retry included; the storage's default when None.

        Raises:
            SelectorError: a selector matches nothing.
            SelectionError: the window lies outside the raster.
            StorageError: the storage failed.
            FrameDecodeError: a frame is corrupt.
            ChangedFileError: the file was rewritten after its item was read.
            StorageError: the cube is closed.
        """
        if self._closed:
            raise StorageError("the cube is closed", href=self.name)
        with deadline(self._source, timeout):  # one deadline for every request of the read, labels included
            sel = self.selection(**selectors)
            try:
                data = read_selection(self._source, self.header, sel, threads=threads, progress=progress)
            except RumiError as err:
                # A frame at a stale offset: say why, when that is why. When the size cannot be asked
                # either (the server is gone, the deadline has passed), the read's own failure is the one to show.
                with contextlib.suppress(StorageError):
                    self.check_unchanged()
                if isinstance(err, FrameDecodeError) and self._sidecar is not None:
                    # A blob beside the file that belongs to another file places frames where there are none.
                    raise FrameDecodeError(
                        f"{err}; the frames were located by {self._sidecar}, which may be another file's blob: "
                        "rumi validate FILE checks the two together",
                        field=err.field,
                    ) from err
                raise
            self.check_unchanged()
            if labels:
                all_bands = self.bands
                all_times = time_values(self.times)
                grid = self.grid
        window_out = (sel.rows, sel.cols)
        if not labels:
            all_bands = tuple(Band(str(i)) for i in range(self.layout.samples_per_pixel))
            all_times = []
            grid = None
        return CubeRead(
            data=data,
            bands=tuple(all_bands[b] for b in sel.bands),
            times=tuple(all_times[t] for t in sel.times) if all_times else (),
            window=window_out,
            crs=grid.crs if grid is not None else None,
            transform=grid.window_area_transform(window_out) if grid is not None else None,
            pixel_is_point=grid.pixel_is_point if grid is not None else False,
            nodata=common_nodata(all_bands[b].nodata for b in sel.bands) if labels else None,
        )

    def check_unchanged(self) -> None:
        """Fail when the file is not the one the item (and so the blob) describes.

        A file rewritten in place (an open period that gained acquisitions)
        keeps its name, so a reader holding the old item and blob would locate
        frames at stale offsets. The item's ``file:size`` is compared with the
        source's size after the frames are fetched: free for local files and
        for HTTP, whose ranged answers carry the total; a checksum would mean
        reading the whole file.

        Raises:
            ChangedFileError: the sizes differ; the frames just read (or failed to decode) are discarded.
        """
        data = ((self.item or {}).get("assets") or {}).get("data") or {}
        expected = data.get("file:size")
        if expected is None:
            return
        actual = self._source.size()
        if actual != int(expected):
            raise ChangedFileError(
                f"{self.name}: the file is {actual} bytes, its item says file:size {expected}: it is not the file the item "
                "describes (rewritten since the item was read, or replaced); open the item again, and if it still differs, "
                "the catalogue is out of date",
                field="file:size",
            )

    # -- lifetime ------------------------------------------------------------------------

    @property
    def source(self) -> ByteSource:
        """The byte source of the file."""
        return self._source

    def reopened(self) -> Cube:
        """This cube again, open on a source of its own: the same file (opened anew), blob, bands, times and grid.

        What a closed cube's lazy readers (the xarray backend's) read through. A
        local file replaced since is read with this cube's blob, as a file
        rewritten under an open cube would be: its frames' checksums fail.
        """
        cube = Cube(copy.copy(self._source), self.header, bands=self._bands, times=self._times, grid=self._grid, item=self.item)
        cube._sidecar = self._sidecar
        return cube

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: reads then fail, whatever the storage (as rasterio's ``closed``)."""
        return self._closed

    def close(self) -> None:
        """Close the byte source; a second call does nothing."""
        if self._owned and not self._closed:
            self._source.close()
        self._closed = True

    def __enter__(self) -> Cube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        lay = self.layout
        return f"<{'closed ' if self._closed else ''}catalog.Cube {lay.shape} {lay.encoding.name} {self.name!r}>"


def _local_start(path: str) -> bytes | None:
    """The first 16 bytes of a local file; None when it cannot be opened (reading it whole then says why)."""
    try:
        with open(path, "rb") as f:
            return f.read(16)
    except OSError:
        return None


def _kind_text(start: bytes) -> str:
    """What :func:`~rumi_core.ifd.file_kind` says of a file, and for a TIFF how it becomes a rumi file."""
    what = file_kind(start) or "unknown"
    return f"{what} (rumi convert makes rumi files of GeoTIFFs)" if "TIFF" in what else what
