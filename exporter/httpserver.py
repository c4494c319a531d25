"""An HTTP/1.1 server whose cost does not grow with idle or stalled clients.

One selector thread accepts connections, drives TLS handshakes and reads request heads without
blocking; only a complete request head is handed to a small pool of handler threads, which
run a ``BaseHTTPRequestHandler`` subclass for it. Connections that do not send a whole head
within ``read_header_timeout`` (or a new request within ``idle_timeout``) are closed, and past
``max_connections`` the least recently active connection not being answered makes room for
the new one, so hundreds of half-open clients cost descriptors for a few seconds and no threads.
Errors on connections are logged once per connection at debug level, never as tracebacks.
Shared by the exporter and the simulator (which may import from ``exporter``, not the reverse).
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from exporter.httpconn import READ_CHUNK, Connection, HTTPRequestHandler, Workers

log = logging.getLogger("ledger_exporter")
ACCEPT_BATCH = 32

__all__ = [
    "HTTPRequestHandler",
    "ListenAddressError",
    "ServerLimits",
    "ThreadedHTTPServer",
    "parse_listen_address",
]


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
        self._conns: dict[int, Connection] = {}  # least recently active first
        self._lock = threading.Lock()
        self._returned: deque[Connection] = deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._next_sweep = 0.0
        self._workers = Workers(self.limits.max_handlers, self.limits.idle_timeout, "http")
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
        with self._lock:  # against a shutdown() racing this start
            if self._stop.is_set():
                return
            self._stopped.clear()
        try:
            self.socket.setblocking(False)
            self._selector.register(self.socket, selectors.EVENT_READ, None)
            self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not self._stop.is_set():
                for key, _ in self._selector.select(poll_interval):
                    self._dispatch(key.data)
                self._expire(time.monotonic())
        finally:
            for sock in (self.socket, self._wake_r):
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._selector.unregister(sock)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever() and wait until it has returned."""
        with self._lock:
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
    def _dispatch(self, target: Connection | str | None) -> None:
        """One ready socket; a bug here costs that connection, never the serving thread."""
        try:
            if target is None:
                self._accept()
            elif target == "wake":
                self._take_returned()
            elif isinstance(target, Connection):
                self._on_readable(target)
        except Exception as error:
            fields = {"error": f"{type(error).__name__}: {error}"}
            log.error("HTTP server error", extra={"fields": fields})
            if isinstance(target, Connection):
                self._close(target)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is already pending
            self._wake_w.send(b"\0")

    def _accept(self) -> None:
        # A few at a time: between batches the selector reads the heads that have arrived, so
        # a burst of new clients cannot push out one that has just sent its request.
        for _ in range(ACCEPT_BATCH):
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
        if self.handler_class.disable_nagle_algorithm:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(sock, peer, time.monotonic() + self.limits.read_header_timeout)
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

    def _on_readable(self, conn: Connection) -> None:
        if conn.handshaking and not self._handshake(conn):
            return
        try:
            data = conn.sock.recv(READ_CHUNK)
            while data and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                data += conn.sock.recv(READ_CHUNK)
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

    def _handshake(self, conn: Connection) -> bool:
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
                if conn.closed:  # made room for another, or expired, while in the queue
                    continue
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

    def _close(self, conn: Connection, problem: str | None = None, error: object = None) -> None:
        """Close a connection (logging ``problem`` once); from a handler while it is busy."""
        if problem:
            conn.log_once(problem, error)
        if not conn.busy:
            with contextlib.suppress(KeyError, ValueError, RuntimeError):
                self._selector.unregister(conn.sock)
        with self._lock:
            conn.closed = True
            self._conns.pop(id(conn), None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # a handler thread -------------------------------------------------------------------
    def _serve(self, conn: Connection) -> None:
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

    def _handle_one(self, conn: Connection) -> bool:
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
