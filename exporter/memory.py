"""Keeps glibc's malloc from holding memory the exporter has freed.

Each cycle frees most of what it built (request bodies, decoded documents, the previous
snapshot and its rendered text), but glibc keeps freed chunks in per-thread arenas and raises
its mmap threshold after a big block is freed, so the next cycle's rendered text lands in the
heap and fragments it. :class:`Allocator` caps the arenas and fixes the mmap threshold (once,
before any thread starts) and hands free pages back after each cycle (``malloc_trim``). On a
C library without these calls (musl, macOS) every method does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
from typing import Any

log = logging.getLogger("ledger_exporter")

#: ``mallopt`` parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

#: Two arenas: the engine's callbacks and everything else; more only fragment a heap this small.
ARENA_MAX = 2
#: Blocks this size and up (a rendered format, a big body) get their own mapping, returned
#: whole when freed; a fixed value also stops glibc raising it after each free.
MMAP_THRESHOLD = 256 * 1024
#: Free memory at the top of the heap kept for reuse rather than returned at once.
TRIM_THRESHOLD = 1024 * 1024
#: Container objects allocated (net) between two young collections of the cyclic GC;
#: Python's default is 700.
YOUNG_COLLECTION_THRESHOLD = 20_000


def _glibc() -> Any | None:
    """The process' C library if it is glibc with ``mallopt`` and ``malloc_trim``; else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


class Allocator:
    """The C allocator's knobs for this process; every call is a no-op without glibc."""

    def __init__(self, libc: Any | None) -> None:
        self._libc = libc

    @classmethod
    def of_this_process(cls) -> Allocator:
        """The allocator this process uses (glibc or none we can tune)."""
        return cls(_glibc())

    def tune(self) -> bool:
        """Cap arenas and fix the mmap and trim thresholds. Call before threads start (an
        arena, once made, stays). True if glibc accepted every setting."""
        if self._libc is None:
            return False
        settings = (
            (M_ARENA_MAX, ARENA_MAX),
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        )
        accepted = all([self._libc.mallopt(param, value) == 1 for param, value in settings])
        if not accepted:
            log.warning("glibc refused a malloc setting; memory use may be higher")
        return accepted

    def trim(self) -> bool:
        """Return free heap pages to the system (all arenas). True if any were returned."""
        if self._libc is None:
            return False
        return bool(self._libc.malloc_trim(0))


def tune_collector() -> None:
    """Run the cyclic garbage collector less often, and never over what start-up made.

    A cycle allocates ~80 000 container objects at 1000 nodes (readings, history, the
    snapshot), nearly all acyclic and freed by reference counting; with Python's default
    threshold that is ~110 young and one full collection a cycle, walking the history kept
    between cycles each time (30-40 ms of CPU a cycle). The rare cyclic garbage (an error's
    traceback) waits a little longer instead. Call once, before the threads start."""
    gc.collect()
    gc.freeze()  # imports and the config: never garbage, no longer walked
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
