"""Edge cases of issue 22's fast paths: a reused curl handle keeps its options only for a
request with the same profile, a body is capped and handed over whole after reuse, URL
segments skip encoding only when nothing needs it, and the render's value texts, label
templates and escaping give the same bytes as the slow way."""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Iterator

import pytest
from prometheus_client.utils import floatToGoString

from exporter import __version__, values
from exporter.config.nodes import NodeConfig
from exporter.expose.labels import NodeLabels, Templates, escape, label_string
from exporter.expose.render import CHUNK_LINES, sample_chunks
from exporter.model.reasons import Reason
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine
from exporter.poll.results import FetchError
from tests.support.fakenode import FakeNode
from tests.support.node_get import get_document


@pytest.fixture
def one_handle() -> Iterator[Engine]:
    """An engine with one slot: every request after the first reuses the same curl handle."""
    running = Engine(1, f"ledger-exporter/{__version__}")
    yield running
    running.close()


@pytest.fixture
def node(health_node: FakeNode) -> FakeNode:
    """The keep-alive node answering /health (conftest's), by its short name here."""
    return health_node


def _client(
    engine: Engine, node: FakeNode, max_bytes: int = 1 << 20, **config: object
) -> NodeClient:
    return NodeClient(engine, NodeConfig("n", node.url, **config), max_bytes)  # type: ignore[arg-type]


def _deadline() -> float:
    return time.monotonic() + 5


def test_a_reused_handle_drops_the_auth_and_headers_of_another_profile(
    one_handle: Engine, node: FakeNode
) -> None:
    with_auth = _client(one_handle, node, basic_auth=("alice", "secret"), headers=(("X-A", "1"),))
    plain = _client(one_handle, node)
    get_document(with_auth, ["health"], _deadline())
    get_document(plain, ["health"], _deadline())
    get_document(with_auth, ["health"], _deadline())
    first, second, third = (request.headers for request in node.requests)
    basic = "Basic " + base64.b64encode(b"alice:secret").decode()
    assert (first.get("Authorization"), first.get("X-A")) == (basic, "1")
    assert "Authorization" not in second and "X-A" not in second
    assert (third.get("Authorization"), third.get("X-A")) == (basic, "1")


def test_a_reused_handle_of_the_same_profile_sends_the_same_headers(
    one_handle: Engine, node: FakeNode
) -> None:
    client = _client(one_handle, node, headers=(("X-Scope", "ops"),))
    for _ in range(3):
        get_document(client, ["health"], _deadline())
    assert [request.headers.get("X-Scope") for request in node.requests] == ["ops"] * 3
    assert len({request.port for request in node.requests}) == 1  # kept alive throughout


def test_the_cap_holds_on_a_reused_handle_and_a_small_answer_after_it_is_whole(
    one_handle: Engine, node: FakeNode
) -> None:
    node.set("/big", {"blob": "x" * 5000})
    node.set("/small", {"ok": True})
    small_cap = _client(one_handle, node, max_bytes=1000)
    with pytest.raises(FetchError) as caught:
        get_document(small_cap, ["big"], _deadline())
    assert caught.value.reason is Reason.TOO_LARGE
    assert get_document(small_cap, ["small"], _deadline()) == {"ok": True}
    big_cap = _client(one_handle, node, max_bytes=1 << 20)  # another profile: reconfigured
    assert get_document(big_cap, ["big"], _deadline()) == {"blob": "x" * 5000}
    with pytest.raises(FetchError):
        get_document(small_cap, ["big"], _deadline())


