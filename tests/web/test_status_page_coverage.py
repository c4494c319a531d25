"""Every alert that pages has its line on the status page (issue 36): the shipped rules
(deploy/prometheus/alerts.yml) are walked, and each alert of warning or critical severity
must either have a scenario below, a hand-made snapshot on which the page lists a line of that
alert (linked to its runbook), or an entry in ``NOT_ON_THE_PAGE`` saying why the exporter
cannot show it. A new alert without either fails here, naming it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

import pytest
import yaml

from exporter.model.identity import Mismatch
from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, ConsensusStatus, LeaderCounts, NodeStatus, Snapshot
from exporter.model.transport import Handshake, TransportStatus
from exporter.model.watch_readings import (
    ContractReading,
    WalletReading,
    WatchedObject,
    WatchKind,
    WatchStatus,
)
from exporter.web import alert_thresholds
from exporter.web.alert_thresholds import Severity
from exporter.web.problems import Held, attention
from tests.support.documents import chain_doc, health_doc
from tests.support.testdata import REPO
from tests.support.webapp import landing_page

NOW = 1_700_000_000.0
DAY = 86400
C1 = "c1"

#: Alerts of warning or critical severity the page does not list, and why it cannot.
NOT_ON_THE_PAGE = {
    # the exporter's own scrape failing or absent: a page it serves cannot say it is not served
    "LedgerExporterDown": "the exporter cannot show that it is down",
    "LedgerExporterAbsent": "the exporter cannot show that Prometheus lacks it",
    # an HA pair: a replica's page shows what it polls, never its twin; the replica that is
    # down serves no page, and the one cut off from a node lists that node as down (the
    # node's own line), since it cannot know that its twin still reaches it
    "LedgerExporterReplicaDown": "the replica that is down serves no page",
    "LedgerExporterReplicaNodeUnreachable": "a replica cannot see what its twin reaches",
    # failed requests counted over 5-minute windows for 15 minutes: the page shows one cycle
    # (its nodes table has each node's last error and since when), not a rate over time
    "LedgerNodeScrapeErrors": "a rate over 15 minutes of history the page does not keep",
    # probe mode: Prometheus asks /probe for each target; the page has no fleet to list
    "LedgerProbeFailed": "a probe's outcome is Prometheus's: the page lists polled nodes",
    "LedgerProbeBlockHeightStalled": "a probe's outcome is Prometheus's, as above",
    # the exporter's own trends, each over windows of history the page does not keep (it
    # shows one cycle); the summary line gives the last cycle's duration, the log each
    # failed write and each value dropped
    "LedgerExporterCycleNearTimeout": "every cycle of the last 10 minutes near its deadline",
    "LedgerExporterValuesDropped": "values dropped in every 5-minute window for 15 minutes",
    "LedgerExporterStateFileWriteFailing": "failed writes in every 5-minute window for 10m",
    # failures counted over a 5-minute window (the page shows one cycle), or no cycle ended
    # within the stale bound, when the page has no nodes left to show (its log says which)
    "LedgerExporterCycleFailing": "failures over 5 minutes, or no cycle to show at all",
    # the exporter's own certificate: whoever reads the page over HTTPS was just shown it
    # by the handshake (the browser's certificate viewer gives its expiry), and the page is
    # about the nodes; ledger_exporter_tls_cert_expiry_timestamp_seconds has the date
    "LedgerExporterCertificateExpiring": "the page is served over that very certificate",
    # more than one version for 12 hours: the page cannot tell a rolling upgrade under way
    # from one left half done (the nodes table shows each node's version)
    "LedgerNodeVersionDrift": "a mix of versions that lasts 12 hours, a history not kept",
    # error budgets spent over 5 minutes to 30 days: the SLO dashboard's, not one cycle's
    "LedgerNodeAvailabilityBudgetBurn": "an error budget over up to 30 days of history",
    "LedgerBlockchainLivenessBudgetBurn": "an error budget over up to 30 days of history",
    # a rise of the reorganisation counter within reorgWindow (15m): the page has the
    # counter's value, not when it rose
    "LedgerBlockchainReorganized": "a counter's rise within 15 minutes, a history not kept",
}


def chain(blockchain: str = C1, height: int = 100, **overrides: object) -> ChainStatus:
    return ChainStatus(blockchain, read_chain(chain_doc(height, **overrides)), None, NOW - 3, 0)


def node(name: str, *chains: ChainStatus, up: bool = True, peers: int = 4) -> NodeStatus:
    health = read_health(health_doc([c.blockchain for c in chains], peers)) if up else None
    error = None if up else "connection: refused"
    return NodeStatus(name, (), health, error, chains if up else (), 0.1, NOW - 200)


def fleet(*nodes: NodeStatus, **fields: object) -> Snapshot:
    return replace(Snapshot(tuple(nodes), 0.25, NOW), **fields)  # type: ignore[arg-type]


def moving(name: str = "ok", height: int = 100) -> NodeStatus:
    """A healthy node reading C1: beside it, one node's trouble stays that node's."""
    return node(name, chain(height=height))


def agreeing(**flags: bool) -> Agreement:
    return Agreement.of(sorted(flags.items()))


def split(**changes: Any) -> NetworkView:
    """C1's view over nodes a, b, c with the given fields changed."""
    view = ChainAgreement(C1, 95, 1, Agreement(), 1, Agreement(), 100)
    return NetworkView((replace(view, **changes),), 1, (("a", 1), ("b", 1), ("c", 1)))


