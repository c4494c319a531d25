"""What the node's /health and /blockchains/{id} answers become: values, or no sample at all.

Rule 1 of the metric contract is checked field by field: absent, ``null`` and unreadable
values give no sample, numbers sent as strings are numbers, booleans are only JSON booleans.
The documents start from realistic answers (as in the node API reference) decoded from JSON.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from exporter.bounds import (
    DEFAULT_MAX_FEATURES_PER_CHAIN,
    DEFAULT_MAX_LABEL_VALUE_LENGTH,
    MAX_TEXT_CHARS,
    NOTHING_DROPPED,
    Bounds,
    Dropped,
    count_dropped,
)
from exporter.expose.render import CHAIN_GAUGE_FAMILIES
from exporter.model.fields import (
    BLOCK_HEIGHT,
    CHAIN_GAUGES,
    GAUGE_POSITION,
    ChainReading,
    HealthReading,
    gauge_table,
)
from exporter.model.readings import (
    InvalidResponseError,
    read_block_hash,
    read_chain,
    read_health,
)

NODE_ID = "02ab5f3c9e41d07f8a6b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
HEALTH_JSON = f"""
{{
  "nodeVersion": "1.4.2-build.381",
  "nodeId": "{NODE_ID}",
  "network": {{
    "networkType": "p2p",
    "peerCount": 4,
    "peerId": "12D3KooWNetworkPeer",
    "networkPeers": ["12D3KooWa", "12D3KooWb", "12D3KooWc", "12D3KooWd"]
  }},
  "blockchains": ["8f2a9c", "chain/with space"]
}}
"""

CHAIN_JSON = """
{
  "blockHeight": 18342,
  "lastMessageTime": "2024-05-01T12:00:00.250Z",
  "keyType": "secp256k1",
  "isInCouncil": true,
  "isVoting": false,
  "isTimeToVote": true,
  "syncing": false,
  "pendingMessagesCount": 3,
  "delayedMessagesCount": 1,
  "pendingTransactions": 7,
  "councilMembers": ["02aa", "02bb", "02cc", "02dd"],
  "voteSessions": {
    "s-18343-a": {"sessionId": "s-18343-a", "blockHash": "", "blockHeight": 18343,
                  "round": 2, "currentStage": 1, "currentLeader": "02aa",
                  "consensusRequired": 3},
    "s-18343-b": {"sessionId": "s-18343-b", "blockHash": "9f1c", "blockHeight": 18343,
                  "round": 5, "currentStage": 2, "currentLeader": "02bb",
                  "consensusRequired": 3}
  },
  "consensus": {
    "consensusType": "council_leader_proposal",
    "txKarmaThreshold": 10,
    "txMintThreshold": 5,
    "txMaxTimeTrigger": "2s",
    "minMembers": 3,
    "consensusTimeout": "1m30s"
  },
  "features": {
    "enableJoinCouncilOnStartup": true,
    "enableXMOnBlockMint": false,
    "enableTxProof": true
  },
  "blockchainPeers": ["12D3KooWa", "12D3KooWb", "12D3KooWc"]
}
"""

NOON = 1714564800.0  # 2024-05-01T12:00:00Z


class _Drop:
    """Marks a field to leave out of the document (a stable repr keeps test ids stable)."""

    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()

EXPECTED_CHAIN_GAUGES = {
    "ledger_blockchain_height": 18342.0,
    "ledger_blockchain_last_message_timestamp_seconds": NOON + 0.25,
    "ledger_blockchain_pending_messages": 3.0,
    "ledger_blockchain_delayed_messages": 1.0,
    "ledger_blockchain_pending_transactions": 7.0,
    "ledger_blockchain_syncing": 0.0,
    "ledger_blockchain_in_council": 1.0,
    "ledger_blockchain_voting": 0.0,
    "ledger_blockchain_time_to_vote": 1.0,
    "ledger_blockchain_council_members": 4.0,
    "ledger_blockchain_peers": 3.0,
    "ledger_blockchain_vote_sessions": 2.0,
    "ledger_blockchain_vote_round": 5.0,
    "ledger_blockchain_vote_consensus_required": 3.0,
    "ledger_blockchain_consensus_min_members": 3.0,
    "ledger_blockchain_consensus_timeout_seconds": 90.0,
    "ledger_blockchain_tx_max_time_trigger_seconds": 2.0,
    "ledger_blockchain_tx_karma_threshold": 10.0,
    "ledger_blockchain_tx_mint_threshold": 5.0,
}


def document(source: str, **changes: Any) -> dict[str, Any]:
    """The JSON document with top-level fields replaced (or left out, with ``DROP``)."""
    body: dict[str, Any] = json.loads(source)
    for key, value in changes.items():
        if value is DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def consensus(**changes: Any) -> dict[str, Any]:
    """The realistic ``consensus`` object with fields replaced or dropped."""
    return document(json.dumps(json.loads(CHAIN_JSON)["consensus"]), **changes)


def gauges(reading: ChainReading) -> dict[str, float]:
    """The reading's gauges by the name of the family each is written as."""
    reported = [(g, v) for g in CHAIN_GAUGES if (v := reading.gauge(g)) is not None]
    names = [CHAIN_GAUGE_FAMILIES[gauge].name for gauge, _ in reported]
    assert len(names) == len(set(names)), "a series given twice"
    return {CHAIN_GAUGE_FAMILIES[gauge].name: value for gauge, value in reported}


