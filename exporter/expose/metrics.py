"""The metric catalogue: every family the exporter emits, its type, HELP text, unit and the
rule for missing or odd values, and the order families are written in.

One table is the source of truth for the writer (:mod:`exporter.expose.render`, for
/metrics and /probe alike), the metric reference ``docs/metrics.md`` (``make docs``,
``tools/render_docs.py``) and the tests that check dashboards and alert rules only use
metrics that exist (a rename breaks them loudly).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from exporter.bounds import SETTINGS, DropKind
from exporter.model import fields as f
from exporter.model.fields import CHAIN as _CHAIN
from exporter.model.fields import FLAG, Field
from exporter.model.fields import NODE as _NODE
from exporter.model.snapshot import CycleStage
from exporter.model.transport import ENDPOINT_KINDS, PHASES, TLS_INFO_LABELS
from exporter.poll.results import Reason
from exporter.values import (
    read_bool,
    read_count,
    read_duration,
    read_list_length,
    read_number,
    read_object_size,
    read_timestamp,
)


class Kind(Enum):
    """Prometheus metric type of a family (``_info`` metrics are gauges valued 1)."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: its sample name as exposed (counters end in ``_total``), type,
    labels and HELP text; its unit when the name's suffix does not say it (see
    :func:`unit_of`), and what is special about missing or odd values beyond its group's
    rule (:data:`GROUPS`)."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    unit: str = ""
    missing: str = ""
    source: str = ""  # where a node's answer gives its value, as docs/metrics.md says it


def _g(name: str, help_text: str, *labels: str, unit: str = "", missing: str = "") -> MetricSpec:
    return MetricSpec(name, Kind.GAUGE, help_text, labels, unit, missing)


def unit_of(spec: MetricSpec) -> str:
    """The family's unit: its own, else what the Prometheus naming conventions say."""
    if spec.unit:
        return spec.unit
    for suffix, unit in _SUFFIX_UNITS:
        if spec.name.endswith(suffix):
            return unit
    raise ValueError(f"{spec.name}: give it a unit= (its name's suffix does not say one)")


_SUFFIX_UNITS = (
    ("_timestamp_seconds", "Unix time, seconds"),
    ("_seconds", "seconds"),
    ("_info", "none: always 1, the labels carry the values"),
    ("_total", "count since the exporter started"),
)

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
CYCLE_TIMEOUT = _g(
    "ledger_exporter_cycle_timeout_seconds",
    "Deadline of one polling cycle (the config's scrape_timeout): a cycle that takes nearly "
    "this long is about to cut slow nodes off.",
)
CONFIG_RELOAD_OK = _g(
    "ledger_exporter_config_last_reload_successful",
    "1 when the last configuration load succeeded, 0 when it failed and the old one is kept.",
    unit=FLAG,
)
CONFIG_RELOAD_SUCCESS_TIME = _g(
    "ledger_exporter_config_last_reload_success_timestamp_seconds",
    "Unix time of the last successful configuration load: at start, then at each successful "
    "reload.",
)
STATE_FILE_WRITE_FAILURES = MetricSpec(
    "ledger_exporter_state_file_write_failures_total",
    Kind.COUNTER,
    "Writes of the state file (--state.file) that failed (the file, its temporary copy or "
    "its lock could not be written): the memory between cycles will not survive a restart.",
    (),
)
CYCLE_FAILURES = MetricSpec(
    "ledger_exporter_cycle_failures_total",
    Kind.COUNTER,
    "Failures the exporter caught inside its polling cycles, by the stage the failure was "
    "confined to: node (that node reads as down that cycle), network (the network series are "
    "left out), watch (the watched objects are left out), maintenance (that entry does not "
    "apply), cycle (the whole cycle: the last snapshot stays and grows older). Each distinct "
    "failure is logged once while it recurs.",
    ("stage",),
    missing="A series at 0 for every stage from the first cycle.",
)
LAST_SUCCESSFUL_CYCLE = _g(
    "ledger_exporter_last_successful_cycle_timestamp_seconds",
    "Unix time when the polling cycle whose results /metrics shows ended; it stops moving "
    "while cycles fail as a whole.",
)
STALE_AFTER = _g(
    "ledger_exporter_stale_after_seconds",
    "Age (since ledger_exporter_last_successful_cycle_timestamp_seconds) past which the "
    "results shown are stale: 3 scrape_interval plus one scrape_timeout. Past it /-/ready "
    "answers 503 and every node, chain, network and watch series is dropped until a cycle "
    "ends again.",
)
DROPPED_VALUES = MetricSpec(
    "ledger_exporter_dropped_values_total",
    Kind.COUNTER,
    "Values a node sent beyond a configured bound and so not exported, by kind: "
    + ", ".join(f"{kind.value} ({SETTINGS[kind]})" for kind in DropKind)
    + ".",
    ("node", "kind"),
)

