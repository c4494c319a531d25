"""``/probe?...&debug=true`` as blackbox_exporter has it: the probe's log (each request, its
URL path, status or error, and time; then why the probe failed, or that it succeeded) as
plain text, then the series it would have returned, once the config's ``probe.debug`` allows
it (off: a 403, nothing sent). And the shipped ``config/probe.yml`` admits
``ledger-exporter simulate``'s nodes on its default address and nothing else on loopback, so
the probe example of docs/probe-mode.md runs and an unauthenticated client cannot tell an
open loopback port from a closed one through it."""

from __future__ import annotations

import re
import shutil
import socket
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlencode

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app import Exporter
from exporter.config.exporter import load_config, parse_config
from exporter.config.nodes import NodeConfig
from exporter.config.probe_modules import ProbeConfig
from exporter.errors import ConfigError
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.poll.results import (
    ChainResult,
    FetchError,
    NodeResult,
    RequestTrace,
    TracedRequest,
)
from exporter.web.probe_endpoint import DEBUG_CONTENT_TYPE, DEBUG_OFF, Prober
from ledger_simulator import SimulatedNetwork
from tests.support.documents import chain_doc, health_doc
from tests.support.http import fetch
from tests.support.ports import free_port, port_is_closed
from tests.support.processes import ready_exporter
from tests.support.testdata import REPO

SHIPPED = REPO / "config" / "probe.yml"


def _probe_config(debug: str | None) -> ProbeConfig:
    """A probe section allowing http://127.0.0.1:9/, with ``debug: <debug>`` unless None."""
    text = "probe:\n  allowed_targets: ['http://127\\.0\\.0\\.1:9/']\n"
    parsed = parse_config(text + (f"  debug: {debug}\n" if debug else ""), "<test>")
    assert parsed.probe is not None
    return parsed.probe


CONFIG = _probe_config("true")
LOGFMT = re.compile(r'^ts=\S+ level=(info|warn|error) msg="[^"]+"( \w+=("[^"]*"|\S+))*$')


class Traced:
    """Plays the engine: a node answering /health, one chain, and a 500 on the other."""

    def __init__(self) -> None:
        self.traces: list[RequestTrace | None] = []

    def __call__(
        self, node: NodeConfig, deadline: float, trace: RequestTrace | None = None
    ) -> NodeResult:
        self.traces.append(trace)
        if trace is not None:
            now = trace.monotonic()
            trace.record(TracedRequest("/health", now, now + 0.002, 200, 321))
            trace.record(TracedRequest("/blockchains/c1", now, now + 0.004, 200, 654))
            error = "http_status: HTTP status 500 from /blockchains/c2"
            trace.record(TracedRequest("/blockchains/c2", now, now + 0.005, 500, 12, error))
        health = read_health(health_doc(["c1", "c2"]))
        chains = [
            ChainResult("c1", read_chain(chain_doc(500))),
            ChainResult("c2", None, FetchError(Reason.HTTP_STATUS, "HTTP status 500 from /c2")),
        ]
        return NodeResult(node, health, None, chains, 0.01)


def _query(**params: str) -> str:
    return urlencode({"target": "http://127.0.0.1:9/", **params})


def _split(body: bytes) -> tuple[list[str], str]:
    """The log lines and the exposition of a debug answer."""
    text = body.decode()
    head, sep, series = text.partition("\nMetrics that would have been returned:\n")
    assert sep, text
    first, *lines = head.splitlines()
    assert first == "Logs for the probe:"
    return lines, series


def _samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name != "ledger_probe_duration_seconds"
    }


