"""One deadline and one retry budget per read operation, shared by every thread.

A stateless read over the network is many range requests made by several
threads. Bounding each request alone lets a silent server hold a read for
(timeout x attempts x threads); so remote sources
(:class:`~catalog.http.HTTPRangeSource`, :class:`~catalog.gcs.GCSSource`)
hold a :class:`ReadOperation` while a read runs (their ``deadline()`` context,
entered by :func:`rumi_core.sources.deadline`): every request checks the time
left, and a failing range is retried once in the operation, not once per
request or per thread.

>>> op = ReadOperation(30.0)
>>> op.may_retry((0, 100)), op.may_retry((0, 100))
(True, False)
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["DEFAULT_TIMEOUT", "STAC_API_TIMEOUT", "OperationSlot", "ReadOperation", "seconds_text"]

DEFAULT_TIMEOUT = 120.0
"""Seconds one remote read operation may take, every request and retry included."""

STAC_API_TIMEOUT: Final = (10.0, 60.0)
"""Seconds to connect to a STAC API, and to wait for each answer (pystac-client, through requests, waits for ever unless told)."""


def seconds_text(seconds: float) -> str:
    """Seconds as a message gives them, to a tenth: what is left of a command's ``--timeout 1`` is 0.997 s.

    >>> seconds_text(0.996975), seconds_text(120.0), seconds_text(29.99994)
    ('1', '120', '30')
    """
    return f"{round(seconds, 1):g}"


class ReadOperation:
    """The deadline of one read operation and the ranges it has already retried."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        """The operation's whole budget, in seconds."""
        self.ends = time.monotonic() + seconds
        self._retried: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left (negative once the deadline has passed)."""
        return self.ends - time.monotonic()

    def may_retry(self, key: tuple[int, int]) -> bool:
        """True the first time the range ``key`` fails, while time remains."""
        with self._lock:
            if key in self._retried or self.remaining() <= 0:
                return False
            self._retried.add(key)
            return True


class OperationSlot:
    """Where a source keeps the operation in progress; requests outside one get their own."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        """The default budget of an operation, in seconds."""
        self._operation: ReadOperation | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, float]:
        # A pickled source starts in another process with no operation in progress.
        return {"timeout": self.timeout}

    def __setstate__(self, state: dict[str, float]) -> None:
        self.__init__(state["timeout"])  # type: ignore[misc]

    @contextlib.contextmanager
    def deadline(self, seconds: float | None = None) -> Iterator[None]:
        """Share one operation among every request inside the block (an outer block's wins)."""
        with self._lock:
            outer = self._operation
            if outer is None:
                self._operation = ReadOperation(self.timeout if seconds is None else float(seconds))
        try:
            yield
        finally:
            if outer is None:
                with self._lock:
                    self._operation = None

    def current(self) -> ReadOperation:
        """The operation in progress, or a new one for a lone request."""
        with self._lock:
            return self._operation or ReadOperation(self.timeout)
