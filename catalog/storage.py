"""Storage access: local paths, ``http(s)://`` URLs and ``gs://`` objects behind one object.

A :class:`Storage` is what every catalogue and read function takes (as
``storage=``) to reach bytes, in the way pystac passes a ``StacIO``: it opens
byte-range sources for the stateless reader (:meth:`Storage.open`), fetches
small whole objects such as item JSON and header blobs (:meth:`Storage.read`)
and resolves relative hrefs (:func:`join_href`). One instance keeps one
HTTP connection pool and one GCS client factory, shared by every source it
opens. When a function is given no storage it uses a fresh default one.

>>> join_href("https://example.org/stac/a/item.json", "../../cube.rumi")
'https://example.org/cube.rumi'
>>> join_href("gs://bucket/stac/item.json", "cube.rumih")
'gs://bucket/stac/cube.rumih'
"""

from __future__ import annotations

import os
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from catalog.errors import StorageError
from catalog.gcs import GCSSource, default_client
from catalog.http import HTTPRangeSource, default_pool, read_url
from rumi_core.ifd import FILE_MAGIC
from rumi_core.sources import LocalFileSource

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import urllib3

    from rumi_core.sources import ByteSource

__all__ = ["Storage", "href_kind", "is_rumi_href", "join_href", "open_url"]


def href_kind(href: str | os.PathLike[str]) -> str:
    """Return ``"http"``, ``"gs"`` or ``"local"`` for an href.

    >>> href_kind("gs://b/o"), href_kind("https://h/x"), href_kind("/tmp/x")
    ('gs', 'http', 'local')
    """
    text = os.fspath(href)
    if text.startswith(("http://", "https://")):
        return "http"
    if text.startswith("gs://"):
        return "gs"
    return "local"


def is_rumi_href(href: str | os.PathLike[str]) -> bool:
    """Whether an href names a ``.rumi`` file rather than an item.

    A URL is a file when its path ends in ``.rumi``; a local path when it
    ends in ``.rumi`` or the file starts with the ``RUMI`` magic. So a
    damaged ``x.rumi`` is reported by the format's checks, not as JSON.
    """
    text = os.fspath(href)
    if href_kind(text) != "local":
        return text.split("?", 1)[0].split("#", 1)[0].endswith(".rumi")
    if text.endswith(".rumi"):
        return True
    try:
        with open(text, "rb") as f:
            return f.read(len(FILE_MAGIC)) == FILE_MAGIC
    except OSError:
        return False


def join_href(base: str | os.PathLike[str], href: str) -> str:
    """Resolve ``href`` against the location of the document at ``base``, as RFC 3986 resolves a reference.

    A URL (``http(s)://``, ``gs://``) is returned unchanged; so is an absolute
    path or ``file:`` URL in a local document. In a remote document a path is
    resolved against the document's URL, a root-relative one (``/data/x.rumi``)
    to its server's or bucket's root, as a browser or GDAL resolves it.

    >>> join_href("https://h/stac/item.json", "/data/x.rumi"), join_href("gs://b/stac/item.json", "../../../x.rumi")
    ('https://h/data/x.rumi', 'gs://b/x.rumi')

    Raises:
        StorageError: a remote document names a local file (``file:``, a
            drive): a document fetched from a server never makes this
            machine read its own files.
    """
    base_text = os.fspath(base)
    if href_kind(href) != "local":
        return href
    kind = href_kind(base_text)
    if kind == "local":
        if urlsplit(href).scheme or os.path.isabs(href):
            return href
        return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(base_text)), href))
    scheme = urlsplit(href).scheme
    if scheme == "file" or len(scheme) == 1:  # file:, or a drive (C:/x)
        raise StorageError(f"names {href!r}, a file on this machine, which a remote document may not", href=base_text)
    if scheme:  # another absolute URL (s3://...): not this machine's, and not relative
        return href
    if kind == "http":
        return urljoin(base_text, href)
    bucket, _, path = base_text[len("gs://") :].partition("/")
    joined = href if href.startswith("/") else posixpath.join(posixpath.dirname("/" + path), href)
    return f"gs://{bucket}{posixpath.normpath(joined)}"


