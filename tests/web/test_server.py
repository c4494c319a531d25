"""The HTTP endpoints over real sockets: negotiation, gzip, readiness, reload, auth and TLS;
and the gzip bodies, built in process, against the plain ones."""

from __future__ import annotations

import base64
import gzip
import itertools
import socket
import ssl
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from exporter.app import Exporter
from exporter.config.exporter import Config, load_config
from exporter.config.nodes import NodeConfig
from exporter.config.web import TlsServerConfig, WebConfig, load_web_config
from exporter.errors import InvalidListenAddressError
from exporter.expose import metrics
from exporter.expose.metrics import MetricSpec
from exporter.expose.render import FamilySink, Renderer
from exporter.model.snapshot import Snapshot
from exporter.runtime import runtime_families
from exporter.web import landing
from exporter.web.exposition import (
    SHARED_CHUNK_MIN,
    Exposition,
    RuntimeFamilies,
    Variant,
    accepts_gzip,
    no_runtime_families,
    wants_openmetrics,
)
from exporter.web.server import ExporterServer, parse_listen_address
from tests.support.certs import Pki
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.golden import CASES, GOLDEN, many_chunks_snapshot, poll_golden_case
from tests.support.http import fetch
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusServers
from tests.support.waiting import wait_until
from tests.support.webapp import StubApp


def _write_config(path: Path, url: str, name: str = "n") -> None:
    path.write_text(
        f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes:\n  - name: {name}\n    url: {url}\n"
    )


@pytest.fixture
def node(fake_node: FakeNode) -> FakeNode:
    fake = fake_node
    fake.play(health_doc(["<b>c1</b>"]), {"%3Cb%3Ec1%3C%2Fb%3E": chain_doc(42)})
    return fake


Running = tuple[Exporter, str, Path]  # the exporter, its base URL and its config file


@pytest.fixture
def running(node: FakeNode, tmp_path: Path) -> Iterator[Running]:
    config_file = tmp_path / "config.yml"
    _write_config(config_file, node.url)
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0, scrape_timeout=1.0)
    exporter = Exporter(config, str(config_file))
    server = exporter.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{server.port}/"
    wait_until(exporter.ready, message="the exporter's first cycle")
    yield exporter, base, config_file
    exporter.stop()


@pytest.mark.parametrize(
    ("accept", "content_type", "ending"),
    [
        (None, "text/plain; version=0.0.4; charset=utf-8", b"\n"),
        ("text/plain;version=0.0.4", "text/plain; version=0.0.4; charset=utf-8", b"\n"),
        (
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            b"# EOF\n",
        ),
    ],
)
def test_metrics_formats(
    running: Running, accept: str | None, content_type: str, ending: bytes
) -> None:
    _, base, _ = running
    answer = fetch(base + "metrics", headers={"Accept": accept} if accept else {})
    assert answer.status == 200
    assert answer.headers["Content-Type"] == content_type
    assert answer.body.endswith(ending)
    assert b'ledger_blockchain_height{blockchain="<b>c1</b>",node="n"} 42.0' in answer.body
    assert b"process_resident_memory_bytes" in answer.body


