"""The node API document (``api/ledger-node-api.yaml``) for tests: loaded once, each schema of
``components/schemas`` as a self-contained JSON Schema (its ``$ref`` s resolve within it), and
validators that check formats too.

Suites that check or generate node answers take their schemas from here, so the document stays
the one description of the node interface: ``validator("Health")`` checks a ``/health``
answer, ``component("BlockchainStatus")`` is what a generator draws a chain status from.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from typing import Any

import jsonschema
import yaml

from tests.support.testdata import REPO

ROOT = REPO
DOCUMENT = ROOT / "api" / "ledger-node-api.yaml"
#: The JSON Schema dialect of OpenAPI 3.1's schemas (its base dialect adds only annotations).
DIALECT = "https://json-schema.org/draft/2020-12/schema"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
Schema = dict[str, Any]


@cache
def _document() -> dict[str, Any]:
    with DOCUMENT.open(encoding="utf-8") as file:
        loaded: dict[str, Any] = yaml.safe_load(file)
    return loaded


def document() -> dict[str, Any]:
    """A fresh copy of the whole OpenAPI document (callers may change it)."""
    return copy.deepcopy(_document())


def schema_names() -> list[str]:
    """The names under ``components/schemas``."""
    return list(_document()["components"]["schemas"])


def component(name: str, *, strict: bool = False, complete: bool = False) -> Schema:
    """Schema ``name`` of ``components/schemas`` as a standalone JSON Schema (2020-12) that
    carries the components its ``$ref`` s point to. ``strict``: every object that names its
    properties accepts no others; ``complete``: and has them all (see
    :func:`strict_schemas`)."""
    schemas = _document()["components"]["schemas"]
    if name not in schemas:
        raise KeyError(f"no schema {name!r} in {DOCUMENT.name}; known: {', '.join(schemas)}")
    if strict or complete:
        schemas = strict_schemas(schemas, complete=complete)
    else:
        schemas = copy.deepcopy(schemas)
    return {
        "$schema": DIALECT,
        "$ref": f"#/components/schemas/{name}",
        "components": {"schemas": schemas},
    }


def validator(
    name: str, *, strict: bool = False, complete: bool = False
) -> jsonschema.Draft202012Validator:
    """A validator for schema ``name`` that also asserts formats (``date-time``)."""
    return jsonschema.Draft202012Validator(
        component(name, strict=strict, complete=complete),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def strict_schemas(schemas: dict[str, Schema], *, complete: bool = False) -> dict[str, Schema]:
    """A copy of ``schemas`` where an object schema that lists ``properties`` and allows any
    other member (``additionalProperties`` absent or ``true``) allows none: the document
    accepts members it does not name, because nodes vary; a strict copy finds the members an
    answer sends that the document does not name (a misspelt or invented field). Maps whose
    values have a schema of their own (``features``, ``authGroups``) are left as they are.

    ``complete``: an object must also have every property it lists, unless the document says
    which are required (where the document does: the contract event). For answers
    that mean to implement the whole interface, as the simulator's."""

    def tighten(node: Any) -> Any:
        if isinstance(node, list):
            return [tighten(item) for item in node]
        if not isinstance(node, dict):
            return node
        result = {key: tighten(value) for key, value in node.items()}
        if "properties" in node and node.get("additionalProperties", True) is True:
            result["additionalProperties"] = False
        if complete and "properties" in node and "required" not in node:
            result["required"] = list(node["properties"])
        return result

    tightened: dict[str, Schema] = tighten(schemas)
    return tightened


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(path, method, operation)`` for every operation of the document."""
    for path, item in _document()["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def operation(operation_id: str) -> tuple[str, str, dict[str, Any]]:
    """The ``(path, method, operation)`` with ``operationId`` ``operation_id``."""
    for found in operations():
        if found[2].get("operationId") == operation_id:
            return found
    raise KeyError(f"no operation {operation_id!r} in {DOCUMENT.name}")


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a local ``$ref`` followed (repeatedly); siblings of ``$ref`` are dropped."""
    while "$ref" in node:
        pointer = node["$ref"]
        if not pointer.startswith("#/"):
            raise ValueError(f"only local references are used in {DOCUMENT.name}: {pointer}")
        target: Any = _document()
        for part in pointer[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def schema(name: str) -> dict[str, Any]:
    """Schema ``name`` of ``components/schemas`` as written (its ``$ref`` s unresolved)."""
    return resolve({"$ref": f"#/components/schemas/{name}"})


def success_schema_name(path: str, method: str = "get") -> str:
    """The ``components/schemas`` name of the ``200`` answer of ``method path``."""
    op = _document()["paths"][path][method]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    ref: str = schema["$ref"]
    prefix = "#/components/schemas/"
    if not ref.startswith(prefix):
        raise ValueError(f"{method.upper()} {path}: the 200 schema is not a component: {ref}")
    return ref[len(prefix) :]


def parameters(path: str, method: str = "get") -> list[dict[str, Any]]:
    """The parameters of ``method path`` (path-level and operation-level, refs resolved)."""
    item = _document()["paths"][path]
    listed = [*item.get("parameters", []), *item[method].get("parameters", [])]
    return [resolve(parameter) for parameter in listed]
