"""What a node's JSON answers mean, as frozen typed readings.

Only values the node actually sent in a readable form make it into a reading (contract rule 1);
everything else is left out, so the writer can never invent a sample.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import msgspec
from msgspec import UNSET, Raw
from msgspec.structs import astuple

from exporter.bounds import (
    DEFAULT_BOUNDS,
    MAX_TEXT_CHARS,
    Bounds,
    Dropped,
    count_dropped,
)
from exporter.errors import LedgerExporterError
from exporter.model.answers import FAST_FIELDS, BlockHashes, ChainStatusFields, decode_json
from exporter.model.consensus_reading import (
    NO_SESSIONS,
    SESSION_GAUGES,
    SessionsRead,
    consensus_view,
    leader_keys,
    read_sessions,
    view_key,
)
from exporter.model.fields import (
    BLOCKCHAINS,
    CHAIN_GAUGES,
    CONSENSUS,
    CONSENSUS_SETTINGS,
    CONSENSUS_TYPE,
    COUNCIL_MEMBERS,
    FEATURES,
    GAUGE_POSITION,
    HEALTH_FIELDS,
    KEY_TYPE,
    NETWORK,
    NETWORK_PEERS,
    NODE_ID,
    NODE_VERSION,
    PEER_COUNT,
    PEER_ID,
    SESSION,
    TOP,
    VOTE_SESSIONS,
    ChainReading,
    Field,
    HealthReading,
    pack_gauges,
)
from exporter.model.storage import Kept, Shared
from exporter.values import (
    LabelTexts,
    is_text,
    read_bool,
    read_count,
    read_text,
)


class InvalidResponseError(LedgerExporterError, ValueError):
    """The answer is JSON but not of the shape the API documents (e.g. not an object)."""


Reader = Callable[[Any], float | None]


_ABSENT = object()
_NAN = float("nan")
_GAUGE_COUNT = len(CHAIN_GAUGES)


def _gauge_reader(field: Field) -> Reader:
    """A plain gauge's parser (a gauge's ``read`` returns a float)."""
    return cast(Reader, field.read)


#: The plain gauges of a chain status by the object they sit in (TOP: the status itself),
#: each as (position, name, parser, value when absent); those of every vote session are
#: the sessions' (read_sessions).
_PLACED = {
    place: tuple(
        (GAUGE_POSITION[g], g.name, _gauge_reader(g), g.absent)
        for g in CHAIN_GAUGES
        if g.at == place
    )
    for place in dict.fromkeys(g.at for g in CHAIN_GAUGES if g.at != SESSION)
}
_PLACES = tuple(_PLACED.items())
assert all(not g.also_at for g in CHAIN_GAUGES), "a chain gauge sits in one place"


def _gauge_values(body: dict[str, Any]) -> list[float]:
    """The plain gauges of a chain status, NaN where absent or unreadable (this runs for
    every chain of every node each cycle)."""
    values = [_NAN] * _GAUGE_COUNT
    for place, gauges in _PLACES:
        found = _lookup(body, place) if place else body
        if not isinstance(found, dict):  # none of its gauges is readable
            continue
        for position, key, reader, absent in gauges:
            raw = found.get(key, _ABSENT)
            value = absent if raw is _ABSENT else reader(raw)
            if value is not None:
                values[position] = value
    return values


def _lookup(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path``, ``_ABSENT`` when a key is missing, ``None`` through a non-object."""
    value: Any = body
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key, _ABSENT)
    return value


#: The fields a node's ``/health`` carries at its top: an answer with none of them (another
#: service's health check, ``{"status": "ok"}``) is not a ledger node, whatever its status
#: code says.
_HEALTH_KEYS = tuple(dict.fromkeys(f.at[0] if f.at else f.name for f in HEALTH_FIELDS))


