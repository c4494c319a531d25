"""``make tools`` installs Debian's packages without failing when another install runs: every
apt-get of the Makefile goes through ``APT_GET`` (which waits for dpkg's lock) and every
``update`` through ``APT_UPDATE`` (which tries the package lists' lock again), so a package
added by copying a line keeps the wait. Read from ``make -n -p`` (the variables as make
expands them), without running apt."""

from __future__ import annotations

import re
import subprocess

from tests.support.testdata import REPO


def _make_database() -> str:
    """What make knows of the Makefile (variables and rules), without running a recipe."""
    done = subprocess.run(
        ["make", "-n", "-p", "-f", "Makefile", "--no-builtin-rules", "__nothing__"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def test_apt_get_waits_for_the_package_managers_lock() -> None:
    database = _make_database()
    apt_get = re.search(r"^APT_GET = (.*)$", database, re.M)
    assert apt_get is not None, "APT_GET is gone from the Makefile"
    assert "-o DPkg::Lock::Timeout=600" in apt_get[1]
    update = re.search(r"^APT_UPDATE = (.*)$", database, re.M)
    assert update is not None and "$(APT_GET) update" in update[1] and "sleep" in update[1]


def test_every_apt_get_of_the_makefile_goes_through_the_waiting_one() -> None:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    calls = [line.strip() for line in text.splitlines() if re.search(r"\bapt-get\b", line)]
    outside = [line for line in calls if not line.startswith(("APT_GET =", "#"))]
    assert outside == [], "apt-get called without $(APT_GET)/$(APT_INSTALL): it would not wait"
    assert text.count("$(APT_INSTALL)") >= 5  # the packages make tools installs