def cut_off(alone: str) -> tuple[tuple[str, int], ...]:
    """ledger_node_polled_peers of nodes a, b, c: those in ``alone`` linked to none."""
    return tuple((name, 0 if name in alone else 1) for name in "abc")


def three(**fields: object) -> Snapshot:
    return fleet(*(node(n, chain()) for n in "abc"), **fields)


def consensus(**fields: object) -> ConsensusStatus:
    return replace(ConsensusStatus(None, 0, 0, LeaderCounts()), **fields)  # type: ignore[arg-type]


def thin_quorum() -> Snapshot:
    """Council of 4 needing 3 votes, n4 down: 3 up, a margin lost."""
    council = ["key-a", "key-b", "key-c", "key-d"]
    sessions = {"s1": {"sessionId": "s1", "round": 1, "consensusRequired": 3}}
    nodes = [node(n, chain(councilMembers=council, voteSessions=sessions)) for n in "abc"]
    view = split(council_agrees=agreeing(a=True, b=True, c=True))
    view = replace(view, chains=(replace(view.chains[0], council_members_polled=4,
                                         council_members_up=3),))  # fmt: skip
    return fleet(*nodes, node("d", up=False), network=view)


def watched(contract: str, enabled: float, on: str) -> tuple[WatchedObject, ...]:
    return (
        WatchedObject(on, (), WatchKind.CONTRACT, C1, "token",
                      ContractReading(contract, 2, "0x5f", "evm", "c0de")),
        WatchedObject(on, (), WatchKind.WALLET, C1, "treasury",
                      WalletReading(enabled, 0, (), "w1", "ed25519", "pk")),
    )  # fmt: skip


def presenting(name: str, expiry: float) -> NodeStatus:
    """A node reading C1 over https whose last handshake showed a chain expiring at
    ``expiry`` (Unix time: the fleet's wall offset is 0, so NOW is also the wall clock)."""
    handshake = Handshake(expiry, "TLSv1.3", "TLS_AES_256_GCM_SHA384", "ca", name, "ab" * 32)
    return replace(node(name, chain()), transport=TransportStatus(handshake, https=True))


def halted() -> Snapshot:
    """Every node reading C1 at height 100 since 601 s, work waiting: stalled on all."""
    stalled = replace(chain(), height_changed_at=NOW - 601)
    return fleet(node("a", stalled), node("b", stalled))


