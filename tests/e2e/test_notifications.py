"""End to end, issue 36: one incident, one notification. Simulator -> exporter process -> real
Prometheus with the shipped rules -> real Alertmanager with the shipped config -> a webhook
receiver in the test.

**The faults stack**: a ``SimulatedNetwork`` (8 nodes, 2 chains, seed 3: two councils of 4,
and three nodes in neither) polled every second by ``python -m exporter``,
whose config puts one of the council-less nodes in maintenance for the whole module. One
Prometheus scrapes it and evaluates every second the rule files the shipped
``deploy/prometheus/prometheus.yml`` loads, each shortened by ``SCALE = 60`` as
``tests/e2e/test_alerts.py`` does (``tests/support/scaling.py``), and sends its alerts to one
Alertmanager running ``deploy/alertmanager/alertmanager.yml`` with every receiver pointed at
the webhook and its route timings divided by the same scale (``tests/support/alertmanager.py``),
but ``group_wait`` kept at the two evaluations it spans at full scale (30 s of Prometheus's
15 s): the test's Prometheus evaluates every second, a minute of the rules' time, and half a
second would notify apart what an incident raises an evaluation apart.
The network's block interval (the time its chains' ``txMaxTimeTrigger`` takes) is the halted
chain's ``txMaxTimeTrigger`` divided by the same scale: that chain's consensus runs at the
rules' pace, so its rounds fail against the shortened rules as they would at full scale (at
twice the pace, its leaders' failed rounds fired ``LedgerLeaderFailingRounds`` well before the
halt could be told, sooner than the chain's own settings would have them).
The scenarios run one after the other on it, each waiting until the last one's alerts have
cleared, and count the alerts of this exporter delivered firing to a receiver that sends
somewhere (``ledger-null``, the info alerts' sink, aside; LedgerWatchdog aside). That the alerts
a scenario must not page for really fired, and were held back by the inhibition tree, is
asserted on Alertmanager's own view (``inhibitedBy``), so "one notification" cannot pass for
want of the others.

**The demo stack**: the network ``make demo`` runs (its topology and seed; polled every
second, and its chains at the rules' pace, a block interval of their txMaxTimeTrigger
divided by the scale, so that the scaled rules see the chains' own settings as they would),
with the demo's exporter config, and its own Prometheus with the same shortened rules,
running beside the scenarios: in 15 s from its first scrape, the equivalent of 15 minutes,
no alert of warning or critical severity goes even pending.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ledger_simulator import SimulatedNetwork
from ledger_simulator.demo import build_parser
from ledger_simulator.settings import trigger_seconds
from tests.support.alertmanager import (
    RESEND_FLAG,
    AlertmanagerServer,
    WebhookReceiver,
    for_tests,
    load_config,
    sinks,
)
from tests.support.incidents import exporter_on, group_wait_floor, shipped_rule_files
from tests.support.prometheus import PrometheusServer
from tests.support.scaling import write_shortened
from tests.support.simulator import watch_list
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SCALE = 60
JOB = "ledger-exporter"
SHIPPED_ALERTMANAGER = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
WATCHDOG = "LedgerWatchdog"
MAINTENANCE_ALERT = "LedgerNodeInMaintenance"
#: Burn-rate alerts read the recording rules' windows (rules.yml: 5m to 30d), which are not
#: shortened while the faults are: an outage of seconds here stands for minutes, yet it spends
#: a real 5-minute window's budget, and keeps it spent across the next scenarios. A test
#: artefact, left out of what the scenarios count and wait for, as tests/e2e/test_alerts.py's
#: BURN_RATE is; deploy/prometheus/tests/slo*.test.yml test them at their own pace.
BURN_RATE = frozenset({"LedgerNodeAvailabilityBudgetBurn", "LedgerBlockchainLivenessBudgetBurn"})
#: What the scenarios neither count nor wait for: the watchdog, which always fires, and the
#: burn-rate alerts.
UNCOUNTED = frozenset({WATCHDOG}) | BURN_RATE
#: The faults network: seed 3's 8 nodes have councils of 4 on both chains (one member of
#: margin each), and node-5, node-6, node-7 in neither: taking one of those down thins no
#: quorum, so its LedgerNodeDown is the incident's only cause.
NODES, CHAINS, SEED = 8, 2, 3
DOWN, IN_MAINTENANCE = "node-6", "node-7"
HALTED = 1  # the chain halted on every node (by index): tracked by six nodes
#: A block interval of the halted chain's txMaxTimeTrigger on the rules' clock (60 s: 1 s).
BLOCK_INTERVAL = trigger_seconds(SEED, HALTED) / SCALE
#: The demo's 15 minutes, in evaluations of the shortened rules (one a second).
DEMO_SECONDS = 15 * 60 // SCALE
Alert = dict[str, Any]


def shortened_rules(workdir: Path) -> list[Path]:
    """Each shipped rule file shortened by SCALE, into ``workdir``."""
    return [write_shortened(path, workdir / f"short-{path.name}", SCALE)
            for path in shipped_rule_files()]  # fmt: skip


def node_entries(net: SimulatedNetwork, **extra: Any) -> list[dict[str, Any]]:
    """The config's ``nodes``: every simulated node with the chains it tracks."""
    listing = net.listing()["nodes"]
    return [{"name": name, "url": url, "blockchains": listing[name]["blockchains"], **extra}
            for name, url in net.node_urls.items()]  # fmt: skip


