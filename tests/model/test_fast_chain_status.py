"""Issue 22's typed fast path for the chain status (exporter/model/answers.py): whatever a node
answers, the fast path reads exactly what the slow one (``json`` and read_chain) reads, or
hands the body back to it; parts sent alike by many nodes are read once a cycle, within
their bounds, and forgotten with the cycle."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.bounds import Bounds
from exporter.model import readings
from exporter.model.answers import (
    MAX_FAST_DEPTH,
    ChainStatusFields,
    decode_chain_status,
    fits_fast_path,
)
from exporter.model.readings import MAX_PART_BYTES, MAX_PARTS, ChainReading, Shared, read_chain
from exporter.poll.client import decode
from exporter.poll.results import FetchError
from tests.support import generation
from tests.support.answers import ANY_JSON, answers, documents, encode
from tests.support.documents import chain_doc

SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
#: Small bounds, so generated answers cross them (drops counted in the parts and outside).
TIGHT = Bounds(
    features_per_chain=2, label_value_length=12, vote_sessions_per_chain=1, leaders_per_chain=2
)
Outcome = tuple[str, Any]


def slow(body: bytes, shared: Shared | None, bounds: Bounds) -> Outcome:
    """What the poll read before the fast path: ``json`` (as the client decodes), read_chain."""
    try:
        return "read", read_chain(decode(body, "/blockchains/c"), shared, bounds)
    except FetchError as error:
        return "refused", error.reason
    except ValueError as error:  # InvalidResponseError
        return "invalid", type(error).__name__


def fast(body: bytes, shared: Shared | None, bounds: Bounds) -> tuple[Outcome, bool]:
    """What the poll reads now, and whether the fast path took the body."""
    fields = decode_chain_status(body)
    if fields is None:
        return slow(body, shared, bounds), False
    return ("read", read_chain(fields, shared, bounds)), True


def assert_same(bodies: list[bytes], bounds: Bounds) -> int:
    """Each body reads the same both ways, alone and one cycle after another (sharing the
    parts); returns how many the fast path took."""
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
    st.text(max_size=20),
    st.sampled_from(["42", " 42", "-0", "1e3", "2s", "1m30s", "-1s", "2024-05-01T12:00:00Z"]),
)
PARTS = st.one_of(ANY_JSON, st.lists(st.text(max_size=16), max_size=4), SCALARS)
FIELDS = (
    "blockHeight",
    "lastMessageTime",
    "pendingMessagesCount",
    "delayedMessagesCount",
    "pendingTransactions",
    "syncing",
    "isInCouncil",
    "isVoting",
    "isTimeToVote",
    "keyType",
    "blockchainPeers",
    "councilMembers",
    "voteSessions",
    "consensus",
    "features",
)


@st.composite
def statuses(draw: st.DrawFn) -> bytes:
    """A chain status whose every field may be absent, a scalar of any type or a part of any
    shape, written as Python's json writes it (ASCII or not); a key may come twice."""
    document: dict[str, Any] = draw(st.sampled_from([{}, chain_doc(7)]))
    document = dict(document)
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=6)):
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


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(answers(documents("BlockchainStatus")), min_size=1, max_size=3))
def test_the_suites_mutated_chain_statuses_read_the_same_both_ways(answers: list[Any]) -> None:
    """The node-answer suites' answers (tests/support/answers.py): valid per the document,
    and mutated the ways nodes go wrong (types, numbers, nesting, bytes, encodings)."""
    assert_same([answer.body for answer in answers if answer.status == 200], TIGHT)


def test_a_real_nodes_answers_take_the_fast_path() -> None:
    """Not a vacuous equivalence: what real nodes send is read by the fast path."""
    bodies = [json.dumps(chain_doc(height)).encode() for height in range(5)]
    bodies.append(json.dumps(chain_doc(9, features={}, voteSessions={})).encode())
    assert assert_same(bodies, Bounds()) == len(bodies)
    assert assert_same(bodies, TIGHT) == len(bodies)


