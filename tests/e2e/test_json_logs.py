"""The exporter's log stays structured whatever nodes and clients do.

A real exporter process (JSON logs, debug level) polls a simulated network with faults on,
is reloaded, scraped and then stormed by clients that disconnect in every rude way; every
line it wrote must be one JSON object with ts, level and msg, no traceback anywhere, and at
most one problem line per client connection.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger_simulator.network import SimulatedNetwork
from tests.support.certs import Pki
from tests.support.http import fetch
from tests.support.processes import ExporterProcess
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

STORM_EACH = 40  # connections per kind of rudeness
RELOAD_FAILED = "config reload failed, keeping the running config"
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


def json_exporter(config: Path, *flags: str) -> ExporterProcess:
    """``python -m exporter`` with JSON debug logs and a 1 s limit on request heads."""
    return ExporterProcess(
        config, "--log.format=json", "--log.level=debug", "--web.read-header-timeout=1s", *flags
    )


def records(log: str, strict: bool = True) -> list[dict[str, Any]]:
    """Every log line as a JSON object; with strict, any other line fails the test."""
    found = []
    for line in log.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            assert not strict, f"a log line that is not JSON: {line!r}"
            continue
        assert isinstance(record, dict), line
        found.append(record)
    return found


def problems_of(log: str) -> list[dict[str, Any]]:
    """The log's lines about a client's connection."""
    return [r for r in records(log, strict=False) if r["msg"] in CONNECTION_PROBLEMS]


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
    exporter = json_exporter(config)
    try:
        base = exporter.base
        exporter.wait_ready()
        assert fetch(base + "/metrics").status == 200 and fetch(base + "/").status == 200
        write_config(config, network, 5)
        assert fetch(base + "/-/reload", method="POST").status == 200
        config.write_text("nodes: [{name: x}]\n")
        assert fetch(base + "/-/reload", method="POST").status == 500
        exporter.signal(signal.SIGHUP)
        made = storm(exporter.port, tls=False)
        assert fetch(base + "/metrics").status == 200  # still serving after the storm
        wait_until(lambda: problems_of(exporter.log()), message="the storm left no trace")
        wait_until(  # SIGHUP's reload runs once the POST's is a second old
            lambda: exporter.log().count(RELOAD_FAILED) == 2,
            message="the SIGHUP reload never ran",
        )
    finally:
        code, log = exporter.stop()
    assert code == 0
    logged = records(log)
    lines_of(logged)
    messages = Counter(record["msg"] for record in logged)
    assert messages[RELOAD_FAILED] == 2  # POST + SIGHUP
    assert messages["config reloaded"] == 1
    assert any(r["msg"] == "node down" or "down" in r["msg"] for r in logged), messages
    problems = problems_of(log)
    assert problems, "the storm left no trace at debug level"
    assert all(r["level"] == "debug" for r in problems)
    per_connection = Counter(r["client"] for r in problems)
    assert max(per_connection.values()) == 1  # once per connection
    assert len(problems) <= made
    assert not [r for r in logged if r["level"] == "error" and "client" in r]


def test_a_tls_disconnect_storm_leaves_only_structured_debug_lines(
    network: SimulatedNetwork, tmp_path: Path, pki: Pki
) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {pki.server.cert}\n  key_file: {pki.server.key}\n"
    )
    config = tmp_path / "config.yml"
    write_config(config, network, 2)
    exporter = json_exporter(config, f"--web.config.file={web}")
    try:
        context = ssl.create_default_context(cafile=pki.ca)
        base = f"https://127.0.0.1:{exporter.port}"
        made = storm(exporter.port, tls=True)
        for _ in range(10):  # handshakes completed, then the client vanishes
            raw = socket.create_connection(("127.0.0.1", exporter.port), timeout=10)
            reset(context.wrap_socket(raw, server_hostname="127.0.0.1"))
            made += 1
        assert fetch(base + "/-/healthy", context=context).status == 200
        wait_until(
            lambda: any(r["msg"] == "TLS handshake failed" for r in problems_of(exporter.log())),
            message="no failed handshake logged",
        )
    finally:
        code, log = exporter.stop()
    assert code == 0
    lines_of(records(log))
    problems = problems_of(log)
    assert any(r["msg"] == "TLS handshake failed" for r in problems), problems[:5]
    assert all(r["level"] == "debug" for r in problems)
    assert max(Counter(r["client"] for r in problems).values()) == 1
    assert len(problems) <= made
    assert log


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
            wait_until(  # the slow node's answers went to clients that had vanished
                lambda: "path=/nodes/node-2/health" in errors.read_text(),
                message="the slow node answered no vanished client",
            )
            assert made and process.poll() is None
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=15)
    lines = errors.read_text().splitlines()
    assert lines, "no log at all"
    assert not [line for line in lines if not line.startswith("ts=")], lines[:5]
    assert "Traceback" not in errors.read_text()
