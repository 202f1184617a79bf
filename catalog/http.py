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

Deadlines and retries belong to a read operation, not to a request: inside
:meth:`HTTPRangeSource.deadline` every request, from any thread, shares one
total deadline (:data:`DEFAULT_TIMEOUT` unless given), enforced while the
body arrives, so a silent server or one dripping a byte at a time is
abandoned when the operation's time is up. A range that fails with a
connection error, a timeout or a ``5xx`` is asked again after pauses of 0.5,
1 and 2 s (:data:`~catalog.deadlines.TRANSIENT_RETRIES` times in the
operation, within its deadline), then the read fails; the pool itself never
retries a range request. A ``429``
or ``503`` that says when to come back (``Retry-After``) is retried after that
wait, never past the deadline: a wait that would pass it fails at once.

A URL's ``user:password@`` is sent as ``Authorization: Basic``, as requests,
curl and GDAL send it (urllib3 alone drops it).
"""

from __future__ import annotations

import email.utils
import logging
import os
import re
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote_to_bytes

import urllib3
from urllib3.util import make_headers, parse_url
from urllib3.util.retry import Retry

from catalog.deadlines import ReadOperation, budget, retried_text, seconds_text
from catalog.errors import StorageError
from catalog.remote import RemoteRangeSource

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SIDECAR_ABSENT", "HTTPRangeSource", "default_pool", "quiet_retries", "read_url"]

SIDECAR_ABSENT: Final = frozenset({401, 403, 404, 410})
"""HTTP answers that mean no sidecar of a file can be had: none there, or none readable without a signature of its own.

A signed file URL (``?X-Goog-Signature=...``) signs that file alone, and a
sidecar at the same path without the query answers 403; so does S3 for a
missing key, to a reader who may not list the bucket.
"""

_CONNECT_TIMEOUT = 10.0
_CHUNK = 1 << 16
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_RETRY_AFTER_STATUS = frozenset({429, 503})
# A server that keeps asking for a wait is asked again at most this often per range, as often as
# default_pool's Retry(total=3) would: the deadline alone would let ``Retry-After: 0`` spin.
_ASKED_RETRIES = 3
# Range requests are retried by the operation (ReadOperation.retry_wait), never by the pool.
_NO_RETRY = Retry(total=None, connect=0, read=0, status=0, other=0, redirect=5, raise_on_status=False)


class _Transient(Exception):
    """A failure worth a retry: a connection error, a timeout or a 5xx; ``retry_after`` is the wait a 429 or 503 asked for."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @classmethod
    def answered(cls, message: str, resp: Any) -> _Transient:
        """The failure of a transient answer, with the wait its ``Retry-After`` asks for if it is a 429 or 503."""
        wait = _retry_after(resp.headers.get("Retry-After")) if resp.status in _RETRY_AFTER_STATUS else None
        return cls(message, resp.status, wait)


_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")

_DEFAULT_POOL: urllib3.PoolManager | None = None
_DEFAULT_POOL_LOCK = threading.Lock()


def quiet_retries(verbose: int) -> None:
    """The ``rumi`` command's logging hook: hide urllib3's retry warnings unless ``-v`` is given.

    Every retried request (ours, and google-cloud-storage's through requests)
    is a WARNING of urllib3's; what failed in the end is the command's one
    error line, and ``-v`` shows the attempts.
    """
    if not verbose:
        logging.getLogger("urllib3").setLevel(logging.ERROR)


def _forget_default_pool() -> None:
    """In a forked child: the parent's pool holds the parent's sockets, so the child makes its own.

    Two processes reading one socket take each other's answers: a DataLoader
    worker forked after the parent had read over HTTP got "asked for bytes X,
    got Content-Range Y", or waited out its deadline.
    """
    global _DEFAULT_POOL, _DEFAULT_POOL_LOCK
    _DEFAULT_POOL = None
    _DEFAULT_POOL_LOCK = threading.Lock()  # another thread of the parent may have held it at the fork


