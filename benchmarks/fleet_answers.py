"""What the fleet stand-ins of ``bench_ratio.py`` answer: the same rich answers on every node
(the default, as recorded in docs/performance.md), or answers varied node by node as a large
network's are (issue #35, "Performance must hold").

A varied fleet's node ``i`` has its own key, peer id and peers (drawn from the other nodes'
peer ids), and on every chain its own height, queue counts, last message time and vote rounds;
what a real network shares stays shared: the chain's council (the keys of nodes), its
consensus settings and feature flags, the ids of its open vote sessions, the checkpoint
block. Each ``/health`` a node answers starts its next cycle: its heights advance by one and
every third cycle its vote sessions move on to the next ones (rounds do not rise within a
session, so no leader counts failed rounds).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from bench_fleet import CHAINS

#: The height of the block the bare poller asks for (the exporter asks its own checkpoint).
CHECKPOINT = 18337
#: The first height of every chain; a node lags the highest by ``i % LAG`` blocks.
BASE_HEIGHT, LAG = 18342, 5
#: How many distinct peer ids the peers of the nodes are drawn from.
PEER_POOL = 4096
#: A vote session stays open this many cycles of the node before the next one opens.
SESSION_CYCLES = 3


@dataclass(frozen=True)
class AnswerShape:
    """How rich a varied fleet's answers are: council members, peers (network and chain),
    open vote sessions and feature flags per chain."""

    council: int
    peers: int
    sessions: int
    features: int


#: The ``--answers`` choices: ``rich`` is the default fleet, the same answers on every node.
SHAPES: dict[str, AnswerShape | None] = {
    "rich": None,
    "varied-small": AnswerShape(council=7, peers=8, sessions=1, features=3),
    "varied-large": AnswerShape(council=21, peers=40, sessions=3, features=12),
}


def node_key(index: int) -> str:
    """Node ``index``'s key: 66 characters, as a compressed secp256k1 key."""
    return f"02{index:064x}"


def peer_id(index: int) -> str:
    """Peer ``index``'s id: 52 characters, as a libp2p peer id."""
    return f"12D3KooW{index:044d}"


def block_hash(height: int) -> str:
    """The hash of the block at ``height``: the same on every node (no fork)."""
    return f"{height:064x}"


def node_of(path: bytes) -> tuple[int, list[bytes]] | None:
    """``/n<i>/<rest>`` as (i, rest split on ``/``); None for another path."""
    parts = path.split(b"/")
    if len(parts) < 3 or parts[0] or not parts[1].startswith(b"n") or not parts[1][1:].isdigit():
        return None
    return int(parts[1][1:]), parts[2:]