# --- the demo stack -------------------------------------------------------------------------


@dataclass
class Demo:
    prom: PrometheusServer
    instance: str
    since: float = 0.0  # when its window starts: see settle()

    def settle(self) -> None:
        """Start the window once LedgerExporterAbsent has cleared: Prometheus scrapes a new
        target only 5 s after its start whatever the scale, five scaled minutes with no
        target, which the rule's start-up guard (a minute at full scale) cannot cover once
        scaled; at full scale the guard keeps it quiet (its promtool unit test)."""
        wait_until(
            lambda: not any(a["labels"]["alertname"] == "LedgerExporterAbsent"
                            for a in self.prom.alerts()),
            timeout=30, interval=0.25, message="LedgerExporterAbsent did not clear",
        )  # fmt: skip
        self.since = time.time()


@contextlib.contextmanager
def demo_stack(workdir: Path, rules: list[Path]) -> Iterator[Demo]:
    """``make demo``'s network and exporter config, its chains at the rules' pace, with its
    own Prometheus on the shortened rules."""
    flags = build_parser().parse_args([])
    pace = trigger_seconds(flags.seed, 0) / SCALE  # its chains' txMaxTimeTrigger: 30 s both
    with SimulatedNetwork(nodes=flags.nodes, chains=flags.chains, block_interval=pace,
                          seed=flags.seed, port=0) as net:  # fmt: skip
        nodes = [{"name": name, "url": url, "labels": {"env": "demo"}}
                 for name, url in net.node_urls.items()]  # fmt: skip
        settings = {"nodes": nodes, "watch": watch_list(net)}
        with exporter_on(workdir / "demo.yml", settings) as address:
            server = PrometheusServer(workdir / "demo-prometheus", {JOB: [address]},
                                      rule_files=rules)  # fmt: skip
            with server as prom:
                yield Demo(prom, address)


# --- the faults stack -----------------------------------------------------------------------


@dataclass
class Stack:
    net: SimulatedNetwork
    prom: PrometheusServer
    am: AlertmanagerServer
    webhook: WebhookReceiver
    instance: str
    paging: frozenset[str]  # the receivers that send somewhere
    sink: str  # where info alerts go
    demo: Demo

    def pages(self, since: int) -> Counter[str]:
        """This exporter's alerts delivered firing to a paging receiver since ``since``,
        by name (each alert once), the watchdog and the burn-rate alerts aside."""
        return self.webhook.firing(
            receivers=self.paging, ignore=UNCOUNTED, where={"instance": self.instance},
            since=since,
        )  # fmt: skip

    def chain(self, index: int) -> str:
        return self.net.chain_ids[index]

    def tracking(self, index: int) -> list[str]:
        listing = self.net.listing()["nodes"]
        return [name for name, info in listing.items() if self.chain(index) in info["blockchains"]]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("notifications-e2e")
    rules = shortened_rules(workdir)
    shipped = load_config(SHIPPED_ALERTMANAGER)
    sink_names = sinks(shipped)
    assert len(sink_names) == 1, f"one receiver that sends nowhere expected: {sink_names}"
    with contextlib.ExitStack() as stop:
        webhook = WebhookReceiver()
        stop.callback(webhook.stop)
        am = stop.enter_context(
            AlertmanagerServer(
                workdir / "alertmanager",
                for_tests(shipped, webhook, SCALE, min_group_wait=group_wait_floor(shipped)),
            )
        )
        net = stop.enter_context(SimulatedNetwork(NODES, CHAINS, BLOCK_INTERVAL, SEED, port=0))
        until = (datetime.now(UTC) + timedelta(days=1)).isoformat(timespec="seconds")
        maintenance = [{"node": IN_MAINTENANCE, "until": until, "reason": "kernel upgrade"}]
        settings = {"nodes": node_entries(net), "maintenance": maintenance}
        address = stop.enter_context(exporter_on(workdir / "exporter.yml", settings))
        server = PrometheusServer(workdir / "prometheus", {JOB: [address]}, rule_files=rules,
                                  extra_flags=[RESEND_FLAG])  # fmt: skip
        server.config["alerting"] = am.alerting()
        prom = stop.enter_context(server)
        demo = stop.enter_context(demo_stack(workdir, rules))
        prom.wait_for_scrapes(timeout=30)
        demo.prom.wait_for_scrapes(timeout=30)
        demo.settle()
        receivers = {receiver["name"] for receiver in shipped["receivers"]}
        yield Stack(net, prom, am, webhook, address, frozenset(receivers - sink_names),
                    next(iter(sink_names)), demo)  # fmt: skip


