"""/probe through the real ``ledger-exporter`` process over real sockets (issue 11): a
probe-only exporter answers allowed targets, refuses the others without a request, and a
daemon without a probe section has no /probe."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml

from tests.conftest import REPO, FakeNode, chain_doc, closed_port_url, health_doc, new_fake_node
from tests.test_cli import ExporterProcess, exporter_command, ready_exporter, wait_for

pytestmark = pytest.mark.integration


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def probe_exporter(tmp_path: Path, fake_nodes: list[FakeNode]) -> Iterator[ExporterProcess]:
    """A probe-only exporter allowed to probe 127.0.0.1 on the fake nodes' ports only."""
    allowed = new_fake_node(fake_nodes)
    allowed.play(health_doc(["c1"]), {"c1": chain_doc(42)})
    port = allowed.server.server_address[1]
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_timeout": "5s",
                "probe": {
                    "allowed_targets": [rf"http://127\.0\.0\.1:{port}/", r"http://127\.0\.0\.1:1/"],
                    "modules": {"default": {}, "tenant": {"headers": {"X-Tenant": "ops"}}},
                },
            }
        )
    )
    with ready_exporter(config) as process:
        yield process


def test_probe_only_exporter_end_to_end(
    probe_exporter: ExporterProcess, fake_nodes: list[FakeNode]
) -> None:
    [allowed] = fake_nodes
    outsider = new_fake_node(fake_nodes)
    outsider.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    base = probe_exporter.base + "/probe?"

    status, body = get(base + urlencode({"target": allowed.url, "node": "validator-1"}))
    assert status == 200, body
    assert 'ledger_blockchain_height{blockchain="c1",node="validator-1"} 42.0' in body
    assert "ledger_probe_success 1.0" in body

    status, body = get(base + urlencode({"target": outsider.url}))
    assert (status, body) == (
        403,
        f"target {outsider.url!r} matches none of probe.allowed_targets\n",
    )
    assert outsider.requests == []

    status, body = get(base + urlencode({"target": allowed.url, "module": "x"}))
    assert (status, body) == (400, "unknown module 'x'; configured: default, tenant\n")
    status, body = get(base + urlencode({"module": "tenant"}))
    assert (status, body) == (400, "the target parameter is missing\n")

    status, metrics = get(probe_exporter.base + "/metrics")
    assert status == 200 and "ledger_node_up" not in metrics  # probe-only: no nodes polled


def test_unreachable_target_is_a_200_with_success_0(probe_exporter: ExporterProcess) -> None:
    assert closed_port_url() != "http://127.0.0.1:1/"
    status, body = get(
        probe_exporter.base + "/probe?" + urlencode({"target": "http://127.0.0.1:1/"}),
        {"X-Prometheus-Scrape-Timeout-Seconds": "3"},
    )
    assert status == 200
    lines = [line for line in body.splitlines() if not line.startswith("#")]
    assert [line.split()[0] for line in lines] == [
        "ledger_probe_success",
        "ledger_probe_duration_seconds",
    ]
    assert "ledger_probe_success 0.0" in lines


def test_without_a_probe_section_there_is_no_probe(
    tmp_path: Path, fake_nodes: list[FakeNode]
) -> None:
    node = new_fake_node(fake_nodes)
    node.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"nodes": [{"name": "a", "url": node.url}]}))
    process = ExporterProcess(config)
    try:
        wait_for(process.base + "/-/ready", "Ready", timeout=10)
        status, body = get(process.base + "/probe?" + urlencode({"target": node.url}))
        assert status == 404
        assert "probe mode is off" in body
    finally:
        code, stderr = process.stop()
    assert code == 0, stderr