NODE_UP = _g(
    "ledger_node_up", "1 when /health was read and parsed in the last cycle.", *_NODE, unit=FLAG
)
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
# What the transport of the node's requests showed (docs/metrics.md, "Transport"): libcurl's
# figures for the requests the poll makes anyway, on /metrics only.
NODE_TLS_CERT_EXPIRY = _g(
    "ledger_node_tls_cert_expiry_timestamp_seconds",
    "Earliest notAfter among the certificates the node presented at the last TLS handshake "
    "(as blackbox_exporter's probe_ssl_earliest_cert_expiry).",
    *_NODE,
    missing=(
        "Only for a node polled over https that is up; read at each new connection (a "
        "kept-alive connection shows its handshake's values until it is replaced)."
    ),
)
NODE_TLS_INFO = MetricSpec(
    "ledger_node_tls_info",
    Kind.GAUGE,
    "The last TLS handshake with the node: negotiated version and cipher, and the node "
    "certificate's issuer and subject common names and SHA-256 fingerprint; always 1.",
    (*_NODE, *TLS_INFO_LABELS),
    missing=(
        "As ledger_node_tls_cert_expiry_timestamp_seconds; no series while a label value "
        "from the certificate is longer than max_label_value_length (counted as a dropped "
        "label_value)."
    ),
)
NODE_REQUEST_DURATION = _g(
    "ledger_node_request_duration_seconds",
    "Seconds the last answered request of each kind spent in each phase, from libcurl's "
    "timers: resolve, connect, tls (0 on a kept-alive connection), processing (request sent "
    "to first byte) and transfer (the rest of the answer).",
    *_NODE,
    "endpoint",
    "phase",
    missing=(
        "Only while the node is up, for each kind of request answered at least once (any "
        "HTTP status); no phase tls over plain http."
    ),
)
CHAIN_UP = _g(
    "ledger_blockchain_up",
    "1 when the chain's status was read and parsed in the last cycle.",
    *_CHAIN,
    unit=FLAG,
)
CHAIN_BLOCKS_BEHIND = _g(
    "ledger_blockchain_blocks_behind",
    "The chain's head minus this node's height, 0 at or above it: the head is the highest "
    "height a strict majority of the up, not-syncing nodes reading the chain reached (of "
    "all its readers when every one is syncing), so one node reporting heights far too high "
    "puts no other node behind.",
    *_CHAIN,
    unit="blocks",
)
CHAIN_BEHIND_SECONDS = _g(
    "ledger_blockchain_behind_seconds",
    "How long ago the chain's head (as for ledger_blockchain_blocks_behind: the height a "
    "strict majority of the up, not-syncing readers reached) first reached one above this "
    "node's height, on the exporter's clock: 0 at or above the head.",
    *_CHAIN,
    missing=(
        "Only as precise as `scrape_interval` (a height is seen first by the cycle after it "
        "came); a height reached before the exporter first saw the chain counts from then "
        "(kept across restarts with `--state.file`), so the lag is then at least the value. "
        "No sample in a /probe answer (no history)."
    ),
)
CHAIN_HEIGHT_CHANGED = _g(
    "ledger_blockchain_height_last_change_timestamp_seconds",
    "Exporter's clock when it first saw the current height.",
    *_CHAIN,
)


