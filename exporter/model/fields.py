"""The node's fields, declared once: for each field of an answer the exporter reads, where it
sits, how it is read, and the metric family it feeds (name, type, HELP, unit, labels, the
rule for a missing value, the bound that caps it); and the typed readings that hold them.

Everything else is derived from these rows: the typed decoder of the fast path
(:mod:`exporter.model.answers`), the readers (:mod:`exporter.model.readings`), the gauge
positions of a chain reading, the metric catalogue (:mod:`exporter.expose.metrics`), the
render tables and ``docs/metrics.md``. A new gauge from a new field is one row here. How the
readings are kept compact is :mod:`exporter.model.storage`'s business, not theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from exporter.bounds import NOTHING_DROPPED, DropKind, Dropped
from exporter.model.storage import GaugeStore, GaugeTable
from exporter.values import (
    read_bool,
    read_count,
    read_duration,
    read_list_length,
    read_number,
    read_object_size,
    read_text,
    read_timestamp,
)

#: A parser of one JSON value (exporter.values): its float (a gauge) or text (a label
#: value), or None (no sample).
Reader = Callable[[object], float | str | None]

#: In ``Field.at``, "every member of the object": the field is read from each of them.
EACH = "*"
#: Where a field sits when it is a key of the answer itself.
TOP: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, slots=True)
class Field:
    """One field of a node's answer and what the exporter makes of it.

    The contract of a row (other tables use the same type: add only attributes with
    defaults, never rename one):

    - ``name``: the JSON name as the node sends it (camelCase), stated here only.
    - ``at``: the objects it sits in, outermost first: ``TOP`` (the answer itself),
      ``("consensus",)``, or ``("voteSessions", EACH)`` for a field of every member of an
      object. ``also_at``: other places it may sit, tried in order when ``at`` has none.
    - ``read``: its parser from :mod:`exporter.values` (count, bool, timestamp, duration,
      number, list length, object size, text); None when it is read by a reader of its own
      (a set, the sessions, the feature flags) or not read at all.
    - ``family``: the metric family it feeds ("" none of its own); ``kind`` its Prometheus
      type ("gauge" or "counter"). A row with a ``family``, a ``read`` and no ``label`` is a
      plain gauge: one float a reading (a field of ``EACH`` member: the highest among them).
    - ``help``, ``unit``, ``labels``, ``missing``: the family's HELP text, unit (when its
      name's suffix does not say it), label names and what is special about a missing or odd
      value, stated on the one row of the family that has ``help``; other rows of the same
      family (the fields of one ``_info``) leave them empty.
    - ``label``: the label name its text becomes in ``family`` (an ``_info`` family).
    - ``absent``: its value when the node does not send it (None: no sample).
    - ``bound``: the configurable bound that caps what is kept of it (``max_*`` config key,
      counted in ``ledger_exporter_dropped_values_total{kind}``), None when none.
    - ``shared``: every node of a chain sends it alike (its configuration, its sessions):
      the fast path keeps its JSON text and reads it once a cycle for all the nodes that
      send the same text.
    - ``attribute``: the attribute of the reading that holds it ("" when it is a gauge read
      through :meth:`ChainReading.gauge` or not kept).

    Rows compare by identity: each is one field, looked up in dicts on hot paths.
    """

    name: str
    at: tuple[str, ...] = TOP
    read: Reader | None = None
    family: str = ""
    kind: str = "gauge"
    help: str = ""
    unit: str = ""
    labels: tuple[str, ...] = ()
    label: str = ""
    missing: str = ""
    absent: float | None = None
    bound: DropKind | None = None
    also_at: tuple[tuple[str, ...], ...] = ()
    shared: bool = False
    attribute: str = ""

    @property
    def path(self) -> str:
        """Where the field sits, dotted as the docs write it (``consensus.minMembers``)."""
        return ".".join((*(part for part in self.at if part != EACH), self.name))

    @property
    def is_gauge(self) -> bool:
        """A plain gauge: one float a reading, from ``read``, written to ``family``."""
        return bool(self.family) and self.read is not None and not self.label


#: The unit of a gauge that says yes (1) or no (0).
FLAG = "0 or 1"
#: The labels of every series of one node, and of one chain of one node.
NODE = ("node",)
CHAIN = ("node", "blockchain")
#: The objects the fields of a chain status and a health answer sit in.
CONSENSUS: tuple[str, ...] = ("consensus",)
NETWORK: tuple[str, ...] = ("network",)

# --- GET /health -----------------------------------------------------------------------------

NODE_VERSION = Field(
    "nodeVersion",
    read=read_text,
    family="ledger_node_info",
    help="Identity of the node as reported by /health; always 1.",
    labels=(*NODE, "node_version", "node_id", "peer_id"),
    label="node_version",
    bound=DropKind.LABEL_VALUE,
    attribute="node_version",
)
NODE_ID = Field(
    "nodeId",
    read=read_text,
    family="ledger_node_info",
    label="node_id",
    bound=DropKind.LABEL_VALUE,
    attribute="node_id",
)
PEER_ID = Field(
    "peerId",
    at=NETWORK,
    also_at=(TOP,),
    read=read_text,
    family="ledger_node_info",
    label="peer_id",
    bound=DropKind.LABEL_VALUE,
    attribute="peer_id",
)
PEER_COUNT = Field(
    "peerCount",
    at=NETWORK,
    read=read_count,
    family="ledger_node_peers",
    help="Peers connected to the node (network.peerCount).",
    unit="peers",
    labels=NODE,
    attribute="peer_count",
)
BLOCKCHAINS = Field(
    "blockchains",
    read=read_list_length,
    family="ledger_node_blockchains",
    help="Number of blockchains the node's /health lists.",
    unit="blockchains",
    labels=NODE,
    bound=DropKind.BLOCKCHAIN,
    attribute="blockchain_count",
)
#: The peers a node lists: read as a set, for the network view (ledger_node_polled_peers).
NETWORK_PEERS = Field("networkPeers", at=NETWORK, attribute="network_peers")
#: Documented, not read: declared so the table is the whole answer.
NETWORK_TYPE = Field("networkType", at=NETWORK)

#: ``GET /health``, in the order its families are written.
HEALTH_FIELDS = (
    NODE_VERSION,
    NODE_ID,
    PEER_ID,
    PEER_COUNT,
    BLOCKCHAINS,
    NETWORK_PEERS,
    NETWORK_TYPE,
)

# --- GET /blockchains/{id} -------------------------------------------------------------------

BLOCK_HEIGHT = Field(
    "blockHeight",
    read=read_count,
    family="ledger_blockchain_height",
    help="Current block height (blockHeight).",
    unit="blocks",
    labels=CHAIN,
)
LAST_MESSAGE_TIME = Field(
    "lastMessageTime",
    read=read_timestamp,
    family="ledger_blockchain_last_message_timestamp_seconds",
    help="Time of the last processed message or block (lastMessageTime).",
    labels=CHAIN,
)
PENDING_MESSAGES = Field(
    "pendingMessagesCount",
    read=read_count,
    family="ledger_blockchain_pending_messages",
    help="Queued messages (pendingMessagesCount).",
    unit="messages",
    labels=CHAIN,
)
DELAYED_MESSAGES = Field(
    "delayedMessagesCount",
    read=read_count,
    family="ledger_blockchain_delayed_messages",
    help="Queued delayed messages (delayedMessagesCount).",
    unit="messages",
    labels=CHAIN,
)
PENDING_TRANSACTIONS = Field(
    "pendingTransactions",
    read=read_count,
    family="ledger_blockchain_pending_transactions",
    help="Queued transactions (pendingTransactions).",
    unit="transactions",
    labels=CHAIN,
)
SYNCING = Field(
    "syncing",
    read=read_bool,
    family="ledger_blockchain_syncing",
    help="1 while the node syncs the chain.",
    unit=FLAG,
    labels=CHAIN,
)
IN_COUNCIL = Field(
    "isInCouncil",
    read=read_bool,
    family="ledger_blockchain_in_council",
    help="1 when the node is a council member.",
    unit=FLAG,
    labels=CHAIN,
)
VOTING = Field(
    "isVoting",
    read=read_bool,
    family="ledger_blockchain_voting",
    help="Voting-state flag isVoting (0/1).",
    unit=FLAG,
    labels=CHAIN,
)
TIME_TO_VOTE = Field(
    "isTimeToVote",
    read=read_bool,
    family="ledger_blockchain_time_to_vote",
    help="Voting-state flag isTimeToVote (0/1).",
    unit=FLAG,
    labels=CHAIN,
)
COUNCIL_MEMBERS = Field(
    "councilMembers",
    read=read_list_length,
    family="ledger_blockchain_council_members",
    help="Number of council members (councilMembers).",
    unit="members",
    labels=CHAIN,
    bound=DropKind.LEADER,
    shared=True,
    attribute="council",
)
BLOCKCHAIN_PEERS = Field(
    "blockchainPeers",
    read=read_list_length,
    family="ledger_blockchain_peers",
    help="Number of peers on this chain (blockchainPeers).",
    unit="peers",
    labels=CHAIN,
)
VOTE_SESSIONS = Field(
    "voteSessions",
    read=read_object_size,
    family="ledger_blockchain_vote_sessions",
    help="Number of active vote sessions (voteSessions).",
    unit="sessions",
    labels=CHAIN,
    missing="0 when voteSessions is empty or absent.",
    absent=0.0,
    bound=DropKind.VOTE_SESSION,
    shared=True,
    attribute="sessions",
)
SESSION = ("voteSessions", EACH)
VOTE_ROUND = Field(
    "round",
    at=SESSION,
    read=read_count,
    family="ledger_blockchain_vote_round",
    help="Highest round among the active vote sessions.",
    unit="round number",
    labels=CHAIN,
    missing="No sample while no vote session is open.",
    attribute="round",
)
VOTE_CONSENSUS_REQUIRED = Field(
    "consensusRequired",
    at=SESSION,
    read=read_count,
    family="ledger_blockchain_vote_consensus_required",
    help="Highest consensusRequired (votes required) among the active vote sessions.",
    unit="votes",
    labels=CHAIN,
    missing="No sample while no vote session is open.",
)
#: A session's leader: the key its failed rounds are counted against (consensus history).
CURRENT_LEADER = Field(
    "currentLeader", at=SESSION, read=read_text, bound=DropKind.LABEL_VALUE, attribute="leader"
)
CONSENSUS_TYPE = Field(
    "consensusType",
    at=CONSENSUS,
    read=read_text,
    family="ledger_blockchain_consensus_info",
    help="Consensus type and key type of the chain; always 1.",
    labels=(*CHAIN, "consensus_type", "key_type"),
    label="consensus_type",
    bound=DropKind.LABEL_VALUE,
    attribute="consensus_type",
)
KEY_TYPE = Field(
    "keyType",
    read=read_text,
    family="ledger_blockchain_consensus_info",
    label="key_type",
    bound=DropKind.LABEL_VALUE,
    attribute="key_type",
)
MIN_MEMBERS = Field(
    "minMembers",
    at=CONSENSUS,
    read=read_count,
    family="ledger_blockchain_consensus_min_members",
    help="Minimum council members for consensus (consensus.minMembers).",
    unit="members",
    labels=CHAIN,
)
CONSENSUS_TIMEOUT = Field(
    "consensusTimeout",
    at=CONSENSUS,
    read=read_duration,
    family="ledger_blockchain_consensus_timeout_seconds",
    help="Consensus timeout (consensus.consensusTimeout).",
    labels=CHAIN,
)
TX_MAX_TIME_TRIGGER = Field(
    "txMaxTimeTrigger",
    at=CONSENSUS,
    read=read_duration,
    family="ledger_blockchain_tx_max_time_trigger_seconds",
    help="Transaction max time trigger (consensus.txMaxTimeTrigger).",
    labels=CHAIN,
)
TX_KARMA_THRESHOLD = Field(
    "txKarmaThreshold",
    at=CONSENSUS,
    read=read_number,
    family="ledger_blockchain_tx_karma_threshold",
    help="Transaction karma threshold (consensus.txKarmaThreshold).",
    unit="the node's own figure",
    labels=CHAIN,
)
TX_MINT_THRESHOLD = Field(
    "txMintThreshold",
    at=CONSENSUS,
    read=read_number,
    family="ledger_blockchain_tx_mint_threshold",
    help="Transaction mint threshold (consensus.txMintThreshold).",
    unit="the node's own figure",
    labels=CHAIN,
)
FEATURES = Field(
    "features",
    family="ledger_blockchain_feature_enabled",
    help="1 when the feature flag is enabled on the chain, 0 when disabled.",
    unit=FLAG,
    labels=(*CHAIN, "feature"),
    missing="One series per flag present in features, unknown flags included.",
    bound=DropKind.FEATURE,
    shared=True,
    attribute="features",
)
#: A vote session's other fields: documented, not read (a session is followed by its key in
#: voteSessions, which the document says equals its sessionId).
SESSION_ID = Field("sessionId", at=SESSION, attribute="session_id")
SESSION_BLOCK_HASH = Field("blockHash", at=SESSION)
SESSION_BLOCK_HEIGHT = Field("blockHeight", at=SESSION)
SESSION_STAGE = Field("currentStage", at=SESSION)
#: The consensus settings as a whole: their gauges above, and the configuration compared
#: across nodes by value (ledger_network_blockchain_consensus_views).
CONSENSUS_SETTINGS = Field("consensus", shared=True, attribute="consensus_view")

#: ``GET /blockchains/{id}``, in the order their families are written.
CHAIN_STATUS_FIELDS = (
    BLOCK_HEIGHT,
    LAST_MESSAGE_TIME,
    PENDING_MESSAGES,
    DELAYED_MESSAGES,
    PENDING_TRANSACTIONS,
    SYNCING,
    IN_COUNCIL,
    VOTING,
    TIME_TO_VOTE,
    COUNCIL_MEMBERS,
    BLOCKCHAIN_PEERS,
    VOTE_SESSIONS,
    VOTE_ROUND,
    VOTE_CONSENSUS_REQUIRED,
    CURRENT_LEADER,
    SESSION_ID,
    SESSION_BLOCK_HASH,
    SESSION_BLOCK_HEIGHT,
    SESSION_STAGE,
    CONSENSUS_TYPE,
    KEY_TYPE,
    MIN_MEMBERS,
    CONSENSUS_TIMEOUT,
    TX_MAX_TIME_TRIGGER,
    TX_KARMA_THRESHOLD,
    TX_MINT_THRESHOLD,
    FEATURES,
    CONSENSUS_SETTINGS,
)

#: The plain gauges of a chain reading, in this order: a gauge's position is its index.
CHAIN_GAUGES = tuple(field for field in CHAIN_STATUS_FIELDS if field.is_gauge)
#: Each plain gauge's position among a chain reading's gauges.
GAUGE_POSITION = {field: position for position, field in enumerate(CHAIN_GAUGES)}
_STORE = GaugeStore(len(CHAIN_GAUGES))
_at = _STORE.at  # read about eight times a chain and cycle (history, network view)
_pack_all = _STORE.packer()
_HEIGHT, _SYNCING = GAUGE_POSITION[BLOCK_HEIGHT], GAUGE_POSITION[SYNCING]

# --- the readings: what the fields read as ----------------------------------------------------


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
    network_peers: tuple[str, ...] = ()  # sorted, once each: a tuple is a seventh of a set
    unreadable_chain_ids: int = 0
    dropped: Dropped = NOTHING_DROPPED
    node_key: str | None = None  # nodeId as a council key: up to MAX_TEXT_CHARS, no label


@dataclass(frozen=True, slots=True)
class VoteSession:
    """One open vote session as the exporter follows it: its id (the key in
    ``voteSessions``), its round and its current leader's key (None when not readable)."""

    session_id: str
    round: float | None
    leader: str | None


