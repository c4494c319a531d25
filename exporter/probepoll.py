"""One node polled now, for /probe: ``/health``, then its chains concurrently, under a deadline.

This is the seam between probe mode and the polling engine: ``probe_node(node, deadline)``
returns the same NodeResult a polling cycle makes. It runs on its own session and bounded
pool, apart from the daemon's cycle, so probes never take the cycle's threads or connections.
Its requests run no longer than the deadline (the client's own bound), and a chain still
unanswered then is reported as timed out, as in the cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from exporter.client import FetchError, NodeClient, Reason, make_session
from exporter.config import NodeConfig
from exporter.history import ChainResult, NodeResult
from exporter.poller import DEADLINE_GRACE_SECONDS, _as_fetch_error, failed_node
from exporter.readings import ChainReading, read_chain, read_health

#: Connection pools kept for distinct targets (least recently used ones are dropped).
TARGET_POOLS = 64


class ThreadedProber:
    """Polls single nodes on demand with a dedicated session and a bounded chain pool."""

    def __init__(
        self,
        max_in_flight: int,
        max_bytes: int,
        max_chains: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = make_session(pool_size=max(4, max_in_flight), hosts=TARGET_POOLS)
        self._pool = ThreadPoolExecutor(max(4, max_in_flight), thread_name_prefix="probe")
        self._max_bytes = max_bytes
        self._max_chains = max_chains
        self._monotonic = monotonic

    def probe_node(self, node: NodeConfig, deadline: float) -> NodeResult:
        """Poll ``node`` now: its health and chains, every request ending by ``deadline``."""
        started = self._monotonic()
        client = NodeClient(self._session, node, self._max_bytes, self._monotonic)
        try:
            health = read_health(client.get_json(["health"], deadline))
        except Exception as error:
            return failed_node(node, _as_fetch_error(error), self._monotonic() - started)
        chains = node.blockchains or health.blockchain_ids[: self._max_chains]
        unpolled = 0 if node.blockchains else len(health.blockchain_ids) - len(chains)
        futures = {chain: self._submit(client, chain, deadline) for chain in chains}
        remaining = max(0.0, deadline - self._monotonic())
        wait(futures.values(), timeout=remaining + DEADLINE_GRACE_SECONDS)
        results = [_chain_result(chain, future) for chain, future in futures.items()]
        return NodeResult(node, health, None, results, self._monotonic() - started, unpolled)

    def _submit(self, client: NodeClient, chain: str, deadline: float) -> Future[ChainReading]:
        try:
            return self._pool.submit(_read_chain, client, chain, deadline)
        except RuntimeError:  # the pool was shut down by a reload while this probe ran
            future: Future[ChainReading] = Future()
            future.set_exception(FetchError(Reason.TIMEOUT, "the exporter reloaded meanwhile"))
            return future

    def close(self) -> None:
        """Release the threads and connections; probes still running finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()


def _read_chain(client: NodeClient, chain: str, deadline: float) -> ChainReading:
    return read_chain(client.get_json(["blockchains", chain], deadline))


def _chain_result(chain: str, future: Future[ChainReading]) -> ChainResult:
    if not future.done() or future.cancelled():
        future.cancel()
        return ChainResult(chain, None, FetchError(Reason.TIMEOUT, "no answer before the deadline"))
    error = future.exception()
    if isinstance(error, Exception):
        return ChainResult(chain, None, _as_fetch_error(error))
    return ChainResult(chain, future.result())
