"""client_python as the oracle of the exporter's one writer (``exporter/expose/render.py``).

The package writes its series itself; these are client_python collectors over the same
immutable Snapshot, one class per API area as in prometheus-pve-exporter, written apart from
the writer (the watch series aside: both take their samples from
``exporter.expose.watch_samples.watch_samples``). The render tests compare the writer's bytes with
client_python's exposition of these, for every golden snapshot, in both formats; the golden
files say which mapping is right. A value absent from the snapshot gives no sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import exposition, openmetrics
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from exporter.bounds import DropKind
from exporter.build import this_build
from exporter.expose import metrics as m
from exporter.expose.metrics import MetricSpec
from exporter.expose.render import CHAIN_GAUGE_FAMILIES
from exporter.expose.watch_samples import watch_samples
from exporter.model.fields import BLOCKCHAINS, CHAIN_GAUGES, PEER_COUNT
from exporter.model.snapshot import ChainStatus, CycleStage, NodeStatus, Snapshot
from exporter.model.watch_readings import WatchStatus

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


def _unix(mono: float | None, wall_offset: float) -> float | None:
    """A snapshot's (monotonic) time as exported: plus the snapshot's wall offset."""
    return None if mono is None else mono + wall_offset


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


class ExporterCollector(Collector):
    """The exporter's own state.

    # TYPE ledger_exporter_build_info gauge  (labels version, revision, branch, python_version)
    # HELP ledger_exporter_cycle_duration_seconds Wall time of the last full polling cycle.
    # TYPE ledger_exporter_cycle_duration_seconds gauge
    # TYPE ledger_exporter_cycle_timeout_seconds gauge
    # HELP ledger_exporter_config_last_reload_successful 1 when the last configuration load ...
    # TYPE ledger_exporter_config_last_reload_successful gauge
    # TYPE ledger_exporter_config_last_reload_success_timestamp_seconds gauge
    # TYPE ledger_exporter_state_file_write_failures_total counter  (with --state.file)
    # TYPE ledger_exporter_dropped_values_total counter  (labels node, kind)
    """

    SPECS = (
        m.BUILD_INFO,
        m.CYCLE_DURATION,
        m.CYCLE_TIMEOUT,
        m.CONFIG_RELOAD_OK,
        m.CONFIG_RELOAD_SUCCESS_TIME,
        m.STATE_FILE_WRITE_FAILURES,
        m.CYCLE_FAILURES,
        m.LAST_SUCCESSFUL_CYCLE,
        m.STALE_AFTER,
        m.DROPPED_VALUES,
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        families.add(m.BUILD_INFO, dict(this_build().labels()), 1.0)
        families.add(m.CYCLE_DURATION, {}, self._snapshot.cycle_duration)
        families.add(m.CYCLE_TIMEOUT, {}, self._snapshot.cycle_timeout)
        families.add(m.CONFIG_RELOAD_OK, {}, _flag(self._snapshot.config_reload_ok))
        at = self._snapshot.config_reload_success_at
        families.add(m.CONFIG_RELOAD_SUCCESS_TIME, {}, at)
        snapshot = self._snapshot
        families.add(m.STATE_FILE_WRITE_FAILURES, {}, snapshot.state_file_write_failures)
        for stage, count in zip(CycleStage, snapshot.cycle_failures, strict=False):
            families.add(m.CYCLE_FAILURES, {"stage": stage.value}, count)
        done = snapshot.completed_at
        families.add(m.LAST_SUCCESSFUL_CYCLE, {}, _unix(done, snapshot.wall_offset))
        families.add(m.STALE_AFTER, {}, snapshot.stale_after if done is not None else None)
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
    # TYPE ledger_node_retry_after_total counter
    # TYPE ledger_node_info gauge  (labels node_version, node_id, peer_id)
    # TYPE ledger_node_peers gauge
    # TYPE ledger_node_blockchains gauge
    """

    SPECS = (
        m.NODE_UP,
        m.NODE_SCRAPE_DURATION,
        m.NODE_SCRAPE_ERRORS,
        m.NODE_LAST_SUCCESS,
        m.NODE_RETRY_AFTER,
        m.NODE_INFO,
        m.family_of(PEER_COUNT),
        m.family_of(BLOCKCHAINS),
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            self._add_node(families, node, self._snapshot.wall_offset)
        return iter(families)

    @staticmethod
    def _add_node(families: _Families, node: NodeStatus, wall_offset: float) -> None:
        labels: Labels = {"node": node.name, **dict(node.labels)}
        families.add(m.NODE_UP, labels, _flag(node.up))
        families.add(m.NODE_SCRAPE_DURATION, labels, node.duration)
        for endpoint, reason, count in node.error_counts:
            families.add(
                m.NODE_SCRAPE_ERRORS, {**labels, "endpoint": endpoint, "reason": reason}, count
            )
        families.add(m.NODE_LAST_SUCCESS, labels, _unix(node.last_success, wall_offset))
        families.add(m.NODE_RETRY_AFTER, labels, node.retry_afters)
        health = node.health
        if health is None:
            return
        identity = (health.node_version, health.node_id, health.peer_id)
        if any(part is not None for part in identity):
            info = dict(zip(("node_version", "node_id", "peer_id"), identity, strict=True))
            families.add(m.NODE_INFO, {**labels, **{k: v or "" for k, v in info.items()}}, 1.0)
        families.add(m.family_of(PEER_COUNT), labels, health.peer_count)
        families.add(m.family_of(BLOCKCHAINS), labels, health.blockchain_count)


class TransportCollector(Collector):
    """What libcurl saw of each up node's requests: its last TLS handshake and the phases of
    each kind's last answer.

    # TYPE ledger_node_tls_cert_expiry_timestamp_seconds gauge
    # TYPE ledger_node_tls_info gauge  (labels version, cipher, issuer_cn, subject_cn,
    #   serial_fingerprint)
    # TYPE ledger_node_request_duration_seconds gauge  (labels endpoint, phase)
    """

    SPECS = (m.NODE_TLS_CERT_EXPIRY, m.NODE_TLS_INFO, m.NODE_REQUEST_DURATION)

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            transport = node.transport
            if not node.up or transport is None:
                continue
            labels: Labels = {"node": node.name, **dict(node.labels)}
            handshake = transport.handshake
            if handshake is not None:
                families.add(m.NODE_TLS_CERT_EXPIRY, labels, handshake.expiry)
                if transport.info_fits:
                    names = ("version", "cipher", "issuer_cn", "subject_cn", "serial_fingerprint")
                    info = dict(zip(names, handshake.info_labels(), strict=True))
                    families.add(m.NODE_TLS_INFO, {**labels, **info}, 1.0)
            for endpoint, phase, seconds in transport.phase_rows():
                phased = {**labels, "endpoint": endpoint, "phase": phase}
                families.add(m.NODE_REQUEST_DURATION, phased, seconds)
        return iter(families)


class BlockchainCollector(Collector):
    """``GET /blockchains/{id}`` of every polled chain (labels ``node``, ``blockchain``).

    # TYPE ledger_blockchain_up gauge
    # TYPE ledger_blockchain_height gauge
    # TYPE ledger_blockchain_blocks_behind gauge
    # TYPE ledger_blockchain_behind_seconds gauge
    # TYPE ledger_blockchain_height_last_change_timestamp_seconds gauge
    # TYPE ledger_blockchain_consensus_info gauge  (labels consensus_type, key_type)
    # TYPE ledger_blockchain_feature_enabled gauge  (label feature)
    ... and one gauge per field of the chain status: see exporter/expose/metrics.py.
    """

    SPECS = tuple(
        spec
        for spec in m.ALL
        if spec.name.startswith("ledger_blockchain_")
        and spec not in m.NETWORK_FAMILIES + m.CONSENSUS_FAMILIES + m.MAINTENANCE_FAMILIES
    )

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            base: Labels = {"node": node.name, **dict(node.labels)}
            for chain in node.chains:
                labels = {**base, "blockchain": chain.blockchain}
                self._add_chain(families, labels, chain, self._snapshot.wall_offset)
        return iter(families)

    @staticmethod
    def _add_chain(
        families: _Families, labels: Labels, chain: ChainStatus, wall_offset: float
    ) -> None:
        families.add(m.CHAIN_UP, labels, _flag(chain.up))
        reading = chain.reading
        if reading is None:
            return
        for gauge in CHAIN_GAUGES:
            families.add(CHAIN_GAUGE_FAMILIES[gauge], labels, reading.gauge(gauge))
        families.add(m.CHAIN_BLOCKS_BEHIND, labels, chain.blocks_behind)
        families.add(m.CHAIN_BEHIND_SECONDS, labels, chain.behind_seconds)
        families.add(m.CHAIN_HEIGHT_CHANGED, labels, _unix(chain.height_changed_at, wall_offset))
        if reading.consensus_type is not None or reading.key_type is not None:
            info = {
                "consensus_type": reading.consensus_type or "",
                "key_type": reading.key_type or "",
            }
            families.add(m.CHAIN_CONSENSUS, {**labels, **info}, 1.0)
        for feature, enabled in reading.features:
            families.add(m.CHAIN_FEATURE, {**labels, "feature": feature}, enabled)


class ConsensusCollector(Collector):
    """Each chain followed across cycles by the daemon's history
    (docs/network-and-consensus.md, "Consensus health").

    # TYPE ledger_blockchain_vote_session_age_seconds gauge
    # TYPE ledger_blockchain_vote_round_changes_total counter
    # TYPE ledger_blockchain_leader_failed_rounds_total counter  (label leader)
    # TYPE ledger_blockchain_council_changes_total counter
    # TYPE ledger_blockchain_reorgs_total counter
    """

    SPECS = m.CONSENSUS_FAMILIES

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        for node in self._snapshot.nodes:
            base: Labels = {"node": node.name, **dict(node.labels)}
            for chain in node.chains:
                labels = {**base, "blockchain": chain.blockchain}
                if chain.reading is not None:
                    families.add(m.CHAIN_REORGS, labels, chain.reorgs)
                followed = chain.consensus
                if followed is None:
                    continue
                families.add(m.CHAIN_VOTE_SESSION_AGE, labels, followed.session_age)
                families.add(m.CHAIN_VOTE_ROUND_CHANGES, labels, followed.round_changes)
                for leader, count in followed.leader_failures:
                    leader_labels = {**labels, "leader": leader}
                    families.add(m.CHAIN_LEADER_FAILED_ROUNDS, leader_labels, count)
                families.add(m.CHAIN_COUNCIL_CHANGES, labels, followed.council_changes)
        return iter(families)


class NetworkCollector(Collector):
    """Cross-node checks over the up polled nodes (docs/network-and-consensus.md).

    # TYPE ledger_network_blockchain_checkpoint_height gauge  (label blockchain)
    # TYPE ledger_network_blockchain_checkpoint_hashes gauge  (label blockchain)
    # TYPE ledger_blockchain_checkpoint_agrees gauge  (labels node, blockchain)
    # TYPE ledger_network_blockchain_council_views gauge  (label blockchain)
    # TYPE ledger_blockchain_council_agrees gauge  (labels node, blockchain)
    # TYPE ledger_network_blockchain_consensus_views gauge  (label blockchain)
    # TYPE ledger_blockchain_consensus_agrees gauge  (labels node, blockchain)
    # TYPE ledger_network_blockchain_council_members_polled gauge  (label blockchain)
    # TYPE ledger_network_blockchain_council_members_up gauge  (label blockchain)
    # TYPE ledger_network_peer_partitions gauge
    # TYPE ledger_network_peer_largest_partition_nodes gauge
    # TYPE ledger_node_polled_peers gauge  (label node)
    # TYPE ledger_node_unexpected_blockchains gauge  (label node)
    """

    SPECS = m.NETWORK_FAMILIES

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
            families.add(m.NETWORK_CONSENSUS_VIEWS, network, chain.consensus_views)
            polled, up = chain.council_members_polled, chain.council_members_up
            families.add(m.NETWORK_COUNCIL_MEMBERS_POLLED, network, polled)
            families.add(m.NETWORK_COUNCIL_MEMBERS_UP, network, up)
            for spec, agreement in (
                (m.CHAIN_CHECKPOINT_AGREES, chain.block_agrees),
                (m.CHAIN_COUNCIL_AGREES, chain.council_agrees),
                (m.CHAIN_CONSENSUS_AGREES, chain.consensus_agrees),
            ):
                for node, agrees in agreement:
                    if node in nodes:
                        families.add(spec, {**nodes[node], **network}, _flag(agrees))
        families.add(m.NETWORK_PEER_PARTITIONS, {}, view.partitions)
        families.add(m.NETWORK_PEER_LARGEST_PARTITION, {}, view.largest_partition)
        for node, linked in view.polled_peers:
            if node in nodes:
                families.add(m.NODE_POLLED_PEERS, nodes[node], linked)
        for node, count in view.unexpected_chains:
            if node in nodes:
                families.add(m.NODE_UNEXPECTED_BLOCKCHAINS, nodes[node], count)
        return iter(families)


class WatchCollector(Collector):
    """Watched contracts and wallets (labels ``node``, ``blockchain``, ``contract``/``wallet``).

    # TYPE ledger_contract_up gauge
    # TYPE ledger_contract_status gauge  (label status; a state set)
    # TYPE ledger_contract_state_value gauge  (label key)
    # TYPE ledger_wallet_permission gauge  (labels group, permission)
    ... and the other watch families of exporter/expose/metrics.py.
    """

    SPECS = tuple(
        spec for spec in m.ALL if spec.name.startswith(("ledger_contract_", "ledger_wallet_"))
    )

    def __init__(self, status: WatchStatus) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        families = {spec: Metric(spec.name, spec.help, spec.kind.value) for spec in self.SPECS}
        for watched in self._status.objects:
            for spec, labels, value in watch_samples(watched):
                families[spec].add_sample(spec.name, labels, value)
        return (family for family in families.values() if family.samples)


class MaintenanceCollector(Collector):
    """The config's maintenance entries that apply (labels ``node`` + static labels, or
    ``blockchain``; and ``reason``).

    # TYPE ledger_node_maintenance gauge  (labels node, reason)
    # TYPE ledger_blockchain_maintenance gauge  (labels blockchain, reason)
    """

    SPECS = m.MAINTENANCE_FAMILIES

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        families = _Families(self.SPECS)
        nodes = {node.name: dict(node.labels) for node in self._snapshot.nodes}
        for entry in self._snapshot.maintenance:
            if entry.node in nodes:
                labels = {"node": entry.node, **nodes[entry.node], "reason": entry.reason}
                families.add(m.NODE_MAINTENANCE, labels, 1.0)
        for entry in self._snapshot.maintenance:
            if entry.blockchain:
                chain = {"blockchain": entry.blockchain, "reason": entry.reason}
                families.add(m.CHAIN_MAINTENANCE, chain, 1.0)
        return iter(families)


class ProbeCollector(Collector):
    """``ledger_probe_success`` and ``ledger_probe_duration_seconds`` of one probe."""

    def __init__(self, success: bool, duration: float) -> None:
        self._success = success
        self._duration = duration

    def collect(self) -> Iterator[Metric]:
        success = 1.0 if self._success else 0.0
        for spec, value in ((m.PROBE_SUCCESS, success), (m.PROBE_DURATION, self._duration)):
            family = Metric(spec.name, spec.help, spec.kind.value)
            family.add_sample(spec.name, {}, value)
            yield family


def snapshot_collectors(snapshot: Snapshot) -> tuple[Collector, ...]:
    """Every collector that together expose one snapshot (/metrics without the runtime)."""
    return (
        ExporterCollector(snapshot),
        NodeCollector(snapshot),
        TransportCollector(snapshot),
        BlockchainCollector(snapshot),
        ConsensusCollector(snapshot),
        NetworkCollector(snapshot),
        WatchCollector(snapshot.watch),
        MaintenanceCollector(snapshot),
    )


def probe_collectors(snapshot: Snapshot, duration: float) -> tuple[Collector, ...]:
    """What /probe exposes: the probed node's (the snapshot's one node, none when /health
    could not be read) and its chains' families, then the probe's own."""
    nodes: tuple[Collector, ...] = ()
    if snapshot.nodes:
        nodes = (NodeCollector(snapshot), BlockchainCollector(snapshot))
    return (*nodes, ProbeCollector(bool(snapshot.nodes), duration))


def render_collectors(collectors: Iterable[Collector], openmetrics_format: bool = False) -> bytes:
    """client_python's exposition of ``collectors``; OpenMetrics without its ``# EOF``."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    if openmetrics_format:
        rendered: bytes = openmetrics.exposition.generate_latest(registry)  # type: ignore[no-untyped-call]
        return rendered.removesuffix(b"# EOF\n")
    return exposition.generate_latest(registry)


class Samples:
    """The samples of a text exposition, read back by client_python's parser, to look values
    up as a registry's ``get_sample_value`` would."""

    def __init__(self, text: bytes | str) -> None:
        source = text.decode() if isinstance(text, bytes) else text
        self._values = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(source)
            for sample in family.samples
        }

    def get_sample_value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self._values.get((name, frozenset((labels or {}).items())))
