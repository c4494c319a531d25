"""The one writer writes exactly what client_python writes for the same snapshot (the oracle,
``tests/support/oracle.py``), and follows the catalogue."""

from __future__ import annotations

import gc
import json
from dataclasses import replace

import pytest
from prometheus_client.utils import floatToGoString

from exporter.config.nodes import NodeConfig
from exporter.expose import metrics
from exporter.expose.render import (
    CHAIN_GAUGE_FAMILIES,
    Renderer,
    go_float,
    openmetrics_format,
    text_format,
)
from exporter.model.fields import (
    CHAIN_GAUGES,
    CHAIN_STATUS_FIELDS,
    CONTRACT_FIELDS,
    CONTRACT_STATE_FIELDS,
    HEALTH_FIELDS,
    WALLET_FIELDS,
    ChainReading,
)
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ErrorCounts, Snapshot
from exporter.model.storage import pack_counts
from exporter.model.watch_readings import WatchKind, WatchRequest, read_answer
from exporter.poll.history import History
from exporter.poll.results import ChainResult, NodeResult, WatchResult
from exporter.poll.watch_poll import watch_status
from exporter.web.exposition import Exposition
from tests.support.golden import CASES, GOLDEN, many_chunks_snapshot, poll_golden_case
from tests.support.oracle import render_collectors, snapshot_collectors
from tests.support.webapp import landing_page


def _client_python(snapshot: Snapshot, om: bool) -> bytes:
    return render_collectors(snapshot_collectors(snapshot), openmetrics_format=om)


@pytest.mark.parametrize("case", CASES)
def test_same_bytes_as_client_python(case: str) -> None:
    snapshot = poll_golden_case(GOLDEN / case)
    renderer = Renderer()
    for _ in range(2):  # the second time through the label cache
        assert text_format(renderer, snapshot) == _client_python(snapshot, om=False)
        assert openmetrics_format(renderer, snapshot) == _client_python(snapshot, om=True)


def cached_series(renderer: Renderer) -> int:
    """How many node and chain label strings the renderer keeps for its next render."""
    kept = renderer._nodes  # the cache itself: what this test is about
    return sum(1 + len(node.chains) for node in kept.values())


class ChunkCounts:
    """A render's sink that counts the chunks each family's lines come in."""

    def __init__(self) -> None:
        self.chunks: dict[str, int] = {}
        self._family = ""

    def family(self, spec: metrics.MetricSpec) -> None:
        self._family = spec.name
        self.chunks[spec.name] = 0

    def lines(self, chunk: bytes) -> None:
        self.chunks[self._family] += 1


def test_label_cache_forgets_series_no_longer_written() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    renderer = Renderer()
    text_format(renderer, snapshot)
    assert cached_series(renderer) > 0
    text_format(renderer, Snapshot())
    assert cached_series(renderer) == 0


def test_escaping_of_label_values() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    odd = replace(snapshot.nodes[0], name='a"b\\c\nd', labels=(("zone", "x\ny"),))
    weird = replace(snapshot, nodes=(odd,))
    assert text_format(Renderer(), weird) == _client_python(weird, om=False)
    assert openmetrics_format(Renderer(), weird) == _client_python(weird, om=True)


def _plain(reading: ChainReading) -> ChainReading:
    return replace(reading, features=(), key_type="ed25519")


def _changed(snapshot: Snapshot, relabel: bool) -> Snapshot:
    """``snapshot`` one cycle later: every node down to its first chain, without feature
    flags and with another key type, its identity changed and a block error counted; the
    first node relabelled if ``relabel``."""

    nodes = []
    for index, node in enumerate(snapshot.nodes):
        chains = tuple(
            replace(c, reading=_plain(c.reading) if c.reading else None) for c in node.chains[:1]
        )
        health = node.health and replace(node.health, node_version="9.9.9")
        labels = (("zone", "moved"),) if relabel and index == 0 else node.labels
        counts = node.error_counts  # one endpoint more: the node's first block request
        wider = ErrorCounts((*counts.keys, ("block", "timeout")), counts.counts + pack_counts([7]))
        nodes.append(replace(node, labels=labels, chains=chains, health=health, error_counts=wider))
    return replace(snapshot, nodes=tuple(nodes))