@dataclass(frozen=True, slots=True)
class ChainReading:
    """What ``GET /blockchains/{id}`` said: its plain gauges (:data:`CHAIN_GAUGES`, read with
    :meth:`gauge`), the consensus info and feature flags. ``values`` is the gauges as
    :mod:`exporter.model.storage` keeps them (:func:`pack_gauges`)."""

    values: bytes
    consensus_type: str | None = None
    key_type: str | None = None
    features: tuple[tuple[str, float], ...] = ()
    council: frozenset[str] | None = None
    dropped: Dropped = NOTHING_DROPPED  # feature flags and label values over the bounds
    sessions: tuple[VoteSession, ...] = ()  # the open vote sessions followed, by id
    leaders: tuple[str, ...] = ()  # the council keys with a leader series, by name
    consensus_view: bytes | None = None  # digest of consensus, keyType and features

    def gauge(self, field: Field) -> float | None:
        """The plain gauge ``field`` (one of :data:`CHAIN_GAUGES`); None when not reported."""
        return _at(self.values, GAUGE_POSITION[field])

    @property
    def height(self) -> float | None:
        """The block height, when the node reported a readable one."""
        return _at(self.values, _HEIGHT)

    @property
    def syncing(self) -> bool | None:
        """Whether the node says it is syncing; None unless it sent a JSON boolean."""
        flag = _at(self.values, _SYNCING)
        return None if flag is None else flag == 1.0


