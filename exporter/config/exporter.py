"""The exporter's YAML configuration: loaded, validated whole, and frozen.

Like blackbox_exporter, unknown keys are refused and every problem is reported at once with
its key path and line, so an operator fixes the file in one pass. Secrets are read from the
file itself, from files, or from environment variables, and never appear in a repr, a log or a
problem: the node settings' reader (:mod:`exporter.config.nodes`) names their positions and
the problem helpers refuse to show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exporter.bounds import (
    DEFAULT_MAX_AUTH_GROUPS_PER_WALLET,
    DEFAULT_MAX_FEATURES_PER_CHAIN,
    DEFAULT_MAX_LABEL_VALUE_LENGTH,
    DEFAULT_MAX_LEADERS_PER_CHAIN,
    DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN,
    MAX_TEXT_CHARS,
    Bounds,
)
from exporter.config.nodes import NodeConfig, is_secret, is_secret_key, read_node
from exporter.config.probe_modules import ProbeConfig, read_probe
from exporter.config.schema import Reader, checking, locate, read_document
from exporter.config.watchlist import WatchConfig, read_watch
from exporter.config.yamlsource import Path
from exporter.errors import ConfigError

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Chains polled per node when its /health lists more (a listing gone wrong must not flood
#: the shared pool and starve the other nodes); configured `blockchains` are not capped.
DEFAULT_MAX_BLOCKCHAINS_PER_NODE = 100
#: Sane ranges: a poll at least every hour (else Prometheus sees stale data between polls)
#: and not more than ten times a second; a timeout long enough for one round trip.
INTERVAL_BOUNDS = ("100ms", 0.1, "1h", 3600.0)
TIMEOUT_BOUNDS = ("10ms", 0.01, "1h", 3600.0)
_SIZE = re.compile(r"(\d{1,15})\s*(B|KiB|MiB|GiB)?", re.ASCII)
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_TOP_KEYS = (
    "scrape_interval",
    "scrape_timeout",
    "max_concurrency",
    "max_response_bytes",
    "max_blockchains_per_node",
    "max_features_per_chain",
    "max_auth_groups_per_wallet",
    "max_label_value_length",
    "max_vote_sessions_per_chain",
    "max_leaders_per_chain",
    "network_checks",
    "nodes",
    "probe",
    "watch",
)
DEFAULT_BLOCK_HASH_FIELDS = ("hash", "blockHash")


@dataclass(frozen=True)
class NetworkChecks:
    """Cross-node checks: how deep below the majority's head block hashes are compared (0: no
    block requests) and which block fields may hold the hash, first present wins."""

    checkpoint_depth: int = 5
    block_hash_fields: tuple[str, ...] = DEFAULT_BLOCK_HASH_FIELDS


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    nodes: tuple[NodeConfig, ...]
    scrape_interval: float = 15.0
    scrape_timeout: float = 10.0
    max_concurrency: int = 512
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_blockchains_per_node: int = DEFAULT_MAX_BLOCKCHAINS_PER_NODE
    network_checks: NetworkChecks = NetworkChecks()
    probe: ProbeConfig | None = None  # /probe is served only when set
    watch: WatchConfig = field(default_factory=WatchConfig)
    max_features_per_chain: int = DEFAULT_MAX_FEATURES_PER_CHAIN
    max_auth_groups_per_wallet: int = DEFAULT_MAX_AUTH_GROUPS_PER_WALLET
    max_label_value_length: int = DEFAULT_MAX_LABEL_VALUE_LENGTH
    max_vote_sessions_per_chain: int = DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN
    max_leaders_per_chain: int = DEFAULT_MAX_LEADERS_PER_CHAIN

    @property
    def bounds(self) -> Bounds:
        """The cardinality bounds the readers apply to every node's answers."""
        return Bounds(
            self.max_features_per_chain,
            self.max_auth_groups_per_wallet,
            self.max_label_value_length,
            self.max_vote_sessions_per_chain,
            self.max_leaders_per_chain,
        )


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
        top = self.mapping(data, (), _TOP_KEYS, required=() if probing else ("nodes",))
        interval = self.duration(top, "scrape_interval", (), 15.0, INTERVAL_BOUNDS)
        timeout = self.duration(top, "scrape_timeout", (), min(10.0, interval), TIMEOUT_BOUNDS)
        if timeout > interval:
            self.problem(("scrape_timeout",), "must not be longer than scrape_interval")
        concurrency = self.positive_int(top.get("max_concurrency", 512), ("max_concurrency",))
        max_bytes = self.size(top.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES))
        chains = self.positive_int(
            top.get("max_blockchains_per_node", DEFAULT_MAX_BLOCKCHAINS_PER_NODE),
            ("max_blockchains_per_node",),
        )
        bounds = self.bounds(top)
        nodes = self.nodes(top.get("nodes")) if top.get("nodes") or not probing else ()
        checks = self.network_checks(top.get("network_checks"))
        probe = read_probe(self, top["probe"]) if "probe" in top else None
        names = frozenset(node.name for node in nodes if node.name)
        watch = read_watch(self, top.get("watch"), names)
        return Config(
            nodes,
            interval,
            timeout,
            concurrency,
            max_bytes,
            chains,
            network_checks=checks,
            probe=probe,
            watch=watch,
            max_features_per_chain=bounds.features_per_chain,
            max_auth_groups_per_wallet=bounds.auth_groups_per_wallet,
            max_label_value_length=bounds.label_value_length,
            max_vote_sessions_per_chain=bounds.vote_sessions_per_chain,
            max_leaders_per_chain=bounds.leaders_per_chain,
        )

    def bounds(self, top: dict[str, Any]) -> Bounds:
        """The cardinality bounds: whole numbers of at least 1, a label value at most
        MAX_TEXT_CHARS (the longest string the exporter keeps from a node)."""
        features = top.get("max_features_per_chain", DEFAULT_MAX_FEATURES_PER_CHAIN)
        groups = top.get("max_auth_groups_per_wallet", DEFAULT_MAX_AUTH_GROUPS_PER_WALLET)
        length = top.get("max_label_value_length", DEFAULT_MAX_LABEL_VALUE_LENGTH)
        if isinstance(length, bool) or not isinstance(length, int):
            length = 0  # refused below, as any number out of range
        if not 1 <= length <= MAX_TEXT_CHARS:
            path = ("max_label_value_length",)
            shown = self.instead(path, top["max_label_value_length"])
            self.problem(path, f"must be a whole number from 1 to {MAX_TEXT_CHARS}{shown}")
            length = DEFAULT_MAX_LABEL_VALUE_LENGTH
        sessions = top.get("max_vote_sessions_per_chain", DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN)
        leaders = top.get("max_leaders_per_chain", DEFAULT_MAX_LEADERS_PER_CHAIN)
        return Bounds(
            self.positive_int(features, ("max_features_per_chain",)),
            self.positive_int(groups, ("max_auth_groups_per_wallet",)),
            length,
            self.positive_int(sessions, ("max_vote_sessions_per_chain",)),
            self.positive_int(leaders, ("max_leaders_per_chain",)),
        )

    def network_checks(self, value: Any) -> NetworkChecks:
        if value is None:
            return NetworkChecks()
        path: Path = ("network_checks",)
        data = self.mapping(value, path, ("checkpoint_depth", "block_hash_fields"))
        depth = data.get("checkpoint_depth", 5)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            where = (*path, "checkpoint_depth")
            self.problem(where, f"must be a whole number >= 0{self.instead(where, depth)}")
            depth = 5
        fields = data.get("block_hash_fields", list(DEFAULT_BLOCK_HASH_FIELDS))
        if not isinstance(fields, list) or not fields:
            self.problem((*path, "block_hash_fields"), "must be a non-empty list of field names")
            fields = list(DEFAULT_BLOCK_HASH_FIELDS)
        names = [
            self.string(item, (*path, "block_hash_fields", i)) for i, item in enumerate(fields)
        ]
        if len(set(names)) != len(names):
            self.problem((*path, "block_hash_fields"), "lists a field more than once")
        return NetworkChecks(depth, tuple(dict.fromkeys(n for n in names if n)))

    def size(self, value: Any) -> int:
        match = _SIZE.fullmatch(value) if isinstance(value, str) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if match and int(match.group(1)) > 0:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2)]
        self.problem(
            ("max_response_bytes",),
            "must be a positive size such as 8MiB or 1048576"
            + self.instead(("max_response_bytes",), value),
        )
        return DEFAULT_MAX_RESPONSE_BYTES

    def nodes(self, value: Any) -> tuple[NodeConfig, ...]:
        if not isinstance(value, list) or not value:
            self.problem(("nodes",), "must be a non-empty list of nodes")
            return ()
        nodes = tuple(read_node(self, item, ("nodes", index)) for index, item in enumerate(value))
        seen: set[str] = set()
        for index, node in enumerate(nodes):
            if node.name and node.name in seen:
                where = ("nodes", index, "name")
                self.problem(where, f"duplicate node name {self.quote(where, node.name)}")
            seen.add(node.name)
        return nodes