def test_gzip_when_asked(running: Running) -> None:
    _, base, _ = running
    plain = fetch(base + "metrics").body
    zipped = fetch(base + "metrics", headers={"Accept-Encoding": "gzip, deflate"})
    assert zipped.status == 200 and zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain
    refused = fetch(base + "metrics", headers={"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in refused.headers


#: What Prometheus sends when it scrapes: 2.49 and later, and 2.42 (Debian's).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)
PROMETHEUS_2_42_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


@pytest.mark.parametrize(
    ("accept", "openmetrics"),
    [
        (None, False),
        ("", False),
        (PROMETHEUS_ACCEPT, True),
        (PROMETHEUS_2_42_ACCEPT, True),
        ("application/openmetrics-text;q=0.1, */*", False),  # */* stands for text/plain
        ("application/openmetrics-text;q=0.1, text/*;q=0.05", True),
        ("application/openmetrics-text", True),
        ("Application/OpenMetrics-Text; version=1.0.0", True),
        ("application/openmetrics-text;q=0, text/plain", False),  # refused
        ("application/openmetrics-text;Q=0", False),
        ("text/plain;q=1, application/openmetrics-text;q=0.5", False),  # text preferred
        ("text/plain;q=0.5, application/openmetrics-text;q=0.5", True),  # a tie: OpenMetrics
        ("application/openmetrics-text;q=x", False),  # not a weight: left out
        ("application/openmetrics-text;q=1.5", False),
        ("application/openmetrics-text;q=0.\u00b2", False),
        ("*/*", False),
    ],
)
def test_the_format_follows_the_accept_headers_weights(
    accept: str | None, openmetrics: bool
) -> None:
    assert wants_openmetrics(accept) is openmetrics


@pytest.mark.parametrize(
    ("accept_encoding", "gzipped"),
    [
        (None, False),
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("GZIP;q=0.1", True),
        ("x-gzip", True),
        ("gzip;q=0", False),
        ("gzip;Q=0", False),  # the parameter's name in any case
        ("gzip;q=0.000", False),
        ("*;q=0, gzip", True),  # gzip named: its own weight counts, not the wildcard's
        ("gzip;q=0, *", False),
        ("*", True),
        ("deflate, *;q=0", False),
        ("identity", False),
        ("gzip;q=2", False),  # not a weight: gzip left out
    ],
)
def test_gzip_follows_the_accept_encoding_weights(
    accept_encoding: str | None, gzipped: bool
) -> None:
    assert accepts_gzip(accept_encoding) is gzipped


def test_the_same_snapshot_is_served_until_the_next_cycle(running: Running) -> None:
    exporter, _, _ = running
    exposition = exporter.exposition()
    assert exposition.body(False, False) is exposition.body(False, False)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "-/healthy", 200),
        ("HEAD", "-/healthy", 200),
        ("GET", "-/ready", 200),
        ("GET", "nope", 404),
        ("GET", "-/reload", 405),
        ("PUT", "-/reload", 405),
        ("DELETE", "-/reload", 405),
        ("POST", "metrics", 405),
        ("PUT", "metrics", 405),
    ],
)
def test_endpoints(running: Running, method: str, path: str, status: int) -> None:
    _, base, _ = running
    assert fetch(base + path, method=method).status == status


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("GET", "-/reload", "POST"), ("PUT", "-/reload", "POST"), ("POST", "metrics", "GET, HEAD")],
)
def test_wrong_methods_say_what_is_allowed(
    running: Running, method: str, path: str, allow: str
) -> None:
    _, base, _ = running
    answer = fetch(base + path, method=method)
    assert (answer.status, answer.headers["Allow"]) == (405, allow)


def test_landing_page_escapes_node_values(running: Running) -> None:
    _, base, _ = running
    page = fetch(base)
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert b'<code title="&lt;b&gt;c1&lt;/b&gt;">&lt;b&gt;c1&lt;/b&gt;</code>' in page.body
    assert b"<b>c1</b>" not in page.body
    assert b"href='/metrics'" in page.body


def test_not_ready_before_the_first_cycle(node: FakeNode) -> None:
    node.set("/health", health_doc([]), held=True)  # the first cycle lasts its whole timeout
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=60.0, scrape_timeout=30.0)
    exporter = Exporter(config)
    server = exporter.start("127.0.0.1:0")
    try:
        wait_until(lambda: node.paths, message="the first cycle never asked the node")
        assert fetch(f"http://127.0.0.1:{server.port}/-/ready").status == 503
        assert fetch(f"http://127.0.0.1:{server.port}/-/healthy").status == 200
    finally:
        exporter.stop()


