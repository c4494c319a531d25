"""The one writer of series: a snapshot straight into the text and OpenMetrics formats.

Both /metrics and /probe are written here, in the catalogue's order
(:data:`~exporter.expose.metrics.DAEMON_FAMILIES`,
:data:`~exporter.expose.metrics.PROBE_FAMILIES`), so a probe's series are the daemon's for
the same answers by construction.

client_python builds a Metric and a Sample per value and formats every label set again each
time (7-18 us a sample). Here the families are written one at a time, straight from the
snapshot, their sample lines formatted once for both formats and handed out
:data:`CHUNK_LINES` at a time, so a render never holds a family's text or an index of every
sample. The label strings of nodes and chains (shared by ~25 families each) are kept while
a node's name, labels and chains stay the same; the rarer ones (error counters, info,
consensus, features) are filled into templates shared by every node with the same label
names. ``tests/expose/test_render.py`` checks the bytes equal client_python's for the same snapshot
(``tests/support/oracle.py``: client_python's collectors over the same snapshots).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from math import copysign, isnan
from operator import attrgetter
from typing import Protocol

from exporter.bounds import DropKind
from exporter.build import BuildInfo, this_build
from exporter.expose import metrics as m
from exporter.expose.labels import Escapes, NodeLabels, Templates, escape, label_string
from exporter.expose.metrics import MetricSpec
from exporter.expose.watch_samples import watch_samples
from exporter.model.fields import (
    CHAIN_GAUGES,
    CHAIN_STATUS_FIELDS,
    GAUGE_POSITION,
    HEALTH_FIELDS,
    Field,
    gauge_table,
)
from exporter.model.network import Agreement, ChainAgreement
from exporter.model.snapshot import (
    ChainStatus,
    ConsensusStatus,
    CycleStage,
    NodeStatus,
    Snapshot,
)
from exporter.model.storage import GaugeTable
from exporter.model.transport import TLS_INFO_LABELS
from exporter.model.watch_readings import WatchStatus

#: The two formats written, as the Content-Type of an answer names them.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: How an OpenMetrics document ends (after the runtime families, if any).
OPENMETRICS_END = b"# EOF\n"
#: Sample lines written at a time: a family of 21 000 series (the error counters of 1000
#: nodes) is never held whole, only ~64 KiB of its text.
CHUNK_LINES = 512

#: The family of each plain gauge of a chain reading, and the gauge's position.
CHAIN_GAUGE_FAMILIES: Mapping[Field, MetricSpec] = {
    field: m.family_of(field) for field in CHAIN_GAUGES
}
_GAUGE_POSITIONS = {m.family_of(field): GAUGE_POSITION[field] for field in CHAIN_GAUGES}
#: The fields written as labels of the node's and the chain's ``_info`` families, in order:
#: their label names and how each is read off its reading.
_NODE_INFO = tuple(field for field in HEALTH_FIELDS if field.family == m.NODE_INFO.name)
_CHAIN_INFO = tuple(
    field for field in CHAIN_STATUS_FIELDS if field.family == m.CHAIN_CONSENSUS.name
)
_NODE_INFO_LABELS = tuple(field.label for field in _NODE_INFO)
_CHAIN_INFO_LABELS = tuple(field.label for field in _CHAIN_INFO)
_node_info = attrgetter(*(field.attribute for field in _NODE_INFO))
_chain_info = attrgetter(*(field.attribute for field in _CHAIN_INFO))
#: Each DropKind's ``kind`` label value, escaped.
_DROP_KINDS = tuple(escape(kind.value) for kind in DropKind)
#: One family's series: (label string, value); a None value gives no sample.
Series = Iterable[tuple[str, float | None]]


class FamilySink(Protocol):
    """Where a render goes: a family's header, then its sample lines in chunks."""

    def family(self, spec: MetricSpec) -> None: ...

    def lines(self, chunk: bytes) -> None: ...


