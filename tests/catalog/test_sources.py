"""One conformance suite for every byte-range source: local, HTTP and GCS."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner

import rumi_core
from catalog.errors import StorageError
from catalog.gcs import GCSSource
from catalog.http import HTTPRangeSource, parse_content_range
from catalog.storage import Storage, join_href
from rumi_core.cli.main import cli
from rumi_core.errors import SourceError
from rumi_core.sources import ByteSource, LocalFileSource

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from catalog.testing import GCSEmulator, RangeRequestServer

PAYLOAD = bytes(range(256)) * 40  # 10240 bytes


class SourceConformance:
    """What every ByteSource must do; subclasses provide ``open_source`` for one backend."""

    @pytest.fixture
    def open_source(self) -> Callable[[str, bytes], ByteSource]:
        raise NotImplementedError

    @pytest.fixture
    def missing(self) -> Callable[[], ByteSource]:
        raise NotImplementedError

    def test_is_a_byte_source(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        assert isinstance(src, ByteSource)
        assert "p.bin" in src.name

    def test_size(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        assert open_source("p.bin", PAYLOAD).size() == len(PAYLOAD)

    def test_ranges_in_order(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        ranges = [(0, 1), (100, 250), (5000, 17), (10239, 1)]
        assert src.read_ranges(ranges) == [PAYLOAD[o : o + n] for o, n in ranges]

    def test_range_past_the_end_comes_back_short(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        assert src.read_ranges([(10200, 100)]) == [PAYLOAD[10200:]]

    def test_a_range_of_a_terabyte_comes_back_as_what_the_file_holds(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        # Neither allocated up front nor an OverflowError: a corrupt blob may ask for any length.
        src = open_source("p.bin", PAYLOAD)
        assert src.read_ranges([(10000, 1 << 40), (0, 16)]) == [PAYLOAD[10000:], PAYLOAD[:16]]

    def test_range_after_the_end_is_empty(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        assert src.read_ranges([(20000, 10)]) == [b""]

    def test_concurrent_reads(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        results: dict[int, bytes] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                (results[i],) = src.read_ranges([(i * 97, 300)])
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert all(results[i] == PAYLOAD[i * 97 : i * 97 + 300] for i in range(12))

    def test_a_pickled_source_reads_alike(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        """For DataLoader workers and dask's process schedulers: a copy holds no descriptor, lock, pool or client of ours."""
        import pickle

        src = open_source("p.bin", PAYLOAD)
        src.read_ranges([(0, 4)])
        copy = pickle.loads(pickle.dumps(src))
        src.close()
        assert copy.name == src.name and copy.read_ranges([(5000, 17)]) == [PAYLOAD[5000:5017]]
        with copy:
            assert copy.size() == len(PAYLOAD)

    def test_negative_range_is_a_source_error(self, open_source: Callable[[str, bytes], ByteSource]) -> None:
        src = open_source("p.bin", PAYLOAD)
        with pytest.raises(SourceError, match="negative range"):
            src.read_ranges([(-5, 10)])

    def test_missing_object_is_a_source_error(self, missing: Callable[[], ByteSource]) -> None:
        with pytest.raises(SourceError, match="missing"):
            src = missing()
            src.read_ranges([(0, 10)])

    def test_stateless_read_of_a_cube(self, open_source: Callable[[str, bytes], ByteSource], cube: Any) -> None:
        src = open_source("cube.rumi", cube.path.read_bytes())
        got = rumi_core.read(src, cube.blob, bands=[3, 1], times=[2], window=((30, 70), (40, 100)), threads=4)
        np.testing.assert_array_equal(got, cube.data[[2]][:, [3, 1], 30:70, 40:100])


class TestLocalSource(SourceConformance):
    @pytest.fixture
    def open_source(self, tmp_path: Path) -> Callable[[str, bytes], ByteSource]:
        def make(name: str, data: bytes) -> ByteSource:
            (tmp_path / name).write_bytes(data)
            return Storage().open(tmp_path / name)

        return make

    @pytest.fixture
    def missing(self, tmp_path: Path) -> Callable[[], ByteSource]:
        return lambda: Storage().open(tmp_path / "missing.bin")

    def test_storage_gives_rumi_core_local_source(self, tmp_path: Path) -> None:
        (tmp_path / "a").write_bytes(b"x")
        assert isinstance(Storage().open(tmp_path / "a"), LocalFileSource)


