"""Error types of the simulator; each message tells the caller what to change."""

from __future__ import annotations


class SimulatorError(Exception):
    """Base class of errors raised by the simulator."""


class UnknownNodeError(SimulatorError, LookupError):
    """A node name is not one of ``node-1`` .. ``node-N``."""


class UnknownChainError(SimulatorError, LookupError):
    """A blockchain id is not one of the simulated network's chains."""


class NotFoundError(SimulatorError, LookupError):
    """A resource a request names (chain, block, contract, transaction, wallet) does not exist
    on the node asked; served as HTTP 404."""


class BadRequestError(SimulatorError, ValueError):
    """A request's query parameter is missing or malformed; served as HTTP 400."""
