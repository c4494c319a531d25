"""The polling loop: every node and chain read concurrently, once per interval, never overlapping.

Every request goes through one :class:`~exporter.engine.Engine` (one thread, libcurl's multi
interface). A node's chain requests are sent from the callback of its /health request, so no
thread ever waits on another request. Every request shares the cycle's deadline
(``scrape_timeout``), and a node still unfinished then is reported with what it has so far:
a slow or dead node never delays the others or the snapshot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from exporter import __version__
from exporter.client import FetchError, NodeClient, NotSentError, Outcome, Query, Reason
from exporter.config import Config, NodeConfig
from exporter.engine import Engine
from exporter.history import ChainResult, History, NodeResult
from exporter.network import NetworkView, network_view, observe
from exporter.readings import (
    HealthReading,
    InvalidResponseError,
    Shared,
    read_block_hash,
    read_chain,
    read_health,
)
from exporter.snapshot import NodeStatus, Snapshot
from exporter.watchconfig import WatchConfig
from exporter.watchpoll import WatchPoll, watch_status

log = logging.getLogger("ledger_exporter")

#: Extra wait after the deadline for requests that are just finishing their last read.
DEADLINE_GRACE_SECONDS = 0.25
NO_WATCH = WatchConfig()


@dataclass(frozen=True)
class BlockPlan:
    """Which block to ask a node for per chain this cycle (the checkpoint), and where a block
    keeps its hash. Empty when block checks are off or no checkpoint is known yet."""

    heights: Mapping[str, int] = field(default_factory=dict)
    hash_fields: tuple[str, ...] = ()


class Countdown:
    """Set once ``count`` polls have ended: one Event for a whole cycle, not one per node (an
    Event is a Condition and a lock, about half a kilobyte each)."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()
        self._zero = threading.Event()
        if count <= 0:
            self._zero.set()

    def count_down(self) -> None:
        """One more poll has ended."""
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._zero.set()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every poll; True if they all ended."""
        return self._zero.wait(timeout)


def _nothing() -> None:
    pass


def _complete(chain: ChainResult) -> bool:
    """The chain's status has ended, and its block too when one was asked for."""
    block_done = chain.block_height is None or chain.block_hash or chain.block_error
    return bool((chain.reading or chain.error) and block_done)


