"""Programs the tests run (promtool, prometheus, amtool, docker-compose, chromium,
victoria-metrics, vmalert): a missing one fails the test, naming ``make tools``, which installs
Debian's packages of them."""

from __future__ import annotations

import shutil

import pytest


def require_program(*names: str) -> str:
    """The path of the first of ``names`` on the PATH; the test fails when none is there."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(f"{' or '.join(names)} not found: `make tools` installs it (Debian's packages)")
