"""The simulated network in tests: the ``simulate`` command as a process, what a network
tracks, and a watch list of its objects for an exporter's config."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ledger_simulator import SimulatedNetwork
from tests.support.loglines import parse_log

#: The names ``watch_list`` gives the objects it watches.
WATCHED_CONTRACT, WATCHED_WALLET = "karma-token", "treasury"

URL_LINE = re.compile(r"^(admin|node-\d+|ca): (https?://\S+|/\S+)$")


@contextmanager
def simulate(*args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """Start ``python -m ledger_simulator ARGS`` on a port of its choosing; yield it with the
    URLs it printed (``admin``, ``node-1``...; with ``--tls`` also ``ca``, its CA's file).
    Killed at the end if still running; then each log line it wrote (a line starting
    ``ts=``) must parse as logfmt (:func:`~tests.support.loglines.parse_log`)."""
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
        _, stderr = process.communicate(timeout=30)
    complete = stderr.split("\n")[:-1]  # a line cut by the kill left out
    parse_log("".join(f"{line}\n" for line in complete if line.startswith("ts=")))


def tracked_pairs(network: SimulatedNetwork) -> set[tuple[str, str]]:
    """Every (node, chain) the network's nodes track."""
    listing = network.listing()["nodes"]
    return {(node, chain) for node, info in listing.items() for chain in info["blockchains"]}


def watch_list(net: SimulatedNetwork) -> dict[str, Any]:
    """An exporter config's ``watch`` section: the first chain's token contract and first
    wallet, as ``ledger-exporter demo`` watches them; every node lists that chain."""
    chain = net.chain_ids[0]
    contract = {
        "blockchain": chain,
        "address": net.ledger.contract_addresses(0)[0],
        "name": WATCHED_CONTRACT,
        "state_keys": ["totalSupply", "holders", "paused"],
    }
    wallet = {
        "blockchain": chain,
        "address": net.ledger.wallet_addresses()[0],
        "name": WATCHED_WALLET,
    }
    return {"contracts": [contract], "wallets": [wallet]}
