"""Issue #10's scenario: the real exporter process against a fleet that answers 50 ms late.

Run on demand, never in the test suite (about 2 minutes per fleet size):

    .venv/bin/python benchmarks/bench_fleet.py                  # 1000 then 3000 nodes
    .venv/bin/python benchmarks/bench_fleet.py --nodes 1000 --cycles 4

A fleet stand-in (one asyncio process, one port, node ``i`` under the path prefix ``/n<i>/``,
every answer sent ``--latency`` late on a kept-alive connection) serves N nodes x 3 chains.
The exporter runs as its own process with default settings, ``scrape_interval: 10s`` and
``scrape_timeout: 5s``. Prometheus is played by one scrape per interval in each format
(OpenMetrics and text, gzip). Printed per fleet size: cycle time, nodes up, exporter CPU per
node request (process CPU over requests the fleet served, rendering and scrapes included),
peak RSS (VmHWM), and /metrics latency p50/p99 while cycles run (a scrape every 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from benchlib import CLOCK_TICKS, PYTHON, REPO, markdown_table, percentile

CHAINS = ("8f2a9c", "b71e04", "c3d5aa")
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
TEXT = "text/plain;version=0.0.4"


# --- the fleet stand-in (runs in its own process) -------------------------------------------


def _documents() -> tuple[bytes, bytes, bytes]:
    health = {
        "nodeVersion": "1.4.2",
        "nodeId": "02ab" * 8,
        "network": {"networkType": "p2p", "peerCount": 4, "peerId": "12D3KooWpeer"},
        "blockchains": list(CHAINS),
    }
    chain = {
        "blockHeight": 18342,
        "lastMessageTime": "2024-05-01T12:00:00Z",
        "keyType": "secp256k1",
        "isInCouncil": True,
        "isVoting": False,
        "isTimeToVote": False,
        "syncing": False,
        "pendingMessagesCount": 3,
        "delayedMessagesCount": 1,
        "pendingTransactions": 7,
        "councilMembers": ["k1", "k2", "k3", "k4"],
        "voteSessions": {"s1": {"sessionId": "s1", "blockHeight": 18343, "round": 2}},
        "consensus": {
            "consensusType": "council_leader_proposal",
            "txKarmaThreshold": 10,
            "txMintThreshold": 5,
            "txMaxTimeTrigger": "2s",
            "minMembers": 3,
            "consensusTimeout": "1m30s",
        },
        "features": {"enableJoinCouncilOnStartup": True, "enableTxProof": False},
        "blockchainPeers": ["p1", "p2"],
    }
    # the checkpoint block (network checks are on by default): the same hash on every node
    block = {"height": 18337, "hash": "7c" * 32, "previousHash": "3e" * 32, "transactions": []}
    return json.dumps(health).encode(), json.dumps(chain).encode(), json.dumps(block).encode()


def _response(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


#: A fleet whose nodes answer differently: the JSON body of a request's path, None for 404.
Answers = Callable[[bytes], bytes | None]


class _FleetProtocol(asyncio.Protocol):
    """Minimal HTTP/1.1 keep-alive server: GETs only, answered ``latency`` seconds late;
    the same documents from every node, or with ``answers`` each path's own."""

    served = 0

    def __init__(self, latency: float, health: bytes, chain: bytes, block: bytes,
                 answers: Answers | None = None) -> None:  # fmt: skip
        self.latency, self.buffer = latency, b""
        self.health, self.chain, self.block = _response(health), _response(chain), _response(block)
        self.answers = answers
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            request, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            path = request.split(b" ", 2)[1]
            loop.call_later(self.latency, self._answer, path)

    def _answer(self, path: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if path == b"/-/served":
            self.transport.write(_response(str(_FleetProtocol.served).encode()))
            return
        _FleetProtocol.served += 1
        if self.answers is not None:
            body = self.answers(path)
            found = body is not None
            self.transport.write(_response(body or b"{}", "200 OK" if found else "404 Not Found"))
        elif path.endswith(b"/health"):
            self.transport.write(self.health)
        elif b"/blocks?" in path:
            self.transport.write(self.block)
        elif b"/blockchains/" in path:
            self.transport.write(self.chain)
        else:
            self.transport.write(_response(b"{}", "404 Not Found"))


def serve_fleet(
    port_file: str,
    latency: float,
    documents: Callable[[], tuple[bytes, bytes, bytes]] = _documents,
    answers: Answers | None = None,
) -> None:
    """Serve the fleet until SIGTERM; write the port to ``port_file`` once listening.
    ``documents`` gives the /health, chain status and block answers every node sends;
    ``answers``, when given, each path's answer instead."""

    async def main() -> None:
        health, chain, block = documents()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _FleetProtocol(latency, health, chain, block, answers),
            "127.0.0.1",
            0,
            backlog=4096,
        )
        Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()

    asyncio.run(main())


# --- the measuring side -----------------------------------------------------------------------


