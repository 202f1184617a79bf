"""Run a batch of interoperability cases through rumi-eo, the reference implementation.

This script runs in the separate virtual environment that ``tests/test_interop.py``
creates (rumi-eo 0.26.1 pins an older geozl and OpenZL than rumi_core does), so it
imports only the standard library, NumPy, ``rumi`` (rumi-eo), ``geozl`` and
``openzl``, never rumi_core. It is a test driver: it uses rumi-eo as a peer and
contains none of its code.

Usage::

    python rumi_eo_batch.py MANIFEST.json RESULTS.json

The manifest has three lists, all optional:

``read``
    Files written by rumi_core. For each, rumi-eo rebuilds the header with
    ``rumi.info(source=path)`` and performs every listed ``rumi.read``; the
    decoded bytes of each read are written to its ``out`` file.
``rewrite``
    Compressed frames taken from a rumi_core file, handed to ``rumi.write``
    unchanged with the same bands, times and georeferencing, so the test can
    compare the two files byte for byte.
``write``
    Arrays that rumi-eo splits into frames with ``rumi.frames``, compresses with
    a geozl recipe or an OpenZL graph, and writes with ``rumi.write``.

Every case records its own error instead of stopping the batch, so one call
reports on every case. The results are one JSON document.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

import geozl
import numpy as np
import openzl.ext as zl
import rumi

# -- DLPack ----------------------------------------------------------------------
# rumi-eo returns float8, bfloat16 and complex32 samples only through DLPack, and
# NumPy cannot import those types. The structures below are the public DLPack 1.x
# ABI (dlpack.h); they let this script copy the exact decoded bytes of any dtype.
# rumi_core.dlpack declares the same structures; this copy is deliberate: this
# environment has no rumi_core, and an oracle written apart from the code under
# test cannot share its mistakes.


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_bytes(producer: Any) -> tuple[bytes, list[int], list[int]]:
    """Return ``(bytes, shape, [code, bits, lanes])`` of a DLPack producer, in C order."""
    capsule = producer.__dlpack__(max_version=(1, 0))
    address = _capsule_pointer(capsule, b"dltensor_versioned")
    managed = _DLManagedTensorVersioned.from_address(address)
    tensor = managed.dl_tensor
    shape = [int(tensor.shape[i]) for i in range(tensor.ndim)]
    dtype = [int(tensor.dtype.code), int(tensor.dtype.bits), int(tensor.dtype.lanes)]
    itemsize = tensor.dtype.bits * tensor.dtype.lanes // 8
    if tensor.strides:
        expected = 1
        for axis in reversed(range(tensor.ndim)):
            if shape[axis] > 1 and int(tensor.strides[axis]) != expected:
                raise ValueError(
                    f"rumi-eo returned a non C-contiguous tensor: shape {shape}, axis {axis} stride {int(tensor.strides[axis])}"
                )
            expected *= shape[axis]
    nbytes = math.prod(shape) * itemsize
    data = ctypes.string_at(tensor.data + tensor.byte_offset, nbytes) if nbytes else b""
    del capsule  # its destructor frees the tensor
    return data, shape, dtype


# -- JSON to rumi-eo arguments -----------------------------------------------------


def _axis(spec: dict[str, Any], name: str) -> Any:
    if spec.get(f"{name}_range") is not None:
        start, stop = spec[f"{name}_range"]
        return (int(start), int(stop))
    if spec.get(name) is not None:
        return [int(v) for v in spec[name]]
    return None


def _times(values: list[Any]) -> list[Any]:
    return [tuple(v) if isinstance(v, list) else v for v in values]


def _instant_json(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return str(np.datetime64(int(value.timestamp()), "s")) + "Z"
    return str(np.datetime64(value, "s")) + "Z"


def _time_json(values: list[Any] | None) -> list[Any] | None:
    if values is None:
        return None
    return [[_instant_json(v[0]), _instant_json(v[1])] if isinstance(v, tuple) else _instant_json(v) for v in values]


def _info_json(meta: Any) -> dict[str, Any]:
    return {
        "header": meta.header.hex(),
        "shape": list(meta.shape),
        "dtype": meta.dtype.name,
        "dtype_dlpack": list(meta.dtype.dlpack),
        "tile": list(meta.tile),
        "frame_layout": meta.frame_layout,
        "index_order": list(meta.index_order),
        "frames": meta.frames,
        "bands": meta.bands,
        "time": _time_json(meta.time),
        "time_kind": meta.time_kind,
        "transform": None if meta.transform is None else list(meta.transform),
        "crs": meta.crs,
        "pixel_is_point": meta.pixel_is_point,
    }


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}"


def _write(case: dict[str, Any], tf: Any) -> bytes:
    """``rumi.write`` the frames ``tf`` to the case's path with its bands, times and georeferencing; the header."""
    _, header = rumi.write(
        case["path"],
        tf,
        bands=case["bands"],
        time=_times(case["time"]),
        transform=case["transform"],
        crs=case["crs"],
        pixel_is_point=case["pixel_is_point"],
    )
    return bytes(header)


# -- cases ------------------------------------------------------------------------