@pytest.mark.parametrize("relabel", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_label_cache_follows_changed_nodes(case: str, relabel: bool) -> None:
    before = poll_golden_case(GOLDEN / case)
    after = _changed(before, relabel)
    renderer, fresh = Renderer(), Renderer()
    text_format(renderer, before)
    assert text_format(renderer, after) == _client_python(after, om=False)
    assert openmetrics_format(renderer, after) == _client_python(after, om=True)
    text_format(fresh, after)
    assert 0 < cached_series(renderer) == cached_series(fresh)


def test_families_longer_than_a_chunk_are_written_whole() -> None:
    big = many_chunks_snapshot()
    chunks = ChunkCounts()
    Renderer().write(big, chunks)
    assert max(chunks.chunks.values()) > 1
    assert text_format(Renderer(), big) == _client_python(big, om=False)
    assert openmetrics_format(Renderer(), big) == _client_python(big, om=True)


RAW_SURROGATE = b"\xed\xa0\x80"  # UTF-8-style bytes of U+D800: json.loads lets them through


def _hostile_snapshot() -> Snapshot:
    """One cycle of a node whose every string holds a lone surrogate, raw or escaped, read
    and folded into the history as the poller does, with a watched contract and wallet."""
    bad = RAW_SURROGATE.decode("latin-1")  # to splice the raw bytes into the JSON text
    health_text = (
        '{"nodeVersion": "1.4.2BAD", "nodeId": "\\ud800", "blockchains": ["c1", "cBAD", '
        '"\\udfff"], "network": {"peerId": "p\\udfff", "peerCount": 1, "networkPeers": ["BAD"]}}'
    )
    chain_text = (
        '{"blockHeight": 5, "keyType": "BAD", "consensus": {"consensusType": "\\ud800"}, '
        '"councilMembers": ["\\ud800"], "features": {"ok": true, "\\ud800": true, "xBAD": false}}'
    )
    health = read_health(json.loads(health_text.replace("BAD", bad).encode("latin-1")))
    chain_body = json.loads(chain_text.replace("BAD", bad).encode("latin-1"))
    chains = [ChainResult(c, read_chain(chain_body)) for c in health.blockchain_ids]
    contract = WatchRequest("n", WatchKind.CONTRACT, "c1", "0x1", "token")
    wallet = WatchRequest("n", WatchKind.WALLET, "c1", "w1", "cold")
    hostile = {"status": "\ud800", "vmType": "\udc00", "keyType": "\ud800", "publicKey": "k\ud800"}
    groups = {"authGroups": {"\ud800": {"read": True}, "ops": {"read": False}}}
    watch = [
        WatchResult(contract, read_answer(contract, hostile)),
        WatchResult(wallet, read_answer(wallet, {**hostile, **groups})),
    ]
    result = NodeResult(NodeConfig("n", "http://x/"), health, None, chains, 0.1, 0, watch)
    nodes = History().record([result], now_mono=1_700_000_000.0)
    return Snapshot(nodes, 0.1, 1_700_000_000.0, watch=watch_status([result]))


def test_lone_surrogates_reach_no_output() -> None:
    snapshot = _hostile_snapshot()
    assert [chain.blockchain for chain in snapshot.nodes[0].chains] == ["c1"]
    text, om = text_format(Renderer(), snapshot), openmetrics_format(Renderer(), snapshot)
    assert text == _client_python(snapshot, om=False)
    assert om == _client_python(snapshot, om=True)
    for body in (text, om, landing_page(snapshot, now=1_700_000_000.0).encode()):
        body.decode("utf-8")  # strict: raises on any surrogate that got through
    assert b'feature="ok"' in text and b"feature=" in text
    assert b'group="ops"' in text and text.count(b"ledger_wallet_permission{") == 1
    assert b'reason="invalid_response"} 1.0' in text


@pytest.mark.parametrize(
    "value",
    [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1e-9,
        123456.0,
        999999.0,
        1e6,
        1234567.0,
        9999999.5,
        1.7e9,
        1_700_000_000.25,
        1e10,
        1.5e22,
        -1.7e9,
        -1e22,
        2.0**63,
        7,
        12345678,
        float("inf"),
        float("-inf"),
        float("nan"),
    ],
)
def test_sample_values_are_written_as_client_python_writes_them(value: float) -> None:
    """The writer's own float formatting is client_python's floatToGoString (Go's), which
    the package no longer imports."""
    assert go_float(value) == floatToGoString(value)  # type: ignore[no-untyped-call]


def test_the_catalogue_lists_every_family_once() -> None:
    """Each MetricSpec of the catalogue is in exactly one group, so in the one order the
    writer follows (those the field tables state too); /probe writes a subset of /metrics'
    families, and its own two."""
    defined = {v for v in vars(metrics).values() if isinstance(v, metrics.MetricSpec)}
    tables = (HEALTH_FIELDS, CHAIN_STATUS_FIELDS, CONTRACT_FIELDS, CONTRACT_STATE_FIELDS)
    rows = (*(row for table in tables for row in table), *WALLET_FIELDS)
    defined |= {metrics.family_of(field) for field in rows if field.family}
    assert sorted(s.name for s in metrics.ALL) == sorted(s.name for s in defined)
    assert len(set(metrics.ALL)) == len(metrics.ALL)
    daemon, probe = set(metrics.DAEMON_FAMILIES), set(metrics.PROBE_FAMILIES)
    assert probe - daemon == set(metrics.PROBE_ONLY) and not daemon & set(metrics.PROBE_ONLY)


def test_every_chain_gauge_is_written_as_a_chain_family() -> None:
    families = list(CHAIN_GAUGE_FAMILIES.values())
    assert set(CHAIN_GAUGE_FAMILIES) == set(CHAIN_GAUGES)
    assert len(set(families)) == len(families)
    assert set(families) <= set(metrics.CHAIN_FAMILIES)


def test_a_render_leaves_nothing_for_the_cyclic_collector() -> None:
    """The exporter runs the cyclic GC seldom (exporter.memory.tune_collector): a render that
    left a reference cycle would keep its snapshot (every reading of a cycle), its gauge
    table and label rows alive for dozens of cycles (+35 MiB at 1000 nodes, measured)."""
    snapshot = poll_golden_case(GOLDEN / "documented")
    renderer = Renderer()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage to look at
    try:
        text_format(renderer, snapshot)
        openmetrics_format(renderer, snapshot)
        variants = ((False, False), (True, False), (False, True), (True, True))
        Exposition(snapshot, renderer=renderer).prepare(variants, page=True)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if type(o).__module__.startswith("exporter.")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []
