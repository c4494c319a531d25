"""HTTP plumbing: the request handler, the server class and the request router.

A router sees every request with the node the listening port belongs to (ports layout) or
``None`` (the shared port: admin endpoint, and all nodes under ``/nodes/node-<i>/`` in the
paths layout). Node requests pass through the faults in force before the node API answers.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from exporter.web.httpserver import HTTPRequestHandler, ServerLimits, ThreadedHTTPServer
from ledger_simulator.admin import AdminApi
from ledger_simulator.api import NodeApi, Response, error_response, split_path
from ledger_simulator.errors import UnknownNodeError
from ledger_simulator.faults import FaultRegistry
from ledger_simulator.topology import Topology

log = logging.getLogger("ledger_exporter.simulator")
MAX_BODY = 64 * 1024  # admin requests are tiny; refuse anything larger
# The ``slow`` fault holds a handler thread for its delay: allow many at once.
SIM_LIMITS = ServerLimits(max_connections=4096, max_handlers=256)


@dataclass(frozen=True)
class Request:
    """What the router needs from an HTTP request."""

    method: str
    path: str
    query: str
    body: bytes
    node: int | None  # the node owning the port, None on the shared port


class Core(Protocol):
    """What the router needs from the network."""

    topology: Topology
    faults: FaultRegistry
    api: NodeApi
    admin: AdminApi
    layout: str
    stopping: threading.Event

    def now(self) -> float: ...


class Router:
    """Maps requests to the admin endpoint or a node, applying the node's faults."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def handle(self, request: Request) -> Response | None:
        """The answer, or None when the connection must be closed without one."""
        segments = split_path(request.path)
        if request.node is not None:
            return self.node_request(request.node, segments[:], request)
        if segments[:2] == ["-", "sim"]:
            return self.core.admin.handle(request.method, segments[2:], request.body)
        if self.core.layout == "paths" and len(segments) >= 2 and segments[0] == "nodes":
            try:
                node = self.core.topology.node_index(segments[1])
            except UnknownNodeError as error:
                return error_response(404, str(error))
            return self.node_request(node, segments[2:], request)
        if not segments and request.method == "GET":
            return self.core.admin.handle("GET", [], b"")
        return error_response(404, f"no such endpoint: {request.path}")

    def node_request(self, node: int, segments: list[str], request: Request) -> Response | None:
        """A node API request: GET only, shaped by the faults of the node and its chain."""
        if request.method != "GET":
            return error_response(405, f"method {request.method} not allowed", Allow="GET")
        api = self.core.api
        chain = api.target_chain(segments, request.query)
        faults = self.core.faults.active(self.core.topology.node_name(node), chain)
        if faults.down:
            return None
        if faults.slow_seconds and self.core.stopping.wait(faults.slow_seconds):
            return None
        if faults.http_500:
            return error_response(500, "simulated internal error (fault http_500)")
        if faults.answered_by is not None:  # identity_swap: another node answers here
            node = self.core.topology.node_index(faults.answered_by)
        response = api.respond(node, segments, request.query, self.core.now())
        if faults.malformed_json:
            response.body = response.body[: max(1, len(response.body) // 2)]
        return response


class SimServer(ThreadedHTTPServer):
    """The exporter's HTTP server class, serving the router for one port (node or shared)."""

    def __init__(
        self,
        address: tuple[str, int],
        router: Router,
        node: int | None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.router = router
        self.node = node
        super().__init__(address, Handler, SIM_LIMITS, tls=tls, bind_and_activate=False)


class Handler(HTTPRequestHandler):
    """Turns an HTTP request into a Request for the router and writes its Response."""

    server: SimServer
    server_version = "ledger-simulator"

    def __getattr__(self, name: str) -> Callable[[], None]:
        """Every method, ``GET`` or any other (http.server looks up ``do_<METHOD>``), goes
        through the router, which decides what is allowed: a node answers 405 with its JSON
        error, as for ``POST``, and not http.server's HTML 501 page (``TRACE``, ``CONNECT``,
        extension methods)."""
        if name.startswith("do_"):
            return self.serve
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def serve(self) -> None:
        """Read the request, route it and write the answer (or close without one)."""
        started = time.monotonic()
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.write(error_response(413, f"request body over {MAX_BODY} bytes"), close=True)
            return
        body = self.rfile.read(length) if length > 0 else b""
        request = Request(self.command, parts.path, parts.query, body, self.server.node)
        response = self.server.router.handle(request)
        if response is None:
            self.close_connection = True
            log.debug("closed without answer", extra={"fields": self.fields()})
            return
        self.write(response, close=self.command == "HEAD" or response.status == 405)
        seconds = round(time.monotonic() - started, 3)
        fields = {**self.fields(), "status": response.status, "seconds": seconds}
        log.debug("answered", extra={"fields": fields})

    def fields(self) -> dict[str, object]:
        """Key-values of the request for logfmt/JSON log lines."""
        return {"method": self.command, "path": self.path}

    def write(self, response: Response, close: bool) -> None:
        """Send status, headers and (except for HEAD) the body."""
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except OSError:
            self.close_connection = True  # the client went away; nothing to answer

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Requests are logged by serve() with their duration instead."""

    def log_message(self, format: str, *args: object) -> None:
        """Route http.server's own messages (errors) to logging instead of stderr."""
        log.debug(format, *args)
