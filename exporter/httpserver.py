"""An HTTP/1.1 server whose cost does not grow with idle or stalled clients.

One selector thread accepts connections, drives TLS handshakes and reads request heads without
blocking; only a complete request head is handed to a small pool of handler threads, which
run a ``BaseHTTPRequestHandler`` subclass for it. Connections that do not send a whole head
within ``read_header_timeout`` (or a new request within ``idle_timeout``) are closed, and past
``max_connections`` the oldest connection still waiting for its head makes room for the new
one, so hundreds of half-open clients cost descriptors for a few seconds and no threads.
Errors on connections are logged once per connection at debug level, never as tracebacks.
Shared by the exporter and the simulator (which may import from ``exporter``, not the reverse).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger("ledger_exporter")

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_READ_CHUNK = 65536


class ListenAddressError(ValueError):
    """The listen address is not of the form host:port."""


def parse_listen_address(address: str) -> tuple[str, int]:
    """``:9877``, ``0.0.0.0:9877``, ``[::]:9877`` or ``localhost:9877`` to (host, port);
    an empty host means every interface."""
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ListenAddressError(f"listen address {address!r} must be host:port, e.g. :9877")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class ServerLimits:
    """Time and count limits of one server (defaults as Go's exporter servers use them)."""

    read_header_timeout: float = 10.0  # also bounds the TLS handshake and each later read/write
    idle_timeout: float = 60.0  # an open keep-alive connection with no request
    max_connections: int = 512  # open at once; the oldest still sending its head is dropped
    max_handlers: int = 16  # requests handled at once (threads, started on demand)
    max_head_bytes: int = 65536  # request line and headers


class _Connection:
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
        chunk = self._sock.recv(max(wanted, _READ_CHUNK))
        self._buffer += chunk
        return bool(chunk)

    def readline(self, limit: int | None = -1) -> bytes:
        limit = -1 if limit is None else limit
        while (end := self._buffer.find(b"\n")) < 0:
            if 0 <= limit <= len(self._buffer) or not self._fill(_READ_CHUNK):
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
        for start in range(0, len(view), _READ_CHUNK):
            self._sock.sendall(view[start : start + _READ_CHUNK])
        return len(view)

    def writable(self) -> bool:
        return True


class HTTPRequestHandler(BaseHTTPRequestHandler):
    """Handles one request of a connection the server has read the head of."""

    server: ThreadedHTTPServer  # type: ignore[assignment]  # not a socketserver.BaseServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # two writes per answer: without it the body waits an ACK

    def __init__(self, connection: _Connection, server: ThreadedHTTPServer) -> None:
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


class _Workers:
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


class ThreadedHTTPServer:
    """Serves ``handler_class`` on one address; see the module docstring for how.

    Like ``socketserver.TCPServer``: ``server_bind``/``server_activate`` (so a port can be
    held without listening), ``serve_forever``, ``shutdown`` and ``server_close``."""

    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler_class: type[HTTPRequestHandler],
        limits: ServerLimits | None = None,
        tls: ssl.SSLContext | None = None,
        bind_and_activate: bool = True,
    ) -> None:
        host, port = address
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.handler_class = handler_class
        self.limits = limits or ServerLimits()
        self.tls = tls
        self.socket = socket.socket(self.address_family, socket.SOCK_STREAM)
        self.server_address: tuple[Any, ...] = (host or "0.0.0.0", port)
        self._conns: dict[int, _Connection] = {}  # least recently active first
        self._lock = threading.Lock()
        self._returned: deque[_Connection] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._next_sweep = 0.0
        self._workers = _Workers(self.limits.max_handlers, self.limits.idle_timeout, "http")
        if bind_and_activate:
            try:
                self.server_bind()
                self.server_activate()
            except BaseException:
                self.server_close()
                raise

    # the socketserver-like surface ------------------------------------------------------
    def server_bind(self) -> None:
        if self.allow_reuse_address:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()

    def server_activate(self) -> None:
        self.socket.listen(socket.SOMAXCONN)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def fileno(self) -> int:
        return self.socket.fileno()

    def open_connections(self) -> int:
        """Client connections open now (waiting, idle or being answered)."""
        with self._lock:
            return len(self._conns)

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        """Accept, read heads and expire connections until shutdown()."""
        self._stopped.clear()
        try:
            self.socket.setblocking(False)
            self._selector.register(self.socket, selectors.EVENT_READ, None)
            self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not self._stop.is_set():
                for key, _ in self._selector.select(poll_interval):
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        self._take_returned()
                    else:
                        self._on_readable(key.data)
                self._expire(time.monotonic())
        finally:
            for sock in (self.socket, self._wake_r):
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._selector.unregister(sock)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever() and wait until it has returned."""
        self._stop.set()
        self._wake()
        self._stopped.wait()

    def cut_connections(self) -> None:
        """Shut down every open connection, including those being answered."""
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        """Close the listening socket and every connection; call after shutdown()."""
        self._stop.set()
        self._workers.stop()
        self.cut_connections()
        with self._lock:
            idle = [conn for conn in self._conns.values() if not conn.busy]
        for conn in idle:
            self._close(conn)
        for sock in (self.socket, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()

    # the selector thread -----------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is already pending
            self._wake_w.send(b"\0")

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of descriptors: make room, try again next round
                log.debug("cannot accept a connection", extra={"fields": {"error": str(error)}})
                self._evict_oldest()
                return
            self._admit(sock, peer)

    def _admit(self, sock: socket.socket, peer: Any) -> None:
        with self._lock:
            full = len(self._conns) >= self.limits.max_connections
        if full and not self._evict_oldest():
            sock.close()
            log.debug("connection refused: all connections busy", extra={"fields": {}})
            return
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(sock, peer, time.monotonic() + self.limits.read_header_timeout)
        if self.tls is not None:
            try:
                conn.sock = self.tls.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
            except (OSError, ValueError) as error:
                conn.log_once("TLS connection failed", error)
                sock.close()
                return
            conn.handshaking = True
        with self._lock:
            self._conns[id(conn)] = conn
        self._selector.register(conn.sock, selectors.EVENT_READ, conn)

    def _evict_oldest(self) -> bool:
        """Close the least recently active connection not being answered; False if none."""
        with self._lock:
            oldest = next((conn for conn in self._conns.values() if not conn.busy), None)
        if oldest is None:
            return False
        self._close(oldest, "connection closed to make room for a new one")
        return True

    def _on_readable(self, conn: _Connection) -> None:
        if conn.handshaking and not self._handshake(conn):
            return
        try:
            data = conn.sock.recv(_READ_CHUNK)
            while data and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                data += conn.sock.recv(_READ_CHUNK)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as error:
            self._close(conn, "connection failed", error)
            return
        if not data:
            self._close(conn, "connection closed mid-request" if conn.buffer else None)
            return
        if not conn.buffer:
            conn.deadline = time.monotonic() + self.limits.read_header_timeout
        conn.buffer += data
        if conn.head_end():
            self._selector.unregister(conn.sock)
            conn.busy = True
            self._workers.submit(lambda: self._serve(conn))
        elif len(conn.buffer) > self.limits.max_head_bytes:
            with contextlib.suppress(OSError):
                conn.sock.send(b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n")
            self._close(conn, "request head too large")

    def _handshake(self, conn: _Connection) -> bool:
        """Advance the TLS handshake; True once it is done."""
        try:
            conn.sock.do_handshake()  # type: ignore[attr-defined]
        except ssl.SSLWantReadError:
            self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
            return False
        except ssl.SSLWantWriteError:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
            return False
        except (ssl.SSLError, OSError) as error:
            self._close(conn, "TLS handshake failed", error)
            return False
        conn.handshaking = False
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        return True

    def _take_returned(self) -> None:
        """Watch again the connections whose requests the handlers have answered."""
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while True:
            with self._lock:
                if not self._returned:
                    return
                conn = self._returned.popleft()
                self._conns.pop(id(conn), None)
                self._conns[id(conn)] = conn  # now the most recently active
            self._selector.register(conn.sock, selectors.EVENT_READ, conn)
            if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                self._on_readable(conn)

    def _expire(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + 0.25
        with self._lock:
            late = [c for c in self._conns.values() if not c.busy and c.deadline < now]
        for conn in late:
            if conn.handshaking:
                self._close(conn, "TLS handshake timed out")
            else:  # an idle keep-alive connection ending is normal: not logged
                self._close(conn, "request head timed out" if conn.buffer else None)

    def _close(self, conn: _Connection, problem: str | None = None, error: object = None) -> None:
        """Close a connection (logging ``problem`` once); from a handler while it is busy."""
        if problem:
            conn.log_once(problem, error)
        if not conn.busy:
            with contextlib.suppress(KeyError, ValueError, RuntimeError):
                self._selector.unregister(conn.sock)
        with self._lock:
            self._conns.pop(id(conn), None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # a handler thread -------------------------------------------------------------------
    def _serve(self, conn: _Connection) -> None:
        """Answer the connection's complete requests, then give it back to the selector."""
        try:
            conn.sock.settimeout(self.limits.read_header_timeout)
            keep = True
            while keep and conn.head_end():
                keep = self._handle_one(conn)
            if keep:
                conn.sock.setblocking(False)
        except OSError as error:
            keep = False
            conn.log_once("connection failed", error)
        except Exception as error:  # a bug in a handler: say so, structured, and go on
            keep = False
            fields = {"client": conn.peer, "error": f"{type(error).__name__}: {error}"}
            log.error("request handler failed", extra={"fields": fields})
        if not keep or self._stop.is_set():
            self._close(conn)
            return
        wait = self.limits.read_header_timeout if conn.buffer else self.limits.idle_timeout
        conn.deadline = time.monotonic() + wait
        conn.busy = False
        with self._lock:
            self._returned.append(conn)
        self._wake()

    def _handle_one(self, conn: _Connection) -> bool:
        """Run the handler for one request; True when the connection may serve another."""
        expected = conn.head_end()
        handler = self.handler_class(conn, self)
        handler.handle_one_request()
        if handler.close_connection or not hasattr(handler, "headers"):
            return False
        if handler.headers.get("Transfer-Encoding"):
            return False  # a chunked body is not read: the rest would look like a request
        try:
            expected += int(handler.headers.get("Content-Length") or 0)
        except ValueError:
            return False
        return handler.reader.consumed >= expected  # an unread body ends the connection
