"""HTTP reads under servers that ask for a pause, stay silent or want credentials.

The server is a small real one on 127.0.0.1 (``ScriptedServer``): it gives the
answers a test scripts for its first requests, then serves its bytes, and logs
every request with the time it arrived. Assertions are about that log
(how many requests, how far apart, which headers), with generous margins,
never about tight wall-clock bounds.
"""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import pytest

import catalog.deadlines
import catalog.http
from catalog.errors import StorageError
from catalog.http import HTTPRangeSource, read_url

if TYPE_CHECKING:
    from collections.abc import Iterator

BODY = bytes(range(256)) * 4


@dataclass(frozen=True)
class Answer:
    """A scripted answer: a status with headers and no body, (``silent``) none at all, (``drip``) the whole
    ``BODY`` with status 200, one byte every ``drip`` seconds, or (``cut``) status 200 with the whole ``BODY``'s
    length and only its first ``cut`` bytes before the connection closes."""

    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    silent: bool = False
    drip: float | None = None
    cut: int | None = None


@dataclass(frozen=True)
class Seen:
    """A request as the server received it."""

    method: str
    at: float
    """``time.monotonic()`` when its headers had arrived."""
    authorization: str | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """Stay quiet."""

    def _answer(self) -> None:
        answer = self.server.next_answer(Seen(self.command, time.monotonic(), self.headers.get("Authorization")))
        if answer is not None and answer.silent:
            self.server.stopping.wait()
            self.close_connection = True
            return
        if answer is not None and (answer.drip is not None or answer.cut is not None):
            # The whole body announced; then a byte at a time (drip), or its first bytes only (cut).
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            pieces = [BODY[i : i + 1] for i in range(len(BODY))] if answer.drip is not None else [BODY[: answer.cut]]
            for piece in pieces:
                if answer.drip is not None and self.server.stopping.wait(answer.drip):
                    break
                self.wfile.write(piece)
                self.wfile.flush()
            self.close_connection = True
            return
        if answer is not None:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, headers, body = self._content()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(BODY) if self.command == "HEAD" else len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def _content(self) -> tuple[int, dict[str, str], bytes]:
        asked = self.headers.get("Range")
        if asked is None:
            return 200, {}, BODY
        first, last = (int(n) for n in asked.removeprefix("bytes=").split("-"))
        last = min(last, len(BODY) - 1)
        return 206, {"Content-Range": f"bytes {first}-{last}/{len(BODY)}"}, BODY[first : last + 1]

    do_GET = _answer
    do_HEAD = _answer


class ScriptedServer(ThreadingHTTPServer):
    """Answer the first requests as scripted, then serve ``BODY`` (with ``Range`` support) to any path."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[Answer] = []
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    def next_answer(self, request: Seen) -> Answer | None:
        with self._lock:
            self.seen.append(request)
            return self.script.pop(0) if self.script else None

    def url(self, name: str = "x.rumi", userinfo: str = "") -> str:
        return f"http://{userinfo}127.0.0.1:{self.server_address[1]}/{name}"

    def gaps(self) -> list[float]:
        """Seconds between consecutive requests."""
        return [b.at - a.at for a, b in zip(self.seen, self.seen[1:], strict=False)]


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def pause(status: int, seconds: str = "1") -> Answer:
    return Answer(status, {"Retry-After": seconds})


@pytest.mark.parametrize("status", [429, 503])
def test_a_range_waits_as_long_as_the_server_asks_each_time(scripted: ScriptedServer, status: int) -> None:
    """Two answers asking for a second's pause, then the bytes: each retry comes after the pause, and the read succeeds."""
    scripted.script = [pause(status), pause(status)]
    assert HTTPRangeSource(scripted.url(), timeout=30).read_range(10, 20) == BODY[10:30]
    assert [r.method for r in scripted.seen] == ["GET"] * 3
    assert min(scripted.gaps()) >= 0.9


def test_a_head_waits_as_the_server_asks(scripted: ScriptedServer) -> None:
    scripted.script = [pause(503), pause(429)]
    assert HTTPRangeSource(scripted.url(), timeout=30).size() == len(BODY)
    assert [r.method for r in scripted.seen] == ["HEAD"] * 3
    assert min(scripted.gaps()) >= 0.9


def test_a_pause_past_the_deadline_fails_at_once(scripted: ScriptedServer) -> None:
    """Waiting 600 s would pass the read's 20 s deadline: the read fails without sleeping or asking again."""
    scripted.script = [pause(503, "600")]
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"the server asked to retry in 600 s, past the read's 20 s deadline \(HTTP 503\)"):
        HTTPRangeSource(scripted.url(), timeout=20).read_range(0, 10)
    assert time.monotonic() - started < 15
    assert len(scripted.seen) == 1


