"""The simulator's faults on watched objects (contract_paused, contract_upgraded,
wallet_disabled), over real HTTP: one address or all of a chain's, one node or every node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ledger_simulator import FaultError, SimulatedNetwork
from ledger_simulator.faults import parse_fault_spec
from tests.support.clock import Clock
from tests.support.http import Answer, fetch, get_json


@pytest.fixture
def net() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=3, chains=2, block_interval=2.0, seed=1, clock=Clock()) as n:
        yield n


def post_fault(net: SimulatedNetwork, **body: Any) -> Answer:
    return fetch(net.admin_url + "faults", method="POST", json=body, timeout=5)


def contracts(net: SimulatedNetwork) -> list[str]:
    return list(
        get_json(net.admin_url + "blockchains")["blockchains"][net.chain_ids[0]]["contracts"]
    )


def contract(net: SimulatedNetwork, node: str, address: str, state: bool = False) -> Any:
    suffix = "/state" if state else ""
    url = f"{net.node_urls[node]}blockchains/{net.chain_ids[0]}/contracts/{address}{suffix}"
    return get_json(url)


def wallet_enabled(net: SimulatedNetwork, node: str, address: str) -> bool:
    url = f"{net.node_urls[node]}wallets/{address}?blockchainId={net.chain_ids[0]}"
    return bool(get_json(url)["enabled"])


def test_pause_one_contract_on_one_node(net: SimulatedNetwork) -> None:
    token, other, _ = contracts(net)
    assert contract(net, "node-1", token)["status"] == "ACTIVE"
    response = post_fault(
        net, node="node-1", fault="contract_paused", chain=net.chain_ids[0], target=token.upper()
    )
    assert response.status == 200, response.text
    assert contract(net, "node-1", token)["status"] == "PAUSED"
    assert contract(net, "node-1", token, state=True)["state"]["paused"] is True
    assert contract(net, "node-2", token)["status"] == "ACTIVE"
    assert contract(net, "node-1", other)["status"] == "ACTIVE"
    assert (
        post_fault(
            net,
            node="node-1",
            fault="contract_paused",
            chain=net.chain_ids[0],
            target=token,
            enabled=False,
        ).status
        == 200
    )
    assert contract(net, "node-1", token)["status"] == "ACTIVE"


def test_upgrade_every_contract_on_every_node(net: SimulatedNetwork) -> None:
    token = contracts(net)[0]
    before = contract(net, "node-2", token)
    net.set_fault("*", "contract_upgraded")
    for node in net.node_names:
        after = contract(net, node, token)
        assert after["status"] == "UPGRADED"
        assert after["version"] == before["version"] + 1
        assert after["codeHash"] != before["codeHash"]
    net.set_fault("*", "contract_upgraded", enabled=False)
    assert contract(net, "node-2", token) == before


def test_pause_wins_over_upgrade(net: SimulatedNetwork) -> None:
    token = contracts(net)[0]
    net.set_fault("node-3", "contract_upgraded")
    net.set_fault("node-3", "contract_paused", target=token)
    assert contract(net, "node-3", token)["status"] == "PAUSED"


def test_disable_a_wallet(net: SimulatedNetwork) -> None:
    treasury, other = get_json(net.admin_url + "blockchains")["wallets"][:2]
    net.set_fault("*", "wallet_disabled", chain=net.chain_ids[0], target=treasury)
    assert [wallet_enabled(net, n, treasury) for n in net.node_names] == [False] * 3
    assert wallet_enabled(net, "node-1", other) is True
    # the fault is on the first chain only
    url = f"{net.node_urls['node-1']}wallets/{treasury}?blockchainId={net.chain_ids[1]}"
    assert get_json(url)["enabled"] is True
    (listed,) = get_json(net.admin_url + "faults")["faults"]
    assert (listed["node"], listed["fault"], listed["target"]) == ("*", "wallet_disabled", treasury)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"node": "*", "fault": "stall"}, "are for contract_paused"),
        ({"node": "node-1", "fault": "http_500", "target": "0x1"}, "are for contract_paused"),
        ({"node": "node-1", "fault": "contract_paused", "target": 1}, '"target" must be'),
        ({"node": "node-1", "fault": "wallet_disabled", "target": ""}, "must not be empty"),
    ],
)
def test_admin_refuses_bad_object_faults(
    net: SimulatedNetwork, body: dict[str, Any], message: str
) -> None:
    response = post_fault(net, **body)
    assert response.status == 400
    assert message in response.json()["error"]


def test_fault_spec_with_a_target() -> None:
    spec = parse_fault_spec("*:contract_paused=0xAB:chain-1")
    assert (spec.node, spec.fault, spec.target, spec.chain) == (
        "*",
        "contract_paused",
        "0xAB",
        "chain-1",
    )
    assert parse_fault_spec("node-1:wallet_disabled").target is None


def test_registry_refuses_star_for_node_faults(net: SimulatedNetwork) -> None:
    with pytest.raises(FaultError, match="are for"):
        net.set_fault("*", "down")