def test_debug_answers_the_log_then_the_series() -> None:
    engine = Traced()
    prober = Prober(CONFIG, 10.0, engine)
    answer = prober.handle(_query(node="v1", debug="true"), "5", openmetrics_format=True)
    assert (answer.status, answer.content_type) == (HTTPStatus.OK, DEBUG_CONTENT_TYPE)
    lines, series = _split(answer.body)
    assert all(LOGFMT.match(line) for line in lines), lines
    assert 'msg="Beginning probe" target=http://127.0.0.1:9/ module=default node=v1' in lines[0]
    assert "timeout_seconds=4.5" in lines[0]  # the scraper's 5 s less the margin
    assert [re.search(r'msg="([^"]+)"', line)[1] for line in lines[1:]] == [  # type: ignore[index]
        "Request answered",
        "Request answered",
        "Request failed",
        "Blockchain not read",
        "Probe succeeded",
    ]
    assert "path=/health status=200 bytes=321 duration_seconds=0.002" in lines[1]
    assert (
        'path=/blockchains/c2 status=500 bytes=12 error="http_status: HTTP status 500 from '
        '/blockchains/c2" duration_seconds=0.005'
    ) in lines[3]
    assert 'blockchain=c2 reason="http_status: HTTP status 500 from /c2"' in lines[4]
    # the series are the ones the probe answers without debug (text format, even when the
    # scraper asks for OpenMetrics: the answer is for a person)
    plain = prober.handle(_query(node="v1"), "5", openmetrics_format=False)
    assert _samples(series) == _samples(plain.body.decode())
    assert engine.traces[0] is not None and engine.traces[1] is None  # traced only when asked


def test_a_failed_probe_says_why() -> None:
    def down(node: NodeConfig, deadline: float, trace: RequestTrace | None = None) -> NodeResult:
        assert trace is not None
        now = trace.monotonic()
        error = "connection: connection refused"
        trace.record(TracedRequest("/health", now, now, error=error))
        return NodeResult(node, None, FetchError(Reason.CONNECTION, "connection refused"), [], 0.0)

    answer = Prober(CONFIG, 10.0, down).handle(_query(debug="true"), None, False)
    lines, series = _split(answer.body)
    assert 'msg="Request failed" path=/health error="connection: connection refused"' in lines[1]
    assert 'msg="Probe failed" reason="connection: connection refused"' in lines[2]
    assert _samples(series) == {("ledger_probe_success", ()): 0.0}


@pytest.mark.parametrize(
    ("debug", "status"),
    [("false", HTTPStatus.OK), ("", HTTPStatus.BAD_REQUEST), ("1", HTTPStatus.BAD_REQUEST)],
)
def test_debug_takes_true_or_false(debug: str, status: HTTPStatus) -> None:
    answer = Prober(CONFIG, 10.0, Traced()).handle(_query(debug=debug), None, False)
    assert answer.status == status
    if status == HTTPStatus.OK:
        assert answer.content_type.startswith("text/plain; version=0.0.4")
    else:
        assert answer.body == b"debug must be true or false\n"


def test_debug_given_twice_is_refused() -> None:
    answer = Prober(CONFIG, 10.0, Traced()).handle(_query() + "&debug=true&debug=true", None, False)
    assert (answer.status, answer.body) == (
        HTTPStatus.BAD_REQUEST,
        b"parameter debug is given twice\n",
    )


def test_a_refused_target_stays_refused_with_debug() -> None:
    engine = Traced()
    query = urlencode({"target": "http://10.0.0.1:80/", "debug": "true"})
    answer = Prober(CONFIG, 10.0, engine).handle(query, None, False)
    assert answer.status == HTTPStatus.FORBIDDEN and engine.traces == []


@pytest.mark.parametrize("debug", [None, "false"], ids=["left-out", "false"])
def test_debug_is_off_unless_the_config_allows_it(debug: str | None) -> None:
    """Without ``probe.debug: true``, ``debug=true`` is a 403 saying how to turn it on, and
    the node is not asked; the same probe without it is answered as ever."""
    config = _probe_config(debug)
    assert config.debug is False
    engine = Traced()
    prober = Prober(config, 10.0, engine)
    answer = prober.handle(_query(node="v1", debug="true"), "5", openmetrics_format=False)
    assert (answer.status, answer.body) == (HTTPStatus.FORBIDDEN, f"{DEBUG_OFF}\n".encode())
    assert "probe.debug: true" in DEBUG_OFF
    assert engine.traces == [], "a refused debug probe sent a request"
    assert prober.handle(_query(node="v1", debug="false"), "5", False).status == HTTPStatus.OK
    assert prober.handle(_query(node="v1"), "5", False).status == HTTPStatus.OK
    assert engine.traces == [None, None]