class Renderer:
    """Writes snapshots; keeps the label strings of the nodes and chains it wrote last time."""

    def __init__(self, build: BuildInfo | None = None) -> None:
        self._lock = threading.Lock()  # the next snapshot may render while a scrape renders
        self._nodes: dict[str, NodeLabels] = {}
        self._templates = Templates()
        self._build_labels = label_string((build or this_build()).labels())

    def write(
        self,
        snapshot: Snapshot,
        sink: FamilySink,
        families: Sequence[MetricSpec] = m.DAEMON_FAMILIES,
        values: Mapping[MetricSpec, float] | None = None,
    ) -> None:
        """Every non-empty one of ``families`` of ``snapshot`` into ``sink``, in that order;
        ``values`` holds the sample of each unlabelled family the snapshot does not (a probe's
        success and duration)."""
        with self._lock:
            nodes = self._node_labels(snapshot.nodes)
            render = _Render(snapshot, nodes, self._templates, values or {}, self._build_labels)
            try:
                for spec in families:
                    started = False
                    for chunk in sample_chunks(spec.name, render.series(spec)):
                        if not started:
                            sink.family(spec)
                            started = True
                        sink.lines(chunk)
            finally:
                render.close()
            for node in snapshot.nodes:
                self._nodes[node.name].forget_chains_beyond(node)

    def _node_labels(self, nodes: Iterable[NodeStatus]) -> dict[str, NodeLabels]:
        """The kept labels of each node (new ones for new or relabelled nodes); nodes no
        longer in the snapshot are forgotten."""
        fresh: dict[str, NodeLabels] = {}
        for node in nodes:
            kept = self._nodes.get(node.name)
            if kept is None or kept.config_labels != node.labels:
                kept = NodeLabels(node.name, node.labels)
            fresh[node.name] = kept
        self._nodes = fresh
        return fresh


def go_float(value: float) -> str:
    """A sample value as the Prometheus clients write it (client_python's floatToGoString):
    ``+Inf``, ``-Inf`` or ``NaN``; else Python's shortest repr, in Go's exponent form for
    positive values from 1e6 on (``1.7e+09``), where Go switches sooner than Python."""
    value = float(value)  # counters are ints
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


#: Value texts remembered per family at most: most families repeat a few values (0, 1,
#: heights and counts shared by every node), a timestamp family hardly any.
_TEXTS_KEPT = 4096


#: The text of 0 by its sign (``-0.0`` equals ``0.0``, so zeros are not kept in _Texts).
_ZEROS = {1.0: "0.0", -1.0: "-0.0"}


class _Texts(dict[float, str]):
    """The text of each non-zero value of one family, made once (equal numbers have the
    same text). Zeros are not looked up here: ``-0.0`` equals ``0.0`` but is written
    differently."""

    def __missing__(self, value: float) -> str:
        text = go_float(value)
        if len(self) < _TEXTS_KEPT:
            self[value] = text
        return text


def sample_chunks(name: str, series: Series) -> Iterator[bytes]:
    """The sample lines of ``series`` (the same in both formats), from CHUNK_LINES series
    at a time; a chunk with no sample (every value None) is not written."""
    texts = _Texts()
    items = iter(series)
    while batch := list(islice(items, CHUNK_LINES)):
        text = "".join(
            [
                f"{name}{labels} {texts[value] if value else _ZEROS[copysign(1.0, value)]}\n"
                for labels, value in batch
                if value is not None
            ]
        )
        if text:
            yield text.encode()


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


