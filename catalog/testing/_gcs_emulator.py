"""gcp-storage-emulator started in-process on 127.0.0.1, for tests and demos."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GCSEmulator:
    """An in-memory Cloud Storage emulator on 127.0.0.1.

    Point google-cloud-storage at it by setting ``STORAGE_EMULATOR_HOST`` to
    :attr:`host` (the caller does this, so tests can scope it).

    Args:
        bucket: A bucket created at start.
    """

    def __init__(self, *, bucket: str = "rumi") -> None:
        self.bucket = bucket
        """The bucket created at start."""
        self.port = _free_port()
        """The port served."""
        self._server: Any = None

    @property
    def host(self) -> str:
        """``http://127.0.0.1:PORT``, the value for ``STORAGE_EMULATOR_HOST``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GCSEmulator:
        """Start the emulator on a background thread."""
        from gcp_storage_emulator.server import create_server

        self._server = create_server("127.0.0.1", self.port, in_memory=True, default_bucket=self.bucket)
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop the emulator."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GCSEmulator:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
