"""The status page's consensus health (issue 21): a thin quorum, consensus settings that drift,
a vote session that does not close and a leader whose rounds keep failing are listed in the
network section, first, each with its alert's severity and name; the reworked stall rule
never flags an idle chain. The thresholds are the shipped alerts' (tied below).

Snapshots are made as the daemon makes them: node answers read, folded into a history cycle
by cycle on a hand-stepped clock, and compared by the network view.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from exporter.model.snapshot import Snapshot
from exporter.poll import consensus_history as consensus
from exporter.values import parse_go_duration
from exporter.web import alert_thresholds, problems
from exporter.web.problems import Problem, Scope, attention
from tests.support.documents import chain_doc
from tests.support.monitoring import PROM_DIR
from tests.support.polled_fleet import KEYS, PolledFleet
from tests.support.webapp import landing_page
from tools import render_mixin

START = 1_700_000_000.0
COUNCIL = list(KEYS.values())
#: settings: txMaxTimeTrigger 1m + consensusTimeout 30s + 180s grace: 270s
SETTINGS = {
    "consensusType": "council_leader_proposal",
    "txKarmaThreshold": 10,
    "txMintThreshold": 5,
    "txMaxTimeTrigger": "1m",
    "minMembers": 2,
    "consensusTimeout": "30s",
}


def chain(height: int = 10, **changes: Any) -> dict[str, Any]:
    document = chain_doc(height, councilMembers=COUNCIL, consensus=SETTINGS, voteSessions={})
    document.update(changes)
    return document


def session(round_: int, leader: str, required: int = 3) -> dict[str, Any]:
    entry = {"sessionId": "s1", "round": round_, "currentLeader": leader}
    return {"s1": entry | {"consensusRequired": required}}


def polled() -> PolledFleet:
    """Nodes n1..n4 answering what the test says, polled cycle by cycle."""
    return PolledFleet(START)


def network_lines(snapshot: Snapshot) -> list[tuple[str, str | None, str]]:
    """The network's lines, folded ones too (under a node down's line as well: it holds back
    a thin quorum), but a likely cause's (no alert yet)."""
    found = attention(snapshot, snapshot.completed_at or START).lines()
    listed = [line for line in found if line.scope is Scope.NETWORK]
    return [(p.severity.label, p.alert, p.text) for p in listed if not p.foreseen]


def lines_of(snapshot: Snapshot, alert: str) -> list[Problem]:
    """``alert``'s lines, folded ones too, wherever they are folded."""
    found = attention(snapshot, snapshot.completed_at or START).lines()
    return [line for line in found if line.alert == alert]


# --- the stall rule ---------------------------------------------------------------------


def node_lines(snapshot: Snapshot, *alerts: str) -> list[str]:
    found = attention(snapshot, snapshot.completed_at or START).node_problems
    return [f"{p.node} {p.alert}: {p.text}" for p in found if not alerts or p.alert in alerts]


def test_an_idle_chain_is_never_stalled_and_a_busy_one_is_by_its_own_settings() -> None:
    fleet = polled()
    idle = chain(pendingTransactions=0)
    busy = chain(pendingTransactions=4)
    unknown = chain(pendingTransactions=4, consensus={"consensusType": "x"})  # no settings
    fleet.cycle({"n1": idle, "n2": busy, "n3": unknown})
    stalled = "LedgerBlockHeightStalled"
    at_270 = fleet.cycle({"n1": idle, "n2": busy, "n3": unknown}, after=270)
    assert node_lines(at_270, stalled) == []
    at_271 = fleet.cycle({"n1": idle, "n2": busy, "n3": unknown}, after=1)
    assert node_lines(at_271, stalled) == [
        "n2 LedgerBlockHeightStalled: height unchanged for 4m 31s while work waits "
        "(a block was due within 4m 30s)"
    ]
    hours = fleet.cycle({"n1": idle, "n2": busy, "n3": unknown}, after=3 * 3600)
    # n2 and n3 stalled at the head, 2 of the 3 up readers: the chain is halted (n3: no
    # settings, after the 10-minute fallback), and, as the rules, their stall lines are left
    # out while it is: the halt is the one line
    found = attention(hours, hours.completed_at or START)
    (halted,) = [p for p in found.network if p.alert == "LedgerBlockchainHalted"]
    assert halted.text.startswith("halted at height")
    assert [p for p in found.lines() if p.alert == stalled] == []


def test_an_idle_node_left_behind_is_behind_not_stalled() -> None:
    # the head is the height a strict majority of the readers reached: two of three here
    fleet = polled()
    idle = chain(10, pendingTransactions=0)
    fleet.cycle({"n1": idle, "n2": chain(10), "n3": chain(10)})
    later = fleet.cycle({"n1": idle, "n2": chain(40), "n3": chain(40)}, after=900)
    assert [line.split(":")[0] for line in node_lines(later)] == ["n1 LedgerNodeBehind"]


