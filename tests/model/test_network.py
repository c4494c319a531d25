"""The cross-node view (exporter.model.network) and the readings it is built from: majorities,
checkpoints, council views and peer partitions, as tables."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import pytest

from exporter.model.network import (
    ChainObservation,
    Listing,
    NodeObservation,
    majority_agreement,
    majority_height,
    network_view,
    next_checkpoint,
    observe,
    partitions,
    peer_groups,
    unexpected_chains,
)
from exporter.model.readings import InvalidResponseError, read_block_hash, read_chain, read_health

FIELDS = ("hash", "blockHash")


def chain(
    height: float | None = 100,
    syncing: bool | None = False,
    council: frozenset[str] | None = frozenset({"a", "b", "c"}),
    block: str | None = "h1",
    blockchain: str = "c1",
) -> ChainObservation:
    return ChainObservation(blockchain, height, syncing, council, block)


def node(name: str, peers: Iterable[str], *chains: ChainObservation) -> NodeObservation:
    return NodeObservation(name, "p-" + name, tuple(sorted({"p-" + p for p in peers})), chains)


@pytest.mark.parametrize(
    ("values", "distinct", "agrees"),
    [
        ([], 0, {}),
        ([("n1", "x")], 1, {"n1": True}),
        ([("n1", "x"), ("n2", "x"), ("n3", "y")], 2, {"n1": True, "n2": True, "n3": False}),
        ([("n1", "x"), ("n2", "y")], 2, {"n1": False, "n2": False}),  # no strict majority
        ([("n1", "x"), ("n2", "y"), ("n3", "z")], 3, {"n1": False, "n2": False, "n3": False}),
        (
            [("n1", "x"), ("n2", "x"), ("n3", "y"), ("n4", "y")],
            2,
            dict.fromkeys(("n1", "n2", "n3", "n4"), False),
        ),
    ],
)
def test_majority_agreement(
    values: list[tuple[str, str]], distinct: int, agrees: dict[str, bool]
) -> None:
    count, result = majority_agreement(values)
    assert count == distinct
    assert dict(result) == agrees


@pytest.mark.parametrize(
    ("chains", "depth", "expected"),
    [
        ([chain(100), chain(97)], 5, 92),
        ([chain(100), chain(3)], 5, 0),  # never below 0
        ([chain(100), chain(50, syncing=True)], 5, 95),  # a syncing node does not pull it down
        ([chain(100), chain(50, syncing=None)], 5, 45),  # unknown syncing counts as not syncing
        ([chain(None), chain(100)], 5, 95),
        ([chain(None)], 5, None),
        ([chain(100)], 0, None),  # depth 0 turns block checks off
        # the highest height a strict majority reached: a stalled node cannot pin it down
        ([chain(100), chain(200), chain(200)], 5, 195),
        ([chain(200), chain(100), chain(150)], 5, 145),
        ([chain(100), chain(200), chain(200), chain(200)], 5, 195),
        ([chain(100), chain(100), chain(200), chain(200)], 5, 95),  # 2 of 4 is no majority
        ([chain(100), chain(200), chain(200), chain(50, syncing=True)], 5, 195),
        ([chain(100)], 5, 95),
    ],
)
def test_next_checkpoint(chains: list[ChainObservation], depth: int, expected: int | None) -> None:
    assert next_checkpoint(chains, depth) == expected


def test_healthy_network_agrees_everywhere() -> None:
    nodes = [node(n, {"n1", "n2", "n3"} - {n}, chain()) for n in ("n1", "n2", "n3")]
    view = network_view(nodes, {"c1": 95}, depth=5)
    (c1,) = view.chains
    assert (c1.checkpoint_height, c1.checkpoint_hashes, c1.council_views) == (95, 1, 1)
    assert dict(c1.block_agrees) == dict.fromkeys(("n1", "n2", "n3"), True)
    assert dict(c1.council_agrees) == dict.fromkeys(("n1", "n2", "n3"), True)
    assert c1.next_checkpoint == 95
    assert view.partitions == 1
    assert dict(view.polled_peers) == {"n1": 2, "n2": 2, "n3": 2}


def test_fork_council_and_unread_block_land_on_the_right_node() -> None:
    other = frozenset({"a", "b", "x"})
    nodes = [
        node("n1", set(), chain(block="h1")),
        node("n2", set(), chain(block="h2")),  # forked
        node("n3", set(), chain(block=None, council=other)),  # block unread, other council
        node("n4", set(), chain(block="h1", council=None)),  # council unreadable
        node("n5", set(), chain(block="h1")),
    ]
    (c1,) = network_view(nodes, {"c1": 95}, depth=5).chains
    assert c1.checkpoint_hashes == 2
    assert dict(c1.block_agrees) == {"n1": True, "n2": False, "n4": True, "n5": True}
    assert c1.council_views == 2
    assert dict(c1.council_agrees) == {"n1": True, "n2": True, "n3": False, "n5": True}


def test_no_block_read_gives_no_checkpoint_series() -> None:
    (c1,) = network_view([node("n1", set(), chain(block=None))], {}, depth=5).chains
    assert (c1.checkpoint_height, c1.checkpoint_hashes, len(c1.block_agrees)) == (None, None, 0)
    assert c1.next_checkpoint == 95


def test_chains_are_compared_among_their_own_readers() -> None:
    nodes = [
        node("n1", set(), chain(blockchain="c1"), chain(blockchain="c2", block="z")),
        node("n2", set(), chain(blockchain="c1")),
    ]
    view = network_view(nodes, {"c1": 95, "c2": 7}, depth=5)
    assert [(c.blockchain, c.checkpoint_hashes, c.checkpoint_height) for c in view.chains] == [
        ("c1", 1, 95),
        ("c2", 1, 7),
    ]
    assert {c.blockchain: c.next_checkpoint for c in view.chains} == {"c1": 95, "c2": 95}


@pytest.mark.parametrize(
    ("links", "components", "polled"),
    [
        (
            {"n1": {"n2"}, "n2": set(), "n3": {"n2"}},
            1,
            {"n1": 1, "n2": 2, "n3": 1},
        ),  # one side lists
        ({"n1": {"n2"}, "n2": {"n1"}, "n3": set()}, 2, {"n1": 1, "n2": 1, "n3": 0}),
        ({"n1": {"unpolled"}, "n2": {"unpolled"}, "n3": set()}, 3, {"n1": 0, "n2": 0, "n3": 0}),
        ({"n1": set()}, 1, {"n1": 0}),
        ({"n1": {"n1"}}, 1, {"n1": 0}),  # listing itself is no link
    ],
)
def test_partitions(links: dict[str, set[str]], components: int, polled: dict[str, int]) -> None:
    count, per_node = partitions([node(name, peers) for name, peers in links.items()])
    assert count == components
    assert dict(per_node) == polled


def test_no_up_node_gives_no_partition_count() -> None:
    assert partitions([]) == (None, ())
    assert peer_groups([]).largest is None


@pytest.mark.parametrize(
    ("links", "largest"),
    [
        ({"n1": {"n2"}, "n2": {"n3"}, "n3": set(), "n4": {"n1"}}, 4),  # all linked
        ({"n1": {"n2"}, "n2": {"n3"}, "n3": set(), "n4": set()}, 3),  # one cut off alone
        ({"n1": {"n2"}, "n2": set(), "n3": {"n4"}, "n4": set()}, 2),  # halves
        ({"n1": set(), "n2": set()}, 1),
    ],
)
def test_the_largest_group_counts_its_up_nodes(links: dict[str, set[str]], largest: int) -> None:
    """One node that lists no peers (or changed its peerId) is a group of one: the largest
    group still holds every other node."""
    groups = peer_groups([node(name, peers) for name, peers in links.items()])
    assert groups.largest == largest
    view = network_view([node(name, peers) for name, peers in links.items()], {}, depth=0)
    assert (view.partitions, view.largest_partition) == (groups.groups, largest)


@pytest.mark.parametrize(
    ("readings", "head"),
    [
        ([(100, False), (99, False), (10**9, False)], 100),  # one far too high: not the head
        ([(100, False), (99, False), (98, False), (10**9, False)], 99),  # 3 of 4 reached 99
        ([(100, False), (90, False)], 90),  # of two, both must have reached it
        ([(100, False), (10**9, True), (10**9, True)], 100),  # syncing readers left out
        ([(40, True), (10**9, True), (39, True)], 40),  # all syncing: a majority of them all
        ([(None, False)], None),
        ([], None),
    ],
)
def test_the_head_is_the_height_a_strict_majority_reached(
    readings: list[tuple[float | None, bool]], head: float | None
) -> None:
    assert majority_height(readings) == head


def test_a_node_without_peer_id_can_still_list_others() -> None:
    nodes = [
        NodeObservation("n1", None, ("p-n2",), ()),
        NodeObservation("n2", "p-n2", (), ()),
    ]
    assert partitions(nodes) == (1, (("n1", 1), ("n2", 1)))


def _linked_by_definition(nodes: list[NodeObservation]) -> dict[str, int]:
    """How many other nodes each is linked to, straight from the definition (every pair)."""
    links: dict[str, set[str]] = {n.node: set() for n in nodes}
    for a in nodes:
        for b in nodes:
            if (
                a.node != b.node
                and b.peer_identity is not None
                and b.peer_identity in a.listed_peers
            ):
                links[a.node].add(b.node)
                links[b.node].add(a.node)
    return {name: len(peers) for name, peers in links.items()}


@pytest.mark.parametrize("seed", range(20))
def test_partitions_link_exactly_the_pairs_the_definition_links(seed: int) -> None:
    chooser = random.Random(seed)
    ids = [f"p{i}" for i in range(8)]  # fewer ids than nodes: some nodes share one
    nodes = [
        NodeObservation(
            f"n{i}",
            chooser.choice([*ids, None]),
            tuple(sorted(chooser.sample([*ids, "unpolled"], chooser.randint(0, 3)))),
            (),
        )
        for i in range(12)
    ]
    _, per_node = partitions(nodes)
    assert dict(per_node) == _linked_by_definition(nodes)


# --- readings the view is built from ---


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"hash": "abc", "blockHash": "def"}, "abc"),
        ({"blockHash": "def"}, "def"),
        ({"hash": None, "blockHash": "def"}, "def"),
        ({"hash": "", "blockHash": "def"}, "def"),
    ],
)
def test_block_hash_from_the_first_field_holding_one(body: dict[str, Any], expected: str) -> None:
    assert read_block_hash(body, FIELDS) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"height": 5}, "none of the hash fields hash, blockHash"),
        ({"hash": 5}, "none of the hash fields"),
        (["abc"], "JSON list, not an object"),
    ],
)
def test_block_without_a_hash_is_invalid(body: Any, message: str) -> None:
    with pytest.raises(InvalidResponseError, match=message):
        read_block_hash(body, FIELDS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", "b", "a"], frozenset({"a", "b"})),
        ([], frozenset()),
        (["a", 7], None),
        (["a", ""], None),
        ("a,b", None),
        (None, None),
    ],
)
def test_council_set(value: Any, expected: frozenset[str] | None) -> None:
    assert read_chain({"councilMembers": value}).council == expected


def test_council_absent() -> None:
    assert read_chain({}).council is None


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        ({"networkPeers": ["p2", "p1", "p2"]}, ("p1", "p2")),
        ({"networkPeers": "p1"}, ()),
        ({}, ()),
    ],
)
def test_network_peers(network: dict[str, Any], expected: tuple[str, ...]) -> None:
    """Sorted, each once: a set's meaning in a seventh of its memory."""
    assert read_health({"network": network}).network_peers == expected