os.register_at_fork(after_in_child=_forget_default_pool)


def default_pool() -> urllib3.PoolManager:
    """Return the process-wide connection pool used when none is given.

    It keeps up to 16 connections per host and retries connection errors and
    ``5xx`` answers of idempotent requests three times with a short backoff.
    A forked child has its own (sources and storages given no pool look it up
    at each request).
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


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: its delay, or the time until its HTTP date.

    None when the header is absent or unreadable; a date already past is 0.

    >>> _retry_after("3"), _retry_after(" 0 "), _retry_after("soon"), _retry_after(None)
    (3.0, 0.0, None, None)
    >>> _retry_after("Wed, 21 Oct 2015 07:28:00 GMT")
    0.0
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class _Expired(Exception):
    """The operation's deadline passed while a body was arriving."""


class _TooLong(Exception):
    """A body ran past the bytes asked for."""


def _read_body(op: ReadOperation, resp: Any, limit: int | None, what: str) -> bytes:
    """Read the body of ``resp`` (asked for with ``preload_content=False``), checking the deadline between chunks.

    Each wait for the socket is bounded by the time left, so a server that
    sends one byte every few seconds is abandoned at the deadline too: a
    socket timeout alone restarts with every byte.

    Raises:
        _Expired: the deadline passed.
        _TooLong: more than ``limit`` bytes came.
        _Transient: the connection failed mid-body.
    """
    chunks: list[bytes] = []
    got = 0
    try:
        while True:
            left = op.remaining()
            if left <= 0:
                raise _Expired
            sock = getattr(getattr(resp, "connection", None), "sock", None)
            if sock is not None:
                sock.settimeout(left)
            try:
                chunk = resp.read1(_CHUNK)
            except (urllib3.exceptions.HTTPError, OSError) as err:
                if op.remaining() <= 0:
                    raise _Expired from err
                raise _Transient(f"{what} failed while reading the body: {err}") from err
            if not chunk:
                break
            got += len(chunk)
            if limit is not None and got > limit:
                raise _TooLong
            chunks.append(chunk)
    except BaseException:
        resp.close()  # the connection is mid-body: never hand it back to the pool
        raise
    finally:
        resp.release_conn()
    return b"".join(chunks)


def _sleep_within(op: ReadOperation, seconds: float) -> bool:
    """Sleep ``seconds``, unless that would pass the operation's deadline: then return False at once."""
    if seconds > op.remaining():
        return False
    time.sleep(seconds)
    return True