# --- /health ---


def test_health_full_document() -> None:
    assert read_health(json.loads(HEALTH_JSON)) == HealthReading(
        node_version="1.4.2-build.381",
        node_id=NODE_ID,
        peer_id="12D3KooWNetworkPeer",
        peer_count=4.0,
        blockchain_count=2.0,
        blockchain_ids=("8f2a9c", "chain/with space"),
        network_peers=("12D3KooWa", "12D3KooWb", "12D3KooWc", "12D3KooWd"),
        node_key=NODE_ID,
    )


NETWORK = json.loads(HEALTH_JSON)["network"]


def network(**changes: Any) -> dict[str, Any]:
    return document(json.dumps(NETWORK), **changes)


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"nodeVersion": DROP}, "node_version", None),
        ({"nodeVersion": None}, "node_version", None),
        ({"nodeVersion": 142}, "node_version", None),
        ({"nodeId": DROP}, "node_id", None),
        ({"nodeId": ["02ab"]}, "node_id", None),
        ({"network": network(peerCount="4")}, "peer_count", 4.0),
        ({"network": network(peerCount=0)}, "peer_count", 0.0),
        ({"network": network(peerCount=DROP)}, "peer_count", None),
        ({"network": network(peerCount=None)}, "peer_count", None),
        ({"network": network(peerCount=-1)}, "peer_count", None),
        ({"network": network(peerCount="four")}, "peer_count", None),
        ({"network": network(peerCount=True)}, "peer_count", None),
        ({"network": DROP}, "peer_count", None),
        ({"network": None}, "peer_count", None),
        ({"network": [NETWORK]}, "peer_count", None),
        ({"network": network(peerId=DROP), "peerId": "12D3KooWTop"}, "peer_id", "12D3KooWTop"),
        ({"network": None, "peerId": "12D3KooWTop"}, "peer_id", "12D3KooWTop"),
        ({"network": network(peerId=7), "peerId": "12D3KooWTop"}, "peer_id", "12D3KooWTop"),
        ({"peerId": "12D3KooWTop"}, "peer_id", "12D3KooWNetworkPeer"),
        ({"network": network(peerId=DROP)}, "peer_id", None),
        ({"network": network(peerId=None), "peerId": None}, "peer_id", None),
        ({"blockchains": []}, "blockchain_count", 0.0),
        ({"blockchains": ["a", "a", "b"]}, "blockchain_count", 3.0),
        ({"blockchains": DROP}, "blockchain_count", None),
        ({"blockchains": None}, "blockchain_count", None),
        ({"blockchains": "8f2a9c"}, "blockchain_count", None),
        ({"blockchains": {"8f2a9c": {}}}, "blockchain_count", None),
        ({"blockchains": ["b", "a", "b", 5, None, "", ["c"], "a"]}, "blockchain_ids", ("b", "a")),
        ({"blockchains": ["b", "a", "b", 5, None, "", ["c"], "a"]}, "blockchain_count", 8.0),
        ({"blockchains": [1, 2]}, "blockchain_ids", ()),
        ({"blockchains": DROP}, "blockchain_ids", ()),
        ({"blockchains": {"8f2a9c": {}}}, "blockchain_ids", ()),
    ],
    ids=repr,
)
def test_health_fields(changes: dict[str, Any], field: str, expected: object) -> None:
    reading = read_health(document(HEALTH_JSON, **changes))
    assert getattr(reading, field) == expected


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"status": "ok"},  # another service's health check
        {"status": "UP", "components": {"db": {"status": "UP"}}},
        {"nodeVersion": None, "nodeId": None, "network": None, "blockchains": None},
        {"NodeVersion": "1.4.2", "node_id": "x"},  # field names are exact
    ],
    ids=repr,
)
def test_health_without_any_node_field_is_not_a_ledger_node(body: dict[str, Any]) -> None:
    with pytest.raises(
        InvalidResponseError,
        match=r"answered /health with JSON that is not a ledger node's health \(none of "
        r"nodeVersion, nodeId, network, blockchains\)",
    ):
        read_health(body)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"nodeVersion": "1.4.2"}, HealthReading("1.4.2", None, None, None, None, ())),
        ({"nodeId": 7}, HealthReading(None, None, None, None, None, ())),  # present, unreadable
        ({"network": {}}, HealthReading(None, None, None, None, None, ())),
        ({"blockchains": []}, HealthReading(None, None, None, None, 0.0, ())),
        (
            {"status": "ok", "blockchains": ["c1"]},
            HealthReading(None, None, None, None, 1.0, ("c1",)),
        ),
    ],
    ids=repr,
)
def test_health_with_one_node_field_is_a_reading(
    body: dict[str, Any], expected: HealthReading
) -> None:
    assert read_health(body) == expected


