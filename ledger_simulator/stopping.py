"""Ctrl-C and SIGTERM as a clean stop for the simulator's and the demo's command lines.

The handlers are installed before anything starts or prints, so a signal that arrives while
the network starts or while the URLs are printed stops the command as cleanly as one that
arrives later (exit 0), never with a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """Set ``stop`` on SIGINT or SIGTERM while inside; the previous handlers come back after.
    Off the main thread (where Python cannot install handlers) only ``stop`` ends the wait."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_until_stopped(stop: threading.Event) -> None:
    """Block until ``stop`` is set; short waits so the main thread handles signals at once."""
    while not stop.wait(0.5):
        pass
