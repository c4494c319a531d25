"""The state file (``--state.file``, issue 19): the memory between cycles kept across restarts.

Tables for what is read (every kind of unusable file is one log line and a fresh start: the
exporter's own moved aside, any other left alone and never written), the atomic write, the
bounds and the absence of secrets; then the poller over real sockets, a restart being a new
Poller on the same file. The real process, signals and reloads are
``tests/e2e/test_state_restart.py``'s;
what is never written, the lock and the bounds on reading: ``tests/poll/test_state_file_guard.py``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from exporter.config.exporter import Config, parse_config
from exporter.config.nodes import NodeConfig
from exporter.poll import state as state_module
from exporter.poll.cycle import Poller
from exporter.poll.history import History
from exporter.poll.state import (
    FORMAT,
    ChainState,
    NodeState,
    State,
    StateFile,
    decode,
    encode,
    size_limit,
)
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes

NOW = 1_700_000_000.0
CONFIG = Config(nodes=(NodeConfig("a", "http://x/"), NodeConfig("b", "http://y/")))
KEPT = State(
    {
        "a": NodeState({"c1": ChainState(100.0, NOW - 900), "c2": ChainState(7.0, NOW - 5)}),
        "b": NodeState({"c1": ChainState(99.0, NOW - 30)}),
    }
)


def document(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "nodes": {"a": {"blockchains": {"c1": {"height": 100, "height_changed_at": NOW - 900}}}},
    }
    return {**base, **changes}


def state_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "state file" in r.getMessage()]


def test_encode_and_decode_round_trip() -> None:
    assert decode(encode(KEPT)) == KEPT
    assert encode(KEPT) == encode(decode(encode(KEPT)))  # sorted: equal memories, equal bytes


def test_the_format_is_versioned_and_readable() -> None:
    written = json.loads(encode(KEPT))
    assert written["format"] == "ledger-exporter-state" and written["version"] == 1
    assert written["nodes"]["a"]["blockchains"]["c1"] == {
        "height": 100.0,
        "height_changed_at": NOW - 900,
    }


def test_keys_a_later_release_adds_are_ignored() -> None:
    """Issue 21's memory (a node's id, open sessions) came as new keys of version 1, read
    now; keys a later release adds are ignored the same way."""
    body = document()
    body["nodes"]["a"]["node_id"] = "02ab"
    body["nodes"]["a"]["blockchains"]["c1"]["vote_sessions"] = {
        "s1": {"first_seen": NOW, "round": 3}
    }
    body["nodes"]["a"]["blockchains"]["c1"]["leaders"] = {"02ab": {"failed": 2}}
    body["written_by"] = "ledger-exporter 0.2.0"
    assert decode(json.dumps(body).encode()) == State(
        {"a": NodeState({"c1": ChainState(100.0, NOW - 900, {"s1": NOW})}, "02ab")}
    )


#: The exporter's own files it cannot use: moved aside (kept), and a new one written.
OWN_BUT_UNUSABLE = [
    b'{"format": "ledger-exporter-state", "version": 1, "nodes": {',
    json.dumps(document(nodes=[])).encode(),
    json.dumps(document(nodes={"a": {"blockchains": {"c1": 5}}})).encode(),
    json.dumps(document(nodes={"a": {}})).encode(),
    json.dumps(document(nodes={"a": {"blockchains": {"c1": {"height": -1}}}})).encode(),
    b'{"format": "ledger-exporter-state", "version": 1, "nodes": {"a": {"blockchains":'
    b' {"c1": {"height": NaN, "height_changed_at": 1}}}}}',
    json.dumps(
        document(nodes={"a": {"blockchains": {"c1": {"height": True, "height_changed_at": 1}}}})
    ).encode(),
]
#: Files that are not the exporter's (or are a newer one's): left alone, never written.
NOT_ITS_OWN = [
    (b"\x00\x01garbage", "foreign"),
    (b"\xff\xfe{}", "foreign"),
    (b"[]", "foreign"),
    (b"\n", "foreign"),  # only an empty file (0 bytes) is written over; a blank one is another's
    (b"  \n\t\n", "foreign"),
    (b'{"nodes": {}}', "foreign"),  # no marker
    (json.dumps(document(format="prometheus-state")).encode(), "foreign"),
    (json.dumps(document(version=2)).encode(), "newer"),  # a later release's file
    (json.dumps(document(version=True)).encode(), "foreign"),
    (json.dumps(document(version="1")).encode(), "foreign"),
]


@pytest.mark.parametrize("content", OWN_BUT_UNUSABLE)
def test_an_unusable_file_of_its_own_is_moved_aside_and_a_fresh_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        state_file = StateFile(str(path))
        assert state_file.load(CONFIG, NOW) == State()
        (line,) = state_logs(caplog)
        assert state_file.save(KEPT)
    assert line.levelno == logging.WARNING
    assert line.getMessage() == "state file not used, moved aside; starting with no memory"
    fields = getattr(line, "fields")  # noqa: B009
    assert (fields["problem"], fields["file"]) == ("corrupt", str(path))
    aside = Path(fields["moved_to"])
    assert aside.parent == tmp_path and aside.name.startswith("state.json.corrupt-")
    assert aside.read_bytes() == content  # kept as it was
    assert decode(path.read_bytes()) == KEPT  # and a new one written


@pytest.mark.parametrize(("content", "problem"), NOT_ITS_OWN)
def test_a_file_not_its_own_is_left_alone_and_never_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, problem: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        state_file = StateFile(str(path))
        assert state_file.load(CONFIG, NOW) == State()
        assert not state_file.save(KEPT)
        assert not state_file.save(State())
    (line,) = state_logs(caplog)
    assert line.levelno == logging.WARNING
    assert line.getMessage() == "state file left alone and not written; starting with no memory"
    assert getattr(line, "fields")["problem"] == problem  # noqa: B009
    assert getattr(line, "fields")["file"] == str(path)  # noqa: B009
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # nothing made beside


def test_a_missing_file_is_the_normal_first_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        assert StateFile(str(tmp_path / "none.json")).load(CONFIG, NOW) == State()
    (line,) = state_logs(caplog)
    assert line.levelno == logging.INFO and "no state file yet" in line.getMessage()


def test_a_directory_is_one_line_and_never_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        state_file = StateFile(str(tmp_path))
        assert state_file.load(CONFIG, NOW) == State()
        assert not state_file.save(KEPT)
    (line,) = state_logs(caplog)
    assert getattr(line, "fields")["problem"] == "not_a_file"  # noqa: B009
    assert "is a directory" in getattr(line, "fields")["error"]  # noqa: B009
    assert tmp_path.is_dir()


def test_a_file_larger_than_the_config_can_need_is_moved_aside_unread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    limit = size_limit(CONFIG)
    per_chain = state_module.BYTES_PER_CHAIN + 16 * state_module.BYTES_PER_SESSION
    per_chain += state_module.BYTES_PER_HEAD  # the chain's head record (behind_seconds)
    node = state_module.BYTES_PER_NODE
    assert limit == state_module.BASE_BYTES + 2 * 100 * per_chain + 2 * node
    pinned = Config(nodes=(NodeConfig("a", "http://x/", blockchains=("c1",)),))
    assert size_limit(pinned) == state_module.BASE_BYTES + per_chain + node
    path = tmp_path / "state.json"
    body = document()
    body["padding"] = " " * size_limit(pinned)  # valid JSON, but no such config writes it
    path.write_text(json.dumps(body))
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        assert StateFile(str(path)).load(CONFIG, NOW) != State()  # within the larger limit
        assert StateFile(str(path)).load(pinned, NOW) == State()
    line = state_logs(caplog)[-1]
    assert getattr(line, "fields")["problem"] == "too_large"  # noqa: B009
    assert Path(getattr(line, "fields")["moved_to"]).name.startswith("state.json.too-large-")  # noqa: B009
    assert not path.exists()


def test_only_what_the_config_polls_is_restored(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    kept = State(
        {
            **KEPT.nodes,
            "gone": NodeState({"c1": ChainState(5.0, NOW - 10)}),  # no longer configured
            "pinned": NodeState({"c1": ChainState(1.0, NOW), "c9": ChainState(2.0, NOW)}),
            "ahead": NodeState({"c1": ChainState(3.0, NOW + 3600)}),  # a clock set back
        }
    )
    path.write_bytes(encode(kept))
    nodes = (
        NodeConfig("a", "http://x/"),
        NodeConfig("pinned", "http://p/", blockchains=("c1",)),
        NodeConfig("ahead", "http://q/"),
    )
    capped = Config(nodes=nodes, max_blockchains_per_node=1)
    restored = StateFile(str(path)).load(capped, NOW)
    assert restored == State(
        {
            "a": NodeState({"c1": ChainState(100.0, NOW - 900)}),
            "pinned": NodeState({"c1": ChainState(1.0, NOW)}),
        }
    )


def test_the_write_is_atomic_synced_and_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    old = encode(State())
    path.write_bytes(old)
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(handle: int) -> None:
        synced.append(handle)
        real_fsync(handle)

    monkeypatch.setattr(os, "fsync", fsync)
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        assert Path(source).parent == tmp_path  # the temporary file is in the same directory
        assert Path(source).read_bytes() == encode(KEPT)  # whole before the rename
        assert path.read_bytes() == old  # and the old file whole until then
        renames.append((source, target))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    assert StateFile(str(path)).save(KEPT)
    assert len(renames) == 1 and renames[0][1] == str(path)
    assert len(synced) >= 1  # the data (and, where it can be, the directory)
    assert decode(path.read_bytes()) == KEPT
    # no leftovers; the lock file beside it stays (created empty, never written)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".state.json.lock", "state.json"]
    assert (tmp_path / ".state.json.lock").read_bytes() == b""
    assert path.stat().st_mode & 0o777 == 0o600


def test_an_unchanged_memory_is_not_written_again(tmp_path: Path) -> None:
    state_file = StateFile(str(tmp_path / "state.json"))
    assert state_file.save(KEPT)
    assert not state_file.save(KEPT)
    assert state_file.save(State({"a": KEPT.nodes["a"]}))


def test_a_write_that_fails_is_logged_once_and_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "missing"
    state_file = StateFile(str(directory / "state.json"))
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        for height in range(3):
            one = State({"a": NodeState({"c1": ChainState(float(height), NOW)})})
            assert not state_file.save(one)
        directory.mkdir()
        assert state_file.save(KEPT)
    lines = [(r.levelno, r.getMessage()) for r in state_logs(caplog)]
    assert lines == [
        (logging.WARNING, "cannot write the state file; the memory will not survive a restart"),
        (logging.INFO, "state file written again"),
    ]
    assert sorted(directory.iterdir()) == [directory / ".state.json.lock", directory / "state.json"]


def test_no_url_header_or_credential_is_written(tmp_path: Path) -> None:
    config = parse_config(
        """
