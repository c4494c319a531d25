"""The Alertmanager configuration the mixin renders (deploy/alertmanager/alertmanager.yml):
amtool accepts it, every alert routes to the receiver of its severity, and a real Alertmanager
applies the inhibition tree: each cause holds back what it explains, for its own exporter,
chain or node only."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.alertmanager import Alertmanagers, AlertmanagerServer, for_tests, load_config
from tests.support.monitoring import PROM_DIR
from tests.support.programs import require_program
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

SHIPPED = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
SECRET = REPO / "deploy" / "kubernetes" / "alertmanager-secret.yaml"
CHART_COPY = REPO / "deploy" / "helm" / "ledger-exporter" / "files" / "alertmanager.yaml"
#: Where each severity goes (docs/alerts.md, "Routing and inhibition").
RECEIVER_OF = {
    "critical": "ledger-page",
    "warning": "ledger-ticket",
    "info": "ledger-null",
    "none": "ledger-null",
}
DEAD_MANS_SWITCH = {"LedgerWatchdog": "ledger-deadmansswitch"}


def amtool(*args: str) -> str:
    result = subprocess.run(
        [require_program("amtool"), *args],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, f"amtool {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


def shipped_alerts() -> dict[str, str]:
    """Every alert of alerts.yml and its severity."""
    document = yaml.safe_load((PROM_DIR / "alerts.yml").read_text(encoding="utf-8"))
    return {
        rule["alert"]: rule["labels"]["severity"]
        for group in document["groups"]
        for rule in group["rules"]
    }


def test_amtool_accepts_the_shipped_config_and_its_copies(tmp_path: Path) -> None:
    secret = yaml.safe_load(SECRET.read_text(encoding="utf-8"))
    in_secret = tmp_path / "from-secret.yml"
    in_secret.write_text(secret["stringData"]["alertmanager.yaml"], encoding="utf-8")
    for path in (SHIPPED, in_secret, CHART_COPY):
        printed = amtool("check-config", str(path))
        assert "SUCCESS" in printed and "13 inhibit rules" in printed, printed
    assert load_config(in_secret) == load_config(SHIPPED) == load_config(CHART_COPY)


def test_every_alert_routes_to_the_receiver_of_its_severity() -> None:
    alerts = shipped_alerts()
    assert {"critical", "warning", "info", "none"} <= set(alerts.values())
    for name, severity in sorted(alerts.items()):
        labels = [f"alertname={name}", f"severity={severity}", "job=ledger-exporter"]
        labels += ["instance=exporter:9877", "node=node-1", "blockchain=abc"]
        printed = amtool("config", "routes", "test", f"--config.file={SHIPPED}", *labels)
        expected = DEAD_MANS_SWITCH.get(name, RECEIVER_OF[severity])
        assert printed.split() == [expected], f"{name} ({severity}) goes to {printed.strip()}"


def test_an_alert_without_severity_is_ticketed_not_lost() -> None:
    printed = amtool("config", "routes", "test", f"--config.file={SHIPPED}", "alertname=Other")
    assert printed.split() == ["ledger-ticket"]


# --- the inhibition tree, in a real Alertmanager --------------------------------------------

#: (case, source alert's labels, targets it holds back, targets it must leave alone). The
#: labels job="ledger-exporter" and the case's exporter instance are added to each; a
#: target's "instance" overrides it (another exporter). Each case has its own instances,
#: so no case holds back another's alerts.
Labels = dict[str, str]
CASES: list[tuple[str, Labels, list[Labels], list[Labels]]] = [
    (
        "exporter-down",
        {"alertname": "LedgerExporterDown", "severity": "critical"},
        [
            {"alertname": "LedgerNodeDown", "node": "n1"},
            {"alertname": "LedgerBlockHeightStalled", "node": "n1", "blockchain": "c1"},
            {"alertname": "LedgerExporterConfigReloadFailed"},
            {"alertname": "LedgerAllNodesDown"},
        ],
        [
            {"alertname": "LedgerNodeDown", "node": "n1", "instance": "exporter-down-other"},
        ],
    ),
    (
        # an HA pair's replica a down, its twin up: a's own alerts only (they carry its
        # exporter_replica); the folded alerts (no such label: empty to `equal`) and b's go on
        "replica-down",
        {"alertname": "LedgerExporterReplicaDown", "exporter_replica": "a"},
        [
            {"alertname": "LedgerExporterConfigReloadFailed", "exporter_replica": "a"},
            {
                "alertname": "LedgerExporterReplicaNodeUnreachable",
                "exporter_replica": "a",
                "node": "n1",
            },
        ],
        [
            {"alertname": "LedgerExporterConfigReloadFailed", "exporter_replica": "b"},
            {"alertname": "LedgerNodeDown", "severity": "critical", "node": "n2"},
            {"alertname": "LedgerBlockchainHalted", "severity": "critical", "blockchain": "c1"},
            {"alertname": "LedgerNodeBehind", "node": "n1", "blockchain": "c2"},
        ],
    ),
    (
        "all-nodes-down",
        {"alertname": "LedgerAllNodesDown", "severity": "critical"},
        [
            {"alertname": "LedgerNodeDown", "node": "n1"},
            {"alertname": "LedgerNodeDown", "node": "n2"},
            {"alertname": "LedgerCouncilQuorumThin", "blockchain": "c1"},
        ],
        [
            {"alertname": "LedgerNodeDown", "node": "n1", "instance": "all-nodes-down-other"},
        ],
    ),
    (
        "halted",
        {"alertname": "LedgerBlockchainHalted", "severity": "critical", "blockchain": "c1"},
        [
            {"alertname": name, "node": node, "blockchain": "c1"}
            for name in (
                "LedgerBlockHeightStalled",
                "LedgerVoteSessionStuck",
                "LedgerVoteRoundsEscalating",
                "LedgerPendingMessagesHigh",
                "LedgerDelayedMessagesHigh",
            )
            for node in ("n1", "n2")
        ]
        + [{"alertname": "LedgerLeaderFailingRounds", "blockchain": "c1", "leader": "02aa"}],
        [
            {"alertname": "LedgerBlockHeightStalled", "node": "n1", "blockchain": "c2"},
            {
                "alertname": "LedgerBlockHeightStalled",
                "node": "n1",
                "blockchain": "c1",
                "instance": "halted-other",
            },
            {"alertname": "LedgerNodeDown", "node": "n3"},
            {"alertname": "LedgerBlockchainForked", "blockchain": "c1"},
        ],
    ),
    (
        "node-down",
        {"alertname": "LedgerNodeDown", "severity": "critical", "node": "n1"},
        [
            {"alertname": "LedgerBlockchainDown", "node": "n1", "blockchain": "c1"},
            {
                "alertname": "LedgerWatchedContractNotActive",
                "node": "n1",
                "blockchain": "c1",
                "contract": "token",
            },
            # the quorum margin it explains (a chain-wide alert), its own availability burn
            {"alertname": "LedgerCouncilQuorumThin", "severity": "warning", "blockchain": "c1"},
            {"alertname": "LedgerNodeAvailabilityBudgetBurn", "node": "n1"},
        ],
        [
            {"alertname": "LedgerBlockHeightStalled", "node": "n2", "blockchain": "c1"},
            {
                "alertname": "LedgerBlockchainDown",
                "node": "n1",
                "blockchain": "c1",
                "instance": "node-down-other",
            },
            {"alertname": "LedgerNodeAvailabilityBudgetBurn", "node": "n2"},
            {
                "alertname": "LedgerCouncilQuorumThin",
                "instance": "node-down-other",
                "blockchain": "c1",
            },
        ],
    ),
    (
        "partition",
        {"alertname": "LedgerNetworkPartitioned", "severity": "critical"},
        [
            {"alertname": "LedgerNodePeersLow", "node": "n1"},
            {"alertname": "LedgerNodeIsolated", "node": "n1"},
        ],
        [
            {"alertname": "LedgerNodePeersLow", "node": "n1", "instance": "partition-other"},
            {"alertname": "LedgerNodeDown", "node": "n1"},
        ],
    ),
    (
        "fork",
        {"alertname": "LedgerBlockchainForked", "severity": "critical", "blockchain": "c1"},
        [
            {
                "alertname": "LedgerWatchedContractNodesDisagree",
                "blockchain": "c1",
                "contract": "token",
            },
            {
                "alertname": "LedgerWatchedWalletNodesDisagree",
                "blockchain": "c1",
                "wallet": "treasury",
            },
        ],
        [
            {
                "alertname": "LedgerWatchedContractNodesDisagree",
                "blockchain": "c2",
                "contract": "token",
            },
            {"alertname": "LedgerNodeOffMajorityBlock", "node": "n1", "blockchain": "c1"},
        ],
    ),
    (
        "node-maintenance",
        {
            "alertname": "LedgerNodeInMaintenance",
            "severity": "info",
            "node": "n1",
            "reason": "upgrade",
        },
        [
            {"alertname": "LedgerNodeDown", "node": "n1"},
            {"alertname": "LedgerBlockHeightStalled", "node": "n1", "blockchain": "c1"},
            {"alertname": "LedgerNodePeersLost", "node": "n1"},
        ],
        [
            {"alertname": "LedgerNodeDown", "node": "n2"},
            {"alertname": "LedgerNodeDown", "node": "n1", "instance": "node-maintenance-other"},
        ],
    ),
    (
        "chain-maintenance",
        {
            "alertname": "LedgerBlockchainInMaintenance",
            "severity": "info",
            "blockchain": "c1",
            "reason": "council rotation",
        },
        [
            {"alertname": "LedgerBlockchainHalted", "blockchain": "c1"},
            {"alertname": "LedgerBlockHeightStalled", "node": "n1", "blockchain": "c1"},
        ],
        [
            {"alertname": "LedgerBlockHeightStalled", "node": "n1", "blockchain": "c2"},
            {"alertname": "LedgerNodeDown", "node": "n2"},
        ],
    ),
]


def labelled(case: str, labels: Labels) -> Labels:
    return {"job": "ledger-exporter", "instance": case, "severity": "warning", **labels}


def posted(labels: Labels) -> dict[str, Any]:
    """An alert as Prometheus posts it: firing for the next hour."""
    now = datetime.now(UTC)
    return {
        "labels": labels,
        "annotations": {"summary": "test"},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
    }


@pytest.fixture(scope="module")
def loaded_alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerServer]:
    """One Alertmanager with the shipped config (receivers pointed at a webhook in the test,
    so nothing leaves the machine) holding every case's alerts."""
    servers = Alertmanagers(tmp_path_factory.mktemp("alertmanager"))
    try:
        server = servers.start(for_tests(load_config(SHIPPED), servers.webhook(), scale=1))
        alerts = [
            posted(labelled(case, labels))
            for case, source, inhibited, spared in CASES
            for labels in [source, *inhibited, *spared]
        ]
        server.post_alerts(alerts)
        wait_until(
            lambda: len(server.alerts()) == len(alerts),
            timeout=30,
            message=lambda: f"alertmanager holds {len(server.alerts())} of {len(alerts)}",
        )
        yield server
    finally:
        servers.stop_all()


def state_of(server: AlertmanagerServer, labels: Labels) -> str:
    """``suppressed`` (inhibited) or ``active``: the alert's state as the API answers it."""
    matching = [a for a in server.alerts(**labels) if a["labels"] == labels]
    assert len(matching) == 1, f"{labels}: {matching}"
    state: str = matching[0]["status"]["state"]
    assert (state == "suppressed") == bool(matching[0]["status"]["inhibitedBy"]), matching[0]
    return state


@pytest.mark.parametrize(
    ("case", "source", "inhibited", "spared"), CASES, ids=[case[0] for case in CASES]
)
def test_inhibition_tree(
    loaded_alertmanager: AlertmanagerServer,
    case: str,
    source: Labels,
    inhibited: list[Labels],
    spared: list[Labels],
) -> None:
    server = loaded_alertmanager
    expected = {
        **{str(sorted(labelled(case, t).items())): "suppressed" for t in inhibited},
        **{str(sorted(labelled(case, t).items())): "active" for t in spared},
        str(sorted(labelled(case, source).items())): "active",
    }
    everything = [labelled(case, t) for t in [source, *inhibited, *spared]]

    def states() -> dict[str, str]:
        return {str(sorted(labels.items())): state_of(server, labels) for labels in everything}

    last: dict[str, str] = {}

    def settled() -> bool:  # the inhibitor learns of the sources a moment after the post
        last.update(states())
        return last == expected

    wait_until(
        settled,
        timeout=30,
        message=lambda: (
            "(state, expected) of each alert that differs: "
            + str({k: (v, expected[k]) for k, v in last.items() if v != expected[k]})
        ),
    )


