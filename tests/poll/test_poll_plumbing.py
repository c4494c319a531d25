"""Edge cases of issue 22's cheaper per-request plumbing: requests queued from another thread
wake the engine once, not once each, and all end; a request's profile never shows its
credentials; a poll counts its chain parts instead of looking at every chain again, so it
ends when they have (a chain listed twice included); a chain whose parts all ended is
reported as it is, one still out as timed out; and the history's cheaper reads (height and
syncing at fixed offsets, consensus bookkeeping that returns at once when nothing failed,
error counters started by a set lookup) read as before."""

from __future__ import annotations

import math
import os
import threading
import time

import pytest

from exporter.config.nodes import NodeConfig
from exporter.errors import TransferError
from exporter.model.fields import BLOCK_HEIGHT, SYNCING, ChainReading
from exporter.model.reasons import Reason
from exporter.poll.client import NodeClient
from exporter.poll.consensus_history import ChainConsensus
from exporter.poll.engine import Engine, Profile, Request, Response
from exporter.poll.history import History
from exporter.poll.node import BlockPlan, NodePoll, _ended
from exporter.poll.results import ChainResult, FetchError, NodeResult
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.gauges import gauges_packed
from tests.support.waiting import RecordedWaits, wait_until


def test_requests_queued_from_another_thread_all_end_with_few_wakeups(
    engine: Engine, fake_nodes: FakeNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = fake_nodes.start(keep_alive=True)
    node.set("/health", {"nodeVersion": "1.4.2"})
    writes: list[int] = []
    original = os.eventfd_write

    def counted(fd: int, value: int) -> None:
        writes.append(value)
        original(fd, value)

    monkeypatch.setattr(os, "eventfd_write", counted)  # the engine's module calls os.eventfd_write
    ended: list[Response | TransferError] = []
    all_ended = threading.Event()
    requests = 200

    def done(outcome: Response | TransferError) -> None:
        ended.append(outcome)
        if len(ended) == requests:
            all_ended.set()

    profile = Profile(1 << 20, ("Accept: application/json",))
    deadline = time.monotonic() + 30
    for _ in range(requests):
        engine.submit(Request(node.url + "health", deadline, profile), done)
    assert all_ended.wait(30)
    assert all(isinstance(outcome, Response) and outcome.status == 200 for outcome in ended)
    assert 1 <= len(writes) < requests  # a wakeup still unread is not written again


def test_a_wakeup_after_the_engine_read_the_last_one_is_written_again(engine: Engine) -> None:
    """The engine clears the pending mark as it reads the eventfd: a later submit wakes it."""
    ended = threading.Event()
    profile = Profile(1024)
    for _ in range(3):
        ended.clear()
        engine.submit(
            Request("http://127.0.0.1:9/", time.monotonic() - 1, profile),
            lambda _: ended.set(),
        )
        assert ended.wait(10)  # past its deadline: failed unsent, by the woken engine


def test_an_idle_engine_waits_for_a_submit_instead_of_waking_ten_times_a_second(
    engine: Engine, fake_nodes: FakeNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing queued, in flight or timed, the engine waits on its epoll without a
    timeout; a submit still wakes it (the eventfd), so the request is answered."""
    node = fake_nodes.start(keep_alive=True)
    node.set("/health", {"nodeVersion": "1.4.2"})
    polls = RecordedWaits(engine._epoll)
    monkeypatch.setattr(engine, "_epoll", polls)
    profile = Profile(1 << 20, ("Accept: application/json",))

    def ask_once() -> None:
        ended: list[Response | TransferError] = []
        engine.submit(Request(node.url + "health", time.monotonic() + 30, profile), ended.append)
        wait_until(lambda: bool(ended), timeout=30)
        assert isinstance(ended[0], Response) and ended[0].status == 200
        wait_until(lambda: bool(polls.timeouts) and polls.timeouts[-1] == -1, timeout=30)

    for _ in range(3):  # each submit wakes the engine waiting without a timeout
        ask_once()
    assert -1 in polls.timeouts and any(t is not None and t >= 0 for t in polls.timeouts)


def test_a_requests_repr_never_shows_its_credentials() -> None:
    profile = Profile(1024, ("Authorization: Bearer s3cr3t",), ("alice", "pa55word"))
    shown = repr(Request("http://node/health", 1.0, profile))
    assert "pa55word" not in shown and "s3cr3t" not in shown and "alice" not in shown
    assert "basic_auth=..." in shown


def test_equal_profiles_compare_equal_so_a_handle_is_reused_across_nodes() -> None:
    first = Profile(1024, ("Accept: application/json",), None)
    second = Profile(1024, ("Accept: application/json",), None)
    assert first == second and first is not second
    assert Profile(2048, ("Accept: application/json",)) != first


@pytest.mark.parametrize("chains", [("c1", "c2"), ("c1", "c1", "c2")])
def test_a_poll_ends_once_every_chain_part_has_even_with_a_chain_listed_twice(
    engine: Engine, fake_nodes: FakeNodes, chains: tuple[str, ...]
) -> None:
    fake = fake_nodes.start()
    fake.play(health_doc(["c1", "c2"]), {"c1": chain_doc(1), "c2": chain_doc(2)})
    fake.set("/blockchains/c1/blocks?height=1", {"hash": "h1"})
    node = NodeConfig("n", fake.url, blockchains=chains)
    ended = threading.Event()
    poll = NodePoll(
        node,
        NodeClient(engine, node, 1 << 20),
        max_chains=10,
        blocks=BlockPlan({"c1": 1}, ("hash",)),
        ended=ended.set,
    )
    started = time.monotonic()
    poll.start(started + 60, started)
    assert ended.wait(30)  # long before the 60 s deadline would end it
    result = poll.result(time.monotonic())
    assert [(c.blockchain, c.reading is not None, c.error) for c in result.chains] == [
        ("c1", True, None),
        ("c2", True, None),
    ]
    assert [(c.block_hash, c.block_error) for c in result.chains] == [("h1", None), (None, None)]


def test_a_height_read_before_is_asked_again_beside_the_checkpoint(
    engine: Engine, fake_nodes: FakeNodes
) -> None:
    """Issue 37: the recheck of a block read before goes out with the checkpoint's, its hash
    kept apart; one the node cannot answer ends as a block error, never a chain error."""
    fake = fake_nodes.start()
    fake.play(health_doc(["c1", "c2"]), {"c1": chain_doc(9), "c2": chain_doc(9)})
    fake.set("/blockchains/c1/blocks?height=5", {"hash": "h5"})
    fake.set("/blockchains/c1/blocks?height=2", {"hash": "h2-rewritten"})
    fake.set("/blockchains/c2/blocks?height=5", {"hash": "g5"})
    fake.set("/blockchains/c2/blocks?height=3", {"error": "gone"}, status=500)
    node = NodeConfig("n", fake.url)
    ended = threading.Event()
    plan = BlockPlan({"c1": 5, "c2": 5}, ("hash",), rechecks={"c1": 2, "c2": 3})
    poll = NodePoll(node, NodeClient(engine, node, 1 << 20), 10, plan, ended=ended.set)
    started = time.monotonic()
    poll.start(started + 60, started)
    assert ended.wait(30)
    first, second = poll.result(time.monotonic()).chains
    assert (first.block_hash, first.recheck_height, first.recheck_hash) == ("h5", 2, "h2-rewritten")
    assert (second.block_hash, second.recheck_hash, second.error) == ("g5", None, None)
    assert second.recheck_error is not None and second.recheck_error.reason is Reason.HTTP_STATUS


def test_a_chain_whose_parts_ended_is_reported_as_is_one_still_out_as_late() -> None:
    late = FetchError(Reason.TIMEOUT, "no answer before the cycle's deadline")
    refused = FetchError(Reason.HTTP_STATUS, "HTTP status 500")
    done = ChainResult("c1", error=refused, block_height=5, block_hash="h5")
    assert _ended(done, late) is done
    unasked = ChainResult("c2", error=refused)
    assert _ended(unasked, late) is unasked
    status_out = ChainResult("c3", block_height=5, block_hash="h5")
    assert (_ended(status_out, late).error, _ended(status_out, late).block_error) == (late, None)
    block_out = ChainResult("c4", error=refused, block_height=5)
    assert (_ended(block_out, late).error, _ended(block_out, late).block_error) == (refused, late)
    assert block_out.block_error is None  # the poll's own result is not changed


def test_a_chain_listed_twice_is_asked_once(fake_nodes: FakeNodes) -> None:
    """A second request for the same chain would only overwrite the first answer, possibly
    after the poll ended (it would end on the first): the chain is asked once."""
    fake: FakeNode = fake_nodes.start()
    fake.play(health_doc(["c1"]), {"c1": chain_doc(1)})
    engine = Engine(4, "test")
    try:
        node = NodeConfig("n", fake.url, blockchains=("c1", "c1"))
        ended = threading.Event()
        poll = NodePoll(node, NodeClient(engine, node, 1 << 20), 10, BlockPlan(), ended=ended.set)
        now = time.monotonic()
        poll.start(now + 60, now)
        assert ended.wait(30)
    finally:
        engine.close()
    assert fake.paths == ["/health", "/blockchains/c1"]


# --- the history's per-chain reads ---------------------------------------------------------


@pytest.mark.parametrize(
    ("height", "syncing", "expected"),
    [
        (math.nan, math.nan, (None, None)),
        (0.0, 1.0, (0.0, True)),
        (18342.0, 0.0, (18342.0, False)),
        (-0.0, math.nan, (-0.0, None)),
    ],
)
def test_height_and_syncing_read_at_their_offsets_as_the_gauges_say(
    height: float, syncing: float, expected: tuple[float | None, bool | None]
) -> None:
    reading = ChainReading(values=gauges_packed({BLOCK_HEIGHT: height, SYNCING: syncing}))
    assert (reading.height, reading.syncing) == expected
    assert reading.height == reading.gauge(BLOCK_HEIGHT)


def test_with_no_leader_failures_trim_forgets_nothing_and_counts_as_before() -> None:
    followed = ChainConsensus()
    assert followed._trim(("k1", "k2", "k3"), 2) == 1  # as the full path counts a surplus
    assert followed._trim(("k1",), 2) == 0
    followed.failures = {"k9": 3}
    followed.recent = {"k9": (1.0,)}
    assert followed._trim(("k1", "k2"), 2) == 1 and followed.failures == {}
    followed._forget_old_failures(1e9)  # nothing recent left: returns at once
    assert followed.recent == {}


def test_an_endpoints_error_counters_start_once_at_zero() -> None:
    history = History()
    node = NodeConfig("n", "http://127.0.0.1:9/")
    error = FetchError(Reason.TIMEOUT, "late")
    result = NodeResult(node, None, error, [], 0.1)
    for now in (1.0, 2.0):
        (status,) = history.record([result], now)
    keys = status.error_counts.keys
    assert len(keys) == len(set(keys))
    counts = {(endpoint, reason): count for endpoint, reason, count in status.error_counts}
    assert counts[("health", "timeout")] == 2 and counts[("blockchain", "timeout")] == 0
