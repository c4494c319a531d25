"""What a node's JSON answers mean, as frozen typed readings.

Only values the node actually sent in a readable form make it into a reading (contract rule 1);
everything else is left out, so the writer can never invent a sample.
"""

from __future__ import annotations

import heapq
import math
import struct
import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple, TypeVar, cast

from msgspec import UNSET, Raw
from msgspec.structs import astuple

from exporter.bounds import (
    DEFAULT_BOUNDS,
    MAX_TEXT_CHARS,
    NOTHING_DROPPED,
    Bounds,
    Dropped,
    count_dropped,
)
from exporter.model.answers import BlockHashes, ChainStatusFields, decode_json
from exporter.model.consensus_reading import (
    NO_SESSIONS,
    SessionsRead,
    VoteSession,
    consensus_view,
    leader_keys,
    read_sessions,
    view_key,
)
from exporter.values import (
    LabelTexts,
    is_text,
    read_bool,
    read_count,
    read_duration,
    read_length,
    read_number,
    read_text,
    read_timestamp,
)


class ChainGauge(IntEnum):
    """The plain gauges of a chain's status: each one's position in ChainReading.values."""

    HEIGHT = 0  # blockHeight
    LAST_MESSAGE = 1  # lastMessageTime
    PENDING_MESSAGES = 2  # pendingMessagesCount
    DELAYED_MESSAGES = 3  # delayedMessagesCount
    PENDING_TRANSACTIONS = 4  # pendingTransactions
    SYNCING = 5  # syncing
    IN_COUNCIL = 6  # isInCouncil
    VOTING = 7  # isVoting
    TIME_TO_VOTE = 8  # isTimeToVote
    COUNCIL_MEMBERS = 9  # councilMembers (how many)
    PEERS = 10  # blockchainPeers (how many)
    VOTE_SESSIONS = 11  # voteSessions (how many)
    MIN_MEMBERS = 12  # consensus.minMembers
    CONSENSUS_TIMEOUT = 13  # consensus.consensusTimeout
    TX_MAX_TIME_TRIGGER = 14  # consensus.txMaxTimeTrigger
    TX_KARMA_THRESHOLD = 15  # consensus.txKarmaThreshold
    TX_MINT_THRESHOLD = 16  # consensus.txMintThreshold
    VOTE_ROUND = 17  # the highest round among voteSessions
    VOTE_CONSENSUS_REQUIRED = 18  # the highest consensusRequired among voteSessions


class InvalidResponseError(ValueError):
    """The answer is JSON but not of the shape the API documents (e.g. not an object)."""


@dataclass(frozen=True, slots=True)
class HealthReading:
    """What ``GET /health`` said about the node. ``unreadable_chain_ids`` counts the listed
    chain ids UTF-8 cannot hold (skipped: no label can name them); ``dropped`` the label
    values over the configured length (chain ids among them, skipped too). ``node_key`` is
    the ``nodeId`` whatever the label length: what council lists name the node by."""

    node_version: str | None
    node_id: str | None
    peer_id: str | None
    peer_count: float | None
    blockchain_count: float | None
    blockchain_ids: tuple[str, ...]
    network_peers: frozenset[str] = frozenset()
    unreadable_chain_ids: int = 0
    dropped: Dropped = NOTHING_DROPPED
    node_key: str | None = None  # nodeId as a council key: up to MAX_TEXT_CHARS, no label


