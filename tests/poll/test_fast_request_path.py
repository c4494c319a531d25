"""Issue 22's cheaper per-request path: the URL built without ``quote`` for plain names and
values, read exactly as ``quote`` writes them; a poll's chain requests counted ended in the
same lock round as their part, whatever raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pycurl
import pytest

from exporter import __version__
from exporter.config.nodes import NodeConfig
from exporter.errors import TransferError
from exporter.model.reasons import Reason
from exporter.model.storage import Shared
from exporter.poll.client import NodeClient, ReadBudget
from exporter.poll.engine import SHUT_DOWN, Done, Engine, Profile, Request, Response, _Handle
from exporter.poll.node import BlockPlan, NodePoll
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.waiting import wait_until


@pytest.fixture
def engine() -> Iterator[Engine]:
    """Two slots, not conftest's eight: of a poll's five chain requests, sent from its
    /health callback on the engine thread, two go out at a time and the rest queue."""
    running = Engine(2, f"ledger-exporter/{__version__}")
    yield running
    running.close()


@pytest.mark.parametrize(
    "text", ["height", "18337", "0", "", "a b", "a&b", "ü", "²", "-1", "a.b", "..", "\x00"]
)
def test_a_query_name_or_value_is_written_as_quote_writes_it(engine: Engine, text: str) -> None:
    client = NodeClient(engine, NodeConfig("n", "http://h/p/"), 1 << 20)
    url = client.url_for(["blockchains", "c1", "blocks"], ((text, text),))
    assert url == f"http://h/p/blockchains/c1/blocks?{quote(text, safe='')}={quote(text, safe='')}"


@pytest.fixture
def node(fake_nodes: FakeNodes) -> FakeNode:
    """A node with three chains, and the checkpoint blocks of two."""
    fake = fake_nodes.start()
    fake.play(
        health_doc(["c1", "c2", "c3"]), {c: chain_doc(i) for i, c in enumerate(["c1", "c2", "c3"])}
    )
    fake.set("/blockchains/c1/blocks?height=1", {"hash": "h1"})
    fake.set("/blockchains/c3/blocks?height=3", {"blockHash": "h3"})
    return fake


TWO_BLOCKS = BlockPlan({"c1": 1, "c3": 3}, ("hash", "blockHash"))


def poll_once(
    engine: Engine, fake: FakeNode, client: NodeClient | None = None, blocks: BlockPlan = TWO_BLOCKS
) -> NodePoll:
    """One poll of ``fake`` (the fast paths on), ended."""
    config = NodeConfig("n", fake.url)
    ended = threading.Event()
    poll = NodePoll(
        config,
        client or NodeClient(engine, config, 1 << 20),
        max_chains=10,
        blocks=blocks,
        shared=Shared(),
        ended=ended.set,
    )
    now = time.monotonic()
    poll.start(now + 60, now)
    assert ended.wait(30)
    return poll


def test_every_chain_request_is_counted_ended_once(engine: Engine, node: FakeNode) -> None:
    poll = poll_once(engine, node)
    result = poll.result(time.monotonic())
    assert [(c.blockchain, c.reading is not None, c.block_hash) for c in result.chains] == [
        ("c1", True, "h1"),
        ("c2", True, None),
        ("c3", True, "h3"),
    ]
    assert poll.in_flight == 0 and not poll.blamed_for_timeout


@pytest.mark.parametrize("field", ['block"hash', "block\\hash", "tx\thash"])
def test_hash_fields_msgspec_cannot_name_are_read_by_the_slow_path(
    engine: Engine, fake_nodes: FakeNodes, field: str
) -> None:
    """The config takes any text as a hash field, msgspec refuses some as a field's name:
    their blocks are read as before the fast path, and the node stays up (the fast path
    raised while sending the chain requests, so every node was down and blamed)."""
    fake = fake_nodes.start()
    fake.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    fake.set("/blockchains/c1/blocks?height=1", {field: "h1"})
    poll = poll_once(engine, fake, blocks=BlockPlan({"c1": 1}, (field,)))
    result = poll.result(time.monotonic())
    assert result.error is None
    assert [(c.blockchain, c.block_hash, c.block_error) for c in result.chains] == [
        ("c1", "h1", None)
    ]
    assert poll.in_flight == 0 and not poll.blamed_for_timeout


def test_a_chain_whose_callback_raises_is_still_counted_and_ended(
    engine: Engine, node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("a bug past the reader's guard")

    monkeypatch.setattr(NodePoll, "chain_answered", broken)
    poll = poll_once(engine, node)
    result = poll.result(time.monotonic())
    assert {c.error.reason for c in result.chains if c.error} == {Reason.INVALID_RESPONSE}
    assert [c.block_error is not None for c in result.chains] == [True, False, True]
    assert poll.in_flight == 0 and not poll.blamed_for_timeout


def test_a_chain_request_that_could_not_be_sent_fails_alone_uncounted(
    engine: Engine, node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sending one chain's request raised: that chain fails as ``invalid_response``, the
    node and its other chains are read, and the request never sent is not counted in flight
    (it would blame the node for a timeout)."""
    original = NodeClient.get

    def get(client: NodeClient, segments: list[str], *args: Any, **kwargs: Any) -> None:
        if segments[1:] == ["c2"]:
            raise RuntimeError("sending failed")
        original(client, segments, *args, **kwargs)

    monkeypatch.setattr(NodeClient, "get", get)
    poll = poll_once(engine, node)
    result = poll.result(time.monotonic())
    assert result.error is None
    assert [(c.blockchain, c.error and c.error.reason, c.block_hash) for c in result.chains] == [
        ("c1", None, "h1"),
        ("c2", Reason.INVALID_RESPONSE, None),
        ("c3", None, "h3"),
    ]
    assert "/blockchains/c2" not in node.paths
    assert poll.in_flight == 0 and not poll.blamed_for_timeout


