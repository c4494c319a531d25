"""A hostile node: what one node of a council under an adversary's control answers, as a
rewrite of an honest simulated node's answers that a ``FakeNode`` standing in for it serves
(``FakeNode.stand_in``). The node keeps its place in the simulated network (its consensus,
its votes, the peer links the others report to it); only what it tells the exporter lies.

Each behaviour is switched on by setting its field of ``Hostility`` and off by setting it
back (the default: the honest node's answers unchanged):

- ``inflate``: every height it reports is that much higher (``blockHeight`` of each chain).
- ``rising``: the chains whose height it reports one higher at every read, however stalled
  the network is (a halt hidden behind one node's progress).
- ``identity``: the ``peerId`` it claims instead of its own, with no peers at all
  (``peerCount`` 0, ``networkPeers`` and ``blockchainPeers`` empty).
- ``fresh_hashes``: every block it serves has a new random hash, at every read.
- ``frozen``: chains only it lists (id -> the status document it serves for it, as is).
"""

from __future__ import annotations

import copy
import hashlib
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from ledger_simulator.ids import iso_utc


def frozen_chain_ids(count: int) -> list[str]:
    """``count`` chain ids no simulated network uses (64 hex digits, as most chain ids)."""
    return [hashlib.sha256(f"hostile-frozen-{index}".encode()).hexdigest()
            for index in range(count)]  # fmt: skip


@dataclass
class Hostility:
    """What the hostile node lies about now: see the module's docstring."""

    inflate: int = 0
    rising: frozenset[str] = frozenset()
    identity: str | None = None
    fresh_hashes: bool = False
    frozen: dict[str, dict[str, Any]] = field(default_factory=dict)
    _rises: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def freeze(self, chain_ids: list[str], template: dict[str, Any]) -> None:
        """List ``chain_ids`` besides the real chains, each serving a copy of ``template``
        (a chain's status document) that never changes."""
        self.frozen = {chain: copy.deepcopy(template) for chain in chain_ids}

    def rewrite(self, path: str, status: int, document: Any) -> tuple[int, Any]:
        """The answer to ``path`` given the honest node's: a ``FakeNode.stand_in`` rewrite."""
        parts = urlsplit(path)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        match segments:
            case [] | ["health"] if isinstance(document, dict):
                return status, self._identity(document)
            case ["blockchains"] if isinstance(document, list) and self.frozen:
                return status, [*document, *self.frozen]
            case ["blockchains", chain] if chain in self.frozen:
                return 200, self.frozen[chain]
            case ["blockchains", chain] if status == 200 and isinstance(document, dict):
                return status, self._chain(chain, document)
            case ["blockchains", _, "blocks"] if self.fresh_hashes and isinstance(document, dict):
                return status, {**document, "hash": secrets.token_hex(len(document["hash"]) // 2)}
        return status, document

    def _identity(self, document: dict[str, Any]) -> dict[str, Any]:
        lied = copy.deepcopy(document)
        if self.frozen and isinstance(lied.get("blockchains"), list):
            lied["blockchains"] = [*lied["blockchains"], *self.frozen]
        if self.identity is None:
            return lied
        if "network" in lied:  # /health
            network = lied["network"]
            network.update(peerId=self.identity, peerCount=0, networkPeers=[])
        else:  # /
            lied["peerId"] = self.identity
        return lied

    def _chain(self, chain: str, document: dict[str, Any]) -> dict[str, Any]:
        lied = dict(document)
        lied["blockHeight"] = document["blockHeight"] + self.inflate
        if chain in self.rising:
            with self._lock:
                self._rises[chain] = self._rises.get(chain, 0) + 1
                lied["blockHeight"] += self._rises[chain]
            lied["lastMessageTime"] = iso_utc(datetime.now(UTC).timestamp())
        if self.identity is not None:
            lied["blockchainPeers"] = []
        return lied
