"""Watch lists: request planning, reading answers, and golden files of the exposition.

Each ``testdata/golden/watch-*`` folder holds ``config.yml``, each node's ``health.json`` and
its recorded answers under ``nodes/<host>/`` at the request's path (the query folded in as a
folder: ``wallets/w1/blockchainId=abc123.json``; a ``.status`` file is a failed request), and
``expected.prom``: the watch series of one cycle. A node without a folder is down (no /health,
so nothing is asked). ``UPDATE_GOLDEN=1`` rewrites the expected files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from exporter.bounds import DEFAULT_MAX_LABEL_VALUE_LENGTH, NOTHING_DROPPED, Bounds, Dropped
from exporter.config.exporter import load_config, parse_config
from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from exporter.model.readings import InvalidResponseError, read_health
from exporter.model.watch_readings import (
    ContractReading,
    Reading,
    WalletReading,
    WatchedObject,
    WatchKind,
    WatchRequest,
    WatchStatus,
    plan_requests,
    read_answer,
    state_value,
    watched_object,
)
from tests.support.golden import GOLDEN, WATCH_CASES, assert_golden, watch_exposition
from tests.support.oracle import Samples


def recorded_reading(folder: Path, request: WatchRequest) -> Reading | None:
    """The reading of the recorded answer to ``request``; None when the request failed."""
    answer = folder / (request.path.replace("?", "/") + ".json")
    if not answer.is_file():
        return None  # a .status file (HTTP error) or no answer at all
    try:
        return read_answer(request, json.loads(answer.read_text()))
    except (ValueError, InvalidResponseError):
        return None


def watch_cycle(case: Path) -> WatchStatus:
    """One cycle of watch requests over the recorded answers of ``case``."""
    config = load_config(str(case / "config.yml"))
    objects: list[WatchedObject] = []
    for node in config.nodes:
        folder = case / "nodes" / str(urlsplit(node.url).hostname).removesuffix(".test")
        if not (folder / "health.json").is_file():
            continue
        health = read_health(json.loads((folder / "health.json").read_text()))
        for request in plan_requests(config.watch, node.name, health.blockchain_ids):
            reading = recorded_reading(folder, request)
            objects.append(watched_object(request, node.labels, reading))
    return WatchStatus(tuple(objects))


def test_watch_golden_cases_exist() -> None:
    assert {"watch-documented", "watch-odd-answers", "watch-failures"} <= set(WATCH_CASES)


@pytest.mark.parametrize("case", WATCH_CASES)
def test_watch_golden_exposition(case: str) -> None:
    folder = GOLDEN / case
    assert_golden(watch_exposition(watch_cycle(folder)), folder / "expected.prom")


def registry_of(case: str) -> Samples:
    """The samples written for ``case``, read back by client_python's parser."""
    return Samples(watch_exposition(watch_cycle(GOLDEN / case)))


def test_values_through_a_registry() -> None:
    registry = registry_of("watch-documented")
    token = {"node": "validator-1", "region": "eu-west", "blockchain": "abc123"}
    token["contract"] = "token"
    assert registry.get_sample_value("ledger_contract_up", token) == 1
    for status, value in (("ACTIVE", 1), ("PAUSED", 0), ("UPGRADED", 0)):
        labels = {**token, "status": status}
        assert registry.get_sample_value("ledger_contract_status", labels) == value
    assert registry.get_sample_value("ledger_contract_version", token) == 2
    assert registry.get_sample_value("ledger_contract_state_version", token) == 41
    daily = {**token, "key": "limits.daily"}
    assert registry.get_sample_value("ledger_contract_state_value", daily) == 5000.5
    holders = {**token, "key": "holders"}
    assert registry.get_sample_value("ledger_contract_state_value", holders) == 12
    cold = {"node": "validator-2", "blockchain": "abc123", "wallet": "cold"}
    assert registry.get_sample_value("ledger_wallet_enabled", cold) == 0
    assert registry.get_sample_value("ledger_wallet_satellite_wallets", cold) == 0
    # validator-2 does not list def456 and validator-1 is not in the cold wallet's nodes
    escrow = {"node": "validator-2", "blockchain": "def456", "contract": "0x9e11"}
    assert registry.get_sample_value("ledger_contract_up", escrow) is None
    cold_on_1 = {**cold, "node": "validator-1", "region": "eu-west"}
    assert registry.get_sample_value("ledger_wallet_up", cold_on_1) is None