def _credentials(url: str, headers: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
    """The URL to send requests to, without its userinfo, and the headers to send, with it as ``Authorization: Basic``.

    urllib3 drops a URL's ``user:password@`` unsent; requests, curl and GDAL
    send it as Basic credentials. An ``Authorization`` header the caller gives
    wins. User and password are percent-decoded to the bytes they spell
    (characters written as such count as UTF-8): the latin-1 text of those
    bytes is what urllib3 (whose Basic encoding is latin-1) sends unchanged.

    >>> _credentials("http://alice:s%40cr%C3%A9t@example.com/x.rumi", None)
    ('http://example.com/x.rumi', {'authorization': 'Basic YWxpY2U6c0BjcsOpdA=='})
    >>> _credentials("http://alice:secret@example.com/x.rumi", {"Authorization": "Bearer t"})
    ('http://example.com/x.rumi', {'Authorization': 'Bearer t'})
    """
    sent = dict(headers or {})
    parts = parse_url(url)
    if parts.auth is None:
        return url, sent
    if not any(name.lower() == "authorization" for name in sent):
        user, _, password = parts.auth.partition(":")
        userinfo = unquote_to_bytes(user) + b":" + unquote_to_bytes(password)
        sent.update(make_headers(basic_auth=userinfo.decode("latin-1")))
    return parts._replace(auth=None).url, sent


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


class HTTPRangeSource(RemoteRangeSource):
    """A file at an ``http(s)://`` URL, read with one range request per range.

    Args:
        url: The file's URL.
        pool: Connection pool to use; the shared :func:`default_pool` when None.
        headers: Extra headers sent with every request (for example
            ``Authorization``).
        size: The file size, when already known (saves the ``HEAD``).
        timeout: Default total seconds of one read operation (see
            :meth:`deadline`); :data:`DEFAULT_TIMEOUT` when None.
        deadline: A :func:`time.monotonic` instant by which every operation
            ends (a command's whole ``--timeout``), if any.

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
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise StorageError("not an http:// or https:// URL", href=url)
        super().__init__(url, size=size, timeout=timeout, deadline=deadline)
        self._pool = pool
        """The caller's pool, or None for :func:`default_pool`, looked up at each request (a forked child's own)."""
        self._target, self._headers = _credentials(url, headers)
        self._lock = threading.Lock()
        self._headed = False
        self._validator: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Another process gets its own default pool (a pool holds this process's sockets and locks);
        # a pool of the caller's own goes with the source, and must be picklable for it to.
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _send(self, op: ReadOperation, method: str, headers: dict[str, str]) -> Any:
        """Send one request, its connect and first read bounded by the time left; the body is not read yet."""
        left = op.remaining()
        if left <= 0:
            raise self._expired(op, method)
        timeout = urllib3.Timeout(connect=min(_CONNECT_TIMEOUT, left), read=left)
        try:
            return (self._pool or default_pool()).request(
                method,
                self._target,
                headers={**self._headers, **headers},
                redirect=True,
                retries=_NO_RETRY,
                timeout=timeout,
                preload_content=False,
            )
        except urllib3.exceptions.HTTPError as err:
            raise _Transient(f"{method} failed: {err}") from err

    def _body(self, op: ReadOperation, resp: Any, limit: int, what: str) -> bytes:
        """Read a body of at most ``limit`` bytes within the operation's deadline (:func:`_read_body`)."""
        try:
            return _read_body(op, resp, limit, what)
        except _Expired as err:
            raise self._expired(op, what) from err
        except _TooLong as err:
            raise StorageError(f"{what}: the server sent more than the {limit} bytes asked for", href=self._url) from err

    def _learn_size(self, total: int | None) -> None:
        if total is not None:
            with self._lock:
                self._size = total

    def known_size(self) -> int | None:
        """The size, if a ``HEAD`` or a ``Content-Range`` already told it; no request."""
        with self._lock:
            return self._size

    def _with_retry(self, key: tuple[int, int], what: str, attempt: Any) -> Any:
        """Run ``attempt`` until it succeeds: again after growing pauses when it fails, or as a 429 or 503 asks, within the deadline.

        A ``Retry-After`` is the server asking for a pause, not a failure. As
        urllib3's ``Retry(respect_retry_after_header=True)`` waits as asked on
        each such answer while its retry count lasts, a range is asked again
        after each pause, up to :data:`_ASKED_RETRIES` times and never past
        the operation's deadline. Other failures take the operation's
        retries of the range (:meth:`~catalog.deadlines.ReadOperation.retry_wait`),
        pausing at least as long as a ``Retry-After`` asks.
        """
        op = self._slot.current()
        retries = asked_retries = 0
        while True:
            try:
                return attempt(op)
            except _Transient as err:
                if err.retry_after is not None and asked_retries < _ASKED_RETRIES:
                    asked_retries += 1
                    wait = err.retry_after
                else:
                    backoff = op.retry_wait(key)
                    if backoff is None:
                        if op.remaining() <= 0:
                            raise self._expired(op, what) from err
                        raise StorageError(f"{err} ({op.gave_up(key, retries)})", href=self._url, status=err.status) from err
                    wait = max(backoff, err.retry_after or 0.0)
                if not _sleep_within(op, wait):
                    asked = f"the server asked to retry in {err.retry_after:g} s" if err.retry_after is not None else retried_text(retries)
                    raise StorageError(
                        f"{err}; {asked}, past the read's {seconds_text(op.seconds)} s deadline", href=self._url, status=err.status
                    ) from err
                retries += 1

    def size(self) -> int:
        """Total size in bytes: one ``HEAD``, unless already known.

        Raises:
            StorageError: the server refused, or gave no ``Content-Length``.
        """
        with self._lock:
            if self._size is not None:
                return self._size
        return self._head()

    def version(self) -> str | None:
        """The ``ETag`` (else ``Last-Modified``) the object's ``HEAD`` answered, or None where it answered neither.

        One ``HEAD``, unless :meth:`size` made it.

        Raises:
            StorageError: the server refused, or gave no ``Content-Length``.
        """
        if not self._headed:
            self._head()
        return self._validator

    def _head(self) -> int:
        """Ask ``HEAD`` for the size and validator, and learn them."""

        def head(op: ReadOperation) -> int:
            resp = self._send(op, "HEAD", {})
            resp.release_conn()
            if resp.status in _TRANSIENT_STATUS:
                raise _Transient.answered("HEAD did not succeed", resp)
            if resp.status != 200:
                raise StorageError("HEAD did not succeed", href=self._url, status=resp.status)
            length = resp.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise StorageError("HEAD gave no Content-Length", href=self._url, status=resp.status)
            etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
            self._validator = f"etag:{etag}" if etag else f"modified:{modified}" if modified else None
            self._headed = True
            return int(length)

        total: int = self._with_retry((-1, -1), "HEAD", head)
        self._learn_size(total)
        return total

    def _fetch(self, offset: int, length: int) -> bytes:
        """Fetch one range with one ``GET`` (and the operation's retries of it).

        Raises:
            StorageError: the server failed twice, the deadline passed, the
                server ignored the ``Range`` header, or answered another range
                than the one asked, or a shorter one although the file goes on.
        """
        last = offset + length - 1
        what = f"GET of bytes {offset}-{last}"

        def get(op: ReadOperation) -> bytes:
            resp = self._send(op, "GET", {"Range": f"bytes={offset}-{last}", "Accept-Encoding": "identity"})
            first, got_last, total = parse_content_range(resp.headers.get("Content-Range"))
            if resp.status != 206:
                resp.close()
                resp.release_conn()
                if resp.status == 416:
                    self._learn_size(total)
                    return b""
                if resp.status == 200:
                    raise StorageError(
                        f"the server ignored 'Range: bytes={offset}-{last}' and sent the whole file; "
                        "use a host that supports range requests",
                        href=self._url,
                        status=200,
                    )
                if resp.status in _TRANSIENT_STATUS:
                    raise _Transient.answered(f"{what} failed", resp)
                raise StorageError(f"{what} failed", href=self._url, status=resp.status)
            header = resp.headers.get("Content-Range")
            data = self._body(op, resp, length, what)
            if first != offset or got_last is None or got_last > last or got_last - first + 1 != len(data):
                raise StorageError(
                    f"asked for bytes {offset}-{last}, got Content-Range {header!r} with {len(data)} bytes",
                    href=self._url,
                    status=206,
                )
            if got_last < last and (total is None or got_last + 1 != total):
                # A range comes back short only where the file ends.
                raise StorageError(
                    f"asked for bytes {offset}-{last}, got Content-Range {header!r}: "
                    f"a short answer although the file {'goes on' if total is None else f'is {total} bytes'}",
                    href=self._url,
                    status=206,
                )
            self._learn_size(total)
            return data

        result: bytes = self._with_retry((offset, length), what, get)
        return result


