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
from collections.abc import Callable, Iterable

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


class Renderer:
    """Writes snapshots; keeps the label strings of the series it wrote last time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the next snapshot may render while a scrape renders
        self._labels: dict[tuple[object, ...], str] = {}
        self._fresh: dict[tuple[object, ...], str] = {}

    def _series(self, key: tuple[object, ...], own: Extra, extra: Extra = ()) -> str:
        """The label string of ``own`` + ``extra``, cached under ``key`` (flat, so a cached
        series costs one small tuple; the label pairs are only built on a miss)."""
        text = self._labels.get(key)
        if text is None:
            text = _label_string((*own, *extra))
        self._fresh[key] = text
        return text

    def samples(self, snapshot: Snapshot) -> dict[MetricSpec, Family]:
        """Each non-empty family's series, in the collectors' order: label strings (shared
        with the cache) and values, 16 bytes a sample until :func:`family_lines` writes them."""
        with self._lock:
            return self._samples(snapshot)

    def _samples(self, snapshot: Snapshot) -> dict[MetricSpec, Family]:
        self._fresh = {}
        lines: dict[str, Family] = {spec.name: Family() for spec in _ORDER}
        add = _Adder(lines)
        add(m.BUILD_INFO, _label_string([("version", __version__)]), 1.0)
        add(m.CYCLE_DURATION, "", snapshot.cycle_duration)
        add(m.CONFIG_RELOAD_OK, "", 1.0 if snapshot.config_reload_ok else 0.0)
        for node in snapshot.nodes:
            self._node(add, node)
        for node in snapshot.nodes:
            base = (node.name, node.labels)
            for chain in node.chains:
                self._chain(add, node, base, chain)
        self._network(add, snapshot)
        _watch(add, snapshot.watch)
        self._labels = self._fresh  # series no longer written are forgotten
        return {spec: lines[spec.name] for spec in _ORDER if lines[spec.name].labels}

    def _network(self, add: _Adder, snapshot: Snapshot) -> None:
        """The cross-node families, in NetworkCollector's order and labels."""
        view = snapshot.network
        nodes = {node.name: node for node in snapshot.nodes}
        for chain in view.chains:
            own: Extra = (("blockchain", chain.blockchain),)
            labels = self._series(("network", chain.blockchain), own)
            add(m.NETWORK_CHECKPOINT_HEIGHT, labels, chain.checkpoint_height)
            add(m.NETWORK_CHECKPOINT_HASHES, labels, chain.checkpoint_hashes)
            add(m.NETWORK_COUNCIL_VIEWS, labels, chain.council_views)
            for spec, agreement in (
                (m.CHAIN_CHECKPOINT_AGREES, chain.block_agrees),
                (m.CHAIN_COUNCIL_AGREES, chain.council_agrees),
            ):
                for name, agrees in agreement:
                    if (node := nodes.get(name)) is None:
                        continue  # the view names only the snapshot's nodes; never guess
                    key = (node.name, node.labels, chain.blockchain)
                    series = self._series(key, (("node", name), *node.labels), own)
                    add(spec, series, 1.0 if agrees else 0.0)
        add(m.NETWORK_PEER_PARTITIONS, "", view.partitions)
        for name, linked in view.polled_peers:
            if (node := nodes.get(name)) is None:
                continue
            add(
                m.NODE_POLLED_PEERS,
                self._series((name, node.labels), (("node", name), *node.labels)),
                linked,
            )

    def _node(self, add: _Adder, node: NodeStatus) -> None:
        key = (node.name, node.labels)
        own = (("node", node.name), *node.labels)
        labels = self._series(key, own)
        add(m.NODE_UP, labels, 1.0 if node.up else 0.0)
        add(m.NODE_SCRAPE_DURATION, labels, node.duration)
        for endpoint, reason, count in node.error_counts:
            extra = (("endpoint", endpoint), ("reason", reason))
            add(
                m.NODE_SCRAPE_ERRORS, self._series(("e", *key, endpoint, reason), own, extra), count
            )
        add(m.NODE_LAST_SUCCESS, labels, node.last_success)
        health = node.health
        if health is None:
            return
        identity = (health.node_version, health.node_id, health.peer_id)
        if any(part is not None for part in identity):
            names = ("node_version", "node_id", "peer_id")
            info = tuple((k, v or "") for k, v in zip(names, identity, strict=True))
            add(m.NODE_INFO, self._series(("i", *key, *identity), own, info), 1.0)
        add(m.NODE_PEERS, labels, health.peer_count)
        add(m.NODE_BLOCKCHAINS, labels, health.blockchain_count)

    def _chain(
        self, add: _Adder, node: NodeStatus, base: tuple[object, ...], chain: ChainStatus
    ) -> None:
        key = (*base, chain.blockchain)
        own = (("node", node.name), *node.labels, ("blockchain", chain.blockchain))
        labels = self._series(key, own)
        add(m.CHAIN_UP, labels, 1.0 if chain.up else 0.0)
        reading = chain.reading
        if reading is None:
            return
        for spec, value in reading.gauges:
            add(spec, labels, value)
        add(m.CHAIN_BLOCKS_BEHIND, labels, chain.blocks_behind)
        add(m.CHAIN_HEIGHT_CHANGED, labels, chain.height_changed_at)
        if reading.consensus_type is not None or reading.key_type is not None:
            info: Extra = (
                ("consensus_type", reading.consensus_type or ""),
                ("key_type", reading.key_type or ""),
            )
            consensus = ("c", *key, reading.consensus_type, reading.key_type)
            add(m.CHAIN_CONSENSUS, self._series(consensus, own, info), 1.0)
        for feature, enabled in reading.features:
            extra = (("feature", feature),)
            add(m.CHAIN_FEATURE, self._series(("f", *key, feature), own, extra), enabled)


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


def family_lines(spec: MetricSpec, family: Family) -> bytes:
    """The family's sample lines (the same in both formats)."""
    name = spec.name
    fmt: Callable[[float], str] = floatToGoString
    pairs = zip(family.labels, family.values, strict=True)
    return "".join([f"{name}{labels} {fmt(value)}\n" for labels, value in pairs]).encode()


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
