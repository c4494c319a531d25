"""What the exporter remembers between cycles: error counters, last successes, height changes,
vote sessions and the consensus counters, each node's ``nodeId``.

It turns one cycle's raw poll results into a Snapshot, logs each node's and chain's state
changes once (not every failed poll), and forgets nodes and chains that are no longer polled
so memory stays bounded by the configuration (and vote sessions once they close:
:mod:`exporter.poll.consensus_history`). The height clocks, the open sessions' first sightings and
the node ids are what a restart must not forget: :meth:`History.state` hands them to the
state file (:mod:`exporter.poll.state`), and a history built from a restored state goes on
with them.

Every time the history keeps or hands out is on the monotonic clock (``time.monotonic()``),
so a wall-clock step (NTP) neither ages nor hides anything; the state file keeps wall-clock
times (a restart has no common monotonic clock), converted here, at the one boundary, with
the ``wall_offset`` of the moment (wall clock minus monotonic clock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace

from exporter.bounds import DEFAULT_BOUNDS, NOTHING_DROPPED, SETTINGS, Bounds, DropKind, Dropped
from exporter.model.fields import HealthReading
from exporter.model.identity import Mismatch
from exporter.model.network import majority_height
from exporter.model.snapshot import (
    ChainStatus,
    ConsensusStatus,
    ErrorCounts,
    NodeStatus,
    on_wall_clock,
)
from exporter.model.storage import CountArray
from exporter.model.transport import Handshake, TransportStatus
from exporter.model.watch_readings import ContractReading, WalletReading
from exporter.poll.block_hashes import BlockHashes
from exporter.poll.consensus_history import ChainConsensus
from exporter.poll.head_clock import HeadClock
from exporter.poll.results import (
    ChainResult,
    FetchError,
    NodeResult,
    Reason,
    WatchResult,
    describe,
    exporter_failure,
)
from exporter.poll.state import ChainState, NodeState, State
from exporter.values import LabelTexts

ENDPOINTS = ("health", "blockchain")
#: No value dropped yet: one tuple shared by every node within its bounds.
_NO_DROPS = (0,) * len(DropKind)
#: The counts of a Dropped, in DropKind's order after BLOCKCHAIN (which the poll counts):
#: each field is its kind's value made plural (tests/poll/test_history.py checks it), so a
#: new bound adds its kind and its count in exporter/bounds.py and nothing here.
_COUNTED = tuple(item.name for item in fields(Dropped))
_LEADERS = list(DropKind).index(DropKind.LEADER)
#: Counted once per /health answer that lists chain ids UTF-8 cannot hold (they are skipped).
_UNREADABLE_IDS = FetchError(Reason.INVALID_RESPONSE, "blockchain ids UTF-8 cannot hold")
#: The error counters' keys, one tuple each shared by every node (12 fewer tuples a node).
_ERROR_KEYS = tuple((endpoint, reason.value) for endpoint in ENDPOINTS for reason in Reason)

log = logging.getLogger("ledger_exporter")


class _Layout:
    """The error counters' keys of the nodes with the same endpoints, each key's position, and
    the layouts one endpoint more gives; shared by those nodes, so a node's counters are one
    array."""

    __slots__ = ("endpoints", "index", "keys", "wider")

    def __init__(self, keys: tuple[tuple[str, str], ...]) -> None:
        self.keys = keys
        self.index = {key: position for position, key in enumerate(keys)}
        self.endpoints = frozenset(endpoint for endpoint, _ in keys)
        self.wider: dict[str, _Layout] = {}

    def with_endpoint(self, endpoint: str) -> _Layout:
        """This layout plus the ``endpoint``'s counters (one per reason)."""
        wider = self.wider.get(endpoint)
        if wider is None:
            more = tuple((endpoint, reason.value) for reason in Reason)
            wider = self.wider[endpoint] = _Layout(self.keys + more)
        return wider