def read_health(
    body: Any, bounds: Bounds = DEFAULT_BOUNDS, shared: Shared | None = None
) -> HealthReading:
    """Interpret a ``/health`` answer; raises InvalidResponseError unless it is a JSON object
    holding at least one of its top-level fields (not null). Label values (and chain ids)
    over ``bounds.label_value_length`` are dropped and counted. With ``shared``, the ids and
    peer sets equal to another node's this cycle are kept once (peer ids repeat across
    nodes)."""
    if not isinstance(body, dict):
        raise InvalidResponseError(f"/health answered a JSON {type(body).__name__}, not an object")
    if list(map(body.get, _HEALTH_KEYS)).count(None) == len(_HEALTH_KEYS):  # all null
        raise InvalidResponseError(
            "the node's URL answered /health with JSON that is not a ledger node's health "
            f"(none of {', '.join(_HEALTH_KEYS)}): check the node's url in the config"
        )
    network = body.get(_NETWORK)
    places = {TOP: body, NETWORK: network if isinstance(network, dict) else {}}
    chains = places[BLOCKCHAINS.at].get(BLOCKCHAINS.name)
    labels = LabelTexts(bounds.label_value_length)
    chain_ids, unreadable = _chain_ids(chains, labels)
    node_version = _label(places, NODE_VERSION, labels)
    node_id = _label(places, NODE_ID, labels)
    peer_id = _label(places, PEER_ID, labels)
    node_key = node_id or read_text(places[NODE_ID.at].get(NODE_ID.name)) or None
    peers = tuple(sorted(_text_set(places[NETWORK_PEERS.at].get(NETWORK_PEERS.name)) or ()))
    if shared is not None:
        node_version, node_id, peer_id, node_key = (
            None if text is None else shared(text)
            for text in (node_version, node_id, peer_id, node_key)
        )
        peers = shared.tuple_of(peers) if peers else peers
    return HealthReading(
        node_version=node_version,
        node_id=node_id,
        peer_id=peer_id,
        peer_count=_read_peer_count(places[PEER_COUNT.at].get(PEER_COUNT.name)),
        blockchain_count=_read_chain_count(chains),
        blockchain_ids=chain_ids,
        network_peers=peers,
        unreadable_chain_ids=unreadable,
        dropped=count_dropped(label_values=labels.dropped),
        node_key=node_key,
    )


def _label(places: dict[tuple[str, ...], Any], field: Field, labels: LabelTexts) -> str | None:
    """The label text of ``field``: from the first of its places that holds one."""
    text = labels(places[field.at].get(field.name))
    for place in field.also_at:
        if text:
            return text
        text = labels(places[place].get(field.name))
    return text


#: Where the fields of /health sit: the answer itself or its ``network`` object.
_NETWORK = NETWORK[0]
assert {p for f in HEALTH_FIELDS for p in (f.at, *f.also_at)} <= {TOP, NETWORK}
_read_peer_count, _read_chain_count = _gauge_reader(PEER_COUNT), _gauge_reader(BLOCKCHAINS)


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
    sessions = read_sessions(body.get(_SESSIONS_KEY), bounds.vote_sessions_per_chain, labels)
    _note_sessions(values, sessions)
    features, extra_features = _features(body.get(_FEATURES_KEY), bounds.features_per_chain, labels)
    council = _text_set(body.get(_COUNCIL_KEY))
    leaders, extra_leaders = leader_keys(council or (), bounds.leaders_per_chain, labels)
    view = _consensus_view(body, shared)
    followed = sessions.followed
    if shared is not None:
        features, leaders, followed = shared(features), shared(leaders), shared(followed)
        council = None if council is None else shared(council)
        view = None if view is None else shared(view)
    settings = body.get(_SETTINGS_KEY)
    consensus_type = labels(settings.get(_TYPE_KEY) if isinstance(settings, dict) else None)
    key_type = labels(body.get(_KEY_TYPE_KEY))
    return ChainReading(
        values=pack_gauges(values),
        consensus_type=consensus_type,
        key_type=key_type,
        features=features,
        council=council,
        dropped=count_dropped(extra_features, 0, labels.dropped, sessions.dropped, extra_leaders),
        sessions=followed,
        leaders=leaders,
        consensus_view=view,
    )