def test_odd_answers_give_no_invented_samples() -> None:
    registry = registry_of("watch-odd-answers")
    frozen = {"node": "odd-1", "blockchain": "abc123", "contract": "frozen"}
    statuses = {
        status: registry.get_sample_value("ledger_contract_status", {**frozen, "status": status})
        for status in ("ACTIVE", "PAUSED", "UPGRADED", "FROZEN")
    }
    assert statuses == {"ACTIVE": 0, "PAUSED": 0, "UPGRADED": 0, "FROZEN": 1}
    assert registry.get_sample_value("ledger_contract_state_version", frozen) is None
    values = {
        key: registry.get_sample_value("ledger_contract_state_value", {**frozen, "key": key})
        for key in ("limits", "supply", "ratio", "flag", "missing", "deep.er.value", "nothing")
    }
    assert values == {
        "limits": None,
        "supply": None,
        "ratio": 1500,
        "flag": 1,
        "missing": None,
        "deep.er.value": -2,
        "nothing": None,
    }
    no_status = {"node": "odd-1", "blockchain": "abc123", "contract": "no-status"}
    assert registry.get_sample_value("ledger_contract_up", no_status) == 1
    assert registry.get_sample_value("ledger_contract_version", no_status) is None
    assert registry.get_sample_value("ledger_contract_state_up", no_status) == 1
    wallet = {"node": "odd-1", "blockchain": "abc123", "wallet": "w-no-groups"}
    assert registry.get_sample_value("ledger_wallet_up", wallet) == 1
    assert registry.get_sample_value("ledger_wallet_enabled", wallet) is None


def test_failures_say_up_0_and_nothing_else() -> None:
    text = watch_exposition(watch_cycle(GOLDEN / "watch-failures"))
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert sorted(samples) == [
        'ledger_contract_state_up{blockchain="abc123",contract="gone",node="bad-1"} 0.0',
        'ledger_contract_up{blockchain="abc123",contract="gone",node="bad-1"} 0.0',
        'ledger_wallet_up{blockchain="abc123",node="bad-1",wallet="w1"} 0.0',
    ]


@pytest.mark.parametrize(
    ("kind", "blockchain", "address", "path"),
    [
        (WatchKind.CONTRACT, "abc123", "0x5f", "blockchains/abc123/contracts/0x5f"),
        (WatchKind.CONTRACT_STATE, "abc123", "0x5f", "blockchains/abc123/contracts/0x5f/state"),
        (WatchKind.WALLET, "abc123", "w1", "wallets/w1?blockchainId=abc123"),
        (WatchKind.CONTRACT, "a/b", "c?d#e", "blockchains/a%2Fb/contracts/c%3Fd%23e"),
        (WatchKind.CONTRACT_STATE, "..", ".", "blockchains/%2E%2E/contracts/%2E/state"),
        (WatchKind.WALLET, "a&b=c", "w/1", "wallets/w%2F1?blockchainId=a%26b%3Dc"),
        (WatchKind.WALLET, "é 1", "%41", "wallets/%2541?blockchainId=%C3%A9%201"),
    ],
)
def test_request_paths_are_percent_encoded(
    kind: WatchKind, blockchain: str, address: str, path: str
) -> None:
    assert WatchRequest("", kind, blockchain, address, "").path == path


WATCH = WatchConfig(
    contracts=(
        WatchedContract("abc123", "0x1", "token"),
        WatchedContract("def456", "0x2", "escrow", nodes=("validator-2",)),
    ),
    wallets=(WatchedWallet("abc123", "w1", "treasury", nodes=("validator-1", "validator-2")),),
)


@pytest.mark.parametrize(
    ("node", "chains", "expected"),
    [
        (
            "validator-1",
            ["abc123", "def456"],
            [
                ("contract", "abc123", "token"),
                ("contract_state", "abc123", "token"),
                ("wallet", "abc123", "treasury"),
            ],
        ),
        (
            "validator-2",
            ["def456", "abc123"],
            [
                ("contract", "abc123", "token"),
                ("contract_state", "abc123", "token"),
                ("contract", "def456", "escrow"),
                ("contract_state", "def456", "escrow"),
                ("wallet", "abc123", "treasury"),
            ],
        ),
        (
            "validator-2",
            ["def456"],
            [("contract", "def456", "escrow"), ("contract_state", "def456", "escrow")],
        ),
        (
            "validator-3",
            ["abc123"],
            [("contract", "abc123", "token"), ("contract_state", "abc123", "token")],
        ),
        ("validator-1", [], []),
    ],
)
def test_plan_asks_only_nodes_that_list_the_chain(
    node: str, chains: list[str], expected: list[tuple[str, str, str]]
) -> None:
    plan = plan_requests(WATCH, node, chains)
    assert [(r.kind.value, r.blockchain, r.name) for r in plan] == expected
    assert all(r.node == node for r in plan)


