"""The two readings of a chain status, both derived from the field table
(exporter/model/fields.py): the slow one (``json``, then read_chain over the dict) and the
fast one (msgspec's typed decoding of the table's fields, exporter/model/answers.py, then
read_chain over the decoded fields). Whatever a node answers, the fast path reads exactly
what the slow one reads, or hands the body back to it. One table of cases: every field of
the table with every odd value, and the odd bodies (hostile, deep, non-ASCII, huge numbers,
NaN, spelled another way); generated answers besides. Parts sent alike by many nodes are
read once a cycle, within their bounds: the sharing cases at the end."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.bounds import MAX_TEXT_CHARS, Bounds
from exporter.model import readings
from exporter.model.answers import (
    FAST_FIELDS,
    MAX_FAST_DEPTH,
    ChainStatusFields,
    decode_chain_status,
    fits_fast_path,
)
from exporter.model.fields import CHAIN_GAUGES, CONSENSUS, SESSION, TOP, ChainReading, Field
from exporter.model.readings import read_chain, read_health
from exporter.model.storage import MAX_PART_BYTES, Shared
from exporter.poll.client import decode
from exporter.poll.results import FetchError
from exporter.values import is_text
from tests.support import generation
from tests.support.answers import ANY_JSON, answers, documents, encode
from tests.support.documents import chain_doc

SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
#: Small bounds, so answers cross them (drops counted in the parts and outside).
TIGHT = Bounds(
    features_per_chain=2, label_value_length=12, vote_sessions_per_chain=1, leaders_per_chain=2
)
TINY = Bounds(
    label_value_length=4, leaders_per_chain=1, features_per_chain=1, vote_sessions_per_chain=1
)
Outcome = tuple[str, Any]


def slow(body: bytes, shared: Shared | None, bounds: Bounds) -> Outcome:
    """The slow reading: ``json`` (as the client decodes), then read_chain."""
    try:
        return "read", read_chain(decode(body, "/blockchains/c"), shared, bounds)
    except FetchError as error:
        return "refused", error.reason
    except ValueError as error:  # InvalidResponseError
        return "invalid", type(error).__name__


def fast(body: bytes, shared: Shared | None, bounds: Bounds) -> tuple[Outcome, bool]:
    """The poll's reading, and whether the fast path took the body."""
    fields = decode_chain_status(body)
    if fields is None:
        return slow(body, shared, bounds), False
    return ("read", read_chain(fields, shared, bounds)), True


def assert_same(bodies: list[bytes], bounds: Bounds) -> int:
    """Each body reads the same both ways, alone and one after another in a cycle (sharing
    the parts); returns how many the fast path took."""
    taken = 0
    fast_shared, slow_shared = Shared(), Shared()
    for body in bodies:
        (alone, took), expected = fast(body, None, bounds), slow(body, None, bounds)
        assert alone == expected, body
        in_cycle, _ = fast(body, fast_shared, bounds)
        assert in_cycle == slow(body, slow_shared, bounds) == expected, body
        taken += took
    return taken


def both_ways(document: dict[str, Any], shared: Shared, bounds: Bounds) -> ChainReading:
    """The fast path's reading of ``document`` (which it must take), checked against the slow."""
    body = json.dumps(document).encode()
    fields = decode_chain_status(body)
    assert fields is not None, body
    reading = read_chain(fields, shared, bounds)
    assert reading == read_chain(json.loads(body), None, bounds), body
    return reading


# --- the table: every field of the chain status with every odd value -----------------------

BIG_FLOAT_INT = int(sys.float_info.max)
#: Values a node may send for any field: of every JSON type, at every edge of the parsers.
ODD_VALUES = [
    0, 1, 2**63, 2**64 - 1, 2**64, BIG_FLOAT_INT, BIG_FLOAT_INT + 1, BIG_FLOAT_INT * 2, 10**400,
    -1, -(2**70), True, False, None, 0.0, -0.0, 1.5, -1.5, 1e308, "7", "-7", "", " 42", "1e3",
    "2s", "1m30s", "-1s", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00", "\u00e9", "x" * 70,
    [], ["p1"], ["p1", "p1", "p2"], ["p1", 2], [None], {}, {"a": True}, {"s1": {"round": 2}},
]  # fmt: skip


