"""Issue #22: the exporter all in against the bare engine limit, side by side in one run.

Run on demand, never in the test suite (about 1.5 minutes per fleet size with the defaults;
``--perf`` adds where each process's CPU goes, interpreted or native: see perfsplit.py):

    .venv/bin/python benchmarks/bench_ratio.py                  # 1000 then 3000 nodes
    .venv/bin/python benchmarks/bench_ratio.py --nodes 1000 --cycles 4
    .venv/bin/python benchmarks/bench_ratio.py --answers varied-large --scrape-every 0.5
    .venv/bin/python benchmarks/bench_ratio.py --exporter-bin /other/tree/.venv/bin/ledger-exporter

Two fleet stand-ins per fleet size, one for each measured process (``bench_fleet.py``'s
asyncio server in its own process: one port, node ``i`` under ``/n<i>/``, every answer
``--latency`` late on a kept-alive connection; the requests each served tell the two processes'
apart), answering as richly as a real node: /health with 8 network peers, and on every chain a
full council of 7 keys of 66 characters, 8 chain peers, a vote session with its leader, the
consensus settings and three feature flags; the checkpoint block of each chain.
``--answers varied-small`` or ``varied-large`` serves answers that differ from node to node,
as a large network's (``fleet_answers.py``: 7 or 21 council members, 8 or 40 peers, 1 or 3
open vote sessions, 3 or 12 feature flags per chain; each node's own heights, queue counts,
peers and vote rounds), so little is shared across nodes.

Measured side by side over the same intervals, each in its own process:

- **bare**: a pycurl multi poller (one thread, ``socket_action`` on epoll, ``--in-flight``
  handles reused) doing exactly the exporter's requests (/health, then each chain's status
  and its checkpoint block) under the same deadline, and only decoding the JSON: the cost of
  the requests themselves, the limit any exporter built on the engine can reach;
- **exporter**: the real ``ledger-exporter`` process with default settings, ``scrape_interval:
  10s``, ``scrape_timeout: 5s`` (network and consensus checks on), scraped once per interval
  in each format (OpenMetrics and text, gzip), as Prometheus would; with ``--scrape-every``
  also every that many seconds in both formats (gzip) all along, as several Prometheus
  servers and dashboards would. ``--exporter-bin`` runs another tree's ``ledger-exporter``
  (its own venv and code) against the same fleet and bare poller: ``bench_ab.py`` does so
  for two trees in turn.

The exporter's cycles start at each interval's 0, the bare poller's half an interval later, so
the two never poll at once yet share every slow or fast spell of the host: measured one after
the other, a spell falling on one process only moved the ratio by a third on a shared machine.
Both run on the machine's last CPU, the fleets and this driver on the others (as nodes run on
other machines): unpinned, where the scheduler put each process moved the ratio run to run
(1.37-1.85x at 1000 nodes in one afternoon; pinned, 1.62-1.73x).
The fleets share the machine, so wall time says little: CPU is each process's own (user +
system from /proc/PID/stat) over the measured intervals, divided by the requests its fleet
served meanwhile. Printed per fleet size and process: CPU per node request, the ratio
exporter / bare, chains read within the deadline (worst measured cycle), the cycle's wall
time (the exporter's ``ledger_exporter_cycle_duration_seconds``), and peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

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
from benchlib import (
    PYTHON,
    REPO,
    MachineMeter,
    exporter_version,
    markdown_table,
    stop_process,
)
from fleet_answers import CHECKPOINT, SHAPES, VariedAnswers
from perfsplit import HEADER as PERF_HEADER
from perfsplit import PerfError, PerfRecording, require_perf, split_rows

COUNCIL = [f"02{i:02x}" + "a7" * 31 for i in range(7)]  # 7 compressed secp256k1 keys, 66 chars
#: The CPUs each side runs on: the measured processes (bare poller, exporter) on the last,
#: the fleet stand-ins and this driver on the others, as nodes run on other machines; a
#: one-CPU machine shares it.
_CPUS = sorted(os.sched_getaffinity(0))
MEASURED_CPUS, FLEET_CPUS = set(_CPUS[-1:]), set(_CPUS[:-1] or _CPUS)
#: Prefix of a measured process's command: util-linux's taskset, so every thread it starts is
#: kept on MEASURED_CPUS from the first instruction.
PINNED = ["taskset", "--cpu-list", ",".join(map(str, sorted(MEASURED_CPUS)))]


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
    """From ``--start-at`` (a CLOCK_MONOTONIC time, shared by every process here) cycle every
    ``--interval`` s until SIGTERM; after each, append the chains it read and the cycle's
    wall time."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    poller = BarePoller(args.bare, int(args.nodes), args.in_flight)
    start = float(args.start_at)
    time.sleep(max(0.0, start - time.monotonic()))
    while True:
        poller.chains_read = 0
        started = time.monotonic()
        poller.cycle(started + args.timeout)
        with Path(args.status).open("a") as out:
            out.write(f"{poller.chains_read} {time.monotonic() - started:.3f}\n")
        start = max(start + args.interval, time.monotonic())  # a late cycle skips ticks
        time.sleep(max(0.0, start - time.monotonic()))


