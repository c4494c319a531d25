"""The immutable result of one polling cycle: everything the writer and status page show.

A snapshot is built once at the end of a cycle and swapped in whole, so a scrape never sees
half a cycle and never causes a request to a node.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from exporter.config.maintenance import MaintenanceEntry
from exporter.model.fields import ChainReading, HealthReading
from exporter.model.identity import Mismatch
from exporter.model.network import NetworkView
from exporter.model.storage import counts_of
from exporter.model.transport import TransportStatus
from exporter.model.watch_readings import WatchStatus


class CycleStage(Enum):
    """A step of the polling cycle that a failure is caught in, by the smallest part that can
    be left out alone: the ``stage`` label of ``ledger_exporter_cycle_failures_total``."""

    NODE = "node"  # one node's results read into its status: that node reads as down
    NETWORK = "network"  # the cross-node view: its series are left out this cycle
    WATCH = "watch"  # the watched contracts and wallets: left out this cycle
    MAINTENANCE = "maintenance"  # one maintenance entry: it does not apply this cycle
    CYCLE = "cycle"  # the cycle as a whole: the last snapshot stays, growing older


@dataclass(frozen=True, slots=True)
class ErrorCounts:
    """A node's cumulative failed requests per (endpoint, reason), iterated as (endpoint,
    reason, count). Compact because every node has a dozen or more: the key tuple is shared
    by all nodes with the same endpoints, and the counts are packed (storage.pack_counts)."""

    keys: tuple[tuple[str, str], ...] = ()
    counts: bytes = b""  # a count per key, as exporter.model.storage packs them

    def __iter__(self) -> Iterator[tuple[str, str, int]]:
        counts = counts_of(self.counts)
        return ((e, r, count) for (e, r), count in zip(self.keys, counts, strict=True))


@dataclass(frozen=True, slots=True)
class LeaderCounts:
    """Failed rounds per leader key, iterated as (key, count) in key order: the council's
    keys (at 0 until a failure) and other leaders from their first failure; the counts are
    packed (storage.pack_counts), none while every count is 0 (the shared council tuple is
    then all)."""

    leaders: tuple[str, ...] = ()
    counts: bytes = b""  # a count per key, as exporter.model.storage packs them; empty: all 0

    def __iter__(self) -> Iterator[tuple[str, int]]:
        if not self.counts:  # no failed round yet: no array kept (the common case)
            return ((leader, 0) for leader in self.leaders)
        return zip(self.leaders, counts_of(self.counts), strict=True)


@dataclass(frozen=True, slots=True)
class ConsensusStatus:
    """One chain of one node followed across cycles (docs/metrics.md, "Consensus health"): the
    oldest open vote session's age (None: none open), and the exporter's own counters of
    rounds, failed rounds per leader and council changes since it first read the chain;
    for the status page, the last ``consensusRequired`` and each leader's recent failures."""

    session_age: float | None
    round_changes: int
    council_changes: int
    leader_failures: LeaderCounts
    #: the last consensusRequired the node reported and when (the quorum's votes needed)
    last_required: tuple[float, float] | None = None
    #: per leader with a recent failed round, when they failed (the status page's window)
    recent_failures: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """One chain of one node in this cycle; ``reading`` is None when it could not be read."""

    blockchain: str
    reading: ChainReading | None
    error: str | None = None
    height_changed_at: float | None = None  # monotonic, like every time of the snapshot
    blocks_behind: float | None = None
    #: how long ago the chain's head first reached one above this node's height (0 at the
    #: head; exporter.poll.head_clock)
    behind_seconds: float | None = None
    syncing_since: float | None = None  # first cycle of the node's unbroken run of syncing
    consensus: ConsensusStatus | None = None  # followed across cycles (the daemon's only)
    #: another hash read for a height whose hash was read before (None: no block read yet)
    reorgs: int | None = None

    @property
    def up(self) -> bool:
        return self.reading is not None


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node in this cycle, with its cumulative error counts and last success time."""

    name: str
    labels: tuple[tuple[str, str], ...]
    health: HealthReading | None
    error: str | None
    chains: tuple[ChainStatus, ...]
    duration: float
    last_success: float | None  # monotonic, like every time of the snapshot
    error_counts: ErrorCounts = ErrorCounts()
    dropped: tuple[int, ...] = ()  # values dropped since start, per bounds.DropKind, in order
    # answers whose Retry-After held the node's polls back since start; None in a probe
    retry_afters: int | None = None
    # this cycle's /health answered as another node than the config pins: not trusted
    identity: Mismatch | None = None
    # a down node's chains as it last read them, (blockchain, height): the status page keeps
    # them in view, unknown, while the node is down (no series are exported for them)
    last_chains: tuple[tuple[str, float], ...] = ()
    # the last TLS handshake and each kind of request's last phases, while up; None in a probe
    transport: TransportStatus | None = None

    @property
    def up(self) -> bool:
        return self.health is not None


@dataclass(frozen=True)
class Snapshot:
    """All nodes after one cycle. ``completed_at`` is None until the first cycle has ended.

    Its times (``completed_at``, a node's ``last_success``, a chain's ``height_changed_at``
    and ``syncing_since``, the consensus times) are on the monotonic clock, so every age is a
    difference of two of them, whatever the wall clock does; ``wall_offset`` (wall clock
    minus monotonic clock) turns one into the Unix time exported (:meth:`unix_time`).
    ``config_reload_success_at`` alone is a Unix time (the reload's, exported as it is)."""

    nodes: tuple[NodeStatus, ...] = ()
    cycle_duration: float | None = None
    completed_at: float | None = None  # time.monotonic() at the end of the cycle
    cycle_timeout: float | None = None  # the cycle's deadline: the config's scrape_timeout
    state_file_write_failures: int | None = None  # since start; None without a state file
    config_reload_ok: bool = True
    config_reload_success_at: float | None = None  # Unix time of the last good config load
    network: NetworkView = field(default_factory=NetworkView)
    watch: WatchStatus = field(default_factory=WatchStatus)  # watched objects, node by node
    config_reload_problems: tuple[str, ...] = ()  # why the last reload failed (secret-free)
    probe_mode: bool = False  # the config has a probe section: /probe is served
    wall_offset: float = 0.0  # time.time() - time.monotonic(), re-based when the clock steps
    #: The config's maintenance entries that applied at the end of the cycle (wall clock).
    maintenance: tuple[MaintenanceEntry, ...] = ()
    #: Failures caught inside cycles since start, per CycleStage in its order (empty: none
    #: counted here, as in a probe)
    cycle_failures: tuple[int, ...] = ()
    #: How old (seconds since ``completed_at``) this snapshot may grow before it is stale:
    #: /-/ready fails and its node series are dropped (None: never, as in a probe)
    stale_after: float | None = None
    #: True when this is a stale snapshot served with its node series dropped
    stale: bool = False

    def is_stale_at(self, mono: float) -> bool:
        """Whether this snapshot is older than ``stale_after`` at ``mono`` (monotonic)."""
        if self.completed_at is None or self.stale_after is None:
            return False
        return mono - self.completed_at > self.stale_after

    def unix_time(self, mono: float | None) -> float | None:
        """A monotonic time of this snapshot as the Unix time exported (None stays None)."""
        return None if mono is None else on_wall_clock(mono, self.wall_offset)


def on_wall_clock(mono: float, wall_offset: float) -> float:
    """``mono`` as a Unix time: exported so, and so kept in the state file."""
    return mono + wall_offset


def wall_offset(wall: float, mono: float) -> float:
    """The wall clock minus the monotonic clock, in steps of 2**-20 s (about a microsecond):
    a time through the state file (plus one offset, minus the next process's) then comes
    back as the very float exported before, so an unchanged memory leaves the file unwritten.
    (Such a step is a multiple of the float spacing of every Unix time since 2004 and of
    every monotonic time under 68 years, so both subtractions and the sum are exact.)"""
    return round((wall - mono) * 2**20) / 2**20
