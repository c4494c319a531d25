"""One line per incident on the status page (issue 36): the page folds its lines as the shipped
Alertmanager config's inhibitions silence the alerts (a node down keeps its chains under its
line, a partition hides peers-low, a fork the watched-value disagreements), counts only the
top lines, keeps a down node's chains in its table as unknown, and links each line to the
runbook its alert's rule names (a rendering with your own runbookURLPattern included).

Hand-made snapshots; ``tests/web/test_landing.py`` drives the real exporter in Chromium."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.model.watch_readings import ContractReading, WatchedObject, WatchKind, WatchStatus
from exporter.web import alert_thresholds, landing
from exporter.web.problems import Problem, attention
from tests.support.documents import chain_doc, health_doc
from tests.support.webapp import landing_page
from tools import render_mixin

NOW = 1_700_000_000.0
C1, C2 = "c1", "c2"


def chain(blockchain: str = C1, height: int = 100, **overrides: object) -> ChainStatus:
    return ChainStatus(blockchain, read_chain(chain_doc(height, **overrides)), None, NOW - 3, 0)


def node(name: str, *chains: ChainStatus, peers: int = 4) -> NodeStatus:
    health = read_health(health_doc([c.blockchain for c in chains], peers))
    return NodeStatus(name, (), health, None, chains, 0.1, NOW - 5)


def down(name: str, *last: tuple[str, float]) -> NodeStatus:
    return NodeStatus(name, (), None, "connection: refused", (), 0.1, NOW - 125, last_chains=last)


def fleet(*nodes: NodeStatus, **fields: object) -> Snapshot:
    return replace(Snapshot(tuple(nodes), 0.25, NOW), **fields)  # type: ignore[arg-type]


def shown(line: Problem) -> tuple[str | None, str | None, str | None, tuple[object, ...]]:
    """A line as (alert, node, chain, its folded lines shown the same way)."""
    return line.alert, line.node, line.chain, tuple(map(shown, line.folded))


def top(snapshot: Snapshot) -> list[tuple[str | None, str | None, str | None, tuple[object, ...]]]:
    found = attention(snapshot, NOW)
    return [shown(line) for line in (*found.network, *found.node_problems, *found.watch)]


def flat(html: str) -> str:
    return " ".join(html.split())


# --- a node down ------------------------------------------------------------------------------


def test_a_down_node_is_one_line_with_its_chains_under_it_and_in_its_table() -> None:
    snapshot = fleet(node("a", chain(C1), chain(C2)), down("b", (C1, 120), (C2, 7)))
    assert top(snapshot) == [
        ("LedgerNodeDown", "b", None, ((None, "b", C1, ()), (None, "b", C2, ()))),
    ]
    found = attention(snapshot, NOW)
    assert found.counts()[alert_thresholds.Severity.CRITICAL] == 1  # the folded lines: none
    (line,) = found.node_problems
    assert [p.text for p in line.folded] == [
        "unknown while the node is down (last read at height 120)",
        "unknown while the node is down (last read at height 7)",
    ]
    html = flat(landing_page(snapshot, NOW))
    assert '<ul class="folded">' in html
    assert "<title>(1 critical) ledger-exporter</title>" in html
    chains = html[html.index("<h2>Blockchains</h2>") :]
    for blockchain, height in ((C1, 120), (C2, 7)):  # the node's chains stay, unknown
        row = (
            f'<tr><td class=k><bdi>b</bdi></td><td class=k><bdi><code title="{blockchain}">'
            f"{blockchain}</code></bdi></td>"
        )
        assert row in chains
        assert f"unknown while the node is down (last read at height {height})" in chains


def test_a_node_down_since_the_exporter_started_has_no_chains_to_keep() -> None:
    assert top(fleet(node("a", chain()), down("b"))) == [("LedgerNodeDown", "b", None, ())]


# --- a partition, a fork ----------------------------------------------------------------------


def view(**changes: Any) -> NetworkView:
    agreement = ChainAgreement(C1, 95, 1, Agreement(), 1, Agreement(), 100)
    return NetworkView((replace(agreement, **changes),), 1, (("a", 1), ("b", 1), ("c", 1)))


def test_a_partition_hides_the_peers_low_lines() -> None:
    nodes = (node("a", chain()), node("b", chain(), peers=1), node("c", chain(), peers=1))
    calm = fleet(*nodes, network=view())
    assert [line[:2] for line in top(calm)] == [
        ("LedgerNodePeersLow", "b"),
        ("LedgerNodePeersLow", "c"),
    ]
    split = fleet(*nodes, network=replace(view(), partitions=2))
    low = (("LedgerNodePeersLow", "b", None, ()), ("LedgerNodePeersLow", "c", None, ()))
    assert top(split) == [("LedgerNetworkPartitioned", None, None, low)]
    html = flat(landing_page(split, NOW))
    nodes_section = html[html.index("<h3>Nodes and chains</h3>") :]
    assert nodes_section.startswith(
        '<h3>Nodes and chains</h3><p class="muted">Each problem here is folded under the line '
        "of its cause above.</p>"
    )


def contract(on: str, blockchain: str, status: str) -> WatchedObject:
    reading = ContractReading(status, 2, "0x5f", "evm", "c0de")
    return WatchedObject(on, (), WatchKind.CONTRACT, blockchain, "token", reading)


def test_a_fork_hides_that_chains_watched_disagreements_only() -> None:
    nodes = [node(n, chain(C1), chain(C2)) for n in "abc"]
    watch = WatchStatus(
        (
            *(
                contract(n, C1, status)
                for n, status in zip("abc", ("ACTIVE", "ACTIVE", "UPGRADED"), strict=True)
            ),
            *(
                contract(n, C2, status)
                for n, status in zip("abc", ("ACTIVE", "UPGRADED", "ACTIVE"), strict=True)
            ),
        )
    )
    forked = view(
        checkpoint_hashes=2, block_agrees=Agreement.of((("a", True), ("b", True), ("c", False)))
    )
    found = top(fleet(*nodes, network=forked, watch=watch))
    disagree = "LedgerWatchedContractNodesDisagree"
    assert found[0] == ("LedgerBlockchainForked", None, C1, ((disagree, None, C1, ()),))
    assert (disagree, None, C2, ()) in found  # another chain's: its own line
    assert [line[0] for line in found].count(disagree) == 1


# --- runbooks ---------------------------------------------------------------------------------


def test_each_line_links_to_the_runbook_its_rule_names_yours_when_you_render_your_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = fleet(node("a", chain()), down("b", (C1, 100)))
    shipped = alert_thresholds.SHIPPED.runbook("LedgerNodeDown")
    assert shipped.endswith("/docs/alerts.md#ledgernodedown")
    assert f'<a href="{shipped}" rel="noreferrer"><bdi>LedgerNodeDown</bdi></a>' in landing_page(
        snapshot, NOW
    )
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"runbookURLPattern": "https://wiki.example/ledger/%s?x=1&y=2"}))
    assert render_mixin.main(["--config", str(config), "--root", str(tmp_path / "out")]) == 0
    yours = alert_thresholds.load(tmp_path / "out" / render_mixin.THRESHOLDS)
    assert yours.runbook("LedgerNodeDown") == "https://wiki.example/ledger/ledgernodedown?x=1&y=2"
    assert yours.severities == alert_thresholds.SHIPPED.severities
    monkeypatch.setattr(landing, "SHIPPED", yours)  # as the package rendered so would read it
    html = landing_page(snapshot, NOW)
    assert 'href="https://wiki.example/ledger/ledgernodedown?x=1&amp;y=2"' in html
    assert shipped not in html
