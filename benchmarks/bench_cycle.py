"""What one polling cycle, one render and one scrape cost, for growing numbers of nodes.

Run on demand, never in the test suite:

    .venv/bin/python benchmarks/bench_cycle.py                  # 10, 100, 500, 1000 nodes
    .venv/bin/python benchmarks/bench_cycle.py --nodes 2000 --concurrency 16,64

For each node count a simulator serves the nodes from its own process; for each concurrency a
fresh worker process runs the real code paths (``Poller.run_cycle``, ``Exposition`` and an
``Exporter`` serving /metrics on 127.0.0.1:0) and measures its own CPU with
``time.process_time``, so the simulator's CPU is not counted. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import logging
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchlib import (
    MIB,
    MachineMeter,
    SimProcess,
    cpu_seconds,
    exporter_version,
    fetch_nodes,
    finish_worker,
    markdown_table,
    percentile,
    run_worker,
    status_mib,
)

BUSY_SECONDS = 20.0  # bound of the scrapes-while-polling measurement
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    "Accept-Encoding": "gzip",
}


def csv_ints(text: str) -> list[int]:
    """``10,100,500`` -> [10, 100, 500]."""
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--nodes", type=csv_ints, default=[10, 100, 500, 1000], help="node counts (10,100,...)")
    add("--chains", type=int, default=2, help="blockchains in the simulated network (2)")
    add("--cycles", type=int, default=10, help="measured cycles per run (10)")
    add("--warmup", type=int, default=3, help="cycles before measuring (3)")
    add("--concurrency", type=csv_ints, default=[64], help="max_concurrency values (64)")
    add("--timeout", type=float, default=10.0, help="scrape_timeout in seconds (10)")
    add("--scrapes", type=int, default=200, help="GET /metrics per latency measurement (200)")
    add("--layout", choices=("paths", "ports"), default="paths", help="simulator layout")
    add("--latency", type=float, default=0.0, help="per-request delay of every node, s (0)")
    add(
        "--sim-nodelay",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="set TCP_NODELAY in the simulator (default on; off shows its 40 ms stall)",
    )
    add("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
    results = []
    meter = MachineMeter()
    for nodes in args.nodes:
        with SimProcess(nodes, args.chains, args.layout, args.sim_nodelay) as sim:
            if args.latency > 0:
                for name in sim.nodes():
                    sim.set_fault(name, "slow", args.latency)
            for concurrency in args.concurrency:
                print(f"measuring {nodes} nodes, concurrency {concurrency} ...", file=sys.stderr)
                payload = {
                    **vars(args),
                    "admin": sim.admin_url,
                    "sim_pid": sim.pid,
                    "nodes": nodes,
                    "concurrency": concurrency,
                }
                budget = (args.warmup + args.cycles + 4) * (args.timeout + 10) + 300
                results.append(run_worker(__file__, payload, budget))
    print(f"\n{exporter_version()}; {describe(args)}; {meter.report()}\n")
    print(table(results))
    return 0


def describe(args: argparse.Namespace) -> str:
    return (
        f"chains={args.chains} layout={args.layout} latency={args.latency}s "
        f"scrape_timeout={args.timeout}s warm-up={args.warmup} cycles={args.cycles} "
        f"scrapes={args.scrapes} sim TCP_NODELAY={'on' if args.sim_nodelay else 'off'}"
    )


# --- worker: runs in a fresh process, measures itself ---------------------------------------


def worker(p: dict[str, Any]) -> None:
    """Measure cycles, renders, memory and scrapes; print one JSON line and exit."""
    from exporter.config.exporter import Config  # noqa: PLC0415 (worker only)
    from exporter.config.nodes import NodeConfig  # noqa: PLC0415 (worker only)
    from exporter.poll.cycle import Poller  # noqa: PLC0415

    logging.getLogger("ledger_exporter").setLevel(logging.ERROR)
    rss_start = status_mib("VmRSS")
    nodes = fetch_nodes(p["admin"])
    config = Config(
        nodes=tuple(NodeConfig(name, info["url"]) for name, info in nodes.items()),
        scrape_interval=15.0,
        scrape_timeout=p["timeout"],
        max_concurrency=p["concurrency"],
    )
    poller = Poller(config, lambda snapshot: None)
    for _ in range(p["warmup"]):
        render(poller.run_cycle())
    rss_warm, blocks_warm = settled_memory()
    cycles, rss = [], []
    for _ in range(p["cycles"]):
        cycles.append(measure_cycle(poller, p["sim_pid"]))
        rss.append(status_mib("VmRSS"))
    rss_end, blocks_end = settled_memory()
    poller.stop()
    summary = {key: statistics.median(c[key] for c in cycles) for key in cycles[0]}
    finish_worker(
        {
            "nodes": p["nodes"],
            "concurrency": p["concurrency"],
            "median": summary,
            "wall_max": max(c["wall"] for c in cycles),
            "rss_start": rss_start,
            "rss_warm": rss_warm,
            "rss_end": rss_end,
            "rss_cycles": rss,
            "blocks_growth": blocks_end - blocks_warm,
            "scrape": scrape_latencies(config, p["scrapes"], summary["wall"]),
        }
    )


def settled_memory() -> tuple[float, int]:
    """RSS (MiB) and Python's allocated blocks after a full collection."""
    gc.collect()
    return status_mib("VmRSS"), sys.getallocatedblocks()