def _get(url: str, accept: str) -> tuple[bytes, float]:
    """The decoded body and the seconds the HTTP exchange took (decoding not included)."""
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"Accept": accept, "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        encoded = response.headers.get("Content-Encoding") == "gzip"
    took = time.perf_counter() - started
    return (gzip.decompress(body) if encoded else body), took


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _proc_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("timed out waiting for a benchmark process")


def _sample(text: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]


def measure(nodes: int, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    """One fleet size: start fleet and exporter, run warm-up and measured cycles, read figures."""
    port_file = workdir / f"fleet-{nodes}.port"
    fleet = subprocess.Popen(
        [PYTHON, __file__, "--serve", str(port_file), "--latency", str(args.latency)]
    )
    exporter = None
    try:
        _wait_for(lambda: port_file.exists() and port_file.read_text(), 10)
        fleet_url = f"http://127.0.0.1:{port_file.read_text()}"
        config = workdir / f"config-{nodes}.yml"
        lines = ["scrape_interval: 10s", "scrape_timeout: 5s", "nodes:"]
        lines += [f"  - {{name: n{i}, url: '{fleet_url}/n{i}/'}}" for i in range(nodes)]
        config.write_text("\n".join(lines) + "\n")
        port = _free_port()
        exporter = subprocess.Popen(
            [PYTHON, "-m", "exporter", "--config.file", str(config),
             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
            cwd=REPO,
        )  # fmt: skip
        metrics = f"http://127.0.0.1:{port}/metrics"
        _wait_for(lambda: _get(f"http://127.0.0.1:{port}/-/ready", TEXT), 60)
        return _run_cycles(exporter.pid, metrics, fleet_url, args)
    finally:
        for process in (exporter, fleet):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(10)


def _served(fleet_url: str) -> int:
    body, _ = _get(fleet_url + "/-/served", TEXT)
    return int(body)


def _run_cycles(
    pid: int, metrics: str, fleet_url: str, args: argparse.Namespace
) -> dict[str, float]:
    time.sleep(args.interval * args.warmup)
    cpu0, served0, start = _proc_cpu(pid), _served(fleet_url), time.monotonic()
    latencies, cycles, up = [], [], 0.0
    end = start + args.interval * args.cycles
    next_prometheus = start
    while (now := time.monotonic()) < end:
        if now >= next_prometheus:  # Prometheus: one scrape per interval per format
            next_prometheus += args.interval
            _get(metrics, OPENMETRICS)
            text, _ = _get(metrics, TEXT)
            cycles += _sample(text.decode(), "ledger_exporter_cycle_duration_seconds")
            up = sum(_sample(text.decode(), "ledger_node_up"))
        time.sleep(0.05)
        latencies.append(_get(metrics, OPENMETRICS)[1] * 1000)
    cpu = _proc_cpu(pid) - cpu0
    served = _served(fleet_url) - served0
    # the latency scrapes are not Prometheus's: take their CPU out (measured on their own)
    cpu_scrapes = _scrape_cpu(pid, metrics, len(latencies))
    return {
        "cycle_s": statistics.median(cycles),
        "cycle_max_s": max(cycles),
        "up": up,
        "requests": served,
        "cpu_ms_per_request": max(0.0, cpu - cpu_scrapes) / served * 1000,
        "rss_mib": _proc_mib(pid, "VmHWM"),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
    }


def _scrape_cpu(pid: int, metrics: str, count: int) -> float:
    """Exporter CPU of ``count`` cached gzip scrapes, measured between cycles."""
    cpu0 = _proc_cpu(pid)
    for _ in range(count):
        _get(metrics, OPENMETRICS)
    return _proc_cpu(pid) - cpu0


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,3000", help="fleet sizes (1000,3000)")
    parser.add_argument("--latency", type=float, default=0.05, help="answer delay, s (0.05)")
    parser.add_argument("--interval", type=float, default=10.0, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=2, help="cycles before measuring (2)")
    parser.add_argument("--cycles", type=int, default=6, help="measured cycles (6)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_fleet(args.serve, args.latency)
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for nodes in (int(n) for n in args.nodes.split(",")):
            print(f"measuring {nodes} nodes x {len(CHAINS)} chains ...", file=sys.stderr)
            r = measure(nodes, args, Path(folder))
            rows.append(
                [f"{nodes}", f"{r['cycle_s']:.2f} s (max {r['cycle_max_s']:.2f})",
                 f"{r['up']:.0f}/{nodes}", f"{r['requests']:.0f}",
                 f"{r['cpu_ms_per_request']:.3f} ms", f"{r['rss_mib']:.1f} MiB",
                 f"{r['p50_ms']:.1f} ms", f"{r['p99_ms']:.1f} ms"]
            )  # fmt: skip
    print(
        f"\nlatency {args.latency * 1000:.0f} ms, scrape_interval 10s, scrape_timeout 5s, "
        f"{args.cycles} measured cycles after {args.warmup}, {os.cpu_count()} CPUs\n"
    )
    header = ["nodes", "cycle (median)", "up", "requests", "CPU/request", "peak RSS",
              "/metrics p50", "/metrics p99"]  # fmt: skip
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
