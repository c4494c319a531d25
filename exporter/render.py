"""The snapshot written straight into the text and OpenMetrics formats, without metric objects.

client_python builds a Metric and a Sample per value and formats every label set again each
time (7-18 us a sample). Here each family's sample lines are written once per snapshot and
shared by both formats; a series' label string is built once and reused while its node's
name, labels and chain stay the same. ``tests/test_render.py`` checks the bytes equal
client_python's for the same snapshot.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.utils import floatToGoString

from exporter import __version__
from exporter import metrics as m
from exporter.collector import (
    BlockchainCollector,
    ExporterCollector,
    NetworkCollector,
    NodeCollector,
)
from exporter.metrics import MetricSpec
from exporter.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.watch import WatchStatus
from exporter.watchcollector import WatchCollector, watch_samples

Extra = tuple[tuple[str, str], ...]
#: Family order, as the collectors (and so client_python) emit them.
_ORDER = (
    ExporterCollector.SPECS
    + NodeCollector.SPECS
    + BlockchainCollector.SPECS
    + NetworkCollector.SPECS
    + WatchCollector.SPECS
)


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _label_string(labels: Iterable[tuple[str, str]]) -> str:
    """``{a="1",b="2"}`` with names sorted, as client_python writes them; empty for none."""
    items = sorted(labels)
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}" if items else ""


class _ChainSeries:
    """The label strings of one chain's series of one node."""

    __slots__ = ("consensus", "features", "labels", "own")

    def __init__(self, own: Extra) -> None:
        self.own = own
        self.labels = _label_string(own)
        self.consensus: tuple[tuple[str | None, str | None], str] | None = None
        self.features: dict[str, str] = {}

    def consensus_labels(self, consensus_type: str | None, key_type: str | None) -> str:
        kinds = (consensus_type, key_type)
        if self.consensus is None or self.consensus[0] != kinds:
            info = (("consensus_type", consensus_type or ""), ("key_type", key_type or ""))
            self.consensus = (kinds, _label_string((*self.own, *info)))
        return self.consensus[1]

    def count(self) -> int:
        """Label strings kept."""
        return 1 + (self.consensus is not None) + len(self.features)

    def keep_features(self, features: tuple[tuple[str, float], ...]) -> None:
        """Forget the strings of features the chain no longer reports."""
        if len(self.features) > len(features):
            kept = self.features
            self.features = {name: kept[name] for name, _ in features if name in kept}

    def feature_labels(self, feature: str) -> str:
        text = self.features.get(feature)
        if text is None:
            text = self.features[feature] = _label_string((*self.own, ("feature", feature)))
        return text


