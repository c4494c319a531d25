"""End to end: the high-availability pair, two of everything, loses one of each part during an
incident and still notifies it once, and its recovery once.

Real processes on 127.0.0.1 (``tests/support/incidents.py``'s ``alerting_stack(pair=True)``):
the simulated network; two exporter processes polling it, each with its own state file,
scraped as one logical exporter (``instance="ledger-exporter"``, ``exporter_replica`` ``a`` and
``b``); two Prometheus on the shipped rules, each with its ``prometheus_replica`` external label
dropped from the alerts it sends, each sending to both Alertmanagers; two Alertmanagers on
the shipped config (every receiver pointed at the test's webhook), clustered by gossip over
loopback. Rules, Alertmanager's waits and the chains' pace are scaled by 60 together (a minute
of the rules' time a second); the cluster's timings and why are in
``tests/support/alertmanager.py`` (``Gossip``). Prometheus starts with three days of healthy
past (the budget-burn windows).

Each incident: a fault switched on until its page is delivered; then one exporter replica,
one Prometheus and one Alertmanager (the one that has been sending) are crashed (SIGKILL), one
after the other, each loss held until every alert it could wrongly raise or resolve would
have been notified; then the fault off, until its resolved notification. The incident's
group (Alertmanager's ``groupKey``) must carry one firing notification and one resolved, and
nothing else page. Between incidents the lost parts are started again where they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ledger_simulator import SimulatedNetwork
from tests.support.alertmanager import Delivered
from tests.support.incidents import (
    HISTORY_MINUTES,
    JOB,
    PAIR,
    REPLICAS,
    WATCHDOG,
    AlertingStack,
    alerting_stack,
    block_interval,
    rule_span_seconds,
)
from tests.support.monitoring import REPLICA_LABEL
from tests.support.prometheus import PROMETHEUS_REPLICA_LABEL
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

NODES, CHAINS, SEED = 4, 2, 0
#: Down in scenario A: a member of both councils, not the laggard (as in
#: test_one_page_per_incident.py, whose network this is).
DOWN = "node-1"
#: Halted on every node in scenario B: tracked by every node.
HALTED = 0
#: The replica, the Prometheus (by index) lost in each incident; the Alertmanager lost is
#: the one that has been sending (the cluster's first).
LOST_REPLICA = REPLICAS[0]
LOST_PROMETHEUS = 0
#: How long Alertmanager holds an alert Prometheus sent, in the test's evaluations (a second
#: each): four times the resend delay (RESEND_FLAG, 1s), Prometheus's own rule. An alert that
#: only the lost Prometheus sent would resolve that much after the loss.
ALERT_VALIDITY = 4
#: How long a crashed Alertmanager's peer takes to find it dead (memberlist's default probes:
#: one a second, a suspicion of four), in seconds.
PEER_DEATH_SECONDS = 5
#: The healthy time the pair must stay silent, in minutes of the rules' time (a second each):
#: longer than any exporter or node alert's ``for`` and the warnings' ``group_wait`` (5m), so
#: that whatever two replicas wrongly raise would have been notified.
HEALTHY_MINUTES = 10
REPLICA_DOWN = "LedgerExporterReplicaDown"
TICKET = "ledger-ticket"
PAGE = "ledger-page"
PAGE_TIMEOUT = 60.0


@dataclass
class Pair:
    net: SimulatedNetwork
    stack: AlertingStack

    def chain(self, index: int) -> str:
        return self.net.chain_ids[index]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    workdir = tmp_path_factory.mktemp("ha-pair")
    with SimulatedNetwork(NODES, CHAINS, block_interval(SEED, HALTED), SEED, port=0) as net:
        listing = net.listing()["nodes"]
        nodes = [{"name": name, "url": url, "blockchains": listing[name]["blockchains"]}
                 for name, url in net.node_urls.items()]  # fmt: skip
        history = (net.node_names, net.chain_ids, HISTORY_MINUTES)
        with alerting_stack(workdir, {"nodes": nodes}, history=history, pair=True) as stack:
            yield Pair(net, stack)


def matches(item: Delivered, labels: dict[str, str]) -> bool:
    return labels.items() <= item.labels.items()


def the_group(stack: AlertingStack, since: int, page: dict[str, str]) -> list[dict[str, Any]]:
    """The notifications, from the ``since``-th on, of the group that paged ``page``."""
    notes = stack.webhook.received()[since:]
    keys = {note["groupKey"] for note in notes if note["receiver"] == PAGE
            and any(page.items() <= a["labels"].items() for a in note["alerts"])}  # fmt: skip
    assert len(keys) <= 1, f"{page} notified in {len(keys)} groups: {keys}"
    return [note for note in notes if note["groupKey"] in keys]


def page_states(stack: AlertingStack, since: int, page: dict[str, str]) -> list[str]:
    """Each notification of the incident's group, from the ``since``-th on, as the state it
    carried ``page`` in (firing, resolved)."""
    return [alert["status"] for note in the_group(stack, since, page)
            for alert in note["alerts"] if page.items() <= alert["labels"].items()]  # fmt: skip


def replica_tickets_only(stack: AlertingStack, since: int) -> None:
    """The lost replica's own alert, if it was sent, went as a ticket, never a page."""
    sent = [item for item in stack.webhook.delivered(since) if item.alertname == REPLICA_DOWN]
    assert all(item.receiver == TICKET and item.labels.get("severity") == "warning"
               for item in sent), stack.summary(since)  # fmt: skip


