"""Cross-cycle state: height-change times, blocks behind, counters, and state-change logs."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from exporter.bounds import Bounds, DropKind, Dropped
from exporter.config.nodes import NodeConfig
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, NodeStatus
from exporter.model.transport import Handshake, TransportStatus
from exporter.poll.history import History
from exporter.poll.results import ChainResult, FetchError, NodeResult, Reason
from tests.support.documents import chain_doc, health_doc


def _up(name: str, heights: dict[str, int | None]) -> NodeResult:
    chains = [
        ChainResult(chain, read_chain({} if height is None else chain_doc(height)))
        for chain, height in heights.items()
    ]
    return NodeResult(NodeConfig(name, "http://x/"), read_health(health_doc([])), None, chains, 0.1)


def _down(name: str, reason: Reason = Reason.TIMEOUT) -> NodeResult:
    return NodeResult(NodeConfig(name, "http://x/"), None, FetchError(reason, "boom"), [], 0.1)


def _chain(history_nodes: tuple[NodeStatus, ...], node: str, chain: str) -> ChainStatus:
    status = next(n for n in history_nodes if n.name == node)
    return next(c for c in status.chains if c.blockchain == chain)


def test_height_change_time_is_when_the_height_was_first_seen() -> None:
    history = History()
    first = history.record([_up("a", {"c": 10})], now_mono=100.0)
    same = history.record([_up("a", {"c": 10})], now_mono=115.0)
    moved = history.record([_up("a", {"c": 11})], now_mono=130.0)
    assert _chain(first, "a", "c").height_changed_at == 100.0
    assert _chain(same, "a", "c").height_changed_at == 100.0
    assert _chain(moved, "a", "c").height_changed_at == 130.0


def test_a_node_blip_does_not_reset_the_stall_clock() -> None:
    history = History()
    history.record([_up("a", {"c": 10})], now_mono=100.0)
    history.record([_down("a")], now_mono=115.0)
    back = history.record([_up("a", {"c": 10})], now_mono=130.0)
    assert _chain(back, "a", "c").height_changed_at == 100.0


def test_a_down_node_keeps_its_chains_last_heights_for_the_status_page() -> None:
    """Its chains stay in view (unknown) while it is down; none while it is up or never read."""
    history = History()
    (up,) = history.record([_up("a", {"c": 10, "d": 7})], now_mono=100.0)
    (down,) = history.record([_down("a")], now_mono=115.0)
    (back,) = history.record([_up("a", {"c": 11})], now_mono=130.0)
    assert (up.last_chains, down.last_chains, back.last_chains) == ((), (("c", 10), ("d", 7)), ())
    assert down.chains == ()  # no series for them: nothing was read
    (never,) = History().record([_down("b")], now_mono=100.0)
    assert never.last_chains == ()


def test_a_chain_no_longer_listed_is_forgotten() -> None:
    history = History()
    history.record([_up("a", {"c": 10})], now_mono=100.0)
    history.record([_up("a", {})], now_mono=115.0)
    again = history.record([_up("a", {"c": 10})], now_mono=130.0)
    assert _chain(again, "a", "c").height_changed_at == 130.0


def test_blocks_behind_is_measured_from_the_height_a_majority_reached() -> None:
    """The head is the highest height a strict majority of the up, not-syncing readers
    reached: a node ahead of it reads 0, never below; syncing readers do not count."""
    nodes = History().record(
        [
            _up("a", {"c": 100, "d": 5}),
            _up("b", {"c": 97}),
            _up("f", {"c": 99}),
            _up("e", {"c": None}),
        ],
        now_mono=1.0,
    )
    assert _chain(nodes, "a", "c").blocks_behind == 0  # ahead of the head (99): 0
    assert _chain(nodes, "f", "c").blocks_behind == 0
    assert _chain(nodes, "b", "c").blocks_behind == 2
    assert _chain(nodes, "a", "d").blocks_behind == 0
    assert _chain(nodes, "e", "c").blocks_behind is None  # no height, no sample


def test_one_node_reporting_heights_far_too_high_puts_no_honest_node_behind() -> None:
    honest = [_up(name, {"c": 1000}) for name in ("a", "b", "f")]
    nodes = History().record([*honest, _up("x", {"c": 10**9 + 1000})], now_mono=1.0)
    assert [_chain(nodes, n, "c").blocks_behind for n in ("a", "b", "f", "x")] == [0, 0, 0, 0]


def test_syncing_readers_do_not_make_the_head_unless_all_are_syncing() -> None:
    syncing = chain_doc(10**9)
    syncing["syncing"] = True
    lying = dataclasses.replace(_up("x", {}), chains=[ChainResult("c", read_chain(syncing))])
    nodes = History().record([_up("a", {"c": 50}), lying], now_mono=1.0)
    assert _chain(nodes, "a", "c").blocks_behind == 0
    slow = chain_doc(40)
    slow["syncing"] = True
    y, z = (
        dataclasses.replace(_up(name, {}), chains=[ChainResult("c", read_chain(slow))])
        for name in ("y", "z")
    )
    nodes = History().record([lying, y, z], now_mono=2.0)
    assert _chain(nodes, "x", "c").blocks_behind == 0
    assert _chain(nodes, "y", "c").blocks_behind == 0  # 40 reached by 2 of 3 syncing readers


def test_error_counters_accumulate_and_start_at_zero() -> None:
    history = History()
    history.record([_down("a", Reason.CONNECTION)], now_mono=1.0)
    nodes = history.record([_down("a", Reason.CONNECTION)], now_mono=2.0)
    counts = {(e, r): n for e, r, n in nodes[0].error_counts}
    assert counts[("health", "connection")] == 2
    assert counts[("blockchain", "too_large")] == 0
    assert counts[("health", "tls")] == 0
    assert len(counts) == 2 * len(Reason)  # health and blockchain, every reason (7)


def test_last_success_survives_failures_and_removal_forgets_everything() -> None:
    history = History()
    history.record([_up("a", {"c": 1})], now_mono=10.0)
    failed = history.record([_down("a")], now_mono=20.0)
    assert failed[0].last_success == 10.0
    history.record([_up("b", {})], now_mono=30.0)
    readded = history.record([_down("a")], now_mono=40.0)
    assert readded[0].last_success is None
    assert {(e, r): n for e, r, n in readded[0].error_counts}[("health", "timeout")] == 1


def test_state_changes_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    history = History()
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        history.record([_up("a", {"c": 1})], now_mono=1.0)  # first sighting, up: not news
        for now in (2.0, 3.0, 4.0):
            history.record([_down("a")], now_mono=now)
        history.record([_up("a", {"c": 1})], now_mono=5.0)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["node a is down", "node a is up again"]
    assert caplog.records[0].__dict__["fields"] == {
        "node": "a",
        "reason": "timeout",
        "error": "boom",
    }


def _listing(name: str, chains: list[str]) -> NodeResult:
    health = read_health(health_doc(chains))
    results = [ChainResult(chain, read_chain(chain_doc(1))) for chain in health.blockchain_ids]
    return NodeResult(NodeConfig(name, "http://x/"), health, None, results, 0.1)


def test_chain_ids_utf8_cannot_hold_count_as_invalid_responses_and_log_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = History()
    bad = ["c", "\ud800", "x\udfff"]  # what json.loads makes of "\ud800" or raw ED A0 80
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        history.record([_listing("a", ["c"])], now_mono=1.0)
        for now in (2.0, 3.0):
            nodes = history.record([_listing("a", bad)], now_mono=now)
        back = history.record([_listing("a", ["c"])], now_mono=4.0)
    counts = {(e, r): n for e, r, n in nodes[0].error_counts}
    assert counts[("health", "invalid_response")] == 2  # one a /health answer
    assert nodes[0].up and [c.blockchain for c in nodes[0].chains] == ["c"]
    assert {(e, r): n for e, r, n in back[0].error_counts}[("health", "invalid_response")] == 2
    messages = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert messages == [
        ("WARNING", "node lists blockchain ids UTF-8 cannot hold; they are skipped"),
        ("INFO", "node lists no blockchain ids UTF-8 cannot hold any more"),
    ]
    assert caplog.records[0].__dict__["fields"] == {"node": "a", "unreadable_blockchain_ids": 2}


def _bounded(name: str, features: int, version: str = "1.4.2", unpolled: int = 0) -> NodeResult:
    """A node whose one chain sends ``features`` flags, read under small bounds."""
    bounds = Bounds(features_per_chain=2, label_value_length=32)
    health = read_health(health_doc(["c"], version=version), bounds)
    flags = {f"f{index}": True for index in range(features)}
    chain = ChainResult("c", read_chain(chain_doc(1, keyType="k", features=flags), bounds=bounds))
    node = NodeConfig(name, "http://x/")
    return NodeResult(node, health, None, [chain], 0.1, unpolled_chains=unpolled)


def _dropped(status: NodeStatus) -> dict[str, int]:
    return {kind.value: count for kind, count in zip(DropKind, status.dropped, strict=True)}


def test_dropped_values_are_counted_by_kind_from_zero() -> None:
    history = History()
    first = history.record([_bounded("a", features=2)], now_mono=1.0)
    none = {kind.value: 0 for kind in DropKind}
    assert {"blockchain", "feature", "auth_group", "label_value", "leader"} <= set(none)
    assert _dropped(first[0]) == none
    history.record([_bounded("a", features=5, version="v" * 33, unpolled=3)], now_mono=2.0)
    history.record([_down("a")], now_mono=3.0)  # nothing read, nothing dropped
    nodes = history.record([_bounded("a", features=3)], now_mono=4.0)
    assert _dropped(nodes[0]) == none | {"blockchain": 3, "feature": 4, "label_value": 1}
    assert History().record([_down("b")], now_mono=1.0)[0].dropped == (0,) * len(DropKind)


def test_each_count_of_a_dropped_is_its_kind_s_in_order() -> None:
    """History sums a Dropped's counts in DropKind's order: each field is named after its
    kind (``feature`` -> ``features``), blockchains aside (the poll counts those)."""
    counted = [item.name for item in dataclasses.fields(Dropped)]
    assert counted == [f"{kind.value}s" for kind in DropKind if kind is not DropKind.BLOCKCHAIN]


def test_exceeding_a_bound_is_logged_once_per_state_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = History()
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        history.record([_bounded("a", features=1)], now_mono=1.0)
        for now in (2.0, 3.0):
            history.record([_bounded("a", features=9)], now_mono=now)
        history.record([_down("a")], now_mono=4.0)  # down: the bound's state does not change
        history.record([_bounded("a", features=9, version="v" * 40)], now_mono=5.0)
        history.record([_bounded("a", features=2)], now_mono=6.0)
    bound_records = [r for r in caplog.records if r.__dict__["fields"].get("kind") == "feature"]
    assert [(r.levelname, r.getMessage()) for r in bound_records] == [
        ("WARNING", "node sends more than a bound allows; the excess is not exported"),
        ("INFO", "node is back within the bound"),
    ]
    assert bound_records[0].__dict__["fields"] == {
        "node": "a",
        "kind": "feature",
        "dropped": 7,
        "setting": "max_features_per_chain",
    }
    label_records = [r for r in caplog.records if r.__dict__["fields"].get("kind") == "label_value"]
    assert [(r.levelname, r.__dict__["fields"].get("dropped")) for r in label_records] == [
        ("WARNING", 1),
        ("INFO", None),
    ]


def test_a_certificate_name_over_the_bound_is_never_said_back_within_it_while_unwritten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 64 kB common name: its info series stays unwritten for as long as the node shows
    that certificate, and the log says so once, never "back within the bound" meanwhile;
    a certificate that fits writes it again, and the log says so then."""
    huge = Handshake(2e9, "TLSv1.3", "TLS_AES_128_GCM_SHA256", "CA", "x" * 65536, "ab" * 32)
    fitting = huge._replace(subject_cn="node-1")

    def result(handshake: Handshake) -> NodeResult:
        transport = TransportStatus(handshake=handshake, https=True)
        return dataclasses.replace(_up("a", {"c": 1}), transport=transport)

    history = History()
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        for _ in range(3):
            (node,) = history.record([result(huge)], now_mono=1.0)
            assert node.transport is not None and not node.transport.info_fits
        messages = [r.getMessage() for r in caplog.records]
        assert not any("back within the bound" in m for m in messages)
        (warned,) = [m for m in messages if "more than a bound allows" in m]
        assert "ledger_node_tls_info" in warned
        label_drops = dict(zip(DropKind, node.dropped, strict=True))[DropKind.LABEL_VALUE]
        assert label_drops == 1  # counted once, at the handshake
        (node,) = history.record([result(fitting)], now_mono=2.0)
    assert node.transport is not None and node.transport.info_fits
    assert any("back within the bound" in r.getMessage() for r in caplog.records)
