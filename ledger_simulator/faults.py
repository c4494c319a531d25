"""Faults that can be switched on and off per node, and optionally per chain, while running."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from ledger_simulator.errors import SimulatorError
from ledger_simulator.ids import DurationError, iso_utc, parse_go_duration
from ledger_simulator.settings import SettingError, Value, parse_drift
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
    "session_stuck",
    "leader_failing",
    "consensus_drift",
    "council_change",
    "idle",
    "identity_swap",
    "lag_time",
    "rewrite_hash",
    "cert_expiry",
)
#: Faults that only make sense for a whole node (a partition cuts peer links, not chains;
#: another node answering at a node's address answers all of it).
NODE_WIDE_ONLY = frozenset({"partition", "identity_swap", "cert_expiry"})
#: Faults of the node's https certificate (a simulator started with --tls): its value is the
#: days until the reissued certificate expires (none: expired yesterday); node ``*``: every
#: node (in the paths layout, every node shares the one port and its certificate).
CERTIFICATE_FAULTS = frozenset({"cert_expiry"})
#: Faults on watched objects: they apply to one contract or wallet address (the ``target``) or,
#: without one, to every contract or wallet of the chain; the node may be ``*``: every node.
OBJECT_FAULTS = frozenset({"contract_paused", "contract_upgraded", "wallet_disabled"})
#: Faults of the chain's consensus, which every node sees when switched for node ``*`` (one
#: node alone: only that node's view of the chain).
NETWORK_FAULTS = frozenset({"session_stuck", "leader_failing", "council_change", "idle"})
#: Faults whose ``delay_seconds`` is the round timeout (0: the chain's own, scaled).
ROUND_FAULTS = frozenset({"session_stuck", "leader_failing"})
#: Faults whose ``target`` is a council member (a node name or nodeId), and whether it is
#: required.
MEMBER_FAULTS = {"leader_failing": True, "council_change": False}
ALL_NODES = "*"
DEFAULT_SLOW_SECONDS = 5.0
#: How late a node under ``lag_time`` reaches each height when no delay is given.
DEFAULT_LAG_SECONDS = 30.0
#: How far below the node's height at the switch ``rewrite_hash`` rewrites a block when no
#: height is given: the exporter's default checkpoint depth, where it reads blocks.
DEFAULT_REWRITE_DEPTH = 5
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
    """When a fault was switched on (clock time), for ``slow`` its delay (for ``lag_time``
    how late the node reaches each height, for the round faults their round timeout, 0: the
    chain's own), for ``fork`` the first height whose block differs (``None``: the first
    block after ``since``; for ``rewrite_hash`` the height whose block is rewritten,
    ``None``: DEFAULT_REWRITE_DEPTH below the node's height at ``since``), for
    ``consensus_drift`` the value reported (``None``: the default change)."""

    since: float
    delay_seconds: float
    height: int | None = None
    value: Value | None = None

    def outranks(self, other: FaultState) -> bool:
        """Of two switches of one fault at the same level (both node-wide or both for the
        chain), the earlier one holds."""
        return self.since < other.since


#: Faults that may be on several times for one node and chain, once per ``target``.
KEYED_FAULTS = frozenset({"leader_failing", "council_change", "consensus_drift"})


#: Faults whose switch for the chain wins over the node-wide one (the attribute holding it).
_CHAINS_OWN = {"fork": "fork", "rewrite_hash": "rewrite"}
#: Faults whose longest delay applies (the attribute holding it).
_LONGEST = {"slow": "slow_seconds", "lag_time": "lag_seconds"}


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
    lag_seconds: float = 0.0
    rewrite: FaultState | None = None
    rewrite_per_chain: bool = False
    other_council: bool = False
    partition: bool = False
    stuck: FaultState | None = None
    idle_since: float | None = None
    answered_by: str | None = None  # identity_swap: the node that answers in its place
    names: set[str] = field(default_factory=set)
    objects: dict[str, set[str | None]] = field(default_factory=dict)
    keyed: dict[str, dict[str | None, tuple[FaultState, bool]]] = field(default_factory=dict)

    def add(
        self, fault: str, state: FaultState, target: str | None = None, per_chain: bool = False
    ) -> None:
        """Merge one fault in force node-wide or (``per_chain``) for the chain. Both at once:
        a stall, a stuck session or an idle chain keeps the earlier switch, slow the longer
        delay, and fork (and each failing leader, council change or drifted setting) the
        chain's own, whatever the order they were switched on in."""
        self.names.add(fault)
        if fault in OBJECT_FAULTS:
            self.objects.setdefault(fault, set()).add(target)
        elif fault in KEYED_FAULTS:
            table = self.keyed.setdefault(fault, {})
            held = table.get(target)
            if held is None or prevails(state, per_chain, *held):
                table[target] = (state, per_chain)
        elif fault == "stall":
            since = self.stall_since
            self.stall_since = state.since if since is None else min(since, state.since)
        elif fault == "session_stuck":
            if self.stuck is None or state.outranks(self.stuck):
                self.stuck = state
        elif fault == "idle":
            since = self.idle_since
            self.idle_since = state.since if since is None else min(since, state.since)
        elif fault in _CHAINS_OWN:
            name = _CHAINS_OWN[fault]
            if getattr(self, name) is None or (
                per_chain and not getattr(self, f"{name}_per_chain")
            ):
                setattr(self, name, state)
                setattr(self, f"{name}_per_chain", per_chain)
        elif fault in _LONGEST:
            name = _LONGEST[fault]
            setattr(self, name, max(getattr(self, name), state.delay_seconds))
        elif fault == "identity_swap":
            self.answered_by = target
        else:
            setattr(self, fault, True)

    def on_object(self, fault: str, address: str) -> bool:
        """Whether object fault ``fault`` is in force for ``address`` (or all addresses)."""
        targets = self.objects.get(fault, set())
        return None in targets or address.lower() in targets

    def targets(self, fault: str) -> dict[str | None, FaultState]:
        """For a fault on once per target (a failing leader, a council member leaving, a
        drifted setting): each target in force and its switch."""
        return {target: held[0] for target, held in self.keyed.get(fault, {}).items()}


def prevails(state: FaultState, per_chain: bool, held: FaultState, held_per_chain: bool) -> bool:
    """Whether a switch of a fault replaces the one held for the same target: the chain's
    own over the node-wide one, else the earlier one."""
    if per_chain != held_per_chain:
        return per_chain
    return state.outranks(held)


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
        value: object = None,
    ) -> bool:
        """Switch a fault on or off; return whether anything changed. ``target``: the
        address an object fault applies to (None: every contract or wallet of the chain),
        the council member of ``leader_failing`` or ``council_change``, the setting of
        ``consensus_drift``, the node answering under ``identity_swap``; ``value``: the
        value that setting takes. Off, a target left out matches every target, and delay,
        height and value are not needed (:meth:`switch_off`)."""
        if delay_seconds < 0:
            raise FaultError(f"delay_seconds must be >= 0, got {delay_seconds}")
        if not enabled:
            return self.switch_off(node, fault, chain, target)
        key = self.validate(node, fault, chain, target, value)
        if height is not None and (fault not in ("fork", "rewrite_hash") or height < 0):
            raise FaultError(
                f"height is for fork and rewrite_hash only and must be >= 0, got {height}"
            )
        delay = 0.0
        if fault == "slow":
            delay = delay_seconds or DEFAULT_SLOW_SECONDS
        elif fault == "lag_time":
            delay = delay_seconds or DEFAULT_LAG_SECONDS
        elif fault in ROUND_FAULTS:
            delay = delay_seconds
        reported = self._drift_value(key, value) if fault == "consensus_drift" else None
        with self._lock:
            previous = self._faults.get(key)
            since = previous.since if previous is not None else now
            state = FaultState(since, delay, height, reported)
            self._faults[key] = state
            return previous != state

    def switch_off(
        self, node: str, fault: str, chain: str | None = None, target: str | None = None
    ) -> bool:
        """Switch ``fault`` off on ``node`` for ``chain`` (None: the node-wide switch; a
        chain's own stays): every switch of it there for ``target`` (None: whatever its
        target, the node answering under ``identity_swap`` whichever it is), and whatever
        its delay, height or value, so that a fault switched on with its optional fields
        goes off without them. Whether anything was on."""
        key = self.validate(node, fault, chain, target, switching_off=True)

        def matches(held: FaultKey) -> bool:
            return (
                (held.node, held.fault) == (node, fault)
                and held.chain == key.chain
                and (target is None or held.target == key.target)
            )

        with self._lock:
            gone = [held for held in self._faults if matches(held)]
            for held in gone:
                del self._faults[held]
        return bool(gone)

    def validate(
        self,
        node: str,
        fault: str,
        chain: str | None,
        target: str | None = None,
        value: object = None,
        *,
        switching_off: bool = False,
    ) -> FaultKey:
        """Check names against the topology; FaultError says what is accepted. Switching
        off, a target the fault requires to go on may be left out."""
        if fault not in FAULTS:
            raise FaultError(f"unknown fault {fault!r}; choose one of: {', '.join(FAULTS)}")
        check_scope(node, fault, target, value, target_required=not switching_off)
        try:
            if node != ALL_NODES:
                self._topology.node_index(node)
            chain_index = None if chain is None else self._topology.chain_index(chain)
        except SimulatorError as error:
            raise FaultError(str(error)) from None
        if chain is not None and fault in NODE_WIDE_ONLY:
            raise FaultError(f"{fault} applies to a whole node; switch it without a chain")
        if fault == "identity_swap":
            return FaultKey(node, fault, None, self._impostor(node, target))
        return FaultKey(node, fault, chain, self._target(fault, chain, chain_index, target))

    def _impostor(self, node: str, target: str | None) -> str:
        """The node that answers in ``node``'s place under identity_swap: ``target`` (a node
        name), by default the next node (node-1 after the last)."""
        top = self._topology
        index = top.node_index(node)
        if target is None:
            if top.node_count < 2:
                raise FaultError("identity_swap needs another node to answer in its place")
            return top.node_name((index + 1) % top.node_count)
        try:
            other = top.node_index(target)
        except SimulatorError as error:
            raise FaultError(f"identity_swap: {error}") from None
        if other == index:
            raise FaultError(f"identity_swap: {node} answering as itself changes nothing")
        return top.node_name(other)

    def _target(
        self, fault: str, chain: str | None, chain_index: int | None, target: str | None
    ) -> str | None:
        """The target as the fault's key holds it: an address in lower case, a council
        member's node name, a setting's name (``consensus_drift``: its default setting)."""
        if target is None:
            return parse_drift(None, None)[0] if fault == "consensus_drift" else None
        if not target:
            raise FaultError("the target address must not be empty")
        try:
            if fault in MEMBER_FAULTS:
                member = self._topology.council_member(target, chain_index)
                return self._topology.node_name(member)
            if fault == "consensus_drift":
                return parse_drift(target, None)[0]
        except SimulatorError as error:
            raise FaultError(f"{fault}: {error}") from None
        if self._targets is not None:
            check_target(self._targets(fault, chain_index), fault, chain, target.lower())
        return target.lower()

    def _drift_value(self, key: FaultKey, value: object) -> Value | None:
        """The value ``consensus_drift`` reports for its setting (None: the default change)."""
        try:
            return parse_drift(key.target, value)[1]
        except SettingError as error:
            raise FaultError(str(error)) from None

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
                "value": state.value,
                "since": iso_utc(state.since),
            }
            for key, state in items
        ]


