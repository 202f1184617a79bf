"""Files a run keeps in the system's temporary folder, locked while in use, so that a later run removes only a dead one's.

``rumi convert`` sends Beam's output to a log file
(``rumi-convert-<pid>-<8 random characters>.log``), and a bucket catalogue
is built in a local mirror folder (``rumi-stac-<pid>-<8 random characters>``).
A run removes both when it ends, keeping the log only when it failed (and
names it). A run killed with SIGKILL removes nothing: :func:`sweep`, called
as the next run starts, removes what such a run left, except a log with
something in it, which a failed run may have named.

Whether the run that made a file still uses it is decided by a lock, not by
its process id. The owner holds ``flock(LOCK_EX)`` on the file (on the
mirror folder itself) for as long as it uses it, and :func:`sweep` removes
an entry only if it can take that lock without waiting, holding it while it
deletes. The kernel releases the lock when the owner ends, however it ends,
and the lock means the same in every PID namespace that shares the folder
(containers, a pod's shared volume), where a process id would name another
process or none. ``flock``, not ``fcntl``/``lockf`` record locks: those
belong to the process and are dropped when it closes *any* descriptor of the
file, as :func:`sweep` does when it runs in the owner's own process. The
process id in a name only tells a person reading the folder whose file it
is; :func:`sweep` never acts on it.

Only names of exactly the shape this module makes are considered (the
prefix, a process id, ``-``, :mod:`tempfile`'s 8 random characters from
``[a-z0-9_]``, and ``.log`` for a log), so a folder such as
``rumi-stac-2024-06-12-backup`` is never touched. On a filesystem without
``flock`` nothing can be locked, so nothing is removed there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LOG", "MIRROR", "mirror", "new_log", "release", "remove", "sweep"]

LOG: Final = "rumi-convert-"
"""Name prefix of a run's log of Beam's output."""

MIRROR: Final = "rumi-stac-"
"""Name prefix of a bucket catalogue's local mirror."""

_RANDOM: Final = "[a-z0-9_]{8}"
"""What :mod:`tempfile` puts after the prefix: 8 characters of its alphabet."""

_PID: Final = "[1-9][0-9]{0,6}"
"""A process id as ``os.getpid()`` writes it (no system's exceeds 7 digits: Linux's ceiling is 4194304)."""

_LOG_NAME: Final = re.compile(rf"{LOG}{_PID}-{_RANDOM}\.log")
_MIRROR_NAME: Final = re.compile(rf"{MIRROR}{_PID}-{_RANDOM}")

_held: dict[str, tuple[int, int]] = {}
"""This process's held logs: path -> (the locked descriptor, the process that made it)."""


def _prefix(kind: str) -> str:
    return f"{kind}{os.getpid()}-"


def _lock(fd: int, path: str, *, wait: bool) -> bool:
    """Take ``LOCK_EX`` on ``fd``; whether ``path`` still names the file ``fd`` is open on once it is held.

    A filesystem without ``flock`` counts as locked for the owner (it
    proceeds unguarded) and as held by someone for :func:`sweep` (``wait``
    false), which then keeps the entry.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        if not wait:
            return False
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def new_log() -> str:
    """Create an empty log for Beam's output of a run, and hold it until :func:`remove` or :func:`release`.

    Returns:
        The log's path, ``rumi-convert-<pid>-<8 random characters>.log`` in the system's temporary folder.
    """
    while True:
        fd, path = tempfile.mkstemp(prefix=_prefix(LOG), suffix=".log")
        # A sweep that locked the new file first has removed it, or is removing it: make another.
        if _lock(fd, path, wait=True):
            _held[path] = (fd, os.getpid())
            return path
        os.close(fd)


def release(path: str) -> None:
    """Stop holding a log made by :func:`new_log`, leaving it in place (a failed run names it).

    Without the lock, :func:`sweep` removes the log if it is empty.
    """
    held = _held.pop(path, None)
    if held is not None:
        os.close(held[0])  # never LOCK_UN: a forked child's copy of the descriptor keeps the lock until that child ends


def remove(path: str) -> None:
    """Remove a log made by :func:`new_log` and stop holding it; a log already gone is no error.

    A process forked from the one that made the log removes nothing.
    """
    held = _held.get(path)
    try:
        if held is None or held[1] == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    finally:
        release(path)


@contextlib.contextmanager
def mirror() -> Iterator[str]:
    """Create a folder for a bucket catalogue's local mirror, held for the block; remove it at the end.

    Removal is best-effort: what is left, once the lock is gone, goes with
    the next :func:`sweep`. A process forked inside the block that leaves
    it (by an exception, ``sys.exit``) neither removes the folder nor
    releases its lock.

    Yields:
        The folder's path, ``rumi-stac-<pid>-<8 random characters>`` in the system's temporary folder.
    """
    # The lock is on the folder itself (a descriptor opened on it read-only), not on a lock file inside:
    # there is no moment when the folder exists without the thing :func:`sweep` tests, and nothing in it
    # but the mirror.
    while True:
        path = tempfile.mkdtemp(prefix=_prefix(MIRROR))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:  # swept before it could be opened
            continue
        if _lock(fd, path, wait=True):
            break
        os.close(fd)
    owner = os.getpid()
    try:
        yield path
    finally:
        try:
            if os.getpid() == owner:
                shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)


def sweep() -> int:
    """Remove the scratch files no process holds (an empty log, a mirror); return how many.

    Best-effort: an entry that cannot be opened, locked or removed is left,
    and nothing found in the temporary folder makes it raise.
    """
    removed = 0
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            if _LOG_NAME.fullmatch(entry.name):
                folder = False
            elif _MIRROR_NAME.fullmatch(entry.name):
                folder = True
            else:
                continue
            with contextlib.suppress(OSError):
                removed += _remove_unheld(entry.path, folder=folder)
    return removed


def _remove_unheld(path: str, *, folder: bool) -> bool:
    # O_NOFOLLOW: a link with one of these names is not ours; O_NONBLOCK: opening a FIFO does not wait for a writer.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_DIRECTORY if folder else 0)
    fd = os.open(path, flags)
    try:
        found = os.fstat(fd)
        candidate = stat.S_ISDIR(found.st_mode) if folder else stat.S_ISREG(found.st_mode) and found.st_size == 0
        if not candidate:
            return False
        if not _lock(fd, path, wait=False):
            return False
        if folder:
            shutil.rmtree(path)
        elif os.fstat(fd).st_size == 0:  # Beam may have written to it before it was locked here
            os.unlink(path)
        else:
            return False
        return True
    finally:
        os.close(fd)  # the lock goes with it
