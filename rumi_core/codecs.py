"""Frame codecs: how the samples of one frame become one OpenZL frame.

Specification section *Frames*: every frame is a self-contained OpenZL frame
that carries its own graph and codec parameters, so a reader needs no codec
configuration to decode it. A :class:`FrameCodec` is therefore writer-side data
only: a frozen dataclass whose fields are its whole configuration, with a JSON
form ``{"name": ..., "configuration": {...}}`` and a registry from names to
classes, filled when this module is imported.

Every codec compresses the frame as **one** OpenZL numeric stream whose element
width is the width of one sample component (*Sample encodings*): the decoded
bytes for real types, half of them for complex types (``complex32`` is a
stream of 2-byte elements, ``complex64`` of 4-byte and ``complex128`` of
8-byte elements). Both checksums are written (lossy frames keep the
compressed one). The frame decodes to exactly the frame's ``decoded_frame_bytes``.

Four codecs are registered here:

* ``"openzl"`` (:class:`OpenZLGraph`) runs one of OpenZL's built-in graphs. Any
  OpenZL decoder reads its frames, and it accepts all 21 sample encodings.
* ``"geozl"`` (:class:`GeoZLGraph`) runs a geozl recipe such as
  ``"planar>zigzag>transpose>entropy"``: a 2-D predictor whose row width and
  plane count come from the frame layout, then an entropy stage, optionally
  behind geozl's nodata stage. It accepts the eleven standard integer and
  IEEE encodings.
* ``"raster"`` (:class:`RasterCodec`, the :data:`DEFAULT_CODEC`) sends 2, 4
  and 8-byte integers to a geozl recipe and everything else to an OpenZL graph.
* ``"stack"`` (:class:`StackCodec`) gives every plane of the frame its own
  :class:`Chain` of predictors and back end, optionally after an exact
  difference from the previous plane (inter-band or inter-date prediction
  inside one self-contained frame). It is what :mod:`rumi_core.compression`
  assembles, and rumi-eo reads it.

:mod:`rumi_core.lossy` registers ``"bounded"``, geozl's error-bounded
quantizers. :func:`decode_frame` reads any of them, and any frame written by
rumi-eo.

>>> codec = parse_codec({"name": "openzl", "configuration": {"graph": "zstd"}})
>>> codec
OpenZLGraph(graph='zstd')
>>> frame = codec.encode(np.arange(12, dtype="<u2").reshape(3, 4), axes=("h", "w"))
>>> decode_frame(frame, decoded_bytes=24).view("<u2").tolist()
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import json
import math
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import geozl
import numpy as np

from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import FrameDecodeError, InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = [
    "DEFAULT_CODEC",
    "FORMAT_VERSION",
    "Chain",
    "FrameCodec",
    "GeoZLGraph",
    "OpenZLGraph",
    "PlaneCoding",
    "RasterCodec",
    "StackCodec",
    "codec_from_dict",
    "decode_frame",
    "nodata_to_json",
    "parse_codec",
    "parse_nodata",
    "register_codec",
    "registered_codecs",
]

# openzl ships a stub file but no py.typed marker, so mypy cannot analyse it.
# Importing it by name keeps its objects typed as Any at this one boundary.
_zl: Any = importlib.import_module("openzl.ext")

FORMAT_VERSION: Final = 24
"""OpenZL wire format version written into every frame.

