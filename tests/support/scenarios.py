"""Generated fleets of nodes, what they answer, and the exporter run over them.

A :class:`Fleet` is one to three nodes (odd names and static labels among them, to test
label escaping), the chains they share, a watched contract and wallet, and what each node
answers in each of two cycles: a plain first cycle (every chain at height
:data:`BASE_HEIGHT`, so the second cycle asks for the checkpoint block) and a generated
second one (:mod:`tests.support.answers`: valid answers drawn from the node API document, aligned so
that nodes share chains, councils, peers and hashes, then mutated).

:func:`run_in_process` runs a fleet through the real poller, history, network view and
writer, with :class:`InProcessEngine` in place of libcurl: the lowest seam that still covers
decoding (``exporter.poll.client``), reading, history and rendering. :func:`samples` reads
an exposition back with client_python's parsers, and :class:`MetricsCheck` checks many
expositions in a few ``promtool check metrics`` runs.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pycurl
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from exporter.config.exporter import Config, NetworkChecks
from exporter.config.nodes import NodeConfig
from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from exporter.errors import TransferError
from exporter.expose.render import OPENMETRICS_END, Renderer, openmetrics_format, text_format
from exporter.model.snapshot import Snapshot
from exporter.poll.cycle import Poller
from exporter.poll.engine import Done, Engine, Request, Response
from tests.support.answers import (
    HOW,
    MAX_RESPONSE_BYTES,
    SEED,
    Answer,
    Plan,
    documents,
    encode,
    make_answer,
    plans,
    small_json,
)
from tests.support.contract_oracle import (
    Contract,
    Cycle,
    Key,
    Setup,
    Wallet,
    labels_of,
)
from tests.support.contract_oracle import (
    Request as Asked,
)
from tests.support.prometheus import Promtool

#: Configured node names and static labels: odd ones, to test the escaping of labels.
NODES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("alpha", ()),
    ('b"e\\t\na', (("region", 'eu"\\\nwest'),)),
    ("\u00fcn\u00ef \u2603", ()),
    ("end\\", (("zone", "a\\nb"),)),
    ("node-4", (("region", ""),)),
)
CHAIN_IDS = (
    "c1",
    "chain-2",
    "..",
    "a/b?c=d&e#f",
    "\u00fcn\u00ef",
    'q"uo\\te\n',
    "%2F",
    " sp ace",
    "\x01ctl",
    "a\\nb",
    "end\\",
    "x" * 1025,
)
COUNCIL = ("k1", "k2", "k3", "k4")
HASHES = ("h-aaa", "h-bbb", "h-ccc")
BASE_HEIGHT = 1000
DEPTH = 5
CHECKPOINT = BASE_HEIGHT - DEPTH
CONTRACT_ADDRESS = "0xC0FFEE"
WALLET_ADDRESS = "w/1?x"
STATE_KEYS = ("supply", "limits.daily", "paused", "a.b.c")
CLOCKS = (1_700_000_000.0, 1_700_000_015.0)
#: The vote session open in the first cycle, and the consensus settings every node starts
#: with: the second cycle may keep, escalate or close the session, and keep or change them.
SESSION = "s-1"
BASE_SESSION = {
    "sessionId": SESSION,
    "blockHeight": BASE_HEIGHT + 1,
    "round": 2,
    "currentStage": 1,
    "currentLeader": COUNCIL[0],
    "consensusRequired": 3,
}
BASE_CONSENSUS = {
    "consensusType": "council_leader_proposal",
    "minMembers": 3,
    "consensusTimeout": "30s",
}
HASH_FIELDS = ("hash", "blockHash")

Answers = dict[Asked, Answer]


@dataclass(frozen=True)
class Fleet:
    """A generated scenario: the setup, the chains, and each node's answers per cycle."""

    setup: Setup
    chains: tuple[str, ...]
    answers: tuple[Mapping[str, Answers], ...]

    def show(self) -> str:
        """The nodes, chains and each cycle's answers, one per line (for failure reports)."""
        lines = [f"nodes {self.setup.nodes!r}, chains {self.chains!r}"]
        for cycle, answers in enumerate(self.answers, 1):
            for node, by_request in answers.items():
                lines += [f"cycle {cycle} {node!r} {key!r}: {a!r}" for key, a in by_request.items()]
        return "\n".join(lines)


def host(index: int) -> str:
    return f"node-{index}.test"


