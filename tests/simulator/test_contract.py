"""Contract tests: every endpoint of the simulator answers, over real HTTP, with the fields and
JSON types of the node API document (api/ledger-node-api.yaml, every field it names and no
other), and with JSON errors for anything it does not know."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest

from ledger_simulator import SimulatedNetwork
from tests.support import nodeapi
from tests.support.clock import Clock
from tests.support.http import Answer, fetch

ISO_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
HEX = re.compile(r"[0-9a-f]+")


class Timestamp:
    """Marker: an ISO 8601 UTC string ending in Z."""


# The block's fields are the simulator's own: the node API document does not show them.
BLOCK = {
    "height": int,
    "hash": str,
    "previousHash": str,
    "timestamp": Timestamp,
    "proposer": str,
    "round": int,
    "transactionCount": int,
    "transactions": [str],
}


def check(value: Any, spec: Any, where: str = "$") -> None:
    """Assert ``value`` has the JSON shape ``spec`` (bool is not accepted as int)."""
    if isinstance(spec, dict):
        assert isinstance(value, dict), f"{where}: expected object, got {value!r}"
        for name, field_spec in spec.items():
            assert name in value, f"{where}: missing field {name}"
            check(value[name], field_spec, f"{where}.{name}")
    elif isinstance(spec, list):
        assert isinstance(value, list), f"{where}: expected array, got {value!r}"
        for index, item in enumerate(value):
            check(item, spec[0], f"{where}[{index}]")
    elif spec is Timestamp:
        assert isinstance(value, str), f"{where}: expected a string, got {value!r}"
        assert ISO_Z.fullmatch(value), f"{where}: {value!r} is not a {spec.__name__}"
    else:
        assert type(value) is spec, f"{where}: expected {spec.__name__}, got {value!r}"


@cache
def complete_validator(schema: str) -> jsonschema.Draft202012Validator:
    return nodeapi.validator(schema, strict=True, complete=True)


def conforms(value: Any, schema: str) -> None:
    """Assert ``value`` is a ``schema`` of the node API document (api/ledger-node-api.yaml),
    with every field the document names and no other (the simulator implements the whole
    interface, and nothing else)."""
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
        for e in complete_validator(schema).iter_errors(value)
    ]
    assert not errors, f"not a complete {schema}: {'; '.join(errors)}"


@pytest.fixture(scope="module")
def net() -> Iterator[SimulatedNetwork]:
    clock = Clock()
    with SimulatedNetwork(nodes=3, chains=3, seed=7, clock=clock) as network:
        yield network


@pytest.fixture(scope="module")
def catalog(net: SimulatedNetwork) -> dict[str, Any]:
    answer = fetch(net.admin_url + "blockchains", timeout=5)
    assert answer.status == 200
    return dict(answer.json())


def get(url: str, **params: Any) -> Answer:
    return fetch(url, params=params, timeout=5)


def get_json(url: str, **params: Any) -> Any:
    answer = get(url, **params)
    assert answer.status == 200, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    return answer.json()


def node1(net: SimulatedNetwork) -> str:
    return net.node_urls["node-1"]


def test_node_info_and_health(net: SimulatedNetwork) -> None:
    info = get_json(node1(net))
    conforms(info, "NodeInfo")
    health = get_json(node1(net) + "health")
    conforms(health, "Health")
    assert health["nodeId"] == info["nodeId"]
    assert health["network"]["peerId"] == info["peerId"]
    assert health["network"]["peerCount"] == len(health["network"]["networkPeers"])
    assert health == net.health("node-1")


def test_blockchains_list_matches_health(net: SimulatedNetwork) -> None:
    for url in net.node_urls.values():
        chains = get_json(url + "blockchains")
        conforms(chains, "BlockchainList")
        assert chains == get_json(url + "health")["blockchains"]
        assert set(chains) <= set(net.chain_ids)


def test_blockchain_info(net: SimulatedNetwork) -> None:
    for chain in get_json(node1(net) + "blockchains"):
        doc = get_json(node1(net) + "blockchains/" + chain)
        conforms(doc, "BlockchainStatus")
        assert doc["consensus"]["consensusType"] == "council_leader_proposal"
        assert len(doc["features"]) == 4  # the three documented flags and one extra
        for key, session in doc["voteSessions"].items():
            conforms(session, "VoteSession")
            assert session["sessionId"] == key
        assert doc == net.blockchain("node-1", chain)


def test_block_by_height(net: SimulatedNetwork) -> None:
    chain = net.chain_ids[0]
    height = get_json(node1(net) + "blockchains/" + chain)["blockHeight"]
    url = node1(net) + f"blockchains/{chain}/blocks"
    block = get_json(url, height=height)
    check(block, BLOCK)
    assert block["height"] == height
    assert get_json(url, height=height - 1)["hash"] == block["previousHash"]
    genesis = get_json(url, height=0)
    assert (genesis["height"], genesis["previousHash"]) == (0, "")


def test_contract_metadata_state_and_trace(net: SimulatedNetwork, catalog: dict[str, Any]) -> None:
    chain = net.chain_ids[0]
    base = node1(net) + f"blockchains/{chain}/contracts/"
    for address in catalog["blockchains"][chain]["contracts"]:
        contract = get_json(base + address)
        conforms(contract, "Contract")
        assert contract["status"] in ("ACTIVE", "PAUSED", "UPGRADED")
        conforms(get_json(base + address + "/state"), "ContractState")
        deployment = get_json(base + address + "/trace/" + contract["deploymentTxId"])
        conforms(deployment, "ContractTrace")
        assert deployment["events"][0]["name"] == "ContractDeployed"


def find_transaction(net: SimulatedNetwork, chain: str) -> tuple[str, str]:
    """A (contract address, transaction id) pair from a recent block, found over HTTP."""
    url = node1(net) + f"blockchains/{chain}/blocks"
    height = get_json(node1(net) + "blockchains/" + chain)["blockHeight"]
    contracts = get_json(net.admin_url + "blockchains")["blockchains"][chain]["contracts"]
    for block_height in range(height, height - 40, -1):
        for tx in get_json(url, height=block_height)["transactions"]:
            for address in contracts:
                trace = get(node1(net) + f"blockchains/{chain}/contracts/{address}/trace/{tx}")
                if trace.status == 200:
                    return address, tx
    raise AssertionError("no transaction in 40 blocks")


def test_trace_events(net: SimulatedNetwork) -> None:
    chain = net.chain_ids[0]
    address, tx = find_transaction(net, chain)
    trace = get_json(node1(net) + f"blockchains/{chain}/contracts/{address}/trace/{tx}")
    conforms(trace, "ContractTrace")
    names = [event["name"] for event in trace["events"]]
    assert names == ["Transfer", "BalanceUpdated", "BalanceUpdated"]
    transfer, balance = trace["events"][0], trace["events"][1]
    check(transfer["indexedArgs"], {"from": str, "to": str})
    assert "indexedArgs" not in balance  # optional: absent on some events
    assert all(isinstance(v, str) for v in transfer["data"].values())


def test_wallet(net: SimulatedNetwork, catalog: dict[str, Any]) -> None:
    for address in catalog["wallets"][:10]:
        wallet = get_json(node1(net) + "wallets/" + address, blockchainId=net.chain_ids[0])
        conforms(wallet, "Wallet")
        assert wallet["address"] == address
        assert wallet["authGroups"]
        for flags in wallet["authGroups"].values():
            conforms(flags, "AuthGroup")
    parent = get_json(
        node1(net) + "wallets/" + catalog["wallets"][8], blockchainId=net.chain_ids[0]
    )
    assert parent["satelliteWallets"] == catalog["wallets"][9:11]


def untracked(net: SimulatedNetwork, node: str) -> str:
    tracked = set(net.health(node)["blockchains"])
    return next(chain for chain in net.chain_ids if chain not in tracked)


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("nope", {}, 404),
        ("health/extra", {}, 404),
        ("blockchains/unknown-chain", {}, 404),
        ("blockchains/{chain}/blocks", {"height": "999999999"}, 404),
        ("blockchains/{chain}/blocks", {"height": "abc"}, 400),
        ("blockchains/{chain}/blocks", {"height": "-1"}, 400),
        ("blockchains/{chain}/blocks", {"height": "1.5"}, 400),
        ("blockchains/{chain}/blocks", {}, 400),
        ("blockchains/{chain}/blocks", {"height": ["1", "2"]}, 400),
        ("blockchains/{chain}/blocks", {"height": ""}, 400),
        ("blockchains/{chain}/contracts/0x00", {}, 404),
        ("blockchains/{chain}/contracts/{contract}/nope", {}, 404),
        ("blockchains/{chain}/contracts/{contract}/trace/{bad_tx}", {}, 404),
        ("wallets/0x1234", {"blockchainId": "{chain}"}, 404),
        ("wallets/{wallet}", {}, 400),
        ("wallets/{wallet}", {"blockchainId": "unknown-chain"}, 404),
        # given empty, blockchainId names no chain (it is a string, so not a bad request)
        ("wallets/{wallet}", {"blockchainId": ""}, 404),
        ("blockchains/{untracked}", {}, 404),
        ("wallets/{wallet}", {"blockchainId": "{untracked}"}, 404),
    ],
)
def test_errors_are_json(
    net: SimulatedNetwork,
    catalog: dict[str, Any],
    path: str,
    params: dict[str, Any],
    status: int,
) -> None:
    chain = net.chain_ids[0]
    names = {
        "chain": chain,
        "contract": catalog["blockchains"][chain]["contracts"][0],
        "bad_tx": "ab" * 32,
        "wallet": catalog["wallets"][0],
        "untracked": untracked(net, "node-3"),
    }
    query = {k: v.format(**names) if isinstance(v, str) else v for k, v in params.items()}
    answer = get(net.node_urls["node-3"] + path.format(**names), **query)
    assert answer.status == status, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {"error": answer.json()["error"], "code": status}
    assert answer.json()["error"]


def test_unknown_node_and_admin_paths(net: SimulatedNetwork) -> None:
    base = net.admin_url.removesuffix("-/sim/")
    for url in (base + "nodes/node-99/health", base + "nodes/node-01/", net.admin_url + "x"):
        answer = get(url)
        assert answer.status == 404
        assert answer.json()["code"] == 404


# TRACE and extension methods were answered by http.server's HTML 501 page (schemathesis'
# undeclared-method check found it): every method but GET gets the JSON 405.
@pytest.mark.parametrize(
    "method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"]
)
def test_writes_are_refused(net: SimulatedNetwork, method: str) -> None:
    answer = fetch(node1(net) + "health", method=method, json={}, timeout=5)
    assert answer.status == 405
    assert answer.headers["Allow"] == "GET"
    assert answer.json()["code"] == 405


def encode_all(text: str) -> str:
    """Percent-encode every character, as an over-eager client might."""
    return "".join(f"%{byte:02X}" for byte in text.encode())


def test_percent_encoded_segments(net: SimulatedNetwork, catalog: dict[str, Any]) -> None:
    for chain in get_json(node1(net) + "blockchains"):
        doc = get_json(node1(net) + "blockchains/" + encode_all(chain))
        assert doc == net.blockchain("node-1", chain)
    chain = net.chain_ids[0]
    contract = catalog["blockchains"][chain]["contracts"][0]
    url = node1(net) + f"blockchains/{encode_all(chain)}/contracts/{encode_all(contract)}"
    assert get_json(url)["address"] == contract
    wallet = catalog["wallets"][3]
    url = node1(net) + f"wallets/{encode_all(wallet)}?blockchainId={encode_all(chain)}"
    assert get_json(url)["address"] == wallet


def test_encoded_slash_stays_in_segment(net: SimulatedNetwork) -> None:
    answer = get(node1(net) + "blockchains/" + quote("a/b", safe=""))
    assert answer.status == 404
    assert "'a/b'" in answer.json()["error"]


def test_logical_chain_id_is_served(net: SimulatedNetwork) -> None:
    logical = net.chain_ids[2]
    assert not HEX.fullmatch(logical)  # every third chain has a logical name, not a hash
    tracking = [n for n in net.node_urls if logical in net.health(n)["blockchains"]]
    assert len(tracking) >= 2  # a chain is tracked by several nodes
    for name in tracking:
        conforms(get_json(net.node_urls[name] + "blockchains/" + logical), "BlockchainStatus")
