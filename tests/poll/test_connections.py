"""The exporter's HTTP server under stalled, idle and excess connections, over real sockets.

Time limits are set short (1-2 s) so the tests can watch them act; every assertion is about
what happened (answers, closed sockets, thread and descriptor counts) with generous deadlines.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import bcrypt
import pytest

from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.config.web import TlsServerConfig, WebConfig
from exporter.web.server import ExporterServer, ServerLimits
from tests.support.certs import Pki
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.inside import open_connections
from tests.support.waiting import RecordedWaits, wait_until

STALLED = 300
HALF_A_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def scrape(
    port: int, timeout: float = 10.0, path: str = "/metrics", headers: dict[str, str] | None = None
) -> int:
    """The status of one request, read whole."""
    return fetch(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=timeout).status


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


def shut_by_peer(sock: socket.socket) -> bool:
    """True once the server has closed or shut down ``sock``, found without reading from it
    (reading would make a client that never reads into one that does): Linux's TCP state."""
    state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    return state != 1  # TCP_ESTABLISHED


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the server has closed ``sock`` (EOF or reset), False while it is open; what
    the server sent before is read and dropped."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.fixture
def node(fake_node: FakeNode) -> FakeNode:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    return fake_node


@pytest.fixture
def serving(node: FakeNode) -> Iterator[tuple[Exporter, ExporterServer]]:
    limits = ServerLimits(read_header_timeout=1.0, idle_timeout=2.0, max_connections=1000)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", limits=limits)
    wait_until(exporter.ready, message="first cycle")
    yield exporter, server
    exporter.stop()


def test_stalled_connections_neither_block_scrapes_nor_keep_resources(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    assert scrape(server.port) == 200
    wait_until(
        lambda: open_connections(server) == 0, timeout=10, message="the first scrape's connection"
    )
    threads, fds = threading.active_count(), open_fds()
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(STALLED)]
    try:
        for sock in stalled:
            sock.sendall(HALF_A_REQUEST)
        wait_until(
            lambda: open_connections(server) >= STALLED, timeout=10, message="all stalled accepted"
        )
        answers: list[int] = []
        scraper = threading.Thread(target=lambda: answers.append(scrape(server.port, 5)))
        scraper.start()
        scraper.join(10)
        assert answers == [200]  # answered although hundreds of clients stall
        # No thread per stalled client: at most the bounded handler pool came and went.
        assert threading.active_count() <= threads + server.limits.max_handlers
        wait_until(
            lambda: all(closed_by_peer(s) for s in stalled),
            timeout=15,
            message="stalled ones closed",
        )
        wait_until(lambda: open_connections(server) == 0, timeout=10, message="server side closed")
    finally:
        for sock in stalled:
            sock.close()
    wait_until(lambda: open_fds() <= fds, timeout=10, message="descriptors back")
    wait_until(
        lambda: threading.active_count() <= threads, timeout=15, message="handler threads back"
    )


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        assert not closed_by_peer(sock) and open_connections(server) >= 1  # kept alive
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        wait_until(lambda: closed_by_peer(sock), timeout=15, message="idle connection closed")


