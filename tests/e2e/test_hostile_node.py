"""End to end: one hostile node of a four-node council can neither page for the network nor
silence what the other nodes raise. Three honest simulated nodes and a fourth whose answers
a stand-in rewrites (``tests/support/hostile.py``: a ``FakeNode`` in front of the simulated
node-4, which keeps its place in the council) -> exporter process -> real Prometheus on the
shipped rules -> real Alertmanager on the shipped ``alertmanager.yml`` -> a webhook in the
test (``tests/support/incidents.py``: rules, Alertmanager's waits and the chains' pace all
scaled by 60).

The network: seed 0, four nodes, two chains (chain 0 tracked by all four, its council;
chain 1 by node-1, node-2 and node-4), both at the rules' pace; the exporter polls every
chain each node lists (no ``blockchains`` set: the hostile node's own chains reach it) and
watches chain 0's token contract and a wallet. Each scenario starts from a quiet stack,
switches its lies on, waits until what it lies about has held longer than the rules
concerned need to fire, asserts what paged (the webhook) and what Alertmanager holds back
(``/api/v2/alerts``, ``inhibitedBy``), and switches them off again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ledger_simulator import SimulatedNetwork
from ledger_simulator.settings import timeout_seconds, trigger_seconds
from tests.support.fakenode import FakeNode
from tests.support.hostile import Hostility, frozen_chain_ids
from tests.support.incidents import (
    HISTORY_MINUTES,
    JOB,
    SCALE,
    AlertingStack,
    alerting_stack,
    block_interval,
    rule_span_seconds,
    shipped_rule_files,
)
from tests.support.scaling import load_rules
from tests.support.simulator import watch_list
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

NODES, CHAINS, SEED = 4, 2, 0
HOSTILE = "node-4"  # in both councils
HONEST = ("node-1", "node-2", "node-3")
CHAIN = 0  # tracked by every node
INFLATION = 10**9
FROZEN_CHAINS = 30
TIMEOUT = 60.0
#: Left out of what the scenarios wait for and count (but for the frozen chains, which no
#: notification may name at all): the real chains' budget-burn alerts, whose notifications
#: tests/e2e/test_one_page_per_incident.py counts; the hidden halt lasts minutes of the
#: rules' time, and a halt that failed to page lasts an hour, whose budget the chain then
#: burns through the scenarios after it.
BURN_RATE = ("LedgerNodeAvailabilityBudgetBurn", "LedgerBlockchainLivenessBudgetBurn")


@dataclass
class Hostile:
    net: SimulatedNetwork
    stack: AlertingStack
    hostility: Hostility
    stand_in: FakeNode
    watched: dict[str, Any]

    @property
    def chain(self) -> str:
        return self.net.chain_ids[CHAIN]

    def network_pages(self, since: int) -> list[tuple[str, str]]:
        """Pages delivered firing since ``since`` about no node in particular (the network's
        or a chain's: no ``node`` label), as (alertname, blockchain); burn rates aside."""
        return sorted(
            (item.alertname, item.labels.get("blockchain", ""))
            for item in self.stack.webhook.delivered(since)
            if item.receiver == "ledger-page" and item.status == "firing"
            and item.labels.get("instance") == self.stack.instance
            and "node" not in item.labels and item.alertname not in BURN_RATE
        )  # fmt: skip

    def quiet(self) -> int:
        """Wait until the last scenario's alerts cleared; the notifications' mark."""
        # no settling: what a scenario counts is firing, and a late resolved notification
        # of the last one cannot pass for it
        self.stack.wait_quiet("the previous scenario's alerts clear", ignore=BURN_RATE,
                              settle=False)  # fmt: skip
        return self.stack.webhook.mark()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    workdir = tmp_path_factory.mktemp("hostile-node")
    hostility = Hostility()
    with SimulatedNetwork(NODES, CHAINS, block_interval(SEED, CHAIN), SEED, port=0) as net:
        stand_in = FakeNode(keep_alive=True).start()
        try:
            stand_in.stand_in(net.node_urls[HOSTILE].rstrip("/"), hostility.rewrite)
            urls = {**net.node_urls, HOSTILE: stand_in.url}
            nodes = [{"name": name, "url": url} for name, url in urls.items()]
            watched = watch_list(net)
            history = (net.node_names, net.chain_ids, HISTORY_MINUTES)
            settings = {"nodes": nodes, "watch": watched}
            with alerting_stack(workdir, settings, history=history) as stack:
                yield Hostile(net, stack, hostility, stand_in, watched)
        finally:
            stand_in.stop()


def behind_threshold() -> float:
    """The blocks behind over which LedgerNodeBehind fires (its rule's threshold)."""
    rules = [load_rules(path) for path in shipped_rule_files()]
    expr = next(r["LedgerNodeBehind"]["expr"] for r in rules if "LedgerNodeBehind" in r)
    found = re.search(r"ledger_blockchain_blocks_behind\{[^}]*\}(?:\[\w+\])?\)*\s*>\s*(\d+)", expr)
    assert found, f"no threshold in LedgerNodeBehind: {expr}"
    return float(found[1])


def test_inflated_heights_make_no_honest_node_behind(hostile: Hostile) -> None:
    """The hostile node reports every height 10^9 too high: the honest nodes stay about 0
    blocks behind, and no LedgerNodeBehind nor LedgerNodeBehindTime of theirs goes even
    pending."""
    stack = hostile.stack
    hostile.quiet()
    honest = "|".join(HONEST)
    span = max(rule_span_seconds("LedgerNodeBehind"), rule_span_seconds("LedgerNodeBehindTime"))
    hostile.hostility.inflate = INFLATION
    try:
        inflated = f'ledger_blockchain_height{{node="{HOSTILE}"}} > {INFLATION}'
        wait_until(stack.held_for(span + 2, inflated), timeout=TIMEOUT, interval=0.5,
                   message=f"{HOSTILE}'s inflated heights not read for {span + 2} s")  # fmt: skip
        behind = stack.prom.values(f'ledger_blockchain_blocks_behind{{node=~"{honest}"}}',
                                   "node", "blockchain")  # fmt: skip
        assert behind, "no ledger_blockchain_blocks_behind of the honest nodes"
        assert max(behind.values()) <= behind_threshold(), behind
        raised = stack.prom.query(
            f'count_over_time(ALERTS{{alertname=~"LedgerNodeBehind|LedgerNodeBehindTime",'
            f'node=~"{honest}"}}[{round(span) + 2}s])'
        )
        assert not raised, [s["metric"] for s in raised]
    finally:
        hostile.hostility.inflate = 0


def test_a_halt_hidden_behind_one_rising_node_still_pages(hostile: Hostile) -> None:
    """Chain 0 stalls on every node while the hostile node reports its height rising:
    LedgerBlockchainHalted still pages for the chain."""
    net, stack, chain = hostile.net, hostile.stack, hostile.chain
    since = hostile.quiet()
    net.set_fault("*", "session_stuck", True, chain=chain)
    hostile.hostility.rising = frozenset({chain})
    try:

        def halted() -> bool:
            return ("LedgerBlockchainHalted", chain) in hostile.network_pages(since)

        stack.webhook.wait_for(halted, timeout=TIMEOUT, what=f"{chain} halted, paged")
        rising = stack.prom.query(
            f'changes(ledger_blockchain_height{{node="{HOSTILE}",blockchain="{chain}"}}[5s])'
        )
        assert rising and float(rising[0]["value"][1]) > 0, f"the halt was not hidden: {rising}"
    finally:
        hostile.hostility.rising = frozenset()
        net.set_fault("*", "session_stuck", False, chain=chain)


def test_a_new_peer_id_with_no_peers_pages_nothing_nor_holds_back(hostile: Hostile) -> None:
    """The hostile node claims a new peerId and no peers: no LedgerNetworkPartitioned page,
    and the honest nodes' LedgerNodePeersLow, as Prometheus would send it, is not held back
    (in a network of four, every honest node keeps three peers: the alert is posted to
    Alertmanager as Prometheus sends it, and judged by the inhibitions the hostile node's
    alerts would cause)."""
    stack = hostile.stack
    since = hostile.quiet()
    span = rule_span_seconds("LedgerNetworkPartitioned") + stack.group_wait
    hostile.hostility.identity = "12D3KooWHostileNodeWithANewIdentityAndNoPeers"
    posted = [peers_low(stack, node) for node in HONEST]
    try:
        alone = f'ledger_node_peers{{node="{HOSTILE}"}} == 0'
        wait_until(stack.held_for(span + 2, alone), timeout=TIMEOUT, interval=0.5,
                   message=f"{HOSTILE} was not read with no peers for {span + 2} s")  # fmt: skip
        stack.am.post_alerts(posted)

        def all_held() -> dict[str, list[str]] | None:
            found = stack.inhibitors(alertname="LedgerNodePeersLow")
            return found if len(found) == len(HONEST) else None

        held = wait_until(all_held, timeout=TIMEOUT, interval=0.25,
                          message="the posted LedgerNodePeersLow not held")  # fmt: skip
        assert held == {node: [] for node in HONEST}, held
        assert hostile.network_pages(since) == [], stack.summary(since)
    finally:
        hostile.hostility.identity = None
        ended = datetime.now(UTC).isoformat()
        stack.am.post_alerts([{**alert, "endsAt": ended} for alert in posted])


def peers_low(stack: AlertingStack, node: str) -> dict[str, Any]:
    """LedgerNodePeersLow of ``node`` as the shipped rule's Prometheus sends it."""
    now = datetime.now(UTC)
    return {
        "labels": {"alertname": "LedgerNodePeersLow", "job": JOB, "instance": stack.instance,
                   "node": node, "severity": "warning"},
        "annotations": {"summary": "posted by the test as Prometheus would send it"},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(minutes=10)).isoformat(),
    }  # fmt: skip


