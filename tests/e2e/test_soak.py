"""A one-minute run of the soak benchmark (benchmarks/soak.py) with loose bounds.

The real soak runs for 30 minutes on demand (docs/performance.md); this short one proves the
harness works end to end and catches gross leaks: 100 nodes, a tenth misbehaving in five
ways, a 1 s interval, the exporter sampled every 5 s from /proc and its own heap.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.benchmarks import load_benchmark
from tests.support.testdata import REPO

pytestmark = pytest.mark.integration


def test_a_short_soak_stays_flat() -> None:
    command = [
        sys.executable, str(REPO / "benchmarks" / "soak.py"), "--json",
        "--minutes", "1", "--nodes", "100", "--sample-seconds", "5", "--warmup-samples", "3",
        "--max-rss-growth", "24", "--max-thread-growth", "12", "--max-fd-growth", "40",
        "--max-heap-growth", "0.5",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    samples = report["samples"]
    assert len(samples) >= 10
    # Every misbehaving node is down, every other one up, once the first cycles are done.
    assert [s["nodes_up"] for s in samples[3:]] == [90] * len(samples[3:])
    assert report["problems"] == [], report["growth"]
    assert done.returncode == 0
    # Threads stay within the exporter's bounds (poll pool, HTTP handlers, sampler).
    assert max(s["threads"] for s in samples) < 100


@pytest.mark.parametrize(
    "case",
    [
        ((50, 50, 50.5, 50.2, 50.4, 50.3), 0, 0, 0, []),
        ((50, 50, 55, 60, 65, 70), 0, 0, 0, ["RSS grew"]),
        ((50,) * 6, 2, 0, 0, ["threads grew"]),
        ((50,) * 6, 0, 10, 0, ["open descriptors grew"]),
        ((50,) * 6, 0, 0, 5000, ["Python heap grew"]),
    ],
)
def test_the_verdict_flags_growth_after_the_warm_up(
    case: tuple[tuple[float, ...], int, int, int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    rss, threads, fds, heap, flagged = case  # growth per sample of each
    soak = load_benchmark("soak", monkeypatch)
    samples = [
        soak.Sample(i, r, 20 + threads * i, 30 + fds * i, 100_000 + heap * i, 1, 90, 1.0)
        for i, r in enumerate(rss)
    ]
    problems = soak.verdict(samples, 1, soak.Limits(8.0, 4, 16, 0.10))
    assert len(problems) == len(flagged), problems
    assert all(problem.startswith(f) for problem, f in zip(problems, flagged, strict=True))
