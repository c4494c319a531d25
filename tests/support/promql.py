"""PromQL as a tree, for the checks that need more than the metric names (the re-implemented
dashboard-linter rules, the mixin's selectors): promql-parser's AST, walked with each node's
parents as Prometheus' ``parser.Walk`` gives them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import promql_parser

#: Grafana's built-in interval variables, expanded as dashboard-linter does: to the same odd
#: durations (its 8869990787ms written in units promql-parser accepts), so a range of exactly
#: RATE_INTERVAL came from ``$__rate_interval``.
RATE_INTERVAL = timedelta(milliseconds=8869990787)
BUILTINS = {
    "__rate_interval": "102d15h53m10s787ms",
    "__interval": "56d8h10m56s611ms",
    "__interval_ms": "7781188786",
    "__range": "70d6h2m50s749ms",
    "__range_s": "9397795485",
    "__range_ms": "6737667980",
}
_VARIABLE = re.compile(r"\$(\w+)|\$\{([^}]+)\}|\[\[([^\[\]]+)\]\]")

Node = promql_parser.Expr
Path = tuple[promql_parser.Expr, ...]


def expand(expr: str) -> str:
    """``expr`` with Grafana's variables outside double-quoted strings replaced: built-ins by
    their stand-in, dashboard variables by their own name (as the linter expands them when
    they have no current value). Inside strings (``job=~"$job"``) nothing changes."""
    parts = expr.split('"')
    for index in range(0, len(parts), 2):

        def replace(match: re.Match[str]) -> str:
            name = next(group for group in match.groups() if group).split(":")[0]
            return BUILTINS.get(name, name)

        parts[index] = _VARIABLE.sub(replace, parts[index])
    return '"'.join(parts)


def parse(expr: str) -> Node:
    """The AST of ``expr`` after :func:`expand`; ValueError when it is not PromQL."""
    return promql_parser.parse(expand(expr))


def children(node: Node) -> list[Node]:
    """The sub-expressions of ``node`` in source order."""
    if isinstance(node, promql_parser.BinaryExpr):
        return [node.lhs, node.rhs]
    if isinstance(node, promql_parser.AggregateExpr):
        param = [node.param] if isinstance(node.param, promql_parser.Expr) else []
        return [*param, node.expr]
    if isinstance(node, promql_parser.Call):
        return [arg for arg in node.args if isinstance(arg, promql_parser.Expr)]
    if isinstance(node, promql_parser.MatrixSelector):
        return [node.vector_selector]
    if isinstance(
        node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
    ):
        return [node.expr]
    return []


def walk(node: Node, parents: Path = ()) -> Iterator[tuple[Node, Path]]:
    """Every node of the tree, depth first, with the path of its ancestors (root first)."""
    yield node, parents
    for child in children(node):
        yield from walk(child, (*parents, node))


def vector_selectors(node: Node) -> list[promql_parser.VectorSelector]:
    return [n for n, _ in walk(node) if isinstance(n, promql_parser.VectorSelector)]


def matchers(selector: promql_parser.VectorSelector) -> list[tuple[str, str, str]]:
    """(label, operator, value) of each matcher: operator is ``=``, ``!=``, ``=~`` or ``!~``."""
    ops = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
    return [
        (m.name, ops[str(m.op).rsplit(".", 1)[-1]], m.value) for m in selector.matchers.matchers
    ]
