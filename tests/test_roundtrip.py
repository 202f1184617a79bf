"""Round trips write -> read, bit for bit, and everything the writer must refuse.

Specification sections *Frames*, *Sample encodings*, *Trailer*, *Georeferencing*
and *Creating the header blob*. Samples are compared as bytes
(``.view(np.uint8)``), so NaN payloads, signed zeros and every float8 bit
pattern count.
"""

from __future__ import annotations

import gc
import os
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import affine
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumi_core
from rumi_core import writer
from rumi_core.encodings import ENCODINGS
from rumi_core.errors import CRSError, InvalidInputError, SelectionError
from rumi_core.frame_units import FRAME_UNITS
from rumi_core.testing import random_samples
from rumi_core.time_coordinates import TimeCoordinates

if TYPE_CHECKING:
    from collections.abc import Sequence

DTYPES = [e.name for e in ENCODINGS]
SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])


# -- helpers ----------------------------------------------------------------------------


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """True when two arrays have the same shape, dtype and bytes (NaN payloads included)."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))
    )


def band_names(count: int) -> list[str]:
    return [f"B{i:03d}, band {i}" for i in range(count)]


def daily(count: int, start: str = "2021-03-01") -> list[np.datetime64]:
    first = np.datetime64(start, "s")
    return [first + np.timedelta64(5 * i, "D") for i in range(count)]


def valid_units(bands: int, times: int) -> list[int]:
    return [u.value for u in FRAME_UNITS.values() if u.is_valid(bands=bands, times=times)]


def expected_selection(
    data: np.ndarray, bands: Sequence[int], times: Sequence[int], window: tuple[tuple[int, int], tuple[int, int]]
) -> np.ndarray:
    """What numpy slicing gives for a selection, in rumi's output shape."""
    (r0, r1), (c0, c1) = window
    cube = data if data.ndim == 4 else data[np.newaxis]
    picked = cube[np.ix_(list(times), list(bands))][:, :, r0:r1, c0:c1]
    return picked if data.ndim == 4 else picked[0]


def nothing_written(directory: Path) -> bool:
    """No file and no temporary ``.partial`` file was left in ``directory``."""
    return os.listdir(directory) == []


# -- strategies ---------------------------------------------------------------------------


@st.composite
def time_axes(draw: st.DrawFn, count: int) -> list[Any]:
    """Instants or intervals, whole days or sub-day seconds, before or after 1970."""
    start = draw(st.integers(-3_000_000_000, 3_000_000_000))
    whole_days = draw(st.booleans())
    if whole_days:
        start -= start % 86400
    gaps = draw(st.lists(st.integers(0, 40 * 86400), min_size=2 * count, max_size=2 * count))
    if whole_days:
        gaps = [g - g % 86400 for g in gaps]
    kind = draw(st.sampled_from(["instant", "interval"]))
    if kind == "instant":
        values, t = [], start
        for g in gaps[:count]:
            t += g
            values.append(np.datetime64(t, "s"))
        return values
    intervals, t = [], start
    for i in range(count):
        begin = t + gaps[2 * i]
        end = begin + max(gaps[2 * i + 1], 86400 if whole_days else 1)
        intervals.append((np.datetime64(begin, "s"), np.datetime64(end, "s")))
        t = end
    return intervals


@st.composite
def positions(draw: st.DrawFn, total: int) -> list[int] | None:
    """None, or a non-empty list of positions: repeated and unordered allowed."""
    if draw(st.booleans()):
        return None
    return draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=total + 2))


