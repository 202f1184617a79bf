"""Deterministic synthetic rasters for tests, demos and benchmarks."""

from __future__ import annotations

from typing import Any

import numpy as np

from rumi_core.encodings import COMPLEX32, encoding_for_dtype


def _smooth_field(rng: np.random.Generator, height: int, width: int, scale: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A smooth random field: coarse noise upsampled with bilinear interpolation."""
    gh, gw = max(2, height // scale + 2), max(2, width // scale + 2)
    coarse = rng.standard_normal((gh, gw))
    ys = np.linspace(0, gh - 1.001, height)
    xs = np.linspace(0, gw - 1.001, width)
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a = coarse[y0][:, x0]
    b = coarse[y0][:, x0 + 1]
    c = coarse[y0 + 1][:, x0]
    d = coarse[y0 + 1][:, x0 + 1]
    out: np.ndarray[Any, np.dtype[np.float64]] = (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy
    return out


def synthetic_scene(
    bands: int, height: int, width: int, *, seed: int = 0, clouds: bool = True, dtype: Any = "uint16"
) -> np.ndarray[Any, Any]:
    """Return a ``(bands, height, width)`` Sentinel-2-like reflectance scene.

    Land cover is a smooth field at several scales, each band a different
    linear response to it, plus sensor noise; optional bright, smooth cloud
    patches. Values are surface reflectance x 10000, in ``dtype``.
    """
    rng = np.random.default_rng(seed)
    base = _smooth_field(rng, height, width, 128) + 0.5 * _smooth_field(rng, height, width, 24)
    detail = 0.15 * _smooth_field(rng, height, width, 4)
    out = np.empty((bands, height, width), dtype=np.float64)
    for b in range(bands):
        gain = 400 + 250 * b
        offset = 800 + 500 * b
        out[b] = offset + gain * (base + detail) + rng.normal(0, 25, (height, width))
    if clouds:
        cloud = _smooth_field(rng, height, width, 64)
        mask = np.clip((cloud - 0.9) * 3, 0, 1)
        out = out * (1 - mask) + (6000 + 1500 * cloud) * mask
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "ui" else None
    if info is not None:
        out = np.clip(np.rint(out), info.min, info.max)
    return out.astype(dtype)


def synthetic_cube(times: int, bands: int, height: int, width: int, *, seed: int = 0, dtype: Any = "uint16") -> np.ndarray[Any, Any]:
    """Return a ``(times, bands, height, width)`` time series of one scene with changing clouds."""
    ground = synthetic_scene(bands, height, width, seed=seed, clouds=False, dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    out = np.empty((times, bands, height, width), dtype=dtype)
    for t in range(times):
        season = 1.0 + 0.1 * np.sin(2 * np.pi * t / max(times, 1))
        clouds = synthetic_scene(1, height, width, seed=seed + 100 + t, clouds=True, dtype=np.float64)[0]
        cloudy = clouds > 5500
        frame = ground * season + rng.normal(0, 20, ground.shape)
        frame[:, cloudy] = clouds[cloudy]
        if np.dtype(dtype).kind in "ui":
            info = np.iinfo(dtype)
            frame = np.clip(np.rint(frame), info.min, info.max)
        out[t] = frame.astype(dtype)
    return out


def random_samples(shape: tuple[int, ...], dtype: Any, *, seed: int = 0) -> np.ndarray[Any, Any]:
    """Return random samples of any rumi sample encoding, covering its whole bit space.

    Integer and float types draw every bit pattern (floats include NaN,
    infinities and subnormals); booleans draw 0 and 1 only.
    """
    enc = encoding_for_dtype(dtype)
    rng = np.random.default_rng(seed)
    if enc.name == "bool":
        return rng.integers(0, 2, shape, dtype=np.uint8).view(np.bool_)
    raw = rng.integers(0, 256, (*shape, enc.bytes_per_sample), dtype=np.uint8)
    dt = COMPLEX32 if enc.name == "complex32" else enc.dtype
    return raw.view(dt).reshape(shape)