nodes:
  - name: validator-1
    url: https://admin:s3cret-pass@node-1.internal:7740/api/
    headers: {X-Api-Key: key-abc-123}
    blockchains: [c1]
"""
    )
    history = History()
    restored = State({"validator-1": NodeState({"c1": ChainState(12.0, NOW)})})
    path = tmp_path / "state.json"
    assert StateFile(str(path)).save(History(restored).state())
    text = path.read_text()
    for secret in ("admin", "s3cret", "node-1.internal", "7740", "key-abc", "X-Api-Key", "https"):
        assert secret not in text
    assert StateFile(str(path)).load(config, NOW) == restored
    assert history.state() == State()


# --- the poller over real sockets -----------------------------------------------------------


def polled(node: FakeNode, heights: dict[str, int]) -> None:
    node.play(health_doc(list(heights)), {c: chain_doc(h) for c, h in heights.items()})


def run(config: Config, clock: Clock, path: Path) -> tuple[dict[tuple[str, str], float], Poller]:
    """One cycle of a fresh poller on ``path`` (a start after a restart): each chain's
    height-change time as exported. ``clock`` is the wall clock; each process has a
    monotonic clock of its own (seconds since a boot 10 000 s before its start), which the
    state file's wall-clock times are re-based on."""
    boot = clock() - 10_000.0
    poller = Poller(
        config,
        lambda snapshot: None,
        lambda: clock() - boot,
        state=StateFile(str(path)),
        wall=clock,
    )
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    changed = {
        (node.name, chain.blockchain): chain.height_changed_at + snapshot.wall_offset
        for node in snapshot.nodes
        for chain in node.chains
        if chain.height_changed_at is not None
    }
    return changed, poller


