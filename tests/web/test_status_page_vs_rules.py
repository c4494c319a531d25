"""The status page says what Prometheus will say: the page and the shipped rules over the same
simulated incidents, compared step by step.

One ``SimulatedNetwork`` (4 nodes, 2 chains, a block every 0.5 s) is polled every second by
the exporter, run in this process over real sockets so that its status page can keep time
as the shortened rules do; a real Prometheus scrapes it and evaluates every second with
``deploy/prometheus/alerts.yml`` shortened by ``SCALE`` (tests/support/scaling.py: every
``for``, window and age) and ``rules.yml``. The page's memory across cycles (``Held``) runs on
the same clock: its thresholds are the shipped ones with ``time_scale = SCALE``, so each age
it compares is multiplied as the rules' ``time() - timestamp`` are; each alert's ``for`` is
read from ``exporter/rules/thresholds.json`` (the mixin's), unscaled, as the ages are.

The incidents, one after the other, each followed by its recovery: a vote session stuck on
chain A (every node), node-4 down, chain B halted on every node (``stall``). At each step the
test reads Prometheus's ``/api/v1/alerts`` (pending and firing) and the page's lines, and
folds Prometheus's alerts as the page folds its lines (:data:`INHIBITIONS`, whatever the
source's state). Each alert listed must be a line of the page in the same state (pending or
firing) and folded alike: on top where no cause is listed, under one where one is; a line the
page folds under a likely cause (a halt whose condition does not hold yet) is on top in
Prometheus. The two sample at different instants (a scrape and an evaluation after the
exporter's cycle), so a difference may last a moment at a transition; one that lasts longer
than ``SETTLE_SECONDS`` (a scaled minute and a half) fails the test, as does an incident that
neither side reports.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.web.alert_thresholds import SHIPPED, Severity
from exporter.web.problems import INHIBITIONS, Attention, Held, Problem, Scope
from ledger_simulator import SimulatedNetwork
from tests.support.monitoring import PROM_DIR
from tests.support.prometheus import PrometheusServer
from tests.support.scaling import write_shortened
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SCALE = 30  # one minute of the rules' time in 2 s; as test_consensus_alerts.py, for its reasons
JOB = "ledger-exporter"
STEP_SECONDS = 0.5
#: How long a difference may last: a scrape and an evaluation after a cycle, and one more.
SETTLE_SECONDS = 3.0
ROUND_SECONDS = 1.5  # a stuck session's round timer
STUCK, HALTED = 0, 1  # the chains by index
DOWN = "node-4"
#: Alerts the page has no line for, whatever happens: the exporter's own (it cannot show its
#: own absence), the dead man's switch, and those over a history the page does not keep
#: (tests/web/test_status_page_coverage.py says why for each): a simulated fleet's mixed
#: releases (by design), scrape errors around a node's going down and coming back, and the
#: burn rates.
NOT_ON_THE_PAGE = frozenset(
    {
        "LedgerWatchdog",
        "LedgerNodeVersionDrift",
        "LedgerNodeScrapeErrors",
        "LedgerBlockchainReorganized",
        "LedgerNodeAvailabilityBudgetBurn",
        "LedgerBlockchainLivenessBudgetBurn",
    }
)
#: Alerts of one node each that the page lists once per chain, naming the nodes: compared as
#: the chain's one alert, firing once one of its nodes' fires.
ONE_LINE_PER_CHAIN = frozenset({"LedgerVoteSessionStuck"})
Key = tuple[str, str, str, str]  # alertname, node, blockchain, leader (the page's subject)
State = dict[Key, tuple[str, bool]]  # key -> (pending or firing, folded under a cause)


def shown(key: Key) -> bool:
    """Whether an alert is compared: warning or critical, and one the page can list."""
    name = key[0]
    if name.startswith("LedgerExporter") or name in NOT_ON_THE_PAGE:
        return False
    return SHIPPED.severities.get(name) in (Severity.CRITICAL, Severity.WARNING)


# --- the two sides --------------------------------------------------------------------------


def page_state(found: Attention) -> State:
    """The page's alert lines: state, and whether folded under a line of a listed alert (a
    likely cause's line mirrors no alert: its lines count as on top)."""
    state: State = {}

    def walk(line: Problem, under_alert: bool) -> None:
        if line.alert is not None and not line.foreseen:
            key = (line.alert, line.node or "", line.chain or "", line.subject or "")
            if shown(key):
                state[key] = ("pending" if line.pending else "firing", under_alert)
        for below in line.folded:
            walk(below, under_alert or not line.foreseen)

    for top in (*found.identity, *found.network, *found.node_problems, *found.watch):
        walk(top, False)
    return state


