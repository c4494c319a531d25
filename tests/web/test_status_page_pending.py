"""Pending, firing and calm on the status page: each line pending until its alert's `for` (the
rules', rendered into thresholds.json) has passed since its condition began, that start from
the snapshot's own times where they say (a stall, a session's age) and else from the first
cycle the page's memory (:class:`Held`) saw it, forgotten the first cycle it does not hold,
as Prometheus forgets a pending alert; a stuck session's symptoms under the halt they are
likely to become, from the first cycle; no failing-leader line while the rule leaves the
chain out after a halt; a page with info lines only is calm.

Snapshots made as the daemon makes them (tests/support/polled_fleet.py), cycle by cycle on a
hand-stepped clock; the page's heading also in headless Chromium, its screenshot kept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.model.snapshot import Snapshot
from exporter.web import alert_thresholds
from exporter.web.landing import StatusPage
from exporter.web.problems import Attention, Held, Problem
from tests.support.browser import in_page
from tests.support.documents import chain_doc
from tests.support.monitoring import PROM_DIR
from tests.support.polled_fleet import KEYS, PolledFleet
from tests.support.programs import require_program
from tests.support.scaling import duration_ms

START = 1_700_000_000.0
COUNCIL = list(KEYS.values())
SETTINGS = {  # txMaxTimeTrigger 1m + consensusTimeout 30s: a block due within 90 s
    "consensusType": "council_leader_proposal",
    "txMaxTimeTrigger": "1m",
    "minMembers": 2,
    "consensusTimeout": "30s",
}
EVERYONE = ("n1", "n2", "n3", "n4")
FOR = alert_thresholds.SHIPPED.fors


def chain(height: int = 10, **changes: Any) -> dict[str, Any]:
    document = chain_doc(height, councilMembers=COUNCIL, consensus=SETTINGS, voteSessions={})
    document.update(changes)
    return document


def session(round_: int, leader: str) -> dict[str, Any]:
    return {"s1": {"sessionId": "s1", "round": round_, "currentLeader": leader,
                   "consensusRequired": 3}}  # fmt: skip


def every_line(found: Attention) -> list[Problem]:
    return list(found.lines())


def line_of(found: Attention, alert: str) -> Problem | None:
    lines = [line for line in every_line(found) if line.alert == alert and not line.foreseen]
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


def test_each_alerts_for_is_its_rules() -> None:
    """thresholds.json's `for` of each alert is its rule's (the shortest of its rules)."""
    rules: dict[str, float] = {}
    for group in yaml.safe_load((PROM_DIR / "alerts.yml").read_text())["groups"]:
        for rule in group["rules"]:
            if rule["labels"]["severity"] == "none":
                continue
            seconds = duration_ms(rule.get("for", "0s")) / 1000
            rules[rule["alert"]] = min(seconds, rules.get(rule["alert"], seconds))
    assert dict(FOR) == rules


def test_a_node_down_is_pending_until_its_for_then_firing_and_forgotten_when_back() -> None:
    fleet, held = PolledFleet(START), Held()
    up = dict.fromkeys(EVERYONE, chain())
    held.observe(fleet.cycle(up))
    first = held.observe(fleet.cycle(up | {"n4": None}))
    down = line_of(first, "LedgerNodeDown")
    assert down is not None and down.pending and down.fires_in == FOR["LedgerNodeDown"]
    almost = held.observe(fleet.cycle(up | {"n4": None}, after=FOR["LedgerNodeDown"] - 1))
    assert (line := line_of(almost, "LedgerNodeDown")) and line.pending and line.fires_in == 1
    fired = held.observe(fleet.cycle(up | {"n4": None}, after=1))
    assert (line := line_of(fired, "LedgerNodeDown")) and not line.pending
    assert line.fires_in == 0 and line.since == down.since
    page = StatusPage(fired_snapshot(fleet, held, up), found=held.latest).at(fleet.now).decode()
    nodes = page.split("<h3>Nodes and chains</h3>")[1].split("<h2>Nodes</h2>")[0]
    assert "LedgerNodeDown" in nodes and 'class="pending"' not in nodes
    # back for one cycle, then down again: a new incident, pending from its first cycle
    held.observe(fleet.cycle(up))
    again = held.observe(fleet.cycle(up | {"n4": None}))
    assert (line := line_of(again, "LedgerNodeDown")) and line.pending
    assert line.fires_in == FOR["LedgerNodeDown"]


def fired_snapshot(fleet: PolledFleet, held: Held, up: dict[str, Any]) -> Snapshot:
    """One more cycle of n4 down, observed: the snapshot the page renders."""
    snapshot = fleet.cycle(up | {"n4": None}, after=1)
    held.observe(snapshot)
    return snapshot


def test_a_pending_line_says_when_it_fires_and_sits_after_the_firing_ones() -> None:
    fleet, held = PolledFleet(START), Held()
    up = dict.fromkeys(EVERYONE, chain())
    held.observe(fleet.cycle(up | {"n4": None}))
    held.observe(fleet.cycle(up | {"n4": None}, after=FOR["LedgerNodeDown"]))  # n4 fires
    snapshot = fleet.cycle(up | {"n4": None, "n3": None})  # n3 down this cycle: pending
    found = held.observe(snapshot)
    assert [(p.node, p.pending) for p in found.node_problems] == [("n4", False), ("n3", True)]
    html = StatusPage(snapshot, found=found).at(fleet.now).decode()
    assert '<h2 class="bad">Needs attention: 1 critical</h2>' in html
    assert "Pending: 1 critical (the condition holds" in html
    assert '<li class="pending"><span class="sev critical">critical</span> ' in html
    assert '<span class="state">pending: fires in 2m 0s</span> <b><bdi>n3</bdi></b>' in html
    assert "<title>(1 critical, 1 pending) ledger-exporter</title>" in html


def test_a_stuck_sessions_symptoms_go_under_the_likely_halt_from_the_first_cycle() -> None:
    """Rounds escalate and a leader fails before the halt's condition (a block due within
    90 s, plus the 180 s grace) holds: their lines go under the halt's likely line, pending,
    which says when its alert would fire; once the condition holds, under the halt's own."""
    fleet, held = PolledFleet(START), Held()
    held.observe(fleet.cycle(dict.fromkeys(EVERYONE, chain())))
    found = Attention()
    for round_ in range(1, 6):  # a round every 30 s, each leader failing in turn
        stuck = {n: chain(voteSessions=session(round_, "key-2")) for n in EVERYONE}
        found = held.observe(fleet.cycle(stuck, after=30))
    assert fleet.now - START == 15 + 150  # the first cycle's block, 150 s ago
    (likely,) = found.network  # one top line: the chain's likely halt
    assert likely.foreseen and likely.alert == "LedgerBlockchainHalted" and likely.pending
    # its condition holds 270 s after the last block (at START), then its `for`
    assert likely.fires_in == 270 - 150 + FOR["LedgerBlockchainHalted"]
    assert likely.text.startswith("likely halting at height 10: unchanged for 2m 30s on 4 of")
    under = {(line.alert, line.node) for line in likely.folded}
    assert ("LedgerVoteRoundsEscalating", "n1") in under
    assert ("LedgerLeaderFailingRounds", None) in under
    text = StatusPage(stuck_snapshot(fleet, held), found=held.latest).at(fleet.now).decode()
    assert '<span class="state">likely cause, no alert yet: fires in' in text
    # nothing has fired yet: amber, not red
    assert '<h2 class="warn">Needs attention soon: 1 critical pending</h2>' in text
    assert "Likely to come: 1 critical (its lines are under it; no alert yet)." in text
    # the condition holds: the halt's own line, its symptoms under it
    for _ in range(5):
        stuck = {n: chain(voteSessions=session(9, "key-3")) for n in EVERYONE}
        found = held.observe(fleet.cycle(stuck, after=30))
    (halted,) = found.network
    assert halted.alert == "LedgerBlockchainHalted" and not halted.foreseen