openzl 0.3.0 writes up to version 27, but the OpenZL bundled in rumi-eo 0.26.1
(the reference reader) refuses anything above 24 with "Format version
unsupported"; versions 19 to 24 were checked to decode there. Raise this only
when every reader we care about reads the newer version.
"""

_FRAME_MAGIC_BASE: Final = 0xD7B1A5C0
"""An OpenZL frame starts with this little-endian word plus its format version."""

_ON: Final = 1
"""``ZL_TernaryParam_enable`` for the checksum parameters."""

_UINT_BY_WIDTH: Final[dict[int, np.dtype[Any]]] = {
    1: np.dtype("<u1"),
    2: np.dtype("<u2"),
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}

_SPATIAL_RULE: Final = "Within a decoded frame, `h w` MUST stay together and in that order"
_SIZE_RULE: Final = "A reader MUST check derived sizes before allocating memory or decoding a frame"


# --------------------------------------------------------------------------- #
# Codec base class and registry
# --------------------------------------------------------------------------- #


class FrameCodec(abc.ABC):
    """Turns the samples of one frame into one OpenZL frame.

    Subclasses are frozen dataclasses whose fields are their whole
    configuration, registered under :attr:`name` with :func:`register_codec`.
    Specification section *Frames*.
    """

    name: ClassVar[str]
    """Registry name, the ``"name"`` member of the JSON form."""

    @abc.abstractmethod
    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame.

        Args:
            samples: The frame in its decoded layout, C-contiguous, with the
                dtype of one of the 21 sample encodings.
            axes: Name of each axis of ``samples`` in order, drawn from
                ``b``, ``t``, ``h`` and ``w``; ``h w`` adjacent and in that
                order, for example ``("t", "b", "h", "w")`` or ``("h", "w", "b")``.

        Returns:
            One OpenZL frame that decodes to ``samples.nbytes`` bytes.

        Raises:
            InvalidInputError: The samples, their axes or their dtype cannot
                be compressed by this codec.
        """

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether :meth:`encode` takes samples of ``encoding``."""
        del encoding
        return True

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form ``{"name": ..., "configuration": {...}}``."""
        return {"name": self.name, "configuration": self._configuration()}

    def _configuration(self) -> dict[str, Any]:
        if not dataclasses.is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a dataclass")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from the ``"configuration"`` member of its JSON form.

        Raises:
            InvalidInputError: A member is unknown or has a bad value.
        """
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(configuration) - known)
        if unknown:
            raise InvalidInputError(
                f"codec {cls.name!r} has no configuration member {', '.join(map(repr, unknown))}; "
                f"it takes {', '.join(sorted(known)) or 'none'}",
                field="codec.configuration",
            )
        return cls(**configuration)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameCodec:
        """Build a codec from its JSON form, checking it is an instance of ``cls``.

        Raises:
            InvalidInputError: The name is unknown, the configuration is bad,
                or the codec is not a ``cls``.
        """
        codec = codec_from_dict(data)
        if not isinstance(codec, cls):
            raise InvalidInputError(
                f"expected a {cls.__name__} codec, got {codec.name!r}",
                field="codec.name",
            )
        return codec


_REGISTRY: dict[str, type[FrameCodec]] = {}


_C = TypeVar("_C", bound=type[FrameCodec])


def register_codec(cls: _C) -> _C:
    """Register a codec class under its ``name``; usable as a class decorator.

    Raises:
        InvalidInputError: Another class is already registered under that name.
    """
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise InvalidInputError(
            f"codec name {cls.name!r} is already taken by {existing.__module__}.{existing.__qualname__}",
            field="codec.name",
        )
    _REGISTRY[cls.name] = cls
    return cls


def registered_codecs() -> tuple[str, ...]:
    """Return the registered codec names, sorted."""
    return tuple(sorted(_REGISTRY))


def _codec_class(name: object) -> type[FrameCodec]:
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    raise InvalidInputError(
        f"unknown codec name {name!r}; known codecs are {', '.join(registered_codecs())}",
        field="codec.name",
    )


def codec_from_dict(data: Mapping[str, Any]) -> FrameCodec:
    """Build a codec from its JSON form ``{"name": ..., "configuration": {...}}``.

    ``"configuration"`` may be omitted for a codec's default configuration.

    Raises:
        InvalidInputError: ``data`` is malformed, names an unregistered codec,
            or carries a configuration the codec refuses.
    """
    if not isinstance(data, Mapping):
        raise InvalidInputError(
            f"a codec is a mapping with 'name' and 'configuration', got {type(data).__name__}",
            field="codec",
        )
    extra = sorted(set(data) - {"name", "configuration"})
    if extra:
        raise InvalidInputError(
            f"a codec has only 'name' and 'configuration' members, got {', '.join(map(repr, extra))}",
            field="codec",
        )
    if "name" not in data:
        raise InvalidInputError("a codec needs a 'name' member", field="codec.name")
    cls = _codec_class(data["name"])
    configuration = data.get("configuration", {})
    if not isinstance(configuration, Mapping):
        raise InvalidInputError(
            f"codec configuration must be a mapping, got {type(configuration).__name__}",
            field="codec.configuration",
        )
    return cls.from_configuration(configuration)


def parse_codec(spec: FrameCodec | str | Mapping[str, Any] | None) -> FrameCodec:
    """Normalise the ways a caller may name a codec.

    Args:
        spec: ``None`` for :data:`DEFAULT_CODEC`, a registered name for that
            codec with its default configuration, a JSON form, or a codec.

    Raises:
        InvalidInputError: ``spec`` names no registered codec or is malformed.
    """
    if spec is None:
        return DEFAULT_CODEC
    if isinstance(spec, FrameCodec):
        return spec
    if isinstance(spec, str):
        return _codec_class(spec).from_configuration({})
    if isinstance(spec, Mapping):
        return codec_from_dict(spec)
    raise InvalidInputError(
        f"a codec is a FrameCodec, a name, a JSON mapping or None, got {type(spec).__name__}",
        field="codec",
    )


# --------------------------------------------------------------------------- #
# Shared encode steps
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class _Frame:
    """Samples ready for compression, with the geometry of their layout."""

    samples: npt.NDArray[Any]
    encoding: SampleEncoding
    width: int
    """Samples in one row: ``w`` times every axis after it."""
    planes: int
    """Independent images stacked before ``h``: the product of the axes before it."""

    def stream(self) -> npt.NDArray[Any]:
        """Return the samples as unsigned integers of the component width.

        The result is a view of :attr:`samples`; keep it referenced until the
        compressor returns, since ``openzl.ext.Input`` does not hold it.
        """
        return self.samples.reshape(-1).view(_UINT_BY_WIDTH[self.encoding.component_bytes])


def _prepare(samples: npt.NDArray[Any], axes: tuple[str, ...]) -> _Frame:
    """Check a frame against *Frames* and *Sample encodings* and derive its geometry."""
    if not isinstance(samples, np.ndarray):
        raise InvalidInputError(
            f"samples must be a numpy.ndarray, got {type(samples).__name__}",
            field="samples",
        )
    encoding = encoding_for_dtype(samples.dtype)
    axes = tuple(axes)
    if len(axes) != samples.ndim:
        raise InvalidInputError(
            f"axes {axes} name {len(axes)} axes but samples have shape {samples.shape}",
            field="axes",
        )
    if len(set(axes)) != len(axes) or not set(axes) <= {"b", "t", "h", "w"}:
        raise InvalidInputError(
            f"axes {axes} must be distinct names among 'b', 't', 'h' and 'w'",
            field="axes",
        )
    if "h" not in axes or "w" not in axes or axes.index("w") != axes.index("h") + 1:
        raise InvalidInputError(
            f"axes {axes} must contain 'h' immediately followed by 'w'",
            field="axes",
            rule=_SPATIAL_RULE,
        )
    if samples.size == 0:
        raise InvalidInputError(
            f"a frame holds at least one sample, got shape {samples.shape}",
            field="samples",
        )
    # A byte-order change, never a cast: the encoding's dtype is the same type.
    arr = np.ascontiguousarray(samples, dtype=encoding.dtype)
    if encoding.name == "bool" and int(arr.view(np.uint8).max()) > 1:
        raise InvalidInputError(
            "boolean samples must be stored as bytes 0 or 1",
            field="samples",
            rule="Boolean samples occupy one decoded byte and every byte MUST be 0 or 1",
        )
    h = axes.index("h")
    planes = math.prod(samples.shape[:h])
    width = math.prod(samples.shape[h + 1 :])
    return _Frame(arr, encoding, width, planes)


_NODATA_WORDS: Final[dict[str, float]] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""JSON spellings of the non-finite nodata values, as Zarr writes fill values."""