#: How each parser of exporter.values reads a value, in the words of docs/metrics.md.
READ_AS = {
    read_count: "a count",
    read_bool: "a flag",
    read_timestamp: "a timestamp",
    read_duration: "a duration",
    read_number: "a number",
    read_list_length: "the length of a list",
    read_object_size: "the number of members of an object",
}


def _source(field: Field, answer: str) -> str:
    """Where a plain gauge's value comes from: the field, its answer and how it is read."""
    if not field.is_gauge:
        return ""
    if f.EACH in field.at:
        where = ".".join(part for part in field.at if part != f.EACH)
        return f"the highest `{field.name}` among the members of `{where}` of {answer}"
    return f"`{field.path}` of {answer}, read as {READ_AS[field.read]}"  # type: ignore[index]


def _stated(table: tuple[Field, ...], answer: str) -> dict[str, MetricSpec]:
    """The families a field table states (on the rows with ``help``), by name, in order."""
    return {
        field.family: MetricSpec(
            field.family,
            Kind(field.kind),
            field.help,
            field.labels,
            field.unit,
            field.missing,
            _source(field, answer),
        )
        for field in table
        if field.help
    }


_FAMILIES = {
    **_stated(f.HEALTH_FIELDS, "`GET /health`"),
    **_stated(f.CHAIN_STATUS_FIELDS, "`GET /blockchains/{id}`"),
}


def family_of(field: Field) -> MetricSpec:
    """The family a field's row feeds (KeyError: one that feeds none)."""
    return _FAMILIES[field.family]


NODE_INFO = family_of(f.NODE_VERSION)
CHAIN_HEIGHT = family_of(f.BLOCK_HEIGHT)
CHAIN_CONSENSUS = family_of(f.CONSENSUS_TYPE)
CHAIN_FEATURE = family_of(f.FEATURES)

# Consensus health followed across cycles (docs/metrics.md, "Consensus health"): the daemon's own
# memory of each node's chains, which a probe has not.
CHAIN_VOTE_SESSION_AGE = _g(
    "ledger_blockchain_vote_session_age_seconds",
    "Age of the oldest vote session the node reports now: now minus when the exporter first "
    "saw its sessionId on this node and chain.",
    *_CHAIN,
    missing=(
        "No sample while no vote session is open; a session open before the exporter started "
        "counts from its first sighting."
    ),
)
CHAIN_VOTE_ROUND_CHANGES = MetricSpec(
    "ledger_blockchain_vote_round_changes_total",
    Kind.COUNTER,
    "Rounds the node's vote sessions moved through: each session's rise in round between two "
    "consecutive successful reads.",
    _CHAIN,
    missing=(
        "0 from the chain's first read; a round that falls, or a session seen once, adds nothing."
    ),
)
CHAIN_LEADER_FAILED_ROUNDS = MetricSpec(
    "ledger_blockchain_leader_failed_rounds_total",
    Kind.COUNTER,
    "Rounds that ended without agreement, counted against the leader the session had in the "
    "earlier read; 0 for every current council member.",
    ("node", "blockchain", "leader"),
    missing=(
        "A series at 0 for every key of the node's current councilMembers, and one for any "
        "other leader from its first failure."
    ),
)
CHAIN_COUNCIL_CHANGES = MetricSpec(
    "ledger_blockchain_council_changes_total",
    Kind.COUNTER,
    "Times the node's councilMembers set (order ignored) differed from its previous "
    "successful read.",
    _CHAIN,
    missing="0 from the chain's first read.",
)
CHAIN_REORGS = MetricSpec(
    "ledger_blockchain_reorgs_total",
    Kind.COUNTER,
    "Times the node answered, for a height whose block hash the exporter had read from it "
    "before, another hash (its history was rewritten: a reorganisation).",
    _CHAIN,
    missing=(
        "0 from the node's first checkpoint block read of the chain (none with "
        "`network_checks.checkpoint_depth: 0`); the hashes of its last checkpoints are kept "
        'and one of them read again every 4 cycles (docs/network-and-consensus.md, "Seconds '
        'behind and reorganisations").'
    ),
)