@dataclass(frozen=True, slots=True)
class ChainReading:
    """What ``GET /blockchains/{id}`` said: plain gauges, the consensus info and feature flags.

    The gauges are one packed array (a float64 per :class:`ChainGauge`, NaN where the node
    sent nothing readable; no reader returns NaN): at 3000 chains that is one object a chain
    instead of ~18 tuples and floats, kept for two cycles.
    """

    values: bytes
    consensus_type: str | None = None
    key_type: str | None = None
    features: tuple[tuple[str, float], ...] = ()
    council: frozenset[str] | None = None
    dropped: Dropped = NOTHING_DROPPED  # feature flags and label values over the bounds
    sessions: tuple[VoteSession, ...] = ()  # the open vote sessions followed, by id
    leaders: tuple[str, ...] = ()  # the council keys with a leader series, by name
    consensus_view: bytes | None = None  # digest of consensus, keyType and features

    @property
    def gauges(self) -> tuple[tuple[ChainGauge, float], ...]:
        """The gauges the node reported, as (gauge, value) in :class:`ChainGauge` order."""
        pairs = zip(ChainGauge, _VALUES.unpack(self.values), strict=True)
        return tuple((gauge, value) for gauge, value in pairs if not math.isnan(value))

    def gauge(self, position: int) -> float | None:
        """The gauge at ``position`` (a :class:`ChainGauge`); None when not reported."""
        value: float = _ONE.unpack_from(self.values, 8 * position)[0]
        return None if _isnan(value) else value

    @property
    def height(self) -> float | None:
        """The block height, when the node reported a readable one. (Read about eight times a
        chain and cycle by the history and the network view: unpacked at a fixed offset.)"""
        value: float = _ONE.unpack_from(self.values, _HEIGHT_AT)[0]
        return None if _isnan(value) else value

    @property
    def syncing(self) -> bool | None:
        """Whether the node says it is syncing; None unless it sent a JSON boolean."""
        flag: float = _ONE.unpack_from(self.values, _SYNCING_AT)[0]
        return None if _isnan(flag) else flag == 1.0


class GaugeTable:
    """The gauges of many chain readings as one table: a column is every reading's value of
    one gauge (NaN where not reported), read at C speed. The render writes each gauge family
    over every chain: 19 x 3000 values a cycle at 1000 nodes."""

    def __init__(self, readings: Iterable[ChainReading]) -> None:
        self._table = memoryview(b"".join(reading.values for reading in readings)).cast("d")

    def column(self, gauge: int) -> list[float]:
        """Every reading's value of ``gauge`` (a :class:`ChainGauge`), in reading order."""
        column = self._table[gauge :: len(ChainGauge)].tolist()
        return cast(list[float], column)  # a "d" view's items are floats


Kept = TypeVar("Kept", bound=Hashable)