#: Each alert the page lists, and a snapshot on which it must list it.
SCENARIOS: dict[str, Callable[[], Snapshot]] = {
    "LedgerAllNodesDown": lambda: fleet(node("a", up=False), node("b", up=False)),
    "LedgerBlockchainHalted": halted,
    "LedgerExporterConfigReloadFailed": lambda: fleet(moving(), config_reload_ok=False),
    "LedgerNodeDown": lambda: fleet(moving(), node("b", up=False)),
    "LedgerNodePeersLost": lambda: fleet(moving(), node("b", chain(), peers=0)),
    "LedgerNodePeersLow": lambda: fleet(moving(), node("b", chain(), peers=1)),
    "LedgerBlockchainDown": lambda: fleet(moving(), node("b", ChainStatus(C1, None, "timeout"))),
    "LedgerBlockHeightStalled": lambda: fleet(
        moving(height=130), node("b", replace(chain(), height_changed_at=NOW - 601))
    ),
    "LedgerNodeBehind": lambda: fleet(moving(), node("b", replace(chain(), blocks_behind=11))),
    "LedgerNodeBehindTime": lambda: fleet(
        moving(), node("b", replace(chain(), blocks_behind=3, behind_seconds=3600.0))
    ),
    "LedgerNodeCertificateExpiring": lambda: fleet(moving(), presenting("b", NOW + 2 * DAY)),
    "LedgerNodeIdentityMismatch": lambda: fleet(
        moving(), replace(node("b", up=False), identity=Mismatch("02ab", "03cd"))
    ),
    "LedgerBlockchainSyncingTooLong": lambda: fleet(
        moving(), node("b", replace(chain(syncing=True), syncing_since=NOW - 1801))
    ),
    "LedgerPendingMessagesHigh": lambda: fleet(
        moving(), node("b", chain(pendingMessagesCount=1001))
    ),
    "LedgerDelayedMessagesHigh": lambda: fleet(
        moving(), node("b", chain(delayedMessagesCount=101))
    ),
    "LedgerCouncilBelowMinMembers": lambda: fleet(
        moving(), node("b", chain(councilMembers=["k1", "k2"]))
    ),
    "LedgerVoteRoundsEscalating": lambda: fleet(
        moving(), node("b", chain(voteSessions={"s1": {"sessionId": "s1", "round": 4}}))
    ),
    "LedgerVoteSessionStuck": lambda: fleet(
        moving(), node("b", replace(chain(), consensus=consensus(session_age=451)))
    ),
    "LedgerLeaderFailingRounds": lambda: fleet(
        moving(),
        node(
            "b", replace(chain(), consensus=consensus(recent_failures=(("key-x", (NOW - 9,) * 3),)))
        ),
    ),
    "LedgerConsensusConfigDiverges": lambda: three(
        network=split(consensus_views=2, consensus_agrees=agreeing(a=True, b=True, c=False))
    ),
    "LedgerNodeOffMajorityConsensus": lambda: three(
        network=split(consensus_views=2, consensus_agrees=agreeing(a=True, b=True, c=False))
    ),
    "LedgerCouncilQuorumThin": thin_quorum,
    "LedgerBlockchainForked": lambda: three(
        network=split(checkpoint_hashes=2, block_agrees=agreeing(a=True, b=False, c=False))
    ),
    "LedgerNodeOffMajorityBlock": lambda: three(
        network=split(checkpoint_hashes=2, block_agrees=agreeing(a=True, b=True, c=False))
    ),
    "LedgerCouncilViewsDiverge": lambda: three(
        network=split(council_views=2, council_agrees=agreeing(a=True, b=True, c=False))
    ),
    "LedgerNodeOffMajorityCouncil": lambda: three(
        network=split(council_views=2, council_agrees=agreeing(a=True, b=True, c=False))
    ),
    "LedgerNetworkPartitioned": lambda: three(
        network=replace(split(), partitions=3, largest_partition=1, polled_peers=cut_off("abc"))
    ),
    "LedgerNodeIsolated": lambda: three(
        network=replace(split(), partitions=2, largest_partition=2, polled_peers=cut_off("c"))
    ),
    "LedgerNodeUnexpectedBlockchains": lambda: fleet(
        moving("a"),
        node("b", chain(), chain("made-up")),
        network=replace(split(), unexpected_chains=(("a", 0), ("b", 1))),
    ),
    "LedgerWatchedContractNotActive": lambda: three(watch=WatchStatus(watched("PAUSED", 1.0, "a"))),
    "LedgerWatchedWalletDisabled": lambda: three(watch=WatchStatus(watched("ACTIVE", 0.0, "a"))),
    "LedgerWatchedContractNodesDisagree": lambda: three(
        watch=WatchStatus((*watched("ACTIVE", 1.0, "a"), *watched("PAUSED", 1.0, "b")))
    ),
    "LedgerWatchedWalletNodesDisagree": lambda: three(
        watch=WatchStatus((*watched("ACTIVE", 1.0, "a"), *watched("ACTIVE", 0.0, "b")))
    ),
}