def test_reload_keeps_the_old_config_on_error(running: Running, fake_nodes: FakeNodes) -> None:
    _, base, config_file = running
    config_file.write_text("nodes: [{name: x}]\n")
    failed = fetch(base + "-/reload", method="POST")
    assert failed.status == 500 and b"missing required key 'url'" in failed.body
    assert b"ledger_exporter_config_last_reload_successful 0.0" in fetch(base + "metrics").body
    other = fake_nodes.start()
    other.play(health_doc([]), {})
    _write_config(config_file, other.url, name="renamed")
    assert fetch(base + "-/reload", method="POST").status == 200
    wait_until(
        lambda: b'node="renamed"' in fetch(base + "metrics").body,
        message="the reloaded config's node never showed",
    )
    body = fetch(base + "metrics").body
    assert b"ledger_exporter_config_last_reload_successful 1.0" in body
    assert b'ledger_node_up{node="n"}' not in body


def test_basic_auth(node: FakeNode) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    config = Config(nodes=(NodeConfig("n", node.url),))
    exporter = Exporter(config)
    server = exporter.start("127.0.0.1:0", WebConfig(basic_auth_users={"prom": hashed}))
    base = f"http://127.0.0.1:{server.port}/"
    good = "Basic " + base64.b64encode(b"prom:s3cret").decode()
    bad = "Basic " + base64.b64encode(b"prom:wrong").decode()
    try:
        anonymous = fetch(base + "metrics")
        assert anonymous.status == 401
        assert anonymous.headers["WWW-Authenticate"].startswith("Basic")
        assert fetch(base + "metrics", headers={"Authorization": bad}).status == 401
        assert fetch(base + "metrics", headers={"Authorization": good}).status == 200
        reload = fetch(base + "-/reload", headers={"Authorization": bad}, method="POST")
        assert reload.status == 401
    finally:
        exporter.stop()


def test_tls_serves_while_an_idle_client_holds_a_connection(node: FakeNode, pki: Pki) -> None:
    tls = TlsServerConfig(pki.server.cert, pki.server.key)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),)))
    server = exporter.start("127.0.0.1:0", WebConfig(tls=tls))
    idle = socket.create_connection(("127.0.0.1", server.port))  # never sends a ClientHello
    try:
        context = ssl.create_default_context(cafile=pki.ca)
        results: list[int] = []
        thread = threading.Thread(
            target=lambda: results.append(
                fetch(f"https://127.0.0.1:{server.port}/-/healthy", context=context).status
            )
        )
        thread.start()
        thread.join(timeout=30)
        assert results == [200]
        with pytest.raises(OSError, match=r"reset|closed|EOF|refused"):  # plain HTTP to TLS
            fetch(f"http://127.0.0.1:{server.port}/-/healthy")
    finally:
        idle.close()
        exporter.stop()


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":9877", ("", 9877)), ("0.0.0.0:1", ("0.0.0.0", 1)), ("[::1]:80", ("::1", 80))],
)
def test_parse_listen_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_listen_address(address) == expected


@pytest.mark.parametrize("address", ["9877", "host:", "host:99999", "host:http"])
def test_parse_listen_address_rejects(address: str) -> None:
    with pytest.raises(InvalidListenAddressError):
        parse_listen_address(address)


def test_server_binds_ipv6_loopback_when_asked() -> None:
    class NoApp:
        pass

    try:
        server = ExporterServer("[::1]:0", NoApp())  # type: ignore[arg-type]
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    assert server.address_family == socket.AF_INET6
    server.server_close()


def test_the_next_snapshot_is_rendered_before_it_is_served(running: Running) -> None:
    exporter, base, _ = running
    both = {"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"}
    fetch(base + "metrics", headers=both)
    current = exporter.exposition()
    wait_until(lambda: exporter.exposition() is not current, message="no new cycle published")
    assert (True, True) in exporter.exposition().asked_for()  # rendered before the swap


