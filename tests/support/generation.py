"""How much the generated-input suites try, in one place.

``LEDGER_TEST_EXAMPLES`` is the number of examples each generated test tries (each operation
of the schemathesis run, each hypothesis property); unset, every suite uses its own default,
sized for ``make test``. A long campaign raises it, e.g.
``LEDGER_TEST_EXAMPLES=5000 .venv/bin/pytest tests/test_simulator_openapi.py``.
"""

from __future__ import annotations

import os
import re

import hypothesis

ENV = "LEDGER_TEST_EXAMPLES"


def examples(default: int) -> int:
    """``LEDGER_TEST_EXAMPLES`` if set (a whole number, at least 1), else ``default``."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return default
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ValueError(f"{ENV}={text!r}: give a whole number of examples, at least 1")
    return int(text)


def settings(default: int) -> hypothesis.settings:
    """Hypothesis settings for a generated test against real processes: ``examples(default)``
    examples, no deadline (the machine is shared; tests never time themselves), no example
    database written into the working tree, and the blob that replays a failure printed."""
    return hypothesis.settings(
        max_examples=examples(default),
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
