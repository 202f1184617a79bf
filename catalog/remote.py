"""What every remote byte-range source shares: a URL, a size maybe known, one deadline per read.

:class:`RemoteRangeSource` is the common base of
:class:`~catalog.http.HTTPRangeSource` and :class:`~catalog.gcs.GCSSource`.
It implements the parts of rumi_core's :class:`~rumi_core.sources.ByteSource`
protocol that do not depend on the transport: ``name``, range checks,
``read_ranges`` as one request per range in order, the read operation's
deadline (:mod:`catalog.deadlines`) and the context manager. A subclass
fetches one non-empty range (:meth:`RemoteRangeSource._fetch`) and tells the
size.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from catalog.deadlines import OperationSlot, ReadOperation, seconds_text
from catalog.errors import StorageError

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Sequence
    from typing import Self

__all__ = ["RemoteRangeSource"]


class RemoteRangeSource(abc.ABC):
    """A remote object read with one request per ``(offset, length)`` range.

    Args:
        url: Where the object is.
        size: The object size, when already known.
        timeout: Default total seconds of one read operation (see
            :meth:`deadline`); :data:`~catalog.deadlines.DEFAULT_TIMEOUT` when None.
        deadline: A :func:`time.monotonic` instant by which every operation ends
            (a command's whole ``--timeout``), if any.
    """

    def __init__(self, url: str, *, size: int | None, timeout: float | None, deadline: float | None = None) -> None:
        self._url = url
        self._size = size
        self._slot = OperationSlot(timeout, deadline)

    @property
    def name(self) -> str:
        """The URL."""
        return self._url

    def deadline(self, seconds: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Give every request inside the block, from any thread, one total deadline.

        ``seconds`` defaults to the source's ``timeout``. Each range that
        fails transiently is retried within the block, after growing pauses and a
        bounded number of times. Nested blocks
        keep the outer deadline.
        """
        return self._slot.deadline(seconds)

    def _expired(self, op: ReadOperation, what: str) -> StorageError:
        return StorageError(f"{what} did not finish within the read's {seconds_text(op.seconds)} s deadline", href=self._url)

    @abc.abstractmethod
    def _fetch(self, offset: int, length: int) -> bytes:
        """Fetch ``length > 0`` bytes at ``offset >= 0`` with one request (shorter only where the object ends)."""

    @abc.abstractmethod
    def size(self) -> int:
        """Total size in bytes."""

    @abc.abstractmethod
    def version(self) -> str | None:
        """What names this version of the object's bytes (its store's checksum or validator), or None when the store gives none."""

    def read_range(self, offset: int, length: int) -> bytes:
        """Fetch one range with one request (and the read operation's retries of it).

        Raises:
            StorageError: the range is negative, or the request failed.
        """
        if offset < 0 or length < 0:
            raise StorageError(f"cannot read {length} bytes at {offset}: negative range", href=self._url)
        if length == 0:
            return b""
        return self._fetch(offset, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Fetch each ``(offset, length)`` with one request, in order.

        Raises:
            StorageError: a request failed.
        """
        return [self.read_range(offset, length) for offset, length in ranges]

    def close(self) -> None:  # noqa: B027 - concrete on purpose: no subclass holds anything to release
        """Nothing to release: connections belong to the pool or to the reading thread's client."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._url!r})"
