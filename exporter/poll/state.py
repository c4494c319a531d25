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
what an existing key means bumps the version.

The file is the exporter's own only when it begins with the format marker
(``{"format": "ledger-exporter-state"``, as every write puts it first); nothing else is ever
written over (issue 32, the disk side in :mod:`exporter.ownfile`):

- a missing or empty (0-byte) file is a first start, and written (a blank one is another's);
- the exporter's own file of this version is read, and written;
- its own file that is corrupt or larger than the config can need is moved aside to
  ``NAME.corrupt-TIME`` (``NAME.too-large-TIME``), kept and named in the log, and a new one
  written: it is the exporter's to manage, and leaving it would turn one damaged file into
  an exporter that never keeps its memory again;
- a file without the marker (another program's: the config file named by a swapped flag,
  say) or of a newer version (a rollback: the newer release's memory) is left alone and
  never written: moving another program's file would break that program (the config file
  would be gone at the next start), so the exporter runs without keeping its memory and
  says so;
- what is not a regular file (a FIFO, a device such as ``/dev/null``, a socket, a
  directory) is refused without being opened.

Reading costs what the configured nodes can need, not what the file holds: no file larger
than :func:`size_limit` is read at all; within it the file is read into one buffer of its
size (``pread``, not a mapping: a mapped file truncated by another writer would kill the
process with SIGBUS), nodes the config does not poll and chains outside a node's
``blockchains`` are skipped unparsed, and a node's or a chain's entry larger than the config
lets it grow is skipped unparsed too. A file that changes while it is read (it ends early,
its size or change time moves: ``cp backup FILE`` truncates in place) is read once more; a
second change leaves it alone until it is judged again at the next write, never taken for
corrupt. A second exporter on the same file finds it locked: it reads the file but writes
nothing until the first one stops (see :class:`StateFile`). None of this stops the exporter:
each outcome is one log line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import msgspec

from exporter import ownfile
from exporter.bounds import MAX_SESSION_ID_CHARS, MAX_TEXT_CHARS
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.errors import FileChangedError, NotAFileError, StateFileError
from exporter.ownfile import Identity

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


#: How every file this exporter writes begins: what makes a file its own.
_MARKER = re.compile(rb'\s*\{\s*"format"\s*:\s*"ledger-exporter-state"')
#: How much of a file is read to judge whose it is (or whether it is blank).
HEAD_BYTES = 4096
#: The version at the end of a file too large to read (the keys are written sorted).
_TAIL_VERSION = re.compile(rb'"version"\s*:\s*(\d{1,9})\s*\}\s*\Z')
_FOREIGN = (
    f'not a {FORMAT} file (it does not begin with {{"format": "{FORMAT}"}}):'
    " does --state.file name the right file?"
)

NodeId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT_CHARS)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SESSION_ID_CHARS)]
Height = Annotated[float, msgspec.Meta(ge=0)]  # JSON has no NaN; too large is an error


class _Header(msgspec.Struct):
    """The top of a file; the nodes left unparsed (a view into the file)."""

    format: Any = None
    version: Any = None
    nodes: msgspec.Raw = msgspec.Raw()


class _Node(msgspec.Struct):
    """A node's entry, its chains left unparsed."""

    blockchains: dict[str, msgspec.Raw]
    node_id: NodeId | None = None


class _Seen(msgspec.Struct):
    first_seen: float


class _Chain(msgspec.Struct):
    height: Height
    height_changed_at: float
    vote_sessions: dict[SessionId, _Seen] = {}


def decode(data: bytes) -> State:
    """The state in ``data``, every entry read; raises StateFileError (corrupt, foreign or
    newer) when it is not a version 1 state file whose every entry is readable."""
    named = _part(_nodes(data), dict[str, msgspec.Raw], "nodes")
    return State({name: _node_state(raw, name, None, None, 0.0)[0] for name, raw in named.items()})