def pack_gauges(values: list[float]) -> bytes:
    """A chain reading's ``values``: one float per gauge of :data:`CHAIN_GAUGES` in order
    (NaN: not reported)."""
    return _pack_all(*values)


def gauge_table(readings: Iterable[ChainReading]) -> GaugeTable:
    """The gauges of many chain readings as one table: ``column(GAUGE_POSITION[field])``."""
    return _STORE.table(reading.values for reading in readings)


# --- Watch lists: GET /blockchains/{id}/contracts/{address}, .../state, GET /wallets/{address} --
# Read for each contract and wallet the config's ``watch`` names (exporter.model.watch_readings),
# not per chain. Fields the document names that no family reads are rows too, with the reason.

#: The labels of every series of one watched contract, and of one watched wallet.
CONTRACT = ("node", "blockchain", "contract")
WALLET = ("node", "blockchain", "wallet")
#: The contract statuses the interface names; each always gets a series in the state set.
CONTRACT_STATUSES = ("ACTIVE", "PAUSED", "UPGRADED")
#: The flags of an auth group the interface documents; others are not exported.
PERMISSIONS = ("create", "read", "update", "delete")
#: The query parameter of ``GET /wallets/{address}`` that names the wallet's chain.
WALLET_CHAIN_PARAMETER = "blockchainId"
# A block (``GET /blockchains/{id}/blocks?height=``) has no table: the document names none of
# its fields, so the config's ``network_checks.block_hash_fields`` says which may hold its
# hash. Their default is stated in exporter/config/exporter.py, where the config (a layer
# below this one) reads it; the readers take the configured list.