class _ErrorCounter:
    """One node's failed requests per (endpoint, reason) since the exporter started."""

    __slots__ = ("counts", "last", "layout")

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout
        self.counts = CountArray(len(layout.keys))
        self.last: ErrorCounts | None = None  # frozen since the last change, if any

    def start(self, endpoint: str) -> None:
        """Give ``endpoint`` its counters at 0, unless it has them (asked about seven times a
        node and cycle: a set lookup, not an enum member's value)."""
        if endpoint not in self.layout.endpoints:
            self.layout = self.layout.with_endpoint(endpoint)
            self.counts.widen(len(Reason))
            self.last = None

    def add(self, endpoint: str, error: FetchError | None) -> None:
        """Count ``error`` (if any) of a request to ``endpoint``."""
        if endpoint not in self.layout.endpoints:
            self.start(endpoint)
        if error is not None:
            self.counts.add(self.layout.index[(endpoint, error.reason.value)])
            self.last = None

    def frozen(self) -> ErrorCounts:
        """The counts as they are; the same object as last cycle's while none changed (a
        node without errors keeps one, not a new packed array every cycle)."""
        if self.last is None:
            self.last = ErrorCounts(self.layout.keys, self.counts.frozen())
        return self.last


@dataclass
class _NodeMemory:
    """Everything remembered about one node; dropped whole when the node leaves the config."""

    errors: _ErrorCounter
    last_success: float | None = None
    up: bool | None = None
    chains_up: dict[str, bool] = field(default_factory=dict)
    heights: dict[str, tuple[float, float]] = field(default_factory=dict)  # height, first seen
    syncing: dict[str, float] = field(default_factory=dict)  # since when, unbroken (not kept)
    consensus: dict[str, ChainConsensus] = field(default_factory=dict)  # per chain read
    blocks: dict[str, BlockHashes] = field(default_factory=dict)  # per chain: checkpoint hashes
    node_key: str | None = None  # the nodeId of the last successful read that had one
    unpolled_chains: int = 0
    unreadable_ids: bool = False  # the last /health read listed chain ids UTF-8 cannot hold
    dropped: tuple[int, ...] = _NO_DROPS  # values dropped since start, per DropKind
    exceeding: int = 0  # bit i: the last read dropped values of the i-th DropKind
    mismatch: Mismatch | None = None  # how it last answered as another node, until trusted
    handshake: Handshake | None = None  # the last one whose labels were checked
    handshake_fits: bool = True  # its info labels are within max_label_value_length


