"""The metric catalogue: every family the exporter emits, its type and HELP text, and the
order families are written in.

One table is the source of truth for the writer (:mod:`exporter.expose.render`, for
/metrics and /probe alike), the README and the tests that check dashboards and alert rules
only use metrics that exist (a rename breaks them loudly).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """Prometheus metric type of a family (``_info`` metrics are gauges valued 1)."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its sample name as exposed (counters end in ``_total``), type,
    labels and HELP text."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()


def _g(name: str, help_text: str, *labels: str) -> MetricSpec:
    return MetricSpec(name, Kind.GAUGE, help_text, labels)


_NODE = ("node",)
_CHAIN = ("node", "blockchain")

BUILD_INFO = MetricSpec(
    "ledger_exporter_build_info",
    Kind.GAUGE,
    "Version, revision and branch of the exporter's build, and the Python version it runs on "
    "(revision and branch empty when the build did not record them); always 1.",
    ("version", "revision", "branch", "python_version"),
)
CYCLE_DURATION = _g(
    "ledger_exporter_cycle_duration_seconds", "Wall time of the last full polling cycle."
)
CONFIG_RELOAD_OK = _g(
    "ledger_exporter_config_last_reload_successful",
    "1 when the last configuration load succeeded, 0 when it failed and the old one is kept.",
)
CONFIG_RELOAD_SUCCESS_TIME = _g(
    "ledger_exporter_config_last_reload_success_timestamp_seconds",
    "Unix time of the last successful configuration load: at start, then at each successful "
    "reload.",
)
DROPPED_VALUES = MetricSpec(
    "ledger_exporter_dropped_values_total",
    Kind.COUNTER,
    "Values a node sent beyond a configured bound and so not exported, by kind: blockchain "
    "(max_blockchains_per_node), feature (max_features_per_chain), auth_group "
    "(max_auth_groups_per_wallet), label_value (max_label_value_length), vote_session "
    "(max_vote_sessions_per_chain), leader (max_leaders_per_chain).",
    ("node", "kind"),
)

NODE_UP = _g("ledger_node_up", "1 when /health was read and parsed in the last cycle.", *_NODE)
NODE_SCRAPE_DURATION = _g(
    "ledger_node_scrape_duration_seconds", "Wall time of the node's last poll.", *_NODE
)
NODE_SCRAPE_ERRORS = MetricSpec(
    "ledger_node_scrape_errors_total",
    Kind.COUNTER,
    "Failed requests to the node, by API endpoint and reason.",
    ("node", "endpoint", "reason"),
)
NODE_LAST_SUCCESS = _g(
    "ledger_node_last_success_timestamp_seconds",
    "Unix time when /health was last read successfully.",
    *_NODE,
)
NODE_RETRY_AFTER = MetricSpec(
    "ledger_node_retry_after_total",
    Kind.COUNTER,
    "429 and 503 answers with Retry-After the exporter honoured: the node is not asked again "
    "before that time (at most 5 minutes), and reads as down meanwhile.",
    _NODE,
)
NODE_INFO = MetricSpec(
    "ledger_node_info",
    Kind.GAUGE,
    "Identity of the node as reported by /health; always 1.",
    ("node", "node_version", "node_id", "peer_id"),
)
NODE_PEERS = _g("ledger_node_peers", "Peers connected to the node (network.peerCount).", *_NODE)
NODE_BLOCKCHAINS = _g(
    "ledger_node_blockchains", "Number of blockchains the node's /health lists.", *_NODE
)