def read_url(
    url: str,
    *,
    pool: urllib3.PoolManager | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
) -> bytes:
    """Fetch a whole (small) resource with one ``GET``: an item, a header blob.

    ``timeout`` is the whole budget, every attempt and wait included
    (:data:`DEFAULT_TIMEOUT` when None), as a range read's deadline is, and
    ends at the :func:`time.monotonic` instant ``deadline`` where that comes first. The
    pool's retry policy still says what is retried (connection errors, also
    one that breaks off mid-body, its ``5xx``, the ``Retry-After`` it
    respects) and how long to back off, but
    each attempt gets only the time left, a wait for data that used it up is
    not tried again, and a wait that would pass the deadline fails at once:
    left to itself, the pool gives every attempt the whole timeout again.

    Raises:
        StorageError: the request failed or did not answer ``200``.
    """
    pool = pool or default_pool()
    seconds = budget(timeout)
    op = ReadOperation(seconds, ends=deadline)
    target, sent = _credentials(url, headers)
    # A read timeout needs no count of its own: each attempt waits at most the time left, so one
    # that times out has used the deadline up, and the loop ends at its top.
    policy = Retry.from_int(pool.connection_pool_kw.get("retries"))
    while True:
        left = op.remaining()
        if left <= 0:
            raise StorageError(f"GET got no answer within {seconds_text(seconds)} s", href=url)
        try:
            resp = pool.request(
                "GET",
                target,
                headers=sent,
                redirect=True,
                retries=_NO_RETRY,
                timeout=urllib3.Timeout(connect=min(_CONNECT_TIMEOUT, left), read=left),
                preload_content=False,
            )
        except urllib3.exceptions.HTTPError as err:
            cause = err.reason if isinstance(err, urllib3.exceptions.MaxRetryError) else err
            if isinstance(cause, urllib3.exceptions.ReadTimeoutError):
                message = f"GET got no answer within {seconds_text(seconds)} s"
            else:
                message = f"GET failed: {cause}"
            policy = _next_attempt(policy, url, message, error=cause)
            failure = StorageError(message, href=url)
            wait = policy.get_backoff_time()
        else:
            if resp.status == 200:
                try:
                    return _read_body(op, resp, None, "GET")
                except _Expired as err:
                    raise StorageError(f"GET did not finish within {seconds_text(seconds)} s", href=url) from err
                except _Transient as err:
                    # A connection that breaks off mid-body is a read error to the policy, as
                    # urllib3 counts one while it preloads a body itself.
                    policy = _next_attempt(policy, url, str(err), error=urllib3.exceptions.ProtocolError(str(err)))
                    failure = StorageError(str(err), href=url)
                    wait = policy.get_backoff_time()
            else:
                resp.close()  # an error's body is not read: a server could drip it
                failure = StorageError("GET did not succeed", href=url, status=resp.status)
                if not policy.is_retry("GET", resp.status, "Retry-After" in resp.headers):
                    raise failure
                policy = _next_attempt(policy, url, "GET did not succeed", response=resp)
                asked = _retry_after(resp.headers.get("Retry-After")) if policy.respect_retry_after_header else None
                if asked is not None:
                    failure = StorageError(
                        f"GET did not succeed; the server asked to retry in {asked:g} s, past the {seconds_text(seconds)} s timeout",
                        href=url,
                        status=resp.status,
                    )
                wait = policy.get_backoff_time() if asked is None else asked
        if not _sleep_within(op, wait):
            raise failure


def _next_attempt(policy: Retry, url: str, message: str, *, response: Any = None, error: Exception | None = None) -> Retry:
    """The retry policy after one more failed ``GET`` of ``url``; when it allows no more, raise the failure, ``message``
    and how often the ``GET`` was retried."""
    try:
        return policy.increment("GET", url, response=response, error=error)
    except urllib3.exceptions.HTTPError:  # used up (MaxRetryError), or ``error`` itself when it may not be retried
        status = None if response is None else response.status
        raise StorageError(f"{message} ({retried_text(len(policy.history))})", href=url, status=status) from error
