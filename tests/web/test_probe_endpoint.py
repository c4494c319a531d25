"""/probe: parameters, the allow-list, the deadline, the bound on probes in flight, and the
exposition of one probe (issue 11). The engine is replaced by a recorder here, so a refused
probe is seen to send nothing; tests/e2e/test_probe.py covers real sockets."""

from __future__ import annotations

import logging
import re
import threading
from http import HTTPStatus
from urllib.parse import urlencode

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.config.nodes import NodeConfig, TlsConfig
from exporter.config.probe_modules import ProbeConfig, ProbeModule
from exporter.errors import ProbeRefusedError
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.poll.results import ChainResult, FetchError, NodeResult, RequestTrace
from exporter.web.probe_endpoint import (
    TIMEOUT_MARGIN_SECONDS,
    Prober,
    ProbeSlots,
    probe_target,
    probe_timeout,
    render_probe,
)
from tests.support.documents import chain_doc, health_doc

ALLOWED = (
    re.compile(r"https://node-[0-9]+\.ledger\.internal:7740/?"),
    re.compile(r"http://127\.0\.0\.1:[0-9]+/"),
    re.compile(r"https?://plain\.example/"),
)
SECRET_MODULE = ProbeModule(
    blockchains=("c1",),
    headers=(("X-Api-Key", "k"),),
    basic_auth=("monitor", "pw"),
    tls=TlsConfig(insecure_skip_verify=True),
)
CONFIG = ProbeConfig(ALLOWED, (("default", ProbeModule()), ("secret", SECRET_MODULE)), 2)


def query(**params: str) -> str:
    return urlencode(params)


USER_INFO_REFUSED = (
    "the target must not carry user-info (or any '@': write %40); put credentials in the module"
)


@pytest.mark.parametrize(
    ("params", "name", "url"),
    [
        (
            {"target": "https://node-1.ledger.internal:7740/"},
            "node-1.ledger.internal:7740",
            "https://node-1.ledger.internal:7740/",
        ),
        (
            {"target": "https://node-12.ledger.internal:7740"},
            "node-12.ledger.internal:7740",
            "https://node-12.ledger.internal:7740",
        ),
        (
            {"target": "http://127.0.0.1:9000/", "node": "validator-1"},
            "validator-1",
            "http://127.0.0.1:9000/",
        ),
        (
            {"target": "http://127.0.0.1:9000/", "module": "", "node": ""},
            "127.0.0.1:9000",
            "http://127.0.0.1:9000/",
        ),
        (
            {"target": "https://plain.example/"},
            "plain.example:443",
            "https://plain.example/",
        ),
        (
            {"target": "http://plain.example/"},
            "plain.example:80",
            "http://plain.example/",
        ),
    ],
    ids=[
        "host-port-label",
        "no-trailing-slash",
        "node-param",
        "blank-module-is-default",
        "https-default-port",
        "http-default-port",
    ],
)
def test_accepted_targets(params: dict[str, str], name: str, url: str) -> None:
    node = probe_target(query(**params), CONFIG)
    assert (node.name, node.url) == (name, url)
    assert node == NodeConfig(name=name, url=url)  # the default module adds nothing


def test_module_settings_are_applied() -> None:
    node = probe_target(query(target="http://127.0.0.1:9000/", module="secret"), CONFIG)
    assert node.blockchains == ("c1",)
    assert node.headers == (("X-Api-Key", "k"),)
    assert node.basic_auth == ("monitor", "pw")
    assert node.tls.insecure_skip_verify is True
    assert "pw" not in repr(node) and "X-Api-Key" not in repr(node)


