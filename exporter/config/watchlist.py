"""The ``watch`` section of the config: contracts and wallets read from the nodes each cycle.

Validated like the rest of the file (unknown keys refused, every problem with its key path
and line): a ``nodes`` entry must name a configured node, and two entries of one kind on one
chain must not share a label (``name``, defaulting to the address), or their series would
collide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.config.schema import Reader
from exporter.config.yamlsource import Path

_CONTRACT_KEYS = ("blockchain", "address", "name", "state_keys", "nodes")
_WALLET_KEYS = ("blockchain", "address", "name", "nodes")
#: Labels the watch series set themselves: a node's static labels must not use them.
WATCH_LABELS = frozenset(
    {"contract", "wallet", "status", "address", "vm_type", "code_hash", "key", "group"}
    | {"permission", "public_key"}
)


@dataclass(frozen=True)
class WatchedContract:
    """A contract read with endpoints 6 and 7; ``name`` is its ``contract`` label and
    ``nodes`` None means every node whose /health lists the chain."""

    blockchain: str
    address: str
    name: str
    state_keys: tuple[str, ...] = ()
    nodes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WatchedWallet:
    """A wallet read with endpoint 9; ``name`` is its ``wallet`` label."""

    blockchain: str
    address: str
    name: str
    nodes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WatchConfig:
    """Every watched contract and wallet, in the order of the file."""

    contracts: tuple[WatchedContract, ...] = ()
    wallets: tuple[WatchedWallet, ...] = ()


def read_watch(reader: Reader, value: Any, node_names: frozenset[str]) -> WatchConfig:
    """Validate the ``watch`` section (None: no watch list); problems go to ``reader``."""
    if value is None:
        return WatchConfig()
    return _WatchReader(reader, node_names).section(value)


class _WatchReader:
    """Reads the entries of ``watch.contracts`` and ``watch.wallets``."""

    def __init__(self, reader: Reader, node_names: frozenset[str]) -> None:
        self.reader = reader
        self.node_names = node_names

    def section(self, value: Any) -> WatchConfig:
        data = self.reader.mapping(value, ("watch",), ("contracts", "wallets"))
        contracts = tuple(
            self.contract(item, path) for item, path in self.entries(data, "contracts")
        )
        wallets = tuple(self.wallet(item, path) for item, path in self.entries(data, "wallets"))
        self.unique(contracts, "contracts")
        self.unique(wallets, "wallets")
        return WatchConfig(contracts, wallets)

    def entries(self, data: dict[str, Any], kind: str) -> list[tuple[Any, Path]]:
        value = data.get(kind, [])
        if not isinstance(value, list):
            self.reader.problem(("watch", kind), "must be a list of entries")
            return []
        return [(item, ("watch", kind, index)) for index, item in enumerate(value)]

    def contract(self, value: Any, path: Path) -> WatchedContract:
        data = self.reader.mapping(value, path, _CONTRACT_KEYS, required=("blockchain", "address"))
        blockchain, address, name = self.identity(data, path)
        keys = self.state_keys(data.get("state_keys"), (*path, "state_keys"))
        nodes = self.nodes(data.get("nodes"), (*path, "nodes"))
        return WatchedContract(blockchain, address, name, keys, nodes)

    def wallet(self, value: Any, path: Path) -> WatchedWallet:
        data = self.reader.mapping(value, path, _WALLET_KEYS, required=("blockchain", "address"))
        blockchain, address, name = self.identity(data, path)
        nodes = self.nodes(data.get("nodes"), (*path, "nodes"))
        return WatchedWallet(blockchain, address, name, nodes)

    def identity(self, data: dict[str, Any], path: Path) -> tuple[str, str, str]:
        """``blockchain``, ``address`` and the label name (the address unless ``name``)."""
        blockchain = self.optional_string(data, "blockchain", path)
        address = self.optional_string(data, "address", path)
        name = self.optional_string(data, "name", path) if "name" in data else address
        return blockchain, address, name

    def optional_string(self, data: dict[str, Any], key: str, path: Path) -> str:
        return self.reader.string(data[key], (*path, key)) if key in data else ""

    def state_keys(self, value: Any, path: Path) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value:
            self.reader.problem(path, "must be a non-empty list of dotted paths such as a.b")
            return ()
        keys = []
        for index, item in enumerate(value):
            key = self.reader.string(item, (*path, index))
            if key and "" in key.split("."):
                where = (*path, index)
                self.reader.problem(
                    where, f"{self.reader.quote(where, key)} has an empty part; use a.b.c"
                )
            elif key:
                keys.append(key)
        if len(set(keys)) != len(keys):
            self.reader.problem(path, "lists a key more than once")
        return tuple(dict.fromkeys(keys))

    def nodes(self, value: Any, path: Path) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.reader.problem(path, "must be a non-empty list of node names (or left out)")
            return None
        names = []
        for index, item in enumerate(value):
            name = self.reader.string(item, (*path, index))
            if name and name not in self.node_names:
                where = (*path, index)
                self.reader.problem(
                    where, f"names no configured node: {self.reader.quote(where, name)}"
                )
            names.append(name)
        if len(set(names)) != len(names):
            self.reader.problem(path, "lists a node more than once")
        return tuple(dict.fromkeys(name for name in names if name))

    def unique(self, entries: Sequence[WatchedContract | WatchedWallet], kind: str) -> None:
        """Two entries of one kind with one label on one chain would give colliding series."""
        label = "contract" if kind == "contracts" else "wallet"
        seen: set[tuple[str, str]] = set()
        for index, entry in enumerate(entries):
            key = (entry.blockchain, entry.name)
            if entry.name and key in seen:
                where = ("watch", kind, index, "name" if entry.name != entry.address else "address")
                name = self.reader.quote(where, entry.name)
                chain = self.reader.quote(("watch", kind, index, "blockchain"), entry.blockchain)
                self.reader.problem(
                    where,
                    f"duplicate {label} {name} on blockchain {chain}; give each entry its own name",
                )
            seen.add(key)
