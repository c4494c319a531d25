"""The admin endpoint under ``/-/sim/``: switch faults, list faults, nodes and chain content."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ledger_simulator.api import Response, error_response, json_response
from ledger_simulator.errors import SimulatorError
from ledger_simulator.faults import FaultRegistry, FaultSpec
from ledger_simulator.ids import DurationError, parse_go_duration
from ledger_simulator.ledger import Ledger

ENDPOINTS = {
    "faults": "GET lists the faults in force; POST switches one (JSON body)",
    "nodes": "GET lists node names with their base URL and blockchain ids",
    "blockchains": "GET lists per blockchain its contract addresses, round timeout and "
    "council, and the wallet addresses",
}
SetFault = Callable[[str, str, bool, "str | None", float, "int | None", "str | None", object], None]


class AdminError(SimulatorError, ValueError):
    """A POST /-/sim/faults body is not what the endpoint accepts."""


class AdminApi:
    """Answers admin requests; ``set_fault`` is the network's (it may rebind ports)."""

    def __init__(
        self,
        faults: FaultRegistry,
        ledger: Ledger,
        set_fault: SetFault,
        nodes: Callable[[], dict[str, Any]],
    ) -> None:
        self.faults = faults
        self.ledger = ledger
        self.set_fault = set_fault
        self.nodes = nodes

    def handle(self, method: str, segments: list[str], body: bytes) -> Response:
        """Route ``/-/sim/<segments>``."""
        name = "/".join(segments)
        if name and name not in ENDPOINTS:
            return error_response(404, f"no such admin endpoint: /-/sim/{name}")
        allowed = "GET, POST" if name == "faults" else "GET"
        if method not in allowed.split(", "):
            return error_response(405, f"method {method} not allowed", Allow=allowed)
        if name == "faults" and method == "POST":
            return self.post_fault(body)
        if name == "faults":
            return json_response(200, {"faults": self.faults.listing()})
        if name == "nodes":
            return json_response(200, self.nodes())
        if name == "blockchains":
            return json_response(200, self.catalog())
        return json_response(200, {"endpoints": {f"/-/sim/{k}": v for k, v in ENDPOINTS.items()}})

    def post_fault(self, body: bytes) -> Response:
        """Switch one fault from a JSON body; 400 with the reason when it is refused."""
        try:
            enabled, spec = parse_fault_request(body)
            self.set_fault(
                spec.node,
                spec.fault,
                enabled,
                spec.chain,
                spec.delay_seconds,
                spec.height,
                spec.target,
                spec.value,
            )
        except SimulatorError as error:
            return error_response(400, str(error))
        return json_response(200, {"faults": self.faults.listing()})

    def catalog(self) -> dict[str, Any]:
        """Per chain its contract addresses, the round timer of its consensus in seconds of
        the simulation and its deployed council's node names; the wallet addresses: starting points
        for endpoints 6 to 9 (transaction ids come from blocks and from contracts'
        deploymentTxId) and for the consensus faults."""
        state = self.ledger.state
        top = state.topology
        return {
            "blockchains": {
                chain_id: {
                    "contracts": self.ledger.contract_addresses(index),
                    "round_timeout_seconds": round(state.round_timeout(index), 6),
                    "council": [top.node_name(member) for member in top.councils[index]],
                }
                for index, chain_id in enumerate(top.chain_ids)
            },
            "wallets": self.ledger.wallet_addresses(),
        }


def parse_fault_request(body: bytes) -> tuple[bool, FaultSpec]:
    """``{"node", "fault", "enabled"?, "chain"?, "delay_seconds"?, "height"?, "target"?,
    "value"?}`` -> whether to switch it on, and the checked request."""
    try:
        document = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as error:
        raise AdminError(f"body is not JSON ({error})") from None
    if not isinstance(document, dict):
        raise AdminError('body must be a JSON object such as {"node": "node-1", "fault": "stall"}')
    node, fault = document.get("node"), document.get("fault")
    enabled = document.get("enabled", True)
    chain = document.get("chain")
    if not isinstance(node, str) or not isinstance(fault, str):
        raise AdminError('"node" and "fault" are required strings')
    if not isinstance(enabled, bool):
        raise AdminError('"enabled" must be true or false')
    if chain is not None and not isinstance(chain, str):
        raise AdminError('"chain" must be a blockchain id string or null')
    height = document.get("height")
    if height is not None and (isinstance(height, bool) or not isinstance(height, int)):
        raise AdminError('"height" must be a block height (an integer) or null')
    target = document.get("target")
    if target is not None and not isinstance(target, str):
        raise AdminError(
            '"target" must be a string (a contract or wallet address, a council member, a '
            "setting) or null"
        )
    value = document.get("value")
    if value is not None and not isinstance(value, str | int | bool):
        raise AdminError('"value" must be a string, a whole number, true or false, or null')
    delay = parse_delay(document.get("delay_seconds"))
    return enabled, FaultSpec(node, fault, chain, delay, height, target, value)


def parse_delay(value: object) -> float:
    """``delay_seconds``: a number of seconds or a Go duration string; absent means 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise AdminError('"delay_seconds" must be a number of seconds or a duration like "5s"')
    if isinstance(value, str):
        try:
            return parse_go_duration(value)
        except DurationError as error:
            raise AdminError(f'"delay_seconds": {error}') from None
    return float(value)
