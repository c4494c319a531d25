"""The perf split of ``bench_ratio.py --perf`` (benchmarks/perfsplit.py): reading
``perf report`` lines into interpreted and native samples per process, and the floor."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from types import ModuleType

import pytest

from tests.support.testdata import REPO

#: ``perf report -F sample,pid,dso`` of a side-by-side run, cut down: its header, the
#: exporter's engine and poll threads (100, 101), the bare poller (200), perf's own thread.
REPORT = """\
# Samples: 19K of event 'cpu-clock:ppp'
#
#      Samples      Pid:Command  Shared Object
# ............  ...............  ..................
#
          2009    100:python   [kernel.kallsyms]
           126    100:python   _core.cpython-311-x86_64-linux-gnu.so
          3600    100:python   libpython3.11.so.1.0
          2912    101:python   libpython3.11.so.1.0
           356    101:python   libz.so.1.2.13
          2184    200:python   [kernel.kallsyms]
          1059    200:python   libc.so.6
           900    200:python   libpython3.11.so.1.0
            40    300:perf     [kernel.kallsyms]

"""
THREADS = {"100": "exporter", "101": "exporter", "200": "bare"}


@pytest.fixture(name="perfsplit")
def _perfsplit(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("perfsplit", REPO / "benchmarks/perfsplit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "perfsplit", module)
    spec.loader.exec_module(module)
    return module


def test_samples_are_counted_per_process_by_kind(perfsplit: ModuleType) -> None:
    counts = perfsplit.count_samples(REPORT, THREADS, {"exporter", "bare"})
    assert counts == {
        "exporter": Counter(interpreted=3600 + 2912, native=2009 + 126 + 356),
        "bare": Counter(interpreted=900, native=2184 + 1059),
    }


@pytest.mark.parametrize(
    ("dso", "kind"),
    [
        ("libpython3.11.so.1.0", "interpreted"),
        ("libcurl-330bcbb6.so.4.8.0", "native"),
        ("[kernel.kallsyms]", "native"),
        ("_core.cpython-311-x86_64-linux-gnu.so", "native"),  # msgspec: compiled
        ("libz.so.1.2.13", "native"),
    ],
)
def test_only_the_interpreter_library_is_interpreted(
    perfsplit: ModuleType, dso: str, kind: str
) -> None:
    assert perfsplit.kind_of(dso) == kind


def test_the_floor_is_the_exporters_native_work_plus_the_bare_pollers_python(
    perfsplit: ModuleType,
) -> None:
    counts = {
        "bare": Counter(interpreted=250, native=750),
        "exporter": Counter(interpreted=890, native=930),
    }
    rows = perfsplit.split_rows(1000, counts)
    assert [row[1:] for row in rows] == [
        ["bare engine", "1000", "0.25x", "0.75x", "1.00x"],
        ["exporter", "1820", "0.89x", "0.93x", "1.82x"],
        ["floor: exporter native + bare Python", "", "", "", "1.18x"],
    ]
