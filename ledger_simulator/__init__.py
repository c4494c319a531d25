"""A simulated ledger network serving the node HTTP API, for demos, tests and benchmarks.

``SimulatedNetwork`` is the Python API (used by ``ledger-exporter demo`` and the end-to-end
tests); ``ledger_simulator.cli.main`` is the ``ledger-exporter simulate`` sub-command.
"""

from ledger_simulator.errors import (
    BadRequestError,
    NotFoundError,
    SimulatorError,
    UnknownChainError,
    UnknownNodeError,
)
from ledger_simulator.faults import FAULTS, FaultError
from ledger_simulator.network import LAYOUTS, SimulatedNetwork

__all__ = [
    "FAULTS",
    "LAYOUTS",
    "BadRequestError",
    "FaultError",
    "NotFoundError",
    "SimulatedNetwork",
    "SimulatorError",
    "UnknownChainError",
    "UnknownNodeError",
]