# --- /blockchains/{id} ---


#: The flags of a chain status and the family each feeds, written here apart from the field
#: table: the full document above has two flags at 0 and two at 1, so a swap within a pair
#: would read the same there (and the contract oracle learns the sources from the generated
#: docs/metrics.md, which a swapped row would regenerate).
FLAG_FAMILIES = {
    "syncing": "ledger_blockchain_syncing",
    "isInCouncil": "ledger_blockchain_in_council",
    "isVoting": "ledger_blockchain_voting",
    "isTimeToVote": "ledger_blockchain_time_to_vote",
}


@pytest.mark.parametrize("flag", FLAG_FAMILIES)
def test_each_flag_feeds_its_own_family(flag: str) -> None:
    body = {name: name == flag for name in FLAG_FAMILIES}
    read = gauges(read_chain(body))
    assert {family: read.get(family) for family in FLAG_FAMILIES.values()} == {
        family: 1.0 if name == flag else 0.0 for name, family in FLAG_FAMILIES.items()
    }


def test_chain_full_document() -> None:
    reading = read_chain(json.loads(CHAIN_JSON))
    assert gauges(reading) == pytest.approx(EXPECTED_CHAIN_GAUGES)
    assert reading.height == 18342.0
    assert reading.consensus_type == "council_leader_proposal"
    assert reading.key_type == "secp256k1"
    assert reading.features == (
        ("enableJoinCouncilOnStartup", 1.0),
        ("enableTxProof", 1.0),
        ("enableXMOnBlockMint", 0.0),
    )
    assert reading.council == frozenset({"02aa", "02bb", "02cc", "02dd"})
    assert reading.syncing is False


def test_gauge_table_columns_are_each_readings_gauge() -> None:
    """The render reads a gauge of every chain at once: each column holds what ``gauge``
    says per reading, NaN for a gauge not reported."""
    full = read_chain(json.loads(CHAIN_JSON))
    sparse = read_chain({"blockHeight": 7, "pendingMessagesCount": "many"})
    readings = [full, sparse, full]
    table = gauge_table(readings)
    for gauge in CHAIN_GAUGES:
        column = table.column(GAUGE_POSITION[gauge])
        assert len(column) == len(readings)
        for reading, value in zip(readings, column, strict=True):
            expected = reading.gauge(gauge)
            assert math.isnan(value) if expected is None else value == expected
    assert table.column(GAUGE_POSITION[BLOCK_HEIGHT]) == [18342.0, 7.0, 18342.0]
    assert gauge_table([]).column(GAUGE_POSITION[BLOCK_HEIGHT]) == []


