"""Faults that can be switched on and off per node, and optionally per chain, while running."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ledger_simulator.errors import SimulatorError
from ledger_simulator.ids import DurationError, iso_utc, parse_go_duration
from ledger_simulator.topology import Topology

FAULTS = (
    "stall",
    "peers_lost",
    "syncing",
    "down",
    "slow",
    "http_500",
    "malformed_json",
    "fork",
    "other_council",
    "partition",
    "contract_paused",
    "contract_upgraded",
    "wallet_disabled",
)
#: Faults that only make sense for a whole node (a partition cuts peer links, not chains).
NODE_WIDE_ONLY = frozenset({"partition"})
#: Faults on watched objects: they apply to one contract or wallet address (the ``target``) or,
#: without one, to every contract or wallet of the chain; the node may be ``*``: every node.
OBJECT_FAULTS = frozenset({"contract_paused", "contract_upgraded", "wallet_disabled"})
ALL_NODES = "*"
DEFAULT_SLOW_SECONDS = 5.0
#: The addresses an object fault may name: (fault, chain index or None for every chain) ->
#: lower-case addresses.
TargetAddresses = Callable[[str, "int | None"], Collection[str]]


class FaultError(SimulatorError, ValueError):
    """A fault request names an unknown fault, node or chain, or has a bad delay."""


@dataclass(frozen=True)
class FaultKey:
    """One switchable fault: a node (or ``*`` for an object fault), a fault name, ``None``
    (whole node) or a chain id, and for an object fault the address it applies to (``None``:
    all)."""

    node: str
    fault: str
    chain: str | None
    target: str | None = None


@dataclass(frozen=True)
class FaultState:
    """When a fault was switched on (clock time), for ``slow`` its delay and for ``fork``
    the first height whose block differs (``None``: the first block after ``since``)."""

    since: float
    delay_seconds: float
    height: int | None = None


@dataclass
class ActiveFaults:
    """The faults in force for one node (and chain): node-wide ones merged with the chain's."""

    stall_since: float | None = None
    peers_lost: bool = False
    syncing: bool = False
    down: bool = False
    slow_seconds: float = 0.0
    http_500: bool = False
    malformed_json: bool = False
    fork: FaultState | None = None
    fork_per_chain: bool = False
    other_council: bool = False
    partition: bool = False
    names: set[str] = field(default_factory=set)
    objects: dict[str, set[str | None]] = field(default_factory=dict)

    def add(
        self, fault: str, state: FaultState, target: str | None = None, per_chain: bool = False
    ) -> None:
        """Merge one fault in force node-wide or (``per_chain``) for the chain. Both at once:
        a stall keeps the earlier freeze, slow the longer delay, and fork the chain's own
        (its height), whatever the order they were switched on in."""
        self.names.add(fault)
        if fault in OBJECT_FAULTS:
            self.objects.setdefault(fault, set()).add(target)
        elif fault == "stall":
            since = self.stall_since
            self.stall_since = state.since if since is None else min(since, state.since)
        elif fault == "fork":
            if self.fork is None or (per_chain and not self.fork_per_chain):
                self.fork, self.fork_per_chain = state, per_chain
        elif fault == "slow":
            self.slow_seconds = max(self.slow_seconds, state.delay_seconds)
        else:
            setattr(self, fault, True)

    def on_object(self, fault: str, address: str) -> bool:
        """Whether object fault ``fault`` is in force for ``address`` (or all addresses)."""
        targets = self.objects.get(fault, set())
        return None in targets or address.lower() in targets