class _NodeSeries:
    """The label strings of one node's series, kept while its name and labels stay the same:
    one object per node and one per chain, not one key tuple per series."""

    __slots__ = ("chains", "config_labels", "error_keys", "errors", "info", "labels", "own")

    def __init__(self, name: str, config_labels: Extra) -> None:
        self.config_labels = config_labels
        self.own: Extra = (("node", name), *config_labels)
        self.labels = _label_string(self.own)
        self.error_keys: tuple[tuple[str, str], ...] = ()  # the ErrorCounts keys (shared)
        self.errors: tuple[str, ...] = ()  # one label string per key
        self.info: tuple[tuple[str | None, ...], str] | None = None
        self.chains: dict[str, _ChainSeries] = {}

    def error_labels(self, keys: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
        """The label strings of the error counters ``keys``, in their order (only new keys
        are built when the node gains an endpoint)."""
        if keys is not self.error_keys:
            known = dict(zip(self.error_keys, self.errors, strict=True))
            self.errors = tuple(known.get(key) or self._error_string(key) for key in keys)
            self.error_keys = keys
        return self.errors

    def _error_string(self, key: tuple[str, str]) -> str:
        return _label_string((*self.own, ("endpoint", key[0]), ("reason", key[1])))

    def info_labels(self, identity: tuple[str | None, ...]) -> str:
        if self.info is None or self.info[0] != identity:
            names = ("node_version", "node_id", "peer_id")
            info = tuple((k, v or "") for k, v in zip(names, identity, strict=True))
            self.info = (identity, _label_string((*self.own, *info)))
        return self.info[1]

    def chain(self, blockchain: str) -> _ChainSeries:
        series = self.chains.get(blockchain)
        if series is None:
            own = (*self.own, ("blockchain", blockchain))
            series = self.chains[blockchain] = _ChainSeries(own)
        return series

    def forget_beyond(self, node: NodeStatus) -> None:
        """Drop the strings of series ``node`` no longer has (chains, features)."""
        if len(self.chains) > len(node.chains):
            current = {chain.blockchain for chain in node.chains}
            self.chains = {k: v for k, v in self.chains.items() if k in current}
        for chain in node.chains:
            if (series := self.chains.get(chain.blockchain)) is not None:
                series.keep_features(chain.reading.features if chain.reading else ())

    def count(self) -> int:
        """Label strings kept."""
        chains = sum(chain.count() for chain in self.chains.values())
        return 1 + len(self.errors) + (self.info is not None) + chains


class Renderer:
    """Writes snapshots; keeps the label strings of the series it wrote last time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the next snapshot may render while a scrape renders
        self._nodes: dict[str, _NodeSeries] = {}
        self._network_labels: dict[str, str] = {}

    def cached_series(self) -> int:
        """How many label strings are kept for the next render."""
        with self._lock:
            nodes = sum(node.count() for node in self._nodes.values())
            return nodes + len(self._network_labels)

    def samples(self, snapshot: Snapshot) -> dict[MetricSpec, Family]:
        """Each non-empty family's series, in the collectors' order: label strings (shared
        with the cache) and values, 16 bytes a sample until :func:`family_lines` writes them."""
        with self._lock:
            return self._samples(snapshot)

    def _samples(self, snapshot: Snapshot) -> dict[MetricSpec, Family]:
        lines: dict[str, Family] = {spec.name: Family() for spec in _ORDER}
        add = _Adder(lines)
        add(m.BUILD_INFO, _label_string([("version", __version__)]), 1.0)
        add(m.CYCLE_DURATION, "", snapshot.cycle_duration)
        add(m.CONFIG_RELOAD_OK, "", 1.0 if snapshot.config_reload_ok else 0.0)
        series = self._node_series(snapshot.nodes)
        for node in snapshot.nodes:
            self._node(add, node, series[node.name])
        for node in snapshot.nodes:
            for chain in node.chains:
                _chain(add, series[node.name].chain(chain.blockchain), chain)
        self._network(add, snapshot, series)
        _watch(add, snapshot.watch)
        for node in snapshot.nodes:
            series[node.name].forget_beyond(node)
        return {spec: lines[spec.name] for spec in _ORDER if lines[spec.name].labels}

    def _node_series(self, nodes: Iterable[NodeStatus]) -> dict[str, _NodeSeries]:
        """The cached strings of each node (new ones for new or relabelled nodes); nodes no
        longer in the snapshot are forgotten."""
        fresh: dict[str, _NodeSeries] = {}
        for node in nodes:
            kept = self._nodes.get(node.name)
            if kept is None or kept.config_labels != node.labels:
                kept = _NodeSeries(node.name, node.labels)
            fresh[node.name] = kept
        self._nodes = fresh
        return fresh

    def _network(self, add: _Adder, snapshot: Snapshot, series: dict[str, _NodeSeries]) -> None:
        """The cross-node families, in NetworkCollector's order and labels."""
        view = snapshot.network
        if len(self._network_labels) > len(view.chains):
            self._network_labels = {}
        for chain in view.chains:
            labels = self._network_labels.get(chain.blockchain)
            if labels is None:
                labels = _label_string((("blockchain", chain.blockchain),))
                self._network_labels[chain.blockchain] = labels
            add(m.NETWORK_CHECKPOINT_HEIGHT, labels, chain.checkpoint_height)
            add(m.NETWORK_CHECKPOINT_HASHES, labels, chain.checkpoint_hashes)
            add(m.NETWORK_COUNCIL_VIEWS, labels, chain.council_views)
            for spec, agreement in (
                (m.CHAIN_CHECKPOINT_AGREES, chain.block_agrees),
                (m.CHAIN_COUNCIL_AGREES, chain.council_agrees),
            ):
                for name, agrees in agreement:
                    if (node := series.get(name)) is None:
                        continue  # the view names only the snapshot's nodes; never guess
                    add(spec, node.chain(chain.blockchain).labels, 1.0 if agrees else 0.0)
        add(m.NETWORK_PEER_PARTITIONS, "", view.partitions)
        for name, linked in view.polled_peers:
            if (node := series.get(name)) is not None:
                add(m.NODE_POLLED_PEERS, node.labels, linked)

    @staticmethod
    def _node(add: _Adder, node: NodeStatus, series: _NodeSeries) -> None:
        labels = series.labels
        add(m.NODE_UP, labels, 1.0 if node.up else 0.0)
        add(m.NODE_SCRAPE_DURATION, labels, node.duration)
        counts = node.error_counts
        strings = series.error_labels(counts.keys)
        for text, count in zip(strings, memoryview(counts.counts).cast("Q"), strict=True):
            add(m.NODE_SCRAPE_ERRORS, text, count)
        add(m.NODE_LAST_SUCCESS, labels, node.last_success)
        health = node.health
        if health is None:
            return
        identity = (health.node_version, health.node_id, health.peer_id)
        if any(part is not None for part in identity):
            add(m.NODE_INFO, series.info_labels(identity), 1.0)
        add(m.NODE_PEERS, labels, health.peer_count)
        add(m.NODE_BLOCKCHAINS, labels, health.blockchain_count)


def _chain(add: _Adder, series: _ChainSeries, chain: ChainStatus) -> None:
    labels = series.labels
    add(m.CHAIN_UP, labels, 1.0 if chain.up else 0.0)
    reading = chain.reading
    if reading is None:
        return
    for spec, value in reading.gauges:
        add(spec, labels, value)
    add(m.CHAIN_BLOCKS_BEHIND, labels, chain.blocks_behind)
    add(m.CHAIN_HEIGHT_CHANGED, labels, chain.height_changed_at)
    if reading.consensus_type is not None or reading.key_type is not None:
        add(
            m.CHAIN_CONSENSUS,
            series.consensus_labels(reading.consensus_type, reading.key_type),
            1.0,
        )
    for feature, enabled in reading.features:
        add(m.CHAIN_FEATURE, series.feature_labels(feature), enabled)


def _watch(add: _Adder, status: WatchStatus) -> None:
    """The watch-list series: few, so their label strings are not cached."""
    for watched in status.objects:
        for spec, labels, value in watch_samples(watched):
            add(spec, _label_string(labels.items()), value)


class Family:
    """One family's series: label strings and values, in the order they were added."""

    __slots__ = ("labels", "values")

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.values = array("d")


class _Adder:
    """Adds a series to its family; None values give no sample."""

    def __init__(self, families: dict[str, Family]) -> None:
        self._families = families

    def __call__(self, spec: MetricSpec, labels: str, value: float | None) -> None:
        if value is not None:
            family = self._families[spec.name]
            family.labels.append(labels)
            family.values.append(value)


#: Sample lines written at a time: a family of 18 000 series (the error counters of 1000
#: nodes) is never held whole as text, only ~64 KiB of it.
CHUNK_LINES = 512


def family_chunks(spec: MetricSpec, family: Family) -> Iterator[bytes]:
    """The family's sample lines (the same in both formats), ``CHUNK_LINES`` at a time."""
    name = spec.name
    fmt: Callable[[float], str] = floatToGoString
    labels, values = family.labels, family.values
    for start in range(0, len(labels), CHUNK_LINES):
        end = start + CHUNK_LINES
        pairs = zip(labels[start:end], values[start:end], strict=True)
        yield "".join([f"{name}{label} {fmt(value)}\n" for label, value in pairs]).encode()


def family_lines(spec: MetricSpec, family: Family) -> bytes:
    """The family's sample lines, whole."""
    return b"".join(family_chunks(spec, family))


def text_headers(spec: MetricSpec) -> str:
    """A family's HELP and TYPE lines in the Prometheus text format 0.0.4."""
    help_text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {spec.name} {help_text}\n# TYPE {spec.name} {spec.kind.value}\n"


def openmetrics_headers(spec: MetricSpec) -> str:
    """A family's HELP and TYPE lines in OpenMetrics 1.0 (counters named without ``_total``)."""
    name = spec.name.removesuffix("_total") if spec.kind is m.Kind.COUNTER else spec.name
    return f"# HELP {name} {_escape(spec.help)}\n# TYPE {name} {spec.kind.value}\n"


def text_format(families: dict[MetricSpec, Family]) -> bytes:
    """The families in the Prometheus text format 0.0.4."""
    return b"".join(text_headers(s).encode() + family_lines(s, f) for s, f in families.items())


def openmetrics_format(families: dict[MetricSpec, Family]) -> bytes:
    """The families in OpenMetrics 1.0, without the closing ``# EOF``."""
    return b"".join(
        openmetrics_headers(s).encode() + family_lines(s, f) for s, f in families.items()
    )