def stuck_snapshot(fleet: PolledFleet, held: Held) -> Snapshot:
    snapshot = fleet.cycle({n: chain(voteSessions=session(6, "key-3")) for n in EVERYONE}, 1)
    held.observe(snapshot)
    return snapshot


def test_a_live_chain_with_a_failing_leader_has_no_likely_halt() -> None:
    fleet, held = PolledFleet(START), Held()
    found = Attention()
    for round_ in range(1, 6):  # key-2's rounds fail, but blocks keep coming
        answers = {n: chain(10 + round_, voteSessions=session(round_, "key-2")) for n in EVERYONE}
        found = held.observe(fleet.cycle(answers, after=20))
    assert line_of(found, "LedgerLeaderFailingRounds") is not None
    assert not [line for line in every_line(found) if line.foreseen]


def test_no_failing_leader_line_within_its_window_after_the_halt_fired() -> None:
    """LedgerLeaderFailingRounds leaves out a chain whose halt fired within its window: the
    rounds failed because of the halt. So does the page, after the recovery too."""
    fleet, held = PolledFleet(START), Held()
    held.observe(fleet.cycle(dict.fromkeys(EVERYONE, chain())))
    for round_ in range(1, 12):  # 330 s stuck: past 270 s and the halt's 1m `for`
        stuck = {n: chain(voteSessions=session(round_, f"key-{round_ % 4 + 1}")) for n in EVERYONE}
        found = held.observe(fleet.cycle(stuck, after=30))
    halted = line_of(found, "LedgerBlockchainHalted")
    assert halted is not None and not halted.pending
    assert line_of(found, "LedgerLeaderFailingRounds") is None
    recovered = held.observe(fleet.cycle(dict.fromkeys(EVERYONE, chain(11)), after=30))
    assert [line.alert for line in every_line(recovered)] == []  # no leader lines left
    window = alert_thresholds.SHIPPED.thresholds.leader_failed_rounds_window_seconds
    # a new failing leader once the window since the halt has passed: listed again
    for round_ in range(1, 5):
        answers = {n: chain(11 + round_, voteSessions=session(round_, "key-2")) for n in EVERYONE}
        found = held.observe(fleet.cycle(answers, after=window / 4))
    assert line_of(found, "LedgerLeaderFailingRounds") is not None


