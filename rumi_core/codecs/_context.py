"""OpenZL compression contexts, set up once for every codec family.

Every rumi frame is a self-contained OpenZL frame (specification section
*Frames*) written at :data:`FORMAT_VERSION` with both checksums, so every
codec that drives OpenZL's compressor itself builds its context with
:meth:`CompressionContext.build`. Contexts and geozl graphs are not
thread-safe, so each thread keeps its own in a :class:`ThreadLocalCache`.
"""

from __future__ import annotations

import importlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    import numpy as np
    import numpy.typing as npt

__all__ = ["FORMAT_VERSION", "CompressionContext", "ThreadLocalCache", "gl", "release_contexts", "zl"]

# openzl ships a stub file but no py.typed marker, so mypy cannot analyse it.
# Importing it by name keeps its objects typed as Any at this one boundary.
zl: Any = importlib.import_module("openzl.ext")
"""``openzl.ext``, typed as Any."""

gl: Any = importlib.import_module("geozl.lossless")
"""geozl's OpenZL nodes, typed as Any like :data:`zl`."""

FORMAT_VERSION: Final = 24
"""OpenZL wire format version written into every frame.

openzl 0.3.0 writes up to version 27, but the OpenZL bundled in rumi-eo 0.26.1
(the reference reader) refuses anything above 24 with "Format version
unsupported"; versions 19 to 24 were checked to decode there. Raise this only
when every reader we care about reads the newer version.
"""

_ON: Final = 1
"""``ZL_TernaryParam_enable`` for the checksum parameters."""


@dataclass(frozen=True)
class CompressionContext:
    """An OpenZL CCtx with the compressor and function graphs it borrows.

    A CCtx only references its compressor, and a compressor only references
    the Python function graphs registered on it: this object keeps them all
    alive together.
    """

    cctx: Any
    """The ``openzl.ext.CCtx``."""
    compressor: Any
    """The ``openzl.ext.Compressor`` whose starting graph the CCtx runs."""
    graphs: tuple[Any, ...] = ()
    """Function graphs registered on :attr:`compressor`."""

    @classmethod
    def build(cls, compressor: Any, graphs: tuple[Any, ...] = ()) -> CompressionContext:
        """Bind a CCtx to ``compressor`` with the parameters every rumi frame needs.

        Parameters stay set across frames (without sticky parameters the CCtx
        forgets its graph after one frame); the frame is written at
        :data:`FORMAT_VERSION` with its content and compressed checksums.
        """
        cctx = zl.CCtx()
        cctx.ref_compressor(compressor)
        cctx.set_parameter(zl.CParam.StickyParameters, _ON)
        cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
        cctx.set_parameter(zl.CParam.ContentChecksum, _ON)
        cctx.set_parameter(zl.CParam.CompressedChecksum, _ON)
        return cls(cctx, compressor, graphs)

    def compress(self, stream: npt.NDArray[np.unsignedinteger[Any]]) -> bytes:
        """Compress ``stream`` as one numeric input and return the OpenZL frame.

        ``openzl.ext.Input`` does not keep its array alive; ``stream`` stays
        referenced here until the compressor returns.

        Raises:
            RuntimeError: OpenZL refused the input.
        """
        return bytes(self.cctx.compress([zl.Input(zl.Type.Numeric, stream)]))


_K = TypeVar("_K", bound="Hashable")
_V = TypeVar("_V")


_CACHES: list[ThreadLocalCache[Any, Any]] = []
"""Every codec cache, for :func:`release_contexts`."""


def release_contexts() -> None:
    """Drop the calling thread's compression contexts and graphs, of every codec.

    Choosing a codec builds a context for each of some twenty candidates and
    keeps them (each holds OpenZL's working buffers, 20 MiB together for 512²
    uint16 samples) for frames that will never come; the frames of the chosen
    codec build their own. Call it after such a search, then
    :func:`rumi_core.heap.release_free_memory`.
    """
    for cache in _CACHES:
        cache.clear()


class ThreadLocalCache(Generic[_K, _V]):
    """A least-recently-used cache of at most ``size`` entries, one per thread.

    ``functools.lru_cache`` shares its entries between threads, but an OpenZL
    CCtx and a geozl graph must never run on two threads at once.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._local = threading.local()
        _CACHES.append(self)

    def clear(self) -> None:
        """Drop the calling thread's entries."""
        self._local.entries = OrderedDict()

    def get(self, key: _K, build: Callable[[], _V]) -> _V:
        """Return this thread's entry for ``key``, calling ``build`` to make it on a miss."""
        entries: OrderedDict[_K, _V] | None = getattr(self._local, "entries", None)
        if entries is None:
            entries = self._local.entries = OrderedDict()
        if key in entries:
            entries.move_to_end(key)
            return entries[key]
        value = entries[key] = build()
        if len(entries) > self._size:
            entries.popitem(last=False)
        return value
