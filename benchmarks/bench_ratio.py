"""Issue #22: the exporter all in against the bare engine limit, side by side in one run.

Run on demand, never in the test suite (about 3 minutes per fleet size with the defaults):

    .venv/bin/python benchmarks/bench_ratio.py                  # 1000 then 3000 nodes
    .venv/bin/python benchmarks/bench_ratio.py --nodes 1000 --cycles 4

One fleet stand-in per fleet size (``bench_fleet.py``'s asyncio server in its own process: one
port, node ``i`` under ``/n<i>/``, every answer ``--latency`` late on a kept-alive
connection) answering as richly as a real node: /health with 8 network peers, and on every
chain a full council of 7 keys of 66 characters, 8 chain peers, a vote session with its
leader, the consensus settings and three feature flags; the checkpoint block of each chain.

Measured one after the other against that same fleet, each in its own process:

- **bare**: a pycurl multi poller (one thread, ``socket_action`` on epoll, ``--in-flight``
  handles reused) doing exactly the exporter's requests (/health, then each chain's status
  and its checkpoint block) under the same deadline, and only decoding the JSON: the cost of
  the requests themselves, the limit any exporter built on the engine can reach;
- **exporter**: the real ``ledger-exporter`` process with default settings, ``scrape_interval:
  10s``, ``scrape_timeout: 5s`` (network and consensus checks on), scraped once per interval
  in each format (OpenMetrics and text, gzip), as Prometheus would.

The fleet shares the cores, so wall time says little: CPU is each process's own (user +
system from /proc/PID/stat) over the measured intervals, divided by the requests the fleet
served meanwhile. Printed per fleet size and process: CPU per node request, the ratio
exporter / bare, chains read within the deadline (worst measured cycle), the cycle's wall
time (the exporter's ``ledger_exporter_cycle_duration_seconds``), and peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_fleet import (
    CHAINS,
    OPENMETRICS,
    TEXT,
    _free_port,
    _get,
    _proc_cpu,
    _proc_mib,
    _sample,
    _served,
    _wait_for,
    serve_fleet,
)
from benchlib import PYTHON, REPO, MachineMeter, exporter_version, markdown_table

CHECKPOINT = 18337
COUNCIL = [f"02{i:02x}" + "a7" * 31 for i in range(7)]  # 7 compressed secp256k1 keys, 66 chars


def rich_documents() -> tuple[bytes, bytes, bytes]:
    """/health, chain status and block answers as rich as a real node's (see the docstring)."""
    peers = [f"12D3KooW{i:02d}" + "x" * 44 for i in range(8)]
    health = {
        "nodeVersion": "1.4.2",
        "nodeId": COUNCIL[0],
        "network": {
            "networkType": "p2p",
            "peerCount": len(peers),
            "peerId": "12D3KooWself" + "y" * 40,
            "networkPeers": peers,
        },
        "blockchains": list(CHAINS),
    }
    session = {
        "sessionId": "s-18343",
        "blockHash": "9d" * 32,
        "blockHeight": 18343,
        "round": 2,
        "currentStage": 1,
        "currentLeader": COUNCIL[3],
        "consensusRequired": 5,
    }
    chain = {
        "blockHeight": 18342,
        "lastMessageTime": "2024-05-01T12:00:00Z",
        "keyType": "secp256k1",
        "isInCouncil": True,
        "isVoting": True,
        "isTimeToVote": False,
        "syncing": False,
        "pendingMessagesCount": 3,
        "delayedMessagesCount": 1,
        "pendingTransactions": 7,
        "councilMembers": COUNCIL,
        "voteSessions": {session["sessionId"]: session},
        "consensus": {
            "consensusType": "council_leader_proposal",
            "txKarmaThreshold": 10,
            "txMintThreshold": 5,
            "txMaxTimeTrigger": "2s",
            "minMembers": 5,
            "consensusTimeout": "1m30s",
        },
        "features": {
            "enableJoinCouncilOnStartup": True,
            "enableXMOnBlockMint": False,
            "enableTxProof": True,
        },
        "blockchainPeers": peers,
    }
    block = {"height": CHECKPOINT, "hash": "7c" * 32, "previousHash": "3e" * 32,
             "transactions": []}  # fmt: skip
    return json.dumps(health).encode(), json.dumps(chain).encode(), json.dumps(block).encode()