def placed(field: Field, value: Any) -> dict[str, Any]:
    """A chain status with ``value`` where ``field`` sits (the rest as nodes send it)."""
    if field.at == TOP:
        return chain_doc(5, **{field.name: value})
    if field.at == CONSENSUS:
        return chain_doc(5, consensus={**chain_doc(5)["consensus"], field.name: value})
    assert field.at == SESSION, field.path
    return chain_doc(5, voteSessions={"s1": {"round": 1, field.name: value}, "s2": {"round": 3}})


#: Every field the table reads of a chain status: the fast decoder's own and those inside its
#: parts (the consensus settings, every vote session).
READ_FIELDS = [*FAST_FIELDS, *(f for f in CHAIN_GAUGES if f.at != TOP and f not in FAST_FIELDS)]


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
@pytest.mark.parametrize("field", READ_FIELDS, ids=lambda field: field.path)
def test_every_field_reads_alike_with_every_value(field: Field, value: Any) -> None:
    body = json.dumps(placed(field, value)).encode()
    for bounds in (Bounds(), TINY):
        assert assert_same([body], bounds) in (0, 1)
    if field.at == TOP and not isinstance(value, dict | list) and value != 10**400:
        assert decode_chain_status(body) is not None, "a scalar is the fast path's"


BIG = "9" * 4300  # the most digits Python converts; one more and json reads a float


def nested(depth: int) -> bytes:
    """A chain status with a field nested ``depth`` deep, past the length counted unseen."""
    padding = " " * (2 * MAX_FAST_DEPTH)
    return b'{"blockHeight": 5, "deep": %s%s%s}' % (b"[" * depth, padding.encode(), b"]" * depth)


#: Odd bodies: (body, whether the fast path takes it, why). Either way they read alike.
ODD_BODIES = [
    (json.dumps(chain_doc(1)).encode(), True, "what real nodes send"),
    (json.dumps(chain_doc(9, features={}, voteSessions={})).encode(), True, "empty parts"),
    (encode(chain_doc(4)), True, "the answer suites' writer"),
    (b"[1, 2]", False, "not an object"),
    (b'{"blockHeight": NaN}', False, "json's NaN"),
    (b'{"blockHeight": 1e400}', False, "infinite"),
    (b'{"blockHeight": {"value": 1}}', False, "an object for a scalar"),
    (b'{"keyType": "\\ud800"}', False, "a lone surrogate escape"),
    (b'{"blockchainPeers": [1, 2]}', False, "peers not strings"),
    (b'{"blockHeight": ' + b"1" * 5000 + b"}", False, "an integer past Python's conversion"),
    ('{"keyType": "\u00e9"}'.encode(), False, "not ASCII"),
    (b'{"keyType": "\xff"}', False, "invalid UTF-8"),
    (b'{"features": {"a": "\xed\xa0\x80"}}', False, "a raw surrogate in a part"),
    (b"\xef\xbb\xbf" + json.dumps(chain_doc(1)).encode(), False, "a BOM"),
    (json.dumps(chain_doc(1)).encode("utf-16-le"), False, "UTF-16"),
    (b'{"blockHeight": 1} x', False, "trailing garbage"),
    (b'{"blockHeight": 1', False, "truncated"),
    (b'{"consensus": {"minMembers": ' + b"9" * 5000 + b', "txKarmaThreshold": 3}}', True,
     "an integer too long for Python in a part: text until read"),
    (nested(MAX_FAST_DEPTH - 1), True, "nested just under the depth"),
    (nested(5000), False, "nested deeper than the fast path goes"),
    (b'{"block\\u0048eight": 5, "key\\u0054ype": "a\\/b"}', True, "escaped keys"),
    (b'{"consensus": 1, "consensus": {"minMembers": 3}}', True, "the last one counts"),
    (b'{"blockHeight": {}, "blockHeight": 3}', False, "a wrong type first: json's"),
    (b'{"blockHeight": -0, "pendingMessagesCount": -0.0, "keyType": -0}', True, "minus zero"),
    (b'{"blockHeight": 1e-400, "keyType": 2.4703282292062328e-324}', True, "underflow"),
    (b'{"blockHeight": 9007199254740993, "keyType": 1.7976931348623157e308}', True, "2**53+1"),
    (b'{"keyType": 1.7976931348623159e308}', False, "rounds to infinity"),
    (b'{"keyType": %s, "consensus": {}}' % BIG.encode(), True, "4300 digits"),
    (b'{"keyType": %s9, "consensus": {}}' % BIG.encode(), False, "4301 digits"),
    (b'{"keyType": -%s, "consensus": {}}' % BIG.encode(), False, "minus 4300 digits"),
    (b'{"keyType": "\\ud83d\\ude00", "consensus": {"consensusType": "\\u00e9"}}', True,
     "non-ASCII escaped"),
    (b'\r\n {"blockHeight": 1}\t\n', True, "whitespace around"),
    (b'{"features": {"b": true, "a": false}, "councilMembers": ["k2", "k1"]}', True, "order"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "taken", "why"), ODD_BODIES, ids=[w for _, _, w in ODD_BODIES])
