"""The shipped monitoring files (rendered from ``mixin/``): where they are, and how to walk a
Grafana dashboard's panels and variables."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.testdata import REPO

PROM_DIR = REPO / "deploy" / "prometheus"


def _mixin_replica_label() -> str:
    text = (REPO / "mixin" / "config.libsonnet").read_text(encoding="utf-8")
    match = re.search(r"^\s*replicaLabels:\s*'([a-z_]+)',", text, re.M)
    assert match, "mixin/config.libsonnet sets no single replicaLabels"
    return match[1]


#: The mixin's default ``replicaLabels`` (mixin/config.libsonnet): the label the shipped
#: deploy files give each replica of an exporter pair, and the rules fold.
REPLICA_LABEL = _mixin_replica_label()
RULE_FILES = (PROM_DIR / "alerts.yml", PROM_DIR / "rules.yml")
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
#: Mixin settings a user may override, all changed from their defaults: a rendering with these
#: shows that every setting reaches what it should.
MIXIN_OVERRIDES: dict[str, Any] = {
    "exporterJobSelector": 'job="ledger"',
    "ledgerJobSelector": 'job=~"ledger|ledger-probes"',
    "extraSelector": 'cluster="prod"',
    "runbookURLPattern": "https://runbooks.example.com/ledger/%s.md",
    "heightStalled": "15m",
    "stallGrace": "4m",
    "voteSessionStuckTimeouts": 7,
    "voteSessionStuck": "20m",
    "leaderFailedRoundsThreshold": 5,
    "leaderFailedRoundsWindow": "30m",
    "syncingTooLongFor": "2h",
    "dashboardTags": ["ledger", "prod"],
    "dashboardRefresh": "1m",
}


def walk_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel of a dashboard, those inside rows too."""
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def variable_query(variable: dict[str, Any]) -> str:
    """The query of a dashboard variable, in either of Grafana's two spellings."""
    query = variable.get("definition") or variable.get("query")
    return query["query"] if isinstance(query, dict) else str(query)


def edit_at(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of a dashboard: set the value at a dotted path such as
    ``panels.3.options.frameIndex`` (digits index lists), or delete it when ``value`` is
    ``-``: a broken copy a check must refuse."""

    def apply(board: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = board
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        key: Any = int(last) if last.isdigit() else last
        if value == "-":
            del node[key]
        else:
            node[key] = value

    return apply
