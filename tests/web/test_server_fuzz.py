"""The exporter's own HTTP server under generated requests, over real sockets.

A real :class:`~exporter.app.Exporter` (its ``ExporterServer``, a polled node, and probe mode
with an allow-list) gets request lines, methods, paths, query strings, headers and bodies
drawn by hypothesis: well-formed ones (whose answers are known), malformed ones (any bytes
where a method, target, version or header goes), pipelined several to a connection, split in
two at random places and, for a smaller sample, at every byte boundary, and oversized heads
and bodies; ``/probe`` targets are built to escape the allow-list (user-info, other ports,
backslashes, fragments, encodings, duplicated parameters, look-alike hosts).

Properties, for every example:

- every answer is a well-formed HTTP/1.1 response, parsed strictly (a status line, header
  fields without folding or bare CR, one Content-Length framing the body exactly), and a
  well-formed request gets its known status, in order; otherwise the connection is closed;
- a probe is never sent to a refused target: the node on a port no pattern allows is never
  contacted, and the allowed node only for a probe answered 200 whose target matches;
- nothing is logged at error level, and no traceback;
- a plain scrape of ``/metrics`` on a new connection still gets its 200 afterwards.

``LEDGER_TEST_EXAMPLES`` sets the examples per property (defaults in :data:`EXAMPLES`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

import pytest
from hypothesis import HealthCheck, Phase, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.config.probe_modules import ProbeConfig
from exporter.web.server import ServerLimits
from tests.support import generation
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.scenarios import Records, captured_logs
from tests.support.waiting import wait_until

EXAMPLES = {"pipelines": 250, "probes": 200, "every_byte": 16}
TIMEOUT = 20.0


# --- the exporter under test ---------------------------------------------------------------


@dataclass
class Served:
    """The running exporter, the node it polls, the probe targets and the log records."""

    exporter: Exporter
    port: int
    allowed: FakeNode  # the target the allow-list allows (a node path on its port)
    refused: FakeNode  # a node on a port no pattern allows: must never be contacted
    patterns: tuple[re.Pattern[str], ...]
    logs: Records

    def allowed_url(self, path: str = "/node-a") -> str:
        return f"http://127.0.0.1:{self.allowed.port}{path}"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    nodes = FakeNodes()  # module-wide: the fake_nodes fixture is a test's own
    polled, allowed, refused = nodes.start(), nodes.start(), nodes.start()
    polled.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    for prefix in ("/node-a", ""):
        allowed.set(f"{prefix}/health", health_doc(["c1"]))
        allowed.set(f"{prefix}/blockchains/c1", chain_doc(9))
    port = allowed.port
    patterns = (
        re.compile(rf"http://127\.0\.0\.1:{port}/node-a"),
        re.compile(rf"http://127\.0\.0\.1:{port}/.*"),
    )
    config = Config(
        nodes=(NodeConfig("polled", polled.url),),
        scrape_interval=30.0,
        scrape_timeout=5.0,
        probe=ProbeConfig(patterns, max_in_flight=4),
    )
    limits = ServerLimits(read_header_timeout=5.0, idle_timeout=5.0)
    with captured_logs(logging.ERROR) as logs:
        exporter = Exporter(config)
        server = exporter.start("127.0.0.1:0", limits=limits)
        try:
            wait_until(exporter.ready, message="the exporter's first cycle")
            yield Served(exporter, server.port, allowed, refused, patterns, logs)
        finally:
            exporter.stop()
            nodes.stop_all()


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """One request as sent: its bytes, its method (HEAD answers carry no body), the statuses
    a well-formed request must get (None: a malformed one, answered anyhow or closed), and
    whether the server may close after answering it."""

    raw: bytes
    method: str
    expected: frozenset[int] | None = None
    last: bool = False

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:  # hypothesis's reports
        printer.text(f"Sent({self.raw[:400]!r}, expected={self.expected})")  # type: ignore[attr-defined]


PATHS = ("/metrics", "/", "/-/healthy", "/-/ready", "/probe", "/-/reload", "/nope", "/metrics/")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
QUERIES = (
    "",
    "?",
    "?x=1",
    "?target=",
    "?module=nope&target=x",
    "?a=%00&b=%ff%fe",
    "?" + "q" * 3000,
)
#: For the every-byte sample: a connection per byte, so short requests only.
SHORT_PATHS = ("/-/healthy", "/nope", "/probe?target=x", "/metrics")
SHORT_QUERIES = QUERIES[:-1]
HEADERS = (
    (b"Host", b"127.0.0.1"),
    (b"Accept", b"application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    (b"Accept", b"text/plain;q=0, */*;q=x"),
    (b"Accept-Encoding", b"gzip"),
    (b"Accept-Encoding", b"gzip;q=0, identity;q=0"),
    (b"User-Agent", b"Prometheus/2.42.0"),
    (b"X-Prometheus-Scrape-Timeout-Seconds", b"nan"),
    (b"X-Prometheus-Scrape-Timeout-Seconds", b"-1"),
    (b"X-Prometheus-Scrape-Timeout-Seconds", b"1e309"),
    (b"X-Prometheus-Scrape-Timeout-Seconds", b"0.001"),
    (b"Authorization", b"Basic !!!"),
    (b"Authorization", b"Basic dTpw"),
    (b"Origin", b"http://evil.example"),
    (b"Sec-Fetch-Site", b"cross-site"),
    (b"Connection", b"keep-alive"),
    (b"Expect", b"100-continue"),
    (b"Content-Length", b"0"),
)
#: What a well-formed request gets, by method and path (any path with a query too).
_GET = {
    "/metrics": {200},
    "/": {200},
    "/-/healthy": {200},
    "/-/ready": {200, 503},
    "/probe": {200, 400, 403, 503},
    "/-/reload": {405},
}


def expected_status(method: str, path: str, body: bool) -> frozenset[int]:
    if method in ("GET", "HEAD"):
        return frozenset({413} if body else _GET.get(path, {404}))
    if method == "POST" and path == "/-/reload":
        return frozenset({200, 403, 429, 500})  # no config file to reload: 500
    return frozenset({413} if body else {403, 405})


@st.composite
def well_formed(
    draw: st.DrawFn, paths: Sequence[str] = PATHS, queries: Sequence[str] = QUERIES
) -> Sent:
    """A request the server must answer with a known status."""
    method = draw(st.sampled_from(METHODS))
    path = draw(st.sampled_from(paths))
    query = draw(st.sampled_from(queries)) if "?" not in path else ""
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]))
    headers = draw(st.lists(st.sampled_from(HEADERS), max_size=4, unique=True))
    headers = [h for h in headers if h[0] != b"Content-Length"]
    body = b""
    if draw(st.integers(0, 5)) == 0 and (method, path) == ("POST", "/-/reload"):
        body = draw(st.sampled_from([b"", b"x", b"{}" * 100]))
    elif draw(st.integers(0, 15)) == 0:
        body = b"x"
    if body:
        headers.append((b"Content-Length", str(len(body)).encode()))
    if any(name == b"Expect" for name, _ in headers) and not body:
        headers = [h for h in headers if h[0] != b"Expect"]
    closing = version == "HTTP/1.0" or draw(st.integers(0, 9)) == 0
    if closing and version == "HTTP/1.1":
        headers.append((b"Connection", b"close"))
    target = path if "?" in path else path + query
    raw = _request(method.encode(), target.encode(), version.encode(), headers, body=body)
    bare = path.split("?")[0]
    status = expected_status(method, bare, bool(body) and (method, bare) != ("POST", "/-/reload"))
    return Sent(raw, method, status, last=closing or 413 in status)


def _request(
    method: bytes,
    target: bytes,
    version: bytes,
    headers: Sequence[tuple[bytes, bytes]],
    *,
    body: bytes = b"",
    newline: bytes = b"\r\n",
) -> bytes:
    line = b" ".join(part for part in (method, target, version) if part)
    fields = b"".join(name + b": " + value + newline for name, value in headers)
    return line + newline + fields + newline + body


ODD_BYTES = st.sampled_from(
    [b"", b" ", b"\x00", b"\r", b"\n", b"\t", b"\xff", b"\xc3\xa9", b"%", b"%00", b"\\", b"\x7f"]
)
RANDOM_BYTES = st.binary(max_size=12)


ODD_VERSIONS = (
    *(b"HTTP/1.1", b"HTTP/1.0", b"", b"HTTP/0.9", b"HTTP/2.0", b"HTTP/1.1 x", b"http/1.1"),
    *(b"HTTP/1", b"HTTP/1.10", b"HTTP/9.9", b"HTTP/1.1\x00"),
)


@st.composite
def malformed(draw: st.DrawFn) -> Sent:
    """A request broken where nodes' scrapers, proxies and attackers break them."""
    method = draw(
        st.sampled_from([b"GET", b"get", b"TRACE", b"CONNECT", b"G\x00T", b"", b"FOO", b"GET GET"])
        | RANDOM_BYTES
    )
    target = draw(
        st.sampled_from([b"/", b"/metrics", b"*", b"http://x/metrics", b"//metrics", b"/%2e%2e/"])
        | st.tuples(st.sampled_from([b"/", b"/metrics?"]), RANDOM_BYTES).map(b"".join)
        | st.just(b"/" + b"a" * 70_000)
    )
    version = draw(st.sampled_from(ODD_VERSIONS))
    headers = draw(st.lists(st.sampled_from(HEADERS) | _odd_header(), max_size=5))
    body = draw(st.sampled_from([b"", b"x" * 10, b"0\r\n\r\n"]))
    newline = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n", b"\r"]))
    raw = _request(method, target, version, headers, body=body, newline=newline)
    cut = draw(st.integers(0, 3))
    if cut == 0:  # a stray byte somewhere
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(ODD_BYTES) + raw[at:]
    return Sent(raw, method.decode("latin-1").split(" ")[0], None, last=True)


