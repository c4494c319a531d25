"""Candidate HTTP client designs, each a bare poller of the same fleet: CPU per request.

Run on demand, never in the test suite:

    .venv/bin/python benchmarks/bench_clients.py                 # 500 nodes x 3 chains, 3 rounds
    .venv/bin/python benchmarks/bench_clients.py --nodes 1000 --latency 0.05

Each design runs in a fresh process against bench_fleet.py's fleet stand-in (one asyncio
process, node ``i`` under ``/n<i>/``): GET /health, then each chain it lists, JSON decoded,
``--in-flight`` requests at once, keep-alive. It prints process CPU over requests and wall
time per round. Designs: ``requests`` + a thread pool (the exporter before #10), ``urllib3``
+ a thread pool, and the exporter's engine (pycurl CurlMulti on one thread, epoll).
requests and aiohttp are measured only if installed (neither is a dependency; requests
comes with the test extra's schemathesis).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchlib import PYTHON, REPO, markdown_table

DESIGNS = ("requests-threads", "urllib3-threads", "pycurl-engine", "aiohttp")
PEAK_THREADS = [0]  # most threads seen while polling


def _threaded(get: Callable[[str], Any], base: str, nodes: int, in_flight: int) -> int:
    """GET /health then each chain per node, on ``in_flight`` threads; returns requests."""
    done = 0
    lock = threading.Lock()

    def poll(index: int) -> None:
        nonlocal done
        PEAK_THREADS[0] = max(PEAK_THREADS[0], threading.active_count())
        url = f"{base}/n{index}/"
        chains = get(url + "health")["blockchains"]
        for chain in chains:
            get(f"{url}blockchains/{chain}")
        with lock:
            done += 1 + len(chains)

    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(poll, range(nodes)))
    return done


def _round_requests(base: str, nodes: int, in_flight: int) -> Callable[[], int]:
    import requests  # noqa: PLC0415 (only in this design's process)

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=in_flight)
    session.mount("http://", adapter)
    return lambda: _threaded(lambda u: session.get(u, timeout=5).json(), base, nodes, in_flight)


def _round_urllib3(base: str, nodes: int, in_flight: int) -> Callable[[], int]:
    import urllib3  # noqa: PLC0415

    manager = urllib3.PoolManager(maxsize=in_flight)

    def get(url: str) -> Any:
        return json.loads(manager.request("GET", url, timeout=5).data)

    return lambda: _threaded(get, base, nodes, in_flight)


def _round_engine(base: str, nodes: int, in_flight: int) -> Callable[[], int]:
    sys.path.insert(0, str(REPO))
    from exporter.config.nodes import NodeConfig  # noqa: PLC0415
    from exporter.poll.client import NodeClient  # noqa: PLC0415
    from exporter.poll.engine import Engine  # noqa: PLC0415

    engine = Engine(in_flight, "bench", 1)
    clients = [
        NodeClient(engine, NodeConfig(f"n{i}", f"{base}/n{i}/"), 1 << 20) for i in range(nodes)
    ]

    def one_round() -> int:
        finished = threading.Semaphore(0)
        counts = [0]
        deadline = time.monotonic() + 30

        def start(client: NodeClient) -> None:
            def health(document: Any, error: object) -> None:
                chains = document["blockchains"] if error is None else []
                counts[0] += 1
                pending = [len(chains)]
                if not chains:
                    finished.release()

                def chain_done(_: Any, __: object) -> None:
                    counts[0] += 1
                    pending[0] -= 1
                    if pending[0] == 0:
                        finished.release()

                for chain in chains:
                    client.get(["blockchains", chain], deadline, chain_done)

            client.get(["health"], deadline, health)

        for client in clients:
            start(client)
        for _ in clients:
            finished.acquire(timeout=60)
        return counts[0]

    return one_round


def _round_aiohttp(base: str, nodes: int, in_flight: int) -> Callable[[], int]:
    import asyncio  # noqa: PLC0415

    import aiohttp  # noqa: PLC0415

    async def run() -> int:
        limit = asyncio.Semaphore(in_flight)
        connector = aiohttp.TCPConnector(limit=in_flight)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def get(url: str) -> Any:
                async with limit, session.get(url) as response:
                    return await response.json(content_type=None)

            async def poll(index: int) -> int:
                chains = (await get(f"{base}/n{index}/health"))["blockchains"]
                await asyncio.gather(*(get(f"{base}/n{index}/blockchains/{c}") for c in chains))
                return 1 + len(chains)

            return sum(await asyncio.gather(*(poll(i) for i in range(nodes))))

    return lambda: asyncio.run(run())


ROUNDS = {
    "requests-threads": _round_requests,
    "urllib3-threads": _round_urllib3,
    "pycurl-engine": _round_engine,
    "aiohttp": _round_aiohttp,
}


def worker(design: str, base: str, nodes: int, in_flight: int, rounds: int) -> None:
    """Measure one design in this process; print one JSON line."""
    try:
        one_round = ROUNDS[design](base, nodes, in_flight)
    except ImportError:
        print(json.dumps({"design": design, "missing": True}))
        return
    one_round()  # warm-up: connections opened
    cpu, wall, served = time.process_time(), time.monotonic(), 0
    for _ in range(rounds):
        served += one_round()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    threads = max(PEAK_THREADS[0], threading.active_count())
    print(json.dumps({"design": design, "cpu_ms": cpu / served * 1000, "wall": wall / rounds,
                      "requests": served / rounds, "threads": threads}))  # fmt: skip


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.0, help="answer delay, s (0)")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], args.worker[1], args.nodes, args.in_flight, args.rounds)
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        fleet_script = str(Path(__file__).with_name("bench_fleet.py"))
        serve = ["--serve", str(port_file), "--latency", str(args.latency)]
        fleet = subprocess.Popen([PYTHON, fleet_script, *serve])
        try:
            while not (port_file.exists() and port_file.read_text()):
                time.sleep(0.1)
            base = f"http://127.0.0.1:{port_file.read_text()}"
            for design in DESIGNS:
                print(f"measuring {design} ...", file=sys.stderr)
                common = ["--nodes", str(args.nodes), "--in-flight", str(args.in_flight)]
                command = [PYTHON, __file__, *common, "--rounds", str(args.rounds)]
                out = subprocess.run(
                    [*command, "--worker", design, base], capture_output=True, text=True,
                    timeout=600, check=True,
                ).stdout  # fmt: skip
                r = json.loads(out.strip().splitlines()[-1])
                if r.get("missing"):
                    rows.append([design, "not installed", "", "", ""])
                    continue
                rows.append([design, f"{r['cpu_ms']:.3f} ms", f"{r['wall']:.2f} s",
                             f"{r['requests']:.0f}", str(r["threads"])])  # fmt: skip
        finally:
            fleet.terminate()
            fleet.wait(10)
    print(f"\n{args.nodes} nodes x 3 chains, {args.in_flight} in flight, latency {args.latency}s\n")
    print(markdown_table(["design", "CPU/request", "wall/round", "requests", "threads"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