class Storage:
    """Reach local files, HTTP(S) URLs and GCS objects.

    Args:
        http_pool: Connection pool for HTTP(S); the shared default when None.
        http_headers: Headers sent with every HTTP request.
        gcs_client: A ``google.cloud.storage.Client`` shared by every thread;
            when None each reading thread creates its own.
        gcs_client_factory: Creates GCS clients; honours
            ``STORAGE_EMULATOR_HOST`` by default.
        timeout: Total seconds of one remote read operation, for the sources
            this storage opens and each object it fetches; the default of
            :mod:`catalog.deadlines` when None.
        deadline: A :func:`time.monotonic` instant by which everything asked
            through this storage ends (a command's whole ``--timeout``): each
            fetch, and each operation of a source opened, ends ``timeout``
            after it began or at this instant, whichever comes first, and its
            messages name ``timeout``; None for no such instant.
    """

    def __init__(
        self,
        *,
        http_pool: urllib3.PoolManager | None = None,
        http_headers: Mapping[str, str] | None = None,
        gcs_client: Any = None,
        gcs_client_factory: Callable[[], Any] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> None:
        self._timeout = timeout
        self._deadline = deadline
        self._http_pool = http_pool
        self._http_headers = dict(http_headers or {})
        self._gcs_client = gcs_client
        self._gcs_factory = gcs_client_factory or default_client

    @property
    def deadline(self) -> float | None:
        """The :func:`time.monotonic` instant by which everything asked through this storage ends, or None."""
        return self._deadline

    @property
    def http_pool(self) -> urllib3.PoolManager:
        """The HTTP connection pool: the caller's, else this process's :func:`~catalog.http.default_pool` (a forked child's own)."""
        return self._http_pool or default_pool()

    def _check_deadline(self, href: str) -> None:
        """Refuse to ask for ``href`` once the deadline has passed.

        A remote source or fetch is given ``timeout`` and the deadline: it ends
        each operation at the deadline, and its messages name ``timeout``, the
        budget the caller gave, not what was left when the operation began.

        Raises:
            StorageError: the deadline has passed.
        """
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise StorageError("not asked: the time allowed ran out before it", href=href)

    def open(self, href: str | os.PathLike[str], *, size: int | None = None) -> ByteSource:
        """Open a byte-range source for the stateless reader.

        Args:
            href: A local path, ``http(s)://`` URL or ``gs://`` URL.
            size: The file size, when known (saves a request if a caller asks).

        Raises:
            StorageError: a local file cannot be opened, or the URL is malformed.
        """
        text = os.fspath(href)
        kind = href_kind(text)
        if kind in ("http", "gs"):
            self._check_deadline(text)
        if kind == "http":
            return HTTPRangeSource(
                text, pool=self._http_pool, headers=self._http_headers, size=size, timeout=self._timeout, deadline=self._deadline
            )
        if kind == "gs":
            return GCSSource(
                text, client=self._gcs_client, client_factory=self._gcs_factory, size=size, timeout=self._timeout, deadline=self._deadline
            )
        try:
            return LocalFileSource(text)
        except OSError as err:
            # LocalFileSource's message names the path already; say it once.
            reason = getattr(err.__cause__, "strerror", None) or str(err)
            raise StorageError(f"cannot open: {reason}", href=text) from err

    def read(self, href: str | os.PathLike[str]) -> bytes:
        """Fetch a whole (small) object: an item, a header blob, an index.

        Raises:
            StorageError: the object cannot be read.
        """
        text = os.fspath(href)
        kind = href_kind(text)
        if kind in ("http", "gs"):
            self._check_deadline(text)
        if kind == "http":
            return read_url(text, pool=self._http_pool, headers=self._http_headers, timeout=self._timeout, deadline=self._deadline)
        if kind == "gs":
            return GCSSource(
                text, client=self._gcs_client, client_factory=self._gcs_factory, timeout=self._timeout, deadline=self._deadline
            ).read_all()
        try:
            return Path(text).read_bytes()
        except OSError as err:
            raise StorageError(f"cannot read: {err.strerror}", href=text) from err

    def __repr__(self) -> str:
        return "Storage()"


def open_url(url: str) -> ByteSource:
    """Open an ``http(s)://`` or ``gs://`` URL with a default :class:`Storage`.

    This is the ``rumi.sources`` entry point through which rumi_core opens
    URLs (``rumi info https://...``, ``rumi_core.read("gs://...", blob)``)
    without importing this package.

    Raises:
        StorageError: the URL is malformed or cannot be reached.
    """
    return Storage().open(url)
