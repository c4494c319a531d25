"""The one fake ledger node: a real HTTP server on 127.0.0.1 answering configured routes.

Each path answers its own way: a document (``set``: JSON-encoded unless bytes, with a status,
content type, extra headers, with or without ``Content-Length``, late by ``delay``, or held
until ``release()``), bytes written as they are (``raw``: broken framing, chunked bodies), or
an answer dripped a byte at a time (``drip``). An unknown path is a 404, unless the node
stands in for a real one (``stand_in``): then it is asked of that node and its answer, passed
through a rewrite, is served (a hostile node in front of an honest simulated one:
``tests/support/hostile.py``).

What happened is recorded for the test to assert on: every request as received (path,
headers, the client's port: one per TCP connection), the paths whose client hung up before
the answer was whole (``hung_up``: the client gave up, as a deadline makes it), and the
connections accepted and ended. Use it through the ``fake_node`` and ``fake_nodes``
fixtures, which stop what they started.
"""

from __future__ import annotations

import json
import os
import select
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

#: How long a drip goes on at most: far past any deadline a test sets, so only a client that
#: never gives up sees its end (the connection dropped), and a broken client cannot hang a test.
DRIP_LIMIT_SECONDS = 10.0
DRIP_EVERY_SECONDS = 0.05
Drip = Literal["body", "chunked", "headers"]
Serve = Callable[[BaseHTTPRequestHandler], None]
#: A stand-in's rewrite: (path with its query, the upstream status, its JSON document or None
#: when it sent none) -> the status and document to answer instead.
Rewrite = Callable[[str, int, Any], tuple[int, Any]]
#: How long a stand-in waits for the node it stands in for.
UPSTREAM_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the node received it."""

    path: str
    headers: dict[str, str]
    port: int  # the client's port: one per TCP connection


class _CountingServer(ThreadingHTTPServer):
    """Counts the connections it accepts and those that ended."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.accepted = 0
        self.ended = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        request = super().get_request()
        self.accepted += 1
        return request

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.ended += 1


