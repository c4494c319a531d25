"""When each chain's head first reached each recent height, on the exporter's clock: what
``ledger_blockchain_behind_seconds`` is read from.

Per chain, one short record of the cycles in which the highest height among the nodes
reading the chain rose: (the height reached, the cycle's monotonic time). Every height
between the previous top and that one was first reached in that cycle, so how long ago the
head first reached ``h`` is the time of the first entry at or above ``h``: one bisection.
A cycle whose highest height is not above the top adds nothing (the head node went away,
or nothing moved), so heights arriving out of order, and nodes leaving, never move a first
sighting later.

Memory is bounded per chain, not per node: at most ``HEAD_RISES_PER_CHAIN`` entries
(:mod:`exporter.bounds`), two doubles each. When the record is full, every other entry of
its older half is dropped: recent heights keep the poll's resolution and older ones a
resolution that coarsens with their age (a dropped entry's heights are counted from the next
entry kept, so a lag is never overstated). A height older than the oldest entry counts from
the oldest entry: the lag is then *at least* what is reported, as it is for heights reached
before the exporter first saw the chain (a state file carries the record across restarts).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping

from exporter.bounds import HEAD_RISES_PER_CHAIN as ENTRIES_PER_CHAIN
from exporter.poll.state import HeadRecord as Record


class _Chain:
    """One chain's rises: heights strictly rising, each with its cycle's time."""

    __slots__ = ("heights", "times")

    def __init__(self) -> None:
        self.heights = array("d")
        self.times = array("d")

    def rise(self, height: float, now: float) -> None:
        """Note that the head reached ``height`` at ``now`` if it is above the top."""
        if self.heights and height <= self.heights[-1]:
            return
        if len(self.heights) >= ENTRIES_PER_CHAIN:
            self._compact()
        self.heights.append(height)
        self.times.append(now)

    def _compact(self) -> None:
        """Drop every other entry of the older half (the oldest entry stays: it bounds the
        lag reported for anything older)."""
        half = len(self.heights) // 2
        keep = [*range(0, half, 2), *range(half, len(self.heights))]
        self.heights = array("d", (self.heights[i] for i in keep))
        self.times = array("d", (self.times[i] for i in keep))

    def first_reached(self, height: float) -> float | None:
        """When the head first reached ``height`` (the oldest entry's time for a height at or
        below it); None when the head never did."""
        index = bisect_left(self.heights, height)
        if index == len(self.heights):
            return None
        return self.times[index]


class HeadClock:
    """Per chain, when its head first reached each recent height (module docstring)."""

    def __init__(self, restored: Mapping[str, Record] | None = None, offset: float = 0.0) -> None:
        """``restored``: records on another clock (the state file's wall clock); ``offset``
        is subtracted from each time to bring it onto this process's monotonic clock."""
        self._chains: dict[str, _Chain] = {}
        for chain, record in (restored or {}).items():
            kept = _Chain()
            for height, at in sorted(record)[-ENTRIES_PER_CHAIN:]:
                kept.rise(height, at - offset)
            if kept.heights:
                self._chains[chain] = kept

    def advance(self, highest: Mapping[str, float], now: float) -> None:
        """One cycle's highest height per chain (among the nodes that read it), at ``now``."""
        for chain, height in highest.items():
            kept = self._chains.get(chain)
            if kept is None:
                kept = self._chains[chain] = _Chain()
            kept.rise(height, now)

    def behind(self, chain: str, height: float, highest: float, now: float) -> float | None:
        """How long ago the head of ``chain`` first reached one above ``height``: 0 for a
        node at this cycle's ``highest``; None when the chain has no record."""
        if height >= highest:
            return 0.0
        kept = self._chains.get(chain)
        reached = None if kept is None else kept.first_reached(height + 1)
        return None if reached is None else max(0.0, now - reached)

    def keep(self, chains: Iterable[str]) -> None:
        """Forget the chains not in ``chains`` (no configured node remembers them)."""
        wanted = set(chains)
        if not self._chains.keys() <= wanted:
            self._chains = {c: kept for c, kept in self._chains.items() if c in wanted}

    def records(self, offset: float = 0.0) -> dict[str, Record]:
        """Every chain's record, each time plus ``offset`` (onto the wall clock)."""
        return {
            chain: tuple(
                (height, at + offset) for height, at in zip(kept.heights, kept.times, strict=True)
            )
            for chain, kept in self._chains.items()
        }
