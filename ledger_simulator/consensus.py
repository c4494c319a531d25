"""How one chain's consensus unfolds in a node's view: heights, vote sessions, rounds, leaders
and the council, from the network's pace and the consensus faults in force.

Healthy, a block is minted every block interval. The vote session for the next height opens a
fifth of an interval after a mint and its rounds share the rest of the interval: a leader fails
about one height in four (the round climbs and the next member leads), two in a row one height
in ten, never more (``HEALTHY_FAILURES``: a healthy session agrees by round 3, so the alert on
escalating rounds, above 3, never goes even pending without a fault), and round ``i`` (from
0) of height ``h`` is led by ``council[(h + i) % len(council)]``. The faults bend this:

- ``leader_failing``: in a session opening after the switch where a failing member has a
  turn, every round runs to the round timer: the member's rounds time out, and the round that
  agrees commits at the end of its timer, so that block comes later (never, when every member
  of the council fails).
- ``session_stuck``: the chain stops at the height it has at the switch; the session for the
  next height never closes, a new round under the next leader every round timer.
- ``idle``: the chain stops at the height it has at the switch, and no session opens.
- ``council_change``: from the switch, one member is replaced (see ``SimState.councils``);
  sessions opening after it rotate over the new council, whose size sets consensusRequired.

The round timer is the chain's ``consensusTimeout`` in the simulation's time (see
``settings.round_timeout``) unless a fault sets one. Everything is a function of the faults in
force and the time, so a fault switched off leaves no trace: the chain is at once where it
would have been without it, as after ``stall``.
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass, replace

from ledger_simulator.ids import unit

SESSION_OPENS = 0.2  # fraction of a block interval after a mint when the next session opens
#: The share of heights where at least 1, 2 ... leaders fail in turn on a healthy chain. Two
#: at most: a healthy session agrees by round 3, where LedgerVoteRoundsEscalating (above 3)
#: starts; a third failure, drawn now and then, had that alert pending on healthy networks.
HEALTHY_FAILURES = (0.25, 0.10)
STAGES = 3  # propose, vote, commit
#: (switch time, failing member) of each leader_failing in force, sorted.
Failing = tuple[tuple[float, int], ...]


@dataclass(frozen=True)
class Pace:
    """A chain's healthy pace: block ``base`` at ``genesis``, one block per ``interval``, and
    the round timer of its consensus."""

    seed: int
    chain: int
    interval: float
    genesis: float
    base: int
    round_timer: float

    def grid_height(self, moment: float) -> int:
        """The healthy chain's height at ``moment``."""
        return max(0, self.base + math.floor((moment - self.genesis) / self.interval))

    def grid_mint(self, height: int) -> float:
        """When the healthy chain mints ``height``."""
        return self.genesis + (height - self.base) * self.interval

    def natural_failures(self, height: int) -> int:
        """Leaders that fail, healthy, before ``height`` is agreed (each adds a round)."""
        draw = unit(self.seed, "rounds", self.chain, height)
        return sum(draw >= 1.0 - share for share in HEALTHY_FAILURES)


@dataclass(frozen=True)
class Councils:
    """The chain's council over time: the deployed one, then one step per council change
    (switch time, the council from then on), in switch order."""

    deployed: tuple[int, ...]
    steps: tuple[tuple[float, tuple[int, ...]], ...] = ()

    def at(self, moment: float) -> tuple[int, ...]:
        """The council in force at ``moment``."""
        council = self.deployed
        for since, changed in self.steps:
            if since <= moment:
                council = changed
        return council


@dataclass(frozen=True)
class Layout:
    """The vote session for one height: when it opens, when each round starts, when its
    planned rounds end (the mint, when it mints), the council it rotates over, and the round
    timer that paces rounds past the plan (a session that never closes)."""

    height: int
    opens: float
    starts: tuple[float, ...]
    end: float
    council: tuple[int, ...]
    timer: float
    mints: bool = True

    @property
    def failed(self) -> int:
        """Rounds that fail before the last planned one (which agrees, when it mints)."""
        return len(self.starts) - 1

    @property
    def required(self) -> int:
        """Votes required: two thirds of the council, plus one."""
        return len(self.council) * 2 // 3 + 1

    def leader(self, round_index: int) -> int:
        """The member leading round ``round_index`` (from 0): the next one each round."""
        return self.council[(self.height + round_index) % len(self.council)]

    def position(self, moment: float) -> tuple[int, int] | None:
        """(round index, stage) at ``moment``; None before the session opens or once minted."""
        if moment < self.opens:
            return None
        if moment < self.end:
            index = bisect.bisect_right(self.starts, moment) - 1
            start = self.starts[index]
            stop = self.starts[index + 1] if index + 1 < len(self.starts) else self.end
        elif self.mints:
            return None
        else:
            extra = math.floor((moment - self.end) / self.timer)
            index = len(self.starts) + extra
            start = self.end + extra * self.timer
            stop = start + self.timer
        stage = min(int((moment - start) / (stop - start) * STAGES), STAGES - 1)
        return index, stage


