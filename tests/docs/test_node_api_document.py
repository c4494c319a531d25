"""The node API document (api/ledger-node-api.yaml), the project's reference for what a node
answers: a valid OpenAPI 3.1 document that keeps its own promises (nothing required but the
contract event's fields, every object open, formats asserted), that the simulator answers
every operation as it describes (every field named, none it does not name), and that names
every field the exporter's readers read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi

from exporter.config.watchlist import WatchConfig
from exporter.model.answers import FAST_FIELDS
from exporter.model.readings import InvalidResponseError, read_chain, read_health
from exporter.model.watch_readings import WatchKind, plan_requests, read_answer
from ledger_simulator import SimulatedNetwork
from ledger_simulator.demo import build_parser, demo_watch
from tests.support import nodeapi
from tests.support.clock import Clock
from tests.support.http import fetch
from tests.support.testdata import TESTDATA

#: Members whose value is a schema of its own: (schema, member) -> where the named schema sits.
NESTED = {
    ("Health", "network"): ("", "Network"),
    ("BlockchainStatus", "voteSessions"): ("additionalProperties", "VoteSession"),
    ("BlockchainStatus", "consensus"): ("", "Consensus"),
    ("BlockchainStatus", "features"): ("", "Features"),
    ("Contract", "metadata"): ("", "ContractMetadata"),
    ("Contract", "status"): ("", "ContractStatus"),
    ("ContractTrace", "events"): ("items", "ContractEvent"),
    ("ContractTrace", "trace"): ("", "ExecutionTrace"),
    ("Wallet", "authGroups"): ("additionalProperties", "AuthGroup"),
}


def prop(schema_name: str, member: str) -> dict[str, Any]:
    """The schema of ``member`` in component ``schema_name`` (as written, refs unresolved)."""
    properties = nodeapi.schema(schema_name)["properties"]
    assert member in properties, f"{schema_name} has no property {member!r}"
    found: dict[str, Any] = properties[member]
    return found


# --- the document itself ---------------------------------------------------------------------
def test_document_is_valid_openapi_3_1() -> None:
    document = nodeapi.document()
    assert document["openapi"].startswith("3.1.")
    validate_openapi(document)  # the OpenAPI 3.1 meta-schema, and every schema's dialect


def test_document_validator_is_not_lenient() -> None:
    """openapi-spec-validator does find a broken schema (so the test above can fail)."""
    document = nodeapi.document()
    document["components"]["schemas"]["Height"]["type"] = "integr"
    with pytest.raises(Exception, match="integr"):
        validate_openapi(document)


def test_formats_are_asserted() -> None:
    """The validators really check ``date-time`` (jsonschema skips a format whose checker
    package is missing: rfc3339-validator), and the UTC designator the document states."""
    check = nodeapi.validator("Timestamp")
    for good in ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.250Z", "2024-05-01T12:00:00+00:00"):
        assert check.is_valid(good), good
    for bad in (
        "2024-13-01T00:00:00Z",
        "2024-05-01 12:00:00Z",
        "yesterday",
        "2024-05-01T14:00:00+02:00",
    ):
        assert not check.is_valid(bad), bad


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        *[(t, True) for t in ("0", "30s", "1m45s", "2h0m0s", "1.5s", "500ms", "1h2m3.5s")],
        *[
            (t, True)
            for t in ("10ns", "7us", "7\u00b5s", "7\u03bcs", ".5s", "1.s", "-1m30s", "+5s")
        ],
        *[(t, False) for t in ("", "30", "1d", "s", "1 s", "1m 30s", "1.5", "-", ".s", "1S")],
        *[(t, False) for t in ("0.0", "1h-2m", "one", "2h0m0s ", "\u0661s", "--1s")],
    ],
)
def test_go_duration_pattern(text: str, valid: bool) -> None:
    """The pattern is Go's ``time.ParseDuration`` grammar: a sign, then ``0`` or one or more
    decimal numbers (fractions allowed) each with a unit."""
    assert nodeapi.validator("GoDuration").is_valid(text) is valid


def test_examples_are_valid_against_their_schemas() -> None:
    names = nodeapi.schema_names()
    checked = 0
    for name in names:
        examples = nodeapi.schema(name).get("examples", [])
        for example in examples:
            errors = [e.message for e in nodeapi.validator(name).iter_errors(example)]
            assert not errors, f"{name} example {example!r}: {errors}"
            checked += 1
    assert checked >= 5


def test_nothing_required_but_the_contract_event_fields() -> None:
    """Nodes vary: no field is required but a contract event's (info.description)."""
    required = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("required"), list):
                required[where] = sorted(node["required"])
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(nodeapi.document()["components"]["schemas"], "#/components/schemas")
    assert required == {"#/components/schemas/ContractEvent": ["data", "name", "timestamp"]}


