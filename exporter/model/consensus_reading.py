"""What a chain's status says about consensus beyond its plain gauges: the open vote sessions
(followed across cycles by the history), the council keys that get a leader series, and the
consensus configuration compared across nodes by value (docs/metrics.md, "Consensus health").

Everything is kept compact and bounded: a session is its id, round and leader; the
configuration is a 16-byte digest, whatever the node sends.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from exporter.bounds import MAX_SESSION_ID_CHARS
from exporter.model.fields import (
    CHAIN_STATUS_FIELDS,
    CONSENSUS_SETTINGS,
    CURRENT_LEADER,
    FEATURES,
    KEY_TYPE,
    SESSION,
    VOTE_ROUND,
    VoteSession,
)
from exporter.values import LabelTexts, is_text, read_duration, read_number


@dataclass(frozen=True, slots=True)
class SessionsRead:
    """The sessions of one answer: the ones followed (at most the bound, the first by id),
    how many more were left out, and the highest value of each of SESSION_GAUGES among all
    (None where no session has one)."""

    followed: tuple[VoteSession, ...] = ()
    dropped: int = 0
    highest: tuple[float | None, ...] = ()


NO_SESSIONS = SessionsRead()
#: The gauges read from every vote session: each the highest among the open sessions.
SESSION_GAUGES = tuple(field for field in CHAIN_STATUS_FIELDS if field.at == SESSION)
SESSION_GAUGES = tuple(field for field in SESSION_GAUGES if field.is_gauge)


def read_sessions(value: Any, limit: int, labels: LabelTexts) -> SessionsRead:
    """The ``voteSessions`` object: every entry is an open session keyed by its id. A value
    that is not an object holds no readable session; an id longer than MAX_SESSION_ID_CHARS
    (or one UTF-8 cannot hold) is not followed and counts as dropped."""
    if not isinstance(value, dict) or not value:
        return NO_SESSIONS
    found: list[list[float]] = [[] for _ in SESSION_GAUGES]
    sessions: list[VoteSession] = []
    unfollowed = 0
    for session_id, session in value.items():
        details = session if isinstance(session, dict) else {}
        read = [reader(details.get(name)) for name, reader in _SESSION_READS]
        for values, one in zip(found, read, strict=True):
            if one is not None:
                values.append(one)
        if not 0 < len(session_id) <= MAX_SESSION_ID_CHARS or not is_text(session_id):
            unfollowed += bool(session_id)
            continue
        round_ = read[_ROUND_AT]
        leader = labels(details.get(_LEADER)) or None
        sessions.append(VoteSession(session_id, round_, leader))
    kept = sessions if len(sessions) <= limit else heapq.nsmallest(limit, sessions, _by_id)
    return SessionsRead(
        tuple(sorted(kept, key=_by_id)),
        unfollowed + len(sessions) - len(kept),
        tuple(max(values, default=None) for values in found),
    )


_Gauge = Callable[[object], float | None]
_SESSION_READS = tuple((field.name, cast(_Gauge, field.read)) for field in SESSION_GAUGES)
_ROUND_AT, _LEADER = SESSION_GAUGES.index(VOTE_ROUND), CURRENT_LEADER.name
_CONSENSUS, _FEATURES, _KEY_TYPE = CONSENSUS_SETTINGS.name, FEATURES.name, KEY_TYPE.name


def _by_id(session: VoteSession) -> str:
    return session.session_id


def leader_keys(
    council: Iterable[str], limit: int, labels: LabelTexts
) -> tuple[tuple[str, ...], int]:
    """The council keys that get a ``leader`` series: those that fit a label, the first
    ``limit`` by name; and how many more there were (over-long keys are counted by
    ``labels``)."""
    fitting = [key for key in council if labels.fits(key)]
    kept = sorted(fitting) if len(fitting) <= limit else heapq.nsmallest(limit, fitting)
    return tuple(kept), len(fitting) - len(kept)


#: A configuration with more settings or flags than this is digested for each node rather
#: than kept as a key for the cycle: the key holds the values as sent, and a node's answer must
#: not pin more than its reading keeps.
MAX_VIEW_KEY_ITEMS = 128
#: ... and so with a name or text longer than this (real settings are a few characters).
MAX_VIEW_KEY_TEXT = 256


def view_key(body: dict[str, Any]) -> Hashable | None:
    """What :func:`consensus_view` depends on, as sent, with each value's type (``true``,
    ``1`` and ``1.0`` are equal in Python, not in the digest): equal keys have equal views, so
    a cycle computes the view of a configuration once for all its nodes. None when a value is
    not hashable (a nested object) or the configuration is large: computed each time."""
    consensus, features = body.get(_CONSENSUS), body.get(_FEATURES)
    if not isinstance(consensus, dict):
        return None
    settings = _typed_items(consensus)
    flags = _typed_items(features) if isinstance(features, dict) else _typed(features)
    key_type = _typed(body.get(_KEY_TYPE))
    if settings is None or flags is None or key_type is None:
        return None
    raw = (settings, key_type, flags)
    try:
        hash(raw)
    except TypeError:
        return None
    return raw


def _typed_items(values: dict[str, Any]) -> tuple[object, ...] | None:
    """``values`` as (name, type, value) triples; None when too many or too long to keep."""
    if len(values) > MAX_VIEW_KEY_ITEMS:
        return None
    found = []
    for name, value in values.items():
        typed = _typed(value)
        if typed is None or len(name) > MAX_VIEW_KEY_TEXT:
            return None
        found.append((name, typed))
    return tuple(found)


def _typed(value: object) -> tuple[type, object] | None:
    """``value`` with its type, or None for a text too long to keep as a key."""
    if isinstance(value, str) and len(value) > MAX_VIEW_KEY_TEXT:
        return None
    return (type(value), value)


def consensus_view(body: dict[str, Any]) -> bytes | None:
    """A digest of the chain's consensus configuration (the ``consensus`` object, ``keyType``
    and ``features``) compared by value: key order ignored, durations in seconds, numbers as
    numbers (``"42"`` is 42, ``"1m"`` is 60). None when ``consensus`` is not an object: such a
    node has no view to compare."""
    consensus = body.get(_CONSENSUS)
    if not isinstance(consensus, dict):
        return None
    features = body.get(_FEATURES)
    canonical = {
        _CONSENSUS: {key: _by_value(value) for key, value in consensus.items()},
        _KEY_TYPE: _by_value(body.get(_KEY_TYPE)),
        _FEATURES: (
            {key: _by_value(value) for key, value in features.items()}
            if isinstance(features, dict)
            else _by_value(features)
        ),
    }
    try:
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):  # nesting deeper than the encoder goes
        return None
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _by_value(value: Any) -> Any:
    """A setting as compared: a number (or a string holding one) as a float, a Go duration
    string as seconds, anything else as sent (nested objects compared with sorted keys)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        number = read_number(value)
        # NaN, infinities, huge integers as sent; -0 becomes 0 (JSON writes -0.0 apart)
        return repr(value) if number is None else number + 0.0
    if isinstance(value, str) and value[:1] in _NUMERIC_START:
        duration = value[-1:].isalpha()  # "90s", "1m30s", "500ms"; "1e3" ends in a digit
        number = read_duration(value) if duration else read_number(value)
        return value if number is None else number + 0.0
    return value


#: How a number or a Go duration may start; other strings are compared as sent, unparsed.
_NUMERIC_START = frozenset("0123456789+-.")