def test_a_new_block_hash_at_every_read_pages_nothing_nor_holds_back(hostile: Hostile) -> None:
    """The hostile node answers a new hash for every block at every read while an honest
    node reads the watched contract paused: no LedgerBlockchainForked page, and the chain's
    LedgerWatchedContractNodesDisagree is not held back."""
    net, stack, chain = hostile.net, hostile.stack, hostile.chain
    contract = hostile.watched["contracts"][0]["address"]
    since = hostile.quiet()
    hostile.hostility.fresh_hashes = True
    net.set_fault(HONEST[0], "contract_paused", True, chain=chain, target=contract)
    try:
        labels = {"alertname": "LedgerWatchedContractNodesDisagree", "blockchain": chain}

        def ticketed() -> bool:
            return any(item.status == "firing" and labels.items() <= item.labels.items()
                       for item in stack.webhook.delivered(since))  # fmt: skip

        # the ticket's group_wait outlasts the page's: a fork page would be here by then
        stack.webhook.wait_for(ticketed, timeout=TIMEOUT, what="the disagreement delivered")
        held = stack.inhibitors(**labels)
        assert held and all(by == [] for by in held.values()), held
        assert hostile.network_pages(since) == [], stack.summary(since)
    finally:
        hostile.hostility.fresh_hashes = False
        net.set_fault(HONEST[0], "contract_paused", False, chain=chain, target=contract)


