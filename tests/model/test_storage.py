"""The storage room (exporter/model/storage.py): packed gauges read back as they were packed,
counts packed and read in order, and the cycle's shared parts bounded and forgotten."""

from __future__ import annotations

import math
from typing import Any

import pytest

from exporter.model.storage import (
    MAX_PART_BYTES,
    MAX_PARTS,
    CountArray,
    GaugeStore,
    Shared,
    counts_of,
    pack_counts,
)


@pytest.mark.parametrize("values", [[1.0, math.nan, -0.0], [math.nan] * 3, [1e308, 0.5, 7.0]])
def test_packed_gauges_read_back_as_packed_nan_as_not_reported(values: list[float]) -> None:
    store = GaugeStore(3)
    pack = store.packer()
    packed = pack(*values)
    read = [store.at(packed, position) for position in range(3)]
    assert read == [None if math.isnan(v) else v for v in values]
    assert [math.copysign(1, v) for v in read if v is not None] == [
        math.copysign(1, v) for v in values if not math.isnan(v)
    ]
    table = store.table([packed, pack(2.0, 3.0, 4.0)])
    assert table.column(2)[1] == 4.0 and len(table.column(0)) == 2
    assert store.table([]).column(0) == []


def test_counts_pack_in_order_and_grow_in_place() -> None:
    assert list(counts_of(pack_counts([0, 1, 2**64 - 1]))) == [0, 1, 2**64 - 1]
    assert list(counts_of(b"")) == []
    counts = CountArray(2)
    counts.add(1)
    counts.widen(2)
    counts.add(3)
    counts.add(3)
    assert list(counts_of(counts.frozen())) == [0, 1, 0, 2]


def test_parts_kept_are_bounded_in_size_and_number_and_forgotten_each_cycle() -> None:
    shared = Shared()
    calls: list[int] = []

    def reader(n: int) -> Any:
        def read() -> int:
            calls.append(n)
            return n

        return read

    big = b"[" + b'"k",' * MAX_PART_BYTES + b'"k"]'
    assert shared.part("council", big, reader(1)) == shared.part("council", big, reader(1)) == 1
    assert calls == [1, 1]  # over MAX_PART_BYTES: read each time, never kept
    for n in range(MAX_PARTS + 5):
        shared.part("council", str(n).encode(), reader(n))
    calls.clear()
    shared.part("council", b"3", reader(3))
    shared.part("council", str(MAX_PARTS + 2).encode(), reader(MAX_PARTS + 2))
    assert calls == [MAX_PARTS + 2]  # the first MAX_PARTS kept, the rest read each time
    shared.part("sessions", b"3", reader(-3))
    assert calls == [MAX_PARTS + 2, -3]  # kept per kind of part
    shared.clear()
    shared.part("council", b"3", reader(3))
    assert calls[-1] == 3  # a new cycle reads afresh
