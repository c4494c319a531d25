"""A URL that answers JSON but is not a ledger node (issue 19): another service's health check
(``{"status": "ok"}``) behind the configured URL is a node down with
``reason="invalid_response"``, over real sockets, in the series and on the status page."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.poll.cycle import Poller
from exporter.web.exposition import Exposition
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.webapp import landing_page

MESSAGE = "answered /health with JSON that is not a ledger node's health"


def test_a_json_service_that_is_not_a_ledger_node_is_down(fake_nodes: FakeNodes) -> None:
    other = fake_nodes.start()
    other.set("/health", {"status": "ok"})
    ledger = fake_nodes.start()
    ledger.play(health_doc(["c1"]), {"c1": chain_doc(100)})
    nodes = (NodeConfig("other", other.url), NodeConfig("ledger", ledger.url))
    poller = Poller(Config(nodes=nodes, scrape_interval=2.0, scrape_timeout=1.0), print)
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    status = {node.name: node for node in snapshot.nodes}
    assert not status["other"].up and status["ledger"].up
    error = status["other"].error or ""
    assert error.startswith("invalid_response: ") and MESSAGE in error
    assert "nodeVersion, nodeId, network, blockchains" in error
    assert other.url not in error  # the message names the field to fix, never the URL
    assert other.paths == ["/health"]  # nothing more is asked of it
    text = Exposition(snapshot).body(False, False).decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert samples[("ledger_node_up", (("node", "other"),))] == 0
    assert samples[("ledger_node_up", (("node", "ledger"),))] == 1
    counted = (("endpoint", "health"), ("node", "other"), ("reason", "invalid_response"))
    assert samples[("ledger_node_scrape_errors_total", counted)] == 1
    assert not [key for key in samples if key[0] == "ledger_node_info" and "other" in str(key)]
    page = landing_page(snapshot)
    assert "other" in page and MESSAGE.replace("'", "&#x27;") in page