def _get(client: NodeClient, fast: Any) -> tuple[Any, Any]:
    """GET /blockchains/c1 through ``fast``: (document, error)."""
    outcome: list[tuple[Any, Any]] = []
    answered = threading.Event()

    def done(document: Any, error: Any) -> None:
        outcome.append((document, error))
        answered.set()

    client.get(["blockchains", "c1"], time.monotonic() + 30, done, fast=fast)
    assert answered.wait(30)
    return outcome[0]


def test_a_fast_decoder_that_raises_fails_the_answer_naming_its_path(
    engine: Engine, node: FakeNode
) -> None:
    def raising(body: bytes) -> Any:
        raise MemoryError

    client = NodeClient(engine, NodeConfig("n", node.url.rstrip("/") + "/p/"), 1 << 20)
    node.set("/p/blockchains/c1", chain_doc(1))
    document, error = _get(client, raising)
    assert document is None and error.reason is Reason.INVALID_RESPONSE
    assert error.detail == "the answer from /p/blockchains/c1 could not be decoded (MemoryError)"


def test_a_body_the_fast_decoder_hands_back_is_read_by_json_and_errors_by_status(
    engine: Engine, node: FakeNode
) -> None:
    client = NodeClient(engine, NodeConfig("n", node.url), 1 << 20)
    assert _get(client, lambda body: None) == (chain_doc(0), None)
    assert _get(client, lambda body: {"fast": True}) == ({"fast": True}, None)
    node.set("/blockchains/c1", {"x": 1}, 503)
    document, error = _get(client, lambda body: {"fast": True})  # never for an error status
    assert document is None and error.reason is Reason.HTTP_STATUS
    assert error.detail == "HTTP status 503 from /blockchains/c1"


def test_requests_submitted_from_the_engine_thread_are_sent_or_fail_at_shutdown(
    node: FakeNode,
) -> None:
    """A callback (on the engine thread) submits without the lock: its requests are still
    all sent (one past its deadline fails unsent)."""
    engine = Engine(1, "test")
    profile = Profile(1 << 20)
    outcomes: list[tuple[str, Any]] = []
    follow_ups = threading.Event()

    def follow(name: str) -> Done:
        def done(outcome: Response | TransferError) -> None:
            outcomes.append((name, outcome))
            if len(outcomes) == 6:
                follow_ups.set()

        return done

    def first(outcome: Response | TransferError) -> None:
        outcomes.append(("health", outcome))
        for chain in ("c1", "c2", "c3"):
            deadline = time.monotonic() + 30
            engine.submit(
                Request(f"{node.url}blockchains/{chain}", deadline, profile), follow(chain)
            )
        engine.submit(
            Request(f"{node.url}health", time.monotonic() + 30, profile, True), follow("s")
        )
        engine.submit(Request(f"{node.url}health", 0.0, profile), follow("late"))

    try:
        engine.submit(Request(f"{node.url}health", time.monotonic() + 30, profile), first)
        assert follow_ups.wait(30)
    finally:
        engine.close()
    names = [name for name, _ in outcomes]
    assert sorted(names) == ["c1", "c2", "c3", "health", "late", "s"]
    statuses = {name: getattr(outcome, "status", None) for name, outcome in outcomes}
    assert statuses == {"health": 200, "c1": 200, "c2": 200, "c3": 200, "s": 200, "late": None}
    assert engine.in_flight() == 0