def parse_nodata(value: object) -> int | float | None:
    """Normalise a nodata value: None, an integer, a float or ``"NaN"``.

    Every NaN becomes :data:`math.nan` itself, so two codecs with a NaN
    sentinel compare equal and hash alike.

    Raises:
        InvalidInputError: ``value`` is a boolean, a string other than
            ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, or not a number.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise InvalidInputError(f"nodata is a number or NaN, not a boolean ({value!r})", field="nodata")
    if isinstance(value, str):
        if value in _NODATA_WORDS:
            return _NODATA_WORDS[value]
        raise InvalidInputError(f"nodata is a number or one of {', '.join(_NODATA_WORDS)}, got {value!r}", field="nodata")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return math.nan if math.isnan(number) else number
    raise InvalidInputError(f"nodata is a number or NaN, got {type(value).__name__}", field="nodata")


def nodata_to_json(value: int | float) -> int | float | str:
    """Return the JSON form of a nodata value: non-finite floats become strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _nodata_key(value: int | float | None) -> str:
    """A hashable spelling that tells NaN, -0.0 and 0.0 apart."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float.hex(value)
    return str(value)


def _frame_format_version(frame: bytes) -> int:
    (magic,) = struct.unpack_from("<I", frame)
    return int(magic) - _FRAME_MAGIC_BASE


# --------------------------------------------------------------------------- #
# OpenZL built-in graphs
# --------------------------------------------------------------------------- #

_OPENZL_GRAPHS: Final[dict[str, str]] = {
    "compress": "Compress",
    "field_lz": "FieldLz",
    "zstd": "Zstd",
    "entropy": "Entropy",
    "huffman": "Huffman",
    "bitpack": "Bitpack",
    "store": "Store",
}
"""Names accepted by :class:`OpenZLGraph`, mapped to their ``openzl.ext.graphs`` class."""

_NARROW_ONLY: Final = frozenset({"entropy", "huffman"})
"""Graphs whose order-0 coders refuse numeric elements wider than 2 bytes."""


class _OpenZLContexts(threading.local):
    """One compression context per graph per thread: a CCtx is not thread-safe."""

    def __init__(self) -> None:
        self.cctx: dict[str, tuple[Any, Any]] = {}
        """Graph name to ``(CCtx, Compressor)``; the CCtx only borrows its compressor."""


_OPENZL_CTX = _OpenZLContexts()


def _openzl_cctx(graph: str) -> Any:
    found = _OPENZL_CTX.cctx.get(graph)
    if found is None:
        compressor = _zl.Compressor()
        compressor.select_starting_graph(getattr(_zl.graphs, _OPENZL_GRAPHS[graph])()(compressor))
        cctx = _zl.CCtx()
        cctx.ref_compressor(compressor)
        # Without sticky parameters the CCtx forgets its graph after one frame.
        cctx.set_parameter(_zl.CParam.StickyParameters, _ON)
        cctx.set_parameter(_zl.CParam.FormatVersion, FORMAT_VERSION)
        cctx.set_parameter(_zl.CParam.ContentChecksum, _ON)
        cctx.set_parameter(_zl.CParam.CompressedChecksum, _ON)
        found = _OPENZL_CTX.cctx[graph] = (cctx, compressor)
    return found[0]


@register_codec
@dataclass(frozen=True)
class OpenZLGraph(FrameCodec):
    """One of OpenZL's built-in graphs over the frame's numeric stream.

    The portable family: any OpenZL decoder reads these frames, geozl or not.
    ``compress`` and ``field_lz`` accept every sample encoding; ``entropy``
    and ``huffman`` only components of 1 or 2 bytes. Specification sections
    *Frames* and *Sample encodings*.

    >>> OpenZLGraph("field_lz").to_dict()
    {'name': 'openzl', 'configuration': {'graph': 'field_lz'}}
    """

    name: ClassVar[str] = "openzl"

    graph: str = "compress"
    """Built-in graph: ``compress``, ``field_lz``, ``zstd``, ``entropy``,
    ``huffman``, ``bitpack`` or ``store``."""

    def __post_init__(self) -> None:
        if self.graph not in _OPENZL_GRAPHS:
            raise InvalidInputError(
                f"unknown OpenZL graph {self.graph!r}; use one of {', '.join(_OPENZL_GRAPHS)}",
                field="codec.configuration.graph",
            )

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether this graph takes components of ``encoding``'s width."""
        return self.graph not in _NARROW_ONLY or encoding.component_bytes <= 2

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        frame = _prepare(samples, axes)
        if not self.accepts(frame.encoding):
            raise InvalidInputError(
                f"OpenZL graph {self.graph!r} takes components of at most 2 bytes, not {frame.encoding.name}; use 'field_lz' or 'compress'",
                field="codec.configuration.graph",
            )
        # openzl.ext.Input does not keep its array alive: `stream` must stay
        # referenced until compress returns, or OpenZL reads freed memory.
        stream = frame.stream()
        try:
            out = _openzl_cctx(self.graph).compress([_zl.Input(_zl.Type.Numeric, stream)])
        except RuntimeError as err:
            raise InvalidInputError(
                f"OpenZL graph {self.graph!r} failed on {frame.encoding.name} samples: {err}",
                field="samples",
            ) from err
        del stream
        return bytes(out)


# --------------------------------------------------------------------------- #
# geozl recipes
# --------------------------------------------------------------------------- #

GEOZL_ENCODINGS: Final = frozenset(
    {
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    }
)
"""Encodings geozl has a dtype code for; the others are refused."""

_NEWER_FORMAT_STAGES: Final = frozenset({"sparse", "pivco"})
"""geozl stages that make libgeozl write OpenZL format 27, which rumi-eo cannot read."""

_RECIPE = re.compile(r"[a-z][a-z0-9_]*(?:>[a-z][a-z0-9_]*)+")

_GEOZL_CACHE_SIZE: Final = 32


class _GeoZLGraphs(threading.local):
    """A small per-thread LRU of built graphs: a geozl.Graph is not thread-safe."""

    def __init__(self) -> None:
        self.graphs: OrderedDict[tuple[str, int, int, str, str], geozl.Graph] = OrderedDict()


_GEOZL_CTX = _GeoZLGraphs()

_GEOZL_ACCEPTS: dict[tuple[str, str], bool] = {}
"""Whether a recipe takes an encoding, keyed by ``(recipe, encoding name)``."""


def _geozl_graph(recipe: str, width: int, planes: int, dtype: np.dtype[Any], nodata: int | float | None = None) -> geozl.Graph:
    # A lossless graph depends only on these: geozl reads the raster it is
    # built from only for lossy domains and NaN nodata, so zeros stand in.
    key = (recipe, width, planes, dtype.str, _nodata_key(nodata))
    cache = _GEOZL_CTX.graphs
    graph = cache.get(key)
    if graph is None:
        graph = geozl.graph(np.zeros((planes, 1, width), dtype), recipe, width=width, planes=planes, nodata=nodata)
        cache[key] = graph
        if len(cache) > _GEOZL_CACHE_SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return graph


