"""Every bound on what one node's answer may cost the exporter or add to its exposition.

Two sorts, both stated in docs/network-and-consensus.md ("What the exporter does with odd answers"):

- fixed caps on the length of the strings the exporter parses or keeps, checked before any
  parsing, so a hostile value costs microseconds whatever the config says;
- the defaults of the configurable cardinality bounds (the ``max_*`` config keys), whose
  excess is dropped and counted in ``ledger_exporter_dropped_values_total{kind}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar

#: A Go duration. The longest Go itself prints is ``2562047h47m16.854775807s`` (24
#: characters); 64 leaves room for leading zeros and longer fractions, and refuses the
#: ``"0s0s0s..."`` bomb before parsing.
MAX_DURATION_CHARS = 64
#: An ISO 8601 timestamp. ``2024-05-01T12:00:00.123456789+05:30`` is 35 characters; 64 keeps
#: fractions of up to 38 digits.
MAX_TIMESTAMP_CHARS = 64
#: A number sent as a JSON string (``"42"``). A uint256 token amount in decimal is 78
#: digits; 256 keeps it with room for a fraction and an exponent.
MAX_NUMBER_CHARS = 256
#: Any other string the exporter keeps from a node, a label or not (ids, keys, versions,
#: hashes, names). The longest legitimate one is a public key: a post-quantum one (ML-DSA-44,
#: 1312 bytes) is 2624 hex characters. ``max_label_value_length`` may not exceed it.
MAX_TEXT_CHARS = 4096

#: A vote session id the exporter remembers (it is no label): a hash or a UUID is under 100
#: characters; a longer id is not followed (and counted as a dropped vote session).
MAX_SESSION_ID_CHARS = 256

#: Rises of a chain's head remembered per chain (the clock of ``behind_seconds``:
#: exporter.poll.head_clock), at 16 bytes each: the last 64 cycles at the poll's
#: resolution, older ones coarser; also what a state file may hold per chain.
HEAD_RISES_PER_CHAIN = 128


class DropKind(Enum):
    """What a node sent beyond a configured bound; the value is the metric's ``kind`` label."""

    BLOCKCHAIN = "blockchain"  # chains listed beyond max_blockchains_per_node
    FEATURE = "feature"  # feature flags beyond max_features_per_chain
    AUTH_GROUP = "auth_group"  # auth groups beyond max_auth_groups_per_wallet
    LABEL_VALUE = "label_value"  # label values longer than max_label_value_length
    VOTE_SESSION = "vote_session"  # vote sessions beyond max_vote_sessions_per_chain
    LEADER = "leader"  # leader keys beyond max_leaders_per_chain


@dataclass(frozen=True)
class BoundKey:
    """The config key of one configurable bound: its name, what it bounds (the docs' text,
    Markdown), its ceiling if any, and the kind its excess is counted under."""

    #: The key of a :class:`Bounds` field's metadata that holds its BoundKey.
    METADATA: ClassVar[str] = "bound_key"
    key: str
    kind: DropKind
    doc: str
    most: int | None = None


def _bound(default: int, key: str, kind: DropKind, doc: str, most: int | None = None) -> Any:
    """A :class:`Bounds` field: its default, and its config key (declared here, once)."""
    return field(default=default, metadata={BoundKey.METADATA: BoundKey(key, kind, doc, most)})


@dataclass(frozen=True)
class Bounds:
    """The configurable bounds the readers apply to one node's answers: each field is one
    bound, its default and its config key (the loader and the docs read them from here)."""

    features_per_chain: int = _bound(
        100,
        "max_features_per_chain",
        DropKind.FEATURE,
        "feature flags exported per node and chain: past it only the first ones by name get a"
        " `ledger_blockchain_feature_enabled` series; the rest are counted in"
        ' `ledger_exporter_dropped_values_total{kind="feature"}`. Real chains have tens',
    )
    auth_groups_per_wallet: int = _bound(
        32,
        "max_auth_groups_per_wallet",
        DropKind.AUTH_GROUP,
        "auth groups exported per watched wallet and node (four `ledger_wallet_permission`"
        " series each): past it only the first ones by name; the rest are counted with"
        ' `kind="auth_group"`',
    )
    label_value_length: int = _bound(
        1024,
        "max_label_value_length",
        DropKind.LABEL_VALUE,
        "characters of a label value taken from a node's answer (version, ids, chain ids,"
        " feature and group names, types, keys, hashes; a PEM RSA-4096 public key, about 800"
        " characters, fits): a longer value is not exported (never cut short into a wrong one;"
        " a longer chain id means that chain is not polled) and is counted with"
        ' `kind="label_value"`,'
        " see [odd answers](network-and-consensus.md#what-the-exporter-does-with-odd-answers)",
        most=MAX_TEXT_CHARS,
    )
    vote_sessions_per_chain: int = _bound(
        16,
        "max_vote_sessions_per_chain",
        DropKind.VOTE_SESSION,
        "vote sessions followed across cycles per node and chain (their age, rounds and leaders;"
        " [Consensus health](network-and-consensus.md#consensus-health)): past it only the first"
        " ones by session id (a chain has one open session, rarely a few); the rest are counted"
        ' with `kind="vote_session"`',
    )
    leaders_per_chain: int = _bound(
        128,
        "max_leaders_per_chain",
        DropKind.LEADER,
        "`ledger_blockchain_leader_failed_rounds_total` series per node and chain: the council's"
        " keys (the first ones by name), then other leaders from their first failed round;"
        " council keys past it, and failures of a leader with no series left, are counted with"
        ' `kind="leader"`. Councils have tens of members',
    )


#: The bounds of a config that sets none of them.
DEFAULT_BOUNDS = Bounds()
#: Each bound's default, by the name the readers use (read from :class:`Bounds`, not restated).
DEFAULT_MAX_FEATURES_PER_CHAIN = DEFAULT_BOUNDS.features_per_chain
DEFAULT_MAX_AUTH_GROUPS_PER_WALLET = DEFAULT_BOUNDS.auth_groups_per_wallet
DEFAULT_MAX_LABEL_VALUE_LENGTH = DEFAULT_BOUNDS.label_value_length
DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN = DEFAULT_BOUNDS.vote_sessions_per_chain
DEFAULT_MAX_LEADERS_PER_CHAIN = DEFAULT_BOUNDS.leaders_per_chain
#: The config key that sets each bound, for the log lines that name it.
SETTINGS = {DropKind.BLOCKCHAIN: "max_blockchains_per_node"} | {
    bound.kind: bound.key for bound in (item.metadata[BoundKey.METADATA] for item in fields(Bounds))
}


@dataclass(frozen=True, slots=True)
class Dropped:
    """How many values of one answer were not kept because they exceed a bound."""

    features: int = 0
    auth_groups: int = 0
    label_values: int = 0
    vote_sessions: int = 0
    leaders: int = 0

    def __bool__(self) -> bool:
        counts = (self.features, self.auth_groups, self.label_values, self.vote_sessions)
        return any(counts) or bool(self.leaders)


#: The one Dropped of every answer within its bounds (nearly all of them).
NOTHING_DROPPED = Dropped()


def count_dropped(
    features: int = 0,
    auth_groups: int = 0,
    label_values: int = 0,
    vote_sessions: int = 0,
    leaders: int = 0,
) -> Dropped:
    """What an answer left out: NOTHING_DROPPED itself when nothing was, so a reader never
    makes an empty Dropped and the history can tell the usual case by identity."""
    if features or auth_groups or label_values or vote_sessions or leaders:
        return Dropped(features, auth_groups, label_values, vote_sessions, leaders)
    return NOTHING_DROPPED