def test_reload_changes_the_allow_list(tmp_path: Path, fake_nodes: list[FakeNode]) -> None:
    """SIGHUP re-reads the probe section: a target allowed before is refused after, unsent."""
    node = new_fake_node(fake_nodes)
    node.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    port = node.server.server_address[1]
    config = tmp_path / "config.yml"
    allow = {
        "scrape_timeout": "5s",
        "probe": {"allowed_targets": [rf"http://127\.0\.0\.1:{port}/"]},
    }
    config.write_text(yaml.safe_dump(allow))
    process = ExporterProcess(config)
    url = process.base + "/probe?" + urlencode({"target": node.url})
    try:
        wait_for(process.base + "/-/ready", "Ready", timeout=10)
        assert get(url)[0] == 200
        allow["probe"] = {"allowed_targets": [r"http://127\.0\.0\.1:1/"]}
        config.write_text(yaml.safe_dump(allow))
        process.process.send_signal(signal.SIGHUP)
        status, body = 0, ""
        for _ in range(100):  # the reload lands a moment after the signal
            status, body = get(url)
            if status == 403:
                break
            time.sleep(0.1)
        assert status == 403, body
        sent = len(node.requests)
        assert get(url)[0] == 403
        assert len(node.requests) == sent, "a refused probe sent a request"
    finally:
        code, stderr = process.stop()
    assert code == 0, stderr


def test_probes_are_answered_while_the_daemon_waits_on_a_slow_node(
    tmp_path: Path, fake_nodes: list[FakeNode]
) -> None:
    """The daemon's first cycle hangs on a node answering after 8 s; meanwhile a probe of a
    fast node is answered in full (the daemon is still not ready when it is)."""
    slow = new_fake_node(fake_nodes)
    slow.set("/health", health_doc([]), delay=8.0)
    fast = new_fake_node(fake_nodes)
    fast.play(health_doc(["c1"]), {"c1": chain_doc(3)})
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "10s",
                "scrape_timeout": "9s",
                "nodes": [{"name": "slow", "url": slow.url}],
                "probe": {"allowed_targets": [r"http://127\.0\.0\.1:[0-9]+/"]},
            }
        )
    )
    process = ExporterProcess(config)
    try:
        wait_for(process.base + "/-/healthy", "Healthy", timeout=10)
        deadline = time.monotonic() + 10
        while "/health" not in slow.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "/health" in slow.requests, "the daemon's cycle did not start"
        status, body = get(process.base + "/probe?" + urlencode({"target": fast.url}))
        assert status == 200 and "ledger_probe_success 1.0" in body
        assert get(process.base + "/-/ready")[0] == 503, "the cycle ended before the probe"
    finally:
        code, stderr = process.stop()
    assert code == 0, stderr


def test_config_check_of_a_probe_only_config() -> None:
    result = subprocess.run(
        exporter_command("--config.check", "--config.file", str(REPO / "config" / "probe.yml")),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK, 0 node(s), probe mode (1 module(s))")


def test_the_daemons_cycles_go_on_while_probes_hang(
    tmp_path: Path, fake_nodes: list[FakeNode]
) -> None:
    """Probes of a hanging target run flat out, at their bound, on the probes' own engine;
    meanwhile the daemon's cycles keep reading its node: every height change shows up on
    /metrics, the node stays up, and probes over the bound get a 503."""
    node = new_fake_node(fake_nodes)
    node.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    hanging = new_fake_node(fake_nodes)
    hanging.set("/health", health_doc([]), delay=30.0)
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "nodes": [{"name": "daemon-node", "url": node.url}],
                "probe": {"allowed_targets": [r"http://127\.0\.0\.1:[0-9]+/"], "max_in_flight": 2},
            }
        )
    )
    process = ExporterProcess(config)
    stop = threading.Event()
    answers: list[int] = []

    def probe_forever() -> None:
        while not stop.is_set():
            answers.append(get(process.base + "/probe?" + urlencode({"target": hanging.url}))[0])

    probers = [threading.Thread(target=probe_forever, daemon=True) for _ in range(4)]
    try:
        wait_for(process.base + "/-/ready", "Ready", timeout=20)
        for thread in probers:
            thread.start()
        for height in (2, 3, 4):
            node.play(health_doc(["c1"]), {"c1": chain_doc(height)})
            line = f'ledger_blockchain_height{{blockchain="c1",node="daemon-node"}} {height}.0'
            wait_for(process.base + "/metrics", line, timeout=30)
            assert 'ledger_node_up{node="daemon-node"} 1.0' in get(process.base + "/metrics")[1]
        deadline = time.monotonic() + 30
        while not (200 in answers and 503 in answers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 200 in answers and 503 in answers, answers
        assert set(answers) <= {200, 503}, answers
    finally:
        stop.set()
        for thread in probers:
            thread.join(timeout=30)
        code, stderr = process.stop()
    assert code == 0, stderr
