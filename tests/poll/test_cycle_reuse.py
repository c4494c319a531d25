"""Edge cases of issue 22's cheaper cycle assembly on the poll thread: a chain's leader counts
are the last cycle's object while nothing they hold changed, and a new one as soon as the
council or a count does; the majorities read as their definition says; nodes that reached the
same checkpoints share one block plan, and a node below one is planned without it."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.model.fields import BLOCK_HEIGHT, ChainReading, VoteSession
from exporter.model.network import majority_agreement
from exporter.model.snapshot import ChainStatus, LeaderCounts, NodeStatus
from exporter.poll.consensus_history import ChainConsensus
from exporter.poll.cycle import Poller
from tests.support import generation
from tests.support.gauges import gauges_packed

NAN = float("nan")


def reading(
    height: float | None, leaders: tuple[str, ...], sessions: tuple[VoteSession, ...] = ()
) -> ChainReading:
    packed = gauges_packed({} if height is None else {BLOCK_HEIGHT: height})
    return ChainReading(values=packed, leaders=leaders, sessions=sessions)


def session(round_: float, leader: str) -> VoteSession:
    return VoteSession("s1", round_, leader)


def test_leader_counts_are_kept_while_unchanged_and_made_anew_when_they_change() -> None:
    followed = ChainConsensus()
    first, _ = followed.follow(reading(1, ("a", "b")), 1.0, 8)
    again, _ = followed.follow(reading(1, tuple(["a", "b"])), 2.0, 8)  # equal, not the same
    assert again.leader_failures is first.leader_failures
    assert list(again.leader_failures) == [("a", 0), ("b", 0)]
    changed, _ = followed.follow(reading(1, ("a", "c")), 3.0, 8)
    assert changed.leader_failures is not first.leader_failures
    assert list(changed.leader_failures) == [("a", 0), ("c", 0)]
    # a round lost under leader "a": counts from then on, never the zeros kept before
    followed.follow(reading(1, ("a", "c"), (session(1, "a"),)), 4.0, 8)
    failed, _ = followed.follow(reading(1, ("a", "c"), (session(3, "c"),)), 5.0, 8)
    assert list(failed.leader_failures) == [("a", 2), ("c", 0)]
    assert failed.leader_failures.counts


def test_leader_counts_start_empty_for_a_chain_without_leaders() -> None:
    status, _ = ChainConsensus().follow(reading(1, ()), 1.0, 8)
    assert status.leader_failures == LeaderCounts() and list(status.leader_failures) == []


@hypothesis_settings(generation.settings(200))
@given(st.lists(st.tuples(st.sampled_from("nmopq"), st.sampled_from("xyz")), max_size=9))
def test_majority_agreement_is_its_definition(values: list[tuple[str, str]]) -> None:
    counts = Counter(value for _, value in values)
    winner = next((v for v, c in counts.items() if 2 * c > len(values)), None)
    expected = [(node, value == winner) for node, value in sorted(values, key=lambda p: p[0])]
    distinct, agreement = majority_agreement(values)
    assert distinct == len(counts) and list(agreement) == expected


def node_status(name: str, heights: dict[str, float | None]) -> NodeStatus:
    chains = tuple(
        ChainStatus(chain, None if height is None else reading(height, ()))
        for chain, height in heights.items()
    )
    return NodeStatus(name, (), None, None, chains, 0.1, None)


def test_nodes_that_reached_the_same_checkpoints_share_one_plan() -> None:
    nodes = tuple(NodeConfig(f"n{i}", f"http://127.0.0.1:9/n{i}/") for i in range(5))
    poller = Poller(Config(nodes=nodes), lambda snapshot: None)
    try:
        poller._checkpoints = {"c1": 100, "c2": 50}
        plans = poller._plan_blocks(
            [
                node_status("n0", {"c1": 120, "c2": 60}),
                node_status("n1", {"c1": 100, "c2": 50}),  # exactly at both checkpoints
                node_status("n2", {"c1": 99, "c2": 60}),  # below c1's: not asked for it
                node_status("n3", {"c1": None, "c2": 60, "c3": 7}),  # c1 unread, c3 unplanned
                node_status("n4", {}),
            ]
        )
    finally:
        poller.stop()
    assert plans == {
        "n0": {"c1": 100, "c2": 50},
        "n1": {"c1": 100, "c2": 50},
        "n2": {"c2": 50},
        "n3": {"c2": 50},
        "n4": {},
    }
    assert plans["n0"] is plans["n1"] and plans["n2"] is plans["n3"]
