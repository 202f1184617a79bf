"""Local files published whole: written under a temporary name beside the target, then renamed.

A reader (or a re-run) never sees half a file: :func:`os.replace` within one
directory is atomic on POSIX, and a failed write removes its temporary file.
The temporary name is hidden (``.name.XXXX.partial``) and unique, so writers
of the same target in several processes do not collide; the last rename wins
and every candidate is whole. Published files get the mode a plain ``open()``
would give them, not :func:`tempfile.mkstemp`'s 0600.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["umask_mode", "write_atomic"]


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


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` whole: a temporary file beside it, then a rename."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), umask_mode())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