class Shared:
    """Keeps one copy of equal values read from different nodes (council sets and feature
    lists repeat on every node of a network), and the readings of parts of answers sent
    alike by many nodes (:meth:`part`). Cleared each cycle, so it never holds more than the
    cycle's readings do, plus at most MAX_PARTS parts' texts of MAX_PART_BYTES. Each call
    is one dict operation, atomic under the GIL."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, Hashable] = {}
        self._parts: dict[tuple[Hashable, bytes], object] = {}

    def __call__(self, value: Kept) -> Kept:
        """The copy kept of ``value`` (``value`` itself the first time)."""
        kept = self._kept.setdefault(value, value)
        return kept  # type: ignore[return-value]  # equal values have the same type here

    def set_of(self, values: frozenset[str]) -> frozenset[str]:
        """The copy kept of the set ``values``, its members the copies kept (peer ids repeat
        in the sets of different nodes): ``self(frozenset(map(self, values)))``, at C speed."""
        keep = self._kept.setdefault
        return self(frozenset(map(keep, values, values)))  # type: ignore[arg-type]

    def made(self, key: Hashable, make: Callable[[], Kept]) -> Kept:
        """The value ``make`` gave for ``key`` earlier this cycle, else ``make()`` (kept).
        Two threads may both make it; equal keys make equal values, so either is right."""
        marker = (_MADE, key)
        kept = self._kept.get(marker)
        if kept is None:
            kept = self._kept.setdefault(marker, make())
        return kept  # type: ignore[return-value]  # made by ``make`` for this key

    def part(self, kind: Hashable, text: bytes, read: Callable[[], Kept]) -> Kept:
        """``read()``, the reading of the JSON ``text`` of a ``kind`` of part of an answer,
        made once a cycle for every answer whose part is the same text (the council, vote
        sessions, consensus settings and features of one chain: the same on every node).
        ``kind`` names all else the reading depends on (the bounds it was read under).
        Texts over MAX_PART_BYTES, and any past the first MAX_PARTS, are read each time."""
        if len(text) > MAX_PART_BYTES:
            return read()
        key = (kind, text)
        kept = self._parts.get(key)
        if kept is None:
            kept = read()
            if len(self._parts) < MAX_PARTS:
                self._parts[key] = kept
        return kept  # type: ignore[return-value]  # read by ``read`` for this kind and text

    def clear(self) -> None:
        """Forget every value: the next cycle starts afresh."""
        self._kept.clear()
        self._parts.clear()


#: Bounds of what :meth:`Shared.part` keeps in a cycle (at most 4 MiB of texts): a real
#: network has a few distinct councils and settings per chain, whatever its size.
MAX_PARTS = 1024
MAX_PART_BYTES = 4096


#: Tags the keys of :meth:`Shared.made`, so they never meet a value kept by ``__call__``.
_MADE = object()

Reader = Callable[[Any], float | None]


def _list_length(value: Any) -> float | None:
    return read_length(value, list)


def _vote_sessions(value: Any) -> float | None:
    # The contract counts an absent voteSessions as none; null or another type is unreadable.
    return 0.0 if value is _ABSENT else read_length(value, dict)


_ABSENT = object()

#: Where each gauge but those of the vote sessions is in a chain's status, and how it is read.
_CHAIN_GAUGES: tuple[tuple[ChainGauge, tuple[str, ...], Reader], ...] = (
    (ChainGauge.HEIGHT, ("blockHeight",), read_count),
    (ChainGauge.LAST_MESSAGE, ("lastMessageTime",), read_timestamp),
    (ChainGauge.PENDING_MESSAGES, ("pendingMessagesCount",), read_count),
    (ChainGauge.DELAYED_MESSAGES, ("delayedMessagesCount",), read_count),
    (ChainGauge.PENDING_TRANSACTIONS, ("pendingTransactions",), read_count),
    (ChainGauge.SYNCING, ("syncing",), read_bool),
    (ChainGauge.IN_COUNCIL, ("isInCouncil",), read_bool),
    (ChainGauge.VOTING, ("isVoting",), read_bool),
    (ChainGauge.TIME_TO_VOTE, ("isTimeToVote",), read_bool),
    (ChainGauge.COUNCIL_MEMBERS, ("councilMembers",), _list_length),
    (ChainGauge.PEERS, ("blockchainPeers",), _list_length),
    (ChainGauge.VOTE_SESSIONS, ("voteSessions",), _vote_sessions),
    (ChainGauge.MIN_MEMBERS, ("consensus", "minMembers"), read_count),
    (ChainGauge.CONSENSUS_TIMEOUT, ("consensus", "consensusTimeout"), read_duration),
    (ChainGauge.TX_MAX_TIME_TRIGGER, ("consensus", "txMaxTimeTrigger"), read_duration),
    (ChainGauge.TX_KARMA_THRESHOLD, ("consensus", "txKarmaThreshold"), read_number),
    (ChainGauge.TX_MINT_THRESHOLD, ("consensus", "txMintThreshold"), read_number),
)
_GAUGE_COUNT = len(ChainGauge)  # (an Enum's len is a Python call)
_VALUES = struct.Struct(f"={_GAUGE_COUNT}d")
_ONE = struct.Struct("=d")
_HEIGHT_AT, _SYNCING_AT = 8 * int(ChainGauge.HEIGHT), 8 * int(ChainGauge.SYNCING)
_isnan = math.isnan  # NaN: a gauge the node did not report
_NAN = math.nan


#: _CHAIN_GAUGES split by where they are: in the status itself, or in its ``consensus``.
_TOP_GAUGES = tuple((g, path[0], read) for g, path, read in _CHAIN_GAUGES if len(path) == 1)
_CONSENSUS_GAUGES = tuple(
    (g, path[1], read) for g, path, read in _CHAIN_GAUGES if path[:1] == ("consensus",)
)
assert len(_TOP_GAUGES) + len(_CONSENSUS_GAUGES) == len(_CHAIN_GAUGES)


def _gauge_values(body: dict[str, Any]) -> list[float]:
    """The plain gauges of a chain status, NaN where absent or unreadable (as _lookup reads
    each path, unrolled: this runs for every chain of every node each cycle)."""
    values = [_NAN] * _GAUGE_COUNT
    for gauge, key, reader in _TOP_GAUGES:
        raw = body.get(key, _ABSENT)
        if raw is not _ABSENT or reader is _vote_sessions:
            value = reader(raw)
            if value is not None:
                values[gauge] = value
    consensus = body.get("consensus")
    if isinstance(consensus, dict):  # otherwise none of its gauges is readable
        for gauge, key, reader in _CONSENSUS_GAUGES:
            raw = consensus.get(key, _ABSENT)
            if raw is not _ABSENT:
                value = reader(raw)
                if value is not None:
                    values[gauge] = value
    return values


def _lookup(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path``, ``_ABSENT`` when a key is missing, ``None`` through a non-object."""
    value: Any = body
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key, _ABSENT)
    return value


