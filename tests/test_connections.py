"""The exporter's HTTP server under stalled, idle and excess connections, over real sockets.

Time limits are set short (1-2 s) so the tests can watch them act; every assertion is about
what happened (answers, closed sockets, thread and descriptor counts) with generous deadlines.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporter.app import Exporter
from exporter.config import Config, NodeConfig
from exporter.server import ExporterServer, ServerLimits
from exporter.webconfig import TlsServerConfig, WebConfig
from tests.conftest import FakeNode, chain_doc, health_doc, make_certificate, new_fake_node

STALLED = 300
HALF_A_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def eventually(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.05)


def scrape(port: int, timeout: float = 10.0) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as answer:
        answer.read()
        return int(answer.status)


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer (head and Content-Length body) from a blocking socket."""
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed early after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, f"closed early after {data!r}"
        body += chunk
    return head + b"\r\n\r\n" + body


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the server has closed ``sock`` (EOF or reset), False while it is open."""
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.fixture
def node(fake_nodes: list[FakeNode]) -> FakeNode:
    fake = new_fake_node(fake_nodes)
    fake.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    return fake


@pytest.fixture
def serving(node: FakeNode) -> Iterator[tuple[Exporter, ExporterServer]]:
    limits = ServerLimits(read_header_timeout=1.0, idle_timeout=2.0, max_connections=1000)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", limits=limits)
    eventually(exporter.ready, 10, "first cycle")
    yield exporter, server
    exporter.stop()


def test_stalled_connections_neither_block_scrapes_nor_keep_resources(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    assert scrape(server.port) == 200
    eventually(lambda: server.open_connections() == 0, 10, "the first scrape's connection")
    threads, fds = threading.active_count(), open_fds()
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(STALLED)]
    try:
        for sock in stalled:
            sock.sendall(HALF_A_REQUEST)
        eventually(lambda: server.open_connections() >= STALLED, 10, "all stalled accepted")
        answers: list[int] = []
        scraper = threading.Thread(target=lambda: answers.append(scrape(server.port, 5)))
        scraper.start()
        scraper.join(10)
        assert answers == [200]  # answered although hundreds of clients stall
        # No thread per stalled client: at most the bounded handler pool came and went.
        assert threading.active_count() <= threads + server.limits.max_handlers
        eventually(lambda: all(closed_by_peer(s) for s in stalled), 15, "stalled ones closed")
        eventually(lambda: server.open_connections() == 0, 10, "server side closed")
    finally:
        for sock in stalled:
            sock.close()
    eventually(lambda: open_fds() <= fds, 10, "descriptors back")
    eventually(lambda: threading.active_count() <= threads, 15, "handler threads back")


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(0.5)  # well within the 2 s idle limit: still open
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        eventually(lambda: closed_by_peer(sock), 15, "idle connection closed")


def test_pipelined_requests_and_a_request_body_keep_their_order(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        sock.settimeout(10)
        received = b""
        while received.count(b"HTTP/1.1 ") < 3:
            chunk = sock.recv(65536)
            assert chunk, f"closed early after {received!r}"
            received += chunk
    assert re.findall(rb"HTTP/1.1 (\d{3})", received) == [b"405", b"200", b"404"]


def test_past_max_connections_the_least_recently_active_make_room(node: FakeNode) -> None:
    limits = ServerLimits(read_header_timeout=30.0, idle_timeout=30.0, max_connections=20)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", limits=limits)
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
    try:
        for sock in stalled:
            sock.sendall(HALF_A_REQUEST)
        eventually(lambda: sum(closed_by_peer(s) for s in stalled) >= 40, 15, "oldest dropped")
        assert server.open_connections() <= 20
        assert scrape(server.port) == 200  # a new client still gets in
        assert not all(closed_by_peer(s) for s in stalled[-10:])  # the newest stay
    finally:
        for sock in stalled:
            sock.close()
        exporter.stop()


def test_a_head_larger_than_the_limit_is_refused(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 70_000)
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 431")
        eventually(lambda: closed_by_peer(sock), 10, "closed after 431")


def test_an_unread_request_body_ends_the_connection(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        # Too large to drain: the rest would otherwise be taken for the next request.
        sock.sendall(b"PUT /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nGET / ")
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 405")
        eventually(lambda: closed_by_peer(sock), 10, "closed after the answer")


def test_stalled_tls_handshakes_cost_no_thread_and_are_closed(
    node: FakeNode, tmp_path: Path
) -> None:
    cert, key = make_certificate(tmp_path)
    web = WebConfig(tls=TlsServerConfig(cert, key))
    limits = ServerLimits(read_header_timeout=1.0, idle_timeout=2.0)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", web, limits=limits)
    threads = threading.active_count()
    # Half of them never send a ClientHello, half send the first bytes of one.
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(100)]
    try:
        for sock in stalled[::2]:
            sock.sendall(b"\x16\x03\x01\x00\xa0\x01\x00")
        context = ssl.create_default_context(cafile=cert)
        url = f"https://127.0.0.1:{server.port}/-/healthy"
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            assert answer.status == 200
        assert threading.active_count() <= threads + server.limits.max_handlers
        eventually(lambda: all(closed_by_peer(s) for s in stalled), 15, "handshakes timed out")
        eventually(lambda: server.open_connections() == 0, 10, "server side closed")
    finally:
        for sock in stalled:
            sock.close()
        exporter.stop()