class TestHTTPSource(SourceConformance):
    @pytest.fixture
    def open_source(self, tmp_path: Path, server: RangeRequestServer) -> Callable[[str, bytes], ByteSource]:
        def make(name: str, data: bytes) -> ByteSource:
            (tmp_path / name).write_bytes(data)
            return Storage().open(server.url(name))

        return make

    @pytest.fixture
    def missing(self, server: RangeRequestServer) -> Callable[[], ByteSource]:
        return lambda: HTTPRangeSource(server.url("missing.bin"))

    def test_one_get_per_range_and_no_size_request(self, tmp_path: Path, server: RangeRequestServer) -> None:
        (tmp_path / "p.bin").write_bytes(PAYLOAD)
        src = HTTPRangeSource(server.url("p.bin"))
        src.read_ranges([(0, 10), (50, 10), (9000, 2000)])
        assert [(r.method, r.range) for r in server.served] == [
            ("GET", "bytes=0-9"),
            ("GET", "bytes=50-59"),
            ("GET", "bytes=9000-10999"),
        ]
        assert server.bytes_sent() == 10 + 10 + 1240
        assert src.size() == len(PAYLOAD)  # learnt from Content-Range, no HEAD
        assert server.requests() == 3

    def test_size_is_one_head(self, tmp_path: Path, server: RangeRequestServer) -> None:
        (tmp_path / "p.bin").write_bytes(PAYLOAD)
        assert HTTPRangeSource(server.url("p.bin")).size() == len(PAYLOAD)
        assert [r.method for r in server.served] == ["HEAD"]

    def test_a_server_that_ignores_ranges_is_refused(self, tmp_path: Path) -> None:
        import http.server
        import socketserver

        (tmp_path / "p.bin").write_bytes(PAYLOAD)

        class Plain(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(tmp_path), **kwargs)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def send_head(self) -> Any:
                # Pretend Range does not exist, like some simple servers.
                if "Range" in self.headers:
                    del self.headers["Range"]
                return super().send_head()

        with socketserver.TCPServer(("127.0.0.1", 0), Plain) as httpd:
            thread = threading.Thread(target=httpd.serve_forever, daemon=True)
            thread.start()
            try:
                port = httpd.server_address[1]
                with pytest.raises(StorageError, match="ignored 'Range"):
                    HTTPRangeSource(f"http://127.0.0.1:{port}/p.bin").read_ranges([(0, 10)])
            finally:
                httpd.shutdown()

    def test_not_an_http_url(self) -> None:
        with pytest.raises(StorageError, match="not an http"):
            HTTPRangeSource("ftp://example.org/x")

    def test_parse_content_range(self) -> None:
        assert parse_content_range("bytes 0-9/100") == (0, 9, 100)
        assert parse_content_range("bytes 0-9/*") == (0, 9, None)
        assert parse_content_range("nonsense") == (None, None, None)


class TestGCSSource(SourceConformance):
    @pytest.fixture
    def open_source(self, tmp_path: Path, gcs_upload: Callable[[Path, str], str]) -> Callable[[str, bytes], ByteSource]:
        def make(name: str, data: bytes) -> ByteSource:
            (tmp_path / name).write_bytes(data)
            return Storage().open(gcs_upload(tmp_path / name, f"{tmp_path.name}/{name}"))

        return make

    @pytest.fixture
    def missing(self, gcs: GCSEmulator) -> Callable[[], ByteSource]:
        return lambda: GCSSource(f"gs://{gcs.bucket}/missing.bin")

    def test_malformed_url(self) -> None:
        with pytest.raises(StorageError, match="names a bucket and an object"):
            GCSSource("gs://only-a-bucket")

    def test_whole_object(self, tmp_path: Path, gcs_upload: Callable[[Path, str], str]) -> None:
        (tmp_path / "w.bin").write_bytes(PAYLOAD)
        url = gcs_upload(tmp_path / "w.bin", f"{tmp_path.name}/w.bin")
        assert Storage().read(url) == PAYLOAD


def test_join_href() -> None:
    assert join_href("http://h/a/b/item.json", "../c.rumi") == "http://h/a/c.rumi"
    assert join_href("gs://b/a/item.json", "./c.rumi") == "gs://b/a/c.rumi"
    assert join_href("/data/stac/item.json", "../x.rumi") == "/data/x.rumi"
    assert join_href("/data/stac/item.json", "https://h/x.rumi") == "https://h/x.rumi"


