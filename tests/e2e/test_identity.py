"""Pinned identity end to end (issue 37): the real exporter polls the simulator with node-2's
``expect`` set; ``identity_swap`` puts node-3 behind node-2's URL, and the exporter reads
node-2 as down with ``reason="identity_mismatch"``, exports nothing it said, logs it once,
lists it first on the status page, and trusts it again once the fault is cleared. A probe
module with ``expect`` refuses it the same way."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
import yaml

from ledger_simulator import SimulatedNetwork
from tests.support.http import fetch
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

MISMATCH_LINE = "node answers as another node"
#: The families a node that is not trusted still has: the exporter's own view of its polls.
NODE_OWN = frozenset(
    {
        "ledger_node_up",
        "ledger_node_scrape_duration_seconds",
        "ledger_node_scrape_errors_total",
        "ledger_node_last_success_timestamp_seconds",
        "ledger_node_retry_after_total",
        "ledger_exporter_dropped_values_total",
    }
)
_SAMPLE = re.compile(r"^([a-z_:]+)\{([^}]*)\} (\S+)$")


@dataclass
class Stack:
    net: SimulatedNetwork
    exporter: ExporterProcess
    node_id: str  # node-2's own nodeId, as its expect pins it


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # 4 nodes, 3 chains: node-2 tracks chains 0 and 1, node-3 chains 0 and 2
    with SimulatedNetwork(nodes=4, chains=3, block_interval=0.5, seed=3, port=0) as net:
        node_id = net.health("node-2")["nodeId"]
        chains = net.listing()["nodes"]["node-2"]["blockchains"]
        expect = {"node_id": node_id, "blockchains": chains}
        nodes = [
            {"name": name, "url": url, **({"expect": expect} if name == "node-2" else {})}
            for name, url in net.node_urls.items()
        ]
        settings = {
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "nodes": nodes,
            "probe": {
                "allowed_targets": [re.escape(url) for url in net.node_urls.values()],
                "modules": {"default": {}, "node-2": {"expect": expect}},
                "debug": True,  # off by default: the test reads why a probe failed
            },
        }
        config = tmp_path_factory.mktemp("identity") / "config.yml"
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        with ready_exporter(config) as exporter:
            yield Stack(net, exporter, node_id)


def samples(stack: Stack) -> list[tuple[str, dict[str, str], float]]:
    """The ledger samples of the exporter's /metrics: (name, labels, value)."""
    found = []
    for line in fetch(stack.exporter.base + "/metrics").text.splitlines():
        match = _SAMPLE.match(line)
        if match and match[1].startswith("ledger_"):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2]))
            found.append((match[1], labels, float(match[3])))
    return found


def value(stack: Stack, name: str, **labels: str) -> float | None:
    for family, have, number in samples(stack):
        if family == name and labels.items() <= have.items():
            return number
    return None


def mismatches(stack: Stack) -> float:
    labels = {"node": "node-2", "endpoint": "health", "reason": "identity_mismatch"}
    return value(stack, "ledger_node_scrape_errors_total", **labels) or 0.0


def probe(stack: Stack, *, debug: bool = False) -> str:
    query = {"target": stack.net.node_urls["node-2"], "module": "node-2", "node": "node-2"}
    if debug:
        query["debug"] = "true"
    answer = fetch(stack.exporter.base + "/probe?" + urlencode(query), timeout=30)
    assert answer.status == 200, answer.text
    return answer.text


def first_problem(stack: Stack) -> str:
    """The first problem line of the status page, firing or pending (``class="pending"``)."""
    page = fetch(stack.exporter.base + "/").text
    lines = re.findall(r'<li(?: class="pending")?><span class="sev .*?</li>', page)
    return lines[0] if lines else ""


def test_another_node_behind_the_url_is_not_trusted_until_it_leaves(stack: Stack) -> None:
    wait_until(lambda: value(stack, "ledger_node_up", node="node-2") == 1.0, timeout=60)
    assert mismatches(stack) == 0.0
    assert "ledger_probe_success 1.0" in probe(stack)
    heights = {
        labels["blockchain"]
        for name, labels, _ in samples(stack)
        if name == "ledger_blockchain_height" and labels["node"] == "node-2"
    }
    assert len(heights) == 2

    stack.net.set_fault("node-2", "identity_swap", target="node-3")
    try:
        # three cycles counted: every one judged, the log line written once
        wait_until(lambda: mismatches(stack) >= 3, timeout=60)
        assert value(stack, "ledger_node_up", node="node-2") == 0.0
        leaked = {n for n, labels, _ in samples(stack) if labels.get("node") == "node-2"} - NODE_OWN
        assert leaked == set()  # no chain, peer or agreement series of what node-3 said
        log = stack.exporter.log()
        assert log.count(MISMATCH_LINE) == 1, log
        (line,) = [text for text in log.splitlines() if MISMATCH_LINE in text]
        assert stack.node_id in line
        assert stack.net.health("node-3")["nodeId"] in line
        first = first_problem(stack)
        assert "LedgerNodeIdentityMismatch" in first and "node-2" in first, first
        assert "ledger_probe_success 0.0" in probe(stack)
        assert "identity_mismatch" in probe(stack, debug=True)
    finally:
        stack.net.set_fault("node-2", "identity_swap", enabled=False)

    wait_until(lambda: value(stack, "ledger_node_up", node="node-2") == 1.0, timeout=60)
    assert "answers as expected again" in stack.exporter.log()
    assert "LedgerNodeIdentityMismatch" not in first_problem(stack)
    assert "ledger_probe_success 1.0" in probe(stack)
    assert stack.exporter.log().count(MISMATCH_LINE) == 1