def test_one_node_ahead_of_the_other_puts_neither_behind() -> None:
    # two readers, one at 40: no strict majority reached 40, so the head is 10 and n1, idle
    # there, is behind by nothing (ledger_blockchain_blocks_behind 0: LedgerNodeBehind silent)
    fleet = polled()
    idle = chain(10, pendingTransactions=0)
    fleet.cycle({"n1": idle, "n2": chain(10)})
    later = fleet.cycle({"n1": idle, "n2": chain(40)}, after=900)
    assert node_lines(later) == []


# --- consensus health in the network section ----------------------------------------------


def test_a_stuck_session_names_the_nodes_that_see_it() -> None:
    fleet = polled()
    open_ = chain(voteSessions=session(1, "key-1"))
    fleet.cycle({"n1": open_, "n2": open_, "n3": chain()})
    assert (
        lines_of(
            fleet.cycle({"n1": open_, "n2": open_, "n3": chain()}, after=150),
            "LedgerVoteSessionStuck",
        )
        == []
    )
    stuck = fleet.cycle({"n1": open_, "n2": open_, "n3": chain()}, after=1)
    assert network_lines(stuck)[0] == (
        "warning",
        "LedgerVoteSessionStuck",
        "a vote session open for 2m 31s on n1, n2, more than 5 consensus timeouts (2m 30s): "
        "it does not close",
    )


def test_a_failing_leader_is_listed_once_naming_its_node() -> None:
    fleet = polled()
    everyone = ("n1", "n2", "n3", "n4")
    for round_ in (1, 2, 3):  # key-2 leads each round, and each fails
        snapshot = fleet.cycle({n: chain(voteSessions=session(round_, "key-2")) for n in everyone})
    assert lines_of(snapshot, "LedgerLeaderFailingRounds") == []  # 2 failures so far
    snapshot = fleet.cycle({n: chain(voteSessions=session(4, "key-3")) for n in everyone})
    (line,) = lines_of(snapshot, "LedgerLeaderFailingRounds")
    assert (line.subject, line.chain) == ("key-2", "c1")
    assert (
        line.text
        == "leader (node n2) failed 3 vote rounds in the last 15m, as n1, n2, n3, n4 saw them"
    )
    # 15 minutes on, those failures are out of the alert's window
    window = problems.SHIPPED_THRESHOLDS.leader_failed_rounds_window_seconds
    later = fleet.cycle({n: chain() for n in everyone}, after=window)
    assert lines_of(later, "LedgerLeaderFailingRounds") == []


def test_a_failing_leader_whose_node_is_down_is_named_by_its_remembered_node_id() -> None:
    fleet = polled()
    others = ("n1", "n3", "n4")
    fleet.cycle({n: chain() for n in (*others, "n2")})  # n2's nodeId, key-2, is remembered
    for round_ in (1, 2, 3, 4):  # n2 is down, and its turns as leader fail
        snapshot = fleet.cycle(
            {"n2": None} | {n: chain(voteSessions=session(round_, "key-2")) for n in others}
        )
    (line,) = lines_of(snapshot, "LedgerLeaderFailingRounds")
    assert (
        line.text == "leader (node n2) failed 3 vote rounds in the last 15m, as n1, n3, n4 saw them"
    )


def test_consensus_drift_names_the_node_off_the_majority() -> None:
    fleet = polled()
    drifted = chain(consensus=SETTINGS | {"consensusTimeout": "45s"})
    snapshot = fleet.cycle({"n1": chain(), "n2": chain(), "n3": drifted})
    assert network_lines(snapshot) == [
        (
            "warning",
            "LedgerConsensusConfigDiverges",
            "2 different consensus configurations (settings, key type, feature flags); off "
            "the majority: n3",
        )
    ]
    assert node_lines(snapshot) == [
        "n3 LedgerNodeOffMajorityConsensus: consensus settings, key type or feature flags "
        "are not the majority's"
    ]


def test_a_thin_quorum_only_where_every_member_is_polled() -> None:
    fleet = polled()
    voting = chain(voteSessions=session(1, "key-1", required=3))
    everyone = {n: voting for n in ("n1", "n2", "n3", "n4")}
    assert lines_of(fleet.cycle(everyone), "LedgerCouncilQuorumThin") == []
    one_down = fleet.cycle(everyone | {"n4": None})  # 3 up, 3 votes required
    (line,) = lines_of(one_down, "LedgerCouncilQuorumThin")
    # the chain still advances: the warning rule, as seen by this exporter
    assert (line.severity.label, line.chain) == ("warning", "c1")
    assert line.text == (
        "3 of the council's 4 members up among the polled nodes, as seen by this exporter, "
        "and a session needs 3 votes; the chain still advances: one more member lost and "
        "none can pass"
    )
    (down,) = [top for top in attention(one_down, one_down.completed_at or START).node_problems]
    assert down.alert == "LedgerNodeDown" and line in down.folded  # held back by it
    # the session closed: the votes it needed are still remembered for an hour
    closed = fleet.cycle(everyone | {"n4": None} | {n: chain() for n in ("n1", "n2", "n3")})
    assert len(lines_of(closed, "LedgerCouncilQuorumThin")) == 1
    # a council with a member this exporter does not poll: unknown, so never thin
    outside = chain(councilMembers=[*COUNCIL, "key-unpolled"], voteSessions=session(1, "key-1", 4))
    unknown = polled().cycle({"n1": outside, "n2": outside, "n3": outside})
    assert lines_of(unknown, "LedgerCouncilQuorumThin") == []