_NETWORK_CHAIN = ("blockchain",)
NETWORK_CHECKPOINT_HEIGHT = _g(
    "ledger_network_blockchain_checkpoint_height",
    "Height at which the polled nodes' block hashes are compared: the highest height a "
    "strict majority of the up, not-syncing nodes have reached, minus "
    "network_checks.checkpoint_depth.",
    *_NETWORK_CHAIN,
    unit="blocks",
    missing="No sample when no node's block at the checkpoint was read.",
)
NETWORK_CHECKPOINT_HASHES = _g(
    "ledger_network_blockchain_checkpoint_hashes",
    "Distinct block hashes at the checkpoint among the nodes whose block was read "
    "(1: agreement, more: a fork).",
    *_NETWORK_CHAIN,
    unit="distinct hashes",
)
CHAIN_CHECKPOINT_AGREES = _g(
    "ledger_blockchain_checkpoint_agrees",
    "1 when the node's block at the checkpoint has the hash a strict majority of the nodes "
    "read report, else 0.",
    *_CHAIN,
    unit=FLAG,
    missing=(
        "0 for every node when no hash has a strict majority; no sample for a node below the "
        "checkpoint or whose block could not be read."
    ),
)
NETWORK_COUNCIL_VIEWS = _g(
    "ledger_network_blockchain_council_views",
    "Distinct councilMembers sets (order ignored) among the up nodes that read the chain.",
    *_NETWORK_CHAIN,
    unit="distinct sets",
)
CHAIN_COUNCIL_AGREES = _g(
    "ledger_blockchain_council_agrees",
    "1 when the node's council set is the one a strict majority of the nodes report, else 0.",
    *_CHAIN,
    unit=FLAG,
)
NETWORK_CONSENSUS_VIEWS = _g(
    "ledger_network_blockchain_consensus_views",
    "Distinct consensus configurations (the consensus object, keyType and features, compared "
    "by value) among the up nodes that read the chain.",
    *_NETWORK_CHAIN,
    unit="distinct configurations",
)
CHAIN_CONSENSUS_AGREES = _g(
    "ledger_blockchain_consensus_agrees",
    "1 when the node's consensus configuration is the one a strict majority of the nodes "
    "report, else 0.",
    *_CHAIN,
    unit=FLAG,
)
NETWORK_COUNCIL_MEMBERS_POLLED = _g(
    "ledger_network_blockchain_council_members_polled",
    "Members of the majority's council set that are the nodeId of a polled node (down ones "
    "included).",
    *_NETWORK_CHAIN,
    unit="members",
    missing=(
        "No sample when no council set has a strict majority; a member whose node is down still"
        " counts (its nodeId is remembered from its last successful read)."
    ),
)
NETWORK_COUNCIL_MEMBERS_UP = _g(
    "ledger_network_blockchain_council_members_up",
    "Of the council members polled, those whose node is up and read the chain this cycle.",
    *_NETWORK_CHAIN,
    unit="members",
    missing="No sample when no council set has a strict majority.",
)
NETWORK_PEER_PARTITIONS = _g(
    "ledger_network_peer_partitions",
    "Connected components of the up polled nodes linked by networkPeers (1: all connected).",
    unit="groups of nodes",
)
NETWORK_PEER_LARGEST_PARTITION = _g(
    "ledger_network_peer_largest_partition_nodes",
    "Up polled nodes in the largest group linked by networkPeers: beside "
    "ledger_network_peer_partitions, whether a partition cuts off many nodes or only one "
    "(one node that lists no peers, or changes its peerId, is a group of one).",
    unit="nodes",
    missing="No sample while no polled node is up.",
)
NODE_UNEXPECTED_BLOCKCHAINS = _g(
    "ledger_node_unexpected_blockchains",
    "Chains this node's /health lists that the operator did not expect: outside its "
    "expect.blockchains where that is set (such a chain is counted, never read), or listed "
    "by no other up polled node when two or more up nodes listed chains this cycle. A chain "
    "one node alone lists is that node's finding, never a chain-wide one.",
    *_NODE,
    unit="blockchains",
    missing="Only while the node is up (0 when every chain it lists is expected).",
)
NODE_POLLED_PEERS = _g(
    "ledger_node_polled_peers",
    "Other up polled nodes this node is linked to by networkPeers (either side listing).",
    *_NODE,
    unit="nodes",
)

