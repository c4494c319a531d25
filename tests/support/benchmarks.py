"""The benchmark scripts as modules, for the tests of their pieces: ``benchmarks/`` is not a
package, so a script is loaded from its file, with the folder on ``sys.path`` for the
helpers it imports (``benchlib``) and registered by name (dataclasses look it up)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support.testdata import REPO


def load_benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/<name>.py`` imported, undone with ``monkeypatch`` after the test."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module