@pytest.mark.parametrize(
    ("raw_query", "status", "message"),
    [
        ("", HTTPStatus.BAD_REQUEST, "the target parameter is missing"),
        (query(target=""), HTTPStatus.BAD_REQUEST, "the target parameter is missing"),
        (query(module="default"), HTTPStatus.BAD_REQUEST, "the target parameter is missing"),
        (
            "target=http://127.0.0.1:1/&target=http://127.0.0.1:2/",
            HTTPStatus.BAD_REQUEST,
            "parameter target is given twice",
        ),
        (
            query(target="http://127.0.0.1:9000/", module="nope"),
            HTTPStatus.BAD_REQUEST,
            "unknown module 'nope'; configured: default, secret",
        ),
        (
            query(target="http://user:pw@127.0.0.1:9000/"),
            HTTPStatus.BAD_REQUEST,
            USER_INFO_REFUSED,
        ),
        (
            query(target="https://node-1.ledger.internal:7740@evil.example/"),
            HTTPStatus.BAD_REQUEST,
            USER_INFO_REFUSED,
        ),
        (  # a password holding '/' ends what urlsplit reads as the host: never echoed
            query(target="http://user:1234/S3CRET@127.0.0.1:9000/"),
            HTTPStatus.BAD_REQUEST,
            USER_INFO_REFUSED,
        ),
        (
            query(target="http://127.0.0.1:9000\\@evil.example/"),
            HTTPStatus.BAD_REQUEST,
            "the target must not contain spaces, backslashes or controls",
        ),
        (  # libcurl takes ASCII URLs only: one such target stopped the engine (issue 24)
            query(target="http://127.0.0.1:9000/n\u0153ud/"),
            HTTPStatus.BAD_REQUEST,
            "the target must be ASCII: percent-encode other characters, and write an"
            " internationalised host name in its xn-- form",
        ),
        (
            query(target="ftp://127.0.0.1:9000/"),
            HTTPStatus.BAD_REQUEST,
            "the target must be an http:// or https:// URL with a host",
        ),
        (
            query(target="http://127.0.0.1:99999/"),
            HTTPStatus.BAD_REQUEST,
            "the target is not a valid URL",
        ),
        (
            query(target="http://127.0.0.1:9000/?x=1"),
            HTTPStatus.BAD_REQUEST,
            "the target must not have a query or fragment",
        ),
        (
            query(target="http://10.0.0.1:9000/"),
            HTTPStatus.FORBIDDEN,
            "target 'http://10.0.0.1:9000/' matches none of probe.allowed_targets",
        ),
        (
            query(target="https://node-1.ledger.internal:7740/x"),
            HTTPStatus.FORBIDDEN,
            "target 'https://node-1.ledger.internal:7740/x' matches none of probe.allowed_targets",
        ),
        (
            query(target="https://node-1.ledger.internal.evil.example:7740/"),
            HTTPStatus.FORBIDDEN,
            "target 'https://node-1.ledger.internal.evil.example:7740/' matches none of "
            "probe.allowed_targets",
        ),
        (
            query(target="http://127.0.0.1:9000/nodes/node-1/"),
            HTTPStatus.FORBIDDEN,
            "target 'http://127.0.0.1:9000/nodes/node-1/' matches none of probe.allowed_targets",
        ),
    ],
    ids=[
        "no-query",
        "empty-target",
        "module-only",
        "target-twice",
        "unknown-module",
        "user-info",
        "user-info-hiding-an-allowed-prefix",
        "user-info-password-with-a-slash",
        "backslash",
        "not-ascii",
        "not-http",
        "bad-port",
        "query-in-target",
        "not-allowed",
        "allowed-prefix-only",
        "allowed-name-as-a-subdomain",
        "allowed-host-other-path",
    ],
)
def test_refused_targets(raw_query: str, status: HTTPStatus, message: str) -> None:
    with pytest.raises(ProbeRefusedError) as caught:
        probe_target(raw_query, CONFIG)
    assert (caught.value.status, str(caught.value)) == (status, message)