# Planned work from the config's `maintenance` list (docs/configuration.md): Alertmanager's
# inhibit rules silence a node's or a chain's alerts while its series is there.
NODE_MAINTENANCE = _g(
    "ledger_node_maintenance",
    "1 while a maintenance entry of the config applies to the node (its until, a wall-clock "
    "time, not yet passed); reason is the entry's.",
    "node",
    "reason",
    unit=FLAG,
    missing="No series while the node has no entry that applies.",
)
CHAIN_MAINTENANCE = _g(
    "ledger_blockchain_maintenance",
    "1 while a chain-wide maintenance entry of the config applies to the blockchain (on "
    "every node); reason is the entry's.",
    "blockchain",
    "reason",
    unit=FLAG,
    missing="No series while the chain has no entry that applies.",
)

# Only /probe answers these (blackbox_exporter's probe_success and probe_duration_seconds).
PROBE_SUCCESS = _g(
    "ledger_probe_success", "1 when the probed target's /health was read.", unit=FLAG
)
PROBE_DURATION = _g("ledger_probe_duration_seconds", "Wall time of the probe.")

# Watch lists (docs/metrics.md, "Watch lists"): contracts and wallets named in the config. An
# answer's families are its rows' (exporter.model.fields); its ``_up`` is the exporter's own.
_FAMILIES.update(
    _stated(f.CONTRACT_FIELDS, "`GET /blockchains/{id}/contracts/{address}`")
    | _stated(f.CONTRACT_STATE_FIELDS, "`GET /blockchains/{id}/contracts/{address}/state`")
    | _stated(f.WALLET_FIELDS, "`GET /wallets/{address}?blockchainId={id}`")
)
CONTRACT_UP = _g(
    "ledger_contract_up",
    "1 when the watched contract's metadata was read in the last cycle, else 0.",
    *f.CONTRACT,
    unit=FLAG,
    missing="0 when the metadata could not be read (a 404 is 0, with reason http_status).",
)
CONTRACT_STATE_UP = _g(
    "ledger_contract_state_up",
    "1 when the watched contract's state was read in the last cycle, else 0.",
    *f.CONTRACT,
    unit=FLAG,
)
WALLET_UP = _g(
    "ledger_wallet_up",
    "1 when the watched wallet was read in the last cycle, else 0.",
    *f.WALLET,
    unit=FLAG,
)
#: What the watch series' own labels mean, from the rows that read them.
_WATCH_LABELS = {
    f.CONTRACT[-1]: "the watch entry's `name` (default: its address)",
    f.WALLET[-1]: "the watch entry's `name` (default: its address)",
    f.CONTRACT_STATUS.label: "a contract status: "
    + ", ".join(f"`{status}`" for status in f.CONTRACT_STATUSES)
    + ", or another one the node reports",
    f.CONTRACT_ADDRESS.label: f"the contract's or wallet's `{f.CONTRACT_ADDRESS.name}` "
    "as the node reports it",
    f.VM_TYPE.label: f"the contract's `{f.VM_TYPE.name}`",
    f.CODE_HASH.label: f"the contract's `{f.CODE_HASH.name}`",
    f.CONTRACT_STATE.labels[-1]: "a configured `state_keys` entry (a dotted path into the "
    f"contract's `{f.CONTRACT_STATE.name}`)",
    f.AUTH_GROUPS.labels[-2]: f"a key of the wallet's `{f.AUTH_GROUPS.name}`",
    f.AUTH_GROUPS.labels[-1]: "a flag of an auth group: "
    + ", ".join(f"`{flag}`" for flag in f.PERMISSIONS),
    f.PUBLIC_KEY.label: f"the wallet's `{f.PUBLIC_KEY.name}`",
}

# --- The order families are written in: defined here once, for /metrics and /probe. ---

