"""Issue 22's memory: readings of one cycle share the values equal across nodes (ids, peer
sets, vote sessions), yet read exactly as unshared ones, and nothing outlives its cycle."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exporter.config.nodes import NodeConfig
from exporter.model.consensus_reading import MAX_VIEW_KEY_ITEMS, MAX_VIEW_KEY_TEXT, view_key
from exporter.model.fields import VoteSession
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.model.snapshot import LeaderCounts
from exporter.model.storage import Shared
from exporter.poll.history import History
from exporter.poll.results import ChainResult, FetchError, NodeResult
from tests.support.documents import chain_doc, health_doc

SESSION = {"s7": {"round": 2, "currentLeader": "k3", "consensusRequired": 5}}


def fresh(document: dict[str, Any]) -> dict[str, Any]:
    """The document as another node's answer decodes it: equal, no object in common."""
    decoded: dict[str, Any] = json.loads(json.dumps(document))
    return decoded


def test_nodes_with_the_same_ids_and_peers_share_them_and_read_as_unshared() -> None:
    shared = Shared()
    first = read_health(fresh(health_doc(["c"], peers=8)), shared=shared)
    second = read_health(fresh(health_doc(["c"], peers=8)), shared=shared)
    assert first == second == read_health(fresh(health_doc(["c"], peers=8)))
    assert first.network_peers is second.network_peers
    assert first.node_id is second.node_id and first.peer_id is second.peer_id
    assert first.node_key is second.node_key and first.node_version is second.node_version


def test_different_peer_sets_stay_apart_but_share_the_peer_ids_they_have_in_common() -> None:
    shared = Shared()
    four = read_health(fresh(health_doc(["c"], peers=4)), shared=shared)
    eight = read_health(fresh(health_doc(["c"], peers=8)), shared=shared)
    assert four.network_peers == read_health(health_doc(["c"], peers=4)).network_peers
    assert eight.network_peers == read_health(health_doc(["c"], peers=8)).network_peers
    kept = {peer: peer for peer in four.network_peers}
    assert all(kept[peer] is peer for peer in eight.network_peers if peer in kept)


def test_a_node_without_peers_or_ids_reads_the_same_shared_or_not() -> None:
    document = {"nodeVersion": "1.4.2", "network": {"networkPeers": "not a list"}}
    assert read_health(fresh(document), shared=Shared()) == read_health(fresh(document))


def test_the_same_vote_session_on_every_node_is_kept_once_a_different_one_apart() -> None:
    shared = Shared()
    first = read_chain(fresh(chain_doc(10, voteSessions=SESSION)), shared)
    second = read_chain(fresh(chain_doc(11, voteSessions=SESSION)), shared)
    assert first.sessions is second.sessions
    assert first.sessions == (VoteSession("s7", 2.0, "k3"),)
    later = {"s7": SESSION["s7"] | {"round": 3}}
    third = read_chain(fresh(chain_doc(10, voteSessions=later)), shared)
    assert third.sessions == (VoteSession("s7", 3.0, "k3"),)
    assert third == read_chain(fresh(chain_doc(10, voteSessions=later)))


def test_nothing_shared_outlives_its_cycle() -> None:
    shared = Shared()
    before = read_health(fresh(health_doc(["c"], peers=8)), shared=shared)
    chain_before = read_chain(fresh(chain_doc(10, voteSessions=SESSION)), shared)
    shared.clear()  # the cycle's end
    after = read_health(fresh(health_doc(["c"], peers=8)), shared=shared)
    chain_after = read_chain(fresh(chain_doc(10, voteSessions=SESSION)), shared)
    assert after == before and after.network_peers is not before.network_peers
    assert chain_after.sessions == chain_before.sessions
    assert chain_after.sessions is not chain_before.sessions


def test_leader_counts_without_a_failure_keep_no_array_and_read_as_zeros() -> None:
    assert list(LeaderCounts(("k1", "k2"))) == [("k1", 0), ("k2", 0)]
    assert list(LeaderCounts()) == []


def test_error_counts_are_one_object_while_unchanged_and_new_after_a_failure() -> None:
    node = NodeConfig("a", "http://x/")
    good = NodeResult(node, read_health(health_doc(["c"])), None, [ChainResult("c", None)], 0.1)
    failed = NodeResult(node, None, FetchError(Reason.TIMEOUT, "boom"), [], 0.1)
    history = History()
    first = history.record([good], 1.0)[0].error_counts
    second = history.record([good], 2.0)[0].error_counts
    assert second is first
    third = history.record([failed], 3.0)[0].error_counts
    assert third is not first and ("health", "timeout", 1) in list(third)
    assert ("health", "timeout", 0) in list(first)  # the earlier snapshot's stays as it was
    assert history.record([good], 4.0)[0].error_counts is third


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"features": {"f": True}}, {"features": {"f": 1}}),
        ({"features": {"f": False}}, {"features": {"f": 0.0}}),
        ({"consensus": {"minMembers": 1}}, {"consensus": {"minMembers": True}}),
        ({"keyType": 1}, {"keyType": True}),
    ],
    ids=["true-1", "false-0.0", "minMembers-1-true", "keyType"],
)
def test_values_python_holds_equal_keep_their_own_views_when_shared(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    """``true`` and ``1`` are equal dict keys in Python, not equal settings: whichever node
    answers first, each keeps the view it has when read alone (found in review)."""
    one, other = chain_doc(10) | first, chain_doc(10) | second
    alone = (read_chain(fresh(one)).consensus_view, read_chain(fresh(other)).consensus_view)
    assert alone[0] != alone[1]
    for order in ((one, other), (other, one)):
        shared = Shared()
        views = [read_chain(fresh(doc), shared).consensus_view for doc in order]
        assert views == [read_chain(fresh(doc)).consensus_view for doc in order]


@pytest.mark.parametrize(
    "large",
    [
        {"features": {f"f{i}": True for i in range(MAX_VIEW_KEY_ITEMS + 1)}},
        {"consensus": {"consensusTimeout": "1" * (MAX_VIEW_KEY_TEXT + 1)}},
        {"keyType": "k" * (MAX_VIEW_KEY_TEXT + 1)},
    ],
    ids=["many flags", "long setting", "long key type"],
)
def test_a_large_configuration_is_digested_for_its_node_not_kept_for_the_cycle(
    large: dict[str, Any],
) -> None:
    document = chain_doc(10) | large
    assert view_key(document) is None
    shared = Shared()
    assert (
        read_chain(fresh(document), shared).consensus_view
        == read_chain(fresh(document)).consensus_view
    )
