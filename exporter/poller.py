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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from exporter import __version__
from exporter.client import FetchError, NodeClient, NotSentError, Reason
from exporter.config import Config, NodeConfig
from exporter.engine import Engine
from exporter.history import ChainResult, History, NodeResult
from exporter.readings import HealthReading, InvalidResponseError, read_chain, read_health
from exporter.snapshot import Snapshot
from exporter.watchconfig import WatchConfig
from exporter.watchpoll import WatchPoll, watch_status

log = logging.getLogger("ledger_exporter")

#: Extra wait after the deadline for requests that are just finishing their last read.
DEADLINE_GRACE_SECONDS = 0.25
NO_WATCH = WatchConfig()


class _NodePoll:
    """One node's poll in one cycle: /health, then each chain, driven by the engine's callbacks."""

    def __init__(
        self,
        node: NodeConfig,
        client: NodeClient,
        max_chains: int,
        watch: WatchConfig = NO_WATCH,
    ) -> None:
        self.node = node
        self._watch = WatchPoll(watch, node.name, _as_fetch_error)
        self._chains_done = False
        self._client = client
        self._max_chains = max_chains
        self._unpolled = 0
        self.done = threading.Event()
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
    def in_flight(self) -> int:
        """Requests to this node sent and not yet ended."""
        with self._lock:
            return self._in_flight

    @property
    def blamed_for_timeout(self) -> bool:
        """A request to this node ran out of time, or is still out: not one merely queued."""
        with self._lock:
            return self._ran_out_of_time or self._in_flight > 0

    def _ask(
        self,
        segments: list[str],
        done: Callable[[Any, FetchError | None], None],
        query: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """``client.get``, keeping count of requests in flight and of those that timed out."""
        with self._lock:
            self._in_flight += 1

        def ended(document: Any, error: FetchError | None) -> None:
            with self._lock:
                self._in_flight -= 1
                if error is not None and error.reason is Reason.TIMEOUT:
                    # one that only waited in the queue is not the node's fault
                    self._ran_out_of_time |= not isinstance(error, NotSentError)
            done(document, error)

        self._client.get(segments, self._deadline, ended, query)

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
        with self._lock:
            self._health = health
            self._chains = {chain: ChainResult(chain) for chain in chains}
        watch = self._watch.plan(health.blockchain_ids)
        if not chains:
            self._finish()
        for chain in chains:
            self._ask(["blockchains", chain], self._chain_reader(chain))
        for request in watch:  # right after the chains', under the same deadline
            read = self._watch.reader(request, self._watch_ended)
            self._ask(list(request.segments), read, request.query)

    def _chain_reader(self, chain: str) -> Callable[[Any, FetchError | None], None]:
        def chain_read(document: Any, error: FetchError | None) -> None:
            reading = None
            try:
                if error is not None:
                    raise error
                reading = read_chain(document)
            except Exception as failure:
                error = _as_fetch_error(failure)
            with self._lock:
                result = self._chains[chain]
                result.reading, result.error = reading, error
                finished = all(r.reading or r.error for r in self._chains.values())
            if finished:
                self._finish()

        return chain_read

    def _watch_ended(self) -> None:
        self._finish(chains=False)

    def _finish(self, chains: bool = True) -> None:
        """Mark the chain part (or one watch request) ended; done once every part has."""
        with self._lock:
            self._chains_done |= chains
            if not self._chains_done or self._watch.pending:
                return
            self._finished = time.monotonic()
        self.done.set()

    def result(self, now: float) -> NodeResult:
        """What is known now; parts still outstanding count as timed out."""
        with self._lock:
            late = FetchError(Reason.TIMEOUT, "no answer before the cycle's deadline")
            health_error = self._health_error
            if self._health is None and health_error is None:
                health_error = late
            chains = [
                ChainResult(c.blockchain, c.reading, c.error or (None if c.reading else late))
                for c in self._chains.values()
            ]
            end = self._finished if self._finished is not None else now
            watch = self._watch.results(late)
        if health_error is not None:
            return failed_node(self.node, health_error, end - self._started)
        return NodeResult(
            self.node, self._health, None, chains, end - self._started, self._unpolled, watch
        )


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
        self._owns_engine = engine is None
        self._engine = engine or new_engine(config)
        self._lock = threading.Lock()  # guards the hand-over of a reloaded config
        self._pending_config: Config | None = None
        self._resources = self._build(config)
        self._running: dict[str, _NodePoll] = {}
        self._timed_out: set[str] = set()
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
    ) -> tuple[list[_NodePoll], list[NodeConfig]]:
        polls: list[_NodePoll] = []
        stuck: list[NodeConfig] = []
        # Nodes that timed out last cycle go last and get at most a quarter of the engine's
        # slots: however many hang, they cannot hold the slots the healthy nodes need.
        suspects = self._timed_out
        self._running = {name: p for name, p in self._running.items() if not p.done.is_set()}
        for node in sorted(resources.config.nodes, key=lambda node: node.name in suspects):
            if node.name in self._running:
                stuck.append(node)  # an earlier poll still hangs: never a second request
                continue
            client = resources.clients[node.name]
            if node.name in suspects:
                client = client.as_suspect()
            config = resources.config
            poll = _NodePoll(node, client, config.max_blockchains_per_node, config.watch)
            self._running[node.name] = poll
            poll.start(deadline, started)
            polls.append(poll)
        return polls, stuck

    def run_cycle(self) -> Snapshot:
        """Poll every node once, fold the results into the history, and return the snapshot."""
        resources = self._take_pending_config()
        started = time.monotonic()
        deadline = started + resources.config.scrape_timeout
        polls, stuck = self._start_polls(resources, deadline, started)
        for poll in polls:
            poll.done.wait(max(0.0, deadline + DEADLINE_GRACE_SECONDS - time.monotonic()))
        ended = time.monotonic()
        hung = FetchError(Reason.TIMEOUT, "the previous poll of this node has not ended yet")
        results = [poll.result(ended) for poll in polls]
        results += [failed_node(node, hung, ended - started) for node in stuck]
        order = {node.name: index for index, node in enumerate(resources.config.nodes)}
        results.sort(key=lambda result: order[result.node.name])
        self._timed_out = {poll.node.name for poll in polls if poll.blamed_for_timeout}
        self._timed_out |= {node.name for node in stuck}
        # only polls still out are kept (to guard and count them); ended ones free their results
        self._running = {name: p for name, p in self._running.items() if not p.done.is_set()}
        nodes = self._history.record(results, self._clock())
        return Snapshot(nodes, ended - started, self._clock(), watch=watch_status(results))

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