def measure_cycle(poller: Any, sim_pid: int) -> dict[str, float]:
    """One run_cycle: wall, own CPU, simulator CPU, requests, then the renders of a scrape."""
    connections = poller.connections_opened()
    sim_before = cpu_seconds(sim_pid)
    cpu_before, wall_before = time.process_time(), time.monotonic()
    snapshot = poller.run_cycle()
    wall = time.monotonic() - wall_before
    cpu = time.process_time() - cpu_before
    sim_cpu = cpu_seconds(sim_pid) - sim_before
    requests = sum(1 + (len(node.chains) if node.up else 0) for node in snapshot.nodes)
    return {
        "wall": wall,
        "cpu": cpu,
        "cpu_per_request": cpu / max(requests, 1),
        "sim_cpu": sim_cpu,
        "requests": requests,
        "up": sum(node.up for node in snapshot.nodes),
        "chains": sum(len(node.chains) for node in snapshot.nodes),
        "chains_up": sum(chain.up for node in snapshot.nodes for chain in node.chains),
        "connections": poller.connections_opened() - connections,
        **render(snapshot),
    }


def render(snapshot: Any) -> dict[str, float]:
    """Every body a scrape can ask for, each timed as the first scrape after a cycle pays it."""
    from exporter.runtime import runtime_families  # noqa: PLC0415
    from exporter.web.exposition import Exposition  # noqa: PLC0415

    exposition = Exposition(snapshot, runtime=runtime_families)  # as the exporter serves it
    timings, bodies = {}, {}
    for key, openmetrics, gzipped in (
        ("text", False, False),
        ("om", True, False),
        ("gzip", False, True),
        ("om_gzip", True, True),
    ):
        started = time.perf_counter()
        bodies[key] = exposition.body(openmetrics, gzipped)
        timings[key + "_seconds"] = time.perf_counter() - started
    samples = sum(1 for line in bodies["text"].splitlines() if line and not line.startswith(b"#"))
    return {**timings, **{key + "_bytes": len(body) for key, body in bodies.items()}} | {
        "samples": samples
    }


