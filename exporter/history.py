"""What the exporter remembers between cycles: error counters, last successes, height changes.

It turns one cycle's raw poll results into a Snapshot, logs each node's and chain's state
changes once (not every failed poll), and forgets nodes and chains that are no longer polled
so memory stays bounded by the configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from exporter.client import FetchError, Reason
from exporter.config import NodeConfig
from exporter.readings import ChainReading, HealthReading
from exporter.snapshot import ChainStatus, ErrorCounts, NodeStatus
from exporter.watch import Reading, WatchRequest

ENDPOINTS = ("health", "blockchain")
#: The error counters' keys, one tuple each shared by every node (12 fewer tuples a node).
_ERROR_KEYS = tuple((endpoint, reason.value) for endpoint in ENDPOINTS for reason in Reason)

log = logging.getLogger("ledger_exporter")


@dataclass(slots=True)
class ChainResult:
    """One chain request's outcome in this cycle."""

    blockchain: str
    reading: ChainReading | None = None
    error: FetchError | None = None
    requested: bool = True  # False for configured chains of a node whose /health failed
    block_height: int | None = None  # the checkpoint whose block was asked for, if any
    block_hash: str | None = None
    block_error: FetchError | None = None


@dataclass(frozen=True, slots=True)
class WatchResult:
    """One watch request's outcome in this cycle; neither reading nor error while it is out."""

    request: WatchRequest
    reading: Reading | None = None
    error: FetchError | None = None

    @property
    def ended(self) -> bool:
        """The request has an answer or has failed."""
        return self.reading is not None or self.error is not None

    def late(self, error: FetchError) -> WatchResult:
        """This request, failed with ``error`` (it had no answer by the deadline)."""
        return WatchResult(self.request, None, error)


@dataclass(slots=True)
class NodeResult:
    """One node's poll outcome in this cycle."""

    node: NodeConfig
    health: HealthReading | None
    error: FetchError | None
    chains: list[ChainResult]
    duration: float
    unpolled_chains: int = 0  # listed by /health beyond max_blockchains_per_node
    watch: list[WatchResult] = field(default_factory=list)  # in plan order


def describe(error: FetchError | None) -> str | None:
    return None if error is None else f"{error.reason.value}: {error.detail}"


@dataclass
class _NodeMemory:
    """Everything remembered about one node; dropped whole when the node leaves the config."""

    errors: dict[tuple[str, str], int] = field(
        default_factory=lambda: dict.fromkeys(_ERROR_KEYS, 0)
    )
    last_success: float | None = None
    up: bool | None = None
    chains_up: dict[str, bool] = field(default_factory=dict)
    heights: dict[str, tuple[float, float]] = field(default_factory=dict)  # height, first seen
    unpolled_chains: int = 0


class History:
    """Cross-cycle state of every configured node."""

    def __init__(self) -> None:
        self._nodes: dict[str, _NodeMemory] = {}

    def record(self, results: Sequence[NodeResult], now: float) -> tuple[NodeStatus, ...]:
        """Fold one cycle into the history and return the nodes' statuses for the snapshot."""
        self._nodes = {r.node.name: self._nodes.get(r.node.name, _NodeMemory()) for r in results}
        highest = _highest_heights(results)
        layouts: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        return tuple(self._node_status(result, now, highest, layouts) for result in results)

    def _node_status(
        self,
        result: NodeResult,
        now: float,
        highest: dict[str, float],
        layouts: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]],
    ) -> NodeStatus:
        name = result.node.name
        memory = self._nodes[name]
        if result.error is not None:
            memory.errors[("health", result.error.reason.value)] += 1
        else:
            memory.last_success = now
        _count_watch(memory, result.watch)
        memory.up = _log_change(memory.up, result.error, f"node {name}", name)
        if result.health is not None and bool(result.unpolled_chains) != bool(
            memory.unpolled_chains
        ):
            _log_capped(name, result.unpolled_chains)
            memory.unpolled_chains = result.unpolled_chains
        if result.health is not None:  # the chain list is known: forget chains no longer in it
            polled = {chain.blockchain for chain in result.chains}
            memory.heights = {k: v for k, v in memory.heights.items() if k in polled}
            memory.chains_up = {k: v for k, v in memory.chains_up.items() if k in polled}
        return NodeStatus(
            name=name,
            labels=result.node.labels,
            health=result.health,
            error=describe(result.error),
            chains=tuple(_chain_status(memory, name, c, now, highest) for c in result.chains),
            duration=result.duration,
            last_success=memory.last_success,
            error_counts=ErrorCounts.of(memory.errors, layouts),
        )


def _chain_status(
    memory: _NodeMemory, node: str, chain: ChainResult, now: float, highest: dict[str, float]
) -> ChainStatus:
    if chain.block_height is not None:
        _count_block(memory, chain.block_error)
    if chain.requested:
        if chain.error is not None:
            memory.errors[("blockchain", chain.error.reason.value)] += 1
        memory.chains_up[chain.blockchain] = _log_change(
            memory.chains_up.get(chain.blockchain),
            chain.error,
            f"chain {chain.blockchain} of node {node}",
            node,
        )
    height = chain.reading.height if chain.reading else None
    if height is None:
        return ChainStatus(chain.blockchain, chain.reading, describe(chain.error))
    seen = memory.heights.get(chain.blockchain)
    if seen is None or seen[0] != height:
        seen = memory.heights[chain.blockchain] = (height, now)
    return ChainStatus(
        chain.blockchain,
        chain.reading,
        None,
        height_changed_at=seen[1],
        blocks_behind=highest[chain.blockchain] - height,
    )


def _count_block(memory: _NodeMemory, error: FetchError | None) -> None:
    """Count a block request's failure; the node's block counters start at 0 with its first
    block request, so an exporter with block checks off has no such series."""
    if ("block", Reason.TIMEOUT.value) not in memory.errors:
        memory.errors.update({("block", reason.value): 0 for reason in Reason})
    if error is not None:
        memory.errors[("block", error.reason.value)] += 1


def _count_watch(memory: _NodeMemory, results: Sequence[WatchResult]) -> None:
    """Count failed watch requests by endpoint (contract, contract_state, wallet); an
    endpoint's counters start at 0 with the node's first request to it."""
    for result in results:
        endpoint = result.request.kind.value
        if (endpoint, Reason.TIMEOUT.value) not in memory.errors:
            memory.errors.update({(endpoint, reason.value): 0 for reason in Reason})
        if result.error is not None:
            memory.errors[(endpoint, result.error.reason.value)] += 1


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
        else:
            fields = {"node": node, "reason": error.reason.value, "error": error.detail}
            log.warning("%s is down", what, extra={"fields": fields})
    return up


def _highest_heights(results: Sequence[NodeResult]) -> dict[str, float]:
    """Highest height of each chain among the nodes read in this cycle."""
    highest: dict[str, float] = {}
    for result in results:
        for chain in result.chains:
            height = chain.reading.height if chain.reading else None
            if height is not None and height > highest.get(chain.blockchain, -1.0):
                highest[chain.blockchain] = height
    return highest
