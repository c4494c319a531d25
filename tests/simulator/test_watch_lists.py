"""Watch lists against the simulator over real HTTP: the demo's and the example config's
watch list exist there, and the planned requests read what the simulator serves, faults
included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exporter.config.exporter import load_config
from exporter.config.watchlist import WatchConfig
from exporter.model.readings import read_health
from exporter.model.watch_readings import (
    ContractReading,
    Reading,
    StateReading,
    WalletReading,
    WatchKind,
    plan_requests,
    read_answer,
)
from ledger_simulator import SimulatedNetwork
from ledger_simulator.cli import build_parser as simulate_parser
from ledger_simulator.demo import build_parser, demo_watch
from tests.support.clock import Clock
from tests.support.http import fetch
from tests.support.testdata import REPO


@pytest.fixture
def demo_network() -> Iterator[SimulatedNetwork]:
    """The network ``ledger-exporter demo`` starts with its default options."""
    args = build_parser().parse_args([])
    with SimulatedNetwork(
        nodes=args.nodes, chains=args.chains, seed=args.seed, clock=Clock()
    ) as network:
        yield network


def read_all(network: SimulatedNetwork, watch: WatchConfig) -> dict[tuple[str, str], Reading]:
    """Every planned watch request of one cycle, sent to the simulator and read."""
    readings: dict[tuple[str, str], Reading] = {}
    for node, url in network.node_urls.items():
        health = read_health(fetch(url + "health", timeout=10).json())
        for request in plan_requests(watch, node, health.blockchain_ids):
            answer = fetch(url + request.path, timeout=10)
            assert answer.status == 200, (request, answer.text)
            readings[node, request.kind.value] = read_answer(request, answer.json())
    return readings


def test_the_example_config_watches_the_shipped_simulators_token_and_treasury() -> None:
    """config/example.yml polls ``ledger-exporter simulate`` as shipped, and watches the
    objects ``demo`` watches in its own network."""
    args = simulate_parser().parse_args([])
    network = SimulatedNetwork(nodes=args.nodes, chains=args.chains, seed=args.seed)
    example = load_config(str(REPO / "config" / "example.yml")).watch
    assert example == demo_watch(network)


def test_every_node_reads_the_demo_watch_list(demo_network: SimulatedNetwork) -> None:
    readings = read_all(demo_network, demo_watch(demo_network))
    # the first chain is tracked by every node: each is asked all three requests
    assert {node for node, _ in readings} == set(demo_network.node_names)
    for (_, kind), reading in readings.items():
        if kind == WatchKind.CONTRACT.value:
            assert isinstance(reading, ContractReading)
            assert (reading.status, reading.vm_type) == ("ACTIVE", "wasm")
        elif kind == WatchKind.CONTRACT_STATE.value:
            assert isinstance(reading, StateReading)
            assert [key for key, _ in reading.values] == ["totalSupply", "holders", "paused"]
            assert dict(reading.values)["paused"] == 0
        else:
            assert isinstance(reading, WalletReading)
            assert reading.enabled == 1
            assert len(reading.permissions) == 12


def test_faults_show_in_the_readings(demo_network: SimulatedNetwork) -> None:
    watch = demo_watch(demo_network)
    demo_network.set_fault("node-2", "contract_paused")
    demo_network.set_fault("*", "wallet_disabled", target=watch.wallets[0].address.upper())
    readings = read_all(demo_network, watch)
    statuses = {
        node: reading.status
        for (node, kind), reading in readings.items()
        if isinstance(reading, ContractReading)
    }
    assert statuses == {node: "PAUSED" if node == "node-2" else "ACTIVE" for node in statuses}
    paused = readings["node-2", "contract_state"]
    assert isinstance(paused, StateReading) and dict(paused.values)["paused"] == 1
    enabled = {r.enabled for r in readings.values() if isinstance(r, WalletReading)}
    assert enabled == {0}