@st.composite
def _odd_header(draw: st.DrawFn) -> tuple[bytes, bytes]:
    return draw(
        st.sampled_from(
            [
                (b"Content-Length", b"-1"),
                (b"Content-Length", b"1_0"),
                (b"Content-Length", b" 5 "),
                (b"Content-Length", b"99999999999999999999999"),
                (b"Content-Length", b"+3"),
                (b"Transfer-Encoding", b"chunked"),
                (b"Host", b"a\x00b"),
                (b"X", b"folded\r\n continued"),
                (b"No colon", b""),
                (b"Bad Name", b"x"),
                (b"X-Long", b"v" * 70_000),
                (b"\xff", b"\xff"),
                (b"Expect", b"100-continue"),
                (b"", b"empty name"),
            ]
        )
        | st.tuples(RANDOM_BYTES, RANDOM_BYTES)
    )


# --- probe targets that try to get out of the allow-list ------------------------------------


@st.composite
def escaping_targets(draw: st.DrawFn, allowed_port: int, refused_port: int) -> str:
    """The allowed target with up to three of its pieces (scheme, user-info, host, port,
    path) swapped for ones that fool URL parsers, mixing the allowed port and the refused
    one."""
    a, b = str(allowed_port), str(refused_port)
    odd = {
        "scheme": ["https://", "HTTP://", "http:/", "http:\\\\", "//", "", "http:///"],
        "userinfo": ["u@", f"127.0.0.1:{a}@", "u:p@", "%40@", "@"],
        "host": [
            *("localhost", "127.1", "0x7f.0.0.1", "[::1]", "2130706433", "127.0.0.1."),
            *("\uff11\uff12\uff17.0.0.1", "127.0.0.1\u3002", "127.0.0.1%2e", "127.0.0.l"),
        ],
        "port": [
            *(f":{b}", f":0{b}", f":{a}:{b}", "", f":{a}\\@127.0.0.1:{b}", f":{b}#:{a}"),
            *(f":{a};{b}", f":+{a}", f":{a}\u0660"),
        ],
        "path": [
            *("/", "", "/node-a/..", f"/node-a@127.0.0.1:{b}/", f"/node-a#@127.0.0.1:{b}"),
            *("/node-a?x", "/node-a%2F..", "\t/node-a", "/node-a\n", f"/../@127.0.0.1:{b}"),
            *(f"\\@127.0.0.1:{b}/", "/node-a ", f"/%2F%2F127.0.0.1:{b}", "/node-a\\"),
        ],
    }
    pieces = {"scheme": "http://", "userinfo": "", "host": "127.0.0.1", "port": f":{a}"}
    pieces["path"] = "/node-a"
    for piece in draw(st.sets(st.sampled_from(sorted(odd)), max_size=3)):
        pieces[piece] = draw(st.sampled_from(odd[piece]))
    return "".join(pieces[p] for p in ("scheme", "userinfo", "host", "port", "path"))