class FakeNode:
    """A (mis)behaving node over real sockets: see the module's docstring.

    ``keep_alive`` answers in HTTP/1.1 and keeps connections open, as node API servers do;
    without it each answer closes its connection (HTTP/1.0). ``tls`` serves https.
    """

    def __init__(self, *, keep_alive: bool = False, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[ReceivedRequest] = []
        self.hung_up: list[str] = []
        self._routes: dict[str, Serve] = {}
        self._stopped = threading.Event()
        self._release = threading.Event()
        self._fallback: Serve = self._not_found
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_GET(self) -> None:
                node.requests.append(
                    ReceivedRequest(self.path, dict(self.headers), self.client_address[1])
                )
                serve = node._routes.get(self.path, node._fallback)
                try:
                    serve(self)
                except OSError:  # the client hung up while the answer was being written
                    node.hung_up.append(self.path)
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = _CountingServer(Handler, tls)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,))
        self.scheme = "https" if tls else "http"

    # --- running ---

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL, with a trailing slash."""
        return f"{self.scheme}://127.0.0.1:{self.port}/"

    def start(self) -> FakeNode:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; held and dripping answers end unanswered."""
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    # --- what happened ---

    @property
    def paths(self) -> list[str]:
        """The paths asked for, in order (with their query)."""
        return [request.path for request in self.requests]

    @property
    def connections_accepted(self) -> int:
        return self._server.accepted

    @property
    def open_connections(self) -> int:
        """Connections accepted and not ended yet (the client or the node closed them)."""
        return self._server.accepted - self._server.ended

    # --- routes ---

    def set(
        self,
        path: str,
        body: Any,
        status: int = 200,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        length: bool = True,
        delay: float = 0.0,
        held: bool = False,
    ) -> None:
        """Answer ``path`` with ``body`` (JSON-encoded unless bytes).

        ``length=False`` sends no ``Content-Length`` and closes the connection to end the
        body. ``delay`` answers that many seconds late; ``held`` answers only once
        ``release()`` is called, and never if the client hangs up first (then the path is in
        ``hung_up``): a node that hangs.
        """
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        extra = dict(headers or {})

        def serve(handler: BaseHTTPRequestHandler) -> None:
            unanswered = held and not self._held_until_released(handler)
            if unanswered or (delay and self._stopped.wait(delay)):
                handler.close_connection = True  # the node stopped, or the client left
                return
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            for name, value in extra.items():
                handler.send_header(name, value)
            if length:
                handler.send_header("Content-Length", str(len(raw)))
            else:
                handler.send_header("Connection", "close")
                handler.close_connection = True
            handler.end_headers()
            handler.wfile.write(raw)

        self._routes[path] = serve

    def play(self, health: dict[str, Any], chains: dict[str, dict[str, Any]]) -> None:
        """Serve a ``/health`` document and one status document per chain (its id as sent)."""
        self.set("/health", health)
        for chain, document in chains.items():
            self.set(f"/blockchains/{chain}", document)

    def raw(self, path: str, data: bytes, *, close: bool = True) -> None:
        """Answer ``path`` with exactly ``data`` (status line, headers and body as given), then
        close the connection unless ``close=False`` (``data`` then frames a whole answer)."""

        def serve(handler: BaseHTTPRequestHandler) -> None:
            handler.wfile.write(data)
            handler.close_connection = close

        self._routes[path] = serve

    def drip(self, path: str, part: Drip) -> None:
        """Answer ``path`` a byte every 50 ms, never finishing: the ``body`` (of a declared
        100000 bytes), a ``chunked`` body, or the ``headers`` (an endless head). A client
        hanging up is recorded in ``hung_up``."""
        heads = {
            "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n",
            "chunked": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            "headers": b"HTTP/1.1 200 OK\r\n",
        }
        pieces: dict[str, Callable[[int], bytes]] = {
            "body": lambda _: b" ",
            "chunked": lambda _: b"1\r\n \r\n",
            "headers": lambda index: b"X-Drip-%d: x\r\n" % index,
        }
        head, piece = heads[part], pieces[part]

        def serve(handler: BaseHTTPRequestHandler) -> None:
            handler.close_connection = True
            handler.wfile.write(head)
            handler.wfile.flush()
            for index in self._dripping():
                handler.wfile.write(piece(index))
                handler.wfile.flush()

        self._routes[path] = serve

    def stand_in(self, upstream: str, rewrite: Rewrite) -> None:
        """Answer every path not ``set`` by asking ``upstream`` (a base URL, no trailing
        slash) for it and serving what ``rewrite`` makes of the answer, as JSON."""

        def serve(handler: BaseHTTPRequestHandler) -> None:
            status, document = _ask(upstream + handler.path)
            status, document = rewrite(handler.path, status, document)
            raw = json.dumps(document).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw)

        self._fallback = serve

    def reset(self) -> None:
        """Forget every route and recorded request, as if just started: a generated test
        serves each example's answers from the same node."""
        self._routes.clear()
        self._fallback = self._not_found
        self.requests.clear()
        self.hung_up.clear()

    def release(self) -> None:
        """Send every held answer now; later requests to a held path are held again."""
        released, self._release = self._release, threading.Event()
        released.set()

    # --- inside ---

    def _not_found(self, handler: BaseHTTPRequestHandler) -> None:
        body = b'{"error": "not found"}'
        handler.send_response(404)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _held_until_released(self, handler: BaseHTTPRequestHandler) -> bool:
        """Wait for ``release()``: True then; False when the node stops or the client hangs up
        first (recorded in ``hung_up``)."""
        release = self._release
        while not release.wait(0.02):
            if self._stopped.is_set():
                return False
            if _peer_closed(handler.connection):
                self.hung_up.append(handler.path)
                return False
        return True

    def _dripping(self) -> Iterator[int]:
        ticks = int(DRIP_LIMIT_SECONDS / DRIP_EVERY_SECONDS)
        for index in range(ticks):
            if self._stopped.wait(DRIP_EVERY_SECONDS):
                return
            yield index


def _ask(url: str) -> tuple[int, Any]:
    """``GET url``: its status and JSON document (None when the body is not JSON, or when the
    node did not answer: status 502)."""
    try:
        with urllib.request.urlopen(url, timeout=UPSTREAM_TIMEOUT_SECONDS) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    except OSError:
        return 502, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def _peer_closed(connection: socket.socket) -> bool:
    """True when the client closed or reset ``connection`` (found by peeking: nothing is
    read; a TLS socket is peeked through a plain duplicate of its descriptor)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    with socket.socket(fileno=os.dup(connection.fileno())) as plain:
        plain.setblocking(False)
        try:
            return plain.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True


class FakeNodes:
    """Starts fake nodes and stops them all at the end (what the ``fake_nodes`` fixture is)."""

    def __init__(self) -> None:
        self.started: list[FakeNode] = []

    def start(self, *, keep_alive: bool = False, tls: ssl.SSLContext | None = None) -> FakeNode:
        node = FakeNode(keep_alive=keep_alive, tls=tls).start()
        self.started.append(node)
        return node

    def stop_all(self) -> None:
        for node in self.started:
            node.stop()
