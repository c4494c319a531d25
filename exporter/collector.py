"""Prometheus collectors that turn one immutable Snapshot into metric families.

One collector class per API area, as in prometheus-pve-exporter; each only reads the snapshot,
so collecting never touches a node. A value absent from the snapshot gives no sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from exporter import __version__
from exporter.bounds import DropKind
from exporter.expose import metrics as m
from exporter.expose.metrics import MetricSpec
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.watchcollector import WatchCollector

Labels = dict[str, str]


class _Families:
    """Metric families being filled, keyed by spec; empty families are not emitted."""

    def __init__(self, specs: Iterable[MetricSpec]) -> None:
        self._families = {spec: _new_family(spec) for spec in specs}

    def add(self, spec: MetricSpec, labels: Labels, value: float | None) -> None:
        if value is not None:
            self._families[spec].add_sample(spec.name, labels, value)

    def __iter__(self) -> Iterator[Metric]:
        return (family for family in self._families.values() if family.samples)


def _new_family(spec: MetricSpec) -> Metric:
    name = spec.name.removesuffix("_total") if spec.kind is m.Kind.COUNTER else spec.name
    return Metric(name, spec.help, spec.kind.value)


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


class ExporterCollector(Collector):
    """The exporter's own state.

    # HELP ledger_exporter_build_info Version of the exporter; always 1.
    # TYPE ledger_exporter_build_info gauge
    # HELP ledger_exporter_cycle_duration_seconds Wall time of the last full polling cycle.
    # TYPE ledger_exporter_cycle_duration_seconds gauge
    # HELP ledger_exporter_config_last_reload_successful 1 when the last configuration load ...
    # TYPE ledger_exporter_config_last_reload_successful gauge
    # TYPE ledger_exporter_dropped_values_total counter  (labels node, kind)
    """

    SPECS = (m.BUILD_INFO, m.CYCLE_DURATION, m.CONFIG_RELOAD_OK, m.DROPPED_VALUES)

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        families.add(m.BUILD_INFO, {"version": __version__}, 1.0)
        families.add(m.CYCLE_DURATION, {}, self._snapshot.cycle_duration)
        families.add(m.CONFIG_RELOAD_OK, {}, _flag(self._snapshot.config_reload_ok))
        for node in self._snapshot.nodes:
            labels: Labels = {"node": node.name, **dict(node.labels)}
            for kind, count in zip(DropKind, node.dropped, strict=False):
                families.add(m.DROPPED_VALUES, {**labels, "kind": kind.value}, count)
        return iter(families)


class NodeCollector(Collector):
    """Scrape health and ``GET /health`` of every node (labels ``node`` + static labels).

    # TYPE ledger_node_up gauge
    # TYPE ledger_node_scrape_duration_seconds gauge
    # TYPE ledger_node_scrape_errors_total counter  (labels endpoint, reason)
    # TYPE ledger_node_last_success_timestamp_seconds gauge
    # TYPE ledger_node_info gauge  (labels node_version, node_id, peer_id)
    # TYPE ledger_node_peers gauge
    # TYPE ledger_node_blockchains gauge
    """

    SPECS = (
        m.NODE_UP,
        m.NODE_SCRAPE_DURATION,
        m.NODE_SCRAPE_ERRORS,
        m.NODE_LAST_SUCCESS,
        m.NODE_INFO,
        m.NODE_PEERS,
        m.NODE_BLOCKCHAINS,
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            self._add_node(families, node)
        return iter(families)

    @staticmethod
    def _add_node(families: _Families, node: NodeStatus) -> None:
        labels: Labels = {"node": node.name, **dict(node.labels)}
        families.add(m.NODE_UP, labels, _flag(node.up))
        families.add(m.NODE_SCRAPE_DURATION, labels, node.duration)
        for endpoint, reason, count in node.error_counts:
            families.add(
                m.NODE_SCRAPE_ERRORS, {**labels, "endpoint": endpoint, "reason": reason}, count
            )
        families.add(m.NODE_LAST_SUCCESS, labels, node.last_success)
        health = node.health
        if health is None:
            return
        identity = (health.node_version, health.node_id, health.peer_id)
        if any(part is not None for part in identity):
            info = dict(zip(("node_version", "node_id", "peer_id"), identity, strict=True))
            families.add(m.NODE_INFO, {**labels, **{k: v or "" for k, v in info.items()}}, 1.0)
        families.add(m.NODE_PEERS, labels, health.peer_count)
        families.add(m.NODE_BLOCKCHAINS, labels, health.blockchain_count)


class BlockchainCollector(Collector):
    """``GET /blockchains/{id}`` of every polled chain (labels ``node``, ``blockchain``).

    # TYPE ledger_blockchain_up gauge
    # TYPE ledger_blockchain_height gauge
    # TYPE ledger_blockchain_blocks_behind gauge
    # TYPE ledger_blockchain_height_last_change_timestamp_seconds gauge
    # TYPE ledger_blockchain_consensus_info gauge  (labels consensus_type, key_type)
    # TYPE ledger_blockchain_feature_enabled gauge  (label feature)
    ... and one gauge per field of the chain status: see exporter/expose/metrics.py.
    """

    SPECS = tuple(
        spec
        for spec in m.ALL
        if spec.name.startswith("ledger_blockchain_") and spec not in m.NETWORK_SPECS
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            base: Labels = {"node": node.name, **dict(node.labels)}
            for chain in node.chains:
                self._add_chain(families, {**base, "blockchain": chain.blockchain}, chain)
        return iter(families)

    @staticmethod
    def _add_chain(families: _Families, labels: Labels, chain: ChainStatus) -> None:
        families.add(m.CHAIN_UP, labels, _flag(chain.up))
        reading = chain.reading
        if reading is None:
            return
        for spec, value in reading.gauges:
            families.add(spec, labels, value)
        families.add(m.CHAIN_BLOCKS_BEHIND, labels, chain.blocks_behind)
        families.add(m.CHAIN_HEIGHT_CHANGED, labels, chain.height_changed_at)
        if reading.consensus_type is not None or reading.key_type is not None:
            info = {
                "consensus_type": reading.consensus_type or "",
                "key_type": reading.key_type or "",
            }
            families.add(m.CHAIN_CONSENSUS, {**labels, **info}, 1.0)
        for feature, enabled in reading.features:
            families.add(m.CHAIN_FEATURE, {**labels, "feature": feature}, enabled)


class NetworkCollector(Collector):
    """Cross-node checks over the up polled nodes (README, "The network as a whole").

    # TYPE ledger_network_blockchain_checkpoint_height gauge  (label blockchain)
    # TYPE ledger_network_blockchain_checkpoint_hashes gauge  (label blockchain)
    # TYPE ledger_blockchain_checkpoint_agrees gauge  (labels node, blockchain)
    # TYPE ledger_network_blockchain_council_views gauge  (label blockchain)
    # TYPE ledger_blockchain_council_agrees gauge  (labels node, blockchain)
    # TYPE ledger_network_peer_partitions gauge
    # TYPE ledger_node_polled_peers gauge  (label node)
    """

    SPECS = m.NETWORK_SPECS

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        view = self._snapshot.network
        nodes = {
            node.name: {"node": node.name, **dict(node.labels)} for node in self._snapshot.nodes
        }
        for chain in view.chains:
            network: Labels = {"blockchain": chain.blockchain}
            families.add(m.NETWORK_CHECKPOINT_HEIGHT, network, chain.checkpoint_height)
            families.add(m.NETWORK_CHECKPOINT_HASHES, network, chain.checkpoint_hashes)
            families.add(m.NETWORK_COUNCIL_VIEWS, network, chain.council_views)
            for spec, agreement in (
                (m.CHAIN_CHECKPOINT_AGREES, chain.block_agrees),
                (m.CHAIN_COUNCIL_AGREES, chain.council_agrees),
            ):
                for node, agrees in agreement:
                    if node in nodes:
                        families.add(spec, {**nodes[node], **network}, _flag(agrees))
        families.add(m.NETWORK_PEER_PARTITIONS, {}, view.partitions)
        for node, linked in view.polled_peers:
            if node in nodes:
                families.add(m.NODE_POLLED_PEERS, nodes[node], linked)
        return iter(families)


def snapshot_collectors(snapshot: Snapshot) -> tuple[Collector, ...]:
    """Every collector that together expose one snapshot."""
    return (
        ExporterCollector(snapshot),
        NodeCollector(snapshot),
        BlockchainCollector(snapshot),
        NetworkCollector(snapshot),
        WatchCollector(snapshot.watch),
    )
