"""Who is who in a simulated network: node identities, chain ids, which node tracks which chain,
councils and peer links. Everything is derived from the seed; only per-chain tables are stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger_simulator.errors import SimulatorError, UnknownChainError, UnknownNodeError
from ledger_simulator.ids import hex_id, peer_id, pick, public_key

_LOGICAL_NAMES = ("payments", "registry", "identity", "settlement", "karma")
NODE_VERSIONS = ("v2.14.3", "v2.14.3", "v2.14.3", "v2.14.2")
_NODE_NAME = re.compile(r"node-([1-9][0-9]*)")
MAX_RING_PEERS = 4  # a node links to up to 4 neighbours on each side of a ring


def make_chain_ids(seed: int, chains: int) -> tuple[str, ...]:
    """Chain ids: mostly 64-hex hashes; every third chain gets a logical name instead."""
    ids = []
    for index in range(chains):
        if index % 3 == 2:
            name = _LOGICAL_NAMES[(index // 3) % len(_LOGICAL_NAMES)]
            ids.append(f"{name}-{hex_id(6, seed, 'logical', index)}")
        else:
            ids.append(hex_id(64, seed, "chain", index))
    return tuple(ids)


@dataclass(frozen=True)
class Topology:
    """The static shape of a network: node count, chain ids, councils and laggards."""

    seed: int
    node_count: int
    chain_ids: tuple[str, ...]
    councils: tuple[tuple[int, ...], ...]
    laggards: tuple[int | None, ...]

    @classmethod
    def build(cls, seed: int, nodes: int, chains: int) -> Topology:
        """Derive a topology; cost is proportional to the number of chains, not of nodes."""
        if nodes < 1 or chains < 1:
            raise SimulatorError("a simulated network needs at least 1 node and 1 chain")
        chain_ids = make_chain_ids(seed, chains)
        councils = tuple(_council(seed, nodes, c) for c in range(chains))
        laggards = tuple(_laggard(seed, nodes, c) for c in range(chains))
        return cls(seed, nodes, chain_ids, councils, laggards)

    # names and indices -------------------------------------------------------------------
    def node_name(self, node: int) -> str:
        """``node-<i>`` with i counted from 1."""
        return f"node-{node + 1}"

    def node_index(self, name: str) -> int:
        """0-based index of ``node-<i>``; UnknownNodeError for anything else."""
        match = _NODE_NAME.fullmatch(name)
        if match and 0 < int(match.group(1)) <= self.node_count:
            return int(match.group(1)) - 1
        raise UnknownNodeError(
            f"unknown node {name!r}: the simulated nodes are node-1 .. node-{self.node_count}"
        )

    def chain_index(self, chain_id: str) -> int:
        """Index of a chain id; UnknownChainError naming the known ids otherwise."""
        try:
            return self.chain_ids.index(chain_id)
        except ValueError:
            known = ", ".join(self.chain_ids[:5])
            raise UnknownChainError(f"unknown blockchain {chain_id!r}; known: {known}") from None

    def council_member(self, text: str, chain: int | None) -> int:
        """Index of the council member named ``text`` (``node-<i>`` or its nodeId, any case)
        on ``chain``'s council, or on any chain's when None; SimulatorError otherwise."""
        chains = range(len(self.chain_ids)) if chain is None else (chain,)
        members = sorted({member for c in chains for member in self.councils[c]})
        wanted = text.lower()
        for member in members:
            if wanted in (self.node_name(member), self.node_id(member)):
                return member
        where = "any blockchain's council" if chain is None else "the blockchain's council"
        names = ", ".join(self.node_name(m) for m in members[:10])
        if len(members) > 10:
            names += f", ... ({len(members)} in all; GET /-/sim/blockchains lists them)"
        raise SimulatorError(f"{text!r} is no member of {where}; its members: {names}")

    # identities ----------------------------------------------------------------------------
    def node_id(self, node: int) -> str:
        """The node's public key (its nodeId, also used in council lists)."""
        return public_key(self.seed, "node", node)

    def peer_id(self, node: int) -> str:
        """The node's peer-to-peer identifier."""
        return peer_id(self.seed, "node", node)

    def node_version(self, node: int) -> str:
        """Most nodes run the current release; some still run the previous one."""
        return NODE_VERSIONS[pick(len(NODE_VERSIONS), self.seed, "version", node)]

    # membership ----------------------------------------------------------------------------
    def tracks(self, node: int, chain: int) -> bool:
        """Chain 0 is tracked by every node; other chains by about two nodes in three."""
        return _tracks(self.node_count, node, chain)

    def chains_of(self, node: int) -> list[int]:
        """Indices of the chains ``node`` tracks."""
        return [c for c in range(len(self.chain_ids)) if self.tracks(node, c)]

    def ring_peers(self, node: int) -> list[int]:
        """Candidate peers: neighbours on a ring, so links are symmetric and few per node."""
        count = self.node_count
        if count - 1 <= 2 * MAX_RING_PEERS:
            return [other for other in range(count) if other != node]
        offsets = [d for k in range(1, MAX_RING_PEERS + 1) for d in (k, -k)]
        return sorted((node + d) % count for d in offsets)


def _tracks(node_count: int, node: int, chain: int) -> bool:
    return chain == 0 or node_count < 3 or (node + chain) % 3 != 0


def _council(seed: int, nodes: int, chain: int) -> tuple[int, ...]:
    """4..7 tracking nodes (fewer in small networks), from a seeded starting point."""
    size = 4 + pick(4, seed, "council-size", chain)
    start = pick(nodes, seed, "council-start", chain)
    members: list[int] = []
    for step in range(nodes):
        node = (start + step) % nodes
        if _tracks(nodes, node, chain):
            members.append(node)
            if len(members) == size:
                break
    return tuple(sorted(members))


def _laggard(seed: int, nodes: int, chain: int) -> int | None:
    """One tracking node per chain that runs several blocks behind (networks of 3+ nodes)."""
    if nodes < 3:
        return None
    start = pick(nodes, seed, "laggard", chain)
    for step in range(nodes):
        node = (start + step) % nodes
        if _tracks(nodes, node, chain):
            return node
    return None
