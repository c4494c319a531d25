"""The real ``ledger-exporter`` process against local nodes: what an operator runs and sees."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import (
    REPO,
    TESTDATA,
    FakeNode,
    chain_doc,
    closed_port_url,
    health_doc,
    new_fake_node,
)

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def exporter_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "exporter", *args]


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def wait_for(url: str, needle: str, timeout: float) -> str:
    """Poll ``url`` until its body contains ``needle``; the last body is returned."""
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        try:
            body = fetch(url)
            if needle in body:
                return body
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not served by {url} within {timeout}s; last body:\n{body}")


class ExporterProcess:
    def __init__(self, config: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            exporter_command(
                f"--config.file={config}", f"--web.listen-address=127.0.0.1:{self.port}", *extra
            ),
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        self.started = time.monotonic()

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, stderr = self.process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        return self.process.returncode, stderr


@pytest.fixture
def network(fake_nodes: list[FakeNode], tmp_path: Path) -> Path:
    """Three nodes (healthy, slow past the timeout, down) and a config polling them."""
    healthy = new_fake_node(fake_nodes)
    healthy.play(health_doc(["c1"]), {"c1": chain_doc(500)})
    slow = new_fake_node(fake_nodes)
    slow.play(health_doc(["c1"]), {"c1": chain_doc(498)})
    slow.set("/health", health_doc(["c1"]), delay=4.0)
    secret_url = healthy.url.replace("http://", "http://operator:hunter2@")
    config = tmp_path / "config.yml"
    config.write_text(
        "scrape_interval: 2s\nscrape_timeout: 1s\nnodes:\n"
        f"  - {{name: healthy, url: '{secret_url}', labels: {{region: eu}}}}\n"
        f"  - {{name: slow, url: '{slow.url}'}}\n"
        f"  - {{name: down, url: '{closed_port_url()}'}}\n"
    )
    return config


def test_serves_healthy_metrics_within_one_timeout_and_marks_the_others_down(
    network: Path,
) -> None:
    exporter = ExporterProcess(network)
    try:
        body = wait_for(exporter.base + "/metrics", 'ledger_node_up{node="slow"} 0.0', timeout=10)
        first_cycle = time.monotonic() - exporter.started
        assert 'ledger_node_up{node="healthy",region="eu"} 1.0' in body
        assert 'ledger_blockchain_height{blockchain="c1",node="healthy",region="eu"} 500.0' in body
        assert 'ledger_node_up{node="down"} 0.0' in body
        assert (
            'ledger_node_scrape_errors_total{endpoint="health",node="down",reason="connection"}'
            in body
        )
        assert 'ledger_blockchain_height{blockchain="c1",node="slow"}' not in body
        assert first_cycle < 1.0 + 3.0  # one 1 s timeout plus process start-up
        assert "hunter2" not in body and "operator" not in body
        _promtool_check(body)
    finally:
        code, stderr = exporter.stop()
    assert code == 0, stderr
    assert "hunter2" not in stderr and "operator:" not in stderr
    assert stderr.count('msg="node slow is down"') == 1
    assert "reason=timeout" in stderr and 'msg="shutting down"' in stderr


def _promtool_check(exposition: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None and os.environ.get("CI"):
        pytest.fail("promtool is missing; make test installs Debian's prometheus package")
    if promtool is None:
        pytest.skip("promtool not installed (make test installs it)")
    result = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_sighup_reloads_and_a_bad_config_keeps_the_old_one(network: Path) -> None:
    exporter = ExporterProcess(network)
    try:
        wait_for(exporter.base + "/-/ready", "Ready", timeout=10)
        good = network.read_text()
        network.write_text("nodes: [{name: x, url: 'ftp://x'}]\n")
        exporter.process.send_signal(signal.SIGHUP)
        body = wait_for(exporter.base + "/metrics", "reload_successful 0.0", timeout=5)
        assert 'ledger_node_up{node="healthy",region="eu"}' in body
        network.write_text(good.replace("name: healthy", "name: renamed"))
        exporter.process.send_signal(signal.SIGHUP)
        body = wait_for(exporter.base + "/metrics", 'node="renamed"', timeout=5)
        assert "reload_successful 1.0" in body
    finally:
        code, stderr = exporter.stop()
    assert code == 0
    assert "config reload failed" in stderr and "must be an http:// or https:// URL" in stderr


def test_json_logs(network: Path) -> None:
    exporter = ExporterProcess(network, "--log.format=json", "--log.level=debug")
    try:
        wait_for(exporter.base + "/-/ready", "Ready", timeout=10)
    finally:
        _, stderr = exporter.stop()
    lines = [line for line in stderr.splitlines() if '"node down is down"' in line]
    assert (
        len(lines) == 1 and '"level": "warn"' in lines[0] and '"reason": "connection"' in lines[0]
    )


@pytest.mark.parametrize(
    ("config", "code", "expected"),
    [
        (REPO / "config" / "example.yml", 0, "OK"),
        (TESTDATA / "golden" / "documented" / "config.yml", 0, "OK, 1 node(s)"),
        (Path("/nonexistent.yml"), 1, "cannot read the file"),
    ],
)
def test_config_check(config: Path, code: int, expected: str) -> None:
    result = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == code, result.stderr
    assert expected in result.stdout + result.stderr


def test_config_check_prints_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.yml"
    config.write_text("scrape_interval: 1x\nnodes:\n  - {name: a, url: 'ftp://h'}\n  - {name: a}\n")
    result = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{config}: line 1: scrape_interval: must be a positive duration such as 15s or 1m, "
        "not '1x'",
        f"{config}: line 3: nodes[0].url: must be an http:// or https:// URL with a host",
        f"{config}: line 4: nodes[1]: missing required key 'url'",
        f"{config}: line 4: nodes[1].name: duplicate node name 'a'",
    ]


def test_version_and_env_overrides(tmp_path: Path) -> None:
    result = subprocess.run(exporter_command("--version"), capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("ledger-exporter ")
    env = {**os.environ, "LEDGER_EXPORTER_CONFIG_FILE": "/nonexistent.yml"}
    result = subprocess.run(
        exporter_command("--config.check"), capture_output=True, text=True, env=env
    )
    assert result.returncode == 1 and "/nonexistent.yml" in result.stderr


def test_a_taken_port_is_reported(network: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            exporter_command(f"--config.file={network}", f"--web.listen-address=127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=20,
        )
    assert result.returncode == 1 and "cannot listen" in result.stderr


def test_sigterm_exits_promptly_while_a_node_drips_its_headers(tmp_path: Path) -> None:
    """Each read of a dripping node brings a byte, so only the request's deadline ends it;
    the engine ends it (and every other request) at shutdown, so nothing is left hanging."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def drip() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.2):
                connection.sendall(b"X")  # an endless header line, one byte at a time

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    config = tmp_path / "config.yml"
    port = listener.getsockname()[1]
    config.write_text(
        "scrape_interval: 2s\nscrape_timeout: 500ms\n"
        f"nodes: [{{name: dripping, url: 'http://127.0.0.1:{port}/'}}]\n"
    )
    exporter = ExporterProcess(config)
    try:
        wait_for(exporter.base + "/metrics", 'ledger_node_up{node="dripping"} 0.0', timeout=10)
        exporter.process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code, stderr = exporter.stop()
        took = time.monotonic() - started
    finally:
        stop.set()
        listener.close()
    assert code == 0, stderr
    assert took < 8  # the dripping goes on for as long as the test lets it
    assert "exiting without waiting for requests that still hang" not in stderr