@st.composite
def windows(draw: st.DrawFn, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    if draw(st.booleans()):
        return None
    r0 = draw(st.integers(0, height - 1))
    r1 = draw(st.integers(r0 + 1, height))
    c0 = draw(st.integers(0, width - 1))
    c1 = draw(st.integers(c0 + 1, width))
    return (r0, r1), (c0, c1)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    t = draw(st.integers(1, 3))
    b = draw(st.integers(1, 4))
    y = draw(st.integers(1, 19))
    x = draw(st.integers(1, 19))
    shape = (t, b, y, x) if t > 1 else (b, y, x)
    return {
        "shape": shape,
        "dtype": draw(st.sampled_from(DTYPES)),
        "tile_size": (draw(st.integers(1, 9)), draw(st.integers(1, 9))),
        "frame_unit": draw(st.sampled_from(valid_units(b, t))),
        "times": draw(time_axes(t)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        "bands_sel": draw(positions(b)),
        "times_sel": draw(positions(t)) if t > 1 else draw(st.sampled_from([None, [0]])),
        "window": draw(windows(y, x)),
    }


# -- property: write then read returns the same bytes --------------------------------------


@SETTINGS
@given(case=cases())
def test_write_read_round_trip(case: dict[str, Any]) -> None:
    data = random_samples(case["shape"], case["dtype"], seed=case["seed"])
    t, b = (case["shape"][0], case["shape"][1]) if len(case["shape"]) == 4 else (1, case["shape"][0])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.rumi"
        blob = rumi_core.write(
            path, data, bands=band_names(b), times=case["times"], tile_size=case["tile_size"], frame_unit=case["frame_unit"]
        )
        whole = rumi_core.read(path, blob)
        assert same_bytes(whole, data)

        bands_sel, times_sel, window = case["bands_sel"], case["times_sel"], case["window"]
        part = rumi_core.read(path, blob, bands=bands_sel, times=times_sel, window=window, threads=2)
        want = expected_selection(
            data,
            bands_sel if bands_sel is not None else range(b),
            times_sel if times_sel is not None else range(t),
            window or ((0, data.shape[-2]), (0, data.shape[-1])),
        )
        assert same_bytes(part, want)

        rumi_core.validate(path, blob)
        described = rumi_core.info(path, blob)
        assert described.band_texts == tuple(band_names(b))
        assert described.times == TimeCoordinates.from_values(case["times"])
        assert described.shape == data.shape


# -- every sample encoding, every frame unit, edge shapes -----------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "tile_size", "frame_unit"),
    [
        ((1, 1, 1), 512, 0),  # a 1 x 1 Image
        ((2, 1, 1), (1, 1), 2),  # 1 x 1, bands interleaved
        ((3, 2, 7, 5), (3, 2), 0),  # Cube, edge tiles on both axes, non-square tiles
        ((3, 2, 7, 5), (4, 3), 6),  # Cube, cell frames "t h w b"
        ((2, 13, 11), (5, 4), 1),  # Image, cell frames "b h w"
    ],
    ids=["1x1", "1x1-cell", "cube-tiles", "cube-cells", "image-cells"],
)
def test_every_dtype_round_trips(tmp_path: Path, dtype: str, shape: tuple[int, ...], tile_size: Any, frame_unit: int) -> None:
    data = random_samples(shape, dtype, seed=len(shape) * 31 + frame_unit)
    t, b = (shape[0], shape[1]) if len(shape) == 4 else (1, shape[0])
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=band_names(b), times=daily(t), tile_size=tile_size, frame_unit=frame_unit)
    out = rumi_core.read(tmp_path / "x.rumi", blob)
    assert out.dtype == rumi_core.encoding_for_dtype(dtype).dtype
    assert same_bytes(out, data)
    rumi_core.validate(tmp_path / "x.rumi", blob)


UNIT_CASES = [(b, t, u) for b, t in [(1, 1), (3, 1), (1, 3), (3, 2)] for u in valid_units(b, t)]


def test_what_write_validate_and_info_return_shows_as_one_short_line(tmp_path: Path) -> None:
    """A REPL or notebook shows what the README's last line returns: the blob's bytes, and every frame's byte count
    (4 KB for a file of many frames), were shown whole."""
    blob = rumi_core.write(tmp_path / "m.rumi", np.zeros((3, 2, 256, 256), "uint16"), bands=["a", "b"],
                           times=["2020-01-01", "2020-01-02", "2020-01-03"], tile_size=16, compression="portable")  # fmt: skip
    shown = [repr(blob), repr(rumi_core.validate(tmp_path / "m.rumi", blob)), repr(rumi_core.info(tmp_path / "m.rumi"))]
    assert shown[0].startswith("<rumi_core.WriteResult: a ") and "header blob" in shown[0]
    assert "Cube (3, 2, 256, 256) uint16, 1536 frames" in shown[1] and "bands a, b" in shown[2]
    assert all(len(text) < 200 and "\n" not in text for text in shown), shown


def test_nested_lists_are_written_as_numpy_takes_them(tmp_path: Path) -> None:
    """Data without a ``shape`` is :func:`numpy.asarray`'s (it was an AttributeError on ``shape``)."""
    rumi_core.write(tmp_path / "l.rumi", [[[1, 2], [3, 4]]], bands=["a"], times=["2020-01-01"])
    np.testing.assert_array_equal(rumi_core.read(tmp_path / "l.rumi"), np.asarray([[[1, 2], [3, 4]]]))