def paging_alerts() -> dict[str, str]:
    """Every shipped alert of warning or critical severity, and its runbook URL."""
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    return {
        rule["alert"]: rule["annotations"]["runbook_url"]
        for group in rules["groups"]
        for rule in group["rules"]
        if rule["labels"]["severity"] in ("warning", "critical")
    }


class Links(HTMLParser):
    """Every link of a page: its target and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.links.append((self._href, data))
            self._href = None


def test_every_alert_that_pages_has_a_line_or_a_reason() -> None:
    """The lead's list after a merge: an alert added without a line on the page (or a reason
    in NOT_ON_THE_PAGE) is named here."""
    paging = paging_alerts().keys()
    missing = sorted(paging - SCENARIOS.keys() - NOT_ON_THE_PAGE.keys())
    assert not missing, f"alerts that page but have no status-page line nor a reason: {missing}"
    stale = sorted((SCENARIOS.keys() | NOT_ON_THE_PAGE.keys()) - paging)
    assert not stale, f"no shipped alert of warning or critical severity: {stale}"
    assert not SCENARIOS.keys() & NOT_ON_THE_PAGE.keys()


@pytest.mark.parametrize(
    ("days_left", "severity"),
    [(20, None), (14, None), (13.9, Severity.WARNING), (3, Severity.WARNING),
     (2.9, Severity.CRITICAL), (-1, Severity.CRITICAL)],
)  # fmt: skip
def test_a_certificate_is_flagged_as_its_two_rules_say(
    days_left: float, severity: Severity | None
) -> None:
    """Under certExpiryWarning (14d) a warning, under certExpiryCritical (3d) critical, one
    line at a time, as the two rules of LedgerNodeCertificateExpiring (``- time() < 14d``,
    ``>= 3d``); times on the wall clock, the snapshot's monotonic one plus its offset."""
    offset = 1_795_000_000.0 - NOW  # the wall clock, far from the monotonic one
    node_b = presenting("b", NOW + offset + days_left * DAY)
    snapshot = fleet(node_b, moving(), wall_offset=offset)
    listed = [line for line in attention(snapshot, NOW).lines()
              if line.alert == "LedgerNodeCertificateExpiring"]  # fmt: skip
    assert [line.severity for line in listed] == ([] if severity is None else [severity])
    assert all(line.node == "b" for line in listed)


def test_no_certificate_line_without_a_date() -> None:
    """Over plain http (no handshake), or a handshake whose chain had no readable date."""
    unread = replace(presenting("b", NOW), transport=TransportStatus(
        Handshake(None, "TLSv1.3", "", "", "", ""), https=True))  # fmt: skip
    for snapshot in (fleet(moving("b"), moving()), fleet(unread, moving())):
        assert not [line for line in attention(snapshot, NOW).lines()
                    if line.alert == "LedgerNodeCertificateExpiring"]  # fmt: skip