def plan(pace: Pace, councils: Councils, failing: Failing, height: int, previous: float) -> Layout:
    """The session for ``height`` when ``height - 1`` was minted at ``previous``: healthy,
    unless a member failing at its opening has a turn before a leader agrees."""
    opens = previous + SESSION_OPENS * pace.interval
    council = councils.at(opens)
    size, timer = len(council), pace.round_timer
    down = {member for since, member in failing if since <= opens}
    natural = pace.natural_failures(height)
    leaders = [council[(height + i) % size] for i in range(natural + size)]
    if leaders[0] not in down:  # healthy; a failing member due to agree fails, quickly
        agreeing = next(i for i in range(natural, len(leaders)) if leaders[i] not in down)
        share = (1.0 - SESSION_OPENS) * pace.interval / (agreeing + 1)
        starts = tuple(opens + i * share for i in range(agreeing + 1))
        return Layout(height, opens, starts, previous + pace.interval, council, timer)
    agrees = next((i for i in range(size) if leaders[i] not in down), None)
    if agrees is None:  # every member fails: no round ever agrees
        return Layout(height, opens, (opens,), opens + timer, council, timer, mints=False)
    # The failing members' rounds time out, and the round that agrees runs its timer too.
    starts = tuple(opens + i * timer for i in range(agrees + 1))
    end = max(opens + (agrees + 1) * timer, previous + pace.interval)
    return Layout(height, opens, starts, end, council, timer)


class Schedule:
    """When each height is minted from ``anchor`` on while members fail as leaders: planned
    height by height, grown on demand, shared by every view with the same faults."""

    def __init__(self, pace: Pace, councils: Councils, failing: Failing, anchor: int) -> None:
        self.pace = pace
        self.councils = councils
        self.failing = failing
        self.anchor = anchor
        self._mints = [pace.grid_mint(anchor)]
        self._stopped = False
        self._lock = threading.Lock()

    def layout(self, height: int) -> Layout:
        """The session for ``height`` (above the anchor)."""
        return plan(self.pace, self.councils, self.failing, height, self.mint(height - 1))

    def mint(self, height: int) -> float:
        """When ``height`` (the anchor or above) is minted; infinity when it never is."""
        with self._lock:
            while self.anchor + len(self._mints) <= height and self._grow():
                pass
            index = height - self.anchor
            return self._mints[index] if index < len(self._mints) else math.inf

    def height_at(self, moment: float) -> int:
        """The height at ``moment``."""
        if moment < self._mints[0]:
            return self.pace.grid_height(moment)
        with self._lock:
            while self._mints[-1] <= moment and self._grow():
                pass
            return self.anchor + bisect.bisect_right(self._mints, moment) - 1

    def _grow(self) -> bool:
        """Plan one more height; False once no height is minted any more."""
        if self._stopped:
            return False
        height = self.anchor + len(self._mints)
        layout = plan(self.pace, self.councils, self.failing, height, self._mints[-1])
        if not layout.mints:
            self._stopped = True
            return False
        self._mints.append(layout.end)
        return True


@dataclass(frozen=True)
class Stop:
    """The chain stopped at ``height`` at ``since``: with its next session open for good
    (``session_stuck``), or with nothing to do (``idle``)."""

    height: int
    since: float
    session: bool


@dataclass(frozen=True)
class Timeline:
    """Heights, sessions and councils of one chain under the consensus faults in force."""

    pace: Pace
    councils: Councils
    schedule: Schedule | None = None
    stop: Stop | None = None

    def stopped(self, since: float, session: bool) -> Timeline:
        """This timeline stopped at the height it has at ``since``."""
        return replace(self, stop=Stop(self.height_at(since), since, session))

    def height_at(self, moment: float) -> int:
        """The chain's height at ``moment``."""
        if self.schedule is not None:
            height = self.schedule.height_at(moment)
        else:
            height = self.pace.grid_height(moment)
        return height if self.stop is None else min(height, self.stop.height)

    def mint(self, height: int) -> float:
        """When ``height`` was minted."""
        if self.schedule is not None and height > self.schedule.anchor:
            return self.schedule.mint(height)
        return self.pace.grid_mint(height)

    def layout(self, height: int) -> Layout:
        """The vote session for ``height``."""
        if self.schedule is not None and height > self.schedule.anchor:
            layout = self.schedule.layout(height)
        else:
            layout = plan(self.pace, self.councils, (), height, self.pace.grid_mint(height - 1))
        stop = self.stop
        if stop is not None and stop.session and height == stop.height + 1:
            return replace(layout, mints=False)
        return layout

    def session_at(self, moment: float) -> tuple[Layout, int, int] | None:
        """The open session at ``moment`` with its round index and stage, if one is open."""
        if self.idle_at(moment):
            return None
        layout = self.layout(self.height_at(moment) + 1)
        position = layout.position(moment)
        return None if position is None else (layout, *position)

    def idle_at(self, moment: float) -> bool:
        """Whether the chain is idle at ``moment``: stopped with nothing to do."""
        stop = self.stop
        return stop is not None and not stop.session and moment >= stop.since

    def council_at(self, moment: float) -> tuple[int, ...]:
        """The council in force at ``moment``."""
        return self.councils.at(moment)
