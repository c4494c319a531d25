"""What a chain's answer says for consensus health (issue 21): the vote sessions followed,
``consensusRequired``, the council keys that get a leader series, and the consensus
configuration compared by value across nodes."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.bounds import MAX_SESSION_ID_CHARS, Bounds, Dropped
from exporter.model.consensus_reading import consensus_view
from exporter.model.fields import VOTE_CONSENSUS_REQUIRED, VOTE_ROUND, VOTE_SESSIONS, VoteSession
from exporter.model.readings import read_chain
from exporter.model.storage import Shared
from tests.support.documents import chain_doc


def sessions(**entries: Any) -> dict[str, Any]:
    return chain_doc(10, voteSessions=entries)


@pytest.mark.parametrize(
    ("body", "followed", "highest_round", "required"),
    [
        (chain_doc(10, voteSessions={}), (), None, None),
        ({k: v for k, v in chain_doc(10).items() if k != "voteSessions"}, (), None, None),
        (chain_doc(10, voteSessions=[{"sessionId": "s1"}]), (), None, None),
        (
            sessions(s2={"round": 3, "currentLeader": "k2", "consensusRequired": 4},
                     s1={"round": "2", "currentLeader": "k1", "consensusRequired": "5"}),
            (VoteSession("s1", 2.0, "k1"), VoteSession("s2", 3.0, "k2")),
            3.0,
            5.0,
        ),
        (  # a session object the node garbled is still an open session, by its key
            sessions(s1="open", s2={"round": -1, "currentLeader": 7, "consensusRequired": None}),
            (VoteSession("s1", None, None), VoteSession("s2", None, None)),
            None,
            None,
        ),
        (sessions(s1={"round": 1, "currentLeader": ""}), (VoteSession("s1", 1.0, None),),
         1.0, None),
    ],
    ids=["empty", "absent", "not an object", "two sessions", "garbled", "empty leader"],
)  # fmt: skip
def test_sessions_read(
    body: dict[str, Any],
    followed: tuple[VoteSession, ...],
    highest_round: float | None,
    required: float | None,
) -> None:
    reading = read_chain(body)
    assert reading.sessions == followed
    assert reading.gauge(VOTE_ROUND) == highest_round
    assert reading.gauge(VOTE_CONSENSUS_REQUIRED) == required


def test_sessions_beyond_the_bound_and_over_long_ids_are_dropped() -> None:
    entries = {f"s{i}": {"round": i, "consensusRequired": 3} for i in (4, 2, 9, 7)}
    entries["x" * (MAX_SESSION_ID_CHARS + 1)] = {"round": 12, "consensusRequired": 6}
    reading = read_chain(
        chain_doc(10, voteSessions=entries), bounds=Bounds(vote_sessions_per_chain=2)
    )
    assert [s.session_id for s in reading.sessions] == ["s2", "s4"]
    assert reading.dropped == Dropped(vote_sessions=3)
    # the gauges still see every session, followed or not
    assert reading.gauge(VOTE_SESSIONS) == 5.0
    assert reading.gauge(VOTE_ROUND) == 12.0
    assert reading.gauge(VOTE_CONSENSUS_REQUIRED) == 6.0


def test_a_leader_key_too_long_for_a_label_is_no_leader() -> None:
    body = sessions(s1={"round": 1, "currentLeader": "k" * 41})
    body["councilMembers"] = ["k1", "k" * 41]
    reading = read_chain(body, bounds=Bounds(label_value_length=40))
    assert reading.sessions == (VoteSession("s1", 1.0, None),)
    assert reading.leaders == ("k1",)
    assert reading.dropped == Dropped(label_values=2)


@pytest.mark.parametrize(
    ("council", "limit", "leaders", "dropped"),
    [
        (["k3", "k1", "k2"], 128, ("k1", "k2", "k3"), Dropped()),
        (["k3", "k1", "k2", "k0"], 2, ("k0", "k1"), Dropped(leaders=2)),
        (["k1", 5], 128, (), Dropped()),  # not a council view: no leader series
        ("k1", 128, (), Dropped()),
    ],
)
def test_council_keys_with_a_leader_series(
    council: Any, limit: int, leaders: tuple[str, ...], dropped: Dropped
) -> None:
    reading = read_chain(
        chain_doc(10, councilMembers=council), bounds=Bounds(leaders_per_chain=limit)
    )
    assert reading.leaders == leaders
    assert reading.dropped == dropped


CONSENSUS: dict[str, Any] = {
    "consensusType": "council_leader_proposal",
    "txKarmaThreshold": 10,
    "txMintThreshold": 5,
    "txMaxTimeTrigger": "1m",
    "minMembers": 3,
    "consensusTimeout": "30s",
}
FEATURES = {"enableTxProof": True, "enableXMOnBlockMint": False}


def view(**changes: Any) -> bytes | None:
    body: dict[str, Any] = {"consensus": CONSENSUS, "keyType": "secp256k1", "features": FEATURES}
    body.update(changes)
    return consensus_view(body)


@pytest.mark.parametrize(
    "changes",
    [
        {"consensus": dict(reversed(CONSENSUS.items()))},  # key order
        {"features": dict(reversed(FEATURES.items()))},
        {"consensus": CONSENSUS | {"txMaxTimeTrigger": "60s", "consensusTimeout": "30000ms"}},
        {"consensus": CONSENSUS | {"txKarmaThreshold": 10.0, "minMembers": "3"}},
        {"consensus": CONSENSUS | {"txMaxTimeTrigger": "0h1m0s"}},
    ],
    ids=["key order", "feature order", "durations", "numbers", "Go's long form"],
)
def test_equal_configurations_compare_equal(changes: dict[str, Any]) -> None:
    assert view(**changes) == view()


@pytest.mark.parametrize(
    "changes",
    [
        {"consensus": CONSENSUS | {"consensusTimeout": "31s"}},
        {"consensus": CONSENSUS | {"minMembers": 4}},
        {"consensus": CONSENSUS | {"extraSetting": "on"}},  # an unknown key counts too
        {"keyType": "ed25519"},
        {"features": FEATURES | {"enableTxProof": False}},
        {"features": FEATURES | {"enableNewThing": True}},
        {"features": None},
    ],
)
def test_a_different_setting_is_another_view(changes: dict[str, Any]) -> None:
    assert view(**changes) != view()


def test_zero_and_minus_zero_are_one_value() -> None:
    """The values "-0" and -0.0 are those of "0" and 0: a node sending one and a node sending the
    other share one configuration (JSON would write -0.0 and 0.0 apart)."""
    zero = CONSENSUS | {"minMembers": 0, "consensusTimeout": "0", "txMintThreshold": "0"}
    signed = CONSENSUS | {"minMembers": -0.0, "consensusTimeout": "-0", "txMintThreshold": "-0.0"}
    assert view(consensus=signed) == view(consensus=zero)


def test_no_consensus_object_is_no_view() -> None:
    assert view(consensus=None) is None
    assert view(consensus="council") is None
    assert read_chain({"blockHeight": 1}).consensus_view is None
    assert read_chain(chain_doc(1)).consensus_view == consensus_view(chain_doc(1))


def test_a_view_is_a_short_digest_however_large_the_configuration() -> None:
    huge = view(consensus=CONSENSUS | {f"k{i}": i for i in range(10_000)})
    assert huge is not None and len(huge) == 16
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    assert view(consensus=CONSENSUS | {"deep": deep}) is None  # never an exception


def test_nodes_sending_the_same_configuration_share_one_view() -> None:
    shared = Shared()
    first, second = read_chain(chain_doc(1), shared), read_chain(chain_doc(2), shared)
    assert first.consensus_view is second.consensus_view is not None
    other = read_chain(chain_doc(3, keyType="ed25519"), shared)
    assert other.consensus_view not in (None, first.consensus_view)
    nested = chain_doc(4, consensus=CONSENSUS | {"limits": {"a": [1, 2]}})
    assert read_chain(nested, shared).consensus_view == consensus_view(nested)
