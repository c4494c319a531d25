"""NodeClient on the engine: how each way a request can fail is classified, and that none
outlives its deadline.

Every case runs over real sockets against a small HTTP server on 127.0.0.1 that the test
starts and stops; the libcurl error table is also checked directly.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import pycurl
import pytest

from exporter import __version__
from exporter.config.nodes import NodeConfig, TlsConfig
from exporter.errors import TransferError
from exporter.model.reasons import Reason
from exporter.poll.client import NodeClient, ReadBudget, classify
from exporter.poll.engine import NOT_SENT, SHUT_DOWN, SPARE_HANDLES, Engine
from exporter.poll.node import Countdown
from exporter.poll.results import FetchError
from tests.support.certs import Pki
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.inside import spare_handles
from tests.support.node_get import get_document
from tests.support.waiting import wait_until

CAP = 1000


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def fetch_error(node_client: NodeClient, segments: list[str], deadline: float) -> FetchError:
    with pytest.raises(FetchError) as caught:
        get_document(node_client, segments, deadline)
    return caught.value


# --- a node on loopback that answers each path its own way ---

CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunks(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def misbehave(node: FakeNode) -> FakeNode:
    """The paths of a (mis)behaving node: it hangs, drips, compresses, chunks, truncates."""
    node.set("/hang", {}, held=True)  # accepted, request read, never answered
    node.drip("/drip", "body")
    node.drip("/drip-chunked", "chunked")
    node.drip("/drip-headers", "headers")
    gzipped = gzip.compress(json.dumps({"nodeVersion": "1.4.2", "pad": "x" * 5000}).encode())
    node.set("/gzip", gzipped, headers={"Content-Encoding": "gzip"})
    bomb = b"[" + b"0," * 1_000_000 + b"0]"  # ~2 MB unpacked, ~2 kB packed
    node.set("/deflate-bomb", zlib.compress(bomb), headers={"Content-Encoding": "deflate"})
    node.set("/gzip-bomb", gzip.compress(bomb), headers={"Content-Encoding": "gzip"})
    node.set("/broken-gzip", b"certainly not gzip", headers={"Content-Encoding": "gzip"})
    pieces = (b'{"blockHeight": ', b"18342, ", b'"syncing": false}')
    node.raw("/chunked", CHUNKED + _chunks(*pieces), close=False)
    node.raw("/chunked-large", CHUNKED + _chunks(*[b" " * 300] * 20), close=False)
    truncated = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
    node.raw("/truncated", truncated + b'{"blockHeight": 1')
    node.raw("/nothing", b"")  # the connection closes without a byte of answer
    return node


@pytest.fixture
def local_node(fake_nodes: FakeNodes) -> FakeNode:
    """A keep-alive node on 127.0.0.1 with the paths of ``misbehave``."""
    return misbehave(fake_nodes.start(keep_alive=True))


def ports(node: FakeNode) -> list[int]:
    """The client port of each request: one per TCP connection."""
    return [request.port for request in node.requests]


def client(engine: Engine, url: str, max_bytes: int = CAP, **node: Any) -> NodeClient:
    return NodeClient(engine, NodeConfig("validator-1", url, **node), max_bytes)


# --- answers ---


def test_success_decodes_the_document(engine: Engine, local_node: FakeNode) -> None:
    health = {"nodeVersion": "1.4.2", "network": {"peerCount": 4}, "blockchains": ["8f2a9c"]}
    local_node.set("/health", health)
    assert get_document(client(engine, local_node.url), ["health"], soon()) == health
    assert local_node.paths == ["/health"]


def test_request_headers_identify_the_exporter(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", {})
    get_document(client(engine, local_node.url), ["health"], soon())
    headers = local_node.requests[0].headers
    assert headers["User-Agent"] == f"ledger-exporter/{__version__}"
    assert headers["Accept"] == "application/json"
    assert "Authorization" not in headers


@pytest.mark.parametrize(
    ("base", "segments", "url"),
    [
        ("http://127.0.0.1:7740/", ["health"], "http://127.0.0.1:7740/health"),
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
        ("http://h/", ["blockchains", "ünï"], "http://h/blockchains/%C3%BCn%C3%AF"),
        ("http://h/", ["blockchains", "a+b=c&d"], "http://h/blockchains/a%2Bb%3Dc%26d"),
        ("http://h/", ["blockchains", ".."], "http://h/blockchains/%2E%2E"),
        ("http://h/", ["blockchains", "."], "http://h/blockchains/%2E"),
        ("http://h/", ["blockchains", "a..b"], "http://h/blockchains/a..b"),
    ],
)
def test_url_for_keeps_the_prefix_and_escapes_segments(
    engine: Engine, base: str, segments: list[str], url: str
) -> None:
    assert client(engine, base).url_for(segments) == url


@pytest.mark.parametrize("prefix", ["nodes/node-1/", "nodes/node-1"])
def test_request_goes_under_the_path_prefix(
    prefix: str, engine: Engine, local_node: FakeNode
) -> None:
    local_node.set("/nodes/node-1/blockchains/8f2a9c", {"blockHeight": 7})
    document = get_document(
        client(engine, local_node.url + prefix), ["blockchains", "8f2a9c"], soon()
    )
    assert document == {"blockHeight": 7}


def test_chain_id_is_sent_as_one_escaped_segment(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/blockchains/a%2Fb%20c%3Fd%23e%25", {"blockHeight": 1})
    document = get_document(client(engine, local_node.url), ["blockchains", "a/b c?d#e%"], soon())
    assert document == {"blockHeight": 1}
    assert local_node.paths == ["/blockchains/a%2Fb%20c%3Fd%23e%25"]


@pytest.mark.parametrize("prefix", ["", "api/v1/"])
@pytest.mark.parametrize(
    ("chain", "sent"),
    [
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("%2e%2e", "%252e%252e"),
        ("%2E.", "%252E."),
        ("...", "..."),
        ("../health", "..%2Fhealth"),
    ],
)
def test_the_node_receives_dot_segments_as_sent(
    prefix: str, chain: str, sent: str, engine: Engine, local_node: FakeNode
) -> None:
    """libcurl would resolve ``%2E%2E`` like ``..`` and ask for the base path instead."""
    path = f"/{prefix}blockchains/{sent}"
    local_node.set(path, {"blockHeight": 7})
    document = get_document(client(engine, local_node.url + prefix), ["blockchains", chain], soon())
    assert local_node.paths == [path]
    assert document == {"blockHeight": 7}


@pytest.mark.parametrize(
    ("query", "url"),
    [
        ((), "http://h/wallets/w1"),
        ((("blockchainId", "8f2a9c"),), "http://h/wallets/w1?blockchainId=8f2a9c"),
        ((("blockchainId", "a&b=c d/#"),), "http://h/wallets/w1?blockchainId=a%26b%3Dc%20d%2F%23"),
        ((("a b", "1"), ("c", "")), "http://h/wallets/w1?a%20b=1&c="),
    ],
)
def test_url_for_appends_the_query_escaped(
    engine: Engine, query: tuple[tuple[str, str], ...], url: str
) -> None:
    assert client(engine, "http://h/").url_for(["wallets", "w1"], query) == url


def test_query_is_sent_after_the_path(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/wallets/w%2F1?blockchainId=a%26b", {"enabled": True})
    query = (("blockchainId", "a&b"),)
    document = get_document(client(engine, local_node.url), ["wallets", "w/1"], soon(), query)
    assert document == {"enabled": True}
    assert local_node.paths == ["/wallets/w%2F1?blockchainId=a%26b"]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 500, 502, 503])
def test_error_status_names_the_path(status: int, engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/api/blockchains/c1", {"error": "nope"}, status)
    node_client = client(engine, local_node.url + "api")
    error = fetch_error(node_client, ["blockchains", "c1"], soon())
    assert error.reason is Reason.HTTP_STATUS
    assert error.detail == f"HTTP status {status} from /api/blockchains/c1"


def test_error_detail_never_holds_credentials(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", b"nope", 401)
    node_client = client(engine, local_node.url, basic_auth=("alice", "s3cret"))
    error = fetch_error(node_client, ["health"], soon())
    assert "alice" not in str(error) and "s3cret" not in str(error)
    assert "127.0.0.1" not in str(error)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(status: int, engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", b"", status, headers={"Location": local_node.url + "elsewhere"})
    local_node.set("/elsewhere", {"nodeVersion": "1.0"})
    error = fetch_error(client(engine, local_node.url), ["health"], soon())
    assert error.reason is Reason.HTTP_STATUS
    assert error.detail == f"HTTP status {status} from /health"
    assert local_node.paths == ["/health"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "the body from /health is not valid JSON"),
        (b"", "the body from /health is not valid JSON"),
        (b'{"a": 1} trailing', "the body from /health is not valid JSON"),
        (b'{"a": "\xff\xfe"}', "the body from /health is not valid JSON"),
        (b"OK", "the body from /health is not valid JSON"),
        (b"<!DOCTYPE html><html><body>Bad gateway</body></html>", "(an HTML page)"),
        (b"\n  <html><head><title>Login</title></head></html>", "(an HTML page)"),
        (b"<HTML>", "(an HTML page)"),
    ],
    ids=["garbage", "empty", "trailing", "not-utf8", "text", "doctype", "indented-html", "upper"],
)
def test_invalid_json(body: bytes, detail: str, engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", body)
    error = fetch_error(client(engine, local_node.url), ["health"], soon())
    assert error.reason is Reason.INVALID_JSON
    assert error.detail.endswith(detail)


@pytest.mark.parametrize(
    "document",
    [[1, 2], ["8f2a9c"], "text", 42, 1.5, None, True, {"blockHeight": "12"}],
    ids=repr,
)
def test_any_json_is_returned_as_is(document: object, engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", document)
    assert get_document(client(engine, local_node.url), ["health"], soon()) == document


# --- the size cap ---


def test_declared_length_over_the_cap_is_too_large(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", {"pad": "x" * CAP})
    error = fetch_error(client(engine, local_node.url), ["health"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body from /health over the {CAP} bytes cap"


def test_body_of_exactly_the_cap_is_read(engine: Engine, local_node: FakeNode) -> None:
    body = json.dumps({"pad": "x" * (CAP - 11)}).encode()
    assert len(body) == CAP
    for length in (True, False):
        local_node.set("/health", body, length=length)
        document = get_document(client(engine, local_node.url), ["health"], soon())
        assert document == {"pad": "x" * (CAP - 11)}


def test_streamed_body_over_the_cap_is_too_large(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", {"pad": "x" * CAP}, length=False)  # no Content-Length
    error = fetch_error(client(engine, local_node.url), ["health"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body from /health over the {CAP} bytes cap"


def test_chunked_body_over_the_cap_is_too_large(engine: Engine, local_node: FakeNode) -> None:
    error = fetch_error(client(engine, local_node.url), ["chunked-large"], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body from /chunked-large over the {CAP} bytes cap"


@pytest.mark.parametrize("path", ["gzip-bomb", "deflate-bomb"])
def test_compressed_body_is_capped_unpacked(
    path: str, engine: Engine, local_node: FakeNode
) -> None:
    error = fetch_error(client(engine, local_node.url, max_bytes=100_000), [path], soon())
    assert error.reason is Reason.TOO_LARGE
    assert error.detail == f"body from /{path} over the 100000 bytes cap"


def test_gzip_body_is_decoded(engine: Engine, local_node: FakeNode) -> None:
    document = get_document(client(engine, local_node.url, max_bytes=100_000), ["gzip"], soon())
    assert document == {"nodeVersion": "1.4.2", "pad": "x" * 5000}
    assert "gzip" in local_node.requests[0].headers["Accept-Encoding"]


def test_broken_gzip_is_an_invalid_response(engine: Engine, local_node: FakeNode) -> None:
    error = fetch_error(client(engine, local_node.url), ["broken-gzip"], soon())
    assert error.reason is Reason.INVALID_RESPONSE


def test_chunked_body_is_read(engine: Engine, local_node: FakeNode) -> None:
    document = get_document(client(engine, local_node.url), ["chunked"], soon())
    assert document == {"blockHeight": 18342, "syncing": False}


# --- time ---

DEADLINE = 0.5
#: libcurl counts the time left in whole milliseconds.
ROUNDING = 0.01


def failed_at_its_deadline(node: FakeNode, path: str, engine: Engine, **options: Any) -> None:
    """A request of ``path`` fails as a timeout, not before its deadline, and the client hangs
    up then: the node, which never finishes this answer, sees the connection closed."""
    deadline = time.monotonic() + DEADLINE
    error = fetch_error(client(engine, node.url, **options), [path], deadline)
    ended = time.monotonic()
    assert error.reason is Reason.TIMEOUT
    assert error.detail.endswith("no complete answer before the deadline")
    assert ended >= deadline - ROUNDING  # never early
    wait_until(lambda: f"/{path}" in node.hung_up, message=f"the client never hung up on /{path}")


def test_server_that_never_answers_times_out(engine: Engine, local_node: FakeNode) -> None:
    failed_at_its_deadline(local_node, "hang", engine)


@pytest.mark.parametrize("path", ["drip", "drip-chunked", "drip-headers"])
def test_dripping_past_the_deadline_times_out(
    path: str, engine: Engine, local_node: FakeNode
) -> None:
    """Each byte comes well within any read timeout: only the deadline ends the request."""
    failed_at_its_deadline(local_node, path, engine, max_bytes=1_000_000)


@pytest.mark.parametrize("late_by", [0.0, 0.001, 30.0])
def test_deadline_already_passed_sends_nothing(
    late_by: float, engine: Engine, local_node: FakeNode
) -> None:
    now = 1000.0
    config = NodeConfig("validator-1", local_node.url)
    node_client = NodeClient(engine, config, CAP, monotonic=lambda: now)
    error = fetch_error(node_client, ["health"], now - late_by)
    assert error.reason is Reason.TIMEOUT
    assert local_node.paths == []


def test_a_queued_request_whose_deadline_passes_is_not_sent(local_node: FakeNode) -> None:
    single = Engine(1, "test")
    try:
        hanging = client(single, local_node.url)
        results: list[FetchError | None] = []
        hanging.get(["hang"], soon(30.0), lambda _, error: results.append(error))
        error = fetch_error(client(single, local_node.url), ["health"], soon(0.3))
    finally:
        single.close()
    assert error.reason is Reason.TIMEOUT
    assert error.detail == "no time left in this cycle to send the request"
    assert "/health" not in local_node.paths


def test_close_fails_what_is_still_out_at_once(local_node: FakeNode) -> None:
    closing = Engine(4, "test")
    outcome: list[FetchError | None] = []
    done = threading.Event()

    def record(_: Any, error: FetchError | None) -> None:
        outcome.append(error)
        done.set()

    # a deadline far past the test: only close() can end the request
    client(closing, local_node.url).get(["hang"], soon(3600.0), record)
    wait_until(lambda: local_node.paths or done.is_set(), message="the request never reached")
    closing.close()
    assert done.wait(30)
    assert outcome[0] is not None and outcome[0].reason is Reason.TIMEOUT
    assert outcome[0].detail.endswith("the exporter shut down before the answer came")
    assert closing.in_flight() == 0
    wait_until(lambda: "/hang" in local_node.hung_up, message="the connection was left open")


def test_a_failing_callback_is_logged_and_the_engine_goes_on(
    engine: Engine, local_node: FakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    called = threading.Event()

    def broken(_: Any, __: FetchError | None) -> None:
        called.set()
        raise RuntimeError("bug in a callback")

    local_node.set("/health", {"nodeVersion": "1.4.2"})
    client(engine, local_node.url).get(["health"], soon(), broken)
    assert called.wait(5)
    # answered on the engine's thread after the failed callback was logged
    document = get_document(client(engine, local_node.url), ["health"], soon())
    assert document == {"nodeVersion": "1.4.2"}
    assert [r.getMessage() for r in caplog.records] == ["a request's callback failed"]
    assert engine.in_flight() == 0


def test_an_unexpected_failure_to_decode_still_reaches_the_caller(
    engine: Engine, local_node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_memory(*_: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr("exporter.poll.client.interpret", out_of_memory)
    local_node.set("/health", {"nodeVersion": "1.4.2"})
    outcome: list[FetchError | None] = []
    answered = threading.Event()

    def done(_: Any, error: FetchError | None) -> None:
        outcome.append(error)
        answered.set()

    client(engine, local_node.url).get(["health"], soon(), done)
    assert answered.wait(5)
    assert outcome[0] is not None and outcome[0].reason is Reason.INVALID_RESPONSE
    assert outcome[0].detail == "the answer from /health could not be decoded (MemoryError)"


def _outcome(node_client: NodeClient, segments: list[str], budget: ReadBudget) -> FetchError | None:
    outcome: list[FetchError | None] = []
    answered = threading.Event()

    def done(_: Any, error: FetchError | None) -> None:
        outcome.append(error)
        answered.set()

    node_client.get(segments, soon(), done, budget=budget)
    assert answered.wait(5)
    return outcome[0]


def test_once_the_read_budget_is_spent_answers_are_refused_unread(
    engine: Engine, local_node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[str] = []

    def decode(body: bytes, path: str) -> Any:
        decoded.append(path)
        return json.loads(body)

    monkeypatch.setattr("exporter.poll.client.decode", decode)
    local_node.set("/health", {"nodeVersion": "1.4.2"})
    local_node.set("/gone", {}, 404)
    node_client = client(engine, local_node.url)
    budget = ReadBudget(1.0)
    assert _outcome(node_client, ["health"], budget) is None
    budget.charge(1.0)  # as if reading the answers had cost a second of CPU
    refused = _outcome(node_client, ["health"], budget)
    gone = _outcome(node_client, ["gone"], budget)
    assert decoded == ["/health"]  # the first answer only
    assert refused is not None and refused.reason is Reason.TOO_LARGE
    assert refused.detail == "/health not read: the node's answers already took 1 s of CPU"
    assert gone is not None and gone.reason is Reason.HTTP_STATUS  # reported as such


def test_an_id_that_cannot_be_encoded_is_an_invalid_response_never_sent(
    engine: Engine, local_node: FakeNode
) -> None:
    error = fetch_error(client(engine, local_node.url), ["blockchains", "a\ud800"], soon())
    assert error.reason is Reason.INVALID_RESPONSE
    assert "not valid Unicode" in error.detail
    assert local_node.paths == []


def test_calls_after_close_never_write_to_the_closed_wakeup_descriptor() -> None:
    """Its number may already belong to another file: writing would corrupt it (or fail)."""
    closed = Engine(4, "test")
    closed.close()
    closed.resize(2, 2)
    closed.close_idle_connections()
    closed.close()
    assert closed.in_flight() == 0


def test_a_request_submitted_after_close_fails_at_once(local_node: FakeNode) -> None:
    closed = Engine(4, "test")
    closed.close()
    error = fetch_error(client(closed, local_node.url), ["health"], soon())
    assert error.reason is Reason.TIMEOUT
    assert local_node.paths == []


# --- connections ---


def test_connection_refused(engine: Engine) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = fetch_error(client(engine, f"http://127.0.0.1:{port}/"), ["health"], soon())
    assert error.reason is Reason.CONNECTION
    assert error.detail == "connection refused"


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("truncated", "the connection broke while reading the body"),
        ("nothing", "the node closed the connection without answering"),
    ],
)
def test_broken_connections(path: str, detail: str, engine: Engine, local_node: FakeNode) -> None:
    error = fetch_error(client(engine, local_node.url), [path], soon())
    assert error.reason is Reason.CONNECTION
    assert error.detail == detail


@pytest.mark.parametrize(
    ("code", "reason", "detail"),
    [
        (pycurl.E_OPERATION_TIMEDOUT, Reason.TIMEOUT, "no complete answer before the deadline"),
        (NOT_SENT, Reason.TIMEOUT, "no time left in this cycle to send the request"),
        (SHUT_DOWN, Reason.TIMEOUT, "the exporter shut down before the answer came"),
        (pycurl.E_COULDNT_RESOLVE_HOST, Reason.CONNECTION, "name or service not known"),
        (
            pycurl.E_PEER_FAILED_VERIFICATION,
            Reason.CERTIFICATE,
            "verify failed (OpenSSL verify result 0)",
        ),
        (pycurl.E_SSL_CONNECT_ERROR, Reason.TLS, "TLS handshake failed"),
        (
            pycurl.E_SSL_CACERT_BADFILE,
            Reason.TLS,
            "the CA file could not be read: check tls_config.ca_file",
        ),
        (pycurl.E_RECV_ERROR, Reason.CONNECTION, "the connection broke while reading the answer"),
        (pycurl.E_COULDNT_CONNECT, Reason.CONNECTION, "cannot connect"),
        (pycurl.E_FILESIZE_EXCEEDED, Reason.TOO_LARGE, "body from /x over the 10 bytes cap"),
        (pycurl.E_BAD_CONTENT_ENCODING, Reason.INVALID_RESPONSE, "content encoding is broken"),
        (999, Reason.CONNECTION, "transfer failed (999)"),
    ],
)
def test_transfer_errors_are_classified(code: int, reason: Reason, detail: str) -> None:
    error = classify(TransferError(code, "curl says: http://user:pw@host/x"), "/x", 10)
    assert error.reason is reason
    assert error.detail.endswith(detail)
    assert "user" not in error.detail and "host" not in error.detail


def test_connections_are_reused_across_requests(engine: Engine, local_node: FakeNode) -> None:
    node_client = client(engine, local_node.url)
    for _ in range(3):
        assert get_document(node_client, ["chunked"], soon()) == {
            "blockHeight": 18342,
            "syncing": False,
        }
    assert len(ports(local_node)) == 3
    assert len(set(ports(local_node))) == 1  # one kept-alive connection


def test_idle_connections_are_closed_once_no_request_is_in_flight(
    engine: Engine, local_node: FakeNode
) -> None:
    local_node.set("/held", {"held": True}, held=True)
    local_node.set("/health", {})
    node_client = client(engine, local_node.url)
    get_document(node_client, ["health"], soon())
    outcome: list[Any] = []
    ended = threading.Event()

    def done(document: Any, _: FetchError | None) -> None:
        outcome.append(document)
        ended.set()

    node_client.get(["held"], soon(30.0), done)
    wait_until(lambda: "/held" in local_node.paths, message="the held request never came")
    engine.close_idle_connections()  # with a request in flight: waits for it
    local_node.release()
    assert ended.wait(30)
    get_document(node_client, ["health"], soon())
    assert outcome == [{"held": True}]  # the request in flight was not cut
    used = ports(local_node)
    assert used[1] == used[0]  # kept alive until then
    assert used[2] != used[1]  # closed once the held request ended: a new one was opened
    assert engine.connections_opened() == 2


def _ignoring(call: Callable[[], None]) -> Callable[[Any, FetchError | None], None]:
    return lambda _, __: call()


def test_idle_handles_are_closed_and_connections_kept(local_node: FakeNode) -> None:
    local_node.set("/slow", {"ok": True}, held=True)  # answered once the batch is all in
    busy = Engine(64, "test")
    try:
        for batch in (1, 2):
            ended = Countdown(40)
            for _ in range(40):
                client(busy, local_node.url).get(["slow"], soon(30.0), _ignoring(ended.count_down))
            wait_until(
                lambda: len(local_node.paths) == 40 * batch,  # noqa: B023 (called at once)
                message="every request of the batch in flight at once",
            )
            local_node.release()
            assert ended.wait(30)
            wait_until(
                lambda: spare_handles(busy) == SPARE_HANDLES,
                message=lambda: f"{spare_handles(busy)} spare handles",
            )
    finally:
        busy.close()
    assert len(ports(local_node)) == 80
    assert len(set(ports(local_node))) == 40  # the second batch reused every connection


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"])
def test_proxy_environment_is_ignored(
    variable: str, local_node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as probe:  # a proxy address where nothing listens
        probe.bind(("127.0.0.1", 0))
        monkeypatch.setenv(variable, f"http://127.0.0.1:{probe.getsockname()[1]}/")
    fresh = Engine(2, "test")  # libcurl reads the environment per request: a fresh one anyway
    try:
        document = get_document(client(fresh, local_node.url), ["chunked"], soon())
    finally:
        fresh.close()
    assert document == {"blockHeight": 18342, "syncing": False}


# --- credentials and headers ---


def test_configured_headers_are_sent(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", {})
    headers = (("X-Scope", "monitoring"), ("Authorization", "Bearer token-123"))
    get_document(client(engine, local_node.url, headers=headers), ["health"], soon())
    sent = local_node.requests[0].headers
    assert sent["X-Scope"] == "monitoring"
    assert sent["Authorization"] == "Bearer token-123"


def test_basic_auth_is_sent(engine: Engine, local_node: FakeNode) -> None:
    local_node.set("/health", {})
    get_document(
        client(engine, local_node.url, basic_auth=("alice", "s@cret:with colon")),
        ["health"],
        soon(),
    )
    expected = base64.b64encode(b"alice:s@cret:with colon").decode()
    assert local_node.requests[0].headers["Authorization"] == f"Basic {expected}"


# --- TLS ---


@pytest.fixture
def tls_node(fake_nodes: FakeNodes, pki: Pki) -> FakeNode:
    """An https node (the session CA's server certificate) that requires a client certificate
    the CA signed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(pki.ca)
    node = fake_nodes.start(keep_alive=True, tls=context)
    node.set("/health", {"nodeVersion": "1.4.2"})
    return node


def test_tls_with_ca_file_and_client_certificate(
    engine: Engine, tls_node: FakeNode, pki: Pki
) -> None:
    tls = TlsConfig(pki.ca, pki.client.cert, pki.client.key)
    node_client = client(engine, tls_node.url, tls=tls)
    for _ in range(3):
        assert get_document(node_client, ["health"], soon()) == {"nodeVersion": "1.4.2"}
    assert len(set(ports(tls_node))) == 1  # one TLS handshake, then kept alive


def test_tls_without_the_ca_fails_verification(
    engine: Engine, tls_node: FakeNode, pki: Pki
) -> None:
    tls = TlsConfig(None, pki.client.cert, pki.client.key)
    error = fetch_error(client(engine, tls_node.url, tls=tls), ["health"], soon())
    assert error.reason is Reason.CERTIFICATE
    assert error.detail.startswith("unknown issuer: ")


def test_tls_insecure_skip_verify(engine: Engine, tls_node: FakeNode, pki: Pki) -> None:
    tls = TlsConfig(None, pki.client.cert, pki.client.key, True)
    assert get_document(client(engine, tls_node.url, tls=tls), ["health"], soon()) == {
        "nodeVersion": "1.4.2"
    }


def test_tls_without_a_client_certificate_is_refused(
    engine: Engine, tls_node: FakeNode, pki: Pki
) -> None:
    error = fetch_error(client(engine, tls_node.url, tls=TlsConfig(pki.ca)), ["health"], soon())
    assert error.reason is Reason.TLS
    assert "client certificate" in error.detail  # required, or the reset that overtook it
