"""Issue #22: where the exporter's CPU goes in a cycle, stage by stage, next to the bare engine.

Run on demand, never in the test suite (about half a minute with the defaults):

    .venv/bin/python benchmarks/bench_stages.py                 # 1000 nodes, 4 measured cycles
    .venv/bin/python benchmarks/bench_stages.py --nodes 3000

``bench_ratio.py`` measures the exporter process all in; this one says which stage the
difference to the bare engine comes from. Against the same fleet stand-in as
``bench_ratio.py`` (its rich answers, 50 ms late), in this one process, a cycle of each in
turn (so a slow spell of the host falls on both alike; measured one after the other, the bare
engine's cycles once read 1.5 times their alternated figure), on the CPU ``bench_ratio.py``
gives its measured processes, the fleet on the others:

- **bare engine**: ``bench_ratio.BarePoller`` (the same GETs, only decoding the JSON);
- **exporter**: the real :class:`~exporter.poll.cycle.Poller` with default settings
  (network and consensus checks on), and each cycle's snapshot rendered as the server does
  for Prometheus's two scrapes (OpenMetrics and text, both gzip, one render), with the
  process tuned as ``ledger-exporter`` tunes it (malloc arenas and thresholds, the cyclic
  GC) and free memory handed back twice a cycle (``malloc_trim``, its own row).

The poll's CPU is the process's (the engine thread reads the answers); the history's and the
network view's, inside it, are their thread's own CPU (the poll thread runs them once the
engine has ended the cycle's requests). Each figure is the best of the measured cycles, so a
neighbour's burst does not count; per request over the 7 requests a node is asked
(``/health``, each of 3 chains' status and checkpoint block).
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_fleet import CHAINS
from bench_ratio import (
    FLEET_CPUS,
    MEASURED_CPUS,
    BarePoller,
    add_fleet_arguments,
    start_fleet,
)
from benchlib import REPO, MachineMeter, exporter_version, markdown_table, stop_process

sys.path.insert(0, str(REPO))

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.expose.render import Renderer
from exporter.memory import Allocator, tune_collector
from exporter.poll.cycle import Poller
from exporter.runtime import runtime_families
from exporter.web.exposition import Exposition

#: Prometheus's two scrapes a cycle: OpenMetrics and text, both gzip.
SCRAPED = ((True, True), (False, True))
REQUESTS_PER_NODE = 1 + 2 * len(CHAINS)


class StageClock:
    """CPU seconds spent in wrapped calls, by stage, since the last ``take()``."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, stage: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call``, its thread's CPU time added to ``stage`` on each call."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.spent[stage] = self.spent.get(stage, 0.0) + time.thread_time() - started

        return timed

    def take(self) -> dict[str, float]:
        """The CPU seconds by stage since the last take, and start again."""
        spent, self.spent = self.spent, {}
        return spent


class BareStage:
    """The bare poller: its process CPU for one cycle."""

    def __init__(self, url: str, nodes: int, args: argparse.Namespace) -> None:
        self.poller, self.timeout = BarePoller(url, nodes, args.in_flight), args.timeout

    def cycle(self) -> dict[str, float]:
        self.poller.requests = 0
        started = time.process_time()
        self.poller.cycle(time.monotonic() + self.timeout)
        return {"bare engine": time.process_time() - started, "requests": self.poller.requests}


class ExporterStages:
    """The exporter's poll (with its history and network view inside) and render: each
    stage's CPU for one cycle."""

    def __init__(self, url: str, nodes: int, args: argparse.Namespace) -> None:
        config = Config(
            nodes=tuple(NodeConfig(f"n{i}", f"{url}/n{i}/") for i in range(nodes)),
            scrape_interval=10,
            scrape_timeout=args.timeout,
        )
        self.poller, self.renderer = Poller(config, lambda _: None), Renderer()
        self.clock = StageClock()
        self.trim = self.clock.wrap("malloc_trim", Allocator.of_this_process().trim)
        history = self.poller._history  # timed on this instance only
        history.record = self.clock.wrap("history", history.record)  # type: ignore[method-assign]
        self.poller._network = self.clock.wrap(  # type: ignore[method-assign]
            "network view", self.poller._network
        )

    def cycle(self) -> dict[str, float]:
        started = time.process_time()
        snapshot = self.poller.run_cycle()
        polled = time.process_time()
        self.trim()  # as the exporter publishes: before rendering, and after the swap
        exposition = Exposition(snapshot, renderer=self.renderer, runtime=runtime_families)
        exposition.prepare(SCRAPED)
        self.trim()
        rendered = time.process_time()
        stages = self.clock.take()
        chains = sum(c.reading is not None for node in snapshot.nodes for c in node.chains)
        return {
            "poll": polled - started - stages["history"] - stages["network view"],
            **stages,
            "render": rendered - polled - stages["malloc_trim"],
            "chains": chains,
        }

    def stop(self) -> None:
        self.poller.stop()