class NodePoll:
    """One node's poll (in a cycle, or for one probe): /health, then each chain (and its
    checkpoint block, sent alongside, so no extra round trip), driven by the engine's
    callbacks."""

    def __init__(
        self,
        node: NodeConfig,
        client: NodeClient,
        max_chains: int,
        blocks: BlockPlan,
        *,
        watch: WatchConfig = NO_WATCH,
        shared: Shared | None = None,
        ended: Callable[[], None] = _nothing,
    ) -> None:
        self.node = node
        self._shared = shared
        self._ended = ended
        self._watch = WatchPoll(watch, node.name, _as_fetch_error)
        self._chains_done = False
        self._client = client
        self._max_chains = max_chains
        self._blocks = blocks
        self._unpolled = 0
        self._lock = threading.Lock()
        self._health_error: FetchError | None = None
        self._health: HealthReading | None = None
        self._chains: dict[str, ChainResult] = {}
        self._started = 0.0
        self._finished: float | None = None
        self._in_flight = 0
        self._ran_out_of_time = False
        self._deadline = 0.0

    @property
    def finished(self) -> bool:
        """Every part of the poll has ended (``ended`` was called)."""
        with self._lock:
            return self._finished is not None

    @property
    def in_flight(self) -> int:
        """Requests to this node sent and not yet ended."""
        with self._lock:
            return self._in_flight

    @property
    def blamed_for_timeout(self) -> bool:
        """A request to this node ran out of time, or is still out: not one merely queued."""
        with self._lock:
            return self._ran_out_of_time or self._in_flight > 0

    def _ask(self, segments: list[str], done: Outcome, query: Query = ()) -> None:
        """``client.get``, keeping count of requests in flight and of those that timed out."""
        with self._lock:
            self._in_flight += 1
        self._client.get(segments, self._deadline, _Counted(self, done), query)

    def request_ended(self, error: FetchError | None) -> None:
        """A request to this node has ended (for the in-flight and timed-out counts)."""
        with self._lock:
            self._in_flight -= 1
            if error is not None and error.reason is Reason.TIMEOUT:
                # one that only waited in the queue is not the node's fault
                self._ran_out_of_time |= not isinstance(error, NotSentError)

    def start(self, deadline: float, started: float) -> None:
        self._started, self._deadline = started, deadline
        self._ask(["health"], self._health_read)

    def _health_read(self, document: Any, error: FetchError | None) -> None:
        try:
            if error is not None:
                raise error
            health = read_health(document)
        except Exception as failure:
            with self._lock:
                self._health_error = _as_fetch_error(failure)
            self._finish()
            return
        chains = self.node.blockchains or health.blockchain_ids[: self._max_chains]
        if not self.node.blockchains:
            self._unpolled = len(health.blockchain_ids) - len(chains)
        heights = self._blocks.heights
        with self._lock:
            self._health = health
            self._chains = {
                chain: ChainResult(chain, block_height=heights.get(chain)) for chain in chains
            }
        watch = self._watch.plan(health.blockchain_ids)
        if not chains:
            self._finish()
        for chain in chains:
            self._ask(["blockchains", chain], _ChainAnswer(self, chain, block=False))
            if chain in heights:
                query = (("height", str(heights[chain])),)
                block = _ChainAnswer(self, chain, block=True)
                self._ask(["blockchains", chain, "blocks"], block, query)
        for request in watch:  # right after the chains', under the same deadline
            read = self._watch.reader(request, self._watch_ended)
            self._ask(list(request.segments), read, request.query)

    def chain_answered(
        self, chain: str, block: bool, document: Any, error: FetchError | None
    ) -> None:
        """Keep ``chain``'s status (or, with ``block``, its checkpoint block hash) or its
        error, and end the chain part once every chain request has ended."""
        value: Any = None
        try:
            if error is not None:
                raise error
            if block:
                value = read_block_hash(document, self._blocks.hash_fields)
            else:
                value = read_chain(document, self._shared)
        except Exception as failure:
            error = _as_fetch_error(failure)
        with self._lock:
            result = self._chains[chain]
            if block:
                result.block_hash, result.block_error = value, error
            else:
                result.reading, result.error = value, error
            finished = all(_complete(r) for r in self._chains.values())
        if finished:
            self._finish()

    def _watch_ended(self) -> None:
        self._finish(chains=False)

    def _finish(self, chains: bool = True) -> None:
        """Mark the chain part (or one watch request) ended; done once every part has."""
        with self._lock:
            self._chains_done |= chains
            if not self._chains_done or self._watch.pending or self._finished is not None:
                return
            self._finished = time.monotonic()
        self._ended()

    def result(self, now: float) -> NodeResult:
        """What is known now; parts still outstanding count as timed out."""
        with self._lock:
            late = FetchError(Reason.TIMEOUT, "no answer before the cycle's deadline")
            health_error = self._health_error
            if self._health is None and health_error is None:
                health_error = late
            chains = [
                replace(
                    c,
                    error=c.error or (None if c.reading else late),
                    block_error=c.block_error
                    or (None if c.block_hash or c.block_height is None else late),
                )
                for c in self._chains.values()
            ]
            end = self._finished if self._finished is not None else now
            watch = self._watch.results(late)
        if health_error is not None:
            return failed_node(self.node, health_error, end - self._started)
        return NodeResult(
            self.node, self._health, None, chains, end - self._started, self._unpolled, watch
        )


class _Counted:
    """A request's callback that first tells its poll the request ended. Slotted objects,
    not closures, since thousands of requests wait in the engine's queue at once."""

    __slots__ = ("_done", "_poll")

    def __init__(self, poll: NodePoll, done: Outcome) -> None:
        self._poll, self._done = poll, done

    def __call__(self, document: Any, error: FetchError | None) -> None:
        self._poll.request_ended(error)
        self._done(document, error)


class _ChainAnswer:
    """The answer to a chain status or checkpoint block request, for its poll."""

    __slots__ = ("_block", "_chain", "_poll")

    def __init__(self, poll: NodePoll, chain: str, block: bool) -> None:
        self._poll, self._chain, self._block = poll, chain, block

    def __call__(self, document: Any, error: FetchError | None) -> None:
        self._poll.chain_answered(self._chain, self._block, document, error)


