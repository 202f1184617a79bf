"""An HTTP server of this package's test helpers, served on a background thread."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Generic, Self, TypeVar

if TYPE_CHECKING:
    from types import TracebackType

ServerT = TypeVar("ServerT", bound=ThreadingHTTPServer)


class BackgroundServer(Generic[ServerT]):
    """Serve ``server`` on a daemon thread between :meth:`start` and :meth:`stop`, or as a context manager.

    The lifecycle shared by :class:`~catalog.testing.RangeRequestServer` and
    :class:`~catalog.testing.StaticStacApi`, which each add what they serve.

    Args:
        server: A bound server, not yet serving.
        name: The serving thread's name.
    """

    def __init__(self, server: ServerT, name: str) -> None:
        self._server = server
        self._name = name
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Start serving on a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=self._name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and wait (at most 5 s) for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
