"""Requests libcurl will not take fail alone; credentials and headers beyond ASCII are sent.

pycurl encodes a ``str`` option as ASCII and raises on anything else, and it raised on the
engine's one thread: one probe target with a non-ASCII path (``/probe?target=...;...``,
found by the generated targets of ``tests/web/test_server_fuzz.py``), one node URL, password or
header value with an accent, stopped every request of the engine for good (issue 24). Now a
request libcurl will not take fails with ``reason="connection"`` and the engine goes on;
credentials and header values go as UTF-8 (as Go's clients send them), file names in the
file system's encoding. The config and ``/probe`` refuse non-ASCII URLs themselves
(``testdata/config/invalid-url-not-ascii.yml``, ``tests/web/test_server_fuzz.py``).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest

from exporter import __version__
from exporter.config.nodes import NodeConfig
from exporter.model.reasons import Reason
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine
from exporter.poll.results import FetchError
from tests.support.fakenode import FakeNode
from tests.support.node_get import get_document


@pytest.fixture
def engine() -> Iterator[Engine]:
    running = Engine(4, f"ledger-exporter/{__version__}")
    yield running
    running.close()


def _get(engine: Engine, node: NodeConfig) -> object:
    client = NodeClient(engine, node, 1 << 20)
    return get_document(client, ["health"], time.monotonic() + 10)


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
    engine: Engine, fake_node: FakeNode, node: NodeConfig
) -> None:
    fake_node.set("/health", {})
    for _ in range(2):  # and again: the engine is still there
        with pytest.raises(FetchError) as failed:
            _get(engine, node)
        assert failed.value.reason is Reason.CONNECTION
        assert "libcurl cannot take this request" in failed.value.detail
        assert _get(engine, NodeConfig("fine", fake_node.url)) == {}
    assert fake_node.paths == ["/health", "/health"]


def test_credentials_and_headers_beyond_ascii_are_sent_as_utf8(
    engine: Engine, fake_node: FakeNode
) -> None:
    fake_node.set("/health", {})
    node = NodeConfig(
        "accents",
        fake_node.url,
        headers=(("X-Team", "\u00e9t\u00e9 \u65e5\u672c"),),
        basic_auth=("\u00fc", "p\u00e4sswort"),
    )
    assert _get(engine, node) == {}
    (request,) = fake_node.requests
    sent = {name: value.encode("latin-1") for name, value in request.headers.items()}
    credentials = base64.b64encode("\u00fc:p\u00e4sswort".encode())
    assert sent["Authorization"] == b"Basic " + credentials  # http.server reads Latin-1
    assert sent["X-Team"] == "\u00e9t\u00e9 \u65e5\u672c".encode()


def test_a_handle_a_refused_request_left_half_configured_is_configured_anew(
    fake_node: FakeNode,
) -> None:
    """A reused handle keeps its options for requests of the same profile (issue 22); one
    whose URL libcurl refused was reset, so the next request of that profile gets them all."""
    fake_node.set("/health", {"status": "ok"})
    engine = Engine(1, f"ledger-exporter/{__version__}")  # one slot: the same handle each time
    try:
        headers, auth = (("X-Team", "blue"),), ("prom", "s3cret")
        good = NodeConfig("good", fake_node.url, headers=headers, basic_auth=auth)
        bad = NodeConfig("bad", "http://127.0.0.1:9/n\u0153ud/", headers=headers, basic_auth=auth)
        assert _get(engine, good) == {"status": "ok"}
        with pytest.raises(FetchError):
            _get(engine, bad)
        assert _get(engine, good) == {"status": "ok"}
    finally:
        engine.close()
    first, again = fake_node.requests
    for request in (first, again):
        assert request.headers["X-Team"] == "blue"
        assert (
            request.headers["Authorization"] == "Basic " + base64.b64encode(b"prom:s3cret").decode()
        )
