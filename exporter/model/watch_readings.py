"""Watch lists: which contract and wallet requests a cycle makes, and what their answers mean.

Pure functions only, so they plug into whatever runs the requests: ``plan_requests`` says what
to ask each node (from the config and the chains its /health listed), ``read_answer`` turns one
decoded answer into a frozen reading, and ``WatchStatus`` gathers one cycle's readings for the
writer. Only values a node sent in a readable form make it into a reading (contract rule 1).
What each answer holds and how each field is read are the rows of :mod:`exporter.model.fields`
(``CONTRACT_FIELDS``, ``CONTRACT_STATE_FIELDS``, ``WALLET_FIELDS``).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from operator import itemgetter
from typing import Any
from urllib.parse import quote

from exporter.bounds import DEFAULT_BOUNDS, Bounds, DropKind, count_dropped
from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from exporter.model import fields as f
from exporter.model.fields import PERMISSIONS, Field, Reader

# The readings are declared beside their rows, and their users find them here too.
from exporter.model.fields import ContractReading as ContractReading  # noqa: PLC0414
from exporter.model.fields import StateReading as StateReading  # noqa: PLC0414
from exporter.model.fields import WalletReading as WalletReading  # noqa: PLC0414
from exporter.model.readings import InvalidResponseError
from exporter.values import LabelTexts, is_text, read_bool, read_number


class WatchKind(Enum):
    """What a watch request reads; the value is the ``endpoint`` label of its errors."""

    CONTRACT = "contract"
    CONTRACT_STATE = "contract_state"
    WALLET = "wallet"


@dataclass(frozen=True)
class WatchRequest:
    """One request of a cycle: ``kind`` of the object labelled ``name`` on ``blockchain``,
    asked of ``node``, at the API path ``segments`` (not yet encoded) with ``query``;
    ``state_keys`` are the values a contract state request reads."""

    node: str
    kind: WatchKind
    blockchain: str
    address: str
    name: str
    state_keys: tuple[str, ...] = ()

    @property
    def segments(self) -> tuple[str, ...]:
        """The path segments, decoded: endpoint 6, 7 or 9."""
        if self.kind is WatchKind.WALLET:
            return ("wallets", self.address)
        contract = ("blockchains", self.blockchain, "contracts", self.address)
        return (*contract, "state") if self.kind is WatchKind.CONTRACT_STATE else contract

    @property
    def query(self) -> tuple[tuple[str, str], ...]:
        """The query parameters, decoded: the wallet's chain goes in the query."""
        if self.kind is WatchKind.WALLET:
            return ((f.WALLET_CHAIN_PARAMETER, self.blockchain),)
        return ()

    @property
    def path(self) -> str:
        """Relative to the node's base URL, every segment and query value percent-encoded
        (a ``/``, ``?`` or ``..`` in an id never changes the endpoint)."""
        path = "/".join(_segment(segment) for segment in self.segments)
        query = "&".join(f"{key}={quote(value, safe='')}" for key, value in self.query)
        return f"{path}?{query}" if query else path


Reading = ContractReading | StateReading | WalletReading


