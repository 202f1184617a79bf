"""Writing an array as a canonical rumi file.

Specification sections *Frames*, *Fixed IFD*, *Trailer* and *Creating the
header blob*. :func:`write` takes an Image ``(B, Y, X)`` or a Cube
``(T, B, Y, X)``, splits it into frames following ``frame_unit``, compresses
each frame as one self-contained OpenZL frame and assembles the file with
:class:`~rumi_core.assemble.FileAssembler`.

The compression arguments (``compression``, ``frame_unit="auto"``, ``access``,
the error bounds, ``nodata``) resolve into a codec and a frame unit through
:func:`choose_compression`, which measures with :mod:`rumi_core.compression`.

Every input is checked before anything is written: dimensions against the
field widths, the dtype against the 21 sample encodings, band texts, time
order, the CRS and the transform. The file is written to a temporary name and
renamed into place; it streams, so at most one frame's decoded samples are
held at a time besides the caller's array.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rumi_core.assemble import FileAssembler
from rumi_core.codecs import (
    BoundedCodec,
    FrameCodec,
    bounded_encoding_check,
    check_nodata_sample,
    parse_codec,
    parse_error_bound,
    parse_nodata,
)
from rumi_core.compression import DECODE_FLOOR, MODES, CompressionChoice, parse_frame_unit_choice, parse_mode, select_layout
from rumi_core.encodings import SampleEncoding, encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.files import writable_path
from rumi_core.georef import Georeferencing
from rumi_core.ifd import base_frame_offset
from rumi_core.layout import Layout
from rumi_core.time_coordinates import TimeCoordinates
from rumi_core.trailer import Trailer

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from rumi_core.codecs import ErrorBound

__all__ = [
    "MAX_FILE_OFFSET",
    "WritePlan",
    "WriteResult",
    "choose_compression",
    "frame_samples",
    "parse_tile_size",
    "plan_write",
    "write",
]


MAX_FILE_OFFSET = 2**63 - 1
"""The largest byte offset a file can reach (POSIX ``off_t``), below the uint64 of TileOffsets."""


def parse_tile_size(tile_size: int | tuple[int, int] | Sequence[int]) -> tuple[int, int]:
    """Return ``(tile_length, tile_width)`` from an int or a ``(height, width)`` pair.

    Raises:
        InvalidInputError: not a positive integer or pair of them up to 65535.
    """
    try:
        if isinstance(tile_size, (int, np.integer)) and not isinstance(tile_size, bool):
            pair = (operator.index(tile_size), operator.index(tile_size))
        else:
            h, w = tile_size  # type: ignore[misc]
            pair = (operator.index(h), operator.index(w))
    except (TypeError, ValueError) as err:
        raise InvalidInputError(f"tile_size is an int or a (height, width) pair, got {tile_size!r}", field="tile_size") from err
    for v, tag in zip(pair, ("TileLength", "TileWidth"), strict=True):
        if not 1 <= v <= 0xFFFF:
            raise InvalidInputError(f"tile size {v} is outside 1..65535", field=tag)
    return pair


@dataclass(frozen=True)
class WritePlan:
    """Everything decided about a file before its first byte is written."""

    layout: Layout
    georef: Georeferencing
    trailer: Trailer
    codec: FrameCodec


def plan_write(
    shape: Sequence[int],
    dtype: Any,
    *,
    bands: Sequence[str],
    times: Sequence[Any],
    crs: Any = None,
    transform: Any = None,
    tile_size: int | tuple[int, int] = 512,
    frame_unit: int = 0,
    compression: Any = None,
    pixel_is_point: bool = False,
) -> WritePlan:
    """Check every input of :func:`write` and return the plan, writing nothing.

    Raises:
        InvalidInputError: any input cannot be stored in a compliant file.
        CRSError: the CRS cannot be stored as an EPSG code.
    """
    dims = tuple(int(d) for d in shape)
    if len(dims) == 3:
        t, b, y, x = 1, *dims
    elif len(dims) == 4:
        t, b, y, x = dims
    else:
        raise InvalidInputError(f"data must be (B, Y, X) or (T, B, Y, X), got shape {dims}", field="data")
    encoding: SampleEncoding = encoding_for_dtype(dtype)
    tile_length, tile_width = parse_tile_size(tile_size)
    # The dimensions are checked against their field widths first, before any
    # band text or time is looked at (a Cube too long for TimeCount is reported
    # as such, not as a count mismatch).
    layout = Layout(x, y, t, b, tile_width, tile_length, encoding, frame_unit)
    smallest_file = base_frame_offset(samples_per_pixel=b, frame_count=layout.frame_count) + layout.frame_count
    if smallest_file > MAX_FILE_OFFSET:
        raise InvalidInputError(
            f"{layout.frame_count} frames need a file of at least {smallest_file} bytes, beyond the largest file offset "
            f"{MAX_FILE_OFFSET}; use a larger tile_size or a cell frame_unit",
            field="TileOffsets",
            rule="Every reconstructed offset MUST fit in uint64",
        )
    if bands is None or isinstance(bands, (str, bytes)):
        raise InvalidInputError(f"bands is a list of one text per band, got {bands!r}", field="bands")
    try:
        band_texts = tuple(bands)
    except TypeError as err:
        raise InvalidInputError(f"bands is a list of one text per band, got {type(bands).__name__}", field="bands") from err
    if len(band_texts) != b:
        raise InvalidInputError(f"{len(band_texts)} band texts for {b} bands; give one text per band", field="bands")
    if times is None:
        raise InvalidInputError("times is required: every time step has a coordinate", field="times")
    if isinstance(times, (str, bytes)):
        raise InvalidInputError(f"times is a list of one coordinate per time step; wrap a single time as [{times!r}]", field="times")
    axis = TimeCoordinates.from_values(times)
    if axis.time_count != t:
        raise InvalidInputError(f"{axis.time_count} time coordinates for {t} time steps", field="times")
    georef = Georeferencing.from_crs(crs, transform, pixel_is_point=pixel_is_point)
    codec = parse_codec(compression)
    if not codec.accepts(encoding):
        # Refused with the plan, before any frame is compressed: the codec's own encode would refuse the first frame,
        # after a converter had read every scene of the cube.
        raise InvalidInputError(
            f"codec {codec.name!r} ({json.dumps(codec.to_dict()['configuration'], separators=(',', ':'))}) does not take "
            f"{encoding.name} samples; give a codec that does ('raster' takes every encoding) or let it be chosen (compression 'auto')",
            field="compression",
        )
    return WritePlan(layout, georef, Trailer(band_texts, axis), codec)


def frame_samples(data: Any, layout: Layout, index: int, *, crop: tuple[slice, slice] | None = None) -> NDArray[Any]:
    """Return frame ``index`` of ``data`` as a C-contiguous little-endian array.

    ``data`` is ``(T, B, Y, X)`` or, for an Image, ``(B, Y, X)``. The result
    has the decoded shape and axis order of the frame (:attr:`Layout.frame_axes`).
    ``crop``, rows and columns within the tile (non-negative slices of step
    1), reads only that part of it: a sample for a codec choice
    (:func:`rumi_core.compression.sampling.crop_windows`).
    """
    band, time, y0, y1, x0, x1, _ = layout.frame_extent(index)
    if crop is not None:
        rows, cols = crop
        y0, y1, x0, x1 = y0 + rows.start, y0 + rows.stop, x0 + cols.start, x0 + cols.stop
    cube = data if len(data.shape) == 4 else None
    if band is not None and time is not None:
        block = np.asarray(cube[time, band, y0:y1, x0:x1] if cube is not None else data[band, y0:y1, x0:x1])
        return np.ascontiguousarray(block, dtype=layout.encoding.dtype)
    block4 = np.asarray(cube[:, :, y0:y1, x0:x1] if cube is not None else data[:, y0:y1, x0:x1][np.newaxis])
    axes = layout.frame_axes
    kept = [a for a in ("t", "b") if a in axes]
    squeeze = tuple(i for i, a in enumerate(("t", "b")) if a not in axes)
    block = block4.squeeze(axis=squeeze) if squeeze else block4
    current = (*kept, "h", "w")
    block = block.transpose([current.index(a) for a in axes])
    return np.ascontiguousarray(block, dtype=layout.encoding.dtype)


def choose_compression(
    data: Any,
    *,
    tile_size: tuple[int, int],
    frame_unit: int | Literal["auto"] = 0,
    compression: Any = "auto",
    access: Literal["tile", "cell"] | None = None,
    max_abs_error: float | None = None,
    max_rel_error: str | None = None,
    nodata: int | float | None = None,
    decode_floor: float = DECODE_FLOOR,
) -> CompressionChoice:
    """Resolve :func:`rumi_core.write`'s compression arguments into a codec and a frame unit.

    ``compression`` is ``"auto"`` (or None), ``"max"`` or ``"portable"`` to
    select by measuring (:func:`select_layout`), or a codec, codec name or JSON
    form to use as given. ``frame_unit="auto"`` measures the units too; an
    integer keeps that unit. ``max_abs_error``/``max_rel_error`` ask for an
    error-bounded lossy write. No selection runs when both the codec and the
    unit are given.

    Raises:
        InvalidInputError: a bad mode, unit, access or bound, a bound on an
            encoding the quantizers cannot honour, or a bound with a codec
            that is not a :class:`~rumi_core.codecs.BoundedCodec`.
    """
    bound = parse_error_bound(max_abs_error=max_abs_error, max_rel_error=max_rel_error)
    nodata = parse_nodata(nodata)
    check_nodata_sample(nodata, np.dtype(data.dtype))
    if _selects(compression):
        mode = parse_mode("auto" if compression is None else compression)
        if bound is not None:
            bounded_encoding_check(encoding_for_dtype(data.dtype), bound)
        selection = select_layout(
            data,
            tile_size=tile_size,
            frame_unit=frame_unit,
            access=access,
            mode=mode,
            nodata=nodata,
            bound=bound,
            decode_floor=decode_floor,
        )
        assert selection.frame_unit is not None
        return CompressionChoice(selection.codec, selection.frame_unit, mode, bound, selection)
    codec = parse_codec(compression)
    if bound is not None and not (isinstance(codec, BoundedCodec) and codec.bound == bound):
        raise InvalidInputError(
            f"an error bound needs compression='auto' or 'max' (or a bounded codec with that bound), got {codec!r}",
            field="compression",
        )
    if isinstance(codec, BoundedCodec):
        bound = codec.bound
    unit = parse_frame_unit_choice(frame_unit)
    if unit == "auto":
        selection = select_layout(data, tile_size=tile_size, access=access, codec=codec, decode_floor=decode_floor, nodata=nodata)
        assert selection.frame_unit is not None
        return CompressionChoice(codec, selection.frame_unit, "explicit", bound, selection)
    return CompressionChoice(codec, unit, "explicit", bound)


def _selects(compression: object) -> bool:
    """Whether ``compression`` asks to select by measuring (a mode, or None for ``auto``) rather than naming a codec."""
    return compression is None or (isinstance(compression, str) and compression in MODES)


def _check_boolean(samples: NDArray[Any], index: int) -> None:
    if samples.view(np.uint8).max(initial=0) > 1:
        raise InvalidInputError(f"frame {index} holds a boolean byte other than 0 or 1", field="data", rule="every byte MUST be 0 or 1")


class WriteResult(bytes):
    """The header blob :func:`write` returns, carrying the compression it chose.

    It *is* the blob (a :class:`bytes`, equal to it and usable wherever the
    blob is), so callers that only want the blob need not change. The choice
    rides along for the run to report and the catalogue to record: the codec
    (its JSON form is ``result.codec.to_dict()``), the frame unit, whether the
    write was lossless or error-bounded, the openzl and geozl versions, and the
    measurements behind the choice.
    """

    choice: CompressionChoice
    """Codec, frame unit, selection mode, bound and measurements."""
    lossless_frames: int
    """Under an error bound, the frames stored losslessly because they broke it."""

    def __new__(cls, blob: bytes, choice: CompressionChoice, lossless_frames: int = 0) -> WriteResult:
        self = super().__new__(cls, blob)
        self.choice = choice
        self.lossless_frames = lossless_frames
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (WriteResult, (bytes(self), self.choice, self.lossless_frames))

    def __repr__(self) -> str:
        # Not the blob's bytes, which a REPL or notebook showed whole.
        bound = f" within {self.bound}" if self.bound is not None else ""
        codec = type(self.codec).__name__
        return f"<rumi_core.WriteResult: a {len(self)}-byte header blob; {codec}, frame unit {self.frame_unit}, {self.mode}{bound}>"

    @property
    def codec(self) -> FrameCodec:
        """The codec every frame was written with."""
        return self.choice.codec

    @property
    def frame_unit(self) -> int:
        """The frame unit of the file."""
        return self.choice.frame_unit

    @property
    def mode(self) -> str:
        """``"lossless"`` or ``"lossy"`` (error-bounded)."""
        return self.choice.mode

    @property
    def bound(self) -> ErrorBound | None:
        """The error bound every sample honours, or None for lossless."""
        return self.choice.bound

    @property
    def libraries(self) -> dict[str, str]:
        """Versions of openzl and geozl that chose the codec and wrote the frames.

        The choice is a pure function of the data, the options and these
        versions: the same call writes the same bytes wherever they match.
        """
        return dict(self.choice.libraries)

    def report(self) -> dict[str, Any]:
        """Return a JSON-ready record of the choice: codec, frame unit, mode, bound, library versions, selection."""
        return {**self.choice.to_dict(), "lossless_frames": self.lossless_frames}


def write(
    path: str | os.PathLike[str],
    data: Any,
    *,
    bands: Sequence[str],
    times: Sequence[Any],
    crs: Any = None,
    transform: Any = None,
    tile_size: int | tuple[int, int] = 512,
    frame_unit: int | Literal["auto"] = 0,
    compression: Any = "auto",
    pixel_is_point: bool = False,
    access: Literal["tile", "cell"] | None = None,
    max_abs_error: float | None = None,
    max_rel_error: str | None = None,
    nodata: int | float | None = None,
) -> WriteResult:
    """Write ``data`` as a rumi file at ``path`` and return its header blob.

    Args:
        path: Destination. Written to a temporary name beside it, then renamed.
        data: ``(B, Y, X)`` Image or ``(T, B, Y, X)`` Cube; a NumPy array or any
            array with ``shape``, ``dtype`` and slicing. Its dtype must be one of
            the 21 sample encodings; nothing is cast.
        bands: One unique, non-empty text per band, such as ``"B4, Red, 665nm"``.
        times: One coordinate per time step: instants (``datetime64``,
            ``datetime``, ISO string) or ``(start, end)`` intervals.
        crs: EPSG int, ``"EPSG:n"``, or a rasterio/pyproj CRS; None for none.
        transform: Six affine coefficients in rasterio order, or an ``Affine``.
        tile_size: Nominal tile size, an int or ``(height, width)``.
        frame_unit: The ``frame_unit`` value (0..9) valid for ``(B, T)``, or
            ``"auto"`` to measure the units that fit ``access`` and keep the
            smallest (*Choosing a frame unit*).
        compression: ``"auto"`` (the default; None means the same) measures
            candidate codecs on a sample and keeps the smallest predicted to
            decode at 300 MB/s per core (a static cost model, never a clock:
            the same call writes the same bytes on any machine); ``"max"`` also lets each frame pick among each
            plane's best chains; ``"portable"`` uses OpenZL's built-in codecs
            only. A codec, codec name or codec dict is used as given. See
            :mod:`rumi_core.compression`.
        pixel_is_point: Record PixelIsPoint instead of PixelIsArea.
        access: With ``frame_unit="auto"``: ``"tile"`` keeps one band and time
            per frame, ``"cell"`` whole cells, None measures both.
        max_abs_error: Write lossy frames with ``|x - x̂| <= max_abs_error`` for
            every sample (integer or float data); nodata and NaN stay exact.
        max_rel_error: Write lossy frames with ``|x - x̂| <= P/100 * |x|``, given
            as ``"P%"``. See :mod:`rumi_core.codecs`.
        nodata: The nodata sentinel (or NaN), a hint to compression: always
            kept exact, and handed to geozl's nodata stage where that compresses
            better. It is not stored: the specification has no nodata field, so
            a reader learns it from the catalogue (``rumi convert`` puts it in
            each band of the STAC item). A value no sample can hold is refused.

    Returns:
        The header blob, built from the finalized file, as a :class:`WriteResult`
        that also reports the codec, frame unit, mode and bound chosen.

    Raises:
        InvalidInputError: an input cannot be stored, or the bound cannot be
            honoured, or ``path`` is a URL; nothing was written.
        CRSError: the CRS has no EPSG code.
        IsADirectoryError: ``path`` is a folder.
        FileNotFoundError: the folder of ``path`` does not exist.

    Example:
        >>> import numpy as np, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.rumi")
        >>> blob = write(path, np.zeros((2, 3, 4), "uint8"), bands=["a", "b"], times=["2020-01-01"])
        >>> len(blob)
        32
    """
    # Every input is checked before the (measuring) choice of compression.
    writable_path(path)
    if not hasattr(data, "shape"):  # nested lists, as NumPy takes them
        data = np.asarray(data)
    checked = plan_write(
        data.shape,
        data.dtype,
        bands=bands,
        times=times,
        crs=crs,
        transform=transform,
        tile_size=tile_size,
        frame_unit=0 if frame_unit == "auto" else frame_unit,
        compression=None if _selects(compression) else compression,
        pixel_is_point=pixel_is_point,
    )
    choice = choose_compression(
        data,
        tile_size=parse_tile_size(tile_size),
        frame_unit=frame_unit,
        compression=compression,
        access=access,
        max_abs_error=max_abs_error,
        max_rel_error=max_rel_error,
        nodata=nodata,
    )
    plan = dataclasses.replace(
        checked, layout=dataclasses.replace(checked.layout, frame_unit=choice.frame_unit), codec=parse_codec(choice.codec)
    )
    layout = plan.layout
    axes = layout.frame_axes
    is_bool = layout.encoding.name == "bool"
    codec = plan.codec
    lossless_frames = 0
    with FileAssembler(path, layout, plan.georef, plan.trailer) as out:
        for index in range(layout.frame_count):
            samples = frame_samples(data, layout, index)
            if is_bool:
                _check_boolean(samples, index)
            if isinstance(codec, BoundedCodec):
                encoded = codec.encode_frame(samples, axes=axes)
                lossless_frames += not encoded.lossy
                out.write_frame(encoded.data)
            else:
                out.write_frame(codec.encode(samples, axes=axes))
            # Drop this frame before the next one is sliced: at most one
            # frame's samples are alive at any time.
            del samples
    assert out.header is not None
    return WriteResult(out.header, choice, lossless_frames)
