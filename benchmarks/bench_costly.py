"""Costly answers (issue 23): ten healthy nodes beside one whose answers are cheap to send and
costly to decode and read. Do the healthy nodes stay up?

Run on demand, never in the test suite:

    .venv/bin/python benchmarks/bench_costly.py                       # every scenario
    .venv/bin/python benchmarks/bench_costly.py --scenarios durations --hostile-chains 20
    .venv/bin/python benchmarks/bench_costly.py --designs budget,thread,inline --healthy 200

The healthy nodes come from a simulator process (2 chains each, every answer 50 ms late); the
costly node from benchmarks/hostile_server.py (modes ``durations``, ``arrays``, ``strings``:
a small /health listing ``--hostile-chains`` chains, each chain and block answer a document
of 4.1 to 6.9 MiB, under the default 8 MiB cap). Each scenario runs in a fresh worker process
through ``Poller.run_cycle`` with the default ``scrape_timeout`` (10 s) and the costly node
first in the config. ``--designs`` compares how the answers are read: ``budget`` (as shipped:
on the engine's thread, each node's answers within a CPU budget per poll), ``inline`` (on the
engine's thread, no budget: as before issue 23) and ``thread`` (answers over 64 KiB decoded and
read by one thread of their own, no budget). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchlib import (
    PYTHON,
    MachineMeter,
    SimProcess,
    exporter_version,
    fetch_nodes,
    finish_worker,
    markdown_table,
    read_first_lines,
    run_worker,
    status_mib,
    stop_process,
)

DESIGNS = ("budget", "inline", "thread")
SCENARIOS = {
    "baseline": "no costly node",
    "durations": "Go durations of 1.8 million parts (6.9 MiB)",
    "arrays": "arrays and objects of 10^5 elements (4.1 MiB)",
    "strings": "2.4 million empty strings (6.9 MiB)",
}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--scenarios", default=",".join(SCENARIOS), help="comma-separated, default: all")
    add("--designs", default="budget", help=f"comma-separated, of {', '.join(DESIGNS)}")
    add("--healthy", type=int, default=10, help="healthy nodes (10)")
    add("--hostile-chains", type=int, default=4, help="chains the costly node lists (4)")
    add("--cycles", type=int, default=4, help="measured cycles per scenario (4)")
    add("--timeout", type=float, default=10.0, help="scrape_timeout in seconds (10)")
    add("--latency", type=float, default=0.05, help="healthy nodes' answer delay (0.05)")
    add("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
    names = [name for name in args.scenarios.split(",") if name]
    designs = [design for design in args.designs.split(",") if design]
    if unknown := sorted(set(names) - set(SCENARIOS)) + sorted(set(designs) - set(DESIGNS)):
        print(f"unknown {unknown}; choose from {sorted(SCENARIOS)}, {DESIGNS}", file=sys.stderr)
        return 2
    meter = MachineMeter()
    with SimProcess(args.healthy, 2) as sim, costly_server(args.hostile_chains) as hostile:
        for name in fetch_nodes(sim.admin_url):
            sim.set_fault(name, "slow", args.latency)
        results = []
        for design in designs:
            for name in names:
                print(f"{design}: scenario {name} ...", file=sys.stderr)
                payload = {**vars(args), "admin": sim.admin_url, "hostile": hostile}
                payload |= {"scenario": name, "design": design}
                budget = args.cycles * (args.timeout + 30) + 60
                results.append(run_worker(__file__, payload, budget))
    print(f"\n{exporter_version()}; {describe(args)}; {meter.report()}\n")
    print(table(results, args.healthy))
    return 0


def describe(args: argparse.Namespace) -> str:
    return (
        f"{args.healthy} healthy nodes (2 chains, {args.latency * 1000:.0f} ms late) + 1 costly "
        f"node ({args.hostile_chains} chains) first in the config; scrape_timeout={args.timeout}s, "
        f"{args.cycles} cycles, 1 s apart"
    )


class costly_server:  # noqa: N801 (a context manager, like contextlib's)
    """benchmarks/hostile_server.py in its own process; yields its base URL."""

    def __init__(self, chains: int) -> None:
        script = str(Path(__file__).with_name("hostile_server.py"))
        self.command = [PYTHON, script, "--chains", str(chains), "--lifetime", "1800"]
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True)
        lines = read_first_lines(
            self.process.stdout, lambda line: line.startswith("listening: "), 60
        )
        return lines[-1].split(" ", 1)[1]

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            stop_process(self.process)


# --- worker: runs in a fresh process, measures itself ---------------------------------------


def worker(p: dict[str, Any]) -> None:
    """The scenario's cycles; one JSON line."""
    from exporter.config.exporter import Config  # noqa: PLC0415 (worker only)
    from exporter.config.nodes import NodeConfig  # noqa: PLC0415 (worker only)
    from exporter.poll.cycle import Poller  # noqa: PLC0415

    logging.getLogger("ledger_exporter").setLevel(logging.CRITICAL)
    use_design(p["design"])
    urls = {name: info["url"] for name, info in fetch_nodes(p["admin"]).items()}
    healthy = tuple(NodeConfig(name, url) for name, url in urls.items())
    costly = () if p["scenario"] == "baseline" else (
        NodeConfig("costly", p["hostile"] + p["scenario"] + "/"),
    )  # fmt: skip
    config = Config(
        nodes=(*costly, *healthy), scrape_interval=p["timeout"] * 2, scrape_timeout=p["timeout"]
    )
    poller = Poller(config, lambda snapshot: None)
    cycles = []
    for _ in range(p["cycles"]):
        cycles.append(measured_cycle(poller))
        time.sleep(1.0)
    finish_worker(
        {
            "design": p["design"],
            "scenario": p["scenario"],
            "wall": [c["wall"] for c in cycles],
            "cpu": statistics.median(c["cpu"] for c in cycles),
            "healthy_up": [c["healthy_up"] for c in cycles],
            "chains_up": min(c["chains_up"] for c in cycles),
            "slowest_healthy": max(c["slowest_healthy"] for c in cycles),
            "costly": cycles[-1]["costly"],
            "rss_peak": status_mib("VmHWM"),
        }
    )


