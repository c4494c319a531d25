"""End to end: one incident, one notification group, and after recovery nothing but its
resolved notification. Simulator -> exporter process -> real Prometheus on the shipped rules
-> real Alertmanager on the shipped ``alertmanager.yml`` -> a webhook in the test
(``tests/support/incidents.py``: rules, Alertmanager's waits and the chains' pace all scaled
by 60, a minute of the rules' time a second).

The network: four nodes, two chains (seed 0: chain 0 tracked by all four, a council of four;
chain 1 by node-1, node-2 and node-4, its council; node-4 the laggard of both; both chains
with a txMaxTimeTrigger of 45 s, so one block interval puts both at the rules' pace).
Prometheus starts with three days of healthy past (every node up, every chain advancing), so the
budget-burn windows hold what a long-running Prometheus holds, not only the test's minutes.

Every notification of this exporter to a receiver that sends somewhere (pages and tickets;
the watchdog's dead man's switch and the info sink aside) is counted, budget-burn alerts
included: an incident is one group (Alertmanager's ``groupKey``), and once it has recovered
every later notification only resolves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from ledger_simulator import SimulatedNetwork
from tests.support.incidents import (
    HISTORY_MINUTES,
    AlertingStack,
    alerting_stack,
    block_interval,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

NODES, CHAINS, SEED = 4, 2, 0
#: Down in scenario (a): a member of both councils, not the laggard.
DOWN = "node-1"
#: Halted in scenario (b): tracked by every node.
HALTED = 0
#: How long each incident lasts once it has paged, in minutes of the rules' time: long
#: enough for everything it raises to have fired (the quorum alerts' `for`, the fast
#: budget-burn pair's: a node down spends the 1 h window's budget in 5 minutes) and sent.
INCIDENT_MINUTES = 10
PAGE_TIMEOUT = 60.0


@dataclass
class Incidents:
    net: SimulatedNetwork
    stack: AlertingStack

    def chain(self, index: int) -> str:
        return self.net.chain_ids[index]


@pytest.fixture(scope="module")
def incidents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incidents]:
    workdir = tmp_path_factory.mktemp("one-page-per-incident")
    interval = block_interval(SEED, HALTED)
    with SimulatedNetwork(NODES, CHAINS, interval, SEED, port=0) as net:
        listing = net.listing()["nodes"]
        nodes = [{"name": name, "url": url, "blockchains": listing[name]["blockchains"]}
                 for name, url in net.node_urls.items()]  # fmt: skip
        history = (net.node_names, net.chain_ids, HISTORY_MINUTES)
        with alerting_stack(workdir, {"nodes": nodes}, history=history) as stack:
            yield Incidents(net, stack)


def one_incident(
    incidents: Incidents,
    switch: Callable[[bool], None],
    page: dict[str, str],
    lasting: str,
    during: Callable[[], None] = lambda: None,
) -> tuple[int, int]:
    """From a quiet stack, switch a fault on until the alert ``page`` (its labels) is
    delivered to the page receiver and ``lasting`` (a PromQL condition) has held for
    INCIDENT_MINUTES, and ``during()`` has asserted what it must; then off, until the page
    has resolved in Prometheus, everything of the exporter is quiet again and the page's
    group sent its resolved notification. The indexes of the notifications at the start
    and at the recovery."""
    stack = incidents.stack
    stack.wait_quiet("the stack is quiet before the incident")
    since = stack.webhook.mark()
    switch(True)
    try:

        def paged() -> bool:
            return any(item.status == "firing" and page.items() <= item.labels.items()
                       for item in stack.webhook.delivered(since)
                       if item.receiver == "ledger-page")  # fmt: skip

        stack.webhook.wait_for(paged, timeout=PAGE_TIMEOUT, what=f"{page} paged")
        wait_until(stack.held_for(INCIDENT_MINUTES, lasting), timeout=60, interval=0.5,
                   message=f"{lasting} did not hold for {INCIDENT_MINUTES} s")  # fmt: skip
        during()
    finally:
        switch(False)
    selector = ",".join(f'{key}="{value}"' for key, value in page.items())
    wait_until(lambda: not stack.prom.query(f'ALERTS{{{selector},alertstate="firing"}}'),
               timeout=60, interval=0.25, message=f"{page} did not resolve")  # fmt: skip
    recovered = stack.webhook.mark()
    stack.wait_quiet("everything of the incident clears")

    def resolved() -> bool:
        return any(item.status == "resolved" and page.items() <= item.labels.items()
                   for item in stack.webhook.delivered(since))  # fmt: skip

    stack.webhook.wait_for(resolved, timeout=30, what=f"{page} resolved")
    return since, recovered


def assert_one_group(stack: AlertingStack, since: int, recovered: int, name: str) -> None:
    """Since ``since``: one notification group, carrying only ``name`` firing, paged once;
    from ``recovered`` on, nothing firing."""
    why = stack.summary(since)
    groups = stack.groups(since)
    assert len(groups) == 1, f"{len(groups)} notification groups: {groups}\n{why}"
    assert list(groups.values()) == [{name}], f"{groups}\n{why}"
    assert stack.pages(since) == Counter({name: 1}), why
    after = [(a["labels"]["alertname"], a["status"])
             for note in stack.notified(recovered) for a in note["alerts"]]  # fmt: skip
    assert all(status == "resolved" for _, status in after), f"after recovery: {after}\n{why}"


def test_one_node_down_is_one_notification_group(incidents: Incidents) -> None:
    """A node of both councils unreachable from the exporter (both chains still committing
    blocks): its LedgerNodeDown alone pages, in one group; no LedgerCouncilQuorumThin page,
    no budget-burn notification, during the outage or after it."""
    net, stack = incidents.net, incidents.stack

    def switch(enabled: bool) -> None:
        net.set_fault(DOWN, "down", enabled)

    def committing() -> None:
        """Both chains went on committing blocks all along: the quorum was never lost."""
        for chain in net.chain_ids:
            changes = stack.prom.query(
                f'max(changes(ledger_blockchain_height{{blockchain="{chain}"}}'
                f"[{INCIDENT_MINUTES}s]))"
            )
            assert changes and float(changes[0]["value"][1]) > 0, (chain, changes)

    since, recovered = one_incident(
        incidents, switch, {"alertname": "LedgerNodeDown", "node": DOWN},
        f'ledger_node_up{{node="{DOWN}"}} == 0', committing,
    )  # fmt: skip
    assert_one_group(stack, since, recovered, "LedgerNodeDown")
    names = {a["labels"]["alertname"] for note in stack.notified(since) for a in note["alerts"]}
    assert "LedgerCouncilQuorumThin" not in names, stack.summary(since)
    assert not {n for n in names if n.endswith("BudgetBurn")}, stack.summary(since)


def test_a_chain_halted_on_every_node_is_one_notification_group(incidents: Incidents) -> None:
    """Chain 0's vote session never closes on any node, then closes: its
    LedgerBlockchainHalted alone pages, in one group; no budget-burn page while halted nor
    any notification but the resolved one after the chain is back."""
    net, stack = incidents.net, incidents.stack
    chain = incidents.chain(HALTED)

    def switch(enabled: bool) -> None:
        net.set_fault("*", "session_stuck", enabled, chain=chain)

    since, recovered = one_incident(
        incidents, switch, {"alertname": "LedgerBlockchainHalted", "blockchain": chain},
        f'ALERTS{{alertname="LedgerBlockchainHalted",blockchain="{chain}",alertstate="firing"}}',
    )  # fmt: skip
    assert_one_group(stack, since, recovered, "LedgerBlockchainHalted")
    names = {a["labels"]["alertname"] for note in stack.notified(since) for a in note["alerts"]}
    assert not {n for n in names if n.endswith("BudgetBurn")}, stack.summary(since)