def test_objects_accept_members_they_do_not_name() -> None:
    """No object schema closes itself; maps of flags only constrain their values' type."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            assert node.get("additionalProperties", True) is not False
            assert "unevaluatedProperties" not in node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(nodeapi.document())


def test_strict_and_complete_copies() -> None:
    """The document accepts unknown and missing members; the strict copy refuses unknown ones,
    the complete copy missing ones too, except where the document says a field is optional."""
    info = {"nodeVersion": "v1", "nodeId": "02ab", "peerId": "12D3KooW"}
    assert nodeapi.validator("NodeInfo").is_valid({**info, "extra": 1})
    assert nodeapi.validator("NodeInfo").is_valid({})
    assert not nodeapi.validator("NodeInfo", strict=True).is_valid({**info, "extra": 1})
    assert nodeapi.validator("NodeInfo", strict=True).is_valid({})
    assert not nodeapi.validator("NodeInfo", complete=True).is_valid({"nodeId": "02ab"})
    assert nodeapi.validator("NodeInfo", complete=True).is_valid(info)
    features = {"enableJoinCouncilOnStartup": True, "enableXMOnBlockMint": False}
    features |= {"enableTxProof": True, "enableOther": False}
    assert nodeapi.validator("Features", complete=True).is_valid(features)
    event = {"name": "Transfer", "timestamp": "2024-05-01T12:00:00Z", "data": {}}
    assert nodeapi.validator("ContractEvent", complete=True).is_valid(event)
    assert not nodeapi.validator("ContractEvent").is_valid({"name": "Transfer"})


def test_errors_are_left_open() -> None:
    """Error responses are not shown: each operation documents its success and a ``default``
    that accepts any JSON, and says why."""
    for path, method, op in nodeapi.operations():
        assert set(op["responses"]) == {"200", "default"}, f"{method} {path}"
        default = nodeapi.resolve(op["responses"]["default"])
        assert "not shown" in default["description"]
        error_schema = nodeapi.component("ErrorNotShown")
        for anything in ({"error": "x"}, "text", 42, None, [1]):
            jsonschema.Draft202012Validator(error_schema).validate(anything)
        assert op.get("summary") and op.get("description") and op.get("operationId")
    document = nodeapi.document()
    assert "security" not in document and "securitySchemes" not in document["components"]


def test_the_description_says_where_nodes_vary() -> None:
    """``info.description`` names what a node may leave out or add, and what is not shown."""
    description = nodeapi.document()["info"]["description"]
    assert "Where nodes vary" in description and "Not shown" in description
    open_maps = [
        name
        for name in nodeapi.schema_names()
        if isinstance(nodeapi.schema(name).get("additionalProperties"), dict)
    ]
    for name in ("Features", "AuthGroup"):
        assert name in open_maps
    for member in ("voteSessions", "authGroups", "features", "deploymentTxId", "creator"):
        assert f"`{member}`" in description, member


# --- fields ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("owner", "member"), sorted(NESTED))
def test_nested_objects_use_their_component(owner: str, member: str) -> None:
    where, target = NESTED[(owner, member)]
    node = prop(owner, member)
    if where:
        node = node[where]
    assert node["$ref"] == f"#/components/schemas/{target}"


def test_heights_counts_and_durations_use_their_kinds() -> None:
    """Heights and numbers of things are never negative; duration strings are Go durations."""
    kinds = {
        "Height": [("BlockchainStatus", "blockHeight"), ("VoteSession", "blockHeight")],
        "Count": [
            ("Network", "peerCount"),
            ("BlockchainStatus", "pendingMessagesCount"),
            ("BlockchainStatus", "delayedMessagesCount"),
            ("BlockchainStatus", "pendingTransactions"),
            ("Consensus", "minMembers"),
            ("VoteSession", "consensusRequired"),
        ],
        "GoDuration": [("Consensus", "txMaxTimeTrigger"), ("Consensus", "consensusTimeout")],
    }
    found: dict[str, list[tuple[str, str]]] = {kind: [] for kind in kinds}
    for name in nodeapi.schema_names():
        for member, written in nodeapi.schema(name).get("properties", {}).items():
            kind = written.get("$ref", "").rpartition("/")[2]
            if kind in found:
                found[kind].append((name, member))
    assert {k: sorted(v) for k, v in found.items()} == {k: sorted(v) for k, v in kinds.items()}
    assert nodeapi.schema("Height")["minimum"] == 0
    assert nodeapi.schema("Count")["minimum"] == 0


def test_feature_flags_and_auth_groups_are_boolean_maps() -> None:
    for name in ("Features", "AuthGroup"):
        schema = nodeapi.schema(name)
        assert schema["properties"], name
        assert all(p == {"type": "boolean"} for p in schema["properties"].values())
        assert schema["additionalProperties"] == {"type": "boolean"}
    assert list(nodeapi.schema("AuthGroup")["properties"]) == ["create", "read", "update", "delete"]


def test_contract_status_values_are_examples() -> None:
    status = nodeapi.schema("ContractStatus")
    assert status["examples"] == ["ACTIVE", "PAUSED", "UPGRADED"]
    assert "enum" not in status  # examples of the values, not the full set


# --- links: where a client gets the ids an endpoint needs ------------------------------------
def links() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path, _, op in nodeapi.operations():
        for name, link in op["responses"]["200"].get("links", {}).items():
            found.append((path, name, link))
    return found


@pytest.mark.parametrize(("source", "name", "link"), links(), ids=lambda v: str(v)[:40])
def test_links_point_at_real_parameters_and_fields(
    source: str, name: str, link: dict[str, Any]
) -> None:
    target_path, target_method, _ = nodeapi.operation(link["operationId"])
    target = {p["name"] for p in nodeapi.parameters(target_path, target_method)}
    assert set(link["parameters"]) == target, f"{name}: every parameter of the target"
    source_params = {p["name"] for p in nodeapi.parameters(source)}
    answer = nodeapi.schema(nodeapi.success_schema_name(source))
    for expression in link["parameters"].values():
        if expression.startswith("$request.path."):
            assert expression.removeprefix("$request.path.") in source_params
        else:
            first = expression.removeprefix("$response.body#/").split("/")[0]
            if answer["type"] == "array":
                assert first.isdigit()
            else:
                assert first in answer["properties"], f"{name}: {expression}"
    assert link.get("description")


def test_the_listing_links_to_the_chain_status() -> None:
    """A blockchainId is one of the values the listing (endpoint 3) returns."""
    from_listing = [link for path, _, link in links() if path == "/blockchains"]
    assert [link["operationId"] for link in from_listing] == ["getBlockchainStatus"]


# --- the tests' own node answers --------------------------------------------------------------
GOLDEN = TESTDATA / "golden"
#: golden answer file (below nodes/<node>/) -> the schema of its endpoint
GOLDEN_FILES = [
    (re.compile(r"health\.json"), "Health"),
    (re.compile(r"blockchains/[^/]+\.json"), "BlockchainStatus"),
    (re.compile(r"blockchains/[^/]+/contracts/[^/]+\.json"), "Contract"),
    (re.compile(r"blockchains/[^/]+/contracts/[^/]+/state\.json"), "ContractState"),
    (re.compile(r"wallets/[^/]+/blockchainId=[^/]+\.json"), "Wallet"),
]
#: Known departures of the "documented" golden answers from the document, each checked to be
#: still there: (file, JSON pointer) -> why it stays.
GOLDEN_DEPARTURES = {
    (
        "documented/nodes/validator-1/blockchains/chain%2Fwith%20space.json",
        "/lastMessageTime",
    ): "a +02:00 offset, not UTC as the document says: it tests the exporter's liberal "
    "reading of offsets (docs/metrics.md, rule 4); the document states what nodes send",
}


def golden_answers() -> list[Path]:
    return sorted(
        path
        for case in ("documented", "watch-documented")
        for path in (GOLDEN / case / "nodes").rglob("*.json")
    )


@pytest.mark.parametrize("path", golden_answers(), ids=lambda p: str(p.relative_to(GOLDEN)))
def test_documented_golden_answers_match_the_document(path: Path) -> None:
    """The golden cases named "documented" answer as the API describes: the document agrees,
    strictly (no field it does not name)."""
    relative = str(path.relative_to(GOLDEN))
    below_node = "/".join(relative.split("/")[3:])
    schema = next(name for pattern, name in GOLDEN_FILES if pattern.fullmatch(below_node))
    answer = json.loads(path.read_text(encoding="utf-8"))
    errors = {
        "/" + "/".join(str(p) for p in error.absolute_path): error.message
        for error in nodeapi.validator(schema, strict=True).iter_errors(answer)
    }
    allowed = {ptr for (file, ptr) in GOLDEN_DEPARTURES if file == relative}
    assert set(errors) == allowed, f"{unquote(relative)}: {errors}"


# --- the simulator answers every operation as the document describes -----------------------
@pytest.fixture(scope="module")
def simulator() -> Iterator[tuple[str, WatchConfig]]:
    """The demo's simulated network over real HTTP: its first node's URL and the watch list
    (a contract and a wallet that exist there)."""
    args = build_parser().parse_args([])
    with SimulatedNetwork(
        nodes=args.nodes, chains=args.chains, seed=args.seed, clock=Clock()
    ) as network:
        yield next(iter(network.node_urls.values())), demo_watch(network)


def answers(url: str, watch: WatchConfig) -> dict[str, Any]:
    """One answer of every operation, by its path template: the ids each needs come from
    the answers before it, as the document's links say."""
    contract, wallet = watch.contracts[0], watch.wallets[0]
    chain = contract.blockchain
    found: dict[str, Any] = {}

    def get(template: str, path: str) -> Any:
        answer = fetch(url + path, timeout=20)
        assert answer.status == 200, f"{path}: {answer.status} {answer.text[:200]}"
        found[template] = answer.json()
        return found[template]

    get("/", "")
    get("/health", "health")
    assert chain in get("/blockchains", "blockchains")
    status = get("/blockchains/{blockchainId}", f"blockchains/{chain}")
    get(
        "/blockchains/{blockchainId}/blocks",
        f"blockchains/{chain}/blocks?height={status['blockHeight']}",
    )
    base = f"blockchains/{chain}/contracts/{contract.address}"
    metadata = get("/blockchains/{blockchainId}/contracts/{address}", base)
    get("/blockchains/{blockchainId}/contracts/{address}/state", base + "/state")
    trace = "/blockchains/{blockchainId}/contracts/{address}/trace/{transactionId}"
    get(trace, f"{base}/trace/{metadata['deploymentTxId']}")
    get("/wallets/{address}", f"wallets/{wallet.address}?blockchainId={wallet.blockchain}")
    return found


