"""Conversion outputs in a ``gs://`` bucket: temporaries, compose, preconditions.

``rumi convert --out gs://BUCKET/PREFIX`` writes every output with
google-cloud-storage, and no process ever holds a whole cube:

* each worker uploads the compressed frames it made as temporary objects
  ``OUT/.rumi-tmp/<run>/<cube_id>/<frame_index>`` (:meth:`GCSOutput.write`);
* the assembler uploads the head (computed from the frame byte counts alone)
  and the trailer beside them, then builds the file server-side with GCS
  ``compose`` (:meth:`GCSOutput.compose_tree`): at most 32 sources per call,
  so a cube of more than 32 frames is composed hierarchically;
* it checks the composed object's size and the CRC32C that GCS reports
  against a CRC32C combined from the parts' own
  (:func:`~pipelines.crc32c.crc32c_combine`), so
  no byte has to be downloaded to know the object is the concatenation.

Writes that publish (the header blob, the file) carry a generation
precondition: ``if_generation_match=0`` where no object is there, else the
generation of the object they replace. A concurrent or retried assembler
cannot overwrite a finished object, it gets ``412 Precondition Failed`` and
compares what is there with what it would have written; and an object of
another mode or codec is replaced in place, never deleted first, so readers
find the earlier file until the new one is there.

Every request goes through google-cloud-storage's retry policy
(:data:`google.cloud.storage.retry.DEFAULT_RETRY`: 429, 5xx, connection
errors and timeouts, with exponential backoff). Uploads of temporaries and
composes are passed that policy explicitly: both are idempotent here (the
same name always receives the same bytes), which the library cannot know.
Objects larger than :data:`RESUMABLE_CHUNK` are uploaded with resumable
uploads in chunks of that size, which resume from the last acknowledged chunk.

``STORAGE_EMULATOR_HOST`` is honoured (anonymous client, no credential
lookup), as in :func:`catalog.gcs.default_client`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from catalog.gcs import GCSSource, decode_crc32c, default_client, split_gs_url
from pipelines.crc32c import crc32c_combine
from pipelines.errors import AssemblyError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "COMPOSE_LIMIT",
    "DELETE_THREADS",
    "RESUMABLE_CHUNK",
    "TMP_DIR",
    "GCSOutput",
    "ObjectStat",
    "emulated",
    "glob_pattern",
    "is_gs",
    "output_exists",
    "output_store",
    "read_output",
    "remove_output",
]

COMPOSE_LIMIT: Final = 32
"""Most source objects GCS accepts in one ``compose`` call."""

RESUMABLE_CHUNK: Final = 8 << 20
"""Objects larger than this are uploaded with a resumable upload in chunks of this size (a multiple of
256 KiB, as GCS requires), so a failed request resends one chunk, not the object."""

_CONNECTION_CAUSE: Final = re.compile(r"\[Errno -?\d+\] [^'\")]+|Failed to resolve '[^']+'|timed out")
"""What a requests connection error's text says of its cause: ``[Errno 111] Connection refused``, a name not resolved."""

_PROBE_TIMEOUT: Final = 10.0
"""Seconds :meth:`GCSOutput.cannot_write` waits for its one answer."""

DELETE_THREADS: Final = 8
"""Concurrent delete requests when removing temporaries."""

TMP_DIR: Final = ".rumi-tmp"
"""Folder of a bucket output where a run keeps its temporary objects."""


