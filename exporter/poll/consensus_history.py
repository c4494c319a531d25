"""One node's chain followed from cycle to cycle (docs/metrics.md, "Consensus health").

The history keeps a :class:`ChainConsensus` per node and chain: the vote sessions open at the
last read (id -> first sighting and the session as read), the exporter's counters of rounds,
failed rounds per leader and council changes, and the last council set. Only the sessions
open now are remembered, at most ``max_vote_sessions_per_chain`` of them (the reader's
bound); leader counters at most ``max_leaders_per_chain``. A restart keeps the first
sightings through the state file, and only for sessions the node still reports.

Every time here (first sightings, failures, the last ``consensusRequired``) is on the
monotonic clock (``time.monotonic()``), so a wall-clock step neither ages nor hides a session.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.model.fields import VOTE_CONSENSUS_REQUIRED, ChainReading, VoteSession
from exporter.model.snapshot import ConsensusStatus, LeaderCounts
from exporter.model.storage import pack_counts

#: How long, and how many, failed rounds of a leader are remembered with their times, for
#: the status page's "failing leader" (LedgerLeaderFailingRounds counts 3 in 15 minutes;
#: tests/web/test_status_page_consensus.py ties the two).
RECENT_FAILURE_SECONDS = 3600.0
RECENT_FAILURES_KEPT = 16
#: Where the counters stop: a node may send any round, and a leap past this (a round of
#: 1e300) would not fit the packed counts; nor may a leap be stored a failure at a time.
MAX_COUNT = 2**64 - 1

#: Where a reading keeps the highest ``consensusRequired`` (an IntEnum member looked up once).
#: A remembered open session: when the exporter first saw it, and how it was last read
#: (None: restored from the state file, not read yet by this process).
Seen = tuple[float, VoteSession | None]


class ChainConsensus:
    """What is remembered of one node's chain between cycles, for its consensus series."""

    __slots__ = (
        "council",
        "council_changes",
        "failures",
        "leader_counts",
        "paired",
        "recent",
        "required",
        "round_changes",
        "sessions",
    )

    def __init__(self, first_seen: Mapping[str, float] | None = None) -> None:
        self.sessions: dict[str, Seen] = {sid: (at, None) for sid, at in (first_seen or {}).items()}
        self.paired = False  # the last poll read this chain: its rounds pair with the next
        self.round_changes = 0
        self.council: frozenset[str] | None = None  # the set of the last successful read
        self.council_changes = 0
        self.failures: dict[str, int] = {}  # leader key -> failed rounds (only keys with one)
        self.recent: dict[str, tuple[float, ...]] = {}  # leader key -> its recent failures
        self.required: tuple[float, float] | None = None  # last consensusRequired, when
        self.leader_counts = LeaderCounts()  # the last cycle's, kept while it holds

    def follow(
        self, reading: ChainReading, now_mono: float, leader_limit: int
    ) -> tuple[ConsensusStatus, int]:
        """Fold one successful read in at ``now_mono``; the chain's status, and how many leader
        keys had no room under ``leader_limit``."""
        if self.recent:  # the usual case: no leader failed lately
            self._forget_old_failures(now_mono)
        dropped = self._count_rises(reading, now_mono, leader_limit) if self.paired else 0
        before = self.sessions
        self.sessions = {
            s.session_id: (now_mono if (seen := before.get(s.session_id)) is None else seen[0], s)
            for s in reading.sessions
        }
        self.paired = True
        if reading.council is not None:
            if self.council is not None and reading.council != self.council:
                self.council_changes += 1
            self.council = reading.council
        required = reading.gauge(VOTE_CONSENSUS_REQUIRED)
        if required is not None:
            self.required = (required, now_mono)
        dropped += self._trim(reading.leaders, leader_limit)
        oldest = min([at for at, _ in self.sessions.values()], default=None)
        return (
            ConsensusStatus(
                session_age=None if oldest is None else max(0.0, now_mono - oldest),
                round_changes=self.round_changes,
                council_changes=self.council_changes,
                leader_failures=self._leader_counts(reading.leaders),
                last_required=self.required,
                recent_failures=tuple(self.recent.items()) if self.recent else (),
            ),
            dropped,
        )

    def missed(self) -> None:
        """The chain was not read this cycle: the next read's rounds pair with nothing (its
        sessions' first sightings and the counters stay)."""
        self.paired = False

    def first_sightings(self) -> dict[str, float]:
        """Each open session's first sighting, for the state file."""
        return {sid: at for sid, (at, _) in self.sessions.items()}

    def _forget_old_failures(self, now_mono: float) -> None:
        """Keep only the failures of the last RECENT_FAILURE_SECONDS."""
        since = now_mono - RECENT_FAILURE_SECONDS
        for leader, times in list(self.recent.items()):
            kept = tuple(at for at in times if at > since)
            if kept:
                self.recent[leader] = kept
            else:
                del self.recent[leader]

    def _count_rises(self, reading: ChainReading, now_mono: float, leader_limit: int) -> int:
        """Add each session's rise in round since the last read (a fall, a session seen once
        or a round not read adds nothing) to the rounds and to the leader it had then."""
        dropped = 0
        for session in reading.sessions:
            seen = self.sessions.get(session.session_id)
            before = seen[1] if seen is not None else None
            if before is None or before.round is None or session.round is None:
                continue
            rise = min(int(session.round - before.round), MAX_COUNT)
            if rise <= 0:
                continue
            self.round_changes = min(self.round_changes + rise, MAX_COUNT)
            if before.leader is None:
                continue
            if self._blame(before.leader, rise, reading.leaders, leader_limit):
                dropped += 1
                continue
            times = self.recent.get(before.leader, ()) + (now_mono,) * min(
                rise, RECENT_FAILURES_KEPT
            )
            self.recent[before.leader] = times[-RECENT_FAILURES_KEPT:]
        return dropped

    def _blame(self, leader: str, rise: int, council: tuple[str, ...], limit: int) -> int:
        """Count ``rise`` failed rounds against ``leader``; 1 when it has no room (a leader
        outside the council, with every series the bound allows already taken)."""
        if leader not in self.failures and leader not in council:
            others = sum(1 for key in self.failures if key not in council)
            if len(council) + others >= limit:
                return 1
        self.failures[leader] = min(self.failures.get(leader, 0) + rise, MAX_COUNT)
        return 0

    def _trim(self, council: tuple[str, ...], limit: int) -> int:
        """Forget the oldest other leaders when a council change leaves more series than
        ``limit``; how many were forgotten."""
        if not self.failures:  # the usual case: nothing to forget
            return max(0, len(council) - limit)
        others = [key for key in self.failures if key not in council]
        surplus = len(council) + len(others) - limit
        for key in others[: max(0, surplus)]:
            del self.failures[key]
            self.recent.pop(key, None)
        return max(0, surplus)

    def _leader_counts(self, council: tuple[str, ...]) -> LeaderCounts:
        """The council's keys (by name, at 0 until a failure), then the other leaders; the
        last cycle's object while no leader failed and the council's keys are the same (a
        tuple of the same interned keys compares at C speed: cheaper than a new object)."""
        if not self.failures:  # no array of zeros per chain and cycle
            if self.leader_counts.leaders != council or self.leader_counts.counts:
                self.leader_counts = LeaderCounts(council)
            return self.leader_counts
        others = sorted(key for key in self.failures if key not in council)
        keys = council + tuple(others) if others else council
        return LeaderCounts(keys, pack_counts(self.failures.get(key, 0) for key in keys))
