"""The pieces of one client connection for ``exporter.web.httpserver``: what has been read of it
and what is left to send, the request head the server frames a body by, the in-memory file a
handler writes its answer to, and the bounded thread pool. Nothing here knows the server.
"""

from __future__ import annotations

import io
import logging
import re
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from exporter.errors import RequestRefusedError

log = logging.getLogger("ledger_exporter")

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_FIELD_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token
READ_CHUNK = 65536
_LENGTH_DIGITS = 15  # more digits than this is over any cap; int() is never given a long one
DEFAULT_BODY_LIMIT = 65536


def refusal(
    error: RequestRefusedError, head_only: bool = False, headers: Mapping[str, str] | None = None
) -> bytes:
    """The answer to a refused request, as sent, with ``headers`` (the server's on every
    answer); to a HEAD request without its body (RFC 9110, 9.3.2: a client reads none, so a
    body would be taken for the next answer)."""
    status = error.status
    body = f"{status.phrase}: {error.reason}.\n".encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    return (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\n{extra}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + (b"" if head_only else body)


@dataclass(frozen=True)
class RequestHead:
    """What the server needs of a request head to frame its body: method, path without the
    query, where the head ends and how many body bytes follow it."""

    method: str
    path: str
    size: int
    content_length: int


def origin_form(target: str) -> str:
    """A request target in absolute form (``http://host:port/metrics?x``, which RFC 9112
    3.2.2 has every server accept) as the path and query it names; any other as it is."""
    scheme, sep, rest = target.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return target
    ends = [at for at in (rest.find("/"), rest.find("?"), rest.find("#")) if at >= 0]
    path = rest[min(ends) :] if ends else ""
    return path if path.startswith("/") else "/" + path


def parse_head(buffer: bytes | bytearray, size: int) -> RequestHead:
    """The head in ``buffer[:size]``, strictly: a header line must be ``token: value`` (no
    folding, no space before the colon, no bare CR or NUL), Content-Length at most once and
    ASCII digits only, and no Transfer-Encoding (request bodies are small and counted).
    Anything else raises RequestRefusedError, so the server and the handler can never disagree
    about where a request ends."""
    lines = bytes(buffer[:size]).split(b"\n")
    words = lines[0].split()
    method = words[0].decode("latin-1") if words else ""
    path = origin_form(words[1].decode("latin-1")).partition("?")[0] if len(words) > 1 else ""
    lengths: list[bytes] = []
    chunked = False
    for raw in lines[1:]:
        line = raw.removesuffix(b"\r")
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not _FIELD_NAME.fullmatch(name) or b"\r" in line or b"\0" in line:
            raise RequestRefusedError(HTTPStatus.BAD_REQUEST, "malformed header line")
        if name.lower() == b"content-length":
            lengths.append(value.strip(b" \t"))
        elif name.lower() == b"transfer-encoding":
            chunked = True
    if chunked and lengths:
        raise RequestRefusedError(
            HTTPStatus.BAD_REQUEST, "both Transfer-Encoding and Content-Length"
        )
    if chunked:
        raise RequestRefusedError(
            HTTPStatus.LENGTH_REQUIRED, "a request body needs a Content-Length"
        )
    return RequestHead(method, path, size, _content_length(lengths))


def _content_length(values: list[bytes]) -> int:
    if not values:
        return 0
    if len(values) > 1:
        raise RequestRefusedError(HTTPStatus.BAD_REQUEST, "more than one Content-Length")
    value = values[0]
    if not value.isdigit():  # bytes.isdigit(): ASCII digits only, no sign, no underscore
        raise RequestRefusedError(HTTPStatus.BAD_REQUEST, "Content-Length must be a decimal number")
    return int(value) if len(value) <= _LENGTH_DIGITS else 10**_LENGTH_DIGITS


class Connection:
    """One accepted client connection: the bytes read of its next request, the answer being
    sent, and where it is in its life (handshake, request, handler, answer, closing)."""

    def __init__(self, sock: socket.socket, peer: Any, deadline: float) -> None:
        self.sock = sock
        self.address = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else (str(peer), 0)
        host = self.address[0]
        self.peer = f"[{host}]:{self.address[1]}" if ":" in host else f"{host}:{self.address[1]}"
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer already searched for a head's end
        self.head: RequestHead | None = None  # of the request being read, once complete
        self.admitted = False  # its handler let its body be read
        self.deadline = deadline  # of whatever the connection is waiting for now
        self.request_deadline = deadline  # of the whole request being read
        self.outgoing: deque[memoryview] = deque()
        self.write_deadline = 0.0
        self.close_after_answer = False
        self.events = 0  # what the selector watches it for; 0 while a handler has it
        self.handshaking = False
        self.busy = False
        self.lingering = False
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
        """Where the first complete request head in the buffer ends, or 0. Searches only what
        arrived since the last call: a head dripped a byte at a time costs linear time."""
        found = _HEAD_END.search(self.buffer, max(0, self.scanned - 3))
        self.scanned = 0 if found else len(self.buffer)
        return found.end() if found else 0

    def skip_empty_lines(self) -> None:
        """Drop empty lines before the next request line (RFC 9112 2.2: a client may send
        one after a request body); the server calls it before a request has begun."""
        if self.buffer.startswith((b"\r", b"\n")):
            del self.buffer[: len(self.buffer) - len(self.buffer.lstrip(b"\r\n"))]
            self.scanned = 0

    def request_size(self) -> int:
        """Bytes of the request being read (head and body), or 0 before its head is whole."""
        return self.head.size + self.head.content_length if self.head else 0

    def take_request(self) -> bytes:
        """Remove the complete request from the buffer and return it."""
        size = self.request_size()
        request = bytes(self.buffer[:size])
        del self.buffer[:size]
        self.discard_request()
        return request

    def discard_request(self) -> None:
        """Forget the request being read (what is left in the buffer is the next one's)."""
        self.head, self.admitted, self.scanned = None, False, 0


class AnswerWriter(io.BufferedIOBase):
    """The handler's ``wfile``: the answer collected in memory (large bodies by reference,
    small writes joined into one piece) for the server to send without blocking."""

    def __init__(self) -> None:
        self.pieces: list[bytes | bytearray] = []

    def write(self, data: Any) -> int:
        size = len(data)
        last = self.pieces[-1] if self.pieces else None
        if size < READ_CHUNK and isinstance(last, bytearray) and len(last) + size <= READ_CHUNK:
            last += data
        elif size < READ_CHUNK:
            self.pieces.append(bytearray(data))
        else:
            self.pieces.append(data if isinstance(data, bytes) else bytes(data))
        return size

    def writable(self) -> bool:
        return True


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