def config_of(setup: Setup, urls: Sequence[str] | None = None) -> Config:
    """The exporter's configuration for ``setup`` (node ``i`` at ``urls[i]``, by default
    ``http://node-i.test/``)."""
    nodes = tuple(
        NodeConfig(name, urls[index] if urls else f"http://{host(index)}/", labels)
        for index, (name, labels) in enumerate(setup.nodes)
    )
    watch = WatchConfig(
        tuple(
            WatchedContract(c.blockchain, c.address, c.name, c.state_keys) for c in setup.contracts
        ),
        tuple(WatchedWallet(w.blockchain, w.address, w.name) for w in setup.wallets),
    )
    return Config(
        nodes=nodes,
        scrape_interval=30.0,
        scrape_timeout=20.0,
        max_response_bytes=setup.max_bytes,
        max_blockchains_per_node=setup.max_chains,
        network_checks=NetworkChecks(setup.checkpoint_depth, setup.hash_fields),
        watch=watch,
    )


def request_key(segments: Sequence[str], query: Sequence[tuple[str, str]] = ()) -> Asked:
    return tuple(segments), tuple(query)


def node_id(index: int) -> str:
    """A node's ``nodeId``: the first nodes are council members (the council's keys)."""
    return COUNCIL[index] if index < len(COUNCIL) else f"id-{index}"


def baseline(setup: Setup, chains: Sequence[str]) -> dict[str, Answers]:
    """The first cycle: every node up, listing ``chains``, each at BASE_HEIGHT, not syncing."""
    answers: dict[str, Answers] = {}
    for index, (name, _) in enumerate(setup.nodes):
        health = {
            "nodeVersion": "1.0.0",
            "nodeId": node_id(index),
            "network": {"peerId": f"peer-{index}", "peerCount": 1, "networkPeers": []},
            "blockchains": list(chains),
        }
        status = {
            "blockHeight": BASE_HEIGHT,
            "syncing": False,
            "councilMembers": list(COUNCIL),
            "voteSessions": {SESSION: dict(BASE_SESSION)},
            "consensus": dict(BASE_CONSENSUS),
            "keyType": "ed25519",
        }
        node = {request_key(["health"]): Answer(encode(health))}
        for chain in chains:
            node[request_key(["blockchains", chain])] = Answer(encode(status))
        answers[name] = node
    return answers


# --- generated fleets --------------------------------------------------------------------

#: The parts of a node's answers a fleet may generate (the others are plain and valid).
PARTS = frozenset({"health", "status", "block", "contract", "state", "wallet"})


@dataclass(frozen=True)
class NodePlan:
    """Every choice about one node's generated answers but the documents themselves: how
    each generated part is made, and a seed for aligning the documents with the fleet's
    (the chains listed, peers, heights, councils, hashes, watched state keys)."""

    plans: Mapping[str, Plan]
    seed: int


@st.composite
def fleets(
    draw: st.DrawFn,
    most_nodes: int = 1,
    parts: frozenset[str] = PARTS,
    hows: Sequence[str] = HOW,
) -> Fleet:
    """One to ``most_nodes`` nodes sharing one or two chains, a watched contract and wallet,
    a plain first cycle and a second one whose ``parts`` are generated (made as ``hows``
    says). Every choice is drawn before the documents (see :class:`tests.support.answers.Plan`)."""
    count = draw(st.integers(1, most_nodes))
    shuffled = draw(st.permutations(NODES)) if draw(st.booleans()) else NODES
    first = draw(st.sampled_from(CHAIN_IDS[:3]) | st.sampled_from(CHAIN_IDS))
    more = draw(st.lists(st.sampled_from(CHAIN_IDS), max_size=1))
    chains = tuple(dict.fromkeys([first, *more]))
    setup = Setup(
        nodes=tuple(shuffled[:count]),
        contracts=(Contract(chains[0], CONTRACT_ADDRESS, "token", STATE_KEYS),),
        wallets=(Wallet(chains[0], WALLET_ADDRESS, "treasury"),),
        hash_fields=HASH_FIELDS,
        checkpoint_depth=DEPTH,
        max_bytes=MAX_RESPONSE_BYTES,
    )
    keys = _part_keys(chains, parts)
    node_plans = [
        NodePlan({key: draw(plans(hows)) for key in keys}, draw(SEED)) for _ in setup.nodes
    ]
    second = {
        name: node_answers(index, chains, setup, plan, {key: draw(_document(key)) for key in keys})
        for index, ((name, _), plan) in enumerate(zip(setup.nodes, node_plans, strict=True))
    }
    return Fleet(setup, chains, (baseline(setup, chains), second))


