"""The exporter's HTTP endpoints: /metrics, the landing page, health, readiness and reload.

Served by ``exporter.web.httpserver``: idle, stalled, slow or TLS-handshaking clients cost no
thread and are closed after the time limits, so one client can never block the others. Every
answer is a copy of bytes made once per snapshot, or as cheap as its own parameters make it;
the work that can wait (bcrypt, a reload, a probe) is bounded in how many requests it holds.
"""

from __future__ import annotations

import logging
import ssl
import time
from base64 import b64decode
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Protocol
from urllib.parse import urlsplit

from exporter.config.web import WebConfig
from exporter.errors import (
    BindError,
    InvalidListenAddressError,
    PasswordChecksBusyError,
    ReloadPendingError,
)
from exporter.expose.render import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE
from exporter.web.exposition import Exposition, accepts_gzip, wants_openmetrics
from exporter.web.httpserver import (
    HTTPRequestHandler,
    ServerLimits,
    ThreadedHTTPServer,
    parse_listen_address,
)
from exporter.web.probe_endpoint import TIMEOUT_HEADER, ProbeAnswer

log = logging.getLogger("ledger_exporter")

__all__ = [
    "App",
    "ExporterServer",
    "ServerLimits",
    "bind_servers",
    "parse_listen_address",
]

RELOAD_PATH = "/-/reload"
RELOAD_BODY_BYTES = 4096  # a reload takes no body; a small one (a form, a script's JSON) is read
DEFAULT_TELEMETRY_PATH = "/metrics"
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class App(Protocol):
    """What the HTTP server needs from the running exporter."""

    def exposition(self) -> Exposition: ...
    def ready(self) -> bool: ...
    def reload(self) -> None: ...
    def probe(self, query: str, timeout_header: str | None, openmetrics: bool) -> ProbeAnswer: ...


class ExporterServer(ThreadedHTTPServer):
    """The exporter's HTTP(S) server over an App; TLS and basic auth come from the web config,
    which a reload may replace (new connections use the new one)."""

    def __init__(
        self,
        address: str,
        app: App,
        web: WebConfig | None = None,
        limits: ServerLimits | None = None,
        telemetry_path: str = DEFAULT_TELEMETRY_PATH,
    ) -> None:
        self.app = app
        self.web = web or WebConfig()
        self.telemetry_path = telemetry_path
        self.listen_address = address
        super().__init__(parse_listen_address(address), _Handler, limits, self.web.ssl_context())
        self.answer_headers = self.web.answer_headers()

    def use_web_config(self, web: WebConfig) -> None:
        """Serve with a re-read web config from now on (TLS: from the next connection)."""
        self.tls = web.ssl_context()
        self.web = web
        self.answer_headers = web.answer_headers()

    def refuse_peer(self, sock: ssl.SSLSocket) -> str | None:
        """After a TLS handshake: why the client may not go on (its certificate's SANs are
        not in ``client_allowed_sans`` of the web config that made the connection's
        context), or None."""
        return self.web.refuse_peer(sock)


def bind_servers(
    addresses: Sequence[str],
    app: App,
    web: WebConfig | None = None,
    limits: ServerLimits | None = None,
    telemetry_path: str = DEFAULT_TELEMETRY_PATH,
) -> list[ExporterServer]:
    """One server per address, the same handlers, web config and limits on each (as
    exporter-toolkit serves several ``--web.listen-address``); all bound, or none and a
    BindError naming the address that failed. The TLS context is made first, so a web
    config that cannot be used (a certificate gone since it was checked) raises its own
    error, never one that blames an address."""
    (web or WebConfig()).ssl_context()
    servers: list[ExporterServer] = []
    try:
        for address in addresses:
            try:
                servers.append(ExporterServer(address, app, web, limits, telemetry_path))
            except InvalidListenAddressError:
                raise
            except OSError as error:
                raise BindError(address, error) from None
    except BaseException:
        for server in servers:
            server.server_close()
        raise
    return servers