def test_odd_bodies_read_alike_and_the_fast_path_takes_what_it_should(
    body: bytes, taken: bool, why: str
) -> None:
    assert (decode_chain_status(body) is not None) == taken, why
    for bounds in (Bounds(), TIGHT, TINY):
        assert assert_same([body], bounds) == taken, why


def test_nesting_is_counted_in_long_bodies_only() -> None:
    assert fits_fast_path(b"[" * MAX_FAST_DEPTH + b"]" * MAX_FAST_DEPTH)  # short: not counted
    assert fits_fast_path(nested(MAX_FAST_DEPTH - 1))
    assert not fits_fast_path(nested(MAX_FAST_DEPTH + 1))


def test_the_fields_decoded_are_the_tables_top_level_fields_only() -> None:
    fields = decode_chain_status(json.dumps(chain_doc(3, extra={"x": [1, 2, 3]})).encode())
    assert isinstance(fields, ChainStatusFields)
    assert len(msgspec.structs.astuple(fields)) == len(FAST_FIELDS)
    assert {field.name for field in FAST_FIELDS} <= set(chain_doc(3))
    assert read_chain(fields) == read_chain(json.loads(json.dumps(chain_doc(3))))


# --- generated answers ---------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["42", " 42", "-0", "1e3", "2s", "1m30s", "-1s", "2024-05-01T12:00:00Z"]),
)
PARTS = st.one_of(ANY_JSON, st.lists(st.text(max_size=16), max_size=4), SCALARS)
FIELD_NAMES = [field.name for field in FAST_FIELDS]


@st.composite
def statuses(draw: st.DrawFn) -> bytes:
    """A chain status whose every field may be absent, a scalar of any type or a part of any
    shape, written as Python's json writes it (ASCII or not); a key may come twice."""
    document: dict[str, Any] = dict(draw(st.sampled_from([{}, chain_doc(7)])))
    for name in draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=6)):
        if draw(st.booleans()):
            document.pop(name, None)
        else:
            document[name] = draw(PARTS if draw(st.booleans()) else SCALARS)
    text = json.dumps(document, ensure_ascii=draw(st.booleans()))
    if document and draw(st.integers(0, 5)) == 0:  # a key sent twice: the last one counts
        name = draw(st.sampled_from(sorted(document)))
        text = text[:-1] + ", " + json.dumps({name: draw(PARTS)})[1:]
    return text.encode("utf-8", "surrogatepass")


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(statuses(), min_size=1, max_size=4), st.sampled_from([Bounds(), TIGHT]))
def test_generated_chain_statuses_read_the_same_both_ways(
    bodies: list[bytes], bounds: Bounds
) -> None:
    assert_same(bodies, bounds)


@hypothesis_settings(generation.settings(100), suppress_health_check=SUPPRESSED)
@given(st.lists(answers(documents("BlockchainStatus")), min_size=1, max_size=3))
def test_the_suites_mutated_chain_statuses_read_the_same_both_ways(answers: list[Any]) -> None:
    """The node-answer suites' answers (tests/support/answers.py): valid per the document,
    and mutated the ways nodes go wrong (types, numbers, nesting, bytes, encodings)."""
    assert_same([answer.body for answer in answers if answer.status == 200], TIGHT)


