"""Ctrl-C at any moment after start-up is a clean stop of `simulate` and `demo` (exit 0).

A signal used to be handled only once the URLs were printed: one arriving while they were
printed ended the command with a KeyboardInterrupt traceback and status -2 (`simulate`) or
130 (`demo`). Here the signal is sent from inside the print, in process, so the race is
not left to chance.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from ledger_simulator import cli, demo


@pytest.fixture(autouse=True)
def _quiet_logger() -> Iterator[None]:
    """main() configures the ``ledger_exporter`` logger; undo that for the tests that follow."""
    logger = logging.getLogger("ledger_exporter")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def _interrupting_print(seen: list[str]) -> Any:
    """A print that sends SIGINT to this process while the first URLs are printed."""

    def fake_print(*args: Any, **kwargs: Any) -> None:
        seen.append(" ".join(str(arg) for arg in args))
        if len(seen) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    return fake_print


def test_simulate_stops_cleanly_on_ctrl_c_while_printing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(cli, "print", _interrupting_print(seen), raising=False)
    assert cli.main(["--listen-address", "127.0.0.1:0"]) == 0
    assert seen and seen[0].startswith("simulating 3 nodes")


def test_demo_stops_cleanly_on_ctrl_c_while_printing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(demo, "print", _interrupting_print(seen), raising=False)
    assert demo.main(["--web.listen-address", "127.0.0.1:0", "--log.level", "error"]) == 0
    assert seen and seen[0].startswith("Simulated network:")
