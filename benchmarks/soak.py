"""Soak: hundreds of nodes, a tenth misbehaving, a 1 s interval, for as long as you like.

    python benchmarks/soak.py [--minutes 30] [--nodes 300] [--sample-seconds 60]

Three processes on 127.0.0.1: a cheap stand-in for the nodes (asyncio, canned documents from
the simulator, heights moving every second), the exporter (``ledger-exporter`` itself, JSON
logs, with a sampler thread that reports its Python heap) and this script, which samples the
exporter's RSS, threads and open descriptors from /proc, scrapes ``/metrics`` and ``/`` like
Prometheus and an operator would, then prints a table and a verdict on growth.

Every tenth node misbehaves, in turn: down (connection refused), 500s, invalid JSON, too slow
(answers after the scrape timeout) and connection dropped mid-body. With ``--stalled N``, N
clients keep a connection open to the exporter with half a request for the whole run. The
exit status is 0 when memory, threads and descriptors stayed flat after the warm-up, 1 when
one of them grew.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from benchlib import stop_process

REPO = Path(__file__).resolve().parent.parent
MODES = ("down", "http_500", "invalid_json", "slow", "drop_mid_body")
SLOW_SECONDS = 3.0  # longer than the soak's scrape timeout

# The exporter child: a thread appends the Python heap to a file, then the real CLI runs.
_EXPORTER_BOOT = """
import gc, json, sys, threading, time
def sample(path, every):
    while True:
        line = {"t": time.time(), "blocks": sys.getallocatedblocks(),
                "objects": len(gc.get_objects())}
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\\n")
        time.sleep(every)
threading.Thread(target=sample, args=(sys.argv[1], float(sys.argv[2])), daemon=True).start()
from exporter.cli import main
sys.exit(main(sys.argv[3:]))
"""


def mode_of(index: int) -> str:
    """``ok`` for nine nodes in ten; the tenth cycles through the misbehaviours."""
    if index % 10 != 9:
        return "ok"
    return MODES[(index // 10) % len(MODES)]


# --- the stand-in nodes --------------------------------------------------------------------


class StandIn:
    """Serves ``/n<i>/health`` and ``/n<i>/blockchains/<id>`` for every node, misbehaving
    as ``mode_of(i)`` says; one asyncio loop, so it costs little next to the exporter."""

    def __init__(self, chains: int) -> None:
        from ledger_simulator.network import SimulatedNetwork  # noqa: PLC0415

        network = SimulatedNetwork(nodes=1, chains=chains, seed=1)
        name = network.node_names[0]
        self.health = network.health(name)
        self.chains = {chain: network.blockchain(name, chain) for chain in network.chain_ids}
        self.started = time.time()

    def document(self, node: int, path: list[str]) -> dict[str, Any] | None:
        if path == ["health"]:
            return self.health
        if len(path) == 2 and path[0] == "blockchains" and path[1] in self.chains:
            # Heights move once a second, a little apart per node, so blocks-behind is real.
            height = int(time.time() - self.started) + 1000 - node % 3
            return {**self.chains[path[1]], "blockHeight": height}
        return None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self.answer(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        target = head.split(b" ", 2)[1].decode("latin-1")
        segments = [part for part in target.split("?")[0].split("/") if part]
        node = int(segments[0][1:]) if segments and segments[0][1:].isdigit() else -1
        mode = mode_of(node)
        document = self.document(node, segments[1:]) if node >= 0 else None
        status, body = (200, json.dumps(document).encode()) if document else (404, b"{}")
        if mode == "http_500":
            status, body = 500, b'{"error": "internal"}'
        elif mode == "invalid_json":
            body = body[: len(body) // 2]
        elif mode == "slow":
            await asyncio.sleep(SLOW_SECONDS)
        head_out = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        if mode == "drop_mid_body":
            writer.write(head_out + body[: len(body) // 2])
            await writer.drain()
            return False
        writer.write(head_out + body)
        await writer.drain()
        return True


async def _stand_in_main(chains: int, lifetime: float) -> None:
    stand_in = StandIn(chains)
    server = await asyncio.start_server(stand_in.serve, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(json.dumps({"port": port, "chains": list(stand_in.chains)}), flush=True)
    async with server:
        await asyncio.sleep(lifetime)


# --- the exporter and the samples ----------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One reading of the exporter process."""

    minute: float
    rss_mib: float
    threads: int
    fds: int
    heap_blocks: int
    gc_objects: int
    nodes_up: int
    scrape_ms: float