def test_a_server_that_keeps_asking_is_asked_a_bounded_number_of_times(scripted: ScriptedServer) -> None:
    scripted.script = [pause(503, "0")] * 10
    with pytest.raises(StorageError, match=r"failed \(retried 6 times\) \(HTTP 503\)"):
        HTTPRangeSource(scripted.url(), timeout=30).read_range(0, 10)
    assert len(scripted.seen) == 7  # three pauses as asked, then the three retries of any failure


def test_a_silent_server_holds_a_whole_object_read_for_one_default_timeout(
    scripted: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no timeout given, the default one is the whole budget: a wait for data that used it up is not tried again."""
    monkeypatch.setattr(catalog.deadlines, "DEFAULT_TIMEOUT", 2.0)
    scripted.script = [Answer(silent=True)] * 4
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"x\.rumi: GET got no answer within 2 s"):
        read_url(scripted.url())
    assert len(scripted.seen) == 1
    assert time.monotonic() - started < 60


def test_a_whole_object_read_from_a_dripping_server_ends_at_its_timeout(scripted: ScriptedServer) -> None:
    """A byte every 0.05 s would take 51 s for the whole body; each byte restarts a socket timeout, the deadline does not."""
    scripted.script = [Answer(drip=0.05)]
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"x\.rumi: GET did not finish within 1 s"):
        read_url(scripted.url(), timeout=1)
    assert time.monotonic() - started < 10
    assert len(scripted.seen) == 1


def test_a_whole_object_read_is_asked_again_when_its_connection_breaks_off_mid_body(scripted: ScriptedServer) -> None:
    """A body cut short by a reset or a restarting server failed the read (an item, a blob) at once; ranges retried."""
    scripted.script = [Answer(cut=100), Answer(cut=700)]
    assert read_url(scripted.url(), timeout=30) == BODY
    assert len(scripted.seen) == 3


def test_a_whole_object_read_that_always_breaks_off_fails_after_the_pools_retries(scripted: ScriptedServer) -> None:
    scripted.script = [Answer(cut=100)] * 10
    with pytest.raises(StorageError, match=r"x\.rumi: GET failed while reading the body: .* \(retried 3 times\)$"):
        read_url(scripted.url(), timeout=30)
    assert len(scripted.seen) == 4  # default_pool's Retry(total=3)


def test_a_whole_object_read_waits_as_the_server_asks(scripted: ScriptedServer) -> None:
    scripted.script = [pause(503), pause(429)]
    assert read_url(scripted.url(), timeout=30) == BODY
    assert len(scripted.seen) == 3
    assert min(scripted.gaps()) >= 0.9


def test_a_whole_object_read_fails_at_once_on_a_pause_past_its_timeout(scripted: ScriptedServer) -> None:
    scripted.script = [pause(503, "8")] * 4
    with pytest.raises(StorageError, match=r"the server asked to retry in 8 s, past the 2 s timeout \(HTTP 503\)"):
        read_url(scripted.url(), timeout=2)
    assert len(scripted.seen) == 1


def basic(userinfo: str) -> str:
    return "Basic " + base64.b64encode(userinfo.encode()).decode()


def test_a_urls_userinfo_is_sent_as_basic_credentials(scripted: ScriptedServer) -> None:
    """``user:password@`` is percent-decoded into ``Authorization: Basic``, for ranges, sizes and whole objects alike."""
    url = scripted.url(userinfo="alice:s%40cr%C3%A9t@")
    source = HTTPRangeSource(url)
    assert source.size() == len(BODY)  # a HEAD, before any range tells the size
    assert source.read_range(0, 4) == BODY[:4]
    assert read_url(url) == BODY
    assert [r.authorization for r in scripted.seen] == [basic("alice:s@cr\u00e9t")] * 3


def test_an_authorization_header_given_wins_over_userinfo(scripted: ScriptedServer) -> None:
    url = scripted.url(userinfo="alice:secret@")
    HTTPRangeSource(url, headers={"authorization": "Bearer t"}).read_range(0, 4)
    read_url(url, headers={"Authorization": "Bearer t"})
    assert [r.authorization for r in scripted.seen] == ["Bearer t"] * 2


def test_a_url_without_userinfo_sends_no_credentials(scripted: ScriptedServer) -> None:
    HTTPRangeSource(scripted.url()).read_range(0, 4)
    read_url(scripted.url())
    assert [r.authorization for r in scripted.seen] == [None, None]