def _auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_reload_rereads_the_web_config_and_keeps_it_when_bad(
    node: FakeNode, tmp_path: Path
) -> None:
    config_file, web_file = tmp_path / "config.yml", tmp_path / "web.yml"
    _write_config(config_file, node.url)
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    web_file.write_text(f"basic_auth_users:\n  old: '{hashed}'\n")
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),)), str(config_file))
    server = exporter.start("127.0.0.1:0", load_web_config(str(web_file)), str(web_file))
    base = f"http://127.0.0.1:{server.port}/"
    try:
        assert fetch(base + "-/healthy", headers=_auth("old", "pw")).status == 200
        web_file.write_text(
            f"basic_auth_users:\n  new: '{hashed}'\n"
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        )
        assert fetch(base + "-/reload", headers=_auth("old", "pw"), method="POST").status == 200
        assert fetch(base + "-/healthy", headers=_auth("old", "pw")).status == 401
        new = fetch(base + "-/healthy", headers=_auth("new", "pw"))
        assert (new.status, new.headers["X-Frame-Options"]) == (200, "deny")
        web_file.write_text("basic_auth_users:\n  new: not-a-hash\n")
        bad = fetch(base + "-/reload", headers=_auth("new", "pw"), method="POST")
        assert bad.status == 500 and b"must be a bcrypt hash" in bad.body
        kept = fetch(base + "metrics", headers=_auth("new", "pw"))  # the old one still runs
        assert kept.status == 200
        assert b"ledger_exporter_config_last_reload_successful 0.0" in kept.body
    finally:
        exporter.stop()


