"""The glibc malloc knobs: applied where glibc is, skipped quietly where it is not."""

from __future__ import annotations

import ctypes
import gc
import logging
import platform
import subprocess
import sys

import pytest

from exporter import memory
from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.memory import Allocator
from exporter.poll.cycle import Poller
from exporter.poll.engine import Response
from exporter.poll.node import NodePoll
from exporter.poll.results import FetchError
from tests.support.documents import CONTRACT, WALLET, WATCH, serve_watched
from tests.support.fakenode import FakeNodes
from tests.support.ports import closed_port_url
from tests.support.waiting import wait_until

ON_GLIBC = platform.libc_ver()[0] == "glibc"


class FakeLibc:
    """Records the calls; ``refuse`` makes mallopt reject that parameter, as glibc does."""

    def __init__(self, refuse: int | None = None, trimmed: int = 1) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self._refuse = refuse
        self._trimmed = trimmed

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 0 if param == self._refuse else 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad, 0))
        return self._trimmed


def test_tune_sets_arenas_mmap_and_trim_thresholds() -> None:
    libc = FakeLibc()
    assert Allocator(libc).tune() is True
    assert libc.calls == [
        ("mallopt", memory.M_ARENA_MAX, memory.ARENA_MAX),
        ("mallopt", memory.M_MMAP_THRESHOLD, memory.MMAP_THRESHOLD),
        ("mallopt", memory.M_TRIM_THRESHOLD, memory.TRIM_THRESHOLD),
    ]


def test_a_refused_setting_is_reported_and_the_others_still_applied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    libc = FakeLibc(refuse=memory.M_ARENA_MAX)
    with caplog.at_level(logging.WARNING, logger="ledger_exporter"):
        assert Allocator(libc).tune() is False
    assert len(libc.calls) == 3
    assert "glibc refused a malloc setting" in caplog.text


@pytest.mark.parametrize(("trimmed", "expected"), [(1, True), (0, False)])
def test_trim_returns_whether_glibc_gave_pages_back(trimmed: int, expected: bool) -> None:
    libc = FakeLibc(trimmed=trimmed)
    assert Allocator(libc).trim() is expected
    assert libc.calls == [("malloc_trim", 0, 0)]


def test_without_glibc_every_call_is_a_no_op() -> None:
    allocator = Allocator(None)
    assert allocator.tune() is False
    assert allocator.trim() is False


def test_a_c_library_that_is_not_glibc_is_not_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    class Musl:
        """Has malloc but none of glibc's extras."""

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Musl())
    assert Allocator.of_this_process().tune() is False


def test_a_c_library_that_cannot_be_loaded_is_not_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str | None) -> None:
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert Allocator.of_this_process().tune() is False


@pytest.mark.skipif(not ON_GLIBC, reason="glibc only")
def test_glibc_gives_freed_heap_pages_back() -> None:
    allocator = Allocator.of_this_process()
    # 64 KiB blocks come from the heap (over pymalloc's 512 bytes, under the mmap threshold);
    # freeing every other one leaves holes of whole pages that free() itself cannot return
    blocks = [bytes(64 * 1024) for _ in range(128)]
    kept = blocks[1::2]
    del blocks
    assert allocator.trim() is True
    assert len(kept) == 64


def test_the_exporter_trims_after_each_published_cycle() -> None:
    libc = FakeLibc()
    refused = NodeConfig("down", "http://127.0.0.1:1/")  # nothing listens on port 1
    exporter = Exporter(Config(nodes=(refused,), scrape_interval=60.0), allocator=Allocator(libc))
    exporter.start("127.0.0.1:0")
    try:
        wait_until(exporter.ready, message="the exporter's first cycle")
    finally:
        exporter.stop()
    assert ("malloc_trim", 0, 0) in libc.calls


COLLECTOR_CHECK = """
import gc
from exporter.memory import YOUNG_COLLECTION_THRESHOLD, tune_collector

tune_collector()
assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD, gc.get_threshold()
assert gc.get_freeze_count() > 1000  # the imports, out of every collection
before = gc.get_stats()[0]
for _ in range(3 * YOUNG_COLLECTION_THRESHOLD):  # cyclic garbage: only the collector frees it
    box = []
    box.append(box)
after = gc.get_stats()[0]
assert after["collections"] - before["collections"] >= 2, (before, after)
assert after["collected"] - before["collected"] >= YOUNG_COLLECTION_THRESHOLD, (before, after)
"""


def test_the_collector_runs_less_often_and_still_frees_cycles() -> None:
    """In a process of its own (the test run's collector stays as it is): the young
    threshold is raised and start-up's objects frozen, and cyclic garbage is still freed
    by the collector without an explicit collect."""
    subprocess.run([sys.executable, "-c", COLLECTOR_CHECK], check=True, timeout=120)


def test_failed_requests_leave_nothing_for_the_cyclic_collector(fake_nodes: FakeNodes) -> None:
    """tune_collector runs the cyclic GC seldom (a full collection every few dozen cycles),
    so a failed request must leave no reference cycle: one through its error's traceback
    keeps the poll, its frames and the refused body (up to max_response_bytes) alive until
    then, and a node answering megabytes of junk grew the exporter by that much a cycle."""
    bad = fake_nodes.start()
    serve_watched(bad, ["c1", "c2", "c3", "c4"])
    bad.set("/blockchains/c1", b"<html>" + b"x" * 100_000)  # not JSON
    bad.set("/blockchains/c2", {}, status=500)
    bad.set("/blockchains/c3", [1, 2])  # JSON, not a chain status
    bad.set(CONTRACT, {}, status=500)
    bad.set(WALLET, b"{")
    refusing = fake_nodes.start()
    refusing.set("/health", {}, status=503)
    nodes = (
        NodeConfig("bad", bad.url),
        NodeConfig("refusing", refusing.url),
        NodeConfig("dead", closed_port_url()),
    )
    poller = Poller(Config(nodes=nodes, scrape_timeout=5.0, watch=WATCH), lambda _: None)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage to look at
    try:
        snapshots = [poller.run_cycle() for _ in range(2)]
        poller.stop()
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, FetchError | NodePoll | Response)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    errors = {(e, r) for e, r, count in snapshots[-1].nodes[0].error_counts if count}
    assert {("blockchain", "invalid_json"), ("blockchain", "http_status")} <= errors  # failed
    assert left == []
