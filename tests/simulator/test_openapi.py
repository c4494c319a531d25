"""The simulator against the node API document (api/ledger-node-api.yaml), with schemathesis.

``ledger-exporter simulate`` runs as a real process on a free loopback port; every answer of
its node must be one the document allows: a documented status, ``application/json``, a body
valid against the operation's schema (formats asserted). Two checks go beyond the document:
an answer names no field the document does not (a misspelt or invented field: the document
accepts unknown members because nodes vary, the simulator has no such excuse), and an error
is the simulator's own ``{"error": ..., "code": ...}`` with 400 or 404 (and 405 for any
method the document does not declare).

Requests come three ways:
- explicit: every id the simulator's listings give (its chains, the contracts and wallets of
  ``/-/sim/blockchains``, the deployment and transfer transactions found in its blocks) on
  every endpoint, so every operation is seen answering 200; and the error answers of each;
- generated: schemathesis draws each operation's parameters from the document (positive and,
  where a query parameter can be wrong, negative), often starting from the listings' ids,
  ``LEDGER_TEST_EXAMPLES`` examples per operation (default 50);
- stateful: schemathesis follows the document's links from ``/health`` and ``/blockchains``.

Faults: the run is for the simulator without faults. The faults that change what a node says
(stall, fork, peers lost, paused contracts, ...) must still give conforming answers, and do;
the consensus faults (a stuck session, a failing leader, a council change, drifted settings,
an idle chain) too, in a simulator of their own where they show (a stall freezes the node's
view of its chains before they are switched on); ``http_500`` answers an error the document
allows; ``down``, ``slow`` and ``malformed_json`` break the exchange on purpose (no answer, a
late one, invalid JSON) and are left out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, cast

import hypothesis
import jsonschema
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis import checks as sc
from schemathesis.generation.stateful.state_machine import APIStateMachine
from schemathesis.schemas import APIOperation, BaseSchema

from ledger_simulator.faults import FAULTS
from ledger_simulator.ids import go_duration, iso_utc
from tests.support import generation, nodeapi
from tests.support.http import fetch, get_json
from tests.support.waiting import wait_until

SIMULATE = ["--nodes", "3", "--chains", "3", "--seed", "7", "--block-interval", "1s"]
SIMULATE += ["--log.level", "warn"]
ADMIN_LINE = re.compile(r"^admin: (http://\S+)$")
DEFAULT_EXAMPLES = 50
#: Faults whose answers must still match the document: they change what a node reports.
CONTENT_FAULTS = (
    "stall",
    "peers_lost",
    "syncing",
    "fork",
    "other_council",
    "partition",
    "contract_paused",
    "contract_upgraded",
    "wallet_disabled",
)
#: Content faults of the chain's consensus, checked in a simulator of their own where they show.
CONSENSUS_FAULTS = (
    "session_stuck",
    "leader_failing",
    "consensus_drift",
    "council_change",
    "idle",
)
#: The settings the consensus run drifts on its node (None: the default change).
DRIFTS = (
    ("consensusTimeout", None),
    ("txMaxTimeTrigger", "2m"),
    ("minMembers", None),
    ("enableTxProof", None),
    ("keyType", None),
)
#: Faults that break the exchange on purpose, so the conformance run leaves them out.
TRANSPORT_FAULTS = {
    "down": "no answer at all: the connection is refused or closed",
    "slow": "the same answers, later (costs test time, proves nothing more)",
    "malformed_json": "the body cut in half: invalid JSON by design",
    "identity_swap": "another node's answers, as conforming as that node's own",
    "cert_expiry": "the https certificate, not the answers: needs --tls, refused by design",
    "lag_time": "the same answers as a healthy node's, each height later (costs test time)",
    "rewrite_hash": "one block's hash changed: as conforming as the block before it",
}
#: What the document promises: a documented status, content type, headers and body.
DOCUMENT_CHECKS = [
    sc.not_a_server_error,
    sc.status_code_conformance,
    sc.content_type_conformance,
    sc.response_headers_conformance,
    sc.response_schema_conformance,
]
#: For generated requests also: schema-valid ones are not refused as bad (400), invalid ones
#: are refused.
GENERATED_CHECKS = [*DOCUMENT_CHECKS, sc.positive_data_acceptance, sc.negative_data_rejection]
AnyCase = Case[Any]
Operation = APIOperation[Any, Any, Any, Any]
Check = Callable[[CheckContext, Response, AnyCase], bool | None]


# --- the simulator as a process --------------------------------------------------------------
@dataclass
class Simulator:
    """A running ``ledger-exporter simulate``: the node under test (the first that does not
    track every chain, so untracked chains are tried too), every node's base URL (no
    trailing slash), the admin URL, and what the node's listings give."""

    process: subprocess.Popen[str]
    admin: str
    urls: dict[str, str]
    name: str
    known: Known = field(init=False)

    @property
    def node(self) -> str:
        return self.urls[self.name]

    def other_node(self) -> str:
        """The name of a node other than the one under test."""
        return next(name for name in self.urls if name != self.name)