def scrape_latencies(config: Any, count: int, cycle_wall: float) -> dict[str, list[float]]:
    """GET /metrics from a real Exporter; every phase is bounded in count and time."""
    idle = replace(config, scrape_interval=3600.0)
    with running_exporter(idle) as (_, connection):
        first = [get(connection, PROMETHEUS_HEADERS), get(connection, {})]  # nothing cached yet
        prometheus = [get(connection, PROMETHEUS_HEADERS) for _ in range(count)]
        text = [get(connection, {}) for _ in range(count)]
        busy = scrapes_during_cycles(config, connection, count)
    # Cycling on its own: the first scrapes after each new snapshot is swapped in.
    cycling = replace(config, scrape_interval=cycle_wall + 2.0)
    with running_exporter(cycling) as (exporter, connection):
        get(connection, PROMETHEUS_HEADERS), get(connection, {})  # both formats asked for
        after: list[float] = []
        for _ in range(2):
            wait_for_new_snapshot(exporter, cycling.scrape_interval + config.scrape_timeout + 30)
            after += [get(connection, PROMETHEUS_HEADERS), get(connection, {})]
    return {"first": first, "after": after, "prometheus": prometheus, "text": text, "busy": busy}


def scrapes_during_cycles(
    config: Any, connection: http.client.HTTPConnection, count: int
) -> list[float]:
    """Cached GETs every 20 ms while polling cycles run in the same process (a second
    Poller, so the served bytes stay cached): what the GIL contention costs a scrape."""
    from exporter.poll.cycle import Poller  # noqa: PLC0415

    stop = threading.Event()
    poller = Poller(config, lambda snapshot: None)
    polling = threading.Thread(target=poll_until, args=(poller, stop), daemon=True)
    polling.start()
    busy: list[float] = []
    ends = time.monotonic() + BUSY_SECONDS
    while len(busy) < count and time.monotonic() < ends:
        busy.append(get(connection, PROMETHEUS_HEADERS))
        time.sleep(0.02)
    stop.set()
    polling.join(config.scrape_timeout + 30)
    poller.stop()
    return busy


def poll_until(poller: Any, stop: threading.Event) -> None:
    """Back-to-back polling cycles until ``stop`` is set."""
    while not stop.is_set():
        poller.run_cycle()


def wait_for_new_snapshot(exporter: Any, timeout: float) -> None:
    """Return as soon as the exporter swaps in its next exposition."""
    current, deadline = exporter.exposition(), time.monotonic() + timeout
    while exporter.exposition() is current:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no new snapshot within {timeout:.0f} s")
        time.sleep(0.002)


class running_exporter:  # noqa: N801 (used as a context manager, like contextlib's)
    """An Exporter on 127.0.0.1:0, ready (first cycle done) on entry, with a keep-alive
    connection to it; stopped on exit."""

    def __init__(self, config: Any) -> None:
        from exporter.app import Exporter  # noqa: PLC0415

        self.exporter = Exporter(config)
        self.first_cycle = config.scrape_timeout + 60
        self.connection: http.client.HTTPConnection | None = None

    def __enter__(self) -> tuple[Any, http.client.HTTPConnection]:
        server = self.exporter.start("127.0.0.1:0")
        deadline = time.monotonic() + self.first_cycle
        while not self.exporter.ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the exporter did not finish its first cycle")
            time.sleep(0.02)
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        return self.exporter, self.connection

    def __exit__(self, *exc: object) -> None:
        if self.connection is not None:
            self.connection.close()
        self.exporter.stop()


def get(connection: http.client.HTTPConnection, headers: dict[str, str]) -> float:
    """One keep-alive GET /metrics; its latency in seconds, body read in full."""
    started = time.perf_counter()
    connection.request("GET", "/metrics", headers=headers)
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"/metrics answered {response.status}")
    return time.perf_counter() - started


# --- table ------------------------------------------------------------------------------------


def table(results: list[dict[str, Any]]) -> str:
    """One column per run, one row per measure."""
    header = ["measure", *(f"{r['nodes']} nodes, c={r['concurrency']}" for r in results)]
    rows = [[label, *(cell(r) for r in results)] for label, cell in ROWS]
    return markdown_table(header, rows)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}" if seconds < 0.1 else f"{seconds * 1000:.0f}"


def _p50_p99(values: list[float]) -> str:
    return f"{_ms(percentile(values, 0.5))} / {_ms(percentile(values, 0.99))}"


