"""What this build of the exporter is: version, revision, branch, build user and date, and the
Python it runs on, for ``ledger_exporter_build_info`` and ``--version``.

Revision and branch come from the build, never from the checkout at run time: the wheel build
(``setup.py``) writes them into the package as ``exporter/BUILD_INFO`` from its environment
(``LEDGER_EXPORTER_BUILD_REVISION``, ``..._BRANCH``, ``..._USER``, ``..._DATE``; the Dockerfile
passes its ``REVISION`` and ``BRANCH`` build arguments so) or from ``git`` when built from a
checkout. The same variables set at run time override the file, for builds that cannot write
it. A value known from neither is empty, as ``build_info``'s contract says.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from exporter import __version__

#: Written by the wheel build next to this module (``setup.py``); absent in a source checkout.
BUILD_FILE = Path(__file__).with_name("BUILD_INFO")
#: The file's keys, each overridden at run time by ``LEDGER_EXPORTER_BUILD_<KEY>``.
BUILD_KEYS = ("revision", "branch", "user", "date")
ENV_PREFIX = "LEDGER_EXPORTER_BUILD_"
#: Longest value taken from the file or the environment: a label value, not a document.
MAX_VALUE_LENGTH = 200
#: Go's GOARCH names for Python's ``platform.machine()``, as ``prometheus --version`` shows.
_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "i386": "386",
    "i686": "386",
    "armv7l": "arm",
    "armv6l": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


@dataclass(frozen=True)
class BuildInfo:
    """One build's identity; empty strings for what is not known."""

    version: str = __version__
    revision: str = ""
    branch: str = ""
    user: str = ""
    date: str = ""
    python_version: str = platform.python_version()
    platform: str = ""

    def labels(self) -> tuple[tuple[str, str], ...]:
        """``ledger_exporter_build_info``'s labels (the metric contract's four)."""
        return (
            ("version", self.version),
            ("revision", self.revision),
            ("branch", self.branch),
            ("python_version", self.python_version),
        )

    def version_text(self, program: str = "ledger-exporter") -> str:
        """What ``--version`` prints, in the form ``prometheus --version`` has; the build user
        and date lines only when known."""
        lines = [
            f"{program}, version {self.version} "
            f"(branch: {self.branch or 'unknown'}, revision: {self.revision or 'unknown'})"
        ]
        if self.user:
            lines.append(f"  build user:       {self.user}")
        if self.date:
            lines.append(f"  build date:       {self.date}")
        lines.append(f"  python version:   {self.python_version}")
        lines.append(f"  platform:         {self.platform}")
        return "\n".join(lines) + "\n"


def go_platform(system: str = sys.platform, machine: str = platform.machine()) -> str:
    """``linux/amd64`` (GOOS/GOARCH) for this interpreter; unknown machines as Python names
    them, lower case."""
    system = "linux" if system.startswith("linux") else system.lower()
    return f"{system}/{_GO_ARCH.get(machine.lower(), machine.lower() or 'unknown')}"


def parse_build_file(text: str) -> dict[str, str]:
    """``key=value`` lines (``#`` comments and unknown keys ignored) of the build file."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key in BUILD_KEYS:
            values[key] = clean(value)
    return values


def clean(value: str) -> str:
    """A value as a label and a line may hold it: printable, trimmed, bounded."""
    text = "".join(char for char in value.strip() if char.isprintable())
    return text[:MAX_VALUE_LENGTH]


def read_build_info(environ: Mapping[str, str] = os.environ, path: Path = BUILD_FILE) -> BuildInfo:
    """This build: the build file's values, each overridden by its environment variable when
    that is set (even to empty); a missing or unreadable file gives empty values."""
    try:
        values = parse_build_file(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        values = {}
    for key in BUILD_KEYS:
        if (override := environ.get(ENV_PREFIX + key.upper())) is not None:
            values[key] = clean(override)
    return BuildInfo(platform=go_platform(), **values)


@cache
def this_build() -> BuildInfo:
    """The running build, read once per process (the file and the environment do not change
    what the process is once it has started)."""
    return read_build_info()