@pytest.mark.parametrize(("bands", "times", "unit"), UNIT_CASES, ids=[f"B{b}-T{t}-unit{u}" for b, t, u in UNIT_CASES])
def test_every_valid_frame_unit_round_trips(tmp_path: Path, bands: int, times: int, unit: int) -> None:
    shape = (times, bands, 9, 10) if times > 1 else (bands, 9, 10)
    data = random_samples(shape, "int16", seed=unit)
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=band_names(bands), times=daily(times), tile_size=(4, 3), frame_unit=unit)
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), data)
    assert same_bytes(
        rumi_core.read(tmp_path / "x.rumi", blob, bands=[bands - 1, 0], window=((3, 9), (2, 5))),
        expected_selection(data, [bands - 1, 0], range(times), ((3, 9), (2, 5))),
    )
    lay = rumi_core.HeaderBlob.from_bytes(blob).layout
    g = 3 * 4
    assert lay.frame_count == (g * bands * times if unit in (0, 9) else g)
    rumi_core.validate(tmp_path / "x.rumi", blob)


@pytest.mark.parametrize(
    ("times", "bands", "unit"), [(1, 300, 0), (1, 300, 2), (2, 300, 9), (2, 300, 7), (400, 1, 0), (400, 1, 1), (400, 2, 4)]
)
def test_many_bands_and_many_times(tmp_path: Path, times: int, bands: int, unit: int) -> None:
    # B >= 5 moves BitsPerSample and SampleFormat out of the IFD entry; T = 400 is a long series.
    shape = (times, bands, 2, 3) if times > 1 else (bands, 2, 3)
    data = random_samples(shape, "uint16", seed=bands + times)
    axis = [np.datetime64("1969-12-25T23:59:00") + np.timedelta64(61 * i, "s") for i in range(times)]
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=band_names(bands), times=axis, tile_size=(1, 2), frame_unit=unit)
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), data)
    sel_b, sel_t = [bands - 1, 0, bands // 2], [times - 1, 0]
    got = rumi_core.read(tmp_path / "x.rumi", blob, bands=sel_b, times=sel_t if times > 1 else None)
    assert same_bytes(got, expected_selection(data, sel_b, sel_t if times > 1 else [0], ((0, 2), (0, 3))))
    described = rumi_core.info(tmp_path / "x.rumi")
    assert described.band_texts == tuple(band_names(bands))
    assert described.times == TimeCoordinates.from_values(axis)
    rumi_core.validate(tmp_path / "x.rumi", blob)


@pytest.mark.parametrize(
    "times",
    [
        ["1950-06-01", "1969-12-31", "1970-01-01", "2030-01-01"],  # whole days around the epoch
        ["1969-12-31T23:59:59Z", "1970-01-01T00:00:01Z", "1970-01-01T06:00:00+02:00", "2000-02-29T12:34:56Z"],
        [("1900-01-01", "1901-01-01"), ("1901-01-01", "1902-01-01"), ("1950-01-01", "1950-01-01T00:00:01"), ("2020-01-01", "2021-01-01")],
        [
            np.datetime64("1601-01-01T00:00:00"),
            np.datetime64("1601-01-01T00:00:00"),
            np.datetime64("9999-12-31T23:59:59"),
            np.datetime64("9999-12-31T23:59:59"),
        ],
    ],
    ids=["days", "seconds", "intervals", "far-apart-repeated"],
)
def test_time_axes_round_trip(tmp_path: Path, times: list[Any]) -> None:
    data = random_samples((4, 1, 2, 2), "uint8")
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=["only"], times=times)
    assert rumi_core.info(tmp_path / "x.rumi").times == TimeCoordinates.from_values(times)
    rumi_core.validate(tmp_path / "x.rumi", blob)


