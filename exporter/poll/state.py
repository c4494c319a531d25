"""The exporter's memory between cycles, kept in a file across restarts (``--state.file``).

What the history remembers and a restart would otherwise forget: when each node's chain was
first seen at its current height (the clock of ``LedgerBlockHeightStalled``), when each vote
session still open was first seen (``ledger_blockchain_vote_session_age_seconds``), and each
node's ``nodeId`` from its last successful read (what counts a council member whose node is
down as polled). A clock survives a restart only while the node still reports the same
height: same node name, same chain, same height; a session's first sighting only while the
node still reports that session. Counters are not kept (counters restart with the process,
as Prometheus expects), nor anything a probe did (``/probe`` keeps no memory between
probes).

The file is one JSON object::

    {"format": "ledger-exporter-state", "version": 1,
     "nodes": {"<node name>": {"node_id": "02ab...", "blockchains": {"<chain id>":
         {"height": 1234, "height_changed_at": 1700000000.5,
          "vote_sessions": {"<session id>": {"first_seen": 1700000000.5}}}}}}}

Node names are the config's, chain and session ids and node ids the nodes'; nothing else is
written: no URL, no header, no credential. ``node_id`` and ``vote_sessions`` (issue 21) are
keys a reader of the first version-1 files ignores (so a chain's sessions are kept only with
its height clock, which such a reader requires): adding a key keeps version 1; changing
what an existing key means bumps the version, and a file of another version is foreign. A
missing, unreadable, corrupt, foreign or too large file is one log line and a fresh start,
never a stopped exporter; a file that cannot be written is one log line (and one more when
writing works again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from exporter.bounds import MAX_SESSION_ID_CHARS, MAX_TEXT_CHARS
from exporter.config.exporter import Config

log = logging.getLogger("ledger_exporter")

FORMAT = "ledger-exporter-state"
VERSION = 1
#: Room a state file may take per chain the config can poll (its id, height and clock take
#: under 200 bytes with a 64-character id), per vote session it may follow (the longest id,
#: escaped, and its time) and per node (the longest nodeId, escaped), plus a fixed
#: allowance: a bigger file was not written for this config, and is refused unread past the
#: limit.
BYTES_PER_CHAIN = 2048
BYTES_PER_SESSION = 6 * MAX_SESSION_ID_CHARS + 64
BYTES_PER_NODE = 6 * MAX_TEXT_CHARS + 64
BASE_BYTES = 64 * 1024
#: A clock stamped this far ahead of the exporter's own clock is not kept (the clock was set
#: back, or the file came from another machine): the height is then a first sighting.
FUTURE_TOLERANCE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class ChainState:
    """What is remembered of one chain of one node: its height and when it was first seen,
    and when each vote session open at the last read was first seen (session id -> time)."""

    height: float
    height_changed_at: float
    sessions: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeState:
    """What is remembered of one node, per chain id, and its ``nodeId``."""

    chains: Mapping[str, ChainState] = field(default_factory=dict)
    node_id: str | None = None


@dataclass(frozen=True)
class State:
    """The whole memory between cycles, per configured node name."""

    nodes: Mapping[str, NodeState] = field(default_factory=dict)

    @property
    def chain_count(self) -> int:
        return sum(len(node.chains) for node in self.nodes.values())


class StateFileError(Exception):
    """The state file cannot be used; ``kind`` says how (unreadable, corrupt, foreign, too
    large), the message what an operator would look for."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


def encode(state: State) -> bytes:
    """The file's bytes: sorted keys, so equal memories give equal bytes."""
    nodes = {name: _encode_node(node) for name, node in state.nodes.items()}
    document = {"format": FORMAT, "version": VERSION, "nodes": nodes}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _encode_node(node: NodeState) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "blockchains": {chain: _encode_chain(kept) for chain, kept in node.chains.items()}
    }
    if node.node_id is not None:
        encoded["node_id"] = node.node_id
    return encoded


def _encode_chain(chain: ChainState) -> dict[str, Any]:
    encoded: dict[str, Any] = {"height": chain.height, "height_changed_at": chain.height_changed_at}
    if chain.sessions:
        encoded["vote_sessions"] = {
            session: {"first_seen": at} for session, at in chain.sessions.items()
        }
    return encoded