@pytest.mark.parametrize(
    ("segment", "sent"),
    [
        ("8f2a9c", "8f2a9c"),
        ("health", "health"),
        ("a b", "a%20b"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("ü", "%C3%BC"),  # letters beyond ASCII are encoded, not sent raw
        ("²", "%C2%B2"),  # so are digits beyond ASCII
        ("a-b_c~", "a-b_c~"),
    ],
)
def test_url_segments_are_encoded_unless_plain_ascii(
    one_handle: Engine, node: FakeNode, segment: str, sent: str
) -> None:
    assert _client(one_handle, node).url_for(["blockchains", segment]).endswith(f"/{sent}")


@pytest.mark.parametrize("value", ["plain", 'a"b', "a\\b", "a\nb", "", '\\"\n'])
def test_escape_fast_path_matches_the_full_escape(value: str) -> None:
    full = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    assert escape(value) == full


@pytest.mark.parametrize(
    ("config_labels", "names"),
    [
        ((), ("blockchain",)),
        ((), ("endpoint", "reason")),
        ((("zone", 'z"{1}\\'),), ("a", "blockchain")),  # braces stay literal, sorted names
        ((("b", "x\ny"), ("zz", "}{")), ("blockchain", "leader")),
    ],
)
def test_a_node_filler_writes_like_label_string(
    config_labels: tuple[tuple[str, str], ...], names: tuple[str, ...]
) -> None:
    """A filler made once per node and family writes what label_string writes, whether the
    first values are given when it is made (a chain's, for all its leaders) or later."""
    node = NodeLabels('n"{0}', config_labels)
    values = tuple(f'v{i}"\\{{}}' for i in range(len(names)))
    expected = label_string((("node", 'n"{0}'), *config_labels, *zip(names, values, strict=True)))
    escaped = [escape(value) for value in values]
    assert node.filler(Templates(), names)(*escaped) == expected
    assert node.filler(Templates(), names, escaped[0])(*escaped[1:]) == expected
    assert node.with_labels(Templates(), names, values) == expected


TEXTS_KEPT_AND_MORE = [float(v) for v in range(1, 5000)]


@pytest.mark.parametrize(
    "values",
    [
        [0.0, -0.0, 0, 0.0, -0.0, 1, 1.0, True, -1.0, 1.0],  # zeros by sign, ints, repeats
        [math.nan, math.nan, float("nan"), float("inf"), float("-inf"), 1.7e9, 1.7e9],
        [None] * CHUNK_LINES + [None, 2.5, None],  # a chunk of no sample is not written
        [None] * 3,
        TEXTS_KEPT_AND_MORE + TEXTS_KEPT_AND_MORE[::-1],  # more values than texts kept
    ],
    ids=["zeros", "special", "none-chunk", "all-none", "many"],
)
def test_value_texts_are_reused_only_for_equal_values_with_equal_texts(
    values: list[float | None],
) -> None:
    """A family's value texts are made once per value: never confusing ``-0.0`` with
    ``0.0``, one NaN with another, or an int with what it does not equal; None is no
    sample, and a chunk of no sample is not written (its family header would be)."""
    series = [(f'{{i="{i}"}}', value) for i, value in enumerate(values)]
    chunks = list(sample_chunks("x", series))
    expected = "".join(
        f'x{{i="{i}"}} {floatToGoString(value)}\n'  # type: ignore[no-untyped-call]
        for i, value in enumerate(values)
        if value is not None
    )
    assert b"".join(chunks).decode() == expected
    batches = [values[start : start + CHUNK_LINES] for start in range(0, len(values), CHUNK_LINES)]
    assert len(chunks) == sum(1 for batch in batches if batch.count(None) < len(batch))


def test_parsed_durations_and_timestamps_are_remembered_only_when_short_and_valid() -> None:
    before = (values._parsed_duration.cache_info(), values._parsed_timestamp.cache_info())
    huge = "1" * 100_000 + "s"
    for _ in range(2):
        assert values.read_duration("1m30s") == 90.0
        assert values.read_duration("-0s") == 0.0
        assert values.read_duration("soon") is None
        assert values.read_duration(huge) is None
        assert values.read_timestamp("2024-05-01T12:00:00Z") == 1714564800.0
        assert values.read_timestamp("2024-05-01T12:00:00") is None  # no zone
        assert values.read_timestamp("2024-05-01T12:00:00Z" + " " * 100) is None
    durations, timestamps = (
        values._parsed_duration.cache_info(),
        values._parsed_timestamp.cache_info(),
    )
    assert durations.currsize - before[0].currsize <= 2  # "1m30s", "-0s": not "soon" or huge
    assert timestamps.currsize - before[1].currsize <= 1
    assert durations.hits > before[0].hits and timestamps.hits > before[1].hits
