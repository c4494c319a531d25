"""How the readings are kept compact: the one room of the exporter's memory tuning, behind the
plain typed values the readings and snapshots show (:mod:`exporter.model.fields`).

- A chain reading's plain gauges are one packed array (:class:`GaugeStore`): a float64 per
  gauge, NaN where the node sent nothing readable (no reader returns NaN). One object a chain
  instead of ~19 floats in a tuple; and the render reads a gauge of every chain as one column
  (:class:`GaugeTable`) at C speed.
- Values equal across nodes (council sets, feature lists, vote sessions, peer sets, texts) are
  kept once a cycle, and the parts of answers every node of a chain sends alike are read once
  a cycle (:class:`Shared`).
- Cumulative counters (a node's errors per endpoint and reason, a chain's failed rounds per
  leader) are one packed array of unsigned 64-bit counts beside a key tuple shared by every
  node with the same keys (:func:`pack_counts`, :func:`counts_of`).

What the packed gauges save, measured (``python benchmarks/bench_storage.py --nodes N``,
tracemalloc): 194 bytes a chain reading against 656 for a tuple of freshly parsed floats, so
1.3 MiB a snapshot at 1000 nodes x 3 chains and 4.0 MiB at 3000 (two snapshots are held at a
time: 2.6 and 8 MiB). The whole process's figures (``benchmarks/bench_ratio.py``, peak RSS):
docs/performance.md.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar, cast

_isnan = math.isnan


class GaugeStore:
    """Packs and reads the ``width`` plain gauges of one kind of reading: a float64 each, in
    their declared order, NaN where not reported."""

    __slots__ = ("_all", "_one", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self._all = struct.Struct(f"={width}d")
        self._one = struct.Struct("=d")

    def packer(self) -> Callable[..., bytes]:
        """Packs the values given as arguments (one per gauge, NaN: not reported) into the
        bytes kept: the bound method itself, one call less for every reading."""
        return self._all.pack

    def at(self, packed: bytes, position: int) -> float | None:
        """The gauge at ``position``; None when not reported."""
        value: float = self._one.unpack_from(packed, 8 * position)[0]
        return None if _isnan(value) else value

    def table(self, packed: Iterable[bytes]) -> GaugeTable:
        """The gauges of many readings as one table (:class:`GaugeTable`)."""
        return GaugeTable(packed, self.width)


class GaugeTable:
    """The gauges of many readings as one table: a column is every reading's value of one
    gauge (NaN where not reported), read at C speed. The render writes each gauge family over
    every chain: 19 x 3000 values a cycle at 1000 nodes."""

    __slots__ = ("_table", "_width")

    def __init__(self, packed: Iterable[bytes], width: int) -> None:
        self._table = memoryview(b"".join(packed)).cast("d")
        self._width = width

    def column(self, position: int) -> list[float]:
        """Every reading's value of the gauge at ``position``, in reading order."""
        column = self._table[position :: self._width].tolist()
        return cast(list[float], column)  # a "d" view's items are floats


def pack_counts(counts: Iterable[int]) -> bytes:
    """Counts (each under 2**64) as one packed array of native unsigned 64-bit integers."""
    return array("Q", counts).tobytes()


def counts_of(packed: bytes) -> Iterator[int]:
    """The counts :func:`pack_counts` packed, in order."""
    return iter(memoryview(packed).cast("Q"))


class CountArray:
    """Counters that grow in place (a node's errors): an array of unsigned 64-bit counts,
    frozen into :func:`pack_counts`' bytes for a snapshot."""

    __slots__ = ("_counts",)

    def __init__(self, size: int) -> None:
        self._counts = array("Q", bytes(8 * size))

    def widen(self, more: int) -> None:
        """``more`` counters at 0 after the others."""
        self._counts.extend(0 for _ in range(more))

    def add(self, position: int) -> None:
        self._counts[position] += 1

    def frozen(self) -> bytes:
        return self._counts.tobytes()


Kept = TypeVar("Kept", bound=Hashable)


class Shared:
    """Keeps one copy of equal values read from different nodes (council sets and feature
    lists repeat on every node of a network), and the readings of parts of answers sent
    alike by many nodes (:meth:`part`). Cleared each cycle, so it never holds more than the
    cycle's readings do, plus at most MAX_PARTS parts' texts of MAX_PART_BYTES. Each call
    is one dict operation, atomic under the GIL."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, Hashable] = {}
        self._parts: dict[tuple[Hashable, bytes], object] = {}

    def __call__(self, value: Kept) -> Kept:
        """The copy kept of ``value`` (``value`` itself the first time)."""
        kept = self._kept.setdefault(value, value)
        return kept  # type: ignore[return-value]  # equal values have the same type here

    def tuple_of(self, values: tuple[str, ...]) -> tuple[str, ...]:
        """The copy kept of the tuple ``values``, its members the copies kept (peer ids repeat
        in the lists of different nodes): ``self(tuple(map(self, values)))``, at C speed. A
        node's network peers are kept as a sorted tuple, not a set: only ever iterated, and
        104 bytes for 8 peers against a set's 728 (``benchmarks/bench_memory.py``: 118.0 ->
        107.0 MiB peak RSS at 3000 nodes with 40 peers each)."""
        keep = self._kept.setdefault
        return self(tuple(map(keep, values, values)))  # type: ignore[arg-type]

    def made(self, key: Hashable, make: Callable[[], Kept]) -> Kept:
        """The value ``make`` gave for ``key`` earlier this cycle, else ``make()`` (kept).
        Two threads may both make it; equal keys make equal values, so either is right."""
        marker = (_MADE, key)
        kept = self._kept.get(marker)
        if kept is None:
            kept = self._kept.setdefault(marker, make())
        return kept  # type: ignore[return-value]  # made by ``make`` for this key

    def part(self, kind: Hashable, text: bytes, read: Callable[[], Kept]) -> Kept:
        """``read()``, the reading of the JSON ``text`` of a ``kind`` of part of an answer,
        made once a cycle for every answer whose part is the same text (the council, vote
        sessions, consensus settings and features of one chain: the same on every node).
        ``kind`` names all else the reading depends on (the bounds it was read under).
        Texts over MAX_PART_BYTES, and any past the first MAX_PARTS, are read each time."""
        if len(text) > MAX_PART_BYTES:
            return read()
        key = (kind, text)
        kept = self._parts.get(key)
        if kept is None:
            kept = read()
            if len(self._parts) < MAX_PARTS:
                self._parts[key] = kept
        return kept  # type: ignore[return-value]  # read by ``read`` for this kind and text

    def clear(self) -> None:
        """Forget every value: the next cycle starts afresh."""
        self._kept.clear()
        self._parts.clear()


#: Bounds of what :meth:`Shared.part` keeps in a cycle (at most 4 MiB of texts): a real
#: network has a few distinct councils and settings per chain, whatever its size.
MAX_PARTS = 1024
MAX_PART_BYTES = 4096

#: Tags the keys of :meth:`Shared.made`, so they never meet a value kept by ``__call__``.
_MADE = object()
