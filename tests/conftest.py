"""Shared fixtures: local HTTP servers that play ledger nodes, on 127.0.0.1 and free ports."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import generation

#: Hypothesis draws the same examples on every ``make test`` run; a campaign draws anew.
generation.load_profile()

REPO = Path(__file__).resolve().parent.parent
TESTDATA = Path(__file__).resolve().parent / "testdata"


@dataclass
class Route:
    """How the fake node answers one path."""

    body: bytes
    status: int = 200
    delay: float = 0.0
    content_type: str = "application/json"


class FakeNode:
    """A real HTTP server answering configured paths, to play a node over real sockets."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests.append(self.path)
                route = fake.routes.get(self.path, Route(b'{"error": "not found"}', 404))
                if route.delay:
                    time.sleep(route.delay)
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Type", route.content_type)
                    self.send_header("Content-Length", str(len(route.body)))
                    self.end_headers()
                    self.wfile.write(route.body)
                except OSError:
                    pass  # the client gave up (timeout); nothing to do

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def set(self, path: str, body: Any, status: int = 200, delay: float = 0.0, **kw: Any) -> None:
        """Answer ``path`` with ``body`` (JSON-encoded unless bytes)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.routes[path] = Route(raw, status, delay, **kw)

    def play(self, health: dict[str, Any], chains: dict[str, dict[str, Any]]) -> None:
        """Serve a /health document and one status document per chain."""
        self.set("/health", health)
        for chain, document in chains.items():
            self.set(f"/blockchains/{chain}", document)

    def start(self) -> FakeNode:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_nodes() -> Iterator[list[FakeNode]]:
    """Nodes added with ``new_fake_node(fake_nodes)``; all stopped after the test."""
    nodes: list[FakeNode] = []
    yield nodes
    for node in nodes:
        node.stop()


def new_fake_node(registry: list[FakeNode]) -> FakeNode:
    node = FakeNode().start()
    registry.append(node)
    return node


def closed_port_url() -> str:
    """A URL on a port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def health_doc(chains: list[str], peers: int = 4, version: str = "1.4.2") -> dict[str, Any]:
    """A /health answer as the API documents it."""
    return {
        "nodeVersion": version,
        "nodeId": "02ab" * 8,
        "network": {
            "networkType": "p2p",
            "peerCount": peers,
            "peerId": "12D3KooWpeer",
            "networkPeers": [f"peer-{i}" for i in range(peers)],
        },
        "blockchains": chains,
    }


def chain_doc(height: int, **overrides: Any) -> dict[str, Any]:
    """A /blockchains/{id} answer as the API documents it."""
    document: dict[str, Any] = {
        "blockHeight": height,
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
        "voteSessions": {
            "s1": {"sessionId": "s1", "blockHeight": height + 1, "round": 2, "currentStage": 1},
        },
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
    document.update(overrides)
    return document


class Clock:
    """A clock the test steps by hand (the simulator and the exporter both accept one)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.fixture
def clock() -> Clock:
    """A hand-stepped clock for a test's simulator (and exporter)."""
    return Clock()


ERROR_PREFIX = "# error: "


def expected_problems(path: Path) -> list[str]:
    """The ``# error:`` lines at the top of an invalid-*.yml testdata file, in order."""
    problems = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith(ERROR_PREFIX):
            break
        problems.append(line.removeprefix(ERROR_PREFIX))
    return problems


def make_certificate(directory: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl: (cert, key)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return str(cert), str(key)