def as_line(key: Key) -> Problem:
    name, node, chain, leader = key
    return Problem(Scope.NETWORK, SHIPPED.severity(name), name, "", node or None,
                   chain or None, leader or None)  # fmt: skip


def prometheus_state(alerts: list[dict[str, Any]]) -> State:
    """Prometheus's alerts, each folded if a listed alert is its cause by the page's
    inhibition table (pending or firing, as the page folds)."""
    listed: dict[Key, str] = {}
    for alert in alerts:
        labels = alert["labels"]
        key = (labels["alertname"], labels.get("node", ""), labels.get("blockchain", ""),
               labels.get("leader", ""))  # fmt: skip
        if not labels["alertname"].startswith("Ledger") or not shown(key):
            continue
        if key[0] in ONE_LINE_PER_CHAIN:
            key = (key[0], "", key[2], key[3])
        if listed.get(key) != "firing":
            listed[key] = "firing" if alert["state"] == "firing" else "pending"
    lines = {key: as_line(key) for key in listed}
    state: State = {}
    for key, line in lines.items():
        folded = any(
            rule.source == source.alert and rule.key(source) == rule.key(line)
            and rule.hides(source, line)
            for rule in INHIBITIONS
            for source in lines.values()
        )  # fmt: skip
        state[key] = (listed[key], folded)
    return state


@dataclass
class Stack:
    net: SimulatedNetwork
    prom: PrometheusServer
    held: Held
    chains: list[str]
    tracking: dict[str, list[str]]
    #: each difference seen, the time it started; the longest ones for the report
    open_since: dict[tuple[Key, Any, Any], float] = field(default_factory=dict)
    longest: dict[tuple[Key, Any, Any], float] = field(default_factory=dict)
    seen_page: set[tuple[Key, str]] = field(default_factory=set)
    seen_prometheus: set[tuple[Key, str]] = field(default_factory=set)
    #: the chains whose lines the page folded under a likely cause (a halt not yet an alert)
    likely: set[str] = field(default_factory=set)

    def step(self) -> tuple[State, State]:
        """One comparison: both sides read now; each difference's age updated."""
        found = self.held.latest
        page = page_state(found) if found is not None else {}
        self.likely |= {
            line.chain or ""
            for line in (found.network if found else ())
            if line.foreseen and line.folded
        }
        prom = prometheus_state(self.prom.alerts())
        now = time.monotonic()
        differences = {
            (key, page.get(key), prom.get(key))
            for key in page.keys() | prom.keys()
            if page.get(key) != prom.get(key)
        }
        self.open_since = {d: self.open_since.get(d, now) for d in differences}
        for difference, since in self.open_since.items():
            self.longest[difference] = max(self.longest.get(difference, 0.0), now - since)
        self.seen_page |= {(key, state) for key, (state, _) in page.items()}
        self.seen_prometheus |= {(key, state) for key, (state, _) in prom.items()}
        return page, prom

    def run_until(self, done: Any, timeout: float, what: str) -> None:
        """Compare step by step until ``done(page, prometheus)``."""
        last: list[tuple[State, State]] = []

        def reached() -> bool:
            last[:] = [self.step()]
            return bool(done(*last[0]))

        wait_until(reached, timeout=timeout, interval=STEP_SECONDS,
                   message=lambda: f"{what}; last: {last}")  # fmt: skip

    def lasting(self) -> list[tuple[tuple[Key, Any, Any], float]]:
        return sorted((d, t) for d, t in self.longest.items() if t > SETTLE_SECONDS)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("page-vs-rules")
    alerts = write_shortened(PROM_DIR / "alerts.yml", workdir / "alerts-shortened.yml", SCALE)
    held = Held(replace(SHIPPED.thresholds, time_scale=SCALE))
    with SimulatedNetwork(nodes=4, chains=2, block_interval=0.5, seed=3, port=0) as net:
        listing = net.listing()["nodes"]
        tracking = {
            chain: [node for node, info in listing.items() if chain in info["blockchains"]]
            for chain in net.chain_ids
        }
        for chain in net.chain_ids:  # a chain paged within minutes, not an hour
            for node in tracking[chain]:
                for setting, value in (("txMaxTimeTrigger", "1m"), ("consensusTimeout", "30s")):
                    net.set_fault(node, "consensus_drift", chain=chain, target=setting,
                                  value=value)  # fmt: skip
        nodes = tuple(NodeConfig(name, url) for name, url in net.node_urls.items())
        config = Config(nodes=nodes, scrape_interval=1.0, scrape_timeout=1.0)
        exporter = Exporter(config, status_page=held)
        server = exporter.start("127.0.0.1:0")
        try:
            wait_until(exporter.ready, timeout=30, message="the exporter's first cycle")
            address = f"127.0.0.1:{server.port}"
            with PrometheusServer(
                workdir / "prometheus",
                {JOB: [address]},
                rule_files=[alerts, PROM_DIR / "rules.yml"],
            ) as prom:
                prom.wait_for_scrapes(timeout=30)
                yield Stack(net, prom, held, net.chain_ids, tracking)
        finally:
            exporter.stop()


