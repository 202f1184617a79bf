"""Remote reads under failing servers: one deadline per read, one retry per range, strict Content-Range.

The server is real (catalog.testing.RangeRequestServer on 127.0.0.1) and
misbehaves on purpose (``Fault``): it stays silent, drips one byte at a time,
answers 503, or sends a short range whose Content-Range matches it. The
assertions are about outcomes and requests counted by the server, never about
elapsed time.
"""

from __future__ import annotations

import math
import re
import struct
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from click.testing import CliRunner

import rumi_core
from catalog.cube import Cube
from catalog.errors import StorageError
from catalog.http import HTTPRangeSource
from catalog.storage import Storage
from catalog.testing import Fault
from rumi_core.cli.main import cli
from rumi_core.errors import HeaderMismatchError, InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from catalog.testing import RangeRequestServer


def range_requests(server: RangeRequestServer) -> Counter[str]:
    """How many times each range of the file was asked for."""
    return Counter(r.range or "" for r in server.served if r.method == "GET" and r.range)


@pytest.fixture
def spread(tmp_path: Path, make_cube: Callable[..., Any]) -> Any:
    """A cube whose band 0 and band 3 frames are far apart: a read of both makes several requests."""
    return make_cube(tmp_path, frame_unit=0)


@pytest.mark.parametrize("fault", [Fault("silent"), Fault("drip", interval=0.2)], ids=["silent", "drip"])
def test_a_stalled_server_ends_the_read_at_its_deadline(spread: Any, server: RangeRequestServer, fault: Fault) -> None:
    server.inject(fault)
    with pytest.raises(StorageError, match=r"did not finish within the read's 1 s deadline"):
        rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0, 3], threads=4, timeout=1)
    # The deadline is the read's, not each request's: nothing was asked twice.
    asked = range_requests(server)
    assert asked and max(asked.values()) == 1


def test_a_failing_range_is_retried_three_times_per_read_not_per_thread(spread: Any, server: RangeRequestServer) -> None:
    server.inject(Fault("status", status=503))
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"failed \(retried 3 times\).*\(HTTP 503\)"):
        rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0, 3], threads=4, timeout=30)
    assert time.monotonic() - started >= 0.5 + 1 + 2  # the pauses between the attempts
    asked = range_requests(server)
    assert max(asked.values()) == 4
    assert sum(asked.values()) <= 4 * 4  # at most one failing range per thread, each asked four times


def test_a_pause_that_would_pass_the_deadline_is_not_taken(spread: Any, server: RangeRequestServer) -> None:
    """With 1.5 s the first pause (0.5 s) fits and the second (1 s) does not: the range is asked twice, and the read fails
    in time. (1.5 s, not 1 s: on a loaded machine the first answer alone took the half second 1 s left to spare.)"""
    server.inject(Fault("status", status=503))
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"failed \(retried once; another would pass the read's 1.5 s deadline\).*\(HTTP 503\)"):
        rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0], threads=1, timeout=1.5)
    assert time.monotonic() - started < 1.5
    assert max(range_requests(server).values()) == 2


def test_a_flaky_server_fails_no_read(spread: Any, server: RangeRequestServer) -> None:
    """Two failures in a row on one range, a CDN's passing 502s: the read waits them out and returns every pixel."""
    server.inject(Fault("status", status=502, times=2))
    out = rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0, 3], threads=1, timeout=30)
    np.testing.assert_array_equal(out, spread.data[:, [0, 3]])
    assert sorted(range_requests(server).values())[-1] == 3


def test_a_range_that_fails_once_succeeds_on_its_retry(spread: Any, server: RangeRequestServer) -> None:
    server.inject(Fault("status", status=503, times=1))
    out = rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0, 3], threads=1, timeout=30)
    np.testing.assert_array_equal(out, spread.data[:, [0, 3]])
    assert sorted(range_requests(server).values())[-1] == 2


def test_a_short_but_consistent_content_range_is_a_storage_error(spread: Any, server: RangeRequestServer) -> None:
    server.inject(Fault("short"))
    size = spread.path.stat().st_size
    with pytest.raises(StorageError, match=rf"a short answer although the file is {size} bytes"):
        rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), spread.blob, bands=[0], threads=1)


def test_a_range_at_the_end_of_the_file_may_be_short(spread: Any, server: RangeRequestServer) -> None:
    size = spread.path.stat().st_size
    source = HTTPRangeSource(server.url("cube.rumi"))
    assert source.read_ranges([(size - 10, 100)]) == [spread.path.read_bytes()[-10:]]
    assert source.known_size() == size