#: The fields a node's ``/health`` carries: an answer with none of them (another service's
#: health check, ``{"status": "ok"}``) is not a ledger node, whatever its status code says.
HEALTH_FIELDS = ("nodeVersion", "nodeId", "network", "blockchains")


def read_health(
    body: Any, bounds: Bounds = DEFAULT_BOUNDS, shared: Shared | None = None
) -> HealthReading:
    """Interpret a ``/health`` answer; raises InvalidResponseError unless it is a JSON object
    holding at least one of HEALTH_FIELDS (not null). Label values (and chain ids) over
    ``bounds.label_value_length`` are dropped and counted. With ``shared``, the ids and peer
    sets equal to another node's this cycle are kept once (peer ids repeat across nodes)."""
    if not isinstance(body, dict):
        raise InvalidResponseError(f"/health answered a JSON {type(body).__name__}, not an object")
    if list(map(body.get, HEALTH_FIELDS)).count(None) == len(HEALTH_FIELDS):  # all null
        raise InvalidResponseError(
            "the node's URL answered /health with JSON that is not a ledger node's health "
            f"(none of {', '.join(HEALTH_FIELDS)}): check the node's url in the config"
        )
    network = body.get("network")
    network = network if isinstance(network, dict) else {}
    chains = body.get("blockchains")
    labels = LabelTexts(bounds.label_value_length)
    chain_ids, unreadable = _chain_ids(chains, labels)
    node_version, node_id = labels(body.get("nodeVersion")), labels(body.get("nodeId"))
    peer_id = labels(network.get("peerId")) or labels(body.get("peerId"))
    node_key = node_id or read_text(body.get("nodeId")) or None
    peers = _text_set(network.get("networkPeers")) or frozenset()
    if shared is not None:
        node_version, node_id, peer_id, node_key = (
            None if text is None else shared(text)
            for text in (node_version, node_id, peer_id, node_key)
        )
        peers = shared.set_of(peers) if peers else peers
    return HealthReading(
        node_version=node_version,
        node_id=node_id,
        peer_id=peer_id,
        peer_count=read_count(network.get("peerCount")),
        blockchain_count=_list_length(chains),
        blockchain_ids=chain_ids,
        network_peers=peers,
        unreadable_chain_ids=unreadable,
        dropped=count_dropped(label_values=labels.dropped),
        node_key=node_key,
    )


def _chain_ids(chains: Any, labels: LabelTexts) -> tuple[tuple[str, ...], int]:
    """The non-empty string ids of a ``blockchains`` list, once each, in order, and how many
    UTF-8 cannot hold. Interned: every node lists the same ids, and history and labels key
    on them."""
    if not isinstance(chains, list):
        return (), 0
    ids: dict[str, None] = {}
    unreadable = 0
    for chain in chains:
        if not isinstance(chain, str) or not chain or not labels.fits(chain):
            continue
        if is_text(chain):
            ids[sys.intern(chain)] = None
        else:
            unreadable += 1
    return tuple(ids), unreadable