class History:
    """Cross-cycle state of every configured node; ``restored`` is what a state file kept
    from before a restart (height clocks, open sessions' first sightings, node ids), used
    while the node still reports the same height and sessions."""

    def __init__(self, restored: State | None = None, wall_offset: float = 0.0) -> None:
        """``restored`` keeps wall-clock times; each becomes the monotonic time it stands for
        (``wall - wall_offset``, i.e. ``mono_now - (wall_now - wall)``)."""
        self._layout = _Layout(_ERROR_KEYS)  # every node starts with these counters
        self._nodes: dict[str, _NodeMemory] = {}
        restored = restored or State()
        self._heads = HeadClock(restored.heads, wall_offset)
        for name, node in restored.nodes.items():
            memory = self._nodes[name] = _NodeMemory(_ErrorCounter(self._layout))
            memory.heights = {
                chain: (kept.height, kept.height_changed_at - wall_offset)
                for chain, kept in node.chains.items()
            }
            memory.consensus = {
                chain: ChainConsensus({s: at - wall_offset for s, at in kept.sessions.items()})
                for chain, kept in node.chains.items()
                if kept.sessions
            }
            memory.node_key = node.node_id

    def state(self, wall_offset: float = 0.0) -> State:
        """What a restart must not forget, for the state file: the height clocks with the
        first sightings of the chain's open sessions, and the node's id; times on the wall
        clock (``mono + wall_offset``), which the next process re-bases on its own monotonic
        clock."""
        nodes = {}
        for name, memory in self._nodes.items():
            if not memory.heights and memory.node_key is None:
                continue
            chains = {
                chain: ChainState(
                    height,
                    on_wall_clock(since, wall_offset),
                    _first_sightings(memory, chain, wall_offset),
                )
                for chain, (height, since) in memory.heights.items()
            }
            nodes[name] = NodeState(chains, memory.node_key)
        return State(nodes, self._heads.records(wall_offset))

    def recheck(self, node: str, chain: str, checkpoint: int) -> int | None:
        """A height of ``chain`` whose block ``node`` answered before, to ask again beside
        this cycle's ``checkpoint`` (exporter.poll.block_hashes); None for none this cycle."""
        memory = self._nodes.get(node)
        followed = None if memory is None else memory.blocks.get(chain)
        return None if followed is None else followed.recheck(checkpoint)

    def node_keys(self) -> dict[str, str]:
        """Each polled node's ``nodeId`` from its last successful read that had one."""
        return {name: m.node_key for name, m in self._nodes.items() if m.node_key is not None}

    def _memory(self, name: str) -> _NodeMemory:
        memory = self._nodes.get(name)
        return memory or _NodeMemory(_ErrorCounter(self._layout))

    def record(
        self,
        results: Sequence[NodeResult],
        now_mono: float,
        bounds: Bounds = DEFAULT_BOUNDS,
        failed: Callable[[str, Exception], None] | None = None,
    ) -> tuple[NodeStatus, ...]:
        """Fold one cycle into the history and return the nodes' statuses for the snapshot;
        ``bounds`` caps the leader series of each chain. With ``failed``, a node whose status
        raises is told to it (name, error) and reads as down: the other nodes go on."""
        self._nodes = {r.node.name: self._memory(r.node.name) for r in results}
        highest = _head_heights(results)
        self._heads.advance(highest, now_mono)
        statuses = tuple(
            self._guarded_status(result, now_mono, highest, bounds, failed) for result in results
        )
        self._heads.keep(chain for memory in self._nodes.values() for chain in memory.heights)
        return statuses

    def _guarded_status(
        self,
        result: NodeResult,
        now_mono: float,
        highest: dict[str, float],
        bounds: Bounds,
        failed: Callable[[str, Exception], None] | None,
    ) -> NodeStatus:
        """:meth:`_node_status`, or with ``failed`` the node as down when that raises."""
        if failed is None:
            return self._node_status(result, now_mono, highest, bounds)
        try:
            return self._node_status(result, now_mono, highest, bounds)
        except Exception as error:  # this node's status is left out, never the cycle's
            failed(result.node.name, error)
            kind = type(error).__name__
        name = result.node.name
        memory = self._nodes[name]
        return NodeStatus(
            name=name,
            labels=result.node.labels,
            health=None,
            error=describe(exporter_failure(kind)),
            chains=(),
            duration=result.duration,
            last_success=memory.last_success,
            error_counts=memory.errors.frozen(),
            dropped=memory.dropped,
            retry_afters=0,
            last_chains=_last_chains(memory),
        )

    def _node_status(
        self, result: NodeResult, now_mono: float, highest: dict[str, float], bounds: Bounds
    ) -> NodeStatus:
        name = result.node.name
        memory = self._nodes[name]
        memory.errors.add("health", result.error if result.asked else None)
        if result.error is None:
            memory.last_success = now_mono
        if result.watch:
            _count_watch(memory, result.watch)
        memory.up = _log_change(memory.up, result.error, f"node {name}", name)
        _note_identity(memory, name, result)
        if result.health is not None:
            _note_listing(memory, name, result.health, result.unpolled_chains)
            memory.node_key = result.health.node_key or memory.node_key
            _forget_unpolled(memory, {chain.blockchain for chain in result.chains})
        else:  # its series vanish, and with them the syncing alert's `for`
            memory.syncing.clear()
            for followed in memory.consensus.values():
                followed.missed()
        chains, leader_drops = _chain_statuses(
            memory, name, result, now_mono, highest=highest, bounds=bounds, heads=self._heads
        )
        transport = None
        if result.health is not None:
            drops = _cycle_drops(result, leader_drops)
            transport, label_drops = _transport(memory, result.transport, bounds)
            if label_drops:  # a new handshake's label too long: counted once, not each cycle
                drops = tuple(
                    count + label_drops * (kind is DropKind.LABEL_VALUE)
                    for kind, count in zip(DropKind, drops, strict=True)
                )
            # a handshake whose info stays unwritten keeps the node over the label bound
            # (counted once, at the handshake), so the log never says it is back within it
            held = None if memory.handshake_fits else DropKind.LABEL_VALUE
            _note_dropped(memory, name, drops, held)
        return NodeStatus(
            name=name,
            labels=result.node.labels,
            health=result.health,
            error=describe(result.error),
            chains=chains,
            duration=result.duration,
            last_success=memory.last_success,
            error_counts=memory.errors.frozen(),
            dropped=memory.dropped,
            retry_afters=0,  # the poller counts them (it holds the nodes back)
            identity=result.mismatch,
            last_chains=_last_chains(memory) if result.health is None else (),
            transport=transport,
        )


