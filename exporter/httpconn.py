"""The pieces of one client connection for ``exporter.httpserver``: what has been read of
it, the reader and writer a request handler uses, the handler base class and the bounded pool
of threads that run handlers.
"""

from __future__ import annotations

import io
import logging
import re
import socket
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exporter.httpserver import ThreadedHTTPServer

log = logging.getLogger("ledger_exporter")

_HEAD_END = re.compile(rb"\r?\n\r?\n")
READ_CHUNK = 65536


class Connection:
    """One accepted client connection and what has been read of its next request."""

    def __init__(self, sock: socket.socket, peer: Any, deadline: float) -> None:
        self.sock = sock
        self.address = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else (str(peer), 0)
        host = self.address[0]
        self.peer = f"[{host}]:{self.address[1]}" if ":" in host else f"{host}:{self.address[1]}"
        self.buffer = bytearray()
        self.deadline = deadline
        self.handshaking = False
        self.busy = False
        self.closed = False
        self.logged = False

    def log_once(self, message: str, error: object = None) -> None:
        """Log a connection problem at debug level, the first one only."""
        if self.logged:
            return
        self.logged = True
        fields: dict[str, object] = {"client": self.peer}
        if error is not None:
            fields["error"] = str(error) or type(error).__name__
        log.debug(message, extra={"fields": fields})

    def head_end(self) -> int:
        """Where the first complete request head in the buffer ends, or 0."""
        found = _HEAD_END.search(self.buffer)
        return found.end() if found else 0


class _RequestReader(io.BufferedIOBase):
    """The handler's ``rfile``: the bytes read so far, then the socket (blocking, timed)."""

    def __init__(self, buffer: bytearray, sock: socket.socket) -> None:
        self._buffer = buffer
        self._sock = sock
        self.consumed = 0

    def _take(self, size: int) -> bytes:
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        self.consumed += len(data)
        return data

    def _fill(self, wanted: int) -> bool:
        chunk = self._sock.recv(max(wanted, READ_CHUNK))
        self._buffer += chunk
        return bool(chunk)

    def readline(self, limit: int | None = -1) -> bytes:
        limit = -1 if limit is None else limit
        while (end := self._buffer.find(b"\n")) < 0:
            if 0 <= limit <= len(self._buffer) or not self._fill(READ_CHUNK):
                end = len(self._buffer) - 1
                break
        end += 1
        if 0 <= limit < end:
            end = limit
        return self._take(end)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise io.UnsupportedOperation("a request body is read by its Content-Length")
        while len(self._buffer) < size and self._fill(size - len(self._buffer)):
            pass
        return self._take(size)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size if size >= 0 else len(self._buffer))

    def readable(self) -> bool:
        return True


class _SocketWriter(io.BufferedIOBase):
    """The handler's ``wfile``: every write goes straight to the socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def write(self, data: Any) -> int:
        # In pieces: the socket's timeout then bounds a stall, not the whole body's transfer.
        view = memoryview(data).cast("B")
        for start in range(0, len(view), READ_CHUNK):
            self._sock.sendall(view[start : start + READ_CHUNK])
        return len(view)

    def writable(self) -> bool:
        return True


class HTTPRequestHandler(BaseHTTPRequestHandler):
    """Handles one request of a connection the server has read the head of."""

    server: ThreadedHTTPServer  # type: ignore[assignment]  # not a socketserver.BaseServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # two writes per answer: without it the body waits an ACK

    def __init__(self, connection: Connection, server: ThreadedHTTPServer) -> None:
        # Deliberately not BaseHTTPRequestHandler.__init__: the server drives one request.
        self.request = self.connection = connection.sock
        self.client_address = connection.address
        self.server = server
        self.reader = self.rfile = _RequestReader(connection.buffer, connection.sock)
        self.wfile = _SocketWriter(connection.sock)
        self.close_connection = True
        self._conn = connection

    def discard_body(self, limit: int = 65536) -> None:
        """Read and drop a small request body so the connection can carry the next request
        (a larger or unreadable one is left unread, and the connection then closes)."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return
        if 0 < length <= limit:
            self.rfile.read(length)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One debug line per request, structured."""
        path = str(getattr(self, "path", "")).split("?")[0]  # unset for a garbage request line
        fields = {"client": self._conn.peer, "method": self.command or "", "path": path}
        log.debug("request", extra={"fields": {**fields, "status": str(code)}})

    def log_error(self, format: str, *args: Any) -> None:
        """http.server's complaints (bad request line, timeout) at debug, once per connection."""
        self._conn.log_once("bad request", format % args)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


class Workers:
    """At most ``limit`` daemon threads, started on demand, ending after ``idle`` seconds."""

    def __init__(self, limit: int, idle: float, name: str) -> None:
        self._limit, self._idle_seconds, self._name = limit, idle, name
        self._jobs: deque[Callable[[], None]] = deque()
        self._cond = threading.Condition()
        self._threads = self._idle = 0
        self._stopping = False

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._idle >= len(self._jobs):
                self._cond.notify()
            elif self._threads < self._limit:
                self._threads += 1
                threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs:
                    self._idle += 1
                    woken = self._cond.wait(self._idle_seconds)
                    self._idle -= 1
                    if not self._jobs and (not woken or self._stopping):
                        self._threads -= 1
                        return
                job = self._jobs.popleft()
            job()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._jobs.clear()
            self._cond.notify_all()
