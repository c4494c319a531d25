"""tools/grafana_schema.py checks the Node it finds before `npm ci` (review M4, issue 33).

The pinned generator's dependencies declare `engines.node` "20 || >=22", and `npm ci` only
warns on a mismatch; Debian 12's nodejs (what `make tools` installs when npm is missing) is
18. The tool reads the ranges from the lock and stops with one line naming the version found,
the ranges unmet (with their packages) and how to get a Node that fits. The versions here are
stubbed: a fake `node` on PATH prints them, the machine's node is left alone.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.testdata import REPO
from tools import grafana_schema

REQUIREMENTS = grafana_schema.node_requirements()


def test_the_lock_pins_a_generator_that_needs_node_20() -> None:
    """The check is read from the lock, and the lock today says 20 or 22+ (the review's case)."""
    assert REQUIREMENTS["glob 11.1.0"] == "20 || >=22"
    assert any(name.startswith("ts-json-schema-generator ") for name in REQUIREMENTS)


@pytest.mark.parametrize("found", ["v20.0.0", "v20.20.2\n", "v22.0.0", "v24.11.1"])
def test_a_node_the_lock_accepts_passes(found: str) -> None:
    assert grafana_schema.node_problem(found, REQUIREMENTS) is None


@pytest.mark.parametrize("found", ["v18.20.4", "v21.7.3", "v19.9.0", "v16.20.2"])
def test_an_older_or_odd_node_is_refused_in_one_line(found: str) -> None:
    problem = grafana_schema.node_problem(found, REQUIREMENTS)
    assert problem is not None and "\n" not in problem
    assert f"found Node {found}" in problem
    assert '"20 || >=22" (brace-expansion 5.1.0, glob 11.1.0' in problem
    assert "install Node 20 or 22+" in problem and "Debian 12's nodejs is 18" in problem


def test_a_version_that_is_not_one_is_refused() -> None:
    problem = grafana_schema.node_problem("command not found", REQUIREMENTS)
    assert problem is not None and "not a version" in problem and "Node 20 or 22+" in problem


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ((14, 17, 0), ">=16 || 14 >=14.17", True),
        ((14, 16, 9), ">=16 || 14 >=14.17", False),
        ((15, 0, 0), ">=16 || 14 >=14.17", False),
        ((8, 0, 0), ">= 8", True),
        ((7, 9, 9), ">= 8", False),
        ((0, 10, 0), ">=0.10.0", True),
        ((18, 0, 0), ">=18.0.0", True),
        ((20, 5, 1), "18 || 20 || >=22", True),
        ((21, 0, 0), "18 || 20 || >=22", False),
    ],
)
def test_engine_ranges_as_npm_reads_them(
    version: tuple[int, int, int], spec: str, expected: bool
) -> None:
    assert grafana_schema.satisfies(version, spec) is expected


def test_every_range_in_the_lock_is_understood() -> None:
    """A new lock with a range form the check cannot read fails here, not on a user's machine."""
    for spec in REQUIREMENTS.values():
        for major in range(30):
            grafana_schema.satisfies((major, 0, 0), spec)
    with pytest.raises(ValueError, match=r"extend tools/grafana_schema\.py"):
        grafana_schema.satisfies((20, 0, 0), "^20.0.0")


def fake_node(tmp_path: Path, version: str) -> dict[str, str]:
    """An environment whose PATH finds a `node` printing ``version`` and an `npm` that leaves
    a mark if it is ever run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "node": f"#!/bin/sh\necho {version}\n",
        "npm": f"#!/bin/sh\ntouch {tmp_path / 'npm-ran'}\nexit 1\n",
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run_tool(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "tools" / "grafana_schema.py"), *args]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120
    )


@pytest.mark.parametrize("args", [[], ["--check-node"]], ids=["generate", "check-node"])
def test_node_18_stops_the_tool_before_npm_with_one_line(tmp_path: Path, args: list[str]) -> None:
    """`make grafana-schema` (generate) and `make tools` (--check-node) under Debian 12's
    Node 18: exit 1, one line on stderr naming the node, and npm never run."""
    stamp = grafana_schema.STAMP.stat().st_mtime_ns if grafana_schema.STAMP.exists() else None
    answer = run_tool(fake_node(tmp_path, "v18.20.4"), *args)
    assert answer.returncode == 1
    lines = answer.stderr.splitlines()
    assert len(lines) == 1, answer.stderr
    assert lines[0].startswith(f"{tmp_path / 'bin' / 'node'}: found Node v18.20.4, but")
    assert "Node 20 or 22+" in lines[0]
    assert not (tmp_path / "npm-ran").exists()
    assert (grafana_schema.STAMP.stat().st_mtime_ns if grafana_schema.STAMP.exists() else None) == (
        stamp
    )


def test_check_node_accepts_node_20(tmp_path: Path) -> None:
    answer = run_tool(fake_node(tmp_path, "v20.11.1"), "--check-node")
    assert (answer.returncode, answer.stderr) == (0, "")
    assert not (tmp_path / "npm-ran").exists()
