"""The status page and the config's maintenance entries (issue 36, item 4): a node or chain in
maintenance is listed apart from the problems, with its until and reason and the alerts it
holds back; its problems leave the problem lists (as Alertmanager's inhibit rules silence
them); the council's quorum line says how many members are in maintenance.

Snapshots are made as the daemon makes them: node answers read, folded into a history and
compared by the network view, on a hand-stepped clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from exporter.config.exporter import Config
from exporter.config.maintenance import MaintenanceEntry
from exporter.config.nodes import NodeConfig
from exporter.model.snapshot import Snapshot
from exporter.poll.cycle import Poller
from exporter.web.problems import Attention, attention
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.polled_fleet import KEYS, PolledFleet
from tests.support.webapp import landing_page

START = 1000.0
#: The wall clock minus the monotonic one: the snapshot's Unix times.
WALL_OFFSET = 1_795_888_800.0 - 3600.0 - START  # START is an hour before 2026-11-28T18:00:00Z
EVENING = 1_795_888_800.0
SETTINGS = {"txMaxTimeTrigger": "1m", "minMembers": 2, "consensusTimeout": "30s"}


def chain(height: int = 10, **changes: Any) -> dict[str, Any]:
    document = chain_doc(
        height, councilMembers=list(KEYS.values()), consensus=SETTINGS, voteSessions={}
    )
    return document | changes


def needing(votes: int) -> dict[str, Any]:
    """A chain with an open vote session that needs ``votes``."""
    entry = {"sessionId": "s1", "round": 1, "currentLeader": "key-1", "consensusRequired": votes}
    return chain(voteSessions={"s1": entry})


def polled() -> PolledFleet:
    """Nodes n1..n4 answering what the test says (None: down), polled cycle by cycle."""
    return PolledFleet(START, wall_offset=WALL_OFFSET)


def found(snapshot: Snapshot) -> Attention:
    assert snapshot.completed_at is not None
    return attention(snapshot, snapshot.completed_at)


def listed(snapshot: Snapshot) -> list[tuple[str | None, str | None, str | None]]:
    """Every problem of the lists as (alert, node, chain)."""
    every = found(snapshot)
    problems = [*every.network, *every.node_problems, *every.watch]
    return [(p.alert, p.node, p.chain) for p in problems]


UPGRADE = MaintenanceEntry("n2", "", EVENING, "kernel upgrade")


def test_a_node_down_in_maintenance_is_listed_apart_and_not_as_a_problem() -> None:
    fleet = polled()
    everyone = {name: chain() for name in KEYS}
    fleet.cycle(everyone)
    down = fleet.cycle(everyone | {"n2": None})
    assert ("LedgerNodeDown", "n2", None) in listed(down)  # without its entry: a problem

    snapshot = fleet.cycle(everyone | {"n2": None}, maintenance=(UPGRADE,))
    assert listed(snapshot) == []
    line, council = found(snapshot).maintenance  # n2 is a member of c1's council
    assert (line.node, line.chain, line.alert, line.severity.label) == ("n2", None, None, "info")
    assert council.text == (
        "1 of the council's 4 members in maintenance (n2); 3 members up among the polled"
        " nodes, a session needs 2 votes: quorum margin 1"
    )
    assert line.text == (
        "in maintenance until 2026-11-28T18:00:00Z (59m 15s left): \u2068kernel upgrade\u2069;"
        " not listed as problems: LedgerNodeDown"
    )
    page = landing_page(snapshot, fleet.now)
    assert "Nothing needs attention" in page
    assert "<h3>In maintenance</h3>" in page
    section = page.split("<h3>In maintenance</h3>")[1].split("</ul>")[0]
    assert "<b><bdi>n2</bdi></b>" in section and "<bdi>kernel upgrade</bdi>" in section


def test_an_up_node_in_maintenance_says_it_holds_back_no_alert() -> None:
    fleet = polled()
    snapshot = fleet.cycle({name: chain() for name in KEYS}, maintenance=(UPGRADE,))
    line, council = found(snapshot).maintenance
    assert line.text.endswith("; no alert now")
    assert council.text.endswith("4 members up among the polled nodes, a session needs 2 votes:"
                                 " quorum margin 2")  # fmt: skip


def test_a_chain_in_maintenance_takes_its_problems_on_every_node_out_of_the_lists() -> None:
    """A chain stalled on every node while work waits, in maintenance: neither the stalls nor
    its thin quorum are problems; a node down stays one (its own, not the chain's)."""
    fleet = polled()
    busy = needing(3) | {"pendingTransactions": 4}
    fleet.cycle({name: busy for name in KEYS})
    stalled = fleet.cycle({"n1": busy, "n2": busy, "n3": busy, "n4": None}, after=600)
    alerts = {alert for alert, _, _ in listed(stalled)}  # the stalls: under the halted line
    assert {"LedgerBlockchainHalted", "LedgerNodeDown"} <= alerts
    (halt,) = [p for p in found(stalled).network if p.alert == "LedgerBlockchainHalted"]
    thin = [p for p in halt.folded if p.alert == "LedgerCouncilQuorumThin"]
    assert [p.severity.label for p in thin] == ["critical"]  # the halted chain's rule

    upgrade = MaintenanceEntry("", "c1", EVENING, "chain upgrade")
    snapshot = fleet.cycle({"n1": busy, "n2": busy, "n3": busy, "n4": None}, maintenance=(upgrade,))
    assert listed(snapshot) == [("LedgerNodeDown", "n4", None)]
    (line,) = found(snapshot).maintenance
    assert (line.node, line.chain) == (None, "c1")
    assert "not listed as problems: " in line.text
    aside = line.text.split("not listed as problems: ")[1].split(", ")
    assert set(aside) == alerts - {"LedgerNodeDown"}


def test_the_quorum_line_says_how_many_council_members_are_in_maintenance() -> None:
    """A council of 4 needing 3 votes, n4 down for good and n3 taken down for maintenance:
    the thin quorum is held back by a node down (the shipped inhibition), so not a line of
    its own; the maintenance section gives the margin, n3 in maintenance."""
    fleet = polled()
    fleet.cycle({name: needing(3) for name in KEYS})
    entry = MaintenanceEntry("n3", "", EVENING, "disk swap")
    answers = {"n1": needing(3), "n2": needing(3), "n3": None, "n4": None}
    snapshot = fleet.cycle(answers, maintenance=(entry,))
    assert ("LedgerNodeDown", "n4", None) in listed(snapshot)
    assert ("LedgerNodeDown", "n3", None) not in listed(snapshot)
    assert not [p for p in found(snapshot).network if p.alert == "LedgerCouncilQuorumThin"]
    node_line, margin = found(snapshot).maintenance
    assert node_line.node == "n3" and "LedgerNodeDown" in node_line.text
    assert (margin.chain, margin.alert) == ("c1", None)
    assert margin.text == (
        "1 of the council's 4 members in maintenance (n3); 2 members up among the polled"
        " nodes, a session needs 3 votes: quorum margin -1"
    )


def test_without_entries_the_page_has_no_maintenance_section() -> None:
    fleet = polled()
    snapshot = fleet.cycle({name: chain() for name in KEYS})
    assert found(snapshot).maintenance == ()
    assert "In maintenance" not in landing_page(snapshot, fleet.now)


@pytest.mark.parametrize("step", [-7200.0, +7200.0])
def test_the_time_left_is_the_windows_own_after_a_wall_clock_step(
    fake_node: FakeNode, step: float
) -> None:
    """A window of 30 s, 15 s in, the wall clock stepped 2 h back or on: the page says 15 s
    left, the end the cycle keeps on the monotonic clock (``until`` less the stepped wall
    time would say 2h 0m, or nothing left while the entry still applies)."""
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    entry = MaintenanceEntry("n", "", EVENING + 30, "kernel upgrade")
    config = Config(
        nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0, maintenance=(entry,)
    )
    monotonic, wall = Clock(START), Clock(EVENING)
    poller = Poller(config, lambda snapshot: None, monotonic, wall=wall)
    try:
        poller.run_cycle()
        monotonic.advance(15)
        wall.advance(15 + step)
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    (line,) = found(snapshot).maintenance
    assert line.text.startswith("in maintenance until 2026-11-28T18:00:30Z (15s left): ")
