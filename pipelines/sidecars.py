"""Small metadata files beside input rasters: a product's ``MTD_MSIL2A.xml``, ``_MTL.json``.

Product metadata says what an input's values mean where its rasters do not
(:mod:`pipelines.sentinel2.safe`, :mod:`pipelines.landsat`). Every image of a
product asks for the same file, so it is read once: a local file, or a
member of a local archive, once per version (modification time and size,
one ``stat`` per ask), so a file rewritten between two runs in one process
is read again; a ``gs://`` object (two requests) or an ``http(s)://`` one
(one ``GET``), and its absence, once per worker process, as a request per
image would double what reading the scenes' metadata costs.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Final, TypeVar

from catalog.errors import StorageError
from catalog.http import SIDECAR_ABSENT, read_url
from pipelines.archives import ArchiveError, archive_of, read_member
from pipelines.bucket import is_gs, output_store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["MetadataError", "SidecarError", "parsed_sidecar", "read_sidecar"]

T = TypeVar("T")

MAX_SIDECAR_BYTES: Final = 16 << 20
"""Largest sidecar read; product metadata files are tens of KiB."""


class SidecarError(OSError):
    """A sidecar exists but cannot be read."""


class MetadataError(ValueError):
    """Product metadata exists but does not say what its values mean."""


def _too_large(path: str, size: int) -> None:
    if size > MAX_SIDECAR_BYTES:
        raise SidecarError(f"{path} is larger than {MAX_SIDECAR_BYTES >> 20} MiB")


@functools.lru_cache(maxsize=256)
def _read_object(url: str) -> bytes | None:
    store = output_store()
    stat = store.stat(url)
    if stat is None:
        return None
    _too_large(url, stat.size)
    data = store.read(url)
    if data is None:
        raise SidecarError(f"{url} was removed while it was read")
    return data


@functools.lru_cache(maxsize=256)
def _read_web(url: str) -> bytes | None:
    try:
        data = read_url(url)
    except StorageError as err:
        if err.status in SIDECAR_ABSENT:
            return None
        raise SidecarError(str(err)) from err
    _too_large(url, len(data))
    return data


@functools.lru_cache(maxsize=64)
def _read_file(path: str, version: tuple[int, int]) -> bytes:
    with open(path, "rb") as f:
        return f.read(MAX_SIDECAR_BYTES + 1)


@functools.lru_cache(maxsize=64)
def _read_archived(href: str, version: tuple[int, int]) -> bytes | None:
    try:
        return read_member(href, MAX_SIDECAR_BYTES)
    except ArchiveError as err:
        raise SidecarError(str(err)) from err


def read_sidecar(path: str) -> bytes | None:
    """The bytes of the file, archive member (:mod:`pipelines.archives`), ``gs://`` or ``http(s)://`` object ``path``, or None.

    Raises:
        SidecarError: it exists but is larger than :data:`MAX_SIDECAR_BYTES`, or reading it failed.
    """
    try:
        if is_gs(path):
            return _read_object(path)
        if path.startswith(("http://", "https://")):
            return _read_web(path)
        if "://" in path:
            return None
        archive = archive_of(path)
        if archive is not None:
            try:
                version = os.stat(archive)
            except OSError:
                return None
            return _read_archived(path, (version.st_mtime_ns, version.st_size))
        try:
            local = os.stat(path)
        except OSError:
            return None
        _too_large(path, local.st_size)
        return _read_file(path, (local.st_mtime_ns, local.st_size))
    except SidecarError:
        raise
    except OSError as err:
        raise SidecarError(f"cannot read {path}: {err}") from err


def parsed_sidecar(paths: Iterable[str], parse: Callable[[str], T]) -> tuple[str, T] | None:
    """The first of ``paths`` there is, and ``parse`` of its UTF-8 text; None when none is there.

    Every image or band of a product asks for the same metadata file, and
    :func:`read_sidecar` hands each the same bytes object while the file is
    unchanged, whose hash Python keeps: the text is parsed once per version
    (a SAFE's 60 KiB ``MTD_MSIL2A.xml`` took about 1 ms an image). The
    parsed value is shared; callers read it, never change it.

    Raises:
        MetadataError: a file is there but cannot be read, is not UTF-8, or
            ``parse`` refuses it; the message names the file.
    """
    for path in paths:
        try:
            data = read_sidecar(path)
        except SidecarError as err:
            raise MetadataError(f"cannot read {path}: {err}") from err
        if data is None:
            continue
        try:
            return path, _parsed(parse, data)
        except MetadataError as err:
            raise MetadataError(f"{path}: {err}") from err
    return None


@functools.lru_cache(maxsize=32)
def _parsed(parse: Callable[[str], T], data: bytes) -> T:
    """``parse`` of the UTF-8 text ``data``, once per parser and bytes (:func:`parsed_sidecar`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MetadataError(f"not UTF-8: {err}") from err
    return parse(text)