def test_empty_lines_dripped_between_requests_do_not_keep_a_connection_open(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    """Empty lines before a request line are skipped (RFC 9112 2.2), under the deadline
    already running: a client sending only CRLFs, each sooner than the timeouts, is closed
    at the idle timeout all the same (found by the review of skipping them)."""
    _, server = serving  # idle_timeout 2 s
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        sent = 0
        while not closed_by_peer(sock) and sent < 200:  # 200 x 0.1 s: ten idle timeouts
            try:
                sock.sendall(b"\r\n")
            except OSError:
                break
            sent += 1
            time.sleep(0.1)
        assert sent < 200, "the connection outlived ten idle timeouts"


def test_pipelined_requests_and_a_request_body_keep_their_order(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        sock.settimeout(10)
        received = b""
        while received.count(b"HTTP/1.1 ") < 3:
            chunk = sock.recv(65536)
            assert chunk, f"closed early after {received!r}"
            received += chunk
    # the reload fails (the exporter has no config file) and the connection goes on
    assert re.findall(rb"HTTP/1.1 (\d{3})", received) == [b"500", b"200", b"404"]


def test_past_max_connections_the_least_recently_active_make_room(node: FakeNode) -> None:
    limits = ServerLimits(read_header_timeout=30.0, idle_timeout=30.0, max_connections=20)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", limits=limits)
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]
    try:
        for sock in stalled:
            sock.sendall(HALF_A_REQUEST)
        wait_until(
            lambda: sum(closed_by_peer(s) for s in stalled) >= 40,
            timeout=15,
            message="oldest dropped",
        )
        assert open_connections(server) <= 20
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
        wait_until(lambda: closed_by_peer(sock), timeout=10, message="closed after 431")


def test_a_body_where_none_is_taken_is_refused_unread_and_ends_the_connection(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        # Never read: the rest would otherwise be taken for the next request.
        sock.sendall(b"PUT /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nGET / ")
        sock.settimeout(10)
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
        wait_until(lambda: closed_by_peer(sock), timeout=10, message="closed after the answer")


def test_an_idle_server_sleeps_until_its_soonest_deadline_or_a_client(
    serving: tuple[Exporter, ExporterServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between scrapes the selector does not wake ten times a second: with an idle
    keep-alive connection it waits until that connection's deadline (2 s here), with none
    open until a client comes; the idle connection is still closed in time."""
    _, server = serving
    recorded = RecordedWaits(server._selector)
    monkeypatch.setattr(server, "_selector", recorded)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        wait_until(lambda: closed_by_peer(sock), timeout=15, message="idle connection closed")
    waits = [t for t in recorded.timeouts if t is not None]
    assert any(0.5 < t <= server.limits.idle_timeout for t in waits)  # until the deadline
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # wakes it
        sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
    wait_until(lambda: None in recorded.timeouts, timeout=15, message="a wait without timeout")


def test_stalled_tls_handshakes_cost_no_thread_and_are_closed(node: FakeNode, pki: Pki) -> None:
    web = WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key))
    limits = ServerLimits(read_header_timeout=1.0, idle_timeout=2.0)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", web, limits=limits)
    threads = threading.active_count()
    # Half of them never send a ClientHello, half send the first bytes of one.
    stalled = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(100)]
    try:
        for sock in stalled[::2]:
            sock.sendall(b"\x16\x03\x01\x00\xa0\x01\x00")
        context = ssl.create_default_context(cafile=pki.ca)
        url = f"https://127.0.0.1:{server.port}/-/healthy"
        assert fetch(url, context=context).status == 200
        assert threading.active_count() <= threads + server.limits.max_handlers
        wait_until(
            lambda: all(closed_by_peer(s) for s in stalled),
            timeout=15,
            message="handshakes timed out",
        )
        wait_until(lambda: open_connections(server) == 0, timeout=10, message="server side closed")
    finally:
        for sock in stalled:
            sock.close()
        exporter.stop()


# --- hostile clients: bodies, answers nobody reads, password floods, framing (issue 23) ------


class Scraper:
    """Valid scrapes of /metrics and /-/healthy, one after another, while an attack runs:
    each one's status, or the error that ended it (a client timeout is a failure)."""

    def __init__(self, port: int, headers: dict[str, str] | None = None) -> None:
        self.port, self.headers = port, headers
        self.results: list[int | str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        paths = ("/metrics", "/-/healthy")
        while not self._stop.is_set():
            path = paths[len(self.results) % 2]
            try:
                self.results.append(scrape(self.port, 5.0, path, self.headers))
            except OSError as error:  # URLError and timeouts are OSErrors
                self.results.append(f"{path}: {error}")

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_for(self, scrapes: int) -> None:
        """Until ``scrapes`` scrapes have ended (answered or failed)."""
        wait_until(
            lambda: len(self.results) >= scrapes,
            message=lambda: f"{len(self.results)} scrapes ended",
        )

    def assert_all_answered(self, at_least: int) -> None:
        failed = [result for result in self.results if result != 200]
        assert not failed, f"{len(failed)} of {len(self.results)} scrapes failed: {failed[:3]}"
        assert len(self.results) >= at_least


def attack(clients: int, client: Callable[[threading.Event], None]) -> Callable[[], None]:
    """Start ``clients`` threads running ``client(stop)``; the returned function stops them."""
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(stop,), daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()

    def end() -> None:
        stop.set()
        for thread in threads:
            thread.join(30)

    return end


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_bodies_dripped_a_byte_at_a_time_hold_no_handler_and_end_at_the_deadline(
    serving: tuple[Exporter, ExporterServer],
) -> None:
    _, server = serving  # read_header_timeout 1 s: for the body as for the head
    cut: list[int] = []  # one entry per dripping connection the server closed

    def drip(stop: threading.Event) -> None:
        while not stop.is_set():  # reconnects at once, as an attacker would
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.sendall(b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n")
                try:
                    while not stop.wait(0.1):
                        sock.sendall(b"x")
                except OSError:
                    cut.append(1)

    end = attack(20, drip)
    try:
        with Scraper(server.port) as scraper:
            wait_until(
                lambda: len(cut) >= 20 and len(scraper.results) >= 4,
                message=lambda: f"{len(cut)} drips cut, {len(scraper.results)} scrapes",
            )
    finally:
        end()
    scraper.assert_all_answered(at_least=4)
    assert len(cut) >= 20  # the dripping connections were closed at the request deadline


def test_a_request_body_is_not_read_before_the_credentials_are_checked(node: FakeNode) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    limits = ServerLimits(read_header_timeout=60.0)  # waiting for the body would outlast the test
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start(
        "127.0.0.1:0", WebConfig(basic_auth_users={"prom": hashed}), None, limits
    )
    head = "POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\nExpect: 100-continue\r\n"
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(head.encode() + b"\r\n")  # no credentials, and no body yet
            assert read_answer(sock).startswith(b"HTTP/1.1 401")  # at once, body unread
            wait_until(lambda: closed_by_peer(sock), timeout=10, message="closed after the 401")
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            good = basic("prom", "s3cret")["Authorization"]
            sock.sendall(f"{head}Authorization: {good}\r\n\r\n".encode())
            sock.settimeout(10)
            assert sock.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"  # only now the body
            sock.sendall(b"x" * 4000)
            assert read_answer(sock).startswith(b"HTTP/1.1 500")  # read whole, then handled
    finally:
        exporter.stop()


def test_clients_that_never_read_their_answers_are_closed_and_hold_no_handler(
    node: FakeNode,
) -> None:
    limits = ServerLimits(read_header_timeout=10.0, idle_timeout=30.0, write_timeout=3.0)
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", limits=limits)
    wait_until(exporter.ready, timeout=10, message="first cycle")
    readers: list[socket.socket] = []
    for _ in range(24):  # pipelined requests, answers never read: megabytes wait for them
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.settimeout(5)
        with contextlib.suppress(OSError):
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000)
        readers.append(sock)
    try:
        with Scraper(server.port) as scraper:
            scraper.wait_for(4)
        scraper.assert_all_answered(at_least=4)
        wait_until(
            lambda: all(shut_by_peer(s) for s in readers), timeout=20, message="non-readers closed"
        )
    finally:
        for sock in readers:
            sock.close()
        exporter.stop()


def test_a_flood_of_wrong_passwords_does_not_delay_valid_logins(node: FakeNode) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(12)).decode()  # a few tenths of a second
    exporter = Exporter(Config(nodes=(NodeConfig("n", node.url),), scrape_interval=1.0))
    server = exporter.start("127.0.0.1:0", WebConfig(basic_auth_users={"prom": hashed}))
    good = basic("prom", "s3cret")
    refused: list[int] = []
    try:
        assert scrape(server.port, 30, headers=good) == 200  # verified once, then remembered

        def guess(stop: threading.Event) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            try:
                while not stop.is_set():
                    try:
                        headers = basic("prom", f"guess {len(refused)}")
                        connection.request("GET", "/metrics", headers=headers)
                        answer = connection.getresponse()
                        answer.read()
                        refused.append(answer.status)
                    except (OSError, http.client.HTTPException):
                        connection.close()  # a refused or cut connection: dial again
            finally:
                connection.close()

        end = attack(48, guess)
        try:
            wait_until(lambda: len(refused) >= 48, message="the flood of guesses under way")
            with Scraper(server.port, good) as scraper:
                scraper.wait_for(4)  # valid logins while the flood goes on
        finally:
            end()
        scraper.assert_all_answered(at_least=4)
        assert refused and set(refused) <= {401, 429}
    finally:
        exporter.stop()


def _request(head: str, body: bytes = b"") -> bytes:
    return head.replace("\n", "\r\n").encode("latin-1") + b"\r\n" + body


RELOAD = "POST /-/reload HTTP/1.1\nHost: x\n"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        # accepted: one plain decimal length (reload itself fails: no config file)
        pytest.param(_request(RELOAD + "Content-Length: 5\n", b"hello"), 500, id="plain"),
        pytest.param(
            _request(RELOAD + "Content-Length:   5 \t\n", b"hello"), 500, id="whitespace around"
        ),
        pytest.param(_request(RELOAD + "Content-Length: 005\n", b"hello"), 500, id="leading zeros"),
        pytest.param(_request(RELOAD + "content-length: 0\n"), 500, id="zero, lower case"),
        pytest.param(
            _request("GET /-/healthy HTTP/1.1\nHost: x\nContent-Length: 0\n"), 200, id="GET with 0"
        ),
        # refused: anything but ASCII digits, or more than one value
        pytest.param(
            _request(RELOAD + "Content-Length: -1\n", b"GET /-/healthy HTTP/1.1\r\n\r\n"),
            400,
            id="negative",
        ),
        pytest.param(_request(RELOAD + "Content-Length: +5\n", b"hello"), 400, id="signed"),
        pytest.param(
            _request(RELOAD + "Content-Length: 1_0\n", b"helloworld"), 400, id="underscore"
        ),
        pytest.param(_request(RELOAD + "Content-Length: 5 5\n", b"hello"), 400, id="two numbers"),
        pytest.param(_request(RELOAD + "Content-Length: 5,5\n", b"hello"), 400, id="comma list"),
        pytest.param(_request(RELOAD + "Content-Length: 0x5\n", b"hello"), 400, id="hex"),
        pytest.param(_request(RELOAD + "Content-Length: 5.0\n", b"hello"), 400, id="decimal point"),
        pytest.param(_request(RELOAD + "Content-Length: \n"), 400, id="empty"),
        pytest.param(
            _request(RELOAD + "Content-Length: 5\x0b\n", b"hello"), 400, id="vertical tab"
        ),
        pytest.param(
            _request(RELOAD + "Content-Length: \xd9\xa5\n", b"hello"), 400, id="non-ASCII digit"
        ),  # Arabic-Indic 5
        pytest.param(
            _request(RELOAD + "Content-Length: 5\nContent-Length: 5\n", b"hello"),
            400,
            id="duplicate same",
        ),
        pytest.param(
            _request(RELOAD + "Content-Length: 5\nContent-Length: 6\n", b"hello!"),
            400,
            id="duplicate different",
        ),
        pytest.param(
            _request(RELOAD + "Content-Length : 5\n", b"hello"), 400, id="space before colon"
        ),  # space before the colon
        pytest.param(
            _request(RELOAD + "X-A: b\n Content-Length: 5\n", b"hello"), 400, id="folded line"
        ),  # folded line
        pytest.param(
            _request(RELOAD + "X-A: b\rContent-Length: 5\n", b"hello"), 400, id="bare CR"
        ),  # bare CR
        pytest.param(
            _request(RELOAD + "Transfer-Encoding: chunked\nContent-Length: 5\n", b"hello"),
            400,
            id="chunked and length",
        ),
        pytest.param(
            _request(RELOAD + "Transfer-Encoding: chunked\n", b"5\r\nhello\r\n0\r\n\r\n"),
            411,
            id="chunked",
        ),
        # over the cap: only a small body for /-/reload, none elsewhere
        pytest.param(_request(RELOAD + "Content-Length: 4097\n"), 413, id="over the reload cap"),
        pytest.param(
            _request(RELOAD + "Content-Length: 99999999999999999999999999999\n"), 413, id="huge"
        ),
        pytest.param(
            _request("GET /metrics HTTP/1.1\nHost: x\nContent-Length: 5\n", b"hello"),
            413,
            id="GET with a body",
        ),
        pytest.param(
            _request("POST /metrics HTTP/1.1\nHost: x\nContent-Length: 5\n", b"hello"),
            413,
            id="POST elsewhere with a body",
        ),
    ],
)
def test_content_length_is_digits_one_value_within_the_cap(
    serving: tuple[Exporter, ExporterServer], request_bytes: bytes, status: int
) -> None:
    _, server = serving
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(request_bytes)
        answer = read_answer(sock)
        assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
        if status in (400, 411, 413):  # the framing refused
            assert b"Connection: close" in answer
            wait_until(
                lambda: closed_by_peer(sock),
                timeout=10,
                message="closed after refusing the framing",
            )
        else:  # the connection goes on
            sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_answer(sock).startswith(b"HTTP/1.1 200")
