"""An HTTP/1.1 server whose cost does not grow with idle, slow or hostile clients.

One selector thread accepts connections, drives TLS handshakes, reads whole requests (head and
body) and sends answers, all without blocking; a small pool of handler threads only ever runs
a ``BaseHTTPRequestHandler`` subclass over a complete request in memory, so no client can hold
a handler by sending or reading slowly. The server frames requests itself: a body needs one
plain Content-Length within the handler's limit for that path (else 400, 411 or 413, and the
connection closes), and a body still to come is read only after the handler has admitted the
head (credentials first). A request must arrive whole within ``read_header_timeout``; an
answer must be taken whole within ``write_timeout`` and never stall for
``read_header_timeout``; an idle keep-alive connection lasts ``idle_timeout``. Past
``max_connections`` the least recently active connection not being handled makes room for the
new one, so hundreds of half-open clients cost descriptors for a few seconds and no threads.
Errors on connections are logged once per connection at debug level, never as tracebacks.
Shared by the exporter and the simulator (which may import from ``exporter``, not the reverse).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import selectors
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from exporter.errors import InvalidListenAddressError, RequestRefusedError
from exporter.text import FIELD_VALUE
from exporter.web.httpconn import (
    DEFAULT_BODY_LIMIT,
    READ_CHUNK,
    AnswerWriter,
    Connection,
    RequestHead,
    Workers,
    origin_form,
    parse_head,
    refusal,
)

log = logging.getLogger("ledger_exporter")
_FIELD_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110's token
ACCEPT_BATCH = 32
SEND_TURN_BYTES = 4 * 1024 * 1024  # sent to one connection before the selector serves others
#: How often idle connections are looked at for their deadline, at most.
SWEEP_SECONDS = 0.25
LINGER_SECONDS = 2.0  # reading what a client still sends after its last answer, before closing

__all__ = [
    "HTTPRequestHandler",
    "ServerLimits",
    "ThreadedHTTPServer",
    "parse_listen_address",
]


def parse_listen_address(address: str) -> tuple[str, int]:
    """``:9877``, ``0.0.0.0:9877``, ``[::]:9877`` or ``localhost:9877`` to (host, port);
    an empty host means every interface."""
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()):
        raise InvalidListenAddressError(f"listen address {address!r} must be host:port, e.g. :9877")
    if len(port) > 5 or int(port) > 65535:
        raise InvalidListenAddressError(
            f"listen address {address!r}: port out of range (0 to 65535)"
        )
    return host.strip("[]"), int(port)


class HTTPRequestHandler(BaseHTTPRequestHandler):
    """Handles one complete request (head and body, read by the server) in memory."""

    server: ThreadedHTTPServer  # type: ignore[assignment]  # not a socketserver.BaseServer
    protocol_version = "HTTP/1.1"
    #: http.server's default is HTTP/0.9, whose answers have no status line and no header:
    #: a request refused before its version is read is answered in HTTP/1.1 instead.
    default_request_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # answers go out in pieces: none should wait for an ACK
    #: The Content-Type of the answer, for the request's log line: a subclass sets it before
    #: ``send_response`` (which logs), so the line says which format a scraper was served.
    content_type = ""

    def __init__(self, connection: Connection, server: ThreadedHTTPServer, request: bytes) -> None:
        # Deliberately not BaseHTTPRequestHandler.__init__: the server drives one request.
        self.client_address = connection.address
        self.server = server
        self.rfile = io.BytesIO(request)
        self.wfile = self.answer = AnswerWriter()
        self.close_connection = True
        self._conn = connection

    @classmethod
    def body_limit(cls, method: str, path: str) -> int:
        """The largest request body taken for ``method`` on ``path``; a longer one is refused
        with 413 before anything of it is read (0: no body at all)."""
        return DEFAULT_BODY_LIMIT

    def admit(self) -> bool:
        """Whether the body of this request, head parsed, may be read; False after writing the
        refusal. Runs before the body arrives, in a handler thread (say, to check
        credentials), and again as part of handling the complete request."""
        return True

    def admit_body(self) -> bool:
        """Parse the head and run :meth:`admit`; the server reads the body only if True (and
        then sends ``100 Continue`` if the client waits for it)."""
        self.raw_requestline = self.rfile.readline(65537)
        if not self.parse_request() or not self.admit():
            return False
        expects = self.headers.get("Expect", "").lower() == "100-continue"
        if expects and self.request_version >= "HTTP/1.1":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def parse_request(self) -> bool:
        """http.server's parsing, without HTTP/0.9 (answered by a bare body, which no
        HTTP/1.x client can frame): a request line without a version gets a 400, a version
        before 1.0 a 505, both in HTTP/1.1, and the connection closes."""
        if not super().parse_request():
            return False
        self.path = origin_form(self.path)  # http://host/metrics: /metrics (RFC 9112 3.2.2)
        if len(self.requestline.split()) == 2:
            self.send_error(HTTPStatus.BAD_REQUEST, "A request line needs an HTTP version")
            return False
        if _version(self.request_version) < (1, 0):
            self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/1.0 or 1.1 only")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's error answer, always with a status line: a request line can name
        HTTP/0.9 and be refused for something else (``\\0 \\0 / HTTP/0.9``)."""
        if _version(self.request_version) < (1, 0):
            self.request_version = self.default_request_version
        super().send_error(code, message, explain)

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line, then the headers the server sends with every answer."""
        super().send_response(code, message)
        for name, value in self.server.answer_headers.items():
            self.send_header(name, value)

    def handle_expect_100(self) -> bool:
        """The server sends ``100 Continue`` itself, once the request is admitted."""
        return True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One debug line per request, structured: who asked (client, User-Agent), for what,
        and what was answered (Content-Type, status)."""
        path = str(getattr(self, "path", "")).split("?")[0]  # unset for a garbage request line
        headers = getattr(self, "headers", None)  # unset for a garbage request line too
        fields = {"client": self._conn.peer, "method": self.command or "", "path": path}
        fields["user_agent"] = headers.get("User-Agent", "") if headers is not None else ""
        if self.content_type:
            fields["content_type"] = self.content_type
        log.debug("request", extra={"fields": {**fields, "status": str(code)}})

    def log_error(self, format: str, *args: Any) -> None:
        """http.server's complaints (bad request line) at debug, once per connection."""
        self._conn.log_once("bad request", format % args)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def _version(text: str) -> tuple[int, int]:
    """``HTTP/1.1`` as (1, 1) (http.server has checked the form; (0, 0) if it has not)."""
    major, _, minor = text.removeprefix("HTTP/").partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else (0, 0)