def test_plan_without_a_watch_list_is_empty() -> None:
    assert plan_requests(WatchConfig(), "validator-1", ["abc123"]) == ()


@pytest.mark.parametrize(
    ("state", "key", "value"),
    [
        ({"a": 1}, "a", 1.0),
        ({"a": "42"}, "a", 42.0),
        ({"a": " 42"}, "a", None),
        ({"a": "NaN"}, "a", None),
        ({"a": 1e400}, "a", None),
        ({"a": True}, "a", 1.0),
        ({"a": False}, "a", 0.0),
        ({"a": {"b": {"c": 3}}}, "a.b.c", 3.0),
        ({"a": {"b": 3}}, "a", None),
        ({"a": [1]}, "a", None),
        ({"a": None}, "a", None),
        ({"a": 1}, "a.b", None),
        ({"a.b": 1}, "a.b", None),
        ("not an object", "a", None),
    ],
)
def test_state_value(state: object, key: str, value: float | None) -> None:
    assert state_value(state, key) == value


@pytest.mark.parametrize("body", [[], "text", 42, None])
def test_an_answer_that_is_not_an_object_is_invalid(body: object) -> None:
    request = plan_requests(WATCH, "validator-1", ["abc123"])[0]
    with pytest.raises(InvalidResponseError, match="not an object"):
        read_answer(request, body)


def test_unreadable_objects_vanish_but_up_stays() -> None:
    request = plan_requests(WATCH, "validator-1", ["abc123"])[2]
    text = watch_exposition(WatchStatus((watched_object(request, (("env", "x"),), None),)))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        'ledger_wallet_up{blockchain="abc123",env="x",node="validator-1",wallet="treasury"} 0.0'
    ]


def test_config_watch_section_is_read() -> None:
    config = parse_config(
        """
nodes:
  - {name: validator-1, url: "http://127.0.0.1:7740/"}
  - {name: validator-2, url: "http://127.0.0.1:7741/"}
watch:
  contracts:
    - {blockchain: abc, address: "0x1", state_keys: [a.b, c]}
    - {blockchain: abc, address: "0x2", name: token, nodes: [validator-2]}
  wallets:
    - {blockchain: abc, address: w1, name: token}
    - {blockchain: def, address: w1}
"""
    )
    assert config.watch == WatchConfig(
        contracts=(
            WatchedContract("abc", "0x1", "0x1", ("a.b", "c")),
            WatchedContract("abc", "0x2", "token", (), ("validator-2",)),
        ),
        wallets=(WatchedWallet("abc", "w1", "token"), WatchedWallet("def", "w1", "w1")),
    )


def test_no_watch_section_means_no_watch_list() -> None:
    config = parse_config('nodes: [{name: a, url: "http://127.0.0.1:1/"}]')
    assert config.watch == WatchConfig()


@pytest.mark.parametrize("label", ["contract", "wallet", "status", "key", "group", "code_hash"])
def test_static_labels_cannot_shadow_watch_labels(label: str) -> None:
    text = f'nodes: [{{name: a, url: "http://127.0.0.1:1/", labels: {{{label}: x}}}}]'
    with pytest.raises(Exception, match="is a label the exporter or Prometheus sets itself"):
        parse_config(text)


def test_requests_carry_decoded_segments_and_query() -> None:
    wallet = WatchRequest("n", WatchKind.WALLET, "a/b", "w 1", "x")
    assert (wallet.segments, wallet.query) == (("wallets", "w 1"), (("blockchainId", "a/b"),))
    state = WatchRequest("n", WatchKind.CONTRACT_STATE, "c", "0x1", "x")
    assert (state.segments, state.query) == (("blockchains", "c", "contracts", "0x1", "state"), ())


SURROGATE = "\ud800"  # what json.loads makes of "\\ud800" and of raw ED A0 80 bytes
LONG = "v" * (DEFAULT_MAX_LABEL_VALUE_LENGTH + 1)
CONTRACT = WatchRequest("n", WatchKind.CONTRACT, "abc123", "0x5f", "token")
WALLET = WatchRequest("n", WatchKind.WALLET, "abc123", "w1", "treasury")
CONTRACT_BODY = {"address": "0x5f", "status": "ACTIVE", "vmType": "evm", "codeHash": "c0de"}
WALLET_BODY = {
    "address": "w1",
    "keyType": "ed25519",
    "publicKey": "ab12",
    "authGroups": {"admins": {"create": True, "read": True}},
}


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} chars)"