def decode(data: bytes) -> State:
    """The state in ``data``; raises StateFileError (corrupt or foreign) when it is not a
    version 1 state file whose every entry is readable."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise StateFileError("corrupt", f"not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise StateFileError("foreign", f"not a {FORMAT} file")
    version = document.get("version")
    if version != VERSION or isinstance(version, bool):
        raise StateFileError("foreign", f"version {version!r}, this exporter reads {VERSION}")
    nodes = _object(document.get("nodes"), "nodes")
    return State({str(name): _node(value, f"nodes.{name}") for name, value in nodes.items()})


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StateFileError("corrupt", f"{where} is not an object")
    return value


def _node(value: Any, where: str) -> NodeState:
    node = _object(value, where)
    chains = _object(node.get("blockchains"), f"{where}.blockchains")
    node_id = node.get("node_id")
    if node_id is not None and not (
        isinstance(node_id, str) and 0 < len(node_id) <= MAX_TEXT_CHARS
    ):
        raise StateFileError("corrupt", f"{where}.node_id is not a node id")
    return NodeState(
        {chain: _chain(kept, f"{where}.blockchains.{chain}") for chain, kept in chains.items()},
        node_id,
    )


def _chain(value: Any, where: str) -> ChainState:
    kept = _object(value, where)
    height, since = kept.get("height"), kept.get("height_changed_at")
    if not (_finite(height) and height >= 0 and _finite(since)):
        raise StateFileError("corrupt", f"{where} holds an entry without a readable height")
    sessions = _object(kept.get("vote_sessions", {}), f"{where}.vote_sessions")
    return ChainState(
        float(height),
        float(since),
        {sid: _first_seen(sid, seen, f"{where}.vote_sessions") for sid, seen in sessions.items()},
    )


def _first_seen(session: str, value: Any, where: str) -> float:
    at = value.get("first_seen") if isinstance(value, dict) else None
    if not (0 < len(session) <= MAX_SESSION_ID_CHARS and _finite(at)):
        raise StateFileError("corrupt", f"{where} holds a session without a readable time")
    return float(at)


def _finite(value: Any) -> TypeGuard[float]:
    """A JSON number (not a boolean) that is neither NaN nor infinite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def size_limit(config: Config) -> int:
    """The largest state file ``config`` can need: BYTES_PER_CHAIN per chain it may poll,
    BYTES_PER_SESSION per session it may follow there, BYTES_PER_NODE per node."""
    chains = sum(
        len(node.blockchains or ()) or config.max_blockchains_per_node for node in config.nodes
    )
    per_chain = BYTES_PER_CHAIN + BYTES_PER_SESSION * config.max_vote_sessions_per_chain
    return BASE_BYTES + per_chain * chains + BYTES_PER_NODE * len(config.nodes)


def for_config(state: State, config: Config, now: float) -> State:
    """Only what ``config`` polls: its nodes, their configured chains (or at most
    max_blockchains_per_node), at most max_vote_sessions_per_chain sessions a chain, and no
    clock or first sighting from the future."""
    kept: dict[str, NodeState] = {}
    for node in config.nodes:
        remembered = state.nodes.get(node.name)
        if remembered is None:
            continue
        chains = {
            chain: _present(value, now, config.max_vote_sessions_per_chain)
            for chain, value in remembered.chains.items()
            if (not node.blockchains or chain in node.blockchains)
            and not _future(value.height_changed_at, now)
        }
        if len(chains) > config.max_blockchains_per_node and not node.blockchains:
            chains = dict(list(chains.items())[: config.max_blockchains_per_node])
        if chains or remembered.node_id is not None:
            kept[node.name] = NodeState(chains, remembered.node_id)
    return State(kept)


def _future(at: float, now: float) -> bool:
    return at > now + FUTURE_TOLERANCE_SECONDS


def _present(chain: ChainState, now: float, most: int) -> ChainState:
    """``chain`` with at most ``most`` sessions, none first seen in the future."""
    sessions = [(sid, at) for sid, at in chain.sessions.items() if not _future(at, now)]
    if len(sessions) == len(chain.sessions) <= most:
        return chain
    return ChainState(chain.height, chain.height_changed_at, dict(sessions[:most]))


class StateFile:
    """The state file at ``path``: read once at start, written atomically (a temporary file
    in the same directory, fsync, rename) when the memory changed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._written: bytes | None = None  # digest of the bytes last written (or read)
        self._failing = False

    def load(self, config: Config, now: float) -> State:
        """The remembered state for ``config``, or an empty one after one log line saying
        why (a missing file is the normal first start)."""
        fields: dict[str, object] = {"file": self.path}
        try:
            state = for_config(decode(self._read(size_limit(config))), config, now)
        except FileNotFoundError:
            log.info("no state file yet; starting with no memory", extra={"fields": fields})
            return State()
        except StateFileError as error:
            fields |= {"problem": error.kind, "error": str(error)}
            log.warning("state file not used; starting with no memory", extra={"fields": fields})
            return State()
        fields |= {"nodes": len(state.nodes), "blockchains": state.chain_count}
        log.info("memory restored from the state file", extra={"fields": fields})
        return state

    def _read(self, limit: int) -> bytes:
        try:
            with open(self.path, "rb") as stream:
                data = stream.read(limit + 1)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise StateFileError("unreadable", error.strerror or str(error)) from None
        if len(data) > limit:
            detail = f"larger than the {limit} bytes the config's nodes and chains can need"
            raise StateFileError("too_large", detail)
        return data

    def save(self, state: State) -> bool:
        """Write ``state`` unless the file already holds it; True when written. A failure is
        logged once (and once more when writing works again), never raised."""
        data = encode(state)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        with self._lock:
            if digest == self._written:
                return False
            try:
                _write_atomically(self.path, data)
            except OSError as error:
                if not self._failing:
                    fields = {"file": self.path, "error": error.strerror or str(error)}
                    message = "cannot write the state file; the memory will not survive a restart"
                    log.warning(message, extra={"fields": fields})
                self._failing = True
                return False
            if self._failing:
                log.info("state file written again", extra={"fields": {"file": self.path}})
            self._failing = False
            self._written = digest
            return True


def _write_atomically(path: str, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: a temporary file in the same directory,
    flushed to disk, renamed over the old one, and the directory entry flushed too."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # some file systems cannot sync a directory
        directory_handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_handle)
        finally:
            os.close(directory_handle)