class _Render:
    """One render of one snapshot: each family's series, produced when it is written."""

    def __init__(
        self,
        snapshot: Snapshot,
        nodes: dict[str, NodeLabels],
        templates: Templates,
        values: Mapping[MetricSpec, float],
        build_labels: str = "",
    ) -> None:
        self.snapshot = snapshot
        self.nodes = nodes
        self.templates = templates
        self.values = values
        self.escapes = Escapes()  # values repeated on every node, escaped once
        self._chain_rows: list[tuple[str, ChainStatus]] | None = None
        self._gauge_table: tuple[list[str], GaugeTable] | None = None
        self.watch = _watch_series(snapshot.watch)  # few: gathered at once
        self._families: dict[MetricSpec, Callable[[], Series]] = {
            m.BUILD_INFO: lambda: ((build_labels, 1.0),),
            m.CYCLE_DURATION: lambda: (("", snapshot.cycle_duration),),
            m.CYCLE_TIMEOUT: lambda: (("", snapshot.cycle_timeout),),
            m.STATE_FILE_WRITE_FAILURES: lambda: (("", snapshot.state_file_write_failures),),
            m.CYCLE_FAILURES: self._cycle_failures,
            m.LAST_SUCCESSFUL_CYCLE: lambda: (("", snapshot.unix_time(snapshot.completed_at)),),
            m.STALE_AFTER: lambda: (
                ("", snapshot.stale_after if snapshot.completed_at is not None else None),
            ),
            m.CONFIG_RELOAD_OK: lambda: (("", _flag(snapshot.config_reload_ok)),),
            m.CONFIG_RELOAD_SUCCESS_TIME: lambda: (("", snapshot.config_reload_success_at),),
            m.DROPPED_VALUES: self._dropped,
            m.NODE_UP: lambda: self._per_node(lambda node: _flag(node.up)),
            m.NODE_SCRAPE_DURATION: lambda: self._per_node(lambda node: node.duration),
            m.NODE_SCRAPE_ERRORS: self._errors,
            m.NODE_LAST_SUCCESS: lambda: self._per_node(
                lambda node: snapshot.unix_time(node.last_success)
            ),
            m.NODE_RETRY_AFTER: lambda: self._per_node(lambda node: node.retry_afters),
            m.NODE_INFO: self._info,
            m.NODE_TLS_CERT_EXPIRY: self._cert_expiry,
            m.NODE_TLS_INFO: self._tls_info,
            m.NODE_REQUEST_DURATION: self._phases,
            **{
                m.family_of(field): functools.partial(self._per_health, attrgetter(field.attribute))
                for field in HEALTH_FIELDS
                if field.is_gauge
            },
            m.CHAIN_UP: lambda: self._per_chain(lambda chain: _flag(chain.up)),
            m.CHAIN_BLOCKS_BEHIND: lambda: self._per_read_chain(lambda c: c.blocks_behind),
            m.CHAIN_BEHIND_SECONDS: lambda: self._per_read_chain(lambda c: c.behind_seconds),
            m.CHAIN_HEIGHT_CHANGED: lambda: self._per_read_chain(
                lambda c: snapshot.unix_time(c.height_changed_at)
            ),
            m.CHAIN_CONSENSUS: self._consensus,
            m.CHAIN_FEATURE: self._features,
            m.CHAIN_VOTE_SESSION_AGE: lambda: self._followed(lambda c: c.session_age),
            m.CHAIN_VOTE_ROUND_CHANGES: lambda: self._followed(lambda c: c.round_changes),
            m.CHAIN_LEADER_FAILED_ROUNDS: self._leader_failures,
            m.CHAIN_COUNCIL_CHANGES: lambda: self._followed(lambda c: c.council_changes),
            m.CHAIN_REORGS: lambda: self._per_read_chain(lambda c: c.reorgs),
            m.NETWORK_CHECKPOINT_HEIGHT: lambda: self._network(lambda c: c.checkpoint_height),
            m.NETWORK_CHECKPOINT_HASHES: lambda: self._network(lambda c: c.checkpoint_hashes),
            m.NETWORK_COUNCIL_VIEWS: lambda: self._network(lambda c: c.council_views),
            m.NETWORK_CONSENSUS_VIEWS: lambda: self._network(lambda c: c.consensus_views),
            m.NETWORK_COUNCIL_MEMBERS_POLLED: lambda: self._network(
                lambda c: c.council_members_polled
            ),
            m.NETWORK_COUNCIL_MEMBERS_UP: lambda: self._network(lambda c: c.council_members_up),
            m.CHAIN_CHECKPOINT_AGREES: lambda: self._agreement(lambda c: c.block_agrees),
            m.CHAIN_COUNCIL_AGREES: lambda: self._agreement(lambda c: c.council_agrees),
            m.CHAIN_CONSENSUS_AGREES: lambda: self._agreement(lambda c: c.consensus_agrees),
            m.NETWORK_PEER_PARTITIONS: lambda: (("", snapshot.network.partitions),),
            m.NETWORK_PEER_LARGEST_PARTITION: lambda: (("", snapshot.network.largest_partition),),
            m.NODE_POLLED_PEERS: self._polled_peers,
            m.NODE_UNEXPECTED_BLOCKCHAINS: self._unexpected_chains,
            m.NODE_MAINTENANCE: self._node_maintenance,
            m.CHAIN_MAINTENANCE: self._chain_maintenance,
        }

    def close(self) -> None:
        """Forget the families: their functions refer back to this render, a reference cycle
        that would keep the snapshot alive until the cyclic GC's rare full collection."""
        self._families.clear()

    def series(self, spec: MetricSpec) -> Series:
        """The family's series: node by node in snapshot order, each node's chains in order."""
        family = self._families.get(spec)
        if family is not None:
            return family()
        if spec in _GAUGE_POSITIONS:
            return self._gauge(_GAUGE_POSITIONS[spec])
        if spec in self.values:
            return (("", self.values[spec]),)
        return self.watch.get(spec, ())

    def _per_node(self, value: Callable[[NodeStatus], float | None]) -> Series:
        for node in self.snapshot.nodes:
            yield self.nodes[node.name].labels, value(node)

    def _per_health(self, value: Callable[..., float | None]) -> Series:
        for node in self.snapshot.nodes:
            if node.health is not None:
                yield self.nodes[node.name].labels, value(node.health)

    def _errors(self) -> Series:
        names, escapes = ("endpoint", "reason"), self.escapes
        for node in self.snapshot.nodes:
            fill = self.nodes[node.name].filler(self.templates, names)
            for endpoint, reason, count in node.error_counts:
                yield fill(escapes[endpoint], escapes[reason]), count

    def _cycle_failures(self) -> Series:
        """Per stage, the failures caught (none before the first cycle, nor in a probe)."""
        counts = self.snapshot.cycle_failures
        if not counts:
            return
        for stage, count in zip(CycleStage, counts, strict=True):
            yield label_string((("stage", stage.value),)), float(count)

    def _dropped(self) -> Series:
        names = ("kind",)
        for node in self.snapshot.nodes:
            fill = self.nodes[node.name].filler(self.templates, names)
            for kind, count in zip(_DROP_KINDS, node.dropped, strict=False):
                yield fill(kind), count

    def _info(self) -> Series:
        names, escapes = _NODE_INFO_LABELS, self.escapes
        for node in self.snapshot.nodes:
            health = node.health
            if health is None:
                continue
            identity: tuple[str | None, ...] = _node_info(health)
            if any(part is not None for part in identity):
                values = (escapes[part or ""] for part in identity)
                yield self.nodes[node.name].filler(self.templates, names)(*values), 1.0

    def _cert_expiry(self) -> Series:
        for node in self.snapshot.nodes:
            transport = node.transport
            if node.up and transport is not None and transport.handshake is not None:
                yield self.nodes[node.name].labels, transport.handshake.expiry

    def _tls_info(self) -> Series:
        escapes = self.escapes
        for node in self.snapshot.nodes:
            transport = node.transport
            if not node.up or transport is None or transport.handshake is None:
                continue
            if transport.info_fits:
                fill = self.nodes[node.name].filler(self.templates, TLS_INFO_LABELS)
                values = transport.handshake.info_labels()
                yield fill(*(escapes[value] for value in values)), 1.0

    def _phases(self) -> Series:
        names, escapes = ("endpoint", "phase"), self.escapes
        for node in self.snapshot.nodes:
            if not node.up or node.transport is None:
                continue
            fill = self.nodes[node.name].filler(self.templates, names)
            for endpoint, phase, seconds in node.transport.phase_rows():
                yield fill(escapes[endpoint], escapes[phase]), seconds

    def _chains(self) -> list[tuple[str, ChainStatus]]:
        """(label string, chain) of every chain in snapshot order, listed at first use: ~25
        families walk them all."""
        if self._chain_rows is None:
            self._chain_rows = [
                (self.nodes[node.name].chain(chain.blockchain, self.templates), chain)
                for node in self.snapshot.nodes
                for chain in node.chains
            ]
        return self._chain_rows

    def _per_chain(self, value: Callable[[ChainStatus], float | None]) -> Series:
        return ((labels, value(chain)) for labels, chain in self._chains())

    def _gauge(self, position: int) -> Series:
        """The read chains' gauge at ``position``: the packed gauges of every read chain are
        joined once a render and read a column at a time (NaN: not reported, no sample)."""
        if self._gauge_table is None:
            read = [
                (labels, chain.reading)
                for labels, chain in self._chains()
                if chain.reading is not None
            ]
            self._gauge_table = [labels for labels, _ in read], gauge_table(r for _, r in read)
        labels, table = self._gauge_table
        column = table.column(position)
        return ((text, v) for text, v in zip(labels, column, strict=True) if not isnan(v))

    def _per_read_chain(self, value: Callable[[ChainStatus], float | None]) -> Series:
        """``value`` of every chain that was read (an unread chain has only its ``_up``)."""
        return (
            (labels, value(chain)) for labels, chain in self._chains() if chain.reading is not None
        )

    def _consensus(self) -> Series:
        names, escapes = ("blockchain", *_CHAIN_INFO_LABELS), self.escapes
        for node in self.snapshot.nodes:
            for chain in node.chains:
                reading = chain.reading
                if reading is None:
                    continue
                info: tuple[str | None, ...] = _chain_info(reading)
                if all(part is None for part in info):
                    continue
                values = (chain.blockchain, *(part or "" for part in info))
                fill = self.nodes[node.name].filler(self.templates, names)
                yield fill(*(escapes[value] for value in values)), 1.0

    def _features(self) -> Series:
        names, escapes = ("blockchain", "feature"), self.escapes
        for node in self.snapshot.nodes:
            labels = self.nodes[node.name]
            for chain in node.chains:
                if chain.reading is None or not chain.reading.features:
                    continue
                fill = labels.filler(self.templates, names, escapes[chain.blockchain])
                for feature, enabled in chain.reading.features:
                    yield fill(escapes[feature]), enabled

    def _followed(self, value: Callable[[ConsensusStatus], float | None]) -> Series:
        """``value`` of every chain followed across cycles (read this cycle, by the daemon)."""
        return ((labels, value(c.consensus)) for labels, c in self._chains() if c.consensus)

    def _leader_failures(self) -> Series:
        names, escapes = ("blockchain", "leader"), self.escapes
        for node in self.snapshot.nodes:
            labels = self.nodes[node.name]
            for chain in node.chains:
                if chain.consensus is None:
                    continue
                fill = labels.filler(self.templates, names, escapes[chain.blockchain])
                for leader, count in chain.consensus.leader_failures:
                    yield fill(escapes[leader]), count

    def _network(self, value: Callable[..., float | None]) -> Series:
        for chain in self.snapshot.network.chains:
            yield label_string((("blockchain", chain.blockchain),)), value(chain)

    def _agreement(self, of: Callable[[ChainAgreement], Agreement]) -> Series:
        for chain in self.snapshot.network.chains:
            for name, agrees in of(chain):
                if (labels := self.nodes.get(name)) is None:
                    continue  # the view names only the snapshot's nodes; never guess
                yield labels.chain(chain.blockchain, self.templates), _flag(agrees)

    def _polled_peers(self) -> Series:
        for name, linked in self.snapshot.network.polled_peers:
            if (labels := self.nodes.get(name)) is not None:
                yield labels.labels, linked

    def _unexpected_chains(self) -> Series:
        for name, count in self.snapshot.network.unexpected_chains:
            if (labels := self.nodes.get(name)) is not None:
                yield labels.labels, float(count)

    def _node_maintenance(self) -> Series:
        """1 per node entry that applies (with the node's labels), for a polled node."""
        for entry in self.snapshot.maintenance:
            if entry.node and (labels := self.nodes.get(entry.node)) is not None:
                yield labels.filler(self.templates, ("reason",))(escape(entry.reason)), 1.0

    def _chain_maintenance(self) -> Series:
        """1 per chain-wide entry that applies."""
        for entry in self.snapshot.maintenance:
            if entry.blockchain:
                pairs = (("blockchain", entry.blockchain), ("reason", entry.reason))
                yield label_string(pairs), 1.0


