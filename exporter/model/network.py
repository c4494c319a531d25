"""The network as a whole: block, council and consensus configuration agreement, the council
members polled and up, and peer partitions across the nodes one exporter polls in the same
cycle (docs/metrics.md, "The network as a whole" and "Consensus health").

Pure functions of what the up nodes reported, so the view is as trustworthy as the readings it
comes from: a node whose block or council could not be read is left out, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple, TypeVar

from exporter.model.fields import ChainReading, HealthReading

_Key = TypeVar("_Key", bound=Hashable)
#: The node and the value of a (node, value) pair, at C speed (thousands a cycle).
_first, _second = itemgetter(0), itemgetter(1)


class ChainObservation(NamedTuple):
    """What one up node said about one chain this cycle, as far as the network view needs it.

    ``checkpoint_hash`` is the hash of the block at the cycle's checkpoint height, or None when
    no block was asked for or it could not be read. A named tuple, not a frozen dataclass:
    as immutable, and made in a fifth of the time (3000 a cycle at 1000 nodes)."""

    blockchain: str
    height: float | None
    is_syncing: bool | None
    council: frozenset[str] | None
    checkpoint_hash: str | None = None
    settings_digest: bytes | None = None  # of the consensus configuration, if readable


class NodeObservation(NamedTuple):
    """One up node: its peer identity, whom it lists as peers, and its chains (a named tuple,
    as ChainObservation)."""

    node: str
    peer_identity: str | None
    listed_peers: tuple[str, ...]
    chains: tuple[ChainObservation, ...]


@dataclass(frozen=True, slots=True)
class Agreement:
    """Per node, whether its value is the one a strict majority holds, iterated as (node,
    agrees) in node order. Names and one flag byte each: at 1000 nodes and 3 chains a
    (node, bool) tuple each would be 6000 objects a cycle, kept for two."""

    nodes: tuple[str, ...] = ()
    flags: bytes = b""

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, bool]]) -> Agreement:
        """From (node, agrees) pairs, in their order."""
        listed = tuple(pairs)
        return cls(tuple(node for node, _ in listed), bytes(agrees for _, agrees in listed))

    def __iter__(self) -> Iterator[tuple[str, bool]]:
        return ((node, flag == 1) for node, flag in zip(self.nodes, self.flags, strict=True))

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class ChainAgreement:
    """Agreement on one chain. ``checkpoint_height`` is where hashes were compared this cycle
    (None: no block requests this cycle); ``next_checkpoint`` where the next cycle asks.
    ``council_members_polled`` counts the majority council's keys that are a polled node's
    ``nodeId``, ``council_members_up`` those whose node read the chain this cycle (None
    without a majority council)."""

    blockchain: str
    checkpoint_height: int | None
    checkpoint_hashes: int | None
    block_agrees: Agreement
    council_views: int | None
    council_agrees: Agreement
    next_checkpoint: int | None
    consensus_views: int | None = None
    consensus_agrees: Agreement = Agreement()
    council_members_polled: int | None = None
    council_members_up: int | None = None


@dataclass(frozen=True)
class NetworkView:
    """The cross-node view of one cycle; ``partitions`` is None when no node is up."""

    chains: tuple[ChainAgreement, ...] = ()
    partitions: int | None = None
    polled_peers: tuple[tuple[str, int], ...] = ()
    #: the up polled nodes in the largest group linked by peers (None when no node is up)
    largest_partition: int | None = None
    #: per up node, how many chains it lists that the operator did not expect
    #: (:func:`unexpected_chains`)
    unexpected_chains: tuple[tuple[str, int], ...] = ()
    #: (node, its remembered ``nodeId``) for every polled node, up or down: who a key is
    node_keys: tuple[tuple[str, str], ...] = ()


def observe(
    node: str,
    health: HealthReading,
    chains: Iterable[tuple[str, ChainReading | None, str | None]],
) -> NodeObservation:
    """An up node as the view needs it, from its readings; ``chains`` holds (blockchain,
    reading or None when unread, checkpoint block hash or None). Unread chains are left out."""
    return NodeObservation(
        node=node,
        peer_identity=health.peer_id,
        listed_peers=health.network_peers,
        chains=tuple(
            ChainObservation(
                chain,
                reading.height,
                reading.syncing,
                reading.council,
                block,
                reading.consensus_view,
            )
            for chain, reading, block in chains
            if reading is not None
        ),
    )


def majority_agreement(values: Sequence[tuple[str, _Key]]) -> tuple[int, Agreement]:
    """Distinct values, and per node whether its value is the one a strict majority holds
    (all False when no value has more than half)."""
    counts = Counter(map(_second, values))
    winner = majority_value(values, counts)
    ordered = sorted(values, key=_first)
    flags = bytes([value == winner for _, value in ordered])
    return len(counts), Agreement(tuple(map(_first, ordered)), flags)


def majority_value(
    values: Sequence[tuple[str, _Key]], counts: Counter[_Key] | None = None
) -> _Key | None:
    """The value a strict majority of ``values`` hold, if any."""
    counts = Counter(map(_second, values)) if counts is None else counts
    return next((value for value, count in counts.items() if 2 * count > len(values)), None)


def council_members(
    councils: Sequence[tuple[str, frozenset[str]]],
    readers: Iterable[str],
    node_keys: Mapping[str, str],
) -> tuple[int | None, int | None]:
    """Of the majority's council set: the members that are a polled node (by the ``nodeId``
    remembered of each, so a member whose node is down still counts), and of those the ones
    whose node read the chain this cycle (``readers``). (None, None) without a majority."""
    council = majority_value(councils)
    if council is None:
        return None, None
    polled = council.intersection(node_keys.values())
    up = {node_keys[node] for node in readers if node in node_keys}
    return len(polled), len(polled & up)


def majority_height(readings: Iterable[tuple[float | None, bool | None]]) -> float | None:
    """The highest height a strict majority of the not-syncing readers have reached, from
    (height, syncing) pairs; when every reader with a height is syncing, the same among
    them all; None when no reader has a height. A majority, never the highest: one node
    reporting heights far too high (a bug, or a hostile node) moves it only with the
    others' agreement, so it can neither put the honest nodes behind nor hide a halt."""
    steady: list[float] = []
    syncing: list[float] = []
    for height, is_syncing in readings:
        if height is not None:
            (syncing if is_syncing is True else steady).append(height)
    heights = steady or syncing
    if not heights:
        return None
    heights.sort(reverse=True)
    return heights[len(heights) // 2]  # reached by len // 2 + 1 of them: a strict majority


def next_checkpoint(chains: Iterable[ChainObservation], depth: int) -> int | None:
    """The highest height that a strict majority of the not-syncing readers have reached,
    ``depth`` blocks down (not below 0); None when block checks are off (depth 0) or no such
    node has a height. A majority, not the lowest: one stalled or lagging node must not pin
    the comparison below a fork among the others (its lag is LedgerNodeBehind's business,
    and it is not asked for a block it cannot have)."""
    if depth <= 0:
        return None
    steady = [(c.height, False) for c in chains if c.is_syncing is not True]
    height = majority_height(steady)
    return None if height is None else max(0, int(height) - depth)


def chain_agreement(
    blockchain: str,
    readers: Sequence[tuple[str, ChainObservation]],
    compared_at: int | None,
    depth: int,
    node_keys: Mapping[str, str] | None = None,
) -> ChainAgreement:
    """Agreement on ``blockchain`` among the up nodes that read it this cycle; ``node_keys``
    is each polled node's remembered ``nodeId`` (for the council members polled and up)."""
    hashes = [(node, c.checkpoint_hash) for node, c in readers if c.checkpoint_hash is not None]
    councils = [(node, c.council) for node, c in readers if c.council is not None]
    configs = [(node, c.settings_digest) for node, c in readers if c.settings_digest is not None]
    hash_count, block_agrees = majority_agreement(hashes)
    council_count, council_agrees = majority_agreement(councils)
    config_count, config_agrees = majority_agreement(configs)
    polled, up = council_members(councils, (node for node, _ in readers), node_keys or {})
    compared = compared_at if hashes else None
    return ChainAgreement(
        blockchain=blockchain,
        checkpoint_height=compared,
        checkpoint_hashes=hash_count if hashes else None,
        block_agrees=block_agrees,
        council_views=council_count if councils else None,
        council_agrees=council_agrees,
        next_checkpoint=next_checkpoint((c for _, c in readers), depth),
        consensus_views=config_count if configs else None,
        consensus_agrees=config_agrees,
        council_members_polled=polled,
        council_members_up=up,
    )


def partitions(nodes: Sequence[NodeObservation]) -> tuple[int | None, tuple[tuple[str, int], ...]]:
    """Connected components of the up nodes linked by ``networkPeers`` (a link counts when
    either side lists the other's peer id), and how many other up nodes each is linked to."""
    groups, _, polled = peer_groups(nodes)
    return groups, polled


class PeerGroups(NamedTuple):
    """The up nodes' groups linked by peers: how many, the size of the largest (None when
    no node is up), and per node how many other up nodes it is linked to."""

    groups: int | None
    largest: int | None
    polled_peers: tuple[tuple[str, int], ...]


def peer_groups(nodes: Sequence[NodeObservation]) -> PeerGroups:
    """:func:`partitions` with the largest group's size. Linear in the peers listed, not
    quadratic in the nodes."""
    if not nodes:
        return PeerGroups(None, None, ())
    by_peer_id: dict[str, list[str]] = {}
    for node in nodes:
        if node.peer_identity is not None:
            by_peer_id.setdefault(node.peer_identity, []).append(node.node)
    links: dict[str, set[str]] = {n.node: set() for n in nodes}
    for a in nodes:
        for peer in a.listed_peers:
            for b in by_peer_id.get(peer, ()):
                if b != a.node:
                    links[a.node].add(b)
                    links[b].add(a.node)
    sizes = _components(links)
    polled = tuple(sorted((node, len(peers)) for node, peers in links.items()))
    return PeerGroups(len(sizes), max(sizes), polled)


def _components(links: dict[str, set[str]]) -> list[int]:
    """The sizes of the connected components the undirected ``links`` make."""
    seen: set[str] = set()
    sizes = []
    for start in links:
        if start in seen:
            continue
        before = len(seen)
        stack = [start]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(links[current] - seen)
        sizes.append(len(seen) - before)
    return sizes


class Listing(NamedTuple):
    """What one up node's /health listed, and the chains its ``expect.blockchains`` names
    (None: not set)."""

    node: str
    chains: Sequence[str]
    expected: frozenset[str] | None = None


def unexpected_chains(listings: Sequence[Listing]) -> tuple[tuple[str, int], ...]:
    """Per up node, the chains it lists that the operator did not expect: outside its
    ``expect.blockchains`` where set, or, when two or more up nodes listed chains, listed by
    no other of them. One node listing chains of its own (a test chain, or a hostile node
    inventing some) is then one node's finding, never a chain-wide one. Linear in the ids
    listed."""
    listers = sum(1 for listing in listings if listing.chains)
    others: Counter[str] = Counter()
    if listers >= 2:
        for listing in listings:
            others.update(frozenset(listing.chains))
    found = []
    for node, chains, expected in listings:
        listed = frozenset(chains)
        count = sum(
            1
            for chain in listed
            if (expected is not None and chain not in expected) or others[chain] == 1
        )
        found.append((node, count))
    return tuple(sorted(found))


def network_view(
    nodes: Sequence[NodeObservation],
    compared_at: dict[str, int],
    depth: int,
    node_keys: Mapping[str, str] | None = None,
    listings: Sequence[Listing] = (),
) -> NetworkView:
    """The view over the up ``nodes``; ``compared_at`` maps a chain to the checkpoint height
    its blocks were asked at this cycle, ``node_keys`` each polled node (up or not) to its
    remembered ``nodeId``, ``listings`` what each up node's /health listed."""
    readers: dict[str, list[tuple[str, ChainObservation]]] = {}
    for node in nodes:
        for chain in node.chains:
            readers.setdefault(chain.blockchain, []).append((node.node, chain))
    chains = tuple(
        chain_agreement(
            blockchain, readers[blockchain], compared_at.get(blockchain), depth, node_keys
        )
        for blockchain in sorted(readers)
    )
    groups = peer_groups(nodes)
    keys = tuple(sorted((node_keys or {}).items()))
    return NetworkView(
        chains=chains,
        partitions=groups.groups,
        polled_peers=groups.polled_peers,
        node_keys=keys,
        largest_partition=groups.largest,
        unexpected_chains=unexpected_chains(listings),
    )
