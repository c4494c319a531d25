"""The simulated network in tests: the ``simulate`` command as a process, and what a network
tracks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ledger_simulator import SimulatedNetwork

URL_LINE = re.compile(r"^(admin|node-\d+): (http://\S+)$")


@contextmanager
def simulate(*args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """Start ``python -m ledger_simulator ARGS`` on a port of its choosing; yield it with the
    URLs it printed (``admin``, ``node-1``...). Killed at the end if still running."""
    command = [sys.executable, "-m", "ledger_simulator", "--listen-address", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        urls: dict[str, str] = {}
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("blockchain: "):
                break
            match = URL_LINE.match(line.strip())
            if match:
                urls[match.group(1)] = match.group(2)
        yield process, urls
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def tracked_pairs(network: SimulatedNetwork) -> set[tuple[str, str]]:
    """Every (node, chain) the network's nodes track."""
    listing = network.listing()["nodes"]
    return {(node, chain) for node, info in listing.items() for chain in info["blockchains"]}
