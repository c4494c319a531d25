"""One line per incident on the status page (issue 36): the page folds its lines as the shipped
Alertmanager config's inhibitions silence the alerts (a node down keeps its chains under its
line, a partition hides peers-low, a fork the watched-value disagreements), counts only the
top lines, keeps a down node's chains in its table as unknown, and links each line to the
runbook its alert's rule names (a rendering with your own runbookURLPattern included).

Hand-made snapshots; ``tests/web/test_landing.py`` drives the real exporter in Chromium."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.model.identity import Mismatch
from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, ConsensusStatus, LeaderCounts, NodeStatus, Snapshot
from exporter.model.watch_readings import ContractReading, WatchedObject, WatchKind, WatchStatus
from exporter.poll.state import ChainState, NodeState, State, encode
from exporter.web import alert_thresholds, landing
from exporter.web.alert_thresholds import Severity
from exporter.web.problems import INHIBITIONS, Problem, attention
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.http import fetch
from tests.support.ports import closed_port_url
from tests.support.processes import ready_exporter
from tests.support.testdata import REPO
from tests.support.waiting import wait_until
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
    html = flat(landing_page(snapshot, NOW, fired=True))
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


def test_a_node_answering_as_another_is_one_line_with_its_down_line_under_it() -> None:
    """LedgerNodeIdentityMismatch inhibits the node's LedgerNodeDown (it reads as down)."""
    impostor = replace(down("b"), identity=Mismatch("02ab", "03cd"))
    found = attention(fleet(node("a", chain()), impostor), NOW)
    (line,) = found.identity
    assert (line.alert, line.node) == ("LedgerNodeIdentityMismatch", "b")
    assert [shown(under) for under in line.folded] == [("LedgerNodeDown", "b", None, ())]
    assert found.nodes is not None and found.nodes["b"] == []