# --- what a scenario waits for --------------------------------------------------------------


def firing_here(stack: Stack) -> list[Alert]:
    """This exporter's alerts firing in Prometheus, the maintenance entry's and the burn-rate
    alerts aside."""
    return [
        alert for alert in stack.prom.alerts()
        if alert["state"] == "firing"
        and alert["labels"].get("instance") == stack.instance
        and alert["labels"]["alertname"] != MAINTENANCE_ALERT
        and alert["labels"]["alertname"] not in BURN_RATE
    ]  # fmt: skip


def held_here(stack: Stack) -> list[Alert]:
    """This exporter's alerts Alertmanager still holds, the maintenance entry's and the
    burn-rate alerts aside."""
    return [a for a in stack.am.alerts(instance=stack.instance)
            if a["labels"]["alertname"] != MAINTENANCE_ALERT
            and a["labels"]["alertname"] not in BURN_RATE]  # fmt: skip


def wait_quiet(stack: Stack, what: str) -> None:
    """Until nothing of this exporter fires in Prometheus nor is held in Alertmanager (an
    alert released from an inhibition when its cause clears would be held, then sent)."""
    wait_until(
        lambda: not firing_here(stack) and not held_here(stack),
        timeout=90,
        interval=0.25,
        message=lambda: f"{what}: firing {firing_here(stack)}, held {held_here(stack)}",
    )


def inhibited(stack: Stack, labels: dict[str, str], by: str) -> Callable[[], bool]:
    """A predicate: Alertmanager holds the alert with ``labels`` suppressed by an alert named
    ``by`` (it fired, and the inhibition tree held it back)."""

    def held_back() -> bool:
        found = stack.am.alerts(instance=stack.instance, **labels)
        sources = {a["fingerprint"]: a["labels"]["alertname"] for a in stack.am.alerts()}
        return bool(found) and all(
            by in {sources.get(print_) for print_ in alert["status"]["inhibitedBy"]}
            for alert in found
        )

    return held_back


def not_held_back(stack: Stack, labels: dict[str, str], by: str) -> str:
    """What Alertmanager holds of ``labels``, for the failure message."""
    return f"{labels} not held back by {by}: {stack.am.alerts(instance=stack.instance, **labels)}"


def incident(
    stack: Stack,
    switch: Callable[[bool], None],
    page: dict[str, str],
    held_back: list[tuple[dict[str, str], str]],
) -> int:
    """Switch a fault on until the alert ``page`` (its labels) is delivered and every alert
    of ``held_back`` (labels, the inhibiting alert's name) is held back by Alertmanager, then
    off until all clears; the index of the notifications it started at."""
    wait_quiet(stack, "the previous scenario's alerts clear")
    since = stack.webhook.mark()
    switch(True)
    try:

        def paged() -> bool:
            return any(
                item.status == "firing" and page.items() <= item.labels.items()
                for item in stack.webhook.delivered(since)
                if item.receiver in stack.paging
            )

        stack.webhook.wait_for(paged, timeout=60, what=f"{page} delivered", ignore=UNCOUNTED)
        for labels, by in held_back:
            wait_until(inhibited(stack, labels, by), timeout=60, interval=0.25,
                       message=partial(not_held_back, stack, labels, by))  # fmt: skip
    finally:
        switch(False)
    wait_quiet(stack, f"{page['alertname']} and what it held back clear")
    return since


# --- the scenarios ----------------------------------------------------------------------------