@pytest.mark.parametrize("value", ["enabled", "1", "'true'", "null"])
def test_probe_debug_takes_a_yaml_boolean_only(value: str) -> None:
    with pytest.raises(ConfigError, match=r"probe\.debug.*must be true or false"):
        _probe_config(value)


def test_the_shipped_probe_config_leaves_debug_off() -> None:
    probe = load_config(str(SHIPPED)).probe
    assert probe is not None and probe.debug is False


@pytest.fixture
def listening() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback port that accepts connections (its port, and the connections it got)."""
    accepted: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        port = int(server.getsockname()[1])
        yield port, accepted
        while True:
            try:
                accepted.append(server.accept()[0])
            except BlockingIOError:
                break
    for connection in accepted:
        connection.close()


def test_the_shipped_config_tells_no_open_loopback_port_from_a_closed_one(
    tmp_path: Path, listening: tuple[int, list[socket.socket]]
) -> None:
    """The exporter as a process on the shipped config/probe.yml, no web config: for a
    loopback port that listens and one that refuses, every probe an unauthenticated client
    can send (debug or not, the simulator's path or another, 127.0.0.1 or localhost) gets
    the same answer but for the port it names, and the listening port is never connected
    to. The simulator's own address is allowed, but its debug log is refused as well."""
    open_port, accepted = listening
    closed_port = free_port()
    assert port_is_closed(closed_port)
    config = tmp_path / "probe.yml"
    shutil.copy(SHIPPED, config)
    shapes = [
        "http://{host}:{port}/nodes/node-1/",
        "http://{host}:{port}/",
        "http://{host}:{port}/nodes/node-1/health",
    ]
    with ready_exporter(config) as exporter:

        def answers(port: int) -> list[tuple[int, str]]:
            seen = []
            for shape in shapes:
                for host in ("127.0.0.1", "localhost"):
                    for extra in ({"debug": "true"}, {}):
                        target = shape.format(host=host, port=port)
                        query = urlencode({"target": target, **extra})
                        answer = fetch(f"{exporter.base}/probe?{query}", timeout=30)
                        seen.append((answer.status, answer.text.replace(str(port), "PORT")))
            return seen

        from_open, from_closed = answers(open_port), answers(closed_port)
        assert from_open == from_closed
        assert {status for status, _ in from_open} == {HTTPStatus.FORBIDDEN}
        # the simulator's address: allowed for a probe, but not for its log
        query = urlencode({"target": "http://127.0.0.1:7740/nodes/node-1/", "debug": "true"})
        answer = fetch(f"{exporter.base}/probe?{query}", timeout=30)
        assert (answer.status, answer.text) == (HTTPStatus.FORBIDDEN, f"{DEBUG_OFF}\n")
    assert accepted == [], "the exporter connected to the listening port"


# --- against the simulator, through the exporter's HTTP server -----------------------------


@pytest.fixture(scope="module")
def network() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=3, chains=2, block_interval=2.0, seed=0, port=0) as net:
        yield net