def use_design(design: str) -> None:
    """Patch this worker process's exporter to read answers as ``design`` does."""
    from exporter.poll import engine  # noqa: PLC0415 (worker only)
    from exporter.poll import node as nodepoll  # noqa: PLC0415 (worker only)

    if design == "budget":
        return
    nodepoll.MIN_READ_BUDGET_SECONDS = float("inf")  # no budget
    if design == "inline":
        return
    backlog: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
    report = engine._report

    def hand_over(done: Any, outcome: Any) -> None:
        if isinstance(outcome, engine.Response) and len(outcome.body) > 64 * 1024:
            backlog.put((done, outcome))
        else:
            report(done, outcome)

    def read_answers() -> None:
        while True:
            report(*backlog.get())

    threading.Thread(target=read_answers, name="answers", daemon=True).start()
    engine._report = hand_over


def measured_cycle(poller: Any) -> dict[str, Any]:
    """One run_cycle: wall and CPU, healthy nodes and chains up, the slowest healthy poll."""
    cpu_before, wall_before = time.process_time(), time.monotonic()
    snapshot = poller.run_cycle()
    wall, cpu = time.monotonic() - wall_before, time.process_time() - cpu_before
    good = [node for node in snapshot.nodes if node.name != "costly"]
    bad = [node for node in snapshot.nodes if node.name == "costly"]
    return {
        "wall": wall,
        "cpu": cpu,
        "healthy_up": sum(node.up for node in good),
        "chains_up": sum(chain.up for node in good for chain in node.chains),
        "slowest_healthy": max(node.duration for node in good),
        "costly": describe_node(bad[0]) if bad else "-",
    }


def describe_node(node: Any) -> str:
    if node.error:
        return f"down: {node.error}"
    errors = sorted({chain.error.split(":")[0] for chain in node.chains if chain.error})
    return f"up, {sum(c.up for c in node.chains)}/{len(node.chains)} chains" + (
        f" ({', '.join(errors)})" if errors else ""
    )


def table(results: list[dict[str, Any]], healthy: int) -> str:
    header = [
        "design",
        "scenario",
        "healthy up per cycle",
        "healthy chains up (min)",
        "slowest healthy poll s",
        "cycle s median / max",
        "CPU s/cycle",
        "costly node (last cycle)",
        "peak RSS MiB",
    ]
    rows = [
        [
            r["design"],
            f"{r['scenario']}: {SCENARIOS[r['scenario']]}",
            " ".join(f"{up}/{healthy}" for up in r["healthy_up"]),
            f"{r['chains_up']}/{2 * healthy}",
            f"{r['slowest_healthy']:.2f}",
            f"{statistics.median(r['wall']):.2f} / {max(r['wall']):.2f}",
            f"{r['cpu']:.2f}",
            r["costly"],
            f"{r['rss_peak']:.0f}",
        ]
        for r in results
    ]
    return markdown_table(header, rows)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
