"""/probe through the real ``ledger-exporter`` process over real sockets (issue 11): a
probe-only exporter answers allowed targets, refuses the others without a request, and a
daemon without a probe section has no /probe."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml

from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch, wait_for_text
from tests.support.ports import closed_port_url
from tests.support.processes import ExporterProcess, exporter_command, ready_exporter
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def allowed(fake_nodes: FakeNodes) -> FakeNode:
    """The node the probe exporter may probe."""
    node = fake_nodes.start()
    node.play(health_doc(["c1"]), {"c1": chain_doc(42)})
    return node


@pytest.fixture
def probe_exporter(tmp_path: Path, allowed: FakeNode) -> Iterator[ExporterProcess]:
    """A probe-only exporter allowed to probe 127.0.0.1 on the fake nodes' ports only."""
    port = allowed.port
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
    probe_exporter: ExporterProcess, allowed: FakeNode, fake_nodes: FakeNodes
) -> None:
    outsider = fake_nodes.start()
    outsider.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    base = probe_exporter.base + "/probe?"

    probe = fetch(base + urlencode({"target": allowed.url, "node": "validator-1"}), timeout=20)
    assert probe.status == 200, probe.text
    assert 'ledger_blockchain_height{blockchain="c1",node="validator-1"} 42.0' in probe.text
    assert "ledger_probe_success 1.0" in probe.text

    refused = fetch(base + urlencode({"target": outsider.url}))
    assert (refused.status, refused.text) == (
        403,
        f"target {outsider.url!r} matches none of probe.allowed_targets\n",
    )
    assert outsider.requests == []  # refused unsent

    unknown = fetch(base + urlencode({"target": allowed.url, "module": "x"}))
    assert (unknown.status, unknown.text) == (
        400,
        "unknown module 'x'; configured: default, tenant\n",
    )
    missing = fetch(base + urlencode({"module": "tenant"}))
    assert (missing.status, missing.text) == (400, "the target parameter is missing\n")

    metrics = fetch(probe_exporter.base + "/metrics")
    assert metrics.status == 200
    assert "ledger_node_up" not in metrics.text  # probe-only: no nodes polled


def test_unreachable_target_is_a_200_with_success_0(probe_exporter: ExporterProcess) -> None:
    assert closed_port_url() != "http://127.0.0.1:1/"
    probe = fetch(
        probe_exporter.base + "/probe?" + urlencode({"target": "http://127.0.0.1:1/"}),
        headers={"X-Prometheus-Scrape-Timeout-Seconds": "3"},
        timeout=20,
    )
    assert probe.status == 200
    lines = [line for line in probe.text.splitlines() if not line.startswith("#")]
    assert [line.split()[0] for line in lines] == [
        "ledger_probe_success",
        "ledger_probe_duration_seconds",
    ]
    assert "ledger_probe_success 0.0" in lines


def test_without_a_probe_section_there_is_no_probe(tmp_path: Path, fake_node: FakeNode) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"nodes": [{"name": "a", "url": fake_node.url}]}))
    with ready_exporter(config) as process:
        probe = fetch(process.base + "/probe?" + urlencode({"target": fake_node.url}))
        assert probe.status == 404
        assert "probe mode is off" in probe.text


def test_reload_changes_the_allow_list(tmp_path: Path, fake_node: FakeNode) -> None:
    """SIGHUP re-reads the probe section: a target allowed before is refused after, unsent."""
    node = fake_node
    node.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    port = node.port
    config = tmp_path / "config.yml"
    allow = {
        "scrape_timeout": "5s",
        "probe": {"allowed_targets": [rf"http://127\.0\.0\.1:{port}/"]},
    }
    config.write_text(yaml.safe_dump(allow))
    with ready_exporter(config) as process:
        url = process.base + "/probe?" + urlencode({"target": node.url})
        assert fetch(url, timeout=20).status == 200
        allow["probe"] = {"allowed_targets": [r"http://127\.0\.0\.1:1/"]}
        config.write_text(yaml.safe_dump(allow))
        process.signal(signal.SIGHUP)
        wait_until(
            lambda: fetch(url, timeout=20).status == 403,
            message="the reload never refused the target",
        )
        sent = len(node.requests)
        assert fetch(url, timeout=20).status == 403
        assert len(node.requests) == sent, "a refused probe sent a request"


def test_probes_are_answered_while_the_daemon_waits_on_a_slow_node(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    """The daemon's first cycle hangs on a node that never answers (until its 50 s deadline);
    meanwhile a probe of a fast node is answered in full (the daemon is still not ready)."""
    slow = fake_nodes.start()
    slow.set("/health", health_doc([]), held=True)
    fast = fake_nodes.start()
    fast.play(health_doc(["c1"]), {"c1": chain_doc(3)})
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "60s",
                "scrape_timeout": "50s",
                "nodes": [{"name": "slow", "url": slow.url}],
                "probe": {"allowed_targets": [r"http://127\.0\.0\.1:[0-9]+/"]},
            }
        )
    )
    process = ExporterProcess(config)
    try:
        wait_until(lambda: "/health" in slow.paths, message="the daemon's cycle did not start")
        probe = fetch(process.base + "/probe?" + urlencode({"target": fast.url}), timeout=20)
        assert probe.status == 200 and "ledger_probe_success 1.0" in probe.text
        assert slow.hung_up == [], "the cycle ended before the probe"
        assert fetch(process.base + "/-/ready").status == 503, "the cycle ended before the probe"
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


def test_the_daemons_cycles_go_on_while_probes_hang(tmp_path: Path, fake_nodes: FakeNodes) -> None:
    """Probes of a hanging target run flat out, at their bound, on the probes' own engine;
    meanwhile the daemon's cycles keep reading its node: every height change shows up on
    /metrics, the node stays up, and probes over the bound get a 503."""
    node = fake_nodes.start()
    node.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    hanging = fake_nodes.start()
    hanging.set("/health", health_doc([]), held=True)  # never answers
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

    query = urlencode({"target": hanging.url})

    def probe_forever() -> None:
        while not stop.is_set():
            answers.append(fetch(process.base + "/probe?" + query, timeout=20).status)

    probers = [threading.Thread(target=probe_forever, daemon=True) for _ in range(4)]
    try:
        process.wait_ready()
        for thread in probers:
            thread.start()
        for height in (2, 3, 4):
            node.play(health_doc(["c1"]), {"c1": chain_doc(height)})
            line = f'ledger_blockchain_height{{blockchain="c1",node="daemon-node"}} {height}.0'
            wait_for_text(process.base + "/metrics", line)
            assert 'ledger_node_up{node="daemon-node"} 1.0' in fetch(process.base + "/metrics").text
        wait_until(lambda: 200 in answers and 503 in answers, message=lambda: f"{answers}")
        assert 200 in answers and 503 in answers, answers
        assert set(answers) <= {200, 503}, answers
    finally:
        stop.set()
        for thread in probers:
            thread.join(timeout=30)
        code, stderr = process.stop()
    assert code == 0, stderr
