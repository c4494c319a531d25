"""Node answers as the API documents them, for a fake node to serve or a reader to read.

``health_doc`` and ``chain_doc`` are a ``/health`` and a ``/blockchains/{id}`` answer;
``serve_watched`` makes a fake node answer the watch list ``WATCH`` (a contract, its state
and a wallet on chain ``c1``).
"""

from __future__ import annotations

from typing import Any

from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from tests.support.fakenode import FakeNode


def health_doc(chains: list[str], peers: int = 4, version: str = "1.4.2") -> dict[str, Any]:
    """A /health answer as the API documents it."""
    return {
        "nodeVersion": version,
        "nodeId": "02ab" * 8,
        "network": {
            "networkType": "p2p",
            "peerCount": peers,
            "peerId": "12D3KooWpeer",
            "networkPeers": [f"peer-{i}" for i in range(peers)],
        },
        "blockchains": chains,
    }


def chain_doc(height: int, **overrides: Any) -> dict[str, Any]:
    """A /blockchains/{id} answer as the API documents it."""
    document: dict[str, Any] = {
        "blockHeight": height,
        "lastMessageTime": "2024-05-01T12:00:00Z",
        "keyType": "secp256k1",
        "isInCouncil": True,
        "isVoting": False,
        "isTimeToVote": False,
        "syncing": False,
        "pendingMessagesCount": 3,
        "delayedMessagesCount": 1,
        "pendingTransactions": 7,
        "councilMembers": ["k1", "k2", "k3", "k4"],
        "voteSessions": {
            "s1": {"sessionId": "s1", "blockHeight": height + 1, "round": 2, "currentStage": 1},
        },
        "consensus": {
            "consensusType": "council_leader_proposal",
            "txKarmaThreshold": 10,
            "txMintThreshold": 5,
            "txMaxTimeTrigger": "2s",
            "minMembers": 3,
            "consensusTimeout": "1m30s",
        },
        "features": {"enableJoinCouncilOnStartup": True, "enableTxProof": False},
        "blockchainPeers": ["p1", "p2"],
    }
    document.update(overrides)
    return document


#: A watch list of one contract (two state keys) and one wallet, both on chain ``c1``; the ids
#: need escaping, so the paths below are what the exporter must send.
WATCH = WatchConfig(
    contracts=(WatchedContract("c1", "0x/a", "token", ("supply", "paused")),),
    wallets=(WatchedWallet("c1", "w 1", "treasury"),),
)
CONTRACT = "/blockchains/c1/contracts/0x%2Fa"
WALLET = "/wallets/w%201?blockchainId=c1"


def serve_watched(fake: FakeNode, chains: list[str]) -> FakeNode:
    """``fake`` answers /health listing ``chains``, each chain, and every request of
    ``WATCH``: a paused contract, its state and a disabled wallet."""
    fake.play(health_doc(chains), {chain: chain_doc(10) for chain in chains})
    fake.set(CONTRACT, {"status": "PAUSED", "version": 3, "codeHash": "h"})
    fake.set(CONTRACT + "/state", {"version": 7, "state": {"supply": "12.5", "paused": True}})
    fake.set(WALLET, {"enabled": False, "satelliteWallets": [], "authGroups": {}})
    return fake