H = "ledger_blockchain_height"
LAST_MESSAGE = "ledger_blockchain_last_message_timestamp_seconds"
SESSIONS = "ledger_blockchain_vote_sessions"
ROUND = "ledger_blockchain_vote_round"
TIMEOUT = "ledger_blockchain_consensus_timeout_seconds"
TRIGGER = "ledger_blockchain_tx_max_time_trigger_seconds"


def sessions(*rounds: object) -> dict[str, Any]:
    """A voteSessions object with one session per round value (DROP: no round field)."""
    result = {}
    for index, value in enumerate(rounds):
        session: dict[str, Any] = {"sessionId": f"s{index}", "blockHeight": 10, "currentStage": 1}
        if value is not DROP:
            session["round"] = value
        result[f"s{index}"] = session
    return result


# Which series each top-level field of the chain document feeds.
FEEDS = {
    "blockHeight": {H},
    "lastMessageTime": {LAST_MESSAGE},
    "pendingMessagesCount": {"ledger_blockchain_pending_messages"},
    "delayedMessagesCount": {"ledger_blockchain_delayed_messages"},
    "pendingTransactions": {"ledger_blockchain_pending_transactions"},
    "syncing": {"ledger_blockchain_syncing"},
    "isInCouncil": {"ledger_blockchain_in_council"},
    "isVoting": {"ledger_blockchain_voting"},
    "isTimeToVote": {"ledger_blockchain_time_to_vote"},
    "councilMembers": {"ledger_blockchain_council_members"},
    "blockchainPeers": {"ledger_blockchain_peers"},
    "voteSessions": {SESSIONS, ROUND, "ledger_blockchain_vote_consensus_required"},
    "consensus": {
        "ledger_blockchain_consensus_min_members",
        TIMEOUT,
        TRIGGER,
        "ledger_blockchain_tx_karma_threshold",
        "ledger_blockchain_tx_mint_threshold",
    },
}