def _last_chains(memory: _NodeMemory) -> tuple[tuple[str, float], ...]:
    """A down node's chains with the height each last had (restored ones too)."""
    return tuple((chain, height) for chain, (height, _) in memory.heights.items())


def _first_sightings(memory: _NodeMemory, chain: str, wall_offset: float) -> dict[str, float]:
    """The chain's open sessions' first sightings on the wall clock (for the state file)."""
    followed = memory.consensus.get(chain)
    if followed is None:
        return {}
    return {sid: on_wall_clock(at, wall_offset) for sid, at in followed.first_sightings().items()}


def _forget_unpolled(memory: _NodeMemory, polled: set[str]) -> None:
    """Forget the chains the node's listing no longer has (the chain list is known)."""
    if not (
        memory.heights.keys() <= polled
        and memory.chains_up.keys() <= polled
        and memory.consensus.keys() <= polled
        and memory.blocks.keys() <= polled
    ):
        memory.heights = {k: v for k, v in memory.heights.items() if k in polled}
        memory.chains_up = {k: v for k, v in memory.chains_up.items() if k in polled}
        memory.consensus = {k: v for k, v in memory.consensus.items() if k in polled}
        memory.blocks = {k: v for k, v in memory.blocks.items() if k in polled}


def _chain_statuses(
    memory: _NodeMemory,
    node: str,
    result: NodeResult,
    now_mono: float,
    *,
    highest: dict[str, float],
    bounds: Bounds,
    heads: HeadClock,
) -> tuple[tuple[ChainStatus, ...], int]:
    """Each chain's status, and how many leader keys found no room under ``bounds``."""
    statuses = []
    leader_drops = 0
    for chain in result.chains:
        consensus, dropped = _follow(memory, chain, now_mono, bounds)
        leader_drops += dropped
        statuses.append(
            _chain_status(memory, node, chain, now_mono, highest, consensus=consensus, heads=heads)
        )
    return tuple(statuses), leader_drops


def _follow(
    memory: _NodeMemory, chain: ChainResult, now_mono: float, bounds: Bounds
) -> tuple[ConsensusStatus | None, int]:
    """The chain's consensus followed across cycles: None when it was not read."""
    followed = memory.consensus.get(chain.blockchain)
    if chain.reading is None:
        if followed is not None:
            followed.missed()
        return None, 0
    if followed is None:
        followed = memory.consensus[chain.blockchain] = ChainConsensus()
    return followed.follow(chain.reading, now_mono, bounds.leaders_per_chain)


def _chain_status(
    memory: _NodeMemory,
    node: str,
    chain: ChainResult,
    now_mono: float,
    highest: dict[str, float],
    *,
    consensus: ConsensusStatus | None,
    heads: HeadClock,
) -> ChainStatus:
    if chain.block_height is not None:
        # the block counters start at 0 with the node's first block request, so an
        # exporter with block checks off has no such series
        memory.errors.add("block", chain.block_error)
    reorgs = _note_blocks(memory, chain)
    if chain.requested:
        memory.errors.add("blockchain", chain.error)
        before = memory.chains_up.get(chain.blockchain)
        if before is not (chain.error is None):  # logged and noted on a change only
            memory.chains_up[chain.blockchain] = _log_change(
                before, chain.error, f"chain {chain.blockchain} of node {node}", node
            )
    syncing_since = _note_syncing(memory, chain, now_mono)
    height = chain.reading.height if chain.reading is not None else None
    if height is None:
        error = describe(chain.error)
        return ChainStatus(
            chain.blockchain,
            chain.reading,
            error,
            syncing_since=syncing_since,
            consensus=consensus,
            reorgs=reorgs,
        )
    seen = memory.heights.get(chain.blockchain)
    if seen is None or seen[0] != height:
        seen = memory.heights[chain.blockchain] = (height, now_mono)
    top = highest[chain.blockchain]
    return ChainStatus(
        chain.blockchain,
        chain.reading,
        None,
        height_changed_at=seen[1],
        blocks_behind=max(0.0, top - height),  # a node ahead of the majority: 0
        behind_seconds=heads.behind(chain.blockchain, height, top, now_mono),
        syncing_since=syncing_since,
        consensus=consensus,
        reorgs=reorgs,
    )


