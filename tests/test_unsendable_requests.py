"""Requests libcurl will not take fail alone; credentials and headers beyond ASCII are sent.

pycurl encodes a ``str`` option as ASCII and raises on anything else, and it raised on the
engine's one thread: one probe target with a non-ASCII path (``/probe?target=...;...``,
found by the generated targets of ``tests/test_server_fuzz.py``), one node URL, password or
header value with an accent, stopped every request of the engine for good (issue 24). Now a
request libcurl will not take fails with ``reason="connection"`` and the engine goes on;
credentials and header values go as UTF-8 (as Go's clients send them), file names in the
file system's encoding. The config and ``/probe`` refuse non-ASCII URLs themselves
(``testdata/config/invalid-url-not-ascii.yml``, ``tests/test_server_fuzz.py``).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from exporter import __version__
from exporter.config.nodes import NodeConfig
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine
from exporter.poll.results import FetchError, Reason


class _Recorder(ThreadingHTTPServer):
    """Answers every GET with ``{}`` and keeps each request's header fields, their values
    as the bytes sent (http.server reads them as Latin-1)."""

    daemon_threads = True

    def __init__(self) -> None:
        self.heads: list[dict[str, bytes]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fields = self.headers.items()
                recorder.heads.append({k: v.encode("latin-1") for k, v in fields})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    server = _Recorder()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    running = Engine(4, f"ledger-exporter/{__version__}")
    yield running
    running.close()


def _get(engine: Engine, node: NodeConfig) -> object:
    client = NodeClient(engine, node, 1 << 20)
    return client.get_json(["health"], time.monotonic() + 10)


@pytest.mark.parametrize(
    "node",
    [
        NodeConfig("path", "http://127.0.0.1:9/n\u0153ud/"),
        NodeConfig("host", "http://b\u00fccher.example:9/"),
        NodeConfig("nul-header", "http://127.0.0.1:9/", headers=(("X-A", "a\x00b"),)),
    ],
    ids=lambda node: node.name,
)
def test_a_request_libcurl_will_not_take_fails_alone(
    engine: Engine, recorder: _Recorder, node: NodeConfig
) -> None:
    for _ in range(2):  # and again: the engine is still there
        with pytest.raises(FetchError) as failed:
            _get(engine, node)
        assert failed.value.reason is Reason.CONNECTION
        assert "libcurl cannot take this request" in failed.value.detail
        assert _get(engine, NodeConfig("fine", recorder.url)) == {}


def test_credentials_and_headers_beyond_ascii_are_sent_as_utf8(
    engine: Engine, recorder: _Recorder
) -> None:
    node = NodeConfig(
        "accents",
        recorder.url,
        headers=(("X-Team", "\u00e9t\u00e9 \u65e5\u672c"),),
        basic_auth=("\u00fc", "p\u00e4sswort"),
    )
    assert _get(engine, node) == {}
    (head,) = recorder.heads
    credentials = base64.b64encode("\u00fc:p\u00e4sswort".encode())
    assert head["Authorization"] == b"Basic " + credentials
    assert head["X-Team"] == "\u00e9t\u00e9 \u65e5\u672c".encode()