@st.composite
def probe_requests(draw: st.DrawFn, allowed_port: int, refused_port: int) -> Sent:
    """``GET /probe`` with a target (or two) built to escape, encoded as is or escaped."""
    target = draw(escaping_targets(allowed_port, refused_port))
    encoded = quote(target, safe="") if draw(st.booleans()) else target.replace(" ", "%20")
    params = [f"target={encoded}"]
    if draw(st.integers(0, 4)) == 0:
        other = draw(escaping_targets(allowed_port, refused_port))
        params.insert(draw(st.integers(0, 1)), f"target={quote(other, safe='')}")
    params += draw(
        st.lists(st.sampled_from(["module=default", "node=x%22y", "module=", "node="]), max_size=2)
    )
    separator = draw(st.sampled_from(["&", "&", ";", "&&"]))
    path = "/probe?" + separator.join(params)
    raw = _request(b"GET", path.encode("utf-8", "surrogateescape"), b"HTTP/1.1", [(b"Host", b"x")])
    if not all("\x21" <= char <= "\x7e" for char in path):  # not a valid request target
        return Sent(raw, "GET", None, last=True)
    return Sent(raw, "GET", frozenset({200, 400, 403, 503}))


# --- answers, read strictly ------------------------------------------------------------------

_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5][0-9][0-9]) ([\t\x20-\x7e\x80-\xff]*)\r\n")
_FIELD = re.compile(
    rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?)[ \t]*\r\n"
)