def fleet_of(answers: Mapping[Asked, Answer], chains: Sequence[str] = ("c1",)) -> Fleet:
    """A one-node fleet answering ``answers`` in the second cycle and plainly otherwise: for
    explicit cases (``@example``) and regression tests."""
    setup = Setup(
        nodes=NODES[:1],
        contracts=(Contract(chains[0], CONTRACT_ADDRESS, "token", STATE_KEYS),),
        wallets=(Wallet(chains[0], WALLET_ADDRESS, "treasury"),),
        hash_fields=HASH_FIELDS,
        checkpoint_depth=DEPTH,
        max_bytes=MAX_RESPONSE_BYTES,
    )
    name = setup.nodes[0][0]
    plain = node_answers(0, chains, setup, NodePlan({}, 0), {})
    second = {name: {**plain, **answers}}
    return Fleet(setup, tuple(chains), (baseline(setup, chains), second))


def _part_keys(chains: Sequence[str], parts: frozenset[str]) -> list[str]:
    """The generated parts of one node: ``status:<i>`` and ``block:<i>`` per chain."""
    keys: list[str] = [part for part in ("health", "contract", "state", "wallet") if part in parts]
    for index in range(len(chains)):
        keys += [f"{part}:{index}" for part in ("status", "block") if part in parts]
    return keys


def _document(key: str) -> st.SearchStrategy[Any]:
    schema = {
        "health": "Health",
        "status": "BlockchainStatus",
        "block": "Block",
        "contract": "Contract",
        "state": "ContractState",
        "wallet": "Wallet",
    }
    return documents(schema[key.partition(":")[0]])


def node_answers(
    index: int, chains: Sequence[str], setup: Setup, plan: NodePlan, drawn: Mapping[str, Any]
) -> Answers:
    """What one node answers in the generated cycle: the ``drawn`` documents aligned with
    the fleet and made into answers as its ``plan`` says; the other parts plain."""
    rnd = random.Random(plan.seed)

    def made(key: str, align: Callable[[random.Random, Any], Any], plain: Any) -> Answer:
        if key not in drawn:
            return Answer(encode(plain))
        return make_answer(align(rnd, drawn[key]), plan.plans[key])

    plain_health = {
        "nodeId": node_id(index),
        "network": {"peerId": f"peer-{index}", "networkPeers": ["peer-0"]},
        "blockchains": list(chains),
    }
    health_aligned = partial(_health, index=index, chains=chains)
    answers: Answers = {request_key(["health"]): made("health", health_aligned, plain_health)}
    for at, chain in enumerate(chains):
        plain_status = {"blockHeight": BASE_HEIGHT - index, "councilMembers": list(COUNCIL)}
        status = made(f"status:{at}", _status, plain_status)
        answers[request_key(["blockchains", chain])] = status
        query = (("height", str(CHECKPOINT)),)
        block = made(f"block:{at}", _block, {"hash": HASHES[index % 2]})
        answers[request_key(["blockchains", chain, "blocks"], query)] = block
    for contract in setup.contracts:
        path = ["blockchains", contract.blockchain, "contracts", contract.address]
        plain = {"status": "ACTIVE", "version": 2}
        answers[request_key(path)] = made("contract", _as_is, plain)
        plant = partial(_state, keys=contract.state_keys)
        plain = {"version": 3, "state": {"supply": "42"}}
        answers[request_key([*path, "state"])] = made("state", plant, plain)
    for wallet in setup.wallets:
        key = request_key(["wallets", wallet.address], (("blockchainId", wallet.blockchain),))
        plain = {"enabled": True, "authGroups": {"Wallet": {"read": True}}}
        answers[key] = made("wallet", _as_is, plain)
    return answers


def _as_is(rnd: random.Random, document: Any) -> Any:
    return document


def _health(rnd: random.Random, document: Any, index: int, chains: Sequence[str]) -> Any:
    """A /health answer listing the chains (now and then reordered, repeated or with
    entries that are no chain ids), linked to other nodes' peer ids."""
    document = dict(document)
    if rnd.random() < 0.9:
        listed: list[Any] = list(chains)
        if rnd.random() < 0.25:
            rnd.shuffle(listed)
            extra = ["", 5, None, CHAIN_IDS[0], "\ud800"]
            listed += rnd.sample(extra, rnd.randrange(3))
        document["blockchains"] = listed
    if rnd.random() < 0.5:  # its own key, another member's, or none of the council's
        document["nodeId"] = rnd.choice([node_id(index), COUNCIL[-1], f"id-{index}"])
    if rnd.random() < 0.7:
        network = document.get("network")
        network = dict(network) if isinstance(network, dict) else {}
        network["peerId"] = f"peer-{index}"
        peers = ["peer-0", "peer-1", "peer-2", "elsewhere"]
        network["networkPeers"] = rnd.sample(peers, rnd.randrange(4))
        document["network"] = network
    return document


