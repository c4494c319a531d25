"""``--web.listen-address`` repeated (one server per address, the same handlers, web config
and limits on each), ``--web.telemetry-path``, and listen errors that name the flag."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest

from exporter.app import Exporter
from exporter.cli import build_parser
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.config.web import TlsServerConfig, WebConfig
from exporter.errors import BindError, InvalidListenAddressError
from exporter.flags import RESERVED_PATHS, from_environment, telemetry_path
from exporter.web.httpserver import parse_listen_address
from exporter.web.probe_endpoint import ProbeAnswer
from exporter.web.server import ExporterServer, bind_servers
from tests.support.certs import Pki
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch
from tests.support.ports import free_port
from tests.support.testdata import REPO
from tests.support.waiting import wait_until
from tests.support.webapp import StubApp


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    answer = fetch(url, headers=headers)
    return answer.status, answer.body


# --- the flags -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/metrics", None),
        ("/ledger/metrics", None),
        ("/metrics/", None),
        ("/a-b_c.d~e", None),
        ("/%20metrics", None),
        ("metrics", "must start with '/'"),
        ("", "must start with '/'"),
        ("/", "would hide another endpoint"),
        ("/probe", "would hide another endpoint"),
        ("/-/healthy", "would hide another endpoint"),
        ("/-/ready", "would hide another endpoint"),
        ("/-/reload", "would hide another endpoint"),
        ("/-/metrics", "would hide another endpoint"),
        ("/metrics?x=1", "no query or fragment"),
        ("/metrics#top", "no query or fragment"),
        ("/my metrics", "percent-encode"),
        ("/%zz", "percent-encode"),
        ("/mé", "percent-encode"),
        ("/a\nb", "percent-encode"),
    ],
)
def test_telemetry_path_flag(path: str, problem: str | None) -> None:
    if problem is None:
        assert telemetry_path(path) == path
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=problem):
            telemetry_path(path)


@pytest.mark.parametrize(
    ("address", "parsed", "problem"),
    [
        (":9877", ("", 9877), None),
        ("127.0.0.1:0", ("127.0.0.1", 0), None),
        ("[::1]:9877", ("::1", 9877), None),
        ("localhost:65535", ("localhost", 65535), None),
        ("9877", None, "must be host:port"),
        ("localhost", None, "must be host:port"),
        (":http", None, "must be host:port"),
        (":-1", None, "must be host:port"),
        (":99999", None, "':99999': port out of range"),
        (":65536", None, "port out of range"),
        (":" + "9" * 5000, None, "port out of range"),
    ],
)
def test_listen_address_parser(
    address: str, parsed: tuple[str, int] | None, problem: str | None
) -> None:
    if problem is None:
        assert parse_listen_address(address) == parsed
    else:
        with pytest.raises(InvalidListenAddressError, match=problem):
            parse_listen_address(address)


def _listen_action() -> argparse.Action:
    (action,) = [a for a in build_parser()._actions if a.dest == "listen_address"]
    return action


@pytest.mark.parametrize(
    ("text", "addresses", "problem"),
    [
        (":9877", [":9877"], None),
        ("127.0.0.1:9877,[::1]:9877", ["127.0.0.1:9877", "[::1]:9877"], None),
        ("127.0.0.1:1, 127.0.0.1:2", ["127.0.0.1:1", "127.0.0.1:2"], None),
        ("127.0.0.1:1\n127.0.0.1:2\n", ["127.0.0.1:1", "127.0.0.1:2"], None),  # kingpin's way
        (":1,,:2", None, "none of them empty"),
        (":1,", None, "none of them empty"),
        (":1,:99999", None, "port out of range"),
        (":1,x", None, "must be host:port"),
    ],
)
def test_listen_addresses_from_one_variable(
    text: str, addresses: list[str] | None, problem: str | None
) -> None:
    if problem is None:
        assert from_environment(_listen_action(), text) == addresses
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=problem):
            from_environment(_listen_action(), text)


def test_listen_address_repeats_on_the_command_line() -> None:
    parsed = build_parser().parse_args(
        ["--web.listen-address", ":1", "--web.listen-address=[::1]:2"]
    )
    assert parsed.listen_address == [":1", "[::1]:2"]


# --- several listeners ---------------------------------------------------------------------


@pytest.fixture
def node(fake_nodes: FakeNodes) -> FakeNode:
    fake = fake_nodes.start()
    fake.play(health_doc(["c1"]), {"c1": chain_doc(42)})
    return fake


def _config(node: FakeNode) -> Config:
    return Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0, scrape_timeout=1.0)


def _wait_ready(base: str) -> None:
    wait_until(
        lambda: get(base + "/-/ready")[0] == HTTPStatus.OK,
        timeout=20,
        message=f"{base} never became ready",
        ignoring=(OSError,),  # not listening yet
    )


@pytest.fixture
def two_listeners(node: FakeNode) -> Iterator[tuple[Exporter, list[str]]]:
    exporter = Exporter(_config(node))
    first = exporter.start(["127.0.0.1:0", "127.0.0.1:0"])
    bases = [f"http://127.0.0.1:{server.port}" for server in exporter.servers]
    assert first is exporter.servers[0] and len(set(bases)) == 2
    _wait_ready(bases[0])
    yield exporter, bases
    exporter.stop()


def test_every_listener_serves_the_same_endpoints(
    two_listeners: tuple[Exporter, list[str]],
) -> None:
    _, bases = two_listeners
    bodies = []
    for base in bases:
        status, body = get(base + "/metrics")
        assert status == HTTPStatus.OK
        assert b'ledger_blockchain_height{blockchain="c1",node="n"} 42.0' in body
        bodies.append(body.split(b"# HELP process_")[0])  # the runtime families move
        assert get(base + "/-/healthy")[0] == HTTPStatus.OK
        assert get(base + "/")[0] == HTTPStatus.OK
    assert bodies[0] == bodies[1]  # one snapshot, served by both


def test_a_reloaded_web_config_applies_to_every_listener(
    two_listeners: tuple[Exporter, list[str]],
) -> None:
    exporter, bases = two_listeners
    for server in exporter.servers:
        server.use_web_config(WebConfig(headers={"X-Frame-Options": "deny"}))
    for base in bases:
        assert fetch(base + "/metrics").headers["X-Frame-Options"] == "deny"


def test_stopping_closes_every_listener(node: FakeNode) -> None:
    exporter = Exporter(_config(node))
    exporter.start(["127.0.0.1:0", "127.0.0.1:0"])
    ports = [server.port for server in exporter.servers]
    exporter.stop()
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


#: /probe answers 200, so a reserved path the server does not route would show as the app's.
PROBING = StubApp(ProbeAnswer(HTTPStatus.OK, b"probed\n"))


def test_one_address_taken_binds_none(tmp_path: Path) -> None:
    """All or none: the error names the address that failed, and the ones bound before it are
    closed again."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        free = free_port()
        with pytest.raises(BindError) as caught:
            bind_servers([f"127.0.0.1:{free}", busy], PROBING)
    assert str(caught.value) == f"{busy!r}: address already in use"
    assert caught.value.address == busy
    with socket.socket() as again:  # the first one was released
        again.bind(("127.0.0.1", free))


