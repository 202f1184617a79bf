"""The C heap: free memory handed back after a large, short-lived working set (glibc only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

GLIBC = sys.platform == "linux" and bool(os.confstr("CS_GNU_LIBC_VERSION"))


def _untuned_environ() -> dict[str, str]:
    """This process's environment without malloc tuning.

    Read at call time: dask.distributed's nanny writes ``MALLOC_TRIM_THRESHOLD_``
    into the test process's environment when an earlier test starts a cluster.
    """
    return {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}


# 2,000 blocks of 64 KiB on the heap, then all freed but every tenth: the free
# memory lies between live blocks, where glibc's free() never returns it (it
# trims only the top of the heap), so only malloc_trim can.
_FRAGMENTED = """
import psutil
from rumi_core.heap import keep_heap_slack, release_free_memory
keep_heap_slack(1 << 20)  # as a conversion worker does: blocks below 32 MiB come from the heap
blocks = [bytearray(64 << 10) for _ in range(2000)]
kept = blocks[::10]
del blocks
before = psutil.Process().memory_info().rss
released = release_free_memory()
after = psutil.Process().memory_info().rss
print(released, (before - after) >> 20)
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_release_free_memory_hands_freed_heap_pages_back() -> None:
    run = subprocess.run([sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, check=True, env=_untuned_environ())
    out = run.stdout.split()
    assert out[0] == "True", out
    assert int(out[1]) >= 90  # of the 112 MiB freed between the kept blocks


def test_release_free_memory_leaves_tuned_malloc_alone() -> None:
    code = "from rumi_core.heap import release_free_memory; print(release_free_memory())"
    env = {**_untuned_environ(), "MALLOC_TRIM_THRESHOLD_": "131072"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.strip()
    assert out == "False"


# Eight threads allocating at once, after the arenas were capped (or not), then a count of
# the arenas in glibc's malloc_info.
_ARENAS = """
import ctypes, json, os, sys, tempfile, threading
from rumi_core.heap import limit_arenas

caps = [limit_arenas(int(c)) for c in sys.argv[1:]]
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)


def arenas():
    fd, path = tempfile.mkstemp()
    os.close(fd)
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    with open(path) as f:
        text = f.read()
    os.remove(path)
    return text.count("<heap nr=")


together = threading.Barrier(8)


def allocate():
    together.wait()  # every thread alive at once, so none inherits an arena another left
    blocks = [bytearray(8192) for _ in range(100)]  # above pymalloc's 512 bytes: glibc's malloc
    together.wait()
    del blocks


threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"caps": caps, "arenas": arenas()}))
"""


def _arenas(*caps: int, env: dict[str, str] | None = None) -> dict[str, list[int] | int]:
    """Cap the arenas with each of ``caps`` in turn in a new process; the caps in force and the arenas eight threads then use."""
    environ = {**_untuned_environ(), **(env or {})}
    proc = subprocess.run([sys.executable, "-c", _ARENAS, *map(str, caps)], capture_output=True, text=True, check=True, env=environ)
    result: dict[str, list[int] | int] = json.loads(proc.stdout)
    return result


@pytest.mark.skipif(not GLIBC, reason="malloc arenas are glibc's")
def test_capped_arenas_are_shared_by_every_thread_that_allocates_after() -> None:
    free = _arenas()
    capped = _arenas(2)
    assert capped["caps"] == [2]
    assert isinstance(free["arenas"], int) and isinstance(capped["arenas"], int)
    assert free["arenas"] > 2  # eight threads allocating at once get arenas of their own
    assert capped["arenas"] <= 2


@pytest.mark.skipif(not GLIBC, reason="malloc arenas are glibc's")
def test_the_arena_cap_is_only_lowered() -> None:
    assert _arenas(4, 8, 2, 0)["caps"] == [4, 4, 2, 1]


def test_limit_arenas_leaves_tuned_malloc_alone() -> None:
    assert _arenas(2, env={"MALLOC_ARENA_MAX": "3"})["caps"] == [0]