def test_image_and_cube_output_shapes(tmp_path: Path) -> None:
    image = random_samples((3, 5, 6), "uint8")
    blob = rumi_core.write(tmp_path / "i.rumi", image, bands=band_names(3), times=[("2020-01-01", "2021-01-01")])
    assert rumi_core.read(tmp_path / "i.rumi", blob).shape == (3, 5, 6)
    assert rumi_core.read(tmp_path / "i.rumi", blob, times=[0], bands=[2, 2]).shape == (2, 5, 6)
    with pytest.raises(SelectionError, match="an Image has one time step"):
        rumi_core.read(tmp_path / "i.rumi", blob, times=[0, 0])

    cube = random_samples((2, 3, 5, 6), "uint8")
    blob = rumi_core.write(tmp_path / "c.rumi", cube, bands=band_names(3), times=daily(2))
    assert rumi_core.read(tmp_path / "c.rumi", blob).shape == (2, 3, 5, 6)
    assert rumi_core.read(tmp_path / "c.rumi", blob, times=[1]).shape == (1, 3, 5, 6)
    assert rumi_core.read(tmp_path / "c.rumi", blob, times=[1, 0, 1], bands=[0], window=((1, 2), (0, 6))).shape == (3, 1, 1, 6)


@pytest.mark.parametrize("unit", [0, 4, 9])
def test_threads_do_not_change_the_result(tmp_path: Path, unit: int) -> None:
    data = random_samples((3, 2, 40, 33), "float32", seed=unit)
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=band_names(2), times=daily(3), tile_size=(8, 7), frame_unit=unit)
    limits = rumi_core.Limits(max_merged_request=1)  # one request per frame, so the pool has work
    one = rumi_core.read(tmp_path / "x.rumi", blob, threads=1, limits=limits)
    two = rumi_core.read(tmp_path / "x.rumi", blob, threads=2, limits=limits)
    assert same_bytes(one, two)
    assert same_bytes(one, data)
    picked = dict(bands=[1, 0], times=[2, 0, 2], window=((5, 31), (3, 30)))
    assert same_bytes(
        rumi_core.read(tmp_path / "x.rumi", blob, threads=1, **picked), rumi_core.read(tmp_path / "x.rumi", blob, threads=2, **picked)
    )


# -- metadata: info() returns what was written ----------------------------------------------

ROTATED = affine.Affine.rotation(30) @ affine.Affine.scale(2.5, -2.5) @ affine.Affine.translation(2600000, 1200000)


@pytest.mark.parametrize(
    ("crs", "transform", "pixel_is_point", "epsg", "coefficients"),
    [
        ("EPSG:32633", (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0), False, 32633, (10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)),
        (4326, affine.Affine(0.25, 0.0, -180.0, 0.0, -0.25, 90.0), True, 4326, (0.25, 0.0, -180.0, 0.0, -0.25, 90.0)),
        ("EPSG:2056", ROTATED, False, 2056, tuple(ROTATED)[:6]),
        (None, None, True, 0, None),
    ],
    ids=["utm", "geographic-point", "rotated", "none"],
)
def test_info_returns_what_was_written(
    tmp_path: Path, crs: Any, transform: Any, pixel_is_point: bool, epsg: int, coefficients: tuple[float, ...] | None
) -> None:
    bands = ["B4, Red, 664.5nm (S2A) / 665nm (S2B)", "B8, NIR", "Ünïcødé ☃"]
    times = [("2019-01-01", "2019-07-01"), ("2019-07-01", "2020-01-01")]
    data = random_samples((2, 3, 4, 5), "uint16")
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=bands, times=times, crs=crs, transform=transform, pixel_is_point=pixel_is_point)
    described = rumi_core.info(tmp_path / "x.rumi", blob)
    assert described.band_texts == tuple(bands)
    assert described.times.time_type == 1
    assert described.times.to_json() == [["2019-01-01T00:00:00Z", "2019-07-01T00:00:00Z"], ["2019-07-01T00:00:00Z", "2020-01-01T00:00:00Z"]]
    assert described.georef.epsg == epsg
    assert described.georef.crs == (f"EPSG:{epsg}" if epsg else None)
    assert described.georef.raster_type == (2 if pixel_is_point else 1)
    as_dict = described.to_dict()
    assert as_dict["bands"] == bands
    assert as_dict["pixel_is_point"] is pixel_is_point
    if coefficients is None:
        assert not described.georef.is_georeferenced
        assert as_dict["transform"] is None
    else:
        assert described.georef.transform == coefficients  # doubles, stored exactly
    rumi_core.validate(tmp_path / "x.rumi", blob)


