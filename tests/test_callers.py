"""No production code that only tests call: every public function, method and property of
``exporter/`` is used by the shipped code (``exporter/``, ``ledger_simulator/``) or by a
documented benchmark or tool (a script of ``benchmarks/`` or ``tools/`` that the docs, the
READMEs or the Makefile name). A test that needs a convenience keeps it in
``tests/support/``.

Uses are counted by name (an identifier or attribute anywhere in those files), so two
definitions sharing a name count each other's uses: the scan can miss one, never flag a used
one. Methods that a base class outside the package calls (``http.server``'s hooks,
``io.RawIOBase.writable``) and the methods of a Protocol are not the package's to call.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.support.testdata import REPO

#: Public names only tests call today, each with why it stays. Strict: an entry that the
#: shipped code now calls, or that is gone, must be removed (test_the_allowlist_is_current).
ALLOWED = {
    # http.server dispatches on "do_" + the request's method (BaseHTTPRequestHandler)
    "exporter.web.server._Handler.do_GET": "called by http.server",
    "exporter.web.server._Handler.do_HEAD": "called by http.server",
    "exporter.web.server._Handler.do_POST": "called by http.server",
}

_DOCUMENTS = ("*.md", "docs/*.md", "benchmarks/*.md", "tools/*.md", "Makefile")


def documented_scripts() -> list[Path]:
    """The scripts of benchmarks/ and tools/ that a README, a doc or the Makefile names."""
    text = "\n".join(p.read_text() for pattern in _DOCUMENTS for p in REPO.glob(pattern))
    scripts = [*REPO.glob("benchmarks/*.py"), *REPO.glob("tools/*.py")]
    return [path for path in scripts if path.name in text]


def shipped_and_documented() -> list[Path]:
    """The files whose uses count: the two packages and the documented scripts."""
    packages = [*REPO.glob("exporter/**/*.py"), *REPO.glob("ledger_simulator/**/*.py")]
    return packages + documented_scripts()


def uses(paths: Iterable[Path]) -> Counter[str]:
    """How often each identifier is read or called in ``paths`` (names and attributes; a
    definition's own name is no use, nor that name inside its own body: a wrapper that
    calls a callee of its name, ``def unpack(): return self._all.unpack()``, uses nothing)."""
    counted: Counter[str] = Counter()
    for path in paths:
        _count(ast.parse(path.read_text(), str(path)), frozenset(), counted)
    return counted


def _count(node: ast.AST, inside: frozenset[str], counted: Counter[str]) -> None:
    """Count the names and attributes under ``node``, but not those named as a function
    that encloses them (``inside``)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        inside |= {node.name}
    elif isinstance(node, ast.Name) and node.id not in inside:
        counted[node.id] += 1
    elif isinstance(node, ast.Attribute) and node.attr not in inside:
        counted[node.attr] += 1
    for child in ast.iter_child_nodes(node):
        _count(child, inside, counted)


def public_definitions() -> Iterator[str]:
    """``module.function`` and ``module.Class.method`` for each public def of exporter/ that
    the package itself must call: not a Protocol's, not a hook a foreign base class calls."""
    for path in sorted(REPO.glob("exporter/**/*.py")):
        if path.name == "__main__.py":
            continue
        relative = path.relative_to(REPO).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        module = importlib.import_module(name)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not node.name.startswith("_"):
                    yield f"{name}.{node.name}"
            elif isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                if _is_protocol(cls):
                    continue
                for member in node.body:
                    if not isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                        continue
                    if member.name.startswith("_") or _foreign_hook(cls, member.name):
                        continue
                    yield f"{name}.{node.name}.{member.name}"


def _is_protocol(cls: object) -> bool:
    """Whether ``cls`` is a typing.Protocol (its methods declare, others implement)."""
    return bool(getattr(cls, "_is_protocol", False))


def _foreign_hook(cls: type, method: str) -> bool:
    """Whether a base class from outside the package defines ``method`` (so calls it)."""
    bases = inspect.getmro(cls)[1:]
    return any(method in vars(base) for base in bases if not base.__module__.startswith("exporter"))


def test_no_public_definition_is_called_by_tests_alone() -> None:
    counted = uses(shipped_and_documented())
    unused = [d for d in public_definitions() if not counted[d.rsplit(".", 1)[1]]]
    assert sorted(set(unused) - ALLOWED.keys()) == []


def test_the_allowlist_is_current() -> None:
    counted = uses(shipped_and_documented())
    defined = set(public_definitions())
    for entry in ALLOWED:
        assert entry in defined, f"{entry} is gone: remove it from ALLOWED"
        if not entry.rsplit(".", 1)[1].startswith("do_"):
            assert not counted[entry.rsplit(".", 1)[1]], f"{entry} is used: remove it"


def test_the_scan_sees_a_method_only_a_test_calls(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped.py"
    shipped.write_text("class A:\n    def used(self): ...\n    def lonely(self): ...\nA().used()\n")
    counted = uses([shipped])
    assert counted["used"] == 1 and counted["lonely"] == 0


def test_a_wrapper_calling_its_namesake_is_no_use_of_itself(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped.py"
    shipped.write_text(
        "import struct\nclass Store:\n    def unpack(self, b):\n"
        "        return struct.unpack('d', b)\n"
    )
    assert uses([shipped])["unpack"] == 0
