"""The nodes polled: the config's ``nodes``, those of its node files and those found in DNS,
kept up to date at run time.

:class:`NodeSources` holds the last good nodes of every source. ``check()`` re-reads a node
file whose content may have changed (its size, modification time or inode differ, which
also catches a kubelet's swap of a mounted ConfigMap's ``..data`` link) and looks up each DNS
name whose refresh is due; a reload gives it the new config with ``configure()``. Each gives
the config to poll, with every node, or None when the nodes are the same.

A source that fails keeps its last good nodes and says so once, in one log line, until it
changes: a file that does not parse or whose node names clash with another source's, a DNS
lookup that gets no answer. Node names are unique across all sources: ``nodes`` first, then
the files in name order, then the DNS entries in the config's order; a node whose name an
earlier source has is left out, and the error names both places.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from exporter.config.dns_sd import DnsSdConfig, lookup, lookup_key, node_for
from exporter.config.exporter import Config
from exporter.config.node_files import read_node_file
from exporter.config.nodes import NodeConfig
from exporter.errors import ConfigError, DnsLookupError

log = logging.getLogger("ledger_exporter")

#: What a node file looked like on disk when it was read: size, modification time, inode.
Fingerprint = tuple[int, int, int, int]
Lookup = Callable[[DnsSdConfig, str], tuple[tuple[str, ...], int]]
LookupKey = tuple[object, ...]


@dataclass
class _FileState:
    """One node file: what was read last, and the nodes last accepted from it."""

    fingerprint: Fingerprint | None = None
    read: tuple[NodeConfig, ...] | None = None  # None: the last read failed
    lines: tuple[int, ...] = ()
    problems: tuple[str, ...] = ()
    good: tuple[NodeConfig, ...] = ()
    ok: bool = True


@dataclass
class _NameState:
    """One name to look up: its last good records' targets and when it is next due."""

    entry: DnsSdConfig
    due: float
    targets: tuple[str, ...] = ()
    error: str | None = None


def _fingerprint(path: str) -> Fingerprint | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev


class NodeSources:
    """Every source of nodes of one config, and the last good nodes of each."""

    def __init__(
        self,
        config: Config,
        config_path: str | None,
        *,
        resolve: Lookup = lookup,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._config_name = config_path or "the config"
        self._resolve = resolve
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._files: dict[str, _FileState] = {}
        self._names: dict[LookupKey, _NameState] = {}
        self._nodes: tuple[NodeConfig, ...] = config.nodes
        self._problems: dict[str, str] = {}  # the last problem logged per source
        self._reported: set[str] = set()  # the sources with a problem in this merge

    @property
    def discovering(self) -> bool:
        """True when nodes come from more than the config's ``nodes``."""
        return bool(self._config.node_files or self._config.dns_sd_configs)

    def configure(self, config: Config) -> Config:
        """Take a reloaded ``config``: every node file read again, the DNS names new to it
        looked up at the next ``check()`` (the others keep their records and schedule)."""
        with self._lock:
            self._config = config
            now = self._monotonic()
            wanted = {
                lookup_key(entry, name): (entry, name)
                for entry in config.dns_sd_configs
                for name in entry.names
            }
            self._names = {key: state for key, state in self._names.items() if key in wanted}
            for key, (entry, _) in wanted.items():
                name_state = self._names.setdefault(key, _NameState(entry, due=now))
                # a shorter refresh_interval applies from now on
                name_state.due = min(name_state.due, now + entry.refresh_interval)
                name_state.entry = entry
            for file_state in self._files.values():
                file_state.fingerprint = None  # read again: relative paths may mean other files
            self._read_files()
            self._nodes = self._merge()
            return replace(config, nodes=self._nodes)

    def first(self) -> Config:
        """The config to start with: the node files read (the DNS names are looked up at
        the first ``check()``, so a slow DNS server never delays the start)."""
        return self.configure(self._config)

    def check(self) -> Config | None:
        """Re-read the node files that changed, look up the DNS names that are due; the
        config with every node when they changed, else None."""
        with self._lock:
            config = self._config
            now = self._monotonic()
            due = [(key, state.entry) for key, state in self._names.items() if state.due <= now]
        # without the lock: a lookup may wait for its server
        looked = {key: self._look_up(entry, str(key[0])) for key, entry in due}
        with self._lock:
            if config is not self._config:
                return None  # reloaded meanwhile: configure() has done the work
            for key, result in looked.items():
                self._took(key, result)
            self._read_files()
            nodes = self._merge()
            if nodes == self._nodes:
                return None
            self._nodes = nodes
            return replace(config, nodes=nodes)

    def next_due(self) -> float | None:
        """When the next DNS lookup is due (monotonic), None without DNS entries."""
        with self._lock:
            return min((state.due for state in self._names.values()), default=None)

    def file_status(self) -> tuple[tuple[str, bool], ...]:
        """Each node file matched now, with whether its last read was used."""
        with self._lock:
            return tuple((path, state.ok) for path, state in sorted(self._files.items()))

    # --- DNS -------------------------------------------------------------------------

    def _look_up(
        self, entry: DnsSdConfig, name: str
    ) -> tuple[tuple[str, ...], int] | DnsLookupError:
        try:
            return self._resolve(entry, name)
        except DnsLookupError as error:
            return error

    def _took(
        self,
        key: LookupKey,
        result: tuple[tuple[str, ...], int] | DnsLookupError,
    ) -> None:
        state = self._names.get(key)
        if state is None:
            return  # no longer configured
        entry, name = state.entry, str(key[0])
        state.due = self._monotonic() + entry.refresh_interval
        fields = {"name": name, "type": entry.type}
        if isinstance(result, DnsLookupError):
            if state.error != str(result):
                log.error(
                    "DNS lookup failed, keeping the records it last got",
                    extra={"fields": {**fields, "error": str(result), "nodes": len(state.targets)}},
                )
            state.error = str(result)
            return
        targets, left_out = result
        if left_out:
            log.warning(
                "DNS answer has more records than max_nodes; the rest are left out",
                extra={"fields": {**fields, "max_nodes": entry.max_nodes, "left_out": left_out}},
            )
        if state.error is not None or targets != state.targets:
            log.info("DNS records read", extra={"fields": {**fields, "nodes": len(targets)}})
        state.error = None
        state.targets = targets

    # --- node files -----------------------------------------------------------------

    def _read_files(self) -> None:
        """Read every matching file whose fingerprint changed; forget vanished ones."""
        longest = self._config.bounds.label_value_length
        paths = self._config.node_file_paths()
        for gone in self._files.keys() - set(paths):
            log.info(
                "node file gone, its nodes removed",
                extra={"fields": {"file": gone, "nodes": len(self._files[gone].good)}},
            )
            del self._files[gone]
            self._problems.pop(gone, None)
        for path in paths:
            state = self._files.setdefault(path, _FileState())
            fingerprint = _fingerprint(path)
            if fingerprint is not None and fingerprint == state.fingerprint:
                continue
            state.fingerprint = fingerprint
            try:
                nodes, lines = read_node_file(path, longest)
            except ConfigError as error:
                state.read, state.lines, state.problems = None, (), tuple(error.problems)
                continue
            state.read, state.lines, state.problems = nodes, tuple(lines), ()

    def _merge(self) -> tuple[NodeConfig, ...]:
        """Every source's nodes, each name once (the first source wins); a file whose new
        nodes clash keeps its last good ones. Logs each source's new problem once."""
        taken: dict[str, str] = {
            node.name: f"{self._config_name} nodes[{index}]"
            for index, node in enumerate(self._config.nodes)
        }
        merged = list(self._config.nodes)
        self._reported = set()
        for path, state in sorted(self._files.items()):
            problems = list(state.problems)
            if state.read is not None:
                clashes = [
                    f"line {line}: [{index}].name: node '{node.name}' is also defined in"
                    f" {taken[node.name]}"
                    for index, (node, line) in enumerate(zip(state.read, state.lines, strict=True))
                    if node.name in taken
                ]
                if not clashes and (state.read != state.good or not state.ok):
                    state.good = state.read
                    log.info(
                        "node file read", extra={"fields": {"file": path, "nodes": len(state.good)}}
                    )
                problems += clashes
            state.ok = not problems
            if problems:
                self._report(
                    path,
                    "node file not used, keeping its last good nodes",
                    {"file": path, "problems": "; ".join(problems), "nodes": len(state.good)},
                )
            for index, node in enumerate(state.good):
                if node.name not in taken:
                    taken[node.name] = f"{path} [{index}]"
                    merged.append(node)
        for entry_index, entry in enumerate(self._config.dns_sd_configs):
            where = f"{self._config_name} dns_sd_configs[{entry_index}]"
            for name in entry.names:
                state_of_name = self._names.get(lookup_key(entry, name))
                targets = state_of_name.targets if state_of_name is not None else ()
                for node in (node_for(entry, target) for target in targets):
                    if node.name in taken:
                        also = f"node '{node.name}' is also defined in {taken[node.name]}"
                        self._report(
                            f"{where} {node.name}",
                            "discovered node left out: its name is taken",
                            {"source": where, "name": name, "problems": also},
                        )
                        continue
                    taken[node.name] = f"{where} ({name})"
                    merged.append(node)
        for key in self._problems.keys() - self._reported:
            del self._problems[key]  # solved: a new problem is logged again
        return tuple(merged)

    def _report(self, key: str, message: str, fields: dict[str, object]) -> None:
        """Log an error once for as long as ``key``'s problems stay the same."""
        said = str(fields.get("problems", ""))
        self._reported.add(key)
        if self._problems.get(key) == said:
            return
        self._problems[key] = said
        log.error(message, extra={"fields": fields})