def _nodes(data: bytes | memoryview | Any) -> msgspec.Raw:
    """The unparsed nodes of a file of this version; StateFileError otherwise."""
    if not _MARKER.match(bytes(data[:HEAD_BYTES])):
        raise StateFileError("foreign", _FOREIGN)
    try:
        header = msgspec.json.decode(data, type=_Header)
    except msgspec.DecodeError as error:
        raise StateFileError("corrupt", f"not JSON: {error}") from None
    except msgspec.ValidationError as error:
        raise StateFileError("corrupt", str(error)) from None
    if header.format != FORMAT:
        raise StateFileError("foreign", _FOREIGN)
    version = header.version
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise StateFileError(
            "newer",
            f"written by a newer ledger-exporter (state format version {version},"
            f" this one reads {VERSION}): kept for it",
        )
    if version != VERSION or isinstance(version, bool):
        raise StateFileError("foreign", f"version {version!r}, this exporter reads {VERSION}")
    if not len(header.nodes):
        raise StateFileError("corrupt", "nodes is missing")
    return header.nodes


def _part(raw: msgspec.Raw, kind: Any, where: str) -> Any:
    """``raw`` read as ``kind``; a part that does not fit makes the file corrupt."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as error:
        raise StateFileError("corrupt", f"{where}: {error}") from None


def _node_state(
    raw: msgspec.Raw, name: str, node: NodeConfig | None, config: Config | None, now: float
) -> tuple[NodeState, int]:
    """A node's entry read, with how many of its chains were skipped unparsed as larger
    than ``config`` lets a chain grow (none without a config). With a config, a node
    without a ``blockchains`` list keeps its first max_blockchains_per_node chains not
    stamped in the future (as :func:`for_config`), and the rest is not read."""
    where = f"nodes.{name}"
    listed = node.blockchains if node is not None else None
    if listed and all(_matchable(chain) for chain in listed):
        typed = _part(raw, _listed_node(tuple(listed)), where)
        chains: Iterable[tuple[str, msgspec.Raw]] = zip(
            listed, (getattr(typed.blockchains, f"c{i}") for i in range(len(listed))), strict=True
        )
        node_id = typed.node_id
    else:
        entry = _part(raw, _Node, where)
        chains, node_id = entry.blockchains.items(), entry.node_id
    largest = _chain_bytes(config) if config is not None else None
    most = config.max_blockchains_per_node if config is not None and not listed else None
    kept: dict[str, ChainState] = {}
    skipped = 0
    for chain, chain_raw in chains:
        if most is not None and len(kept) >= most:
            break
        if not len(chain_raw):
            continue  # a listed chain the file does not hold
        if largest is not None and len(chain_raw) > largest:
            skipped += 1
            continue
        entry_chain = _part(chain_raw, _Chain, f"{where}.blockchains.{chain}")
        sessions = {sid: seen.first_seen for sid, seen in entry_chain.vote_sessions.items()}
        if most is not None and _future(entry_chain.height_changed_at, now):
            continue
        kept[chain] = ChainState(entry_chain.height, entry_chain.height_changed_at, sessions)
    return NodeState(kept, node_id), skipped


def _matchable(key: str) -> bool:
    """Whether msgspec can match ``key`` as a field name (no quote, backslash or control
    character): then entries under other keys are skipped without being built."""
    return not any(char in '"\\' or ord(char) < 0x20 for char in key)


def _fields(keys: Iterable[str], prefix: str) -> tuple[list[Any], dict[str, str]]:
    """Struct fields named ``prefix0``, ``prefix1``... for ``keys``, each an unparsed
    value (empty when absent), and the renaming to the keys themselves."""
    fields: list[Any] = []
    rename: dict[str, str] = {}
    for index, key in enumerate(keys):
        fields.append((f"{prefix}{index}", msgspec.Raw, msgspec.Raw()))
        rename[f"{prefix}{index}"] = key
    return fields, rename


def _listed_node(chains: tuple[str, ...]) -> Any:
    """A node's entry type reading only the ``chains`` listed (the others skipped unbuilt)."""
    fields, rename = _fields(chains, "c")
    listed = msgspec.defstruct("_Listed", fields, rename=rename)
    return msgspec.defstruct(
        "_ListedNode", [("blockchains", listed), ("node_id", NodeId | None, None)]
    )


