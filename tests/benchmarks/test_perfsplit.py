"""The perf split of ``bench_ratio.py --perf`` (benchmarks/perfsplit.py): a recording's
lifetime with a stand-in ``perf``, reading ``perf script`` lines into interpreted and native
samples per process, and the per-request shares and floor it prints."""

from __future__ import annotations

import stat
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.benchmarks import load_benchmark

PYTHON = "/opt/python/bin/python3.11"
#: ``perf script -F pid,ip,dso`` of a side-by-side run, cut down: the exporter (100), the
#: bare poller (200), perf itself (300) and the idle task (0) on the measured CPU.
SCRIPT = """\
     100      7fc45d59d609 (/opt/python/lib/libpython3.11.so.1.0)
     100      7fc45d66f319 (/opt/python/lib/libpython3.11.so.1.0)
     100  ffffffff82203249 ([kernel.kallsyms])
     100      7fc45c000000 (/site-packages/pycurl.libs/libcurl-330bcbb6.so.4.8.0)
     100      7fc45b000000 (/usr/lib/x86_64-linux-gnu/libz.so.1.2.13)
     200      55d0000001f0 (/opt/python/bin/python3.11)
     200  ffffffff82203249 ([kernel.kallsyms])
     200      7fc45a000000 (/usr/lib/x86_64-linux-gnu/libc.so.6)
     300  ffffffff82203249 ([kernel.kallsyms])
       0  ffffffff82203249 ([kernel.kallsyms])
"""
OWNERS = {100: "exporter", 200: "bare"}
#: A stand-in for perf: ``record`` runs until SIGINT, then writes its -o file; ``script``
#: prints what FAKE_PERF_SCRIPT holds; FAKE_PERF_FAILS makes ``record`` fail at once.
FAKE_PERF = """#!/bin/sh
if [ "$1" = script ]; then cat "$FAKE_PERF_SCRIPT"; exit 0; fi
if [ -n "$FAKE_PERF_FAILS" ]; then echo "$FAKE_PERF_FAILS" >&2; exit 255; fi
while [ "$#" -gt 1 ]; do [ "$1" = -o ] && out="$2"; shift; done
trap 'echo recorded > "$out"; exit 0' INT
while :; do sleep 0.05; done
"""


@pytest.fixture(name="perfsplit")
def _perfsplit(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_benchmark("perfsplit", monkeypatch)


@pytest.fixture(name="fake_perf")
def _fake_perf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``perf`` first on PATH, printing SCRIPT; returns where its recording goes."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "perf").write_text(FAKE_PERF)
    (folder / "perf").chmod(stat.S_IRWXU)
    (tmp_path / "script.txt").write_text(SCRIPT)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PERF_SCRIPT", str(tmp_path / "script.txt"))
    return tmp_path / "perf.data"


def test_a_recording_counts_each_process_by_kind(perfsplit: ModuleType, fake_perf: Path) -> None:
    recording = perfsplit.PerfRecording(fake_perf, {"exporter": 100, "bare": 200}, {1}, PYTHON)
    recording.start()
    counts = recording.stop()
    assert fake_perf.read_text() == "recorded\n"
    assert counts == {
        "exporter": Counter(interpreted=2, native=3),
        "bare": Counter(interpreted=1, native=2),  # an interpreter without libpython
    }


def test_a_perf_that_cannot_record_fails_at_start(
    perfsplit: ModuleType, fake_perf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PERF_FAILS", "perf_event_paranoid setting is 4")
    recording = perfsplit.PerfRecording(fake_perf, {"bare": 200}, {1}, PYTHON)
    with pytest.raises(perfsplit.PerfError, match="ended at start: perf_event_paranoid"):
        recording.start()


def test_close_stops_a_recording_left_running(perfsplit: ModuleType, fake_perf: Path) -> None:
    recording = perfsplit.PerfRecording(fake_perf, {"bare": 200}, {1}, PYTHON)
    recording.start()
    recording.close()
    assert recording.process.poll() is not None


def test_without_perf_installed_it_says_what_to_install(
    perfsplit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(perfsplit.PerfError, match="apt-get install linux-perf"):
        perfsplit.require_perf()


@pytest.mark.parametrize(
    ("dso", "kind"),
    [
        ("/opt/python/lib/libpython3.11.so.1.0", "interpreted"),
        (PYTHON, "interpreted"),  # Python built without a shared libpython
        ("/usr/bin/python3.11", "native"),  # another program's executable
        ("/site-packages/pycurl.libs/libcurl-330bcbb6.so.4.8.0", "native"),
        ("[kernel.kallsyms]", "native"),
        ("/site-packages/msgspec/_core.cpython-311-x86_64-linux-gnu.so", "native"),
        ("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "native"),
    ],
)
def test_only_the_interpreter_is_interpreted(perfsplit: ModuleType, dso: str, kind: str) -> None:
    assert perfsplit.kind_of(dso, PYTHON) == kind


def test_other_processes_and_other_lines_are_left_out(perfsplit: ModuleType) -> None:
    script = SCRIPT + "garbage line\n\n     100 ffff (/a dso with spaces/libpython3.11.so)\n"
    counts = perfsplit.count_samples(script, OWNERS, PYTHON)
    assert counts == {
        "exporter": Counter(interpreted=3, native=3),
        "bare": Counter(interpreted=1, native=2),
    }


def _figures(requests: float, cpu_s: float) -> dict[str, float]:
    return {"requests": requests, "cpu_s": cpu_s}


def test_shares_are_per_request_and_the_floor_adds_the_bare_pollers_python(
    perfsplit: ModuleType,
) -> None:
    samples = {
        "bare": Counter(interpreted=250, native=750),
        # served twice the requests: per request, 0.45 and 0.47 of the bare poller's
        "exporter": Counter(interpreted=900, native=940),
    }
    figures = {"bare": _figures(1000, 1000 / 999), "exporter": _figures(2000, 1840 / 999)}
    rows = perfsplit.split_rows(1000, samples, figures)
    assert [row[1:] for row in rows] == [
        ["bare engine", "1000", "100%", "0.25x", "0.75x", "1.00x"],
        ["exporter", "1840", "100%", "0.45x", "0.47x", "0.92x"],
        ["floor: exporter native + bare Python", "", "", "", "", "0.72x"],
    ]


@pytest.mark.parametrize(
    ("bare", "cpu_s", "problem"),
    [
        (Counter(interpreted=250, native=750), 2.0, "cover 50% of its CPU time"),
        (Counter(interpreted=250, native=750), 0.5, "cover 200% of its CPU time"),
        (Counter(native=1000), 1.0, "0 of them in the interpreter"),
    ],
)
def test_samples_that_do_not_match_proc_are_refused(
    perfsplit: ModuleType, bare: Counter[str], cpu_s: float, problem: str
) -> None:
    samples = {"bare": bare, "exporter": Counter(interpreted=500, native=500)}
    figures = {"bare": _figures(1000, cpu_s), "exporter": _figures(1000, 1.0)}
    with pytest.raises(perfsplit.PerfError, match=f"bare process .*{problem}"):
        perfsplit.split_rows(1000, samples, figures)