def is_gs(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a ``gs://`` URL.

    >>> is_gs("gs://cubes/run1"), is_gs("/data/cubes")
    (True, False)
    """
    return os.fspath(path).startswith("gs://")


def emulated() -> bool:
    """Whether requests go to a Cloud Storage emulator (``STORAGE_EMULATOR_HOST`` is set)."""
    return bool(os.environ.get("STORAGE_EMULATOR_HOST"))


def glob_pattern(pattern: str) -> re.Pattern[str]:
    """A glob over object names as a regular expression: ``*`` and ``?`` stay within one ``/`` level, ``**`` crosses levels.

    >>> bool(glob_pattern("gs://a/scenes/**/*.tif").match("gs://a/scenes/2023/01/x.tif"))
    True
    >>> bool(glob_pattern("gs://a/scenes/*.tif").match("gs://a/scenes/2023/x.tif"))
    False
    """
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out.append("[^" + re.escape(body[1:]) + "]" if body.startswith("!") else "[" + re.escape(body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass(frozen=True)
class ObjectStat:
    """What GCS reports about an object, without its bytes."""

    url: str
    """``gs://bucket/name``."""
    size: int
    """Bytes."""
    crc32c: int | None
    """CRC-32C as an integer."""
    generation: int | None
    """The object's generation."""
    metadata: Mapping[str, str]
    """Custom metadata."""
    updated: float | None = None
    """When GCS last changed the object (its data or metadata), POSIX seconds of the server's clock."""


def _stat(blob: Any, url: str) -> ObjectStat:
    updated = None if blob.updated is None else blob.updated.timestamp()
    return ObjectStat(url, int(blob.size or 0), decode_crc32c(blob.crc32c), blob.generation, dict(blob.metadata or {}), updated)


class GCSOutput:
    """Reads and writes of one process to ``gs://`` outputs.

    Args:
        client_factory: Creates a ``google.cloud.storage.Client``; one per
            thread, as a client is not shared between threads.
            :func:`catalog.gcs.default_client` when None.
        preconditions: Send ``if_generation_match`` on publishing writes.
            gcp-storage-emulator answers 400 to a compose that carries one, so
            the default is on unless ``STORAGE_EMULATOR_HOST`` is set.
    """

    def __init__(self, client_factory: Callable[[], Any] | None = None, *, preconditions: bool | None = None) -> None:
        self._factory = client_factory or default_client
        self._local = threading.local()
        self.preconditions = (not emulated()) if preconditions is None else preconditions
        """Whether publishing writes carry ``if_generation_match``."""

    @property
    def client(self) -> Any:
        """This thread's storage client."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._factory()
        return client

    def _blob(self, url: str) -> Any:
        bucket, name = split_gs_url(url)
        return self.client.bucket(bucket).blob(name)

    @staticmethod
    def _retry() -> Any:
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY

    def write(self, url: str, data: bytes, *, if_generation: int | None = None) -> bool:
        """Upload ``data`` to ``url``; whether it was written.

        Args:
            url: ``gs://bucket/name``.
            data: The object's bytes.
            if_generation: Publish: write only in place of this generation
                of the object, 0 for none (``if_generation_match``, when
                preconditions are on). False when another was there.
        """
        from google.api_core.exceptions import PreconditionFailed

        blob = self._blob(url)
        blob.chunk_size = RESUMABLE_CHUNK  # above it, a resumable upload in chunks of this size
        if if_generation is not None and self.preconditions:
            try:
                blob.upload_from_string(data, if_generation_match=if_generation, retry=self._retry(), checksum="crc32c")
            except PreconditionFailed:
                return False
            return True
        blob.upload_from_string(data, retry=self._retry(), checksum="crc32c")
        return True

    def cannot_write(self, url: str) -> str | None:
        """Why a run cannot write under ``url``, known from one listing of at most one object, not retried; None if it may.

        Listing is what a run does first (its stale temporaries), and it needs
        only the object permissions a run needs anyway, where asking for the
        bucket itself needs ``storage.buckets.get``. A bucket that does not
        exist, and a store that cannot be reached (no network, a stopped
        emulator), are named here: the run would retry its first request for
        two minutes, then show urllib3's text. Other answers (no permission)
        are left for the run to report.
        """
        from google.api_core.exceptions import GoogleAPICallError, NotFound
        from google.auth.exceptions import GoogleAuthError

        bucket, _, prefix = url[len("gs://") :].partition("/")
        try:
            list(
                self.client.list_blobs(
                    bucket, prefix=prefix.rstrip("/") + "/" if prefix else None, max_results=1, retry=None, timeout=_PROBE_TIMEOUT
                )
            )
        except NotFound:
            return f"there is no bucket {bucket!r}; a run writes into a bucket, it does not create one"
        except GoogleAuthError as err:
            return f"no credentials for Google Cloud Storage ({str(err).splitlines()[0]}); give Application Default Credentials"
        except OSError as err:
            # requests' connection errors and timeouts: their text is urllib3's, the cause is in it.
            cause = _CONNECTION_CAUSE.search(str(err))
            endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or "storage.googleapis.com"
            return (
                f"cannot reach Google Cloud Storage at {endpoint} ({cause.group(0) if cause else type(err).__name__}); "
                "check the network, or STORAGE_EMULATOR_HOST for an emulator"
            )
        except GoogleAPICallError:
            return None
        return None

    def read(self, url: str) -> bytes | None:
        """The bytes of a (small) object, or None when it does not exist."""
        from google.api_core.exceptions import NotFound

        try:
            data: bytes = self._blob(url).download_as_bytes(retry=self._retry())
        except NotFound:
            return None
        return data

    def stat(self, url: str) -> ObjectStat | None:
        """Size, CRC32C, generation and metadata of an object, or None when it does not exist."""
        bucket, name = split_gs_url(url)
        blob = self.client.bucket(bucket).get_blob(name, retry=self._retry())
        return None if blob is None else _stat(blob, url)

    def source(self, stat: ObjectStat) -> GCSSource:
        """A range source over the object ``stat`` describes, through this store's client, its size known."""
        return GCSSource(stat.url, client=self.client, size=stat.size)

    def listing(self, prefix_url: str) -> dict[str, ObjectStat]:
        """Every object under ``prefix_url`` (a folder: a ``/`` is added), by URL."""
        bucket, prefix = split_gs_url(prefix_url.rstrip("/") + "/")
        return {
            f"gs://{bucket}/{b.name}": _stat(b, f"gs://{bucket}/{b.name}")
            for b in self.client.list_blobs(bucket, prefix=prefix, retry=self._retry())
        }

    def glob(self, pattern: str) -> list[str]:
        """The ``gs://`` URLs of the objects matching a glob (see :func:`glob_pattern`), sorted.

        One listing of the prefix before the first wildcard.
        """
        bucket, path = split_gs_url(pattern)
        prefix = re.split(r"[*?\[]", path, maxsplit=1)[0]
        matcher = glob_pattern(pattern)
        names = (f"gs://{bucket}/{b.name}" for b in self.client.list_blobs(bucket, prefix=prefix, retry=self._retry()))
        return sorted(url for url in names if matcher.match(url))

    def delete(self, url: str, *, generation: int | None = None) -> None:
        """Delete an object (only that generation, when given); a missing object is no error."""
        from google.api_core.exceptions import NotFound

        with contextlib.suppress(NotFound):
            self._blob(url).delete(if_generation_match=generation, retry=self._retry())

    def delete_tree(self, prefix_url: str) -> int:
        """Delete every object under ``prefix_url``; return how many there were.

        GCS deletes one object per request, so a cube's temporaries (one per
        frame) are deleted from :data:`DELETE_THREADS` threads, each with its own client.
        """
        from concurrent.futures import ThreadPoolExecutor

        found = sorted(self.listing(prefix_url))
        with ThreadPoolExecutor(max_workers=DELETE_THREADS) as pool:
            list(pool.map(self.delete, found))
        return len(found)

    def compose(
        self, sources: Sequence[str], dest: str, *, if_generation: int | None = None, metadata: Mapping[str, str] | None = None
    ) -> bool:
        """Compose at most :data:`COMPOSE_LIMIT` objects of one bucket into ``dest``; whether it was written.

        Args:
            sources: ``gs://`` URLs, in order.
            dest: The object to create.
            if_generation: Publish: only in place of this generation of ``dest``, 0 for none (see :meth:`write`).
            metadata: Custom metadata of ``dest``.
        """
        from google.api_core.exceptions import PreconditionFailed

        if not 1 <= len(sources) <= COMPOSE_LIMIT:
            raise AssemblyError(f"compose takes 1 to {COMPOSE_LIMIT} sources, got {len(sources)}")
        blob = self._blob(dest)
        if metadata:
            blob.metadata = dict(metadata)
        parts = [self._blob(s) for s in sources]
        if if_generation is not None and self.preconditions:
            try:
                blob.compose(parts, if_generation_match=if_generation, retry=self._retry())
            except PreconditionFailed:
                return False
            return True
        blob.compose(parts, retry=self._retry())
        return True

    def compose_tree(self, sources: Sequence[ObjectStat], dest: str, scratch: str) -> ObjectStat:
        """Concatenate any number of objects into ``dest`` and verify it; return what GCS reports.

        Sources are composed in groups of :data:`COMPOSE_LIMIT` into
        intermediate objects ``<scratch>/compose-<level>-<i>`` until one call
        can take them all. The result's size and CRC32C must equal those
        combined from the sources'.

        Raises:
            AssemblyError: a source has no CRC32C, or the composed object
                differs from the concatenation of its sources.
        """
        level = 0
        current = list(sources)
        while len(current) > COMPOSE_LIMIT:
            grouped: list[ObjectStat] = []
            for i in range(0, len(current), COMPOSE_LIMIT):
                group = current[i : i + COMPOSE_LIMIT]
                url = f"{scratch.rstrip('/')}/compose-{level}-{i // COMPOSE_LIMIT:06d}"
                self.compose([s.url for s in group], url)
                grouped.append(_joined(url, group))
            current = grouped
            level += 1
        self.compose([s.url for s in current], dest)
        expected = _joined(dest, current)
        got = self.stat(dest)
        if got is None or got.size != expected.size or got.crc32c != expected.crc32c:
            found = "nothing" if got is None else f"{got.size} bytes with CRC32C {got.crc32c}"
            raise AssemblyError(
                f"{dest}: compose produced {found}; the parts add up to {expected.size} bytes with CRC32C {expected.crc32c}"
            )
        return got


def output_store() -> GCSOutput:
    """This process's :class:`GCSOutput` for the current ``STORAGE_EMULATOR_HOST`` (workers build their own)."""
    return _store_for(os.environ.get("STORAGE_EMULATOR_HOST"))


@functools.cache
def _store_for(emulator_host: str | None) -> GCSOutput:
    return GCSOutput()


def _joined(url: str, parts: Sequence[ObjectStat]) -> ObjectStat:
    """What the concatenation of ``parts`` must be: summed sizes, combined CRC32C."""
    crc = 0
    size = 0
    for part in parts:
        if part.crc32c is None:
            raise AssemblyError(f"{part.url}: GCS reported no CRC32C, so its concatenation cannot be verified")
        crc = crc32c_combine(crc, part.crc32c, part.size)
        size += part.size
    return ObjectStat(url, size, crc, None, {})


def read_output(path: str) -> bytes | None:
    """The bytes of an output, a local file or a ``gs://`` object (a small one), or None where there is none."""
    if is_gs(path):
        return output_store().read(path)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def output_exists(path: str) -> bool:
    """Whether an output, a local file or a ``gs://`` object, is there."""
    return output_store().stat(path) is not None if is_gs(path) else os.path.isfile(path)


def remove_output(path: str) -> None:
    """Remove an output, a local file or a ``gs://`` object; one already gone is no error."""
    if is_gs(path):
        output_store().delete(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
