"""HTTP(S) byte-range source: a ``.rumi`` file served by any web server.

:class:`HTTPRangeSource` implements rumi_core's
:class:`~rumi_core.sources.ByteSource` protocol over HTTP/1.1 range requests:
each ``(offset, length)`` is one ``GET`` with ``Range: bytes=a-b``, answered
by ``206 Partial Content`` whose ``Content-Range`` is checked against the
request. A range that starts at or past the end of the file comes back empty
(``416``); one that runs past it comes back short, as the protocol asks.

The size is asked for only when a caller calls :meth:`HTTPRangeSource.size`
(one ``HEAD``), or learnt for free from the ``Content-Range`` of an earlier
answer. Connections come from a :class:`urllib3.PoolManager`, which is safe to
share between threads, so the reader's fetch threads may call
:meth:`~HTTPRangeSource.read_ranges` concurrently.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

import urllib3
from urllib3.util.retry import Retry

from catalog.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["HTTPRangeSource", "default_pool"]

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")

_DEFAULT_POOL: urllib3.PoolManager | None = None
_DEFAULT_POOL_LOCK = threading.Lock()


def default_pool() -> urllib3.PoolManager:
    """Return the process-wide connection pool used when none is given.

    It keeps up to 16 connections per host and retries connection errors and
    ``5xx`` answers of idempotent requests three times with a short backoff.
    """
    global _DEFAULT_POOL
    with _DEFAULT_POOL_LOCK:
        if _DEFAULT_POOL is None:
            retry = Retry(
                total=3,
                backoff_factor=0.1,
                status_forcelist=(500, 502, 503, 504),
                allowed_methods=frozenset({"GET", "HEAD"}),
                raise_on_status=False,
            )
            _DEFAULT_POOL = urllib3.PoolManager(maxsize=16, retries=retry, timeout=urllib3.Timeout(connect=10.0, read=60.0))
        return _DEFAULT_POOL


def parse_content_range(value: str | None) -> tuple[int | None, int | None, int | None]:
    """Parse ``Content-Range: bytes a-b/total`` into ``(a, b, total)``.

    Any part that is absent (``*``) is None.

    >>> parse_content_range("bytes 10-19/100")
    (10, 19, 100)
    >>> parse_content_range("bytes */100")
    (None, None, 100)
    """
    if not value:
        return None, None, None
    m = _CONTENT_RANGE.match(value)
    if m is None:
        return None, None, None
    first, last, total = m.groups()
    return (
        int(first) if first is not None else None,
        int(last) if last is not None else None,
        int(total) if total not in (None, "*") else None,
    )


class HTTPRangeSource:
    """A file at an ``http(s)://`` URL, read with one range request per range.

    Args:
        url: The file's URL.
        pool: Connection pool to use; the shared :func:`default_pool` when None.
        headers: Extra headers sent with every request (for example
            ``Authorization``).
        size: The file size, when already known (saves the ``HEAD``).

    Example:
        >>> src = HTTPRangeSource("http://127.0.0.1:9/none.rumi")
        >>> src.name
        'http://127.0.0.1:9/none.rumi'
    """

    def __init__(
        self,
        url: str,
        *,
        pool: urllib3.PoolManager | None = None,
        headers: Mapping[str, str] | None = None,
        size: int | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise StorageError("not an http:// or https:// URL", href=url)
        self._url = url
        self._pool = pool or default_pool()
        self._headers = dict(headers or {})
        self._size = size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The URL."""
        return self._url

    def _request(self, method: str, headers: dict[str, str]) -> Any:
        try:
            return self._pool.request(method, self._url, headers={**self._headers, **headers}, redirect=True)
        except urllib3.exceptions.HTTPError as err:
            raise StorageError(f"{method} failed: {err}", href=self._url) from err

    def _learn_size(self, total: int | None) -> None:
        if total is not None:
            with self._lock:
                self._size = total

    def size(self) -> int:
        """Total size in bytes: one ``HEAD``, unless already known.

        Raises:
            StorageError: the server refused, or gave no ``Content-Length``.
        """
        with self._lock:
            if self._size is not None:
                return self._size
        resp = self._request("HEAD", {})
        if resp.status != 200:
            raise StorageError("HEAD did not succeed", href=self._url, status=resp.status)
        length = resp.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise StorageError("HEAD gave no Content-Length", href=self._url, status=resp.status)
        self._learn_size(int(length))
        return int(length)

    def read_range(self, offset: int, length: int) -> bytes:
        """Fetch one range with one ``GET``.

        Raises:
            StorageError: the server failed, ignored the ``Range`` header or
                answered another range than the one asked.
        """
        if offset < 0 or length < 0:
            raise StorageError(f"cannot read {length} bytes at {offset}: negative range", href=self._url)
        if length == 0:
            return b""
        last = offset + length - 1
        resp = self._request("GET", {"Range": f"bytes={offset}-{last}", "Accept-Encoding": "identity"})
        first, got_last, total = parse_content_range(resp.headers.get("Content-Range"))
        if resp.status == 416:
            self._learn_size(total)
            return b""
        if resp.status == 200:
            raise StorageError(
                f"the server ignored 'Range: bytes={offset}-{last}' and sent the whole file; use a host that supports range requests",
                href=self._url,
                status=200,
            )
        if resp.status != 206:
            raise StorageError(f"GET of bytes {offset}-{last} failed", href=self._url, status=resp.status)
        data: bytes = resp.data
        if first != offset or got_last is None or got_last > last or got_last - first + 1 != len(data):
            raise StorageError(
                f"asked for bytes {offset}-{last}, got Content-Range {resp.headers.get('Content-Range')!r} with {len(data)} bytes",
                href=self._url,
                status=resp.status,
            )
        self._learn_size(total)
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Fetch each ``(offset, length)`` with one ``GET``, in order.

        Raises:
            StorageError: a request failed.
        """
        return [self.read_range(offset, length) for offset, length in ranges]

    def close(self) -> None:
        """Nothing to release: connections belong to the pool."""

    def __enter__(self) -> HTTPRangeSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HTTPRangeSource({self._url!r})"


def read_url(url: str, *, pool: urllib3.PoolManager | None = None, headers: Mapping[str, str] | None = None) -> bytes:
    """Fetch a whole resource with one ``GET``.

    Raises:
        StorageError: the request failed or did not answer ``200``.
    """
    pool = pool or default_pool()
    try:
        resp = pool.request("GET", url, headers=dict(headers or {}), redirect=True)
    except urllib3.exceptions.HTTPError as err:
        raise StorageError(f"GET failed: {err}", href=url) from err
    if resp.status != 200:
        raise StorageError("GET did not succeed", href=url, status=resp.status)
    data: bytes = resp.data
    return data