def _status(rnd: random.Random, document: Any) -> Any:
    """A chain status near the checkpoint, with a council from a small pool."""
    document = dict(document)
    if rnd.random() < 0.75:
        document["blockHeight"] = rnd.randint(CHECKPOINT - 5, BASE_HEIGHT + 5)
    if rnd.random() < 0.6:
        document["councilMembers"] = rnd.sample(COUNCIL, rnd.randint(1, len(COUNCIL)))
    if rnd.random() < 0.5:
        document["syncing"] = False
    if rnd.random() < 0.5:  # the first cycle's session still open, its round risen or not
        sessions = document.get("voteSessions")
        sessions = dict(sessions) if isinstance(sessions, dict) else {}
        session = {**BASE_SESSION, "round": rnd.randint(0, 6), "currentLeader": rnd.choice(COUNCIL)}
        sessions[SESSION] = session
        document["voteSessions"] = sessions
    if rnd.random() < 0.5:  # the settings every node starts with, written another way
        consensus = {**BASE_CONSENSUS}
        consensus["minMembers"] = rnd.choice([3, "3", 3.0, 4])
        consensus["consensusTimeout"] = rnd.choice(["30s", "0.5m", "30000ms", "31s"])
        document["consensus"] = consensus
    return document


def _block(rnd: random.Random, document: Any) -> Any:
    """A block, mostly with a hash from a small pool (nodes agree, or fork)."""
    document = dict(document)
    if rnd.random() < 0.8:
        document[rnd.choice(HASH_FIELDS)] = rnd.choice(HASHES)
    return document


def _state(rnd: random.Random, document: Any, keys: Sequence[str]) -> Any:
    """A contract state with values (of any kind) at some of the watched dotted ``keys``."""
    document = dict(document)
    state = document.get("state")
    state = dict(state) if isinstance(state, dict) else {}
    for key in rnd.sample(list(keys), rnd.randint(0, len(keys))):
        parts = key.split(".")
        place = state
        for part in parts[:-1]:
            inner = place.get(part)
            place[part] = inner = dict(inner) if isinstance(inner, dict) else {}
            place = inner
        place[parts[-1]] = small_json(rnd)
    document["state"] = state
    return document


# --- the exporter, in process ------------------------------------------------------------


class InProcessEngine(Engine):
    """The polling engine without libcurl: each request is answered at once, on the caller's
    thread, from the answers given for its node (404 otherwise), decoded as libcurl hands it
    over; a body over the request's cap fails as libcurl's would. Keeps the requests made."""

    def __init__(self, hosts: Mapping[str, str]) -> None:  # no thread, no curl handles
        self._hosts = dict(hosts)
        self.answers: Mapping[str, Answers] = {}
        self.requests: dict[str, list[Asked]] = {}

    def submit(self, request: Request, done: Done) -> None:
        url = urlsplit(request.url)
        node = self._hosts[str(url.hostname)]
        segments = tuple(unquote(s, errors="strict") for s in url.path[1:].split("/"))
        query = tuple(parse_qsl(url.query, keep_blank_values=True, errors="strict"))
        self.requests.setdefault(node, []).append((segments, query))
        found = self.answers.get(node, {}).get((segments, query))
        if found is None:
            done(Response(404, b'{"error": "not found"}'))
        elif len(found.body) > request.max_bytes:
            done(TransferError(pycurl.E_WRITE_ERROR, "over the cap", over_cap=True))
        else:
            done(Response(found.status, found.body))

    def serve(self, answers: Mapping[str, Answers]) -> None:
        self.answers = answers
        self.requests = {}

    def resize(self, connections: int, max_in_flight: int | None = None) -> None:
        pass

    def close_idle_connections(self) -> None:
        pass

    def connections_opened(self) -> int:
        return 0

    def in_flight(self) -> int:
        return 0

    def close(self, timeout: float = 2.0) -> None:
        pass