#: The exporter's own state.
EXPORTER_FAMILIES = (
    BUILD_INFO,
    CYCLE_DURATION,
    CYCLE_TIMEOUT,
    CONFIG_RELOAD_OK,
    CONFIG_RELOAD_SUCCESS_TIME,
    STATE_FILE_WRITE_FAILURES,
    CYCLE_FAILURES,
    LAST_SUCCESSFUL_CYCLE,
    STALE_AFTER,
    DROPPED_VALUES,
)
#: Each node's poll and ``GET /health`` (labels ``node`` and the node's static labels).
NODE_FAMILIES = (
    NODE_UP,
    NODE_SCRAPE_DURATION,
    NODE_SCRAPE_ERRORS,
    NODE_LAST_SUCCESS,
    NODE_RETRY_AFTER,
    *(family_of(field) for field in f.HEALTH_FIELDS if field.help),
)
#: What libcurl saw of each node's requests (labels ``node`` and its static labels).
TRANSPORT_FAMILIES = (NODE_TLS_CERT_EXPIRY, NODE_TLS_INFO, NODE_REQUEST_DURATION)
#: Each polled chain's ``GET /blockchains/{id}`` (labels ``node``, ``blockchain``).
CHAIN_FAMILIES = (
    CHAIN_UP,
    CHAIN_HEIGHT,
    CHAIN_BLOCKS_BEHIND,
    CHAIN_BEHIND_SECONDS,
    CHAIN_HEIGHT_CHANGED,
    *(family_of(row) for row in f.CHAIN_STATUS_FIELDS if row.help and row is not f.BLOCK_HEIGHT),
)
#: Each chain followed across cycles (the history's; labels ``node``, ``blockchain``).
CONSENSUS_FAMILIES = (
    CHAIN_VOTE_SESSION_AGE,
    CHAIN_VOTE_ROUND_CHANGES,
    CHAIN_LEADER_FAILED_ROUNDS,
    CHAIN_COUNCIL_CHANGES,
    CHAIN_REORGS,
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
    NETWORK_PEER_LARGEST_PARTITION,
    NODE_POLLED_PEERS,
    NODE_UNEXPECTED_BLOCKCHAINS,
)
#: The watched contracts and wallets (labels ``node``, ``blockchain``, ``contract``/``wallet``).
WATCH_FAMILIES = (
    CONTRACT_UP,
    *(family_of(row) for row in f.CONTRACT_FIELDS if row.help),
    CONTRACT_STATE_UP,
    *(family_of(row) for row in f.CONTRACT_STATE_FIELDS if row.help),
    WALLET_UP,
    *(family_of(row) for row in f.WALLET_FIELDS if row.help),
)
#: Planned work from the config (labels ``node`` or ``blockchain``, and ``reason``).
MAINTENANCE_FAMILIES = (NODE_MAINTENANCE, CHAIN_MAINTENANCE)
#: Families that only /probe answers, never /metrics.
PROBE_ONLY = (PROBE_SUCCESS, PROBE_DURATION)

#: What /metrics writes, in this order.
DAEMON_FAMILIES = (
    EXPORTER_FAMILIES
    + NODE_FAMILIES
    + TRANSPORT_FAMILIES
    + CHAIN_FAMILIES
    + CONSENSUS_FAMILIES
    + NETWORK_FAMILIES
    + WATCH_FAMILIES
    + MAINTENANCE_FAMILIES
)
#: What /probe writes, in this order: the daemon's families of one node and its chains (no
#: history, no other nodes: none of CONSENSUS_FAMILIES or NETWORK_FAMILIES), then the
#: probe's own.
PROBE_FAMILIES = NODE_FAMILIES + CHAIN_FAMILIES + PROBE_ONLY
#: Every family the exporter emits, each once.
ALL: tuple[MetricSpec, ...] = DAEMON_FAMILIES + PROBE_ONLY


@dataclass(frozen=True)
class Group:
    """Families documented together: where their values come from and the rule for missing
    or odd values they share (a family's own ``missing`` adds to it)."""

    title: str
    about: str
    missing: str
    families: tuple[MetricSpec, ...]