def _per_sample(r: dict[str, Any]) -> str:
    return f"{r['median']['text_seconds'] / r['median']['samples'] * 1e6:.1f}"


def _halves(r: dict[str, Any]) -> str:
    """Growth over each half of the measured cycles: a plateau shows a small second half."""
    rss, start = r["rss_cycles"], r["rss_warm"]
    middle = rss[len(rss) // 2 - 1] if len(rss) > 1 else start
    return f"{middle - start:+.1f} / {rss[-1] - middle:+.1f}"


def _first(r: dict[str, Any]) -> str:
    prometheus, text = r["scrape"]["first"]
    return f"{_ms(prometheus)} / {_ms(text)}"


def _after(r: dict[str, Any]) -> str:
    after = r["scrape"]["after"]
    return " ; ".join(f"{_ms(after[i])} / {_ms(after[i + 1])}" for i in range(0, len(after), 2))


ROWS: list[tuple[str, Any]] = [
    ("requests per cycle", lambda r: f"{r['median']['requests']:.0f}"),
    ("nodes up", lambda r: f"{r['median']['up']:.0f} / {r['nodes']}"),
    ("chains up", lambda r: f"{r['median']['chains_up']:.0f} / {r['median']['chains']:.0f}"),
    ("cycle wall s (median / max)", lambda r: f"{r['median']['wall']:.2f} / {r['wall_max']:.2f}"),
    ("nodes per wall second", lambda r: f"{r['nodes'] / r['median']['wall']:.0f}"),
    ("exporter CPU s per cycle", lambda r: f"{r['median']['cpu']:.2f}"),
    ("exporter CPU ms per request", lambda r: f"{r['median']['cpu_per_request'] * 1000:.2f}"),
    ("simulator CPU s per cycle", lambda r: f"{r['median']['sim_cpu']:.2f}"),
    ("new TCP connections per cycle", lambda r: f"{r['median']['connections']:.0f}"),
    ("samples in the exposition", lambda r: f"{r['median']['samples']:.0f}"),
    (
        "text render ms / MiB",
        lambda r: f"{_ms(r['median']['text_seconds'])} / {r['median']['text_bytes'] / MIB:.2f}",
    ),
    (
        "OpenMetrics render ms / MiB",
        lambda r: f"{_ms(r['median']['om_seconds'])} / {r['median']['om_bytes'] / MIB:.2f}",
    ),
    ("render us per sample (text)", _per_sample),
    (
        "gzip ms / KiB (text)",
        lambda r: f"{_ms(r['median']['gzip_seconds'])} / {r['median']['gzip_bytes'] / 1024:.0f}",
    ),
    ("gzip KiB (OpenMetrics)", lambda r: f"{r['median']['om_gzip_bytes'] / 1024:.0f}"),
    ("RSS MiB at start (imports)", lambda r: f"{r['rss_start']:.1f}"),
    ("RSS MiB after warm-up", lambda r: f"{r['rss_warm']:.1f}"),
    (
        "RSS MiB after the cycles (growth)",
        lambda r: f"{r['rss_end']:.1f} ({r['rss_end'] - r['rss_warm']:+.1f})",
    ),
    ("Python heap blocks growth", lambda r: f"{r['blocks_growth']:+d}"),
    ("RSS MiB growth, 1st / 2nd half of the cycles", _halves),
    ("first scrape ever ms, nothing cached (Prom / text)", _first),
    ("first scrape after each new snapshot ms (Prom / text)", _after),
    ("scrape ms p50 / p99, Prometheus (OM+gzip)", lambda r: _p50_p99(r["scrape"]["prometheus"])),
    ("scrape ms p50 / p99, text, no gzip", lambda r: _p50_p99(r["scrape"]["text"])),
    (
        "scrape ms p50 / p99 / max, Prom, during a cycle",
        lambda r: (
            f"{_p50_p99(r['scrape']['busy'])} / {_ms(max(r['scrape']['busy']))}"
            f" (n={len(r['scrape']['busy'])})"
        ),
    ),
]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