def _check_recipe(recipe: object) -> str:
    if not isinstance(recipe, str) or not _RECIPE.fullmatch(recipe):
        raise InvalidInputError(
            f"a geozl recipe is stages joined by '>', such as 'planar>zigzag>transpose>entropy'; got {recipe!r}",
            field="codec.configuration.recipe",
        )
    newer = sorted(_NEWER_FORMAT_STAGES & set(recipe.split(">")))
    if newer:
        raise InvalidInputError(
            f"geozl stage {', '.join(map(repr, newer))} writes OpenZL format 27, above the "
            f"version {FORMAT_VERSION} rumi-eo reads; choose another final stage",
            field="codec.configuration.recipe",
        )
    errors = []
    for width in (2, 4, 8, 1):
        try:
            _geozl_graph(recipe, 8, 1, np.dtype(f"<u{width}"))
        except RuntimeError as err:
            errors.append(str(err))
        else:
            return recipe
    raise InvalidInputError(
        f"geozl does not know recipe {recipe!r} for any sample width: {errors[0]}",
        field="codec.configuration.recipe",
    )


@register_codec
@dataclass(frozen=True)
class GeoZLGraph(FrameCodec):
    """A geozl recipe: a 2-D predictor, then OpenZL stages, over the numeric stream.

    The predictor walks rows of ``width`` samples and restarts at each plane:
    ``width`` is ``w`` times the axes after it (interleaved bands or times sit
    inside a row), ``planes`` the product of the axes before ``h``. Readers
    need geozl's decoders. Specification sections *Frames* and *Choosing a
    frame unit*.

    Stages that need a newer OpenZL format (``sparse``, ``pivco``) are refused.
    Some stages take only some sample widths (``transpose`` needs at least 2
    bytes, ``entropy`` directly after ``zigzag`` at most 2): :meth:`accepts`
    tells, and :meth:`encode` refuses the others with :class:`InvalidInputError`.

    >>> GeoZLGraph("delta_w>zigzag>field_lz").to_dict()
    {'name': 'geozl', 'configuration': {'recipe': 'delta_w>zigzag>field_lz'}}
    """

    name: ClassVar[str] = "geozl"

    recipe: str = "planar>zigzag>transpose>entropy"
    """geozl method string, for example ``"med>zigzag>transpose>entropy"``."""
    nodata: int | float | None = None
    """A sentinel (or NaN) that geozl's nodata stage splits off into a mask
    before prediction, so the predictor sees a continuous surface; None for
    no nodata stage. Lossless either way. Omitted from the JSON form when None."""

    def __post_init__(self) -> None:
        _check_recipe(self.recipe)
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))

    def _configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"recipe": self.recipe}
        if self.nodata is not None:
            config["nodata"] = nodata_to_json(self.nodata)
        return config

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether geozl has a dtype code for ``encoding`` and the recipe takes its width.

        Whether a recipe takes a sample width depends on the width alone, so
        the answer comes from compressing a small probe once per encoding.
        """
        if encoding.name not in GEOZL_ENCODINGS:
            return False
        key = (self.recipe, encoding.name)
        found = _GEOZL_ACCEPTS.get(key)
        if found is None:
            probe = (np.arange(256, dtype=np.uint64) * 2654435761 % 1000).astype(encoding.dtype)
            try:
                geozl.compress(probe, graph=_geozl_graph(self.recipe, 16, 1, encoding.dtype))
            except (RuntimeError, ValueError):
                found = False
            else:
                found = True
            _GEOZL_ACCEPTS[key] = found
        return found

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        frame = _prepare(samples, axes)
        if frame.encoding.name not in GEOZL_ENCODINGS:
            raise InvalidInputError(
                f"geozl has no codes for {frame.encoding.name} samples; it takes "
                f"{', '.join(sorted(GEOZL_ENCODINGS))}. Use the 'openzl' or 'raster' codec",
                field="samples",
            )
        if not self.accepts(frame.encoding):
            raise InvalidInputError(
                f"geozl recipe {self.recipe!r} does not take {frame.encoding.name} samples "
                f"({frame.encoding.decoded_bytes}-byte elements); 'transpose' needs at least "
                "2 bytes and 'entropy' after a predictor at most 2",
                field="codec.configuration.recipe",
            )
        try:
            graph = _geozl_graph(self.recipe, frame.width, frame.planes, frame.samples.dtype, self.nodata)
            out = geozl.compress(frame.samples, graph=graph)
        except (RuntimeError, ValueError, OverflowError) as err:
            raise InvalidInputError(
                f"geozl recipe {self.recipe!r} failed on {frame.encoding.name} samples of shape {frame.samples.shape}: {err}",
                field="samples",
            ) from err
        version = _frame_format_version(out)
        if version > FORMAT_VERSION:
            raise InvalidInputError(
                f"geozl recipe {self.recipe!r} wrote OpenZL format {version}, above the version {FORMAT_VERSION} rumi-eo reads",
                field="codec.configuration.recipe",
            )
        return out


# --------------------------------------------------------------------------- #
# Plane stacks
# --------------------------------------------------------------------------- #

_gl: Any = importlib.import_module("geozl.lossless")
"""geozl's OpenZL nodes, typed as Any at this boundary like :data:`_zl`."""

_STACK_PREDICTORS: Final = ("planar", "med", "average", "delta_w", "delta_n", "wp_static")
"""geozl's 2-D predictors, usable one after another in a chain."""

_STACK_TERMINALS: Final = ("entropy", "field_lz", "zstd", "transpose>entropy", "transpose>zstd", "compress")
"""The OpenZL back ends a chain can end with."""

_FUSED_ZIGZAG: Final = {"planar": "PlanarZigzag", "med": "MedZigzag"}
"""Predictors geozl fuses with the zigzag that follows them (as its recipes do)."""

_PLAIN_PREDICTOR: Final = {
    "planar": "Planar",
    "med": "Med",
    "average": "Average",
    "delta_w": "DeltaW",
    "delta_n": "DeltaN",
    "wp_static": "WpStatic",
}

