"""The entry points: choose a dataset's codec, and its frame unit, by measuring a sample.

Specification sections *Frames* and *Choosing a frame unit*.
:func:`profile_codecs` chooses a codec for given sample frames (the hook a
pipeline calls once per cube: write every frame with ``.codec`` and keep its
JSON form to report the choice); :func:`select_layout` also samples the dataset
(:mod:`rumi_core.compression.sampling`) and chooses the frame unit, as
:func:`rumi_core.write` does with ``frame_unit="auto"``. Both return a
:class:`~rumi_core.compression.candidates.CodecMeasurements` recording every candidate
measured, so a run can report its choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rumi_core.codecs import parse_nodata
from rumi_core.compression.bounded import choose_bounded
from rumi_core.compression.candidates import DECODE_FLOOR, Candidate, CodecMeasurements, Mode, measure, parse_decode_floor, parse_mode, pick
from rumi_core.compression.lossless import choose_lossless, probe_interleaved
from rumi_core.compression.sampling import SAMPLE_BUDGET, SAMPLE_LOCATIONS, SampleFrames, crop_frames, sample_cells, unit_frames
from rumi_core.compression.screening import SizeCache
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError
from rumi_core.frame_units import FRAME_UNITS

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from rumi_core.codecs import ErrorBound, FrameCodec
    from rumi_core.encodings import SampleEncoding

__all__ = ["parse_frame_unit_choice", "profile_codecs", "select_layout"]


def _measured(
    cache: SizeCache,
    frames: SampleFrames,
    *,
    unit: int | None,
    mode: Mode,
    bound: ErrorBound | None,
    nodata: int | float | None,
    floor: float,
    builtins: bool = True,
) -> tuple[Candidate, ...]:
    """The candidates of one layout: the bounded strategy under a bound, else the lossless one.

    Raises:
        InvalidInputError: a bound with ``mode="portable"``, or one the
            quantizers cannot honour.
    """
    if bound is None:
        return choose_lossless(cache, frames, unit=unit, mode=mode, nodata=nodata, floor=floor, builtins=builtins)
    if mode == "portable":
        raise InvalidInputError("portable frames cannot be lossy: geozl's quantizers need geozl's decoders", field="compression")
    return choose_bounded(frames, unit=unit, bound=bound, nodata=nodata, floor=floor)


def _check_frames(frames: Sequence[npt.NDArray[Any]], axes: tuple[str, ...], encoding: SampleEncoding | str | None) -> None:
    """Refuse sample frames that are absent, mixed, or of another encoding than ``encoding``."""
    if not frames:
        raise InvalidInputError("select a codec from at least one sample frame", field="sample_frames")
    if any(f.dtype.newbyteorder("<") != frames[0].dtype.newbyteorder("<") or f.ndim != len(axes) for f in frames):
        raise InvalidInputError(f"sample frames must share one dtype and have {len(axes)} axes {axes}", field="sample_frames")
    enc = encoding_for_dtype(frames[0].dtype)
    if encoding is not None and encoding_for_dtype(encoding if isinstance(encoding, str) else encoding.dtype) != enc:
        raise InvalidInputError(f"sample frames hold {enc.name} samples, not {encoding}", field="encoding")


def profile_codecs(
    sample_frames: Sequence[npt.NDArray[Any]],
    *,
    axes: Sequence[str],
    encoding: SampleEncoding | str | None = None,
    mode: Mode = "auto",
    nodata: int | float | None = None,
    bound: ErrorBound | None = None,
    decode_floor: float = DECODE_FLOOR,
    budget: int = SAMPLE_BUDGET,
) -> CodecMeasurements:
    """Measure candidate codecs on sample frames and return the full record.

    Args:
        sample_frames: Frames of one dataset, each in its decoded layout
            (``axes``), with the dtype of the dataset's sample encoding.
        axes: Axis names of every frame, such as ``("b", "h", "w")``.
        encoding: The sample encoding; checked against the frames when given.
        mode: ``auto`` (smallest that decodes at ``decode_floor``), ``max``
            (also lets each frame pick among each plane's best three chains)
            or ``portable`` (OpenZL's built-in codecs only).
        nodata: The dataset's nodata value, or NaN, if any.
        bound: An error bound for lossy compression; None for lossless.
        decode_floor: Slowest decode accepted, bytes per second; 0 for none.
        budget: Most samples to screen; larger samples are cropped.

    Returns:
        The :class:`~rumi_core.compression.candidates.CodecMeasurements`; ``frame_unit`` is None.

    Raises:
        InvalidInputError: no frames, frames of different dtypes or axes
            counts, a bad mode, or a bound the quantizers cannot honour.
    """
    chosen_mode = parse_mode(mode)
    floor = parse_decode_floor(decode_floor)
    axes_t = tuple(axes)
    frames = [np.asarray(f) for f in sample_frames]
    _check_frames(frames, axes_t, encoding)
    nodata = parse_nodata(nodata)
    prepared = SampleFrames.build(crop_frames(frames, axes_t, budget)[0], axes_t)
    candidates = _measured(SizeCache(), prepared, unit=None, mode=chosen_mode, bound=bound, nodata=nodata, floor=floor)
    best = pick(candidates, floor)
    return CodecMeasurements(best.codec, None, chosen_mode, floor, candidates, tuple(range(len(frames))), bound)


def parse_frame_unit_choice(frame_unit: object) -> int | Literal["auto"]:
    """Check a ``frame_unit`` argument: ``"auto"`` or an integer (its registration is checked with the layout).

    Raises:
        InvalidInputError: neither ``"auto"`` nor an integer.
    """
    if frame_unit == "auto":
        return "auto"
    if isinstance(frame_unit, bool) or not isinstance(frame_unit, int):
        raise InvalidInputError(f"frame_unit is 'auto' or an integer 0..9, got {frame_unit!r}", field="frame_unit")
    return frame_unit


def _candidate_units(frame_unit: object, access: str | None, *, bands: int, times: int) -> list[int]:
    """The frame units to measure: the one given, or every unit valid for ``(B, T)`` that fits ``access``."""
    chosen = parse_frame_unit_choice(frame_unit)
    if chosen != "auto":
        return [chosen]
    valid = [u for u in FRAME_UNITS.values() if u.is_valid(bands=bands, times=times) and u.value != 9]
    if access == "tile":
        valid = [u for u in valid if u.holds == "tile"]
    elif access == "cell":
        valid = [u for u in valid if u.holds == "cell"] or [u for u in valid if u.holds == "tile"]
    return [u.value for u in valid]


def select_layout(
    data: Any,
    *,
    tile_size: tuple[int, int],
    frame_unit: int | Literal["auto"] = "auto",
    access: Literal["tile", "cell"] | None = None,
    mode: Mode = "auto",
    nodata: int | float | None = None,
    bound: ErrorBound | None = None,
    decode_floor: float = DECODE_FLOOR,
    locations: int = SAMPLE_LOCATIONS,
    budget: int = SAMPLE_BUDGET,
    codec: FrameCodec | None = None,
) -> CodecMeasurements:
    """Choose the frame unit and the codec of a dataset by measuring a sample of it.

    With ``frame_unit="auto"`` every unit valid for ``(B, T)`` that fits
    ``access`` is measured (units 0 and 9 compress identically, so 9 is not)
    and the smallest wins, ties going to the unit with finer access; a frame is
    the smallest thing a reader decodes, so ``access="tile"`` keeps one band and
    date per frame and ``access="cell"`` keeps whole cells.

    Args:
        data: ``(B, Y, X)`` or ``(T, B, Y, X)`` samples (any sliceable array).
        tile_size: ``(tile_length, tile_width)``.
        frame_unit: ``"auto"`` or a frame unit to keep.
        access: ``"tile"``, ``"cell"`` or None (no preference).
        mode: ``"auto"`` (the smallest codec that decodes at
            ``decode_floor``), ``"max"`` (also lets each frame pick among each
            plane's best three chains) or ``"portable"`` (OpenZL's built-in
            codecs only), as for :func:`profile_codecs`. A given ``codec`` is
            measured as it is; the mode is recorded either way.
        nodata: The dataset's nodata value, or NaN, if any (a form
            :func:`~rumi_core.codecs.parse_nodata` takes), given to the
            candidate codecs measured.
        bound: An error bound for lossy compression: the bounded candidates
            are measured instead of the lossless ones (not with
            ``mode="portable"``); None for lossless.
        decode_floor: Slowest decode accepted, bytes of decoded samples per
            second; 0 for none. Across every unit, the smallest candidate
            predicted to decode at it wins, or else the fastest.
        locations: Tile locations to sample.
        budget: Most samples to screen.
        codec: A codec to keep; then only the frame unit is chosen.

    Returns:
        The :class:`~rumi_core.compression.candidates.CodecMeasurements` with ``frame_unit`` set.

    Raises:
        InvalidInputError: a bad mode, access, unit, nodata or decode_floor;
            a bound with ``mode="portable"`` or one the quantizers cannot
            honour; or a ``codec`` that takes none of the units.
    """
    chosen_mode = parse_mode(mode)
    floor = parse_decode_floor(decode_floor)
    nodata = parse_nodata(nodata)
    shape = tuple(int(d) for d in data.shape)
    times, bands, _, _ = (1, *shape) if len(shape) == 3 else shape
    if access not in (None, "tile", "cell"):
        raise InvalidInputError(f"access is 'tile', 'cell' or None, got {access!r}", field="access")
    units = _candidate_units(frame_unit, access, bands=bands, times=times)
    cells, picked = sample_cells(data, tile_size=tile_size, locations=locations, budget=budget)
    cache = SizeCache()
    candidates: tuple[Candidate, ...] = ()
    for position, unit in enumerate(units):
        prepared = SampleFrames.of_unit(unit_frames(cells, unit, bands, times, picked))
        if codec is not None:
            found = measure(codec, prepared.frames, prepared.axes, unit)
            candidates += () if found is None else (found,)
        elif bound is None and prepared.axes[-1] != "w":
            candidates += probe_interleaved(prepared, unit=unit, mode=chosen_mode)
        else:
            candidates += _measured(
                cache, prepared, unit=unit, mode=chosen_mode, bound=bound, nodata=nodata, floor=floor, builtins=position == 0
            )
    if not candidates:
        raise InvalidInputError(f"codec {codec!r} takes none of the frame units {units}", field="compression")
    # One pick over every unit: the smallest that holds the floor (earlier,
    # finer units win ties, since sorting is stable).
    best = pick(candidates, floor)
    return CodecMeasurements(best.codec, best.frame_unit, chosen_mode, floor, candidates, picked, bound)
