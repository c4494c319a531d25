"""Checks of the systemd unit with the machine's systemd-analyze (no systemd runs here).

`systemd-analyze verify` parses the unit as systemd would and reports unknown keys and
bad values; it also insists that ExecStart's binary exists, which it does only after
installation, so it runs on a temporary copy whose ExecStart binary is /bin/true (same
arguments). `systemd-analyze security --offline` scores the sandboxing. Neither starts
the service: whether the exporter runs happily inside this sandbox is not proven here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.testdata import REPO

UNIT = REPO / "deploy" / "systemd" / "ledger-exporter.service"
INSTALLED_BINARY = "/opt/ledger-exporter/venv/bin/ledger-exporter"
# Exposure is 0.0 (locked down) .. 10.0 (unsafe); the threshold is in tenths.
MAX_EXPOSURE_TENTHS = 20

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed on this machine"
)


def directives(text: str) -> dict[str, list[str]]:
    """Every `Key=value` of the unit, values in order (systemd allows repeated keys)."""
    result: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([A-Za-z]+)=(.*)", line.strip())
        if match:
            result.setdefault(match[1], []).append(match[2])
    return result


def runnable_copy(tmp_path: Path, text: str) -> Path:
    """The unit with ExecStart's binary swapped for /bin/true, arguments kept."""
    assert f"ExecStart={INSTALLED_BINARY} " in text
    copy = tmp_path / "ledger-exporter.service"
    copy.write_text(text.replace(f"ExecStart={INSTALLED_BINARY}", "ExecStart=/bin/true"))
    return copy


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, *args], capture_output=True, text=True, check=False, cwd="/"
    )


@needs_systemd_analyze
def test_unit_verifies_without_any_warning(tmp_path: Path) -> None:
    result = _analyze("verify", str(runnable_copy(tmp_path, UNIT.read_text())))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "systemd-analyze warned (unknown key or bad value)"


@needs_systemd_analyze
def test_only_complaint_about_the_original_is_the_uninstalled_binary() -> None:
    result = _analyze("verify", str(UNIT))
    complaints = [line for line in result.stderr.splitlines() if line.strip()]
    assert complaints == [
        f"ledger-exporter.service: Command {INSTALLED_BINARY} is not executable: "
        "No such file or directory"
    ]


@needs_systemd_analyze
def test_verify_catches_a_misspelt_key(tmp_path: Path) -> None:
    """The warning check can fail: a typo in a hardening key is reported."""
    text = UNIT.read_text().replace("ProtectSystem=strict", "ProtectSystm=strict")
    result = _analyze("verify", str(runnable_copy(tmp_path, text)))
    assert "Unknown key 'ProtectSystm'" in result.stderr


@needs_systemd_analyze
@pytest.mark.parametrize(("hardened", "passes"), [(True, True), (False, False)])
def test_security_exposure_is_low(tmp_path: Path, hardened: bool, passes: bool) -> None:
    """The hardened unit scores <= 2.0 ('OK'); the same service without sandboxing fails."""
    text = UNIT.read_text()
    if not hardened:
        text = "\n".join(
            line
            for line in text.splitlines()
            if not line.startswith(
                (
                    "Protect",
                    "Restrict",
                    "Private",
                    "System",
                    "Capability",
                    "NoNew",
                    "Dynamic",
                    "Lock",
                    "Memory",
                )
            )
        )
    result = _analyze(
        "security",
        "--offline=true",
        f"--threshold={MAX_EXPOSURE_TENTHS}",
        str(runnable_copy(tmp_path, text)),
    )
    assert (result.returncode == 0) is passes, result.stdout[-400:]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("DynamicUser", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("SystemCallFilter", "@system-service"),
        ("Restart", "on-failure"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ("EnvironmentFile", "-/etc/default/ledger-exporter"),
        (
            "ExecStart",
            f"{INSTALLED_BINARY} --config.file=/etc/ledger-exporter/config.yml"
            " --state.file=/var/lib/ledger-exporter/state.json",
        ),
    ],
)
def test_unit_sets(key: str, value: str) -> None:
    assert value in directives(UNIT.read_text())[key]


def test_install_path_is_the_documented_one() -> None:
    docs = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert INSTALLED_BINARY.removesuffix("/bin/ledger-exporter") in docs
    assert "deploy/systemd/ledger-exporter.service" in docs