CHAIN_UP = _g(
    "ledger_blockchain_up",
    "1 when the chain's status was read and parsed in the last cycle.",
    *_CHAIN,
)
CHAIN_HEIGHT = _g("ledger_blockchain_height", "Current block height (blockHeight).", *_CHAIN)
CHAIN_BLOCKS_BEHIND = _g(
    "ledger_blockchain_blocks_behind",
    "Highest height of this chain among the polled nodes minus this node's height.",
    *_CHAIN,
)
CHAIN_HEIGHT_CHANGED = _g(
    "ledger_blockchain_height_last_change_timestamp_seconds",
    "Exporter's clock when it first saw the current height.",
    *_CHAIN,
)
CHAIN_LAST_MESSAGE = _g(
    "ledger_blockchain_last_message_timestamp_seconds",
    "Time of the last processed message or block (lastMessageTime).",
    *_CHAIN,
)
CHAIN_PENDING_MESSAGES = _g(
    "ledger_blockchain_pending_messages", "Queued messages (pendingMessagesCount).", *_CHAIN
)
CHAIN_DELAYED_MESSAGES = _g(
    "ledger_blockchain_delayed_messages", "Queued delayed messages (delayedMessagesCount).", *_CHAIN
)
CHAIN_PENDING_TXS = _g(
    "ledger_blockchain_pending_transactions", "Queued transactions (pendingTransactions).", *_CHAIN
)
CHAIN_SYNCING = _g("ledger_blockchain_syncing", "1 while the node syncs the chain.", *_CHAIN)
CHAIN_IN_COUNCIL = _g(
    "ledger_blockchain_in_council", "1 when the node is a council member.", *_CHAIN
)
CHAIN_VOTING = _g("ledger_blockchain_voting", "Voting-state flag isVoting (0/1).", *_CHAIN)
CHAIN_TIME_TO_VOTE = _g(
    "ledger_blockchain_time_to_vote", "Voting-state flag isTimeToVote (0/1).", *_CHAIN
)
CHAIN_COUNCIL_MEMBERS = _g(
    "ledger_blockchain_council_members", "Number of council members (councilMembers).", *_CHAIN
)
CHAIN_PEERS = _g(
    "ledger_blockchain_peers", "Number of peers on this chain (blockchainPeers).", *_CHAIN
)
CHAIN_VOTE_SESSIONS = _g(
    "ledger_blockchain_vote_sessions", "Number of active vote sessions (voteSessions).", *_CHAIN
)
CHAIN_VOTE_ROUND = _g(
    "ledger_blockchain_vote_round", "Highest round among the active vote sessions.", *_CHAIN
)
CHAIN_VOTE_CONSENSUS_REQUIRED = _g(
    "ledger_blockchain_vote_consensus_required",
    "Highest consensusRequired (votes required) among the active vote sessions.",
    *_CHAIN,
)
CHAIN_CONSENSUS = MetricSpec(
    "ledger_blockchain_consensus_info",
    Kind.GAUGE,
    "Consensus type and key type of the chain; always 1.",
    ("node", "blockchain", "consensus_type", "key_type"),
)
CHAIN_MIN_MEMBERS = _g(
    "ledger_blockchain_consensus_min_members",
    "Minimum council members for consensus (consensus.minMembers).",
    *_CHAIN,
)
CHAIN_CONSENSUS_TIMEOUT = _g(
    "ledger_blockchain_consensus_timeout_seconds",
    "Consensus timeout (consensus.consensusTimeout).",
    *_CHAIN,
)
CHAIN_TX_MAX_TIME_TRIGGER = _g(
    "ledger_blockchain_tx_max_time_trigger_seconds",
    "Transaction max time trigger (consensus.txMaxTimeTrigger).",
    *_CHAIN,
)
CHAIN_TX_KARMA_THRESHOLD = _g(
    "ledger_blockchain_tx_karma_threshold",
    "Transaction karma threshold (consensus.txKarmaThreshold).",
    *_CHAIN,
)
CHAIN_TX_MINT_THRESHOLD = _g(
    "ledger_blockchain_tx_mint_threshold",
    "Transaction mint threshold (consensus.txMintThreshold).",
    *_CHAIN,
)
CHAIN_FEATURE = _g(
    "ledger_blockchain_feature_enabled",
    "1 when the feature flag is enabled on the chain, 0 when disabled.",
    "node",
    "blockchain",
    "feature",
)

