"""One conversion at a time per local output folder.

Two runs into one ``--out`` share its work folders (``.parts``, ``.staging``,
``.published``), and each removes them when it ends; a run's catalogue
publisher also removes the staging folders it finds beside the catalogue,
taking them for a killed run's. Run side by side, one of them fails midway
on a file the other removed. :func:`exclusive` makes the second run stop
before it starts instead, naming the folder.

The lock is ``flock``, which the kernel releases when the process ends,
however it ends (a killed run never leaves a stale lock), on the folder
itself; for a folder the run replaces by a rename (the catalogue, swapped in
whole) also on a file beside it, ``.<name>.lock``, made for it and left
empty: the lock on the folder went with the folder renamed aside, and a
second run got in while the first was still publishing. A bucket has no ``flock``: its
runs hold leased claims instead (:mod:`pipelines.bucket_claims`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import TYPE_CHECKING

from pipelines.errors import OptionError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["exclusive", "remove_empty_made"]

_MADE: list[list[str]] = []
"""The folders each :func:`exclusive` in progress in this process made, in the order made."""


@contextlib.contextmanager
def exclusive(folders: Sequence[tuple[str, str]], *, swapped: Sequence[str] = ()) -> Iterator[None]:
    """Hold an exclusive lock on each ``(folder, option)``, creating the folder; release them on exit.

    A folder of ``swapped`` (replaced by a rename during the run) is locked
    through its ``.<name>.lock`` file too. A folder made here that is still empty
    on exit is removed: a run that wrote nothing into its catalogue's folder
    leaves none.

    Raises:
        OptionError: another process holds a folder's lock (names the option and the folder).
    """
    held: list[int] = []
    seen: set[str] = set()
    made: list[str] = []
    _MADE.append(made)
    try:
        for folder, option in folders:
            if not os.path.lexists(folder):
                made.append(folder)
            os.makedirs(folder, exist_ok=True)
            real = os.path.realpath(folder)
            if real in seen:  # --catalog in --out itself, or a link to it: one folder, one lock
                continue
            seen.add(real)
            paths = [(folder, os.O_RDONLY | os.O_DIRECTORY)]
            if folder in swapped:
                paths.append((os.path.join(os.path.dirname(real), f".{os.path.basename(real)}.lock"), os.O_RDONLY | os.O_CREAT))
            for path, flags in paths:
                fd = os.open(path, flags, 0o644)
                held.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise OptionError(
                        f"another rumi convert is writing into {folder}; wait for it to end, or give another folder", option=option
                    ) from None
                except OSError:  # a filesystem without flock (some network mounts): the run goes unguarded, as before
                    continue
        yield
    finally:
        for fd in held:
            os.close(fd)
        _MADE[:] = [other for other in _MADE if other is not made]
        _remove_empty(made)


def remove_empty_made() -> None:
    """Remove the folders every :func:`exclusive` in progress made that are still empty.

    For a run ended by a signal, which leaves at once, without unwinding.
    """
    while _MADE:
        _remove_empty(_MADE.pop())


def _remove_empty(made: list[str]) -> None:
    for folder in reversed(made):
        with contextlib.suppress(OSError):  # not empty, or gone
            os.rmdir(folder)
