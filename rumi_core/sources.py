"""Byte-range sources: where a reader gets the bytes of a ``.rumi`` file.

A stateless reader needs nothing from a file but byte ranges. A source is any
object with the small :class:`ByteSource` protocol; rumi_core implements it
for a local path (:class:`LocalFileSource`, positional reads that are safe to
issue from many threads) and for bytes in memory (:class:`BytesSource`). Other
packages plug in HTTP or object-store sources with the same protocol.

A source returns fewer bytes than asked only at the end of the file; the
caller decides whether that is an error (a truncated file is invalid, not an
I/O failure).

URLs work wherever a path does (:func:`open_source`): a ``scheme://`` text is
opened by the function registered for its scheme in the ``rumi.sources``
entry-point group, a callable ``(url) -> ByteSource``. The ``catalog``
package registers ``http``, ``https`` and ``gs``. An entry point rather than
an import or a registry filled at import time: rumi_core must not import
catalog (dependencies point one way), and ``rumi info https://...`` runs
without anything having imported catalog first; installed metadata is the
one place both packages can meet, as the ``rumi.commands`` group already is.

>>> with BytesSource(b"0123456789") as src:
...     src.read_ranges([(2, 3), (8, 5)])
[b'234', b'89']
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rumi_core.errors import SourceError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import TracebackType

__all__ = [
    "SOURCE_ENTRY_POINTS",
    "ByteSource",
    "BytesSource",
    "LocalFileSource",
    "deadline",
    "is_local",
    "known_size",
    "open_source",
    "open_url",
    "url_scheme",
]

SOURCE_ENTRY_POINTS = "rumi.sources"
"""Entry-point group of URL openers, one per scheme (``http``, ``gs``...)."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@runtime_checkable
class ByteSource(Protocol):
    """What a reader needs from storage."""

    @property
    def name(self) -> str:
        """A human-readable location for messages."""
        ...

    def size(self) -> int:
        """Total size of the file in bytes."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Return the bytes of each ``(offset, length)`` range, in order.

        A range that runs past the end of the file comes back short.

        Raises:
            SourceError: the storage failed.
        """
        ...

    def close(self) -> None:
        """Release any resource held."""
        ...


class _SourceBase:
    """Context-manager plumbing shared by the sources."""

    def close(self) -> None:
        """Release any resource held."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _not_a_file(mode: int) -> str | None:
    """What a path of this ``st_mode`` is when positional reads cannot serve it (None for a file or block device)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    return None


_UNCHECKED_RANGE = 16 << 20
"""Bytes a local range may ask for without the file's size being looked up first."""