@pytest.mark.parametrize(
    "compression",
    [
        rumi_core.DEFAULT_CODEC,
        {"name": "openzl", "configuration": {"graph": "compress"}},
        {"name": "geozl", "configuration": {"recipe": "planar>zigzag>transpose>entropy"}},
    ],
    ids=["default-codec", "openzl-compress", "geozl-recipe"],
)
def test_writing_is_deterministic(tmp_path: Path, compression: Any) -> None:
    # A given codec makes the same bytes from the same inputs. (compression="auto",
    # the default, picks its codec by timing decodes, so it is not pinned here.)
    data = random_samples((3, 4, 33, 20), "uint16", seed=5)
    args = dict(bands=band_names(4), times=daily(3), crs=32633, transform=(10, 0, 0, 0, -10, 0), tile_size=(16, 8), frame_unit=5)
    blob_a = rumi_core.write(tmp_path / "a.rumi", data, compression=compression, **args)
    blob_b = rumi_core.write(tmp_path / "b.rumi", data.copy(), compression=compression, **args)
    assert blob_a == blob_b
    assert (tmp_path / "a.rumi").read_bytes() == (tmp_path / "b.rumi").read_bytes()
    assert rumi_core.build_header(tmp_path / "a.rumi") == blob_a
    assert same_bytes(rumi_core.read(tmp_path / "b.rumi", blob_b), data)


# -- input forms ----------------------------------------------------------------------------


def test_non_contiguous_input_round_trips(tmp_path: Path) -> None:
    # Regression: a strided, reversed view is stored as the values it shows.
    base = random_samples((3, 2, 30, 22), "float64", seed=9)
    view = base[:, :, ::2, ::-1]
    assert not view.flags.c_contiguous
    for unit in (0, 3, 8):
        blob = rumi_core.write(tmp_path / f"{unit}.rumi", view, bands=["a", "b"], times=daily(3), tile_size=(4, 6), frame_unit=unit)
        assert same_bytes(rumi_core.read(tmp_path / f"{unit}.rumi", blob), np.ascontiguousarray(view))
        rumi_core.validate(tmp_path / f"{unit}.rumi", blob)


def test_big_endian_input_is_stored_little_endian(tmp_path: Path) -> None:
    data = np.arange(2 * 5 * 7, dtype=">u2").reshape(2, 5, 7) * 1000
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=["a", "b"], times=["2020-01-01"], tile_size=4)
    out = rumi_core.read(tmp_path / "x.rumi", blob)
    assert out.dtype == np.dtype("<u2")
    assert np.array_equal(out, data)
    rumi_core.validate(tmp_path / "x.rumi", blob)


def test_complex32_structured_samples_round_trip(tmp_path: Path) -> None:
    data = random_samples((2, 6, 5), "complex32", seed=3)
    assert data.dtype.names == ("real", "imag")
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=["VV", "VH"], times=["2020-01-01"], tile_size=(4, 2), frame_unit=2)
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), data)
    rumi_core.validate(tmp_path / "x.rumi", blob)


# -- streaming: one frame at a time ---------------------------------------------------------


@pytest.mark.parametrize("unit", [0, 3])
def test_writer_streams_one_frame_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unit: int) -> None:
    # The input is a memmap: the writer slices frames out of it and never
    # loads it whole, and each frame is released before the next is sliced.
    shape = (2, 3, 40, 36)
    source = np.lib.format.open_memmap(tmp_path / "input.npy", mode="w+", dtype="uint16", shape=shape)
    source[:] = random_samples(shape, "uint16", seed=unit)
    source.flush()
    data = np.load(tmp_path / "input.npy", mmap_mode="r")

    calls: list[int] = []
    alive: list[weakref.ref[np.ndarray]] = []
    original = writer.frame_samples

    def counting(arr: Any, layout: rumi_core.Layout, index: int) -> np.ndarray:
        assert arr is data, "the writer sliced a copy of the input, not the input"
        held = [r for r in alive if r() is not None]
        if held:  # only garbage cycles may still hold them: collect (slow in a large process) only then
            gc.collect()
            held = [r for r in alive if r() is not None]
        assert not held, f"frame {index} is sliced while {len(held)} earlier frame(s) are still held"
        calls.append(index)
        samples = original(arr, layout, index)
        alive.append(weakref.ref(samples))
        return samples

    monkeypatch.setattr(writer, "frame_samples", counting)
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=["a", "b", "c"], times=daily(2), tile_size=(16, 12), frame_unit=unit)
    layout = rumi_core.HeaderBlob.from_bytes(blob).layout
    assert calls == list(range(layout.frame_count))  # once per frame, in frame-index order
    monkeypatch.undo()
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), np.asarray(data))
    rumi_core.validate(tmp_path / "x.rumi", blob)