def test_thirty_chains_of_one_node_page_nothing_and_warn_once(hostile: Hostile) -> None:
    """The hostile node lists 30 frozen chains no other node has: no notification names any
    of them (no chain-wide page, no ticket each), and the node gets one warning,
    LedgerNodeUnexpectedBlockchains."""
    net, stack, stand_in = hostile.net, hostile.stack, hostile.stand_in
    fakes = frozen_chain_ids(FROZEN_CHAINS)
    since = hostile.quiet()
    # the longest a frozen chain takes to notify: its stall's age (the chain's own
    # txMaxTimeTrigger + consensusTimeout + the rules' 180 s of grace, scaled), then the
    # slowest `for` of the alerts a frozen chain raises, then the ticket's group_wait
    stall = (trigger_seconds(SEED, CHAIN) + timeout_seconds(SEED, CHAIN) + 180) / SCALE
    slowest = max(rule_span_seconds(name) for name in
                  ("LedgerBlockchainHalted", "LedgerCouncilBelowMinMembers",
                   "LedgerBlockHeightStalled"))  # fmt: skip
    span = stall + slowest + stack.group_wait + 2
    warned = {"alertname": "LedgerNodeUnexpectedBlockchains", "node": HOSTILE}

    def warned_once() -> bool:
        return any(item.status == "firing" and warned.items() <= item.labels.items()
                   and item.receiver == "ledger-ticket"
                   for item in stack.webhook.delivered(since))  # fmt: skip

    hostile.hostility.freeze(fakes, net.blockchain(HOSTILE, hostile.chain))
    listed_at, asked = time.monotonic(), len(stand_in.requests)

    def listed_long_enough() -> bool:
        """The exporter read the listing with the frozen chains ``span`` seconds after it
        began (whatever it then does with them: that is for it to decide)."""
        return time.monotonic() - listed_at >= span and any(
            request.path == "/health" for request in stand_in.requests[asked:]
        )

    try:
        # both at once (the warning comes sooner than a frozen chain could notify); without
        # the warning, still what was notified about the chains
        try:
            wait_until(lambda: listed_long_enough() and warned_once(), timeout=TIMEOUT,
                       interval=0.5)  # fmt: skip
        except AssertionError:
            wait_until(listed_long_enough, timeout=TIMEOUT, interval=0.5,
                       message=f"{HOSTILE}'s listing not read for {span} s")  # fmt: skip
        about = [(item.receiver, item.alertname, item.labels.get("node", "-"))
                 for item in stack.webhook.delivered(since)
                 if item.status == "firing" and item.labels.get("blockchain") in fakes]  # fmt: skip
        assert not [a for a in about if a[0] == "ledger-page"], about
        assert not about, about
        assert warned_once(), f"{warned} not delivered; {stack.summary(since)}"
    finally:
        hostile.hostility.frozen = {}
