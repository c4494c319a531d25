"""How the simulator's faults compose and what it refuses, over real HTTP: a per-chain fault
with its own setting wins on its chain over the node-wide one (whatever the order they were
switched on in), and an object fault naming an address no contract or wallet has is refused,
as an unknown chain is, rather than accepted and silently matching nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger_simulator import FaultError, SimulatedNetwork
from tests.support.clock import Clock
from tests.support.http import Answer, fetch, get_json

INTERVAL = 2.0


@pytest.fixture
def net(clock: Clock) -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=3, chains=2, block_interval=INTERVAL, seed=0, clock=clock) as n:
        yield n


def post_fault(net: SimulatedNetwork, **body: Any) -> Answer:
    return fetch(net.admin_url + "faults", method="POST", json=body, timeout=5)


def block_hash(net: SimulatedNetwork, node: str, chain: str, height: int) -> str:
    document = get_json(f"{net.node_urls[node]}blockchains/{chain}/blocks?height={height}")
    assert document["height"] == height
    return str(document["hash"])


def forked(net: SimulatedNetwork, node: str, chain: str, height: int) -> bool:
    """Whether ``node``'s block at ``height`` differs from the network's (node-1 unfaulted)."""
    return block_hash(net, node, chain, height) != block_hash(net, "node-1", chain, height)


def common_height(net: SimulatedNetwork, node: str, chain: str) -> int:
    """The highest block both ``node`` and node-1 have."""
    return min(int(net.blockchain(n, chain)["blockHeight"]) for n in (node, "node-1"))


def node_on_every_chain(net: SimulatedNetwork) -> str:
    """A node other than node-1 (the reference) that tracks every chain."""
    return next(
        name
        for name in net.node_names[1:]
        if set(net.chain_ids) <= set(net.health(name)["blockchains"])
    )


@pytest.mark.parametrize("chain_first", [False, True], ids=["node-wide-first", "chain-first"])
def test_a_chain_fork_at_a_height_wins_over_a_node_wide_fork(
    net: SimulatedNetwork, clock: Clock, chain_first: bool
) -> None:
    node = node_on_every_chain(net)
    chain, other = net.chain_ids
    fork_at = common_height(net, node, chain) - 3
    other_before = common_height(net, node, other)

    def node_wide() -> None:
        assert post_fault(net, node=node, fault="fork").status == 200

    def on_chain() -> None:
        answer = post_fault(net, node=node, fault="fork", chain=chain, height=fork_at)
        assert answer.status == 200, answer.text

    first, second = (on_chain, node_wide) if chain_first else (node_wide, on_chain)
    first()
    clock.advance(3 * INTERVAL)
    second()
    clock.advance(20 * INTERVAL)
    # The chain's fork, with its height, is the one in force on the chain ...
    assert not forked(net, node, chain, fork_at - 1)
    assert forked(net, node, chain, fork_at)
    # ... and the node-wide one (from the first block after its switch) on the other chain.
    assert not forked(net, node, other, other_before)
    assert forked(net, node, other, common_height(net, node, other))
    # Switching the node-wide fork off leaves the chain's.
    net.set_fault(node, "fork", enabled=False)
    assert forked(net, node, chain, fork_at)
    assert not forked(net, node, other, common_height(net, node, other))


def test_a_node_wide_stall_and_a_chain_stall_freeze_at_the_earlier_switch(
    net: SimulatedNetwork, clock: Clock
) -> None:
    node = node_on_every_chain(net)
    chain = net.chain_ids[0]
    net.set_fault(node, "stall")
    frozen = net.blockchain(node, chain)["blockHeight"]
    clock.advance(5 * INTERVAL)
    net.set_fault(node, "stall", chain=chain)
    clock.advance(5 * INTERVAL)
    assert net.blockchain(node, chain)["blockHeight"] == frozen


def contracts(net: SimulatedNetwork, chain: str) -> list[str]:
    return list(get_json(net.admin_url + "blockchains")["blockchains"][chain]["contracts"])


def wallets(net: SimulatedNetwork) -> list[str]:
    return list(get_json(net.admin_url + "blockchains")["wallets"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # docs/simulator.md's own placeholders: refused alike, chain and target.
        ({"fault": "contract_paused", "chain": "<chain id>"}, "unknown blockchain '<chain id>'"),
        ({"fault": "contract_paused", "target": "<address>"}, "no contract has the address"),
        ({"fault": "wallet_disabled", "target": "<address>"}, "no wallet has the address"),
        ({"fault": "wallet_disabled", "target": "0xnope"}, "GET /-/sim/blockchains lists them"),
    ],
)
def test_admin_refuses_placeholders_for_chain_and_target(
    net: SimulatedNetwork, body: dict[str, Any], message: str
) -> None:
    answer = post_fault(net, node="*", **body)
    assert answer.status == 400
    assert message in answer.json()["error"]
    assert get_json(net.admin_url + "faults")["faults"] == []


def test_an_address_must_exist_where_the_fault_applies(net: SimulatedNetwork) -> None:
    chain, other = net.chain_ids
    token, other_token = contracts(net, chain)[0], contracts(net, other)[0]
    treasury = wallets(net)[0]
    # A contract of the other chain is not a contract of this one.
    answer = post_fault(
        net, node="node-1", fault="contract_paused", chain=chain, target=other_token
    )
    assert answer.status == 400
    assert f"no contract has the address '{other_token}' on blockchain {chain}" in answer.text
    # A wallet is no contract, a contract no wallet.
    assert post_fault(net, node="*", fault="contract_upgraded", target=treasury).status == 400
    assert post_fault(net, node="*", fault="wallet_disabled", target=token).status == 400
    with pytest.raises(FaultError, match="no wallet has the address"):
        net.set_fault("node-2", "wallet_disabled", target=token)
    # What exists is accepted, in any case; without a chain, any chain's contract.
    for body in (
        {"fault": "contract_paused", "chain": chain, "target": token.upper()},
        {"fault": "contract_paused", "target": other_token},
        {"fault": "wallet_disabled", "chain": other, "target": treasury},
    ):
        answer = post_fault(net, node="node-2", **body)
        assert answer.status == 200, answer.text
    assert len(get_json(net.admin_url + "faults")["faults"]) == 3
