"""rumi_core: the rumi 0.1.0 raster format.

Write an Image ``(B, Y, X)`` or Cube ``(T, B, Y, X)`` as a canonical, tiled
``.rumi`` file of self-contained OpenZL frames; build its header blob; read
any window statelessly from the blob and byte ranges; validate a file against
every MUST of the specification (``shared/spec/rumi-0.1.0.md``).

This package knows nothing of Beam, STAC or clouds.
"""

from __future__ import annotations

import importlib
import logging
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rumi_core.assemble import FileAssembler as FileAssembler
    from rumi_core.assemble import assemble as assemble
    from rumi_core.codecs import DEFAULT_CODEC as DEFAULT_CODEC
    from rumi_core.codecs import ErrorBound as ErrorBound
    from rumi_core.codecs import FrameCodec as FrameCodec
    from rumi_core.codecs import decode_frame as decode_frame
    from rumi_core.codecs import parse_codec as parse_codec
    from rumi_core.compression import CodecMeasurements as CodecMeasurements
    from rumi_core.compression import CompressionChoice as CompressionChoice
    from rumi_core.compression import profile_codecs as profile_codecs
    from rumi_core.dataset import Dataset as Dataset
    from rumi_core.dataset import open as open  # noqa: A004
    from rumi_core.dlpack import DLPackArray as DLPackArray
    from rumi_core.encodings import ENCODINGS as ENCODINGS
    from rumi_core.encodings import SampleEncoding as SampleEncoding
    from rumi_core.encodings import encoding_for_dtype as encoding_for_dtype
    from rumi_core.errors import CRSError as CRSError
    from rumi_core.errors import FrameDecodeError as FrameDecodeError
    from rumi_core.errors import HeaderMismatchError as HeaderMismatchError
    from rumi_core.errors import InvalidFileError as InvalidFileError
    from rumi_core.errors import InvalidHeaderError as InvalidHeaderError
    from rumi_core.errors import InvalidInputError as InvalidInputError
    from rumi_core.errors import ResourceLimitError as ResourceLimitError
    from rumi_core.errors import RumiError as RumiError
    from rumi_core.errors import SelectionError as SelectionError
    from rumi_core.errors import SourceError as SourceError
    from rumi_core.frame_units import FRAME_UNITS as FRAME_UNITS
    from rumi_core.frame_units import FrameUnit as FrameUnit
    from rumi_core.georef import Georeferencing as Georeferencing
    from rumi_core.header import HeaderBlob as HeaderBlob
    from rumi_core.header import build_header as build_header
    from rumi_core.info import Info as Info
    from rumi_core.info import info as info
    from rumi_core.layout import Layout as Layout
    from rumi_core.limits import Limits as Limits
    from rumi_core.reader import FrameRequest as FrameRequest
    from rumi_core.reader import plan_requests as plan_requests
    from rumi_core.reader import read as read
    from rumi_core.sources import ByteSource as ByteSource
    from rumi_core.sources import BytesSource as BytesSource
    from rumi_core.sources import LocalFileSource as LocalFileSource
    from rumi_core.times import TimeCoordinates as TimeCoordinates
    from rumi_core.trailer import Trailer as Trailer
    from rumi_core.validate import validate as validate
    from rumi_core.writer import WriteResult as WriteResult
    from rumi_core.writer import write as write

# Names load on first use (PEP 562): ``rumi --version`` and commands that need
# a few modules must not pay for every codec import (ml_dtypes alone takes
# over a second).
_LAZY: dict[str, str] = {
    "FileAssembler": "rumi_core.assemble",
    "assemble": "rumi_core.assemble",
    "DEFAULT_CODEC": "rumi_core.codecs",
    "FrameCodec": "rumi_core.codecs",
    "decode_frame": "rumi_core.codecs",
    "parse_codec": "rumi_core.codecs",
    "Dataset": "rumi_core.dataset",
    "open": "rumi_core.dataset",
    "DLPackArray": "rumi_core.dlpack",
    "ENCODINGS": "rumi_core.encodings",
    "SampleEncoding": "rumi_core.encodings",
    "encoding_for_dtype": "rumi_core.encodings",
    "CRSError": "rumi_core.errors",
    "FrameDecodeError": "rumi_core.errors",
    "HeaderMismatchError": "rumi_core.errors",
    "InvalidFileError": "rumi_core.errors",
    "InvalidHeaderError": "rumi_core.errors",
    "InvalidInputError": "rumi_core.errors",
    "ResourceLimitError": "rumi_core.errors",
    "RumiError": "rumi_core.errors",
    "SelectionError": "rumi_core.errors",
    "SourceError": "rumi_core.errors",
    "FRAME_UNITS": "rumi_core.frame_units",
    "FrameUnit": "rumi_core.frame_units",
    "Georeferencing": "rumi_core.georef",
    "HeaderBlob": "rumi_core.header",
    "build_header": "rumi_core.header",
    "Info": "rumi_core.info",
    "info": "rumi_core.info",
    "Layout": "rumi_core.layout",
    "Limits": "rumi_core.limits",
    "ErrorBound": "rumi_core.codecs",
    "FrameRequest": "rumi_core.reader",
    "plan_requests": "rumi_core.reader",
    "read": "rumi_core.reader",
    "CompressionChoice": "rumi_core.compression",
    "CodecMeasurements": "rumi_core.compression",
    "profile_codecs": "rumi_core.compression",
    "ByteSource": "rumi_core.sources",
    "BytesSource": "rumi_core.sources",
    "LocalFileSource": "rumi_core.sources",
    "TimeCoordinates": "rumi_core.times",
    "Trailer": "rumi_core.trailer",
    "validate": "rumi_core.validate",
    "WriteResult": "rumi_core.writer",
    "write": "rumi_core.writer",
}

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_CODEC",
    "ENCODINGS",
    "FRAME_UNITS",
    "ByteSource",
    "BytesSource",
    "CRSError",
    "CodecMeasurements",
    "CompressionChoice",
    "DLPackArray",
    "Dataset",
    "ErrorBound",
    "FileAssembler",
    "FrameCodec",
    "FrameDecodeError",
    "FrameRequest",
    "FrameUnit",
    "Georeferencing",
    "HeaderBlob",
    "HeaderMismatchError",
    "Info",
    "InvalidFileError",
    "InvalidHeaderError",
    "InvalidInputError",
    "Layout",
    "Limits",
    "LocalFileSource",
    "ResourceLimitError",
    "RumiError",
    "SampleEncoding",
    "SelectionError",
    "SourceError",
    "TimeCoordinates",
    "Trailer",
    "WriteResult",
    "assemble",
    "build_header",
    "decode_frame",
    "encoding_for_dtype",
    "info",
    "open",
    "parse_codec",
    "plan_requests",
    "profile_codecs",
    "read",
    "validate",
    "write",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rumi_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module type: a submodule named like a function does not hide it.

    ``rumi_core.info``, ``rumi_core.validate`` and ``rumi_core.assemble`` are
    functions that share their module's name. Importing such a submodule
    makes Python set the package attribute to the module; with eager imports
    the ``from ... import info`` line in this file then rebound it to the
    function. With lazy names that line is gone, so the function is kept
    here by ignoring the import system's assignment (``sys.modules`` still
    holds every submodule, so ``from rumi_core.info import Info`` works).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _LAZY and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