@pytest.mark.integration
def test_a_healthy_networks_page_is_calm_in_chromium(tmp_path: Path) -> None:
    """A council of three needing three votes: the info line only (no margin by design). The
    heading is calm, green, not bold red; the info is said below it."""
    fleet, held = PolledFleet(START), Held()
    council = COUNCIL[:3]
    settings = SETTINGS | {"minMembers": 3}  # a session needs 3 votes
    answers = {n: chain(councilMembers=council, consensus=settings, pendingTransactions=0)
               for n in EVERYONE}  # fmt: skip
    held.observe(fleet.cycle(answers))
    snapshot = fleet.cycle(answers, after=FOR["LedgerCouncilWithoutMargin"])
    found = held.observe(snapshot)
    assert [(line.alert, line.pending) for line in every_line(found)] == [
        ("LedgerCouncilWithoutMargin", False)
    ]
    html = StatusPage(snapshot, found=found).at(fleet.now).decode()
    assert '<h2 class="ok">Nothing needs attention</h2>' in html
    assert "Also listed: 1 info (no action needed)." in html
    assert 'class="bad"' not in html.split("<h2>Nodes</h2>")[0]
    page = tmp_path / "calm.html"
    page.write_text(html)
    style = in_page(
        page.as_uri(),
        "(() => { const h = document.querySelector('h2');"
        " const s = getComputedStyle(h); return [h.textContent, s.color, s.fontWeight]; })()",
    )
    assert style == ["Nothing needs attention", "rgb(0, 136, 0)", "700"], style  # green, not red
    info = in_page(page.as_uri(), "getComputedStyle(document.querySelector('h2 + p')).color")
    assert info == "rgb(102, 102, 102)"  # muted grey
    shot = tmp_path / "calm.png"
    command = [require_program("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
               "--window-size=1280,900", f"--screenshot={shot}", page.as_uri()]  # fmt: skip
    subprocess.run(command, capture_output=True, timeout=120, check=True)
    assert shot.read_bytes().startswith(b"\x89PNG")