def test_the_watchdog_is_delivered(stack: Stack) -> None:
    """LedgerWatchdog fires always and reaches a receiver that sends somewhere: a dead man's
    switch outside the monitoring stack pages when it stops."""
    stack.webhook.wait_for(
        lambda: stack.webhook.firing(receivers=stack.paging)[WATCHDOG] >= 1,
        what="the watchdog delivered",
    )
    delivered = [d for d in stack.webhook.delivered() if d.alertname == WATCHDOG]
    assert {d.labels["severity"] for d in delivered} == {"none"}, delivered


def test_a_chain_halted_on_every_node_pages_once(stack: Stack) -> None:
    """The chain's vote session never closes on any node: one LedgerBlockchainHalted; the
    nodes' stall alerts are the halt's symptom and never fire while it holds."""
    chain = stack.chain(HALTED)

    def switch(enabled: bool) -> None:
        stack.net.set_fault("*", "session_stuck", enabled, chain=chain)

    page = {"alertname": "LedgerBlockchainHalted", "blockchain": chain}
    since = incident(stack, switch, page, [])
    pages = stack.pages(since)
    assert pages == Counter({"LedgerBlockchainHalted": 1}), stack.webhook.summary(since, UNCOUNTED)


def test_one_node_down_pages_once_and_a_node_in_maintenance_not_at_all(stack: Stack) -> None:
    """node-6 and node-7 (in maintenance) go down together: node-6's LedgerNodeDown is the
    one page; node-7's fires and is held back by its maintenance, which goes to the sink."""

    def switch(enabled: bool) -> None:
        for node in (DOWN, IN_MAINTENANCE):
            stack.net.set_fault(node, "down", enabled)

    page = {"alertname": "LedgerNodeDown", "node": DOWN}
    held = [({"alertname": "LedgerNodeDown", "node": IN_MAINTENANCE}, MAINTENANCE_ALERT)]
    since = incident(stack, switch, page, held)
    pages = stack.pages(since)
    assert pages == Counter({"LedgerNodeDown": 1}), stack.webhook.summary(since, UNCOUNTED)
    downs = {d.labels["node"] for d in stack.webhook.delivered(since)
             if d.alertname == "LedgerNodeDown" and d.receiver in stack.paging}  # fmt: skip
    assert downs == {DOWN}
    mine = [d for d in stack.webhook.delivered() if d.labels.get("instance") == stack.instance]
    to_sink = {(d.alertname, d.labels.get("node")) for d in mine if d.receiver == stack.sink}
    assert to_sink == {(MAINTENANCE_ALERT, IN_MAINTENANCE)}, stack.webhook.summary(0, [WATCHDOG])


def test_the_exporter_reaching_no_node_pages_once(stack: Stack) -> None:
    """Every node down, as the exporter sees it when its own network path fails: one
    LedgerAllNodesDown; each node's LedgerNodeDown fires and is held back."""

    def switch(enabled: bool) -> None:
        for node in stack.net.node_names:
            stack.net.set_fault(node, "down", enabled)

    page = {"alertname": "LedgerAllNodesDown"}
    held = [({"alertname": "LedgerNodeDown", "node": node}, "LedgerAllNodesDown")
            for node in stack.net.node_names if node != IN_MAINTENANCE]  # fmt: skip
    since = incident(stack, switch, page, held)
    pages = stack.pages(since)
    assert pages == Counter({"LedgerAllNodesDown": 1}), stack.webhook.summary(since, UNCOUNTED)


def test_the_fault_free_demo_raises_nothing_in_15_minutes(stack: Stack) -> None:
    """The demo's network beside the scenarios, from its first scrape (``Demo.settle``): no
    alert of warning or critical severity ever pending or firing (ALERTS keeps both states)
    over at least the equivalent of 15 minutes of evaluations."""
    demo = stack.demo
    wait_until(lambda: time.time() - demo.since > DEMO_SECONDS + 1, timeout=60, interval=0.5)
    window = f"[{math.floor(time.time() - demo.since)}s]"
    scrapes = demo.prom.query(f'count_over_time(up{{job="{JOB}"}}{window})')
    assert scrapes and float(scrapes[0]["value"][1]) >= DEMO_SECONDS, scrapes
    seen = demo.prom.query(f'count_over_time(ALERTS{{severity=~"warning|critical"}}{window})')
    wrong = sorted(
        (s["metric"]["alertname"], s["metric"]["alertstate"], s["metric"].get("node", ""),
         s["metric"].get("blockchain", ""))
        for s in seen
    )  # fmt: skip
    assert not wrong, f"alerts on the fault-free demo: {wrong}"
    # the rules were evaluated over that time, all of them healthy
    for group in demo.prom.rules():
        for rule in group["rules"]:
            assert rule["health"] == "ok", f"{rule['name']}: {rule.get('lastError')}"
