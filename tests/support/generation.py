"""How much the generated-input suites try, and how they draw, in one place.

``LEDGER_TEST_EXAMPLES`` is the number of examples each generated test tries (each operation
of the schemathesis run, each hypothesis property); unset, every suite uses its own default,
sized for ``make test``. A long campaign raises it, e.g.
``LEDGER_TEST_EXAMPLES=5000 .venv/bin/pytest tests/simulator/test_openapi.py``.

Two hypothesis profiles (``tests/conftest.py`` loads one through :func:`load_profile`):

- ``ci``, the default: ``derandomize=True``, so ``make test`` draws the same examples on
  every run and machine (a red CI run is red again on a laptop, never a flake), and no
  example database;
- ``campaign``, when ``LEDGER_TEST_EXAMPLES`` is set: a fresh random seed each run, so long
  campaigns explore new inputs, with hypothesis's example database under ``.hypothesis/``
  (ignored by git) replaying what a campaign found.

``LEDGER_TEST_PROFILE=ci`` or ``campaign`` chooses one explicitly; pytest's
``--hypothesis-seed`` replays a campaign's seed.
"""

from __future__ import annotations

import os
import re

import hypothesis

ENV = "LEDGER_TEST_EXAMPLES"
PROFILE_ENV = "LEDGER_TEST_PROFILE"
PROFILES = ("ci", "campaign")


def examples(default: int) -> int:
    """``LEDGER_TEST_EXAMPLES`` if set (a whole number, at least 1), else ``default``."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return default
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ValueError(f"{ENV}={text!r}: give a whole number of examples, at least 1")
    return int(text)


def profile() -> str:
    """The profile to run with: ``LEDGER_TEST_PROFILE``, else ``campaign`` when
    ``LEDGER_TEST_EXAMPLES`` is set, else ``ci``."""
    chosen = os.environ.get(PROFILE_ENV, "").strip()
    if chosen and chosen not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={chosen!r}: choose one of {', '.join(PROFILES)}")
    return chosen or ("campaign" if os.environ.get(ENV, "").strip() else "ci")


def load_profile() -> str:
    """Register both profiles and load the one :func:`profile` names; returns its name."""
    common = hypothesis.settings(
        deadline=None,  # the machine is shared: tests never time themselves
        print_blob=True,  # the line that replays a failure
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    hypothesis.settings.register_profile("ci", common, derandomize=True, database=None)
    hypothesis.settings.register_profile("campaign", common, derandomize=False)
    name = profile()
    hypothesis.settings.load_profile(name)
    return name


def settings(default: int) -> hypothesis.settings:
    """Hypothesis settings for a generated test: ``examples(default)`` examples, the rest
    from the loaded profile (deterministic in ``ci``, random in ``campaign``), no deadline,
    and the blob that replays a failure printed."""
    return hypothesis.settings(
        max_examples=examples(default),
        deadline=None,
        print_blob=True,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
