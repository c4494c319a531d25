"""The HTTP endpoints over real sockets: negotiation, gzip, readiness, reload, auth and TLS."""

from __future__ import annotations

import base64
import gzip
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from exporter.app import Exporter
from exporter.config.exporter import Config, load_config
from exporter.config.nodes import NodeConfig
from exporter.config.web import TlsServerConfig, WebConfig, load_web_config
from exporter.web import landing
from exporter.web.server import ExporterServer, ListenAddressError, parse_listen_address
from tests.conftest import FakeNode, chain_doc, health_doc, make_certificate, new_fake_node


def _get(
    url: str,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return int(response.status), dict(response.headers), bytes(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _wait_ready(base: str) -> None:
    deadline = time.monotonic() + 10
    while _get(base + "-/ready")[0] != 200:
        assert time.monotonic() < deadline, "exporter never became ready"
        time.sleep(0.05)


def _write_config(path: Path, url: str, name: str = "n") -> None:
    path.write_text(
        f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes:\n  - name: {name}\n    url: {url}\n"
    )


@pytest.fixture
def node(fake_nodes: list[FakeNode]) -> FakeNode:
    fake = new_fake_node(fake_nodes)
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
    _wait_ready(base)
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
    status, headers, body = _get(base + "metrics", {"Accept": accept} if accept else {})
    assert status == 200
    assert headers["Content-Type"] == content_type
    assert body.endswith(ending)
    assert b'ledger_blockchain_height{blockchain="<b>c1</b>",node="n"} 42.0' in body
    assert b"process_resident_memory_bytes" in body


def test_gzip_when_asked(running: Running) -> None:
    _, base, _ = running
    plain = _get(base + "metrics")[2]
    status, headers, body = _get(base + "metrics", {"Accept-Encoding": "gzip, deflate"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == plain
    assert "Content-Encoding" not in _get(base + "metrics", {"Accept-Encoding": "gzip;q=0"})[1]


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
    assert _get(base + path, method=method)[0] == status


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("GET", "-/reload", "POST"), ("PUT", "-/reload", "POST"), ("POST", "metrics", "GET, HEAD")],
)
def test_wrong_methods_say_what_is_allowed(
    running: Running, method: str, path: str, allow: str
) -> None:
    _, base, _ = running
    status, headers, _ = _get(base + path, method=method)
    assert (status, headers["Allow"]) == (405, allow)


def test_landing_page_escapes_node_values(running: Running) -> None:
    _, base, _ = running
    status, headers, body = _get(base)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<code title="&lt;b&gt;c1&lt;/b&gt;">&lt;b&gt;c1&lt;/b&gt;</code>' in body
    assert b"<b>c1</b>" not in body
    assert b"href='/metrics'" in body


def test_not_ready_before_the_first_cycle(node: FakeNode) -> None:
    node.set("/health", health_doc([]), delay=1.5)
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=3.0, scrape_timeout=2.0)
    exporter = Exporter(config)
    server = exporter.start("127.0.0.1:0")
    try:
        assert _get(f"http://127.0.0.1:{server.port}/-/ready")[0] == 503
        assert _get(f"http://127.0.0.1:{server.port}/-/healthy")[0] == 200
    finally:
        exporter.stop()


def test_reload_keeps_the_old_config_on_error(running: Running, fake_nodes: list[FakeNode]) -> None:
    _, base, config_file = running
    config_file.write_text("nodes: [{name: x}]\n")
    status, _, body = _get(base + "-/reload", method="POST")
    assert status == 500 and b"missing required key 'url'" in body
    assert b"ledger_exporter_config_last_reload_successful 0.0" in _get(base + "metrics")[2]
    other = new_fake_node(fake_nodes)
    other.play(health_doc([]), {})
    _write_config(config_file, other.url, name="renamed")
    assert _get(base + "-/reload", method="POST")[0] == 200
    deadline = time.monotonic() + 5
    while b'node="renamed"' not in _get(base + "metrics")[2]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    body = _get(base + "metrics")[2]
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
        status, headers, _ = _get(base + "metrics")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert _get(base + "metrics", {"Authorization": bad})[0] == 401
        assert _get(base + "metrics", {"Authorization": good})[0] == 200
        assert _get(base + "-/reload", {"Authorization": bad}, method="POST")[0] == 401
    finally:
        exporter.stop()


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[str, str]:
    return make_certificate(tmp_path)


def test_tls_serves_while_an_idle_client_holds_a_connection(
    node: FakeNode, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),)))
    server = exporter.start("127.0.0.1:0", WebConfig(tls=TlsServerConfig(cert, key)))
    idle = socket.create_connection(("127.0.0.1", server.port))  # never sends a ClientHello
    try:
        context = ssl.create_default_context(cafile=cert)
        results: list[int] = []
        thread = threading.Thread(
            target=lambda: results.append(
                _get(f"https://127.0.0.1:{server.port}/-/healthy", context=context)[0]
            )
        )
        thread.start()
        thread.join(timeout=5)
        assert results == [200]
        with pytest.raises(OSError, match=r"reset|closed|EOF|refused"):  # plain HTTP to TLS
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/-/healthy", timeout=2)
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
    with pytest.raises(ListenAddressError):
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
    _get(base + "metrics", {"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"})
    current = exporter.exposition()
    deadline = time.monotonic() + 5
    while exporter.exposition() is current:
        assert time.monotonic() < deadline, "no new cycle was published"
        time.sleep(0.05)
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
        assert _get(base + "-/healthy", _auth("old", "pw"))[0] == 200
        web_file.write_text(
            f"basic_auth_users:\n  new: '{hashed}'\n"
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        )
        assert _get(base + "-/reload", _auth("old", "pw"), method="POST")[0] == 200
        assert _get(base + "-/healthy", _auth("old", "pw"))[0] == 401
        status, headers, _ = _get(base + "-/healthy", _auth("new", "pw"))
        assert (status, headers["X-Frame-Options"]) == (200, "deny")
        web_file.write_text("basic_auth_users:\n  new: not-a-hash\n")
        status, _, body = _get(base + "-/reload", _auth("new", "pw"), method="POST")
        assert status == 500 and b"must be a bcrypt hash" in body
        status, _, body = _get(base + "metrics", _auth("new", "pw"))  # the old one still runs
        assert status == 200
        assert b"ledger_exporter_config_last_reload_successful 0.0" in body
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
        _wait_ready(base)
        pages = [_get(base) for _ in range(20)]
        assert [status for status, _, _ in pages] == [200] * 20
        assert len(renders) == 1  # the other 19 were served from the cached page
        tables = {body[body.index(b"<h2>") :] for _, _, body in pages}
        assert len(tables) == 1
        assert b"ages on this page are as of its end" in pages[0][2]
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
    assert _get(base + "-/reload", sent, method="POST")[0] == status
    reloaded = status != 403
    metric = f"ledger_exporter_config_last_reload_successful {0.0 if reloaded else 1.0}"
    assert metric.encode() in _get(base + "metrics")[2]


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
        return node.requests.count("/health")

    try:
        _wait_ready(base)
        assert cycles() == 1
        start = threading.Barrier(10)
        statuses: list[int] = []

        def reload() -> None:
            start.wait(10)
            statuses.append(_get(base + "-/reload", method="POST")[0])

        burst = [threading.Thread(target=reload) for _ in range(10)]
        for thread in burst:
            thread.start()
        for thread in burst:
            thread.join(30)
        # One reload runs, one more waits for it; the rest are told one is pending.
        assert sorted(statuses) == [200, 200] + [429] * 8
        assert len(loads) == 2
        statuses = [_get(base + "-/reload", method="POST")[0] for _ in range(3)]
        assert statuses == [200] * 3  # one after another, each runs (at most one a second)
        assert len(loads) == 5
        time.sleep(1.5)  # time for any cycle the reloads would start
        assert cycles() == 2  # the first reload's cycle; the others wait for the regular one
    finally:
        exporter.stop()