#: How values are read, for every family read from a node's answers (``docs/metrics.md``
#: numbers them; the groups below refer to them by number).
RULES = (
    "A value the node did not send, sent as `null`, or sent in a type that cannot be read gives "
    "**no sample** for that series in that cycle: never a 0 that was not reported, never the "
    'previous cycle\'s value. Numbers sent as JSON strings of a number (`"42"`) are read as '
    "numbers; booleans only from JSON `true`/`false`; counts and heights below zero are not "
    "exported.",
    "When a node or a chain cannot be read, its data series disappear in the same cycle; "
    "`ledger_node_up` / `ledger_blockchain_up` say 0 and an error is counted in "
    "`ledger_node_scrape_errors_total`. A watched contract or wallet that cannot be read "
    "likewise: its `_up` says 0 and its other series are gone.",
    "Durations are read in Go's duration syntax (`1h2m3.5s`, `90s`, `500ms`; units ns, us, µs, "
    "ms, s, m, h; fractions allowed) and exported in seconds.",
    "Timestamps are read as ISO 8601 with `Z` or an offset, with or without fractions, and "
    "exported as Unix seconds.",
    "An answer larger than `max_response_bytes` is refused unread past the cap: an error with "
    "reason `too_large`.",
    "What a node sends beyond a configured bound (the `max_*` keys) is not exported and is "
    "counted in `ledger_exporter_dropped_values_total{kind}`: chains, feature flags, auth "
    "groups, vote sessions and leaders beyond their caps, and label values longer than "
    "`max_label_value_length` (the series that would carry one is not written).",
    "Counters start from 0 with the exporter (Prometheus's `rate()` and `increase()` handle "
    "that) and vanish with their node or chain, as rule 2 says.",
)

#: What every label means (the same name means the same thing in every family).
LABELS = {
    "node": "the node's `name` in the configuration (never its URL, which may hold "
    "credentials); on /probe the `node` parameter, else the target's host:port. A node's "
    "configured static `labels` are added to every series of that node.",
    "blockchain": "the blockchain id exactly as the node reports it",
    "endpoint": "the kind of request (for the errors: the one that failed): "
    + ", ".join(f"`{kind}`" for kind in ENDPOINT_KINDS),
    "reason": "why it failed: "
    + ", ".join(f"`{reason.value}`" for reason in Reason)
    + "; on the maintenance series, the text of the config entry's reason",
    "phase": "a request's phase: " + ", ".join(f"`{phase}`" for phase in PHASES),
    "cipher": "the negotiated TLS cipher, as OpenSSL names it",
    "issuer_cn": "the common name of the node certificate's issuer, as OpenSSL prints it "
    "(empty without one)",
    "subject_cn": "the common name of the node certificate's subject, as OpenSSL prints it "
    "(empty without one)",
    "serial_fingerprint": "the SHA-256 fingerprint of the node's certificate (hex of its DER): "
    "it changes with every reissue",
    "stage": "the step of the polling cycle a failure was confined to: "
    + ", ".join(f"`{stage.value}`" for stage in CycleStage),
    "kind": "which bound dropped values: " + ", ".join(f"`{kind.value}`" for kind in DropKind),
    "version": "the exporter's version (`ledger_exporter_build_info`); the negotiated TLS "
    "version, such as `TLSv1.3` (`ledger_node_tls_info`)",
    "revision": "the git revision it was built from (empty when unknown)",
    "branch": "the git branch it was built from (empty when unknown)",
    "python_version": "the Python version it runs on",
    "node_version": "`nodeVersion` of `/health`",
    "node_id": "`nodeId` of `/health`",
    "peer_id": "`network.peerId` of `/health`",
    "consensus_type": "`consensus.consensusType` of the chain status",
    "key_type": "`keyType` of the chain status or of the wallet",
    "feature": "a key of the chain status's `features`",
    "leader": "a vote session's `currentLeader` (a council member's key)",
    **_WATCH_LABELS,
}

