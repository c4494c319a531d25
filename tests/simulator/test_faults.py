"""Faults switched on and off while running, via the admin endpoint and via set_fault, and
checked over real HTTP; layouts; the admin endpoint's own answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.client import RemoteDisconnected
from typing import Any
from urllib.parse import urlsplit

import pytest

from ledger_simulator import FaultError, SimulatedNetwork
from ledger_simulator.faults import (
    ALL_NODES,
    CERTIFICATE_FAULTS,
    FAULTS,
    NETWORK_FAULTS,
    NODE_WIDE_ONLY,
    OBJECT_FAULTS,
)
from tests.support.clock import Clock
from tests.support.http import fetch, get_json
from tests.support.waiting import wait_until

INTERVAL = 2.0
Switch = Callable[..., None]


@pytest.fixture
def net(clock: Clock) -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=4, chains=2, block_interval=INTERVAL, seed=9, clock=clock) as n:
        yield n


def via_admin(net: SimulatedNetwork) -> Switch:
    def switch(node: str, fault: str, enabled: bool = True, **extra: Any) -> None:
        body = {"node": node, "fault": fault, "enabled": enabled, **extra}
        answer = fetch(net.admin_url + "faults", method="POST", json=body, timeout=5)
        assert answer.status == 200, answer.text

    return switch


def via_api(net: SimulatedNetwork) -> Switch:
    def switch(node: str, fault: str, enabled: bool = True, **extra: Any) -> None:
        net.set_fault(node, fault, enabled, **extra)

    return switch


@pytest.fixture(params=[via_admin, via_api], ids=["admin", "set_fault"])
def switch(request: pytest.FixtureRequest, net: SimulatedNetwork) -> Switch:
    factory: Callable[[SimulatedNetwork], Switch] = request.param
    return factory(net)


def chain_doc(net: SimulatedNetwork, node: str, chain: str) -> Any:
    return get_json(net.node_urls[node] + "blockchains/" + chain)


def test_stall_freezes_height_then_catches_up(
    net: SimulatedNetwork, clock: Clock, switch: Switch
) -> None:
    chain = net.chain_ids[0]
    switch("node-2", "stall")
    frozen = chain_doc(net, "node-2", chain)
    other = chain_doc(net, "node-1", chain)["blockHeight"]
    clock.advance(10 * INTERVAL)
    stalled = chain_doc(net, "node-2", chain)
    assert stalled["blockHeight"] == frozen["blockHeight"]
    assert stalled["lastMessageTime"] == frozen["lastMessageTime"]
    assert stalled["pendingMessagesCount"] > frozen["pendingMessagesCount"]  # backlog grows
    assert chain_doc(net, "node-1", chain)["blockHeight"] == other + 10
    switch("node-2", "stall", False)
    assert chain_doc(net, "node-2", chain)["blockHeight"] >= frozen["blockHeight"] + 9


def test_peers_lost(net: SimulatedNetwork, switch: Switch) -> None:
    before = get_json(net.node_urls["node-3"] + "health")
    peer_id = before["network"]["peerId"]
    switch("node-3", "peers_lost")
    health = get_json(net.node_urls["node-3"] + "health")
    assert health["network"]["peerCount"] == 0
    assert health["network"]["networkPeers"] == []
    for chain in health["blockchains"]:
        assert chain_doc(net, "node-3", chain)["blockchainPeers"] == []
    for other in ("node-1", "node-2", "node-4"):
        assert peer_id not in get_json(net.node_urls[other] + "health")["network"]["networkPeers"]
    switch("node-3", "peers_lost", False)
    assert get_json(net.node_urls["node-3"] + "health") == before


def test_syncing(net: SimulatedNetwork, switch: Switch) -> None:
    chains = net.health("node-1")["blockchains"]
    assert not any(chain_doc(net, "node-1", c)["syncing"] for c in chains)
    switch("node-1", "syncing")
    assert all(chain_doc(net, "node-1", c)["syncing"] for c in chains)
    assert not chain_doc(net, "node-2", chains[0])["syncing"]
    switch("node-1", "syncing", False)
    assert not any(chain_doc(net, "node-1", c)["syncing"] for c in chains)


def test_http_500(net: SimulatedNetwork, switch: Switch) -> None:
    switch("node-4", "http_500")
    for path in ("", "health", "blockchains"):
        answer = fetch(net.node_urls["node-4"] + path, timeout=5)
        assert answer.status == 500
        assert answer.json()["code"] == 500
    get_json(net.node_urls["node-1"] + "health")
    switch("node-4", "http_500", False)
    get_json(net.node_urls["node-4"] + "health")


def test_malformed_json(net: SimulatedNetwork, switch: Switch) -> None:
    switch("node-2", "malformed_json")
    answer = fetch(net.node_urls["node-2"] + "health", timeout=5)
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(answer.text)
    switch("node-2", "malformed_json", False)
    get_json(net.node_urls["node-2"] + "health")


def test_identity_swap_puts_another_node_behind_the_url(
    net: SimulatedNetwork, switch: Switch
) -> None:
    url = net.node_urls["node-2"]
    own, other = net.health("node-2"), get_json(net.node_urls["node-3"] + "health")
    switch("node-2", "identity_swap", target="node-3")
    for path in ("", "health"):
        assert get_json(url + path)["nodeId"] == other["nodeId"] != own["nodeId"]
    assert get_json(url + "health")["blockchains"] == other["blockchains"]
    assert net.health("node-2")["nodeId"] == other["nodeId"]
    switch("node-2", "identity_swap", False, target="node-3")
    assert get_json(url + "health") == net.health("node-2")
    assert net.health("node-2")["nodeId"] == own["nodeId"]
    switch("node-4", "identity_swap")  # the next node by default: node-1 after the last
    assert get_json(net.node_urls["node-4"] + "health")["nodeId"] == net.health("node-1")["nodeId"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"target": "node-2"}, "answering as itself changes nothing"),
        ({"target": "node-9"}, r"node-1 \.\. node-4"),
        ({"chain": "CHAIN"}, "applies to a whole node"),
    ],
    ids=["itself", "unknown", "per-chain"],
)
def test_identity_swap_refuses_what_would_change_nothing(
    net: SimulatedNetwork, extra: dict[str, str], message: str
) -> None:
    extra = {k: net.chain_ids[0] if v == "CHAIN" else v for k, v in extra.items()}
    with pytest.raises(FaultError, match=message):
        net.set_fault("node-2", "identity_swap", **extra)  # type: ignore[arg-type]
    with pytest.raises(FaultError, match="node '\\*'"):
        net.set_fault("*", "identity_swap")


def test_down_in_paths_layout_closes_without_answer(net: SimulatedNetwork, switch: Switch) -> None:
    switch("node-1", "down")
    with pytest.raises(ConnectionError):
        fetch(net.node_urls["node-1"] + "health", timeout=5)
    get_json(net.node_urls["node-2"] + "health")
    switch("node-1", "down", False)
    get_json(net.node_urls["node-1"] + "health")


def test_slow_delays_only_that_node(net: SimulatedNetwork, switch: Switch) -> None:
    """A slow node's answer waits its delay out on the network's ``stopping`` event, held
    here until the test lets it go: the other nodes answer meanwhile, and once the fault is
    off nothing waits."""
    net.stopping = held = HeldEvent()
    switch("node-2", "slow", delay_seconds=1.5)
    answers: dict[str, Any] = {}
    slow = threading.Thread(
        target=lambda: answers.update(slow=get_json(net.node_urls["node-2"] + "health"))
    )
    slow.start()
    wait_until(lambda: held.delays, message="the slow node's answer never waited")
    assert held.delays == [1.5]
    answers["prompt"] = get_json(net.node_urls["node-1"] + "health")
    assert slow.is_alive() and "slow" not in answers  # node-1 answered while node-2 waits
    held.go.set()
    slow.join(timeout=30)
    assert answers["slow"]["blockchains"] == net.health("node-2")["blockchains"]
    switch("node-2", "slow", False)
    held.go.clear()
    get_json(net.node_urls["node-2"] + "health")
    assert held.delays == [1.5]  # the answer came without waiting


def test_per_chain_fault_affects_only_that_chain(
    net: SimulatedNetwork, clock: Clock, switch: Switch
) -> None:
    first, second = net.chain_ids
    wallet = get_json(net.admin_url + "blockchains")["wallets"][0]
    wallet_url = net.node_urls["node-1"] + f"wallets/{wallet}?blockchainId="
    switch("node-1", "http_500", chain=second)
    switch("node-1", "stall", chain=first)
    for url in (net.node_urls["node-1"] + "blockchains/" + second, wallet_url + second):
        assert fetch(url, timeout=5).status == 500
    get_json(wallet_url + first)
    get_json(net.node_urls["node-1"] + "health")
    heights = {c: chain_doc(net, "node-1", c)["blockHeight"] for c in (first,)}
    switch("node-1", "http_500", False, chain=second)
    before_second = chain_doc(net, "node-1", second)["blockHeight"]
    clock.advance(5 * INTERVAL)
    assert chain_doc(net, "node-1", first)["blockHeight"] == heights[first]
    assert chain_doc(net, "node-1", second)["blockHeight"] == before_second + 5


def test_admin_lists_faults_and_nodes(net: SimulatedNetwork) -> None:
    switch = via_admin(net)
    switch("node-3", "slow", delay_seconds="250ms")
    switch("node-1", "http_500", chain=net.chain_ids[1])
    faults = get_json(net.admin_url + "faults")["faults"]
    assert [(f["node"], f["fault"], f["chain"], f["delay_seconds"]) for f in faults] == [
        ("node-1", "http_500", net.chain_ids[1], 0.0),
        ("node-3", "slow", None, 0.25),
    ]
    nodes = get_json(net.admin_url + "nodes")
    assert {name: n["url"] for name, n in nodes["nodes"].items()} == net.node_urls
    assert nodes["nodes"]["node-2"]["blockchains"] == net.health("node-2")["blockchains"]
    switch("node-3", "slow", False)
    assert len(get_json(net.admin_url + "faults")["faults"]) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"node": "node-1"}', "required"),
        (b'{"node": "node-1", "fault": "melt"}', "unknown fault"),
        (b'{"node": "node-9", "fault": "stall"}', "unknown node"),
        (b'{"node": "node-1", "fault": "stall", "chain": "x"}', "unknown blockchain"),
        (b'{"node": "node-1", "fault": "stall", "enabled": "yes"}', "true or false"),
        (b'{"node": "node-1", "fault": "slow", "delay_seconds": "fast"}', "delay_seconds"),
        (b'{"node": "node-1", "fault": "slow", "delay_seconds": -1}', "delay_seconds"),
    ],
)
def test_admin_refuses_bad_fault_requests(net: SimulatedNetwork, body: bytes, message: str) -> None:
    answer = fetch(net.admin_url + "faults", method="POST", body=body, timeout=5)
    assert answer.status == 400
    assert message in answer.json()["error"]
    assert get_json(net.admin_url + "faults")["faults"] == []


def test_admin_methods(net: SimulatedNetwork) -> None:
    assert fetch(net.admin_url + "faults", method="PUT", timeout=5).status == 405
    assert fetch(net.admin_url + "nodes", method="POST", timeout=5).status == 405
    assert "/-/sim/faults" in get_json(net.admin_url)["endpoints"]


def test_set_fault_validates(net: SimulatedNetwork) -> None:
    with pytest.raises(FaultError, match="choose one of"):
        net.set_fault("node-1", "explode")
    for name in ("node-5", "node-0", "node-01", "node-\u0661", "node1"):
        with pytest.raises(FaultError, match=r"node-1 \.\. node-4"):
            net.set_fault(name, "stall")


def refused(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=5):
            return False
    except ConnectionRefusedError:
        return True


@pytest.mark.parametrize("use_admin", [True, False], ids=["admin", "set_fault"])
def test_ports_layout_and_down_refuses(clock: Clock, use_admin: bool) -> None:
    with SimulatedNetwork(nodes=3, chains=2, seed=4, layout="ports", clock=clock) as net:
        admin_port = urlsplit(net.admin_url).port
        assert admin_port is not None
        ids = set()
        for index, (name, url) in enumerate(net.node_urls.items(), start=1):
            assert urlsplit(url).port == admin_port + index
            assert urlsplit(url).path == "/"
            ids.add(get_json(url + "health")["nodeId"])
            assert get_json(url + "health") == net.health(name)
        assert len(ids) == 3
        switch = via_admin(net) if use_admin else via_api(net)
        switch("node-2", "down")
        assert refused(net.node_urls["node-2"])
        get_json(net.node_urls["node-3"] + "health")
        switch("node-2", "down", False)
        get_json(net.node_urls["node-2"] + "health")
        switch("node-2", "http_500")
        assert fetch(net.node_urls["node-2"], timeout=5).status == 500
    for url in [net.admin_url, *net.node_urls.values()]:
        assert refused(url)


def test_ports_layout_node_down_from_the_start(clock: Clock) -> None:
    net = SimulatedNetwork(nodes=2, chains=1, layout="ports", clock=clock)
    net.set_fault("node-1", "down")
    with net:
        assert refused(net.node_urls["node-1"])
        get_json(net.node_urls["node-2"] + "health")


def test_paths_layout_with_thousands_of_nodes(clock: Clock) -> None:
    with SimulatedNetwork(nodes=2000, chains=3, seed=1, clock=clock) as net:
        health = get_json(net.node_urls["node-1999"] + "health")
        assert health == net.health("node-1999")
        chain = health["blockchains"][-1]
        assert chain_doc(net, "node-1999", chain)["blockHeight"] > 0
        assert len(get_json(net.admin_url + "nodes")["nodes"]) == 2000


class HeldEvent(threading.Event):
    """The network's ``stopping`` event, recording the delay each slow answer waits for and
    holding it until ``go`` is set (by the test, or by ``set()`` when the network stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.delays: list[float | None] = []
        self.go = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.delays.append(timeout)
        self.go.wait(60)
        return self.is_set()

    def set(self) -> None:
        super().set()
        self.go.set()


class WatchedEvent(threading.Event):
    """The network's ``stopping`` event, telling the test when a slow answer waits on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiters = threading.Semaphore(0)

    def wait(self, timeout: float | None = None) -> bool:
        self.waiters.release()
        return super().wait(timeout)


def test_stop_wakes_slow_answers_and_closes(clock: Clock) -> None:
    net = SimulatedNetwork(nodes=2, chains=1, clock=clock)
    net.stopping = watched = WatchedEvent()
    net.start()
    net.set_fault("node-1", "slow", delay_seconds=60)
    errors: list[Exception] = []

    def ask() -> None:
        try:
            fetch(net.node_urls["node-1"] + "health", timeout=30)
        except ConnectionError as error:
            errors.append(error)

    waiting = threading.Thread(target=ask)
    waiting.start()
    # Stop only once the answer waits out its delay: stopping earlier would refuse the
    # connection, and that ConnectionError would pass for a woken answer.
    assert watched.waiters.acquire(timeout=30), "the slow answer never started waiting"
    net.stop()
    waiting.join(timeout=20)  # well under the 60 s delay: only stop() can end it this soon
    assert not waiting.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], RemoteDisconnected), errors
    assert refused(net.admin_url)


#: The optional fields each fault may be switched on with (besides ``chain``, which every
#: fault but the node-wide ones takes): ``TARGET_*`` stand for an address or member of the
#: network under test. ``cert_expiry`` needs a simulator serving https: test_certificates.py
#: switches it off without its value.
ON_WITH: dict[str, dict[str, Any]] = {
    "slow": {"delay_seconds": 2.0},
    "session_stuck": {"delay_seconds": 3.0},
    "lag_time": {"delay_seconds": 20.0},
    "fork": {"height": 1},
    "rewrite_hash": {"height": 1},
    "contract_paused": {"target": "TARGET_CONTRACT"},
    "contract_upgraded": {"target": "TARGET_CONTRACT"},
    "wallet_disabled": {"target": "TARGET_WALLET"},
    "leader_failing": {"target": "node-2", "delay_seconds": 3.0},
    "council_change": {"target": "node-2"},
    "consensus_drift": {"target": "txMaxTimeTrigger", "value": "2m"},
    "identity_swap": {"target": "node-3"},
}
SWITCHABLE = [fault for fault in FAULTS if fault not in CERTIFICATE_FAULTS]


def _node_for(fault: str) -> str:
    return ALL_NODES if fault in OBJECT_FAULTS | NETWORK_FAULTS else "node-1"


def _with_targets(net: SimulatedNetwork, extra: dict[str, Any]) -> dict[str, Any]:
    named = {
        "TARGET_CONTRACT": net.ledger.contract_addresses(0)[0],
        "TARGET_WALLET": net.ledger.wallet_addresses()[0],
    }
    return {key: named.get(value, value) for key, value in extra.items()}


@pytest.mark.parametrize("fault", SWITCHABLE)
def test_every_fault_goes_off_without_its_optional_fields(
    net: SimulatedNetwork, fault: str
) -> None:
    """Switched on with its optional fields (and without them, where it may be), node-wide
    and for a chain where it may be, a fault goes off with node, fault and, for the chain's
    switch, the chain alone: nothing stays in force."""
    node, switch = _node_for(fault), via_admin(net)
    extra = _with_targets(net, ON_WITH.get(fault, {}))
    scopes: list[dict[str, Any]] = [{}]
    if fault not in NODE_WIDE_ONLY:
        scopes.append({"chain": net.chain_ids[0]})
    for scope in scopes:
        switch(node, fault, **scope, **extra)
        if fault != "leader_failing":  # the one whose target is required to go on
            switch(node, fault, **scope)
    assert get_json(net.admin_url + "faults")["faults"]
    for scope in scopes:
        switch(node, fault, False, **scope)
    assert get_json(net.admin_url + "faults")["faults"] == []


def test_identity_swap_goes_off_without_its_target(net: SimulatedNetwork, switch: Switch) -> None:
    url = net.node_urls["node-2"]
    own = get_json(url + "health")
    switch("node-2", "identity_swap", target="node-4")
    assert get_json(url + "health")["nodeId"] != own["nodeId"]
    switch("node-2", "identity_swap", False)
    assert get_json(url + "health")["nodeId"] == own["nodeId"]
    assert get_json(net.admin_url + "faults")["faults"] == []


def test_what_is_named_going_off_is_all_that_goes(net: SimulatedNetwork, switch: Switch) -> None:
    """Going off, a chain names the chain's switch (none: the node-wide one) and a target
    the switch for that target: the others stay."""
    first, second = net.chain_ids
    switch("node-1", "stall")
    switch("node-1", "stall", chain=second)
    switch("*", "leader_failing", chain=first, target="node-1")
    switch("*", "leader_failing", chain=first, target="node-2")
    switch("node-1", "stall", False)
    switch("*", "leader_failing", False, chain=first, target="node-2")
    left = [(f["node"], f["fault"], f["chain"], f["target"]) for f in net.faults.listing()]
    assert left == [("*", "leader_failing", first, "node-1"), ("node-1", "stall", second, None)]


@pytest.mark.parametrize(
    ("fault", "extra", "message"),
    [
        ("stall", {"chain": "x"}, "unknown blockchain"),
        ("identity_swap", {"target": "node-9"}, r"node-1 \.\. node-4"),
        ("melt", {}, "choose one of"),
    ],
)
def test_switching_off_still_refuses_unknown_names(
    net: SimulatedNetwork, fault: str, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(FaultError, match=message):
        net.faults.switch_off("node-1", fault, **extra)