def assert_rules_evaluate(stack: AlertingStack) -> None:
    """Every rule of every running Prometheus evaluates without error over two replicas (a
    one-to-one match meeting both replicas' series fails, and its alert could never fire)."""
    for prom in stack.proms:
        if prom.running:
            broken = [(rule["name"], rule["lastError"]) for group in prom.rules()
                      for rule in group["rules"] if rule["health"] == "err"]  # fmt: skip
            assert broken == [], broken


def hold_through_loss(stack: AlertingStack, what: str, firing: str, raise_seconds: float) -> None:
    """After losing ``what``: until the running Prometheus has evaluated, since the loss,
    enough for everything the loss could raise or resolve to have been sent and notified
    (``raise_seconds``: an alert's ``for`` or an alert's validity in Alertmanager, then
    Alertmanager's longest wait), with ``firing`` (an ALERTS selector) firing throughout."""
    seconds = raise_seconds + stack.longest_wait
    start = stack.now()
    held = stack.held_for(seconds, firing)
    wait_until(lambda: stack.now() >= start + seconds + 1 and held(), timeout=seconds + 60,
               interval=0.5, message=f"{firing} not held after losing {what}")  # fmt: skip


def through_losses(pair: Pair, switch: Callable[[bool], None], page: dict[str, str]) -> int:
    """From the whole pair, quiet: ``switch`` a fault on until ``page`` (its labels) is
    delivered to the page receiver; lose a replica, a Prometheus, an Alertmanager, each
    asserted on; switch it off until the resolved notification. The index of the first
    notification of the incident."""
    stack = pair.stack
    stack.restore()
    stack.wait_quiet("the pair is quiet before the incident")
    assert_rules_evaluate(stack)
    since = stack.webhook.mark()
    selector = ",".join(f'{key}="{value}"' for key, value in page.items())
    firing = f'ALERTS{{{selector},alertstate="firing"}}'
    switch(True)
    try:

        def paged() -> bool:
            return any(item.status == "firing" and item.receiver == PAGE and matches(item, page)
                       for item in stack.webhook.delivered(since))  # fmt: skip

        stack.webhook.wait_for(paged, timeout=PAGE_TIMEOUT, what=f"{page} paged")
        # the other Alertmanager's copy of the page, if it sent one, would arrive within its
        # peer timeout: the first loss's hold is longer, and its assertions count it

        def lose_alertmanager() -> None:
            [sender] = [i for i, am in enumerate(stack.ams) if am.position() == 0]
            stack.lose_alertmanager(sender)

        # each loss, and how long until what it could wrongly raise or resolve is sent: a
        # replica's, LedgerExporterDown paging; a Prometheus's, the alerts only it sent
        # expiring in Alertmanager; an Alertmanager's, its death found by its peer's probes
        losses: list[tuple[str, Callable[[], None], float]] = [
            (f"exporter replica {LOST_REPLICA}", lambda: stack.lose_exporter(LOST_REPLICA),
             rule_span_seconds("LedgerExporterDown")),
            (f"Prometheus {LOST_PROMETHEUS}", lambda: stack.lose_prometheus(LOST_PROMETHEUS),
             ALERT_VALIDITY),
            ("the Alertmanager that sent", lose_alertmanager, PEER_DEATH_SECONDS),
        ]  # fmt: skip
        for what, lose, raise_seconds in losses:
            lose()
            hold_through_loss(stack, what, firing, raise_seconds)
            why = f"after losing {what}:\n{stack.summary(since)}"
            assert page_states(stack, since, page) == ["firing"], why
            assert stack.pages(since, ignore=[REPLICA_DOWN]) == {page["alertname"]: 1}, why
            assert not stack.pages(since)[REPLICA_DOWN], why
        replica_tickets_only(stack, since)
    finally:
        switch(False)

    def resolved() -> bool:
        return "resolved" in page_states(stack, since, page)

    stack.webhook.wait_for(resolved, timeout=60, what=f"{page} resolved")
    stack.wait_quiet("everything of the incident clears", ignore=[REPLICA_DOWN])
    why = stack.summary(since)
    assert page_states(stack, since, page) == ["firing", "resolved"], why
    assert len(the_group(stack, since, page)) == 2, why
    assert stack.pages(since) == {page["alertname"]: 1}, why
    replica_tickets_only(stack, since)
    return since