@pytest.mark.parametrize("alert", sorted(SCENARIOS))
def test_the_page_lists_the_alert_linked_to_its_runbook(alert: str) -> None:
    snapshot = SCENARIOS[alert]()
    listed = [line for line in attention(snapshot, NOW).lines() if line.alert == alert]
    halted = alert == "LedgerBlockchainHalted"  # every other scenario's chain advances
    severity = alert_thresholds.SHIPPED.severity(alert, halted=halted)
    if alert != "LedgerExporterConfigReloadFailed":  # the banner, not a line
        assert listed, f"the page lists no {alert} line"
        assert {line.severity for line in listed} == {severity}
    links = Links(landing_page(snapshot, NOW, fired=True)).links
    assert (paging_alerts()[alert], alert) in links, links


def test_a_node_cut_off_is_pending_for_its_alerts_for_then_fires() -> None:
    """LedgerNodeIsolated's line is pending (its `for`, from thresholds.json) from the first
    cycle the condition holds, firing once it has held that long; a partition without a
    majority holds it back (folded under the network's line)."""
    wait = alert_thresholds.SHIPPED.for_seconds("LedgerNodeIsolated")
    memory = Held()
    snapshot = SCENARIOS["LedgerNodeIsolated"]()
    (first,) = [p for p in memory.observe(replace(snapshot, completed_at=NOW)).lines()
                if p.alert == "LedgerNodeIsolated"]  # fmt: skip
    assert (first.node, first.pending, first.fires_in) == ("c", True, wait)
    later = memory.observe(replace(snapshot, completed_at=NOW + wait))
    (fired,) = [p for p in later.lines() if p.alert == "LedgerNodeIsolated"]
    assert not fired.pending and fired.severity is Severity.WARNING
    # the same node alone among three groups of one: the partition's line, it under it
    apart = SCENARIOS["LedgerNetworkPartitioned"]()
    apart = replace(apart, network=replace(apart.network, largest_partition=2))
    assert not [p for p in attention(apart, NOW).network if p.alert == "LedgerNetworkPartitioned"]


def test_a_chain_only_one_node_lists_has_no_line_of_its_own() -> None:
    """As the rules' onlyExpected: the chain one node lists beside other up nodes is that
    node's LedgerNodeUnexpectedBlockchains line (naming how many), never a line about the
    chain (its stall, its council), however bad it looks."""
    stalled = replace(chain("made-up", councilMembers=["k1"]), height_changed_at=NOW - 9999)
    snapshot = fleet(moving("a"), node("b", chain(), stalled),
                     network=replace(split(), unexpected_chains=(("a", 0), ("b", 1))))  # fmt: skip
    lines = list(attention(snapshot, NOW).lines())
    assert not [p for p in lines if p.chain == "made-up"]
    (own,) = [p for p in lines if p.alert == "LedgerNodeUnexpectedBlockchains"]
    assert own.node == "b" and own.text.startswith("lists 1 blockchain that no other up")
    # a network of one node: its chains are the ones expected
    alone = fleet(node("b", chain(), stalled))
    assert [p for p in attention(alone, NOW).lines() if p.chain == "made-up"]


def test_the_councils_alerts_are_warnings_while_the_chain_advances_critical_once_halted() -> None:
    """Each of the two rules: the warning (as seen by this exporter) while the chain moves;
    once a majority of its nodes stalled, critical, folded under LedgerBlockchainHalted."""
    thin = chain(councilMembers=["k1", "k2"])
    moving_on = fleet(moving("a"), node("b", thin))
    (warning,) = [p for p in attention(moving_on, NOW).lines()
                  if p.alert == "LedgerCouncilBelowMinMembers"]  # fmt: skip
    assert warning.severity is Severity.WARNING and "as seen by this exporter" in warning.text
    stopped = replace(thin, height_changed_at=NOW - 601)
    halted_ = fleet(node("a", replace(chain(), height_changed_at=NOW - 601)), node("b", stopped))
    found = attention(halted_, NOW)
    (halt,) = [p for p in found.network if p.alert == "LedgerBlockchainHalted"]
    (critical,) = [p for p in halt.folded if p.alert == "LedgerCouncilBelowMinMembers"]
    assert critical.severity is Severity.CRITICAL
    assert not [p for p in found.node_problems if p.alert == "LedgerCouncilBelowMinMembers"]
