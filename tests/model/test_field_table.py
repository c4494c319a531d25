"""The field table (exporter/model/fields.py) against the node API document
(api/ledger-node-api.yaml): every row names a field the document describes, where it says
the field sits, and states its family once."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

import pytest

from exporter.bounds import SETTINGS
from exporter.config.exporter import NetworkChecks, parse_config
from exporter.errors import ConfigError
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


# --- each field of the node API declared once ------------------------------------------------

EXPORTER = Path(__file__).resolve().parents[2] / "exporter"

#: Same-spelled names that mean something else, by (name as spelled, module): excused one by
#: one. Anything not listed here counts as a declaration of the field.
ELSEWHERE = {
    # Prometheus label names (of the _info families, and those a node's static labels may not
    # take): the label, not the JSON field.
    ("node_version", "config/nodes.py"): "a reserved label name",
    ("node_id", "config/nodes.py"): "a reserved label name",
    ("peer_id", "config/nodes.py"): "a reserved label name",
    ("consensus_type", "config/nodes.py"): "a reserved label name",
    ("key_type", "config/nodes.py"): "a reserved label name",
    ("node_version", "expose/metrics.py"): "the label's description in LABELS",
    ("node_id", "expose/metrics.py"): "the label's description in LABELS",
    ("peer_id", "expose/metrics.py"): "the label's description in LABELS",
    ("consensus_type", "expose/metrics.py"): "the label's description in LABELS",
    ("key_type", "expose/metrics.py"): "the label's description in LABELS",
    # "blockchains" as a config key, a URL path segment and a state file key
    ("blockchains", "config/nodes.py"): "the config key of a node's chains",
    ("blockchains", "config/probe_modules.py"): "the config key of a probe module's chains",
    ("blockchains", "poll/node.py"): "the URL path /blockchains/{id}",
    ("blockchains", "model/watch_readings.py"): "the URL path /blockchains/{id}/contracts",
    ("blockchains", "poll/state.py"): "a key of the state file",
    ("blockchains", "config/exporter.py"): "the config path of an `expect`'s chains in an error",
    ("blockchains", "config/node_files.py"): "the config path of an `expect`'s chains in an error",
    ("blockchains", "poll/cycle.py"): "a log field: the chains no node lists",
    ("blockchains", "expose/metrics.py"): "the unit of ledger_node_unexpected_blockchains",
    ("blockchains", "web/problems.py"): "the page's text: how many chains a node lists",
    ("read", "config/sources.py"): "_FileState.read: a node file's last good nodes",
    ("node_id", "poll/state.py"): "a key of the state file",
    ("vote_sessions", "poll/state.py"): "a key of the state file",
    # counts of values dropped, by kind of bound
    ("features", "bounds.py"): "Dropped.features: flags dropped over the bound",
    ("vote_sessions", "bounds.py"): "Dropped.vote_sessions: sessions dropped over the bound",
    # the exporter's own state named alike
    ("consensus", "model/snapshot.py"): "ChainStatus.consensus: the history's consensus memory",
    ("network", "model/snapshot.py"): "Snapshot.network: the cross-node view",
    ("network", "web/problems.py"): "the status page's scope of network-wide problems",
    ("consensus", "poll/history.py"): "a node's chains followed across cycles",
    ("syncing", "poll/history.py"): "since when each chain has been syncing",
    # the checkpoint block of another endpoint (GET /blockchains/{id}/blocks)
    ("blockHash", "config/exporter.py"): "a default of block_hash_fields: the block's field",
    ("block_hash", "poll/results.py"): "ChainResult.block_hash: the checkpoint block's hash",
    ("block_height", "poll/results.py"): "ChainResult.block_height: the checkpoint's height",
    # the watch entry's address in the config file, and the request built from it
    ("address", "config/watchlist.py"): "the `address` key of a watch entry",
    ("address", "model/watch_readings.py"): "WatchRequest.address: the configured address",
    ("address", "app.py"): "a listen address in the log's fields",
    # label names a node's static labels may not take (test_the_config_reserves_every_watch_label)
    ("code_hash", "config/watchlist.py"): "a reserved label name",
    ("public_key", "config/watchlist.py"): "a reserved label name",
    ("status", "config/watchlist.py"): "a reserved label name",
    ("vm_type", "config/watchlist.py"): "a reserved label name",
    ("version", "config/nodes.py"): "a reserved label name (ledger_exporter_build_info's)",
    ("version", "expose/metrics.py"): "ledger_exporter_build_info's label",
    # the exporter's own values named alike
    ("auth_groups", "bounds.py"): "Dropped.auth_groups: auth groups dropped over the bound",
    ("state", "model/watch_readings.py"): "the last path segment of endpoint 7",
    ("state", "poll/state.py"): "Inspection.state: the exporter's state file",
    ("version", "poll/state.py"): "the state file's format version",
    ("version", "build.py"): "the exporter's own version",
    ("version", "model/transport.py"): "the negotiated TLS version (ledger_node_tls_info's label)",
    ("version", "app.py"): "the exporter's own version in the start-up log line",
    ("status", "poll/engine.py"): "an HTTP status",
    ("status", "poll/results.py"): "an HTTP status",
    ("status", "web/httpserver.py"): "an HTTP status in the request log",
    ("status", "web/probe_endpoint.py"): "an HTTP status",
    # the status page's headings of the values the nodes disagree on
    ("status", "web/problems.py"): "a heading of the status page",
    ("version", "web/problems.py"): "a heading of the status page",
    ("enabled", "web/problems.py"): "a heading of the status page",
}
#: Members of open maps the document names as examples: the exporter reads every member
#: alike (a feature flag's name is a ``feature`` label value), and names none.
EXAMPLES = {"enableJoinCouncilOnStartup", "enableXMOnBlockMint", "enableTxProof"}


def property_names(schema: str) -> set[str]:
    """Every property name of ``schema`` and of the objects nested in it (their members,
    the values of an open map)."""
    names: set[str] = set()
    pending, seen = [nodeapi.schema(schema)], set()
    while pending:
        node = nodeapi.resolve(pending.pop())
        if id(node) in seen:
            continue
        seen.add(id(node))
        for name, member in node.get("properties", {}).items():
            names.add(name)
            pending.append(member)
        for nested in (node.get("items"), node.get("additionalProperties")):
            if isinstance(nested, dict):
                pending.append(nested)
    return names


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@functools.cache
def declarations() -> dict[str, frozenset[str]]:
    """Every string constant and class field (annotated name in a class body) of exporter/,
    with the modules (relative to exporter/) it appears in."""
    found: dict[str, set[str]] = {}
    for path in sorted(EXPORTER.rglob("*.py")):
        module = path.relative_to(EXPORTER).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.setdefault(node.value, set()).add(module)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        found.setdefault(item.target.id, set()).add(module)
    return {name: frozenset(modules) for name, modules in found.items()}


#: The schemas whose fields are declared once: each endpoint's answer.
SCHEMAS = ["Health", "BlockchainStatus", "Contract", "ContractState", "Wallet"]
#: A contract's ``metadata`` is not read (its row says why): the members the document names
#: in it are the deployment's, and the exporter names none.
UNREAD = property_names("ContractMetadata")
NAMES = [
    (schema, name)
    for schema in SCHEMAS
    for name in sorted(property_names(schema))
    if not (schema == "Contract" and name in UNREAD)
]
#: The block the network checks fetch (GET /blockchains/{id}/blocks?height=): the document
#: names none of its fields; the config's default names where its hash may sit.
NAMES += [("Block", name) for name in NetworkChecks().block_hash_fields]


@pytest.mark.parametrize(("schema", "name"), NAMES, ids=[f"{s}.{n}" for s, n in NAMES])
def test_each_field_is_declared_in_one_module(schema: str, name: str) -> None:
    if name in EXAMPLES:
        pytest.skip("an example member of an open map, read alike with any other")
    found = declarations()
    modules = {
        module
        for spelling in {name, snake_case(name)}
        for module in found.get(spelling, ())
        if (spelling, module) not in ELSEWHERE
    }
    assert len(modules) == 1, f"{schema}.{name} is declared in {sorted(modules) or 'no module'}"


def test_every_excuse_is_still_needed() -> None:
    found = declarations()
    stale = [key for key in ELSEWHERE if key[1] not in found.get(key[0], ())]
    assert not stale, f"remove these from ELSEWHERE: {stale}"


# --- watch lists: the contract, contract state and wallet tables ------------------------------

WATCH_TABLES = {
    "Contract": CONTRACT_FIELDS,
    "ContractState": CONTRACT_STATE_FIELDS,
    "Wallet": WALLET_FIELDS,
}


@pytest.mark.parametrize("schema", WATCH_TABLES)
def test_each_documented_field_of_a_watched_answer_has_a_row(schema: str) -> None:
    """Read or not (an unread row says why), so the table is the one place that knows them."""
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


def test_the_config_reserves_every_watch_label() -> None:
    """The config refuses a node's static label that a watch family sets itself: its list
    (exporter/config, below the table) holds every label of the watch families."""
    for spec in WATCH_FAMILIES:
        for label in spec.labels:
            text = f'nodes: [{{name: a, url: "http://127.0.0.1:1/", labels: {{{label}: x}}}}]'
            with pytest.raises(ConfigError, match="sets itself"):
                parse_config(text)