def test_the_pair_runs_two_of_everything_and_is_quiet_when_healthy(pair: Pair) -> None:
    """Two replicas scraped as one exporter by both Prometheus, two Alertmanagers in one
    cluster; healthy for a minute of the rules' time, nothing is sent but the watchdog."""
    stack = pair.stack
    assert [len(am.peers()) for am in stack.ams] == [2, 2]
    for prom in stack.proms:
        labels = sorted((t["labels"]["instance"], t["labels"][REPLICA_LABEL])
                        for t in prom.targets() if t["labels"]["job"] == JOB)  # fmt: skip
        assert labels == [(PAIR, replica) for replica in REPLICAS], labels
    # both Prometheus send the watchdog; without their replica label it is one alert
    wait_until(lambda: all(am.alerts(alertname=WATCHDOG) for am in stack.ams),
               message="the watchdog did not reach both Alertmanagers")  # fmt: skip
    for am in stack.ams:
        sent = [alert["labels"] for alert in am.alerts(alertname=WATCHDOG)]
        assert len(sent) == 1 and PROMETHEUS_REPLICA_LABEL not in sent[0], sent
    stack.wait_quiet("the start-up is over")  # scrapes begin 5 s (5 scaled minutes) late
    since = stack.webhook.mark()
    up = f'count(up{{job="{JOB}",instance="{PAIR}"}} == 1) == {len(REPLICAS)}'
    wait_until(stack.held_for(HEALTHY_MINUTES, up), timeout=60, interval=0.5,
               message=f"both replicas not up for {HEALTHY_MINUTES} minutes")  # fmt: skip
    assert_rules_evaluate(stack)
    stack.wait_quiet("healthy")
    assert stack.notified(since) == [], stack.summary(since)
    watchdog = stack.webhook.firing(receivers=["ledger-deadmansswitch"], since=since)
    assert watchdog == {WATCHDOG: 1}, stack.webhook.summary(since)


def test_a_node_down_pages_once_through_the_loss_of_one_of_each(pair: Pair) -> None:
    """Scenario A: a node stopped is one LedgerNodeDown page, not repeated nor resolved while
    a replica, a Prometheus and an Alertmanager are lost; the node back, one resolved."""
    net = pair.net

    def switch(enabled: bool) -> None:
        net.set_fault(DOWN, "down", enabled)

    through_losses(pair, switch, {"alertname": "LedgerNodeDown", "node": DOWN})


def test_a_chain_halted_everywhere_pages_once_through_the_loss_of_one_of_each(
    pair: Pair,
) -> None:
    """Scenario B: chain 0's vote session stuck on every node is one LedgerBlockchainHalted
    page through the same losses; the chain back, one resolved."""
    net, chain = pair.net, pair.chain(HALTED)

    def switch(enabled: bool) -> None:
        net.set_fault("*", "session_stuck", enabled, chain=chain)

    through_losses(pair, switch, {"alertname": "LedgerBlockchainHalted", "blockchain": chain})
