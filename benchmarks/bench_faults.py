"""Resilience: 100 healthy nodes plus K misbehaving ones; cycle time, up-ness, CPU and memory.

Run on demand, never in the test suite:

    .venv/bin/python benchmarks/bench_faults.py               # every scenario, K=10
    .venv/bin/python benchmarks/bench_faults.py --scenarios slow,huge --faulty 20

Healthy, slow and down nodes come from a simulator process (faults ``slow`` and ``down``);
huge, compressed and dripping answers from benchmarks/hostile_server.py, another process.
Each scenario runs in a fresh worker process through ``Poller.run_cycle`` with the
misbehaving nodes first in the config (the worst place: they take pool threads first), then
drops them (``Poller.apply``) and runs recovery cycles. A last check stops the real
``ledger-exporter`` process with SIGTERM while a request hangs. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import json
import logging
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchlib import (
    PYTHON,
    REPO,
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

HEALTHY = 100
HOSTILE_KINDS = ("huge", "declared", "gzip", "drip", "driphead")
SIM_KINDS = ("slow", "down")
BLURB = {
    "baseline": "no faulty node",
    "slow": "answers after 3x scrape_timeout",
    "down": "connection closed without answer",
    "huge": "50 MiB chunked body, no length",
    "declared": "50 MiB body with Content-Length",
    "gzip": "gzip body inflating to 50 MiB",
    "drip": "body: 1 byte per 0.2 s",
    "driphead": "headers: 1 byte per 0.2 s",
    "mixed": "K each of slow, down, huge, gzip, drip",
    "starve": "slow, more than max_concurrency",
    "memory": "huge, as many as max_concurrency",
}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--faulty", type=int, default=10, help="K: misbehaving nodes per scenario (10)")
    add("--scenarios", default=",".join(BLURB), help="comma-separated, default: all")
    add("--cycles", type=int, default=3, help="cycles with the faulty nodes (3)")
    add("--recovery", type=int, default=1, help="cycles after dropping them (1)")
    add("--timeout", type=float, default=3.0, help="scrape_timeout in seconds (3)")
    add("--gap", type=float, default=1.0, help="idle seconds between cycles (1)")
    add("--concurrency", type=int, default=64, help="max_concurrency (64)")
    add("--max-response-mib", type=int, default=8, help="max_response_bytes in MiB (8)")
    add("--hold-seconds", type=float, default=30.0, help="how long dripping answers last (30)")
    add("--faulty-last", action="store_true", help="put the faulty nodes after the healthy")
    add("--no-shutdown-check", action="store_true", help="skip the SIGTERM check")
    add("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def scenario_mix(name: str, k: int, concurrency: int) -> dict[str, int]:
    """How many nodes of each kind a scenario adds to the healthy ones."""
    mixes: dict[str, dict[str, int]] = {
        "baseline": {},
        "mixed": {kind: k for kind in ("slow", "down", "huge", "gzip", "drip")},
        "starve": {"slow": concurrency + 16},
        "memory": {"huge": concurrency},
    }
    return mixes.get(name, {name: k})


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
    names = [name for name in args.scenarios.split(",") if name]
    unknown = sorted(set(names) - set(BLURB))
    if unknown:
        print(f"unknown scenario(s) {unknown}; choose from {sorted(BLURB)}", file=sys.stderr)
        return 2
    mixes = {name: scenario_mix(name, args.faulty, args.concurrency) for name in names}
    slow = max((mix.get("slow", 0) for mix in mixes.values()), default=0)
    down = max((mix.get("down", 0) for mix in mixes.values()), default=0)
    meter = MachineMeter()
    with SimProcess(HEALTHY + slow + down, 2) as sim, hostile_server(args) as hostile:
        nodes = list(sim.nodes())
        pools = {"healthy": nodes[:HEALTHY], "slow": nodes[HEALTHY : HEALTHY + slow]}
        pools["down"] = nodes[HEALTHY + slow : HEALTHY + slow + down]
        for name in pools["slow"]:
            sim.set_fault(name, "slow", 3 * args.timeout)
        for name in pools["down"]:
            sim.set_fault(name, "down")
        results = []
        for name, mix in mixes.items():
            print(f"scenario {name} {mix} ...", file=sys.stderr)
            payload = {**vars(args), "admin": sim.admin_url, "hostile": hostile, "mix": mix}
            payload |= {"pools": pools, "scenario": name}
            budget = (args.cycles + args.recovery) * (args.timeout + args.gap + 5) + 120
            results.append(run_worker(__file__, payload, budget))
        shutdown = None if args.no_shutdown_check else shutdown_check(args, sim, hostile)
    print(f"\n{exporter_version()}; {describe(args)}; {meter.report()}\n")
    print(table(results))
    if shutdown:
        print("\nSIGTERM to the ledger-exporter process (healthy nodes + the given node):\n")
        print(markdown_table(["nodes", "exit after SIGTERM"], shutdown))
    return 0


def describe(args: argparse.Namespace) -> str:
    return (
        f"{HEALTHY} healthy nodes (2 chains) + K={args.faulty} faulty per scenario, "
        f"{'last' if args.faulty_last else 'first'} in the config; "
        f"scrape_timeout={args.timeout}s max_concurrency={args.concurrency} "
        f"max_response_bytes={args.max_response_mib}MiB cycles={args.cycles} "
        f"recovery={args.recovery} gap={args.gap}s"
    )


class hostile_server:  # noqa: N801 (a context manager, like contextlib's)
    """benchmarks/hostile_server.py in its own process; yields its base URL."""

    def __init__(self, args: argparse.Namespace) -> None:
        script = str(Path(__file__).with_name("hostile_server.py"))
        self.command = [PYTHON, script, "--max-seconds", str(args.hold_seconds)]
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True)
        lines = read_first_lines(
            self.process.stdout, lambda line: line.startswith("listening: "), 30
        )
        return lines[-1].split(" ", 1)[1]

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            stop_process(self.process)


# --- worker: runs in a fresh process, measures itself ---------------------------------------


def worker(p: dict[str, Any]) -> None:
    """Cycles with the faulty nodes, then recovery cycles without them; one JSON line."""
    from exporter.config.exporter import Config  # noqa: PLC0415 (worker only)
    from exporter.poll.cycle import Poller  # noqa: PLC0415

    logging.getLogger("ledger_exporter").setLevel(logging.ERROR)
    healthy, faulty = build_nodes(p)
    nodes = (*healthy, *faulty) if p["faulty_last"] else (*faulty, *healthy)
    config = Config(
        nodes=nodes,
        scrape_interval=max(15.0, p["timeout"]),
        scrape_timeout=p["timeout"],
        max_concurrency=p["concurrency"],
        max_response_bytes=p["max_response_mib"] * 1024 * 1024,
    )
    poller = Poller(config, lambda snapshot: None)
    faulty_names = {node.name for node in faulty}
    cycles = [fault_cycle(poller, faulty_names, p["gap"]) for _ in range(p["cycles"])]
    memory = {"rss": status_mib("VmRSS"), "hanging": poller.requests_in_flight()}
    memory["trimmed"] = trimmed_rss()  # garbage in reference cycles is still held
    gc.collect()
    memory["collected"] = trimmed_rss()
    poller.apply(replace(config, nodes=healthy))
    recovery = [fault_cycle(poller, set(), p["gap"]) for _ in range(p["recovery"])]
    finish_worker(
        {
            "scenario": p["scenario"],
            "faulty": len(faulty),
            "wall": [c["wall"] for c in cycles],
            "cpu": statistics.median(c["cpu"] for c in cycles),
            "healthy_up": min(c["healthy_up"] for c in cycles),
            "faulty_up": max(c["faulty_up"] for c in cycles),
            "reasons": cycles[-1]["reasons"],
            "rss_peak": status_mib("VmHWM"),
            "recovered_up": min(c["healthy_up"] for c in recovery),
            **memory,
        }
    )


def trimmed_rss() -> float:
    """RSS after glibc's malloc_trim(0) hands free heap pages back to the OS: what is left is
    memory still referenced (live or awaiting the cyclic GC), not allocator fragmentation."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return float("nan")  # not glibc
    return status_mib("VmRSS")


