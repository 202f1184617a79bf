"""Conversions to a bucket survive SIGKILL and a failing network, and end byte-identical to a clean run.

Both tests run against gcp-storage-emulator started here. The first kills a
``rumi convert`` process (SIGKILL to its process group) once it has uploaded
temporaries, and once it has published a file, then runs it again; the
second puts a proxy in front of the emulator that answers 503 to some
requests and drops the connection of others (some before forwarding, some
after the emulator has acted), so every kind of request must be retried by
google-cloud-storage's (or GDAL's) retry policy. Each time the bucket must end
with the same objects and bytes as a clean run, and no temporaries.

The codec and frame unit are pinned (``--compression raster --frame-unit 0``)
so the comparison tests the storage logic, not the measured codec choice.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from catalog.gcs import GCSSource
from pipelines.bucket import RESUMABLE_CHUNK, GCSOutput, output_store
from pipelines.convert import run
from pipelines.options import ConvertOptions
from pipelines.testing import write_series

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from catalog.testing import GCSEmulator

pytestmark = pytest.mark.slow

BUCKET = "rumi"
"""The bucket of the ``emulator`` fixture (tests/pipelines/conftest.py)."""


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("gcs-fault-scenes")
    write_series(str(directory), dates=["2023-01-05", "2023-01-25", "2023-02-14"], size=(70, 60), seed=9)
    return str(directory)


def _options(out: str) -> ConvertOptions:
    return ConvertOptions(out=out, tile_size=32, cube_period="P1M", frame_unit=0, compression="raster", write_catalog=False)


def _snapshot(prefix: str) -> dict[str, str]:
    """sha256 of every object under ``gs://rumi/<prefix>/``."""
    out: dict[str, str] = {}
    for blob in output_store().client.list_blobs(BUCKET, prefix=prefix + "/"):
        data = blob.download_as_bytes()
        name = blob.name[len(prefix) + 1 :]
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def _names(prefix: str) -> list[str]:
    return [b.name[len(prefix) + 1 :] for b in output_store().client.list_blobs(BUCKET, prefix=prefix + "/")]


@pytest.fixture(scope="module")
def clean(emulator: GCSEmulator, scenes: str) -> dict[str, str]:
    run([scenes], _options(f"gs://{BUCKET}/clean"))
    found = _snapshot("clean")
    assert sum(n.endswith(".rumi") for n in found) == 2 and not [n for n in found if n.startswith(".rumi-tmp")]
    return found


def _uploading(prefix: str) -> bool:
    return any(n.startswith(".rumi-tmp/") for n in _names(prefix))


def _published(prefix: str) -> bool:
    return any(n.endswith(".rumi") for n in _names(prefix))