CONTRACT_STATUS = Field(
    "status",
    read=read_text,
    family="ledger_contract_status",
    help="State set of the contract's status: 1 for the reported one, 0 for each other of "
    f"{', '.join(CONTRACT_STATUSES)}.",
    unit=FLAG,
    labels=(*CONTRACT, "status"),
    label="status",
    missing=(
        "An unknown status reported gets its own series at 1; no series when the status cannot "
        "be read."
    ),
    bound=DropKind.LABEL_VALUE,
    attribute="status",
)
CONTRACT_VERSION = Field(
    "version",
    read=read_count,
    family="ledger_contract_version",
    help="Contract version (version).",
    unit="version number",
    labels=CONTRACT,
    attribute="version",
)
CONTRACT_ADDRESS = Field(
    "address",
    read=read_text,
    family="ledger_contract_info",
    help="Address, VM type and code hash of the contract as the node reports them; always 1.",
    labels=(*CONTRACT, "address", "vm_type", "code_hash"),
    label="address",
    bound=DropKind.LABEL_VALUE,
    attribute="address",
)
VM_TYPE = Field(
    "vmType",
    read=read_text,
    family="ledger_contract_info",
    label="vm_type",
    bound=DropKind.LABEL_VALUE,
    attribute="vm_type",
)
CODE_HASH = Field(
    "codeHash",
    read=read_text,
    family="ledger_contract_info",
    label="code_hash",
    bound=DropKind.LABEL_VALUE,
    attribute="code_hash",
)
#: Sent, not exported: the entry's chain is already the ``blockchain`` label.
CONTRACT_CHAIN = Field("blockchainId")
#: Sent, not exported: who deployed the contract and in which transaction, fixed for its
#: life (not tracked by every node), and deployment metadata of no fixed shape.
CREATOR = Field("creator")
DEPLOYMENT_TX_ID = Field("deploymentTxId")
CONTRACT_METADATA = Field("metadata")

