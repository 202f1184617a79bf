"""A local HTTP server with range requests that counts what it serves."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from catalog.testing._background import BackgroundServer

if TYPE_CHECKING:
    import os


_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class ServedRequest:
    """One request the server answered."""

    method: str
    path: str
    """URL path, without the query."""
    range: str | None
    """The ``Range`` header, if any."""
    status: int
    body_bytes: int
    """Bytes of body sent."""


@dataclass
class Fault:
    """A misbehaviour of the server's answers to range requests, for tests of remote reads.

    ``kind`` is one of:

    * ``"silent"``: accept the request and never answer;
    * ``"drip"``: answer ``206`` with correct headers, then send one body byte
      every ``interval`` seconds;
    * ``"status"``: answer ``status`` with an empty body;
    * ``"short"``: answer fewer bytes than asked, with a ``Content-Range``
      that matches them (consistent, but the file does not end there).
    * ``"drop"``: close the connection without an answer, as a store's front
      end dropping it does (libcurl: "Empty reply from server").

    ``times`` is how many range requests misbehave (None: every one).
    """

    kind: str
    status: int = 503
    interval: float = 0.5
    times: int | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        """Stay quiet."""

    def _file(self) -> Path | None:
        rel = unquote(urlsplit(self.path).path).lstrip("/")
        root = self.server.root
        path = (root / rel).resolve()
        if root not in path.parents and path != root:
            return None
        return path if path.is_file() else None

    def _send(self, status: int, headers: dict[str, str], body: bytes, *, head: bool = False) -> None:
        if self.server.latency:
            time.sleep(self.server.latency)
        # Recorded before anything is sent, so a client never sees an answer the count misses.
        self.server.record(
            ServedRequest(self.command, urlsplit(self.path).path, self.headers.get("Range"), status, 0 if head else len(body))
        )
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)) if not head else headers.get("X-Length", str(len(body))))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        path = self._file()
        if path is None:
            self._send(404, {}, b"", head=True)
            return
        stat = path.stat()
        # An ETag as object stores (S3, GCS) and web servers give one: it changes when the file is rewritten.
        etag = f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"'
        self._send(200, {"Accept-Ranges": "bytes", "X-Length": str(stat.st_size), "ETag": etag}, b"", head=True)

    def do_GET(self) -> None:
        path = self._file()
        if path is None:
            self._send(404, {"Content-Type": "text/plain"}, b"not found")
            return
        size = path.stat().st_size
        header = self.headers.get("Range")
        if header is None:
            self._send(200, {"Accept-Ranges": "bytes"}, path.read_bytes())
            return
        m = _RANGE.match(header.strip())
        if m is None or (not m.group(1) and not m.group(2)):
            self._send(416, {"Content-Range": f"bytes */{size}"}, b"")
            return
        if m.group(1):
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        else:  # suffix range: the last n bytes
            start = max(0, size - int(m.group(2)))
            end = size - 1
        if start >= size or end < start:
            self._send(416, {"Content-Range": f"bytes */{size}"}, b"")
            return
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(end - start + 1)
        fault = self.server.take_fault()
        if fault is not None:
            self._misbehave(fault, start, end, size, body)
            return
        self._send(206, {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{end}/{size}"}, body)

    def _misbehave(self, fault: Fault, start: int, end: int, size: int, body: bytes) -> None:
        if fault.kind == "status":
            self._send(fault.status, {}, b"")
        elif fault.kind == "short":
            cut = max(1, len(body) // 2)
            self._send(206, {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{start + cut - 1}/{size}"}, body[:cut])
        elif fault.kind == "drop":
            self.server.record(ServedRequest(self.command, urlsplit(self.path).path, self.headers.get("Range"), 0, 0))
            self.close_connection = True
        elif fault.kind == "silent":
            self.server.record(ServedRequest(self.command, urlsplit(self.path).path, self.headers.get("Range"), 0, 0))
            self.server.stopping.wait()
        elif fault.kind == "drip":
            self.server.record(ServedRequest(self.command, urlsplit(self.path).path, self.headers.get("Range"), 206, 0))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    if self.server.stopping.wait(fault.interval):
                        return
            except OSError:  # the client gave up
                return
        else:
            raise ValueError(f"unknown fault {fault.kind!r}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, latency: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.latency = latency
        self.served: list[ServedRequest] = []
        self._lock = threading.Lock()
        self.fault: Fault | None = None
        self.stopping = threading.Event()

    def record(self, request: ServedRequest) -> None:
        with self._lock:
            self.served.append(request)

    def take_fault(self) -> Fault | None:
        with self._lock:
            fault = self.fault
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self.fault = None
            return fault


class RangeRequestServer(BackgroundServer[_Server]):
    """Serve a directory over HTTP/1.1 on 127.0.0.1 with ``Range`` support, counting requests and bytes.

    Use as a context manager; :meth:`url` gives the URL of a file under the
    root, :attr:`served` every request answered. ``latency`` seconds are
    waited before each answer, as object storage's first byte takes (for
    benchmarks; requests on separate connections wait concurrently).

    Example:
        >>> import tempfile, pathlib, urllib.request
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.bin").write_bytes(b"0123456789")
        >>> with RangeRequestServer(root) as server:
        ...     req = urllib.request.Request(server.url("a.bin"), headers={"Range": "bytes=2-4"})
        ...     urllib.request.urlopen(req).read(), server.requests("a.bin"), server.bytes_sent("a.bin")
        (b'234', 1, 3)
    """

    def __init__(self, root: str | os.PathLike[str], *, latency: float = 0.0) -> None:
        super().__init__(_Server(Path(root).resolve(), latency), "rumi-range-server")

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def url(self, relpath: str) -> str:
        """URL of a file under the root."""
        return self.base_url + relpath.lstrip("/")

    @property
    def served(self) -> list[ServedRequest]:
        """Every request answered so far, in order."""
        with self._server._lock:
            return list(self._server.served)

    def _matching(self, relpath: str | None) -> list[ServedRequest]:
        if relpath is None:
            return self.served
        want = "/" + relpath.lstrip("/")
        return [r for r in self.served if r.path == want]

    def requests(self, relpath: str | None = None) -> int:
        """Requests answered, for one file or in all."""
        return len(self._matching(relpath))

    def bytes_sent(self, relpath: str | None = None) -> int:
        """Body bytes sent, for one file or in all."""
        return sum(r.body_bytes for r in self._matching(relpath))

    def inject(self, fault: Fault | None) -> None:
        """Make range requests misbehave as ``fault`` says (None: answer normally again)."""
        with self._server._lock:
            self._server.fault = fault

    def reset(self) -> None:
        """Forget the requests answered so far."""
        with self._server._lock:
            self._server.served.clear()

    def stop(self) -> None:
        """Stop serving and close the socket (a silent or dripping answer ends too)."""
        self._server.stopping.set()
        super().stop()
