"""The simulator's network-wide faults (fork, other_council, partition), over real HTTP, with
an injected clock so heights move without sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger_simulator import FaultError, SimulatedNetwork
from ledger_simulator.faults import parse_fault_spec
from tests.support.clock import Clock
from tests.support.http import Answer, fetch, get_json

INTERVAL = 2.0


@pytest.fixture
def net(clock: Clock) -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=5, chains=2, block_interval=INTERVAL, seed=3, clock=clock) as n:
        yield n


def block_hash(net: SimulatedNetwork, node: str, height: int) -> str:
    url = f"{net.node_urls[node]}blockchains/{net.chain_ids[0]}/blocks?height={height}"
    document = get_json(url)
    assert document["height"] == height
    return str(document["hash"])


def lowest_height(net: SimulatedNetwork) -> int:
    return min(int(net.blockchain(n, net.chain_ids[0])["blockHeight"]) for n in net.node_names)


def post_fault(net: SimulatedNetwork, **body: Any) -> Answer:
    return fetch(net.admin_url + "faults", method="POST", json=body, timeout=5)


def test_fork_from_a_given_height(net: SimulatedNetwork) -> None:
    top = lowest_height(net)
    fork_at = top - 3
    assert post_fault(net, node="node-2", fault="fork", height=fork_at).status == 200
    assert block_hash(net, "node-2", fork_at - 1) == block_hash(net, "node-1", fork_at - 1)
    for height in (fork_at, top):
        assert block_hash(net, "node-2", height) != block_hash(net, "node-1", height)
        assert block_hash(net, "node-3", height) == block_hash(net, "node-1", height)
    forked = get_json(
        f"{net.node_urls['node-2']}blockchains/{net.chain_ids[0]}/blocks?height={top}"
    )
    assert forked["previousHash"] == block_hash(net, "node-2", top - 1)
    net.set_fault("node-2", "fork", enabled=False)
    assert block_hash(net, "node-2", top) == block_hash(net, "node-1", top)


def test_fork_without_height_starts_after_the_switch(net: SimulatedNetwork, clock: Clock) -> None:
    before = lowest_height(net)
    net.set_fault("node-3", "fork", chain=net.chain_ids[0])
    assert block_hash(net, "node-3", before) == block_hash(net, "node-1", before)
    clock.advance(20 * INTERVAL)
    later = lowest_height(net)
    assert block_hash(net, "node-3", later) != block_hash(net, "node-1", later)
    assert block_hash(net, "node-3", before - 1) == block_hash(net, "node-1", before - 1)


def test_other_council(net: SimulatedNetwork) -> None:
    chain = net.chain_ids[0]
    council = net.blockchain("node-1", chain)["councilMembers"]
    net.set_fault("node-4", "other_council")
    other = net.blockchain("node-4", chain)["councilMembers"]
    assert set(other) != set(council)
    assert len(other) <= len(council)
    assert net.blockchain("node-1", chain)["councilMembers"] == council
    net.set_fault("node-4", "other_council", enabled=False)
    assert net.blockchain("node-4", chain)["councilMembers"] == council


def peer_ids(net: SimulatedNetwork) -> dict[str, str]:
    return {n: net.health(n)["network"]["peerId"] for n in net.node_names}


def test_partition_keeps_links_only_inside_each_side(net: SimulatedNetwork) -> None:
    ids = peer_ids(net)
    cut = {"node-1", "node-2"}
    for name in cut:
        net.set_fault(name, "partition")
    for name in net.node_names:
        peers = set(get_json(net.node_urls[name] + "health")["network"]["networkPeers"])
        side = {ids[n] for n in (cut if name in cut else set(net.node_names) - cut)}
        assert peers <= side - {ids[name]}, name
    net.set_fault("node-1", "partition", enabled=False)
    net.set_fault("node-2", "partition", enabled=False)
    assert any(ids["node-1"] in net.health(n)["network"]["networkPeers"] for n in net.node_names)


def test_partition_is_node_wide_only(net: SimulatedNetwork) -> None:
    with pytest.raises(FaultError, match="applies to a whole node"):
        net.set_fault("node-1", "partition", chain=net.chain_ids[0])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"node": "node-1", "fault": "fork", "height": "12"}, '"height" must be a block height'),
        ({"node": "node-1", "fault": "fork", "height": -1}, "must be >= 0"),
        (
            {"node": "node-1", "fault": "stall", "height": 5},
            "height is for fork and rewrite_hash only",
        ),
    ],
)
def test_admin_refuses_bad_heights(
    net: SimulatedNetwork, body: dict[str, Any], message: str
) -> None:
    answer = post_fault(net, **body)
    assert answer.status == 400
    assert message in answer.json()["error"]


def test_admin_lists_the_fork_height(net: SimulatedNetwork) -> None:
    post_fault(net, node="node-1", fault="fork", height=42)
    (fault,) = get_json(net.admin_url + "faults")["faults"]
    assert (fault["fault"], fault["height"]) == ("fork", 42)


@pytest.mark.parametrize(
    ("text", "fault", "height"),
    [
        ("node-2:fork=1200", "fork", 1200),
        ("node-2:fork", "fork", None),
        ("node-1:partition", "partition", None),
    ],
)
def test_fault_spec(text: str, fault: str, height: int | None) -> None:
    spec = parse_fault_spec(text)
    assert (spec.fault, spec.height) == (fault, height)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node-2:fork=abc", "fork=HEIGHT takes a block height"),
        (
            "node-2:stall=5",
            "only slow=DELAY, lag_time=DELAY, fork=HEIGHT and rewrite_hash=HEIGHT take a value",
        ),
    ],
)
def test_fault_spec_errors(text: str, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_fault_spec(text)


def chain_height(net: SimulatedNetwork, node: str) -> int:
    return int(net.blockchain(node, net.chain_ids[0])["blockHeight"])


def test_lag_time_reaches_each_height_that_much_later(net: SimulatedNetwork, clock: Clock) -> None:
    """Issue 37: node-2's blocks arrive 20 s late: the height it reports at T is the one it
    reported without the fault at T - 20 s (its lastMessageTime as much later)."""
    chain = net.chain_ids[0]
    before = chain_height(net, "node-2")
    said = net.blockchain("node-2", chain)["lastMessageTime"]
    clock.advance(20.0)
    answer = post_fault(net, node="node-2", fault="lag_time", delay_seconds="20s")
    assert answer.status == 200, answer.text
    assert chain_height(net, "node-2") == before
    assert net.blockchain("node-2", chain)["lastMessageTime"] > said  # the same block, seen later
    listed = {(f["node"], f["fault"]): f for f in answer.json()["faults"]}
    assert listed["node-2", "lag_time"]["delay_seconds"] == 20.0
    net.set_fault("node-2", "lag_time", enabled=False)
    assert chain_height(net, "node-2") > before  # it catches up at once


def test_lag_time_defaults_and_command_line() -> None:
    spec = parse_fault_spec("node-2:lag_time=45s")
    assert (spec.fault, spec.delay_seconds) == ("lag_time", 45.0)
    assert parse_fault_spec("node-3:rewrite_hash=1200").height == 1200
    with pytest.raises(FaultError, match="takes a block height"):
        parse_fault_spec("node-3:rewrite_hash=soon")


def test_rewrite_hash_changes_one_past_block_of_one_node(net: SimulatedNetwork) -> None:
    top = lowest_height(net)
    at = top - 4
    before = {h: block_hash(net, "node-2", h) for h in (at - 1, at, at + 1)}
    answer = post_fault(net, node="node-2", fault="rewrite_hash", height=at)
    assert answer.status == 200, answer.text
    assert block_hash(net, "node-2", at) != before[at]
    assert block_hash(net, "node-2", at) != block_hash(net, "node-1", at)
    assert block_hash(net, "node-2", at - 1) == before[at - 1]
    assert block_hash(net, "node-2", at + 1) == before[at + 1]
    following = get_json(
        f"{net.node_urls['node-2']}blockchains/{net.chain_ids[0]}/blocks?height={at + 1}"
    )
    assert following["previousHash"] == block_hash(net, "node-2", at)
    net.set_fault("node-2", "rewrite_hash", enabled=False)
    assert block_hash(net, "node-2", at) == before[at]  # the original history again


def test_rewrite_hash_without_a_height_rewrites_five_below_the_switch(
    net: SimulatedNetwork,
) -> None:
    height = chain_height(net, "node-4")
    original = block_hash(net, "node-4", height - 5)
    net.set_fault("node-4", "rewrite_hash")
    assert block_hash(net, "node-4", height - 5) != original
    assert block_hash(net, "node-4", height - 4) == block_hash(net, "node-1", height - 4)


def test_height_is_refused_for_faults_that_take_none(net: SimulatedNetwork) -> None:
    answer = post_fault(net, node="node-2", fault="lag_time", height=5)
    assert answer.status == 400
    assert "fork and rewrite_hash" in answer.text
