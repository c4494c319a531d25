"""The simulated state: deterministic under a seed, and moving like a network as the injected
clock is stepped (no sleeping): heights, lag, vote sessions and rounds, queues, peers."""

from __future__ import annotations

import itertools
import re
from datetime import datetime

import pytest

from ledger_simulator import SimulatedNetwork, UnknownChainError, UnknownNodeError
from ledger_simulator.faults import FaultError, FaultSpec, parse_fault_spec
from ledger_simulator.ids import DurationError, go_duration, parse_go_duration
from tests.support.clock import Clock
from tests.support.http import fetch
from tests.support.monitoring import PROM_DIR
from tests.support.scaling import load_rules

INTERVAL = 2.0


def network(seed: int = 3, nodes: int = 6, chains: int = 2) -> tuple[SimulatedNetwork, Clock]:
    clock = Clock()
    return SimulatedNetwork(nodes, chains, INTERVAL, seed, clock=clock), clock


def snapshot(net: SimulatedNetwork) -> dict[str, object]:
    """Everything /health and /blockchains/{id} would serve, for every node and chain."""
    result: dict[str, object] = {}
    for name in net.node_names:
        health = net.health(name)
        result[name] = health
        for chain in health["blockchains"]:
            result[f"{name}/{chain}"] = net.blockchain(name, chain)
    return result


def heights(net: SimulatedNetwork, chain: str) -> dict[str, int]:
    return {
        name: net.blockchain(name, chain)["blockHeight"]
        for name in net.node_names
        if chain in net.health(name)["blockchains"]
    }


def timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def net_clock() -> tuple[SimulatedNetwork, Clock]:
    return network()  # not started: these tests read the model, no sockets


def test_same_seed_same_answers_over_time() -> None:
    (one, clock_one), (two, clock_two) = network(seed=11), network(seed=11)
    for _ in range(20):
        assert snapshot(one) == snapshot(two)
        clock_one.advance(0.37)
        clock_two.advance(0.37)


def test_same_seed_same_http_bodies() -> None:
    (one, _), (two, _) = network(seed=5), network(seed=5)
    with one, two:
        for path in ("", "health", "blockchains", f"blockchains/{one.chain_ids[1]}"):
            bodies = [fetch(n.node_urls["node-2"] + path, timeout=5).body for n in (one, two)]
            assert bodies[0] == bodies[1]


def test_different_seed_different_network() -> None:
    (one, _), (two, _) = network(seed=1), network(seed=2)
    assert one.chain_ids != two.chain_ids
    assert one.health("node-1")["nodeId"] != two.health("node-1")["nodeId"]


def test_heights_advance_one_block_per_interval(net_clock: tuple[SimulatedNetwork, Clock]) -> None:
    net, clock = net_clock
    chain = net.chain_ids[0]
    before = heights(net, chain)
    clock.advance(10 * INTERVAL)
    after = heights(net, chain)
    assert {name: after[name] - before[name] for name in before} == dict.fromkeys(before, 10)


def test_nodes_are_a_few_blocks_apart_with_a_laggard(
    net_clock: tuple[SimulatedNetwork, Clock],
) -> None:
    net, clock = net_clock
    for _ in range(10):
        for chain in net.chain_ids:
            values = sorted(heights(net, chain).values())
            assert 2 <= values[-1] - values[0] <= 11
            assert values[-1] - values[-2] <= 2  # only one node lags far
        clock.advance(0.7 * INTERVAL)


def test_last_message_time_follows_latest_block(net_clock: tuple[SimulatedNetwork, Clock]) -> None:
    net, clock = net_clock
    chain = net.chain_ids[0]
    seen = []
    for _ in range(12):
        doc = net.blockchain("node-1", chain)
        age = clock.time - timestamp(doc["lastMessageTime"])
        assert 0 <= age < INTERVAL
        seen.append((doc["blockHeight"], doc["lastMessageTime"]))
        clock.advance(INTERVAL / 3)
    assert len({height for height, _ in seen}) == len({message for _, message in seen}) >= 3


