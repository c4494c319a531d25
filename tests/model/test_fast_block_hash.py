"""Issue 22's typed fast path for a checkpoint block (exporter/model/answers.py
BlockHashDecoder): whatever a node answers, the hash read through it is the one ``json`` and
read_block_hash read, or the body is handed back to them; the rest of a block (its
transactions) is skipped, never built."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.model.answers import BlockHashes, block_hash_decoder
from exporter.model.readings import read_block_hash
from exporter.poll.client import decode
from exporter.poll.results import FetchError
from tests.support import generation
from tests.support.answers import ANY_JSON

SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
FIELD_LISTS = [
    ("hash", "blockHash"),
    ("blockHash",),
    ("id", "hash", "x y", ""),
    ('a"b', "a\\b", "a\tb"),
]
Outcome = tuple[str, Any]


def slow(body: bytes, fields: tuple[str, ...]) -> Outcome:
    """What the poll read before the fast path: ``json`` (as the client decodes), then the hash."""
    try:
        return "read", read_block_hash(decode(body, "/b"), fields)
    except FetchError as error:
        return "refused", error.reason
    except ValueError as error:  # InvalidResponseError
        return "invalid", str(error)


def fast(body: bytes, fields: tuple[str, ...]) -> tuple[Outcome, bool]:
    """What the poll reads now, and whether the fast path took the body."""
    decoder = block_hash_decoder(fields)  # None: msgspec cannot name a field so
    hashes = None if decoder is None else decoder(body)
    if hashes is None:
        return slow(body, fields), False
    try:
        return ("read", read_block_hash(hashes, fields)), True
    except ValueError as error:
        return ("invalid", str(error)), True


def same(body: bytes, fields: tuple[str, ...]) -> bool:
    """``body`` reads the same both ways; whether the fast path took it."""
    outcome, took = fast(body, fields)
    assert outcome == slow(body, fields), body
    return took


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12),
    st.sampled_from(["", "7c" * 32, "\u00e9", "\ud800", "x" * 300]),
)  # fmt: skip
KEYS = st.sampled_from(
    ["hash", "blockHash", "id", "x y", "", "height", "transactions", 'a"b', "a\\b", "a\tb"]
)


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    """A block whose hash fields may be absent, any scalar or any JSON, written ASCII or not,
    with a key sent twice now and then, or a body that is no object at all."""
    if draw(st.integers(0, 9)) == 0:
        return json.dumps(draw(ANY_JSON)).encode("utf-8", "surrogatepass")
    document: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 5))):
        values: st.SearchStrategy[Any] = SCALARS if draw(st.booleans()) else ANY_JSON
        document[draw(KEYS)] = draw(values)
    text = json.dumps(document, ensure_ascii=draw(st.booleans()))
    twice = draw(st.booleans())
    if document and twice:  # a key sent twice: the last one counts
        text = text[:-1] + ", " + json.dumps({draw(KEYS): draw(SCALARS)})[1:]
    return text.encode("utf-8", "surrogatepass")


@hypothesis_settings(generation.settings(300), suppress_health_check=SUPPRESSED)
@given(blocks(), st.sampled_from(FIELD_LISTS))
def test_generated_blocks_read_the_same_both_ways(body: bytes, fields: tuple[str, ...]) -> None:
    same(body, fields)


def test_a_real_nodes_blocks_take_the_fast_path() -> None:
    """Not a vacuous equivalence: what nodes send is read by the fast path."""
    transactions = [{"id": f"t{i}", "inputs": [{"n": i}] * 3} for i in range(50)]
    for document in (
        {"height": 5, "hash": "7c" * 32, "previousHash": "3e" * 32, "transactions": []},
        {"height": 5, "blockHash": "ab", "transactions": transactions},
        {"hash": "", "blockHash": "cd"},  # an empty hash falls through to the next field
        {"hash": 12, "blockHash": None},  # none readable: invalid both ways
        {},
    ):
        assert same(json.dumps(document).encode(), ("hash", "blockHash"))
    decoder = block_hash_decoder(("hash", "blockHash"))
    assert decoder is not None
    hashes = decoder(b'{"blockHash": "b", "hash": "a"}')
    assert hashes == BlockHashes(("a", "b"))  # in the configured order


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[1, 2]", "not an object"),
        (b'"7c"', "a string"),
        (b'{"hash": NaN}', "json's NaN"),
        (b'{"hash": ["7c"]}', "an array for the hash"),
        (b'{"hash": {"value": "7c"}}', "an object for the hash"),
        (b'{"hash": "\\ud800"}', "a lone surrogate escape"),
        ('{"hash": "é"}'.encode(), "not ASCII"),
        (b'{"hash": "7c"', "truncated"),
        (b'{"hash": "7c"} x', "trailing garbage"),
        (json.dumps({"hash": "7c"}).encode("utf-16-le"), "UTF-16"),
    ],
)
def test_blocks_the_fast_path_leaves_to_json(body: bytes, why: str) -> None:
    decoder = block_hash_decoder(("hash", "blockHash"))
    assert decoder is not None and decoder(body) is None, why
    assert not same(body, ("hash", "blockHash"))


def test_one_decoder_per_list_of_fields() -> None:
    assert block_hash_decoder(("hash", "blockHash")) is block_hash_decoder(("hash", "blockHash"))
    assert block_hash_decoder(("hash",)) is not block_hash_decoder(("blockHash",))


@pytest.mark.parametrize("field", ['a"b', "a\\b", "a\tb", "a\x00b"])
def test_no_decoder_for_a_field_msgspec_cannot_name(field: str) -> None:
    """Such a list of fields is read by the slow path (the config allows any text)."""
    assert block_hash_decoder(("hash", field)) is None