# -- refusals: nothing is written -----------------------------------------------------------


class LazyArray:
    """An array-like with a shape and dtype and no samples: slicing it fails the test."""

    def __init__(self, shape: tuple[int, ...], dtype: Any = "uint8") -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)

    def __getitem__(self, key: Any) -> np.ndarray:
        raise AssertionError("the writer read samples of an input it should have refused")


def _write(path: Path, data: Any, **kwargs: Any) -> bytes:
    if "bands" not in kwargs:
        kwargs["bands"] = band_names(data.shape[-3])
    if "times" not in kwargs:
        kwargs["times"] = daily(data.shape[0] if len(data.shape) == 4 else 1)
    return rumi_core.write(path, data, **kwargs)


@pytest.mark.parametrize(
    ("shape", "kwargs", "match"),
    [
        ((1, 1, 2**32), {}, "image_width must be an integer from 1 to 4294967295"),
        ((1, 2**32, 1), {}, "image_length must be an integer from 1 to 4294967295"),
        ((2**16, 1, 1), {}, "samples_per_pixel must be an integer from 1 to 65535"),
        ((2**32, 1, 1, 1), {"times": ["2020-01-01"]}, "time_count must be an integer from 1 to 4294967295"),
        ((1, 0, 5), {}, "image_length must be an integer from 1"),
        ((3, 0, 1, 1), {}, "samples_per_pixel must be an integer from 1"),
        ((1, 4, 4), {"tile_size": 65536}, "tile size 65536 is outside 1..65535"),
        ((1, 4, 4), {"tile_size": (0, 4)}, "tile size 0 is outside 1..65535"),
        ((1, 4, 4), {"tile_size": (1, 2, 3)}, "tile_size is an int or a"),
        ((1, 4, 4), {"frame_unit": 1}, r"frame_unit 1 is not valid for B=1, T=1"),
        ((1, 1, 1, 4, 4), {}, r"data must be \(B, Y, X\) or \(T, B, Y, X\)"),
        ((4, 4), {"bands": ["a"] * 4, "times": ["2020-01-01"]}, r"data must be \(B, Y, X\)"),
        # 65535 bands x 2**64 tile locations: N and TileOffsets cannot be represented.
        ((65535, 2**32 - 1, 2**32 - 1), {"tile_size": 1}, "beyond the largest file offset"),
    ],
    ids=[
        "width",
        "length",
        "bands",
        "times",
        "zero-length",
        "zero-bands",
        "tile-big",
        "tile-zero",
        "tile-3",
        "unit",
        "5d",
        "2d",
        "offsets",
    ],
)
def test_writer_refuses_dimensions_beyond_field_widths(tmp_path: Path, shape: tuple[int, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        _write(tmp_path / "x.rumi", LazyArray(shape), **kwargs)
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("bands", "match"),
    [
        (["a", ""], "band 1 text is empty"),
        (["a", "b\x00c"], "band 1 text contains the byte 0x00"),
        (["same", "same"], "band 1 text 'same' repeats band 0"),
        (["a"], "1 band texts for 2 bands"),
        (["a", "b", "c"], "3 band texts for 2 bands"),
        (["a", 2], "band 1 text must be a str, got int"),
        (["a", b"b"], "band 1 text must be a str, got bytes"),
        (["a", None], "band 1 text must be a str, got NoneType"),
        (["a", "\ud800"], "band 1 text cannot be encoded as UTF-8"),
        (["a", "x" * 65536], "band 1 text is 65536 bytes, the maximum is 65535"),
        ("ab", "bands is a list of one text per band"),
        (None, "bands is a list of one text per band"),
        (7, "bands is a list of one text per band"),
    ],
    ids=[
        "empty",
        "nul",
        "duplicate",
        "too-few",
        "too-many",
        "int",
        "bytes",
        "none-text",
        "surrogate",
        "too-long",
        "str",
        "none",
        "int-bands",
    ],
)
def test_writer_refuses_bad_band_texts(tmp_path: Path, bands: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        rumi_core.write(tmp_path / "x.rumi", np.zeros((2, 3, 3), "uint8"), bands=bands, times=["2020-01-01"])
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("times", "match"),
    [
        (["2020-01-02", "2020-01-01", "2020-01-03"], r"instant 1 .* is before instant 0"),
        ([("2020-01-01", "2020-01-05"), ("2020-01-04", "2020-01-06"), ("2020-01-07", "2020-01-08")], "interval 0 overlaps interval 1"),
        ([("2020-01-01", "2020-01-01"), ("2020-01-04", "2020-01-06"), ("2020-01-07", "2020-01-08")], "interval 0 does not end"),
        ([("2020-01-02", "2020-01-01"), ("2020-01-04", "2020-01-06"), ("2020-01-07", "2020-01-08")], "interval 0 does not end"),
        ([], "times is empty"),
        (None, "times is required"),
        ("2020-01-01", "times is a list of one coordinate per time step"),
        (["2020-01-01", "2020-01-02"], "2 time coordinates for 3 time steps"),
        (["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"], "4 time coordinates for 3 time steps"),
        (["2020-01-01", "2020-01-02", "2020-01-03T00:00:00.5"], "has a fraction of a second"),
        (["2020-01-01", "2020-01-02", "2020-01-03T00:00:00.000000001Z"], "has a fraction of a second"),
        (["2020-01-01", "2020-01-02", np.datetime64("2020-01-03T00:00:00.000000001", "ns")], "has a fraction of a second"),
        (["2020-01-01", "2020-01-02", np.datetime64("1970-01-01T00:00:01.000000000001", "ps")], "has a fraction of a second"),
        (["2020-01-01", ("2020-01-02", "2020-01-03"), "2020-01-04"], "times mixes instants and intervals"),
        ([("2020-01-01", "2020-01-02", "2020-01-03")] * 3, "must be a .start, end. pair, got 3 values"),
        (["2020-01-01", "2020-01-02", "not a time"], "'not a time' is no time: ISO 8601"),
        (["2020-01-01", "2020-01-02", 1577836800], "a time coordinate is a datetime64, datetime, date or ISO string, got int"),
        (["2020-01-01", "2020-01-02", np.datetime64("NaT")], "a time coordinate is NaT"),
    ],
    ids=[
        "unordered", "overlapping", "empty-interval", "reversed-interval", "empty", "none", "str", "too-few", "too-many",
        "fraction-iso", "fraction-iso-ns", "fraction-ns", "fraction-ps", "mixed", "triple", "not-iso", "int", "nat",
    ],
)  # fmt: skip
def test_writer_refuses_bad_times(tmp_path: Path, times: Any, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        rumi_core.write(tmp_path / "x.rumi", np.zeros((3, 1, 2, 2), "uint8"), bands=["a"], times=times)
    assert nothing_written(tmp_path)


@pytest.mark.parametrize("dtype", ["float128", object, "<U4", "S2", "V4", "complex256", "datetime64[s]", [("re", "<f2"), ("im", "<f2")]])
def test_writer_refuses_dtypes_without_an_encoding(tmp_path: Path, dtype: Any) -> None:
    if dtype in ("float128", "complex256") and not hasattr(np, dtype):
        pytest.skip(f"numpy has no {dtype} on this platform")
    with pytest.raises(InvalidInputError, match="has no rumi sample encoding"):
        rumi_core.write(tmp_path / "x.rumi", LazyArray((1, 2, 2), dtype), bands=["a"], times=["2020-01-01"])
    assert nothing_written(tmp_path)


def _custom_crs() -> Any:
    from rasterio.crs import CRS

    return CRS.from_wkt(
        'PROJCS["unnamed ortho",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
        'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Orthographic"],'
        'PARAMETER["latitude_of_origin",10],PARAMETER["central_meridian",20],PARAMETER["false_easting",0],'
        'PARAMETER["false_northing",0],UNIT["metre",1]]'
    )


@pytest.mark.parametrize(
    ("crs", "transform", "error", "match"),
    [
        (_custom_crs(), (1, 0, 0, 0, -1, 0), CRSError, "has no EPSG code"),
        ("+proj=ortho +lat_0=10 +lon_0=20 +datum=WGS84", (1, 0, 0, 0, -1, 0), CRSError, "has no EPSG code"),
        (4978, (1, 0, 0, 0, -1, 0), CRSError, "EPSG:4978 is a Geocentric CRS"),
        ("EPSG:4979", (1, 0, 0, 0, -1, 0), CRSError, "EPSG:4979 is a Geographic 3D CRS"),
        ("EPSG:5498", (1, 0, 0, 0, -1, 0), CRSError, "EPSG:5498 is a Compound CRS"),
        ("EPSG:5703", (1, 0, 0, 0, -1, 0), CRSError, "EPSG:5703 is a Vertical CRS"),
        (32767, (1, 0, 0, 0, -1, 0), CRSError, "outside 1024..32766"),
        (4326, None, InvalidInputError, "crs and transform must be given together"),
        (None, (1, 0, 0, 0, -1, 0), InvalidInputError, "crs and transform must be given together"),
        (4326, (1, 0, 0, 0, -1), InvalidInputError, "six affine coefficients"),
        (4326, (1, 0, 0, 0, float("nan"), 0), InvalidInputError, "must be finite"),
    ],
    ids=[
        "custom-wkt",
        "proj-string",
        "geocentric",
        "geographic-3d",
        "compound",
        "vertical",
        "out-of-range",
        "only-crs",
        "only-transform",
        "five",
        "nan",
    ],
)
def test_writer_refuses_unstorable_georeferencing(tmp_path: Path, crs: Any, transform: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        rumi_core.write(tmp_path / "x.rumi", np.zeros((1, 2, 2), "uint8"), bands=["a"], times=["2020-01-01"], crs=crs, transform=transform)
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("dtype", "nodata", "match"),
    [
        ("uint8", 300, r"nodata 300 is no uint8 sample \(0 to 255\)"),
        ("uint8", -1, r"nodata -1 is no uint8 sample"),
        ("uint16", 0.5, r"nodata 0.5 is no uint16 sample \(0 to 65535\)"),
        ("int16", float("nan"), r"nodata nan is no int16 sample"),
        ("bool", 2, r"nodata 2 is no bool sample \(0 to 1\)"),
        ("float16", 1e6, r"nodata 1000000.0 overflows float16 samples"),
    ],
)
def test_writer_refuses_a_nodata_no_sample_can_hold(tmp_path: Path, dtype: str, nodata: float, match: str) -> None:
    """300 on uint8 was taken without a word, where ``rumi convert`` refuses such a nodata: a sentinel no sample
    equals marks nothing."""
    with pytest.raises(InvalidInputError, match=match):
        rumi_core.write(tmp_path / "x.rumi", np.zeros((1, 4, 4), dtype), bands=["a"], times=["2020-01-01"], nodata=nodata)
    assert nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("dtype", "nodata"), [("uint8", 255), ("uint16", 0.0), ("int16", -32768), ("float32", float("nan")), ("float32", -9999)]
)
def test_writer_takes_a_nodata_its_samples_hold(tmp_path: Path, dtype: str, nodata: float) -> None:
    data = np.arange(16).reshape(1, 4, 4).astype(dtype)
    data[0, 0, 0] = nodata
    blob = rumi_core.write(tmp_path / "x.rumi", data, bands=["a"], times=["2020-01-01"], nodata=nodata)
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), data)