def test_vote_sessions_open_close_and_rounds_climb(
    net_clock: tuple[SimulatedNetwork, Clock],
) -> None:
    net, clock = net_clock
    chain = net.chain_ids[0]
    counts: set[int] = set()
    rounds_by_session: dict[str, list[int]] = {}
    for _ in range(400):
        doc = net.blockchain("node-1", chain)
        counts.add(len(doc["voteSessions"]))
        for key, session in doc["voteSessions"].items():
            assert session["blockHeight"] == doc["blockHeight"] + 1
            rounds_by_session.setdefault(key, []).append(session["round"])
        clock.advance(INTERVAL / 8)
    assert counts == {0, 1}
    climbing = [r for r in rounds_by_session.values() if r[-1] > r[0]]
    assert climbing, "no session climbed a round in 50 blocks"
    assert all(r == sorted(r) for r in rounds_by_session.values())


def escalating_threshold() -> int:
    """The round above which the shipped LedgerVoteRoundsEscalating goes pending."""
    expr = load_rules(PROM_DIR / "alerts.yml")["LedgerVoteRoundsEscalating"]["expr"]
    found = re.search(r"ledger_blockchain_vote_round\{[^}]*\}\)*\s*>\s*(\d+)", expr)
    assert found, expr
    return int(found[1])


def test_a_healthy_chain_never_escalates_to_the_alerts_round() -> None:
    """Issue 36: a third leader failing in a row (one height in 33) took healthy sessions to
    round 4, and LedgerVoteRoundsEscalating went pending on the end-to-end tests' healthy
    chains as the polls happened to fall. Healthy, every session agrees by round 3 (each
    block records the round it was agreed in, the last of its session), on every chain and
    seed, while leaders still fail: one height in four, two in a row one in ten."""
    threshold = escalating_threshold()
    rounds: list[int] = []
    for seed in (3, 5):
        net, clock = network(seed)
        clock.advance(400 * INTERVAL)
        for chain in range(len(net.chain_ids)):
            node = net.topology.node_index(net.node_names[0])
            now = net.now()
            top = net.api.height(node, chain, now)
            for height in range(top - 300, top):
                block = net.api.chain_document(node, chain, ["blocks"], f"height={height}", now)
                rounds.append(block["round"])
    counts = {r: rounds.count(r) for r in sorted(set(rounds))}
    assert max(rounds) <= threshold, f"rounds reached on healthy chains: {counts}"
    assert 0.15 < 1 - counts[1] / len(rounds) < 0.35, counts  # a leader fails now and then
    assert counts.get(3, 0) > 0, counts  # two in a row too


def test_queues_rise_and_drain(net_clock: tuple[SimulatedNetwork, Clock]) -> None:
    net, clock = net_clock
    chain = net.chain_ids[0]
    series: dict[str, list[int]] = {"pendingMessagesCount": [], "delayedMessagesCount": []}
    for _ in range(300):
        doc = net.blockchain("node-2", chain)
        for name, values in series.items():
            values.append(doc[name])
        clock.advance(INTERVAL / 4)
    for name, values in series.items():
        steps = [b - a for a, b in itertools.pairwise(values)]
        assert any(s > 0 for s in steps), f"{name} never rises"
        assert any(s < 0 for s in steps), f"{name} never drains"


def test_peers_connect_and_drop_symmetrically() -> None:
    net, clock = network(nodes=12)
    counts = set()
    for _ in range(60):
        peers = {name: set(net.health(name)["network"]["networkPeers"]) for name in net.node_names}
        ids = {name: net.health(name)["network"]["peerId"] for name in net.node_names}
        for name, linked in peers.items():
            counts.add(len(linked))
            for other, other_links in peers.items():
                assert (ids[other] in linked) == (ids[name] in other_links)
        clock.advance(INTERVAL)
    assert len(counts) > 1


