"""Consensus health followed across cycles (issue 21): vote session ages, round changes,
failed rounds per leader and council changes, as the history folds one node's chain reads.

Each case is a table of cycles on a hand-stepped clock: what the chain answered (its
``voteSessions`` and ``councilMembers``, or a failed read) and what the history reports after
it. Then the bounds (sessions and leader keys per chain, memory forgotten with the session),
and a restart through the state file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from exporter.bounds import DEFAULT_BOUNDS, MAX_SESSION_ID_CHARS, Bounds, DropKind
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.errors import StateFileError
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.model.snapshot import ChainStatus, ConsensusStatus
from exporter.poll.history import History
from exporter.poll.results import ChainResult, FetchError, NodeResult
from exporter.poll.state import State, decode, encode, for_config
from tests.support.documents import chain_doc, health_doc

START = 1_700_000_000.0
COUNCIL = ["k1", "k2", "k3", "k4"]
Sessions = dict[str, tuple[int, str]]  # session id -> (round, currentLeader)


def sessions_doc(sessions: Sessions) -> dict[str, Any]:
    return {
        sid: {"sessionId": sid, "round": r, "currentLeader": leader, "consensusRequired": 3}
        for sid, (r, leader) in sessions.items()
    }


@dataclass(frozen=True)
class Cycle:
    """One poll: ``at`` seconds after START, the chain's sessions (None: the read failed,
    ``"node down"``: /health failed), its council; what the history reports after it."""

    at: float
    sessions: Sessions | str | None
    age: float | None
    rounds: int
    failed: dict[str, int] = field(default_factory=dict)  # leader -> count; others at 0
    council: list[str] = field(default_factory=lambda: list(COUNCIL))
    council_changes: int = 0


def result(cycle: Cycle, bounds: Bounds = DEFAULT_BOUNDS) -> NodeResult:
    node = NodeConfig("a", "http://x/")
    if cycle.sessions == "node down":
        return NodeResult(node, None, FetchError(Reason.TIMEOUT, "boom"), [], 0.1)
    if cycle.sessions is None:
        chain = ChainResult("c", None, FetchError(Reason.HTTP_STATUS, "HTTP status 500"))
    else:
        assert not isinstance(cycle.sessions, str)
        document = chain_doc(10, voteSessions=sessions_doc(cycle.sessions))
        document["councilMembers"] = cycle.council
        chain = ChainResult("c", read_chain(document, bounds=bounds))
    return NodeResult(node, read_health(health_doc(["c"])), None, [chain], 0.1)


def consensus_of(
    history: History, cycle: Cycle, bounds: Bounds = DEFAULT_BOUNDS
) -> ChainStatus | None:
    (node,) = history.record([result(cycle, bounds)], START + cycle.at, bounds)
    return node.chains[0] if node.chains else None


def failures(status: ConsensusStatus) -> dict[str, int]:
    return dict(status.leader_failures)


CASES: dict[str, list[Cycle]] = {
    "a new session is 0 s old, then ages on the exporter's clock": [
        Cycle(0, {}, None, 0),
        Cycle(15, {"s1": (1, "k1")}, 0.0, 0),
        Cycle(30, {"s1": (1, "k1")}, 15.0, 0),
        Cycle(45, {"s1": (1, "k1")}, 30.0, 0),
    ],
    "a round up counts against the leader of the earlier read": [
        Cycle(0, {"s1": (1, "k1")}, 0.0, 0),
        Cycle(15, {"s1": (2, "k2")}, 15.0, 1, {"k1": 1}),
        Cycle(30, {"s1": (4, "k4")}, 30.0, 3, {"k1": 1, "k2": 2}),
    ],
    "a round down, or a round the node stops reporting, adds nothing": [
        Cycle(0, {"s1": (3, "k1")}, 0.0, 0),
        Cycle(15, {"s1": (2, "k2")}, 15.0, 0),
        Cycle(30, {"s1": ("?", "k2")}, 30.0, 0),  # type: ignore[dict-item]
        Cycle(45, {"s1": (5, "k3")}, 45.0, 0),  # no round in the earlier read: no pair
        Cycle(60, {"s1": (6, "k3")}, 60.0, 1, {"k3": 1}),
    ],
    "a session gone is forgotten; the next one starts from its own first sighting": [
        Cycle(0, {"s1": (1, "k1")}, 0.0, 0),
        Cycle(15, {"s1": (2, "k1")}, 15.0, 1, {"k1": 1}),
        Cycle(30, {}, None, 1, {"k1": 1}),
        Cycle(45, {"s2": (5, "k2")}, 0.0, 1, {"k1": 1}),  # round 5 seen once: nothing
        Cycle(60, {"s1": (3, "k3")}, 0.0, 1, {"k1": 1}),  # s1 again: a new first sighting
    ],
    "the age is the oldest open session's": [
        Cycle(0, {"s1": (1, "k1")}, 0.0, 0),
        Cycle(15, {"s1": (1, "k1"), "s2": (1, "k2")}, 15.0, 0),
        Cycle(30, {"s2": (2, "k3")}, 15.0, 1, {"k2": 1}),
    ],
    "a leader outside the council gets a series from its first failure": [
        Cycle(0, {"s1": (1, "outsider")}, 0.0, 0),
        Cycle(15, {"s1": (2, "k1")}, 15.0, 1, {"outsider": 1}),
    ],
    "a session without a leader counts its rounds against nobody": [
        Cycle(0, {"s1": (1, "")}, 0.0, 0),
        Cycle(15, {"s1": (3, "k1")}, 15.0, 2),
    ],
    "a council change counts once per changed set, order ignored": [
        Cycle(0, {}, None, 0),
        Cycle(15, {}, None, 0, council=["k4", "k3", "k2", "k1"]),
        Cycle(30, {}, None, 0, council=["k1", "k2", "k3", "k5"], council_changes=1),
        Cycle(45, {}, None, 0, council=["k1", "k2", "k3", "k5"], council_changes=1),
        Cycle(60, {}, None, 0, council=COUNCIL, council_changes=2),
    ],
    "a failed chain read breaks the round pairs but not the age or the counters": [
        Cycle(0, {"s1": (1, "k1")}, 0.0, 0, council=["k1", "k2", "k3", "k5"]),
        Cycle(15, {"s1": (2, "k1")}, 15.0, 1, {"k1": 1}, council=["k1", "k2", "k3", "k5"]),
        Cycle(30, None, None, 0),
        Cycle(45, {"s1": (5, "k2")}, 45.0, 1, {"k1": 1}, council_changes=1),
        Cycle(60, {"s1": (6, "k2")}, 60.0, 2, {"k1": 1, "k2": 1}, council_changes=1),
    ],
    "a node down breaks the round pairs too": [
        Cycle(0, {"s1": (1, "k1")}, 0.0, 0),
        Cycle(15, "node down", None, 0),
        Cycle(30, {"s1": (4, "k2")}, 30.0, 0),
        Cycle(45, {"s1": (5, "k2")}, 45.0, 1, {"k2": 1}),
    ],
}


@pytest.mark.parametrize("cycles", CASES.values(), ids=list(CASES))
def test_sessions_followed_across_cycles(cycles: list[Cycle]) -> None:
    history = History()
    for cycle in cycles:
        chain = consensus_of(history, cycle)
        if not isinstance(cycle.sessions, dict):  # unread: the chain's series vanish
            assert chain is None or chain.consensus is None, cycle
            continue
        assert chain is not None and chain.consensus is not None
        status = chain.consensus
        expected = dict.fromkeys(cycle.council, 0) | cycle.failed
        assert (status.session_age, status.round_changes) == (cycle.age, cycle.rounds), cycle
        assert failures(status) == expected, cycle
        assert status.council_changes == cycle.council_changes, cycle


def test_leader_series_are_in_key_order_and_a_former_member_keeps_its_count() -> None:
    history = History()
    consensus_of(history, Cycle(0, {"s1": (1, "k4")}, 0.0, 0))
    consensus_of(history, Cycle(15, {"s1": (2, "k1")}, 15.0, 1))
    chain = consensus_of(history, Cycle(30, {}, None, 1, council=["k3", "k2", "k1", "k9"]))
    assert chain is not None and chain.consensus is not None
    keys = [key for key, _ in chain.consensus.leader_failures]
    assert keys == ["k1", "k2", "k3", "k9", "k4"]  # the council by name, then the others
    assert failures(chain.consensus) == {"k1": 0, "k2": 0, "k3": 0, "k9": 0, "k4": 1}


# --- bounds -----------------------------------------------------------------------------


def remembered_sessions(history: History) -> int:
    """The vote sessions the history remembers across nodes and chains, as a restart would
    find them (its state)."""
    nodes = history.state().nodes.values()
    return sum(len(chain.sessions) for node in nodes for chain in node.chains.values())


def test_only_the_sessions_open_now_are_remembered() -> None:
    """Bounded memory: whatever sessions came and went, the history keeps the open ones."""
    history = History()
    for index in range(200):
        open_now = {f"s{index}": (1, "k1"), f"s{index + 1}": (2, "k2")}
        consensus_of(history, Cycle(15.0 * index, open_now, None, 0))
    assert remembered_sessions(history) == 2
    consensus_of(history, Cycle(3000, {}, None, 0))
    assert remembered_sessions(history) == 0


def drops(history: History, cycle: Cycle, bounds: Bounds) -> dict[str, int]:
    (node,) = history.record([result(cycle, bounds)], START + cycle.at, bounds)
    return {kind.value: count for kind, count in zip(DropKind, node.dropped, strict=True)}


def test_sessions_beyond_the_bound_are_not_followed_and_counted() -> None:
    bounds = Bounds(vote_sessions_per_chain=2)
    history = History()
    many = {f"s{i}": (1, "k1") for i in (5, 3, 9, 1)}
    counted = drops(history, Cycle(0, many, None, 0), bounds)
    assert counted["vote_session"] == 2
    assert remembered_sessions(history) == 2
    again = {f"s{i}": (2, "k2") for i in (5, 3, 9, 1)}
    chain = consensus_of(history, Cycle(15, again, None, 0), bounds)
    assert chain is not None and chain.consensus is not None
    assert chain.consensus.round_changes == 2  # s1 and s3, the first two by id
    assert dict(chain.consensus.leader_failures)["k1"] == 2


def test_leader_keys_beyond_the_bound_are_dropped_and_counted() -> None:
    bounds = Bounds(leaders_per_chain=5)
    history = History()
    council = [f"k{i}" for i in range(1, 8)]  # 7 keys, 5 get a series
    first = drops(history, Cycle(0, {"s1": (1, "x1")}, None, 0, council=council), bounds)
    assert first["leader"] == 2
    chain = consensus_of(history, Cycle(15, {"s1": (2, "x2")}, None, 0, council=council), bounds)
    assert chain is not None and chain.consensus is not None
    assert [key for key, _ in chain.consensus.leader_failures] == ["k1", "k2", "k3", "k4", "k5"]
    counted = drops(history, Cycle(30, {"s1": (3, "k1")}, None, 0, council=council), bounds)
    assert counted["leader"] == 2 + (2 + 1) + (2 + 1)  # x1's and x2's failures: no room


def test_an_over_long_leader_key_is_a_dropped_label_value() -> None:
    bounds = Bounds(label_value_length=40)  # the documents' other labels fit
    history = History()
    long_key = "k" * 41
    counted = drops(history, Cycle(0, {"s1": (1, long_key)}, None, 0), bounds)
    assert counted["label_value"] == 1
    chain = consensus_of(history, Cycle(15, {"s1": (2, long_key)}, None, 0), bounds)
    assert chain is not None and chain.consensus is not None
    assert chain.consensus.round_changes == 1
    assert failures(chain.consensus) == dict.fromkeys(COUNCIL, 0)


def test_a_chain_no_longer_listed_forgets_its_counters() -> None:
    history = History()
    consensus_of(history, Cycle(0, {"s1": (1, "k1")}, None, 0))
    consensus_of(history, Cycle(15, {"s1": (2, "k1")}, None, 0))
    node = NodeConfig("a", "http://x/")
    history.record([NodeResult(node, read_health(health_doc([])), None, [], 0.1)], START + 30)
    assert remembered_sessions(history) == 0
    chain = consensus_of(history, Cycle(45, {"s1": (3, "k1")}, None, 0))
    assert chain is not None and chain.consensus is not None
    assert (chain.consensus.round_changes, chain.consensus.session_age) == (0, 0.0)


# --- restart with the state file --------------------------------------------------------


def test_a_restart_keeps_the_first_sightings_of_sessions_still_open() -> None:
    history = History()
    consensus_of(history, Cycle(0, {"s1": (1, "k1"), "s2": (1, "k2")}, None, 0))
    consensus_of(history, Cycle(15, {"s1": (2, "k1"), "s2": (1, "k2")}, None, 0))
    kept = decode(encode(history.state()))
    assert kept.nodes["a"].chains["c"].sessions == {"s1": START, "s2": START}
    assert kept.nodes["a"].node_id == "02ab" * 8
    restarted = History(kept)
    # after the restart the node still reports s1 (with a higher round) but no longer s2
    chain = consensus_of(restarted, Cycle(600, {"s1": (4, "k2"), "s3": (1, "k3")}, None, 0))
    assert chain is not None and chain.consensus is not None
    assert chain.consensus.session_age == 600.0  # s1, from its first sighting before
    assert chain.consensus.round_changes == 0  # counters restart from 0 with the exporter
    assert restarted.state().nodes["a"].chains["c"].sessions == {"s1": START, "s3": START + 600}
    later = consensus_of(restarted, Cycle(615, {"s3": (1, "k3")}, None, 0))
    assert later is not None and later.consensus is not None
    assert later.consensus.session_age == 15.0  # s1 closed: s3 is the oldest now


def state_document(node: dict[str, Any]) -> bytes:
    chain = {"height": 1, "height_changed_at": START}
    body = {"blockchains": {"c": chain}} | node
    if "vote_sessions" in node:
        body = {"blockchains": {"c": chain | {"vote_sessions": node["vote_sessions"]}}}
    document = {"format": "ledger-exporter-state", "version": 1, "nodes": {"a": body}}
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    "node",
    [
        {"node_id": 7},
        {"node_id": ""},
        {"vote_sessions": []},
        {"vote_sessions": {"s1": START}},
        {"vote_sessions": {"s1": {"first_seen": "yesterday"}}},
        {"vote_sessions": {"s" * (MAX_SESSION_ID_CHARS + 1): {"first_seen": START}}},
    ],
    ids=repr,
)
def test_an_unreadable_session_or_node_id_makes_the_file_corrupt(node: dict[str, Any]) -> None:
    with pytest.raises(StateFileError) as raised:
        decode(state_document(node))
    assert raised.value.kind == "corrupt"


def test_only_what_the_config_can_follow_is_restored() -> None:
    seen = {f"s{i}": START for i in range(5)} | {"future": START + 3600}
    sessions = {sid: {"first_seen": at} for sid, at in seen.items()}
    kept = decode(state_document({"vote_sessions": sessions}))
    config = Config(nodes=(NodeConfig("a", "http://x/"),), bounds=Bounds(vote_sessions_per_chain=3))
    restored = for_config(kept, config, START + 60)
    assert restored.nodes["a"].chains["c"].sessions == {"s0": START, "s1": START, "s2": START}
    assert for_config(kept, Config(nodes=(NodeConfig("b", "http://x/"),)), START) == State()