class _Handler(HTTPRequestHandler):
    server: ExporterServer
    server_version = "ledger-exporter"

    @classmethod
    def body_limit(cls, method: str, path: str) -> int:
        """Only ``POST /-/reload`` takes a body, and a small one (it is read and ignored)."""
        return RELOAD_BODY_BYTES if (method, path) == ("POST", RELOAD_PATH) else 0

    def admit(self) -> bool:
        """Before anything else, and before a body is read: same origin, then credentials."""
        return self._same_origin() and self._authorized()

    def do_GET(self) -> None:  # noqa: N802 (http.server names)
        self._dispatch(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch(send_body=False)

    def do_POST(self) -> None:  # noqa: N802
        if not self.admit():
            return
        if self.path.split("?")[0] != RELOAD_PATH:
            self._not_allowed("GET, HEAD")
            return
        try:
            self.server.app.reload()
        except ReloadPendingError:
            body = b"A reload is already pending; it reads the files after this request.\n"
            self._reply(HTTPStatus.TOO_MANY_REQUESTS, body, extra={"Retry-After": "1"})
            return
        except Exception as error:
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, f"reload failed: {error}\n".encode())
            return
        self._reply(HTTPStatus.OK, b"Configuration reloaded.\n")

    def _dispatch(self, send_body: bool) -> None:
        if not self._authorized():
            return
        path = self.path.split("?")[0]
        routes: dict[str, Callable[[bool], None]] = {
            self.server.telemetry_path: self._metrics,
            "/": self._landing,
            "/-/healthy": lambda body: self._reply(HTTPStatus.OK, b"Healthy.\n", send_body=body),
            "/-/ready": self._ready,
            "/probe": self._probe,
        }
        route = routes.get(path)
        if path == RELOAD_PATH:
            self._not_allowed("POST", send_body)
        elif route is None:
            self._reply(HTTPStatus.NOT_FOUND, b"Not Found.\n", send_body=send_body)
        else:
            route(send_body)

    def _other_method(self) -> None:
        """PUT, DELETE, ...: 405 with what the path does accept."""
        if not self.admit():
            return
        self._not_allowed("POST" if self.path.split("?")[0] == RELOAD_PATH else "GET, HEAD")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other_method  # noqa: N815

    def _not_allowed(self, allow: str, send_body: bool = True) -> None:
        body = f"Method Not Allowed; this path accepts {allow}.\n".encode()
        extra = {"Allow": allow}
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, body, extra=extra, send_body=send_body)

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
        page = self.server.app.exposition().landing(time.monotonic())  # rendered once a snapshot
        self._reply(HTTPStatus.OK, page, "text/html; charset=utf-8", send_body=send_body)

    def _ready(self, send_body: bool) -> None:
        if self.server.app.ready():
            self._reply(HTTPStatus.OK, b"Ready.\n", send_body=send_body)
        else:
            body = (
                b"Not ready: no polling cycle has finished yet, or none for longer than"
                b" ledger_exporter_stale_after_seconds.\n"
            )
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, body, send_body=send_body)

    def _authorized(self) -> bool:
        users = self.server.web.basic_auth_users
        if not users:
            return True
        user, password = _basic_credentials(self.headers.get("Authorization", ""))
        try:
            if user is not None and self.server.web.check_password(user, password):
                return True
        except PasswordChecksBusyError:  # bcrypt is busy with others: no waiting in line
            body = b"Too many logins are being checked; retry in a second.\n"
            self._reply(HTTPStatus.TOO_MANY_REQUESTS, body, extra={"Retry-After": "1"})
            return False
        self._reply(
            HTTPStatus.UNAUTHORIZED,
            b"Unauthorized.\n",
            extra={"WWW-Authenticate": 'Basic realm="ledger-exporter"'},
        )
        return False

    def _same_origin(self) -> bool:
        """False (after a 403) for a request a browser sends from another origin's page: an
        ``Origin`` other than this server's own host and port, or ``Sec-Fetch-Site`` saying
        cross-site or same-site. Requests that can change state are refused; clients that are
        not browsers send neither header."""
        if self.command in _SAFE_METHODS:
            return True
        site = self.headers.get("Sec-Fetch-Site", "").strip().lower()
        origin = self.headers.get("Origin")
        if site not in ("cross-site", "same-site") and (
            origin is None or _same_host(origin, self.headers.get("Host", ""))
        ):
            return True
        self._reply(HTTPStatus.FORBIDDEN, b"Forbidden: a cross-origin request.\n")
        return False

    def _reply(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        extra: dict[str, str] | None = None,
        send_body: bool = True,
    ) -> None:
        self.content_type = content_type  # for the request's log line, written by send_response
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():  # the security headers: send_response's
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)


def _basic_credentials(header: str) -> tuple[str | None, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None, ""
    try:
        user, sep, password = b64decode(encoded, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, ""
    return (user, password) if sep else (None, "")


def _same_host(origin: str, host: str) -> bool:
    """True when the ``Origin`` header names the host and port the request was sent to."""
    try:
        sent, target = urlsplit(origin.strip()), urlsplit(f"//{host.strip()}")
        default = _DEFAULT_PORTS.get(sent.scheme.lower())
        if default is None or not sent.hostname or sent.path or sent.query or sent.username:
            return False
        return (sent.hostname, sent.port or default) == (target.hostname, target.port or default)
    except ValueError:  # a port out of range, a malformed IPv6 address
        return False
