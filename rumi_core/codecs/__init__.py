"""Frame codecs: how the samples of one frame become one OpenZL frame.

Specification section *Frames*: every frame is a self-contained OpenZL frame
that carries its own graph and codec parameters, so a reader needs no codec
configuration to decode it. A :class:`FrameCodec` is therefore writer-side data
only: a frozen dataclass whose fields are its whole configuration, with a JSON
form ``{"name": ..., "configuration": {...}}`` and a registry from names to
classes, filled when this package is imported.

Every codec compresses the frame as **one** OpenZL numeric stream whose element
width is the width of one sample component (*Sample encodings*): the decoded
bytes for real types, half of them for complex types (``complex32`` is a
stream of 2-byte elements, ``complex64`` of 4-byte and ``complex128`` of
8-byte elements). Both checksums are written (lossy frames keep the
compressed one). The frame decodes to exactly the frame's ``decoded_frame_bytes``.

Five codecs are registered:

* ``"openzl"`` (:class:`OpenZLGraph`) runs one of OpenZL's built-in graphs. Any
  OpenZL decoder reads its frames, and it accepts all 21 sample encodings.
* ``"geozl"`` (:class:`GeoZLGraph`) runs a geozl recipe such as
  ``"planar>zigzag>transpose>entropy"``: a 2-D predictor whose row width and
  plane count come from the frame layout, then an entropy stage, optionally
  behind geozl's nodata stage. It accepts the eleven standard integer and
  IEEE encodings (:data:`GEOZL_ENCODINGS`).
* ``"raster"`` (:class:`RasterCodec`, the :data:`DEFAULT_CODEC`) sends 2, 4
  and 8-byte integers to a geozl recipe and everything else to an OpenZL graph.
* ``"stack"`` (:class:`StackCodec`) gives every plane of the frame its own
  :class:`Chain` of predictors and back end, optionally after an exact
  difference from the previous plane (inter-band or inter-date prediction
  inside one self-contained frame). It is what :mod:`rumi_core.compression`
  assembles, and rumi-eo reads it.
* ``"bounded"`` (:class:`BoundedCodec`) runs geozl's quantizers under an
  :class:`ErrorBound` that :func:`within_bound` checks on every frame.

:func:`decode_frame` reads any of them, and any frame written by rumi-eo.

>>> import numpy as np
>>> codec = parse_codec({"name": "openzl", "configuration": {"graph": "zstd"}})
>>> codec
OpenZLGraph(graph='zstd')
>>> frame = codec.encode(np.arange(12, dtype="<u2").reshape(3, 4), axes=("h", "w"))
>>> decode_frame(frame, decoded_frame_bytes=24).view("<u2").tolist()
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
"""

from rumi_core.codecs._bounded import QUANTIZED_ENCODINGS, BoundedCodec, EncodedFrame, bounded_encoding_check
from rumi_core.codecs._chain import Chain
from rumi_core.codecs._context import FORMAT_VERSION, release_contexts
from rumi_core.codecs._decoding import decode_frame, decode_into_place
from rumi_core.codecs._error_bound import ErrorBound, parse_error_bound, within_bound
from rumi_core.codecs._frames import UINT_BY_WIDTH
from rumi_core.codecs._geozl import GEOZL_ENCODINGS, GeoZLGraph
from rumi_core.codecs._nodata import check_nodata_sample, nodata_mask, nodata_to_json, parse_nodata
from rumi_core.codecs._openzl import OpenZLGraph
from rumi_core.codecs._raster import DEFAULT_CODEC, RasterCodec, parse_codec
from rumi_core.codecs._registry import FrameCodec, codec_from_dict, register_codec, registered_codecs
from rumi_core.codecs._stack import PlaneCoding, StackCodec

__all__ = [
    "UINT_BY_WIDTH",
    "DEFAULT_CODEC",
    "FORMAT_VERSION",
    "GEOZL_ENCODINGS",
    "QUANTIZED_ENCODINGS",
    "BoundedCodec",
    "Chain",
    "EncodedFrame",
    "ErrorBound",
    "FrameCodec",
    "GeoZLGraph",
    "OpenZLGraph",
    "PlaneCoding",
    "RasterCodec",
    "StackCodec",
    "bounded_encoding_check",
    "check_nodata_sample",
    "codec_from_dict",
    "decode_frame",
    "decode_into_place",
    "nodata_mask",
    "nodata_to_json",
    "parse_codec",
    "parse_error_bound",
    "parse_nodata",
    "register_codec",
    "release_contexts",
    "registered_codecs",
    "within_bound",
]