class FaultRegistry:
    """Thread-safe table of the faults in force; validated against the topology and, when
    ``targets`` is given, an object fault's address against the addresses that exist."""

    def __init__(self, topology: Topology, targets: TargetAddresses | None = None) -> None:
        self._topology = topology
        self._targets = targets
        self._lock = threading.Lock()
        self._faults: dict[FaultKey, FaultState] = {}

    def set(
        self,
        node: str,
        fault: str,
        enabled: bool,
        *,
        chain: str | None,
        delay_seconds: float,
        now: float,
        height: int | None = None,
        target: str | None = None,
    ) -> bool:
        """Switch a fault on or off; return whether anything changed. ``target``: the
        address an object fault applies to (None: every contract or wallet of the chain)."""
        key = self.validate(node, fault, chain, target)
        if delay_seconds < 0:
            raise FaultError(f"delay_seconds must be >= 0, got {delay_seconds}")
        if height is not None and (fault != "fork" or height < 0):
            raise FaultError(f"height is for fork only and must be >= 0, got {height}")
        delay = (delay_seconds or DEFAULT_SLOW_SECONDS) if fault == "slow" else 0.0
        with self._lock:
            if not enabled:
                return self._faults.pop(key, None) is not None
            previous = self._faults.get(key)
            since = previous.since if previous is not None else now
            state = FaultState(since, delay, height)
            self._faults[key] = state
            return previous != state

    def validate(
        self, node: str, fault: str, chain: str | None, target: str | None = None
    ) -> FaultKey:
        """Check names against the topology; FaultError says what is accepted."""
        if fault not in FAULTS:
            raise FaultError(f"unknown fault {fault!r}; choose one of: {', '.join(FAULTS)}")
        if (target is not None or node == ALL_NODES) and fault not in OBJECT_FAULTS:
            objects = ", ".join(sorted(OBJECT_FAULTS))
            raise FaultError(f"a target address and node '*' are for {objects} only")
        if target is not None and not target:
            raise FaultError("the target address must not be empty")
        try:
            if node != ALL_NODES:
                self._topology.node_index(node)
            chain_index = None if chain is None else self._topology.chain_index(chain)
        except SimulatorError as error:
            raise FaultError(str(error)) from None
        if chain is not None and fault in NODE_WIDE_ONLY:
            raise FaultError(f"{fault} applies to a whole node; switch it without a chain")
        if target is not None and self._targets is not None:
            known = self._targets(fault, chain_index)
            check_target(known, fault, chain, target.lower())
        return FaultKey(node, fault, chain, target.lower() if target else None)

    def active(self, node: str, chain: str | None = None) -> ActiveFaults:
        """Faults in force for ``node`` (node-wide, or set for every node) plus, if given,
        those of ``chain``."""
        result = ActiveFaults()
        with self._lock:
            items = list(self._faults.items())
        for key, state in items:
            if key.node in (node, ALL_NODES) and key.chain in (None, chain):
                result.add(key.fault, state, key.target, per_chain=key.chain is not None)
        return result

    def node_wide(self, node: str, fault: str) -> bool:
        """Whether ``fault`` is on for the whole of ``node``."""
        with self._lock:
            return FaultKey(node, fault, None) in self._faults

    def listing(self) -> list[dict[str, Any]]:
        """The faults in force as JSON-ready dicts, sorted for stable output."""
        with self._lock:
            items = sorted(
                self._faults.items(),
                key=lambda kv: (kv[0].node, kv[0].fault, kv[0].chain or "", kv[0].target or ""),
            )
        return [
            {
                "node": key.node,
                "fault": key.fault,
                "chain": key.chain,
                "target": key.target,
                "delay_seconds": state.delay_seconds,
                "height": state.height,
                "since": iso_utc(state.since),
            }
            for key, state in items
        ]


def check_target(known: Collection[str], fault: str, chain: str | None, target: str) -> None:
    """Refuse an address no contract or wallet has: a fault on it would change nothing."""
    if target in known:
        return
    kind = "wallet" if fault == "wallet_disabled" else "contract"
    where = f" on blockchain {chain}" if chain is not None and kind == "contract" else ""
    raise FaultError(
        f"no {kind} has the address {target!r}{where}; GET /-/sim/blockchains lists them"
    )


@dataclass(frozen=True)
class FaultSpec:
    """A fault given on the command line: ``NODE:FAULT[=VALUE][:CHAIN]``."""

    node: str
    fault: str
    chain: str | None
    delay_seconds: float
    height: int | None = None
    target: str | None = None


def parse_fault_spec(text: str) -> FaultSpec:
    """Parse ``node-2:stall``, ``node-3:slow=5s``, ``node-4:fork=1200``,
    ``node-1:http_500:<chain id>`` or ``*:contract_paused=<address>:<chain id>``."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise FaultError(
            f"invalid --fault {text!r}: use NODE:FAULT[=VALUE][:CHAIN], e.g. node-3:slow=5s"
        )
    fault, _, value = parts[1].partition("=")
    delay, height, target = 0.0, None, None
    if value and fault in OBJECT_FAULTS:
        target = value
    elif value and fault == "slow":
        try:
            delay = parse_go_duration(value)
        except DurationError as error:
            raise FaultError(f"invalid --fault {text!r}: {error}") from None
    elif value and fault == "fork":
        if not value.isdigit():
            raise FaultError(f"invalid --fault {text!r}: fork=HEIGHT takes a block height")
        height = int(value)
    elif value:
        raise FaultError(
            f"invalid --fault {text!r}: only slow=DELAY and fork=HEIGHT take a value "
            f"(and {', '.join(sorted(OBJECT_FAULTS))}=ADDRESS)"
        )
    chain = parts[2] if len(parts) == 3 and parts[2] else None
    return FaultSpec(parts[0], fault, chain, delay, height, target)