def _segment(text: str) -> str:
    encoded = quote(text, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _asks(entry: WatchedContract | WatchedWallet, node: str, chains: Collection[str]) -> bool:
    """A node is asked when it lists the chain and the entry does not name other nodes."""
    return entry.blockchain in chains and (entry.nodes is None or node in entry.nodes)


def plan_requests(
    watch: WatchConfig, node: str, chains: Collection[str]
) -> tuple[WatchRequest, ...]:
    """The watch requests for ``node`` this cycle, given the chains its /health listed (a
    set once: a listing of 10^5 ids is not searched once per entry)."""
    if not watch.contracts and not watch.wallets:
        return ()
    chains = chains if isinstance(chains, set | frozenset) else frozenset(chains)
    requests: list[WatchRequest] = []
    for contract in watch.contracts:
        if _asks(contract, node, chains):
            entry = (contract.blockchain, contract.address, contract.name)
            requests.append(WatchRequest(node, WatchKind.CONTRACT, *entry))
            state = WatchRequest(node, WatchKind.CONTRACT_STATE, *entry, contract.state_keys)
            requests.append(state)
    for wallet in watch.wallets:
        if _asks(wallet, node, chains):
            entry = (wallet.blockchain, wallet.address, wallet.name)
            requests.append(WatchRequest(node, WatchKind.WALLET, *entry))
    return tuple(requests)


def read_answer(request: WatchRequest, body: Any, bounds: Bounds = DEFAULT_BOUNDS) -> Reading:
    """Interpret the decoded answer to ``request``; InvalidResponseError unless an object.
    Label values and auth groups beyond ``bounds`` are dropped and counted."""
    if not isinstance(body, dict):
        raise InvalidResponseError(
            f"the {request.kind.value} answer is a JSON {type(body).__name__}, not an object"
        )
    if request.kind is WatchKind.CONTRACT:
        return read_contract(body, bounds)
    if request.kind is WatchKind.CONTRACT_STATE:
        return read_state(body, request.state_keys, bounds)
    return read_wallet(body, bounds)


#: How the fields a reader reads by row are read: (JSON name, reading attribute, parser);
#: parser None is a label value, read under the configured length (``max_label_value_length``).
_Plan = tuple[tuple[str, str, Reader | None], ...]


def _plan(table: tuple[Field, ...]) -> _Plan:
    """The rows of ``table`` read one value each into the attribute they name (the others,
    a state or auth groups, have a reader of their own; unread rows are skipped)."""
    return tuple(
        (row.name, row.attribute, None if row.bound is DropKind.LABEL_VALUE else row.read)
        for row in table
        if row.read is not None and row.attribute
    )


_CONTRACT_PLAN = _plan(f.CONTRACT_FIELDS)
_STATE_PLAN = _plan(f.CONTRACT_STATE_FIELDS)
_WALLET_PLAN = _plan(f.WALLET_FIELDS)


def _read_plan(body: Mapping[str, Any], plan: _Plan, labels: LabelTexts) -> dict[str, Any]:
    """The reading's attributes read by row: each field's parser, or ``labels`` for texts."""
    get = body.get
    return {attribute: (read or labels)(get(name)) for name, attribute, read in plan}


def read_contract(body: Mapping[str, Any], bounds: Bounds = DEFAULT_BOUNDS) -> ContractReading:
    """Endpoint 6: an empty or non-string status is no status (no state set series)."""
    labels = LabelTexts(bounds.label_value_length)
    values = _read_plan(body, _CONTRACT_PLAN, labels)
    status = f.CONTRACT_STATUS.attribute
    values[status] = values[status] or None
    return ContractReading(**values, dropped=count_dropped(label_values=labels.dropped))


def read_state(
    body: Mapping[str, Any], keys: Sequence[str], bounds: Bounds = DEFAULT_BOUNDS
) -> StateReading:
    """Endpoint 7: each key's value when a number, a numeric string or a boolean (0/1)."""
    state = body.get(f.CONTRACT_STATE.name)
    values = []
    for key in keys:
        value = state_value(state, key)
        if value is not None:
            values.append((key, value))
    read = _read_plan(body, _STATE_PLAN, LabelTexts(bounds.label_value_length))
    return StateReading(**read, values=tuple(values))


def state_value(state: Any, key: str) -> float | None:
    """The value at dotted path ``key``; None through a missing key, a non-object, an object
    or array at the end, or a string that is not a number."""
    value = state
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return read_bool(value) if isinstance(value, bool) else read_number(value)


def read_wallet(body: Mapping[str, Any], bounds: Bounds = DEFAULT_BOUNDS) -> WalletReading:
    """Endpoint 9: flags of each auth group that are JSON booleans; no groups, no samples."""
    labels = LabelTexts(bounds.label_value_length)
    permissions, extra_groups = _permissions(
        body.get(f.AUTH_GROUPS.name), bounds.auth_groups_per_wallet, labels
    )
    values = _read_plan(body, _WALLET_PLAN, labels)
    return WalletReading(
        **values,
        permissions=permissions,
        dropped=count_dropped(auth_groups=extra_groups, label_values=labels.dropped),
    )


Grant = tuple[str, str, float]


def _permissions(groups: Any, limit: int, labels: LabelTexts) -> tuple[tuple[Grant, ...], int]:
    """``(group, flag, 0/1)`` of each flag sent as a JSON boolean, group by group in name
    order; past ``limit`` groups with such flags only the first ``limit`` names, and how many
    more there were. Linear in the groups (a partial sort)."""
    if not isinstance(groups, dict):
        return (), 0
    readable: list[tuple[str, list[Grant]]] = []
    for group, flags in groups.items():
        if not isinstance(flags, dict):
            continue
        granted = [
            (group, flag, value)
            for flag in PERMISSIONS
            if (value := read_bool(flags.get(flag))) is not None
        ]
        if granted and labels.fits(group) and is_text(group):
            readable.append((group, granted))
    by_name = itemgetter(0)
    if len(readable) <= limit:
        kept = sorted(readable, key=by_name)
    else:
        kept = heapq.nsmallest(limit, readable, key=by_name)
    return tuple(grant for _, grants in kept for grant in grants), len(readable) - len(kept)


@dataclass(frozen=True)
class WatchedObject:
    """One watched object as one node answered this cycle: ``reading`` None when it could
    not be read (its ``_up`` says 0 and its other series vanish)."""

    node: str
    node_labels: tuple[tuple[str, str], ...]
    kind: WatchKind
    blockchain: str
    name: str
    reading: Reading | None


@dataclass(frozen=True)
class UnmatchedEntry:
    """A watch entry no node it may ask lists the chain of: never asked, so it exports
    nothing (a copied example's chain, a typo). ``kind`` is ``contract`` or ``wallet``."""

    kind: str
    blockchain: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name} on blockchain {self.blockchain}"


