"""The simulator's consensus faults (issue 21) over real HTTP, stepped by a hand clock: a vote
session that will not close, a leader whose rounds fail, council members down to the quorum,
a node whose consensus settings drift, a council change every node sees, an idle chain.

What each asserts is what the exporter reads: the node endpoints' answers across time, from
every node that tracks the chain. Switched off, each fault leaves no trace: the faulty network
answers exactly as a twin network that never had it (same seed, same clock).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from ledger_simulator import FaultError, SimulatedNetwork
from ledger_simulator.faults import FaultSpec, parse_fault_spec
from ledger_simulator.ids import parse_go_duration
from tests.support.clock import Clock
from tests.support.http import Answer, fetch, get_json
from tests.support.simulator import simulate

INTERVAL = 2.0
NODES, CHAINS, SEED = 6, 2, 3  # the first chain: 4 council members of 6 tracking nodes
CATCH_UP = 12 * INTERVAL  # every node, the lagging one too, sees what the chain did by then
Document = dict[str, Any]


@pytest.fixture
def net(clock: Clock) -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(NODES, CHAINS, INTERVAL, SEED, clock=clock) as network:
        yield network


@pytest.fixture
def twin(clock: Clock) -> SimulatedNetwork:
    """The same network on the same clock, never faulted (read in-process)."""
    return SimulatedNetwork(NODES, CHAINS, INTERVAL, SEED, clock=clock)


def switch(net: SimulatedNetwork, **body: Any) -> Answer:
    answer = post(net, **body)
    assert answer.status == 200, answer.text
    return answer


def post(net: SimulatedNetwork, **body: Any) -> Answer:
    return fetch(net.admin_url + "faults", method="POST", json=body, timeout=5)


def chain_doc(net: SimulatedNetwork, node: str, chain: str) -> Document:
    document: Document = get_json(f"{net.node_urls[node]}blockchains/{chain}")
    return document


def catalog(net: SimulatedNetwork, chain: str) -> Document:
    """The admin's listing of ``chain``: contracts, round timeout, council (node names)."""
    entry: Document = get_json(net.admin_url + "blockchains")["blockchains"][chain]
    return entry


def tracking(net: SimulatedNetwork, chain: str) -> list[str]:
    return [name for name in net.node_names if chain in net.health(name)["blockchains"]]


def node_id(net: SimulatedNetwork, name: str) -> str:
    return str(get_json(net.node_urls[name])["nodeId"])


def session(document: Document) -> Document:
    """The one open vote session of a chain's status."""
    (only,) = document["voteSessions"].values()
    assert isinstance(only, dict)
    return only


def same_as_twin(net: SimulatedNetwork, twin: SimulatedNetwork, chain: str) -> None:
    """Every node's status of ``chain`` and its latest block, as the never-faulted twin's."""
    for name in tracking(net, chain):
        document = chain_doc(net, name, chain)
        assert document == twin.blockchain(name, chain), name
        height = document["blockHeight"]
        url = f"{net.node_urls[name]}blockchains/{chain}/blocks?height={height}"
        with twin:
            twin_url = f"{twin.node_urls[name]}blockchains/{chain}/blocks?height={height}"
            assert get_json(url) == get_json(twin_url), name


class Reader:
    """Reads a chain's status from every node tracking it, as an exporter polls, and counts
    the rounds each session moved through against the leader it had in the earlier read
    (the metrics contract's failed rounds per leader)."""

    def __init__(self, net: SimulatedNetwork, chain: str) -> None:
        self.net, self.chain = net, chain
        self.nodes = tracking(net, chain)
        self.last: dict[str, Document] = {}
        self.failures = {name: Counter[str]() for name in self.nodes}

    def read(self) -> dict[str, Document]:
        documents = {name: chain_doc(self.net, name, self.chain) for name in self.nodes}
        for name, document in documents.items():
            before = self.last.get(name)
            if before is not None:
                for key, now in document["voteSessions"].items():
                    earlier = before["voteSessions"].get(key)
                    if earlier is not None and now["round"] > earlier["round"]:
                        rise = now["round"] - earlier["round"]
                        self.failures[name][earlier["currentLeader"]] += rise
        self.last = documents
        return documents


