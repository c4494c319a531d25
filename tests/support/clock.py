"""Clocks a test steps by hand: ``Clock``, which the simulator and the exporter's classes
accept in-process, and ``SteppedWallClock``, a real process's wall clock under libfaketime."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest


class Clock:
    """Seconds since the epoch, moved only by ``advance`` (the ``clock`` fixture)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


#: Where Debian's libfaketime package puts the library (``make tools`` installs it); the
#: multi-threaded build, as the exporter runs threads.
_LIBFAKETIME = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


class SteppedWallClock:
    """A child process's wall clock (``time.time()``), stepped by the test as NTP or an
    operator would step it, through libfaketime: the offset from the real time is a file
    libfaketime reads at every call. Its monotonic clock is left alone
    (``FAKETIME_DONT_FAKE_MONOTONIC``). Python's ``time.sleep`` fails under libfaketime
    0.9.10 (EINVAL from ``clock_nanosleep``); the exporter never sleeps, it waits."""

    def __init__(self, directory: Path) -> None:
        found = [path for pattern in _LIBFAKETIME for path in glob.glob(pattern)]
        if not found:
            pytest.fail("libfaketime not found: `make tools` installs it (Debian's faketime)")
        self.library = found[0]
        self.file = directory / "faketime-offset"
        self.step_to(0)

    def step_to(self, offset: int) -> None:
        """From now on the wall clock reads the real time plus ``offset`` seconds (written
        whole: libfaketime never reads half a file)."""
        written = self.file.with_suffix(".tmp")
        written.write_text(f"{offset:+d}\n")
        os.replace(written, self.file)

    def env(self) -> dict[str, str]:
        """The environment of a process on this clock."""
        preload = " ".join(filter(None, (self.library, os.environ.get("LD_PRELOAD"))))
        return {
            **os.environ,
            "LD_PRELOAD": preload,
            "FAKETIME_TIMESTAMP_FILE": str(self.file),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
