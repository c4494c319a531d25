"""The exporter's log stays structured whatever nodes and clients do.

A real exporter process (JSON logs, debug level) polls a simulated network with faults on,
is reloaded, scraped and then stormed by clients that disconnect in every rude way; every
line it wrote must be one JSON object with ts, level and msg, no traceback anywhere, and at
most one problem line per client connection.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger_simulator.network import SimulatedNetwork
from tests.conftest import REPO, make_certificate

pytestmark = pytest.mark.integration

STORM_EACH = 40  # connections per kind of rudeness
CONNECTION_PROBLEMS = {
    "bad request",
    "connection failed",
    "connection closed mid-request",
    "request head timed out",
    "request head too large",
    "TLS handshake failed",
    "TLS handshake timed out",
    "TLS connection failed",
}


class Exporter:
    """``python -m exporter`` with JSON debug logs going to a file."""

    def __init__(self, tmp_path: Path, config: Path, *extra: str) -> None:
        self.log_path = tmp_path / "exporter.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "exporter", f"--config.file={config}",
             "--web.listen-address=127.0.0.1:0", "--log.format=json", "--log.level=debug",
             "--web.read-header-timeout=1s", *extra],
            stdout=subprocess.DEVNULL, stderr=self._log, cwd=REPO,
        )  # fmt: skip
        self.port = self._port()

    def _port(self) -> int:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for record in self.records(strict=False):
                if record.get("msg") == "ledger-exporter started":
                    return int(record["port"])
            time.sleep(0.1)
        raise AssertionError(f"exporter did not start: {self.log_path.read_text()[-2000:]}")

    def records(self, strict: bool = True) -> list[dict[str, Any]]:
        """Every log line as a JSON object; with strict, any other line fails the test."""
        records = []
        for line in self.log_path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                assert not strict, f"a log line that is not JSON: {line!r}"
                continue
            assert isinstance(record, dict), line
            records.append(record)
        return records

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        self._log.close()
        return code


def get(url: str, method: str = "GET", **kw: Any) -> int:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10, **kw) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def storm(port: int, tls: bool) -> int:
    """Connections that misbehave in every way a client can; returns how many were made."""
    made = 0
    for index in range(STORM_EACH):
        kinds = [
            b"GET /metrics HTTP/1.1\r\nHost:",  # half a head, then a reset
            b"\x16\x03\x01\x02\x00garbage\r\n\r\n" if not tls else b"GET / HTTP/1.1\r\n\r\n",
            b"BREW /coffee HTCPCP/1.0\r\n\r\n",  # a garbage request line
            b"",  # connect, then reset at once
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",  # ask, then reset before reading
        ]
        payload = kinds[index % len(kinds)]
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        made += 1
        if payload:
            sock.sendall(payload)
        if index % 2:
            time.sleep(0.01)
        reset(sock)
    return made


def lines_of(records: list[dict[str, Any]]) -> None:
    for record in records:
        assert {"ts", "level", "msg"} <= record.keys(), record
        assert record["level"] in ("debug", "info", "warn", "error"), record
        text = json.dumps(record)
        assert "Traceback" not in text and 'File \\"' not in text, record


@pytest.fixture
def network() -> Any:
    with SimulatedNetwork(nodes=6, chains=2, block_interval=0.5, seed=3, port=0) as net:
        names = net.node_names
        net.set_fault(names[1], "down")
        net.set_fault(names[2], "http_500")
        net.set_fault(names[3], "malformed_json")
        net.set_fault(names[4], "slow", delay_seconds=3.0)
        yield net


def write_config(path: Path, network: SimulatedNetwork, nodes: int) -> None:
    lines = ["scrape_interval: 1s", "scrape_timeout: 900ms", "nodes:"]
    for name in network.node_names[:nodes]:
        lines += [f"  - name: {name}", f"    url: {network.node_urls[name]}"]
    path.write_text("\n".join(lines) + "\n")


def test_every_line_is_json_through_faults_reloads_and_a_disconnect_storm(
    network: SimulatedNetwork, tmp_path: Path
) -> None:
    config = tmp_path / "config.yml"
    write_config(config, network, 6)
    exporter = Exporter(tmp_path, config)
    try:
        base = f"http://127.0.0.1:{exporter.port}"
        deadline = time.monotonic() + 20
        while get(base + "/-/ready") != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert get(base + "/metrics") == 200 and get(base + "/") == 200
        write_config(config, network, 5)
        assert get(base + "/-/reload", "POST") == 200
        config.write_text("nodes: [{name: x}]\n")
        assert get(base + "/-/reload", "POST") == 500
        exporter.process.send_signal(signal.SIGHUP)
        made = storm(exporter.port, tls=False)
        assert get(base + "/metrics") == 200  # still serving after the storm
        time.sleep(1.5)  # past the 1 s header limit: the half heads time out too
    finally:
        assert exporter.stop() == 0
    records = exporter.records()
    lines_of(records)
    messages = Counter(record["msg"] for record in records)
    assert messages["config reload failed, keeping the running config"] == 2  # POST + SIGHUP
    assert messages["config reloaded"] == 1
    assert any(r["msg"] == "node down" or "down" in r["msg"] for r in records), messages
    problems = [r for r in records if r["msg"] in CONNECTION_PROBLEMS]
    assert problems, "the storm left no trace at debug level"
    assert all(r["level"] == "debug" for r in problems)
    per_connection = Counter(r["client"] for r in problems)
    assert max(per_connection.values()) == 1  # once per connection
    assert len(problems) <= made
    assert not [r for r in records if r["level"] == "error" and "client" in r]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[str, str]:
    return make_certificate(tmp_path)


def test_a_tls_disconnect_storm_leaves_only_structured_debug_lines(
    network: SimulatedNetwork, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    config = tmp_path / "config.yml"
    write_config(config, network, 2)
    exporter = Exporter(tmp_path, config, f"--web.config.file={web}")
    try:
        context = ssl.create_default_context(cafile=cert)
        base = f"https://127.0.0.1:{exporter.port}"
        made = storm(exporter.port, tls=True)
        for _ in range(10):  # handshakes completed, then the client vanishes
            raw = socket.create_connection(("127.0.0.1", exporter.port), timeout=10)
            reset(context.wrap_socket(raw, server_hostname="127.0.0.1"))
            made += 1
        assert get(base + "/-/healthy", context=context) == 200
        time.sleep(1.5)
    finally:
        assert exporter.stop() == 0
    records = exporter.records()
    lines_of(records)
    problems = [r for r in records if r["msg"] in CONNECTION_PROBLEMS]
    assert any(r["msg"] == "TLS handshake failed" for r in problems), problems[:5]
    assert all(r["level"] == "debug" for r in problems)
    assert max(Counter(r["client"] for r in problems).values()) == 1
    assert len(problems) <= made
    assert os.path.getsize(exporter.log_path) > 0


def test_the_simulator_prints_no_traceback_when_clients_vanish(tmp_path: Path) -> None:
    errors = tmp_path / "simulate.err"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "simulate", "--nodes", "3",
             "--listen-address", "127.0.0.1:0", "--log.level", "debug",
             "--fault", "node-2:slow=1s"],
            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            admin = ""
            while not admin.startswith("admin: "):
                admin = process.stdout.readline()
                assert admin, "the simulator did not start"
            port = int(re.search(r"127\.0\.0\.1:(\d+)", admin).group(1))  # type: ignore[union-attr]
            made = storm(port, tls=False)
            for _ in range(20):  # ask a slow node, then vanish before it answers
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(b"GET /nodes/node-2/health HTTP/1.1\r\nHost: x\r\n\r\n")
                reset(sock)
            time.sleep(1.5)
            assert made and process.poll() is None
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=15)
    lines = errors.read_text().splitlines()
    assert lines, "no log at all"
    assert not [line for line in lines if not line.startswith("ts=")], lines[:5]
    assert "Traceback" not in errors.read_text()