@pytest.mark.parametrize(
    ("field", "value", "attribute", "dropped"),
    [
        ("status", SURROGATE, "status", NOTHING_DROPPED),
        ("status", LONG, "status", Dropped(label_values=1)),
        ("vmType", f"evm{SURROGATE}", "vm_type", NOTHING_DROPPED),
        ("vmType", LONG, "vm_type", Dropped(label_values=1)),
        ("codeHash", SURROGATE, "code_hash", NOTHING_DROPPED),
        ("codeHash", LONG, "code_hash", Dropped(label_values=1)),
        ("address", SURROGATE, "address", NOTHING_DROPPED),
        ("address", LONG, "address", Dropped(label_values=1)),
    ],
    ids=_short,
)
def test_contract_strings_a_label_cannot_take_are_unread(
    field: str, value: str, attribute: str, dropped: Dropped
) -> None:
    reading = read_answer(CONTRACT, {**CONTRACT_BODY, field: value})
    assert isinstance(reading, ContractReading)
    assert getattr(reading, attribute) is None
    assert reading.dropped == dropped
    assert watch_exposition(WatchStatus((watched_object(CONTRACT, (), reading),))).isascii()


@pytest.mark.parametrize(
    ("field", "value", "attribute", "dropped"),
    [
        ("keyType", SURROGATE, "key_type", NOTHING_DROPPED),
        ("keyType", LONG, "key_type", Dropped(label_values=1)),
        ("publicKey", f"ab{SURROGATE}", "public_key", NOTHING_DROPPED),
        ("publicKey", LONG, "public_key", Dropped(label_values=1)),
        ("address", SURROGATE, "address", NOTHING_DROPPED),
    ],
    ids=_short,
)
def test_wallet_strings_a_label_cannot_take_are_unread(
    field: str, value: str, attribute: str, dropped: Dropped
) -> None:
    reading = read_answer(WALLET, {**WALLET_BODY, field: value})
    assert isinstance(reading, WalletReading)
    assert getattr(reading, attribute) is None
    assert reading.dropped == dropped


@pytest.mark.parametrize(
    ("groups", "bounds", "kept", "dropped"),
    [
        ({f"adm{SURROGATE}": {"read": True}, "ops": {"read": False}}, Bounds(), ["ops"], 0),
        (
            {LONG: {"read": True}, "ops": {"read": False}},
            Bounds(),
            ["ops"],
            Dropped(label_values=1),
        ),
        ({LONG: {"read": "yes"}, "ops": {"read": False}}, Bounds(), ["ops"], 0),
        (
            {"c": {"read": True}, "a": {"read": True}, "b": {"update": False}, "d": {"x": True}},
            Bounds(auth_groups_per_wallet=2),
            ["a", "b"],
            Dropped(auth_groups=1),
        ),
        (
            {f"g{index:03d}": {"read": True} for index in reversed(range(100))},
            Bounds(),
            [f"g{index:03d}" for index in range(Bounds().auth_groups_per_wallet)],
            Dropped(auth_groups=100 - Bounds().auth_groups_per_wallet),
        ),
    ],
    ids=_short,
)
def test_auth_groups_are_bounded(
    groups: dict[str, Any], bounds: Bounds, kept: list[str], dropped: Dropped | int
) -> None:
    reading = read_answer(WALLET, {**WALLET_BODY, "authGroups": groups}, bounds)
    assert isinstance(reading, WalletReading)
    assert sorted({group for group, _, _ in reading.permissions}) == kept
    assert reading.dropped == (dropped or NOTHING_DROPPED)


class _Listing(tuple[str, ...]):
    """A /health listing that counts linear membership scans."""

    scans = 0

    def __contains__(self, item: object) -> bool:
        type(self).scans += 1
        return super().__contains__(item)


def test_a_huge_listing_is_not_scanned_once_per_watch_entry() -> None:
    """10^5 chain ids times hundreds of entries would be 10^7 comparisons a cycle."""
    listing = _Listing(f"chain-{index}" for index in range(100_000))
    wallets = tuple(
        WatchedWallet(f"chain-{index}", f"w{index}", f"w{index}") for index in range(300)
    )
    requests = plan_requests(WatchConfig(wallets=wallets), "validator-1", listing)
    assert len(requests) == 300
    assert _Listing.scans == 0