def write_config(folder: Path, port: int, down_port: int, nodes: int) -> Path:
    lines = ["scrape_interval: 1s", "scrape_timeout: 800ms", "nodes:"]
    for index in range(nodes):
        base = down_port if mode_of(index) == "down" else port
        lines += [f"  - name: node-{index}", f"    url: http://127.0.0.1:{base}/n{index}/"]
    path = folder / "soak.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def proc_reading(pid: int) -> tuple[float, int, int]:
    """RSS in MiB, threads and open descriptors of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    return rss, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def scrape(port: int) -> tuple[int, float]:
    """Nodes up according to /metrics, and how long the scrape took in ms; also loads /."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    took = (time.monotonic() - started) * 1000
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        response.read()
    up = sum(
        1
        for line in text.splitlines()
        if line.startswith("ledger_node_up{") and float(line.rsplit(" ", 1)[1]) == 1
    )
    return up, took


def last_heap_line(path: Path) -> dict[str, Any]:
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(json.loads(lines[-1])) if lines else {"blocks": 0, "objects": 0}


def exporter_port(stderr: IO[str], timeout: float) -> int:
    """The port from the exporter's "started" JSON log line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stderr.seek(0)
        for line in stderr.read().splitlines():
            record = json.loads(line)
            if record.get("msg") == "ledger-exporter started":
                return int(record["port"])
        time.sleep(0.2)
    stderr.seek(0)
    raise RuntimeError(f"the exporter did not start: {stderr.read()[-2000:]}")


class Slowloris:
    """``count`` clients that open a connection to the exporter and send half a request, for
    the whole run; each one the exporter closes is opened again within a second."""

    HALF = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */"

    def __init__(self, count: int) -> None:
        self.count = count
        self.reopened = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, port: int) -> None:
        if self.count:
            self._thread = threading.Thread(target=self._run, args=(port,), daemon=True)
            self._thread.start()

    def _open(self, port: int) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(self.HALF)
            sock.setblocking(False)
            return sock
        except OSError:
            return None

    def _run(self, port: int) -> None:
        socks: list[socket.socket | None] = [self._open(port) for _ in range(self.count)]
        while not self._stop.wait(1.0):
            for index, sock in enumerate(socks):
                if sock is None or _closed(sock):
                    if sock is not None:
                        sock.close()
                    socks[index] = self._open(port)
                    self.reopened += 1
        for sock in socks:
            if sock is not None:
                sock.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


# --- verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """How much growth after the warm-up still counts as flat."""

    rss_mib: float
    threads: int
    fds: int
    heap_fraction: float


def growth(samples: Sequence[Sample], warmup: int) -> dict[str, float]:
    """Each measure's growth from the end of the warm-up to the end (the larger of the last
    sample and the mean of the last third, so one late spike is not a trend)."""
    settled = samples[warmup:]
    tail = settled[-max(1, len(settled) // 3) :]
    result = {}
    for name in ("rss_mib", "threads", "fds", "heap_blocks"):
        start = max(getattr(sample, name) for sample in settled[:2])
        end = min(getattr(tail[-1], name), sum(getattr(s, name) for s in tail) / len(tail))
        result[name] = end - start
    result["heap_start"] = max(sample.heap_blocks for sample in settled[:2])
    return result


def verdict(samples: Sequence[Sample], warmup: int, limits: Limits) -> list[str]:
    """Problems with the growth; empty when everything stayed flat."""
    grown = growth(samples, warmup)
    problems = []
    if grown["rss_mib"] > limits.rss_mib:
        problems.append(f"RSS grew {grown['rss_mib']:.1f} MiB (limit {limits.rss_mib})")
    if grown["threads"] > limits.threads:
        problems.append(f"threads grew by {grown['threads']:.0f} (limit {limits.threads})")
    if grown["fds"] > limits.fds:
        problems.append(f"open descriptors grew by {grown['fds']:.0f} (limit {limits.fds})")
    if grown["heap_blocks"] > limits.heap_fraction * grown["heap_start"]:
        problems.append(
            f"Python heap grew {grown['heap_blocks']:.0f} blocks "
            f"(limit {limits.heap_fraction:.0%} of {grown['heap_start']:.0f})"
        )
    return problems


def table(samples: Sequence[Sample]) -> str:
    header = (
        "| minute | RSS MiB | threads | fds | heap blocks | gc objects | nodes up | scrape ms |"
    )
    rows = [header, "|" + "---|" * 8]
    rows += [
        f"| {s.minute:.2f} | {s.rss_mib:.1f} | {s.threads} | {s.fds} | {s.heap_blocks} "
        f"| {s.gc_objects} | {s.nodes_up} | {s.scrape_ms:.1f} |"
        for s in samples
    ]
    return "\n".join(rows)


# --- the run -------------------------------------------------------------------------------


def start_stand_in(chains: int, lifetime: float) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--stand-in", "--chains", str(chains), "--lifetime",
         str(lifetime)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError("the stand-in nodes did not start")
    return process, int(json.loads(line)["port"])


def soak(args: argparse.Namespace, folder: Path) -> tuple[list[Sample], list[str], Path]:
    """Run the three processes for ``args.minutes``; the samples, any non-JSON log lines,
    and the exporter's log file."""
    lifetime = args.minutes * 60 + 120
    nodes, port = start_stand_in(args.chains, lifetime)
    down = socket.socket()  # bound, never listening: connection refused, as a dead node
    down.bind(("127.0.0.1", 0))
    config = write_config(folder, port, down.getsockname()[1], args.nodes)
    heap_file, log_file = folder / "heap.jsonl", folder / "exporter.log"
    samples: list[Sample] = []
    with log_file.open("w+") as log:
        exporter = subprocess.Popen(
            [sys.executable, "-c", _EXPORTER_BOOT, str(heap_file), str(args.sample_seconds),
             "--config.file", str(config), "--web.listen-address", "127.0.0.1:0",
             "--log.format", "json", "--log.level", "info"],
            cwd=REPO, stderr=log, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        attacker = Slowloris(args.stalled)
        try:
            web = exporter_port(log, 60)
            attacker.start(web)
            started = time.monotonic()
            end = started + args.minutes * 60
            while (now := time.monotonic()) < end or len(samples) < 4:
                rss, threads, fds = proc_reading(exporter.pid)
                up, took = scrape(web)
                heap = last_heap_line(heap_file)
                minute = (now - started) / 60
                blocks, objects = heap["blocks"], heap["objects"]
                sample = Sample(minute, rss, threads, fds, blocks, objects, up, took)
                samples.append(sample)
                if args.progress:
                    print(json.dumps(asdict(sample)), file=sys.stderr, flush=True)
                time.sleep(max(0.0, started + len(samples) * args.sample_seconds - now))
        finally:
            attacker.stop()
            stop_process(exporter)
            stop_process(nodes)
            down.close()
        log.seek(0)
        bad = [line for line in log.read().splitlines() if not _is_json(line)]
    if args.stalled:
        print(f"stalled clients reconnected {attacker.reopened} times", file=sys.stderr)
    return samples, bad, log_file


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--minutes", type=float, default=30.0, help="how long to soak (default 30)")
    add("--nodes", type=int, default=300, help="nodes, a tenth misbehaving (default 300)")
    add("--chains", type=int, default=1, help="chains per node (default 1)")
    add("--sample-seconds", type=float, default=60.0, help="time between samples (default 60)")
    add("--warmup-samples", type=int, default=3, help="samples before growth counts (default 3)")
    add("--max-rss-growth", type=float, default=8.0, help="MiB after warm-up (default 8)")
    add("--max-thread-growth", type=int, default=4, help="threads after warm-up (default 4)")
    add("--max-fd-growth", type=int, default=16, help="descriptors after warm-up (default 16)")
    add("--max-heap-growth", type=float, default=0.10, help="fraction (default 0.10)")
    add("--json", action="store_true", help="print the samples and verdict as one JSON object")
    add("--stalled", type=int, default=0, help="clients stalling on half a request (default 0)")
    add("--progress", action="store_true", help="print each sample to stderr as it is taken")
    add("--stand-in", action="store_true", help=argparse.SUPPRESS)
    add("--lifetime", type=float, default=1800.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.stand_in:
        asyncio.run(_stand_in_main(args.chains, args.lifetime))
        return 0
    limits = Limits(
        args.max_rss_growth, args.max_thread_growth, args.max_fd_growth, args.max_heap_growth
    )
    with tempfile.TemporaryDirectory(prefix="soak-") as folder:
        samples, bad_lines, _ = soak(args, Path(folder))
    warmup = min(args.warmup_samples, len(samples) - 2)
    problems = verdict(samples, warmup, limits)
    if bad_lines:
        problems.append(f"{len(bad_lines)} log lines were not JSON, first: {bad_lines[0][:200]}")
    grown = growth(samples, warmup)
    if args.json:
        report = {"samples": [asdict(s) for s in samples], "growth": grown, "problems": problems}
        print(json.dumps(report))
    else:
        print(table(samples))
        print(
            f"\n{args.nodes} nodes ({args.nodes // 10} misbehaving), {args.minutes:g} min, "
            f"growth after {warmup} warm-up samples: RSS {grown['rss_mib']:+.1f} MiB, "
            f"threads {grown['threads']:+.0f}, fds {grown['fds']:+.0f}, "
            f"heap blocks {grown['heap_blocks']:+.0f}"
        )
        print("verdict: " + ("FLAT" if not problems else "GROWS: " + "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