class VariedAnswers:
    """The answers of a fleet whose nodes differ (see the module's docstring). Each node's
    fixed parts are made on its first request and kept as a template; a request fills in
    the node's figures of its current cycle."""

    def __init__(self, shape: AnswerShape) -> None:
        self.shape = shape
        self.cycles: dict[int, int] = {}  # node -> its /health answers so far
        self._health: dict[int, bytes] = {}
        self._templates: dict[tuple[int, str], tuple[list[bytes], list[str]]] = {}
        self._sessions: dict[tuple[str, int], dict[str, bytes]] = {}  # by chain and period

    def council(self, chain: str) -> list[str]:
        """The chain's council: the keys of ``shape.council`` nodes, a different run per chain."""
        first = CHAINS.index(chain) * self.shape.council if chain in CHAINS else 0
        return [node_key(first + member) for member in range(self.shape.council)]

    def peers(self, index: int) -> list[str]:
        """Node ``index``'s peers: ``shape.peers`` peer ids of other nodes, its own draw."""
        drawn = random.Random(index).sample(range(PEER_POOL), self.shape.peers + 1)
        return [peer_id(p) for p in drawn if p != index][: self.shape.peers]

    def answer(self, path: bytes) -> bytes | None:
        """The JSON body of ``path`` (``/n<i>/health``, ``/n<i>/blockchains/<id>`` or its
        ``/blocks?height=<h>``); None for any other path."""
        found = node_of(path)
        if found is None:
            return None
        index, rest = found
        if rest == [b"health"]:
            self.cycles[index] = self.cycles.get(index, -1) + 1
            if index not in self._health:
                self._health[index] = json.dumps(self.health(index)).encode()
            return self._health[index]
        if len(rest) == 2 and rest[0] == b"blockchains":
            return self.chain_status(index, rest[1].decode())
        if len(rest) == 3 and rest[0] == b"blockchains" and rest[2].startswith(b"blocks?height="):
            height = rest[2].split(b"=", 1)[1]
            if not height.isdigit():
                return None
            return json.dumps(block(int(height))).encode()
        return None

    def health(self, index: int) -> dict[str, Any]:
        """Node ``index``'s ``/health``: its key, its peer id and its peers."""
        peers = self.peers(index)
        return {
            "nodeVersion": "1.4.2",
            "nodeId": node_key(index),
            "network": {
                "networkType": "p2p",
                "peerCount": len(peers),
                "peerId": peer_id(index),
                "networkPeers": peers,
            },
            "blockchains": list(CHAINS),
        }

    def chain_status(self, index: int, chain: str) -> bytes:
        """Node ``index``'s status of ``chain`` in its current cycle."""
        cycle = self.cycles.get(index, 0)
        compiled = self._templates.get((index, chain))
        if compiled is None:
            compiled = self._templates[index, chain] = compile_template(self.template(index, chain))
        literals, names = compiled
        figures = self.figures(index, chain, cycle)
        parts = [literals[0]]
        for name, literal in zip(names, literals[1:], strict=True):
            parts += (figures[name], literal)
        return b"".join(parts)

    def figures(self, index: int, chain: str, cycle: int) -> dict[str, bytes]:
        """What differs from node to node and cycle to cycle, filled into the template."""
        figures = self._sessions.get((chain, cycle // SESSION_CYCLES))
        if figures is None:
            figures = self._sessions[chain, cycle // SESSION_CYCLES] = {}
            first = BASE_HEIGHT + 1 + cycle // SESSION_CYCLES
            for number in range(self.shape.sessions):
                figures[f"session{number}"] = f"{chain}-s{first + number}".encode()
                figures[f"height{number}"] = b"%d" % (first + number)
                figures[f"hash{number}"] = block_hash(first + number).encode()
        moment = cycle + index
        return {
            "height": b"%d" % (BASE_HEIGHT + cycle - index % LAG),
            "time": b"2024-05-01T12:%02d:%02dZ" % (moment // 60 % 60, moment % 60),
            "pending": b"%d" % ((index * 31 + cycle) % 50),
            "delayed": b"%d" % ((index + cycle) % 7),
            "transactions": b"%d" % ((index * 17 + cycle * 3) % 200),
            "time_to_vote": b"true" if moment % 2 else b"false",
            **figures,
        }

    def template(self, index: int, chain: str) -> str:
        """Node ``index``'s status of ``chain`` as a ``%`` template: its fixed parts (council,
        settings, features, its peers and vote rounds) written, its figures left as fields."""
        council, shape = self.council(chain), self.shape
        member = node_key(index) in council
        sessions = {}
        for number in range(shape.sessions):
            round_ = 1 + (index + number) % 3  # differs from node to node, fixed in a session
            sessions[f"%(session{number})s"] = {
                "sessionId": f"%(session{number})s",
                "blockHash": f"%(hash{number})s",
                "blockHeight": f"%(height{number})s",
                "round": round_,
                "currentStage": (index + number) % 3,
                "currentLeader": council[(number + round_) % len(council)],
                "consensusRequired": len(council) * 2 // 3 + 1,
            }
        status = {
            "blockHeight": "%(height)s",
            "lastMessageTime": "%(time)s",
            "keyType": "secp256k1",
            "isInCouncil": member,
            "isVoting": member,
            "isTimeToVote": "%(time_to_vote)s",
            "syncing": False,
            "pendingMessagesCount": "%(pending)s",
            "delayedMessagesCount": "%(delayed)s",
            "pendingTransactions": "%(transactions)s",
            "councilMembers": council,
            "voteSessions": sessions,
            "consensus": {
                "consensusType": "council_leader_proposal",
                "txKarmaThreshold": 10,
                "txMintThreshold": 5,
                "txMaxTimeTrigger": "2s",
                "minMembers": len(council) * 2 // 3 + 1,
                "consensusTimeout": "1m30s",
            },
            "features": {f"enableFeature{n:02d}": n % 3 != 0 for n in range(shape.features)},
            "blockchainPeers": self.peers(index),
        }
        text = json.dumps(status).replace("%", "%%").replace("%%(", "%(")
        # the numbers and booleans among the fields are written bare, not as strings
        for field in ("height", "pending", "delayed", "transactions", "time_to_vote"):
            text = text.replace(f'"%({field})s"', f"%({field})s")
        for number in range(shape.sessions):
            text = text.replace(f'"%(height{number})s"', f"%(height{number})s")
        return text


def compile_template(template: str) -> tuple[list[bytes], list[str]]:
    """A ``%(name)s`` template as its literal pieces and the names between them (one piece
    more than names), so that filling it in is one join."""
    pieces = re.split(r"%\((\w+)\)s", template)
    literals = [piece.replace("%%", "%").encode() for piece in pieces[::2]]
    return literals, pieces[1::2]


def block(height: int) -> dict[str, Any]:
    """The block at ``height``, as every node sends it."""
    return {
        "height": height,
        "hash": "7c" * 32 if height == CHECKPOINT else block_hash(height),
        "previousHash": "3e" * 32,
        "transactions": [],
    }