#: The keys read_chain reads apart from the gauges, where the table says they sit.
_SESSIONS_KEY, _FEATURES_KEY = VOTE_SESSIONS.name, FEATURES.name
_COUNCIL_KEY, _KEY_TYPE_KEY = COUNCIL_MEMBERS.name, KEY_TYPE.name
_SETTINGS_KEY, _TYPE_KEY = CONSENSUS_SETTINGS.name, CONSENSUS_TYPE.name
assert all(f.at == TOP for f in (VOTE_SESSIONS, FEATURES, COUNCIL_MEMBERS, KEY_TYPE))
assert CONSENSUS_TYPE.at == (CONSENSUS_SETTINGS.name,)


def _consensus_view(body: dict[str, Any], shared: Shared | None) -> bytes | None:
    """The configuration's digest; made once a cycle for the nodes that send the same one."""
    key = view_key(body) if shared is not None else None
    if shared is None or key is None:
        return consensus_view(body)
    digest = shared.made(key, lambda: consensus_view(body) or b"")
    return digest or None


def _note_sessions(values: list[float], sessions: SessionsRead) -> None:
    """The gauges of every session (the highest round, ``consensusRequired``), when any."""
    if sessions is NO_SESSIONS:
        return
    for position, value in zip(_SESSION_POSITIONS, sessions.highest, strict=False):
        if value is not None:
            values[position] = value


_SESSION_POSITIONS = tuple(GAUGE_POSITION[field] for field in SESSION_GAUGES)


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

#: Where each of FAST_FIELDS is in ChainStatusFields.values.
_AT = {field: at for at, field in enumerate(FAST_FIELDS)}
#: The plain gauges of the status's own scalar fields (not its shared parts), by how they
#: are read: counts and flags inline, the others by their parser; as (position, at, ...).
_OWN = [g for g in CHAIN_GAUGES if g.at == TOP and not g.shared]
_COUNT_FIELDS = tuple((GAUGE_POSITION[g], _AT[g]) for g in _OWN if g.read is read_count)
_FLAG_FIELDS = tuple((GAUGE_POSITION[g], _AT[g]) for g in _OWN if g.read is read_bool)
_OTHER_FIELDS = tuple(
    (GAUGE_POSITION[g], _AT[g], _gauge_reader(g), g.absent)
    for g in _OWN
    if g.read is not read_count and g.read is not read_bool
)
assert all(g.absent is None for g in _OWN if g.read in (read_count, read_bool))
#: The shared parts, where they are among the decoded fields.
_COUNCIL, _SESSIONS = _AT[COUNCIL_MEMBERS], _AT[VOTE_SESSIONS]
_SETTINGS, _FEATURES, _KEY_TYPE = _AT[CONSENSUS_SETTINGS], _AT[FEATURES], _AT[KEY_TYPE]
#: The gauges of the shared parts: the council's length, the sessions' count (absent: its
#: ``absent``), the consensus settings' (as _PLACED reads them).
_COUNCIL_GAUGE = GAUGE_POSITION[COUNCIL_MEMBERS]
_SESSIONS_GAUGE, _NO_SESSIONS_COUNT = GAUGE_POSITION[VOTE_SESSIONS], VOTE_SESSIONS.absent
_SETTINGS_GAUGES = _PLACED[CONSENSUS]
assert {g.at for g in CHAIN_GAUGES} <= {TOP, CONSENSUS, SESSION}, "a place the fast path reads"
assert {g for g in CHAIN_GAUGES if g.at == TOP and g.shared} == {COUNCIL_MEMBERS, VOTE_SESSIONS}
#: The largest int a float holds without overflowing (read_count reads a larger one as None).
_MAX_FLOAT_INT = int(sys.float_info.max)

#: (the council's length, the set, its leader keys, leaders dropped, label values dropped)
_Council = tuple[float | None, frozenset[str] | None, tuple[str, ...], int, int]
#: (the sessions read, the count gauge, label values dropped)
_Sessions = tuple[SessionsRead, float | None, int]
#: (the consensus gauges as (position, value), consensusType, label values dropped)
_Settings = tuple[tuple[tuple[int, float], ...], str | None, int]
#: (the feature flags, flags dropped, label values dropped)
_Features = tuple[tuple[tuple[str, float], ...], int, int]
_NO_COUNCIL: _Council = (None, None, (), 0, 0)
_NO_SETTINGS: _Settings = ((), None, 0)
_NO_FEATURES: _Features = ((), 0, 0)


