"""The field table (exporter/model/fields.py) against the node API document
(api/ledger-node-api.yaml): every row names a field the document describes, where it says
the field sits, and states its family once."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections import defaultdict
from typing import Any

import pytest

from exporter.bounds import SETTINGS
from exporter.config.exporter import NetworkChecks, parse_config
from exporter.config.schema import ConfigError
from exporter.expose.metrics import WATCH_FAMILIES
from exporter.model import fields
from exporter.model.fields import (
    CHAIN_STATUS_FIELDS,
    CONTRACT_FIELDS,
    CONTRACT_STATE_FIELDS,
    EACH,
    HEALTH_FIELDS,
    WALLET_FIELDS,
    Field,
)
from tests.support import nodeapi
from tests.support.testdata import REPO

#: Each endpoint's table and the document's schema of its answer.
TABLES = {
    "Health": HEALTH_FIELDS,
    "BlockchainStatus": CHAIN_STATUS_FIELDS,
    "Contract": CONTRACT_FIELDS,
    "ContractState": CONTRACT_STATE_FIELDS,
    "Wallet": WALLET_FIELDS,
}


def members(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """The properties of the object at ``path`` inside ``schema`` (EACH: its members' schema)."""
    node = nodeapi.resolve(schema)
    for part in path:
        node = nodeapi.resolve(
            node["additionalProperties"] if part == EACH else node["properties"][part]
        )
    properties: dict[str, Any] = node["properties"]
    return properties


ROWS = [(schema, field) for schema, table in TABLES.items() for field in table]


@pytest.mark.parametrize(("schema", "field"), ROWS, ids=[f"{s}.{f.path}" for s, f in ROWS])
def test_each_row_names_a_documented_field_where_it_sits(schema: str, field: Field) -> None:
    # (``also_at`` may name places older nodes use that the document does not: peerId)
    assert field.name in members(nodeapi.schema(schema), field.at), field.path


@pytest.mark.parametrize("table", TABLES.values(), ids=list(TABLES))
def test_each_family_is_stated_once(table: tuple[Field, ...]) -> None:
    stated = [field.family for field in table if field.help]
    assert len(stated) == len(set(stated))
    assert {field.family for field in table if field.family} == set(stated)
    for field in table:
        assert bool(field.help) == bool(field.labels), field.path
        assert field.bound is None or field.bound in SETTINGS, field.path
        if field.label:
            owner = next(row for row in table if row.family == field.family and row.help)
            assert field.label in owner.labels, field.path


# --- watch lists: the contract, contract state and wallet tables, and the block hash fields ---

#: The watched objects' answers: every field the document names is a row of its table, read
#: or not (an unread row says why), so the table is the one place that knows the answer.
WATCH_TABLES = {
    "Contract": CONTRACT_FIELDS,
    "ContractState": CONTRACT_STATE_FIELDS,
    "Wallet": WALLET_FIELDS,
}


@pytest.mark.parametrize("schema", WATCH_TABLES)
def test_each_documented_field_of_a_watched_answer_has_a_row(schema: str) -> None:
    rows = [field.name for field in WATCH_TABLES[schema] if field.at == ()]
    assert sorted(rows) == sorted(members(nodeapi.schema(schema), ()))
    assert len(rows) == len(set(rows))


def test_the_named_statuses_and_permissions_are_the_documents() -> None:
    assert tuple(nodeapi.schema("ContractStatus")["examples"]) == fields.CONTRACT_STATUSES
    assert tuple(members(nodeapi.schema("AuthGroup"), ())) == fields.PERMISSIONS
    wallet = nodeapi.operation("getWallet")[2]
    assert [p["name"] for p in wallet["parameters"]] == [fields.WALLET_CHAIN_PARAMETER]


def test_the_readers_fill_every_attribute_the_rows_name() -> None:
    """A row's ``attribute`` is a field of its reading, and every field of a reading is a
    row's (or the reading's own bookkeeping): a new row cannot be silently unread."""
    readings = {
        fields.ContractReading: CONTRACT_FIELDS,
        fields.StateReading: CONTRACT_STATE_FIELDS,
        fields.WalletReading: WALLET_FIELDS,
    }
    for reading, table in readings.items():
        named = {field.attribute for field in table if field.attribute}
        attributes = {attribute.name for attribute in dataclasses.fields(reading)}
        assert named | {"dropped"} >= attributes >= named


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _property_names(node: Any, seen: set[int]) -> set[str]:
    """Every property name in ``node`` and the schemas it refers to, at any depth."""
    if isinstance(node, list):
        return set().union(*(_property_names(item, seen) for item in node))
    if not isinstance(node, dict):
        return set()
    node = nodeapi.resolve(node)
    if id(node) in seen:
        return set()
    seen.add(id(node))
    names = set(node.get("properties", {}))
    return names.union(*(_property_names(value, seen) for value in node.values()))


def _names_of(*schemas: str) -> set[str]:
    return set().union(*(_property_names(nodeapi.schema(name), set()) for name in schemas))


#: The watched objects' field names (their auth groups' flags included), and the block
#: fields the config looks for a hash in by default (the document names none). A name the
#: health or chain status answers also use is checked with those tables.
WATCH_NAMES = sorted(
    _names_of("Contract", "ContractState", "Wallet")
    - _names_of("ContractMetadata", "Health", "BlockchainStatus")
    | set(NetworkChecks().block_hash_fields)
)
PACKAGE = REPO / "exporter"

#: Same-spelled strings and class fields that mean something else (or the config's copies,
#: which sit below the model and cannot import the table), by (spelling, module).
ELSEWHERE = {
    # what the config file calls the watch entry's address, and the request built from it
    ("address", "config/watchlist.py"): "the `address` key of a watch entry",
    ("address", "model/watch_readings.py"): "WatchRequest.address: the configured address",
    ("address", "app.py"): "a listen address in the log's fields",
    # label names the config refuses as a node's static labels (test below keeps them whole)
    ("code_hash", "config/watchlist.py"): "a reserved label name",
    ("public_key", "config/watchlist.py"): "a reserved label name",
    ("status", "config/watchlist.py"): "a reserved label name",
    ("vm_type", "config/watchlist.py"): "a reserved label name",
    ("version", "config/nodes.py"): "a reserved label name (ledger_exporter_build_info's)",
    # counters and parsed values of the exporter's own
    ("auth_groups", "bounds.py"): "Dropped.auth_groups: how many auth groups were dropped",
    ("block_hash", "poll/results.py"): "ChainResult.block_hash: the hash a block answer gave",
    ("state", "model/watch_readings.py"): "the last path segment of endpoint 7",
    ("state", "poll/state.py"): "Inspection.state: the exporter's state file",
    ("version", "poll/state.py"): "the state file's format version",
    ("version", "build.py"): "the exporter's own version",
    ("version", "app.py"): "the exporter's own version in the start-up log line",
    ("version", "expose/metrics.py"): "ledger_exporter_build_info's label",
    ("status", "poll/engine.py"): "an HTTP status",
    ("status", "poll/results.py"): "an HTTP status",
    ("status", "web/httpserver.py"): "an HTTP status in the request log",
    ("status", "web/probe_endpoint.py"): "an HTTP status",
    # the status page's headings for the values the nodes disagree on
    ("status", "web/problems.py"): "a heading of the status page",
    ("version", "web/problems.py"): "a heading of the status page",
    ("enabled", "web/problems.py"): "a heading of the status page",
}


@functools.cache
def _declared() -> dict[str, frozenset[str]]:
    """Each string constant and class field name of exporter/ -> the modules it is in."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found[node.value].add(module)
            elif isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.AnnAssign) and isinstance(
                        statement.target, ast.Name
                    ):
                        found[statement.target.id].add(module)
    return {name: frozenset(modules) for name, modules in found.items()}


@pytest.mark.parametrize("name", WATCH_NAMES)
def test_each_watch_field_is_declared_in_one_module(name: str) -> None:
    declared = _declared()
    modules = {
        module
        for spelling in {name, _snake(name)}
        for module in declared.get(spelling, ())
        if (spelling, module) not in ELSEWHERE
    }
    assert len(modules) == 1, f"{name} is declared in {sorted(modules) or 'no module'}"


def test_every_exception_is_still_there() -> None:
    """An entry of ELSEWHERE that no longer occurs is removed, not left to hide a new one."""
    declared = _declared()
    stale = [key for key in ELSEWHERE if key[1] not in declared.get(key[0], ())]
    assert not stale


def test_the_config_reserves_every_watch_label() -> None:
    """The config refuses a node's static label that a watch family sets itself: its list
    (exporter/config, below the table) holds every label of the watch families."""
    for spec in WATCH_FAMILIES:
        for label in spec.labels:
            text = f'nodes: [{{name: a, url: "http://127.0.0.1:1/", labels: {{{label}: x}}}}]'
            with pytest.raises(ConfigError, match="sets itself"):
                parse_config(text)