@pytest.mark.parametrize(("nodes", "blocks"), [(4, 600), (10, 150)])
def test_a_healthy_node_keeps_two_peers_and_the_network_stays_whole(
    nodes: int, blocks: int
) -> None:
    """Issue 36: the fault-free demo (4 nodes) had a node lose its three links at once now
    and then, and LedgerNodePeersLost and LedgerNetworkPartitioned went pending. Links still
    drop, but never a node's two nearest ring neighbours: every node keeps 2 peers or more
    (LedgerNodePeersLow's threshold) and every node reaches every other."""
    net, clock = network(seed=1, nodes=nodes)
    ids = {net.health(name)["network"]["peerId"]: name for name in net.node_names}
    fewest, dropped = nodes, False
    for _ in range(blocks):  # a link epoch is 9 blocks
        links = {
            name: {ids[peer] for peer in net.health(name)["network"]["networkPeers"]}
            for name in net.node_names
        }
        fewest = min(fewest, *(len(linked) for linked in links.values()))
        dropped |= any(len(linked) < min(nodes - 1, 8) for linked in links.values())
        reached, frontier = {net.node_names[0]}, [net.node_names[0]]
        while frontier:
            for other in links[frontier.pop()] - reached:
                reached.add(other)
                frontier.append(other)
        assert reached == set(net.node_names), f"the network split: {links}"
        clock.advance(INTERVAL)
    assert fewest >= 2, f"a healthy node had {fewest} peers"
    assert dropped, "no link ever dropped"


def test_blockchain_peers_track_the_chain(net_clock: tuple[SimulatedNetwork, Clock]) -> None:
    net, _ = net_clock
    peer_chains = {
        net.health(n)["network"]["peerId"]: net.health(n)["blockchains"] for n in net.node_names
    }
    for name in net.node_names:
        linked = set(net.health(name)["network"]["networkPeers"])
        for chain in net.health(name)["blockchains"]:
            peers = net.blockchain(name, chain)["blockchainPeers"]
            assert set(peers) <= linked
            assert all(chain in peer_chains[p] for p in peers)


def test_council_and_settings_as_a_deployment(net_clock: tuple[SimulatedNetwork, Clock]) -> None:
    net, _ = net_clock
    node_ids = {net.health(n)["nodeId"] for n in net.node_names}
    for chain in net.chain_ids:
        docs = [net.blockchain(n, chain) for n in heights(net, chain)]
        council = docs[0]["councilMembers"]
        assert council
        assert set(council) <= node_ids
        assert all(d["councilMembers"] == council for d in docs)  # one council per chain
        assert sum(d["isInCouncil"] for d in docs) == len(council)
        consensus = docs[0]["consensus"]
        assert consensus["minMembers"] <= len(council)
        parse_go_duration(consensus["consensusTimeout"])
        assert {"enableJoinCouncilOnStartup", "enableXMOnBlockMint", "enableTxProof"} < set(
            docs[0]["features"]
        )


def test_many_nodes_cost_nothing_until_asked() -> None:
    net, _ = network(nodes=5000, chains=4)
    assert net.health("node-4321")["network"]["peerCount"] <= 8
    with pytest.raises(UnknownNodeError, match=r"node-1 \.\. node-5000"):
        net.health("node-5001")
    with pytest.raises(UnknownChainError):
        net.blockchain("node-1", "nope")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.5, "500ms"), (0.0015, "1.5ms"), (2e-6, "2µs"), (2, "2s"), (30, "30s"),
     (90, "1m30s"), (60, "1m0s"), (7200, "2h0m0s"), (3723.5, "1h2m3.5s")],
)  # fmt: skip
def test_go_duration_round_trip(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
    assert parse_go_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "abc", "1x", "s", "1m30", "-1s", "\u0661s"])
def test_bad_go_duration(text: str) -> None:
    with pytest.raises(DurationError, match="Go syntax"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node-2:stall", FaultSpec("node-2", "stall", None, 0.0)),
        ("node-3:slow=5s", FaultSpec("node-3", "slow", None, 5.0)),
        ("node-3:slow=1m30s:abc", FaultSpec("node-3", "slow", "abc", 90.0)),
        ("node-1:http_500:ledger:main", FaultSpec("node-1", "http_500", "ledger:main", 0.0)),
    ],
)
def test_fault_spec(text: str, expected: FaultSpec) -> None:
    assert parse_fault_spec(text) == expected


@pytest.mark.parametrize("text", ["node-1", ":stall", "node-1:stall=5s", "node-1:slow=fast"])
def test_bad_fault_spec(text: str) -> None:
    with pytest.raises(FaultError, match="--fault"):
        parse_fault_spec(text)
