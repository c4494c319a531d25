"""Faults injected into a real exporter process's polling cycle, for the end-to-end tests of
what a cycle does with a failure it did not expect (tests/e2e/test_cycle_failures.py).

Python imports this module at start when its directory is on the process's ``PYTHONPATH``
(:func:`tests.support.faults.fault_env`); nothing of the exporter refers to it. It wraps two
steps of the cycle, each failing while a file of the directory named by
``LEDGER_TEST_FAULTS`` exists (so the test turns a fault on and off while the process runs):

- ``node-NAME``: reading the results of the node named NAME raises;
- ``cycle``: the whole cycle raises before its snapshot is made.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_DIRECTORY = os.environ.get("LEDGER_TEST_FAULTS")

if _DIRECTORY:
    from exporter.poll import cycle, node

    _faults = Path(_DIRECTORY)
    _result = node.NodePoll.result
    _run_cycle = cycle.Poller.run_cycle

    def _faulty_result(self: Any, now: float) -> Any:
        if (_faults / f"node-{self.node.name}").exists():
            raise ValueError("year 10000 is out of range (an injected fault)")
        return _result(self, now)

    def _faulty_cycle(self: Any) -> Any:
        if (_faults / "cycle").exists():
            raise RuntimeError("the cycle cannot complete (an injected fault)")
        return _run_cycle(self)

    node.NodePoll.result = _faulty_result  # type: ignore[method-assign]
    cycle.Poller.run_cycle = _faulty_cycle  # type: ignore[method-assign]
