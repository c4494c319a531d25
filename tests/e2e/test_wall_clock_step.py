"""A wall-clock step (issue 32, break 7) in the real process: ``python -m exporter`` under
libfaketime, its wall clock stepped 2 h ahead and then 2 h behind the real time while its
monotonic clock runs on, polling a simulated network (in this process, on the real clock).

Chain ``calm`` runs normally, but one of its nodes is stalled a few seconds before the step;
on chain ``stuck`` a vote session never closes and every node reports a 1 s consensus
timeout, so the status page flags it (LedgerVoteSessionStuck) within seconds. A step ahead
must not age the open sessions or the stalled height (no stall, no second stuck chain, on
the page or in the metrics); a step back must not hide the stuck session. Ages in the
metrics are compared with the exporter's own clock, as a Prometheus on the same host sees
them: ``last_success - height_last_change`` grows with the real time only."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledger_simulator import SimulatedNetwork
from tests.support.clock import SteppedWallClock
from tests.support.http import fetch
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

STEP = 7200  # seconds: two hours
#: How often the test reads the exporter: each read parses the metrics and the page in this
#: process, beside the simulated nodes' threads, which answered late at 20 reads a second.
POLL_SECONDS = 0.5
#: Room for the real time a part of the test takes on a loaded machine (far below STEP).
SLACK = 120.0
SESSION_AGE = "ledger_blockchain_vote_session_age_seconds"
CHANGED = "ledger_blockchain_height_last_change_timestamp_seconds"
LAST_SUCCESS = "ledger_node_last_success_timestamp_seconds"


@dataclass(frozen=True)
class Seen:
    """One served cycle: the metrics that carry ages, and the status page's problems."""

    session_age: dict[tuple[str, str], float]  # (node, chain) -> oldest open session's age
    changed: dict[tuple[str, str], float]  # (node, chain) -> height_last_change timestamp
    last_success: dict[str, float]  # node -> last success timestamp
    problems: list[str]  # the page's problem lines, as text

    def still(self, node: str, chain: str) -> float:
        """How long the chain's height has not moved, on the exporter's own clock."""
        return self.last_success[node] - self.changed[(node, chain)]

    def alerts(self, name: str) -> list[str]:
        return [line for line in self.problems if name in line]


def seen(exporter: ExporterProcess) -> Seen:
    samples = [
        sample
        for family in text_string_to_metric_families(fetch(exporter.base + "/metrics").text)
        for sample in family.samples
    ]

    def per_chain(name: str) -> dict[tuple[str, str], float]:
        return {
            (s.labels["node"], s.labels["blockchain"]): s.value for s in samples if s.name == name
        }

    page = fetch(exporter.base + "/").text
    items = re.findall(r"<li[^>]*>(.*?)</li>", page, re.DOTALL)
    problems = [html.unescape(re.sub(r"<[^>]+>", "", item)) for item in items]
    return Seen(
        per_chain(SESSION_AGE),
        per_chain(CHANGED),
        {s.labels["node"]: s.value for s in samples if s.name == LAST_SUCCESS},
        problems,
    )


def next_cycles(exporter: ExporterProcess, after: Seen, count: int = 2) -> Seen:
    """What is served once ``count`` more cycles have been (each moves every last success
    on the monotonic clock, whichever way the wall clock stepped), the last one a cycle that
    read every chain ``after`` had read (on two loaded cores a chain's answer now and then
    misses a 1 s cycle: a timeout, no clock's doing)."""
    current = after
    for left in reversed(range(count)):
        before = current

        def moved(before: Seen = before, last: bool = left == 0) -> Seen | None:
            now = seen(exporter)
            if not now.last_success or now.last_success == before.last_success:
                return None
            return None if last and not set(after.changed) <= set(now.changed) else now

        current = wait_until(
            moved,
            timeout=60,
            interval=POLL_SECONDS,
            message=lambda: f"a cycle reading every chain:\n{exporter.log()}",
        )
    return current


def short(chain: str) -> str:
    return chain[:8]


def test_a_wall_clock_step_neither_ages_nor_hides(tmp_path: Path) -> None:
    wall = SteppedWallClock(tmp_path)
    with SimulatedNetwork(nodes=3, chains=2, block_interval=0.5, seed=3, port=0) as net:
        listing = net.listing()["nodes"]
        calm, stuck = net.chain_ids
        tracking = {
            c: [n for n, info in listing.items() if c in info["blockchains"]] for c in (calm, stuck)
        }
        assert len(tracking[calm]) >= 2 and len(tracking[stuck]) >= 2, tracking
        stalled = tracking[calm][0]
        for node in tracking[stuck]:
            net.set_fault(node, "consensus_drift", chain=stuck, target="consensusTimeout",
                          value="1s")  # fmt: skip
        net.set_fault("*", "session_stuck", chain=stuck, delay_seconds=0.5)
        nodes = "".join(
            f"  - name: {name}\n    url: {url}\n    blockchains: {listing[name]['blockchains']}\n"
            for name, url in net.node_urls.items()
        )
        config = tmp_path / "exporter.yml"
        config.write_text(f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes:\n{nodes}")
        with ready_exporter(config, env=wall.env()) as exporter:
            net.set_fault(stalled, "stall", chain=calm)

            def stuck_flagged() -> Seen | None:
                now = seen(exporter)
                every_chain = {(n, c) for c in (calm, stuck) for n in tracking[c]}
                flagged = now.alerts("LedgerVoteSessionStuck")
                return now if flagged and every_chain <= set(now.changed) else None

            before = wait_until(
                stuck_flagged, timeout=60, interval=POLL_SECONDS, message=exporter.log
            )
            before = next_cycles(exporter, before)  # the stall has begun: a height held
            real = before.last_success[stalled]
            assert not before.alerts("LedgerBlockHeightStalled"), before.problems

            wall.step_to(+STEP)
            ahead = next_cycles(exporter, before, 3)
            assert ahead.last_success[stalled] > real + STEP / 2, "the wall clock did not step"
            # nothing aged by the step: the page and the metrics
            assert not ahead.alerts("LedgerBlockHeightStalled"), ahead.problems
            lines = ahead.alerts("LedgerVoteSessionStuck")
            assert len(lines) == 1 and short(stuck) in lines[0], ahead.problems  # calm: none
            for (node, chain), age in ahead.session_age.items():
                assert age < before.session_age.get((node, chain), 0.0) + SLACK, (node, chain, age)
            held = ahead.still(stalled, calm)
            assert before.still(stalled, calm) <= held < before.still(stalled, calm) + SLACK

            wall.step_to(-STEP)
            behind = next_cycles(exporter, ahead, 3)
            assert behind.last_success[stalled] < real - STEP / 2, "the wall clock did not step"
            # nothing hidden by the step back: the stuck session is still flagged, still aging
            lines = behind.alerts("LedgerVoteSessionStuck")
            assert len(lines) == 1 and short(stuck) in lines[0], behind.problems
            for node in tracking[stuck]:
                assert behind.session_age[(node, stuck)] >= ahead.session_age[(node, stuck)]
            assert held <= behind.still(stalled, calm) < held + SLACK