# Consensus health followed across cycles (metrics.md, "Consensus health"): the daemon's own
# memory of each node's chains, which a probe has not.
CHAIN_VOTE_SESSION_AGE = _g(
    "ledger_blockchain_vote_session_age_seconds",
    "Age of the oldest vote session the node reports now: now minus when the exporter first "
    "saw its sessionId on this node and chain.",
    *_CHAIN,
)
CHAIN_VOTE_ROUND_CHANGES = MetricSpec(
    "ledger_blockchain_vote_round_changes_total",
    Kind.COUNTER,
    "Rounds the node's vote sessions moved through: each session's rise in round between two "
    "consecutive successful reads.",
    _CHAIN,
)
CHAIN_LEADER_FAILED_ROUNDS = MetricSpec(
    "ledger_blockchain_leader_failed_rounds_total",
    Kind.COUNTER,
    "Rounds that ended without agreement, counted against the leader the session had in the "
    "earlier read; 0 for every current council member.",
    ("node", "blockchain", "leader"),
)
CHAIN_COUNCIL_CHANGES = MetricSpec(
    "ledger_blockchain_council_changes_total",
    Kind.COUNTER,
    "Times the node's councilMembers set (order ignored) differed from its previous "
    "successful read.",
    _CHAIN,
)

_NETWORK_CHAIN = ("blockchain",)
NETWORK_CHECKPOINT_HEIGHT = _g(
    "ledger_network_blockchain_checkpoint_height",
    "Height at which the polled nodes' block hashes are compared: the highest height a "
    "strict majority of the up, not-syncing nodes have reached, minus "
    "network_checks.checkpoint_depth.",
    *_NETWORK_CHAIN,
)
NETWORK_CHECKPOINT_HASHES = _g(
    "ledger_network_blockchain_checkpoint_hashes",
    "Distinct block hashes at the checkpoint among the nodes whose block was read "
    "(1: agreement, more: a fork).",
    *_NETWORK_CHAIN,
)
CHAIN_CHECKPOINT_AGREES = _g(
    "ledger_blockchain_checkpoint_agrees",
    "1 when the node's block at the checkpoint has the hash a strict majority of the nodes "
    "read report, else 0.",
    *_CHAIN,
)
NETWORK_COUNCIL_VIEWS = _g(
    "ledger_network_blockchain_council_views",
    "Distinct councilMembers sets (order ignored) among the up nodes that read the chain.",
    *_NETWORK_CHAIN,
)
CHAIN_COUNCIL_AGREES = _g(
    "ledger_blockchain_council_agrees",
    "1 when the node's council set is the one a strict majority of the nodes report, else 0.",
    *_CHAIN,
)
NETWORK_CONSENSUS_VIEWS = _g(
    "ledger_network_blockchain_consensus_views",
    "Distinct consensus configurations (the consensus object, keyType and features, compared "
    "by value) among the up nodes that read the chain.",
    *_NETWORK_CHAIN,
)
CHAIN_CONSENSUS_AGREES = _g(
    "ledger_blockchain_consensus_agrees",
    "1 when the node's consensus configuration is the one a strict majority of the nodes "
    "report, else 0.",
    *_CHAIN,
)
NETWORK_COUNCIL_MEMBERS_POLLED = _g(
    "ledger_network_blockchain_council_members_polled",
    "Members of the majority's council set that are the nodeId of a polled node (down ones "
    "included).",
    *_NETWORK_CHAIN,
)
NETWORK_COUNCIL_MEMBERS_UP = _g(
    "ledger_network_blockchain_council_members_up",
    "Of the council members polled, those whose node is up and read the chain this cycle.",
    *_NETWORK_CHAIN,
)
NETWORK_PEER_PARTITIONS = _g(
    "ledger_network_peer_partitions",
    "Connected components of the up polled nodes linked by networkPeers (1: all connected).",
)
NODE_POLLED_PEERS = _g(
    "ledger_node_polled_peers",
    "Other up polled nodes this node is linked to by networkPeers (either side listing).",
    *_NODE,
)

