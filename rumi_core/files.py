"""Local files published whole: written under a temporary name, then renamed.

A reader (or a re-run) never sees half a file: :func:`os.replace` within one
file system is atomic on POSIX, and a failed write removes its temporary file.
A process killed mid-write cannot remove it, so a job that owns a work folder
on the same file system keeps its temporaries there and removes the folder.
The temporary name is hidden (``.name.XXXX.partial``) and unique, so writers
of the same target in several processes do not collide; the last rename wins
and every candidate is whole. Published files get the mode a plain ``open()``
would give them, not :func:`tempfile.mkstemp`'s 0600.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from rumi_core.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["atomic_file", "atomic_path", "naming_errors", "umask_mode", "writable_path", "write_atomic"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
"""A URL's scheme and ``://``: a name a local write would take for folders (``http:/host/...``)."""


def umask_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (0644 under umask 022).

    Read from ``/proc/self/status`` where Linux reports it: setting the umask
    to read it back, the portable way, changes it for every thread of the
    process for a moment.
    """
    with contextlib.suppress(OSError, StopIteration, ValueError):
        status = Path("/proc/self/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("Umask:"))
        return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def writable_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """``path`` as text, once a file can be written there: before any work, and naming ``path``, not a temporary name.

    Raises:
        InvalidInputError: ``path`` is a URL (writes are local; upload the file after).
        IsADirectoryError: ``path`` is a directory.
        FileNotFoundError: the folder ``path`` would be in does not exist.
    """
    text = os.fsdecode(path)
    if _URL.match(text):
        raise InvalidInputError(f"{text} is a URL, and files are written locally: write it to a local path, then upload it", field="path")
    if os.path.isdir(text):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file to write", text)
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"cannot write {os.path.basename(text)} in a folder that does not exist", folder)
    return text


@contextlib.contextmanager
def naming_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Make an :class:`OSError` of the block that names no file name ``path``.

    A write that fails for want of room (ENOSPC), past a file-size limit
    (EFBIG) or on a failing disk (EIO) names no file: "[Errno 28] No space
    left on device" alone, from a run that writes hundreds of files.
    """
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror, os.fspath(path)) from err


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, temp_dir: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """A temporary name to write ``path`` through, for writers that take a name (GDAL, Parquet): renamed to ``path``
    when the block ends, and removed if it raises. ``temp_dir`` is as for :func:`atomic_file`."""
    target = Path(writable_path(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent if temp_dir is None else temp_dir)
    os.close(fd)
    try:
        with naming_errors(target):
            yield tmp
        os.chmod(tmp, umask_mode())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], *, temp_dir: str | os.PathLike[str] | None = None) -> Iterator[BinaryIO]:
    """A file to write ``path`` through, published whole when the block ends: a temporary file, then a rename.

    What is written streams to disk (``np.save(f, array)`` holds no second
    copy of the array); a block that raises leaves nothing. The temporary file
    is made in ``temp_dir``, which must be on the same file system as
    ``path``, or beside ``path`` when it is None.
    """
    with atomic_path(path, temp_dir=temp_dir) as tmp, open(tmp, "wb") as f:
        yield f


def write_atomic(path: str | os.PathLike[str], data: bytes, *, temp_dir: str | os.PathLike[str] | None = None) -> None:
    """Write ``data`` to ``path`` whole (:func:`atomic_file`)."""
    with atomic_file(path, temp_dir=temp_dir) as f:
        f.write(data)