def read_chain(
    body: Any, shared: Shared | None = None, bounds: Bounds = DEFAULT_BOUNDS
) -> ChainReading:
    """Interpret a ``/blockchains/{id}`` answer; raises InvalidResponseError unless an object.
    With ``shared``, equal council sets, feature lists and vote sessions (the same session
    seen by every node of a chain) of different nodes are kept once;
    feature flags and label values beyond ``bounds`` are dropped and counted. ``body`` may
    also be the fields the fast path decoded (:func:`decode_chain_status`): read the same."""
    if type(body) is ChainStatusFields:
        return _read_fields(body, shared, bounds)
    if not isinstance(body, dict):
        raise InvalidResponseError(
            f"the chain status is a JSON {type(body).__name__}, not an object"
        )
    values = _gauge_values(body)
    labels = LabelTexts(bounds.label_value_length)
    sessions = read_sessions(body.get("voteSessions"), bounds.vote_sessions_per_chain, labels)
    _note_sessions(values, sessions)
    features, extra_features = _features(body.get("features"), bounds.features_per_chain, labels)
    council = _text_set(body.get("councilMembers"))
    leaders, extra_leaders = leader_keys(council or (), bounds.leaders_per_chain, labels)
    view = _consensus_view(body, shared)
    followed = sessions.followed
    if shared is not None:
        features, leaders, followed = shared(features), shared(leaders), shared(followed)
        council = None if council is None else shared(council)
        view = None if view is None else shared(view)
    consensus_type = labels(_lookup(body, ("consensus", "consensusType")))
    key_type = labels(body.get("keyType"))
    return ChainReading(
        values=_VALUES.pack(*values),
        consensus_type=consensus_type,
        key_type=key_type,
        features=features,
        council=council,
        dropped=count_dropped(extra_features, 0, labels.dropped, sessions.dropped, extra_leaders),
        sessions=followed,
        leaders=leaders,
        consensus_view=view,
    )


def _consensus_view(body: dict[str, Any], shared: Shared | None) -> bytes | None:
    """The configuration's digest; made once a cycle for the nodes that send the same one."""
    key = view_key(body) if shared is not None else None
    if shared is None or key is None:
        return consensus_view(body)
    digest = shared.made(key, lambda: consensus_view(body) or b"")
    return digest or None


def _note_sessions(values: list[float], sessions: SessionsRead) -> None:
    """The highest round and ``consensusRequired`` among the open sessions, when any."""
    if sessions is NO_SESSIONS:
        return
    if sessions.highest_round is not None:
        values[ChainGauge.VOTE_ROUND] = sessions.highest_round
    if sessions.highest_required is not None:
        values[ChainGauge.VOTE_CONSENSUS_REQUIRED] = sessions.highest_required


def _text_set(value: Any) -> frozenset[str] | None:
    """A JSON list of non-empty strings as a set (order and repeats ignored); None when the
    value is not a list or holds anything else (a string UTF-8 cannot hold or one over
    MAX_TEXT_CHARS included), so a garbled list never counts as a view."""
    if not isinstance(value, list):
        return None
    try:  # checked in C, not once per member: a node lists its peers every cycle
        joined = "".join(value)  # TypeError unless every member is a string
    except TypeError:
        return None
    if value and not 0 < min(map(len, value)) <= max(map(len, value)) <= MAX_TEXT_CHARS:
        return None
    return frozenset(value) if is_text(joined) else None  # a lone surrogate in any member


def read_block_hash(body: Any, fields: tuple[str, ...]) -> str:
    """The hash of a ``/blockchains/{id}/blocks`` answer: the first of ``fields`` that holds a
    non-empty string; InvalidResponseError when it is not an object or none does. ``body``
    may also be the fields' values the fast path decoded (:class:`BlockHashDecoder`)."""
    if type(body) is BlockHashes:
        for raw in body.values:
            value = None if raw is UNSET else read_text(raw)
            if value:
                return value
        raise InvalidResponseError(f"the block has none of the hash fields {', '.join(fields)}")
    if not isinstance(body, dict):
        raise InvalidResponseError(f"the block is a JSON {type(body).__name__}, not an object")
    for field in fields:
        value = read_text(body.get(field))
        if value:
            return value
    raise InvalidResponseError(f"the block has none of the hash fields {', '.join(fields)}")


