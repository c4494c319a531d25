"""A clock the test steps by hand (the simulator and the exporter both accept one)."""

from __future__ import annotations


class Clock:
    """Seconds since the epoch, moved only by ``advance`` (the ``clock`` fixture)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds
