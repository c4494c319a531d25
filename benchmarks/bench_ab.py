"""Two exporter trees measured in turn by ``bench_ratio.py``: is B within 10 % of A?

Run on demand, never in the test suite (about 1.5 minutes per tree, fleet size and round):

    .venv/bin/python benchmarks/bench_ab.py --a ../before --b . --rounds 2 --nodes 1000 3000
    .venv/bin/python benchmarks/bench_ab.py --a ../old --b . --answers varied-small -- --cycles 4

Each tree is measured with its own ``.venv/bin/ledger-exporter`` (its code, its venv: set
it up first with ``make .venv/.installed`` in that tree) by this tree's ``bench_ratio.py``
(``--exporter-bin``), so both face the same fleet stand-in, bare poller and scrapes. The
runs alternate A B, then B A the next round (and so on), so a slow spell of a shared host
falls on both alike; the machine's load average is printed with every run. Printed: every
run's figures, then per fleet size the median of each tree's ratio to the bare engine
(the figure that carries over between runs), its CPU per request and peak RSS, and B's
change against A.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from benchlib import PYTHON, markdown_table

BENCH_RATIO = Path(__file__).resolve().parent / "bench_ratio.py"
#: The change of B against A that still holds (issue #35: "within 10 % of the tree before").
TOLERANCE = 0.10


class Run(NamedTuple):
    """One bench_ratio run of one tree at one fleet size."""

    round: int
    tree: str  # "A" or "B"
    nodes: int
    ratio: float  # exporter CPU per request / the bare engine's
    cpu_ms: float  # the exporter's CPU per request, ms
    bare_ms: float  # the bare engine's
    rss_mib: float  # the exporter's peak RSS
    chains: str  # chains read (worst cycle), as printed
    cycle: str  # the exporter's cycle time (median / max), as printed
    load: str  # the machine's load averages at the run's start and end


def schedule(rounds: int, sizes: Sequence[int]) -> list[tuple[int, int, str]]:
    """(round, nodes, tree) in the order run: per round and size A then B, B then A in
    every other round."""
    order = []
    for number in range(1, rounds + 1):
        trees = ("A", "B") if number % 2 else ("B", "A")
        order += [(number, nodes, tree) for nodes in sizes for tree in trees]
    return order


def exporter_bin(tree: Path) -> Path:
    """A tree's own console script; SystemExit saying what to do when its venv is missing."""
    command = tree / ".venv" / "bin" / "ledger-exporter"
    if not os.access(command, os.X_OK):
        raise SystemExit(f"{command} is missing: run `make .venv/.installed` in {tree} first")
    return command


def ratio_command(command: Path, nodes: int, passed: Sequence[str]) -> list[str]:
    """The bench_ratio.py command line measuring ``command`` at ``nodes``."""
    return [PYTHON, str(BENCH_RATIO), "--nodes", str(nodes), "--exporter-bin", str(command),
            *passed]  # fmt: skip


def parse_ratio(output: str) -> dict[str, list[str]]:
    """bench_ratio.py's main table, by process ("bare engine", "exporter"): its cells."""
    rows: dict[str, list[str]] = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[1] in ("bare engine", "exporter"):
            rows.setdefault(cells[1], cells)
    if set(rows) != {"bare engine", "exporter"}:
        raise ValueError(f"bench_ratio.py printed no table of both processes:\n{output}")
    return rows


def run_of(number: int, tree: str, nodes: int, output: str, load: str) -> Run:
    """One run's figures, read from bench_ratio.py's ``output``."""
    rows = parse_ratio(output)
    bare, exporter = rows["bare engine"], rows["exporter"]
    return Run(
        round=number,
        tree=tree,
        nodes=nodes,
        ratio=float(exporter[4].rstrip("x")),
        cpu_ms=float(exporter[3].split()[0]),
        bare_ms=float(bare[3].split()[0]),
        rss_mib=float(exporter[7].split()[0]),
        chains=exporter[5],
        cycle=exporter[6],
        load=load,
    )


def summary_rows(runs: Sequence[Run]) -> list[list[str]]:
    """Per fleet size: each tree's median ratio, CPU per request and highest peak RSS, and
    B's change against A (within TOLERANCE or not)."""
    rows = []
    for nodes in sorted({run.nodes for run in runs}):
        medians = {}
        for tree in ("A", "B"):
            mine = [run for run in runs if run.nodes == nodes and run.tree == tree]
            if not mine:
                continue
            medians[tree] = (
                statistics.median(run.ratio for run in mine),
                statistics.median(run.cpu_ms for run in mine),
                max(run.rss_mib for run in mine),
            )
        if set(medians) != {"A", "B"}:
            continue
        (ratio_a, cpu_a, rss_a), (ratio_b, cpu_b, rss_b) = medians["A"], medians["B"]
        # rounded (+ 0.0: no "-0.0 %" for equal figures)
        change = round(ratio_b / ratio_a - 1, 6) + 0.0
        rss_change = round(rss_b / rss_a - 1, 6) + 0.0
        verdict = "within 10 %" if change <= TOLERANCE and rss_change <= TOLERANCE else "WORSE"
        rows.append([str(nodes), f"{ratio_a:.2f}x", f"{ratio_b:.2f}x", f"{change:+.1%}",
                     f"{cpu_a:.3f} / {cpu_b:.3f} ms", f"{rss_a:.1f} / {rss_b:.1f} MiB",
                     f"{rss_change:+.1%}", verdict])  # fmt: skip
    return rows


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes, as ``uptime`` prints them."""
    return ", ".join(f"{load:.2f}" for load in os.getloadavg())


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- go to bench_ratio.py as they are (e.g. -- --cycles 4).",
    )
    parser.add_argument("--a", required=True, type=Path, help="tree A (e.g. the tree before)")
    parser.add_argument("--b", required=True, type=Path, help="tree B (e.g. the tree after)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A and B (2)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 3000],
                        help="fleet sizes (1000 3000)")  # fmt: skip
    parser.add_argument("--answers", default="rich", help="bench_ratio.py's --answers (rich)")
    parser.add_argument("--scrape-every", default="0", help="bench_ratio.py's (0)")
    args, passed = parser.parse_known_args(argv)
    passed = [arg for arg in passed if arg != "--"]
    passed += ["--answers", args.answers, "--scrape-every", args.scrape_every]
    commands = {"A": exporter_bin(args.a.resolve()), "B": exporter_bin(args.b.resolve())}
    print(f"A: {commands['A']}\nB: {commands['B']}\nload at start: {load_average()}",
          file=sys.stderr)  # fmt: skip
    runs = []
    for number, nodes, tree in schedule(args.rounds, args.nodes):
        before = load_average()
        print(f"round {number}, {nodes} nodes, {tree} (load {before}) ...", file=sys.stderr)
        command = ratio_command(commands[tree], nodes, passed)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
        runs.append(run_of(number, tree, nodes, done.stdout, f"{before} / {load_average()}"))
    print(f"\nA: {commands['A']}\nB: {commands['B']}\nbench_ratio.py {' '.join(passed)} "
          "(--scrape-every 0: once per interval)\n")  # fmt: skip
    header = ["round", "nodes", "tree", "ratio", "CPU/request", "bare CPU/request",
              "chains read", "cycle", "peak RSS", "load before / after (1, 5, 15 min)"]  # fmt: skip
    rows = [[str(r.round), str(r.nodes), r.tree, f"{r.ratio:.2f}x", f"{r.cpu_ms:.3f} ms",
             f"{r.bare_ms:.3f} ms", r.chains, r.cycle, f"{r.rss_mib:.1f} MiB", r.load]
            for r in runs]  # fmt: skip
    print(markdown_table(header, rows))
    print()
    header = ["nodes", "ratio A", "ratio B", "B vs A", "CPU/request A / B", "peak RSS A / B",
              "RSS B vs A", "verdict"]  # fmt: skip
    print(markdown_table(header, summary_rows(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
