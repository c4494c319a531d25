"""The state file never destroys what is not its own (issue 32): another program's file, a
newer version's, a FIFO, a device or a socket at the path is never written (nor a FIFO
opened, so a start never hangs); a symlink's target is written and the link stays; a second
exporter on the same file finds it locked (and, waiting, reads each version once, within the
size limit); stale temporary files are removed; what is read is bounded by what the
configured nodes can use, not by what the file holds; and a file truncated while it is read
is read again or left alone, never a crash (SIGBUS) nor taken for corrupt.

Real files throughout; the swapped flag, the FIFO and the lock also with real exporter
processes. ``/dev/null`` itself is never touched: the device case makes its own node.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter import ownfile
from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.poll import state as state_module
from exporter.poll.state import (
    ChainState,
    NodeState,
    State,
    StateFile,
    decode,
    encode,
    size_limit,
)
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ExporterProcess, exporter_command, ready_exporter
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

NOW = 1_700_000_000.0
CONFIG = Config(nodes=(NodeConfig("a", "http://x/"),))
KEPT = State({"a": NodeState({"c1": ChainState(100.0, NOW - 900)})})


def state_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "state file" in r.getMessage()]


def fields(record: logging.LogRecord) -> dict[str, object]:
    found: dict[str, object] = getattr(record, "fields")  # noqa: B009
    return found


# --- what is not a regular file --------------------------------------------------------------


@contextlib.contextmanager
def fifo_released(path: Path) -> Iterator[None]:
    """After the block: a reader still blocked opening the FIFO (the tree before issue 32)
    gets a writer and an end of file, so no thread of the test hangs for ever."""
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def load_in_thread(state_file: StateFile) -> State | None:
    """``load`` on a thread; None when it has not returned within a generous deadline."""
    loaded: list[State] = []
    thread = threading.Thread(target=lambda: loaded.append(state_file.load(CONFIG, NOW)))
    thread.daemon = True
    thread.start()
    thread.join(timeout=30)
    return loaded[0] if loaded else None


def test_a_fifo_is_never_opened_nor_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    with fifo_released(fifo), caplog.at_level(logging.INFO, logger="ledger_exporter"):
        state_file = StateFile(str(fifo))
        assert load_in_thread(state_file) == State(), "load blocked on the FIFO"
        assert not state_file.save(KEPT)
    (line,) = state_lines(caplog)
    assert line.getMessage() == "state file left alone and not written; starting with no memory"
    assert fields(line)["problem"] == "not_a_file"
    assert f"{fifo} is a named pipe (FIFO)" in str(fields(line)["error"])
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_character_device_is_never_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What ``--state.file /dev/null`` did to ``/dev/null`` as root, on a null device of the
    test's own (the real one is never touched)."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        state_file = StateFile(str(device))
        assert state_file.load(CONFIG, NOW) == State()
        assert not state_file.save(KEPT)
    (line,) = state_lines(caplog)
    assert "is a character device" in str(fields(line)["error"])
    assert stat.S_ISCHR(device.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no lock, no temporary


def test_a_socket_is_never_replaced(caplog: pytest.LogCaptureFixture) -> None:
    with tempfile.TemporaryDirectory(prefix="sock") as short:  # a socket path is short
        path = Path(short) / "s"
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(path))
            with caplog.at_level(logging.INFO, logger="ledger_exporter"):
                state_file = StateFile(str(path))
                assert state_file.load(CONFIG, NOW) == State()
                assert not state_file.save(KEPT)
            assert stat.S_ISSOCK(path.lstat().st_mode)
    assert "is a socket" in str(fields(state_lines(caplog)[0])["error"])


def test_a_symlinks_target_is_written_and_the_link_stays(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    target = volume / "state.json"
    target.write_bytes(encode(State()))
    link = tmp_path / "state.json"
    link.symlink_to(target)
    state_file = StateFile(str(link))
    assert state_file.load(CONFIG, NOW) == State()
    assert state_file.save(KEPT)
    assert link.is_symlink() and link.readlink() == target
    assert decode(target.read_bytes()) == KEPT
    assert state_file.save(State())  # every write goes there
    assert decode(target.read_bytes()) == State()
    assert sorted(p.name for p in volume.iterdir()) == [".state.json.lock", "state.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "volume"]


def test_a_dangling_symlinks_target_is_created(tmp_path: Path) -> None:
    target = tmp_path / "volume" / "state.json"
    target.parent.mkdir()
    link = tmp_path / "state.json"
    link.symlink_to(target)
    assert StateFile(str(link)).save(KEPT)
    assert link.is_symlink() and decode(target.read_bytes()) == KEPT


def test_a_file_replaced_while_running_by_one_not_its_own_is_not_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    state_file = StateFile(str(path))
    assert state_file.save(KEPT)
    path.write_text("nodes: []\n")  # a swapped file put there meanwhile
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        assert not state_file.save(State())
        assert not state_file.save(State({"b": NodeState(node_id="02ab")}))
        assert path.read_text() == "nodes: []\n"
        path.unlink()  # gone: the path is free to write again
        assert state_file.save(State())
    lines = [(r.getMessage(), fields(r).get("problem")) for r in state_lines(caplog)]
    assert lines == [
        ("state file left alone and not written", "foreign"),
        ("state file written again", None),
    ]


# --- the lock and what a crash leaves ----------------------------------------------------------

HOLDER = """
import sys
from exporter.poll.state import ChainState, NodeState, State, StateFile
state_file = StateFile(sys.argv[1])
assert state_file.save(State({"holder": NodeState(node_id="holder")}))
print("holding", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def lock_held_elsewhere(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another process holding the state file's lock (HOLDER) until it is told to stop."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


def test_a_second_writer_finds_the_file_locked_and_takes_it_over_once_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    with lock_held_elsewhere(path) as holder:
        held = path.read_bytes()
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            state_file = StateFile(str(path))
            assert state_file.load(CONFIG, NOW) == State()  # read: nothing for node "a"
            assert not state_file.save(KEPT)
            assert not state_file.save(State())
            assert path.read_bytes() == held
            assert holder.stdin is not None
            holder.stdin.close()  # the first one stops
            holder.wait(timeout=30)
            assert state_file.save(KEPT)
    assert decode(path.read_bytes()) == KEPT
    lines = [(r.levelno, r.getMessage()) for r in state_lines(caplog)]
    assert lines == [
        (
            logging.WARNING,
            "state file in use by another ledger-exporter; read, but not written while that"
            " one runs",
        ),
        (logging.INFO, "memory restored from the state file"),
        (logging.INFO, "state file lock taken over; writing it from now on"),
    ]


def test_stale_temporary_files_are_removed_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.json"
    stale = [tmp_path / ".state.json.k2x_9abc.tmp", tmp_path / ".state.json.00000000.tmp"]
    others = [
        tmp_path / ".state.json.notes.tmp",  # not a name a write makes
        tmp_path / ".other.json.k2x_9abc.tmp",  # another file's
        tmp_path / "state.json.k2x_9abc.tmp",
    ]
    for leftover in stale + others:
        leftover.write_text("{")
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        assert StateFile(str(path)).load(CONFIG, NOW) == State()
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in others)
    (line,) = [r for r in state_lines(caplog) if "temporary" in r.getMessage()]
    assert fields(line)["removed"] == 2


# --- what reading costs ------------------------------------------------------------------------


def many_chains(path: Path, nodes: int, chains: int, prefix: str) -> None:
    """A state file of ``nodes`` nodes with ``chains`` chains each, written as the exporter
    writes (the marker first, keys sorted)."""
    with path.open("wb") as out:
        out.write(b'{"format":"ledger-exporter-state","nodes":{')
        for node in range(nodes):
            entries = b",".join(
                b'"c%d":{"height":%d,"height_changed_at":1699999000.5}' % (c, c)
                for c in range(chains)
            )
            separator = b"," if node else b""
            out.write(
                b'%s"%s%d":{"blockchains":{%s}}' % (separator, prefix.encode(), node, entries)
            )
        out.write(b'},"version":1}')


@pytest.mark.parametrize("prefix", ["n", "gone"])
def test_reading_is_bounded_by_what_the_configured_nodes_can_use(
    tmp_path: Path, prefix: str
) -> None:
    """200 000 chain entries (~10 MB) under 50 configured nodes, or under nodes the config
    does not poll: what is built stays within a few MiB (the tree before issue 32 built
    every entry, ~100 MiB), and what is kept is what the config can use."""
    path = tmp_path / "state.json"
    many_chains(path, 50, 4000, prefix)
    config = Config(nodes=tuple(NodeConfig(f"n{i}", f"http://x/{i}/") for i in range(50)))
    tracemalloc.start()
    try:
        restored = StateFile(str(path)).load(config, NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{peak / 2**20:.1f} MiB allocated to read it"
    if prefix == "n":
        assert len(restored.nodes) == 50
        assert all(len(node.chains) == 100 for node in restored.nodes.values())
        assert restored.nodes["n7"].chains["c99"] == ChainState(99.0, 1699999000.5)
    else:
        assert restored == State()


# --- a file that changes while it is read --------------------------------------------------

#: Loads the state file ``argv[1]`` for 50 nodes while another writer truncates it
#: (``cp backup FILE`` truncates in place): ``parsing``, to 4096 bytes as its parsing
#: begins; or at the first open, right after its size is taken, to 4096 bytes, and then,
#: ``finished``, the copy completes before the file is read again, or, ``ongoing``, it is
#: truncated again at the next open. Prints what was restored and logged.
TRUNCATING = """
import contextlib, json, logging, os, sys
import msgspec
from exporter import ownfile
from exporter import ownfile
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.poll.state import StateFile

path, mode = sys.argv[1], sys.argv[2]
whole = open(path, "rb").read()
lines = []
handler = logging.Handler()
handler.emit = lambda r: lines.append([r.levelname, r.getMessage()])
logging.getLogger("ledger_exporter").addHandler(handler)
logging.getLogger("ledger_exporter").setLevel(logging.INFO)
original, opens = ownfile.opened, []

@contextlib.contextmanager
def opened(target):
    opens.append(target)
    if len(opens) == 2 and mode == "finished":
        with open(target, "r+b") as out:
            out.write(whole)
    with original(target) as (handle, found):
        if len(opens) == 1 or mode == "ongoing":
            os.truncate(target, 4096 if len(opens) == 1 else 2048)
        yield handle, found

decode = msgspec.json.decode

def parsed(data, **options):
    os.truncate(path, 4096)
    return decode(data, **options)

if mode == "parsing":
    msgspec.json.decode = parsed
else:
    ownfile.opened = opened
config = Config(nodes=tuple(NodeConfig(f"n{i}", f"http://x/{i}/") for i in range(50)))
state = StateFile(path).load(config, 1_700_000_000.0)
print(json.dumps({"nodes": len(state.nodes), "chains": state.chain_count, "lines": lines}))
"""


@pytest.mark.parametrize("mode", ["parsing", "finished", "ongoing"])
def test_a_file_truncated_while_read_is_read_again_or_left_never_a_crash(
    tmp_path: Path, mode: str
) -> None:
    """A mapped file truncated while parsed killed the reader with SIGBUS and no log line
    (the tree before: rc -7); the file is now parsed from the exporter's own copy. One
    truncated between its size being taken and its read was taken for corrupt and moved
    aside (or for empty); now the short read is one warning and the file is read again (the
    copy over it has finished: its memory restored) or, changing again, left as it is (not
    moved aside) and the start goes on with no memory."""
    path = tmp_path / "state.json"
    many_chains(path, 50, 200, "n")  # ~0.6 MB: far past the 4096 bytes left
    done = subprocess.run(
        [sys.executable, "-c", TRUNCATING, str(path), mode],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-2000:]}"
    report = json.loads(done.stdout)
    changed = ["WARNING", "state file changed while it was read; read it again"]
    if mode == "parsing":
        assert (report["nodes"], report["chains"]) == (50, 50 * 100)
        assert report["lines"] == [["INFO", "memory restored from the state file"]]
    elif mode == "finished":
        assert (report["nodes"], report["chains"]) == (50, 50 * 100)
        assert report["lines"] == [changed, ["INFO", "memory restored from the state file"]]
    else:
        assert (report["nodes"], report["chains"]) == (0, 0)
        assert report["lines"] == [
            changed,
            ["WARNING", "state file changed while it was read; starting with no memory"],
        ]
        assert path.stat().st_size == 2048  # as the other writer left it
        assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_file_read_in_short_pieces_is_read_whole_not_taken_for_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Linux returns at most 0x7ffff000 bytes a read: a file past 2 GiB comes in pieces
    (here, scaled down, 64 KiB a read). A short read once taken for a corrupt file moved a
    valid one aside; it is read whole now."""
    path = tmp_path / "state.json"
    many_chains(path, 50, 200, "n")  # ~0.6 MB: ten pieces
    piece = 64 * 1024
    pread, preadv = os.pread, os.preadv

    def short_pread(handle: int, size: int, offset: int) -> bytes:
        return pread(handle, min(size, piece), offset)

    def short_preadv(handle: int, buffers: list[Any], offset: int) -> int:
        (buffer,) = buffers
        return preadv(handle, [memoryview(buffer)[:piece]], offset)

    monkeypatch.setattr(os, "pread", short_pread)
    monkeypatch.setattr(os, "preadv", short_preadv)
    config = Config(nodes=tuple(NodeConfig(f"n{i}", f"http://x/{i}/") for i in range(50)))
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        restored = StateFile(str(path)).load(config, NOW)
    assert restored.chain_count == 50 * 100
    assert [r.getMessage() for r in state_lines(caplog)] == ["memory restored from the state file"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".state.json.lock", "state.json"]


# --- a second exporter waiting for the lock ------------------------------------------------


def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a whole state file is scanned (one entry per scan, its size)."""
    scans: list[int] = []
    scan = state_module._nodes

    def counted(data: Any) -> Any:
        scans.append(len(data))
        return scan(data)

    monkeypatch.setattr(state_module, "_nodes", counted)
    return scans


def test_a_waiting_exporter_reads_each_version_of_the_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another exporter holds the lock, each version it writes is read once, not
    at every cycle (the tree before scanned the whole file at every write once it had
    changed: 5 scans here, not 2), and nothing is written."""
    path = tmp_path / "state.json"
    with lock_held_elsewhere(path):
        waiting = StateFile(str(path))
        assert waiting.load(CONFIG, NOW) == State()
        scans = count_scans(monkeypatch)
        for version in range(2):  # the holder writes a new version; three cycles pass
            written = encode(State({"holder": NodeState(node_id=f"holder-{version}")}))
            ownfile.write_atomically(str(path), written)
            for _ in range(3 - version):
                assert not waiting.save(KEPT)
            assert path.read_bytes() == written
    assert scans == [len(written), len(written)]


def test_a_waiting_exporter_reads_no_more_than_its_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A file written while waiting that is larger than the config can need is not read
    (the tree before read any size there: no limit without a config) and, once the lock is
    free, is moved aside as too large, as at start, not read and written over."""
    path = tmp_path / "state.json"
    with lock_held_elsewhere(path) as holder:
        waiting = StateFile(str(path))
        assert waiting.load(CONFIG, NOW) == State()
        scans = count_scans(monkeypatch)
        large = tmp_path / "large.json"
        many_chains(large, 1, size_limit(CONFIG) // 40, "a")  # ~50 bytes a chain
        assert large.stat().st_size > size_limit(CONFIG)
        os.replace(large, path)  # the holder's write
        for _ in range(3):
            assert not waiting.save(KEPT)
        holder.communicate(b"", timeout=30)  # the holder stops
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            assert waiting.save(KEPT)
    assert scans == []
    assert decode(path.read_bytes()) == KEPT
    (aside,) = tmp_path.glob("state.json.too-large-*")
    assert aside.stat().st_size > size_limit(CONFIG)
    moved = [r for r in state_lines(caplog) if "moved aside" in r.getMessage()]
    assert [fields(r)["problem"] for r in moved] == ["too_large"]


# --- flags and --config.check ------------------------------------------------------------------


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        exporter_command(*args), capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_the_flag_refuses_what_is_never_a_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text("nodes:\n  - {name: a, url: 'http://127.0.0.1:1/'}\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with fifo_released(fifo):
        for path in (fifo, link):
            done = check("--config.check", f"--config.file={config}", f"--state.file={path}")
            assert done.returncode == 2, done.stderr
            assert f"--state.file: '{path}' is a named pipe (FIFO)" in done.stderr
            assert "leave --state.file out" in done.stderr


def test_config_check_says_what_a_start_would_do_with_the_state_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text("nodes:\n  - {name: a, url: 'http://127.0.0.1:1/'}\n")
    state = tmp_path / "state.json"
    base = ("--config.check", f"--config.file={config}")
    done = check(*base, f"--state.file={state}")
    assert done.returncode == 0 and f"{state}: OK, no state file yet" in done.stdout
    done = check(*base, f"--state.file={tmp_path / 'nowhere' / 'state.json'}")
    assert done.returncode == 1 and f"the directory {tmp_path / 'nowhere'} does not" in done.stderr
    state.write_bytes(encode(KEPT))
    done = check(*base, f"--state.file={state}")
    assert f"{state}: OK, the memory of 1 node(s), 1 blockchain(s)" in done.stdout
    done = check(*base, f"--state.file={config}")  # a swapped flag
    assert done.returncode == 1
    assert f"{config}: not a ledger-exporter-state file" in done.stderr
    assert "a start leaves it alone and keeps no memory" in done.stderr
    state.write_text(json.dumps({"format": "ledger-exporter-state", "version": 2, "nodes": {}}))
    done = check(*base, f"--state.file={state}")
    assert done.returncode == 1 and "written by a newer ledger-exporter" in done.stderr
    state.write_text('{"format": "ledger-exporter-state", "nodes": {')
    done = check(*base, f"--state.file={state}")
    assert done.returncode == 0 and "a start moves it aside" in done.stdout
    assert state.read_text() == '{"format": "ledger-exporter-state", "nodes": {'  # unchanged


# --- real exporter processes -------------------------------------------------------------------


def serving(node: FakeNode) -> None:
    node.play(health_doc(["c1"]), {"c1": chain_doc(7)})


def cycles(process: ExporterProcess, count: int) -> None:
    """Wait for ``count`` more polling cycles (each moves the node's last success time)."""

    def last_success() -> float:
        lines = fetch(process.base + "/metrics").text.splitlines()
        found = [line for line in lines if line.startswith("ledger_node_last_success_timestamp")]
        return max((float(line.rsplit(" ", 1)[1]) for line in found), default=0.0)

    for _ in range(count):
        before = last_success()

        def moved(before: float = before) -> bool:
            return last_success() > before

        wait_until(moved, timeout=60, message="a cycle")


@pytest.mark.integration
def test_a_swapped_flag_never_overwrites_the_config_file(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    serving(fake_node)
    config = tmp_path / "config.yml"
    config.write_text(
        f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes:\n  - name: a\n    url: {fake_node.url}\n"
    )
    original = config.read_bytes()
    with ready_exporter(config, f"--state.file={config}") as exporter:
        cycles(exporter, 3)
        assert config.read_bytes() == original
        exporter.signal(signal.SIGHUP)  # and the config still reloads
        wait_until(lambda: "config reloaded" in exporter.log(), timeout=60, message="reload")
        cycles(exporter, 1)
    log = exporter.log()
    assert config.read_bytes() == original
    (line,) = [line for line in log.splitlines() if "state file" in line]
    assert "state file left alone and not written; starting with no memory" in line
    assert "problem=foreign" in line
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name) == []


@pytest.mark.integration
def test_a_fifo_as_the_state_file_stops_the_start_at_once(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text("nodes:\n  - {name: a, url: 'http://127.0.0.1:1/'}\n")
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    environment = {**os.environ, "LEDGER_EXPORTER_STATE_FILE": str(fifo)}
    with fifo_released(fifo):
        try:
            done = subprocess.run(
                exporter_command(f"--config.file={config}", "--web.listen-address=127.0.0.1:0"),
                capture_output=True,
                text=True,
                cwd=REPO,
                env=environment,
                timeout=60,
            )
        except subprocess.TimeoutExpired as error:
            pytest.fail(f"the exporter hung on the FIFO: {error.stderr!r}")
    assert done.returncode == 2, done.stderr
    assert f"LEDGER_EXPORTER_STATE_FILE='{fifo}': '{fifo}' is a named pipe (FIFO)" in done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.integration
def test_two_exporters_on_one_state_file_one_writes(tmp_path: Path, fake_node: FakeNode) -> None:
    """The second reads it, writes nothing while the first runs (its memory, of node "beta",
    never appears), says so once, and takes over once the first stops."""
    serving(fake_node)
    state = tmp_path / "state.json"
    configs = {}
    for name in ("alpha", "beta"):
        configs[name] = tmp_path / f"{name}.yml"
        configs[name].write_text(
            f"scrape_interval: 1s\nscrape_timeout: 1s\n"
            f"nodes:\n  - name: {name}\n    url: {fake_node.url}\n"
        )
    with ready_exporter(configs["alpha"], f"--state.file={state}") as first:
        wait_until(lambda: b'"alpha"' in state.read_bytes(), timeout=60, ignoring=(OSError,))
        second = ExporterProcess(configs["beta"], f"--state.file={state}")
        try:
            second.wait_ready()
            cycles(second, 3)
            assert b'"beta"' not in state.read_bytes()
            assert "state file in use by another ledger-exporter" in second.log()
            code, log = first.stop()
            assert code == 0, log
            wait_until(lambda: b'"beta"' in state.read_bytes(), timeout=60, message="taken over")
            assert "state file lock taken over" in second.log()
        finally:
            code, log = second.stop()
        assert code == 0, log
    assert decode(state.read_bytes()).nodes.keys() == {"beta"}


def test_a_state_file_slow_to_read_holds_back_readiness_never_the_listener(
    tmp_path: Path, fake_node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file on a hung mount or a slow disk: it is read by the first cycle, on the poll
    thread, after the listeners are up; /-/healthy answers meanwhile, /-/ready waits, and
    nothing is written over the file before it was read (a stop then leaves it as it was)."""
    path = tmp_path / "state.json"
    path.write_bytes(encode(KEPT))
    before = path.read_bytes()
    reading, release = threading.Event(), threading.Event()
    real_load = StateFile.load

    def slow_load(self: StateFile, config: Config, now: float) -> State:
        reading.set()
        assert release.wait(120), "the test never released the read"
        return real_load(self, config, now)

    monkeypatch.setattr(StateFile, "load", slow_load)
    serving(fake_node)
    config = Config(nodes=(NodeConfig("a", fake_node.url),), scrape_interval=1.0)
    exporter = Exporter(config, state_file=str(path))
    server = exporter.start("127.0.0.1:0")
    try:
        assert reading.wait(60), "the first cycle never read the state file"
        base = f"http://127.0.0.1:{server.port}"
        assert fetch(f"{base}/-/healthy").status == 200
        assert fetch(f"{base}/-/ready").status == 503
        assert exporter._poller.keep_state() is False  # nothing written unread
        assert path.read_bytes() == before
        release.set()
        wait_until(exporter.ready, message="the first cycle after the state file was read")
        assert fetch(f"{base}/-/ready").status == 200
    finally:
        release.set()
        exporter.stop()


def test_config_check_refuses_a_directory_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only mount (root writes anywhere else, so the test asks os.access, as check
    does): the start could not write the file, so the check does not say OK."""
    path = tmp_path / "state.json"
    assert state_module.check(str(path), CONFIG)[0]
    real_access = os.access

    def read_only(target: Any, mode: int, **options: Any) -> bool:
        if Path(target) == tmp_path and mode & os.W_OK:
            return False
        return real_access(target, mode, **options)

    monkeypatch.setattr(os, "access", read_only)
    usable, line = state_module.check(str(path), CONFIG)
    assert not usable
    assert line == f"{path}: the directory {tmp_path} is not writable; a start cannot write it"
