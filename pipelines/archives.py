"""Zip and tar archives as inputs: their rasters read in place through GDAL's ``/vsizip/`` and ``/vsitar/``.

Sentinel-2 products come from the Copernicus Data Space as zipped SAFE
folders, Landsat Collection 2 products from EarthExplorer as tar bundles.
An archive given as an input, or found in a directory or by a glob, stands
for its raster members, each a scene of href ``/vsizip/{/abs/x.zip}/member``
(GDAL's braced form, which names the archive unambiguously): GDAL reads the
member without extracting it, and the product folder's name inside still
dates the scene and names its bands. Product metadata beside a member
(``MTD_MSIL2A.xml``, ``_MTL.txt``) is read from the same archive
(:func:`read_member`).

Local archives only. A compressed tar (gzip, bzip2, xz, zstd) is refused:
GDAL can reach a member of one only by decompressing from the start, once
per window read.
"""

from __future__ import annotations

import functools
import os
import re
import tarfile
import zipfile
from typing import Final

__all__ = [
    "ARCHIVE_SUFFIXES",
    "ArchiveError",
    "archive_of",
    "extracted_paths",
    "is_archive",
    "member_size",
    "raster_members",
    "read_member",
]

ARCHIVE_SUFFIXES: Final = (".zip", ".tar", ".tar.gz", ".tgz")
"""Suffixes of the archives taken as inputs (case-insensitive); a compressed tar is refused with what to do."""

_MEMBER: Final = re.compile(r"^/vsi(?:zip|tar)/\{(?P<archive>.+?\.(?:zip|tar))\}/(?P<member>.+)$", re.IGNORECASE)
"""A scene href made by :func:`raster_members`: the archive ends at its suffix, so its path may hold braces as GDAL's does."""


class ArchiveError(ValueError):
    """An archive cannot be listed or read."""


def is_archive(path: str) -> bool:
    """Whether ``path`` names an archive whose rasters are inputs (:data:`ARCHIVE_SUFFIXES`)."""
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def _sizes(path: str) -> dict[str, int]:
    """Every regular file member of the archive at ``path``, with its stored size (compressed, for a zip).

    Listed once per version of the archive (modification time and size):
    every scene of an archive asks, and a tar is listed by reading the
    header of each member.

    Raises:
        ArchiveError: the archive is unreadable, or a compressed tar.
    """
    try:
        stat = os.stat(path)
    except OSError as err:
        raise ArchiveError(f"cannot read {path}: {err.strerror}") from err
    return _listing(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _listing(path: str, mtime_ns: int, size: int) -> dict[str, int]:
    """:func:`_sizes` of one version of an archive."""
    try:
        if path.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as zipped:
                return {info.filename: info.compress_size for info in zipped.infolist() if not info.is_dir()}
        with tarfile.open(path, "r:") as bundle:  # "r:" reads uncompressed tars only
            members = [info for info in bundle.getmembers() if info.isfile()]
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as err:
        if not path.lower().endswith(".zip") and _compressed(path):
            raise ArchiveError(f"{path} is a compressed tar, which GDAL reads only from its start; extract it first") from err
        raise ArchiveError(f"cannot read {path}: {err}") from err
    # GDAL's /vsitar/ reads a member's name from its ustar header alone: a name too long or not ASCII
    # lives in a PAX extended header (Python's tarfile, tar --format=pax), and GDAL would not find it.
    pax = [info.name for info in members if "path" in info.pax_headers]
    if pax:
        raise ArchiveError(
            f"{path} names {len(pax)} member(s) ({pax[0]}) in PAX extended headers, for names too long or not ASCII, "
            "which GDAL's /vsitar/ does not read; extract it, or pack it again with tar --format=gnu"
        )
    return {info.name: info.size for info in members}


_COMPRESSED_MAGIC: Final = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")
"""The first bytes of gzip, bzip2, xz and zstd streams."""


def _compressed(path: str) -> bool:
    """Whether the file at ``path`` starts as a compressed stream does (:data:`_COMPRESSED_MAGIC`)."""
    try:
        with open(path, "rb") as f:
            return f.read(6).startswith(_COMPRESSED_MAGIC)
    except OSError:
        return False


def raster_members(path: str, suffixes: tuple[str, ...]) -> list[str]:
    """The scene hrefs of the archive at ``path``: its members ending in ``suffixes``, in name order.

    Raises:
        ArchiveError: the archive is unreadable, or a compressed tar.
    """
    archive = os.path.abspath(path)
    names = sorted(_sizes(archive))
    prefix = "/vsizip/" if archive.lower().endswith(".zip") else "/vsitar/"
    return [f"{prefix}{{{archive}}}/{name}" for name in names if name.lower().endswith(suffixes)]


def _split(href: str) -> tuple[str, str] | None:
    """``(archive, member)`` of an href made by :func:`raster_members` (or one beside it), else None."""
    found = _MEMBER.match(href)
    return None if found is None else (found.group("archive"), found.group("member"))


def archive_of(href: str) -> str | None:
    """The archive file whose member ``href`` names (:func:`raster_members`), or None for any other href."""
    parts = _split(href)
    return None if parts is None else parts[0]


def extracted_paths(href: str) -> tuple[str, ...]:
    """Where extracting its archive beside the archive puts the member ``href`` names; () for any other href.

    ``unzip x.zip`` and ``tar xf x.tar`` extract into the archive's folder;
    a desktop's "extract all" into a folder named as the archive.

    >>> extracted_paths("/vsizip/{/data/X.zip}/X.SAFE/B02.jp2")
    ('/data/X.SAFE/B02.jp2', '/data/X/X.SAFE/B02.jp2')
    """
    parts = _split(href)
    if parts is None:
        return ()
    archive, member = parts
    folder, name = os.path.split(archive)
    stem = name[: -len(next(s for s in ARCHIVE_SUFFIXES if name.lower().endswith(s)))]
    return (os.path.normpath(os.path.join(folder, member)), os.path.normpath(os.path.join(folder, stem, member)))


def member_size(href: str) -> int | None:
    """The stored size of the archive member ``href`` names; None for any other href or a member that is not there."""
    parts = _split(href)
    if parts is None:
        return None
    try:
        return _sizes(parts[0]).get(parts[1])
    except ArchiveError:
        return None


def read_member(href: str, limit: int) -> bytes | None:
    """The bytes of the archive member ``href`` names, or None where it names none or the archive lacks it.

    Raises:
        ArchiveError: the archive is unreadable, or the member holds more than ``limit`` bytes.
    """
    parts = _split(href)
    if parts is None:
        return None
    archive, member = parts
    size = _sizes(archive).get(member)
    if size is None:
        return None
    try:
        if archive.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped, zipped.open(member) as f:
                data = f.read(limit + 1)
        else:
            with tarfile.open(archive, "r:") as bundle:
                extracted = bundle.extractfile(member)
                data = b"" if extracted is None else extracted.read(limit + 1)
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, KeyError) as err:
        raise ArchiveError(f"cannot read {member} in {archive}: {err}") from err
    if len(data) > limit:
        raise ArchiveError(f"{member} in {archive} is larger than {limit >> 20} MiB")
    return data