# --- session_stuck -------------------------------------------------------------------------


def test_a_stuck_session_stays_open_its_rounds_climbing_under_rotating_leaders(
    net: SimulatedNetwork, twin: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    timer = catalog(net, chain)["round_timeout_seconds"]
    switch(net, node="*", fault="session_stuck", chain=chain)
    clock.advance(CATCH_UP)
    reader = Reader(net, chain)
    first = reader.read()
    (height,) = {d["blockHeight"] for d in first.values()}  # every node at the stopped height
    (stuck,) = {session(d)["sessionId"] for d in first.values()}
    council = first[reader.nodes[0]]["councilMembers"]
    required = len(council) * 2 // 3 + 1
    rounds: dict[str, list[tuple[int, str]]] = {name: [] for name in reader.nodes}
    for _ in range(40):
        clock.advance(timer / 2)
        for name, document in reader.read().items():
            open_session = session(document)
            assert document["blockHeight"] == height
            assert document["lastMessageTime"] == first[name]["lastMessageTime"]
            assert document["pendingTransactions"] > first[name]["pendingTransactions"]
            assert (open_session["sessionId"], open_session["blockHeight"]) == (stuck, height + 1)
            assert open_session["consensusRequired"] == required
            assert document["councilMembers"] == council
            rounds[name].append((open_session["round"], open_session["currentLeader"]))
    for name, seen in rounds.items():
        climbed = seen[-1][0] - session(first[name])["round"]
        assert abs(climbed - 20) <= 1, (name, seen)  # a round per timer: 40 half timers
        for (round_a, leader_a), (round_b, leader_b) in itertools.pairwise(seen):
            step = council.index(leader_b) - council.index(leader_a)
            assert step % len(council) == (round_b - round_a) % len(council), name
        leaders = {leader for _, leader in seen}
        assert leaders == set(council)  # every member led a round, none of them agreed
        assert sum(reader.failures[name].values()) == climbed
    switch(net, node="*", fault="session_stuck", chain=chain, enabled=False)
    same_as_twin(net, twin, chain)  # the height the chain would have had, at once


def test_the_round_timer_is_the_chains_consensus_timeout_scaled_or_the_one_given(
    net: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[1]
    document = chain_doc(net, tracking(net, chain)[0], chain)
    settings = document["consensus"]
    expected = (
        parse_go_duration(settings["consensusTimeout"])
        / parse_go_duration(settings["txMaxTimeTrigger"])
        * INTERVAL
    )
    assert catalog(net, chain)["round_timeout_seconds"] == pytest.approx(expected)
    switch(net, node="*", fault="session_stuck", chain=chain, delay_seconds="500ms")
    (fault,) = get_json(net.admin_url + "faults")["faults"]
    assert (fault["fault"], fault["delay_seconds"]) == ("session_stuck", 0.5)
    clock.advance(CATCH_UP)
    name = tracking(net, chain)[0]
    before = session(chain_doc(net, name, chain))["round"]
    clock.advance(10.0)
    assert abs(session(chain_doc(net, name, chain))["round"] - before - 20) <= 1


def test_one_node_stuck_alone_while_the_others_mint(net: SimulatedNetwork, clock: Clock) -> None:
    chain = net.chain_ids[0]
    switch(net, node="node-2", fault="session_stuck", chain=chain)
    clock.advance(CATCH_UP)
    stuck, other = chain_doc(net, "node-2", chain), chain_doc(net, "node-1", chain)
    clock.advance(10 * INTERVAL)
    assert chain_doc(net, "node-2", chain)["blockHeight"] == stuck["blockHeight"]
    assert session(chain_doc(net, "node-2", chain))["sessionId"] == session(stuck)["sessionId"]
    assert chain_doc(net, "node-1", chain)["blockHeight"] == other["blockHeight"] + 10


# --- leader_failing ------------------------------------------------------------------------


def first_leader(council: list[str], height: int) -> str:
    """Who leads round 1 of ``height`` (docs/simulator.md's rule: the next member each height)."""
    return council[height % len(council)]


def test_a_failing_leaders_rounds_time_out_and_the_next_member_mints(
    net: SimulatedNetwork, twin: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    listed = catalog(net, chain)
    timer, target = listed["round_timeout_seconds"], node_id(net, listed["council"][1])
    reader = Reader(net, chain)
    start = {name: d["blockHeight"] for name, d in reader.read().items()}
    switch(net, node="*", fault="leader_failing", chain=chain, target=target.upper())
    (fault,) = get_json(net.admin_url + "faults")["faults"]
    assert (fault["target"], fault["delay_seconds"]) == (listed["council"][1], 0.0)
    for _ in range(int(40 * INTERVAL / (timer / 4))):  # 40 block intervals, 4 reads a round
        clock.advance(timer / 4)
        reader.read()
    for name in reader.nodes:  # every node sees the leader fail, again and again
        assert reader.failures[name][target] >= 3, (name, reader.failures[name])
    documents = reader.read()
    council = documents[reader.nodes[0]]["councilMembers"]
    for name, document in documents.items():
        progress = document["blockHeight"] - start[name]
        assert 10 <= progress < twin.blockchain(name, chain)["blockHeight"] - start[name]
    # The blocks minted since: none by the failing leader; where it led round 1, the next
    # member proposed the block in round 2.
    url = f"{net.node_urls['node-1']}blockchains/{chain}/blocks"
    turns = 0
    for height in range(max(start.values()) + 2, documents["node-1"]["blockHeight"] + 1):
        block = get_json(url, params={"height": height})
        assert block["proposer"] != target, height
        if first_leader(council, height) == target:
            turns += 1
            following = council[(council.index(target) + 1) % len(council)]
            assert (block["round"], block["proposer"]) == (2, following), height
    assert turns >= 3
    switch(net, node="*", fault="leader_failing", chain=chain, target=target, enabled=False)
    same_as_twin(net, twin, chain)


def test_a_failing_leader_is_seen_by_a_slow_poller_when_rounds_outlast_its_interval(
    net: SimulatedNetwork, clock: Clock
) -> None:
    """The round timer given, 3 s, against reads every 2 s: each turn of the leader is read
    in its round, then again a round later (the metrics contract's counting)."""
    chain = net.chain_ids[0]
    leader = catalog(net, chain)["council"][0]
    switch(net, node="*", fault="leader_failing", chain=chain, target=leader, delay_seconds=3)
    reader = Reader(net, chain)
    turns = 0
    height = chain_doc(net, "node-1", chain)["blockHeight"]
    for _ in range(150):  # 300 s
        clock.advance(2.0)
        document = reader.read()["node-1"]
        council = document["councilMembers"]
        for passed in range(height + 2, document["blockHeight"] + 2):
            turns += first_leader(council, passed) == node_id(net, leader)
        height = document["blockHeight"]
    assert reader.failures["node-1"][node_id(net, leader)] >= turns - 1 >= 5


def test_every_member_failing_stops_the_chain_with_its_session_open(
    net: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    for member in catalog(net, chain)["council"]:
        switch(net, node="*", fault="leader_failing", chain=chain, target=member)
    clock.advance(CATCH_UP + 10 * INTERVAL)
    before = chain_doc(net, "node-3", chain)
    clock.advance(10 * INTERVAL)
    after = chain_doc(net, "node-3", chain)
    assert after["blockHeight"] == before["blockHeight"]
    assert session(after)["sessionId"] == session(before)["sessionId"]
    assert session(after)["round"] > session(before)["round"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"fault": "leader_failing"}, "needs a target: the failing leader"),
        ({"fault": "leader_failing", "target": "node-9"}, "no member of"),
        ({"fault": "council_change", "target": "0x00"}, "no member of"),
        ({"fault": "idle", "target": "node-1"}, "a target also for leader_failing"),
        ({"fault": "stall", "value": "1"}, "and cert_expiry (days) only, not stall"),
        ({"fault": "consensus_drift", "node": "*"}, "node '*' also for council_change"),
        ({"fault": "consensus_drift", "target": "blockTime"}, "unknown setting 'blockTime'"),
        ({"fault": "consensus_drift", "target": "minMembers", "value": -1}, "whole number"),
        ({"fault": "consensus_drift", "target": "enableTxProof", "value": "yes"}, "true or"),
        ({"fault": "consensus_drift", "value": "soon"}, "consensusTimeout: invalid duration"),
        ({"fault": "consensus_drift", "value": 1.5}, '"value" must be a string'),
    ],
)
def test_admin_refuses_bad_consensus_faults(
    net: SimulatedNetwork, body: dict[str, Any], message: str
) -> None:
    answer = post(net, **{"node": "node-1", "chain": net.chain_ids[0], **body})
    assert answer.status == 400
    assert message in answer.json()["error"]
    assert get_json(net.admin_url + "faults")["faults"] == []


def test_a_leader_is_named_by_node_name_or_node_id_as_one_fault(net: SimulatedNetwork) -> None:
    chain = net.chain_ids[0]
    member = catalog(net, chain)["council"][2]
    switch(net, node="*", fault="leader_failing", chain=chain, target=member)
    switch(net, node="*", fault="leader_failing", chain=chain, target=node_id(net, member))
    (fault,) = get_json(net.admin_url + "faults")["faults"]
    assert fault["target"] == member
    with pytest.raises(FaultError, match="no member of the blockchain's council"):
        net.set_fault("*", "leader_failing", chain=chain, target="node-6")


# --- down: the quorum thinning -------------------------------------------------------------


def test_council_members_down_to_the_quorum_stay_on_every_council(clock: Clock) -> None:
    """Eight nodes, a council of seven: five votes are required, so two members can go down;
    the others still list them (they are members), the votes required do not change, and
    the chain mints on."""
    with SimulatedNetwork(8, 1, INTERVAL, 0, clock=clock) as net:
        chain = net.chain_ids[0]
        council = catalog(net, chain)["council"]
        required = len(council) * 2 // 3 + 1
        assert (len(council), required) == (7, 5)
        gone = council[: len(council) - required]
        ids = [node_id(net, name) for name in council]
        for name in gone:
            switch(net, node=name, fault="down")
        up = [name for name in net.node_names if name not in gone]
        before = {name: chain_doc(net, name, chain)["blockHeight"] for name in up}
        clock.advance(10 * INTERVAL)
        for name in up:
            document = chain_doc(net, name, chain)
            assert document["councilMembers"] == ids
            assert document["blockHeight"] == before[name] + 10
        assert sum(name in council for name in up) == required
        sessions = wait_for_session(net, clock, up[0], chain)
        assert sessions["consensusRequired"] == required
        for name in gone:
            with pytest.raises(ConnectionError):
                fetch(net.node_urls[name] + "health", timeout=5)


def wait_for_session(net: SimulatedNetwork, clock: Clock, name: str, chain: str) -> Document:
    """The next vote session ``name`` shows, stepping the clock a tenth of a block at a time."""
    for _ in range(20):
        sessions = chain_doc(net, name, chain)["voteSessions"]
        if sessions:
            return session({"voteSessions": sessions})
        clock.advance(INTERVAL / 10)
    raise AssertionError(f"{name} showed no vote session in two blocks")


# --- consensus_drift -----------------------------------------------------------------------


def test_one_node_reports_other_consensus_settings(
    net: SimulatedNetwork, twin: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    healthy = chain_doc(net, "node-2", chain)
    switch(net, node="node-2", fault="consensus_drift")
    drifted = chain_doc(net, "node-2", chain)
    timeout = parse_go_duration(healthy["consensus"]["consensusTimeout"])
    assert parse_go_duration(drifted["consensus"]["consensusTimeout"]) == 2 * timeout
    assert {**drifted["consensus"], "consensusTimeout": None} == {
        **healthy["consensus"],
        "consensusTimeout": None,
    }
    switch(net, node="node-2", fault="consensus_drift", target="txMaxTimeTrigger", value="2m")
    switch(net, node="node-2", fault="consensus_drift", target="enableTxProof")
    switch(net, node="node-2", fault="consensus_drift", target="keyType", value="ed25519")
    drifted = chain_doc(net, "node-2", chain)
    assert drifted["consensus"]["txMaxTimeTrigger"] == "2m0s"
    assert drifted["features"]["enableTxProof"] is not healthy["features"]["enableTxProof"]
    assert drifted["keyType"] == "ed25519"
    listed = get_json(net.admin_url + "faults")["faults"]
    assert {(f["target"], f["value"]) for f in listed} == {
        ("consensusTimeout", None),
        ("txMaxTimeTrigger", "2m0s"),
        ("enableTxProof", None),
        ("keyType", "ed25519"),
    }
    for name in ("node-1", "node-3"):  # the others keep the deployment's settings
        assert chain_doc(net, name, chain)["consensus"] == healthy["consensus"]
    clock.advance(3 * INTERVAL)
    for setting in ("consensusTimeout", "txMaxTimeTrigger", "enableTxProof", "keyType"):
        switch(net, node="node-2", fault="consensus_drift", target=setting, enabled=False)
    same_as_twin(net, twin, chain)


# --- council_change ------------------------------------------------------------------------


def test_a_council_change_is_seen_by_every_node_once(
    net: SimulatedNetwork, twin: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    council = catalog(net, chain)["council"]
    nodes = tracking(net, chain)
    outsider = next(name for name in nodes if name not in council)
    views: dict[str, list[frozenset[str]]] = {name: [] for name in nodes}

    def read() -> None:
        for name in nodes:
            views[name].append(frozenset(chain_doc(net, name, chain)["councilMembers"]))

    read()
    switch(net, node="*", fault="council_change", chain=chain, target=council[0])
    for _ in range(int(CATCH_UP / (INTERVAL / 2))):
        clock.advance(INTERVAL / 2)
        read()
    changed = {ids for seen in views.values() for ids in seen[-1:]}
    expected = frozenset(node_id(net, n) for n in [*council[1:], outsider])
    assert changed == {expected}  # every node, one new council: the first member replaced
    for name, seen in views.items():  # the exporter's council-changes counter: 1 on each
        assert sum(a != b for a, b in itertools.pairwise(seen)) == 1, name
    assert chain_doc(net, council[0], chain)["isInCouncil"] is False
    assert chain_doc(net, outsider, chain)["isInCouncil"] is True
    leaders = set()
    for _ in range(40):  # the sessions rotate over the new council
        clock.advance(INTERVAL / 4)
        sessions = chain_doc(net, "node-1", chain)["voteSessions"].values()
        leaders |= {s["currentLeader"] for s in sessions}
        assert all(s["consensusRequired"] == len(expected) * 2 // 3 + 1 for s in sessions)
    assert leaders == expected
    switch(net, node="*", fault="council_change", chain=chain, target=council[0], enabled=False)
    same_as_twin(net, twin, chain)


def test_a_council_with_no_outsider_loses_its_last_member(clock: Clock) -> None:
    with SimulatedNetwork(4, 1, INTERVAL, 1, clock=clock) as net:  # every node on the council
        chain = net.chain_ids[0]
        council = catalog(net, chain)["council"]
        assert council == net.node_names
        switch(net, node="*", fault="council_change", chain=chain)
        clock.advance(CATCH_UP)
        expected = [node_id(net, name) for name in council[:-1]]
        for name in net.node_names:
            assert chain_doc(net, name, chain)["councilMembers"] == expected


# --- idle ----------------------------------------------------------------------------------


def test_an_idle_chain_has_nothing_pending_no_session_and_a_still_height(
    net: SimulatedNetwork, twin: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    switch(net, node="*", fault="idle", chain=chain)
    clock.advance(CATCH_UP)
    reader = Reader(net, chain)
    first = reader.read()
    (height,) = {d["blockHeight"] for d in first.values()}
    for _ in range(100):  # 50 blocks' time, read four times a block
        clock.advance(INTERVAL / 4)
        for name, document in reader.read().items():
            assert document["blockHeight"] == height
            assert document["lastMessageTime"] == first[name]["lastMessageTime"]
            assert document["voteSessions"] == {}
            assert (document["isVoting"], document["isTimeToVote"]) == (False, False)
            queues = ("pendingTransactions", "pendingMessagesCount", "delayedMessagesCount")
            assert [document[queue] for queue in queues] == [0, 0, 0]
    switch(net, node="*", fault="idle", chain=chain, enabled=False)
    same_as_twin(net, twin, chain)  # the chain resumes where it would have been


def test_a_stuck_session_wins_over_idle_and_a_stall_freezes_both(
    net: SimulatedNetwork, clock: Clock
) -> None:
    chain = net.chain_ids[0]
    switch(net, node="*", fault="idle", chain=chain)
    switch(net, node="*", fault="session_stuck", chain=chain)
    clock.advance(CATCH_UP)
    stuck = chain_doc(net, "node-1", chain)
    assert stuck["pendingTransactions"] > 0 and session(stuck)["round"] > 1
    switch(net, node="node-1", fault="stall")
    frozen = chain_doc(net, "node-1", chain)
    clock.advance(10 * INTERVAL)
    assert session(chain_doc(net, "node-1", chain)) == session(frozen)


# --- the same seed, the same faults: the same answers ---------------------------------------


def test_consensus_faults_are_deterministic(clock: Clock) -> None:
    networks = [SimulatedNetwork(NODES, CHAINS, INTERVAL, SEED, clock=clock) for _ in range(2)]
    chain = networks[0].chain_ids[0]
    for network in networks:
        network.set_fault("*", "leader_failing", chain=chain, target="node-2")
        network.set_fault("*", "council_change", chain=chain)
        network.set_fault("node-4", "consensus_drift", value="45s")
    for _ in range(60):
        clock.advance(INTERVAL * 0.37)
        one, two = ([n.blockchain(name, chain) for name in n.node_names] for n in networks)
        assert one == two


# --- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*:session_stuck", FaultSpec("*", "session_stuck", None, 0.0)),
        ("*:session_stuck=3s:abc", FaultSpec("*", "session_stuck", "abc", 3.0)),
        ("*:leader_failing=node-3", FaultSpec("*", "leader_failing", None, 0.0, target="node-3")),
        (
            "*:leader_failing=node-3,1m30s",
            FaultSpec("*", "leader_failing", None, 90.0, target="node-3"),
        ),
        ("*:council_change=node-1", FaultSpec("*", "council_change", None, 0.0, target="node-1")),
        ("node-2:consensus_drift", FaultSpec("node-2", "consensus_drift", None, 0.0)),
        (
            "node-2:consensus_drift=txMaxTimeTrigger=2m:abc",
            FaultSpec("node-2", "consensus_drift", "abc", 0.0, None, "txMaxTimeTrigger", "2m"),
        ),
        ("*:idle:abc", FaultSpec("*", "idle", "abc", 0.0)),
        (
            "node-2:identity_swap=node-3",
            FaultSpec("node-2", "identity_swap", None, 0.0, target="node-3"),
        ),
    ],
)
def test_fault_spec(text: str, expected: FaultSpec) -> None:
    assert parse_fault_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*:session_stuck=soon", "invalid --fault"),
        ("*:leader_failing=node-3,later", "invalid --fault"),
        ("*:idle=1", "session_stuck=ROUND_TIMEOUT"),
    ],
)
def test_fault_spec_errors(text: str, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        parse_fault_spec(text)


def test_simulate_switches_consensus_faults_at_start() -> None:
    faults = [
        "*:leader_failing=node-2,3s",
        "*:council_change",
        "node-1:consensus_drift=txMaxTimeTrigger=2m",
        "*:session_stuck",
    ]
    args = [part for fault in faults for part in ("--fault", fault)]
    with simulate("--nodes", "4", "--seed", "1", *args) as (process, urls):
        assert process.poll() is None
        listed = get_json(urls["admin"] + "faults")["faults"]
        assert sorted((f["node"], f["fault"], f["target"], f["delay_seconds"]) for f in listed) == [
            ("*", "council_change", None, 0.0),
            ("*", "leader_failing", "node-2", 3.0),
            ("*", "session_stuck", None, 0.0),
            ("node-1", "consensus_drift", "txMaxTimeTrigger", 0.0),
        ]
        chain = get_json(urls["node-1"] + "blockchains")[0]
        document = get_json(f"{urls['node-1']}blockchains/{chain}")
        assert document["consensus"]["txMaxTimeTrigger"] == "2m0s"
