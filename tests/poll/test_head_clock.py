"""The chain head's clock behind ``ledger_blockchain_behind_seconds`` (issue 37): how long ago
the head first reached one above a node's height, against an oracle that keeps every cycle;
heights arriving out of order, nodes going away, the bound and its compaction, and the
record carried across a restart."""

from __future__ import annotations

import hypothesis
from hypothesis import strategies as st

from exporter.bounds import HEAD_RISES_PER_CHAIN
from exporter.config.nodes import NodeConfig
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import NodeStatus
from exporter.poll.head_clock import HeadClock
from exporter.poll.history import History
from exporter.poll.results import ChainResult, NodeResult
from exporter.poll.state import State, decode, encode
from tests.support.documents import chain_doc, health_doc
from tests.support.generation import examples

#: One cycle: seconds since the previous one, then each node's height (None: down or not
#: reading the chain this cycle).
Cycle = tuple[float, tuple[int | None, ...]]
NODES = 4


def cycles(count: int) -> st.SearchStrategy[list[Cycle]]:
    heights = st.one_of(st.none(), st.integers(0, 60))
    return st.lists(
        st.tuples(st.floats(0.01, 30.0), st.tuples(*([heights] * NODES))),
        min_size=1,
        max_size=count,
    )


def first_reached(history: list[tuple[float, int]], height: int) -> float | None:
    """The oracle: the time of the first cycle whose highest height is at least ``height``."""
    return next((at for at, top in history if top >= height), None)


