"""Files a run keeps in the system's temporary folder, named by its process, so that a later run removes a killed one's.

``rumi convert`` sends Beam's output to a log file (``rumi-convert-<pid>-….log``),
and a bucket catalogue is built in a local mirror (``rumi-stac-<pid>-…``).
A run removes both when it ends, keeping the log only when it failed (and
names it). A run killed with SIGKILL removes nothing: :func:`sweep`, called
as the next run starts, removes what a process that no longer runs left,
except a log with something in it, which a failed run may have named.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from typing import Final

__all__ = ["LOG", "MIRROR", "prefix", "sweep"]

LOG: Final = "rumi-convert-"
"""Name prefix of a run's log of Beam's output."""

MIRROR: Final = "rumi-stac-"
"""Name prefix of a bucket catalogue's local mirror."""

_NAME: Final = re.compile(r"(rumi-convert-|rumi-stac-)(\d+)-.+")


def prefix(kind: str) -> str:
    """The name prefix of this process's scratch files of a kind (:data:`LOG` or :data:`MIRROR`)."""
    return f"{kind}{os.getpid()}-"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep() -> int:
    """Remove the scratch files of processes that no longer run (an empty log, a mirror); return how many."""
    removed = 0
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            match = _NAME.fullmatch(entry.name)
            if match is None or _running(int(match[2])):
                continue
            with contextlib.suppress(OSError):
                if match[1] == MIRROR and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                elif match[1] == LOG and entry.is_file(follow_symlinks=False) and entry.stat().st_size == 0:
                    os.unlink(entry.path)
                else:
                    continue
                removed += 1
    return removed