# --- the bare poller (its own process) -----------------------------------------------------


class BarePoller:
    """The least a poller on libcurl's multi interface can do: the same GETs, JSON decoded,
    nothing else. Handles are configured once and reused; one epoll loop drives them."""

    def __init__(self, base: str, nodes: int, in_flight: int) -> None:
        import pycurl  # noqa: PLC0415 (only in the bare poller's process)

        self.pycurl = pycurl
        self.base, self.nodes = base, nodes
        self.epoll = select.epoll()
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        self.multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self.multi.setopt(pycurl.M_MAXCONNECTS, in_flight)
        self.timer_at: float | None = None
        self.free: list[Any] = []
        for _ in range(in_flight):
            curl = pycurl.Curl()
            curl.setopt(pycurl.NOSIGNAL, 1)
            curl.setopt(pycurl.PROXY, "")
            curl.setopt(pycurl.ACCEPT_ENCODING, "gzip, deflate")
            curl.setopt(pycurl.HTTPHEADER, ["Accept: application/json"])
            self.free.append(curl)
        self.active: dict[Any, tuple[str, int, io.BytesIO]] = {}
        self.queue: deque[tuple[str, int]] = deque()
        self.chains_read = 0
        self.requests = 0

    def _on_socket(self, what: int, fd: int, multi: Any, socketp: Any) -> None:
        pycurl = self.pycurl
        if what == pycurl.POLL_REMOVE:
            with contextlib.suppress(OSError, ValueError):
                self.epoll.unregister(fd)
            return
        flags = {pycurl.POLL_IN: select.EPOLLIN, pycurl.POLL_OUT: select.EPOLLOUT}.get(
            what, select.EPOLLIN | select.EPOLLOUT
        )
        try:
            self.epoll.modify(fd, flags)
        except FileNotFoundError:
            self.epoll.register(fd, flags)

    def _on_timer(self, timeout_ms: int) -> None:
        self.timer_at = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000

    def cycle(self, deadline: float) -> None:
        """One cycle: every node's /health, then its chains and blocks, until the deadline."""
        self.queue.extend((f"{self.base}/n{i}/health", -1) for i in range(self.nodes))
        pycurl = self.pycurl
        while (self.queue or self.active) and (now := time.monotonic()) < deadline:
            while self.queue and self.free:
                url, kind = self.queue.popleft()
                curl, buffer = self.free.pop(), io.BytesIO()
                curl.setopt(pycurl.URL, url)
                curl.setopt(pycurl.WRITEFUNCTION, buffer.write)
                curl.setopt(pycurl.TIMEOUT_MS, max(1, int((deadline - now) * 1000)))
                self.active[curl] = (url, kind, buffer)
                self.multi.add_handle(curl)
            wait = 0.1 if self.timer_at is None else max(0.0, self.timer_at - now)
            for fd, mask in self.epoll.poll(min(wait, 0.1)):
                flags = pycurl.CSELECT_IN if mask & (select.EPOLLIN | select.EPOLLHUP) else 0
                flags |= pycurl.CSELECT_OUT if mask & select.EPOLLOUT else 0
                self.multi.socket_action(fd, flags)
            if self.timer_at is not None and self.timer_at <= time.monotonic():
                self.timer_at = None
                self.multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
            self._collect()
        for curl in list(self.active):  # past the deadline: abandon what is left
            self.multi.remove_handle(curl)
            self.free.append(curl)
        self.active.clear()
        self.queue.clear()

    def _collect(self) -> None:
        while True:
            _, succeeded, failed = self.multi.info_read()
            for curl in succeeded:
                self._answered(curl, ok=True)
            for curl, _code, _message in failed:
                self._answered(curl, ok=False)
            if not succeeded and not failed:
                return

    def _answered(self, curl: Any, ok: bool) -> None:
        url, kind, buffer = self.active.pop(curl)
        self.multi.remove_handle(curl)
        self.free.append(curl)
        self.requests += 1
        if not ok or curl.getinfo(self.pycurl.RESPONSE_CODE) != 200:
            return
        document = json.loads(buffer.getvalue())
        if kind == -1:  # /health: then each chain's status and checkpoint block
            node = url[: -len("health")]
            for chain in document["blockchains"]:
                self.queue.append((f"{node}blockchains/{chain}", 0))
                self.queue.append((f"{node}blockchains/{chain}/blocks?height={CHECKPOINT}", 1))
        elif kind == 0 and isinstance(document, dict):
            self.chains_read += 1