def test_the_status_page_is_rendered_once_per_snapshot(
    node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders: list[int] = []
    real = landing._tables

    def counted(*args: Any) -> str:
        renders.append(1)
        return real(*args)

    monkeypatch.setattr(landing, "_tables", counted)
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=60.0, scrape_timeout=1.0)
    exporter = Exporter(config)  # one cycle, then none for a minute: one snapshot
    server = exporter.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{server.port}/"
    try:
        wait_until(exporter.ready, message="the exporter's first cycle")
        pages = [fetch(base) for _ in range(20)]
        assert [page.status for page in pages] == [200] * 20
        assert len(renders) == 1  # the other 19 were served from the cached page
        tables = {page.body[page.body.index(b"<h2>") :] for page in pages}
        assert len(tables) == 1
        assert b"ages on this page are as of its end" in pages[0].body
    finally:
        exporter.stop()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 500),  # curl, a config reloader: no Origin
        ({"Origin": "http://127.0.0.1:{port}"}, 500),  # the exporter's own page
        ({"Origin": "HTTP://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}, 500),
        ({"Sec-Fetch-Site": "none"}, 500),  # typed into the address bar
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://127.0.0.1:1"}, 403),  # another service on the same host
        ({"Origin": "http://127.0.0.1:{port}.evil.example"}, 403),
        ({"Origin": "null"}, 403),  # a sandboxed frame or a file
        ({"Origin": "garbage"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Origin": "http://127.0.0.1:{port}", "Sec-Fetch-Site": "cross-site"}, 403),
    ],
)
def test_reload_refuses_cross_origin_requests(
    running: Running, headers: dict[str, str], status: int
) -> None:
    _, base, config_file = running
    port = base.rsplit(":", 1)[1].strip("/")
    config_file.write_text("nodes: [{name: x}]\n")  # a reload that runs fails: 500, and says so
    sent = {name: value.format(port=port) for name, value in headers.items()}
    assert fetch(base + "-/reload", headers=sent, method="POST").status == status
    reloaded = status != 403
    metric = f"ledger_exporter_config_last_reload_successful {0.0 if reloaded else 1.0}"
    assert metric.encode() in fetch(base + "metrics").body


def test_a_burst_of_reloads_is_coalesced(
    node: FakeNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "config.yml"
    config_file.write_text(
        f"scrape_interval: 60s\nscrape_timeout: 1s\nnodes:\n  - name: n\n    url: {node.url}\n"
    )
    loads: list[str] = []

    def counted(path: str) -> Config:
        loads.append(path)
        return load_config(path)

    monkeypatch.setattr("exporter.app.load_config", counted)
    exporter = Exporter(load_config(str(config_file)), str(config_file))
    server = exporter.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{server.port}/"

    def cycles() -> int:
        return node.paths.count("/health")

    try:
        wait_until(exporter.ready, message="the exporter's first cycle")
        assert cycles() == 1
        start = threading.Barrier(10)
        statuses: list[int] = []

        def reload() -> None:
            start.wait(10)
            statuses.append(fetch(base + "-/reload", method="POST", timeout=30).status)

        burst = [threading.Thread(target=reload) for _ in range(10)]
        for thread in burst:
            thread.start()
        for thread in burst:
            thread.join(30)
        # One reload runs, one more waits for it; the rest are told one is pending.
        assert sorted(statuses) == [200, 200] + [429] * 8
        assert len(loads) == 2
        statuses = [fetch(base + "-/reload", method="POST", timeout=30).status for _ in range(3)]
        assert statuses == [200] * 3  # one after another, each runs (at most one a second)
        assert len(loads) == 5
        wait_until(lambda: cycles() >= 2, message="the first reload started no cycle")
        # Then a quiet window, for a cycle the later reloads would wrongly start to show:
        # an absence cannot be waited for, and a loaded machine only hides such a cycle.
        time.sleep(1.5)
        assert cycles() == 2  # the first reload's cycle; the others wait for the regular one
    finally:
        exporter.stop()


# The gzip bodies, built in process: every gzip variant is its plain variant, byte for byte,
# whether its sample lines were deflated in its own stream or once for both formats.

Script = tuple[tuple[MetricSpec, tuple[bytes, ...]], ...]  # families and their chunks


class _Scripted(Renderer):
    """Writes a fixed script of families and chunks, whatever the snapshot: the sink's
    edges the catalogue never reaches (a family without lines, an empty chunk)."""

    def __init__(self, script: Script) -> None:
        super().__init__()
        self._script = script

    def write(
        self,
        snapshot: Snapshot,
        sink: FamilySink,
        families: Sequence[MetricSpec] = metrics.DAEMON_FAMILIES,
        values: Mapping[MetricSpec, float] | None = None,
    ) -> None:
        for spec, chunks in self._script:
            sink.family(spec)
            for chunk in chunks:
                sink.lines(chunk)


def _lines(first: int, size: int) -> bytes:
    """``size`` bytes of sample lines numbered from ``first``, so that chunks differ (the
    last line cut short at ``size``)."""
    lines = (b'ledger_node_up{node="n%d"} 1.0\n' % index for index in range(first, first + size))
    return b"".join(itertools.islice(lines, size // 20 + 1))[:size]


LONG = SHARED_CHUNK_MIN
SCRIPTS: dict[str, Script] = {
    "nothing": (),
    "a family without lines": ((metrics.NODE_UP, ()),),
    "an empty chunk": ((metrics.NODE_UP, (b"",)), (metrics.NODE_SCRAPE_ERRORS, (_lines(0, 99),))),
    "short chunks": tuple(
        (spec, (_lines(0, 300), _lines(9, 40))) for spec in metrics.DAEMON_FAMILIES
    ),
    "chunks just under and at the shared length": (
        (metrics.NODE_UP, (_lines(0, LONG - 1), _lines(1, LONG))),
        (metrics.NODE_SCRAPE_ERRORS, (_lines(2, LONG), _lines(3, LONG - 1))),
    ),
    "long chunks, a counter between gauges": (
        (metrics.NODE_UP, tuple(_lines(i * 1000, 4 * LONG) for i in range(5))),
        (metrics.NODE_SCRAPE_ERRORS, (_lines(7, 5 * LONG),)),
        (metrics.NODE_LAST_SUCCESS, (_lines(8, 3 * LONG),)),
    ),
    "long and short mixed, and families without lines between": (
        (metrics.NODE_UP, (_lines(0, 2 * LONG), _lines(1, 10), _lines(2, 3 * LONG), b"")),
        (metrics.NODE_INFO, ()),
        (metrics.NODE_SCRAPE_ERRORS, (_lines(3, 20), _lines(4, 2 * LONG))),
        (metrics.DROPPED_VALUES, ()),
        (metrics.NODE_LAST_SUCCESS, (_lines(5, LONG), _lines(6, LONG))),
    ),
}
ALL_VARIANTS = ((True, True), (False, True), (True, False), (False, False))
VARIANT_SETS = {
    "both gzip": ((True, True), (False, True)),
    "all four": ALL_VARIANTS,
    "one gzip": ((False, True),),
    "one gzip and its plain": ((True, True), (True, False)),
}


def _assert_gzip_is_plain(exposition: Exposition, openmetrics: bool) -> bytes:
    """The gzip variant of ``openmetrics``'s format decompresses to its plain variant with
    each reader, its trailer holds the CRC-32 and size of that text; returns the body."""
    zipped, plain = exposition.body(openmetrics, True), exposition.body(openmetrics, False)
    assert gzip.decompress(zipped) == plain
    assert zlib.decompress(zipped, 31) == plain
    reader = zlib.decompressobj(31)
    pieces = [reader.decompress(zipped[at : at + 4093]) for at in range(0, len(zipped), 4093)]
    assert b"".join(pieces) + reader.flush() == plain
    assert reader.eof and reader.unused_data == b""
    assert zipped[:3] == b"\x1f\x8b\x08"
    assert zipped[-8:] == struct.pack("<II", zlib.crc32(plain), len(plain))
    return zipped


@pytest.mark.parametrize("variants", VARIANT_SETS.values(), ids=VARIANT_SETS)
@pytest.mark.parametrize(
    "runtime", [no_runtime_families, runtime_families], ids=["no-runtime", "runtime"]
)
@pytest.mark.parametrize("script", SCRIPTS.values(), ids=SCRIPTS)
def test_gzip_bodies_are_the_plain_ones(
    script: Script, runtime: RuntimeFamilies, variants: tuple[Variant, ...]
) -> None:
    exposition = Exposition(Snapshot(), renderer=_Scripted(script), runtime=runtime)
    exposition.prepare(variants)  # those asked together, then the plain ones on their own
    for openmetrics, gzipped in variants:
        if gzipped:
            _assert_gzip_is_plain(exposition, openmetrics)
    assert exposition.body(True, False).endswith(b"# EOF\n")


def _segments(body: bytes) -> set[bytes]:
    """The pieces of a gzip body between the empty stored blocks full flushes end in (the
    same four bytes met by chance inside a segment only cut it further)."""
    return set(body.split(b"\x00\x00\xff\xff"))


@pytest.mark.parametrize("case", CASES)
def test_gzip_bodies_of_the_golden_cases_are_the_plain_ones(case: str) -> None:
    snapshot = poll_golden_case(GOLDEN / case)
    exposition = Exposition(snapshot, runtime=runtime_families).prepare(ALL_VARIANTS)
    for openmetrics in (True, False):
        _assert_gzip_is_plain(exposition, openmetrics)


def test_long_chunks_are_deflated_once_for_both_formats() -> None:
    exposition = Exposition(many_chunks_snapshot(), runtime=runtime_families).prepare(ALL_VARIANTS)
    bodies = [_assert_gzip_is_plain(exposition, openmetrics) for openmetrics in (True, False)]
    shared = _segments(bodies[0]) & _segments(bodies[1])
    assert sum(map(len, shared)) > len(bodies[0]) / 2
    alone = Exposition(exposition.snapshot, runtime=runtime_families)
    alone.body(False, True)  # asked alone: deflated in its own stream
    _assert_gzip_is_plain(alone, openmetrics=False)


def _largest_shared_segment(exposition: Exposition) -> bytes:
    """The longest segment the text and OpenMetrics gzip bodies both hold."""
    shared = _segments(exposition.body(False, True)) & _segments(exposition.body(True, True))
    return max(shared, key=len)


FLIPPED_BYTE: dict[str, Callable[[bytes, bytes], int]] = {
    "a shared segment": lambda body, segment: body.index(segment) + len(segment) // 2,
    "the CRC": lambda body, _: len(body) - 8,
    "the size": lambda body, _: len(body) - 4,
}


@pytest.mark.parametrize("where", FLIPPED_BYTE)
def test_a_corrupted_gzip_body_is_refused(where: str) -> None:
    exposition = Exposition(many_chunks_snapshot()).prepare(((True, True), (False, True)))
    body = exposition.body(False, True)
    at = FLIPPED_BYTE[where](body, _largest_shared_segment(exposition))
    broken = body[:at] + bytes([body[at] ^ 0x10]) + body[at + 1 :]
    with pytest.raises((OSError, EOFError, zlib.error)):  # gzip.BadGzipFile is an OSError
        gzip.decompress(broken)
    with pytest.raises(zlib.error):
        zlib.decompress(broken, 31)


def test_a_segment_deflating_to_other_text_is_caught_by_the_crc() -> None:
    exposition = Exposition(many_chunks_snapshot()).prepare(((True, True), (False, True)))
    body, plain = exposition.body(False, True), exposition.body(False, False)
    segment = _largest_shared_segment(exposition)
    text = zlib.decompressobj(-15).decompress(segment + b"\x00\x00\xff\xff")
    other = text.translate(bytes.maketrans(b"0123456789", b"1234567890"))  # as long
    packer = zlib.compressobj(1, zlib.DEFLATED, -15)
    forged_segment = packer.compress(other) + packer.flush(zlib.Z_FULL_FLUSH)
    forged = body.replace(segment, forged_segment.removesuffix(b"\x00\x00\xff\xff"))
    inflater = zlib.decompressobj(-15)
    inflated = inflater.decompress(forged[10:-8])
    assert inflater.eof  # a valid deflate stream, of a text as long: only the CRC tells
    assert len(inflated) == len(plain) and inflated != plain
    with pytest.raises(gzip.BadGzipFile, match="CRC"):
        gzip.decompress(forged)
    with pytest.raises(zlib.error, match="incorrect data check"):
        zlib.decompress(forged, 31)


def test_the_gzip_program_reads_the_shared_body() -> None:
    exposition = Exposition(many_chunks_snapshot(), runtime=runtime_families)
    exposition.prepare(((True, True), (False, True)))
    for openmetrics in (True, False):
        unzipped = subprocess.run(
            [require_program("gzip"), "-dc"],
            input=exposition.body(openmetrics, True),
            capture_output=True,
            check=True,
        )
        assert unzipped.stdout == exposition.body(openmetrics, False)


class _Serving(StubApp):
    """The web server answering one exposition, prepared before it is served."""

    def __init__(self, exposition: Exposition) -> None:
        super().__init__()
        self._exposition = exposition

    def exposition(self) -> Exposition:
        return self._exposition


@pytest.mark.integration
def test_prometheus_stores_every_sample_of_a_shared_gzip_body(
    prometheus: PrometheusServers,
) -> None:
    # the text variant first: its compressor deflates the segments both bodies share, so the
    # OpenMetrics body Prometheus asks for splices in segments another stream made
    exposition = Exposition(many_chunks_snapshot()).prepare(((False, True), (True, True)))
    assert _largest_shared_segment(exposition)
    lines = gzip.decompress(exposition.body(True, True)).splitlines()
    samples = sum(1 for line in lines if not line.startswith(b"#"))
    server = ExporterServer("127.0.0.1:0", _Serving(exposition))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        scraper = prometheus.start({"shared": [f"127.0.0.1:{server.port}"]})
        scraper.wait_for_scrapes()
        scraped = scraper.wait_for('scrape_samples_scraped{job="shared"}')
        assert float(scraped[0]["value"][1]) == samples
        assert scraper.values('count({job="shared", __name__=~"ledger_.+"})') == {(): samples}
        assert exposition.asked_for() == ((False, True), (True, True))  # gzip OpenMetrics only
    finally:
        server.shutdown()
        server.server_close()
