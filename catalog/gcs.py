"""Google Cloud Storage byte-range source: a ``.rumi`` object in a bucket.

:class:`GCSSource` implements rumi_core's :class:`~rumi_core.sources.ByteSource`
protocol with google-cloud-storage: each ``(offset, length)`` is one media
download, ``blob.download_as_bytes(start=offset, end=offset + length - 1)``,
with no metadata request before it. The size is asked for (one object
metadata ``GET``) only when :meth:`GCSSource.size` is called.

Deadlines and retries belong to a read operation (:mod:`catalog.deadlines`):
inside :meth:`GCSSource.deadline` every download waits at most the time left,
google-cloud-storage's own retries are off, and a download that fails
transiently is asked again after growing pauses, a bounded number of times
in the operation (:meth:`~catalog.deadlines.ReadOperation.retry_wait`).

The client honours ``STORAGE_EMULATOR_HOST`` (as google-cloud-storage does):
with it set, requests go to the emulator with anonymous credentials. A
client is not shared between threads: unless one is given, each thread that
reads creates its own, so the reader's fetch threads may call
:meth:`~GCSSource.read_ranges` concurrently.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from catalog.errors import StorageError
from catalog.remote import RemoteRangeSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from catalog.deadlines import ReadOperation

_CONNECT_TIMEOUT = 10.0

__all__ = ["GCSSource", "decode_crc32c", "default_client", "split_gs_url"]


def split_gs_url(url: str) -> tuple[str, str]:
    """Split ``gs://bucket/path/to/object`` into ``("bucket", "path/to/object")``.

    Raises:
        StorageError: the URL is not of that form.

    >>> split_gs_url("gs://my-bucket/cubes/a.rumi")
    ('my-bucket', 'cubes/a.rumi')
    """
    if not url.startswith("gs://"):
        raise StorageError("not a gs:// URL", href=url)
    bucket, _, path = url[5:].partition("/")
    if not bucket or not path:
        raise StorageError("a gs:// URL names a bucket and an object: gs://BUCKET/OBJECT", href=url)
    return bucket, path


def decode_crc32c(text: str | None) -> int | None:
    """The CRC-32C GCS reports for an object (base64 of its 4 big-endian bytes) as an integer; None for none."""
    return None if text is None else int.from_bytes(base64.b64decode(text), "big")


def default_client() -> Any:
    """Create a storage client: anonymous against ``STORAGE_EMULATOR_HOST``, else default credentials.

    Without an emulator and without default credentials, the client is
    anonymous, which reads public buckets.
    """
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud.storage import Client

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return Client.create_anonymous_client()
    try:
        return Client()
    except DefaultCredentialsError:
        # Public buckets are readable anonymously.
        return Client.create_anonymous_client()


class GCSSource(RemoteRangeSource):
    """An object at a ``gs://`` URL, read with one ranged download per range.

    Args:
        url: ``gs://bucket/object``.
        client: A ``google.cloud.storage.Client`` to use from every thread.
            When None, each reading thread creates one with ``client_factory``.
        client_factory: Creates a client; :func:`default_client` when None.
        size: The object size, when already known.
        timeout: Default total seconds of one read operation (see
            :meth:`deadline`); the default of :mod:`catalog.deadlines` when None.
        deadline: A :func:`time.monotonic` instant by which every operation
            ends (a command's whole ``--timeout``), if any.
    """

    def __init__(
        self,
        url: str,
        *,
        client: Any = None,
        client_factory: Callable[[], Any] | None = None,
        size: int | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> None:
        self._bucket_name, self._object_name = split_gs_url(url)
        super().__init__(url, size=size, timeout=timeout, deadline=deadline)
        self._client = client
        self._factory = client_factory or default_client
        self._local = threading.local()
        self._crc32c: int | None = None
        self._stat_read = False

    def __getstate__(self) -> dict[str, Any]:
        # A client holds this process's connections and credentials: another process makes its own
        # with the factory, as each reading thread here does.
        state = self.__dict__.copy()
        del state["_local"]
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _blob(self) -> Any:
        client = self._client
        if client is None:
            client = getattr(self._local, "client", None)
            if client is None:
                client = self._local.client = self._factory()
        return client.bucket(self._bucket_name).blob(self._object_name)

    def known_size(self) -> int | None:
        """The size, if given or already asked for; no request."""
        return self._size

    def _download(self, key: tuple[int, int], what: str, **kwargs: Any) -> bytes:
        """One download with the operation's time left as its timeout, retried after pauses if it fails transiently."""
        from google.api_core import exceptions as api_exceptions
        from google.auth.exceptions import GoogleAuthError

        transient = (api_exceptions.ServerError, api_exceptions.TooManyRequests, ConnectionError, TimeoutError, OSError)
        op: ReadOperation = self._slot.current()
        while True:
            left = op.remaining()
            if left <= 0:
                raise self._expired(op, what)
            try:
                data: bytes = self._blob().download_as_bytes(
                    raw_download=True, checksum=None, retry=None, timeout=(min(_CONNECT_TIMEOUT, left), left), **kwargs
                )
                return data
            except api_exceptions.RequestRangeNotSatisfiable:
                return b""
            except transient as err:
                wait = op.retry_wait(key)
                if wait is None:
                    raise self._fail(f"{what} ({op.gave_up(key)})", err) from err
                time.sleep(wait)
            except (api_exceptions.GoogleAPIError, GoogleAuthError) as err:
                raise self._fail(what, err) from err

    def _fail(self, what: str, err: Exception) -> StorageError:
        code = getattr(err, "code", None)
        return StorageError(f"{what} failed: {err}", href=self._url, status=code if isinstance(code, int) else None)

    def _read_metadata(self) -> None:
        """One object metadata request: size and CRC32C."""
        from google.api_core import exceptions as api_exceptions
        from google.auth.exceptions import GoogleAuthError

        try:
            blob = self._blob()
            blob.reload()
        except (api_exceptions.GoogleAPIError, GoogleAuthError, OSError) as err:
            raise self._fail("reading the object's metadata", err) from err
        if blob.size is None:
            raise StorageError("the object has no size", href=self._url)
        self._size = int(blob.size)
        self._crc32c = decode_crc32c(blob.crc32c)
        self._stat_read = True

    def size(self) -> int:
        """Size of the object: one metadata request, unless already known.

        Raises:
            StorageError: the object does not exist or cannot be read.
        """
        if self._size is None:
            self._read_metadata()
        assert self._size is not None  # set by _read_metadata or given
        return self._size

    def crc32c(self) -> int | None:
        """The CRC-32C (Castagnoli) GCS reports for the whole object, or None when it reports none.

        One metadata request, shared with :meth:`size`. GCS computes it for
        every object, composite ones included (unlike MD5), so it is how a
        caller can name the object's content without downloading it.

        Raises:
            StorageError: the object does not exist or cannot be read.
        """
        if not self._stat_read:
            self._read_metadata()
        return self._crc32c

    def version(self) -> str | None:
        """``crc32c:<value>`` of :meth:`crc32c`: the object's content, whichever upload wrote it; None without one.

        Raises:
            StorageError: the object does not exist or cannot be read.
        """
        crc = self.crc32c()
        return None if crc is None else f"crc32c:{crc:08x}"

    def _fetch(self, offset: int, length: int) -> bytes:
        """Download one range with one media download."""
        data = self._download((offset, length), f"downloading bytes {offset}-{offset + length - 1}", start=offset, end=offset + length - 1)
        if len(data) > length:
            raise StorageError(f"asked for {length} bytes at {offset}, got {len(data)}", href=self._url)
        return data

    def read_all(self) -> bytes:
        """Download the whole object with one request.

        Raises:
            StorageError: the download failed.
        """
        return self._download((-1, -1), "downloading the object")