def _features(
    features: Any, limit: int, labels: LabelTexts
) -> tuple[tuple[tuple[str, float], ...], int]:
    """Every flag present in ``features`` whose value is a JSON boolean, unknown flags too,
    by name; past ``limit`` only the first ``limit`` names, and how many more there were.
    Linear in the flags (a partial sort), so 10^5 of them cost milliseconds."""
    if not isinstance(features, dict):
        return (), 0
    flags = [
        (name, flag)
        for name, value in features.items()
        if (flag := read_bool(value)) is not None and labels.fits(name) and is_text(name)
    ]
    kept = sorted(flags) if len(flags) <= limit else heapq.nsmallest(limit, flags)
    return tuple((sys.intern(name), flag) for name, flag in kept), len(flags) - len(kept)


# --- the fast path: a chain status decoded into its fields (exporter.model.answers) ---------

#: The plain gauges of ChainStatusFields' scalar fields, as _TOP_GAUGES reads them.
_FIELD_GAUGES = (
    (ChainGauge.HEIGHT, "block_height", read_count),
    (ChainGauge.LAST_MESSAGE, "last_message_time", read_timestamp),
    (ChainGauge.PENDING_MESSAGES, "pending_messages_count", read_count),
    (ChainGauge.DELAYED_MESSAGES, "delayed_messages_count", read_count),
    (ChainGauge.PENDING_TRANSACTIONS, "pending_transactions", read_count),
    (ChainGauge.SYNCING, "syncing", read_bool),
    (ChainGauge.IN_COUNCIL, "is_in_council", read_bool),
    (ChainGauge.VOTING, "is_voting", read_bool),
    (ChainGauge.TIME_TO_VOTE, "is_time_to_vote", read_bool),
    (ChainGauge.PEERS, "blockchain_peers", _list_length),
)
#: (the council's length, the set, its leader keys, leaders dropped, label values dropped)
_Council = tuple[float | None, frozenset[str] | None, tuple[str, ...], int, int]
#: (the sessions read, the count gauge, label values dropped)
_Sessions = tuple[SessionsRead, float | None, int]
#: (the consensus gauges as (gauge, value), consensusType, label values dropped)
_Settings = tuple[tuple[tuple[int, float], ...], str | None, int]
#: (the feature flags, flags dropped, label values dropped)
_Features = tuple[tuple[tuple[str, float], ...], int, int]
_NO_COUNCIL: _Council = (None, None, (), 0, 0)
_NO_SETTINGS: _Settings = ((), None, 0)
_NO_FEATURES: _Features = ((), 0, 0)


def _read_fields(fields: ChainStatusFields, shared: Shared | None, bounds: Bounds) -> ChainReading:
    """read_chain of a decoded chain status: the same reading, its configuration (council,
    settings, features, keyType) and its vote sessions each read once a cycle for all the
    nodes that send the same text, so only the node's own scalar gauges are read each time."""
    values = _field_values(fields)
    parts = _Parts(shared, bounds)
    config = parts.configuration(fields)
    sessions, session_count, session_drops = parts.sessions(fields.vote_sessions)
    for position, value in config.gauges:
        values[position] = value
    if session_count is not None:
        values[ChainGauge.VOTE_SESSIONS] = session_count
    _note_sessions(values, sessions)
    dropped = config.dropped
    if session_drops or sessions.dropped:
        labels = config.label_drops + session_drops
        dropped = count_dropped(
            config.extra_features, 0, labels, sessions.dropped, config.extra_leaders
        )
    return ChainReading(
        values=_VALUES.pack(*values),
        consensus_type=config.consensus_type,
        key_type=config.key_type,
        features=config.features,
        council=config.council,
        dropped=dropped,
        sessions=sessions.followed,
        leaders=config.leaders,
        consensus_view=config.view,
    )


