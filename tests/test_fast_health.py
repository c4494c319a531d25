"""Issue 22's typed fast path for ``/health`` (exporter/model/answers.py ``decode_health``):
whatever a node answers, the fast path reads exactly what the slow one (``json`` and
read_health) reads, alone or with the cycle's shared copies, or hands the body back to it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.bounds import Bounds
from exporter.model.answers import HealthFields, decode_health
from exporter.model.readings import HealthReading, Shared, read_health
from exporter.poll.client import decode
from exporter.poll.results import FetchError
from tests.support import generation
from tests.support.answers import ANY_JSON, answers, documents, encode
from tests.support.documents import health_doc

SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
#: A small label bound, so generated ids, versions and peer ids cross it (drops counted).
TIGHT = Bounds(label_value_length=6)
Outcome = tuple[str, Any]


def slow(body: bytes, shared: Shared | None, bounds: Bounds) -> Outcome:
    """What the poll read before the fast path: ``json`` (as the client decodes), read_health."""
    try:
        return "read", read_health(decode(body, "/health"), bounds, shared)
    except FetchError as error:
        return "refused", error.reason
    except ValueError as error:  # InvalidResponseError
        return "invalid", str(error)


def fast(body: bytes, shared: Shared | None, bounds: Bounds) -> tuple[Outcome, bool]:
    """What the poll reads now, and whether the fast path took the body."""
    fields = decode_health(body)
    if fields is None:
        return slow(body, shared, bounds), False
    try:
        return ("read", read_health(fields, bounds, shared)), True
    except ValueError as error:
        return ("invalid", str(error)), True


def assert_same(bodies: list[bytes], bounds: Bounds) -> int:
    """Each body reads the same both ways, alone and one node after another in a cycle
    (sharing the texts and sets); returns how many the fast path took."""
    taken = 0
    fast_shared, slow_shared = Shared(), Shared()
    for body in bodies:
        (alone, took), expected = fast(body, None, bounds), slow(body, None, bounds)
        assert alone == expected, body
        in_cycle, _ = fast(body, fast_shared, bounds)
        assert in_cycle == slow(body, slow_shared, bounds) == expected, body
        taken += took
    return taken


# --- generated answers ---------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["8", "-1", "1e3", "", "12D3KooWpeer", "02ab" * 8]),
)
TEXT_LISTS = st.lists(st.one_of(st.text(max_size=8), st.sampled_from(["", "c/1", "peer-1"])))
VALUES = st.one_of(SCALARS, TEXT_LISTS, ANY_JSON)
TOP = ("nodeVersion", "nodeId", "peerId", "network", "blockchains")
NETWORK = ("peerCount", "peerId", "networkPeers", "networkType")


@st.composite
def healths(draw: st.DrawFn) -> bytes:
    """A /health answer whose every field (in ``network`` too) may be absent, null, a scalar
    of any type, a list of texts or anything, written as Python's json writes it (ASCII or
    not); a key may come twice (the last one counts)."""
    document: dict[str, Any] = {} if draw(st.booleans()) else health_doc(["c/1", "c/2"])
    network = dict(document.get("network", {}))
    for name in draw(st.lists(st.sampled_from(NETWORK), max_size=3)):
        network[name] = draw(VALUES)
    empty_network: bool = draw(st.booleans())
    if network or empty_network:
        document["network"] = network
    for name in draw(st.lists(st.sampled_from(TOP), max_size=4)):
        if draw(st.booleans()):
            document.pop(name, None)
        else:
            document[name] = draw(VALUES)
    text = json.dumps(document, ensure_ascii=draw(st.booleans()))
    if document and draw(st.integers(0, 5)) == 0:
        name = draw(st.sampled_from(sorted(document)))
        text = text[:-1] + ", " + json.dumps({name: draw(VALUES)})[1:]
    return text.encode("utf-8", "surrogatepass")


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(healths(), min_size=1, max_size=4), st.sampled_from([Bounds(), TIGHT]))
def test_generated_health_answers_read_the_same_both_ways(
    bodies: list[bytes], bounds: Bounds
) -> None:
    assert_same(bodies, bounds)


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(answers(documents("Health")), min_size=1, max_size=3))
def test_the_suites_mutated_health_answers_read_the_same_both_ways(answers: list[Any]) -> None:
    """The node-answer suites' answers: valid per the document, and mutated the ways nodes
    go wrong (types, numbers, nesting, bytes, encodings)."""
    assert_same([answer.body for answer in answers if answer.status == 200], TIGHT)


def test_a_real_nodes_answers_take_the_fast_path() -> None:
    """Not a vacuous equivalence: what real nodes send is read by the fast path."""
    bodies = [json.dumps(health_doc([f"c/{i}" for i in range(n)], n)).encode() for n in range(5)]
    bodies.append(encode(health_doc(["c/1"]) | {"network": {}, "peerId": "top"}))
    assert assert_same(bodies, Bounds()) == len(bodies)
    assert assert_same(bodies, TIGHT) == len(bodies)


# --- edge cases ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[1, 2]", "not an object"),
        (b'{"network": [1]}', "a list for the network"),
        (b'{"blockchains": ["c", 1]}', "a chain id not a string"),
        (b'{"network": {"networkPeers": [null]}}', "a peer id not a string"),
        (b'{"nodeId": {"a": 1}}', "an object for a scalar"),
        (b'{"nodeVersion": NaN}', "json's NaN"),
        (b'{"nodeId": "\\ud800"}', "a lone surrogate escape"),
        ('{"nodeId": "é"}'.encode(), "not ASCII"),
        (b"\xef\xbb\xbf" + json.dumps(health_doc(["c"])).encode(), "a BOM"),
        (b'{"nodeId": "n"', "truncated"),
    ],
)
def test_bodies_the_fast_path_leaves_to_json(body: bytes, why: str) -> None:
    assert decode_health(body) is None, why
    assert assert_same([body], Bounds()) == 0


@pytest.mark.parametrize(
    "document",
    [
        {"status": "ok"},  # another service's health check
        {"nodeVersion": None, "nodeId": None, "network": None, "blockchains": None},
        {"peerId": "p"},  # beside network, but not one of HEALTH_FIELDS
    ],
)
def test_an_answer_without_a_nodes_fields_is_refused_both_ways(document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    assert isinstance(decode_health(body), HealthFields)
    outcome, took = fast(body, Shared(), Bounds())
    assert took and outcome[0] == "invalid" and "not a ledger node" in outcome[1]
    assert assert_same([body], Bounds()) == 1


@pytest.mark.parametrize(
    ("network", "peer_id"),
    [
        ({"peerId": "inner"}, "inner"),
        ({"peerId": ""}, "top"),  # an empty one is not an id: the one beside network counts
        ({"peerId": 5}, "top"),
        ({}, "top"),
        (7, "top"),  # a network that is not an object: nothing in it is read
    ],
)
def test_the_peer_id_is_the_networks_else_the_one_beside_it(network: Any, peer_id: str) -> None:
    body = json.dumps({"nodeId": "n", "peerId": "top", "network": network}).encode()
    (outcome, took) = fast(body, Shared(), Bounds())
    assert took and isinstance(outcome[1], HealthReading) and outcome[1].peer_id == peer_id
    assert assert_same([body], Bounds()) == 1


def test_nodes_listing_the_same_peers_share_one_set_and_its_ids() -> None:
    shared = Shared()
    first, second, third = (
        read_health(decode_health(json.dumps(health_doc(["c"], peers)).encode()), shared=shared)
        for peers in (3, 3, 4)
    )
    assert first.network_peers is second.network_peers
    assert third.network_peers is not first.network_peers
    common = {id(peer) for peer in first.network_peers}
    assert {id(peer) for peer in third.network_peers} > common  # ids kept once across sets