def test_storage_read_missing_local(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot read"):
        Storage().read(tmp_path / "nothing.json")


def test_a_local_range_read_in_several_short_reads_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 40)
    real_pread = os.pread
    # A filesystem that answers 1000 bytes at most per read.
    monkeypatch.setattr(os, "pread", lambda fd, n, offset: real_pread(fd, min(n, 1000), offset))
    with LocalFileSource(path) as source:
        whole, tail, past = source.read_ranges([(5, 9000), (10000, 500), (20000, 10)])
    assert whole == path.read_bytes()[5:9005] and tail == path.read_bytes()[10000:] and past == b""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_local_path_that_is_not_a_file_is_refused_as_it_opens(tmp_path: Path) -> None:
    """A named pipe given as a file made ``rumi info`` wait for a writer forever; a directory failed on its first read."""
    os.mkfifo(tmp_path / "pipe.rumi")
    (tmp_path / "dir.rumi").mkdir()
    for name, kind in (("pipe.rumi", "a named pipe"), ("dir.rumi", "a directory")):
        with pytest.raises(SourceError, match=f"cannot open .*{name}: it is {kind}, not a file"):
            LocalFileSource(tmp_path / name)
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "pipe.rumi")])
    assert result.exit_code == 1 and "it is a named pipe, not a file" in result.output and result.exc_info[0] is SystemExit


def test_readers_dropped_unclosed_give_their_file_descriptors_back(cube: Any) -> None:
    """A Cube, an xarray dataset or a ``rumi_core.open`` dataset that is never closed held its file's descriptor until the
    process ended: a service opening one per request ran out of descriptors. Collected, they close it, as file objects do."""
    import gc

    import xarray as xr

    from catalog.cube import Cube

    def open_files() -> int:
        return sum(os.path.realpath(f"/proc/self/fd/{fd}") == str(cube.path.resolve()) for fd in os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to count descriptors")
    for _ in range(50):
        Cube.open(cube.path)
        rumi_core.open(cube.path)
        xr.open_dataset(cube.path, engine="rumi")
    gc.collect()
    assert open_files() == 0


def test_an_objects_version_changes_when_it_is_rewritten(tmp_path: Path) -> None:
    """What a re-run of ``rumi convert`` compares to tell an input rewritten in place: HTTP's ETag, one HEAD with the size."""
    from catalog.http import HTTPRangeSource
    from catalog.testing import RangeRequestServer

    (tmp_path / "scene.tif").write_bytes(b"first version")
    with RangeRequestServer(tmp_path) as server:
        source = HTTPRangeSource(server.url("scene.tif"))
        assert source.size() == 13
        before = source.version()
        assert before is not None and before.startswith("etag:")
        assert server.requests("scene.tif") == 1
        (tmp_path / "scene.tif").write_bytes(b"other version")
        os.utime(tmp_path / "scene.tif", ns=(1, 1))
        assert HTTPRangeSource(server.url("scene.tif")).version() not in (None, before)


def test_forked_children_read_over_http_on_connections_of_their_own(cube: Any, server: RangeRequestServer) -> None:
    """Children forked after the parent had read over HTTP (DataLoader workers) shared its keep-alive sockets and took
    each other's answers: "asked for bytes X, got Content-Range Y", or a wait to the deadline."""
    import warnings

    from catalog.cube import Cube

    dataset = rumi_core.open(server.url("cube.rumi"), cube.blob)
    opened = Cube.open(server.url("cube.rumi"))
    assert np.array_equal(dataset.read(times=[0], bands=[0]), cube.data[[0]][:, [0]])
    opened.read(window=((0, 8), (0, 8)))
    children = []
    for k in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the range server's threads: this child uses none of them
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's outcome is its exit status
            status = 1
            try:
                same = all(
                    np.array_equal(dataset.read(times=[(i + k) % 3], bands=[i % 4]), cube.data[[(i + k) % 3]][:, [i % 4]])
                    and np.array_equal(
                        opened.read(times=[i % 3], window=((0, 64), (0, 48)), timeout=20).data, cube.data[[i % 3], :, :64, :48]
                    )
                    for i in range(6)
                )
                status = 0 if same else 3
            finally:
                os._exit(status)
        children.append(pid)
    for i in range(6):
        assert np.array_equal(dataset.read(times=[i % 3]), cube.data[[i % 3]])
    assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children] == [0, 0, 0]


def test_a_storage_error_survives_pickling_and_re_creation_from_its_message() -> None:
    """PyTorch re-raises a DataLoader worker's exception as ``type(err)(message)``, and multiprocessing and dask pickle
    it: both failed on the keyword-only ``href``, so a worker's StorageError reached the loop as a bare RuntimeError."""
    import pickle

    err = StorageError("HEAD did not succeed", href="https://example.org/a.rumi?X-Goog-Signature=secret", status=503)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is StorageError and str(copy) == str(err) == "https://example.org/a.rumi: HEAD did not succeed (HTTP 503)"
    assert (copy.href, copy.status) == (err.href, 503) and isinstance(copy, OSError)
    again = StorageError("Caught StorageError in DataLoader worker process 0.\nOriginal Traceback ...")
    assert str(again).startswith("Caught StorageError") and again.href is None
