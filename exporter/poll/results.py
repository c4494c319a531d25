"""What one poll of a node produced: its readings, or the errors that stand in for them.

Plain data, read by the history (the daemon's cycle) or straight into a status (a probe). A
failure is a :class:`FetchError` whose :class:`Reason` is the ``reason`` label of
``ledger_node_scrape_errors_total``; whatever goes wrong while reading an answer becomes one
(:func:`as_fetch_error`), so a poll's every part ends with a reading or an error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from exporter.config.nodes import NodeConfig
from exporter.errors import LedgerExporterError
from exporter.model.fields import ChainReading, HealthReading
from exporter.model.identity import Mismatch
from exporter.model.readings import InvalidResponseError
from exporter.model.transport import TransportStatus
from exporter.model.watch_readings import Reading, WatchRequest

log = logging.getLogger("ledger_exporter")


class Reason(Enum):
    """Why a request failed: the ``reason`` label of ``ledger_node_scrape_errors_total``."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP_STATUS = "http_status"
    INVALID_JSON = "invalid_json"
    INVALID_RESPONSE = "invalid_response"
    TOO_LARGE = "too_large"
    TLS = "tls"  # the TLS handshake failed (the detail says why)
    # the node's certificate failed verification (expired, not yet valid, unknown issuer,
    # another host's): never retried without verification
    CERTIFICATE = "certificate"
    #: the node answered as another node than its ``expect`` pins: not trusted, read as down
    IDENTITY_MISMATCH = "identity_mismatch"


class FetchError(LedgerExporterError):
    """A request to a node failed; ``reason`` classifies it, the message explains it.
    ``retry_after``: the seconds a 429 or 503 answer's ``Retry-After`` asked to wait (0: none)."""

    def __init__(self, reason: Reason, detail: str, retry_after: float = 0.0) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after


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
    recheck_height: int | None = None  # a height read before, asked again (block_hashes.py)
    recheck_hash: str | None = None
    recheck_error: FetchError | None = None


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
    asked: bool = True  # False: not asked this cycle (its Retry-After holds), nothing counted
    mismatch: Mismatch | None = None  # its /health answered as another node (error says so)
    transport: TransportStatus | None = None  # the last handshake and phases (daemon only)

    def asked_for_time(self) -> FetchError | None:
        """The 429 or 503 answer of this poll that asked for the longest wait
        (``Retry-After``); None when none did."""
        errors = [self.error, *(w.error for w in self.watch)]
        errors += [e for c in self.chains for e in (c.error, c.block_error, c.recheck_error)]
        waits = [e for e in errors if e is not None and e.retry_after > 0]
        return max(waits, key=lambda error: error.retry_after, default=None)


def describe(error: FetchError | None) -> str | None:
    """The error as a status and the log show it, ``reason: detail``; None for no error."""
    return None if error is None else f"{error.reason.value}: {error.detail}"


def as_fetch_error(error: Exception, what: str) -> FetchError:
    """A fresh error without a traceback: a traceback keeps the request's frames, and with
    them a refused body of up to max_response_bytes, alive until the next GC. An unexpected
    error is logged with its traceback and named by type only (its message may quote the
    node's answer)."""
    if isinstance(error, FetchError):
        return FetchError(error.reason, error.detail, error.retry_after)
    if isinstance(error, InvalidResponseError):
        return FetchError(Reason.INVALID_RESPONSE, str(error))
    log.error("unexpected failure while reading %s", what, exc_info=error)
    return FetchError(Reason.INVALID_RESPONSE, f"unexpected {type(error).__name__} reading {what}")


def exporter_failure(kind: str) -> FetchError:
    """What stands for a node's results when the exporter itself failed reading them (an
    exception of type ``kind`` caught by the cycle): the node reads as down, not asked (so
    no scrape error is counted against it), the failure counted as the exporter's own."""
    return FetchError(
        Reason.INVALID_RESPONSE,
        f"the exporter failed reading this node's results ({kind}): see its log and"
        " ledger_exporter_cycle_failures_total",
    )


@dataclass(frozen=True, slots=True)
class TracedRequest:
    """One request a traced poll made: its URL path and query (never the scheme, host or
    user-info), when it started and ended (``time.monotonic()``), the HTTP status and body
    size when an answer came, and why it failed (``describe``), if it did."""

    path: str
    started: float
    ended: float
    status: int | None = None
    size: int | None = None
    error: str | None = None


class RequestTrace:
    """The requests of one poll, in the order they ended (``/probe?debug=true`` shows them).
    Recorded from the engine's thread, read once the poll is over."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self.started = monotonic()
        self._lock = threading.Lock()
        self._requests: list[TracedRequest] = []

    def record(self, request: TracedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[TracedRequest]:
        """What has been recorded so far."""
        with self._lock:
            return list(self._requests)