def _configured(nodes: msgspec.Raw, config: Config) -> Iterable[tuple[NodeConfig, msgspec.Raw]]:
    """The entries of the configured nodes, the others skipped unbuilt (unless a configured
    name holds a character msgspec cannot match: then every entry is built, the rare
    config's cost)."""
    names = list(dict.fromkeys(node.name for node in config.nodes))
    by_name = {node.name: node for node in config.nodes}
    if all(_matchable(name) for name in names):
        fields, rename = _fields(names, "n")
        typed = _part(nodes, msgspec.defstruct("_Nodes", fields, rename=rename), "nodes")
        found = ((name, getattr(typed, f"n{i}")) for i, name in enumerate(names))
    else:
        found = iter(_part(nodes, dict[str, msgspec.Raw], "nodes").items())
    return [(by_name[name], raw) for name, raw in found if name in by_name and len(raw)]


def _read(data: bytes | Any, config: Config, now: float) -> tuple[State, int]:
    """The state the configured nodes can use from a file's bytes, and how many entries
    were skipped unparsed as larger than the config lets them grow."""
    kept: dict[str, NodeState] = {}
    skipped = 0
    largest_node = _node_bytes(config)
    for node, raw in _configured(_nodes(data), config):
        if not node.blockchains and len(raw) > largest_node:
            skipped += 1
            continue
        kept[node.name], dropped = _node_state(raw, node.name, node, config, now)
        skipped += dropped
    return State(kept), skipped


def _chain_bytes(config: Config) -> int:
    """The room one chain's entry can take under ``config``."""
    return BYTES_PER_CHAIN + BYTES_PER_SESSION * config.bounds.vote_sessions_per_chain


def _node_bytes(config: Config) -> int:
    """The room one node's entry can take when it polls up to max_blockchains_per_node."""
    return BYTES_PER_NODE + _chain_bytes(config) * config.max_blockchains_per_node


def size_limit(config: Config) -> int:
    """The largest state file ``config`` can need: BYTES_PER_CHAIN per chain it may poll,
    BYTES_PER_SESSION per session it may follow there, BYTES_PER_NODE per node."""
    chains = sum(
        len(node.blockchains or ()) or config.max_blockchains_per_node for node in config.nodes
    )
    return BASE_BYTES + _chain_bytes(config) * chains + BYTES_PER_NODE * len(config.nodes)


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
            chain: _present(value, now, config.bounds.vote_sessions_per_chain)
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


#: What a start does with a file of each kind: written (after moving it aside, under this
#: label), left alone and not written, or (CHANGED: it changed while read, twice) not
#: written until it is judged again at the next write.
WRITTEN = frozenset({"missing", "empty", "restored"})
MOVED_ASIDE = {"corrupt": "corrupt", "too_large": "too-large"}
LEFT_ALONE = frozenset({"foreign", "newer", "not_a_file", "unreadable"})
CHANGED = "changed"


@dataclass(frozen=True)
class Inspection:
    """What is at the state file's path: ``kind`` (one of WRITTEN, MOVED_ASIDE, LEFT_ALONE,
    CHANGED), a sentence for the operator, the memory restored, the file's identity, how
    many entries were skipped as larger than the config lets them grow, and why it was read
    twice (it changed while first read; empty when once was enough)."""

    kind: str
    detail: str
    state: State = State()
    identity: Identity | None = None
    skipped: int = 0
    reread: str = ""


