"""Issue 22's cheaper reading of a decoded chain status: the scalar gauges read inline for the
usual values, the configuration (council, settings, features, keyType) looked up once
(together) a cycle, the vote sessions apart. Every edge of the inline reading and of the
joined lookup reads as the slow path (``json``, read_chain)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from exporter.bounds import MAX_TEXT_CHARS, Bounds
from exporter.model import readings
from exporter.model.answers import decode_chain_status
from exporter.model.readings import (
    MAX_PART_BYTES,
    ChainReading,
    Shared,
    read_chain,
    read_health,
)
from exporter.values import is_text
from tests.support.documents import chain_doc

TIGHT = Bounds(
    label_value_length=4, leaders_per_chain=1, features_per_chain=1, vote_sessions_per_chain=1
)
BIG = int(sys.float_info.max)


def both_ways(document: dict[str, Any], shared: Shared, bounds: Bounds) -> ChainReading:
    """The fast path's reading of ``document`` (which it must take), checked against the slow."""
    body = json.dumps(document).encode()
    fields = decode_chain_status(body)
    assert fields is not None, body
    reading = read_chain(fields, shared, bounds)
    assert reading == read_chain(json.loads(body), None, bounds), body
    return reading


@pytest.mark.parametrize(
    "value",
    [0, 1, 2**63, 2**64 - 1, 2**64, BIG, BIG + 1, BIG * 2, 10**400, -1, -(2**70), True, False,
     None, 0.0, -0.0, 1.5, -1.5, 1e308, "7", "-7", ""],
)  # fmt: skip
@pytest.mark.parametrize(
    "field",
    ["blockHeight", "pendingMessagesCount", "pendingTransactions", "syncing", "isVoting",
     "lastMessageTime", "blockchainPeers", "keyType"],
)  # fmt: skip
def test_every_scalar_reads_as_the_slow_path_reads_it(field: str, value: Any) -> None:
    both_ways(chain_doc(5, **{field: value}), Shared(), Bounds())


@pytest.mark.parametrize("peers", [[], ["p1"], ["p1", "p1", "p2"]])
def test_a_list_of_peers_reads_as_its_length(peers: list[str]) -> None:
    assert both_ways(chain_doc(5, blockchainPeers=peers), Shared(), Bounds()).gauge(10) == len(
        peers
    )


def test_the_same_parts_with_another_key_type_are_looked_up_apart() -> None:
    shared = Shared()
    for key_type in ("secp256k1", "ed25519", True, 1, "1", None, "x" * 10):
        for bounds in (Bounds(), TIGHT):
            both_ways(chain_doc(3, keyType=key_type), shared, bounds)
    document = chain_doc(3)
    del document["keyType"]
    assert both_ways(document, shared, Bounds()).key_type is None


def test_one_part_moved_to_another_field_is_read_apart() -> None:
    """The joined key keeps each part in its place: the same texts elsewhere read apart."""
    shared = Shared()
    same = ["k1", "k2"]
    readings = [
        both_ways(chain_doc(1, councilMembers=same, features=same), shared, Bounds()),
        both_ways(chain_doc(1, councilMembers=same, voteSessions=same), shared, Bounds()),
    ]
    assert readings[0] != readings[1]


def test_nodes_at_other_stages_of_a_vote_share_the_configuration_not_the_sessions() -> None:
    shared = Shared()
    sessions = [
        {f"s{n}": {"sessionId": f"s{n}", "round": n, "currentStage": n, "consensusRequired": n}
         for n in range(stage, stage + count)}
        for stage, count in ((1, 1), (2, 1), (1, 3), (5, 0))
    ]  # fmt: skip
    for bounds in (Bounds(), TIGHT):
        read = [both_ways(chain_doc(8, voteSessions=s), shared, bounds) for s in sessions]
        assert len({id(r.council) for r in read}) == 1
        assert len({r.sessions for r in read}) == (3 if bounds == TIGHT else 4)  # s1 alone twice
        assert len({id(r.consensus_view) for r in read}) == 1
        assert len({r.dropped for r in read}) == (2 if bounds == TIGHT else 1)


@pytest.mark.parametrize("absent", ["councilMembers", "voteSessions", "consensus", "features"])
def test_an_absent_part_reads_apart_from_every_present_one(absent: str) -> None:
    shared = Shared()
    document = chain_doc(2)
    full = both_ways(document, shared, Bounds())
    del document[absent]
    assert both_ways(document, shared, Bounds()) != full


def test_parts_over_the_size_bound_together_are_read_each_time_and_alike() -> None:
    """Parts that fit alone but not together: no joined entry, each part still shared."""
    council = [f"k{i:04d}" for i in range(MAX_PART_BYTES // 12)]
    features = {f"flag{i:04d}": True for i in range(MAX_PART_BYTES // 20)}
    document = chain_doc(4, councilMembers=council, features=features)
    assert len(json.dumps(council)) < MAX_PART_BYTES > len(json.dumps(features))
    shared = Shared()
    first, second = (both_ways(document, shared, b) for b in (Bounds(), Bounds()))
    assert first.council is second.council and first.sessions is second.sessions


def test_the_nodes_own_gauges_stay_their_own_when_the_parts_are_shared() -> None:
    shared = Shared()
    low, high = (both_ways(chain_doc(h, pendingTransactions=h), shared, Bounds()) for h in (1, 9))
    assert low.consensus_view is high.consensus_view and low.features is high.features
    assert (low.height, high.height) == (1.0, 9.0)
    assert (low.gauge(4), high.gauge(4)) == (1.0, 9.0)


# --- lists of texts (council members, network peers) checked in C --------------------------


def text_set_by_member(value: Any) -> frozenset[str] | None:
    """_text_set as it was written before issue 22: each member checked in Python."""
    if not isinstance(value, list) or not all(
        isinstance(v, str) and 0 < len(v) <= MAX_TEXT_CHARS and is_text(v) for v in value
    ):
        return None
    return frozenset(value)


@pytest.mark.parametrize(
    "value",
    [[], ["a"], ["a", "a", "b"], ["a", ""], [""], ["a", 1], [1], [None], ["a", ["b"]], [True],
     ["x" * MAX_TEXT_CHARS], ["x" * (MAX_TEXT_CHARS + 1), "a"], ["a", "\ud800"], ["\udfff"],
     ["\u00e9", "\x00"], "ab", {"a": 1}, None, 3],
)  # fmt: skip
def test_a_list_of_texts_is_read_as_checking_each_member_reads_it(value: Any) -> None:
    assert readings._text_set(value) == text_set_by_member(value)


def test_equal_peer_sets_of_nodes_are_one_set_of_shared_ids() -> None:
    shared = Shared()
    first, second = (
        read_health(
            {"nodeId": "n", "network": {"networkPeers": [f"p{i}" for i in ids]}}, shared=shared
        )
        for ids in ((1, 2), (2, 3))
    )
    again = read_health({"nodeId": "n", "network": {"networkPeers": ["p2", "p1"]}}, shared=shared)
    assert again.network_peers is first.network_peers
    common = {peer for peer in second.network_peers if peer == "p2"}.pop()
    assert common is {peer for peer in first.network_peers if peer == "p2"}.pop()
