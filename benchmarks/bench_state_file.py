"""What reading a large state file costs at start (issue 32): wall time and peak RSS of
``StateFile.load`` for a 500-node config, each case in a fresh worker process.

Cases (files generated in a temporary directory, removed at the end):

- ``configured``: ~100 MB, 2.2 million chain entries spread over the 500 configured nodes
  (4400 a node, 44 times what ``max_blockchains_per_node`` lets a node keep);
- ``unconfigured``: ~100 MB, 2.2 million chain entries under 22 000 nodes the config does not
  poll;
- ``full``: what this config can write, every node at ``max_blockchains_per_node`` chains
  with two open vote sessions each (~9 MB).

``--tree DIR`` measures another checkout's ``exporter`` package (the tree before a change)::

    $ .venv/bin/python benchmarks/bench_state_file.py [--tree /path/to/other/checkout]

Measured on 2 shared cores (review M1: the file read into one buffer, no longer mapped;
peak RSS the same, the file's bytes now heap instead of mapped pages, freed once parsed):

| case | file MB | CPU s mapped / read | peak RSS MiB mapped / read | peak heap MiB mapped / read |
|---|---|---|---|---|
| configured | 124 | 1.74 / 2.01 | 156.5 / 158.0 | 28.9 / 147.5 |
| unconfigured | 117 | 0.37 / 0.69 | 135.9 / 135.8 | 13.7 / 125.2 |
| full | 7 | 0.49 / 0.43 | 57.0 / 58.7 | 41.4 / 47.8 |
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

NODES = 500
ENTRIES = 2_200_000
NOW = 1_700_000_000.0
CASES = ("configured", "unconfigured", "full")


def _chain(index: int) -> bytes:
    return b'"c%d":{"height":%d,"height_changed_at":1699990000.5}' % (index, index)


def _node(name: str, chains: int) -> bytes:
    body = b",".join(_chain(i) for i in range(chains))
    return json.dumps(name).encode() + b':{"blockchains":{' + body + b"}}"


def generate(case: str, path: Path) -> None:
    """Write ``case``'s file at ``path``."""
    head = b'{"format":"ledger-exporter-state","nodes":{'
    tail = b'},"version":1}'
    with path.open("wb") as out:
        out.write(head)
        if case == "configured":
            per_node = ENTRIES // NODES
            out.write(b",".join(_node(f"node-{n}", per_node) for n in range(NODES)))
        elif case == "unconfigured":
            out.write(b",".join(_node(f"gone-{n}", 100) for n in range(ENTRIES // 100)))
        else:
            sessions = (
                b',"vote_sessions":{"s-1":{"first_seen":1699990001.0},'
                b'"s-2":{"first_seen":1699990002.0}}'
            )
            chains = b",".join(_chain(i)[:-1] + sessions + b"}" for i in range(100))
            out.write(
                b",".join(
                    json.dumps(f"node-{n}").encode()
                    + b':{"node_id":"02ab","blockchains":{'
                    + chains
                    + b"}}"
                    for n in range(NODES)
                )
            )
        out.write(tail)


def _status(field: str) -> int:
    """A ``/proc/self/status`` value in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def worker(path: str) -> None:
    """Load ``path`` once for a 500-node config and print the figures as JSON."""
    import logging  # noqa: PLC0415 (after sys.path is set by --tree)

    from exporter.config.exporter import Config  # noqa: PLC0415
    from exporter.config.nodes import NodeConfig  # noqa: PLC0415
    from exporter.poll.state import StateFile  # noqa: PLC0415

    logging.disable(logging.CRITICAL)
    nodes = tuple(NodeConfig(f"node-{n}", f"http://127.0.0.1:1/{n}/") for n in range(NODES))
    config = Config(nodes=nodes)
    before = _status("VmRSS")
    anon = [_status("RssAnon")]
    done = threading.Event()

    def sample() -> None:  # the heap's peak (the file's copy is heap: read, not mapped)
        while not done.wait(0.005):
            anon.append(_status("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started, cpu = time.perf_counter(), time.process_time()
    state = StateFile(path).load(config, NOW)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    done.set()
    sampler.join()
    figures = {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mib": round(_status("VmHWM") / 1024, 1),
        "growth_mib": round((_status("VmHWM") - before) / 1024, 1),
        "peak_anon_mib": round(max(anon) / 1024, 1),
        "nodes": len(state.nodes),
        "blockchains": state.chain_count,
    }
    print(json.dumps(figures))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="the checkout whose exporter package is measured")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree:
        sys.path.insert(0, args.tree)
    if args.worker:
        worker(args.worker)
        return 0
    tree = os.path.abspath(args.tree or Path(__file__).resolve().parent.parent)
    print(f"exporter package from {tree}")
    print(
        "| case | file MB | wall s | CPU s | peak RSS MiB | growth | peak anon MiB | nodes"
        " | chains |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for case in CASES:
            path = Path(scratch) / f"{case}.json"
            generate(case, path)
            size = path.stat().st_size / 1e6
            command = [sys.executable, __file__, "--worker", str(path), "--tree", tree]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
            if done.returncode != 0:
                print(f"| {case} | {size:.0f} | failed: {done.stderr.strip()[-200:]} |")
                continue
            f = json.loads(done.stdout)
            print(
                f"| {case} | {size:.0f} | {f['seconds']} | {f['cpu_seconds']} |"
                f" {f['peak_rss_mib']} | {f['growth_mib']} | {f['peak_anon_mib']} |"
                f" {f['nodes']} | {f['blockchains']} |"
            )
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
