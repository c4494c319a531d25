"""What reading the transport costs per request: the engine with its phase timers and TLS
handshakes read (``Engine(transport=True)``, the exporter's) against the same engine without
(``transport=False``), in one process, rounds alternating, against one simulator process
serving https (``--tls``) and one serving http, every request a kept-alive ``/health``.

The CPU of this process (the engine's thread does the requests; the main thread waits) per
request, the median of the rounds of each, and their ratio::

    .venv/bin/python benchmarks/bench_phases.py                  # ~1 min
    .venv/bin/python benchmarks/bench_phases.py --requests 4000 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exporter.config.nodes import TlsConfig
from exporter.errors import TransferError
from exporter.poll.engine import Engine, Profile, Request, Response

URL_LINE = re.compile(r"^(node-\d+|ca): (\S+)$")


@contextmanager
def simulator(nodes: int, *flags: str) -> Iterator[dict[str, str]]:
    """A simulator process (paths layout) with ``flags``; its node URLs and CA file."""
    command = [sys.executable, "-m", "ledger_simulator", "--listen-address", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*command, "--nodes", str(nodes), *flags], stdout=subprocess.PIPE, text=True
    )
    try:
        found: dict[str, str] = {}
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("blockchain: "):
                break
            if match := URL_LINE.match(line.strip()):
                found[match.group(1)] = match.group(2)
        yield found
    finally:
        process.terminate()
        process.wait(timeout=30)


def one_round(engine: Engine, urls: list[str], profile: Profile, requests: int) -> float:
    """CPU seconds of this process per request for ``requests`` GETs spread over ``urls``,
    at most 32 in flight."""
    done = threading.Semaphore(0)
    failures: list[TransferError] = []

    def ended(outcome: Response | TransferError) -> None:
        if isinstance(outcome, TransferError):
            failures.append(outcome)
        done.release()

    started = time.process_time()
    in_flight = 32
    for index in range(requests):
        if index >= in_flight:
            done.acquire()
        url = urls[index % len(urls)] + "health"
        engine.submit(Request(url, time.monotonic() + 30, profile), ended)
    for _ in range(min(in_flight, requests)):
        done.acquire()
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, first: {failures[0].message}")
    return (time.process_time() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--requests", type=int, default=2000, help="per round")
    parser.add_argument("--rounds", type=int, default=4, help="of each engine, alternating")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.nodes} nodes, {args.requests} requests")
    with (
        tempfile.TemporaryDirectory() as directory,
        simulator(args.nodes, "--tls", "--tls.dir", str(Path(directory))) as secure,
        simulator(args.nodes) as plain,
    ):
        fleets = {
            "https": ([u for n, u in secure.items() if n != "ca"], TlsConfig(secure["ca"])),
            "http": (list(plain.values()), TlsConfig()),
        }
        rows = []
        for scheme, (urls, tls) in fleets.items():
            profile = Profile(1 << 20, ("Accept: application/json",), None, tls)
            engines = {on: Engine(32, "bench", args.nodes, transport=on) for on in (False, True)}
            try:
                costs: dict[bool, list[float]] = {False: [], True: []}
                for on in (False, True):  # warm up: connections opened, handles made
                    one_round(engines[on], urls, profile, len(urls) * 2)
                for turn in range(args.rounds * 2):
                    on = bool(turn % 2) ^ bool(turn // 2 % 2)  # off on, on off, ...
                    costs[on].append(one_round(engines[on], urls, profile, args.requests))
            finally:
                for engine in engines.values():
                    engine.close()
            without, with_ = statistics.median(costs[False]), statistics.median(costs[True])
            rows.append((scheme, without * 1e6, with_ * 1e6, with_ / without))
    print("| scheme | CPU/request without (us) | with the transport read (us) | ratio |")
    print("|---|---|---|---|")
    for scheme, off_us, on_us, ratio in rows:
        print(f"| {scheme} | {off_us:.1f} | {on_us:.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
