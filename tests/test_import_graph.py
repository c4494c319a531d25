"""No import cycle among the modules of ``exporter`` and ``ledger_simulator``, of any kind.

import-linter (``make lint``) keeps the layers; this finds cycles of every length anywhere,
within a layer too, and between the two packages, counting the imports made only for type
checking (``if TYPE_CHECKING:``) and those inside functions: grimp builds the graph, and a
strongly connected component of more than one module (or a module importing itself) is a
cycle.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Set

import grimp
import pytest

from tests.support.testdata import REPO

PACKAGES = ("exporter", "ledger_simulator")


def import_graph() -> dict[str, frozenset[str]]:
    """Each module of the packages and the modules of the packages it imports."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    return {
        module: frozenset(graph.find_modules_directly_imported_by(module))
        for module in sorted(graph.modules)
    }


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of two modules or
    more (Tarjan's algorithm), and the modules that import themselves."""
    return _Components(graph).cycles() + [[m] for m in graph if m in graph[m]]


class _Components:
    """Tarjan's strongly connected components; modules outside the graph are no nodes."""

    def __init__(self, graph: Mapping[str, Set[str]]) -> None:
        self.graph = graph
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.found: list[list[str]] = []

    def cycles(self) -> list[list[str]]:
        for module in self.graph:
            if module not in self.index:
                self.visit(module)
        return self.found

    def visit(self, module: str) -> None:
        self.index[module] = self.low[module] = len(self.index)
        self.stack.append(module)
        for imported in sorted(self.graph[module] & self.graph.keys()):
            if imported not in self.index:
                self.visit(imported)
                self.low[module] = min(self.low[module], self.low[imported])
            elif imported in self.stack:
                self.low[module] = min(self.low[module], self.index[imported])
        if self.low[module] == self.index[module]:
            at = self.stack.index(module)
            component, self.stack[at:] = self.stack[at:], []
            if len(component) > 1:
                self.found.append(sorted(component))


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert {m.split(".")[0] for m in graph} == set(PACKAGES)
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"a"}}, [["a"]]),
        ({"a": {"b", "x"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_are_found(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The check itself: a cycle of any length is found, once; imports of modules outside
    the graph ("x") are no edges."""
    assert sorted(cycles(graph)) == expected


def test_every_test_module_is_in_the_independence_contract() -> None:
    """``tests-independent`` (pyproject.toml) names the top-level test modules one by one
    and the folders by wildcard: a new top-level module or folder must be added there, or
    nothing would stop it importing another test module."""
    contract = next(
        c
        for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
            "contracts"
        ]
        if c["id"] == "tests-independent"
    )
    named = set(contract["modules"])
    tests = REPO / "tests"
    missing = [
        f"tests.{path.stem}"
        for path in sorted(tests.glob("*.py"))
        if path.stem != "__init__" and f"tests.{path.stem}" not in named
    ] + [
        f"tests.{path.parent.name}.*"
        for path in sorted(tests.glob("*/__init__.py"))
        if path.parent.name != "support" and f"tests.{path.parent.name}.*" not in named
    ]
    assert not missing, f"add to tests-independent in pyproject.toml: {missing}"