def unmatched_entries(
    watch: WatchConfig,
    nodes: Collection[str],
    listed: Mapping[str, Collection[str]],
    every_node_known: bool = False,
) -> tuple[UnmatchedEntry, ...]:
    """The entries of ``watch`` whose chain none of their nodes lists, by ``listed`` (a
    node's chains: from its /health, or from its config's ``blockchains``). Each entry is
    judged by the nodes it may ask (its ``nodes``, else all ``nodes``) whose listing is
    known; with none known (or, with ``every_node_known``, one unknown) it is not judged."""
    entries = [("contract", c) for c in watch.contracts] + [("wallet", w) for w in watch.wallets]
    found = []
    for kind, entry in entries:
        asked = entry.nodes or nodes
        known = [listed[node] for node in asked if node in listed]
        if every_node_known and len(known) < len(asked):
            continue
        if known and not any(entry.blockchain in chains for chains in known):
            found.append(UnmatchedEntry(kind, entry.blockchain, entry.name))
    return tuple(found)


@dataclass(frozen=True)
class WatchStatus:
    """Every watch request of a cycle and its outcome, in plan order: what the writer
    renders; and the entries no node was asked for (:func:`unmatched_entries`)."""

    objects: tuple[WatchedObject, ...] = ()
    unmatched: tuple[UnmatchedEntry, ...] = ()


def watched_object(
    request: WatchRequest, labels: tuple[tuple[str, str], ...], reading: Reading | None
) -> WatchedObject:
    """The outcome of ``request``: its reading, or None when it failed."""
    return WatchedObject(
        request.node, labels, request.kind, request.blockchain, request.name, reading
    )