class LocalFileSource(_SourceBase):
    """A local file read with ``os.pread``; safe to share between threads."""

    local = True
    """A request costs no round trip (see :func:`is_local`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        # Kept for pickling; a string test, not getcwd, for the absolute paths a read is mostly given.
        self._absolute = self._path if os.path.isabs(self._path) else os.path.abspath(self._path)
        # O_NONBLOCK so that a named pipe given as a file fails here instead of
        # waiting for a writer; it changes nothing for a regular file's reads.
        flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(self._path, flags)
        except OSError as err:
            raise SourceError(f"cannot open {self._path}: {err.strerror}") from err
        kind = _not_a_file(os.fstat(fd).st_mode)
        if kind is not None:
            os.close(fd)
            raise SourceError(f"cannot open {self._path}: it is {kind}, not a file")
        self._fd: int | None = fd
        # Reads in flight, and a close asked for while there were some: the descriptor is closed when the
        # last of them ends, never under one. Closed at once, its number could be given to the next file
        # opened, and a read on another thread would go on with that file's bytes (a "corrupt frame", or
        # with verify=False another file's samples).
        self._lock = threading.Lock()
        self._readers = 0
        self._closing = False

    def __reduce__(self) -> tuple[type[LocalFileSource], tuple[str]]:
        # A descriptor means nothing in another process: a pickled source opens its path again there
        # (as a rasterio dataset does), for DataLoader workers and dask's process schedulers. The
        # absolute path, since that process may work in another folder.
        return (LocalFileSource, (self._absolute,))

    @property
    def name(self) -> str:
        """The path."""
        return self._path

    def _acquire(self) -> int:
        """The descriptor, held open until :meth:`_release`."""
        with self._lock:
            if self._fd is None or self._closing:
                raise SourceError(f"{self._path} is closed")
            self._readers += 1
            return self._fd

    def _release(self) -> None:
        with self._lock:
            self._readers -= 1
            if self._closing and not self._readers:
                self._close_now()

    def _close_now(self) -> None:
        """Close the descriptor (the lock held)."""
        fd, self._fd, self._closing = self._fd, None, False
        if fd is not None:
            os.close(fd)

    def size(self) -> int:
        """Size of the file."""
        fd = self._acquire()
        try:
            return self._size(fd)
        finally:
            self._release()

    def _size(self, fd: int) -> int:
        try:
            return os.fstat(fd).st_size
        except OSError as err:
            raise SourceError(f"cannot read the size of {self._path}: {err.strerror}") from err

    def known_size(self) -> int:
        """Size of the file (an ``fstat``, no I/O on the data)."""
        return self.size()

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Read each range with one positional read."""
        fd = self._acquire()
        try:
            return self._read_ranges(fd, ranges)
        finally:
            self._release()

    def _read_ranges(self, fd: int, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        end: int | None = None
        out = []
        for offset, length in ranges:
            if offset < 0 or length < 0:
                raise SourceError(f"cannot read {length} bytes at {offset} of {self._path}: negative range")
            # os.pread allocates `length` bytes up front: a range derived from a
            # corrupt IFD or blob must not turn into a huge allocation or an
            # OverflowError, so a large one never asks for more than the file
            # holds. A small one costs no fstat: a frame's read is one pread.
            if length > _UNCHECKED_RANGE:
                end = self._size(fd) if end is None else end
                length = min(length, max(0, end - offset))
            try:
                data = os.pread(fd, length, offset)
                if 0 < len(data) < length:  # a short read: ask for the rest, up to the end of the file
                    chunks = [data]
                    got = len(data)
                    while got < length:
                        chunk = os.pread(fd, length - got, offset + got)
                        if not chunk:
                            break
                        chunks.append(chunk)
                        got += len(chunk)
                    data = b"".join(chunks)
            except OSError as err:
                raise SourceError(f"cannot read {length} bytes at {offset} of {self._path}: {err.strerror}") from err
            out.append(data)
        return out

    def close(self) -> None:
        """Close the file descriptor, once the reads in flight on other threads have ended; reads after it fail."""
        with self._lock:
            if self._readers:
                self._closing = self._fd is not None
            else:
                self._close_now()

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # A source dropped unclosed (an object that holds it, such as an xarray dataset or a Cube, that
        # is never closed) gives its descriptor back when collected, as Python's file objects do: a
        # service opening one per request ran out of descriptors otherwise. ``os.close`` is bound
        # here because module globals may be gone at interpreter exit. A method, not
        # weakref.finalize, which would cost an object on every open of the read path.
        fd = getattr(self, "_fd", None)
        if fd is not None:
            self._fd = None
            with contextlib.suppress(OSError):
                _close(fd)


class BytesSource(_SourceBase):
    """A file held in memory."""

    local = True
    """A request costs no round trip (see :func:`is_local`)."""

    def __init__(self, data: bytes | bytearray | memoryview, *, name: str = "<bytes>") -> None:
        self._data = memoryview(data).cast("B")
        self._name = name

    def __reduce__(self) -> tuple[Any, ...]:
        # A memoryview does not pickle: its bytes do (a dataset of bytes sent to a DataLoader or dask worker).
        return (functools.partial(BytesSource, name=self._name), (bytes(self._data),))

    @property
    def name(self) -> str:
        """The name given at construction."""
        return self._name

    def size(self) -> int:
        """Length of the buffer."""
        return len(self._data)

    def known_size(self) -> int:
        """Length of the buffer."""
        return len(self._data)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Slice each range out of the buffer."""
        return [bytes(self._data[o : o + n]) for o, n in ranges]


def url_scheme(text: str) -> str | None:
    """The scheme of a URL (``"https"``), or None for a local path.

    >>> url_scheme("https://example.org/a.rumi"), url_scheme("/data/a.rumi"), url_scheme("C:/a.rumi")
    ('https', None, None)
    """
    match = _SCHEME.match(text)
    return match.group(1).lower() if match else None


def open_url(url: str) -> ByteSource:
    """Open a URL with the opener registered for its scheme (see the module documentation).

    Raises:
        SourceError: no installed package opens the scheme, or the opener failed.
    """
    from importlib.metadata import entry_points

    scheme = url_scheme(url)
    found = list(entry_points(group=SOURCE_ENTRY_POINTS, name=scheme or ""))
    if not found:
        raise SourceError(f"cannot open {url}: no installed package reads {scheme}:// URLs (install rumi-forge with its catalog package)")
    opener = found[0].load()
    source = opener(url)
    if not isinstance(source, ByteSource):
        raise SourceError(f"cannot open {url}: the {scheme}:// opener {found[0].value} returned {type(source).__name__}, not a ByteSource")
    return source


def known_size(source: ByteSource) -> int | None:
    """Return the source's size if it is known without a request, else None.

    A source may offer an optional ``known_size()`` method (local files and
    buffers always know; a remote source once an answer told it). Readers use
    it to refuse sizes the file cannot hold before allocating (*Resource
    limits*), without adding a round trip to every read.
    """
    method = getattr(source, "known_size", None)
    size = None if method is None else method()
    return None if size is None else int(size)


def is_local(source: ByteSource) -> bool:
    """Whether a request to ``source`` costs no round trip, only the copy of its bytes.

    A source may offer an optional ``local`` attribute, True for a local file
    or a buffer. Readers merge adjacent frames into one request for any other
    source, where each request pays a network round trip; from a local one
    they ask for each frame on its own, so that the threads decoding a read
    each fetch their own frames while the others decode, and no frame is
    copied out of a larger request.
    """
    return getattr(source, "local", False) is True


@contextlib.contextmanager
def deadline(source: ByteSource, seconds: float | None) -> Iterator[None]:
    """Bound every request made through ``source`` inside the block by one total deadline.

    A remote source may offer an optional ``deadline(seconds)`` context
    manager: every range asked for inside it, from any thread, shares one
    deadline and one retry budget, so one read operation ends in ``seconds``
    whatever the server does. ``None`` uses the source's own default. Local
    sources have none: their reads do not wait on a network.
    """
    method = getattr(source, "deadline", None)
    if method is None:
        yield
        return
    with method(seconds):
        yield


def open_source(source: ByteSource | str | os.PathLike[str] | bytes | bytearray | memoryview) -> tuple[ByteSource, bool]:
    """Return a source for a path, a URL, bytes or an existing source.

    The second value says whether the caller opened it and must close it.

    Raises:
        SourceError: a path or URL cannot be opened.
        TypeError: ``source`` is none of the accepted kinds.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return BytesSource(source), True
    if isinstance(source, str) and url_scheme(source) is not None:
        return open_url(source), True
    if isinstance(source, (str, os.PathLike)):
        return LocalFileSource(source), True
    if isinstance(source, ByteSource):
        return source, False
    raise TypeError(f"a source is a path, bytes or a ByteSource, got {type(source).__name__}")