@dataclass(frozen=True)
class ServerLimits:
    """Time and count limits of one server (defaults as Go's exporter servers use them)."""

    read_header_timeout: float = 10.0  # TLS handshake; a whole request; a stalled answer
    idle_timeout: float = 60.0  # an open keep-alive connection with no request
    max_connections: int = 512  # open at once; the least recently active one is dropped
    max_handlers: int = 16  # requests handled at once (threads, started on demand)
    max_head_bytes: int = 65536  # request line and headers
    write_timeout: float = 60.0  # a whole answer, however slowly the client reads


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
        self._answer_headers: dict[str, str] = {}
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
        #: Until when the selector may wait while nothing happens: the soonest idle deadline
        #: the last sweep saw (inf: no connection open); None since an event, until a sweep.
        self._quiet_until: float | None = None
        self._workers = Workers(self.limits.max_handlers, self.limits.idle_timeout, "http")
        if bind_and_activate:
            try:
                self.server_bind()
                self.server_activate()
            except BaseException:
                self.server_close()
                raise

    @property
    def answer_headers(self) -> dict[str, str]:
        """Sent with every answer, the server's own refusals included (security headers)."""
        return self._answer_headers

    @answer_headers.setter
    def answer_headers(self, headers: Mapping[str, str]) -> None:
        """Keeps the headers that can be written; one that cannot (a name or value the web
        config should have refused) is left out with an error, rather than fail every answer."""
        kept = {}
        for name, value in headers.items():
            if _FIELD_NAME.fullmatch(name) and FIELD_VALUE.fullmatch(value):
                kept[name] = value
            else:
                fields = {"header": name}  # not the value: it may be anything
                log.error(
                    "header left out of every answer: cannot be sent as it is",
                    extra={"fields": fields},
                )
        self._answer_headers = kept

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

    def refuse_peer(self, sock: ssl.SSLSocket) -> str | None:
        """Why a client whose TLS handshake is done may not go on (it is then closed before
        it is read), or None; a subclass checks what it needs (client certificate SANs)."""
        return None

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
            wait: float | None = poll_interval
            while not self._stop.is_set():
                ready = self._selector.select(wait)
                for key, _ in ready:
                    self._dispatch(key.data)
                wait = self._expire(time.monotonic(), quiet=not ready, poll_interval=poll_interval)
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
        with self._lock:  # a handler still running closes its connection when it ends
            returned = {id(conn) for conn in self._returned}
            self._returned.clear()
            idle = [c for c in self._conns.values() if not c.busy or id(c) in returned]
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
                self._on_ready(target)
        except Exception as error:
            fields = {"error": f"{type(error).__name__}: {error}"}
            log.error("HTTP server error", extra={"fields": fields})
            if isinstance(target, Connection):
                self._close(target)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full: a wake-up is already pending
            self._wake_w.send(b"\0")

    def _watch(self, conn: Connection, events: int) -> None:
        """Have the selector watch ``conn`` for ``events`` (0: not at all)."""
        if events == conn.events:
            return
        if not conn.events:
            self._selector.register(conn.sock, events, conn)
        elif not events:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        conn.events = events

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
            self._add_connection(sock, peer)

    def _add_connection(self, sock: socket.socket, peer: Any) -> None:
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
        self._watch(conn, selectors.EVENT_READ)

    def _evict_oldest(self) -> bool:
        """Close the least recently active connection not being handled; False if none."""
        with self._lock:
            oldest = next((conn for conn in self._conns.values() if not conn.busy), None)
        if oldest is None:
            return False
        self._close(oldest, "connection closed to make room for a new one")
        return True

    def _on_ready(self, conn: Connection) -> None:
        if conn.handshaking and not self._handshake(conn):
            return
        if conn.outgoing:  # TLS may have to read before it can write
            self._send(conn)
        elif conn.lingering:
            self._drain(conn)
        else:
            self._receive(conn)

    def _handshake(self, conn: Connection) -> bool:
        """Advance the TLS handshake; True once it is done."""
        try:
            conn.sock.do_handshake()  # type: ignore[attr-defined]
        except ssl.SSLWantReadError:
            self._watch(conn, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._watch(conn, selectors.EVENT_WRITE)
            return False
        except (ssl.SSLError, OSError) as error:
            self._close(conn, "TLS handshake failed", error)
            return False
        refusal = self.refuse_peer(conn.sock)  # type: ignore[arg-type]  # wrapped: an SSLSocket
        if refusal is not None:
            self._close(conn, "TLS client refused", refusal)
            return False
        conn.handshaking = False
        self._watch(conn, selectors.EVENT_READ)
        return True

    def _receive(self, conn: Connection) -> None:
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
        new_request = not conn.buffer
        conn.buffer += data
        if new_request:  # its whole-request deadline starts now, at its first byte
            conn.skip_empty_lines()
            if not conn.buffer:  # only empty lines: the deadline running goes on, so
                self._watch(conn, selectors.EVENT_READ)  # dripping them keeps nothing open
                return
            conn.request_deadline = conn.deadline = (
                time.monotonic() + self.limits.read_header_timeout
            )
        self._advance(conn)

    def _advance(self, conn: Connection) -> None:
        """Act on what has been read: a complete request goes to a handler, a head whose body
        is still to come to the handler's admission check first (credentials before any body
        is read), bad framing is refused; otherwise read on, within the request deadline."""
        if conn.head is None:
            end = conn.head_end()
            if not end and len(conn.buffer) > self.limits.max_head_bytes:
                status = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
                self._refuse(conn, RequestRefusedError(status, "request head too large"))
                return
            if not end:
                self._watch(conn, selectors.EVENT_READ)
                return
            try:
                conn.head = self._frame(end, conn.buffer)
            except RequestRefusedError as error:
                self._refuse(conn, error)
                return
        if len(conn.buffer) >= conn.request_size():
            self._hand_over(conn, self._serve)
        elif not conn.admitted:
            self._hand_over(conn, self._admit_body)
        else:
            self._watch(conn, selectors.EVENT_READ)

    def _frame(self, end: int, buffer: bytearray) -> RequestHead:
        """The head ending at ``end``, its body length checked against the handler's limit."""
        head = parse_head(buffer, end)
        limit = self.handler_class.body_limit(head.method, head.path)
        if head.content_length > limit:
            reason = f"at most {limit} body bytes here" if limit else "no request body here"
            raise RequestRefusedError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, reason)
        return head

    def _refuse(self, conn: Connection, error: RequestRefusedError) -> None:
        """Answer a request the server will not hand to a handler, then close."""
        conn.log_once("request refused", f"{error.status.value} {error.reason}")
        head_only = conn.buffer.split(None, 1)[:1] == [b"HEAD"]
        conn.buffer.clear()
        conn.discard_request()
        conn.outgoing.append(memoryview(refusal(error, head_only, self.answer_headers)))
        conn.close_after_answer = True
        self._start_answer(conn)

    def _hand_over(self, conn: Connection, job: Callable[[Connection], None]) -> None:
        self._watch(conn, 0)
        conn.busy = True
        self._workers.submit(lambda: job(conn))

    def _take_returned(self) -> None:
        """Send the answers the handlers have made."""
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while True:
            with self._lock:
                if not self._returned:
                    return
                conn = self._returned.popleft()
                if conn.closed:  # closed by server_close() while in the queue
                    continue
                conn.busy = False
                self._conns.pop(id(conn), None)
                self._conns[id(conn)] = conn  # now the most recently active
            self._start_answer(conn)

    def _start_answer(self, conn: Connection) -> None:
        """Send an answer under its deadlines: all of it within ``write_timeout``, and never
        ``read_header_timeout`` without the client taking any of it."""
        if not conn.outgoing:
            self._answered(conn)
            return
        now = time.monotonic()
        conn.write_deadline = now + self.limits.write_timeout
        conn.deadline = min(conn.write_deadline, now + self.limits.read_header_timeout)
        self._send(conn)

    def _send(self, conn: Connection) -> None:
        """Send what the socket takes now (a few MiB at most, for fairness); the selector
        says when there is room for the rest."""
        budget = SEND_TURN_BYTES
        while conn.outgoing and budget > 0:
            piece = conn.outgoing[0]
            try:
                sent = conn.sock.send(piece[:READ_CHUNK])
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                break
            except ssl.SSLWantReadError:
                self._watch(conn, selectors.EVENT_READ)
                return
            except OSError as error:
                self._close(conn, "connection failed", error)
                return
            if sent >= len(piece):
                conn.outgoing.popleft()
            else:
                conn.outgoing[0] = piece[sent:]
            budget -= sent
            progress = time.monotonic() + self.limits.read_header_timeout
            conn.deadline = min(conn.write_deadline, progress)
        if conn.outgoing:
            self._watch(conn, selectors.EVENT_WRITE)
        else:
            self._answered(conn)

    def _answered(self, conn: Connection) -> None:
        """The answer is sent: close, or go on with the rest of this request or the next."""
        if conn.close_after_answer:
            self._linger(conn)
            return
        now = time.monotonic()
        if conn.head is not None:  # admitted: its body is still to come, same deadline
            conn.deadline = conn.request_deadline
        else:
            conn.skip_empty_lines()
            if conn.buffer:  # the next request has begun
                conn.request_deadline = conn.deadline = now + self.limits.read_header_timeout
            else:
                conn.deadline = now + self.limits.idle_timeout
        if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
            self._receive(conn)  # decrypted already: the selector would not see it
        else:
            self._advance(conn)

    def _linger(self, conn: Connection) -> None:
        """Close after an answer: stop sending, then read and drop what the client still
        sends for a moment, so a reset (closing with unread input) cannot destroy the answer
        before the client has read it."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.lingering = True
        conn.buffer.clear()
        conn.discard_request()
        conn.deadline = time.monotonic() + min(LINGER_SECONDS, self.limits.read_header_timeout)
        self._watch(conn, selectors.EVENT_READ)

    def _drain(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)

    def _expire(self, now: float, quiet: bool, poll_interval: float) -> float | None:
        """Close the idle connections past their deadline (a sweep every SWEEP_SECONDS at
        most); return how long the selector may wait next. Only this thread moves a deadline,
        on an event, and a handler giving a connection back wakes it: after a wait that saw
        no event, none moved since the last sweep, so the wait may last until the soonest one
        (None, for ever, with no connection open: an idle exporter does not wake ten times a
        second). After an event, ``poll_interval`` until a sweep has seen what it moved."""
        if not quiet:
            self._quiet_until = None
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_SECONDS
            with self._lock:
                idle = [c for c in self._conns.values() if not c.busy]
                busy = len(idle) < len(self._conns)
            late = [c for c in idle if c.deadline < now]
            for conn in late:
                self._close(conn, _lateness(conn))
            # none late: every idle deadline is still ahead
            soonest = min((c.deadline for c in idle), default=math.inf)
            self._quiet_until = None if busy or late else soonest
        if not quiet or self._quiet_until is None:
            return poll_interval
        if self._quiet_until == math.inf:
            return None
        return max(poll_interval, self._quiet_until - now)

    def _close(self, conn: Connection, problem: str | None = None, error: object = None) -> None:
        """Close a connection, logging ``problem`` once."""
        if problem:
            conn.log_once(problem, error)
        with contextlib.suppress(KeyError, ValueError, RuntimeError, OSError):
            self._watch(conn, 0)
        conn.events = 0
        with self._lock:
            conn.closed = True
            self._conns.pop(id(conn), None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # a handler thread -------------------------------------------------------------------
    def _serve(self, conn: Connection) -> None:
        """Run the handler over the connection's complete request, in memory."""
        request = conn.take_request()
        try:
            handler = self.handler_class(conn, self, request)
            handler.handle_one_request()
        except Exception as error:  # a bug in a handler: say so, structured, and go on
            self._give_back(conn, [], close=True, error=error)
            return
        self._give_back(conn, handler.answer.pieces, close=handler.close_connection)

    def _admit_body(self, conn: Connection) -> None:
        """Let the handler check a request's head before its body is read (and refuse it)."""
        assert conn.head is not None
        try:
            handler = self.handler_class(conn, self, bytes(conn.buffer[: conn.head.size]))
            conn.admitted = handler.admit_body()
        except Exception as error:
            self._give_back(conn, [], close=True, error=error)
            return
        self._give_back(conn, handler.answer.pieces, close=not conn.admitted)

    def _give_back(
        self, conn: Connection, answer: list[bytes | bytearray], close: bool, error: object = None
    ) -> None:
        """Hand the connection and its answer back to the selector thread to send."""
        if error is not None:
            fields = {"client": conn.peer, "error": f"{type(error).__name__}: {error}"}
            log.error("request handler failed", extra={"fields": fields})
        conn.outgoing.extend(memoryview(piece) for piece in answer if piece)
        conn.close_after_answer = close
        with self._lock:
            stopping = self._stop.is_set()
            if not stopping:
                self._returned.append(conn)
        if stopping:  # the selector may be gone: nobody else would close it
            self._close(conn)
        else:
            self._wake()


def _lateness(conn: Connection) -> str | None:
    """Why a connection past its deadline is closed (None: normal, not logged)."""
    if conn.handshaking:
        return "TLS handshake timed out"
    if conn.lingering:
        return None
    if conn.outgoing:
        return "answer not taken in time"
    if conn.buffer or conn.head:
        return "request not complete in time"
    return None  # an idle keep-alive connection ending is normal
