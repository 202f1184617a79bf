"""One deadline and one retry budget per read operation, shared by every thread.

A stateless read over the network is many range requests made by several
threads. Bounding each request alone lets a silent server hold a read for
(timeout x attempts x threads); so remote sources
(:class:`~catalog.http.HTTPRangeSource`, :class:`~catalog.gcs.GCSSource`)
hold a :class:`ReadOperation` while a read runs (their ``deadline()`` context,
entered by :func:`rumi_core.sources.deadline`): every request checks the time
left, and a range that fails transiently is retried at most
:data:`TRANSIENT_RETRIES` times in the operation, after growing pauses, not
so often per request or per thread.

>>> op = ReadOperation(30.0)
>>> [op.retry_wait((0, 100)) for _ in range(4)], op.retries((0, 100))
([0.5, 1.0, 2.0, None], 3)
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import TYPE_CHECKING, Final

from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "DEFAULT_TIMEOUT",
    "FIRST_BACKOFF",
    "NO_DEADLINE",
    "STAC_API_TIMEOUT",
    "TRANSIENT_RETRIES",
    "OperationSlot",
    "ReadOperation",
    "budget",
    "retried_text",
    "seconds_text",
]

DEFAULT_TIMEOUT = 120.0
"""Seconds one remote read operation may take, every request and retry included."""

TRANSIENT_RETRIES: Final = 3
"""Times one read operation asks again for a range that failed transiently (a connection error, a timeout, a 5xx)."""

FIRST_BACKOFF: Final = 0.5
"""Seconds before a range's first retry; each further one waits twice as long (0.5, 1, 2 s), as the exponential
backoff of urllib3 and google-cloud-storage does: a server failing under load is not asked again at once, and a
flaky one (a CDN's occasional 502) does not end a training epoch."""

STAC_API_TIMEOUT: Final = (10.0, 60.0)
"""Seconds to connect to a STAC API, and to wait for each answer (pystac-client, through requests, waits for ever unless told)."""


NO_DEADLINE: Final = 1e7
"""The budget of an operation given ``inf`` seconds: 116 days, which no clock or socket timeout overflows
(urllib3 took ``inf`` as a socket timeout and failed with an OverflowError)."""


def budget(seconds: float | None) -> float:
    """``seconds`` as an operation's budget: :data:`DEFAULT_TIMEOUT` for None, :data:`NO_DEADLINE` at most.

    >>> budget(None), budget(2), budget(float("inf"))
    (120.0, 2.0, 10000000.0)

    Raises:
        InvalidInputError: ``seconds`` is not a number above 0 (NaN, 0, a text).
    """
    if seconds is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(seconds, (bool, str)) or not value > 0:
        raise InvalidInputError(f"timeout is a number of seconds above 0 (inf for none), got {seconds!r}", field="timeout")
    return min(value, NO_DEADLINE)


def seconds_text(seconds: float) -> str:
    """Seconds as a message gives them, to a tenth: what is left of a command's ``--timeout 1`` is 0.997 s.

    >>> seconds_text(0.996975), seconds_text(120.0), seconds_text(29.99994)
    ('1', '120', '30')
    """
    return f"{round(seconds, 1):g}"


def retried_text(times: int) -> str:
    """How often a range or a whole GET was asked again, as a failure's message says it.

    >>> retried_text(0), retried_text(1), retried_text(3)
    ('not retried', 'retried once', 'retried 3 times')
    """
    return "not retried" if times == 0 else "retried once" if times == 1 else f"retried {times} times"


class ReadOperation:
    """The deadline of one read operation and the ranges it has already retried."""

    def __init__(self, seconds: float, *, ends: float | None = None) -> None:
        self.seconds = seconds
        """The operation's whole budget, in seconds: what its messages name."""
        self.ends = time.monotonic() + seconds if ends is None else min(time.monotonic() + seconds, ends)
        """The :func:`time.monotonic` instant it ends: ``seconds`` from now, or ``ends`` where that comes first."""
        self._retried: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left (negative once the deadline has passed)."""
        return self.ends - time.monotonic()

    def retry_wait(self, key: tuple[int, int]) -> float | None:
        """Seconds to pause before asking again for the range ``key``, which just failed; None when it is not asked again.

        None once it was retried :data:`TRANSIENT_RETRIES` times, or when the
        pause would reach the deadline. Counted per operation, whichever thread asks.
        """
        with self._lock:
            done = self._retried.get(key, 0)
            wait = FIRST_BACKOFF * float(2**done)
            if done >= TRANSIENT_RETRIES or wait >= self.remaining():
                return None
            self._retried[key] = done + 1
            return wait

    def retries(self, key: tuple[int, int]) -> int:
        """Times the range ``key`` was asked again."""
        with self._lock:
            return self._retried.get(key, 0)

    def gave_up(self, key: tuple[int, int], retries: int | None = None) -> str:
        """Why the range ``key`` is not asked again, for its error: ``"retried 3 times"``, or with retries left, that the
        pause before the next would pass the deadline. ``retries``: the count to give, if not the operation's own."""
        done = self.retries(key)
        text = retried_text(done if retries is None else retries)
        return text if done >= TRANSIENT_RETRIES else f"{text}; another would pass the read's {seconds_text(self.seconds)} s deadline"


class OperationSlot:
    """Where a source keeps the operation in progress; requests outside one get their own.

    ``deadline`` (a :func:`time.monotonic` instant, a command's whole ``--timeout``)
    ends every operation that would otherwise end later. Its messages still name
    the budget it was given: what is left of ``--timeout 1`` after a blob's fetch
    is read as the command's 1 s, not as 0.9 s that depends on the server's pace.
    """

    def __init__(self, timeout: float | None, deadline: float | None = None) -> None:
        self.timeout = budget(timeout)
        """The default budget of an operation, in seconds."""
        self.ends = deadline
        """The instant by which every operation ends, if any."""
        self._operation: ReadOperation | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, float]:
        # A pickled source starts in another process with no operation in progress, and no instant of this
        # process's clock to end by.
        return {"timeout": self.timeout}

    def __setstate__(self, state: dict[str, float]) -> None:
        self.__init__(state["timeout"])  # type: ignore[misc]

    @contextlib.contextmanager
    def deadline(self, seconds: float | None = None) -> Iterator[None]:
        """Share one operation among every request inside the block (an outer block's wins)."""
        with self._lock:
            outer = self._operation
            if outer is None:
                self._operation = ReadOperation(self.timeout if seconds is None else budget(seconds), ends=self.ends)
        try:
            yield
        finally:
            if outer is None:
                with self._lock:
                    self._operation = None

    def current(self) -> ReadOperation:
        """The operation in progress, or a new one for a lone request."""
        with self._lock:
            return self._operation or ReadOperation(self.timeout, ends=self.ends)