def test_a_council_without_margin_by_design_is_a_note_and_a_margin_lost_is_a_warning() -> None:
    """3 members needing 3 votes (the demo's council): the network never had a margin, so
    the page says so as info (LedgerCouncilWithoutMargin), never critical; a member down
    loses what margin there was not: LedgerCouncilQuorumThin beside the note, a warning
    while the chain advances (as seen by this exporter), under the node down's line."""
    fleet = polled()
    three = chain(councilMembers=COUNCIL[:3], voteSessions=session(1, "key-1", required=3))
    healthy = fleet.cycle({n: three for n in ("n1", "n2", "n3")})
    assert network_lines(healthy) == [
        (
            "info",
            "LedgerCouncilWithoutMargin",
            "the council has 3 members and a session needs 3 votes: no margin by its own "
            "design, any member down stops the chain",
        )
    ]
    one_down = fleet.cycle({"n1": three, "n2": three, "n3": None})
    assert [(severity, alert) for severity, alert, _ in network_lines(one_down)] == [
        ("info", "LedgerCouncilWithoutMargin"),
        ("warning", "LedgerCouncilQuorumThin"),
    ]
    assert network_lines(one_down)[1][2] == (
        "2 of the council's 3 members up among the polled nodes, as seen by this exporter, "
        "fewer than the 3 votes a session needs; the chain still advances, so its quorum holds"
    )
    # 4 members, 3 votes: a margin of one, no note; one down is the margin lost
    four = chain(voteSessions=session(1, "key-1", required=3))
    spare = polled().cycle({n: four for n in ("n1", "n2", "n3", "n4")})
    assert network_lines(spare) == []


def test_a_thin_quorum_a_node_down_explains_is_under_its_line() -> None:
    """LedgerNodeDown holds back LedgerCouncilQuorumThin (the shipped inhibition): the
    thin quorum is shown under the node down's line, not as a network line of its own."""
    fleet = polled()
    voting = chain(voteSessions=session(1, "key-1", required=3))
    fleet.cycle({n: voting for n in ("n1", "n2", "n3", "n4")})
    snapshot = fleet.cycle({"n1": voting, "n2": voting, "n3": voting, "n4": None})
    page = " ".join(landing_page(snapshot, snapshot.completed_at, fired=True).split())
    network = page.index("<h3>Network</h3>")
    thin = page.index("LedgerCouncilQuorumThin")
    nodes = page.index("<h3>Nodes and chains</h3>")
    down = page.index("LedgerNodeDown")
    assert network < nodes < down < thin
    assert '<ul class="folded">' in page[down:thin] or '<ul class="folded">' in page[nodes:thin]


# --- the thresholds are the shipped alerts' --------------------------------------------------


def test_the_page_uses_the_consensus_alerts_thresholds() -> None:
    """The mixin's settings, read by the page from the package (durations in seconds)."""
    config = render_mixin.evaluate()["config"]
    shipped = problems.SHIPPED_THRESHOLDS
    assert config["voteSessionStuckTimeouts"] == shipped.vote_session_stuck_timeouts
    assert parse_go_duration(config["voteSessionStuck"]) == shipped.vote_session_stuck_seconds
    assert config["leaderFailedRoundsThreshold"] == shipped.leader_failed_rounds_threshold
    window = shipped.leader_failed_rounds_window_seconds
    assert config["leaderFailedRoundsWindow"] == f"{window // 60:.0f}m"
    # the history keeps enough of each leader's failures for the window and the threshold
    assert window <= consensus.RECENT_FAILURE_SECONDS
    assert shipped.leader_failed_rounds_threshold <= consensus.RECENT_FAILURES_KEPT
    alerts = (PROM_DIR / "alerts.yml").read_text(encoding="utf-8")
    required = f"[{shipped.required_votes_window_seconds // 3600:.0f}h]"
    assert re.search(
        r"max_over_time\(ledger_blockchain_vote_consensus_required\{[^}]*\}" + re.escape(required),
        alerts,
    )


@pytest.mark.parametrize(
    ("alert", "severity"),
    [
        ("LedgerCouncilQuorumThin", "critical"),
        ("LedgerCouncilWithoutMargin", "info"),
        ("LedgerConsensusConfigDiverges", "warning"),
        ("LedgerNodeOffMajorityConsensus", "warning"),
        ("LedgerVoteSessionStuck", "warning"),
        ("LedgerLeaderFailingRounds", "warning"),
    ],
)
def test_each_consensus_line_carries_its_alerts_severity(alert: str, severity: str) -> None:
    rules = render_mixin.evaluate()["alerts"]["groups"]
    shipped = {r["alert"]: r["labels"]["severity"] for g in rules for r in g["rules"]}
    assert shipped[alert] == severity == alert_thresholds.SHIPPED.severity(alert).label