def _field_values(fields: ChainStatusFields) -> list[float]:
    """The scalar gauges of a decoded chain status, NaN where absent or unreadable, as
    _FIELD_GAUGES' readers read them; a count that is a plain int and a flag that is a
    boolean (what nodes send) are read inline, since this runs for every chain of every
    node each cycle."""
    values = [_NAN] * _GAUGE_COUNT
    raw = astuple(fields)
    for gauge, at in _COUNT_FIELDS:
        value = raw[at]
        if type(value) is int and 0 <= value <= _MAX_FLOAT_INT:
            values[gauge] = float(value)
        elif value is not UNSET and (read := read_count(value)) is not None:
            values[gauge] = read
    for gauge, at in _FLAG_FIELDS:
        value = raw[at]
        if type(value) is bool:  # read_bool: nothing else is a flag
            values[gauge] = 1.0 if value else 0.0
    for gauge, at, reader in _OTHER_FIELDS:
        value = raw[at]
        if value is not UNSET and (read := reader(value)) is not None:
            values[gauge] = read
    return values


class _Configuration(NamedTuple):
    """What a decoded chain status's council, consensus settings, features and keyType read
    as: the same on every node of a chain (unlike its vote sessions, whose stage and leader
    move), so read once a cycle for all the nodes that send the same texts."""

    gauges: tuple[tuple[int, float], ...]  # the council's length, the settings' gauges
    consensus_type: str | None
    key_type: str | None
    features: tuple[tuple[str, float], ...]
    council: frozenset[str] | None
    leaders: tuple[str, ...]
    view: bytes | None
    extra_features: int  # flags over the bound
    extra_leaders: int  # leaders over the bound
    label_drops: int  # label values over the bound
    dropped: Dropped  # the three above, as an answer without vote sessions drops them


#: Where each of _FIELD_GAUGES is in a ChainStatusFields as a tuple (msgspec's astuple), by
#: how it is read: the counts and flags inline, the others by their reader.
_FIELD_AT = {name: at for at, name in enumerate(ChainStatusFields.__struct_fields__)}
_COUNT_FIELDS = tuple((int(g), _FIELD_AT[n]) for g, n, read in _FIELD_GAUGES if read is read_count)
_FLAG_FIELDS = tuple((int(g), _FIELD_AT[n]) for g, n, read in _FIELD_GAUGES if read is read_bool)
_OTHER_FIELDS = tuple(
    (int(g), _FIELD_AT[n], read)
    for g, n, read in _FIELD_GAUGES
    if read is not read_count and read is not read_bool
)
#: The largest int a float holds without overflowing (read_count reads a larger one as None).
_MAX_FLOAT_INT = int(sys.float_info.max)