def test_a_partition_hides_the_peers_low_lines() -> None:
    nodes = (node("a", chain()), node("b", chain(), peers=1), node("c", chain(), peers=1))
    calm = fleet(*nodes, network=view())
    assert [line[:2] for line in top(calm)] == [
        ("LedgerNodePeersLow", "b"),
        ("LedgerNodePeersLow", "c"),
    ]
    # three groups of one: none holds a majority of the three up nodes
    split = fleet(*nodes, network=replace(view(), partitions=3, largest_partition=1))
    low = (("LedgerNodePeersLow", "b", None, ()), ("LedgerNodePeersLow", "c", None, ()))
    assert top(split) == [("LedgerNetworkPartitioned", None, None, low)]
    html = flat(landing_page(split, NOW, fired=True))
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
    # three blocks, none held by a majority (one node off a majority is not a fork)
    forked = view(
        checkpoint_hashes=3, block_agrees=Agreement.of((("a", False), ("b", False), ("c", False)))
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
    html = landing_page(snapshot, NOW, fired=True)
    assert 'href="https://wiki.example/ledger/ledgernodedown?x=1&amp;y=2"' in html
    assert shipped not in html


# --- a chain halted, every node down ------------------------------------------------------------

#: chain_doc's settings: a block due within 2s + 1m30s + 180s grace; 601s unchanged is stalled
STALLED = NOW - 601


def stuck(name: str, height: int = 100, blockchain: str = C1) -> NodeStatus:
    """A node whose chain stands still at ``height`` while work waits, a vote session open
    past five timeouts at round 5, messages piling up."""
    reading = chain(blockchain, height, pendingMessagesCount=1500,
                    voteSessions={"s1": {"sessionId": "s1", "round": 5}})  # fmt: skip
    following = ConsensusStatus(500, 0, 0, LeaderCounts())
    return node(name, replace(reading, height_changed_at=STALLED, consensus=following))


def test_a_chain_halted_on_every_node_is_one_line_with_its_nodes_under_it() -> None:
    snapshot = fleet(stuck("a"), stuck("b"), stuck("c"), node("d", chain(C2)))
    found = attention(snapshot, NOW)
    (halted,) = found.network
    assert (halted.alert, halted.chain, halted.severity.label) == (
        "LedgerBlockchainHalted", C1, "critical",
    )  # fmt: skip
    assert halted.text == (
        "halted at height 100 for 10m 1s: 3 of the 3 up nodes that read it (a, b, c) stand "
        "stalled while work waits"
    )
    # the rules leave the halt's symptoms out while its condition holds: the stuck session,
    # each node's stall, rounds and queue are not listed at all, not even folded
    assert [(line.alert, line.node) for line in halted.folded] == []
    assert found.node_problems == [] and found.counts()[Severity.CRITICAL] == 1
    html = flat(landing_page(snapshot, NOW, fired=True))
    assert "<title>(1 critical) ledger-exporter</title>" in html
    for symptom in (
        "LedgerBlockHeightStalled",
        "LedgerVoteSessionStuck",
        "LedgerPendingMessagesHigh",
    ):
        assert f"{symptom}</bdi></a>" not in html


def test_a_laggard_climbing_to_the_halted_head_neither_delays_nor_prevents_the_halt() -> None:
    """The head stands still on a majority: halted, while c still climbs to it (each of its
    blocks recent); waiting for c to stall there too let each node's own stall page first."""
    found = attention(fleet(stuck("a"), stuck("b"), node("c", chain(height=95))), NOW)
    (halted,) = [line for line in found.network if line.alert == "LedgerBlockchainHalted"]
    assert halted.text == (
        "halted at height 100 for 10m 1s: 2 of the 3 up nodes that read it (a, b) stand "
        "stalled while work waits"
    )


def test_one_node_moving_on_or_stalled_higher_neither_hides_nor_causes_a_halt() -> None:
    """As LedgerBlockchainHalted (lib/consensus.libsonnet ``halted``): a strict majority of
    the nodes that read the chain stalled, whatever height each stands at. One node whose
    height rises, however high, does not hide the halt of the others; one node stalled
    while the others move is its own LedgerBlockHeightStalled line, never the chain's."""
    for snapshot, text in (
        (fleet(stuck("a"), stuck("b"), node("c", chain(height=101))), "height 100"),
        (fleet(stuck("a"), stuck("b", height=99), node("c", chain(height=130))),
         "heights 99 to 100"),
    ):  # fmt: skip
        found = attention(snapshot, NOW)
        (halted,) = [line for line in found.network if line.alert == "LedgerBlockchainHalted"]
        assert halted.text.startswith(f"halted at {text} for 10m 1s: 2 of the 3 up nodes")
    alone = fleet(stuck("a"), node("b", chain(height=101)), node("c", chain(height=101)))
    found = attention(alone, NOW)
    assert "LedgerBlockchainHalted" not in {line.alert for line in found.lines()}
    stalled = [line.node for line in found.node_problems
               if line.alert == "LedgerBlockHeightStalled"]  # fmt: skip
    assert stalled == ["a"]


def test_no_node_answering_is_one_line_with_every_node_under_it() -> None:
    snapshot = fleet(down("a", (C1, 100)), down("b"))
    found = attention(snapshot, NOW)
    assert top(snapshot) == [
        (
            "LedgerAllNodesDown",
            None,
            None,
            (
                ("LedgerNodeDown", "a", None, ((None, "a", C1, ()),)),
                ("LedgerNodeDown", "b", None, ()),
            ),
        )
    ]
    assert found.network[0].text.startswith("none of the 2 polled nodes answers")
    assert found.counts()[Severity.CRITICAL] == 1
    html = flat(landing_page(snapshot, NOW, fired=True))
    assert '<h3>Nodes and chains</h3><p class="muted">Each problem here is folded' in html
    assert "Every node is up and in step" not in html
    one = attention(fleet(node("a", chain()), down("b")), NOW)
    assert [line.alert for line in one.lines()] == ["LedgerNodeDown"]  # one of two: no more


# --- the page folds as the shipped Alertmanager config inhibits -----------------------------

MATCHER = re.compile(r'(\w+)(=~|!~|!=|=)"(.*)"')


def matches(matchers: list[str], labels: dict[str, str]) -> bool:
    """Whether Alertmanager's ``matchers`` (``name op "value"``) select ``labels``."""
    for matcher in matchers:
        found = MATCHER.fullmatch(matcher)
        assert found, f"a matcher this test cannot read: {matcher}"
        name, op, value = found.groups()
        hit = (
            re.fullmatch(value, labels.get(name, "")) is not None
            if "~" in op
            else labels.get(name, "") == value
        )
        if hit is op.startswith("!"):
            return False
    return True


def mirrors(
    rule: Any, equal: set[str], chained: bool, targets: set[str], everything: set[str]
) -> bool:
    """Whether the page's ``rule`` folds as a shipped inhibition (its ``equal`` labels, a
    ``blockchain`` target matcher or not, the ``targets`` it holds back) inhibits; one source
    may have several inhibitions, each with its targets and equal labels."""
    label = {"node": "node", "chain": "blockchain"}
    page = everything if rule.targets is None else set(rule.targets)
    return (
        {label[field] for field in rule.equal} <= equal
        and rule.of_a_chain is chained
        and targets <= page
        and (rule.targets is None or page == targets)
    )


def test_the_page_folds_as_the_shipped_alertmanager_config_inhibits() -> None:
    """For each rule of INHIBITIONS, the shipped config (deploy/alertmanager/alertmanager.yml)
    has inhibit_rules with that source, each target alert the page folds among their
    targets, and the page's fields among their ``equal`` labels; and every inhibition whose
    source the page lists has its rule here, folding the same alerts."""
    config = yaml.safe_load((REPO / "deploy" / "alertmanager" / "alertmanager.yml").read_text())
    shipped = alert_thresholds.SHIPPED.severities.keys()
    by_source: dict[str, list[Any]] = {}
    for page_rule in INHIBITIONS:
        by_source.setdefault(page_rule.source, []).append(page_rule)
    for inhibit in config["inhibit_rules"]:
        for source in sorted(shipped):
            if not matches(inhibit["source_matchers"], {"alertname": source}):
                continue
            if source in ("LedgerNodeInMaintenance", "LedgerBlockchainInMaintenance"):
                continue  # shown apart from the problems, by the maintenance section
            if source in ("LedgerExporterDown", "LedgerExporterReplicaDown"):
                continue  # the exporter (a replica of it) cannot show that it is down
            assert source in by_source, f"the page does not fold under {source}: {inhibit}"
            targets = {  # each alert as it is labelled when about a node's chain
                alert
                for alert in shipped
                if alert != source
                and matches(
                    inhibit["target_matchers"], {"alertname": alert, "node": "n", "blockchain": "c"}
                )
            }
            chained = any(m.startswith("blockchain=") for m in inhibit["target_matchers"])
            everything = set(shipped) - {source}
            assert any(
                mirrors(rule, set(inhibit["equal"]), chained, targets, everything)
                for rule in by_source[source]
            ), (source, inhibit)
    sources = {
        alert
        for inhibit in config["inhibit_rules"]
        for alert in shipped
        if matches(inhibit["source_matchers"], {"alertname": alert})
    }
    assert by_source.keys() <= sources


# --- end to end: the exporter's process, fake nodes, a state file --------------------------


@pytest.mark.integration
def test_a_real_exporter_shows_a_halted_chain_as_one_line_and_a_down_nodes_chains(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    """Three nodes at height 50 with work waiting, an hour at that height by the state file
    (a restart keeps the stall clock), and a fourth that does not answer, whose chain the
    state file remembers: one halted line naming the three, one node-down line, and the
    down node's chain kept in the chains table as unknown."""
    nodes = {name: fake_nodes.start() for name in ("n1", "n2", "n3")}
    for name, fake in nodes.items():  # linked to one another: no partition
        linked = {"peerCount": 2, "peerId": name, "networkPeers": sorted(set(nodes) - {name})}
        fake.play(health_doc([C1]) | {"network": linked}, {C1: chain_doc(50)})
    hour_ago = time.time() - 3600
    state = tmp_path / "state.json"
    remembered = {name: NodeState({C1: ChainState(50, hour_ago)}) for name in nodes}
    state.write_bytes(encode(State(remembered | {"n4": NodeState({C2: ChainState(9, hour_ago)})})))
    config = tmp_path / "config.yml"
    urls = {name: fake.url for name, fake in nodes.items()} | {"n4": closed_port_url()}
    config.write_text(
        "scrape_interval: 1s\nnodes:\n"
        + "".join(f"  - {{name: {name}, url: '{url}'}}\n" for name, url in urls.items())
    )
    with ready_exporter(config, f"--state.file={state}") as exporter:

        def halted() -> str | None:
            page = fetch(exporter.base + "/").text
            return page if "LedgerBlockchainHalted" in page else None

        html = wait_until(halted, timeout=60, message="the halted chain never showed")
    text = flat(html)
    network = text[text.index("<h3>Network</h3>") : text.index("<h3>Nodes and chains</h3>")]
    assert network.startswith('<h3>Network</h3><ul class="problems"><li><span class="sev crit')
    assert network.count("<li") == 1  # one line: the rules leave its symptoms out
    assert (
        "halted at height 50 for 1h 0m: 3 of the 3 up nodes that read it (n1, n2, n3) stand "
        "stalled while work waits" in network
    )
    assert "LedgerBlockHeightStalled" not in network  # not even folded under it
    runbook = alert_thresholds.SHIPPED.runbook("LedgerBlockchainHalted")
    assert f'<a href="{runbook}" rel="noreferrer"><bdi>LedgerBlockchainHalted</bdi></a>' in network
    nodes_section = text[text.index("<h3>Nodes and chains</h3>") : text.index("<h2>Nodes</h2>")]
    assert "n4</bdi></b>: <bdi>never up: <bdi>connection" in nodes_section
    assert "unknown while the node is down (last read at height 9)" in nodes_section
    chains = text[text.index("<h2>Blockchains</h2>") :]
    assert f'<bdi>n4</bdi></td><td class=k><bdi><code title="{C2}">{C2}</code></bdi></td>' in chains
    # the halt has held for an hour by the state file's times: firing at once, after a
    # restart too, as Prometheus's alert would; the node down is as new as the exporter: pending
    assert "<title>(1 critical, 1 pending) ledger-exporter</title>" in text
    assert "pending: fires in" in nodes_section and "pending" not in network