@dataclass(frozen=True)
class Answered:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)


class MalformedAnswerError(AssertionError):
    pass


def read_answers(data: bytes, methods: Sequence[str]) -> list[Answered]:
    """The final responses in ``data``, strictly (interim 1xx ones skipped); raises
    MalformedAnswerError for anything that is not HTTP/1.1 (``methods``: of the requests answered,
    in order: a HEAD answer has no body)."""
    answers: list[Answered] = []
    position = 0
    while position < len(data):
        line = _STATUS_LINE.match(data, position)
        if line is None:
            raise MalformedAnswerError(
                f"no status line at byte {position}: {data[position : position + 120]!r}"
            )
        status, position = int(line.group(1)), line.end()
        headers: list[tuple[bytes, bytes]] = []
        while not data.startswith(b"\r\n", position):
            field = _FIELD.match(data, position)
            if field is None:
                raise MalformedAnswerError(f"bad header field: {data[position : position + 120]!r}")
            headers.append((field.group(1), field.group(2)))
            position = field.end()
        position += 2
        if status < 200:
            if headers and status == 100:
                raise MalformedAnswerError("a 100 Continue with header fields")
            continue
        lengths = [v for n, v in headers if n.lower() == b"content-length"]
        if len(lengths) != 1 or not lengths[0].isdigit():
            raise MalformedAnswerError(f"status {status} without one Content-Length: {headers}")
        if any(n.lower() == b"transfer-encoding" for n, _ in headers):
            raise MalformedAnswerError("Transfer-Encoding in an answer")
        method = methods[len(answers)] if len(answers) < len(methods) else "GET"
        size = 0 if method == "HEAD" or status in (204, 304) else int(lengths[0])
        if position + size > len(data):
            raise MalformedAnswerError(
                f"body cut short: {size} bytes announced, {len(data) - position} sent"
            )
        answers.append(Answered(status, tuple(headers), data[position : position + size]))
        position += size
    return answers