@pytest.mark.parametrize("unit", [0, 1, 2])
def test_writer_refuses_boolean_bytes_other_than_0_and_1(tmp_path: Path, unit: int) -> None:
    raw = np.zeros((2, 6, 6), "uint8")
    raw[1, 5, 5] = 2  # in the last frame, so earlier frames were already written
    data = raw.view(np.bool_)
    with pytest.raises(InvalidInputError, match="holds a boolean byte other than 0 or 1"):
        rumi_core.write(tmp_path / "x.rumi", data, bands=["a", "b"], times=["2020-01-01"], tile_size=3, frame_unit=unit)
    assert nothing_written(tmp_path)
    ok = (raw == 1).view(np.bool_)
    blob = rumi_core.write(tmp_path / "x.rumi", ok, bands=["a", "b"], times=["2020-01-01"], tile_size=3, frame_unit=unit)
    assert same_bytes(rumi_core.read(tmp_path / "x.rumi", blob), ok)
    rumi_core.validate(tmp_path / "x.rumi", blob)


def test_failed_write_keeps_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "x.rumi"
    blob = rumi_core.write(path, np.ones((1, 2, 2), "uint8"), bands=["a"], times=["2020-01-01"])
    before = path.read_bytes()
    with pytest.raises(InvalidInputError, match="holds a boolean byte"):
        rumi_core.write(path, np.full((1, 2, 2), 7, "uint8").view(np.bool_), bands=["a"], times=["2020-01-01"])
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["x.rumi"]
    rumi_core.validate(path, blob)