def run_read(case: dict[str, Any]) -> dict[str, Any]:
    """Rebuild the header of a rumi_core file and perform its reads."""
    result: dict[str, Any] = {}
    path = case["path"]
    header = Path(case["header"]).read_bytes()
    try:
        result["info"] = _info_json(rumi.info(source=path))
    except Exception as err:
        result["info_error"] = _error(err)
    try:
        rumi.info(source=path, header=header)
        result["header_accepted"] = True
    except Exception as err:
        result["header_accepted"] = _error(err)
    reads = []
    for spec in case["reads"]:
        one: dict[str, Any] = {}
        try:
            window = None if spec.get("window") is None else tuple(int(v) for v in spec["window"])
            kwargs = {"bands": _axis(spec, "bands"), "time": _axis(spec, "time"), "window": window}
            data, shape, dtype = dlpack_bytes(rumi.read(path, header, framework="dlpack", **kwargs))
            Path(spec["out"]).write_bytes(data)
            one.update(shape=shape, dlpack=dtype)
            if case.get("numpy"):
                # The default NumPy path must hand back the same bytes.
                arr = rumi.read(path, header, **kwargs)
                one["numpy_same"] = bool(list(arr.shape) == shape and np.ascontiguousarray(arr).tobytes() == data)
        except Exception as err:
            one["error"] = _error(err)
        reads.append(one)
    result["reads"] = reads
    return result


def run_rewrite(case: dict[str, Any]) -> dict[str, Any]:
    """Write rumi_core's compressed frames again with rumi.write."""
    data = np.load(case["data"])
    tf = rumi.frames(data, case["pattern"], case["tile_size"])
    blob = Path(case["frames"]).read_bytes()
    sizes = case["sizes"]
    if len(sizes) != len(tf):
        raise ValueError(f"rumi.frames made {len(tf)} frames ({tf.layout}, unit {tf.frame_unit}), rumi_core wrote {len(sizes)}")
    start = 0
    for frame, size in zip(tf, sizes, strict=True):
        frame.compressed = blob[start : start + size]
        start += size
    header = _write(case, tf)
    return {"header": header.hex(), "frame_unit": int(tf.frame_unit), "layout": tf.layout}


def _openzl_compress(samples: np.ndarray, graph: str, version: int) -> bytes:
    component = samples.dtype.itemsize // 2 if samples.dtype.kind == "c" else samples.dtype.itemsize
    stream = np.ascontiguousarray(samples).reshape(-1).view(f"<u{component}")
    compressor = zl.Compressor()
    compressor.select_starting_graph(getattr(zl.graphs, graph)()(compressor))
    cctx = zl.CCtx()
    cctx.ref_compressor(compressor)
    cctx.set_parameter(zl.CParam.FormatVersion, version)
    cctx.set_parameter(zl.CParam.ContentChecksum, 1)
    cctx.set_parameter(zl.CParam.CompressedChecksum, 1)
    return bytes(cctx.compress([zl.Input(zl.Type.Numeric, stream)]))


def run_write(case: dict[str, Any]) -> dict[str, Any]:
    """Split, compress and write an array with rumi-eo and geozl or OpenZL."""
    data = np.load(case["data"])
    tf = rumi.frames(data, case["pattern"], case["tile_size"])
    codec = case["codec"]
    axes = tf.layout.split()
    graphs: dict[Any, Any] = {}
    for frame in tf:
        samples = frame.data
        if codec.get("view"):
            # The same bytes through another dtype: components for complex types, for instance.
            samples = np.ascontiguousarray(samples).view(codec["view"])
        if codec["kind"] == "geozl":
            if codec.get("geometry") == "layout":
                # The predictor's rows are w times the axes after h; planes are the axes before it.
                h = axes.index("h")
                width, planes = math.prod(samples.shape[h + 1 :]), math.prod(samples.shape[:h])
                key = (samples.shape, width, planes)
                if key not in graphs:
                    graphs[key] = geozl.graph(samples, codec["recipe"], width=width, planes=planes)
                graph = graphs[key]
            else:
                # geozl's own defaults, as rumi-eo's examples use it.
                graph = geozl.graph(samples, codec["recipe"])
            frame.compressed = geozl.compress(samples, graph=graph)
        else:
            frame.compressed = _openzl_compress(samples, codec["graph"], codec.get("format_version", zl.MAX_FORMAT_VERSION))
    header = _write(case, tf)
    Path(case["header"]).write_bytes(header)
    meta = rumi.info(source=case["path"])
    return {
        "header": header.hex(),
        "info": _info_json(meta),
        "frame_unit": int(tf.frame_unit),
        "layout": tf.layout,
        "frames": len(tf),
        "compressed_bytes": int(tf.nbytes),
    }


def main(argv: list[str]) -> int:
    """Run every case of the manifest and write the results."""
    manifest = json.loads(Path(argv[1]).read_text())
    results: dict[str, Any] = {"rumi_eo": rumi.__version__, "geozl": geozl.__version__}
    for kind, run in (("read", run_read), ("rewrite", run_rewrite), ("write", run_write)):
        out: dict[str, Any] = {}
        for case in manifest.get(kind, ()):
            try:
                out[case["id"]] = run(case)
            except Exception as err:
                out[case["id"]] = {"error": _error(err)}
        results[kind] = out
    Path(argv[2]).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
