"""Keep the C heap's pages mapped from one read (or frame) to the next, and hand them back when done.

A read allocates its request buffer, its output, one array per decoded frame
and, inside libgeozl (out of reach of any public API), OpenZL's intermediate
streams, and frees them all when it ends. glibc then trims the top of the
heap back to the kernel, so the next read faults the same pages in again:
1,231 minor faults per 512 x 512 window of a 4-band uint16 file (4 frames),
and 8.7 ms of CPU per read against 5.7 ms without them (measured on this
project's 2-core machine). rumi-eo's reader makes no fault at all.

glibc's ``M_TOP_PAD`` is the slack a heap keeps at its top when it trims, in
the main heap and in every thread's arena alike. Setting it to a read's
working set keeps those pages mapped between reads: for the window above a
2 MiB pad still made 751 faults per read, 8 MiB made none. Setting it also
freezes glibc's dynamic mmap threshold at its 128 KiB start, which would send
every frame to a fresh ``mmap``; so the threshold is set to 32 MiB, the
ceiling glibc's own dynamic rule climbs to on 64-bit. The cost is at most the
pad (:data:`MAX_TOP_PAD`) of resident memory per malloc arena after a read.

A process that compresses frames one after another (a conversion worker)
asks for the same slack for each frame's working set,
:func:`release_free_memory` returns what a short-lived search freed
(glibc's ``malloc_trim``, keeping the pad) before its frames start, and
:func:`limit_arenas` keeps the arenas, each holding its pad, to one per CPU.

The settings are process-wide, so the pad is only ever raised, never
lowered, and malloc is left alone when the user tuned it (``MALLOC_*_``
variables or ``GLIBC_TUNABLES``) or when the C library is not glibc. They
change where memory comes from, never which bytes a read returns.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

__all__ = ["MAX_TOP_PAD", "keep_heap_slack", "limit_arenas", "release_free_memory"]

MAX_TOP_PAD = 32 << 20
"""The largest pad ever set: 32 MiB, kept resident at most once per malloc arena."""

_MMAP_THRESHOLD = 32 << 20
"""glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit, where its dynamic threshold stops."""

# The parameter numbers of glibc's <malloc.h>.
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_USER_TUNING = ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX")

_LOCK = threading.Lock()


class _TopPad:
    """The pad and arena cap set so far, and glibc's ``mallopt`` (None until looked up, False where unusable)."""

    pad = 0
    arenas = 0
    mallopt: Any = None


def _find_mallopt() -> Any:
    """glibc's ``mallopt``, or False where it is not glibc or the user tuned malloc."""
    if any(name in os.environ for name in _USER_TUNING) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        function = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):  # not glibc, or no such symbol
        return False
    function.argtypes = (ctypes.c_int, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


def _mallopt() -> Any:
    """:func:`_find_mallopt`'s answer, looked up once; called with ``_LOCK`` held."""
    if _TopPad.mallopt is None:
        _TopPad.mallopt = _find_mallopt()
    return _TopPad.mallopt


def keep_heap_slack(nbytes: int) -> int:
    """Make the C heap keep ``nbytes`` (at most :data:`MAX_TOP_PAD`) mapped when it trims.

    Called by every read before it allocates, with the bytes the read will
    allocate; after the first call for a size it only compares two integers.

    Args:
        nbytes: The read's working set: output, requests and decoding scratch.

    Returns:
        The pad now in force, in bytes; 0 when malloc is not glibc's or the
        user tuned it.
    """
    want = min(MAX_TOP_PAD, max(0, nbytes))
    if want <= _TopPad.pad or _TopPad.mallopt is False:
        return _TopPad.pad
    with _LOCK:
        if _mallopt() and not _TopPad.pad and _TopPad.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) != 1:
            _TopPad.mallopt = False  # a pad without the threshold would send every frame to mmap
        if _TopPad.mallopt and want > _TopPad.pad and _TopPad.mallopt(_M_TOP_PAD, want) == 1:
            _TopPad.pad = want
        return _TopPad.pad


def limit_arenas(count: int) -> int:
    """Let threads that allocate from now on share at most ``count`` malloc arenas (glibc's ``M_ARENA_MAX``).

    The pad of :func:`keep_heap_slack` stays resident in every arena, and
    glibc gives each new thread an arena of its own up to eight per CPU. A
    worker whose runner hands bundles to ever new threads (Beam's) so ends
    up holding one pad per thread it has run, more the longer it runs: a
    two-thread conversion of 73 dates of four 2048 x 2048 bands peaked 27-32
    MiB higher than one of 20 dates, and 10-19 MiB higher once the arenas were
    capped at one per CPU. Arenas that already exist are kept; the cap is only
    ever lowered. It changes where memory comes from, never what is computed.

    Returns:
        The cap now in force; 0 when malloc is not glibc's or the user tuned it.
    """
    with _LOCK:
        want = max(1, count)
        if _mallopt() and (not _TopPad.arenas or want < _TopPad.arenas) and _TopPad.mallopt(_M_ARENA_MAX, want) == 1:
            _TopPad.arenas = want
        return _TopPad.arenas


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the kernel, keeping the pad set so far (glibc's ``malloc_trim``).

    For a process that is done with a large, short-lived working set (a codec
    search) and goes on with a small one: glibc returns only the top of the
    heap by itself, so freed memory below live blocks stays resident.

    Returns:
        Whether memory was returned; False where malloc is not glibc's or the user tuned it.
    """
    with _LOCK:
        if not _mallopt():
            return False
    trim = ctypes.CDLL(None).malloc_trim
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return bool(trim(_TopPad.pad))