_FROM_ANSWERS = "Rules 1 to 7."
#: The families in the order ``docs/metrics.md`` documents them, each once.
GROUPS = (
    Group(
        "Exporter",
        "The exporter's own state, on /metrics.",
        "Always present, `ledger_exporter_cycle_duration_seconds`, "
        "`ledger_exporter_cycle_timeout_seconds`, "
        "`ledger_exporter_last_successful_cycle_timestamp_seconds` and "
        "`ledger_exporter_stale_after_seconds` once a cycle has ended; "
        "`ledger_exporter_state_file_write_failures_total` only with `--state.file` (at 0 "
        "until a write fails); "
        "`ledger_exporter_dropped_values_total` has a series for every configured node and "
        "every kind, at 0 until a value is dropped.",
        EXPORTER_FAMILIES,
    ),
    Group(
        "Nodes",
        "Each polled node's poll and its `GET /health` (labels `node` and the node's static "
        "labels), on /metrics and /probe.",
        _FROM_ANSWERS + " `ledger_node_up` and `ledger_node_scrape_duration_seconds` are "
        "there for every configured node whatever it answers; `ledger_node_scrape_errors_total` "
        "has a series at 0 for the endpoints `health` and `blockchain` and every reason from "
        "the start, and one for another endpoint from its first error.",
        NODE_FAMILIES,
    ),
    Group(
        "Transport",
        "What libcurl measured of the requests the poll makes anyway (labels `node` and the "
        "node's static labels), on /metrics only: the last TLS handshake of a node polled over "
        "https (read when a connection is made: kept-alive connections keep the last "
        "handshake's values) and the phases of the last answered request of each kind.",
        "No series while the node is down (`ledger_node_up` 0). A certificate that fails "
        "verification makes the node down with reason `certificate` (a failed handshake: "
        "`tls`), never an insecure retry.",
        TRANSPORT_FAMILIES,
    ),
    Group(
        "Blockchains",
        "Each chain a node lists, from `GET /blockchains/{id}` (labels `node`, `blockchain`), "
        "on /metrics and /probe.",
        _FROM_ANSWERS,
        CHAIN_FAMILIES,
    ),
    Group(
        "Consensus health",
        "Each node's chains followed from cycle to cycle on the exporter's clock (vote sessions "
        "by `sessionId`, council sets order ignored, checkpoint blocks by height): the daemon's "
        "memory, on /metrics only.",
        _FROM_ANSWERS,
        CONSENSUS_FAMILIES,
    ),
    Group(
        "The network as a whole",
        "Computed across the nodes this exporter polls (not the whole network), from what the "
        "up nodes report in the same cycle; a strict majority decides. On /metrics only.",
        _FROM_ANSWERS + " A node that is down or does not read the chain is left out of the "
        "comparison.",
        NETWORK_FAMILIES,
    ),
    Group(
        "Watch lists",
        "Contracts (`GET /blockchains/{id}/contracts/{address}` and `.../state`) and wallets "
        "(`GET /wallets/{address}?blockchainId={id}`) named in the configuration's `watch`, "
        "read from every node that lists their chain (or the entry's `nodes`). On /metrics only.",
        _FROM_ANSWERS,
        WATCH_FAMILIES,
    ),
    Group(
        "Maintenance",
        "Planned work stated in the configuration's `maintenance` list: a series while an "
        "entry's `until` (a wall-clock time, compared at the end of each cycle) has not "
        "passed. On /metrics only; the exporter keeps polling the nodes in maintenance.",
        "No series without an entry that applies; an entry stops applying by itself within a "
        "`scrape_interval` of its `until`.",
        MAINTENANCE_FAMILIES,
    ),
    Group(
        "Probe",
        "Only /probe answers these (as blackbox_exporter's `probe_success` and "
        "`probe_duration_seconds`), after the probed node's node and chain families.",
        "Always present in a /probe answer.",
        PROBE_ONLY,
    ),
)

#: Families added by client_python's standard process, platform and GC collectors (their
#: sample names), with their units (their HELP and type are client_python's).
RUNTIME_UNITS = {
    "process_cpu_seconds_total": "seconds of CPU time",
    "process_open_fds": "file descriptors",
    "process_max_fds": "file descriptors",
    "process_virtual_memory_bytes": "bytes",
    "process_resident_memory_bytes": "bytes",
    "process_start_time_seconds": "Unix time, seconds",
    "python_info": "none: always 1, the labels carry the values",
    "python_gc_objects_collected_total": "objects",
    "python_gc_objects_uncollectable_total": "objects",
    "python_gc_collections_total": "collections",
}
RUNTIME_SAMPLE_NAMES = frozenset(RUNTIME_UNITS)