def quiet(page: State, prom: State) -> bool:
    return not page and not prom


def firing(key_name: str, chain: str = "", node: str = "") -> Any:
    """Both sides list ``key_name`` (of ``chain``/``node``) firing."""

    def both(page: State, prom: State) -> bool:
        def has(state: State) -> bool:
            return any(
                key[0] == key_name and (not chain or key[2] == chain)
                and (not node or key[1] == node) and value[0] == "firing"
                for key, value in state.items()
            )  # fmt: skip

        return has(page) and has(prom)

    return both


def test_the_page_lists_what_prometheus_lists_through_three_incidents(stack: Stack) -> None:
    net, stuck, halted = stack.net, stack.chains[STUCK], stack.chains[HALTED]
    stack.run_until(quiet, 60, "a quiet network before the incidents")

    # a vote session that never closes on chain A: symptoms, then the halt they lead to
    net.set_fault("*", "session_stuck", True, stuck, ROUND_SECONDS)
    stack.run_until(firing("LedgerBlockchainHalted", stuck), 60, "chain A's halt")
    for _ in range(int(2 / STEP_SECONDS)):  # a scaled minute of the halt
        stack.step()
        time.sleep(STEP_SECONDS)
    net.set_fault("*", "session_stuck", False, stuck)
    stack.run_until(quiet, 60, "chain A's recovery")

    # node-4 down, then back
    net.set_fault(DOWN, "down", True)
    stack.run_until(firing("LedgerNodeDown", node=DOWN), 60, "node-4 down")
    net.set_fault(DOWN, "down", False)
    stack.run_until(quiet, 60, "node-4 back")

    # chain B stalled on every node: halted, then recovered
    for node in stack.tracking[halted]:
        net.set_fault(node, "stall", True, halted)
    stack.run_until(firing("LedgerBlockchainHalted", halted), 60, "chain B's halt")
    for node in stack.tracking[halted]:
        net.set_fault(node, "stall", False, halted)
    stack.run_until(quiet, 60, "chain B's recovery")

    lasting = "\n".join(f"{key} page={page} prometheus={prom}: {seconds:.1f}s"
                         for (key, page, prom), seconds in stack.lasting())  # fmt: skip
    assert not lasting, f"differences that lasted:\n{lasting}"
    # the stuck session's symptoms went under its likely cause before the halt's condition held
    assert stuck in stack.likely
    # each side saw the incidents: pending before firing, on both (the stuck session's own
    # alert stays silent on both: the rules leave a halt's symptoms out while it holds)
    for seen in (stack.seen_page, stack.seen_prometheus):
        names = {(key[0], state) for key, state in seen}
        for name in ("LedgerBlockchainHalted", "LedgerNodeDown"):
            assert (name, "pending") in names and (name, "firing") in names, (name, names)