def spelled(value: Any, chance: random.Random) -> str:
    """``value`` as JSON text spelled any way a JSON writer may: whitespace between tokens,
    characters of keys and strings escaped (``\\u0041``, ``\\/``), integers written as
    floats or with an exponent, ``-0``; in an object, now and then a key sent twice with
    another value first (the last one counts)."""
    space = chance.choice(["", " ", "\n", "\t", "\r\n  "])
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        forms = [str(value), f"{value}.0", f"{value}e0", f"{value}0e-1", f"{value}E+0"]
        return chance.choice(forms + (["-0", "-0.0"] if value == 0 else []))
    if isinstance(value, float):
        return chance.choice([repr(value), f"{value:.17g}", f"{value:.17e}"])
    if isinstance(value, str):
        return '"' + "".join(chance.choice(_spellings(char)) for char in value) + '"'
    if isinstance(value, list):
        items = [spelled(item, chance) for item in value]
        return "[" + space + f",{space}".join(items) + space + "]"
    members = [(spelled(key, chance), spelled(item, chance)) for key, item in value.items()]
    if members and chance.randrange(5) == 0:
        members.insert(0, (members[-1][0], chance.choice(["null", "{}", "[1]", '"x"', "7"])))
    return "{" + ",".join(f"{space}{key}{space}:{space}{item}" for key, item in members) + "}"


def _spellings(char: str) -> list[str]:
    """How a JSON string may carry ``char``."""
    escaped = json.dumps(char)[1:-1]
    forms = [escaped, *(f"\\u{ord(char):04x}" for _ in range(ord(char) <= 0xFFFF))]
    return forms + ["\\/"] * (char == "/")


SPELLED_PARTS = st.one_of(
    SCALARS,
    st.lists(st.sampled_from(["k1", "k2", "k/3", 'k"4', "x" * 20]), max_size=4),
    st.dictionaries(
        st.sampled_from(["consensusType", "minMembers", "a/b", "round", "enableX"]),
        st.one_of(SCALARS, st.just({"round": 2, "sessionId": "s"})),
        max_size=4,
    ),
)


@st.composite
def spelled_statuses(draw: st.DrawFn) -> bytes:
    """A chain status with fields of any shape, spelled as a seed of the draw says."""
    document = dict(chain_doc(draw(st.integers(0, 9))))
    for name in draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=4)):
        document[name] = draw(SPELLED_PARTS)
    return spelled(document, random.Random(draw(st.integers(0, 2**32)))).encode()


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(spelled_statuses(), min_size=1, max_size=4), st.sampled_from([Bounds(), TIGHT]))
def test_chain_statuses_spelled_any_way_read_the_same_both_ways(
    bodies: list[bytes], bounds: Bounds
) -> None:
    assert_same(bodies, bounds)


# --- the parts read once a cycle for every node that sends them alike ----------------------


def test_nodes_sending_the_same_parts_share_one_reading_of_them() -> None:
    shared = Shared()
    first, second = (both_ways(chain_doc(h), shared, Bounds()) for h in (10, 11))
    assert first.council is second.council and first.features is second.features
    assert first.sessions is second.sessions and first.consensus_view is second.consensus_view
    assert first.height == 10.0 and second.height == 11.0  # the node's own values stay its own


def test_the_same_parts_with_another_key_type_are_looked_up_apart() -> None:
    shared = Shared()
    for key_type in ("secp256k1", "ed25519", True, 1, "1", None, "x" * 10):
        for bounds in (Bounds(), TINY):
            both_ways(chain_doc(3, keyType=key_type), shared, bounds)
    document = chain_doc(3)
    del document["keyType"]
    assert both_ways(document, shared, Bounds()).key_type is None
    views = [both_ways(chain_doc(1, keyType=k), shared, Bounds()).consensus_view for k in (True, 1)]
    assert views[0] != views[1]  # true and 1 are equal in Python, not in the digest


def test_one_part_moved_to_another_field_is_read_apart() -> None:
    """The joined key keeps each part in its place: the same texts elsewhere read apart."""
    shared = Shared()
    same = ["k1", "k2"]
    read = [
        both_ways(chain_doc(1, councilMembers=same, features=same), shared, Bounds()),
        both_ways(chain_doc(1, councilMembers=same, voteSessions=same), shared, Bounds()),
    ]
    assert read[0] != read[1]


def test_nodes_at_other_stages_of_a_vote_share_the_configuration_not_the_sessions() -> None:
    shared = Shared()
    sessions = [
        {f"s{n}": {"sessionId": f"s{n}", "round": n, "currentStage": n, "consensusRequired": n}
         for n in range(stage, stage + count)}
        for stage, count in ((1, 1), (2, 1), (1, 3), (5, 0))
    ]  # fmt: skip
    for bounds in (Bounds(), TINY):
        read = [both_ways(chain_doc(8, voteSessions=s), shared, bounds) for s in sessions]
        assert len({id(r.council) for r in read}) == 1
        assert len({r.sessions for r in read}) == (3 if bounds == TINY else 4)  # s1 alone twice
        assert len({id(r.consensus_view) for r in read}) == 1
        assert len({r.dropped for r in read}) == (2 if bounds == TINY else 1)


