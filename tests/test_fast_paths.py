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

from exporter import __version__, values
from exporter.config.nodes import NodeConfig
from exporter.expose.labels import Template, escape, label_string
from exporter.expose.render import _chunks, go_float
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine
from exporter.poll.results import FetchError, Reason
from tests.support.fakenode import FakeNode, FakeNodes


@pytest.fixture
def one_handle() -> Iterator[Engine]:
    """An engine with one slot: every request after the first reuses the same curl handle."""
    running = Engine(1, f"ledger-exporter/{__version__}")
    yield running
    running.close()


@pytest.fixture
def node(fake_nodes: FakeNodes) -> FakeNode:
    started = fake_nodes.start(keep_alive=True)
    started.set("/health", {"nodeVersion": "1.4.2"})
    return started


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
    with_auth.get_json(["health"], _deadline())
    plain.get_json(["health"], _deadline())
    with_auth.get_json(["health"], _deadline())
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
        client.get_json(["health"], _deadline())
    assert [request.headers.get("X-Scope") for request in node.requests] == ["ops"] * 3
    assert len({request.port for request in node.requests}) == 1  # kept alive throughout


def test_the_cap_holds_on_a_reused_handle_and_a_small_answer_after_it_is_whole(
    one_handle: Engine, node: FakeNode
) -> None:
    node.set("/big", {"blob": "x" * 5000})
    node.set("/small", {"ok": True})
    small_cap = _client(one_handle, node, max_bytes=1000)
    with pytest.raises(FetchError) as caught:
        small_cap.get_json(["big"], _deadline())
    assert caught.value.reason is Reason.TOO_LARGE
    assert small_cap.get_json(["small"], _deadline()) == {"ok": True}
    big_cap = _client(one_handle, node, max_bytes=1 << 20)  # another profile: reconfigured
    assert big_cap.get_json(["big"], _deadline()) == {"blob": "x" * 5000}
    with pytest.raises(FetchError):
        small_cap.get_json(["big"], _deadline())


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
    "names",
    [("node",), ("node", "blockchain"), ("node", "endpoint", "reason"), ("zone", "a", "node")],
)
def test_a_template_fills_like_label_string(names: tuple[str, ...]) -> None:
    values = tuple(f'v{i}"\\' for i in range(len(names)))
    filled = Template(names).fill([escape(v) for v in values])
    assert filled == label_string(zip(names, values, strict=True))


def test_value_texts_are_reused_only_for_equal_values_with_equal_texts() -> None:
    series = [("{a}", 0.0), ("{b}", -0.0), ("{c}", 0.0), ("{d}", -0.0), ("{e}", 1), ("{f}", 1.0),
              ("{g}", True), ("{h}", math.nan), ("{i}", float("nan")), ("{j}", 1.7e9),
              ("{k}", None), ("{l}", 1.7e9)]  # fmt: skip
    text = b"".join(_chunks("m", series)).decode()
    expected = "".join(f"m{labels} {go_float(v)}\n" for labels, v in series if v is not None)
    assert text == expected
    assert "m{b} -0.0\n" in text and "m{c} 0.0\n" in text and "m{d} -0.0\n" in text


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