@hypothesis.settings(max_examples=examples(150), deadline=None)
@hypothesis.given(cycles(HEAD_RISES_PER_CHAIN // 2))
def test_behind_seconds_is_how_long_ago_the_head_first_reached_the_next_height(
    drawn: list[Cycle],
) -> None:
    """Within the bound every first sighting is exact, whatever order heights come in and
    whichever nodes answer: 0 at the cycle's head, else now minus the first cycle whose
    highest height passed the node's."""
    clock = HeadClock()
    now = 1000.0
    seen: list[tuple[float, int]] = []
    for step, heights in drawn:
        now += step
        read = [h for h in heights if h is not None]
        if not read:
            continue
        top = max(read)
        seen.append((now, top))
        clock.advance({"c": top}, now)
        for height in read:
            behind = clock.behind("c", height, top, now)
            if height == top:
                assert behind == 0.0
            else:
                reached = first_reached(seen, height + 1)
                assert reached is not None
                assert behind == now - reached


@hypothesis.settings(max_examples=examples(30), deadline=None)
@hypothesis.given(st.lists(st.integers(1, 5), min_size=HEAD_RISES_PER_CHAIN * 2, max_size=600))
def test_past_the_bound_the_lag_is_never_overstated_and_recent_heights_stay_exact(
    rises: list[int],
) -> None:
    """Compaction keeps at most the bound, never reports more than the true lag, and keeps
    the last cycles at the poll's resolution."""
    clock = HeadClock()
    seen: list[tuple[float, int]] = []
    height = 0
    for cycle, rise in enumerate(rises):
        height += rise
        seen.append((float(cycle), height))
        clock.advance({"c": height}, float(cycle))
    now = float(len(rises))
    assert len(clock.records()["c"]) <= HEAD_RISES_PER_CHAIN
    for at, top in seen:
        behind = clock.behind("c", top - 1, height, now)
        truth = now - (first_reached(seen, top) or 0.0)
        assert behind is not None and behind <= truth
        if at >= len(rises) - HEAD_RISES_PER_CHAIN // 4:
            assert behind == truth


def test_a_node_older_than_the_record_counts_from_its_oldest_entry() -> None:
    """A height reached before the exporter first saw the chain: at least the time since."""
    clock = HeadClock()
    clock.advance({"c": 500}, 10.0)
    clock.advance({"c": 501}, 20.0)
    assert clock.behind("c", 100, 501, 30.0) == 20.0
    assert clock.behind("c", 500, 501, 30.0) == 10.0
    assert clock.behind("c", 501, 501, 30.0) == 0.0


def test_a_head_node_going_away_moves_no_first_sighting() -> None:
    clock = HeadClock()
    clock.advance({"c": 10}, 1.0)
    clock.advance({"c": 15}, 2.0)  # the head node
    clock.advance({"c": 12}, 3.0)  # the head node is down: the highest falls
    clock.advance({"c": 16}, 4.0)
    assert clock.behind("c", 12, 16, 5.0) == 3.0  # 13 was first reached at 2.0
    assert clock.behind("c", 15, 16, 5.0) == 1.0


def test_chains_no_node_remembers_are_forgotten() -> None:
    clock = HeadClock()
    clock.advance({"c": 10, "d": 3}, 1.0)
    clock.keep(["d"])
    assert set(clock.records()) == {"d"}
    assert clock.behind("c", 5, 10, 2.0) is None


def _up(name: str, height: int) -> NodeResult:
    chains = [ChainResult("c", read_chain(chain_doc(height)))]
    return NodeResult(NodeConfig(name, "http://x/"), read_health(health_doc([])), None, chains, 0.1)


def _behind(nodes: tuple[NodeStatus, ...], name: str) -> float | None:
    return next(n for n in nodes if n.name == name).chains[0].behind_seconds


def test_the_history_reports_it_and_a_restart_keeps_it_through_the_state_file() -> None:
    """The history hands the record to the state file on the wall clock; a history built
    from the file on another monotonic clock goes on with the same first sightings."""
    history = History(None, wall_offset=1_700_000_000.0)
    history.record([_up("a", 100), _up("b", 100), _up("c", 100)], now_mono=10.0)
    nodes = history.record([_up("a", 103), _up("b", 100), _up("c", 103)], now_mono=25.0)
    assert _behind(nodes, "a") == 0.0
    assert _behind(nodes, "b") == 0.0  # 101 first reached just now
    nodes = history.record([_up("a", 105), _up("b", 101), _up("c", 105)], now_mono=40.0)
    assert _behind(nodes, "b") == 15.0  # 102 first reached at 25
    kept = decode(encode(history.state(1_700_000_000.0)))
    # the next process: its monotonic clock reads 5000 when the wall clock reads +50
    restarted = History(kept, wall_offset=1_700_000_000.0 + 50.0 - 5000.0)
    nodes = restarted.record([_up("a", 105), _up("b", 101), _up("c", 105)], now_mono=5000.0)
    assert _behind(nodes, "b") == 25.0  # 102 first reached 25 s before, on the wall clock
    assert _behind(nodes, "a") == 0.0


def test_one_inflated_node_moves_neither_the_head_nor_its_clock() -> None:
    """A node reporting heights 10**9 too high is ahead of the majority's head (0 behind),
    puts no honest node behind, and records no rise of the head: once the honest nodes
    stall, their lag grows from when the majority last moved, not from the liar's heights."""
    history = History()
    liar = 10**9
    history.record([_up("a", 100), _up("b", 100), _up("c", 99), _up("x", liar)], now_mono=10.0)
    nodes = history.record(
        [_up("a", 101), _up("b", 101), _up("c", 100), _up("x", liar + 50)], now_mono=25.0
    )
    assert [c.blocks_behind for n in nodes for c in n.chains] == [0, 0, 1, 0]
    assert _behind(nodes, "x") == 0.0
    assert _behind(nodes, "c") == 0.0  # 101, the majority's, first reached just now
    nodes = history.record(
        [_up("a", 101), _up("b", 101), _up("c", 100), _up("x", liar + 99)], now_mono=40.0
    )
    assert _behind(nodes, "c") == 15.0  # the liar's rising heights did not move the head
    assert [c.blocks_behind for n in nodes for c in n.chains] == [0, 0, 1, 0]


def test_records_round_trip_through_the_file() -> None:
    clock = HeadClock()
    clock.advance({"c": 100}, 5.0)
    clock.advance({"c": 104}, 9.0)
    wall = 1_700_000_000.0
    records = clock.records(wall)
    restored = decode(encode(State({}, records))).heads
    assert restored == {"c": ((100.0, wall + 5.0), (104.0, wall + 9.0))}
    again = HeadClock(restored, wall - 1000.0)  # another process: another monotonic clock
    assert again.behind("c", 101, 104, 1010.0) == 1010.0 - 1009.0
