"""What the polling cycle does with a failure it did not expect: the part it happened in is
left out (one node, one maintenance entry, the network view, the watch list, or at worst the
whole cycle), the rest of the cycle goes on, and the failure is counted
(``ledger_exporter_cycle_failures_total{stage}``) and logged once while it recurs.

"Once" is per distinct failure: the stage, what it was about (a node's or an entry's name)
and the exception's type and message. A failure that stops recurring for a cycle is
forgotten, so it is logged again if it comes back; what is kept is bounded by what failed in
the last two cycles, never by how long the exporter runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from exporter.model.snapshot import CycleStage

log = logging.getLogger("ledger_exporter")

_T = TypeVar("_T")
#: The longest part of an exception's message kept in the key and logged.
MAX_MESSAGE_CHARS = 200
#: The most distinct failures remembered as logged: past it, the rest of a cycle's new ones
#: are counted but not logged (a bug hitting every node of a large fleet logs this many lines
#: a cycle at most, not one per node).
MAX_LOGGED_PER_CYCLE = 20

_Key = tuple[CycleStage, str, str, str]


class CycleFailures:
    """The failures caught in the cycles so far: counts per stage, and those being logged."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(CycleStage, 0)
        self._seen: set[_Key] = set()  # logged, and seen again in the last cycle
        self._this_cycle: set[_Key] = set()

    def counts(self) -> tuple[int, ...]:
        """Per CycleStage, in its order: the failures counted since start."""
        return tuple(self._counts.values())

    def note(self, stage: CycleStage, subject: str, error: BaseException) -> None:
        """Count ``error``, caught in ``stage`` about ``subject`` (a node's or an entry's name,
        or empty), and log it unless it was logged and has recurred every cycle since."""
        self._counts[stage] += 1
        message = str(error)[:MAX_MESSAGE_CHARS]
        key = (stage, subject, type(error).__name__, message)
        fresh = key not in self._seen and key not in self._this_cycle
        self._this_cycle.add(key)
        if fresh and len(self._this_cycle) <= MAX_LOGGED_PER_CYCLE:
            fields = {"stage": stage.value, "error": f"{type(error).__name__}: {message}"}
            if subject:
                fields["subject"] = subject
            log.error(
                "polling cycle step failed; left out, the rest of the cycle goes on"
                " (logged once while it recurs)",
                extra={"fields": fields},
                exc_info=error,
            )

    def new_cycle(self) -> None:
        """A cycle starts: the failures not seen in the last one are forgotten (logged again
        if they come back)."""
        self._seen, self._this_cycle = self._this_cycle, set()

    def guarded(
        self, stage: CycleStage, subject: str, step: Callable[[], _T], instead: Callable[[], _T]
    ) -> _T:
        """``step()``, or ``instead()`` after noting what it raised."""
        try:
            return step()
        except Exception as error:  # whatever it is, only this part is left out
            self.note(stage, subject, error)
            return instead()