def _watch_series(status: WatchStatus) -> dict[MetricSpec, list[tuple[str, float | None]]]:
    """The watch-list series by family: few, so gathered at once and not cached."""
    families: dict[MetricSpec, list[tuple[str, float | None]]] = {}
    for watched in status.objects:
        for spec, labels, value in watch_samples(watched):
            families.setdefault(spec, []).append((label_string(labels.items()), value))
    return families


def text_headers(spec: MetricSpec) -> str:
    """A family's HELP and TYPE lines in the Prometheus text format 0.0.4."""
    help_text = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {spec.name} {help_text}\n# TYPE {spec.name} {spec.kind.value}\n"


def openmetrics_headers(spec: MetricSpec) -> str:
    """A family's HELP and TYPE lines in OpenMetrics 1.0 (counters named without ``_total``)."""
    name = spec.name.removesuffix("_total") if spec.kind is m.Kind.COUNTER else spec.name
    return f"# HELP {name} {escape(spec.help)}\n# TYPE {name} {spec.kind.value}\n"


class _Collected:
    """A sink that keeps the whole text in one format (/probe's answers, tests and tools)."""

    def __init__(self, openmetrics_format: bool) -> None:
        self._headers = openmetrics_headers if openmetrics_format else text_headers
        self.parts: list[bytes] = []

    def family(self, spec: MetricSpec) -> None:
        self.parts.append(self._headers(spec).encode())

    def lines(self, chunk: bytes) -> None:
        self.parts.append(chunk)


def _collect(
    renderer: Renderer,
    snapshot: Snapshot,
    openmetrics_format: bool,
    families: Sequence[MetricSpec] = m.DAEMON_FAMILIES,
    values: Mapping[MetricSpec, float] | None = None,
) -> _Collected:
    sink = _Collected(openmetrics_format)
    renderer.write(snapshot, sink, families, values)
    return sink


def text_format(
    renderer: Renderer,
    snapshot: Snapshot,
    families: Sequence[MetricSpec] = m.DAEMON_FAMILIES,
    values: Mapping[MetricSpec, float] | None = None,
) -> bytes:
    """The snapshot's ``families`` in the Prometheus text format 0.0.4."""
    return b"".join(_collect(renderer, snapshot, False, families, values).parts)


def openmetrics_format(
    renderer: Renderer,
    snapshot: Snapshot,
    families: Sequence[MetricSpec] = m.DAEMON_FAMILIES,
    values: Mapping[MetricSpec, float] | None = None,
) -> bytes:
    """The snapshot's ``families`` in OpenMetrics 1.0, without the closing ``# EOF``."""
    return b"".join(_collect(renderer, snapshot, True, families, values).parts)