def run_bare(args: argparse.Namespace) -> None:
    """Cycle every ``--interval`` s until SIGTERM; after each, append the chains it read
    and the cycle's wall time."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    poller = BarePoller(args.bare, int(args.nodes), args.in_flight)
    start = time.monotonic()
    while True:
        poller.chains_read = 0
        started = time.monotonic()
        poller.cycle(started + args.timeout)
        with Path(args.status).open("a") as out:
            out.write(f"{poller.chains_read} {time.monotonic() - started:.3f}\n")
        start += args.interval
        time.sleep(max(0.0, start - time.monotonic()))


# --- the driver --------------------------------------------------------------------------------


def _measure(pid: int, fleet_url: str, args: argparse.Namespace,
             cycle_chains: Any) -> dict[str, float]:  # fmt: skip
    """CPU of ``pid`` over ``args.cycles`` intervals, per request the fleet served meanwhile.
    ``cycle_chains`` is called once per interval from the start, warm-up included (for the
    exporter it is Prometheus's scrapes, so the measured cycles are the steady state)."""
    for _ in range(args.warmup):
        started = time.monotonic()
        cycle_chains()
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
    cpu0, served0 = _proc_cpu(pid), _served(fleet_url)
    chains, walls = [], []
    for _ in range(args.cycles):
        started = time.monotonic()
        read, wall = cycle_chains()
        chains += [read] if read >= 0 else []
        walls += [wall] if wall >= 0 else []
        time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
    cpu, served = _proc_cpu(pid) - cpu0, _served(fleet_url) - served0
    return {"cpu_ms": cpu / max(1, served) * 1000, "requests": served,
            "chains": min(chains, default=-1), "rss": _proc_mib(pid, "VmHWM"),
            "cycle": statistics.median(walls) if walls else -1,
            "cycle_max": max(walls, default=-1)}  # fmt: skip


def measure_bare(nodes: int, fleet_url: str, args: argparse.Namespace,
                 workdir: Path) -> dict[str, float]:  # fmt: skip
    status = workdir / f"bare-{nodes}.txt"
    status.write_text("")
    command = [PYTHON, __file__, "--bare", fleet_url, "--nodes", str(nodes),
               "--in-flight", str(args.in_flight), "--interval", str(args.interval),
               "--timeout", str(args.timeout), "--status", str(status)]  # fmt: skip
    process = subprocess.Popen(command)
    seen = [0]

    def cycle_chains() -> tuple[int, float]:  # the worst cycle ended since the last look
        lines = status.read_text().splitlines()
        new, seen[0] = [line.split() for line in lines[seen[0] :]], len(lines)
        if not new:
            return -1, -1.0
        return min(int(read) for read, _ in new), max(float(wall) for _, wall in new)

    try:
        _wait_for(lambda: process.poll() is None, 10)
        cycle_chains()
        return _measure(process.pid, fleet_url, args, cycle_chains)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def measure_exporter(nodes: int, fleet_url: str, args: argparse.Namespace,
                     workdir: Path) -> dict[str, float]:  # fmt: skip
    config = workdir / f"config-{nodes}.yml"
    lines = ["scrape_interval: 10s", f"scrape_timeout: {args.timeout:g}s", "nodes:"]
    lines += [f"  - {{name: n{i}, url: '{fleet_url}/n{i}/'}}" for i in range(nodes)]
    config.write_text("\n".join(lines) + "\n")
    port = _free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "exporter", "--config.file", str(config),
         "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
        cwd=args.exporter_tree or REPO,
    )  # fmt: skip
    metrics = f"http://127.0.0.1:{port}/metrics"

    def scrape() -> tuple[int, float]:  # Prometheus: one scrape per interval in each format
        _get(metrics, OPENMETRICS)
        text = _get(metrics, TEXT)[0].decode()
        cycle = _sample(text, "ledger_exporter_cycle_duration_seconds")
        return int(sum(_sample(text, "ledger_blockchain_up"))), cycle[0] if cycle else -1.0

    try:
        _wait_for(lambda: _get(f"http://127.0.0.1:{port}/-/ready", TEXT), 60)
        return _measure(process.pid, fleet_url, args, scrape)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet stand-in's and the cycle's options, shared with ``bench_stages.py``."""
    parser.add_argument("--latency", type=float, default=0.05, help="answer delay, s (0.05)")
    parser.add_argument("--timeout", type=float, default=5.0, help="cycle deadline, s (5)")
    parser.add_argument("--in-flight", type=int, default=512, help="bare poller's handles")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1000,3000", help="fleet sizes (1000,3000)")
    add_fleet_arguments(parser)
    parser.add_argument("--interval", type=float, default=10.0, help="cycle interval, s (10)")
    parser.add_argument("--warmup", type=int, default=2, help="intervals before measuring (2)")
    parser.add_argument("--cycles", type=int, default=5, help="measured intervals (5)")
    parser.add_argument(
        "--exporter-tree",
        help="measure the exporter package of this directory instead (e.g. an older commit's "
        "`git archive`), against the same fleet and bare poller",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--bare", help=argparse.SUPPRESS)
    parser.add_argument("--status", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_fleet(args.serve, args.latency, rich_documents)
        return 0
    if args.bare:
        run_bare(args)
        return 0
    meter, rows = MachineMeter(), []
    with tempfile.TemporaryDirectory() as folder:
        for nodes in (int(n) for n in args.nodes.split(",")):
            rows += _fleet_size(nodes, args, Path(folder))
    measured = f"exporter from {args.exporter_tree}" if args.exporter_tree else exporter_version()
    print(
        f"\n{measured}; latency {args.latency * 1000:.0f} ms, interval "
        f"{args.interval:g} s, deadline {args.timeout:g} s, {args.cycles} measured intervals "
        f"after {args.warmup}; {meter.report()}\n"
    )
    header = ["nodes", "process", "requests", "CPU/request", "ratio", "chains read (worst)",
              "cycle (median / max)", "peak RSS"]  # fmt: skip
    print(markdown_table(header, rows))
    return 0


def _fleet_size(nodes: int, args: argparse.Namespace, workdir: Path) -> list[list[str]]:
    port_file = workdir / f"fleet-{nodes}.port"
    fleet = subprocess.Popen(
        [PYTHON, __file__, "--serve", str(port_file), "--latency", str(args.latency)]
    )
    try:
        _wait_for(lambda: port_file.exists() and port_file.read_text(), 10)
        fleet_url = f"http://127.0.0.1:{port_file.read_text()}"
        print(f"{nodes} nodes: bare poller ...", file=sys.stderr)
        bare = measure_bare(nodes, fleet_url, args, workdir)
        print(f"{nodes} nodes: exporter ...", file=sys.stderr)
        full = measure_exporter(nodes, fleet_url, args, workdir)
    finally:
        fleet.send_signal(signal.SIGTERM)
        fleet.wait(10)
    chains = nodes * len(CHAINS)
    return [
        [str(nodes), name, f"{r['requests']:.0f}", f"{r['cpu_ms']:.3f} ms",
         f"{r['cpu_ms'] / bare['cpu_ms']:.2f}x", f"{r['chains']:.0f}/{chains}",
         f"{r['cycle']:.2f} / {r['cycle_max']:.2f} s", f"{r['rss']:.1f} MiB"]
        for name, r in (("bare engine", bare), ("exporter", full))
    ]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
