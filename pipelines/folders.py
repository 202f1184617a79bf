"""Local folders given as inputs: the files below one, through the folders linked into it, and the files a pattern matches.

``os.walk`` does not enter a linked folder unless told to, and told to, it
enters a link to a folder above it for ever. A folder of
``latest -> 2023-06-12`` links, or a month linked in from another disk,
would lose its scenes without a word; so links are followed, except one back
to a folder the path came through (:func:`folder_files`).

Python's own ``glob.glob(recursive=True)`` follows linked folders too, with
no such check: ``**`` over a link to a folder above it never ends (Python
3.11; 3.13's ``glob.translate`` would serve, but not yet). So a pattern with
``**`` walks its fixed leading folder with :func:`folder_files` and matches
what it finds as ``glob`` would (:func:`pattern_files`).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["folder_files", "not_a_file", "pattern_files"]


def folder_files(top: str, onerror: Callable[[OSError], None] | None = None) -> Iterator[str]:
    """The paths of the files below folder ``top``, through linked folders (``feb -> /archive/2023/feb``) too, as ``**`` finds them.

    A link to a folder the path already passed through (a cycle) is not
    entered. A folder reached by two paths is searched along both, as
    ``glob`` does; which path names a file is then chosen by the caller
    (:func:`pipelines.planning.hrefs.one_href_per_file`), not by the order
    in which a file system lists folders. A folder that cannot be listed
    (no permission) is given to ``onerror``, and the walk goes on.
    """
    real: dict[str, str] = {}
    for root, folders, names in os.walk(top, onerror=onerror, followlinks=True):
        here = real[root] = os.path.realpath(root)
        parent = os.path.dirname(root)
        while parent in real:  # the folders this path passed through, up to top
            if real[parent] == here:
                folders[:] = []
                names = []
                break
            parent = os.path.dirname(parent)
        yield from (os.path.join(root, name) for name in names)


def pattern_files(pattern: str) -> list[str]:
    """The files a glob ``pattern`` matches, sorted, as ``glob.glob(pattern, recursive=True)`` gives them, ending.

    ``*``, ``?`` and ``[...]`` match within a name, ``**`` any number of
    folders; a name starting with ``.`` is matched only by a part that
    starts with ``.``, as ``glob`` does.
    """
    if "**" not in pattern:
        return sorted(p for p in glob.glob(pattern) if not os.path.isdir(p))
    parts = pattern.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    top = os.sep.join(parts[:fixed]) or (os.sep if pattern.startswith(os.sep) else os.curdir)
    found = []
    for path in folder_files(top):
        names = os.path.relpath(path, top).split(os.sep)
        if _matches(parts[fixed:], names):
            found.append(path if parts[:fixed] else os.path.relpath(path))
    return sorted(found)


def _matches(parts: list[str], names: list[str]) -> bool:
    """Whether the names of a path below the pattern's fixed folder match its remaining parts."""
    if not parts:
        return not names
    head, tail = parts[0], parts[1:]
    if head == "**":
        for skipped in range(len(names) + 1):
            if _matches(tail, names[skipped:]):
                return True
            if skipped < len(names) and names[skipped].startswith("."):
                return False
        return False
    if not names or (names[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], head) and _matches(tail, names[1:])


def not_a_file(path: str) -> str | None:
    """What ``path`` is when it exists but is no regular file (through links): ``"a FIFO"``, a device or a socket; else None.

    GDAL opening a FIFO waits for a writer that never comes, and a device
    such as ``/dev/urandom`` has no end: either would hold its worker for ever.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), None)