def test_an_address_not_on_this_machine_says_so() -> None:
    """192.0.2.1 (TEST-NET-1) is nobody's address here: binding it fails at once, nothing
    is sent anywhere."""
    with pytest.raises(BindError, match="no such address on this machine") as caught:
        bind_servers(["192.0.2.1:0"], PROBING)
    assert str(caught.value) == "'192.0.2.1:0': no such address on this machine"


# --- the telemetry path --------------------------------------------------------------------


def test_metrics_move_to_the_telemetry_path(node: FakeNode) -> None:
    exporter = Exporter(_config(node), telemetry_path="/ledger/metrics")
    server = exporter.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{server.port}"
    try:
        _wait_ready(base)
        status, body = get(base + "/ledger/metrics")
        assert status == HTTPStatus.OK and b"ledger_node_up" in body
        assert get(base + "/metrics")[0] == HTTPStatus.NOT_FOUND
        assert get(base + "/ledger/metrics?x=1")[0] == HTTPStatus.OK  # a query is no other path
        page = get(base + "/")[1].decode()
        assert "<a href='/ledger/metrics'>Metrics</a>" in page
        assert "href='/metrics'" not in page
    finally:
        exporter.stop()


def test_the_reserved_paths_are_the_servers_other_endpoints() -> None:
    """Each path the telemetry path may not take answers something of its own."""
    server = ExporterServer("127.0.0.1:0", PROBING, telemetry_path="/m")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert get(base + "/nothing-here")[0] == HTTPStatus.NOT_FOUND
        for path in RESERVED_PATHS:
            assert get(base + path)[0] != HTTPStatus.NOT_FOUND, path
    finally:
        server.shutdown()
        server.server_close()


# --- the process ---------------------------------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_EXPORTER_")}
    return {**clean, **extra}


@pytest.fixture
def config_file(node: FakeNode, tmp_path: Path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(
        f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes: [{{name: n, url: '{node.url}'}}]\n"
    )
    return path


@pytest.mark.integration
def test_a_taken_port_names_the_flag_and_exits_1(config_file: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "exporter", f"--config.file={config_file}",
             f"--web.listen-address=127.0.0.1:{free_port()}", f"--web.listen-address={busy}"],
            capture_output=True, text=True, env=_clean_env(), timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert f"msg=\"cannot listen: --web.listen-address '{busy}': address already in use\"" in line


@pytest.mark.integration
def test_listen_addresses_and_telemetry_path_from_the_environment(config_file: Path) -> None:
    ports = [free_port(), free_port()]
    env = _clean_env(
        LEDGER_EXPORTER_WEB_LISTEN_ADDRESS=",".join(f"127.0.0.1:{port}" for port in ports),
        LEDGER_EXPORTER_WEB_TELEMETRY_PATH="/exporter/metrics",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", f"--config.file={config_file}"],
        stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    try:
        for port in ports:
            _wait_ready(f"http://127.0.0.1:{port}")
            status, body = get(f"http://127.0.0.1:{port}/exporter/metrics")
            assert status == HTTPStatus.OK and b"ledger_node_up" in body
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert stderr.count("msg=listening") == 2
    assert "telemetry_path=/exporter/metrics" in stderr


def test_a_web_config_gone_bad_is_not_blamed_on_an_address(tmp_path: Path, pki: Pki) -> None:
    """A certificate removed after the web config was checked: the error is the file's, and
    no address is named as if it could not be bound."""
    cert, key = str(tmp_path / "server.pem"), str(tmp_path / "server.key")
    Path(cert).write_bytes(Path(pki.server.cert).read_bytes())
    Path(key).write_bytes(Path(pki.server.key).read_bytes())
    web = WebConfig(tls=TlsServerConfig(cert, key))
    Path(cert).unlink()
    with pytest.raises(FileNotFoundError) as caught:
        bind_servers(["127.0.0.1:0"], PROBING, web)
    assert not isinstance(caught.value, BindError)