def inspect(target: str, config: Config | None, now: float, limit: int | None = None) -> Inspection:
    """Judge the file at ``target`` (symlinks resolved) without changing anything: with a
    ``config``, read what it can use (no more than its :func:`size_limit`); without, only
    whose and which version it is (no more than ``limit`` bytes, when given). A file that
    changes while it is read is read once more (a copy over it has likely finished); a
    second change makes it CHANGED."""
    try:
        return _inspect(target, config, now, limit)
    except FileChangedError as error:
        first = error.strerror or str(error)
    try:
        return replace(_inspect(target, config, now, limit), reread=first)
    except FileChangedError as error:
        detail = f"it changed while it was read, twice ({first}; then {error.strerror})"
        return Inspection(CHANGED, detail, reread=first)


def _inspect(target: str, config: Config | None, now: float, limit: int | None) -> Inspection:
    """One reading of :func:`inspect`'s; FileChangedError when the file changed meanwhile."""
    try:
        with ownfile.opened(target) as (handle, found):
            return _inspect_open(handle, found, config, now, limit)
    except FileChangedError:
        raise
    except FileNotFoundError:
        return Inspection("missing", "no state file yet")
    except NotAFileError as error:
        detail = (
            f"{target} is {error.kind}; name a regular file (to keep no memory across"
            " restarts, leave --state.file out)"
        )
        return Inspection("not_a_file", detail)
    except OSError as error:
        return Inspection("unreadable", error.strerror or str(error))


def _inspect_open(
    handle: int, found: Identity, config: Config | None, now: float, limit: int | None
) -> Inspection:
    if found.size == 0:  # holds nothing (`touch` and `chown` for the exporter's user, say)
        return Inspection("empty", "empty", identity=found)
    head = ownfile.read_at(handle, min(found.size, HEAD_BYTES), 0)
    if not _MARKER.match(head):
        return Inspection("foreign", _FOREIGN, identity=found)
    if config is not None:
        limit = size_limit(config)
    if limit is not None and found.size > limit:
        tail_at = max(0, found.size - 64)
        tail = _TAIL_VERSION.search(ownfile.read_at(handle, found.size - tail_at, tail_at))
        if tail is not None and int(tail[1]) > VERSION:
            detail = f"written by a newer ledger-exporter (state format version {tail[1]!r})"
            return Inspection("newer", detail, identity=found)
        detail = f"larger than the {limit} bytes the config's nodes and chains can need"
        return Inspection("too_large", detail, identity=found)
    data = ownfile.read_whole(handle, found)  # at most ``limit`` bytes: checked above
    try:
        if config is None:
            _nodes(data)
            return Inspection("restored", "a state file of this version", identity=found)
        state, skipped = _read(data, config, now)
    except StateFileError as error:
        return Inspection(error.kind, str(error), identity=found)
    return Inspection("restored", "", for_config(state, config, now), found, skipped)


def check(path: str, config: Config) -> tuple[bool, str]:
    """``--config.check``'s verdict on the state file, changing nothing: whether a start
    would keep its memory there, and one line saying what it found."""
    target = ownfile.resolve(path)
    found = inspect(target, config, time.time())
    directory = os.path.dirname(target)
    if found.kind == "missing" and not os.path.isdir(directory):
        return False, f"{path}: the directory {directory} does not exist; a start cannot write it"
    if found.kind in WRITTEN and not os.access(directory, os.W_OK):
        # the temporary file, the rename and the lock all need the directory (a read-only mount)
        return False, f"{path}: the directory {directory} is not writable; a start cannot write it"
    if found.kind in WRITTEN:
        if found.kind == "restored":
            state = found.state
            what = f"the memory of {len(state.nodes)} node(s), {state.chain_count} blockchain(s)"
        else:
            what = f"{found.detail}; the first cycle writes it"
        return True, f"{path}: OK, {what}"
    if found.kind == CHANGED:
        return False, f"{path}: {found.detail}; is something writing it? Check again"
    if found.kind in MOVED_ASIDE:
        aside = f"{target}.{MOVED_ASIDE[found.kind]}-TIME"
        return True, f"{path}: {found.detail}; a start moves it aside to {aside} and writes anew"
    return False, f"{path}: {found.detail}; a start leaves it alone and keeps no memory"