def test_the_simulator_answers_every_operation_as_described(
    simulator: tuple[str, WatchConfig],
) -> None:
    """Every operation answers 200 with a body the document describes strictly (no field it
    does not name) and completely (every field it names): the simulator plays a node that
    sends all of them, so a field added to one side only fails here."""
    found = answers(*simulator)
    assert set(found) == {path for path, _, _ in nodeapi.operations()}
    for path, method, _ in nodeapi.operations():
        name = nodeapi.success_schema_name(path, method)
        errors = [
            f"{'/'.join(map(str, error.absolute_path))}: {error.message[:160]}"
            for error in nodeapi.validator(name, complete=True, strict=True).iter_errors(
                found[path]
            )
        ]
        assert not errors, f"{path} ({name}): {errors}"


# --- the exporter's readers read only fields the document names ------------------------------
class Recorder(dict[str, Any]):
    """A JSON object that logs every member a reader looks up, by its path in the answer
    (``*``: a value of a map, ``[]``: an item of an array)."""

    def __init__(self, data: dict[str, Any], path: tuple[str, ...], log: set[tuple[str, ...]]):
        super().__init__(data)
        self.path, self.log = path, log

    def _wrap(self, key: str, value: Any) -> Any:
        return _recorded(value, (*self.path, key), self.log)

    def __getitem__(self, key: str) -> Any:
        self.log.add((*self.path, key))
        return self._wrap(key, super().__getitem__(key))

    def get(self, key: str, default: Any = None) -> Any:
        self.log.add((*self.path, key))
        return self._wrap(key, super().get(key, default)) if key in self else default

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.log.add((*self.path, key))
        return super().__contains__(key)

    def values(self) -> Any:
        return [_recorded(v, (*self.path, "*"), self.log) for v in super().values()]

    def items(self) -> Any:
        return [(k, _recorded(v, (*self.path, "*"), self.log)) for k, v in super().items()]


