"""The exporter's YAML configuration: loaded, validated whole, and frozen.

Like blackbox_exporter, unknown keys are refused and every problem is reported at once with
its key path and line, so an operator fixes the file in one pass. Secrets are read from the
file itself, from files, or from environment variables, and never appear in a repr, a log or a
problem: the node settings' reader (:mod:`exporter.config.nodes`) names their positions and
the problem helpers refuse to show them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from exporter.bounds import DEFAULT_BOUNDS, Bounds
from exporter.config.dns_sd import DnsSdConfig, read_dns_sd_configs
from exporter.config.keytable import (
    Duration,
    Names,
    Size,
    Whole,
    bound_keys,
    key_names,
    read_bounds,
    read_settings,
    setting,
)
from exporter.config.maintenance import MaintenanceEntry, read_maintenance
from exporter.config.node_files import matching_files, node_file_names
from exporter.config.nodes import (
    Expectation,
    NodeConfig,
    check_pinned_chains,
    is_secret,
    is_secret_key,
    read_node_list,
)
from exporter.config.probe_modules import ProbeConfig, read_probe
from exporter.config.schema import Reader, checking, locate, read_document
from exporter.config.watchlist import WatchConfig, read_watch
from exporter.config.yamlsource import Path
from exporter.errors import ConfigError


@dataclass(frozen=True)
class NetworkChecks:
    """Cross-node checks: how deep below the majority's head block hashes are compared (0: no
    block requests) and which block fields may hold the hash, first present wins."""

    checkpoint_depth: int = setting(
        5,
        Whole(0),
        "compare block hashes this many blocks below the height a strict majority of the up,"
        " not-syncing nodes have reached (a stalled node cannot hide a fork among the others);"
        " one block request per node and chain per cycle; `0` turns block requests off",
    )
    block_hash_fields: tuple[str, ...] = setting(
        ("hash", "blockHash"),
        Names(),
        "block fields that may hold its hash; the first holding a string wins",
    )


@dataclass(frozen=True)
class Config:
    """The whole validated configuration: the plain keys are declared by their fields here
    (:func:`exporter.config.keytable.setting`), the cardinality bounds by :class:`Bounds`."""

    nodes: tuple[NodeConfig, ...]
    # Sane ranges: a poll at least every hour (else Prometheus sees stale data between
    # polls) and not more than ten times a second; a timeout long enough for one round trip.
    scrape_interval: float = setting(
        15.0, Duration(0.1, 3600.0), "how often every node is polled (Go duration)"
    )
    scrape_timeout: float = setting(
        10.0,
        Duration(0.01, 3600.0),
        "deadline of one polling cycle: every request of the cycle ends by then, so a slow"
        " node never delays the others (a late node is reported with what it has); not"
        " longer than `scrape_interval`",
        shown="`10s` (at most `scrape_interval`)",
    )
    max_concurrency: int = setting(
        512,
        Whole(1),
        "requests in flight at once, across all nodes and chains (each is a socket on the one"
        " polling thread, not a thread); one node at most a sixteenth of them (at least 4)."
        " Raise it for slow nodes ([Performance](performance.md))",
    )
    max_response_bytes: int = setting(
        8 * 1024 * 1024,
        Size(),
        'a body larger than this is refused unread past the cap (`reason="too_large"`);'
        " bytes, or `B`, `KiB`, `MiB`, `GiB`",
    )
    #: Chains polled per node when its /health lists more (a listing gone wrong must not
    #: flood the shared pool and starve the other nodes); configured `blockchains` are not.
    max_blockchains_per_node: int = setting(
        100,
        Whole(1),
        "chains polled per node when its `/health` lists more (the first ones in the node's"
        " order; a warning is logged), so one node's runaway listing cannot crowd out the"
        " others; a node's `blockchains` list is not capped; the chains left out are counted"
        ' in `ledger_exporter_dropped_values_total{kind="blockchain"}`',
    )
    network_checks: NetworkChecks = NetworkChecks()
    probe: ProbeConfig | None = None  # /probe is served only when set
    watch: WatchConfig = field(default_factory=WatchConfig)
    #: Planned work: nodes and chains in maintenance until a wall-clock time.
    maintenance: tuple[MaintenanceEntry, ...] = ()
    #: The cardinality bounds the readers apply to every node's answers (their keys are
    #: top-level keys: max_features_per_chain, ...).
    bounds: Bounds = DEFAULT_BOUNDS
    #: Globs of node files (absolute: relative ones are made so from the config's folder),
    #: each a list of node entries; read and followed at run time, beside ``nodes``.
    node_files: tuple[str, ...] = ()
    #: Nodes found in DNS, one per record, looked up at run time.
    dns_sd_configs: tuple[DnsSdConfig, ...] = ()

    def node_file_paths(self) -> tuple[str, ...]:
        """The node files the ``node_files`` globs match now, sorted (listed afresh at each
        call, so a new file is seen and a removed one is not)."""
        return tuple(matching_files(self.node_files))

    def watched_paths(self) -> tuple[str, ...]:
        """Every file this config was read from besides the config file itself (the nodes'
        and probe modules' credential, CA, certificate and key files), in the config's
        order: what ``--config.auto-reload-interval`` follows on disk
        (:mod:`exporter.config.follow`). A section that reads other files adds them here."""
        modules = self.probe.modules if self.probe is not None else ()
        return (
            *(path for node in self.nodes for path in node.watched_paths()),
            *(path for _, module in modules for path in module.watched_paths()),
        )


#: The sections of the file that are more than a value, read by their own code.
_SECTIONS = (
    "network_checks",
    "nodes",
    "node_files",
    "dns_sd_configs",
    "probe",
    "watch",
    "maintenance",
)
_TOP_KEYS = (
    *key_names(Config),
    *(item.name for _, item in bound_keys()),
    *_SECTIONS,
)
_NETWORK_CHECKS_KEYS = key_names(NetworkChecks)


def load_config(path: str) -> Config:
    """Read and validate the config file at ``path``; raises ConfigError listing every problem."""
    return parse_config(*read_document(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate YAML text into a Config; raises ConfigError listing every problem."""
    reader = _Reader(locate(text, source), None if source == "<config>" else source)
    with checking(source):
        config = reader.config()
    if reader.problems or config is None:
        raise ConfigError(source, reader.problems)
    return config


class _Reader(Reader):
    """Reads the exporter's config document."""

    def secret(self, path: Path) -> bool:
        return is_secret(path)

    def secret_key(self, path: Path) -> bool:
        return is_secret_key(path)

    def config(self) -> Config | None:
        data = self.located.data
        if data is None:
            self.problem((), "the config is empty; it needs at least a 'nodes' list")
            return None
        probing = isinstance(data, dict) and "probe" in data  # then `nodes` may be left out
        # nodes from files or DNS: `nodes` may be left out (or empty) too
        discovering = isinstance(data, dict) and bool(
            data.get("node_files") or data.get("dns_sd_configs")
        )
        optional = probing or discovering
        top = self.mapping(data, (), _TOP_KEYS, required=() if optional else ("nodes",))
        refused: set[str] = set()
        plain = read_settings(self, top, Config, (), refused)
        if "scrape_timeout" not in top or refused & {"scrape_timeout", "scrape_interval"}:
            # the default (or a refused value's stand-in), cut to a shorter interval
            plain["scrape_timeout"] = min(plain["scrape_timeout"], plain["scrape_interval"])
        if plain["scrape_timeout"] > plain["scrape_interval"]:
            self.problem(("scrape_timeout",), "must not be longer than scrape_interval")
        bounds = read_bounds(self, top, ())
        nodes = self.nodes(top.get("nodes"), discovering) if top.get("nodes") or not probing else ()
        node_files = self.node_files(top.get("node_files"))
        dns_sd_configs = read_dns_sd_configs(self, top.get("dns_sd_configs"))
        checks = self.network_checks(top.get("network_checks"))
        probe = read_probe(self, top["probe"]) if "probe" in top else None
        self.expected_chains(nodes, probe, bounds)
        # watch and maintenance may name the nodes of the node files readable now
        names = frozenset(node.name for node in nodes if node.name)
        names |= node_file_names(node_files, bounds.label_value_length)
        watch = read_watch(self, top.get("watch"), names)
        longest = bounds.label_value_length
        maintenance = read_maintenance(self, top.get("maintenance"), names, longest)
        return Config(
            nodes,
            network_checks=checks,
            probe=probe,
            watch=watch,
            maintenance=maintenance,
            bounds=bounds,
            node_files=node_files,
            dns_sd_configs=dns_sd_configs,
            **plain,
        )

    def expected_chains(
        self, nodes: tuple[NodeConfig, ...], probe: ProbeConfig | None, bounds: Bounds
    ) -> None:
        """Expected chain ids the exporter could never read (:func:`check_pinned_chains`)."""
        pinned: list[tuple[Path, Expectation | None]] = [
            (("nodes", index, "expect", "blockchains"), node.expect)
            for index, node in enumerate(nodes)
        ]
        for name, module in probe.modules if probe is not None else ():
            pinned.append((("probe", "modules", name, "expect", "blockchains"), module.expect))
        check_pinned_chains(self, pinned, bounds.label_value_length)

    def network_checks(self, value: Any) -> NetworkChecks:
        if value is None:
            return NetworkChecks()
        path: Path = ("network_checks",)
        data = self.mapping(value, path, _NETWORK_CHECKS_KEYS)
        return NetworkChecks(**read_settings(self, data, NetworkChecks, path))

    def node_files(self, value: Any) -> tuple[str, ...]:
        """``node_files``: globs, made absolute from the config file's folder."""
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problem(("node_files",), "must be a list of file names or globs (*.yml)")
            return ()
        patterns = []
        for index, item in enumerate(value):
            pattern = self.string(item, ("node_files", index))
            if pattern:
                patterns.append(os.path.abspath(self.resolve(pattern)))
        if len(set(patterns)) != len(patterns):
            self.problem(("node_files",), "lists a file or glob more than once")
        return tuple(dict.fromkeys(patterns))

    def nodes(self, value: Any, discovering: bool) -> tuple[NodeConfig, ...]:
        """``nodes``: a non-empty list, or (when nodes are discovered too) empty or left out."""
        if discovering and value in (None, []):
            return ()
        if not isinstance(value, list) or not value:
            self.problem(("nodes",), "must be a non-empty list of nodes")
            return ()
        return read_node_list(self, value, ("nodes",))
