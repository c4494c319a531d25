"""The Alertmanager fixture (``tests/support/alertmanager.py``): the config rewriter, and a
real Debian Alertmanager routing, grouping and inhibiting alerts posted to its v2 API into the
test's webhook receiver.

The config here has the shape of the shipped one (routes by severity, the info alerts to a
receiver that sends nowhere, grouping by chain and node, an inhibition of a node's other
alerts while it is down); the end-to-end module runs the shipped file itself.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.alertmanager import Alertmanagers, for_tests, sinks
from tests.support.scaling import duration_ms

pytestmark = pytest.mark.integration

SCALE = 60

CONFIG: dict[str, Any] = {
    "route": {
        "receiver": "default",
        "group_by": ["alertname", "blockchain", "node"],
        "routes": [
            {"receiver": "page", "matchers": ['severity="critical"'], "repeat_interval": "1h"},
            {"receiver": "null", "matchers": ['severity=~"info|none"'], "group_wait": "1m"},
        ],
    },
    "receivers": [
        {"name": "default", "email_configs": [{"to": "ops@example.invalid"}]},
        {"name": "page", "webhook_configs": [{"url": "http://pager.example.invalid/"}]},
        {"name": "null"},
    ],
    "inhibit_rules": [
        {
            "source_matchers": ['alertname="LedgerNodeDown"'],
            "target_matchers": ['severity=~"warning|critical"', 'alertname!="LedgerNodeDown"'],
            "equal": ["node"],
        }
    ],
}


def test_every_receiver_posts_to_the_webhook_on_a_scaled_clock(
    alertmanager: Alertmanagers,
) -> None:
    webhook = alertmanager.webhook()
    short = for_tests(CONFIG, webhook, SCALE)
    assert [r["name"] for r in short["receivers"]] == ["default", "page", "null"]
    for receiver in short["receivers"]:
        assert receiver == {
            "name": receiver["name"],
            "webhook_configs": [{"url": webhook.url_for(receiver["name"]), "send_resolved": True}],
        }
    route = short["route"]  # Alertmanager's defaults made explicit, then scaled
    assert (route["group_wait"], route["group_interval"], route["repeat_interval"]) == (
        "500ms", "5s", "240s",
    )  # fmt: skip
    assert route["routes"][0]["repeat_interval"] == "60s"
    assert route["routes"][1]["group_wait"] == "1s"
    assert duration_ms(route["routes"][1]["group_wait"]) * SCALE == duration_ms("1m")
    assert short["inhibit_rules"] == CONFIG["inhibit_rules"]
    floored = for_tests(CONFIG, webhook, SCALE, min_group_wait="2s")["route"]
    assert (floored["group_wait"], floored["routes"][1]["group_wait"]) == ("2000ms", "2000ms")
    assert floored["group_interval"] == "5s"
    assert CONFIG["receivers"][0]["email_configs"], "the original is left as it was"
    assert sinks(CONFIG) == {"null"}


def alert(name: str, severity: str, node: str, ends: datetime | None = None) -> dict[str, Any]:
    """An alert as Prometheus posts it to ``/api/v2/alerts``."""
    now = datetime.now(UTC)
    body: dict[str, Any] = {
        "labels": {"alertname": name, "severity": severity, "node": node},
        "annotations": {"summary": f"{name} on {node}"},
        "startsAt": (now - timedelta(seconds=5)).isoformat(),
        "endsAt": (ends or now + timedelta(minutes=5)).isoformat(),
    }
    return body


def test_routes_groups_and_inhibits_as_configured(alertmanager: Alertmanagers) -> None:
    webhook = alertmanager.webhook()
    server = alertmanager.start(for_tests(CONFIG, webhook, SCALE))
    down = alert("LedgerNodeDown", "critical", "node-2")
    stalled = alert("LedgerBlockHeightStalled", "critical", "node-2")
    other = alert("LedgerBlockHeightStalled", "critical", "node-3")
    maintenance = alert("LedgerNodeInMaintenance", "info", "node-4")
    server.post_alerts([down, maintenance])
    server.wait_for_alert(alertname="LedgerNodeDown")
    server.post_alerts([stalled, other])  # once the source is held, as Prometheus's order has it

    def all_delivered() -> bool:
        return webhook.firing() == Counter(
            {"LedgerNodeDown": 1, "LedgerBlockHeightStalled": 1, "LedgerNodeInMaintenance": 1}
        )

    webhook.wait_for(all_delivered, what="node-2 down, node-3 stalled, node-4 in maintenance")
    by_alert = {(d.alertname, d.labels["node"]): d.receiver for d in webhook.delivered()}
    assert by_alert == {
        ("LedgerNodeDown", "node-2"): "page",
        ("LedgerBlockHeightStalled", "node-3"): "page",
        ("LedgerNodeInMaintenance", "node-4"): "null",
    }
    assert webhook.firing(receivers=["page"], ignore=["LedgerNodeDown"]) == Counter(
        {"LedgerBlockHeightStalled": 1}
    )
    source = server.alerts(alertname="LedgerNodeDown")[0]
    status = server.status_of(alertname="LedgerBlockHeightStalled", node="node-2")
    assert (status["state"], status["inhibitedBy"]) == ("suppressed", [source["fingerprint"]])
    assert server.status_of(alertname="LedgerBlockHeightStalled", node="node-3") == {
        "state": "active", "inhibitedBy": [], "silencedBy": [],
    }  # fmt: skip

    # node-2 answers again: its page resolves, and the alert it held back is delivered
    server.post_alerts([alert("LedgerNodeDown", "critical", "node-2", ends=datetime.now(UTC))])

    def released() -> bool:
        delivered = {(d.alertname, d.labels["node"], d.status) for d in webhook.delivered()}
        return {
            ("LedgerNodeDown", "node-2", "resolved"),
            ("LedgerBlockHeightStalled", "node-2", "firing"),
        } <= delivered

    webhook.wait_for(released, what="node-2's page resolved and its stall released")
