"""The exporter's HTTP endpoints: /metrics, the landing page, health, readiness and reload.

Each connection is served on its own thread, and with TLS the handshake happens on that
thread too (unlike ``start_http_server``), so one idle client can never block the others.
"""

from __future__ import annotations

import logging
import socket
import ssl
from base64 import b64decode
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from exporter.exposition import (
    OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    Exposition,
    accepts_gzip,
    wants_openmetrics,
)
from exporter.landing import landing_page
from exporter.probe import TIMEOUT_HEADER, ProbeAnswer
from exporter.webconfig import WebConfig

log = logging.getLogger("ledger_exporter")

TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0


class ListenAddressError(ValueError):
    """The listen address is not of the form host:port."""


class App(Protocol):
    """What the HTTP server needs from the running exporter."""

    def exposition(self) -> Exposition: ...
    def ready(self) -> bool: ...
    def reload(self) -> None: ...
    def probe(self, query: str, timeout_header: str | None, openmetrics: bool) -> ProbeAnswer: ...


def parse_listen_address(address: str) -> tuple[str, int]:
    """``:9877``, ``0.0.0.0:9877``, ``[::]:9877`` or ``localhost:9877`` to (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ListenAddressError(f"listen address {address!r} must be host:port, e.g. :9877")
    return host.strip("[]"), int(port)


class ExporterServer(ThreadingHTTPServer):
    """Threaded HTTP(S) server over an App; TLS and basic auth come from the web config."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: str, app: App, web: WebConfig | None = None) -> None:
        host, port = parse_listen_address(address)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.app = app
        self.web = web or WebConfig()
        self._tls = self.web.ssl_context()
        super().__init__((host or "0.0.0.0", port), _Handler)

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        """Serve until shutdown(); a short poll interval makes shutdown prompt."""
        super().serve_forever(poll_interval)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Do the TLS handshake here, on the connection's own thread, with a timeout."""
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(TLS_HANDSHAKE_TIMEOUT_SECONDS)
        try:
            with self._tls.wrap_socket(request, server_side=True) as secure:
                secure.settimeout(None)
                super().finish_request(secure, client_address)
        except (ssl.SSLError, OSError) as error:
            log.debug("TLS connection failed", extra={"fields": {"error": str(error)}})


class _Handler(BaseHTTPRequestHandler):
    server: ExporterServer
    protocol_version = "HTTP/1.1"
    server_version = "ledger-exporter"
    # Headers and body go out as two writes; with Nagle's algorithm the body waits for the
    # client's delayed ACK, adding about 40 ms to every small scrape.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._dispatch(send_body=True)

    def do_HEAD(self) -> None:
        self._dispatch(send_body=False)

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path.split("?")[0] != "/-/reload":
            self._reply(HTTPStatus.METHOD_NOT_ALLOWED, b"Only /-/reload accepts POST.\n")
            return
        try:
            self.server.app.reload()
        except Exception as error:
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, f"reload failed: {error}\n".encode())
            return
        self._reply(HTTPStatus.OK, b"Configuration reloaded.\n")

    def _dispatch(self, send_body: bool) -> None:
        if not self._authorized():
            return
        path = self.path.split("?")[0]
        routes: dict[str, Callable[[bool], None]] = {
            "/metrics": self._metrics,
            "/": self._landing,
            "/-/healthy": lambda body: self._reply(HTTPStatus.OK, b"Healthy.\n", send_body=body),
            "/-/ready": self._ready,
            "/probe": self._probe,
        }
        route = routes.get(path)
        if route is None:
            status = HTTPStatus.METHOD_NOT_ALLOWED if path == "/-/reload" else HTTPStatus.NOT_FOUND
            self._reply(status, f"{status.phrase}.\n".encode(), send_body=send_body)
            return
        route(send_body)

    def _metrics(self, send_body: bool) -> None:
        openmetrics = wants_openmetrics(self.headers.get("Accept"))
        gzipped = accepts_gzip(self.headers.get("Accept-Encoding"))
        body = self.server.app.exposition().body(openmetrics, gzipped)
        content_type = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
        extra = {"Content-Encoding": "gzip"} if gzipped else {}
        self._reply(HTTPStatus.OK, body, content_type, extra, send_body)

    def _probe(self, send_body: bool) -> None:
        query = self.path.partition("?")[2]
        openmetrics = wants_openmetrics(self.headers.get("Accept"))
        answer = self.server.app.probe(query, self.headers.get(TIMEOUT_HEADER), openmetrics)
        self._reply(answer.status, answer.body, answer.content_type, send_body=send_body)

    def _landing(self, send_body: bool) -> None:
        page = landing_page(self.server.app.exposition().snapshot).encode()
        self._reply(HTTPStatus.OK, page, "text/html; charset=utf-8", send_body=send_body)

    def _ready(self, send_body: bool) -> None:
        if self.server.app.ready():
            self._reply(HTTPStatus.OK, b"Ready.\n", send_body=send_body)
        else:
            body = b"Not ready: the first polling cycle has not finished.\n"
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, body, send_body=send_body)

    def _authorized(self) -> bool:
        users = self.server.web.basic_auth_users
        if not users:
            return True
        user, password = _basic_credentials(self.headers.get("Authorization", ""))
        if user is not None and self.server.web.check_password(user, password):
            return True
        self._reply(
            HTTPStatus.UNAUTHORIZED,
            b"Unauthorized.\n",
            extra={"WWW-Authenticate": 'Basic realm="ledger-exporter"'},
        )
        return False

    def _reply(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        extra: dict[str, str] | None = None,
        send_body: bool = True,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**self.server.web.headers, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def _basic_credentials(header: str) -> tuple[str | None, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None, ""
    try:
        user, sep, password = b64decode(encoded, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, ""
    return (user, password) if sep else (None, "")
