"""One node polled now, for /probe: ``/health``, then its chains concurrently, under a deadline.

This is the seam between probe mode and the polling engine: ``probe_node(node, deadline)``
returns the same NodeResult a polling cycle makes, from the same per-node poll driven by
the engine's callbacks. Probes have an engine of their own (one more thread, its own
in-flight limit and connection cache), so they never take the slots or connections of the
daemon's cycle and never delay it; the caller's thread only waits for its probe's end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from exporter import __version__
from exporter.bounds import DEFAULT_BOUNDS, Bounds
from exporter.config.nodes import NodeConfig
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine
from exporter.poll.node import DEADLINE_GRACE_SECONDS, BlockPlan, Countdown, NodePoll
from exporter.poll.results import NodeResult, RequestTrace

#: Idle connections kept for targets (a probe-only exporter polls nodes it is not told of).
TARGET_CONNECTIONS = 64
#: Requests per probe the engine may run at once, each probe's own share: /health first, then
#: its chains, this many at a time, so one probe of a hundred hanging chains cannot hold the
#: slots of the probes beside it.
REQUESTS_PER_PROBE = 4


class EngineProber:
    """Polls single nodes on demand through an engine of its own, kept across reloads."""

    def __init__(
        self,
        max_in_flight: int,
        max_bytes: int,
        max_chains: int,
        monotonic: Callable[[], float] = time.monotonic,
        bounds: Bounds = DEFAULT_BOUNDS,
    ) -> None:
        self._engine = Engine(
            max_in_flight * REQUESTS_PER_PROBE,
            f"ledger-exporter/{__version__}",
            TARGET_CONNECTIONS,
        )
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._max_chains = max_chains
        self._bounds = bounds
        self._monotonic = monotonic

    def configure(
        self, max_in_flight: int, max_bytes: int, max_chains: int, bounds: Bounds = DEFAULT_BOUNDS
    ) -> None:
        """A reload's limits, for the probes that start from now on (running ones keep theirs)."""
        with self._lock:
            self._max_bytes, self._max_chains, self._bounds = max_bytes, max_chains, bounds
        self._engine.resize(TARGET_CONNECTIONS, max_in_flight * REQUESTS_PER_PROBE)

    def probe_node(
        self, node: NodeConfig, deadline: float, trace: RequestTrace | None = None
    ) -> NodeResult:
        """Poll ``node`` now: its health and chains, every request ending by ``deadline``
        (and recorded in ``trace``, if given)."""
        with self._lock:
            max_bytes, max_chains, bounds = self._max_bytes, self._max_chains, self._bounds
        client = NodeClient(self._engine, node, max_bytes, self._monotonic, trace)
        countdown = Countdown(1)
        # nothing cross-node: no checkpoint blocks, no shared values
        poll = NodePoll(
            node,
            client,
            max_chains,
            BlockPlan(),
            ended=countdown.count_down,
            bounds=bounds,
            max_in_flight=REQUESTS_PER_PROBE,
        )
        poll.start(deadline, self._monotonic())
        countdown.wait(max(0.0, deadline + DEADLINE_GRACE_SECONDS - self._monotonic()))
        return poll.result(self._monotonic())

    def close(self) -> None:
        """Fail what is still out and end the engine's thread."""
        self._engine.close()