@pytest.mark.parametrize(
    ("header", "scrape_timeout", "expected"),
    [
        (None, 10.0, 10.0),
        ("5", 10.0, 5.0 - TIMEOUT_MARGIN_SECONDS),
        ("10", 10.0, 10.0 - TIMEOUT_MARGIN_SECONDS),
        ("30", 10.0, 10.0),  # capped by scrape_timeout
        ("0.6", 10.0, 0.3),  # the margin never takes more than half
        ("abc", 10.0, 10.0),
        ("0", 10.0, 10.0),
        ("-3", 10.0, 10.0),
        ("nan", 10.0, 10.0),
        ("inf", 4.0, 4.0),
    ],
)
def test_probe_timeout(header: str | None, scrape_timeout: float, expected: float) -> None:
    assert probe_timeout(header, scrape_timeout) == pytest.approx(expected)


class Recorder:
    """Plays the engine: records each probe and answers what the test chose."""

    def __init__(self, result: NodeResult | None = None) -> None:
        self.calls: list[tuple[NodeConfig, float]] = []
        self.result = result
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Semaphore(0)

    def __call__(
        self, node: NodeConfig, deadline: float, trace: RequestTrace | None = None
    ) -> NodeResult:
        self.calls.append((node, deadline))
        self.entered.release()
        self.release.wait(timeout=30)
        return self.result or healthy_result(node)


def healthy_result(node: NodeConfig) -> NodeResult:
    health = read_health(health_doc(["c1", "c2"]))
    chains = [
        ChainResult("c1", read_chain(chain_doc(500))),
        ChainResult("c2", None, FetchError(Reason.HTTP_STATUS, "HTTP status 500")),
    ]
    return NodeResult(node, health, None, chains, 0.25)


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_refused_probe_sends_nothing() -> None:
    engine = Recorder()
    prober = Prober(CONFIG, 10.0, engine)
    answer = prober.handle(query(target="http://10.0.0.1:80/"), None, False)
    assert answer.status == HTTPStatus.FORBIDDEN
    assert answer.body == b"target 'http://10.0.0.1:80/' matches none of probe.allowed_targets\n"
    assert engine.calls == []


def test_deadline_comes_from_the_scrapers_timeout() -> None:
    clock = [1000.0]
    engine = Recorder()
    prober = Prober(CONFIG, 10.0, engine, monotonic=lambda: clock[0])
    assert prober.handle(query(target="http://127.0.0.1:9/"), "4", False).status == HTTPStatus.OK
    [(node, deadline)] = engine.calls
    assert node.name == "127.0.0.1:9"
    assert deadline == pytest.approx(1000.0 + 4 - TIMEOUT_MARGIN_SECONDS)


def test_healthy_probe_exposes_the_node_and_its_chains() -> None:
    prober = Prober(CONFIG, 10.0, Recorder())
    answer = prober.handle(query(target="http://127.0.0.1:9/", node="v1"), None, False)
    assert answer.status == HTTPStatus.OK
    assert answer.content_type.startswith("text/plain; version=0.0.4")
    found = samples(answer.body)
    assert found[("ledger_probe_success", ())] == 1.0
    assert found[("ledger_probe_duration_seconds", ())] >= 0.0
    assert found[("ledger_node_up", (("node", "v1"),))] == 1.0
    assert found[("ledger_node_peers", (("node", "v1"),))] == 4.0
    assert found[("ledger_blockchain_height", (("blockchain", "c1"), ("node", "v1")))] == 500.0
    assert found[("ledger_blockchain_up", (("blockchain", "c2"), ("node", "v1")))] == 0.0
    names = {name for name, _ in found}
    # history and cross-node series exist only in the daemon's /metrics
    assert not names & {
        "ledger_blockchain_blocks_behind",
        "ledger_blockchain_height_last_change_timestamp_seconds",
        "ledger_node_last_success_timestamp_seconds",
        "ledger_node_scrape_errors_total",
        "ledger_node_retry_after_total",
        "ledger_exporter_build_info",
    }