def test_a_request_submitted_by_a_callback_while_the_engine_closes_fails_as_shut_down(
    node: FakeNode,
) -> None:
    engine = Engine(1, "test")
    profile = Profile(1 << 20)
    ended: list[Response | TransferError] = []
    all_ended = threading.Event()

    def last(outcome: Response | TransferError) -> None:
        ended.append(outcome)
        all_ended.set()

    def first(outcome: Response | TransferError) -> None:
        closer = threading.Thread(target=engine.close)  # it waits for this callback to return
        closer.start()
        wait_until(lambda: engine._closing)  # the engine ends once this callback returns
        engine.submit(Request(f"{node.url}blockchains/c1", time.monotonic() + 30, profile), last)

    engine.submit(Request(f"{node.url}health", time.monotonic() + 30, profile), first)
    assert all_ended.wait(30)
    assert isinstance(ended[0], TransferError) and ended[0].code == SHUT_DOWN
    assert engine.in_flight() == 0


# --- the read budget charged with the CPU time of each reading ---------------------------


class _Charges(ReadBudget):
    """A read budget that also sums what the client charges it."""

    __slots__ = ("total",)

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.total = 0.0

    def charge(self, seconds: float) -> None:
        self.total += seconds
        super().charge(seconds)


def _charged(engine: Engine, node: FakeNode, fast: Any) -> float:
    """What reading one answer through ``fast`` charged to a fresh budget."""
    budget = _Charges(100.0)
    client = NodeClient(engine, NodeConfig("n", node.url), 1 << 20)
    answered = threading.Event()
    client.get(
        ["blockchains", "c1"],
        time.monotonic() + 30,
        lambda *_: answered.set(),
        (),
        budget,
        fast=fast,
    )
    assert answered.wait(30)
    return budget.total


def test_a_costly_reading_is_charged_at_least_its_cpu_time(engine: Engine, node: FakeNode) -> None:
    def costly(body: bytes) -> Any:
        started = time.thread_time()
        while time.thread_time() - started < 0.02:  # 20 ms of CPU
            pass
        return {"read": True}

    assert _charged(engine, node, costly) >= 0.02


@pytest.mark.parametrize("wait", [0.005, 0.2])
def test_a_reading_that_waits_is_charged_its_cpu_time_not_the_wait(
    engine: Engine, node: FakeNode, wait: float
) -> None:
    """A reading held up (here waiting, as for the GIL or a busy core), briefly or long, is
    not charged the time others used: a node's budget is its own CPU."""
    waited = threading.Event()

    def waiting(body: bytes) -> Any:
        waited.wait(wait)  # never set: wall time, next to no CPU
        return {"read": True}

    assert _charged(engine, node, waiting) < wait / 2


def test_a_cheap_reading_is_charged_little(engine: Engine, node: FakeNode) -> None:
    charged = _charged(engine, node, lambda body: {"read": True})
    assert 0 <= charged < 0.1  # its CPU time (one answer, on an idle engine)


class _Options:
    """A stand-in curl handle that records the options set on it."""

    def __init__(self) -> None:
        self.set: list[tuple[int, Any]] = []

    def setopt(self, option: int, value: Any) -> None:
        self.set.append((option, value))

    def reset(self) -> None:
        self.set.append((-1, None))


def test_a_reused_handle_gets_low_speed_time_again_only_when_it_changes(engine: Engine) -> None:
    handle = _Handle()
    handle.curl.close()
    options = handle.curl = _Options()  # type: ignore[assignment]
    profile, other = Profile(1 << 20), Profile(1 << 10)

    def low_speed_times(profile: Profile, remaining_ms: int) -> list[Any]:
        options.set.clear()
        engine._configure(handle, Request("http://h/", 0.0, profile), remaining_ms)
        return [value for option, value in options.set if option == pycurl.LOW_SPEED_TIME]

    assert low_speed_times(profile, 5_000) == [5]
    assert low_speed_times(profile, 5_900) == []  # still 5 whole seconds: kept
    assert low_speed_times(profile, 4_999) == [4]
    assert low_speed_times(profile, 300) == [1]  # at least a second
    assert low_speed_times(profile, 999) == []
    assert low_speed_times(other, 999) == [1]  # another profile: reset, so set again
    assert (-1, None) in options.set