@pytest.mark.parametrize("reached", [_uploading, _published], ids=["temporaries-uploaded", "file-published"])
def test_killed_then_rerun_leaves_the_bucket_as_a_clean_run(
    emulator: GCSEmulator, scenes: str, clean: dict[str, str], reached: Callable[[str], bool]
) -> None:
    prefix = f"killed-{reached.__name__.strip('_')}"
    code = "import sys; from pipelines import main; sys.exit(main())"
    command = [sys.executable, "-c", code, scenes, "--out", f"gs://{BUCKET}/{prefix}", "--tile-size", "32", "--cube-period", "P1M"]
    command += ["--frame-unit", "0", "--compression", "raster", "--no-catalog", "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    killed = False
    try:
        while process.poll() is None:
            if reached(prefix):
                os.killpg(process.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.01)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert killed, f"the run finished before {reached.__name__} was seen; the kill point was not exercised"
    subprocess.run(command, check=True, capture_output=True)
    assert _snapshot(prefix) == clean


class _FaultyProxy(ThreadingHTTPServer):
    """Forwards HTTP requests to ``upstream``; answers 503 to every ``fail_every``-th and drops every ``drop_every``-th.

    Drops alternate between before forwarding and after the upstream has acted
    (so a retried upload, compose or delete finds its work already done).
    Faults are transient: a faulted request (same method, path and ranges)
    fails ``repeats`` times in a row, then its retry goes through. Counting
    alone does not promise that once several threads send requests (two
    worker threads, the reader's decoding threads): another thread's requests
    in between can land the retry on the next multiple.
    """

    daemon_threads = True

    def __init__(self, upstream: str, *, fail_every: int, drop_every: int, repeats: int = 1) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = urlsplit(upstream).netloc
        self.fail_every = fail_every
        self.drop_every = drop_every
        self.repeats = repeats
        self.count = 0
        self.faults: dict[str, int] = {"503": 0, "drop-before": 0, "drop-after": 0}
        self.faulted: dict[tuple[str, ...], tuple[str, int]] = {}
        """Requests answered with a fault whose retry has not come yet: the fault, and how often it is still to be answered."""
        self.lock = threading.Lock()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next_fault(self, request: tuple[str, ...]) -> str | None:
        with self.lock:
            self.count += 1
            n = self.count
            if request in self.faulted:
                fault, left = self.faulted.pop(request)
                if left == 0:
                    return None
                self.faulted[request] = (fault, left - 1)
                self.faults[fault] += 1
                return fault
            fault = None
            if n % self.fail_every == 0:
                fault = "503"
            elif n % self.drop_every == 0:
                fault = "drop-before" if (n // self.drop_every) % 2 else "drop-after"
            if fault:
                self.faults[fault] += 1
                self.faulted[request] = (fault, self.repeats - 1)
            return fault


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FaultyProxy

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        fault = self.server.next_fault((self.command, self.path, self.headers.get("Range", ""), self.headers.get("Content-Range", "")))
        if fault == "503":
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "drop-before":
            self.close_connection = True
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream = http.client.HTTPConnection(self.server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        if fault == "drop-after":
            self.close_connection = True
            return
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _handle


@contextlib.contextmanager
def _proxy(upstream: str, **kwargs: int) -> Iterator[_FaultyProxy]:
    server = _FaultyProxy(upstream, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# A connection dropped in the middle of a ranged download leaves its socket to the garbage collector inside
# google-cloud-storage's retried download (requests does not close the failed response): a ResourceWarning of
# the library, not of this code, so it is not turned into an error here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_503s_and_dropped_connections_change_nothing(emulator: GCSEmulator, scenes: str, clean: dict[str, str]) -> None:
    with _proxy(emulator.host, fail_every=11, drop_every=17) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", proxy.host)
        run([scenes], _options(f"gs://{BUCKET}/faulty"))
    assert proxy.faults["503"] > 0 and proxy.faults["drop-before"] > 0 and proxy.faults["drop-after"] > 0
    assert _snapshot("faulty") == clean
    gc.collect()  # release the library's leaked sockets under this test's filter, not in a later test


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # as above
def test_a_large_object_is_uploaded_resumably_through_faults(emulator: GCSEmulator) -> None:
    data = os.urandom(2 * RESUMABLE_CHUNK + 12345)
    with _proxy(emulator.host, fail_every=3, drop_every=5) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", proxy.host)
        store = GCSOutput()
        store.write(f"gs://{BUCKET}/large/object", data)
        assert store.read(f"gs://{BUCKET}/large/object") == data
    assert proxy.count > 3 and sum(proxy.faults.values()) > 0  # several chunk requests, some failed and were retried
    gc.collect()  # as above


def test_a_range_that_fails_twice_in_a_row_is_read_on_its_third_attempt(emulator: GCSEmulator) -> None:
    """GCSSource asks again after growing pauses: every third download answers 503 twice, and every range still comes back."""
    data = os.urandom(4096)
    GCSOutput().write(f"gs://{BUCKET}/ranges/object", data)
    with _proxy(emulator.host, fail_every=3, drop_every=10**9, repeats=2) as proxy, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", proxy.host)
        source = GCSSource(f"gs://{BUCKET}/ranges/object", size=len(data))
        ranges = [(i * 256, 256) for i in range(8)]
        with source.deadline(30):
            assert source.read_ranges(ranges) == [data[o : o + n] for o, n in ranges]
    assert proxy.faults["503"] >= 4  # at least two ranges failed twice each