def test_a_cube_read_takes_a_timeout(spread: Any, server: RangeRequestServer) -> None:
    with Cube.open(server.url("cube.rumi")) as cube:
        server.inject(Fault("silent"))
        with pytest.raises(StorageError, match="deadline"):
            cube.read(bands=[0], times=[0], threads=2, timeout=1)
        server.inject(None)
        np.testing.assert_array_equal(cube.read(bands=[0], times=[0], timeout=30).data, spread.data[[0]][:, [0]])


def test_an_infinite_timeout_is_none_and_a_nan_one_is_refused(spread: Any, server: RangeRequestServer) -> None:
    """``inf`` waits as long as a read takes (urllib3 failed on it with OverflowError: timestamp out of range); NaN, 0 and
    a text are refused naming the value (NaN was urllib3's ValueError)."""
    with Cube.open(server.url("cube.rumi"), storage=Storage(timeout=math.inf)) as cube:
        np.testing.assert_array_equal(cube.read(bands=[0], times=[0], timeout=math.inf).data, spread.data[[0]][:, [0]])
        np.testing.assert_array_equal(
            rumi_core.read(server.url("cube.rumi"), bands=[0], times=[0], timeout=math.inf), spread.data[[0]][:, [0]]
        )
        for bad in (math.nan, 0, "5"):
            with pytest.raises(InvalidInputError, match=re.escape(f"timeout is a number of seconds above 0 (inf for none), got {bad!r}")):
                cube.read(bands=[0], times=[0], timeout=bad)  # type: ignore[arg-type]


def test_rumi_read_and_export_take_timeout_seconds(spread: Any, server: RangeRequestServer, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    server.inject(Fault("silent"))
    result = CliRunner().invoke(cli, ["read", server.url("cube.rumi"), "--bands", "0", "--timeout", "1", "-o", str(out)])
    assert result.exit_code == 1
    assert "did not finish within the read's 1 s deadline" in result.output
    assert not out.exists()
    result = CliRunner().invoke(cli, ["export", server.url("cube.rumi"), "--timeout", "1", "-o", str(tmp_path / "x.tif")])
    assert result.exit_code == 1 and "deadline" in result.output


@pytest.mark.parametrize("command", ["read", "export"])
def test_a_commands_deadline_is_named_as_given_however_long_the_blob_took(spread: Any, tmp_path: Path, command: str) -> None:
    """The frames' requests end at the command's deadline, and the message names ``--timeout`` as the user gave it:
    after a blob that took 0.6 s it said "the read's 1.4 s deadline", a number that moved with the server's pace."""
    from catalog.testing import RangeRequestServer

    out = tmp_path / ("out.npy" if command == "read" else "out.tif")
    with RangeRequestServer(spread.path.parent, latency=0.6) as slow:
        slow.inject(Fault("silent"))
        result = CliRunner().invoke(cli, [command, slow.url(spread.path.name), "--timeout", "2", "-o", str(out)])
    assert result.exit_code == 1
    assert "did not finish within the read's 2 s deadline" in result.output
    assert not out.exists()
    for command in ("read", "export", "info"):
        assert "--timeout SECONDS" in CliRunner().invoke(cli, [command, "--help"]).output
    local = CliRunner().invoke(cli, ["info", str(spread.path), "--timeout", "5", "--json"])
    assert local.exit_code == 0, local.output


def test_a_remote_blob_claiming_millions_of_frames_is_refused_after_one_head(spread: Any, server: RangeRequestServer) -> None:
    """2**24 one-byte frames of a 4096 x 4096 image: the file cannot hold them, and one HEAD tells so before any loop."""
    blob = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, 4096, 4096, 1, 1, 1, 1, 8, 1, 0, 1, 0)
    with pytest.raises(HeaderMismatchError, match="end of the last frame"):
        rumi_core.read(HTTPRangeSource(server.url("cube.rumi")), blob, threads=1)
    assert [r.method for r in server.served] == ["HEAD"]


def test_a_whole_object_read_with_a_timeout_is_asked_once() -> None:
    """A timeout given (``--timeout``) is the whole budget: a server that accepts and never answers is asked once,
    not once more per retry of the pool (the connections it accepted are counted)."""
    import socket
    import threading

    from catalog.http import read_url

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def hold() -> None:
        while not done.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        with pytest.raises(StorageError, match=r"x\.rumih: GET got no answer within 1 s"):
            read_url(f"http://127.0.0.1:{listener.getsockname()[1]}/x.rumih", timeout=1)
    finally:
        done.set()
        thread.join()
        listener.close()
        for connection in accepted:
            connection.close()
    assert len(accepted) == 1