#: ``GET /blockchains/{id}/contracts/{address}`` (endpoint 6), in the order its families are
#: written (after ``ledger_contract_up``).
CONTRACT_FIELDS = (
    CONTRACT_STATUS,
    CONTRACT_VERSION,
    CONTRACT_ADDRESS,
    VM_TYPE,
    CODE_HASH,
    CONTRACT_CHAIN,
    CREATOR,
    DEPLOYMENT_TX_ID,
    CONTRACT_METADATA,
)

STATE_VERSION = Field(
    "version",
    read=read_count,
    family="ledger_contract_state_version",
    help="Version of the contract's state (version).",
    unit="version number",
    labels=CONTRACT,
    attribute="version",
)
#: The contract-defined state: each configured ``state_keys`` path read by a reader of its
#: own (exporter.model.watch_readings.state_value).
CONTRACT_STATE = Field(
    "state",
    family="ledger_contract_state_value",
    help="Value at a configured dotted path of the contract's state (numbers, numeric strings, "
    "booleans as 0/1).",
    unit="as the contract state holds it",
    labels=(*CONTRACT, "key"),
    missing="Anything but a number, a numeric string or a boolean at the path gives no sample.",
    attribute="values",
)
#: Sent, not exported: the entry's chain and address are already its labels.
STATE_CHAIN = Field("blockchainId")
STATE_ADDRESS = Field("address")