def _read_fields(fields: msgspec.Struct, shared: Shared | None, bounds: Bounds) -> ChainReading:
    """read_chain of a decoded chain status: the same reading, its configuration (council,
    settings, features, keyType) and its vote sessions each read once a cycle for all the
    nodes that send the same text, so only the node's own scalar gauges are read each time."""
    raw = astuple(fields)
    values = _field_values(raw)
    parts = _Parts(shared, bounds)
    config = parts.configuration(raw)
    sessions, session_count, session_drops = parts.sessions(raw[_SESSIONS])
    for position, value in config.gauges:
        values[position] = value
    if session_count is not None:
        values[_SESSIONS_GAUGE] = session_count
    _note_sessions(values, sessions)
    dropped = config.dropped
    if session_drops or sessions.dropped:
        labels = config.label_drops + session_drops
        dropped = count_dropped(
            config.extra_features, 0, labels, sessions.dropped, config.extra_leaders
        )
    return ChainReading(
        values=pack_gauges(values),
        consensus_type=config.info[0],
        key_type=config.info[1],
        features=config.flags,
        council=config.council,
        dropped=dropped,
        sessions=sessions.followed,
        leaders=config.leaders,
        consensus_view=config.view,
    )


_Raw = tuple[Any, ...]


def _field_values(raw: _Raw) -> list[float]:
    """The scalar gauges of a decoded chain status, NaN where absent or unreadable, as
    their parsers read them; a count that is a plain int and a flag that is a boolean (what
    nodes send) are read inline, since this runs for every chain of every node each cycle."""
    values = [_NAN] * _GAUGE_COUNT
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
    for gauge, at, reader, absent in _OTHER_FIELDS:
        value = raw[at]
        read = absent if value is UNSET else reader(value)
        if read is not None:
            values[gauge] = read
    return values


class _Configuration(NamedTuple):
    """What a decoded chain status's council, consensus settings, features and keyType read
    as: the same on every node of a chain (unlike its vote sessions, whose stage and leader
    move), so read once a cycle for all the nodes that send the same texts."""

    gauges: tuple[tuple[int, float], ...]  # the council's length, the settings' gauges
    info: tuple[str | None, str | None]  # consensusType and keyType, as label values
    flags: tuple[tuple[str, float], ...]  # the feature flags
    council: frozenset[str] | None
    leaders: tuple[str, ...]
    view: bytes | None
    extra_features: int  # flags over the bound
    extra_leaders: int  # leaders over the bound
    label_drops: int  # label values over the bound
    dropped: Dropped  # the three above, as an answer without vote sessions drops them


