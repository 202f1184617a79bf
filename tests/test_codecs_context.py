"""Tests for the per-thread compression contexts every codec family shares (spec: Frames)."""

from __future__ import annotations

import struct
import threading

import numpy as np

from rumi_core.codecs import FORMAT_VERSION, decode_frame, release_contexts
from rumi_core.codecs._context import CompressionContext, ThreadLocalCache, zl


def test_cache_builds_once_per_key_and_evicts_the_least_recently_used() -> None:
    cache: ThreadLocalCache[str, object] = ThreadLocalCache(2)
    built: list[str] = []

    def get(key: str) -> object:
        def build() -> object:
            built.append(key)
            return object()

        return cache.get(key, build)

    a = get("a")
    b = get("b")
    assert get("a") is a  # a is now the most recently used
    get("c")  # evicts b, not a
    assert get("a") is a
    assert get("b") is not b
    assert built == ["a", "b", "c", "b"]


def test_cache_entries_are_private_to_each_thread() -> None:
    cache: ThreadLocalCache[str, object] = ThreadLocalCache(4)
    here = cache.get("k", object)
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.extend([cache.get("k", object), cache.get("k", object)]))
    thread.start()
    thread.join()
    assert seen[0] is seen[1]
    assert seen[0] is not here
    assert cache.get("k", object) is here


def test_release_contexts_drops_the_calling_threads_entries_of_every_cache() -> None:
    first: ThreadLocalCache[str, object] = ThreadLocalCache(4)
    second: ThreadLocalCache[str, object] = ThreadLocalCache(4)
    a, b = first.get("k", object), second.get("k", object)
    elsewhere: list[object] = []

    def other_thread() -> None:
        elsewhere.append(first.get("k", object))
        barrier.wait()  # the main thread releases its entries
        barrier.wait()
        elsewhere.append(first.get("k", object))

    barrier = threading.Barrier(2)
    thread = threading.Thread(target=other_thread)
    thread.start()
    barrier.wait()
    release_contexts()
    barrier.wait()
    thread.join()
    assert first.get("k", object) is not a and second.get("k", object) is not b
    assert elsewhere[0] is elsewhere[1]  # another thread's contexts stay


def test_compression_context_writes_the_format_version_on_every_frame() -> None:
    compressor = zl.Compressor()
    compressor.select_starting_graph(zl.graphs.Zstd()(compressor))
    context = CompressionContext.build(compressor)
    samples = np.arange(1000, dtype="<u2")
    for _ in range(2):  # sticky parameters: the second frame reuses the graph and the format version
        frame = context.compress(samples)
        (magic,) = struct.unpack_from("<I", frame)
        assert magic - 0xD7B1A5C0 == FORMAT_VERSION
        assert decode_frame(frame, decoded_frame_bytes=samples.nbytes).view("<u2").tolist() == samples.tolist()