def _note_blocks(memory: _NodeMemory, chain: ChainResult) -> int | None:
    """Remember the block hashes read of ``chain`` this cycle (the checkpoint's, and the one
    asked again), counting the failed recheck like any block request; the reorganisations
    found so far, None before the chain's first block read."""
    if chain.recheck_height is not None:
        memory.errors.add("block", chain.recheck_error)
    followed = memory.blocks.get(chain.blockchain)
    for height, block_hash in (
        (chain.recheck_height, chain.recheck_hash),
        (chain.block_height, chain.block_hash),
    ):
        if height is not None and block_hash is not None:
            if followed is None:
                followed = memory.blocks[chain.blockchain] = BlockHashes()
            followed.note(height, block_hash)
    return None if followed is None else followed.reorgs


def _note_syncing(memory: _NodeMemory, chain: ChainResult, now_mono: float) -> float | None:
    """Since when the chain has said it is syncing in every cycle (None: not syncing now), as
    the syncing alert's `for` counts: a cycle without the flag starts it again."""
    if chain.reading is not None and chain.reading.syncing:
        return memory.syncing.setdefault(chain.blockchain, now_mono)
    memory.syncing.pop(chain.blockchain, None)
    return None


def _count_watch(memory: _NodeMemory, results: Sequence[WatchResult]) -> None:
    """Count failed watch requests by endpoint (contract, contract_state, wallet); an
    endpoint's counters start at 0 with the node's first request to it."""
    for result in results:
        memory.errors.add(result.request.kind.value, result.error)


def _note_listing(memory: _NodeMemory, node: str, health: HealthReading, unpolled: int) -> None:
    """Count a /health answer listing chain ids UTF-8 cannot hold as invalid_response, and
    log once when the node starts or stops listing those or more chains than the cap."""
    if bool(unpolled) != bool(memory.unpolled_chains):
        _log_capped(node, unpolled)
    memory.unpolled_chains = unpolled
    unreadable = health.unreadable_chain_ids
    if unreadable:
        memory.errors.add("health", _UNREADABLE_IDS)
    if bool(unreadable) != memory.unreadable_ids:
        memory.unreadable_ids = bool(unreadable)
        if unreadable:
            fields = {"node": node, "unreadable_blockchain_ids": unreadable}
            message = "node lists blockchain ids UTF-8 cannot hold; they are skipped"
            log.warning(message, extra={"fields": fields})
        else:
            message = "node lists no blockchain ids UTF-8 cannot hold any more"
            log.info(message, extra={"fields": {"node": node}})


def _transport(
    memory: _NodeMemory, transport: TransportStatus | None, bounds: Bounds
) -> tuple[TransportStatus | None, int]:
    """An up node's transport as the snapshot shows it, and how many label values of a new
    handshake are over ``max_label_value_length``: its info series is then not written
    (never a label cut short), the expiry still is."""
    if transport is None or transport.handshake is None:
        return transport, 0
    dropped = 0
    if transport.handshake is not memory.handshake:
        labels = LabelTexts(bounds.label_value_length)
        for value in transport.handshake.info_labels():
            labels.fits(value)
        memory.handshake, memory.handshake_fits = transport.handshake, not labels.dropped
        dropped = labels.dropped
    if memory.handshake_fits:
        return transport, dropped
    return replace(transport, info_fits=False), dropped


def _cycle_drops(result: NodeResult, leader_drops: int = 0) -> tuple[int, ...]:
    """The values of an up node's answers this cycle left out for a bound, per DropKind;
    ``leader_drops`` the leaders whose failed rounds found no series left under the bound."""
    found: list[Dropped] = []
    if result.health is not None and _any_dropped(result.health.dropped):
        found.append(result.health.dropped)
    found += [
        c.reading.dropped for c in result.chains if c.reading and _any_dropped(c.reading.dropped)
    ]
    for watched in result.watch:
        if isinstance(watched.reading, ContractReading | WalletReading) and watched.reading.dropped:
            found.append(watched.reading.dropped)
    if not found and not result.unpolled_chains and not leader_drops:
        return _NO_DROPS
    drops = [result.unpolled_chains, *(sum(getattr(d, name) for d in found) for name in _COUNTED)]
    drops[_LEADERS] += leader_drops
    return tuple(drops)