_CHAIN_STAGE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Chain:
    """A parsed chain: predictors, then zigzag, then an OpenZL back end.

    The grammar extends geozl's recipes with predictors applied one after
    another (``"planar>med>zigzag>transpose>entropy"`` predicts the residual
    of the planar predictor with MED)::

        chain      = head ">" terminal
        head       = "id" | "delta_1d" [">zigzag"] | predictor {">" predictor} ">zigzag"
        predictor  = planar | med | average | delta_w | delta_n | wp_static
        terminal   = entropy | field_lz | zstd | transpose>entropy | transpose>zstd | compress

    Every single-predictor chain is also a geozl recipe. ``id`` and
    ``delta_1d`` chains use OpenZL's built-in codecs only.

    >>> str(Chain.parse("planar>med>zigzag>transpose>entropy"))
    'planar>med>zigzag>transpose>entropy'
    >>> Chain.parse("id>field_lz").portable
    True
    """

    predictors: tuple[str, ...]
    """geozl 2-D predictors, applied in order."""
    delta_1d: bool
    """OpenZL's built-in delta over the flat stream instead of a 2-D predictor."""
    zigzag: bool
    """Fold signed residuals to unsigned before the back end."""
    terminal: str
    """The OpenZL back end, one of ``_STACK_TERMINALS``."""

    @classmethod
    def parse(cls, text: object) -> Chain:
        """Parse a chain; see the class docstring for the grammar.

        Raises:
            InvalidInputError: ``text`` does not follow the grammar.
        """
        if not isinstance(text, str) or not all(_CHAIN_STAGE.fullmatch(s) for s in text.split(">")):
            raise InvalidInputError(
                f"a chain is stages joined by '>', such as 'med>zigzag>transpose>entropy'; got {text!r}",
                field="codec.configuration.planes.chains",
            )
        stages = text.split(">")
        split = 2 if len(stages) >= 3 and stages[-2] == "transpose" else 1
        terminal, head = ">".join(stages[-split:]), stages[:-split]
        if terminal not in _STACK_TERMINALS or not head:
            raise InvalidInputError(
                f"chain {text!r} must end with one of {', '.join(_STACK_TERMINALS)} after a head such as 'id' or 'planar>zigzag'",
                field="codec.configuration.planes.chains",
            )
        if head == ["id"]:
            return cls((), False, False, terminal)
        if head[0] == "delta_1d" and head[1:] in ([], ["zigzag"]):
            return cls((), True, len(head) == 2, terminal)
        predictors = tuple(head[:-1])
        if head[-1] != "zigzag" or not predictors or not set(predictors) <= set(_STACK_PREDICTORS):
            raise InvalidInputError(
                f"chain {text!r}: predictors ({', '.join(_STACK_PREDICTORS)}) are followed by 'zigzag', "
                "or the head is 'id' or 'delta_1d'",
                field="codec.configuration.planes.chains",
            )
        return cls(predictors, False, True, terminal)

    def __str__(self) -> str:
        if self.predictors:
            head = [*self.predictors, "zigzag"]
        elif self.delta_1d:
            head = ["delta_1d", "zigzag"] if self.zigzag else ["delta_1d"]
        else:
            head = ["id"]
        return ">".join([*head, self.terminal])

    @property
    def portable(self) -> bool:
        """Whether the chain uses OpenZL's built-in codecs only (no geozl decoder needed)."""
        return not self.predictors

    @property
    def recipe(self) -> str | None:
        """The equivalent geozl recipe, or None when geozl's grammar cannot spell it."""
        if len(self.predictors) > 1 or self.terminal == "compress" or (self.delta_1d and self.zigzag):
            return None
        return str(self)

    def accepts_width(self, width: int) -> bool:
        """Whether the back end takes numeric elements of ``width`` bytes."""
        if self.terminal == "entropy":
            return width <= 2
        if self.terminal.startswith("transpose>"):
            return width >= 2
        return True


def _terminal_graph(c: Any, terminal: str) -> Any:
    if terminal == "entropy":
        return _zl.graphs.Entropy()(c)
    if terminal == "field_lz":
        return _zl.graphs.FieldLz()(c)
    if terminal == "compress":
        return _zl.graphs.Compress()(c)
    back = _zl.graphs.Zstd()(c) if terminal.endswith("zstd") else _zl.graphs.Entropy()(c)
    if terminal == "zstd":
        return _zl.nodes.ConvertNumToSerialLE()(c, back)
    return _zl.nodes.ConvertNumToStructLE()(c, _zl.nodes.TransposeSplit()(c, back))


def _chain_graph(c: Any, chain: Chain, row: int, planes: int = 1) -> Any:
    """Register ``chain`` on compressor ``c`` for ``planes`` planes of rows of ``row`` elements; return its GraphID."""
    graph = _terminal_graph(c, chain.terminal)
    predictors = list(chain.predictors)
    if chain.zigzag:
        last = predictors[-1] if predictors else None
        if last in _FUSED_ZIGZAG:
            graph = getattr(_gl, _FUSED_ZIGZAG[last])(row, planes)(c, graph)
            predictors.pop()
        else:
            graph = _zl.nodes.Zigzag()(c, graph)
    for name in reversed(predictors):
        node = getattr(_gl, _PLAIN_PREDICTOR[name])
        # delta_w reads only to its left, so it has no plane count to restart at.
        graph = (node(row) if name == "delta_w" else node(row, planes))(c, graph)
    if chain.delta_1d:
        graph = _zl.nodes.DeltaInt()(c, graph)
    return graph


class _SplitGraph(_zl.FunctionGraph):  # type: ignore[misc]  # openzl.ext is untyped (Any)
    """An OpenZL function graph: cut the stream into segments, each to its own graph.

    It runs only while compressing; the frame records the built-in split codec.
    """

    def __init__(self, sizes: list[int], successors: list[Any], order: list[int]) -> None:
        super().__init__()
        self._sizes = sizes
        self._successors = successors
        self._order = order

    def function_graph_description(self) -> Any:
        return _zl.FunctionGraphDescription(
            name="rumi.split", input_type_masks=[_zl.TypeMask.Numeric], custom_graphs=self._successors
        )

    def graph(self, state: Any) -> None:
        graphs = state.custom_graphs
        for edge, which in zip(_zl.nodes.SplitNumeric(segment_sizes=self._sizes).run(state.edges[0]), self._order, strict=True):
            edge.set_destination(graphs[which])