def _recorded(value: Any, path: tuple[str, ...], log: set[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        return Recorder(value, path, log)
    if isinstance(value, list):
        return [_recorded(item, (*path, "[]"), log) for item in value]
    return value


def unnamed(schema_name: str, paths: set[tuple[str, ...]]) -> list[str]:
    """The paths read that the document's schema does not name."""
    missing = []
    for path in paths:
        node: Any = nodeapi.schema(schema_name)
        for step in path:
            node = nodeapi.resolve(node)
            if step == "[]" and "items" in node:
                node = node["items"]
            elif step != "[]" and step in node.get("properties", {}):
                node = node["properties"][step]
            elif step != "[]" and isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]  # a map: any key, its values described
            elif step != "[]" and "properties" not in node:
                break  # an object whose members are not shown (a contract's state)
            else:
                missing.append("/".join(path))
                break
    return sorted(missing)


#: Members readers look up that the document does not name, each checked to be still read:
#: (schema, path) -> why.
READER_DEPARTURES = {
    ("Health", "peerId"): "the node's peer id is read from `network.peerId`, else from a "
    "top-level `peerId` as `GET /` has it, for nodes whose /health carries what / does",
}


def test_the_readers_read_only_fields_the_document_names(
    simulator: tuple[str, WatchConfig],
) -> None:
    url, watch = simulator
    found = answers(url, watch)
    logs: dict[str, set[tuple[str, ...]]] = {}

    def read(schema_name: str, template: str, reader: Callable[[Any], object]) -> None:
        """The reader on the answer, and on each copy without one member (one level down
        too): a reader's fallbacks are read only when a member is missing."""
        log = logs.setdefault(schema_name, set())
        for variant in without_one_member(found[template]):
            with contextlib.suppress(InvalidResponseError):
                reader(_recorded(variant, (), log))

    read("Health", "/health", read_health)
    read("BlockchainStatus", "/blockchains/{blockchainId}", read_chain)
    kinds = {
        WatchKind.CONTRACT: ("Contract", "/blockchains/{blockchainId}/contracts/{address}"),
        WatchKind.CONTRACT_STATE: (
            "ContractState",
            "/blockchains/{blockchainId}/contracts/{address}/state",
        ),
        WatchKind.WALLET: ("Wallet", "/wallets/{address}"),
    }
    for request in plan_requests(watch, "node-1", [watch.contracts[0].blockchain]):
        schema_name, template = kinds[request.kind]
        read(schema_name, template, functools.partial(read_answer, request))
    assert set(logs) == {"Health", "BlockchainStatus", "Contract", "ContractState", "Wallet"}
    assert all(len(paths) >= 3 for paths in logs.values()), logs  # the recorder sees reads
    departures = {(name, "/".join(path)) for name, paths in logs.items() for path in paths}
    assert set(READER_DEPARTURES) <= departures, "a listed departure is no longer read"
    for name, paths in logs.items():
        found_unnamed = [p for p in unnamed(name, paths) if (name, p) not in READER_DEPARTURES]
        assert not found_unnamed, f"the readers read {name} members the document does not name"


def without_one_member(answer: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``answer``, then copies of it each without one member or one member's member."""
    yield answer
    for key, value in answer.items():
        yield {k: v for k, v in answer.items() if k != key}
        if isinstance(value, dict):
            for inner in value:
                yield {**answer, key: {k: v for k, v in value.items() if k != inner}}


def test_the_fast_chain_status_decoder_reads_only_fields_the_document_names() -> None:
    """The typed decoding of a chain status (msgspec) names its fields in camelCase."""
    names = {field.name for field in FAST_FIELDS}
    assert names <= set(nodeapi.schema("BlockchainStatus")["properties"])


def test_the_recorder_finds_an_unnamed_member() -> None:
    log: set[tuple[str, ...]] = set()
    body = _recorded({"blockHeight": 5, "voteSessions": {"s": {"round": 1, "x": 2}}}, (), log)
    body.get("blockHeight"), body.get("consensusRound")
    for session in body["voteSessions"].values():
        session.get("round"), session.get("x")
    assert unnamed("BlockchainStatus", log) == ["consensusRound", "voteSessions/*/x"]
    state: set[tuple[str, ...]] = {("state", "holders"), ("version",), ("versions",)}
    assert unnamed("ContractState", state) == ["versions"]