def measure(url: str, nodes: int, args: argparse.Namespace) -> tuple[list[dict[str, float]], ...]:
    """The bare poller's cycles and the exporter's, alternating (so a slow spell of the host
    falls on both alike), warm-up cycles left out."""
    bare, exporter = BareStage(url, nodes, args), ExporterStages(url, nodes, args)
    stages: tuple[BareStage | ExporterStages, ...] = (bare, exporter)
    cycles: tuple[list[dict[str, float]], list[dict[str, float]]] = ([], [])
    try:
        for _ in range(args.warmup + args.cycles):
            for stage, measured in zip(stages, cycles, strict=True):
                measured.append(stage.cycle())
                time.sleep(args.pause)
    finally:
        exporter.stop()
    return cycles[0][args.warmup :], cycles[1][args.warmup :]


def table(nodes: int, bare: list[dict[str, float]], exporter: list[dict[str, float]]) -> str:
    """Each stage's best cycle: CPU a cycle, per request, and as a share of the bare engine's."""
    requests = nodes * REQUESTS_PER_NODE
    floor = min(cycle["bare engine"] for cycle in bare)
    best = {
        stage: min(cycle[stage] for cycle in exporter)
        for stage in ("poll", "history", "network view", "render", "malloc_trim")
    }
    rows = [["bare engine", f"{floor * 1000:.0f} ms", f"{floor / requests * 1e6:.1f} us", "1.00"]]
    for stage, spent in best.items():
        share = f"{spent / floor:.2f}"
        rows.append([stage, f"{spent * 1000:.0f} ms", f"{spent / requests * 1e6:.1f} us", share])
    total = sum(best.values())
    rows.append(
        [
            "exporter, summed",
            f"{total * 1000:.0f} ms",
            f"{total / requests * 1e6:.1f} us",
            f"{total / floor:.2f}",
        ]
    )
    header = ["stage", "CPU a cycle (best)", "per request", "of the bare engine"]
    return markdown_table(header, rows)


def main(argv: Sequence[str]) -> int:
    """Serve the fleet, measure the bare engine's and the exporter's cycles in turn, and print
    the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="fleet size (1000)")
    add_fleet_arguments(parser)
    parser.add_argument("--warmup", type=int, default=2, help="cycles before measuring (2)")
    parser.add_argument("--cycles", type=int, default=4, help="measured cycles (4)")
    parser.add_argument("--pause", type=float, default=0.5, help="idle between cycles, s")
    args = parser.parse_args(argv)
    logging.getLogger("ledger_exporter").setLevel(logging.ERROR)
    Allocator.of_this_process().tune()  # as ledger-exporter starts: before any thread
    tune_collector()
    meter = MachineMeter()
    os.sched_setaffinity(0, FLEET_CPUS)  # the fleet started below inherits it
    started: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as folder:
        try:
            url = start_fleet(Path(folder) / "fleet.port", args, started)
            os.sched_setaffinity(0, MEASURED_CPUS)  # and the poller's threads, started next
            bare, exporter = measure(url, args.nodes, args)
        finally:
            for process in started:
                stop_process(process)
    asked = min(cycle["requests"] for cycle in bare)
    read = min(cycle["chains"] for cycle in exporter)
    print(
        f"\n{exporter_version()}; {args.nodes} nodes x {len(CHAINS)} chains, latency "
        f"{args.latency * 1000:.0f} ms; bare engine asked {asked:.0f} requests a cycle, the "
        f"exporter read {read:.0f} chains; {args.cycles} cycles after {args.warmup}; "
        f"{meter.report()}\n"
    )
    print(table(args.nodes, bare, exporter))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