def check_scope(
    node: str, fault: str, target: str | None, value: object, target_required: bool = True
) -> None:
    """Refuse node ``*``, a target or a value for a fault that takes none, and (unless not
    ``target_required``: switching off) a missing target a fault needs."""
    takes_target = OBJECT_FAULTS | MEMBER_FAULTS.keys() | {"consensus_drift", "identity_swap"}
    if (node == ALL_NODES and fault not in OBJECT_FAULTS | NETWORK_FAULTS | CERTIFICATE_FAULTS) or (
        target is not None and fault not in takes_target
    ):
        objects = ", ".join(sorted(OBJECT_FAULTS))
        network = ", ".join(sorted(NETWORK_FAULTS))
        raise FaultError(
            f"a target address and node '*' are for {objects} only; node '*' also for "
            f"{network}; a target also for leader_failing and council_change (a council "
            "member), consensus_drift (a setting) and identity_swap (the node answering)"
        )
    if fault in MEMBER_FAULTS and MEMBER_FAULTS[fault] and target is None and target_required:
        raise FaultError(
            f"{fault} needs a target: the failing leader's node name or nodeId (a council member)"
        )
    if value is not None and fault not in CERTIFICATE_FAULTS | {"consensus_drift"}:
        raise FaultError(
            f"a value is for consensus_drift (the setting's value) and cert_expiry (days) "
            f"only, not {fault}"
        )


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
    """A fault to switch: given on the command line as ``NODE:FAULT[=VALUE][:CHAIN]``, or
    posted to the admin endpoint as JSON."""

    node: str
    fault: str
    chain: str | None
    delay_seconds: float
    height: int | None = None
    target: str | None = None
    value: str | int | bool | None = None  # consensus_drift's value (JSON or text)


