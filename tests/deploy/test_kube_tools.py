"""tools/kube_tools.py: helm and kubectl as `make tools` installs them, pinned by sha256."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.deploy import TOOLS_BIN, kube_tool, run_tool
from tools import kube_tools


def test_installed_tools_are_the_pinned_ones() -> None:
    for binary in kube_tools.BINARIES:
        kube_tool(binary.name)
    assert kube_tools.current(TOOLS_BIN)
    assert run_tool("helm", "version", "--short").stdout.startswith("v4.1.4")
    client = run_tool("kubectl", "version", "--client").stdout
    assert "Client Version: v1.35" in client and "Kustomize Version: v5.7.1" in client


def test_a_changed_or_missing_binary_is_installed_again(tmp_path: Path) -> None:
    """`make tools` runs the script each time: it reinstalls unless both files are intact."""
    assert not kube_tools.current(tmp_path)
    shutil.copy(kube_tool("kubectl"), tmp_path / "kubectl")
    (tmp_path / "helm").write_bytes(b"#!/bin/sh\necho v4.1.4\n")
    assert not kube_tools.current(tmp_path)
    shutil.copy(kube_tool("helm"), tmp_path / "helm")
    assert kube_tools.current(tmp_path)
    assert kube_tools.main([str(tmp_path)]) == 0  # current: nothing downloaded


def test_a_binary_reporting_another_version_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "helm"
    fake.write_text("#!/bin/sh\necho v3.0.0\n")
    fake.chmod(0o755)
    (helm,) = [b for b in kube_tools.BINARIES if b.name == "helm"]
    with pytest.raises(kube_tools.ToolError, match=r"'v3.0.0'.*'v4.1.4'"):
        kube_tools.check_version(fake, helm)
