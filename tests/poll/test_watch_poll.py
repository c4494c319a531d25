"""Watch requests in the polling cycle, over real sockets: sent right after /health under the
cycle's deadline, read into the snapshot, failures counted by endpoint, rendered as
client_python renders them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import exposition, openmetrics
from prometheus_client.registry import CollectorRegistry

from exporter.config.exporter import Config, NetworkChecks
from exporter.config.nodes import NodeConfig
from exporter.expose.render import Renderer, openmetrics_format, text_format
from exporter.model.snapshot import NodeStatus, Snapshot
from exporter.model.watch_readings import ContractReading, StateReading, WalletReading, WatchKind
from exporter.poll.cycle import Poller
from tests.support.documents import CONTRACT, WALLET, WATCH, serve_watched
from tests.support.fakenode import FakeNodes
from tests.support.golden import GOLDEN, WATCH_CASES, poll_golden_case, watch_exposition
from tests.support.oracle import snapshot_collectors
from tests.support.ports import closed_port_url


def _poller(*nodes: NodeConfig, timeout: float = 2.0) -> Poller:
    config = Config(nodes=nodes, scrape_interval=2 * timeout, scrape_timeout=timeout)
    # no checkpoint blocks: these nodes serve none, and the block checks are tested elsewhere
    return Poller(replace(config, watch=WATCH, network_checks=NetworkChecks(0)), lambda _: None)


def _poll(*nodes: NodeConfig, timeout: float = 2.0) -> Snapshot:
    poller = _poller(*nodes, timeout=timeout)
    try:
        return poller.run_cycle()
    finally:
        poller.stop()


def _errors(node: NodeStatus) -> dict[tuple[str, str], int]:
    return {(endpoint, reason): count for endpoint, reason, count in node.error_counts}


def test_watch_requests_are_read_into_the_snapshot(fake_nodes: FakeNodes) -> None:
    fake = serve_watched(fake_nodes.start(), ["c1"])
    snapshot = _poll(NodeConfig("n1", fake.url, labels=(("zone", "a"),)))
    assert sorted(fake.paths) == sorted(
        ["/health", "/blockchains/c1", CONTRACT, CONTRACT + "/state", WALLET]
    )
    objects = {o.kind: o for o in snapshot.watch.objects}
    assert [o.node for o in snapshot.watch.objects] == ["n1"] * 3
    assert objects[WatchKind.CONTRACT].node_labels == (("zone", "a"),)
    contract = objects[WatchKind.CONTRACT].reading
    assert isinstance(contract, ContractReading) and contract.status == "PAUSED"
    wallet = objects[WatchKind.WALLET].reading
    assert isinstance(wallet, WalletReading) and wallet.enabled == 0.0
    state = objects[WatchKind.CONTRACT_STATE].reading
    assert isinstance(state, StateReading)
    assert state.values == (("supply", 12.5), ("paused", 1.0))
    counts = _errors(snapshot.nodes[0])
    for endpoint in ("contract", "contract_state", "wallet"):  # counters start at 0
        assert {r: c for (e, r), c in counts.items() if e == endpoint} == {
            "timeout": 0, "connection": 0, "http_status": 0, "invalid_json": 0,
            "invalid_response": 0, "too_large": 0, "tls": 0, "certificate": 0,
            "identity_mismatch": 0,
        }  # fmt: skip


def test_a_node_not_listing_the_chain_is_not_asked(fake_nodes: FakeNodes) -> None:
    fake = serve_watched(fake_nodes.start(), ["c2"])
    snapshot = _poll(NodeConfig("n1", fake.url))
    assert sorted(fake.paths) == ["/blockchains/c2", "/health"]
    assert snapshot.watch.objects == ()
    assert {e for e, _ in _errors(snapshot.nodes[0])} == {"health", "blockchain"}


def test_failures_are_counted_by_endpoint(fake_nodes: FakeNodes) -> None:
    fake = serve_watched(fake_nodes.start(), ["c1"])
    fake.set(CONTRACT, {"error": "gone"}, status=404)
    fake.set(CONTRACT + "/state", b"not json")
    fake.set(WALLET, ["an", "array"])
    poller = _poller(NodeConfig("n1", fake.url))
    try:
        poller.run_cycle()
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    counts = {k: v for k, v in _errors(snapshot.nodes[0]).items() if v}
    assert counts == {
        ("contract", "http_status"): 2,
        ("contract_state", "invalid_json"): 2,
        ("wallet", "invalid_response"): 2,
    }
    assert [o.reading for o in snapshot.watch.objects] == [None, None, None]
    assert snapshot.nodes[0].up and snapshot.nodes[0].chains[0].up


def test_a_slow_watch_request_times_out_alone_and_the_poll_waits_for_the_rest(
    fake_nodes: FakeNodes,
) -> None:
    fake = serve_watched(fake_nodes.start(), ["c1"])
    fake.set(WALLET, {"enabled": True}, held=True)  # never answers
    fake.set(CONTRACT, {"status": "ACTIVE"}, delay=0.3)  # ends after the chain: still read
    snapshot = _poll(NodeConfig("n1", fake.url), timeout=1.0)
    counts = {k: v for k, v in _errors(snapshot.nodes[0]).items() if v}
    assert counts == {("wallet", "timeout"): 1}
    readings = {o.kind: o.reading for o in snapshot.watch.objects}
    assert readings[WatchKind.WALLET] is None
    assert isinstance(readings[WatchKind.CONTRACT], ContractReading)
    assert snapshot.nodes[0].chains[0].up


def test_a_down_node_is_not_asked_and_has_no_watch_counters() -> None:
    snapshot = _poll(NodeConfig("n1", closed_port_url()))
    assert snapshot.watch.objects == ()
    assert {e for e, _ in _errors(snapshot.nodes[0])} == {"health", "blockchain"}


@pytest.mark.parametrize("case", WATCH_CASES)
def test_a_polling_cycle_gives_the_golden_watch_series(case: str) -> None:
    snapshot = poll_golden_case(GOLDEN / case)
    assert watch_exposition(snapshot.watch) == (GOLDEN / case / "expected.prom").read_text()


@pytest.mark.parametrize("case", WATCH_CASES)
def test_render_writes_the_watch_series_as_client_python(case: str) -> None:
    snapshot = poll_golden_case(GOLDEN / case)
    registry = CollectorRegistry(auto_describe=False)
    for collector in snapshot_collectors(snapshot):
        registry.register(collector)
    renderer = Renderer()
    for _ in range(2):
        rendered = text_format(renderer, snapshot)
        assert rendered == exposition.generate_latest(registry)
        assert b"ledger_contract_up{" in rendered
        om: bytes = openmetrics.exposition.generate_latest(registry)  # type: ignore[no-untyped-call]
        assert openmetrics_format(renderer, snapshot) == om.removesuffix(b"# EOF\n")
