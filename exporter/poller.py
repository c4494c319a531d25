"""The polling loop: every node and chain read concurrently, once per interval, never overlapping.

One bounded thread pool runs every request. A node's chain requests are submitted by its
/health task when that finishes, and no task ever waits on another, so the pool cannot
deadlock however many nodes and chains there are. Every request shares the cycle's deadline
(``scrape_timeout``), and a node still unfinished then is reported with what it has so far:
a slow or dead node never delays the others or the snapshot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from exporter.client import FetchError, NodeClient, NotSentError, Reason, make_session
from exporter.config import Config, NodeConfig
from exporter.history import ChainResult, History, NodeResult
from exporter.readings import HealthReading, InvalidResponseError, read_chain, read_health
from exporter.snapshot import Snapshot

log = logging.getLogger("ledger_exporter")

#: Extra wait after the deadline for requests that are just finishing their last read.
DEADLINE_GRACE_SECONDS = 0.25


class _NodePoll:
    """One node's poll in one cycle: /health, then each chain, all on the shared pool."""

    def __init__(
        self, node: NodeConfig, client: NodeClient, pool: ThreadPoolExecutor, max_chains: int
    ) -> None:
        self.node = node
        self._max_chains = max_chains
        self._unpolled = 0
        self.done: Future[None] = Future()
        self._client = client
        self._pool = pool
        self._lock = threading.Lock()
        self._health_error: FetchError | None = None
        self._health: HealthReading | None = None
        self._chains: dict[str, ChainResult] = {}
        self._started = 0.0
        self._finished: float | None = None
        self._in_flight = 0
        self._ran_out_of_time = False

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

    def _ask(self, segments: list[str], deadline: float) -> object:
        """``get_json``, keeping count of requests in flight and of those that timed out."""
        with self._lock:
            self._in_flight += 1
        try:
            return self._client.get_json(segments, deadline)
        except NotSentError:
            raise  # it only waited in the queue: the node is not to blame
        except FetchError as error:
            if error.reason is Reason.TIMEOUT:
                with self._lock:
                    self._ran_out_of_time = True
            raise
        finally:
            with self._lock:
                self._in_flight -= 1

    def start(self, deadline: float, started: float) -> None:
        self._started = started
        self._pool.submit(self._read_health, deadline)

    def _read_health(self, deadline: float) -> None:
        try:
            health = read_health(self._ask(["health"], deadline))
        except Exception as error:
            with self._lock:
                self._health_error = _as_fetch_error(error)
            self._finish()
            return
        chains = self.node.blockchains or health.blockchain_ids[: self._max_chains]
        if not self.node.blockchains:
            self._unpolled = len(health.blockchain_ids) - len(chains)
        with self._lock:
            self._health = health
            self._chains = {chain: ChainResult(chain) for chain in chains}
        if not chains:
            self._finish()
        for chain in chains:
            self._pool.submit(self._read_chain, chain, deadline)

    def _read_chain(self, chain: str, deadline: float) -> None:
        reading, error = None, None
        try:
            reading = read_chain(self._ask(["blockchains", chain], deadline))
        except Exception as failure:
            error = _as_fetch_error(failure)
        with self._lock:
            result = self._chains[chain]
            result.reading, result.error = reading, error
            finished = all(r.reading or r.error for r in self._chains.values())
        if finished:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._finished = time.monotonic()
        self.done.set_result(None)

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
        if health_error is not None:
            return failed_node(self.node, health_error, end - self._started)
        return NodeResult(
            self.node, self._health, None, chains, end - self._started, self._unpolled
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


@dataclass
class _Resources:
    """The session, pool and per-node clients built for one configuration."""

    config: Config
    session: requests.Session
    pool: ThreadPoolExecutor
    slow_pool: ThreadPoolExecutor  # for nodes that timed out last cycle (see run_cycle)
    clients: dict[str, NodeClient]

    def shutdown(self) -> None:
        for pool in (self.pool, self.slow_pool):
            pool.shutdown(wait=False, cancel_futures=True)


class Poller:
    """Runs polling cycles over the configured nodes and hands each snapshot to ``publish``."""

    def __init__(
        self,
        config: Config,
        publish: Callable[[Snapshot], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._publish = publish
        self._clock = clock
        self._history = History()
        self._pending_config: Config | None = None
        self._resources = self._build(config)
        self._running: dict[str, _NodePoll] = {}
        self._timed_out: set[str] = set()
        self._wake = threading.Event()
        self._stopped = threading.Event()

    def apply(self, config: Config) -> None:
        """Use ``config`` from the next cycle on, and start that cycle now."""
        self._pending_config = config
        self._wake.set()

    def _build(self, config: Config) -> _Resources:
        hosts = len({urlsplit(node.url).netloc for node in config.nodes})
        session = make_session(config.max_concurrency, hosts)
        pool = ThreadPoolExecutor(config.max_concurrency, thread_name_prefix="poll")
        slow_pool = ThreadPoolExecutor(
            max(1, config.max_concurrency // 4), thread_name_prefix="poll-slow"
        )
        clients = {
            node.name: NodeClient(session, node, config.max_response_bytes) for node in config.nodes
        }
        return _Resources(config, session, pool, slow_pool, clients)

    def _take_pending_config(self) -> None:
        config, self._pending_config = self._pending_config, None
        if config is None:
            return
        old = self._resources
        self._resources = self._build(config)
        old.shutdown()
        self._running.clear()

    def run_cycle(self) -> Snapshot:
        """Poll every node once, fold the results into the history, and return the snapshot."""
        self._take_pending_config()
        resources = self._resources
        started = time.monotonic()
        deadline = started + resources.config.scrape_timeout
        polls, stuck = [], []
        # Nodes that timed out last cycle go last, on a small pool of their own: however many
        # hang, they cannot hold the threads the healthy nodes' requests need.
        suspects = self._timed_out
        for node in sorted(resources.config.nodes, key=lambda node: node.name in suspects):
            previous = self._running.get(node.name)
            if previous is not None and not previous.done.done():
                stuck.append(node)  # an earlier poll still hangs: never a second request
                continue
            client = resources.clients[node.name]
            pool = resources.slow_pool if node.name in suspects else resources.pool
            poll = _NodePoll(node, client, pool, resources.config.max_blockchains_per_node)
            self._running[node.name] = poll
            poll.start(deadline, started)
            polls.append(poll)
        remaining = max(0.0, deadline - time.monotonic())
        wait([poll.done for poll in polls], timeout=remaining + DEADLINE_GRACE_SECONDS)
        ended = time.monotonic()
        hung = FetchError(Reason.TIMEOUT, "the previous poll of this node has not ended yet")
        results = [poll.result(ended) for poll in polls]
        results += [failed_node(node, hung, ended - started) for node in stuck]
        order = {node.name: index for index, node in enumerate(resources.config.nodes)}
        results.sort(key=lambda result: order[result.node.name])
        self._timed_out = {poll.node.name for poll in polls if poll.blamed_for_timeout}
        self._timed_out |= {node.name for node in stuck}
        nodes = self._history.record(results, self._clock())
        return Snapshot(nodes, ended - started, self._clock())

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

    def requests_in_flight(self) -> int:
        """Requests sent and not yet ended, across all nodes (hung ones included)."""
        return sum(poll.in_flight for poll in list(self._running.values()))

    def stop(self) -> None:
        """End run() after the current cycle and release threads and connections."""
        self._stopped.set()
        self._wake.set()
        self._resources.shutdown()
        self._resources.session.close()