@pytest.mark.parametrize(
    ("changes", "metric", "expected"),
    [
        # absent, null and unreadable give no sample; numeric strings are numbers
        ({"blockHeight": DROP}, H, None),
        ({"blockHeight": None}, H, None),
        ({"blockHeight": "18342"}, H, 18342.0),
        ({"blockHeight": "18342x"}, H, None),
        ({"blockHeight": -5}, H, None),
        ({"blockHeight": "-5"}, H, None),
        ({"blockHeight": True}, H, None),
        ({"blockHeight": 0}, H, 0.0),
        ({"blockHeight": [18342]}, H, None),
        ({"lastMessageTime": "2024-05-01T14:00:00+02:00"}, LAST_MESSAGE, NOON),
        ({"lastMessageTime": "2024-05-01T12:00:00"}, LAST_MESSAGE, None),
        ({"lastMessageTime": NOON}, LAST_MESSAGE, None),
        ({"lastMessageTime": None}, LAST_MESSAGE, None),
        ({"lastMessageTime": DROP}, LAST_MESSAGE, None),
        ({"pendingMessagesCount": "3"}, "ledger_blockchain_pending_messages", 3.0),
        ({"pendingMessagesCount": 0}, "ledger_blockchain_pending_messages", 0.0),
        ({"pendingMessagesCount": -1}, "ledger_blockchain_pending_messages", None),
        ({"pendingMessagesCount": None}, "ledger_blockchain_pending_messages", None),
        ({"delayedMessagesCount": []}, "ledger_blockchain_delayed_messages", None),
        ({"delayedMessagesCount": DROP}, "ledger_blockchain_delayed_messages", None),
        ({"pendingTransactions": "seven"}, "ledger_blockchain_pending_transactions", None),
        ({"pendingTransactions": "1e3"}, "ledger_blockchain_pending_transactions", 1000.0),
        # booleans are only JSON true/false
        ({"syncing": True}, "ledger_blockchain_syncing", 1.0),
        ({"syncing": "true"}, "ledger_blockchain_syncing", None),
        ({"syncing": 1}, "ledger_blockchain_syncing", None),
        ({"syncing": None}, "ledger_blockchain_syncing", None),
        ({"syncing": DROP}, "ledger_blockchain_syncing", None),
        ({"isInCouncil": False}, "ledger_blockchain_in_council", 0.0),
        ({"isInCouncil": "false"}, "ledger_blockchain_in_council", None),
        ({"isVoting": True}, "ledger_blockchain_voting", 1.0),
        ({"isVoting": 0}, "ledger_blockchain_voting", None),
        ({"isTimeToVote": DROP}, "ledger_blockchain_time_to_vote", None),
        ({"isTimeToVote": "yes"}, "ledger_blockchain_time_to_vote", None),
        # list lengths
        ({"councilMembers": []}, "ledger_blockchain_council_members", 0.0),
        ({"councilMembers": "02aa,02bb"}, "ledger_blockchain_council_members", None),
        ({"councilMembers": {"02aa": True}}, "ledger_blockchain_council_members", None),
        ({"councilMembers": None}, "ledger_blockchain_council_members", None),
        ({"councilMembers": DROP}, "ledger_blockchain_council_members", None),
        ({"blockchainPeers": ["p"]}, "ledger_blockchain_peers", 1.0),
        ({"blockchainPeers": DROP}, "ledger_blockchain_peers", None),
        ({"blockchainPeers": 3}, "ledger_blockchain_peers", None),
        # vote sessions: absent or {} count 0, null or another type give no sample
        ({"voteSessions": DROP}, SESSIONS, 0.0),
        ({"voteSessions": {}}, SESSIONS, 0.0),
        ({"voteSessions": None}, SESSIONS, None),
        ({"voteSessions": []}, SESSIONS, None),
        ({"voteSessions": [sessions(1)["s0"]]}, SESSIONS, None),
        ({"voteSessions": "s1"}, SESSIONS, None),
        ({"voteSessions": sessions(1, 2, 3)}, SESSIONS, 3.0),
        # vote round: the highest readable round; none gives no sample
        ({"voteSessions": sessions(1, 4, 2)}, ROUND, 4.0),
        ({"voteSessions": sessions("7", 3)}, ROUND, 7.0),
        ({"voteSessions": sessions(0)}, ROUND, 0.0),
        ({"voteSessions": sessions(-9, 2)}, ROUND, 2.0),
        ({"voteSessions": sessions(None, DROP, "x", True, 6)}, ROUND, 6.0),
        ({"voteSessions": {"s0": "round 5", "s1": None, **sessions(DROP, 3)}}, ROUND, 3.0),
        ({"voteSessions": sessions(None, DROP, "x", -1)}, ROUND, None),
        ({"voteSessions": {}}, ROUND, None),
        ({"voteSessions": DROP}, ROUND, None),
        ({"voteSessions": None}, ROUND, None),
        ({"voteSessions": [{"round": 3}]}, ROUND, None),
        # consensus settings
        ({"consensus": consensus(consensusTimeout="2h0m0s")}, TIMEOUT, 7200.0),
        ({"consensus": consensus(consensusTimeout="500ms")}, TIMEOUT, 0.5),
        ({"consensus": consensus(consensusTimeout="90")}, TIMEOUT, None),
        ({"consensus": consensus(consensusTimeout=90)}, TIMEOUT, None),
        ({"consensus": consensus(consensusTimeout="-1s")}, TIMEOUT, None),
        ({"consensus": consensus(consensusTimeout=None)}, TIMEOUT, None),
        ({"consensus": consensus(consensusTimeout=DROP)}, TIMEOUT, None),
        ({"consensus": consensus(txMaxTimeTrigger="1m30s")}, TRIGGER, 90.0),
        ({"consensus": consensus(txMaxTimeTrigger="1.5s")}, TRIGGER, 1.5),
        ({"consensus": consensus(txMaxTimeTrigger="soon")}, TRIGGER, None),
        ({"consensus": consensus(minMembers="3")}, "ledger_blockchain_consensus_min_members", 3.0),
        ({"consensus": consensus(minMembers=-3)}, "ledger_blockchain_consensus_min_members", None),
        (
            {"consensus": consensus(txKarmaThreshold="1e3")},
            "ledger_blockchain_tx_karma_threshold",
            1000.0,
        ),
        (
            {"consensus": consensus(txKarmaThreshold=None)},
            "ledger_blockchain_tx_karma_threshold",
            None,
        ),
        (
            {"consensus": consensus(txMintThreshold="x")},
            "ledger_blockchain_tx_mint_threshold",
            None,
        ),
        ({"consensus": consensus(txMintThreshold=0)}, "ledger_blockchain_tx_mint_threshold", 0.0),
        ({"consensus": DROP}, TIMEOUT, None),
        ({"consensus": None}, TIMEOUT, None),
        ({"consensus": [consensus()]}, TIMEOUT, None),
        ({"consensus": DROP}, "ledger_blockchain_consensus_min_members", None),
    ],
    ids=repr,
)
def test_chain_fields(changes: dict[str, Any], metric: str, expected: float | None) -> None:
    values = gauges(read_chain(document(CHAIN_JSON, **changes)))
    if expected is None:
        assert metric not in values
    else:
        assert values[metric] == pytest.approx(expected)
    # a field's problem never takes other series with it
    affected = set().union(*(FEEDS[field] for field in changes))
    for name, value in EXPECTED_CHAIN_GAUGES.items():
        if name not in affected:
            assert values[name] == pytest.approx(value), name


