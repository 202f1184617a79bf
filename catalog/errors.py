"""Errors raised by the catalog package.

Every exception derives from :class:`CatalogError`, itself a
:class:`rumi_core.errors.RumiError` (and so a :class:`ValueError`): a caller
can catch everything rumi raises with one ``except RumiError``. Failures to
fetch bytes are :class:`StorageError` (whose message names the location
without the signature or password of its URL), which is also rumi_core's
:class:`~rumi_core.errors.SourceError` (an :class:`OSError`), so the stateless
reader's callers handle a broken HTTP or GCS read exactly like a broken local
one.
"""

from __future__ import annotations

from typing import Any

from catalog.credentials import redacted
from rumi_core.errors import HeaderMismatchError, RumiError, SelectionError, SourceError

__all__ = [
    "CatalogError",
    "ChangedFileError",
    "ChecksumError",
    "ItemError",
    "LoadError",
    "SearchError",
    "SelectorError",
    "StorageError",
]


class CatalogError(RumiError):
    """Root of every error raised by the catalog package."""


class StorageError(CatalogError, SourceError):
    """A local path, HTTP(S) URL or ``gs://`` object could not deliver its bytes."""

    def __init__(self, message: str, *, href: str | None = None, status: int | None = None) -> None:
        self.href = href
        """The location that failed (None for an error re-created from its message alone)."""
        self.status = status
        """The HTTP status code, when a server answered."""
        # An error may be shown or logged anywhere; href keeps the URL itself. Without an href the message is
        # the whole text, as PyTorch's DataLoader re-creates a worker's exception: ``type(err)(message)``.
        text = message if href is None else redacted(f"{href}: {message}")
        if status is not None:
            text = f"{text} (HTTP {status})"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole (a dask or multiprocessing worker's error reaches its caller so): the default pickles
        # args alone, and a class of keyword-only arguments cannot be re-created from them.
        return (_storage_error, (type(self), self.args[0], self.href, self.status))


def _storage_error(cls: type[StorageError], text: str, href: str | None, status: int | None) -> StorageError:
    """A pickled :class:`StorageError` (or subclass) again: its text as it was, and its fields."""
    err = cls(text)  # without an href, the text as it is
    err.href, err.status = href, status
    return err


class ChecksumError(CatalogError):
    """Bytes differ from the checksum their item records (a header blob, say)."""


class ItemError(CatalogError):
    """A STAC item does not describe a rumi file, or lacks a field a read needs."""


class SearchError(CatalogError):
    """A catalogue, index or STAC API could not be searched."""


class SelectorError(CatalogError, SelectionError):
    """A band, time or bounding-box selector matches nothing or is malformed."""


class LoadError(CatalogError):
    """Items cannot be loaded onto one output grid as asked (different grids, no CRS or resolution)."""


class ChangedFileError(CatalogError, HeaderMismatchError):
    """A file was rewritten after its item and header blob were read: its size is no longer the item's ``file:size``."""