#: ``GET /blockchains/{id}/contracts/{address}/state`` (endpoint 7), in the order its
#: families are written (after ``ledger_contract_state_up``).
CONTRACT_STATE_FIELDS = (STATE_VERSION, CONTRACT_STATE, STATE_CHAIN, STATE_ADDRESS)

WALLET_ENABLED = Field(
    "enabled",
    read=read_bool,
    family="ledger_wallet_enabled",
    help="1 when the wallet is enabled (enabled).",
    unit=FLAG,
    labels=WALLET,
    attribute="enabled",
)
SATELLITE_WALLETS = Field(
    "satelliteWallets",
    read=read_list_length,
    family="ledger_wallet_satellite_wallets",
    help="Number of satellite wallets (satelliteWallets).",
    unit="wallets",
    labels=WALLET,
    attribute="satellites",
)
#: Each group's :data:`PERMISSIONS` sent as JSON booleans, read by a reader of its own.
AUTH_GROUPS = Field(
    "authGroups",
    family="ledger_wallet_permission",
    help="1 when the wallet's auth group grants the permission (authGroups), else 0.",
    unit=FLAG,
    labels=(*WALLET, "group", "permission"),
    bound=DropKind.AUTH_GROUP,
    attribute="permissions",
)
WALLET_ADDRESS = Field(
    "address",
    read=read_text,
    family="ledger_wallet_info",
    help="Address, key type and public key of the wallet as the node reports them; always 1.",
    labels=(*WALLET, "address", "key_type", "public_key"),
    label="address",
    bound=DropKind.LABEL_VALUE,
    attribute="address",
)
WALLET_KEY_TYPE = Field(
    "keyType",
    read=read_text,
    family="ledger_wallet_info",
    label="key_type",
    bound=DropKind.LABEL_VALUE,
    attribute="key_type",
)
PUBLIC_KEY = Field(
    "publicKey",
    read=read_text,
    family="ledger_wallet_info",
    label="public_key",
    bound=DropKind.LABEL_VALUE,
    attribute="public_key",
)
#: Sent, not exported: the parent wallet's address ("" when none), a fixed relation.
PARENT = Field("parent")

#: ``GET /wallets/{address}?blockchainId={id}`` (endpoint 9), in the order its families are
#: written (after ``ledger_wallet_up``).
WALLET_FIELDS = (
    WALLET_ENABLED,
    SATELLITE_WALLETS,
    AUTH_GROUPS,
    WALLET_ADDRESS,
    WALLET_KEY_TYPE,
    PUBLIC_KEY,
    PARENT,
)


@dataclass(frozen=True, slots=True)
class ContractReading:
    """What endpoint 6 said (:data:`CONTRACT_FIELDS`): status, version and the identity
    labels of ``_info``."""

    status: str | None
    version: float | None
    address: str | None
    vm_type: str | None
    code_hash: str | None
    dropped: Dropped = NOTHING_DROPPED  # label values over the configured length


@dataclass(frozen=True, slots=True)
class StateReading:
    """What endpoint 7 said (:data:`CONTRACT_STATE_FIELDS`): the state's version and each
    configured key that held a value."""

    version: float | None
    values: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class WalletReading:
    """What endpoint 9 said (:data:`WALLET_FIELDS`): flags, satellites, ``(group,
    permission, 0/1)`` and identity."""

    enabled: float | None
    satellites: float | None
    permissions: tuple[tuple[str, str, float], ...]
    address: str | None
    key_type: str | None
    public_key: str | None
    dropped: Dropped = NOTHING_DROPPED  # auth groups and label values over the bounds
