"""The default codec, and :func:`parse_codec`, which returns it when none is named.

Specification section *Frames*: the default is a fixed choice that needs no
measuring; :func:`rumi_core.write` measures instead (``compression="auto"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rumi_core.codecs._geozl import GeoZLGraph
from rumi_core.codecs._openzl import NARROW_ONLY, OpenZLGraph
from rumi_core.codecs._registry import FrameCodec, codec_class, codec_from_dict, register_codec
from rumi_core.encodings import encoding_for_dtype
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["DEFAULT_CODEC", "RasterCodec", "parse_codec"]

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

    >>> from rumi_core.codecs import RasterCodec
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
        if not isinstance(self.other, OpenZLGraph) or self.other.graph in NARROW_ONLY:
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
        return codec_class(spec).from_configuration({})
    if isinstance(spec, Mapping):
        return codec_from_dict(spec)
    raise InvalidInputError(
        f"a codec is a FrameCodec, a name, a JSON mapping or None, got {type(spec).__name__}",
        field="codec",
    )
