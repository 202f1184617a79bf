"""The C heap: free memory handed back after a large, short-lived working set (glibc only)."""

from __future__ import annotations

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
