"""Snapshots made as the daemon makes them, without a network: nodes n1..n4 (nodeIds
``key-1``..``key-4``, each linked to the others) answer what a test says, their answers read,
folded into a history and compared by the network view, on a clock the test steps. For the
status-page tests that need history (stalls, sessions, councils, maintenance)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.config.nodes import NodeConfig
from exporter.model.network import network_view, observe
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.model.snapshot import Snapshot
from exporter.poll.history import History
from exporter.poll.results import ChainResult, FetchError, NodeResult
from tests.support.documents import health_doc

#: The nodes' names and the nodeId each reports (council members are these keys).
KEYS = {"n1": "key-1", "n2": "key-2", "n3": "key-3", "n4": "key-4"}


class PolledFleet:
    """Nodes answering chain ``c1`` cycle by cycle, from ``start`` on the monotonic clock."""

    def __init__(self, start: float, **snapshot_fields: Any) -> None:
        """``snapshot_fields``: set on every snapshot (``wall_offset``, say)."""
        self.history = History()
        self.now = start
        self._fields = snapshot_fields

    def cycle(
        self, answers: Mapping[str, dict[str, Any] | None], after: float = 15, **fields: Any
    ) -> Snapshot:
        """One cycle ``after`` seconds on: each node's chain ``c1`` answer (None: down);
        ``fields`` set on this snapshot (``maintenance``, say)."""
        self.now += after
        results = [self._result(name, answer) for name, answer in answers.items()]
        nodes = self.history.record(results, self.now)
        observed = [
            observe(r.node.name, r.health, ((c.blockchain, c.reading, None) for c in r.chains))
            for r in results
            if r.health is not None
        ]
        view = network_view(observed, {}, 0, self.history.node_keys())
        return Snapshot(nodes, 0.1, self.now, network=view, **(self._fields | fields))

    @staticmethod
    def _result(name: str, answer: dict[str, Any] | None) -> NodeResult:
        node = NodeConfig(name, "http://x/")
        if answer is None:
            return NodeResult(node, None, FetchError(Reason.CONNECTION, "refused"), [], 0.1)
        peers = [other for other in KEYS if other != name]  # every node linked to the others
        network = {"peerCount": len(peers), "peerId": name, "networkPeers": peers}
        health = read_health(health_doc(["c1"]) | {"nodeId": KEYS[name], "network": network})
        return NodeResult(node, health, None, [ChainResult("c1", read_chain(answer))], 0.1)
