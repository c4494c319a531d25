"""The one way a test waits: until something has happened, never for a length of time.

Tests share two cores with the servers they start, so a test asserts on what happened (a
state, a count) and waits for it with a generous ``timeout``; the timeout only bounds a test
that would otherwise hang, it is never what the test checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Long enough for anything a test waits for on a loaded 2-core machine.
DEFAULT_TIMEOUT = 30.0


def wait_until(
    predicate: Callable[[], T | None],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.05,
    message: str | Callable[[], str] = "",
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Exceptions of the ``ignoring`` types count as "not yet" (``OSError`` while a server is
    starting). After ``timeout`` seconds an ``AssertionError`` names ``message`` (a string, or
    a function giving one, called then: the state to show) and the last result or exception.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: object = predicate()
        except ignoring as error:
            last = error
        else:
            if last:
                return last  # type: ignore[return-value]  # the predicate's truthy result
        if time.monotonic() >= deadline:
            what = message() if callable(message) else message
            raise AssertionError(f"{what or 'condition'}: not within {timeout:g}s (last: {last!r})")
        time.sleep(interval)


class RecordedWaits:
    """A selector or an epoll object standing in for the real one, recording the timeout of
    every wait (``select`` or ``poll``): what a loop that should sleep while idle asked for."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.timeouts: list[float | None] = []

    def select(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        return self.real.select(timeout)

    def poll(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        return self.real.poll(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