def failed_node(node: NodeConfig, error: FetchError, duration: float) -> NodeResult:
    """A node whose /health failed: configured chains are down too, but were not requested."""
    chain_error = FetchError(error.reason, "the node's /health could not be read")
    chains = [ChainResult(c, None, chain_error, requested=False) for c in node.blockchains or ()]
    return NodeResult(node, None, error, chains, duration)


def _as_fetch_error(error: Exception) -> FetchError:
    """A fresh error without a traceback: a traceback keeps the request's frames, and with
    them a refused body of up to max_response_bytes, alive until the next GC."""
    if isinstance(error, FetchError):
        return FetchError(error.reason, error.detail)
    if isinstance(error, InvalidResponseError):
        return FetchError(Reason.INVALID_RESPONSE, str(error))
    log.error("unexpected failure while polling", exc_info=error)
    return FetchError(Reason.INVALID_RESPONSE, f"unexpected {type(error).__name__}")


@dataclass(frozen=True)
class _Resources:
    """The per-node clients built for one configuration (the engine outlives them)."""

    config: Config
    clients: dict[str, NodeClient]


def new_engine(config: Config) -> Engine:
    """The engine sized for ``config``: its in-flight limit and one kept-alive connection per
    node host."""
    hosts = len({urlsplit(node.url).netloc for node in config.nodes})
    return Engine(config.max_concurrency, f"ledger-exporter/{__version__}", hosts)