@dataclass(frozen=True)
class PlaneCoding:
    """How one plane of a frame is compressed: one or more chains, and its reference.

    >>> PlaneCoding(("med>zigzag>transpose>entropy",), reference=True).to_dict()
    {'chains': ['med>zigzag>transpose>entropy'], 'reference': True}
    """

    chains: tuple[str, ...] = ("planar>zigzag>transpose>entropy",)
    """Chains (see :class:`Chain`). With several, OpenZL compresses the plane
    with each on every frame and keeps the smallest (its brute-force graph)."""
    reference: bool = False
    """Subtract the previous plane, sample by sample and exactly (wrapping
    integer arithmetic), before the chain runs: the inter-band or inter-date
    difference of *Choosing a frame unit*. The first plane has no previous one."""

    def __post_init__(self) -> None:
        chains = (self.chains,) if isinstance(self.chains, str) else tuple(self.chains)
        if not chains:
            raise InvalidInputError("a plane coding needs at least one chain", field="codec.configuration.planes.chains")
        canonical = tuple(str(Chain.parse(c)) for c in chains)
        if len(set(canonical)) != len(canonical):
            raise InvalidInputError(f"chains {list(canonical)} repeat a chain", field="codec.configuration.planes.chains")
        if not isinstance(self.reference, (bool, np.bool_)):
            raise InvalidInputError(f"reference is true or false, got {self.reference!r}", field="codec.configuration.planes.reference")
        object.__setattr__(self, "chains", canonical)
        object.__setattr__(self, "reference", bool(self.reference))

    @property
    def parsed(self) -> tuple[Chain, ...]:
        """The chains, parsed."""
        return tuple(Chain.parse(c) for c in self.chains)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form ``{"chains": [...], "reference": bool}``."""
        return {"chains": list(self.chains), "reference": self.reference}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlaneCoding:
        """Read the JSON form written by :meth:`to_dict`.

        Raises:
            InvalidInputError: ``data`` is not a mapping of those two members.
        """
        if not isinstance(data, Mapping) or not set(data) <= {"chains", "reference"}:
            raise InvalidInputError(
                f"a plane coding is a mapping with 'chains' and 'reference', got {data!r}",
                field="codec.configuration.planes",
            )
        chains = data.get("chains", cls.chains)
        if isinstance(chains, str) or not isinstance(chains, (list, tuple)):
            raise InvalidInputError(f"'chains' is a list of chains, got {chains!r}", field="codec.configuration.planes.chains")
        return cls(tuple(chains), data.get("reference", False))


_STACK_CACHE_SIZE: Final = 32


class _StackContexts(threading.local):
    """Built compressors per thread, keyed by codec and frame geometry."""

    def __init__(self) -> None:
        self.built: OrderedDict[tuple[str, int, int, int, int, str], tuple[Any, Any, list[Any]]] = OrderedDict()


_STACK_CTX = _StackContexts()


@register_codec
@dataclass(frozen=True)
class StackCodec(FrameCodec):
    """A coding per plane of the frame, with exact prediction between planes.

    A frame's planes are the images stacked before ``h`` (one per band for
    ``b h w``, one per band and date for ``t b h w``; a tile is one plane);
    rows are ``w`` times the axes after ``w``. Each plane gets its own
    :class:`PlaneCoding`: a plane with ``reference`` first has the previous
    plane subtracted (geozl's ``delta_n`` with a row of one whole plane), then
    runs its chain, and gets its own entropy tables. With one coding, every
    plane uses it. The frame stays one self-contained OpenZL frame that rumi-eo
    and geozl's decoders read; a stack whose chains all start with ``id`` or
    ``delta_1d``, without references or nodata, needs no geozl decoder at all
    (:attr:`portable`). Specification sections *Frames* and *Choosing a frame unit*.

    ``nodata`` puts geozl's nodata stage in front (lossless, every NaN payload
    kept): holes go to a mask and are filled from their neighbours, which
    helps predictors across nodata edges.

    >>> codec = StackCodec((PlaneCoding(("med>zigzag>transpose>entropy",)), PlaneCoding(("med>zigzag>entropy",), True)))
    >>> frame = codec.encode(np.arange(24, dtype="<u2").reshape(2, 3, 4), axes=("b", "h", "w"))
    >>> decode_frame(frame, decoded_bytes=48).view("<u2").tolist() == list(range(24))
    True
    """

    name: ClassVar[str] = "stack"

    planes: tuple[PlaneCoding, ...] = (PlaneCoding(),)
    """One coding per plane, or a single coding for every plane."""
    nodata: int | float | None = None
    """Sentinel or NaN for geozl's nodata stage; None for none. Omitted from JSON when None."""

    def __post_init__(self) -> None:
        planes = tuple(self.planes)
        if not planes or not all(isinstance(p, PlaneCoding) for p in planes):
            raise InvalidInputError(
                f"'planes' is a non-empty list of plane codings, got {self.planes!r}", field="codec.configuration.planes"
            )
        if len(planes) > 1 and planes[0].reference:
            raise InvalidInputError(
                "the first plane has no previous plane to reference", field="codec.configuration.planes.reference"
            )
        object.__setattr__(self, "planes", planes)
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))

    def _configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"planes": [p.to_dict() for p in self.planes]}
        if self.nodata is not None:
            config["nodata"] = nodata_to_json(self.nodata)
        return config

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from ``{"planes": [...], "nodata": ...}``.

        Raises:
            InvalidInputError: A member is unknown or has a bad value.
        """
        unknown = sorted(set(configuration) - {"planes", "nodata"})
        if unknown:
            raise InvalidInputError(
                f"codec 'stack' has no configuration member {', '.join(map(repr, unknown))}; it takes nodata, planes",
                field="codec.configuration",
            )
        planes = configuration.get("planes", [PlaneCoding().to_dict()])
        if isinstance(planes, (str, Mapping)) or not isinstance(planes, (list, tuple)):
            raise InvalidInputError(f"'planes' is a list of plane codings, got {planes!r}", field="codec.configuration.planes")
        return cls(tuple(PlaneCoding.from_dict(p) for p in planes), configuration.get("nodata"))

    @functools.cached_property
    def _key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @property
    def portable(self) -> bool:
        """Whether any OpenZL decoder reads the frames, without geozl's decoders."""
        return self.nodata is None and all(not p.reference and all(c.portable for c in p.parsed) for p in self.planes)

    def accepts(self, encoding: SampleEncoding) -> bool:
        """Return whether every chain takes ``encoding``'s component width (and nodata its dtype)."""
        if self.nodata is not None and encoding.name not in GEOZL_ENCODINGS:
            return False
        width = encoding.component_bytes
        return all(c.accepts_width(width) for p in self.planes for c in p.parsed)

    def codings(self, planes: int) -> tuple[PlaneCoding, ...]:
        """Return the coding of each of ``planes`` planes.

        Raises:
            InvalidInputError: the codec names another number of planes.
        """
        if len(self.planes) == 1:
            return self.planes * planes
        if len(self.planes) != planes:
            raise InvalidInputError(
                f"stack codec has {len(self.planes)} plane codings, the frame has {planes} planes",
                field="codec.configuration.planes",
            )
        return self.planes

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        frame = _prepare(samples, axes)
        if not self.accepts(frame.encoding):
            raise InvalidInputError(
                f"stack codec {self._key} does not take {frame.encoding.name} samples "
                f"({frame.encoding.component_bytes}-byte components): 'entropy' takes at most 2 bytes, "
                "'transpose' at least 2, nodata only geozl's eleven dtypes",
                field="codec.configuration",
            )
        rows = frame.samples.shape[axes.index("h")]
        row = frame.width * (frame.encoding.decoded_bytes // frame.encoding.component_bytes)
        stream = frame.stream()
        try:
            cctx = self._cctx(frame.planes, rows, row, frame.encoding)
            out = cctx.compress([_zl.Input(_zl.Type.Numeric, stream)])
        except (RuntimeError, ValueError, OverflowError) as err:
            raise InvalidInputError(
                f"stack codec failed on {frame.encoding.name} samples of shape {frame.samples.shape}: {err}",
                field="samples",
            ) from err
        del stream
        return bytes(out)

    def _cctx(self, planes: int, rows: int, row: int, encoding: SampleEncoding) -> Any:
        key = (self._key, planes, rows, row, encoding.component_bytes, encoding.dtype.str)
        cache = _STACK_CTX.built
        found = cache.get(key)
        if found is None:
            found = cache[key] = self._build(planes, rows, row, encoding)
            if len(cache) > _STACK_CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        return found[0]

    def _build(self, planes: int, rows: int, row: int, encoding: SampleEncoding) -> tuple[Any, Any, list[Any]]:
        """Register the frame's graph; return ``(CCtx, Compressor, objects to keep alive)``."""
        c = _zl.Compressor()
        keep: list[Any] = []
        size = rows * row
        by_chains: dict[tuple[str, ...], Any] = {}

        def plane_graph(chains: tuple[str, ...]) -> Any:
            # Each plane is its own segment with its own entropy tables: on
            # Sentinel-2, Landsat-8 and a Landsat time series that beat
            # sharing one segment (and tables) between planes of equal coding.
            if chains not in by_chains:
                graphs = [_chain_graph(c, Chain.parse(chain), row) for chain in chains]
                by_chains[chains] = graphs[0] if len(graphs) == 1 else _zl.graphs.BruteForce(graphs)(c)
            return by_chains[chains]

        def split(sizes: list[int], successors: list[Any]) -> Any:
            if len(successors) == 1:
                return successors[0]
            unique = list({id(g): g for g in successors}.values())
            graph = _SplitGraph(sizes, unique, [unique.index(g) for g in successors])
            keep.append(graph)
            return c.register_function_graph(graph)

        def runs(chains: list[tuple[str, ...]]) -> Any:
            return split([size] * len(chains), [plane_graph(item) for item in chains])

        # Top level: plain planes, and groups that start at a plane and go on
        # through the planes that reference their previous one.
        items: list[tuple[bool, list[tuple[str, ...]]]] = []
        for index, coding in enumerate(self.codings(planes)):
            if coding.reference and index > 0:
                items[-1] = (True, [*items[-1][1], coding.chains])
            else:
                items.append((False, [coding.chains]))
        heads: list[Any] = []
        sizes: list[int] = []
        pending: list[tuple[str, ...]] = []
        for is_group, members in items:
            if not is_group:
                pending.extend(members)
                continue
            if pending:
                heads.append(runs(pending))
                sizes.append(size * len(pending))
                pending = []
            heads.append(_gl.DeltaN(size)(c, runs(members)))
            sizes.append(size * len(members))
        if pending:
            heads.append(runs(pending))
            sizes.append(size * len(pending))
        start = split(sizes, heads)
        if self.nodata is not None:
            nan = isinstance(self.nodata, float) and math.isnan(self.nodata)
            mask = _terminal_graph(c, "zstd")
            node = _gl.Nodata(row, radius=0) if nan else _gl.Nodata(row, value=self.nodata, dtype=encoding.dtype, radius=0)
            start = node(c, start, mask)
        c.select_starting_graph(start)
        cctx = _zl.CCtx()
        cctx.ref_compressor(c)
        cctx.set_parameter(_zl.CParam.StickyParameters, _ON)
        cctx.set_parameter(_zl.CParam.FormatVersion, FORMAT_VERSION)
        cctx.set_parameter(_zl.CParam.ContentChecksum, _ON)
        cctx.set_parameter(_zl.CParam.CompressedChecksum, _ON)
        return cctx, c, keep


# --------------------------------------------------------------------------- #
# Default
# --------------------------------------------------------------------------- #

_PREDICTED_ENCODINGS: Final = frozenset({"uint16", "uint32", "uint64", "int16", "int32", "int64"})


@register_codec
@dataclass(frozen=True)
class RasterCodec(FrameCodec):
    """The default codec: a spatial predictor for integer rasters, OpenZL otherwise.

    Integer samples of 2, 4 or 8 bytes go to :attr:`integer` when its recipe
    takes them; every other encoding (8-bit, boolean, floating point, complex, ML floats) goes to
    :attr:`other`. Measured on 68 Sentinel-2 and Landsat-8 uint16 tiles of
    512 x 512, ``planar>zigzag>transpose>entropy`` compresses 1.750:1 against
    1.570:1 for OpenZL's ``compress`` graph, and decodes at about 1 GB/s.
    On 8-bit and floating point rasters OpenZL's ``compress`` graph did as well
    as or better than every geozl recipe tried. Specification section *Frames*.

    >>> RasterCodec().to_dict()["configuration"]["integer"]
    {'name': 'geozl', 'configuration': {'recipe': 'planar>zigzag>transpose>entropy'}}
    """

    name: ClassVar[str] = "raster"

    integer: GeoZLGraph = field(default_factory=GeoZLGraph)
    """Codec for 2, 4 and 8-byte integer samples."""
    other: OpenZLGraph = field(default_factory=OpenZLGraph)
    """Codec for every other encoding; must accept all of them."""

    def __post_init__(self) -> None:
        if not isinstance(self.integer, GeoZLGraph):
            raise InvalidInputError(
                f"'integer' must be a geozl codec, got {self.integer!r}",
                field="codec.configuration.integer",
            )
        if not isinstance(self.other, OpenZLGraph) or self.other.graph in _NARROW_ONLY:
            raise InvalidInputError(
                f"'other' must be an openzl codec that takes every encoding, got {self.other!r}",
                field="codec.configuration.other",
            )

    def _configuration(self) -> dict[str, Any]:
        return {"integer": self.integer.to_dict(), "other": self.other.to_dict()}

    @classmethod
    def from_configuration(cls, configuration: Mapping[str, Any]) -> FrameCodec:
        """Build the codec from its configuration, whose members are codecs' JSON forms."""
        unknown = sorted(set(configuration) - {"integer", "other"})
        if unknown:
            raise InvalidInputError(
                f"codec 'raster' has no configuration member {', '.join(map(repr, unknown))}; it takes integer, other",
                field="codec.configuration",
            )
        kwargs: dict[str, Any] = {}
        for key in ("integer", "other"):
            if key in configuration:
                kwargs[key] = codec_from_dict(configuration[key])
        return cls(**kwargs)

    def select(self, encoding: SampleEncoding) -> FrameCodec:
        """Return the codec this one uses for samples of ``encoding``."""
        if encoding.name in _PREDICTED_ENCODINGS and self.integer.accepts(encoding):
            return self.integer
        return self.other

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        encoding = encoding_for_dtype(samples.dtype)
        return self.select(encoding).encode(samples, axes=axes)


DEFAULT_CODEC: Final[FrameCodec] = RasterCodec()
"""The codec :func:`parse_codec` returns for None: a fixed choice that needs no
measuring. :func:`rumi_core.write` measures instead (``compression="auto"``,
:mod:`rumi_core.compression`)."""


# --------------------------------------------------------------------------- #
# Decoding
# --------------------------------------------------------------------------- #

# Decoding goes through geozl.decompress, which runs the OpenZL inside libgeozl
# from C with geozl's decoders built in, and releases the GIL. The alternative,
# one openzl.ext.DCtx per thread with geozl.register_decoders, reads the same
# frames but holds the GIL in DCtx.decompress and runs geozl's decoders as
# Python callbacks. Measured on 68 uint16 512x512 S2/L8 tiles, 2-core machine,
# checksums verified, MB/s of decoded samples (DCtx 1 thread / 2 threads,
# geozl.decompress 1 thread / 2 threads):
#   openzl compress                        1012 /  627   1015 / 1245
#   geozl planar>zigzag>transpose>entropy   997 /  615   1020 / 1323
#   geozl med>zigzag>transpose>entropy      587 /  618    598 /  869
#   geozl planar>zigzag>pfor               3020 / 2078   3488 / 2720
# Single-threaded they tie (per call 7.5 us vs 9.3 us on an 8x8 frame); with
# two threads the DCtx loses ground while geozl.decompress gains 25-45 %.
# Encoding is the same story: geozl.compress gives 485 MB/s on one thread and
# 956 MB/s on two, while openzl.ext CCtx holds the GIL.


def _declared_size(data: bytes) -> int:
    """Read the frame header's declared output size (*Resource limits*)."""
    try:
        info = _zl.FrameInfo(data)
        outputs = int(info.num_outputs)
        if outputs != 1:
            raise FrameDecodeError(
                f"a rumi frame decodes to exactly one stream, this one declares {outputs}",
                field="frame",
            )
        return int(info.output_content_size(0))
    except FrameDecodeError:
        raise
    except Exception as err:
        raise FrameDecodeError(f"not a readable OpenZL frame header: {err}", field="frame") from err


def decode_frame(frame: bytes | bytearray | memoryview, *, decoded_bytes: int, verify: bool = True) -> npt.NDArray[np.uint8]:
    """Decode one frame to its samples' bytes.

    The frame's declared output size is read first and must equal
    ``decoded_bytes`` (the *Sample encodings* ``decoded_frame_bytes``), so a
    frame is refused before any allocation or decoding (*Resource limits*).

    Args:
        frame: One OpenZL frame, as stored in the file.
        decoded_bytes: The size the frame must decode to.
        verify: Check the frame's compressed and content checksums. ``False``
            skips the checks, for callers that verify the file another way.

    Returns:
        A flat, writable, 8-byte aligned ``uint8`` array of exactly
        ``decoded_bytes`` bytes; view it as the sample dtype.

    Raises:
        FrameDecodeError: The frame is corrupt, fails a checksum, or declares
            or produces another size than ``decoded_bytes``.
        InvalidInputError: ``decoded_bytes`` is not a non-negative integer.
    """
    if isinstance(decoded_bytes, bool) or not isinstance(decoded_bytes, (int, np.integer)) or decoded_bytes < 0:
        raise InvalidInputError(
            f"decoded_bytes must be a non-negative integer, got {decoded_bytes!r}",
            field="decoded_bytes",
        )
    expected = int(decoded_bytes)
    data = frame if isinstance(frame, bytes) else bytes(frame)
    declared = _declared_size(data)
    if declared != expected:
        raise FrameDecodeError(
            f"frame declares {declared} decoded bytes, expected {expected}",
            field="frame",
            rule=_SIZE_RULE,
        )
    if expected == 0:
        return np.zeros(0, np.uint8)
    try:
        out = geozl.decompress(data, verify=bool(verify), max_output_size=expected)
    except Exception as err:
        raise FrameDecodeError(f"frame failed to decode: {err}", field="frame") from err
    if out.size != expected or out.dtype != np.uint8:
        raise FrameDecodeError(
            f"frame decoded to {out.size} bytes, expected {expected}",
            field="frame",
            rule=_SIZE_RULE,
        )
    return out