# --- the driver --------------------------------------------------------------------------------


#: Where in each interval things happen, as fractions of it: the exporter's cycle starts at 0
#: (then renders both formats), Prometheus scrapes it at SCRAPE_PHASE, the bare poller's cycle
#: starts at BARE_PHASE, and CPU and served requests are read at READ_PHASE, when neither
#: process polls. At 3000 nodes the exporter is done by about 0.3, the bare poller by 0.75.
SCRAPE_PHASE, BARE_PHASE, READ_PHASE = 0.35, 0.5, 0.9
#: The exporter's own figure of its last cycle's wall time.
CYCLE_METRIC = "ledger_exporter_cycle_duration_seconds"


def start_fleet(port_file: Path, args: argparse.Namespace,
                started: list[subprocess.Popen[bytes]]) -> str:  # fmt: skip
    """A fleet stand-in in its own process, appended to ``started`` (on the caller's CPUs:
    FLEET_CPUS here); its URL. Its served requests are one measured process's."""
    command = [PYTHON, __file__, "--serve", str(port_file), "--latency", str(args.latency),
               "--answers", args.answers]  # fmt: skip
    started.append(subprocess.Popen(command))
    _wait_for(lambda: port_file.exists() and port_file.read_text(), 10)
    return f"http://127.0.0.1:{port_file.read_text()}"


class Bare:
    """The bare poller's process, cycling from ``start_at``; its status file says what each
    cycle read and how long it took."""

    def __init__(self, nodes: int, fleet_url: str, args: argparse.Namespace, workdir: Path,
                 start_at: float) -> None:  # fmt: skip
        self.status = workdir / f"bare-{nodes}.txt"
        self.status.write_text("")
        command = [*PINNED, PYTHON, __file__, "--bare", fleet_url, "--nodes", str(nodes),
                   "--in-flight", str(args.in_flight), "--interval", str(args.interval),
                   "--timeout", str(args.timeout), "--status", str(self.status),
                   "--start-at", repr(start_at)]  # fmt: skip
        self.process = subprocess.Popen(command)
        self.seen = 0

    def cycles(self) -> list[tuple[int, float]]:
        """(chains read, wall seconds) of each cycle ended since the last call."""
        lines = self.status.read_text().splitlines()
        new, self.seen = lines[self.seen :], len(lines)
        return [(int(read), float(wall)) for read, wall in (line.split() for line in new)]


