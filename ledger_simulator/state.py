"""The moving state of a simulated network, computed lazily from the clock.

Heights advance one block per interval; each node sees a chain a fixed delay late (one node
per chain lags several blocks). Vote sessions open after each block and close when the next
is minted, climbing rounds when a leader fails. Queues rise within a block and drain at the
mint, with bursts; peer links drop and come back. All of it is a pure function of
(seed, node, chain, time) and the faults in force, so nothing is stored per node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ledger_simulator.faults import ActiveFaults, FaultRegistry
from ledger_simulator.ids import go_duration, hex_id, iso_utc, pick, triangle, unit
from ledger_simulator.topology import Topology

SESSION_OPENS = 0.2  # fraction of a block interval after a mint when the next session opens
STAGES = 3  # propose, vote, commit
EXTRA_FEATURE = "enableCouncilRotation"  # the deployment-specific flag of this network


@dataclass(frozen=True)
class ChainView:
    """One node's view of one chain at one moment, with the faults that shape it."""

    node: int
    chain: int
    now: float
    effective: float  # the time the node's chain state corresponds to (frozen when stalled)
    height: int
    faults: ActiveFaults


class SimState:
    """Derives every document a node serves from the topology, the faults and the time."""

    def __init__(
        self, topology: Topology, faults: FaultRegistry, block_interval: float, genesis: float
    ) -> None:
        self.topology = topology
        self.faults = faults
        self.interval = block_interval
        self.genesis = genesis

    # time model -----------------------------------------------------------------------------
    def base_height(self, chain: int) -> int:
        """The chain's height when the simulation started (chains are not new)."""
        return 1000 + pick(40000, self.topology.seed, "base", chain)

    def network_height(self, chain: int, moment: float) -> int:
        """Height of the chain's freshest node at ``moment``."""
        blocks = math.floor((moment - self.genesis) / self.interval)
        return max(0, self.base_height(chain) + blocks)

    def block_time(self, chain: int, height: int) -> float:
        """When block ``height`` was minted."""
        return self.genesis + (height - self.base_height(chain)) * self.interval

    def delay(self, node: int, chain: int) -> float:
        """How late ``node`` sees ``chain``: under a block for most, several for the laggard."""
        seed = self.topology.seed
        lag = pick(2, seed, "lag", node, chain)
        if self.topology.laggards[chain] == node:
            lag = 4 + pick(6, seed, "laggard-lag", chain)
        return (lag + 0.6 * unit(seed, "phase", node, chain)) * self.interval

    def failed_rounds(self, chain: int, height: int) -> int:
        """Leaders that failed before ``height`` was minted (each failure adds a round)."""
        draw = unit(self.topology.seed, "rounds", chain, height)
        return sum(draw >= limit for limit in (0.75, 0.9, 0.97))

    def proposer(self, chain: int, height: int) -> int:
        """The council member whose proposal became block ``height``."""
        council = self.topology.councils[chain]
        return council[(height + self.failed_rounds(chain, height)) % len(council)]

    def block_hash(self, chain: int, height: int) -> str:
        """Hash of minted block ``height``."""
        return hex_id(64, self.topology.seed, "block", chain, height)

    def node_block_hash(self, node: int, chain: int, height: int) -> str:
        """Hash of block ``height`` as ``node`` serves it: a node under ``fork`` has blocks of
        its own from the fork height on (the first block after the switch, unless given)."""
        fork = self.faults.active(
            self.topology.node_name(node), self.topology.chain_ids[chain]
        ).fork
        if fork is not None:
            start = fork.height
            if start is None:
                start = self.network_height(chain, fork.since - self.delay(node, chain)) + 1
            if height >= start:
                return hex_id(64, self.topology.seed, "fork", node, chain, height)
        return self.block_hash(chain, height)

    def council_view(self, node: int, chain: int, faults: ActiveFaults) -> list[str]:
        """The council as ``node`` reports it; under ``other_council`` its last member is
        swapped for a node outside the council (or dropped when every node sits in it)."""
        top = self.topology
        council = list(top.councils[chain])
        if faults.other_council:
            outsiders = [n for n in range(top.node_count) if n not in council]
            council = council[:-1] + outsiders[:1]
        return [top.node_id(m) for m in council]

    def proposal_hash(self, chain: int, height: int, round_index: int) -> str:
        """Hash proposed in a round; the last round's proposal is the block that gets minted."""
        if round_index == self.failed_rounds(chain, height):
            return self.block_hash(chain, height)
        return hex_id(64, self.topology.seed, "proposal", chain, height, round_index)

    def view(self, node: int, chain: int, now: float) -> ChainView:
        """The node's view of the chain at ``now``; a stall freezes it at the stall time."""
        faults = self.faults.active(self.topology.node_name(node), self.topology.chain_ids[chain])
        frozen = faults.stall_since if faults.stall_since is not None else now
        effective = min(frozen, now) - self.delay(node, chain)
        return ChainView(node, chain, now, effective, self.network_height(chain, effective), faults)

    # documents ------------------------------------------------------------------------------
    def node_info(self, node: int) -> dict[str, Any]:
        """GET / : version and identifiers."""
        top = self.topology
        return {
            "nodeVersion": top.node_version(node),
            "nodeId": top.node_id(node),
            "peerId": top.peer_id(node),
        }

    def health(self, node: int, now: float) -> dict[str, Any]:
        """GET /health : identifiers, peer-to-peer status and the chains this node tracks."""
        top = self.topology
        peers = self.connected_peers(node, now)
        return {
            "nodeVersion": top.node_version(node),
            "nodeId": top.node_id(node),
            "network": {
                "networkType": "p2p",
                "peerCount": len(peers),
                "peerId": top.peer_id(node),
                "networkPeers": [top.peer_id(p) for p in peers],
            },
            "blockchains": [top.chain_ids[c] for c in top.chains_of(node)],
        }

    def blockchain(self, node: int, chain: int, now: float) -> dict[str, Any]:
        """GET /blockchains/{id} : height, council, voting, queues, settings and peers."""
        top = self.topology
        view = self.view(node, chain, now)
        council = top.councils[chain]
        sessions = self.vote_sessions(view)
        in_council = node in council
        stages = [s["currentStage"] for s in sessions.values()]
        peers = [] if view.faults.peers_lost else self.connected_peers(node, now)
        return {
            "blockHeight": view.height,
            "lastMessageTime": iso_utc(
                self.block_time(chain, view.height) + self.delay(node, chain)
            ),
            "keyType": "secp256k1",
            "isInCouncil": in_council,
            "isVoting": in_council and bool(sessions),
            "isTimeToVote": in_council and 1 in stages,
            "syncing": view.faults.syncing,
            **self.queues(view),
            "councilMembers": self.council_view(node, chain, view.faults),
            "voteSessions": sessions,
            "consensus": self.consensus(chain),
            "features": self.features(chain),
            "blockchainPeers": [top.peer_id(p) for p in peers if top.tracks(p, chain)],
        }

    # parts ----------------------------------------------------------------------------------
    def vote_sessions(self, view: ChainView) -> dict[str, dict[str, Any]]:
        """The open session for the next height, if one is open at the view's moment."""
        council = self.topology.councils[view.chain]
        phase = ((view.effective - self.genesis) / self.interval) % 1.0
        if phase < SESSION_OPENS:
            return {}
        target = view.height + 1
        rounds = self.failed_rounds(view.chain, target) + 1
        position = (phase - SESSION_OPENS) / (1.0 - SESSION_OPENS) * rounds
        round_index = min(int(position), rounds - 1)
        stage = min(int((position - round_index) * STAGES), STAGES - 1)
        session_id = hex_id(16, self.topology.seed, "session", view.chain, target)
        block_hash = "" if stage == 0 else self.proposal_hash(view.chain, target, round_index)
        leader = council[(target + round_index) % len(council)]
        return {
            session_id: {
                "sessionId": session_id,
                "blockHash": block_hash,
                "blockHeight": target,
                "round": round_index + 1,
                "currentStage": stage,
                "currentLeader": self.topology.node_id(leader),
                "consensusRequired": len(council) * 2 // 3 + 1,
            }
        }

    def queues(self, view: ChainView) -> dict[str, int]:
        """Pending messages rise within a block and drain at the mint, with bursts; a
        stalled node's queues keep growing; delayed messages swell and ebb over ~25 blocks."""
        seed, node, chain = self.topology.seed, view.node, view.chain
        load = 5 + pick(30, seed, "load", node, chain)
        if self.topology.laggards[chain] == node:
            load *= 3
        blocks = (view.effective - self.genesis) / self.interval
        within = blocks % 1.0
        pending = load * (0.2 + within)
        if unit(seed, "burst", node, chain, math.floor(blocks / 10)) < 0.3:
            pending += 4 * load * triangle((blocks / 10) % 1.0)
        delayed = 0.0
        if unit(seed, "delayed", node, chain, math.floor(blocks / 25)) < 0.5:
            delayed = (5 + pick(40, seed, "delayed-amp", node, chain)) * triangle((blocks / 25) % 1)
        transactions = load / 2 * (0.1 + within)
        if view.faults.stall_since is not None:
            backlog = max(0.0, view.now - view.faults.stall_since) / self.interval
            pending += load * backlog
            transactions += load / 2 * backlog
        return {
            "pendingMessagesCount": int(pending),
            "delayedMessagesCount": int(delayed),
            "pendingTransactions": int(transactions),
        }

    def consensus(self, chain: int) -> dict[str, Any]:
        """Consensus settings as the chain's deployment configured them."""
        seed = self.topology.seed
        council = self.topology.councils[chain]
        return {
            "consensusType": "council_leader_proposal",
            "txKarmaThreshold": (1 + pick(10, seed, "karma", chain)) * 100,
            "txMintThreshold": (1 + pick(20, seed, "mint", chain)) * 50,
            "txMaxTimeTrigger": go_duration((1 + pick(4, seed, "trigger", chain)) * 15),
            "minMembers": min(len(council), 3),
            "consensusTimeout": go_duration((2 + pick(6, seed, "timeout", chain)) * 15),
        }

    def features(self, chain: int) -> dict[str, bool]:
        """The three documented flags plus this deployment's extra one."""
        seed = self.topology.seed
        return {
            "enableJoinCouncilOnStartup": pick(4, seed, "join", chain) != 0,
            "enableXMOnBlockMint": pick(2, seed, "xm", chain) == 0,
            "enableTxProof": True,
            EXTRA_FEATURE: pick(3, seed, "rotation", chain) == 0,
        }

    def connected_peers(self, node: int, now: float) -> list[int]:
        """Ring neighbours whose link is up now; links drop for a while and come back, a
        node that lost its peers or is down is dropped by the others too, and nodes under
        ``partition`` keep only the links among themselves."""
        name = self.topology.node_name
        if self._isolated(name(node)):
            return []
        side = self._partitioned(name(node))
        return [
            other
            for other in self.topology.ring_peers(node)
            if self._link_up(node, other, now)
            and not self._isolated(name(other))
            and self._partitioned(name(other)) == side
        ]

    def _partitioned(self, node_name: str) -> bool:
        return self.faults.node_wide(node_name, "partition")

    def _isolated(self, node_name: str) -> bool:
        return self.faults.node_wide(node_name, "peers_lost") or self.faults.node_wide(
            node_name, "down"
        )

    def _link_up(self, a: int, b: int, now: float) -> bool:
        low, high = min(a, b), max(a, b)
        seed, period = self.topology.seed, 9 * self.interval
        offset = unit(seed, "link-offset", low, high) * period
        epoch = math.floor((now - self.genesis + offset) / period)
        return unit(seed, "link", low, high, epoch) < 0.85