@pytest.fixture
def probing(network: SimulatedNetwork) -> Iterator[str]:
    """A probe-only exporter on config/probe.yml's allow-list (the simulator's port in place
    of its default 7740), debug allowed, with a module holding a password (which the debug
    answer must never show); its base URL."""
    shipped = load_config(str(SHIPPED))
    assert shipped.probe is not None
    port = network.node_urls["node-1"].split("/")[2].split(":")[1]
    allowed = "\n".join(
        f"    - '{pattern.pattern.replace(':7740/nodes/', f':{port}/nodes/')}'"
        for pattern in shipped.probe.allowed_targets
    )
    assert f":{port}/nodes/" in allowed, "the shipped config no longer admits the simulator"
    config = parse_config(
        "probe:\n  debug: true\n  allowed_targets:\n" + allowed + "\n  modules:\n"
        "    default: {}\n"
        "    secret:\n      basic_auth: {username: prober, password: s3cret-pass}\n"
        "      headers: {X-Tenant: tenant-token-123}\n",
        "<test>",
    )
    exporter = Exporter(config)
    server = exporter.start("127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        exporter.stop()


def _get(url: str) -> tuple[int, str, str]:
    answer = fetch(url, timeout=30)
    return answer.status, answer.headers["Content-Type"], answer.text


def test_debug_shows_each_request_of_a_probe_of_the_simulator(
    network: SimulatedNetwork, probing: str
) -> None:
    first_chain = network.chain_ids[0]
    network.set_fault("node-2", "http_500", True, first_chain)
    try:
        url = network.node_urls["node-2"]
        query = urlencode({"target": url, "node": "node-2", "module": "secret", "debug": "true"})
        status, content_type, body = _get(f"{probing}/probe?{query}")
    finally:
        network.set_fault("node-2", "http_500", False, first_chain)
    assert (status, content_type) == (200, DEBUG_CONTENT_TYPE)
    lines, series = _split(body.encode())
    assert all(LOGFMT.match(line) for line in lines), lines
    assert "path=/nodes/node-2/health status=200" in lines[1]
    chain_lines = [
        line for line in lines if f"path=/nodes/node-2/blockchains/{first_chain}" in line
    ]
    assert len(chain_lines) == 1 and "status=500" in chain_lines[0], lines
    assert 'msg="Request failed"' in chain_lines[0]
    assert any(f'msg="Blockchain not read" blockchain={first_chain}' in line for line in lines)
    assert 'msg="Probe succeeded"' in lines[-1]
    found = _samples(series)
    assert found[("ledger_probe_success", ())] == 1.0
    assert found[("ledger_blockchain_up", (("blockchain", first_chain), ("node", "node-2")))] == 0
    for secret in ("s3cret-pass", "tenant-token-123", "Authorization", "prober:"):
        assert secret not in body


def test_debug_says_why_a_probe_of_a_down_node_failed(
    network: SimulatedNetwork, probing: str
) -> None:
    network.set_fault("node-3", "http_500", True)
    try:
        query = urlencode({"target": network.node_urls["node-3"], "debug": "true"})
        status, _, body = _get(f"{probing}/probe?{query}")
    finally:
        network.set_fault("node-3", "http_500", False)
    assert status == 200
    lines, series = _split(body.encode())
    assert 'msg="Request failed" path=/nodes/node-3/health status=500' in lines[1]
    assert (
        lines[-1]
        .split(" ", 2)[2]
        .startswith(
            'msg="Probe failed" reason="http_status: HTTP status 500 from /nodes/node-3/health"'
        )
    )
    assert _samples(series) == {("ledger_probe_success", ()): 0.0}


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("http://127.0.0.1:7740/nodes/node-1/", True),
        ("http://127.0.0.1:7740/nodes/node-12", True),
        ("http://127.0.0.1:41234/nodes/node-12", False),
        ("http://127.0.0.1:7741/nodes/node-1/", False),
        ("http://localhost:7740/nodes/node-3/", False),
        ("http://[::1]:7740/nodes/node-3/", False),
        ("https://node-4.ledger.internal:7740/", True),
        ("http://127.0.0.1:7740/-/sim/faults", False),
        ("http://127.0.0.1:7741/", False),
        ("http://10.0.0.5:7740/nodes/node-1/", False),
        ("http://127.0.0.1:7740/nodes/node-1/../../-/sim/", False),
        ("http://127.0.0.1.evil.example:7740/nodes/node-1/", False),
    ],
)
def test_the_shipped_probe_config_admits_the_simulator_only(target: str, allowed: bool) -> None:
    probe = load_config(str(SHIPPED)).probe
    assert probe is not None and probe.allows(target) is allowed