class Exporter:
    """The real ``ledger-exporter`` process, scraped as Prometheus would."""

    def __init__(self, nodes: int, fleet_url: str, args: argparse.Namespace,
                 workdir: Path) -> None:  # fmt: skip
        config = workdir / f"config-{nodes}.yml"
        lines = [f"scrape_interval: {args.interval:g}s", f"scrape_timeout: {args.timeout:g}s"]
        lines += [
            "nodes:",
            *(f"  - {{name: n{i}, url: '{fleet_url}/n{i}/'}}" for i in range(nodes)),
        ]
        config.write_text("\n".join(lines) + "\n")
        port = _free_port()
        self.process = subprocess.Popen(
            [*PINNED, *exporter_command(args), "--config.file", str(config),
             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"],
            cwd=args.exporter_tree or REPO,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{port}"
        self.scraper = Scraper(self.url, args.scrape_every) if args.scrape_every else None

    def first_cycle_started(self) -> float:
        """Wait for the first cycle's snapshot; when (CLOCK_MONOTONIC) that cycle began."""

        def ready() -> bool:
            if self.process.poll() is not None:
                raise SystemExit(f"the exporter ended at start ({self.process.returncode})")
            return bool(_get(f"{self.url}/-/ready", TEXT))

        _wait_for(ready, 120)
        seen = time.monotonic()
        cycle = _sample(_get(f"{self.url}/metrics", TEXT)[0].decode(), CYCLE_METRIC)
        if not cycle:
            raise SystemExit(f"the exporter serves no {CYCLE_METRIC}: is it this project's?")
        return seen - cycle[0]

    def scrape(self) -> tuple[int, float]:
        """One scrape in each format, as Prometheus: chains up, and the last cycle's time."""
        _get(f"{self.url}/metrics", OPENMETRICS)
        text = _get(f"{self.url}/metrics", TEXT)[0].decode()
        cycle = _sample(text, CYCLE_METRIC)
        return int(sum(_sample(text, "ledger_blockchain_up"))), cycle[0] if cycle else -1.0


def exporter_command(args: argparse.Namespace) -> list[str]:
    """How the exporter process is started: ``--exporter-bin`` (another tree's console
    script, in that tree's venv), else this interpreter's ``-m exporter``."""
    return [args.exporter_bin] if args.exporter_bin else [PYTHON, "-m", "exporter"]


class Scraper:
    """Scrapes ``/metrics`` in both formats with gzip every ``every`` seconds on a thread of
    its own (this driver's CPUs), the bodies read and dropped undecoded, until ``stop()``."""

    def __init__(self, url: str, every: float) -> None:
        self.url, self.every, self.scrapes, self.failures = f"{url}/metrics", every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            due += self.every
            for accept in (OPENMETRICS, TEXT):
                request = urllib.request.Request(
                    self.url, headers={"Accept": accept, "Accept-Encoding": "gzip"}
                )
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        response.read()
                    self.scrapes += 1
                except OSError:
                    self.failures += 1  # before the exporter listens, or as it stops
            due = max(due, time.monotonic())  # a slow scrape skips ticks

    def stop(self) -> None:
        """Stop scraping (after the scrape under way)."""
        self._stop.set()
        self._thread.join(15)


class Measured(NamedTuple):
    """One fleet size's figures per process ("bare", "exporter": CPU per request in ms,
    requests served, CPU seconds, chains read, cycle times, peak RSS), and with ``--perf``
    each process's samples by kind."""

    figures: dict[str, dict[str, float]]
    samples: dict[str, Counter[str]] | None


def measure_side_by_side(nodes: int, args: argparse.Namespace,
                         workdir: Path) -> Measured:  # fmt: skip
    """Both processes over the same intervals, each against its own fleet stand-in, at the
    phases above; every process started is stopped, whatever fails."""
    started: list[subprocess.Popen[bytes]] = []
    perf, exporter = None, None
    try:
        fleets = [start_fleet(workdir / f"fleet-{nodes}-{name}.port", args, started)
                  for name in ("bare", "exporter")]  # fmt: skip
        exporter = Exporter(nodes, fleets[1], args, workdir)
        started.append(exporter.process)
        origin = exporter.first_cycle_started()
        bare = Bare(nodes, fleets[0], args, workdir, origin + args.interval * BARE_PHASE)
        started.append(bare.process)
        if args.perf:
            owners = {"bare": bare.process.pid, "exporter": exporter.process.pid}
            perf = PerfRecording(workdir / f"perf-{nodes}.data", owners, MEASURED_CPUS)
        return _measure_intervals(origin, exporter, bare, fleets, args, perf=perf)
    finally:
        if perf is not None:
            perf.close()
        if exporter is not None and exporter.scraper is not None:
            exporter.scraper.stop()
        for process in reversed(started):
            stop_process(process)


def _measure_intervals(origin: float, exporter: Exporter, bare: Bare, fleets: list[str],
                       args: argparse.Namespace, *,
                       perf: PerfRecording | None) -> Measured:  # fmt: skip
    """Warm-up intervals, then the measured ones; each process's CPU per request served
    (and, with ``perf``, its samples by kind over the same window). The window from
    READ_PHASE to READ_PHASE holds ``args.cycles`` cycles of each."""

    def at(interval: int, phase: float) -> None:
        time.sleep(max(0.0, origin + (interval + phase) * args.interval - time.monotonic()))

    pids = (bare.process.pid, exporter.process.pid)
    first = 1 + args.warmup  # the bare poller's cycles start in interval 0, as the exporter's
    for interval in range(1, first):  # interval 0's scrape would find the first snapshot late
        at(interval, SCRAPE_PHASE)
        exporter.scrape()
    at(first - 1, READ_PHASE)
    cpu0, served0 = [_proc_cpu(pid) for pid in pids], [_served(url) for url in fleets]
    if perf is not None:
        perf.start()
    bare.cycles()
    scraped = []
    for interval in range(first, first + args.cycles):
        at(interval, SCRAPE_PHASE)
        scraped.append(exporter.scrape())
    at(first + args.cycles - 1, READ_PHASE)
    cpu = [_proc_cpu(pid) - before for pid, before in zip(pids, cpu0, strict=True)]
    served = [_served(url) - before for url, before in zip(fleets, served0, strict=True)]
    samples = None if perf is None else perf.stop()
    figures = {}
    for index, (name, cycles) in enumerate((("bare", bare.cycles()), ("exporter", scraped))):
        walls = [wall for _, wall in cycles if wall >= 0]  # -1: a scrape without the figure
        figures[name] = {
            "cpu_ms": cpu[index] / max(1, served[index]) * 1000, "requests": served[index],
            "cpu_s": cpu[index],
            "chains": min((c[0] for c in cycles), default=-1),
            "cycle": statistics.median(walls) if walls else -1,
            "cycle_max": max(walls, default=-1), "rss": _proc_mib(pids[index], "VmHWM"),
        }  # fmt: skip
    return Measured(figures, samples)


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet stand-in's and the cycle's options, shared with ``bench_stages.py``."""
    parser.add_argument("--latency", type=float, default=0.05, help="answer delay, s (0.05)")
    parser.add_argument("--timeout", type=float, default=5.0, help="cycle deadline, s (5)")
    parser.add_argument("--in-flight", type=int, default=512, help="bare poller's handles")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line; ``--perf`` fails here, before any fleet starts, without perf."""
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
    parser.add_argument(
        "--exporter-bin",
        help="run this ledger-exporter command instead of this interpreter's `-m exporter` "
        "(e.g. another tree's .venv/bin/ledger-exporter: its own code and venv)",
    )
    parser.add_argument(
        "--answers",
        choices=sorted(SHAPES),
        default="rich",
        help="the fleet's answers: the same rich ones on every node (rich, the default), or "
        "varied node by node with a small or a large network's council, peers, vote sessions "
        "and feature flags (see fleet_answers.py)",
    )
    parser.add_argument(
        "--scrape-every",
        type=float,
        default=0.0,
        help="also scrape /metrics in both formats with gzip every this many seconds "
        "(0: only Prometheus's scrape once per interval, the default)",
    )
    parser.add_argument(
        "--perf",
        action="store_true",
        help="also sample the measured CPU with Linux perf over the measured intervals and "
        "print each process's interpreted and native CPU per request, and the floor",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--bare", help=argparse.SUPPRESS)
    parser.add_argument("--status", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.perf:
        try:
            require_perf()
        except PerfError as error:
            parser.error(str(error))
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.serve:
        shape = SHAPES[args.answers]
        answers = None if shape is None else VariedAnswers(shape).answer
        serve_fleet(args.serve, args.latency, rich_documents, answers)
        return 0
    if args.bare:
        run_bare(args)
        return 0
    os.sched_setaffinity(0, FLEET_CPUS)  # this driver and the fleets it starts
    meter, rows, perf_rows = MachineMeter(), [], []
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        for nodes in (int(n) for n in args.nodes.split(",")):
            fleet = _fleet_size(nodes, args, Path(folder))
            rows += _rows(nodes, fleet.figures)
            if fleet.samples is not None:
                perf_rows += split_rows(nodes, fleet.samples, fleet.figures)
    measured = (
        f"exporter {args.exporter_bin}" if args.exporter_bin
        else f"exporter from {args.exporter_tree}" if args.exporter_tree
        else exporter_version()
    )  # fmt: skip
    scraped = f", also scraped every {args.scrape_every:g} s" if args.scrape_every else ""
    print(
        f"\n{measured}; answers {args.answers}{scraped}; latency {args.latency * 1000:.0f} ms, "
        f"interval {args.interval:g} s, deadline {args.timeout:g} s, {args.cycles} measured "
        f"intervals after {args.warmup}; {meter.report()}; load average (1, 5, 15 min) "
        f"{load_before} at start, {load_average()} at end\n"
    )
    header = ["nodes", "process", "requests", "CPU/request", "ratio", "chains read (worst)",
              "cycle (median / max)", "peak RSS"]  # fmt: skip
    print(markdown_table(header, rows))
    if perf_rows:
        print("\nperf samples over the same intervals (perf itself on the other CPUs):\n")
        print(markdown_table(PERF_HEADER, perf_rows))
    return 0


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes, as ``uptime`` prints them."""
    return ", ".join(f"{load:.2f}" for load in os.getloadavg())


def _fleet_size(nodes: int, args: argparse.Namespace, workdir: Path) -> Measured:
    """One fleet size measured, saying so on stderr (a run takes minutes)."""
    print(f"{nodes} nodes: bare poller and exporter side by side ...", file=sys.stderr)
    return measure_side_by_side(nodes, args, workdir)


def _rows(nodes: int, figures: dict[str, dict[str, float]]) -> list[list[str]]:
    """The main table's rows of one fleet size."""
    bare, chains = figures["bare"], nodes * len(CHAINS)
    return [
        [str(nodes), name, f"{r['requests']:.0f}", f"{r['cpu_ms']:.3f} ms",
         f"{r['cpu_ms'] / bare['cpu_ms']:.2f}x", f"{r['chains']:.0f}/{chains}",
         f"{r['cycle']:.2f} / {r['cycle_max']:.2f} s", f"{r['rss']:.1f} MiB"]
        for name, r in (("bare engine", bare), ("exporter", figures["exporter"]))
    ]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