class Poller:
    """Runs polling cycles over the configured nodes and hands each snapshot to ``publish``."""

    def __init__(
        self,
        config: Config,
        publish: Callable[[Snapshot], None],
        clock: Callable[[], float] = time.time,
        engine: Engine | None = None,
    ) -> None:
        self._publish = publish
        self._clock = clock
        self._history = History()
        self._shared = Shared()  # one copy of the readings' values repeated across nodes
        self._owns_engine = engine is None
        self._engine = engine or new_engine(config)
        self._lock = threading.Lock()  # guards the hand-over of a reloaded config
        self._pending_config: Config | None = None
        self._resources = self._build(config)
        self._running: dict[str, NodePoll] = {}
        self._timed_out: set[str] = set()
        self._checkpoints: dict[str, int] = {}  # per chain, from the last cycle's heights
        self._block_heights: dict[str, dict[str, int]] = {}  # per node: blocks it can have
        self._wake = threading.Event()
        self._stopped = threading.Event()

    @property
    def config(self) -> Config:
        """The configuration the next cycle polls with (a pending reload included)."""
        with self._lock:
            return self._pending_config or self._resources.config

    def apply(self, config: Config) -> None:
        """Use ``config`` from the next cycle on, and start that cycle now."""
        with self._lock:
            self._pending_config = config
        self._wake.set()

    def _build(self, config: Config) -> _Resources:
        hosts = len({urlsplit(node.url).netloc for node in config.nodes})
        self._engine.resize(hosts, config.max_concurrency)
        clients = {
            node.name: NodeClient(self._engine, node, config.max_response_bytes)
            for node in config.nodes
        }
        return _Resources(config, clients)

    def _take_pending_config(self) -> _Resources:
        """The resources for this cycle, rebuilt when a reload is pending. Polls still out
        from the old config stay in ``_running``: still guarded, still counted."""
        with self._lock:
            config, self._pending_config = self._pending_config, None
            if config is not None:
                self._resources = self._build(config)
            return self._resources

    def _start_polls(
        self, resources: _Resources, deadline: float, started: float
    ) -> tuple[list[NodePoll], list[NodeConfig], Countdown]:
        """Start a poll of every node whose earlier poll has ended (the others are ``stuck``);
        the countdown reaches zero once all the started polls have ended."""
        config = resources.config
        self._running = {name: p for name, p in self._running.items() if not p.finished}
        stuck = [node for node in config.nodes if node.name in self._running]
        # Nodes that timed out last cycle go last and get at most a quarter of the engine's
        # slots: however many hang, they cannot hold the slots the healthy nodes need.
        suspects = self._timed_out
        ready = [node for node in config.nodes if node.name not in self._running]
        ready.sort(key=lambda node: node.name in suspects)
        countdown = Countdown(len(ready))
        polls: list[NodePoll] = []
        for node in ready:
            client = resources.clients[node.name]
            if node.name in suspects:
                client = client.as_suspect()
            poll = NodePoll(
                node,
                client,
                config.max_blockchains_per_node,
                self._block_plan(node),
                watch=config.watch,
                shared=self._shared,
                ended=countdown.count_down,
            )
            self._running[node.name] = poll
            poll.start(deadline, started)
            polls.append(poll)
        return polls, stuck, countdown

    def _block_plan(self, node: NodeConfig) -> BlockPlan:
        """The checkpoint blocks to ask ``node`` for: only where block checks are on and the
        node had reached the checkpoint last cycle (a block it cannot have is no error)."""
        checks = self._resources.config.network_checks
        if checks.checkpoint_depth == 0:
            return BlockPlan()
        return BlockPlan(self._block_heights.get(node.name, {}), checks.block_hash_fields)

    def _network(self, results: Sequence[NodeResult], nodes: Sequence[NodeStatus]) -> NetworkView:
        """Compare the up nodes, and plan the next cycle's checkpoints from their heights."""
        observed = [
            observe(
                r.node.name, r.health, ((c.blockchain, c.reading, c.block_hash) for c in r.chains)
            )
            for r in results
            if r.health is not None
        ]
        depth = self._resources.config.network_checks.checkpoint_depth
        view = network_view(observed, self._checkpoints, depth)
        self._checkpoints = {
            c.blockchain: c.next_checkpoint for c in view.chains if c.next_checkpoint is not None
        }
        self._block_heights = {
            node.name: {
                chain.blockchain: self._checkpoints[chain.blockchain]
                for chain in node.chains
                if chain.blockchain in self._checkpoints
                and chain.reading is not None
                and chain.reading.height is not None
                and chain.reading.height >= self._checkpoints[chain.blockchain]
            }
            for node in nodes
        }
        return view

    def run_cycle(self) -> Snapshot:
        """Poll every node once, fold the results into the history, and return the snapshot."""
        resources = self._take_pending_config()
        started = time.monotonic()
        deadline = started + resources.config.scrape_timeout
        self._shared.clear()
        polls, stuck, countdown = self._start_polls(resources, deadline, started)
        countdown.wait(max(0.0, deadline + DEADLINE_GRACE_SECONDS - time.monotonic()))
        ended = time.monotonic()
        hung = FetchError(Reason.TIMEOUT, "the previous poll of this node has not ended yet")
        results = [poll.result(ended) for poll in polls]
        results += [failed_node(node, hung, ended - started) for node in stuck]
        order = {node.name: index for index, node in enumerate(resources.config.nodes)}
        results.sort(key=lambda result: order[result.node.name])
        self._timed_out = {poll.node.name for poll in polls if poll.blamed_for_timeout}
        self._timed_out |= {node.name for node in stuck}
        # only polls still out are kept (to guard and count them); ended ones free their results
        self._running = {name: p for name, p in self._running.items() if not p.finished}
        nodes = self._history.record(results, self._clock())
        network = self._network(results, nodes)
        watch = watch_status(results)
        return Snapshot(nodes, ended - started, self._clock(), network=network, watch=watch)

    def run(self) -> None:
        """Cycle every ``scrape_interval`` until stop(); a late cycle skips missed ticks."""
        next_start = time.monotonic()
        while not self._stopped.is_set():
            self._wake.clear()
            try:
                self._publish(self.run_cycle())
            except Exception:  # a bug must not end polling; log it loudly and go on
                log.exception("polling cycle failed")
            interval = self._resources.config.scrape_interval
            next_start = max(next_start + interval, time.monotonic())
            self._wake.wait(max(0.0, next_start - time.monotonic()))
            if self._wake.is_set():
                next_start = time.monotonic()

    def connections_opened(self) -> int:
        """New connections to nodes made so far (kept-alive ones are reused across cycles)."""
        return self._engine.connections_opened()

    def requests_in_flight(self) -> int:
        """Requests sent or queued and not yet ended, across all nodes (hung ones included)."""
        return self._engine.in_flight()

    def stop(self) -> None:
        """End run() after the current cycle; close the engine if this poller made it."""
        self._stopped.set()
        self._wake.set()
        if self._owns_engine:
            self._engine.close()
