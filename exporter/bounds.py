"""Every bound on what one node's answer may cost the exporter or add to its exposition.

Two sorts, both stated in docs/network-and-consensus.md ("What the exporter does with odd answers"):

- fixed caps on the length of the strings the exporter parses or keeps, checked before any
  parsing, so a hostile value costs microseconds whatever the config says;
- the defaults of the configurable cardinality bounds (the ``max_*`` config keys), whose
  excess is dropped and counted in ``ledger_exporter_dropped_values_total{kind}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

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

#: Feature flags exported per node and chain (the first ones by name). Real chains have tens.
DEFAULT_MAX_FEATURES_PER_CHAIN = 100
#: Auth groups exported per watched wallet and node (the first ones by name), four series each.
DEFAULT_MAX_AUTH_GROUPS_PER_WALLET = 32
#: Characters of a label value taken from a node's answer; a longer value is not exported.
#: A PEM RSA-4096 public key (about 800 characters) fits.
DEFAULT_MAX_LABEL_VALUE_LENGTH = 1024
#: Vote sessions followed across cycles per node and chain (the first ones by id): what the
#: exporter remembers of each open session. A chain has one open session, rarely a few.
DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN = 16
#: ``ledger_blockchain_leader_failed_rounds_total`` series per node and chain: the council's
#: keys (the first ones by name), then other leaders from their first failure. Councils have
#: tens of members.
DEFAULT_MAX_LEADERS_PER_CHAIN = 128
#: A vote session id the exporter remembers (it is no label): a hash or a UUID is under 100
#: characters; a longer id is not followed (and counted as a dropped vote session).
MAX_SESSION_ID_CHARS = 256


class DropKind(Enum):
    """What a node sent beyond a configured bound; the value is the metric's ``kind`` label."""

    BLOCKCHAIN = "blockchain"  # chains listed beyond max_blockchains_per_node
    FEATURE = "feature"  # feature flags beyond max_features_per_chain
    AUTH_GROUP = "auth_group"  # auth groups beyond max_auth_groups_per_wallet
    LABEL_VALUE = "label_value"  # label values longer than max_label_value_length
    VOTE_SESSION = "vote_session"  # vote sessions beyond max_vote_sessions_per_chain
    LEADER = "leader"  # leader keys beyond max_leaders_per_chain


#: The config key that sets each bound, for the log lines that name it.
SETTINGS = {
    DropKind.BLOCKCHAIN: "max_blockchains_per_node",
    DropKind.FEATURE: "max_features_per_chain",
    DropKind.AUTH_GROUP: "max_auth_groups_per_wallet",
    DropKind.LABEL_VALUE: "max_label_value_length",
    DropKind.VOTE_SESSION: "max_vote_sessions_per_chain",
    DropKind.LEADER: "max_leaders_per_chain",
}


@dataclass(frozen=True)
class Bounds:
    """The configurable bounds the readers apply to one node's answers."""

    features_per_chain: int = DEFAULT_MAX_FEATURES_PER_CHAIN
    auth_groups_per_wallet: int = DEFAULT_MAX_AUTH_GROUPS_PER_WALLET
    label_value_length: int = DEFAULT_MAX_LABEL_VALUE_LENGTH
    vote_sessions_per_chain: int = DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN
    leaders_per_chain: int = DEFAULT_MAX_LEADERS_PER_CHAIN


#: The bounds of a config that sets none of them.
DEFAULT_BOUNDS = Bounds()


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
