"""A polling cycle never fails silently, in the real process over real sockets: a config date
the cycle could not compute with (``until`` in the year 10000 once in UTC) is refused by
``--config.check``, at start and on reload, with its line; a fault injected into one node's
step of the cycle (tests/support/faults) leaves that node down alone, the other polled, and
is counted, logged once and alerted by the shipped rule in a real Prometheus (its times
divided by SCALE); a cycle that cannot complete at all makes ``/-/ready`` answer 503 and
``/metrics`` drop the node series once the last results are older than the stale bound,
and both come back when a cycle ends again."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.faults import fault_env
from tests.support.http import fetch
from tests.support.monitoring import PROM_DIR
from tests.support.processes import exporter_command, ready_exporter
from tests.support.prometheus import PrometheusServers
from tests.support.scaling import write_shortened
from tests.support.scenarios import samples
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SCALE = 60  # the rules' minutes become seconds
YEAR_10000 = "  - {node: a, until: '9999-12-31T20:00:00-05:00', reason: forever}\n"
REFUSED = "maintenance[0].until: is outside the years 1 to 9999 once in UTC"


def write_config(path: Path, fake_nodes: FakeNodes, maintenance: str = "") -> Path:
    """Two nodes, a and b, each listing chain c1; cycles every 500 ms (stale after 1.9 s)."""
    lines = ["scrape_interval: 500ms\n", "scrape_timeout: 400ms\n", "nodes:\n"]
    for name in ("a", "b"):
        node = fake_nodes.start()
        node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
        lines.append(f"  - {{name: {name}, url: '{node.url}'}}\n")
    if maintenance:
        lines += ["maintenance:\n", maintenance]
    path.write_text("".join(lines))
    return path


def value(base: str, name: str, **labels: str) -> float | None:
    """One sample of /metrics now (None when absent)."""
    found = samples(fetch(base + "/metrics").body)
    return next(
        (v for (n, key), v in found.items() if n == name and set(labels.items()) <= set(key)),
        None,
    )


def test_a_year_past_9999_is_refused_at_check_at_start_and_on_reload(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    config = write_config(tmp_path / "config.yml", fake_nodes)
    bad = tmp_path / "bad.yml"
    bad.write_text(config.read_text() + "maintenance:\n" + YEAR_10000)
    line = len(config.read_text().splitlines()) + 2  # the entry's until
    checked = subprocess.run(
        exporter_command(f"--config.file={bad}", "--config.check"),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert checked.returncode != 0
    assert f"line {line}: {REFUSED}" in checked.stdout + checked.stderr

    started = subprocess.run(
        exporter_command(f"--config.file={bad}", "--web.listen-address=127.0.0.1:0"),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=60,
    )
    assert started.returncode != 0 and f"line {line}: {REFUSED}" in started.stderr

    with ready_exporter(config) as exporter:
        config.write_text(bad.read_text())
        exporter.signal(signal.SIGHUP)
        wait_until(
            lambda: value(exporter.base, "ledger_exporter_config_last_reload_successful") == 0.0,
            message=exporter.log,
        )
        assert f"line {line}: {REFUSED}" in exporter.log()
        assert fetch(exporter.base + "/-/ready").status == 200  # the running config polls on
        cycles = value(exporter.base, "ledger_exporter_cycle_failures_total", stage="cycle")
        assert cycles == 0.0


def test_a_fault_in_one_nodes_step_is_that_nodes_counted_logged_and_alerted(
    tmp_path: Path, fake_nodes: FakeNodes, prometheus: PrometheusServers
) -> None:
    switches = tmp_path / "faults"
    switches.mkdir()
    config = write_config(tmp_path / "config.yml", fake_nodes)
    rules = write_shortened(PROM_DIR / "alerts.yml", tmp_path / "alerts.yml", SCALE)
    with ready_exporter(config, env=fault_env(switches)) as exporter:
        base = exporter.base
        prom = prometheus.start(
            {"ledger-exporter": [f"127.0.0.1:{exporter.port}"]}, rule_files=[rules]
        )
        (switches / "node-a").touch()
        wait_until(
            lambda: (value(base, "ledger_exporter_cycle_failures_total", stage="node") or 0) >= 3,
            message=exporter.log,
        )
        assert value(base, "ledger_node_up", node="a") == 0.0
        assert value(base, "ledger_node_up", node="b") == 1.0  # still polled and read
        assert value(base, "ledger_blockchain_height", node="b", blockchain="c1") == 10.0
        assert value(base, "ledger_exporter_cycle_failures_total", stage="cycle") == 0.0
        alert = prom.wait_for_alert("LedgerExporterCycleFailing", timeout=60.0)
        assert alert["labels"]["severity"] == "warning"
        assert fetch(base + "/-/ready").status == 200
        (switches / "node-a").unlink()
        wait_until(lambda: value(base, "ledger_node_up", node="a") == 1.0, message=exporter.log)
        log = exporter.log()
    logged = [line for line in log.splitlines() if "polling cycle step failed" in line]
    assert len(logged) == 1, log  # once while it recurred, every cycle
    assert "stage=node" in logged[0] and "subject=a" in logged[0]
    assert "year 10000 is out of range" in logged[0]


def test_ready_fails_and_node_series_go_once_no_cycle_completes_within_the_bound(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    switches = tmp_path / "faults"
    switches.mkdir()
    config = write_config(tmp_path / "config.yml", fake_nodes)
    with ready_exporter(config, env=fault_env(switches)) as exporter:
        base = exporter.base
        assert value(base, "ledger_exporter_stale_after_seconds") == 3 * 0.5 + 0.4
        last = value(base, "ledger_exporter_last_successful_cycle_timestamp_seconds")
        assert last is not None
        (switches / "cycle").touch()
        wait_until(lambda: fetch(base + "/-/ready").status == 503, message=exporter.log)
        assert value(base, "ledger_node_up", node="a") is None  # stale: dropped
        assert (value(base, "ledger_exporter_cycle_failures_total", stage="cycle") or 0) >= 1
        stale_at = value(base, "ledger_exporter_last_successful_cycle_timestamp_seconds")
        assert stale_at is not None and stale_at >= last  # frozen at the last good cycle
        (switches / "cycle").unlink()
        wait_until(lambda: fetch(base + "/-/ready").status == 200, message=exporter.log)
        assert value(base, "ledger_node_up", node="a") == 1.0
        log = exporter.log()
    assert "no polling cycle has ended within the bound" in log
    assert sum("stage=cycle" in line for line in log.splitlines()) == 1, log
