"""Nodes found in DNS: the exporter process, simulated nodes on ports of their own, and a
real DNS server (dnsmasq) on loopback whose SRV and A records the test changes.

Each record is a node named ``host:port``; a record that appears adds a node, one that goes
away removes it, and a DNS server that stops answering keeps the records last got, all with
no signal and no reload. A node that stays keeps its memory: a stalled chain's clock is the
same before and after the node list changed around it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.dnsmasq import DOMAIN, DnsServer
from tests.support.http import fetch
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.simulator import simulate
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SRV_NAME = f"_ledger._tcp.{DOMAIN}"
A_NAME = f"observers.{DOMAIN}"
STALLED = "ledger_blockchain_height_last_change_timestamp_seconds"


def node_values(process: ExporterProcess, family: str) -> dict[tuple[str, str], float]:
    """(node, blockchain or "") -> value of each series of ``family`` now."""
    text = fetch(process.base + "/metrics", timeout=20).text
    found = {}
    for parsed in text_string_to_metric_families(text):
        for sample in parsed.samples:
            if sample.name == family:
                labels = sample.labels
                found[labels.get("node", ""), labels.get("blockchain", "")] = sample.value
    return found


def up_nodes(process: ExporterProcess) -> dict[str, float]:
    return {node: value for (node, _), value in node_values(process, "ledger_node_up").items()}


@pytest.fixture
def ports() -> Iterator[dict[str, int]]:
    """Three simulated nodes, each on a port of its own; node-1's chains stall at once."""
    with simulate("--layout", "ports", "--fault", "node-1:stall") as (_, urls):
        yield {
            name: urlsplit(url).port or 0 for name, url in urls.items() if name.startswith("node")
        }


@pytest.fixture
def dns(tmp_path: Path) -> Iterator[DnsServer]:
    server = DnsServer(tmp_path)
    yield server
    server.stop()


def test_nodes_follow_srv_and_a_records(
    tmp_path: Path, ports: dict[str, int], dns: DnsServer
) -> None:
    one, two, three = ports["node-1"], ports["node-2"], ports["node-3"]
    dns.hosts({A_NAME: ["127.0.0.1"]})
    dns.start({SRV_NAME: [("localhost", one)]})
    config = {
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "dns_sd_configs": [
            # SRV: host and port from each record; the targets resolve as any URL's host
            {
                "names": [SRV_NAME],
                "nameservers": [dns.address],
                "refresh_interval": "1s",
                "labels": {"role": "validator"},
            },
            {
                "names": [A_NAME],
                "type": "A",
                "port": three,
                "nameservers": [dns.address],
                "refresh_interval": "1s",
            },
        ],
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    first, second, observer = f"localhost:{one}", f"localhost:{two}", f"127.0.0.1:{three}"
    # the DNS names are looked up by their own refresh_interval, whatever the reload interval
    with ready_exporter(path, "--config.auto-reload-interval=0") as process:
        wait_until(
            lambda: up_nodes(process) == {first: 1.0, observer: 1.0},
            timeout=60,
            message=lambda: f"{up_nodes(process)}\n{process.log()}\n{dns.log()}",
        )
        labels = fetch(process.base + "/metrics").text
        assert f'ledger_node_up{{node="{first}",role="validator"}} 1.0' in labels
        clocks = wait_until(
            lambda: {k: v for k, v in node_values(process, STALLED).items() if k[0] == first},
            timeout=30,
        )

        # an SRV record more (dnsmasq reads --srv-host at start): a node more
        dns.start({SRV_NAME: [("localhost", one), ("localhost", two)]})
        wait_until(
            lambda: up_nodes(process) == {first: 1.0, second: 1.0, observer: 1.0},
            timeout=60,
            message=lambda: f"{up_nodes(process)}\n{process.log()}",
        )
        # the A record gone (re-read on SIGHUP): its node goes, NXDOMAIN is no failure
        dns.hosts({})
        wait_until(
            lambda: up_nodes(process) == {first: 1.0, second: 1.0},
            timeout=60,
            message=lambda: f"{up_nodes(process)}\n{process.log()}",
        )
        # the server gone: the lookups fail, the nodes last found stay, and the log says so
        dns.stop()
        wait_until(
            lambda: "DNS lookup failed, keeping the records it last got" in process.log(),
            timeout=60,
            message=process.log,
        )
        assert up_nodes(process) == {first: 1.0, second: 1.0}
        assert f"name={SRV_NAME}" in process.log()
        # node-1 stayed through every change: its stalled chains' clocks did not move
        after = {k: v for k, v in node_values(process, STALLED).items() if k[0] == first}
        assert after == clocks
    assert "Traceback" not in process.log()
