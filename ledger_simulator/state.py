"""The moving state of a simulated network, computed lazily from the clock.

Heights advance one block per interval; each node sees a chain a fixed delay late (one node
per chain lags several blocks). Vote sessions open after each block and close when the next
is minted, climbing rounds when a leader fails (ledger_simulator.consensus: also how the
consensus faults bend this). Queues rise within a block and drain at the mint, with bursts;
peer links drop and come back. All of it is a pure function of (seed, node, chain, time) and
the faults in force, so nothing is stored per node.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ledger_simulator import settings
from ledger_simulator.consensus import Councils, Failing, Pace, Schedule, Timeline
from ledger_simulator.faults import ActiveFaults, FaultRegistry
from ledger_simulator.ids import hex_id, iso_utc, pick, triangle, unit
from ledger_simulator.topology import Topology

SCHEDULES_KEPT = 32  # leader_failing schedules remembered (one per set of faults in force)


@dataclass(frozen=True)
class ChainView:
    """One node's view of one chain at one moment, with the faults that shape it."""

    node: int
    chain: int
    now: float
    effective: float  # the time the node's chain state corresponds to (frozen when stalled)
    height: int
    faults: ActiveFaults
    timeline: Timeline


class SimState:
    """Derives every document a node serves from the topology, the faults and the time."""

    def __init__(
        self, topology: Topology, faults: FaultRegistry, block_interval: float, genesis: float
    ) -> None:
        self.topology = topology
        self.faults = faults
        self.interval = block_interval
        self.genesis = genesis
        self._schedules: OrderedDict[tuple[object, ...], Schedule] = OrderedDict()
        self._schedules_lock = threading.Lock()

    # time model -----------------------------------------------------------------------------
    def base_height(self, chain: int) -> int:
        """The chain's height when the simulation started (chains are not new)."""
        return 1000 + pick(40000, self.topology.seed, "base", chain)

    def round_timeout(self, chain: int) -> float:
        """The chain's round timer in the simulation's time: its ``consensusTimeout`` in
        block intervals as its ``txMaxTimeTrigger`` is one."""
        return settings.round_timeout(self.topology.seed, chain, self.interval)

    def delay(self, node: int, chain: int) -> float:
        """How late ``node`` sees ``chain``: under a block for most, several for the laggard."""
        seed = self.topology.seed
        lag = pick(2, seed, "lag", node, chain)
        if self.topology.laggards[chain] == node:
            lag = 4 + pick(6, seed, "laggard-lag", chain)
        return (lag + 0.6 * unit(seed, "phase", node, chain)) * self.interval

    def timeline(self, chain: int, faults: ActiveFaults) -> Timeline:
        """How ``chain`` unfolds under the consensus faults in ``faults``."""
        given = [s.delay_seconds for s in faults.targets("leader_failing").values()]
        if faults.stuck is not None:
            given.append(faults.stuck.delay_seconds)
        timer = max(given, default=0.0) or self.round_timeout(chain)  # the longest given
        pace = Pace(
            self.topology.seed,
            chain,
            self.interval,
            self.genesis,
            self.base_height(chain),
            timer,
        )
        councils = self.councils(chain, faults)
        failing = tuple(
            sorted(
                (state.since, self.topology.node_index(name))
                for name, state in faults.targets("leader_failing").items()
                if name is not None
            )
        )
        timeline = Timeline(pace, councils, self._schedule(pace, councils, failing))
        if faults.stuck is not None:
            return timeline.stopped(faults.stuck.since, session=True)
        if faults.idle_since is not None:
            return timeline.stopped(faults.idle_since, session=False)
        return timeline

    def councils(self, chain: int, faults: ActiveFaults) -> Councils:
        """The chain's council and, in switch order, each ``council_change``: the member it
        names (default the last) leaves, and the first node tracking the chain outside the
        council joins (none left: the council shrinks; a council of one stays)."""
        top = self.topology
        council = top.councils[chain]
        steps = []
        changes = sorted(faults.targets("council_change").items(), key=lambda kv: kv[1].since)
        for name, state in changes:
            leaving = council[-1] if name is None else top.node_index(name)
            joining = next(
                (n for n in range(top.node_count) if top.tracks(n, chain) and n not in council),
                None,
            )
            if leaving not in council or (len(council) == 1 and joining is None):
                continue
            kept = [member for member in council if member != leaving]
            council = tuple(sorted(kept if joining is None else [*kept, joining]))
            steps.append((state.since, council))
        return Councils(top.councils[chain], tuple(steps))

    def _schedule(self, pace: Pace, councils: Councils, failing: Failing) -> Schedule | None:
        """The shared schedule of a chain with failing leaders (None without any)."""
        if not failing:
            return None
        key = (pace, councils, failing)
        with self._schedules_lock:
            schedule = self._schedules.get(key)
            if schedule is None:
                anchor = pace.grid_height(min(since for since, _ in failing))
                schedule = self._schedules[key] = Schedule(pace, councils, failing, anchor)
                if len(self._schedules) > SCHEDULES_KEPT:
                    self._schedules.popitem(last=False)
            self._schedules.move_to_end(key)
            return schedule

    def block_hash(self, chain: int, height: int) -> str:
        """Hash of minted block ``height``."""
        return hex_id(64, self.topology.seed, "block", chain, height)

    def node_block_hash(self, node: int, chain: int, height: int) -> str:
        """Hash of block ``height`` as ``node`` serves it: a node under ``fork`` has blocks of
        its own from the fork height on (the first block after the switch, unless given)."""
        faults = self.faults.active(self.topology.node_name(node), self.topology.chain_ids[chain])
        fork = faults.fork
        if fork is not None:
            start = fork.height
            if start is None:
                moment = fork.since - self.delay(node, chain)
                start = self.timeline(chain, faults).height_at(moment) + 1
            if height >= start:
                return hex_id(64, self.topology.seed, "fork", node, chain, height)
        return self.block_hash(chain, height)

    def council_view(self, view: ChainView) -> list[str]:
        """The council as the node reports it; under ``other_council`` its last member is
        swapped for a node outside the council (or dropped when every node sits in it)."""
        top = self.topology
        council = list(view.timeline.council_at(view.effective))
        if view.faults.other_council:
            outsiders = [n for n in range(top.node_count) if n not in council]
            council = council[:-1] + outsiders[:1]
        return [top.node_id(m) for m in council]

    def view(self, node: int, chain: int, now: float) -> ChainView:
        """The node's view of the chain at ``now``; a stall freezes it at the stall time."""
        faults = self.faults.active(self.topology.node_name(node), self.topology.chain_ids[chain])
        frozen = faults.stall_since if faults.stall_since is not None else now
        effective = min(frozen, now) - self.delay(node, chain)
        timeline = self.timeline(chain, faults)
        height = timeline.height_at(effective)
        return ChainView(node, chain, now, effective, height, faults, timeline)

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
        sessions = self.vote_sessions(view)
        in_council = node in view.timeline.council_at(view.effective)
        stages = [s["currentStage"] for s in sessions.values()]
        peers = [] if view.faults.peers_lost else self.connected_peers(node, now)
        consensus, features, key_type = self.settings(chain, view.faults)
        return {
            "blockHeight": view.height,
            "lastMessageTime": iso_utc(view.timeline.mint(view.height) + self.delay(node, chain)),
            "keyType": key_type,
            "isInCouncil": in_council,
            "isVoting": in_council and bool(sessions),
            "isTimeToVote": in_council and 1 in stages,
            "syncing": view.faults.syncing,
            **self.queues(view),
            "councilMembers": self.council_view(view),
            "voteSessions": sessions,
            "consensus": consensus,
            "features": features,
            "blockchainPeers": [top.peer_id(p) for p in peers if top.tracks(p, chain)],
        }

    # parts ----------------------------------------------------------------------------------
    def vote_sessions(self, view: ChainView) -> dict[str, dict[str, Any]]:
        """The open session for the next height, if one is open at the view's moment."""
        found = view.timeline.session_at(view.effective)
        if found is None:
            return {}
        layout, round_index, stage = found
        seed, chain, height = self.topology.seed, view.chain, layout.height
        session_id = hex_id(16, seed, "session", chain, height)
        if stage == 0:
            block_hash = ""
        elif layout.mints and round_index == layout.failed:  # the proposal that is minted
            block_hash = self.block_hash(chain, height)
        else:
            block_hash = hex_id(64, seed, "proposal", chain, height, round_index)
        return {
            session_id: {
                "sessionId": session_id,
                "blockHash": block_hash,
                "blockHeight": height,
                "round": round_index + 1,
                "currentStage": stage,
                "currentLeader": self.topology.node_id(layout.leader(round_index)),
                "consensusRequired": layout.required,
            }
        }

    def queues(self, view: ChainView) -> dict[str, int]:
        """Pending messages rise within a block and drain at the mint, with bursts (a chain
        whose next block does not come keeps rising; a stalled node's queues keep growing);
        delayed messages swell and ebb over ~25 blocks; an idle chain has nothing queued."""
        if view.timeline.idle_at(view.effective):
            return dict.fromkeys(
                ("pendingMessagesCount", "delayedMessagesCount", "pendingTransactions"), 0
            )
        seed, node, chain = self.topology.seed, view.node, view.chain
        load = 5 + pick(30, seed, "load", node, chain)
        if self.topology.laggards[chain] == node:
            load *= 3
        blocks = (view.effective - self.genesis) / self.interval
        within = (view.effective - view.timeline.mint(view.height)) / self.interval
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

    def settings(
        self, chain: int, faults: ActiveFaults
    ) -> tuple[dict[str, Any], dict[str, bool], str]:
        """The chain's ``consensus``, ``features`` and ``keyType`` as the node reports them:
        its deployment's, with the settings under ``consensus_drift`` changed."""
        seed = self.topology.seed
        consensus = settings.consensus(seed, chain, len(self.topology.councils[chain]))
        features = settings.features(seed, chain)
        reported: dict[str, Any] = {**consensus, **features, "keyType": settings.KEY_TYPE}
        for name, state in faults.targets("consensus_drift").items():
            if name is not None:
                reported[name] = settings.drifted(name, reported[name], state.value)
        return (
            {key: reported[key] for key in consensus},
            {key: reported[key] for key in features},
            reported["keyType"],
        )

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
        """Whether the link is up: a node's two nearest ring neighbours stay linked, the
        other links drop now and then (about one epoch in seven). So a healthy node keeps 2
        peers or more and the ring keeps the network whole: LedgerNodePeersLow, PeersLost and
        NetworkPartitioned need a fault, not a draw (on a 4-node demo, a node's three links
        all down at once, about one epoch in 300, had them pending)."""
        low, high = min(a, b), max(a, b)
        if (high - low) in (1, self.topology.node_count - 1):  # ring neighbours
            return True
        seed, period = self.topology.seed, 9 * self.interval
        offset = unit(seed, "link-offset", low, high) * period
        epoch = math.floor((now - self.genesis + offset) / period)
        return unit(seed, "link", low, high, epoch) < 0.85
