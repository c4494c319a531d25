"""The field table (exporter/model/fields.py) against the node API document
(api/ledger-node-api.yaml): every row names a field the document describes, where it says
the field sits, and states its family once."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.bounds import SETTINGS
from exporter.model.fields import CHAIN_STATUS_FIELDS, EACH, HEALTH_FIELDS, Field
from tests.support import nodeapi

#: Each endpoint's table and the document's schema of its answer.
TABLES = {"Health": HEALTH_FIELDS, "BlockchainStatus": CHAIN_STATUS_FIELDS}


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