def exchange(port: int, pieces: Sequence[bytes], pause: float = 0.0) -> bytes:
    """Send ``pieces`` on one connection (pausing between them), close the sending side,
    and read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(OSError):  # the server may close before taking it all
            for index, piece in enumerate(pieces):
                if index and pause:  # the pieces reach the server apart (an input shape,
                    time.sleep(pause)  # not a wait: no outcome depends on it)
                sock.sendall(piece)
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    return bytes(received)


# --- the properties --------------------------------------------------------------------------


def check_exchange(
    served: Served,
    sent: Sequence[Sent],
    pieces: Sequence[bytes],
    pause: float = 0.0,
    *,
    scrape: bool = True,
) -> list[Answered]:
    """Send, read strictly, hold the answers to what the requests call for, and check that
    no refused probe target was contacted and (with ``scrape``) a scrape still works."""
    allowed_before = len(served.allowed.requests)
    data = exchange(served.port, pieces, pause)
    try:
        answers = _check_answers(served, sent, data, allowed_before)
    except AssertionError as failure:
        shown = "\n".join(
            f"  sent {request.raw[:300]!r} expecting {request.expected}" for request in sent
        )
        cuts = [len(piece) for piece in pieces]
        raise AssertionError(
            f"{failure}\n{shown}\n  in pieces of {cuts}\n  received {data[:2000]!r}"
        ) from None
    if scrape:
        assert_scrape_works(served.port)
    return answers


def _check_answers(
    served: Served, sent: Sequence[Sent], data: bytes, allowed_before: int
) -> list[Answered]:
    answers = read_answers(data, [s.method for s in sent])
    assert len(answers) <= len(sent) or any(s.expected is None for s in sent), answers
    for index, request in enumerate(sent):
        if request.expected is None:
            break  # after a malformed request, anything well-formed or nothing
        if index >= len(answers):
            assert index > 0 and sent[index - 1].last, f"request {index} not answered: {request}"
            break
        assert answers[index].status in request.expected, (request, answers[index])
        if request.last:
            break
    assert not served.refused.requests, (
        f"a probe reached a refused target: {served.refused.requests}"
    )
    if len(served.allowed.requests) > allowed_before:
        probed = [
            target
            for request, answer in zip(sent, answers, strict=False)
            if answer.status == 200 and (target := _probe_target(request.raw)) is not None
        ]
        assert probed, "the allowed node was asked without a probe answered 200"
    for request, answer in zip(sent, answers, strict=False):
        target = _probe_target(request.raw)
        if answer.status == 200 and target is not None:
            assert any(p.fullmatch(target) for p in served.patterns), f"probe served for {target!r}"
    assert not served.logs.records, [r.getMessage() for r in served.logs.records]
    return answers


def _probe_target(raw: bytes) -> str | None:
    """The ``target`` of a ``GET /probe`` request line, as a server using urllib reads it."""
    line = raw.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1").split(" ")
    if len(line) < 2 or not line[1].startswith("/probe?"):
        return None
    values = parse_qs(
        line[1].partition("?")[2].encode("latin-1").decode("utf-8", "replace"),
        keep_blank_values=True,
    ).get("target")
    return values[0] if values and len(values) == 1 else None


def assert_scrape_works(port: int) -> None:
    data = exchange(port, [b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"])
    (answer,) = read_answers(data, ["GET"])
    assert answer.status == 200
    families = {f.name for f in text_string_to_metric_families(answer.body.decode())}
    assert "ledger_node_up" in families


def _settings(name: str) -> hypothesis_settings:
    examples = generation.settings(EXAMPLES[name])
    if name == "every_byte":  # each example is a connection per byte: a campaign's hundredth
        examples = hypothesis_settings(
            examples, max_examples=max(EXAMPLES[name], generation.examples(0) // 100)
        )
    return hypothesis_settings(
        examples,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


PIPELINES = st.lists(st.one_of(well_formed(), well_formed(), malformed()), min_size=1, max_size=4)
HEALTHY = Sent(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n", "GET", frozenset({200}))
#: Requests the properties found answered badly, by what was wrong: the status now sent.
#: Each is a row of test_defects_found_stay_fixed and an explicit example of the property.
FOUND = {
    # http.server answers HTTP/0.9 (a request line without a version, or naming 0.9) with
    # a bare body, and any request line refused before its version is read the same way
    "no-version": (b"GET /-/healthy\r\n\r\n", 400),
    "version-0.9": (b"GET /-/healthy HTTP/0.9\r\n\r\n", 505),
    "version-2.0": (b"GET /-/healthy HTTP/2.0\r\n\r\n", 505),
    "bad-version": (b"GET /-/healthy HTTP/1.1 x\r\n\r\n", 400),
    "0.9-and-bad-syntax": (b"\x00\t\x00 / HTTP/0.9\r\n\r\n", 400),
    # the selector's own refusals sent their body to HEAD requests too, which a client
    # reads as the start of the next answer
    "head-with-a-body": (b"HEAD /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413),
    "head-chunked": (b"HEAD / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
}


def _found(name: str) -> list[Sent]:
    raw, _ = FOUND[name]
    return [Sent(raw, raw.split(b" ", 1)[0].decode("latin-1"), None, last=True), HEALTHY]


@pytest.mark.integration
def test_pipelined_requests(served: Served) -> None:
    """Requests one after another on a connection, sent whole or split in two."""

    @_settings("pipelines")
    @given(sent=PIPELINES, split=st.integers(0, 2**16))
    @example(sent=_found("no-version"), split=0)
    @example(sent=_found("0.9-and-bad-syntax"), split=0)
    @example(sent=_found("head-with-a-body"), split=0)
    def pipelined(sent: list[Sent], split: int) -> None:
        raw = b"".join(request.raw for request in sent)
        at = split % (len(raw) + 1)
        check_exchange(served, sent, [raw[:at], raw[at:]] if split % 3 else [raw], pause=0.005)

    pipelined()


@pytest.mark.integration
def test_probe_targets_never_escape(served: Served) -> None:
    """Probe targets built to reach the refused port; each with a plain request after."""
    allowed = served.allowed.port
    refused = served.refused.port
    healthy = HEALTHY

    statuses: Counter[int] = Counter()

    @_settings("probes")
    @given(probe_requests(allowed, refused))
    def probe(sent: Sent) -> None:
        answers = check_exchange(served, [sent, healthy], [sent.raw + healthy.raw])
        statuses.update(answer.status for answer in answers[:1])

    probe()
    # the targets reach both sides of the allow-list, not only one
    assert statuses[200] and statuses[403] and statuses[400], statuses
    answers = check_exchange(
        served,
        [
            Sent(
                f"GET /probe?target={served.allowed_url()} HTTP/1.1\r\n\r\n".encode(),
                "GET",
                frozenset({200}),
            )
        ],
        [f"GET /probe?target={served.allowed_url()} HTTP/1.1\r\n\r\n".encode()],
    )
    assert b"ledger_probe_success 1.0" in answers[0].body  # the allowed target is probed


@pytest.mark.integration
def test_requests_split_at_every_byte(served: Served) -> None:
    """A small sample of pipelines, each sent in two pieces at every byte boundary."""

    @_settings("every_byte")
    @given(
        st.lists(
            well_formed(SHORT_PATHS, SHORT_QUERIES),
            min_size=1,
            max_size=2,
        )
    )
    def every_byte(sent: list[Sent]) -> None:
        raw = b"".join(request.raw for request in sent)
        for at in range(1, len(raw)):
            check_exchange(served, sent, [raw[:at], raw[at:]], pause=0.002, scrape=False)
        assert_scrape_works(served.port)

    every_byte()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("raw", "statuses"),
    [
        (b"GET /metrics HTTP/1.1\r\nX: " + b"v" * 70_000 + b"\r\n\r\n", {431}),
        (b"POST /-/reload HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n" + b"x" * 200_000, {413}),
        (b"PUT /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", {413}),
        (b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 120 + b"\r\n", {431}),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", {414, 431}),
    ],
    ids=["long-header", "huge-body", "body-where-none-goes", "many-headers", "long-target"],
)
def test_oversized_requests(served: Served, raw: bytes, statuses: set[int]) -> None:
    """Heads and bodies over the limits: refused with a well-formed answer, then closed."""
    answers = check_exchange(
        served, [Sent(raw, raw.split(b" ")[0].decode(), None, last=True)], [raw]
    )
    assert not answers or answers[0].status in statuses


@pytest.mark.integration
@pytest.mark.parametrize(
    "raw",
    [
        b"GET http://127.0.0.1/-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET HTTP://node.invalid:9/-/healthy?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET https://[::1]:9/-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\r\n\r\nGET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\nGET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
)
def test_absolute_targets_and_empty_lines_before_a_request_are_accepted(
    served: Served, raw: bytes
) -> None:
    """RFC 9112: a server must accept a target in absolute form (3.2.2) and should ignore
    empty lines before a request line (2.2). Found by an attack run: the first got 404, the
    second a closed connection. The request pipelined after each is answered too."""
    sent = [Sent(raw, "GET", frozenset({200})), HEALTHY]
    answers = check_exchange(served, sent, [raw + HEALTHY.raw])
    assert [answer.status for answer in answers] == [200, 200]


@pytest.mark.integration
@pytest.mark.parametrize("case", sorted(FOUND))
def test_defects_found_stay_fixed(served: Served, case: str) -> None:
    """Each request the properties found answered without a status line or with a body a
    HEAD answer must not have: now a well-formed HTTP/1.1 refusal, then the connection
    closes (the request pipelined after it is not answered)."""
    raw, status = FOUND[case]
    sent = _found(case)
    answers = check_exchange(served, sent, [raw + HEALTHY.raw])
    assert [answer.status for answer in answers] == [status]
    assert answers[0].header(b"Connection") == b"close"
    if raw.startswith(b"HEAD"):
        assert answers[0].body == b"" and answers[0].header(b"Content-Length") != b"0"