class Records(logging.Handler):
    """Keeps the records of the ``ledger_exporter`` logger while installed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        """The records that carry a traceback or an error the exporter did not expect."""
        return [
            f"{r.levelname} {r.getMessage()} {r.exc_info!r}"
            for r in self.records
            if r.exc_info or "Traceback" in r.getMessage()
        ]


@contextmanager
def captured_logs(level: int = logging.ERROR) -> Iterator[Records]:
    """The ``ledger_exporter`` logger's records at ``level`` and above while in the block,
    kept from the root logger (and pytest's capture) meanwhile."""
    logger = logging.getLogger("ledger_exporter")
    handler = Records()
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


@dataclass
class Outcome:
    """A fleet run: each cycle as the oracle sees it, the last snapshot and its exposition
    in both formats, and the records logged meanwhile."""

    cycles: list[Cycle]
    snapshot: Snapshot
    text: bytes
    openmetrics: bytes
    logged: list[str] = field(default_factory=list)


def hand_clocked_poller(config: Config, engine: Engine) -> tuple[Poller, list[float]]:
    """A poller on one hand-moved clock, for both its clocks (so the timestamps are what the
    clock says): set ``clock[0]`` before each cycle."""
    clock = [CLOCKS[0]]
    poller = Poller(
        config,
        lambda snapshot: None,
        monotonic=lambda: clock[0],
        engine=engine,
        wall=lambda: clock[0],
    )
    return poller, clock


def run_in_process(fleet: Fleet) -> Outcome:
    """Both cycles of ``fleet`` through the poller, rendered each time by one writer."""
    config = config_of(fleet.setup)
    engine = InProcessEngine({host(i): name for i, (name, _) in enumerate(fleet.setup.nodes)})
    poller, clock = hand_clocked_poller(config, engine)
    renderer = Renderer()
    cycles: list[Cycle] = []
    with captured_logs() as logs:
        try:
            for at, answers in zip(CLOCKS, fleet.answers, strict=True):
                clock[0] = at
                engine.serve(answers)
                snapshot = poller.run_cycle()
                cycles.append(Cycle(at, answers, engine.requests))
                text = text_format(renderer, snapshot)
        finally:
            poller.stop()
        openmetrics = openmetrics_format(renderer, snapshot) + OPENMETRICS_END
    return Outcome(cycles, snapshot, text, openmetrics, logs.tracebacks())


# --- reading expositions back -------------------------------------------------------------


def samples(exposition: bytes, openmetrics: bool = False) -> dict[Key, float]:
    """Every sample of ``exposition`` by client_python's parser of its format; a series
    written twice fails."""
    parse = openmetrics_families if openmetrics else text_string_to_metric_families
    found: dict[Key, float] = {}
    for family in parse(exposition.decode("utf-8")):
        for sample in family.samples:
            key = (sample.name, labels_of(sample.labels.items()))
            assert key not in found, f"series written twice: {key}"
            found[key] = sample.value
    return found


class MetricsCheck:
    """``promtool check metrics`` over many expositions at once: each one's samples get a
    label ``example`` of their own, every family's samples together under one HELP and
    TYPE. A failing batch is split until the exposition promtool refuses is found."""

    def __init__(self, promtool: Promtool, batch: int = 400) -> None:
        self.promtool = promtool
        self.batch = batch
        self.pending: list[bytes] = []
        self.checked = 0

    def add(self, exposition: bytes) -> None:
        self.pending.append(exposition)
        if len(self.pending) >= self.batch:
            self.flush()

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        if pending:
            problem = self._first_refused(pending)
            assert problem is None, problem
            self.checked += len(pending)

    def _first_refused(self, expositions: list[bytes]) -> str | None:
        error = self._run(merged(expositions))
        if error is None:
            return None
        if len(expositions) == 1:
            return f"promtool refuses:\n{error}\n--- the exposition:\n{expositions[0].decode()}"
        half = len(expositions) // 2
        return self._first_refused(expositions[:half]) or self._first_refused(expositions[half:])

    def _run(self, exposition: bytes) -> str | None:
        result = self.promtool.run("check", "metrics", input=exposition.decode())
        return None if result.returncode == 0 else result.stdout + result.stderr


def merged(expositions: Sequence[bytes]) -> bytes:
    """The text-format ``expositions`` as one: families in order of first appearance, each
    sample line labelled with its exposition's index (its own bytes otherwise untouched)."""
    headers: dict[str, list[bytes]] = {}
    lines: dict[str, list[bytes]] = {}
    for index, exposition in enumerate(expositions):
        family = ""
        for line in exposition.split(b"\n"):
            if not line:
                continue
            if line.startswith(b"# "):
                family = line.split(b" ")[2].decode()
                if family not in headers or len(headers[family]) < 2:
                    headers.setdefault(family, []).append(line)
                continue
            name_end = next((at for at, byte in enumerate(line) if byte in b"{ "), len(line))
            name, rest = line[:name_end], line[name_end:]
            label = b'example="%d"' % index
            labelled = (
                name + b"{" + label + b"," + rest[1:]
                if rest.startswith(b"{")
                else name + b"{" + label + b"}" + rest
            )
            lines.setdefault(family, []).append(labelled)
    out: list[bytes] = []
    for family, header in headers.items():
        out += header
        out += lines.get(family, [])
    return b"\n".join(out) + b"\n"
