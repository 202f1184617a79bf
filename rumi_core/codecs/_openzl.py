"""The portable codec family: OpenZL's built-in graphs (specification section *Frames*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from rumi_core.codecs._context import CompressionContext, ThreadLocalCache, zl
from rumi_core.codecs._frames import prepare_frame, refuse_encoding
from rumi_core.codecs._registry import FrameCodec, register_codec
from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy.typing as npt

    from rumi_core.encodings import SampleEncoding

__all__ = ["NARROW_ONLY", "OpenZLGraph"]

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

NARROW_ONLY: Final = frozenset({"entropy", "huffman"})
"""Graphs whose order-0 coders refuse numeric elements wider than 2 bytes."""

_CONTEXTS: ThreadLocalCache[str, CompressionContext] = ThreadLocalCache(len(_OPENZL_GRAPHS))
"""One compression context per graph per thread."""


def _context(graph: str) -> CompressionContext:
    compressor = zl.Compressor()
    compressor.select_starting_graph(getattr(zl.graphs, _OPENZL_GRAPHS[graph])()(compressor))
    return CompressionContext.build(compressor)


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
        return self.graph not in NARROW_ONLY or encoding.component_bytes <= 2

    def encode(self, samples: npt.NDArray[Any], *, axes: tuple[str, ...]) -> bytes:
        """Compress one frame; see :meth:`FrameCodec.encode`."""
        frame = prepare_frame(samples, axes)
        if not self.accepts(frame.encoding):
            reason = "it takes components of at most 2 bytes; use 'field_lz' or 'compress'"
            raise refuse_encoding(f"OpenZL graph {self.graph!r}", frame.encoding, reason, field="codec.configuration.graph")
        try:
            return _CONTEXTS.get(self.graph, lambda: _context(self.graph)).compress(frame.stream())
        except RuntimeError as err:
            raise InvalidInputError(
                f"OpenZL graph {self.graph!r} failed on {frame.encoding.name} samples: {err}",
                field="samples",
            ) from err