# --- what is left to the slow path ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[1, 2]", "not an object"),
        (b'{"blockHeight": NaN}', "json's NaN"),
        (b'{"blockHeight": 1e400}', "infinite"),
        (b'{"blockHeight": {"value": 1}}', "an object for a scalar"),
        (b'{"keyType": "\\ud800"}', "a lone surrogate escape"),
        (b'{"blockchainPeers": [1, 2]}', "peers not strings"),
        (b'{"blockHeight": ' + b"1" * 5000 + b"}", "an integer past Python's conversion"),
        ('{"keyType": "é"}'.encode(), "not ASCII"),
        (b'{"keyType": "\xff"}', "invalid UTF-8"),
        (b'{"features": {"a": "\xed\xa0\x80"}}', "a raw surrogate in a part"),
        (b"\xef\xbb\xbf" + json.dumps(chain_doc(1)).encode(), "a BOM"),
        (json.dumps(chain_doc(1)).encode("utf-16-le"), "UTF-16"),
        (b'{"blockHeight": 1} x', "trailing garbage"),
        (b'{"blockHeight": 1', "truncated"),
    ],
)
def test_bodies_the_fast_path_leaves_to_json(body: bytes, why: str) -> None:
    assert decode_chain_status(body) is None, why
    assert assert_same([body], Bounds()) == 0


def test_an_integer_too_long_for_python_in_a_part_reads_as_json_reads_it() -> None:
    body = b'{"consensus": {"minMembers": ' + b"9" * 5000 + b', "txKarmaThreshold": 3}}'
    assert decode_chain_status(body) is not None  # the part is text until read
    assert assert_same([body], Bounds()) == 1


def nested(depth: int) -> bytes:
    """A chain status with a field nested ``depth`` deep, past the length counted unseen."""
    padding = " " * (2 * MAX_FAST_DEPTH)
    return b'{"blockHeight": 5, "deep": %s%s%s}' % (
        b"[" * depth,
        padding.encode(),
        b"]" * depth,
    )


def test_nesting_is_counted_in_long_bodies_only_and_deep_ones_go_to_json() -> None:
    assert fits_fast_path(b"[" * MAX_FAST_DEPTH + b"]" * MAX_FAST_DEPTH)  # short: not counted
    assert fits_fast_path(nested(MAX_FAST_DEPTH - 1))
    assert not fits_fast_path(nested(MAX_FAST_DEPTH + 1))
    assert not fits_fast_path(nested(5000))
    assert assert_same([nested(MAX_FAST_DEPTH - 1), nested(5000)], Bounds()) == 1


# --- the parts read once a cycle -----------------------------------------------------------


def test_nodes_sending_the_same_parts_share_one_reading_of_them() -> None:
    shared = Shared()
    first, second = (
        read_chain(decode_chain_status(json.dumps(chain_doc(h)).encode()), shared) for h in (10, 11)
    )
    assert first.council is second.council and first.features is second.features
    assert first.sessions is second.sessions and first.consensus_view is second.consensus_view
    assert first.height == 10.0 and second.height == 11.0  # the node's own values stay its own


def test_parts_kept_are_bounded_in_size_and_number_and_forgotten_each_cycle() -> None:
    shared = Shared()
    calls: list[int] = []

    def reader(n: int) -> Any:
        def read() -> int:
            calls.append(n)
            return n

        return read

    big = b"[" + b'"k",' * MAX_PART_BYTES + b'"k"]'
    assert shared.part("council", big, reader(1)) == shared.part("council", big, reader(1)) == 1
    assert calls == [1, 1]  # over MAX_PART_BYTES: read each time, never kept
    for n in range(MAX_PARTS + 5):
        shared.part("council", str(n).encode(), reader(n))
    calls.clear()
    shared.part("council", b"3", reader(3))
    shared.part("council", str(MAX_PARTS + 2).encode(), reader(MAX_PARTS + 2))
    assert calls == [MAX_PARTS + 2]  # the first MAX_PARTS kept, the rest read each time
    shared.part("sessions", b"3", reader(-3))
    assert calls == [MAX_PARTS + 2, -3]  # kept per kind of part
    shared.clear()
    shared.part("council", b"3", reader(3))
    assert calls[-1] == 3  # a new cycle reads afresh


def test_the_same_text_as_a_different_part_or_key_type_is_read_apart() -> None:
    one = json.dumps(chain_doc(1, keyType=True)).encode()
    other = json.dumps(chain_doc(1, keyType=1)).encode()
    shared = Shared()
    views = [read_chain(decode_chain_status(body), shared).consensus_view for body in (one, other)]
    assert views == [read_chain(json.loads(body)).consensus_view for body in (one, other)]
    assert views[0] != views[1]  # true and 1 are equal in Python, not in the digest