# Only /probe answers these (blackbox_exporter's probe_success and probe_duration_seconds).
PROBE_SUCCESS = _g("ledger_probe_success", "1 when the probed target's /health was read.")
PROBE_DURATION = _g("ledger_probe_duration_seconds", "Wall time of the probe.")

# Watch lists (metrics.md, "Watch lists"): contracts and wallets named in the config.
_CONTRACT = ("node", "blockchain", "contract")
_WALLET = ("node", "blockchain", "wallet")
CONTRACT_UP = _g(
    "ledger_contract_up",
    "1 when the watched contract's metadata was read in the last cycle, else 0.",
    *_CONTRACT,
)
CONTRACT_STATUS = _g(
    "ledger_contract_status",
    "State set of the contract's status: 1 for the reported one, 0 for each other of "
    "ACTIVE, PAUSED, UPGRADED.",
    *_CONTRACT,
    "status",
)
CONTRACT_VERSION = _g("ledger_contract_version", "Contract version (version).", *_CONTRACT)
CONTRACT_INFO = _g(
    "ledger_contract_info",
    "Address, VM type and code hash of the contract as the node reports them; always 1.",
    *_CONTRACT,
    "address",
    "vm_type",
    "code_hash",
)
CONTRACT_STATE_UP = _g(
    "ledger_contract_state_up",
    "1 when the watched contract's state was read in the last cycle, else 0.",
    *_CONTRACT,
)
CONTRACT_STATE_VERSION = _g(
    "ledger_contract_state_version", "Version of the contract's state (version).", *_CONTRACT
)
CONTRACT_STATE_VALUE = _g(
    "ledger_contract_state_value",
    "Value at a configured dotted path of the contract's state (numbers, numeric strings, "
    "booleans as 0/1).",
    *_CONTRACT,
    "key",
)
WALLET_UP = _g(
    "ledger_wallet_up", "1 when the watched wallet was read in the last cycle, else 0.", *_WALLET
)
WALLET_ENABLED = _g("ledger_wallet_enabled", "1 when the wallet is enabled (enabled).", *_WALLET)
WALLET_SATELLITES = _g(
    "ledger_wallet_satellite_wallets", "Number of satellite wallets (satelliteWallets).", *_WALLET
)
WALLET_PERMISSION = _g(
    "ledger_wallet_permission",
    "1 when the wallet's auth group grants the permission (authGroups), else 0.",
    *_WALLET,
    "group",
    "permission",
)
WALLET_INFO = _g(
    "ledger_wallet_info",
    "Address, key type and public key of the wallet as the node reports them; always 1.",
    *_WALLET,
    "address",
    "key_type",
    "public_key",
)

# --- The order families are written in: defined here once, for /metrics and /probe. ---

