"""Faults injected into a real exporter process (see ``sitecustomize.py`` beside this)."""

from __future__ import annotations

import os
from pathlib import Path

#: The directory whose ``sitecustomize.py`` the exporter process imports at start.
HERE = Path(__file__).parent


def fault_env(switches: Path) -> dict[str, str]:
    """The environment for an exporter process whose faults are switched on by files in
    ``switches`` (``node-NAME``, ``cycle``: sitecustomize.py says what each does)."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, "LEDGER_TEST_FAULTS": str(switches)}
