"""A byte source that records what it is asked for."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rumi_core.sources import ByteSource


class CountingSource:
    """Wrap a :class:`~rumi_core.sources.ByteSource` and count requests and bytes.

    ``ranges`` lists every ``(offset, length)`` asked of the source, in order.
    """

    def __init__(self, inner: ByteSource) -> None:
        self.inner = inner
        self.ranges: list[tuple[int, int]] = []
        self.size_calls = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The wrapped source's name."""
        return self.inner.name

    @property
    def requests(self) -> int:
        """How many ranges were requested."""
        return len(self.ranges)

    @property
    def bytes_read(self) -> int:
        """Total bytes requested."""
        return sum(n for _, n in self.ranges)

    def size(self) -> int:
        """Delegate, and count the call."""
        with self._lock:
            self.size_calls += 1
        return self.inner.size()

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Delegate, recording each range."""
        with self._lock:
            self.ranges.extend(ranges)
        return self.inner.read_ranges(ranges)

    def close(self) -> None:
        """Close the wrapped source."""
        self.inner.close()

    def __enter__(self) -> CountingSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