def build_nodes(p: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Healthy simulator nodes and the scenario's faulty nodes, as NodeConfigs."""
    from exporter.config.nodes import NodeConfig  # noqa: PLC0415

    urls = {name: info["url"] for name, info in fetch_nodes(p["admin"]).items()}
    healthy = tuple(NodeConfig(name, urls[name]) for name in p["pools"]["healthy"])
    faulty: list[Any] = []
    for kind, count in p["mix"].items():
        if kind in SIM_KINDS:
            faulty += [NodeConfig(name, urls[name]) for name in p["pools"][kind][:count]]
        else:
            url = p["hostile"] + kind + "/"
            faulty += [NodeConfig(f"{kind}-{i}", url) for i in range(1, count + 1)]
    return healthy, tuple(faulty)


def fault_cycle(poller: Any, faulty: set[str], gap: float) -> dict[str, Any]:
    """One run_cycle, then ``gap`` seconds idle as between the exporter's cycles (leftover
    requests end meanwhile); wall and CPU of the cycle, who is up, why the faulty are not."""
    cpu_before, wall_before = time.process_time(), time.monotonic()
    snapshot = poller.run_cycle()
    wall = time.monotonic() - wall_before
    time.sleep(gap)
    cpu = time.process_time() - cpu_before
    bad = [node for node in snapshot.nodes if node.name in faulty]
    good = [node for node in snapshot.nodes if node.name not in faulty]
    reasons = collections.Counter(_reason(node.error) for node in bad if node.error)
    return {
        "wall": wall,
        "cpu": cpu,
        "healthy_up": sum(node.up for node in good),
        "faulty_up": sum(node.up for node in bad),
        "reasons": dict(reasons),
    }


def _reason(error: str) -> str:
    reason, _, detail = error.partition(": ")
    return "timeout (still hanging)" if "has not ended" in detail else reason


# --- SIGTERM while a request hangs -------------------------------------------------------------


def shutdown_check(args: argparse.Namespace, sim: SimProcess, hostile: str) -> list[list[str]]:
    """Time from SIGTERM to exit of the real exporter process, without and with a hung request."""
    urls = [info["url"] for info in fetch_nodes(sim.admin_url).values()][:HEALTHY]
    rows = []
    for label, extra in (
        (f"{HEALTHY} healthy", []),
        (f"{HEALTHY} healthy + 1 driphead", [hostile + "driphead/"]),
    ):
        print(f"shutdown check: {label} ...", file=sys.stderr)
        rows.append([label, sigterm_exit_time(args, [*urls, *extra])])
    return rows


def sigterm_exit_time(args: argparse.Namespace, urls: list[str]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "config.yml")
        lines = [f"scrape_interval: {args.timeout * 2}s", f"scrape_timeout: {args.timeout}s"]
        lines += ["nodes:"] + [f"  - {{name: n{i}, url: '{url}'}}" for i, url in enumerate(urls)]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        command = [PYTHON, "-m", "exporter", "--config.file", str(config)]
        command += ["--web.listen-address", "127.0.0.1:0", "--log.format", "logfmt"]
        process = subprocess.Popen(
            command, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        try:
            started = read_first_lines(process.stderr, lambda line: "port=" in line, 30)[-1]
            port = started.split("port=")[1].split()[0]
            wait_ready(f"http://127.0.0.1:{port}/-/ready", args.timeout + 30)
            time.sleep(args.timeout)  # let a hanging request outlive its cycle
            sent = time.monotonic()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(90)
            except subprocess.TimeoutExpired:
                return "still running after 90 s (killed)"
            return f"{time.monotonic() - sent:.1f} s (exit code {process.returncode})"
        finally:
            stop_process(process)


def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready within {timeout} s")


# --- table ------------------------------------------------------------------------------------


def table(results: list[dict[str, Any]]) -> str:
    header = [
        "scenario",
        "faulty nodes",
        "cycle s median / max",
        "CPU s/cycle",
        "healthy up (min)",
        "faulty up",
        "faulty nodes' errors (last cycle)",
        "requests hanging",
        "RSS MiB",
        "peak RSS MiB",
        "RSS MiB trimmed",
        "RSS MiB gc + trimmed",
        "healthy up after recovery",
    ]
    return markdown_table(header, [row(r) for r in results])


def row(r: dict[str, Any]) -> list[str]:
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items())) or "-"
    return [
        f"{r['scenario']}: {BLURB[r['scenario']]}",
        str(r["faulty"]),
        f"{statistics.median(r['wall']):.2f} / {max(r['wall']):.2f}",
        f"{r['cpu']:.2f}",
        f"{r['healthy_up']} / {HEALTHY}",
        f"{r['faulty_up']}",
        reasons,
        str(r["hanging"]),
        f"{r['rss']:.0f}",
        f"{r['rss_peak']:.0f}",
        f"{r['trimmed']:.0f}",
        f"{r['collected']:.0f}",
        f"{r['recovered_up']} / {HEALTHY}",
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
