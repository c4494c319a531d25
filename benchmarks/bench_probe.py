"""What a /probe costs: the exporter's CPU per probe, probes per second and probe latency.

Run on demand, never in the test suite:

    .venv/bin/python benchmarks/bench_probe.py    # 100 nodes, 1/8/32 clients, 12 in flight
    .venv/bin/python benchmarks/bench_probe.py --probes 4000 --clients 1,64

A simulator serves the nodes from its own process; a probe-only ``ledger-exporter`` runs in
another, and this process plays Prometheus: ``clients`` threads send ``--probes`` probes in
all, round-robin over the nodes, over kept-alive connections with Prometheus's headers. The
exporter's CPU is read from /proc, so neither the simulator's nor the clients' is counted.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml
from benchlib import (
    PYTHON,
    REPO,
    MachineMeter,
    SimProcess,
    cpu_seconds,
    exporter_version,
    markdown_table,
    percentile,
    read_first_lines,
    stop_process,
)

HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    "X-Prometheus-Scrape-Timeout-Seconds": "10",
}


def csv_ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--nodes", type=int, default=100, help="simulated nodes (100)")
    add("--chains", type=int, default=2, help="blockchains in the simulated network (2)")
    add("--clients", type=csv_ints, default=[1, 8, 32], help="concurrent probers (1,8,32)")
    add("--probes", type=int, default=2000, help="probes per measurement (2000)")
    add("--in-flight", type=int, default=12, help="probe.max_in_flight (12, the most allowed)")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    meter = MachineMeter()
    rows = []
    with SimProcess(args.nodes, args.chains) as sim, tempfile.TemporaryDirectory() as tmp:
        urls = [node["url"] for node in sim.nodes().values()]
        exporter, port = start_exporter(Path(tmp), urls[0].split("/nodes/")[0], args.in_flight)
        try:
            for clients in args.clients:
                print(f"measuring {clients} client(s) ...", file=sys.stderr)
                run(port, urls, clients, min(args.probes, 50), exporter.pid)  # warm-up
                rows.append(run(port, urls, clients, args.probes, exporter.pid))
        finally:
            stop_process(exporter)
    print(
        f"\n{exporter_version()}; nodes={args.nodes} chains={args.chains} "
        f"probes={args.probes} max_in_flight={args.in_flight}; {meter.report()}\n"
    )
    header = ("clients", "probes/s", "CPU ms/probe", "p50 ms", "p99 ms", "answers")
    print(markdown_table(header, rows))
    return 0


def start_exporter(directory: Path, base: str, in_flight: int) -> tuple[Any, int]:
    """A probe-only exporter allowed to probe the simulator's nodes, on a free port."""
    config = directory / "config.yml"
    allowed = base.replace(".", r"\.") + "/nodes/node-[0-9]+/"
    probe = {"allowed_targets": [allowed], "max_in_flight": in_flight}
    config.write_text(yaml.safe_dump({"scrape_timeout": "10s", "probe": probe}))
    process = subprocess.Popen(
        [PYTHON, "-m", "exporter", f"--config.file={config}", "--web.listen-address=127.0.0.1:0"],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = read_first_lines(process.stderr, lambda line: "port=" in line, 30)
    port = int(lines[-1].split("port=")[1].split()[0])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=30):
        pass
    return process, port


def run(port: int, urls: list[str], clients: int, probes: int, pid: int) -> list[str]:
    """``probes`` probes from ``clients`` threads; one table row."""
    targets = itertools.cycle(urls)
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    issued = itertools.count()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while next(issued) < probes:  # itertools.count is atomic under the GIL
            with lock:
                target = next(targets)
            started = time.perf_counter()
            connection.request("GET", "/probe?" + urlencode({"target": target}), headers=HEADERS)
            response = connection.getresponse()
            response.read()
            with lock:
                latencies.append(time.perf_counter() - started)
                statuses[response.status] = statuses.get(response.status, 0) + 1
        connection.close()

    cpu, wall = cpu_seconds(pid), time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, cpu = time.perf_counter() - wall, cpu_seconds(pid) - cpu
    answers = ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items()))
    return [
        str(clients),
        f"{len(latencies) / wall:.0f}",
        f"{cpu / len(latencies) * 1000:.2f}",
        f"{percentile(latencies, 0.5) * 1000:.1f}",
        f"{percentile(latencies, 0.99) * 1000:.1f}",
        answers,
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