@contextmanager
def simulate(*args: str) -> Iterator[Simulator]:
    """Start ``ledger-exporter simulate`` (the installed command) on a free port."""
    command = Path(sys.executable).with_name("ledger-exporter")
    assert command.exists(), f"{command} missing: install the package (make .venv/.installed)"
    process = subprocess.Popen(
        [str(command), "simulate", "--listen-address", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        admin = next((m.group(1) for m in map(ADMIN_LINE.match, process.stdout) if m), "")
        assert admin.endswith("/-/sim/"), f"simulate printed no admin URL first: {admin!r}"
        listing = get_json(admin + "nodes")
        every_chain = set(listing["blockchains"])
        nodes = listing["nodes"]
        name = next(n for n, node in nodes.items() if set(node["blockchains"]) != every_chain)
        urls = {n: node["url"].rstrip("/") for n, node in nodes.items()}
        simulator = Simulator(process, admin.rstrip("/"), urls, name)
        simulator.known = discover(simulator)
        yield simulator
    finally:
        process.kill()
        process.communicate(timeout=30)


# --- ids from the simulator's listings -------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """Ids that exist on the node, from its listings: what makes a request answer 200."""

    chains: list[str]  # GET /blockchains of the node
    untracked: list[str]  # chains of the network the node does not track
    heights: dict[str, int]  # each chain's blockHeight when discovered
    contracts: list[tuple[str, str]]  # (chain, contract address)
    traces: list[tuple[str, str, str]]  # (chain, contract, transaction): deployments, transfers
    wallets: list[str]


def discover(simulator: Simulator) -> Known:
    """Walk the listings: the node's chains, the admin catalog's contracts and wallets, each
    contract's ``deploymentTxId``, and transactions of recent blocks that trace on a contract."""
    node = simulator.node
    chains = get_json(node + "/blockchains")
    catalog = get_json(simulator.admin + "/blockchains")
    heights = {c: get_json(f"{node}/blockchains/{c}")["blockHeight"] for c in chains}
    contracts = [(c, a) for c in chains for a in catalog["blockchains"][c]["contracts"]]
    traces = []
    for chain, address in contracts:
        contract = get_json(f"{node}/blockchains/{chain}/contracts/{address}")
        traces.append((chain, address, contract["deploymentTxId"]))
    for chain in chains:
        traces.extend(transfers(node, chain, heights[chain], catalog["blockchains"][chain]))
    untracked = [c for c in catalog["blockchains"] if c not in chains]
    assert untracked, "the simulated network must have a chain this node does not track"
    return Known(chains, untracked, heights, contracts, traces, catalog["wallets"])


def transfers(
    node: str, chain: str, height: int, listed: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """Up to three (chain, contract, transaction) of blocks below ``height`` whose trace the
    node serves (the block body is not in the document: its ``transactions`` are the
    simulator's)."""
    found: list[tuple[str, str, str]] = []
    for block_height in range(height, max(0, height - 40), -1):
        block = get_json(f"{node}/blockchains/{chain}/blocks", params={"height": block_height})
        for tx in block.get("transactions", []):
            for address in listed["contracts"]:
                url = f"{node}/blockchains/{chain}/contracts/{address}/trace/{tx}"
                if fetch(url).status == 200:
                    found.append((chain, address, tx))
        if len(found) >= 3:
            break
    assert found, f"no traced transaction in 40 blocks of {chain}"
    return found[:3]


@dataclass(frozen=True)
class Call:
    """One explicit request of an operation and the status it must get."""

    path: dict[str, str]
    query: dict[str, Any]
    status: int


def chain_calls(known: Known) -> list[Call]:
    calls = [Call({"blockchainId": c}, {}, 200) for c in known.chains]
    calls += [Call({"blockchainId": c}, {}, 404) for c in [*known.untracked, "no-such-chain"]]
    return calls


def block_calls(known: Known) -> list[Call]:
    calls = []
    for chain, height in known.heights.items():
        path = {"blockchainId": chain}
        calls += [Call(path, {"height": h}, 200) for h in (0, 1, height)]
        calls.append(Call(path, {"height": height + 10**6}, 404))
    path = {"blockchainId": known.chains[0]}
    calls += [Call(path, {}, 400)]
    calls += [Call(path, {"height": bad}, 400) for bad in ("abc", "-1", "1.5", "")]
    calls += [Call({"blockchainId": c}, {"height": 0}, 404) for c in known.untracked]
    return calls


def contract_calls(known: Known) -> list[Call]:
    calls = [Call({"blockchainId": c, "address": a}, {}, 200) for c, a in known.contracts]
    chain, address = known.contracts[0]
    other = next(c for c, _ in known.contracts if c != chain)
    calls.append(Call({"blockchainId": other, "address": address}, {}, 404))
    calls.append(Call({"blockchainId": chain, "address": "0x00"}, {}, 404))
    return calls


def trace_calls(known: Known) -> list[Call]:
    names = ("blockchainId", "address", "transactionId")
    calls = [Call(dict(zip(names, t, strict=True)), {}, 200) for t in known.traces]
    chain, address, tx = known.traces[0]
    wrong = next(a for c, a in known.contracts if c == chain and a != address)
    calls.append(Call(dict(zip(names, (chain, wrong, tx), strict=True)), {}, 404))
    calls.append(Call(dict(zip(names, (chain, address, "ab" * 32), strict=True)), {}, 404))
    return calls


def wallet_calls(known: Known) -> list[Call]:
    calls = [
        Call({"address": w}, {"blockchainId": c}, 200) for w in known.wallets for c in known.chains
    ]
    wallet = {"address": known.wallets[0]}
    calls.append(Call({"address": "0x1234"}, {"blockchainId": known.chains[0]}, 404))
    calls += [Call(wallet, {"blockchainId": c}, 404) for c in ["", *known.untracked]]
    calls.append(Call(wallet, {}, 400))
    return calls


def explicit_calls(path: str, known: Known) -> list[Call]:
    """Every known id on the operation at ``path``, and its error answers."""
    below_chain = path.removeprefix("/blockchains/{blockchainId}")
    match path, below_chain:
        case ("/" | "/health" | "/blockchains", _):
            return [Call({}, {}, 200)]
        case (_, ""):
            return chain_calls(known)
        case (_, "/blocks"):
            return block_calls(known)
        case (_, "/contracts/{address}"):
            return contract_calls(known)
        case (_, "/contracts/{address}/state"):
            return contract_calls(known)
        case (_, "/contracts/{address}/trace/{transactionId}"):
            return trace_calls(known)
        case ("/wallets/{address}", _):
            return wallet_calls(known)
    raise AssertionError(f"no explicit requests for {path}: add them")


def known_parameters(path: str, known: Known) -> list[Call]:
    """Parameters that exist, for generated requests to start from: each known path with its
    known query (a wallet's chain, a height) and without it (the query then generated)."""
    starts: dict[str, Call] = {}
    for call in explicit_calls(path, known):
        if call.status == 200 and call.path:
            for query in (call.query, {}):
                start = Call(call.path, query, 200)
                starts.setdefault(json.dumps([start.path, start.query], sort_keys=True), start)
    return list(starts.values())


# --- checks beyond the document --------------------------------------------------------------
@cache
def strict_validator(name: str) -> jsonschema.Draft202012Validator:
    return nodeapi.validator(name, strict=True)


def no_undocumented_fields(ctx: CheckContext, response: Response, case: AnyCase) -> bool | None:
    """A 200 answer names no member the document does not name (``Block``'s fields, which the
    reference does not show, are free)."""
    if response.status_code != 200:
        return None
    name = nodeapi.success_schema_name(case.operation.path)
    errors = strict_validator(name).iter_errors(json.loads(response.content))
    found = sorted(
        f"{'/'.join(map(str, e.absolute_path)) or '/'}: {e.message}"
        for e in errors
        if e.validator == "additionalProperties" and e.validator_value is False
    )
    if found:
        raise AssertionError(f"{name}: members the document does not name: {'; '.join(found)}")
    return None


def simulator_errors(ctx: CheckContext, response: Response, case: AnyCase) -> bool | None:
    """The document leaves errors open; the simulator's are 400 (a bad query parameter) or
    404 (an unknown path or id), with ``{"error": "<what is wrong>", "code": <status>}``."""
    status = response.status_code
    if status == 200:
        return None
    if status not in (400, 404):
        raise AssertionError(f"error status {status}: the simulator answers only 400 or 404")
    body = json.loads(response.content)
    if not (isinstance(body, dict) and body.keys() == {"error", "code"}):
        raise AssertionError(f"error body {body!r} is not {{'error': ..., 'code': ...}}")
    if body["code"] != status or not isinstance(body["error"], str) or not body["error"]:
        raise AssertionError(f"error body {body!r}: code must be {status}, error a message")
    return None


SIMULATOR_CHECKS: list[Check] = [no_undocumented_fields, simulator_errors]


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def simulator() -> Iterator[Simulator]:
    with simulate(*SIMULATE) as running:
        yield running


@pytest.fixture(scope="module")
def faulty() -> Iterator[Simulator]:
    """A second simulator whose node under test has every content fault on (partition with
    another node, so that it keeps a peer); contract and wallet faults on different chains,
    so each is seen."""
    with simulate(*SIMULATE) as running:
        first, second = running.known.chains[:2]
        for fault in CONTENT_FAULTS:
            body: dict[str, Any] = {"node": running.name, "fault": fault}
            if fault == "contract_paused":
                body["chain"] = first
            elif fault in ("contract_upgraded", "wallet_disabled"):
                body["chain"] = second
            switch(running, body)
        switch(running, {"node": running.other_node(), "fault": "partition"})
        yield running


@pytest.fixture(scope="module")
def consensus() -> Iterator[Simulator]:
    """A simulator whose chains show the consensus faults, every node seeing them: the first
    chain of the node under test stuck in a session, the second slowed by a failing leader
    after a council change, and the node's own settings drifted (``idle`` is switched by its
    own test). Round timers of 250 ms, so rounds climb within a second."""
    with simulate(*SIMULATE) as running:
        stuck, slowed = running.known.chains[:2]
        council = get_json(running.admin + "/blockchains")["blockchains"][slowed]["council"]
        timer = {"node": "*", "delay_seconds": "250ms"}
        switch(running, {**timer, "fault": "session_stuck", "chain": stuck})
        switch(running, {"node": "*", "fault": "council_change", "chain": slowed})
        failing = {"fault": "leader_failing", "chain": slowed, "target": council[0]}
        switch(running, {**timer, **failing})
        for setting, value in DRIFTS:
            drift = {"fault": "consensus_drift", "target": setting, "value": value}
            switch(running, {"node": running.name, **drift})
        yield running


def switch(simulator: Simulator, body: dict[str, Any]) -> None:
    answer = fetch(simulator.admin + "/faults", method="POST", json=body)
    assert answer.status == 200, answer.text


def load_schema(base_url: str) -> BaseSchema:
    """The document as schemathesis reads it, aimed at ``base_url``; no schemathesis.toml is
    looked for (the configuration is all here)."""
    schema = schemathesis.openapi.from_dict(nodeapi.document(), config=schemathesis.Config())
    schema.config.update(base_url=base_url)
    return schema


def operation(schema: BaseSchema, path: str) -> Operation:
    return schema[path]["GET"]


PATHS = [path for path, _, _ in nodeapi.operations()]


# --- explicit requests -----------------------------------------------------------------------
def run_calls(simulator: Simulator, path: str, checks: list[Check]) -> Counter[int]:
    """Every explicit request of ``path``: its status as expected, its answer conforming."""
    op = operation(load_schema(simulator.node), path)
    statuses: Counter[int] = Counter()
    for call in explicit_calls(path, simulator.known):
        case = op.Case(path_parameters=call.path, query=call.query)
        response = case.call_and_validate(checks=checks, additional_checks=SIMULATOR_CHECKS)
        assert response.status_code == call.status, f"{call}: {response.text}"
        statuses[response.status_code] += 1
    return statuses


@pytest.mark.integration
@pytest.mark.parametrize("path", PATHS)
def test_every_listed_id_answers_as_documented(simulator: Simulator, path: str) -> None:
    statuses = run_calls(simulator, path, DOCUMENT_CHECKS)
    assert statuses[200] >= 1
    if nodeapi.parameters(path):
        assert statuses.keys() - {200}, "the operation's error answers are checked too"


@pytest.mark.integration
@pytest.mark.parametrize("path", PATHS)
def test_answers_under_content_faults_still_conform(faulty: Simulator, path: str) -> None:
    statuses = run_calls(faulty, path, DOCUMENT_CHECKS)
    assert statuses[200] >= 1


@pytest.mark.integration
def test_faults_took_effect(faulty: Simulator) -> None:
    """The fault run is not a second fault-free run: the node reports its faults."""
    first, second = faulty.known.chains[:2]
    status = get_json(f"{faulty.node}/blockchains/{first}")
    assert status["syncing"] is True and status["blockchainPeers"] == []
    contract = faulty.known.contracts[0][1]
    assert get_json(f"{faulty.node}/blockchains/{first}/contracts/{contract}")["status"] == "PAUSED"
    upgraded = next(a for c, a in faulty.known.contracts if c == second)
    assert get_json(f"{faulty.node}/blockchains/{second}/contracts/{upgraded}")["status"] == (
        "UPGRADED"
    )
    wallet = get_json(
        f"{faulty.node}/wallets/{faulty.known.wallets[0]}", params={"blockchainId": second}
    )
    assert wallet["enabled"] is False


@pytest.mark.integration
@pytest.mark.parametrize("path", PATHS)
def test_answers_under_consensus_faults_still_conform(consensus: Simulator, path: str) -> None:
    statuses = run_calls(consensus, path, DOCUMENT_CHECKS)
    assert statuses[200] >= 1


def chain_status(simulator: Simulator, chain: str) -> dict[str, Any]:
    status: dict[str, Any] = get_json(f"{simulator.node}/blockchains/{chain}")
    return status


@pytest.mark.integration
def test_consensus_faults_took_effect(consensus: Simulator) -> None:
    """The consensus run is not a healthy run: the node shows the stuck session, rounds
    climbing, and its drifted settings."""
    stuck = consensus.known.chains[0]

    def climbed() -> dict[str, Any] | None:
        sessions = list(chain_status(consensus, stuck)["voteSessions"].values())
        return sessions[0] if sessions and sessions[0]["round"] >= 4 else None

    session = wait_until(climbed, timeout=60, message="the stuck session's round never climbed")
    assert chain_status(consensus, stuck)["voteSessions"].keys() == {session["sessionId"]}
    status = chain_status(consensus, consensus.known.chains[1])
    assert status["consensus"]["txMaxTimeTrigger"] == "2m0s"
    assert status["features"]["enableTxProof"] is False
    assert status["keyType"] == "ed25519"


@pytest.mark.integration
def test_an_idle_chain_conforms(consensus: Simulator) -> None:
    """``idle``: nothing pending and no session, as the document allows."""
    chain = consensus.known.chains[1]
    switch(consensus, {"node": consensus.name, "fault": "idle", "chain": chain})
    try:

        def idle() -> bool:
            status = chain_status(consensus, chain)
            return bool(status["voteSessions"] == {} and status["pendingTransactions"] == 0)

        wait_until(idle, timeout=60, message="the chain never went idle")
        statuses = run_calls(consensus, "/blockchains/{blockchainId}", DOCUMENT_CHECKS)
        assert statuses[200] >= 1
        assert idle()
    finally:
        switch(
            consensus, {"node": consensus.name, "fault": "idle", "enabled": False, "chain": chain}
        )


@pytest.mark.integration
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"])
def test_undeclared_methods_are_refused_on_every_path(simulator: Simulator, method: str) -> None:
    """The document declares only GET: any other method gets 405 with ``Allow: GET`` and the
    simulator's JSON error (schemathesis' undeclared-method check found TRACE answered by an
    HTML 501 page)."""
    for path in PATHS:
        call = (known_parameters(path, simulator.known) or [Call({}, {}, 200)])[0]
        url = simulator.node + path.format(**call.path)
        answer = fetch(url, method=method, params=call.query)
        assert answer.status == 405, f"{method} {url}: {answer.status}"
        assert answer.headers["Allow"] == "GET"
        assert answer.json() == {"error": f"method {method} not allowed", "code": 405}


def test_every_fault_is_classified() -> None:
    """A new fault must be put in or out of the conformance run, with a reason."""
    classified = {*CONTENT_FAULTS, *CONSENSUS_FAULTS, *TRANSPORT_FAULTS, "http_500"}
    assert classified == set(FAULTS)


@pytest.mark.integration
def test_http_500_answers_an_error_the_document_allows(simulator: Simulator) -> None:
    """``http_500``: a 500 with a JSON body, which the document's ``default`` accepts (only
    the server-error check, whose point this fault is, is left out)."""
    other = simulator.other_node()
    switch(simulator, {"node": other, "fault": "http_500"})
    schema = load_schema(simulator.urls[other])
    checks = [c for c in DOCUMENT_CHECKS if c is not sc.not_a_server_error]
    try:
        for path in PATHS:
            call = known_parameters(path, simulator.known)[:1] or [Call({}, {}, 500)]
            case = operation(schema, path).Case(path_parameters=call[0].path, query=call[0].query)
            assert case.call_and_validate(checks=checks).status_code == 500
    finally:
        switch(simulator, {"node": other, "fault": "http_500", "enabled": False})


# --- generated requests ----------------------------------------------------------------------
def strategy(op: Operation, path: str, known: Known) -> st.SearchStrategy[AnyCase]:
    """Requests drawn from the document: positive, negative where a query parameter can be
    wrong (a path segment is any string, so it cannot), and starting from known ids."""
    modes = [GenerationMode.POSITIVE]
    if any(p["in"] == "query" for p in nodeapi.parameters(path)):
        modes.append(GenerationMode.NEGATIVE)
    choices = [op.as_strategy(mode) for mode in modes]
    starts = [
        op.as_strategy(mode, path_parameters=call.path, query=call.query or None)
        for call in known_parameters(path, known)
        for mode in modes
        if mode is GenerationMode.POSITIVE or not call.query
    ]
    if starts:
        choices.append(st.sampled_from(range(len(starts))).flatmap(starts.__getitem__))
    return st.one_of(choices)


@pytest.mark.integration
@pytest.mark.parametrize("path", PATHS)
def test_generated_requests_answer_as_documented(simulator: Simulator, path: str) -> None:
    op = operation(load_schema(simulator.node), path)

    @generation.settings(DEFAULT_EXAMPLES)
    @hypothesis.given(case=strategy(op, path, simulator.known))
    def answers_as_documented(case: AnyCase) -> None:
        response = case.call_and_validate(
            checks=GENERATED_CHECKS, additional_checks=SIMULATOR_CHECKS
        )
        hypothesis.event(f"status {response.status_code}")

    answers_as_documented()


# --- links -------------------------------------------------------------------------------------
@pytest.mark.integration
def test_following_the_documents_links(simulator: Simulator) -> None:
    """schemathesis' state machine calls what needs no id, then follows the document's links
    (``/blockchains`` -> a chain's status -> its latest block); every answer conforms, and
    the linked operations answer 200 (a link that named a missing field would give none)."""
    seen: Counter[tuple[str, int]] = Counter()

    class Checked(APIStateMachine):
        def after_call(self, response: Response, case: AnyCase) -> None:
            seen[(case.operation.label, response.status_code)] += 1
            super().after_call(response, case)

        def validate_response(
            self,
            response: Response,
            case: AnyCase,
            additional_checks: list[Check] | None = None,
            **kwargs: Any,
        ) -> None:
            checks = [*(additional_checks or []), *SIMULATOR_CHECKS]
            super().validate_response(response, case, additional_checks=checks, **kwargs)

    base = load_schema(simulator.node).as_state_machine()
    machine = cast(type[APIStateMachine], type("Machine", (Checked, base), {}))
    # at least 20 scenarios, however few examples a quick run asks for: enough to follow links
    examples = max(20, generation.examples(20))
    settings = hypothesis.settings(
        generation.settings(20), max_examples=examples, stateful_step_count=6
    )
    machine.run(settings=settings)
    assert seen[("GET /blockchains/{blockchainId}", 200)] >= 1, seen
    assert seen[("GET /blockchains/{blockchainId}/blocks", 200)] >= 1, seen


# --- the formats the simulator writes --------------------------------------------------------
@pytest.mark.parametrize(
    "seconds", [0, 1e-9, 2.5e-7, 0.0015, 0.5, 1, 15, 59.999, 60, 105, 3600, 7322.25, 86400 * 3]
)
def test_simulator_durations_are_go_durations(seconds: float) -> None:
    assert nodeapi.validator("GoDuration").is_valid(go_duration(seconds)), go_duration(seconds)


@pytest.mark.parametrize("moment", [0.0, 1_700_000_000.0, 1_700_000_000.123456, 4_102_444_800.5])
def test_simulator_timestamps_are_utc_date_times(moment: float) -> None:
    assert nodeapi.validator("Timestamp").is_valid(iso_utc(moment)), iso_utc(moment)


def test_examples_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(generation.ENV, raising=False)
    assert generation.examples(50) == 50
    monkeypatch.setenv(generation.ENV, "5000")
    assert generation.examples(50) == 5000
    assert generation.settings(50).max_examples == 5000
    for bad in ("0", "-3", "many", "1e3", "\u0663"):
        monkeypatch.setenv(generation.ENV, bad)
        with pytest.raises(ValueError, match=generation.ENV):
            generation.examples(50)
