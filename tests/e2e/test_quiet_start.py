"""Quiet when healthy (issue 36): a real Prometheus started next to a healthy exporter, with the
shipped rules as they are (no time scaling), raises nothing in its first evaluations, not even
a pending alert: no LedgerExporterAbsent before its first scrape, no LedgerCouncilQuorumThin
for the demo's council of 3 that needs 3 votes (a margin zero by design). LedgerWatchdog
fires, as it always must; an info alert (LedgerCouncilWithoutMargin says that design) may go
pending, since info pages no one.

The network is the demo's: 4 simulated nodes, 2 chains, seed 1 (`ledger-exporter demo`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ledger_simulator import SimulatedNetwork
from tests.support.monitoring import PROM_DIR
from tests.support.processes import ready_exporter
from tests.support.prometheus import PrometheusServers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

EVALUATIONS = 10


def test_a_healthy_start_raises_nothing(prometheus: PrometheusServers, tmp_path: Path) -> None:
    with SimulatedNetwork(nodes=4, chains=2, seed=1, port=0) as network:
        nodes = [{"name": name, "url": url} for name, url in network.node_urls.items()]
        config = tmp_path / "exporter.yml"
        config.write_text(yaml.safe_dump({"scrape_interval": "1s", "nodes": nodes}))
        with ready_exporter(config) as exporter:
            # Scrapes 5s apart, evaluations 1s apart: rules run before the first scrape.
            server = prometheus.start(
                {"ledger-exporter": [f"127.0.0.1:{exporter.port}"]},
                rule_files=[PROM_DIR / "alerts.yml", PROM_DIR / "rules.yml"],
                scrape_interval="5s",
                evaluation_interval="1s",
            )
            seen: set[tuple[str, str, str]] = set()
            evaluated: dict[str, set[str]] = {}

            def enough() -> bool:
                for alert in server.alerts():
                    labels = alert["labels"]
                    seen.add((labels["alertname"], labels["severity"], alert["state"]))
                for group in server.rules():
                    evaluated.setdefault(group["name"], set()).add(group["lastEvaluation"])
                return min(map(len, evaluated.values()), default=0) > EVALUATIONS

            wait_until(enough, timeout=120, interval=0.2, message="the rules not evaluated")
    loud = {
        alert
        for alert in seen
        if alert != ("LedgerWatchdog", "none", "firing")
        and not (alert[1] == "info" and alert[2] == "pending")
    }
    assert not loud, f"alerts at a healthy start: {sorted(loud)}"
    assert ("LedgerWatchdog", "none", "firing") in seen