class StateFile:
    """The state file at ``path``: read once at start, written atomically (a temporary file
    in the same directory, fsync, rename) when the memory changed, and only where writing
    destroys nothing (module docstring).

    The path's symlinks are resolved at the first use and the target written (the link
    stays). Before each write the file there is checked to be the one last read or written
    (one ``lstat``); a file that changed is judged again, read no further than the size
    limit of the config it was loaded for, and only once while it stays the same file (same
    device, inode, size and change time: a second exporter waiting for the lock reads each
    version the holder writes once, not every cycle). Writing needs the lock (a sibling
    ``.NAME.lock``): a second exporter started on the same file reads it and runs without
    writing it, with one warning, and takes the lock over (one info line) once the first
    one stops: refusing to start would turn an overlapping restart (a new container beside
    the old one on a shared volume) into a crash loop, while writing both would make the
    file flip between the two memories. The holder of the lock removes the temporary files
    a crash left."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mutex = threading.Lock()
        self._target = ownfile.resolve(path)  # the file the path names, symlinks followed
        self._lock = ownfile.Lock(self._target)
        self._lock_refused = False  # another exporter held the lock: said once
        self._known: Identity | None = None  # the file as last judged, read or written
        self._judged = False  # whether _known is up to date
        self._left_alone = False  # the file at _known is not the exporter's to write
        self._written: bytes | None = None  # digest of the bytes last written (or read)
        self._failing = False
        self.write_failures = 0  # writes (or the lock they need) that failed, since start
        self._limit: int | None = None  # the size limit of the config loaded for
        self._inspected: Inspection | None = None  # the last judgement of a changed file

    def load(self, config: Config, now: float) -> State:
        """The remembered state for ``config``, or an empty one after one log line saying
        why (a missing file is the normal first start)."""
        with self._mutex:
            self._limit = size_limit(config)
            found = inspect(self._target, config, now)
            if found.kind not in LEFT_ALONE | {CHANGED}:  # nothing made beside what is not ours
                self._take_lock()
            fields = self._fields()
            if found.reread:
                message = "state file changed while it was read; read it again"
                log.warning(message, extra={"fields": fields | {"error": found.reread}})
            if found.kind == "restored":
                state = found.state
                fields |= {"nodes": len(state.nodes), "blockchains": state.chain_count}
                if found.skipped:
                    fields["skipped"] = found.skipped
                    message = "memory restored from the state file, but for entries larger than"
                    log.warning(f"{message} the config can need", extra={"fields": fields})
                else:
                    log.info("memory restored from the state file", extra={"fields": fields})
            elif found.kind == "missing":
                log.info("no state file yet; starting with no memory", extra={"fields": fields})
            elif found.kind == "empty":
                log.info("state file is empty; starting with no memory", extra={"fields": fields})
            self._settle(found, "; starting with no memory")
            return found.state

    def save(self, state: State) -> bool:
        """Write ``state`` unless the file already holds it or is not the exporter's to
        write; True when written. A failure is logged once (and once more when writing works
        again), never raised."""
        data = encode(state)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        with self._mutex:
            if digest == self._written:
                return False
            if not self._may_write(self._target):
                return False
            try:
                self._known = ownfile.write_atomically(self._target, data)
            except OSError as error:
                self._failed(error.strerror or str(error))
                return False
            if self._failing:
                log.info("state file written again", extra={"fields": self._fields()})
            self._failing = False
            self._written = digest
            return True

    def _fields(self) -> dict[str, object]:
        fields: dict[str, object] = {"file": self.path}
        if self._target != os.path.abspath(self.path):
            fields["target"] = self._target  # a symlink's
        return fields

    def _take_lock(self) -> bool:
        """Hold the lock (taken now, or already); False while another exporter holds it or
        the lock file cannot be made (that is said as a write that fails)."""
        lock = self._lock
        if lock.held:
            return True
        try:
            taken = lock.acquire()
        except OSError as error:
            self._failed(f"{lock.path}: {error.strerror or error}")
            return False
        if not taken:
            if not self._lock_refused:
                message = "state file in use by another ledger-exporter; read, but not written"
                fields = self._fields() | {"lock": lock.path}
                log.warning(f"{message} while that one runs", extra={"fields": fields})
            self._lock_refused = True
            return False
        if self._lock_refused:
            log.info(
                "state file lock taken over; writing it from now on",
                extra={"fields": self._fields()},
            )
        self._judged = False  # the other exporter may have written it meanwhile
        removed = ownfile.remove_stale_temporaries(self._target)
        if removed:
            fields = self._fields() | {"removed": len(removed)}
            log.info("stale temporary files of the state file removed", extra={"fields": fields})
        return True

    def _may_write(self, target: str) -> bool:
        """Whether the file at ``target`` may be written now: the lock is held and the file
        is the one last judged writable (or, judged again, is missing, empty or the
        exporter's own: a corrupt one is moved aside first). What is not its own is judged
        before the lock is taken: no lock file is made beside it."""
        try:
            unchanged = self._judged and ownfile.stamp(target) == self._known
        except OSError:  # cannot tell: the last judgement stands
            unchanged = self._judged
        if unchanged and self._left_alone:
            return False
        if not unchanged:
            found = self._judge(target)
            if found.kind in LEFT_ALONE:
                return self._settle(found, "")
        if not self._take_lock():
            return False
        if unchanged and self._judged:  # (a lock taken over is judged again)
            return True
        return self._settle(self._judge(target), "")

    def _judge(self, target: str) -> Inspection:
        """:func:`inspect` of the file (bounded by the size limit loaded for), or the last
        judgement while it is the same file: same device, inode, size and change time."""
        last = self._inspected
        if last is not None and last.identity is not None:
            with contextlib.suppress(OSError):
                if ownfile.stamp(target) == last.identity:
                    return last
        self._inspected = inspect(target, None, 0.0, self._limit)
        return self._inspected

    def _settle(self, found: Inspection, starting: str) -> bool:
        """Act on a judgement of the file (one log line when it is not written as it is):
        True when it may be written. ``starting`` ends the line at start."""
        self._judged, self._left_alone = True, False
        try:  # what was judged: the opened file's identity, or what is there instead
            self._known = found.identity or ownfile.stamp(self._target)
        except OSError:
            self._known = None
        if found.kind in WRITTEN:
            return True
        fields = self._fields() | {"problem": found.kind, "error": found.detail}
        if found.kind == CHANGED:  # something is writing it: judged again at the next write
            log.warning(f"state file changed while it was read{starting}", extra={"fields": fields})
            self._judged = False
            return False
        label = MOVED_ASIDE.get(found.kind)
        if label is not None and self._lock.held:
            try:
                fields["moved_to"] = ownfile.move_aside(self._target, label)
            except OSError as error:
                fields["error"] = f"{found.detail}; cannot move it aside: {error.strerror}"
            else:
                self._known = None
                log.warning(f"state file not used, moved aside{starting}", extra={"fields": fields})
                return True
        elif label is not None:  # the exporter holding the lock owns it: it is not moved
            log.warning(f"state file not used{starting}", extra={"fields": fields})
            self._judged = False
            return False
        log.warning(f"state file left alone and not written{starting}", extra={"fields": fields})
        self._left_alone = True
        if not starting:
            self._failing = True  # "written again" once it is replaced by a writable one
        return False

    def _failed(self, error: str) -> None:
        """A write (or the lock file it needs) failed: counted (the exporter's
        ledger_exporter_state_file_write_failures_total), one warning until one succeeds."""
        self.write_failures += 1
        if not self._failing:
            fields = self._fields() | {"error": error}
            message = "cannot write the state file; the memory will not survive a restart"
            log.warning(message, extra={"fields": fields})
        self._failing = True
