"""The node's read-only HTTP interface: routes a decoded path to the document it serves.

Errors are JSON bodies ``{"error": "...", "code": N}``: 404 for an unknown path, chain,
height, contract, transaction or wallet; 400 for a missing or malformed query parameter.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from ledger_simulator.errors import BadRequestError, NotFoundError, UnknownChainError
from ledger_simulator.faults import ActiveFaults
from ledger_simulator.ledger import Ledger
from ledger_simulator.state import SimState

JSON_TYPE = "application/json"
_DIGITS = re.compile(r"[0-9]+")


@dataclass
class Response:
    """An HTTP answer: status, body bytes, content type and extra headers."""

    status: int
    body: bytes
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, document: Any) -> Response:
    """A JSON answer."""
    return Response(status, json.dumps(document, separators=(",", ":")).encode())


def error_response(status: int, message: str, **headers: str) -> Response:
    """A JSON error answer: ``{"error": message, "code": status}``."""
    response = json_response(status, {"error": message, "code": status})
    response.headers.update(headers)
    return response


def split_path(raw_path: str) -> list[str]:
    """Path segments, each percent-decoded after splitting (so ``%2F`` stays inside a segment);
    a trailing slash is ignored."""
    segments = raw_path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()
    return [unquote(s) for s in segments]


def query_value(query: str, name: str, required: bool = True) -> str | None:
    """The single value of query parameter ``name``; BadRequestError if missing or repeated.

    A parameter given empty (``?blockchainId=``) is given: its value is the empty string,
    which the endpoint judges like any other (no chain has that id: 404; not a height: 400).
    """
    values = parse_qs(query, keep_blank_values=True).get(name, [])
    if len(values) > 1:
        raise BadRequestError(f"query parameter {name!r} given {len(values)} times; give it once")
    if not values:
        if required:
            raise BadRequestError(f"missing query parameter {name!r}")
        return None
    return values[0]


class NodeApi:
    """The nine GET endpoints of a node, for any node of the network."""

    def __init__(self, state: SimState, ledger: Ledger) -> None:
        self.state = state
        self.ledger = ledger

    def target_chain(self, segments: list[str], query: str) -> str | None:
        """The chain id a request is about (its faults apply), or None for node-wide requests."""
        if len(segments) >= 2 and segments[0] == "blockchains":
            return segments[1]
        if len(segments) == 2 and segments[0] == "wallets":
            values = parse_qs(query).get("blockchainId", [])
            return values[0] if values else None
        return None

    def respond(self, node: int, segments: list[str], query: str, now: float) -> Response:
        """The answer to ``GET /<segments>?<query>`` from ``node`` at ``now``."""
        try:
            return json_response(200, self.document(node, segments, query, now))
        except NotFoundError as error:
            return error_response(404, str(error))
        except BadRequestError as error:
            return error_response(400, str(error))

    def document(self, node: int, segments: list[str], query: str, now: float) -> Any:
        """The JSON document for a path; NotFoundError / BadRequestError otherwise."""
        state = self.state
        match segments:
            case []:
                return state.node_info(node)
            case ["health"]:
                return state.health(node, now)
            case ["blockchains"]:
                return [state.topology.chain_ids[c] for c in state.topology.chains_of(node)]
            case ["blockchains", chain_id, *rest] if len(rest) <= 4:
                return self.chain_document(node, self.tracked(node, chain_id), rest, query, now)
            case ["wallets", address]:
                chain = self.tracked(node, query_value(query, "blockchainId") or "")
                return self.ledger.wallet(chain, address, self.faults(node, chain))
        raise NotFoundError("no such endpoint: /" + "/".join(segments))

    def chain_document(
        self, node: int, chain: int, rest: list[str], query: str, now: float
    ) -> dict[str, Any]:
        """Endpoints 4 to 8, below ``/blockchains/{id}``."""
        ledger = self.ledger
        match rest:
            case []:
                return self.state.blockchain(node, chain, now)
            case ["blocks"]:
                height = parse_height(query_value(query, "height"))
                return ledger.block(self.state.view(node, chain, now), height)
            case ["contracts", address]:
                return ledger.contract(chain, address, self.faults(node, chain))
            case ["contracts", address, "state"]:
                height = self.height(node, chain, now)
                return ledger.contract_state(chain, address, height, self.faults(node, chain))
            case ["contracts", address, "trace", tx]:
                return ledger.trace(self.state.view(node, chain, now), address, tx)
        raise NotFoundError("no such endpoint: /blockchains/{id}/" + "/".join(rest))

    def tracked(self, node: int, chain_id: str) -> int:
        """Index of ``chain_id`` if this node tracks it; NotFoundError otherwise."""
        try:
            chain = self.state.topology.chain_index(chain_id)
        except UnknownChainError:
            raise NotFoundError(f"blockchain {chain_id!r} not found on this node") from None
        if not self.state.topology.tracks(node, chain):
            raise NotFoundError(f"blockchain {chain_id!r} is not tracked by this node")
        return chain

    def faults(self, node: int, chain: int) -> ActiveFaults:
        """The faults in force for ``node`` on ``chain`` (object faults among them)."""
        top = self.state.topology
        return self.state.faults.active(top.node_name(node), top.chain_ids[chain])

    def height(self, node: int, chain: int, now: float) -> int:
        """The node's current height of ``chain`` (frozen while stalled)."""
        return self.state.view(node, chain, now).height


def parse_height(text: str | None) -> int:
    """A block height: decimal digits only; BadRequestError otherwise."""
    if text is None or not _DIGITS.fullmatch(text):
        raise BadRequestError(
            f"query parameter 'height' must be a non-negative integer, got {text!r}"
        )
    return int(text)