class _Parts:
    """The parts of one decoded chain status, each read from its JSON text as read_chain
    reads it from the whole answer, and with ``shared`` once a cycle for every node that
    sends the same text."""

    __slots__ = ("_bounds", "_shared")

    def __init__(self, shared: Shared | None, bounds: Bounds) -> None:
        self._shared, self._bounds = shared, bounds

    def configuration(self, raw: _Raw) -> _Configuration:
        """The council, settings, features and keyType, with ``shared`` one lookup for them
        all (their texts joined: no JSON text holds a NUL, and a present part is never
        empty), read each time if together they are over MAX_PART_BYTES."""
        if self._shared is None:
            return self._read_configuration(raw)
        texts = (raw[_COUNCIL], raw[_SETTINGS], raw[_FEATURES])
        key = b"\0".join(
            (*(b"" if text is UNSET else text for text in texts), repr(raw[_KEY_TYPE]).encode())
        )
        kind = ("configuration", self._bounds)
        return self._shared.part(kind, key, lambda: self._read_configuration(raw))

    def _read_configuration(self, raw: _Raw) -> _Configuration:
        """The council, leaders, consensus settings, features and keyType of a decoded chain
        status, read once a cycle for every node that sends the same (the parts' shared key)."""
        length, council, leaders, extra_leaders, council_drops = self.council(raw[_COUNCIL])
        settings, consensus_type, settings_drops = self.settings(raw[_SETTINGS])
        features, extra_features, feature_drops = self.features(raw[_FEATURES])
        counted = ((_COUNCIL_GAUGE, length),) if length is not None else ()
        labels = LabelTexts(self._bounds.label_value_length)
        key_type = None if raw[_KEY_TYPE] is UNSET else labels(raw[_KEY_TYPE])
        label_drops = council_drops + settings_drops + feature_drops + labels.dropped
        return _Configuration(
            gauges=(*counted, *settings),
            info=(consensus_type, key_type),
            flags=features,
            council=council,
            leaders=leaders,
            view=self.view(raw),
            extra_features=extra_features,
            extra_leaders=extra_leaders,
            label_drops=label_drops,
            dropped=count_dropped(extra_features, 0, label_drops, 0, extra_leaders),
        )

    def _read(self, kind: Field, text: bytes, read: Callable[[Any], Kept]) -> Kept:
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
        return self._read(COUNCIL_MEMBERS, bytes(raw), self._council)

    def _council(self, value: Any) -> _Council:
        council = _text_set(value)
        labels = LabelTexts(self._bounds.label_value_length)
        leaders, extra = leader_keys(council or (), self._bounds.leaders_per_chain, labels)
        council = None if council is None else self._keep(council)
        length = _gauge_reader(COUNCIL_MEMBERS)(value)
        return length, council, self._keep(leaders), extra, labels.dropped

    def sessions(self, raw: Raw | Any) -> _Sessions:
        """``voteSessions``: the sessions followed and their count (its ``absent`` value)."""
        if raw is UNSET:
            return NO_SESSIONS, _NO_SESSIONS_COUNT, 0
        return self._read(VOTE_SESSIONS, bytes(raw), self._sessions)

    def _sessions(self, value: Any) -> _Sessions:
        labels = LabelTexts(self._bounds.label_value_length)
        read = read_sessions(value, self._bounds.vote_sessions_per_chain, labels)
        if read is not NO_SESSIONS:
            read = SessionsRead(self._keep(read.followed), read.dropped, read.highest)
        return read, _gauge_reader(VOTE_SESSIONS)(value), labels.dropped

    def settings(self, raw: Raw | Any) -> _Settings:
        """``consensus``: its gauges and ``consensusType``."""
        if raw is UNSET:
            return _NO_SETTINGS
        return self._read(CONSENSUS_SETTINGS, bytes(raw), self._settings)

    def _settings(self, value: Any) -> _Settings:
        if not isinstance(value, dict):
            return _NO_SETTINGS
        gauges = []
        for position, key, reader, absent in _SETTINGS_GAUGES:
            raw = value.get(key, _ABSENT)
            read = absent if raw is _ABSENT else reader(raw)
            if read is not None:
                gauges.append((position, read))
        labels = LabelTexts(self._bounds.label_value_length)
        consensus_type = labels(value.get(CONSENSUS_TYPE.name))
        return tuple(gauges), consensus_type, labels.dropped

    def features(self, raw: Raw | Any) -> _Features:
        """``features``: the flags by name, and how many more than the bound."""
        if raw is UNSET:
            return _NO_FEATURES
        return self._read(FEATURES, bytes(raw), self._features)

    def _features(self, value: Any) -> _Features:
        labels = LabelTexts(self._bounds.label_value_length)
        features, extra = _features(value, self._bounds.features_per_chain, labels)
        return self._keep(features), extra, labels.dropped

    def view(self, raw: _Raw) -> bytes | None:
        """The digest of the consensus settings, keyType and features (_consensus_view)."""
        if raw[_SETTINGS] is UNSET:
            return None  # consensus_view of a status without settings
        settings = bytes(raw[_SETTINGS])
        features = None if raw[_FEATURES] is UNSET else bytes(raw[_FEATURES])
        key_type = raw[_KEY_TYPE]
        key = b"\0".join((settings, repr(key_type).encode(), features or b""))

        def read() -> bytes | None:
            body = {CONSENSUS_SETTINGS.name: decode_json(settings)}
            if key_type is not UNSET:
                body[KEY_TYPE.name] = key_type
            if features is not None:
                body[FEATURES.name] = decode_json(features)
            view = _consensus_view(body, self._shared)
            return None if view is None else self._keep(view)

        return read() if self._shared is None else self._shared.part("view", key, read)