def test_unreadable_node_is_a_200_with_only_the_probe_series(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = NodeConfig("127.0.0.1:9", "http://127.0.0.1:9/", blockchains=("c1",))
    error = FetchError(Reason.CONNECTION, "connection refused")
    down = NodeResult(node, None, error, [ChainResult("c1", None, error, requested=False)], 0.1)
    prober = Prober(CONFIG, 10.0, Recorder(down))
    with caplog.at_level(logging.DEBUG, logger="ledger_exporter"):
        answer = prober.handle(query(target="http://127.0.0.1:9/"), None, False)
    [record] = [r for r in caplog.records if r.getMessage() == "probe failed"]
    assert record.fields == {  # type: ignore[attr-defined]
        "node": "127.0.0.1:9",
        "target": "http://127.0.0.1:9/",
        "error": "connection: connection refused",
    }
    assert answer.status == HTTPStatus.OK
    found = samples(answer.body)
    assert set(found) == {("ledger_probe_success", ()), ("ledger_probe_duration_seconds", ())}
    assert found[("ledger_probe_success", ())] == 0.0
    assert b"refused" not in answer.body


def test_openmetrics_when_asked() -> None:
    prober = Prober(CONFIG, 10.0, Recorder())
    answer = prober.handle(query(target="http://127.0.0.1:9/"), None, True)
    assert answer.content_type.startswith("application/openmetrics-text")
    assert answer.body.endswith(b"# EOF\n")


def test_probes_over_the_bound_get_503_at_once() -> None:
    """Two slots: two probes hold them, a third gets a 503 without waiting (it would hold a
    server thread) and sends nothing; once the slots are free probes are served again."""
    engine = Recorder()
    engine.release.clear()
    prober = Prober(CONFIG, 10.0, engine)
    answers: list[HTTPStatus] = []
    holders = [
        threading.Thread(
            target=lambda: answers.append(
                prober.handle(query(target="http://127.0.0.1:9/"), None, False).status
            )
        )
        for _ in range(2)
    ]
    for thread in holders:
        thread.start()
    for _ in holders:
        assert engine.entered.acquire(timeout=10)
    refused = prober.handle(query(target="http://127.0.0.1:9/"), None, False)
    assert refused.status == HTTPStatus.SERVICE_UNAVAILABLE
    assert refused.body == b"2 probes in flight (probe.max_in_flight)\n"
    assert len(engine.calls) == 2
    engine.release.set()
    for thread in holders:
        thread.join(timeout=10)
    assert answers == [HTTPStatus.OK, HTTPStatus.OK]
    assert prober.handle(query(target="http://127.0.0.1:9/"), None, False).status == HTTPStatus.OK


def test_probes_running_across_a_reload_count_against_the_new_bound() -> None:
    """A reload makes a new Prober sharing the slots: two probes still running on the old
    one fill the new one's two slots, so the bound holds while a reload happens."""
    engine = Recorder()
    engine.release.clear()
    slots = ProbeSlots()
    old = Prober(CONFIG, 10.0, engine, slots=slots)
    target = query(target="http://127.0.0.1:9/")
    holders = [threading.Thread(target=old.handle, args=(target, None, False)) for _ in range(2)]
    for thread in holders:
        thread.start()
    for _ in holders:
        assert engine.entered.acquire(timeout=10)
    new = Prober(CONFIG, 10.0, engine, slots=slots)
    assert new.handle(target, None, False).status == HTTPStatus.SERVICE_UNAVAILABLE
    engine.release.set()
    for thread in holders:
        thread.join(timeout=10)
    assert new.handle(target, None, False).status == HTTPStatus.OK
    assert len(engine.calls) == 3


def test_render_never_invents_history() -> None:
    node = NodeConfig("n", "http://127.0.0.1:9/")
    body = render_probe(healthy_result(node), 0.5, False)
    assert b"ledger_probe_duration_seconds 0.5" in body
