"""The wheel build records what it built: ``exporter/BUILD_INFO`` in the package.

pyproject.toml holds the project; this file only adds that step to setuptools' ``build_py``.
Each value comes from ``LEDGER_EXPORTER_BUILD_<KEY>`` when set (the Dockerfile passes its
``REVISION`` and ``BRANCH`` build arguments so; a packager sets them), else, for revision and
branch, from ``git`` when this directory is the top of a git checkout; the build user is
``user@host`` and the date is now (or ``SOURCE_DATE_EPOCH``), as Prometheus' builds record
them. ``exporter/build.py`` reads the file at run time.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ENV_PREFIX = "LEDGER_EXPORTER_BUILD_"


def _git(*args: str) -> str:
    """``git args`` in this directory when it is the top of a checkout, else ''."""
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        if Path(top).resolve() != HERE:  # a copy inside someone else's repository
            return ""
        result = subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip()


def _user() -> str:
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError):
        return ""


def _date() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    seconds = int(epoch) if epoch.isdigit() else time.time()
    return time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(seconds))


def build_values() -> dict[str, str]:
    """The values to record, the environment's first."""
    found = {
        "revision": lambda: _git("rev-parse", "HEAD"),
        "branch": lambda: _git("rev-parse", "--abbrev-ref", "HEAD"),
        "user": _user,
        "date": _date,
    }
    values = {}
    for key, fallback in found.items():
        given = os.environ.get(ENV_PREFIX + key.upper())
        values[key] = (given if given is not None else fallback()).strip().replace("\n", " ")
    return values


class BuildPyWithBuildInfo(build_py):
    """setuptools' build_py, then ``exporter/BUILD_INFO`` written into the build."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "exporter" / "BUILD_INFO"
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# written by the wheel build (setup.py); read by exporter/build.py"]
        lines += [f"{key}={value}" for key, value in build_values().items()]
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs: list[str] = super().get_outputs(include_bytecode)
        return [*outputs, str(Path(self.build_lib) / "exporter" / "BUILD_INFO")]


setup(cmdclass={"build_py": BuildPyWithBuildInfo})