@pytest.mark.parametrize(
    ("changes", "height"),
    [
        ({}, 18342.0),
        ({"blockHeight": "77"}, 77.0),
        ({"blockHeight": -1}, None),
        ({"blockHeight": None}, None),
        ({"blockHeight": DROP}, None),
        ({"blockHeight": False}, None),
    ],
    ids=repr,
)
def test_chain_height_field(changes: dict[str, Any], height: float | None) -> None:
    assert read_chain(document(CHAIN_JSON, **changes)).height == height


@pytest.mark.parametrize(
    ("changes", "consensus_type", "key_type"),
    [
        ({}, "council_leader_proposal", "secp256k1"),
        ({"consensus": consensus(consensusType=DROP)}, None, "secp256k1"),
        ({"consensus": consensus(consensusType=None)}, None, "secp256k1"),
        ({"consensus": consensus(consensusType=3)}, None, "secp256k1"),
        ({"consensus": DROP, "keyType": DROP}, None, None),
        ({"consensus": "council_leader_proposal"}, None, "secp256k1"),
        ({"keyType": ["secp256k1"]}, "council_leader_proposal", None),
        ({"keyType": "ed25519"}, "council_leader_proposal", "ed25519"),
    ],
    ids=repr,
)
def test_chain_consensus_info_labels(
    changes: dict[str, Any], consensus_type: str | None, key_type: str | None
) -> None:
    reading = read_chain(document(CHAIN_JSON, **changes))
    assert (reading.consensus_type, reading.key_type) == (consensus_type, key_type)


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        ({"enableTxProof": True}, (("enableTxProof", 1.0),)),
        (
            {"zetaFlag": False, "enableNewThing": True, "alpha": True},
            (("alpha", 1.0), ("enableNewThing", 1.0), ("zetaFlag", 0.0)),
        ),
        (
            {"enableTxProof": "true", "b": 1, "c": None, "d": False, "e": {}, "f": [True]},
            (("d", 0.0),),
        ),
        ({}, ()),
        (None, ()),
        (DROP, ()),
        (["enableTxProof"], ()),
        ("enableTxProof", ()),
    ],
    ids=repr,
)
def test_chain_features(features: object, expected: tuple[tuple[str, float], ...]) -> None:
    assert read_chain(document(CHAIN_JSON, features=features)).features == expected


def test_chain_with_nothing_readable_counts_no_sessions_only() -> None:
    reading = read_chain({})
    assert gauges(reading) == {SESSIONS: 0.0}
    assert (reading.height, reading.consensus_type, reading.key_type) == (None, None, None)
    assert reading.features == ()


def test_reading_does_not_change_the_document() -> None:
    for text, read in ((CHAIN_JSON, read_chain), (HEALTH_JSON, read_health)):
        body = json.loads(text)
        before = copy.deepcopy(body)
        read(body)
        assert body == before


