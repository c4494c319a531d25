"""One node's watch requests in one cycle: planned from its /health, read as each one ends.

The node's poll (exporter/poll/node.py) sends what :meth:`WatchPoll.plan` returns with the
callbacks of :meth:`WatchPoll.reader`, under the cycle's deadline, and is done only when
:attr:`WatchPoll.pending` is false; what was not answered by then counts as timed out. A
request whose answer cannot be read, whatever raises, ends with an error all the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any

from exporter.bounds import DEFAULT_BOUNDS, Bounds
from exporter.config.watchlist import WatchConfig
from exporter.model.watch_readings import (
    WatchRequest,
    WatchStatus,
    plan_requests,
    read_answer,
    watched_object,
)
from exporter.poll.results import FetchError, NodeResult, WatchResult, as_fetch_error


class WatchPoll:
    """The watch requests to one node in one cycle and their outcomes, in plan order."""

    def __init__(
        self,
        watch: WatchConfig,
        node: str,
        bounds: Bounds = DEFAULT_BOUNDS,
    ) -> None:
        self._watch = watch
        self._node = node
        self._bounds = bounds
        self._lock = threading.Lock()
        self._results: dict[WatchRequest, WatchResult] = {}

    def plan(self, chains: Collection[str]) -> tuple[WatchRequest, ...]:
        """The requests for the ``chains`` the node's /health listed, registered as pending
        (before any is sent, so the poll cannot end between two of them)."""
        requests = plan_requests(self._watch, self._node, chains)
        with self._lock:
            self._results = {request: WatchResult(request) for request in requests}
        return requests

    def reader(self, request: WatchRequest, ended: Callable[[], None]) -> WatchAnswer:
        """The callback of ``request``: keep its reading or its error, then call ``ended``."""
        return WatchAnswer(self, request, ended)

    def answered(self, request: WatchRequest, document: Any, error: FetchError | None) -> None:
        """Keep the reading of ``request``'s answer, or the error that it could not be read."""
        if error is not None:  # not raised here: see NodePoll.chain_answered
            result = WatchResult(request, None, as_fetch_error(error, _what(request)))
        else:
            try:
                result = WatchResult(request, read_answer(request, document, self._bounds))
            except Exception as failure:
                result = WatchResult(request, None, as_fetch_error(failure, _what(request)))
        self._keep(result)

    def failed(self, request: WatchRequest, error: FetchError) -> None:
        """``request`` ended with ``error``."""
        self._keep(WatchResult(request, None, error))

    def _keep(self, result: WatchResult) -> None:
        with self._lock:
            self._results[result.request] = result

    def abandon(self, error: FetchError) -> None:
        """End every request still pending with ``error`` (the node's poll ends without them;
        an answer that comes later still overwrites its outcome)."""
        with self._lock:
            for request, result in self._results.items():
                if not result.ended:
                    self._results[request] = result.late(error)

    @property
    def pending(self) -> bool:
        """A planned request has not ended yet."""
        with self._lock:
            return any(not result.ended for result in self._results.values())

    def results(self, late: FetchError) -> list[WatchResult]:
        """Every outcome so far; a request still out fails with ``late``."""
        with self._lock:
            return [r if r.ended else r.late(late) for r in self._results.values()]


class WatchAnswer:
    """The callback of one watch request: its outcome kept, then ``ended`` called, whether
    reading the answer worked, failed or raised (through ``fail``)."""

    __slots__ = ("_ended", "_poll", "_request")

    def __init__(self, poll: WatchPoll, request: WatchRequest, ended: Callable[[], None]) -> None:
        self._poll, self._request, self._ended = poll, request, ended

    @property
    def what(self) -> str:
        return _what(self._request)

    def __call__(self, document: Any, error: FetchError | None) -> None:
        self._poll.answered(self._request, document, error)
        self._ended()

    def fail(self, error: FetchError) -> None:
        self._poll.failed(self._request, error)
        self._ended()


def _what(request: WatchRequest) -> str:
    return f"the {request.kind.value.replace('_', ' ')} answer"


def watch_status(results: Sequence[NodeResult]) -> WatchStatus:
    """Every watched object of the cycle, node by node in config order, each in plan order."""
    return WatchStatus(
        tuple(watched_object(w.request, r.node.labels, w.reading) for r in results for w in r.watch)
    )