#: The clock of the delivery test: the shipped 30 s for a page is 1.5 s, 5m for a ticket 15 s.
DELIVERY_SCALE = 20


def test_a_ticket_waits_for_a_cause_that_fires_after_it(tmp_path: Path) -> None:
    """LedgerLeaderFailingRounds fires on chain c1, LedgerBlockchainHalted a while later (past
    a page's group_wait, within a ticket's): the halt is paged and the ticket never sent,
    while the same warning on chain c2, posted a second after c1's (so its group is flushed
    after c1's), with no halt, is delivered as a ticket."""
    servers = Alertmanagers(tmp_path)
    try:
        webhook = servers.webhook()
        server = servers.start(for_tests(load_config(SHIPPED), webhook, DELIVERY_SCALE))
        rounds = {"alertname": "LedgerLeaderFailingRounds", "leader": "k2"}
        for chain in ("c1", "c2"):
            server.post_alerts([posted(labelled("ticket", {**rounds, "blockchain": chain}))])
            time.sleep(1)
        time.sleep(3)  # c1's 4 s: past the page's 1.5 s, well within the ticket's 15 s
        halted = {"alertname": "LedgerBlockchainHalted", "blockchain": "c1"}
        server.post_alerts([posted(labelled("ticket", {**halted, "severity": "critical"}))])

        def ticketed() -> bool:
            return any(d.labels.get("blockchain") == "c2" for d in webhook.delivered())

        webhook.wait_for(ticketed, timeout=60, what="the warning on c2 ticketed")
        held = labelled("ticket", {**rounds, "blockchain": "c1"})
        assert state_of(server, held) == "suppressed"
        sent = {(d.alertname, d.labels["blockchain"], d.receiver) for d in webhook.delivered()}
        assert sent == {
            ("LedgerBlockchainHalted", "c1", "ledger-page"),
            ("LedgerLeaderFailingRounds", "c2", "ledger-ticket"),
        }
    finally:
        servers.stop_all()
