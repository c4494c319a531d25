"""NodeClient: how each way a request can fail is classified, and that none outlives its deadline.

Most cases use ``responses`` (requests never leave the process); the ones about time, sockets
and encodings use a real HTTP server on 127.0.0.1, started and stopped by the test.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import responses

from exporter import __version__
from exporter.client import FetchError, NodeClient, Reason, make_session
from exporter.config import NodeConfig

BASE = "http://127.0.0.1:7740/"
CAP = 1000


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def client(url: str = BASE, max_bytes: int = CAP, **node: Any) -> NodeClient:
    return NodeClient(make_session(4), NodeConfig("validator-1", url, **node), max_bytes)


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def fetch_error(node_client: NodeClient, segments: list[str], deadline: float) -> FetchError:
    with pytest.raises(FetchError) as caught:
        node_client.get_json(segments, deadline)
    return caught.value


# --- with responses ---


def test_success_decodes_the_document(mocked: responses.RequestsMock) -> None:
    health = {"nodeVersion": "1.4.2", "network": {"peerCount": 4}, "blockchains": ["8f2a9c"]}
    mocked.get(BASE + "health", json=health)
    assert client().get_json(["health"], soon()) == health
    assert len(mocked.calls) == 1
    assert mocked.calls[0].request.url == BASE + "health"


def test_request_headers_identify_the_exporter(mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", json={})
    client().get_json(["health"], soon())
    headers = mocked.calls[0].request.headers
    assert headers["User-Agent"] == f"ledger-exporter/{__version__}"
    assert headers["Accept"] == "application/json"
    assert "Authorization" not in headers


@pytest.mark.parametrize(
    ("base", "segments", "url"),
    [
        (BASE, ["health"], "http://127.0.0.1:7740/health"),
        ("http://127.0.0.1:7740", ["health"], "http://127.0.0.1:7740/health"),
        (
            "http://127.0.0.1:7740/nodes/node-1/",
            ["blockchains", "8f2a9c"],
            "http://127.0.0.1:7740/nodes/node-1/blockchains/8f2a9c",
        ),
        (
            "http://127.0.0.1:7740/nodes/node-1",
            ["blockchains", "8f2a9c"],
            "http://127.0.0.1:7740/nodes/node-1/blockchains/8f2a9c",
        ),
        (
            "https://proxy.example/a/b/",
            ["blockchains", "a/b c?d#e%"],
            "https://proxy.example/a/b/blockchains/a%2Fb%20c%3Fd%23e%25",
        ),
        (BASE, ["blockchains", "ünï"], "http://127.0.0.1:7740/blockchains/%C3%BCn%C3%AF"),
        (BASE, ["blockchains", "a+b=c&d"], "http://127.0.0.1:7740/blockchains/a%2Bb%3Dc%26d"),
        (BASE, ["blockchains", ".."], "http://127.0.0.1:7740/blockchains/%2E%2E"),
        (BASE, ["blockchains", "."], "http://127.0.0.1:7740/blockchains/%2E"),
        (BASE, ["blockchains", "a..b"], "http://127.0.0.1:7740/blockchains/a..b"),
    ],
)
def test_url_for_keeps_the_prefix_and_escapes_segments(
    base: str, segments: list[str], url: str
) -> None:
    assert client(base).url_for(segments) == url


@pytest.mark.parametrize(
    "base", ["http://127.0.0.1:7740/nodes/node-1/", "http://127.0.0.1:7740/nodes/node-1"]
)
def test_request_goes_under_the_path_prefix(base: str, mocked: responses.RequestsMock) -> None:
    url = "http://127.0.0.1:7740/nodes/node-1/blockchains/8f2a9c"
    mocked.get(url, json={"blockHeight": 7})
    assert client(base).get_json(["blockchains", "8f2a9c"], soon()) == {"blockHeight": 7}
    assert mocked.calls[0].request.url == url


def test_chain_id_is_sent_as_one_escaped_segment(mocked: responses.RequestsMock) -> None:
    url = BASE + "blockchains/a%2Fb%20c%3Fd%23e%25"
    mocked.get(url, json={"blockHeight": 1})
    assert client().get_json(["blockchains", "a/b c?d#e%"], soon()) == {"blockHeight": 1}
    assert mocked.calls[0].request.path_url == "/blockchains/a%2Fb%20c%3Fd%23e%25"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 500, 502, 503])
def test_error_status_is_http_status(status: int, mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", json={"error": "nope"}, status=status)
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.HTTP_STATUS
    assert error.detail == f"HTTP status {status}"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(status: int, mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", status=status, headers={"Location": BASE + "elsewhere"})
    mocked.get(BASE + "elsewhere", json={"nodeVersion": "1.0"})
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.HTTP_STATUS
    assert error.detail == f"HTTP status {status}"
    assert [call.request.url for call in mocked.calls] == [BASE + "health"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "the body is not valid JSON"),
        (b"", "the body is not valid JSON"),
        (b'{"a": 1} trailing', "the body is not valid JSON"),
        (b'{"a": "\xff\xfe"}', "the body is not valid JSON"),
        (b"OK", "the body is not valid JSON"),
        (b"<!DOCTYPE html><html><body>Bad gateway</body></html>", "(an HTML page)"),
        (b"\n  <html><head><title>Login</title></head></html>", "(an HTML page)"),
        (b"<HTML>", "(an HTML page)"),
    ],
    ids=["garbage", "empty", "trailing", "not-utf8", "text", "doctype", "indented-html", "upper"],
)
def test_invalid_json(body: bytes, detail: str, mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", body=body, content_type="text/html")
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.INVALID_JSON
    assert error.detail.endswith(detail)


@pytest.mark.parametrize(
    "document",
    [[1, 2], ["8f2a9c"], "text", 42, 1.5, None, True, {"blockHeight": "12"}],
    ids=repr,
)
def test_any_json_is_returned_as_is(document: object, mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", body=json.dumps(document))
    assert client().get_json(["health"], soon()) == document


def test_declared_length_over_the_cap_is_too_large(mocked: responses.RequestsMock) -> None:
    body = json.dumps({"pad": "x" * CAP})
    mocked.get(BASE + "health", body=body, auto_calculate_content_length=True)
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"declared {len(body)} bytes, over the {CAP} cap"


def test_body_of_exactly_the_cap_is_read(mocked: responses.RequestsMock) -> None:
    body = json.dumps({"pad": "x" * (CAP - 11)})
    assert len(body) == CAP
    mocked.get(BASE + "health", body=body, auto_calculate_content_length=True)
    assert client().get_json(["health"], soon()) == {"pad": "x" * (CAP - 11)}


def test_streamed_body_over_the_cap_is_too_large(mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", body=json.dumps({"pad": "x" * CAP}))  # no Content-Length
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body over the {CAP} bytes cap"


def test_broken_gzip_is_an_invalid_response(mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", body=b"certainly not gzip", headers={"Content-Encoding": "gzip"})
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is Reason.INVALID_RESPONSE


@pytest.mark.parametrize(
    ("exception", "reason"),
    [
        (requests.ConnectTimeout("connect timed out"), Reason.TIMEOUT),
        (requests.ReadTimeout("read timed out"), Reason.TIMEOUT),
        (requests.ConnectionError("[Errno 111] Connection refused"), Reason.CONNECTION),
        (requests.ConnectionError("Name or service not known"), Reason.CONNECTION),
        (requests.exceptions.SSLError("certificate verify failed"), Reason.CONNECTION),
        (requests.exceptions.ChunkedEncodingError("broken"), Reason.CONNECTION),
    ],
    ids=["connect-timeout", "read-timeout", "refused", "dns", "tls", "chunked"],
)
def test_transport_failures(
    exception: Exception, reason: Reason, mocked: responses.RequestsMock
) -> None:
    mocked.get(BASE + "health", body=exception)
    error = fetch_error(client(), ["health"], soon())
    assert error.reason is reason


@pytest.mark.parametrize(
    ("exception", "detail"),
    [
        (requests.ConnectionError("[Errno 111] Connection refused"), "connection refused"),
        (requests.ConnectionError("Name or service not known"), "name or service not known"),
        (requests.exceptions.SSLError("certificate verify failed"), "certificate verify failed"),
        (requests.exceptions.SSLError("wrong version number"), "TLS handshake failed"),
    ],
)
def test_connection_failure_details(
    exception: Exception, detail: str, mocked: responses.RequestsMock
) -> None:
    mocked.get(BASE + "health", body=exception)
    assert fetch_error(client(), ["health"], soon()).detail == detail


@pytest.mark.parametrize("late_by", [0.0, 0.001, 30.0])
def test_deadline_already_passed_sends_nothing(
    late_by: float, mocked: responses.RequestsMock
) -> None:
    mocked.get(BASE + "health", json={})
    now = 1000.0
    node_client = NodeClient(
        make_session(4), NodeConfig("validator-1", BASE), CAP, monotonic=lambda: now
    )
    error = fetch_error(node_client, ["health"], now - late_by)
    assert error.reason is Reason.TIMEOUT
    assert len(mocked.calls) == 0


def test_configured_headers_are_sent(mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", json={})
    headers = (("X-Scope", "monitoring"), ("Authorization", "Bearer token-123"))
    client(headers=headers).get_json(["health"], soon())
    sent = mocked.calls[0].request.headers
    assert sent["X-Scope"] == "monitoring"
    assert sent["Authorization"] == "Bearer token-123"


def test_basic_auth_is_sent(mocked: responses.RequestsMock) -> None:
    mocked.get(BASE + "health", json={})
    client(basic_auth=("alice", "s@cret:with colon")).get_json(["health"], soon())
    expected = base64.b64encode(b"alice:s@cret:with colon").decode()
    assert mocked.calls[0].request.headers["Authorization"] == f"Basic {expected}"


# --- with a real HTTP server on loopback ---


class LocalNode:
    """A misbehaving node on 127.0.0.1: hangs, drips, compresses, chunks, truncates."""

    def __init__(self) -> None:
        self.stop_event = threading.Event()
        self.request_headers: list[dict[str, str]] = []
        self.client_ports: list[int] = []
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                node.request_headers.append(dict(self.headers))
                node.client_ports.append(self.client_address[1])
                action = getattr(node, "serve_" + self.path.strip("/").replace("-", "_"))
                with contextlib.suppress(OSError):  # the client hung up, as it should
                    action(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    @staticmethod
    def head(handler: BaseHTTPRequestHandler, **headers: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()

    def serve_hang(self, handler: BaseHTTPRequestHandler) -> None:
        self.stop_event.wait(10)  # accepted, request read, never answered

    def dripping(self) -> Iterator[None]:
        """Every 50 ms for 3 s (then the connection is dropped, so a broken client cannot
        hang the test: it fails on the reason and the time instead)."""
        end = time.monotonic() + 3.0
        while not self.stop_event.wait(0.05) and time.monotonic() < end:
            yield

    def serve_drip(self, handler: BaseHTTPRequestHandler) -> None:
        self.head(handler, Content_Length="100000")
        for _ in self.dripping():
            handler.wfile.write(b" ")
        handler.close_connection = True

    def serve_drip_chunked(self, handler: BaseHTTPRequestHandler) -> None:
        self.head(handler, Transfer_Encoding="chunked")
        for _ in self.dripping():
            handler.wfile.write(b"1\r\n \r\n")
        handler.close_connection = True

    def serve_gzip(self, handler: BaseHTTPRequestHandler) -> None:
        body = gzip.compress(json.dumps({"nodeVersion": "1.4.2", "pad": "x" * 5000}).encode())
        self.head(handler, Content_Encoding="gzip", Content_Length=str(len(body)))
        handler.wfile.write(body)

    def serve_gzip_bomb(self, handler: BaseHTTPRequestHandler) -> None:
        body = gzip.compress(b"[" + b"0," * 1_000_000 + b"0]")  # ~2 MB unpacked, ~2 kB packed
        self.head(handler, Content_Encoding="gzip", Content_Length=str(len(body)))
        handler.wfile.write(body)

    def serve_chunked(self, handler: BaseHTTPRequestHandler) -> None:
        self.head(handler, Transfer_Encoding="chunked")
        for piece in (b'{"blockHeight": ', b"18342, ", b'"syncing": false}'):
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        handler.wfile.write(b"0\r\n\r\n")

    def serve_chunked_large(self, handler: BaseHTTPRequestHandler) -> None:
        self.head(handler, Transfer_Encoding="chunked")
        piece = b" " * 300
        for _ in range(20):
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        handler.wfile.write(b"0\r\n\r\n")

    def serve_truncated(self, handler: BaseHTTPRequestHandler) -> None:
        self.head(handler, Content_Length="100", Connection="close")
        handler.wfile.write(b'{"blockHeight": 1')
        handler.close_connection = True


@pytest.fixture
def local_node() -> Iterator[LocalNode]:
    node = LocalNode()
    node.start()
    yield node
    node.stop()


DEADLINE = 0.5


def timed_error(node_client: NodeClient, path: str) -> tuple[FetchError, float]:
    started = time.monotonic()
    error = fetch_error(node_client, [path], started + DEADLINE)
    return error, time.monotonic() - started


def test_server_that_never_answers_times_out(local_node: LocalNode) -> None:
    error, elapsed = timed_error(client(local_node.url), "hang")
    assert error.reason is Reason.TIMEOUT
    assert DEADLINE * 0.9 <= elapsed < DEADLINE * 3


@pytest.mark.parametrize("path", ["drip", "drip-chunked"])
def test_body_dripping_past_the_deadline_times_out(path: str, local_node: LocalNode) -> None:
    error, elapsed = timed_error(client(local_node.url, max_bytes=1_000_000), path)
    assert error.reason is Reason.TIMEOUT
    assert elapsed < DEADLINE * 3


def test_connection_refused(local_node: LocalNode) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = fetch_error(client(f"http://127.0.0.1:{port}/"), ["health"], soon())
    assert error.reason is Reason.CONNECTION
    assert error.detail == "connection refused"


def test_gzip_body_is_decoded(local_node: LocalNode) -> None:
    document = client(local_node.url, max_bytes=100_000).get_json(["gzip"], soon())
    assert document == {"nodeVersion": "1.4.2", "pad": "x" * 5000}
    assert "gzip" in local_node.request_headers[0]["Accept-Encoding"]


def test_gzip_body_is_capped_unpacked(local_node: LocalNode) -> None:
    error = fetch_error(client(local_node.url, max_bytes=100_000), ["gzip-bomb"], soon())
    assert error.reason is Reason.TOO_LARGE


def test_chunked_body_is_read(local_node: LocalNode) -> None:
    document = client(local_node.url).get_json(["chunked"], soon())
    assert document == {"blockHeight": 18342, "syncing": False}


def test_chunked_body_over_the_cap_is_too_large(local_node: LocalNode) -> None:
    error = fetch_error(client(local_node.url), ["chunked-large"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body over the {CAP} bytes cap"


def test_truncated_body_is_a_connection_error(local_node: LocalNode) -> None:
    error = fetch_error(client(local_node.url), ["truncated"], soon())
    assert error.reason is Reason.CONNECTION
    assert error.detail == "the connection broke while reading the body"


def test_connections_are_reused_after_success(local_node: LocalNode) -> None:
    node_client = client(local_node.url)
    for _ in range(3):
        assert node_client.get_json(["chunked"], soon()) == {"blockHeight": 18342, "syncing": False}
    assert len(local_node.client_ports) == 3
    assert len(set(local_node.client_ports)) == 1  # one pooled keep-alive connection


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy"])
def test_proxy_environment_is_ignored(
    variable: str, local_node: LocalNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as probe:  # a proxy address where nothing listens
        probe.bind(("127.0.0.1", 0))
        monkeypatch.setenv(variable, f"http://127.0.0.1:{probe.getsockname()[1]}/")
    document = client(local_node.url).get_json(["chunked"], soon())
    assert document == {"blockHeight": 18342, "syncing": False}