class _Parts:
    """The parts of one decoded chain status, each read from its JSON text as read_chain
    reads it from the whole answer, and with ``shared`` once a cycle for every node that
    sends the same text."""

    __slots__ = ("_bounds", "_shared")

    def __init__(self, shared: Shared | None, bounds: Bounds) -> None:
        self._shared, self._bounds = shared, bounds

    def configuration(self, fields: ChainStatusFields) -> _Configuration:
        """The council, settings, features and keyType, with ``shared`` one lookup for them
        all (their texts joined: no JSON text holds a NUL, and a present part is never
        empty), read each time if together they are over MAX_PART_BYTES."""
        if self._shared is None:
            return self._read_configuration(fields)
        texts = (fields.council_members, fields.consensus, fields.features)
        key = b"\0".join(
            (*(b"" if text is UNSET else text for text in texts), repr(fields.key_type).encode())
        )
        kind = ("configuration", self._bounds)
        return self._shared.part(kind, key, lambda: self._read_configuration(fields))

    def _read_configuration(self, fields: ChainStatusFields) -> _Configuration:
        """The council, leaders, consensus settings, features and keyType of a decoded chain
        status, read once a cycle for every node that sends the same (the parts' shared key)."""
        length, council, leaders, extra_leaders, council_drops = self.council(
            fields.council_members
        )
        settings, consensus_type, settings_drops = self.settings(fields.consensus)
        features, extra_features, feature_drops = self.features(fields.features)
        counted = ((int(ChainGauge.COUNCIL_MEMBERS), length),) if length is not None else ()
        labels = LabelTexts(self._bounds.label_value_length)
        key_type = None if fields.key_type is UNSET else labels(fields.key_type)
        label_drops = council_drops + settings_drops + feature_drops + labels.dropped
        return _Configuration(
            gauges=(*counted, *settings),
            consensus_type=consensus_type,
            key_type=key_type,
            features=features,
            council=council,
            leaders=leaders,
            view=self.view(fields),
            extra_features=extra_features,
            extra_leaders=extra_leaders,
            label_drops=label_drops,
            dropped=count_dropped(extra_features, 0, label_drops, 0, extra_leaders),
        )

    def _read(self, kind: str, text: bytes, read: Callable[[Any], Kept]) -> Kept:
        if self._shared is None:
            return read(decode_json(text))
        # with the bounds: a poll still out from before a reload shares the cycle's Shared
        kind_read = (kind, self._bounds)
        return self._shared.part(kind_read, text, lambda: read(decode_json(text)))

    def _keep(self, value: Kept) -> Kept:
        return value if self._shared is None else self._shared(value)

    def council(self, raw: Raw | Any) -> _Council:
        """``councilMembers``: its length, the set and the keys with a leader series."""
        if raw is UNSET:
            return _NO_COUNCIL
        return self._read("council", bytes(raw), self._council)

    def _council(self, value: Any) -> _Council:
        council = _text_set(value)
        labels = LabelTexts(self._bounds.label_value_length)
        leaders, extra = leader_keys(council or (), self._bounds.leaders_per_chain, labels)
        council = None if council is None else self._keep(council)
        return _list_length(value), council, self._keep(leaders), extra, labels.dropped

    def sessions(self, raw: Raw | Any) -> _Sessions:
        """``voteSessions``: the sessions followed and their count (0 when absent)."""
        if raw is UNSET:
            return NO_SESSIONS, 0.0, 0
        return self._read("sessions", bytes(raw), self._sessions)

    def _sessions(self, value: Any) -> _Sessions:
        labels = LabelTexts(self._bounds.label_value_length)
        read = read_sessions(value, self._bounds.vote_sessions_per_chain, labels)
        if read is not NO_SESSIONS:
            followed = self._keep(read.followed)
            read = SessionsRead(followed, read.dropped, read.highest_round, read.highest_required)
        return read, _vote_sessions(value), labels.dropped

    def settings(self, raw: Raw | Any) -> _Settings:
        """``consensus``: its gauges and ``consensusType``."""
        if raw is UNSET:
            return _NO_SETTINGS
        return self._read("settings", bytes(raw), self._settings)

    def _settings(self, value: Any) -> _Settings:
        if not isinstance(value, dict):
            return _NO_SETTINGS
        gauges = []
        for gauge, key, reader in _CONSENSUS_GAUGES:
            raw = value.get(key, _ABSENT)
            if raw is not _ABSENT and (read := reader(raw)) is not None:
                gauges.append((int(gauge), read))
        labels = LabelTexts(self._bounds.label_value_length)
        consensus_type = labels(value.get("consensusType"))
        return tuple(gauges), consensus_type, labels.dropped

    def features(self, raw: Raw | Any) -> _Features:
        """``features``: the flags by name, and how many more than the bound."""
        if raw is UNSET:
            return _NO_FEATURES
        return self._read("features", bytes(raw), self._features)

    def _features(self, value: Any) -> _Features:
        labels = LabelTexts(self._bounds.label_value_length)
        features, extra = _features(value, self._bounds.features_per_chain, labels)
        return self._keep(features), extra, labels.dropped

    def view(self, fields: ChainStatusFields) -> bytes | None:
        """The digest of the consensus settings, keyType and features (_consensus_view)."""
        if fields.consensus is UNSET:
            return None  # consensus_view of a status without settings
        settings = bytes(fields.consensus)
        features = None if fields.features is UNSET else bytes(fields.features)
        key = b"\0".join((settings, repr(fields.key_type).encode(), features or b""))

        def read() -> bytes | None:
            body = {"consensus": decode_json(settings)}
            if fields.key_type is not UNSET:
                body["keyType"] = fields.key_type
            if features is not None:
                body["features"] = decode_json(features)
            view = _consensus_view(body, self._shared)
            return None if view is None else self._keep(view)

        return read() if self._shared is None else self._shared.part("view", key, read)