def test_observe_keeps_only_the_chains_read() -> None:
    health = read_health({"network": {"peerId": "p1", "networkPeers": ["p2"]}})
    chain_reading = read_chain({"blockHeight": 12, "syncing": True, "councilMembers": ["a"]})
    observed = observe("n1", health, [("c1", chain_reading, "h"), ("c2", None, "x")])
    assert observed == NodeObservation(
        "n1",
        "p1",
        ("p2",),
        (ChainObservation("c1", 12.0, True, frozenset({"a"}), "h"),),
    )


def test_chains_only_one_node_lists_or_outside_its_expectation_are_unexpected() -> None:
    listings = [
        Listing("a", ("c1", "c2")),
        Listing("b", ("c1", "c2")),
        Listing("x", ("c1", *(f"own-{i}" for i in range(30)))),  # 30 chains of its own
        Listing("e", ("c1", "c2", "c3"), expected=frozenset({"c1", "c3"})),  # c2 not expected
    ]
    assert unexpected_chains(listings) == (("a", 0), ("b", 0), ("e", 2), ("x", 30))


def test_with_one_node_listing_chains_only_its_expectation_counts() -> None:
    """No other node to compare with: its chains are not its own alone, by that measure."""
    assert unexpected_chains([Listing("a", ("c1", "c2")), Listing("b", ())]) == (
        ("a", 0),
        ("b", 0),
    )
    only = [Listing("a", ("c1", "c2"), expected=frozenset({"c1"}))]
    assert unexpected_chains(only) == (("a", 1),)


def test_a_chain_listed_twice_by_one_node_is_not_listed_by_another() -> None:
    listings = [Listing("a", ("c1", "c9", "c9")), Listing("b", ("c1",))]
    assert unexpected_chains(listings) == (("a", 1), ("b", 0))
