"""On-chain content of a simulated chain: blocks, contracts, contract state, traces, wallets.

Identifiers carry the keys they were derived from (a transaction id ends in its height and
index, a wallet address in its number), so a lookup is checked by recomputing the id rather
than by searching stored data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ledger_simulator.errors import NotFoundError
from ledger_simulator.faults import ActiveFaults
from ledger_simulator.ids import hex_id, iso_utc, pick, public_key
from ledger_simulator.state import ChainView, SimState

WALLETS = 64
DEPLOY_INDEX = 0xFFFF  # transaction index reserved for a contract's deployment
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ADDRESS = re.compile(r"0x[0-9a-f]{40}")


@dataclass(frozen=True)
class ContractKind:
    """What a deployed contract is: name, description, tags and VM."""

    name: str
    description: str
    tags: tuple[str, ...]
    vm_type: str


KINDS = (
    ContractKind("KarmaToken", "Fungible karma token of the network", ("token", "karma"), "wasm"),
    ContractKind("AssetRegistry", "Registry of tokenised assets", ("registry", "assets"), "wasm"),
    ContractKind("Escrow", "Escrow for cross-chain settlement", ("escrow", "xm"), "evm"),
)
STATUSES = ("ACTIVE", "ACTIVE", "PAUSED", "UPGRADED")


def wallet_address(seed: int, number: int) -> str:
    """Address of wallet ``number``: 32 derived hex digits then the number in 8 hex digits."""
    return "0x" + hex_id(32, seed, "wallet", number) + f"{number:08x}"


class Ledger:
    """Serves the content endpoints (5 to 9) for one node, at the height that node has."""

    def __init__(self, state: SimState) -> None:
        self.state = state
        self.seed = state.topology.seed

    # discovery ------------------------------------------------------------------------------
    def contract_addresses(self, chain: int) -> list[str]:
        """Addresses of the contracts deployed on ``chain``."""
        return ["0x" + hex_id(40, self.seed, "contract", chain, k) for k in range(len(KINDS))]

    def wallet_addresses(self) -> list[str]:
        """Addresses of every wallet (wallets exist on every chain)."""
        return [wallet_address(self.seed, k) for k in range(WALLETS)]

    def fault_targets(self, fault: str, chain: int | None) -> set[str]:
        """Addresses object fault ``fault`` may name: every wallet for ``wallet_disabled``,
        else the contracts of ``chain`` (of any chain when None)."""
        if fault == "wallet_disabled":
            return set(self.wallet_addresses())
        chains = range(len(self.state.topology.chain_ids)) if chain is None else (chain,)
        return {address for index in chains for address in self.contract_addresses(index)}

    def tx_id(self, chain: int, height: int, index: int) -> str:
        """64 hex digits: 48 derived, then the height (12) and index (4) in hex."""
        return hex_id(48, self.seed, "tx", chain, height, index) + f"{height:012x}{index:04x}"

    def tx_count(self, chain: int, height: int) -> int:
        """Transactions in block ``height`` (0 to 3)."""
        return 0 if height == 0 else pick(4, self.seed, "ntx", chain, height)

    def tx_contract(self, chain: int, height: int, index: int) -> int:
        """Which contract a transaction called."""
        return pick(len(KINDS), self.seed, "tx-contract", chain, height, index)

    # endpoint 5 -----------------------------------------------------------------------------
    def block(self, view: ChainView, height: int) -> dict[str, Any]:
        """Block ``height`` as the node of ``view`` has it: blocks exist for 0 .. its height;
        when minted, by whom and in which round as the chain's consensus unfolded."""
        if height > view.height:
            raise NotFoundError(f"block {height} not found: this node's height is {view.height}")
        state, node, chain = self.state, view.node, view.chain
        txs = [self.tx_id(chain, height, i) for i in range(self.tx_count(chain, height))]
        session = view.timeline.layout(height)
        return {
            "height": height,
            "hash": state.node_block_hash(node, chain, height),
            "previousHash": state.node_block_hash(node, chain, height - 1) if height else "",
            "timestamp": iso_utc(view.timeline.mint(height)),
            "proposer": state.topology.node_id(session.leader(session.failed)),
            "round": session.failed + 1,
            "transactionCount": len(txs),
            "transactions": txs,
        }

    # endpoints 6 and 7 ----------------------------------------------------------------------
    def contract_number(self, chain: int, address: str) -> int:
        """Index of the contract at ``address`` on ``chain``; NotFoundError otherwise."""
        try:
            return self.contract_addresses(chain).index(address.lower())
        except ValueError:
            raise NotFoundError(f"contract {address!r} not found on this blockchain") from None

    def deploy_height(self, chain: int, number: int) -> int:
        """Height at which contract ``number`` was deployed (before the simulation began)."""
        return 1 + pick(self.state.base_height(chain) - 100, self.seed, "deploy", chain, number)

    def creator(self, chain: int, number: int) -> str:
        """Wallet address that deployed contract ``number``."""
        return wallet_address(self.seed, pick(WALLETS, self.seed, "creator", chain, number))

    def status(self, chain: int, number: int) -> str:
        """Contract status; the token contract is always ACTIVE."""
        return "ACTIVE" if number == 0 else STATUSES[pick(4, self.seed, "status", chain, number)]

    def status_and_version(
        self, chain: int, number: int, faults: ActiveFaults | None
    ) -> tuple[str, int]:
        """Status and version as a node serves them: ``contract_upgraded`` bumps the version
        (and so the code hash) and reports UPGRADED; ``contract_paused`` reports PAUSED."""
        version = 1 + pick(3, self.seed, "contract-version", chain, number)
        status = self.status(chain, number)
        address = self.contract_addresses(chain)[number]
        if faults is not None and faults.on_object("contract_upgraded", address):
            version, status = version + 1, "UPGRADED"
        if faults is not None and faults.on_object("contract_paused", address):
            status = "PAUSED"
        return status, version

    def contract(
        self, chain: int, address: str, faults: ActiveFaults | None = None
    ) -> dict[str, Any]:
        """Contract metadata, as shaped by the node's object faults."""
        number = self.contract_number(chain, address)
        kind = KINDS[number]
        status, version = self.status_and_version(chain, number, faults)
        return {
            "blockchainId": self.state.topology.chain_ids[chain],
            "address": self.contract_addresses(chain)[number],
            "creator": self.creator(chain, number),
            "deploymentTxId": self.tx_id(chain, self.deploy_height(chain, number), DEPLOY_INDEX),
            "codeHash": hex_id(64, self.seed, "code", chain, number, version),
            "vmType": kind.vm_type,
            "version": version,
            "status": status,
            "metadata": {
                "name": kind.name,
                "description": kind.description,
                "tags": list(kind.tags),
            },
        }

    def contract_state(
        self, chain: int, address: str, node_height: int, faults: ActiveFaults | None = None
    ) -> dict[str, Any]:
        """Contract state as of the node's height; its version climbs as the chain grows."""
        number = self.contract_number(chain, address)
        status, _ = self.status_and_version(chain, number, faults)
        updates = max(0, node_height - self.deploy_height(chain, number)) // 5
        return {
            "blockchainId": self.state.topology.chain_ids[chain],
            "address": self.contract_addresses(chain)[number],
            "version": 1 + updates,
            "state": {
                "name": KINDS[number].name,
                "owner": self.creator(chain, number),
                "totalSupply": str(1_000_000 + 37 * updates),
                "holders": 10 + updates % 997,
                "paused": status == "PAUSED",
                "lastUpdatedHeight": node_height,
            },
        }

    # endpoint 9 -----------------------------------------------------------------------------
    def wallet(
        self, chain: int, address: str, faults: ActiveFaults | None = None
    ) -> dict[str, Any]:
        """Wallet ``address`` as registered on ``chain`` (``wallet_disabled``: not enabled)."""
        number = self.wallet_number(address)
        family = number - number % 8
        parent = wallet_address(self.seed, family) if number % 8 in (1, 2) else ""
        satellites = []
        if number % 8 == 0:
            satellites = [wallet_address(self.seed, n) for n in (number + 1, number + 2)]
        admin = number < 4
        enabled = admin or pick(10, self.seed, "enabled", chain, number) != 0
        if faults is not None and faults.on_object(
            "wallet_disabled", wallet_address(self.seed, number)
        ):
            enabled = False
        groups = {}
        for group in ("Wallet", "Contract", "Council"):
            flags = pick(16, self.seed, "auth", chain, number, group)
            groups[group] = {
                op: admin or bool(flags >> bit & 1) or op == "read"
                for bit, op in enumerate(("create", "read", "update", "delete"))
            }
        return {
            "publicKey": public_key(self.seed, "wallet", number),
            "address": wallet_address(self.seed, number),
            "parent": parent,
            "enabled": enabled,
            "satelliteWallets": satellites,
            "authGroups": groups,
            "keyType": "secp256k1",
        }

    def wallet_number(self, address: str) -> int:
        """Number of the wallet at ``address``; NotFoundError when no wallet has it."""
        text = address.lower()
        if _ADDRESS.fullmatch(text):
            number = int(text[-8:], 16)
            if number < WALLETS and wallet_address(self.seed, number) == text:
                return number
        raise NotFoundError(f"wallet {address!r} not found")

    # endpoint 8 -----------------------------------------------------------------------------
    def trace(self, view: ChainView, address: str, tx: str) -> dict[str, Any]:
        """Events and execution trace of transaction ``tx`` on contract ``address``, as the
        node of ``view`` has it."""
        chain = view.chain
        number = self.contract_number(chain, address)
        height, index = self._locate(chain, number, tx.lower(), view.height)
        timestamp = iso_utc(view.timeline.mint(height))
        if index == DEPLOY_INDEX:
            creator = self.creator(chain, number)
            events: list[dict[str, Any]] = [
                {"name": "ContractDeployed", "timestamp": timestamp, "data": {"creator": creator}}
            ]
        else:
            events = self._transfer_events(chain, height, index, timestamp)
        return {
            "blockchainId": self.state.topology.chain_ids[chain],
            "address": self.contract_addresses(chain)[number],
            "transactionId": tx.lower(),
            "events": events,
            "trace": {
                "steps": 40 + pick(900, self.seed, "steps", chain, height, index),
                "gasUsed": 21000 + pick(90000, self.seed, "gas", chain, height, index),
            },
        }

    def _locate(self, chain: int, number: int, tx: str, node_height: int) -> tuple[int, int]:
        """Height and index of ``tx`` when it ran on contract ``number`` and this node has its
        block; NotFoundError otherwise."""
        if _HEX64.fullmatch(tx):
            height, index = int(tx[48:60], 16), int(tx[60:], 16)
            if index == DEPLOY_INDEX:
                known = height == self.deploy_height(chain, number)
            else:
                known = (
                    height <= node_height
                    and index < self.tx_count(chain, height)
                    and self.tx_contract(chain, height, index) == number
                )
            if known and height <= node_height and self.tx_id(chain, height, index) == tx:
                return height, index
        raise NotFoundError(f"transaction {tx!r} not found for contract {number} on this node")

    def _transfer_events(
        self, chain: int, height: int, index: int, timestamp: str
    ) -> list[dict[str, Any]]:
        """A Transfer (with indexed arguments) and the two BalanceUpdated events it causes."""
        sender = wallet_address(self.seed, pick(WALLETS, self.seed, "from", chain, height, index))
        receiver = wallet_address(self.seed, pick(WALLETS, self.seed, "to", chain, height, index))
        amount = 1 + pick(10_000, self.seed, "amount", chain, height, index)
        balances = [pick(1_000_000, self.seed, "balance", chain, height, index, s) for s in "ft"]
        return [
            {
                "name": "Transfer",
                "timestamp": timestamp,
                "indexedArgs": {"from": sender, "to": receiver},
                "data": {"from": sender, "to": receiver, "amount": str(amount)},
            },
            {
                "name": "BalanceUpdated",
                "timestamp": timestamp,
                "data": {"account": sender, "balance": str(balances[0])},
            },
            {
                "name": "BalanceUpdated",
                "timestamp": timestamp,
                "data": {"account": receiver, "balance": str(balances[1])},
            },
        ]