def _any_dropped(dropped: Dropped) -> bool:
    """``dropped`` counts something; the one NOTHING_DROPPED of nearly every answer is known
    without asking (``Dropped.__bool__`` is a Python call, six a node and cycle)."""
    return dropped is not NOTHING_DROPPED and bool(dropped)


def _note_dropped(
    memory: _NodeMemory, node: str, drops: tuple[int, ...], held: DropKind | None = None
) -> None:
    """Add this cycle's ``drops`` to the node's counts, and log once per kind when the node
    starts or stops exceeding its bound (blockchains: see _log_capped); ``held``: a kind
    still over its bound though nothing new was dropped of it this cycle (a handshake's
    label, counted once, whose series stays unwritten)."""
    if drops is _NO_DROPS and not memory.exceeding:  # the usual case: nothing to note
        return
    if drops is not _NO_DROPS:
        memory.dropped = tuple(map(sum, zip(memory.dropped, drops, strict=True)))
    for bit, (kind, count) in enumerate(zip(DropKind, drops, strict=True)):
        was = bool(memory.exceeding & (1 << bit))
        if (bool(count) or kind is held) == was:
            continue
        memory.exceeding ^= 1 << bit
        if kind is DropKind.BLOCKCHAIN:
            continue
        if count:
            fields = {"node": node, "kind": kind.value, "dropped": count}
            message = "node sends more than a bound allows; the excess is not exported"
            if kind is DropKind.LABEL_VALUE and held is not None:
                message += " (ledger_node_tls_info: a certificate name over the bound)"
            log.warning(message, extra={"fields": {**fields, "setting": SETTINGS[kind]}})
        else:
            fields = {"node": node, "kind": kind.value}
            log.info("node is back within the bound", extra={"fields": fields})


def _note_identity(memory: _NodeMemory, node: str, result: NodeResult) -> None:
    """Log once when the node starts answering as another node (or as yet another one), and
    once when it answers as expected again; a cycle that reads no /health judges nothing."""
    mismatch = result.mismatch
    if mismatch is not None and mismatch != memory.mismatch:
        fields = {"node": node, **mismatch.fields()}
        message = (
            "node answers as another node than its expect pins: not trusted, counted down"
            ' (reason="identity_mismatch") and none of its readings kept until it answers as'
            " expected"
        )
        log.warning(message, extra={"fields": fields})
    elif result.health is not None and memory.mismatch is not None:
        log.info("node answers as expected again: trusted", extra={"fields": {"node": node}})
    if mismatch is not None or result.health is not None:
        memory.mismatch = mismatch


def _log_capped(node: str, unpolled: int) -> None:
    if unpolled:
        fields = {"node": node, "unpolled_blockchains": unpolled}
        log.warning(
            "node lists more blockchains than max_blockchains_per_node; polling the first ones",
            extra={"fields": fields},
        )
    else:
        log.info("node lists no more blockchains than the cap", extra={"fields": {"node": node}})


def _log_change(before: bool | None, error: FetchError | None, what: str, node: str) -> bool:
    """Log a state change once (a first sighting that is up is not news); return the state."""
    up = error is None
    if before != up and not (before is None and up):
        if error is None:
            log.info("%s is up again", what, extra={"fields": {"node": node}})
        elif error.reason is not Reason.IDENTITY_MISMATCH:  # _note_identity logs that
            fields = {"node": node, "reason": error.reason.value, "error": error.detail}
            log.warning("%s is down", what, extra={"fields": fields})
    return up


def _head_heights(results: Sequence[NodeResult]) -> dict[str, float]:
    """Each chain's head this cycle: the highest height a strict majority of the up,
    not-syncing nodes reading it reached (:func:`majority_height`), so that one node
    reporting heights far too high puts no honest node behind and moves no head clock."""
    readings: dict[str, list[tuple[float | None, bool | None]]] = {}
    for result in results:
        for chain in result.chains:
            reading = chain.reading
            if reading is not None and reading.height is not None:
                readings.setdefault(chain.blockchain, []).append((reading.height, reading.syncing))
    heads = {chain: majority_height(pairs) for chain, pairs in readings.items()}
    return {chain: head for chain, head in heads.items() if head is not None}