def test_the_fields_decoded_hold_only_what_the_readings_use() -> None:
    fields = decode_chain_status(json.dumps(chain_doc(3, extra={"x": [1, 2, 3]})).encode())
    assert isinstance(fields, ChainStatusFields)
    assert not hasattr(fields, "extra")
    assert isinstance(read_chain(fields), ChainReading)
    assert readings.read_chain(fields) == read_chain(json.loads(json.dumps(chain_doc(3))))


def test_encode_of_the_suites_is_what_the_fast_path_meets() -> None:
    """The suites write bodies with tests.support.answers.encode: one round trip through it."""
    body = encode(chain_doc(4))
    assert decode_chain_status(body) is not None
    assert assert_same([body], Bounds()) == 1


def test_parts_read_under_other_bounds_are_not_reused() -> None:
    """A poll still out from before a reload (the hung-node guard keeps it) reads its answers
    with the old config's bounds into the same Shared as the new cycle's polls: a part it
    read must not stand for the new bounds' reading of the same text (a label value over the
    new length, more features or leaders than the new caps, drops counted wrongly)."""
    body = json.dumps(chain_doc(7, councilMembers=["k" * 20, "m" * 20, "n1", "n2"])).encode()
    fields = decode_chain_status(body)
    assert fields is not None
    shared = Shared()
    for old, new in ((Bounds(), TIGHT), (TIGHT, Bounds())):
        shared.clear()
        assert read_chain(fields, shared, old) == slow(body, None, old)[1]
        assert read_chain(fields, shared, new) == slow(body, None, new)[1]


# --- the same answer spelled another way ---------------------------------------------------


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
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4)):
        document[name] = draw(SPELLED_PARTS)
    return spelled(document, random.Random(draw(st.integers(0, 2**32)))).encode()


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(st.lists(spelled_statuses(), min_size=1, max_size=4), st.sampled_from([Bounds(), TIGHT]))
def test_chain_statuses_spelled_any_way_read_the_same_both_ways(
    bodies: list[bytes], bounds: Bounds
) -> None:
    assert_same(bodies, bounds)


BIG = "9" * 4300  # the most digits Python converts; one more and json reads a float


@pytest.mark.parametrize(
    ("body", "taken"),
    [
        (b'{"block\\u0048eight": 5, "key\\u0054ype": "a\\/b"}', True),  # escaped keys
        (b'{"consensus": 1, "consensus": {"minMembers": 3}}', True),  # the last one counts
        (b'{"blockHeight": {}, "blockHeight": 3}', False),  # a wrong type first: json's
        (b'{"blockHeight": -0, "pendingMessagesCount": -0.0, "keyType": -0}', True),
        (b'{"blockHeight": 1e-400, "keyType": 2.4703282292062328e-324}', True),  # underflow
        (b'{"blockHeight": 9007199254740993, "keyType": 1.7976931348623157e308}', True),
        (b'{"keyType": 1.7976931348623159e308}', False),  # rounds to infinity
        (b'{"keyType": %s, "consensus": {}}' % BIG.encode(), True),
        (b'{"keyType": %s9, "consensus": {}}' % BIG.encode(), False),
        (b'{"keyType": -%s, "consensus": {}}' % BIG.encode(), False),
        (b'{"keyType": "\\ud83d\\ude00", "consensus": {"consensusType": "\\u00e9"}}', True),
        (b'\r\n {"blockHeight": 1}\t\n', True),
        (b'{"features": {"b": true, "a": false}, "councilMembers": ["k2", "k1"]}', True),
    ],
)
def test_answers_json_reads_alike_whatever_their_spelling(body: bytes, taken: bool) -> None:
    assert (decode_chain_status(body) is not None) == taken
    assert assert_same([body], Bounds()) == taken
    assert assert_same([body], TIGHT) == taken


def test_parts_spelled_differently_are_read_apart_into_the_same_reading() -> None:
    """Whitespace and key order make other texts of the same part: each is read (and kept)
    on its own, and every reading is the same."""
    spellings = [
        b'{"features": {"a": true, "b": false}, "councilMembers": ["k1", "k2"]}',
        b'{"features":{"b":false,"a":true},"councilMembers":["k2","k1"]}',
        b'{"features": {"\\u0061": true, "b": false}, "councilMembers": ["k1","k2","k1"]}',
    ]
    shared = Shared()
    readings = [read_chain(decode_chain_status(body), shared) for body in spellings]
    assert readings[0].features == readings[1].features == readings[2].features
    assert readings[0].council == readings[1].council == readings[2].council
    assert readings[0].features is readings[1].features  # kept once (Shared), read apart
    assert assert_same(spellings, Bounds()) == len(spellings)