def parse_fault_spec(text: str) -> FaultSpec:
    """Parse ``node-2:stall``, ``node-3:slow=5s``, ``node-4:fork=1200``, ``node-2:lag_time=20s``,
    ``node-3:rewrite_hash=1195``,
    ``node-1:http_500:<chain id>``, ``*:contract_paused=<address>:<chain id>``,
    ``*:session_stuck=3s``, ``*:leader_failing=node-3,5s``, ``*:council_change=node-4``,
    ``node-2:consensus_drift=txMaxTimeTrigger=2m`` or ``node-2:identity_swap=node-3``."""
    parts = text.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise FaultError(
            f"invalid --fault {text!r}: use NODE:FAULT[=VALUE][:CHAIN], e.g. node-3:slow=5s"
        )
    fault, _, value = parts[1].partition("=")
    chain = parts[2] if len(parts) == 3 and parts[2] else None
    spec = FaultSpec(parts[0], fault, chain, 0.0)
    if not value:
        return spec
    try:
        return _with_value(spec, value)
    except (DurationError, FaultError) as error:
        raise FaultError(f"invalid --fault {text!r}: {error}") from None


def _with_value(spec: FaultSpec, value: str) -> FaultSpec:
    """``spec`` with the ``=VALUE`` of its fault; FaultError when the fault takes none."""
    fault = spec.fault
    if fault in OBJECT_FAULTS or fault in ("council_change", "identity_swap"):
        return replace(spec, target=value)
    if fault in ("slow", "session_stuck", "lag_time"):
        return replace(spec, delay_seconds=parse_go_duration(value))
    if fault == "leader_failing":
        leader, _, timeout = value.partition(",")
        delay = parse_go_duration(timeout) if timeout else 0.0
        return replace(spec, target=leader, delay_seconds=delay)
    if fault == "consensus_drift":
        setting, _, reported = value.partition("=")
        return replace(spec, target=setting, value=reported or None)
    if fault in CERTIFICATE_FAULTS:
        return replace(spec, value=value)
    if fault in ("fork", "rewrite_hash"):
        if not (value.isascii() and value.isdigit()):
            raise FaultError(f"{fault}=HEIGHT takes a block height")
        return replace(spec, height=int(value))
    raise FaultError(
        "only slow=DELAY, lag_time=DELAY, fork=HEIGHT and rewrite_hash=HEIGHT take a value (and "
        f"{', '.join(sorted(OBJECT_FAULTS))}=ADDRESS, session_stuck=ROUND_TIMEOUT, "
        "leader_failing=MEMBER[,ROUND_TIMEOUT], council_change=MEMBER, "
        "consensus_drift=SETTING[=VALUE], identity_swap=NODE, cert_expiry=DAYS)"
    )
