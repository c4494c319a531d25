"""The pieces of ``benchmarks/bench_memory.py`` (where the exporter's memory goes): the walk
that counts every object once under the first holder and field that reaches it, reading
pymalloc's print-out, and the tables it prints."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType

import pytest

from tests.support.benchmarks import load_benchmark

#: The part of ``sys._debugmallocstats()`` read (Python 3.11), the arena map's Total after.
PYMALLOC = """\
Small block threshold = 512, in 32 size classes.
# arenas allocated current         =                    3
3 arenas * 1048576 bytes/arena     =            3,145,728

# bytes in allocated blocks        =            2,188,816
# bytes in available blocks        =              316,304
37 unused pools * 16384 bytes      =              606,208
# bytes lost to pool headers       =                7,392
# bytes lost to quantization       =               10,624
# bytes lost to arena alignment    =               16,384
Total                              =            3,145,728

# bytes lost to arena map root     =              262,144
Total                              =              655,360
"""


@dataclass(frozen=True, slots=True)
class Reading:
    """Stands in for a reading of the exporter (the walk breaks those down by field)."""

    council: frozenset[str]
    values: bytes


@dataclass(frozen=True, slots=True)
class Status:
    """Stands in for a snapshot's status of a chain, holding a reading."""

    name: str
    reading: Reading


for stand_in in (Reading, Status):
    stand_in.__module__ = "exporter.stand_in"  # what the walk takes for the exporter's


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_benchmark("bench_memory", monkeypatch)


def test_pymalloc_figures_are_read_from_its_print_out(memory: ModuleType) -> None:
    assert memory.parse_pymalloc(PYMALLOC) == {
        "allocated blocks": 2188816,
        "free blocks": 316304,
        "unused pools": 606208,
        "pool headers": 7392,
        "quantization": 10624,
        "arena alignment": 16384,
        "arenas (total)": 3145728,  # the first Total: the arenas', not the map's
    }


def test_pymalloc_is_read_in_this_process(memory: ModuleType) -> None:
    figures = memory.pymalloc()
    assert 0 < figures["allocated blocks"] <= figures["arenas (total)"]


def test_objects_are_counted_once_by_holder_and_field(memory: ModuleType) -> None:
    council = frozenset({"k1" * 33, "k2" * 33})
    shared = Reading(council, b"\0" * 152)
    statuses = (Status("n0", shared), Status("n1", Reading(council, b"\1" * 152)))
    ledger = memory.Ledger()
    ledger.walk("new", statuses, "nodes")
    ledger.walk("old", (Status("n0", shared),), "nodes")
    new = ledger.bytes["new"]
    assert new["nodes[]"] == sys.getsizeof(statuses)
    assert new["Status"] == 2 * sys.getsizeof(statuses[0])
    assert new["Reading"] == 2 * sys.getsizeof(shared)
    assert new["Reading.values"] == 2 * sys.getsizeof(b"\0" * 152)
    members = sum(map(sys.getsizeof, council))
    assert new["Reading.council"] == sys.getsizeof(council) + members  # the set counted once
    old = ledger.bytes["old"]
    assert "Reading" not in old and "Reading.council" not in old  # the new snapshot's
    assert old["Status"] == sys.getsizeof(statuses[0])
    assert ledger.objects["new"]["Reading.values"] == 2


def test_the_tables_show_holders_largest_first(memory: ModuleType) -> None:
    mib = memory.MIB
    holders = {"history": {"a": mib}, "snapshot": {"big": 3 * mib, "small": 1000}}
    rows = memory.holder_rows(holders, nodes=1000, chains=3000, smallest=10_000)
    assert rows == [
        ["**snapshot**", "", "3.00", "3147", "1049"],
        ["", "big", "3.00", "3146", "1049"],
        ["**history**", "", "1.00", "1049", "350"],
        ["", "a", "1.00", "1049", "350"],
    ]
    data = {
        "traced": 30 * mib,
        "tracemalloc_own": 10 * mib,
        "mallinfo": {"uordblks": 40 * mib, "fordblks": 5 * mib, "hblkhd": 8 * mib},
        "pymalloc": {"allocated blocks": 20 * mib, "arenas (total)": 24 * mib},
        "status": {"VmHWM": 100 * mib},
    }
    allocators = dict(memory.allocator_rows(data))
    # C side: malloc'd (40 + 8) less Python's big objects (30 - 20) less tracemalloc's 10
    assert allocators["C side: malloc'd not by Python (libcurl, OpenSSL, msgspec, ...)"] == "28.0"
    assert allocators["VmHWM (peak RSS, tracemalloc's tables included)"] == "100.0"