@pytest.mark.parametrize("body", [[], ["8f2a9c"], "ok", 42, 1.5, True, None], ids=repr)
def test_non_object_answers_are_invalid_responses(body: object) -> None:
    with pytest.raises(InvalidResponseError, match="not an object"):
        read_health(body)
    with pytest.raises(InvalidResponseError, match="not an object"):
        read_chain(body)


# --- strings a hostile node sends: unencodable (lone surrogates) or too long ---

SURROGATE = "\ud800"  # what json.loads makes of "\\ud800" and of raw ED A0 80 bytes
LONG = "v" * (DEFAULT_MAX_LABEL_VALUE_LENGTH + 1)


def _hostile_id(value: object) -> str | None:
    """Test ids without kilobytes of text."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} chars)"


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"nodeVersion": f"1.4.2{SURROGATE}"}, "node_version", None),
        ({"nodeVersion": LONG}, "node_version", None),
        ({"nodeVersion": "v" * DEFAULT_MAX_LABEL_VALUE_LENGTH}, "node_version", "v" * 1024),
        ({"nodeVersion": "a\x00b"}, "node_version", "a\x00b"),  # NUL is a valid label value
        ({"nodeId": SURROGATE}, "node_id", None),
        ({"nodeId": LONG}, "node_id", None),
        ({"network": network(peerId=SURROGATE)}, "peer_id", None),
        ({"network": network(peerId=LONG), "peerId": "12D3KooWTop"}, "peer_id", "12D3KooWTop"),
        ({"network": network(networkPeers=["a", f"b{SURROGATE}"])}, "network_peers", ()),
        (
            {"network": network(networkPeers=["a", "p" * (MAX_TEXT_CHARS + 1)])},
            "network_peers",
            (),
        ),
        # a chain id UTF-8 cannot hold is skipped and counted (as invalid_response, later)
        ({"blockchains": ["a", f"b{SURROGATE}", "c"]}, "blockchain_ids", ("a", "c")),
        ({"blockchains": ["a", f"b{SURROGATE}", "c"]}, "unreadable_chain_ids", 1),
        ({"blockchains": ["a", f"b{SURROGATE}", "c"]}, "blockchain_count", 3.0),
        ({"blockchains": ["a", f"b{SURROGATE}", f"b{SURROGATE}"]}, "unreadable_chain_ids", 2),
        ({"blockchains": ["a", "", 5]}, "unreadable_chain_ids", 0),
        # a chain id over the label length is skipped and counted as a dropped label value
        ({"blockchains": ["a", LONG]}, "blockchain_ids", ("a",)),
        ({"blockchains": ["a", LONG]}, "unreadable_chain_ids", 0),
        ({"blockchains": ["a", LONG]}, "dropped", Dropped(label_values=1)),
        ({"nodeVersion": LONG, "nodeId": LONG}, "dropped", Dropped(label_values=2)),
        ({"nodeVersion": SURROGATE, "nodeId": 5}, "dropped", NOTHING_DROPPED),
        ({}, "dropped", NOTHING_DROPPED),
    ],
    ids=_hostile_id,
)
def test_health_hostile_strings(changes: dict[str, Any], field: str, expected: object) -> None:
    reading = read_health(document(HEALTH_JSON, **changes))
    assert getattr(reading, field) == expected


def test_health_label_length_is_configurable() -> None:
    body = document(HEALTH_JSON, nodeVersion="1.4.2-build.381", blockchains=["abc", "abcdefghi"])
    reading = read_health(body, Bounds(label_value_length=8))
    assert reading.node_version is None
    assert reading.blockchain_ids == ("abc",)
    assert reading.dropped == Dropped(label_values=4)  # version, node and peer id, a chain id


@pytest.mark.parametrize(
    ("changes", "consensus_type", "key_type", "dropped"),
    [
        ({"consensus": consensus(consensusType=SURROGATE)}, None, "secp256k1", NOTHING_DROPPED),
        ({"keyType": f"ed{SURROGATE}"}, "council_leader_proposal", None, NOTHING_DROPPED),
        ({"consensus": consensus(consensusType=LONG)}, None, "secp256k1", Dropped(label_values=1)),
        ({"keyType": LONG}, "council_leader_proposal", None, Dropped(label_values=1)),
    ],
    ids=_hostile_id,
)
def test_chain_hostile_label_strings(
    changes: dict[str, Any], consensus_type: str | None, key_type: str | None, dropped: Dropped
) -> None:
    reading = read_chain(document(CHAIN_JSON, **changes))
    assert (reading.consensus_type, reading.key_type) == (consensus_type, key_type)
    assert reading.dropped == dropped
    assert gauges(reading) == pytest.approx(EXPECTED_CHAIN_GAUGES)


@pytest.mark.parametrize(
    ("features", "bounds", "expected", "dropped"),
    [
        ({"ok": True, f"bad{SURROGATE}": True}, Bounds(), (("ok", 1.0),), NOTHING_DROPPED),
        ({LONG: True, "ok": False}, Bounds(), (("ok", 0.0),), Dropped(label_values=1)),
        ({LONG: "yes", "ok": False}, Bounds(), (("ok", 0.0),), NOTHING_DROPPED),
        (
            {"c": True, "a": False, "b": True, "d": "x", "e": None},
            Bounds(features_per_chain=2),
            (("a", 0.0), ("b", 1.0)),
            Dropped(features=1),
        ),
        (
            {"b": True, "a": False},
            Bounds(features_per_chain=2),
            (("a", 0.0), ("b", 1.0)),
            NOTHING_DROPPED,
        ),
    ],
    ids=_hostile_id,
)
def test_chain_features_are_bounded(
    features: dict[str, Any],
    bounds: Bounds,
    expected: tuple[tuple[str, float], ...],
    dropped: Dropped,
) -> None:
    reading = read_chain(document(CHAIN_JSON, features=features), bounds=bounds)
    assert reading.features == expected
    assert reading.dropped == dropped


def test_a_hundred_thousand_flags_keep_the_first_by_name() -> None:
    flags = {f"flag-{index:06d}": index % 2 == 0 for index in reversed(range(100_000))}
    reading = read_chain(document(CHAIN_JSON, features=flags))
    kept = DEFAULT_MAX_FEATURES_PER_CHAIN
    assert reading.features == tuple(
        (f"flag-{index:06d}", 1.0 if index % 2 == 0 else 0.0) for index in range(kept)
    )
    assert reading.dropped == Dropped(features=100_000 - kept)


@pytest.mark.parametrize(
    "members",
    [["02aa", f"02bb{SURROGATE}"], ["02aa", "k" * (MAX_TEXT_CHARS + 1)]],
    ids=["surrogate", "over-cap"],
)
def test_a_council_with_an_unreadable_key_is_no_view(members: list[str]) -> None:
    reading = read_chain(document(CHAIN_JSON, councilMembers=members))
    assert reading.council is None
    assert gauges(reading)["ledger_blockchain_council_members"] == 2.0


def test_a_block_hash_utf8_cannot_hold_is_not_a_hash() -> None:
    fields = ("hash", "blockHash")
    assert read_block_hash({"hash": f"9f{SURROGATE}", "blockHash": "9f1c"}, fields) == "9f1c"
    with pytest.raises(InvalidResponseError, match="none of the hash fields"):
        read_block_hash({"hash": SURROGATE}, fields)


@pytest.mark.parametrize(
    "counts",
    [
        (0, 0, 0, 0, 0),
        (1, 0, 0, 0, 0),
        (0, 2, 0, 0, 0),
        (0, 0, 3, 0, 0),
        (0, 0, 0, 4, 0),
        (0, 0, 0, 0, 5),
    ],
)
def test_a_reader_makes_no_empty_dropped(counts: tuple[int, int, int, int, int]) -> None:
    """Nothing left out is NOTHING_DROPPED itself (the history tells it by identity); any
    count makes a Dropped with it."""
    made = count_dropped(*counts)
    assert made == Dropped(*counts)
    assert (made is NOTHING_DROPPED) == (not any(counts))
    assert read_chain(json.loads(CHAIN_JSON)).dropped is NOTHING_DROPPED
