"""The pieces of ``benchmarks/bench_ab.py`` (two trees measured in turn by bench_ratio.py):
the order of the runs, reading bench_ratio's table, the summary and its verdict, and the
refusal of a tree without its venv."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.benchmarks import load_benchmark

#: bench_ratio.py's output of one fleet size, as it prints it (header line cut short).
OUTPUT = """
exporter /t/.venv/bin/ledger-exporter; answers rich; latency 50 ms, interval 10 s, ...

| nodes | process     | requests | CPU/request | ratio | chains read (worst) | cycle (median / max) | peak RSS |
|-------|-------------|----------|-------------|-------|---------------------|----------------------|----------|
| 1000  | bare engine | 35000    | {bare} ms    | 1.00x | 3000/3000           | 0.76 / 0.85 s        | 41.0 MiB |
| 1000  | exporter    | 35000    | {cpu} ms    | {ratio}x | 3000/3000           | 0.97 / 1.09 s        | {rss} MiB |
"""  # noqa: E501


@pytest.fixture
def ab(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_benchmark("bench_ab", monkeypatch)


def output(bare: float = 0.05, cpu: float = 0.09, ratio: float = 1.8, rss: float = 58.6) -> str:
    return OUTPUT.format(bare=bare, cpu=cpu, ratio=ratio, rss=rss)


def test_runs_alternate_a_b_then_b_a(ab: ModuleType) -> None:
    assert ab.schedule(2, [1000, 3000]) == [
        (1, 1000, "A"), (1, 1000, "B"), (1, 3000, "A"), (1, 3000, "B"),
        (2, 1000, "B"), (2, 1000, "A"), (2, 3000, "B"), (2, 3000, "A"),
    ]  # fmt: skip
    assert [tree for _, _, tree in ab.schedule(3, [1000])] == ["A", "B", "B", "A", "A", "B"]


def test_a_run_is_read_from_the_table(ab: ModuleType) -> None:
    run = ab.run_of(1, "B", 1000, output(bare=0.052, cpu=0.094, ratio=1.81, rss=58.4), "1.0")
    assert (run.ratio, run.cpu_ms, run.bare_ms, run.rss_mib) == (1.81, 0.094, 0.052, 58.4)
    assert (run.chains, run.cycle, run.tree, run.load) == ("3000/3000", "0.97 / 1.09 s", "B", "1.0")


def test_an_output_without_the_table_is_refused(ab: ModuleType) -> None:
    with pytest.raises(ValueError, match="no table of both processes"):
        ab.parse_ratio("Traceback (most recent call last): ...")


def test_the_summary_compares_medians_and_flags_a_regression(ab: ModuleType) -> None:
    runs = [
        ab.run_of(1, "A", 1000, output(ratio=1.6, rss=58.0), ""),
        ab.run_of(2, "A", 1000, output(ratio=2.0, rss=58.5), ""),
        ab.run_of(1, "B", 1000, output(ratio=1.7, rss=57.0), ""),
        ab.run_of(2, "B", 1000, output(ratio=1.9, rss=57.5), ""),
        ab.run_of(1, "A", 3000, output(ratio=1.6, rss=90.0), ""),
        ab.run_of(1, "B", 3000, output(ratio=1.6, rss=110.0), ""),
    ]
    same, worse = ab.summary_rows(runs)
    assert same[:4] == ["1000", "1.80x", "1.80x", "+0.0%"]
    assert same[5:] == ["58.5 / 57.5 MiB", "-1.7%", "within 10 %"]
    assert worse[0] == "3000" and worse[6:] == ["+22.2%", "WORSE"]


def test_a_tree_without_its_venv_is_refused(ab: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"run `make \.venv/\.installed` in"):
        ab.exporter_bin(tmp_path)
    script = tmp_path / ".venv" / "bin" / "ledger-exporter"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert ab.exporter_bin(tmp_path) == script
    command = ab.ratio_command(script, 3000, ["--answers", "rich"])
    assert command[-6:] == ["--nodes", "3000", "--exporter-bin", str(script), "--answers", "rich"]