def test_a_restart_keeps_a_stalled_chains_clock_and_a_new_height_clears_it(
    fake_nodes: FakeNodes, tmp_path: Path
) -> None:
    node = fake_nodes.start()
    polled(node, {"stalled": 100, "moving": 50})
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=2.0, scrape_timeout=1.0)
    clock, path = Clock(NOW), tmp_path / "state.json"
    first, poller = run(config, clock, path)
    assert first == {("n", "stalled"): NOW, ("n", "moving"): NOW}
    assert poller.keep_state() and not poller.keep_state()  # once; unchanged is not rewritten
    clock.advance(700)  # a restart, long enough for LedgerBlockHeightStalled to hold
    polled(node, {"stalled": 100, "moving": 51})
    after, poller = run(config, clock, path)
    assert after == {("n", "stalled"): NOW, ("n", "moving"): NOW + 700}
    poller.keep_state()
    clock.advance(30)
    polled(node, {"stalled": 101, "moving": 51})
    later, _ = run(config, clock, path)
    assert later == {("n", "stalled"): NOW + 730, ("n", "moving"): NOW + 700}


def test_without_a_state_file_a_restart_forgets(fake_nodes: FakeNodes) -> None:
    """What the file is for: a second poller alone sees the stalled height anew."""
    node = fake_nodes.start()
    polled(node, {"stalled": 100})
    config = Config(nodes=(NodeConfig("n", node.url),), scrape_interval=2.0, scrape_timeout=1.0)
    clock = Clock(NOW)
    for expected in (NOW, NOW + 700):
        poller = Poller(config, lambda snapshot: None, clock, wall=clock)
        try:
            (status,) = poller.run_cycle().nodes
        finally:
            poller.stop()
        assert status.chains[0].height_changed_at == expected
        assert not poller.keep_state()
        clock.advance(700)