#: The exporter's own state.
EXPORTER_FAMILIES = (
    BUILD_INFO,
    CYCLE_DURATION,
    CONFIG_RELOAD_OK,
    CONFIG_RELOAD_SUCCESS_TIME,
    DROPPED_VALUES,
)
#: Each node's poll and ``GET /health`` (labels ``node`` and the node's static labels).
NODE_FAMILIES = (
    NODE_UP,
    NODE_SCRAPE_DURATION,
    NODE_SCRAPE_ERRORS,
    NODE_LAST_SUCCESS,
    NODE_RETRY_AFTER,
    NODE_INFO,
    NODE_PEERS,
    NODE_BLOCKCHAINS,
)
#: Each polled chain's ``GET /blockchains/{id}`` (labels ``node``, ``blockchain``).
CHAIN_FAMILIES = (
    CHAIN_UP,
    CHAIN_HEIGHT,
    CHAIN_BLOCKS_BEHIND,
    CHAIN_HEIGHT_CHANGED,
    CHAIN_LAST_MESSAGE,
    CHAIN_PENDING_MESSAGES,
    CHAIN_DELAYED_MESSAGES,
    CHAIN_PENDING_TXS,
    CHAIN_SYNCING,
    CHAIN_IN_COUNCIL,
    CHAIN_VOTING,
    CHAIN_TIME_TO_VOTE,
    CHAIN_COUNCIL_MEMBERS,
    CHAIN_PEERS,
    CHAIN_VOTE_SESSIONS,
    CHAIN_VOTE_ROUND,
    CHAIN_VOTE_CONSENSUS_REQUIRED,
    CHAIN_CONSENSUS,
    CHAIN_MIN_MEMBERS,
    CHAIN_CONSENSUS_TIMEOUT,
    CHAIN_TX_MAX_TIME_TRIGGER,
    CHAIN_TX_KARMA_THRESHOLD,
    CHAIN_TX_MINT_THRESHOLD,
    CHAIN_FEATURE,
)
#: Each chain followed across cycles (the history's; labels ``node``, ``blockchain``).
CONSENSUS_FAMILIES = (
    CHAIN_VOTE_SESSION_AGE,
    CHAIN_VOTE_ROUND_CHANGES,
    CHAIN_LEADER_FAILED_ROUNDS,
    CHAIN_COUNCIL_CHANGES,
)
#: The cross-node families, from the network view rather than per node or chain.
NETWORK_FAMILIES = (
    NETWORK_CHECKPOINT_HEIGHT,
    NETWORK_CHECKPOINT_HASHES,
    CHAIN_CHECKPOINT_AGREES,
    NETWORK_COUNCIL_VIEWS,
    CHAIN_COUNCIL_AGREES,
    NETWORK_CONSENSUS_VIEWS,
    CHAIN_CONSENSUS_AGREES,
    NETWORK_COUNCIL_MEMBERS_POLLED,
    NETWORK_COUNCIL_MEMBERS_UP,
    NETWORK_PEER_PARTITIONS,
    NODE_POLLED_PEERS,
)
#: The watched contracts and wallets (labels ``node``, ``blockchain``, ``contract``/``wallet``).
WATCH_FAMILIES = (
    CONTRACT_UP,
    CONTRACT_STATUS,
    CONTRACT_VERSION,
    CONTRACT_INFO,
    CONTRACT_STATE_UP,
    CONTRACT_STATE_VERSION,
    CONTRACT_STATE_VALUE,
    WALLET_UP,
    WALLET_ENABLED,
    WALLET_SATELLITES,
    WALLET_PERMISSION,
    WALLET_INFO,
)
#: Families that only /probe answers, never /metrics.
PROBE_ONLY = (PROBE_SUCCESS, PROBE_DURATION)

#: What /metrics writes, in this order.
DAEMON_FAMILIES = (
    EXPORTER_FAMILIES
    + NODE_FAMILIES
    + CHAIN_FAMILIES
    + CONSENSUS_FAMILIES
    + NETWORK_FAMILIES
    + WATCH_FAMILIES
)
#: What /probe writes, in this order: the daemon's families of one node and its chains (no
#: history, no other nodes: none of CONSENSUS_FAMILIES or NETWORK_FAMILIES), then the
#: probe's own.
PROBE_FAMILIES = NODE_FAMILIES + CHAIN_FAMILIES + PROBE_ONLY
#: Every family the exporter emits, each once.
ALL: tuple[MetricSpec, ...] = DAEMON_FAMILIES + PROBE_ONLY

#: Families added by client_python's standard process, platform and GC collectors.
RUNTIME_SAMPLE_NAMES = frozenset(
    {
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "python_info",
        "python_gc_objects_collected_total",
        "python_gc_objects_uncollectable_total",
        "python_gc_collections_total",
    }
)


def sample_names() -> frozenset[str]:
    """Every sample name the exporter can emit (its own families and the runtime ones)."""
    return frozenset(spec.name for spec in ALL) | RUNTIME_SAMPLE_NAMES