@pytest.mark.parametrize("absent", [f.name for f in FAST_FIELDS if f.shared])
def test_an_absent_part_reads_apart_from_every_present_one(absent: str) -> None:
    shared = Shared()
    document = chain_doc(2)
    full = both_ways(document, shared, Bounds())
    del document[absent]
    assert both_ways(document, shared, Bounds()) != full


def test_parts_over_the_size_bound_together_are_read_each_time_and_alike() -> None:
    """Parts that fit alone but not together: no joined entry, each part still shared."""
    council = [f"k{i:04d}" for i in range(MAX_PART_BYTES // 12)]
    features = {f"flag{i:04d}": True for i in range(MAX_PART_BYTES // 20)}
    document = chain_doc(4, councilMembers=council, features=features)
    assert len(json.dumps(council)) < MAX_PART_BYTES > len(json.dumps(features))
    shared = Shared()
    first, second = (both_ways(document, shared, b) for b in (Bounds(), Bounds()))
    assert first.council is second.council and first.sessions is second.sessions


def test_parts_read_under_other_bounds_are_not_reused() -> None:
    """A poll still out from before a reload (the hung-node guard keeps it) reads its answers
    with the old config's bounds into the same Shared as the new cycle's polls: a part it
    read must not stand for the new bounds' reading of the same text."""
    body = json.dumps(chain_doc(7, councilMembers=["k" * 20, "m" * 20, "n1", "n2"])).encode()
    fields = decode_chain_status(body)
    assert fields is not None
    shared = Shared()
    for old, new in ((Bounds(), TIGHT), (TIGHT, Bounds())):
        shared.clear()
        assert read_chain(fields, shared, old) == slow(body, None, old)[1]
        assert read_chain(fields, shared, new) == slow(body, None, new)[1]


def test_parts_spelled_differently_are_read_apart_into_the_same_reading() -> None:
    """Whitespace and key order make other texts of the same part: each is read (and kept)
    on its own, and every reading is the same."""
    spellings = [
        b'{"features": {"a": true, "b": false}, "councilMembers": ["k1", "k2"]}',
        b'{"features":{"b":false,"a":true},"councilMembers":["k2","k1"]}',
        b'{"features": {"\\u0061": true, "b": false}, "councilMembers": ["k1","k2","k1"]}',
    ]
    shared = Shared()
    read = [read_chain(decode_chain_status(body), shared) for body in spellings]
    assert read[0].features == read[1].features == read[2].features
    assert read[0].council == read[1].council == read[2].council
    assert read[0].features is read[1].features  # kept once (Shared), read apart
    assert assert_same(spellings, Bounds()) == len(spellings)


# --- lists of texts (council members, network peers) checked in C --------------------------


def text_set_by_member(value: Any) -> frozenset[str] | None:
    """_text_set as written plainly: each member checked in Python."""
    if not isinstance(value, list) or not all(
        isinstance(v, str) and 0 < len(v) <= MAX_TEXT_CHARS and is_text(v) for v in value
    ):
        return None
    return frozenset(value)


@pytest.mark.parametrize(
    "value",
    [[], ["a"], ["a", "a", "b"], ["a", ""], [""], ["a", 1], [1], [None], ["a", ["b"]], [True],
     ["x" * MAX_TEXT_CHARS], ["x" * (MAX_TEXT_CHARS + 1), "a"], ["a", "\ud800"], ["\udfff"],
     ["\u00e9", "\x00"], "ab", {"a": 1}, None, 3],
)  # fmt: skip
def test_a_list_of_texts_is_read_as_checking_each_member_reads_it(value: Any) -> None:
    assert readings._text_set(value) == text_set_by_member(value)


def test_equal_peer_sets_of_nodes_are_one_set_of_shared_ids() -> None:
    shared = Shared()
    first, second = (
        read_health(
            {"nodeId": "n", "network": {"networkPeers": [f"p{i}" for i in ids]}}, shared=shared
        )
        for ids in ((1, 2), (2, 3))
    )
    again = read_health({"nodeId": "n", "network": {"networkPeers": ["p2", "p1"]}}, shared=shared)
    assert again.network_peers is first.network_peers
    common = {peer for peer in second.network_peers if peer == "p2"}.pop()
    assert common is {peer for peer in first.network_peers if peer == "p2"}.pop()
