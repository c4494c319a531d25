"""One node's poll: /health, then its chains and checkpoint blocks, then its watch list.

Driven entirely by the engine's callbacks: a node's chain requests are sent from the
callback of its /health request, so no thread ever waits on another request. The poll ends
when every part has, or is read as it stands at the cycle's deadline (parts still out count
as timed out). Every request's callback ends its part, even when reading the answer raises
(the part then fails with ``invalid_response``), so a poll never stays unfinished and the
node is asked again next cycle. Used by the polling cycle (:mod:`exporter.poll.cycle`) and by
probes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from exporter.bounds import DEFAULT_BOUNDS, Bounds
from exporter.config.nodes import NodeConfig
from exporter.config.watchlist import WatchConfig
from exporter.model.answers import block_hash_decoder, decode_chain_status
from exporter.model.fields import HealthReading
from exporter.model.identity import Mismatch, check_identity
from exporter.model.readings import read_block_hash, read_chain, read_health
from exporter.model.storage import Shared
from exporter.poll.client import FastDecode, NodeClient, NotSentError, Query, ReadBudget
from exporter.poll.results import ChainResult, FetchError, NodeResult, Reason, as_fetch_error
from exporter.poll.watch_poll import WatchPoll

log = logging.getLogger("ledger_exporter")

#: Extra wait after the deadline for requests that are just finishing their last read.
DEADLINE_GRACE_SECONDS = 0.25
#: CPU time a node's answers may cost to decode and read in one poll: this share of the
#: poll's time, at least MIN_READ_BUDGET_SECONDS (a real answer costs well under 1 ms).
READ_BUDGET_SHARE = 0.05
MIN_READ_BUDGET_SECONDS = 0.25
NO_WATCH = WatchConfig()
#: A node may have at most this share of the engine's request slots in flight at once (and
#: at least MIN_NODE_REQUESTS): a node listing a hundred chains that all hang holds a
#: sixteenth, not all of them, from its first bad cycle on (the suspect rule only throttles
#: a node that timed out the cycle before, and one that hangs every other cycle escapes it).
NODE_SHARE_OF_SLOTS = 16
MIN_NODE_REQUESTS = 4


def requests_per_node(engine_slots: int) -> int:
    """How many requests one node may have in flight, for an engine of ``engine_slots``."""
    return max(MIN_NODE_REQUESTS, engine_slots // NODE_SHARE_OF_SLOTS)


@dataclass(frozen=True)
class BlockPlan:
    """Which block to ask a node for per chain this cycle (the checkpoint), which height read
    before to ask again (``rechecks``: exporter.poll.block_hashes), and where a block keeps
    its hash. Empty when block checks are off or no checkpoint is known yet."""

    heights: Mapping[str, int] = field(default_factory=dict)
    hash_fields: tuple[str, ...] = ()
    rechecks: Mapping[str, int] = field(default_factory=dict)


class Countdown:
    """Set once ``count`` polls have ended: one Event for a whole cycle, not one per node (an
    Event is a Condition and a lock, about half a kilobyte each)."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()
        self._zero = threading.Event()
        if count <= 0:
            self._zero.set()

    def count_down(self) -> None:
        """One more poll has ended."""
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._zero.set()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every poll; True if they all ended."""
        return self._zero.wait(timeout)


class Part(Protocol):
    """The callback of one request of a poll: ends its part (the health, a chain's status or
    block, a watch request) with the answer, or, when that raised, with ``fail``."""

    def __call__(self, document: Any, error: FetchError | None) -> None: ...

    @property
    def what(self) -> str:
        """What the request asks for, as an error names it."""
        ...

    def fail(self, error: FetchError) -> None:
        """End the part with ``error``; must not raise."""
        ...


def _nothing() -> None:
    pass


class NodePoll:
    """One node's poll (in a cycle, or for one probe): /health, then each chain (and its
    checkpoint block, sent alongside, so no extra round trip), driven by the engine's
    callbacks."""

    def __init__(
        self,
        node: NodeConfig,
        client: NodeClient,
        max_chains: int,
        blocks: BlockPlan,
        *,
        watch: WatchConfig = NO_WATCH,
        shared: Shared | None = None,
        ended: Callable[[], None] = _nothing,
        bounds: Bounds = DEFAULT_BOUNDS,
        max_in_flight: int = MIN_NODE_REQUESTS,
    ) -> None:
        self.node = node
        self._shared = shared
        self._ended = ended
        self._bounds = bounds
        self._watch = WatchPoll(watch, node.name, bounds)
        self._chains_done = False
        self._client = client
        self._max_chains = max_chains
        self._blocks = blocks
        self._unpolled = 0
        self._lock = threading.Lock()
        self._health_error: FetchError | None = None
        self._health: HealthReading | None = None
        self._mismatch: Mismatch | None = None  # /health answered as another node
        self._chains: dict[str, ChainResult] = {}
        self._chain_parts_left = 0  # chain statuses and blocks asked for, not yet ended
        self._started = 0.0
        self._finished: float | None = None
        self._in_flight = 0
        self._max_in_flight = max(1, max_in_flight)
        # requests held back by max_in_flight, the next one last: a list, not a deque (760
        # bytes each, three quarters of a MiB at 1000 nodes)
        self._waiting: list[_Waiting] = []
        self._sending = False  # _send_waiting is running (a callback it caused calls it again)
        self._ran_out_of_time = False
        self._deadline = 0.0
        self._budget = ReadBudget(MIN_READ_BUDGET_SECONDS)

    @property
    def finished(self) -> bool:
        """Every part of the poll has ended (``ended`` was called)."""
        with self._lock:
            return self._finished is not None

    @property
    def in_flight(self) -> int:
        """Requests to this node sent and not yet ended."""
        with self._lock:
            return self._in_flight

    @property
    def blamed_for_timeout(self) -> bool:
        """A request to this node ran out of time, or is still out: not one merely queued."""
        with self._lock:
            return self._ran_out_of_time or self._in_flight > 0

    def _ask(self, segments: list[str], done: Part, query: Query = ()) -> None:
        """Send a request as the node's share of slots allows, counting it in flight and
        whether it timed out."""
        with self._lock:
            self._waiting.insert(0, _Waiting(segments, _Counted(self, done), query, None))
        self._send_waiting()

    def _send_waiting(self) -> None:
        """``client.get`` the held-back requests while fewer than ``max_in_flight`` are out.
        A request that cannot be sent (past the deadline) ends at once, and its callback
        calls this again: the call already sending goes on, so a hundred chains are sent in
        a loop, not a recursion. Called on the engine's thread, and by ``start`` on the
        cycle's (or a probe's): a slot freed on another thread meanwhile is seen at the
        next check, made under the lock that also clears ``_sending``."""
        with self._lock:
            if self._sending:
                return
            self._sending = True
        get, deadline, budget = self._client.get, self._deadline, self._budget
        try:
            while True:
                with self._lock:
                    if not self._waiting or self._in_flight >= self._max_in_flight:
                        self._sending = False
                        return
                    waiting = self._waiting.pop()
                    self._in_flight += 1
                try:
                    get(waiting.segments, deadline, waiting.done, waiting.query, budget,
                        fast=waiting.fast)  # fmt: skip
                except Exception as failure:  # the client ends requests, never raises: a bug
                    waiting.done(None, as_fetch_error(failure, waiting.done.what))
        except BaseException:  # never a poll that no call sends for again
            with self._lock:
                self._sending = False
            raise

    def request_ended(self, error: FetchError | None) -> None:
        """A request to this node has ended (for the in-flight and timed-out counts); one
        held back may go out."""
        with self._lock:
            self._count_ended(error)
            held = bool(self._waiting)
        if held:
            self._send_waiting()

    def _count_ended(self, error: FetchError | None) -> None:
        """request_ended, the lock held."""
        self._in_flight -= 1
        if error is not None and error.reason is Reason.TIMEOUT:
            # one that only waited in the queue is not the node's fault
            self._ran_out_of_time |= not isinstance(error, NotSentError)

    def start(self, deadline: float, started: float) -> None:
        self._started, self._deadline = started, deadline
        share = (deadline - started) * READ_BUDGET_SHARE
        self._budget = ReadBudget(max(MIN_READ_BUDGET_SECONDS, share))
        self._ask(["health"], _HealthAnswer(self))

    def health_answered(self, document: Any, error: FetchError | None) -> None:
        """Read /health, then send the chain, block and watch requests it calls for."""
        if error is not None:  # not raised here: see chain_answered
            self.health_failed(as_fetch_error(error, "/health"))
            return
        try:
            health = read_health(document, self._bounds, self._shared)
            mismatch = check_identity(self.node.expect, health)
        except Exception as failure:
            self.health_failed(as_fetch_error(failure, "/health"))
            return
        if mismatch is not None:  # not trusted: nothing more is asked, nothing it said kept
            with self._lock:
                self._mismatch = mismatch
            self.health_failed(FetchError(Reason.IDENTITY_MISMATCH, mismatch.text()))
            return
        try:
            offered = _expected(self.node, health.blockchain_ids)
            listed = self.node.blockchains or offered[: self._max_chains]
            chains = tuple(dict.fromkeys(listed))  # a chain listed twice is asked once
            watch = self._watch.plan(health.blockchain_ids)
        except Exception as failure:
            self.health_failed(as_fetch_error(failure, "/health"))
            return
        if not self.node.blockchains:
            self._unpolled = len(offered) - len(chains)
        heights, rechecks = self._blocks.heights, self._blocks.rechecks
        with self._lock:
            self._health = health
            self._chains = {
                chain: ChainResult(
                    chain, block_height=heights.get(chain), recheck_height=rechecks.get(chain)
                )
                for chain in chains
            }
            blocks = sum(
                (result.block_height is not None) + (result.recheck_height is not None)
                for result in self._chains.values()
            )
            self._chain_parts_left = len(self._chains) + blocks
        if not chains:
            self._finish()
        held = self._chain_requests(chains, heights, rechecks)
        for request in watch:  # right after the chains', under the same deadline
            read = self._watch.reader(request, self._watch_ended)
            held.append(_Waiting(list(request.segments), _Counted(self, read), request.query))
        held.reverse()  # the first to go out last
        with self._lock:
            self._waiting[:0] = held
        self._send_waiting()

    def _chain_requests(
        self, chains: tuple[str, ...], heights: Mapping[str, int], rechecks: Mapping[str, int]
    ) -> list[_Waiting]:
        """Each chain's status request and, where planned, its checkpoint block's (and a block
        read before, asked again), to go out as the node's share of the engine's slots
        allows."""
        # the fast path reads the parts alike on every node once a cycle: with ``shared`` only
        fast = None if self._shared is None else decode_chain_status
        fast_block = block_hash_decoder(self._blocks.hash_fields) if heights else None
        held = []
        for chain in chains:
            status = _ChainAnswer(self, chain, block=False)
            held.append(_Waiting(["blockchains", chain], status, (), fast))
            if chain in heights:
                query = (("height", str(heights[chain])),)
                block = _ChainAnswer(self, chain, block=True)
                held.append(_Waiting(["blockchains", chain, "blocks"], block, query, fast_block))
            if chain in rechecks:
                query = (("height", str(rechecks[chain])),)
                again = _ChainAnswer(self, chain, block=True, recheck=True)
                held.append(_Waiting(["blockchains", chain, "blocks"], again, query, fast_block))
        return held

    def health_failed(self, error: FetchError) -> None:
        """/health could not be read (or what it calls for could not be planned): the node is
        down, and the poll ends now, whatever was already sent (its answers are ignored)."""
        with self._lock:
            self._health_error = error
            self._waiting.clear()  # nothing more is asked of a node that is down
        self._watch.abandon(error)
        self._finish()

    def chain_answered(self, answer: _ChainAnswer, document: Any, error: FetchError | None) -> None:
        """The request of ``answer`` ended: count it, and keep its chain's status (or, for a
        block, its checkpoint block hash) or its error, ending the chain part once every
        chain request has; all under one lock round, as this runs for most requests."""
        value: Any = None
        ended_as = error
        if error is not None:
            # Not raised: raising it here would put this frame in its traceback while the
            # callers' frames hold it, a reference cycle (with the poll and the refused body)
            # that only the cyclic GC frees, and tune_collector runs that seldom.
            error = as_fetch_error(error, answer.what)
        else:
            try:
                if answer.block:
                    value = read_block_hash(document, self._blocks.hash_fields)
                else:
                    value = read_chain(document, self._shared, self._bounds)
            except Exception as failure:
                error = as_fetch_error(failure, answer.what)
        self._chain_ended(answer, value, error, ended_as)

    def chain_failed(
        self, answer: _ChainAnswer, error: FetchError, ended_as: FetchError | None
    ) -> None:
        """End ``answer``'s part with ``error`` (chain_answered raised), counting the request
        ended with ``ended_as`` unless chain_answered did; must not raise."""
        self._chain_ended(answer, None, error, ended_as)

    def _chain_ended(
        self,
        answer: _ChainAnswer,
        value: Any,
        error: FetchError | None,
        ended_as: FetchError | None,
    ) -> None:
        """Count ``answer``'s request ended (once; ``ended_as``: the error it ended with) and
        end its part with ``value`` or ``error`` unless it already ended."""
        with self._lock:
            if not answer.counted:
                answer.counted = True
                self._count_ended(ended_as)
            result = self._chains[answer.chain]
            if answer.recheck:
                ended = result.recheck_hash is not None or result.recheck_error is not None
                result.recheck_hash, result.recheck_error = value, error
            elif answer.block:
                ended = result.block_hash is not None or result.block_error is not None
                result.block_hash, result.block_error = value, error
            else:
                ended = result.reading is not None or result.error is not None
                result.reading, result.error = value, error
            self._chain_parts_left -= not ended  # counted, not every chain looked at again
            finished = self._chain_parts_left == 0
            held = bool(self._waiting)
        if held:
            self._send_waiting()
        if finished:
            self._finish()

    def _watch_ended(self) -> None:
        self._finish(chains=False)

    def _finish(self, chains: bool = True) -> None:
        """Mark the chain part (or one watch request) ended; done once every part has."""
        with self._lock:
            self._chains_done |= chains
            if not self._chains_done or self._watch.pending or self._finished is not None:
                return
            self._finished = time.monotonic()
        self._ended()

    def result(self, now: float) -> NodeResult:
        """What is known at ``now`` (``time.monotonic()``, as the poll's start: the duration
        is their difference); parts still outstanding count as timed out."""
        with self._lock:
            late = FetchError(Reason.TIMEOUT, "no answer before the cycle's deadline")
            health_error = self._health_error
            if self._health is None and health_error is None:
                health_error = late
            chains = [_ended(c, late) for c in self._chains.values()]
            end = self._finished if self._finished is not None else now
            watch = self._watch.results(late)
            mismatch = self._mismatch
        if health_error is not None:
            failed = failed_node(self.node, health_error, end - self._started)
            return failed if mismatch is None else replace(failed, mismatch=mismatch)
        return NodeResult(
            self.node,
            self._health,
            None,
            chains,
            end - self._started,
            self._unpolled,
            watch,
            transport=self._client.transport.status(),
        )


def _expected(node: NodeConfig, listed: tuple[str, ...]) -> tuple[str, ...]:
    """The chains of ``listed`` the node is to be polled for: where its
    ``expect.blockchains`` is set, only those (the others are counted in
    ``ledger_node_unexpected_blockchains``, never read: a node listing chains of its own
    costs no request for them)."""
    expect = node.expect
    if expect is None or not expect.blockchains:
        return listed
    expected = frozenset(expect.blockchains)
    return tuple(chain for chain in listed if chain in expected)


def _ended(chain: ChainResult, late: FetchError) -> ChainResult:
    """``chain`` as the cycle reports it: a part still out failed with ``late``. A chain whose
    parts all ended is itself (no request of it can end again), not a copy."""
    status_out = chain.reading is None and chain.error is None
    block_out = chain.block_height is not None and chain.block_hash is None
    recheck_out = chain.recheck_height is not None and chain.recheck_hash is None
    if (
        not status_out
        and not (block_out and chain.block_error is None)
        and not (recheck_out and chain.recheck_error is None)
    ):
        return chain
    return replace(
        chain,
        error=chain.error or (None if chain.reading else late),
        block_error=chain.block_error
        or (None if chain.block_hash or chain.block_height is None else late),
        recheck_error=chain.recheck_error
        or (None if chain.recheck_hash or chain.recheck_height is None else late),
    )


class _Waiting(NamedTuple):
    """A request held back until the node has a free share of the engine's slots."""

    segments: list[str]
    done: _Counted | _ChainAnswer
    query: Query = ()
    fast: FastDecode | None = None


class _Counted:
    """A request's callback that first tells its poll the request ended, then ends its part:
    with ``fail`` if reading the answer raised, so no exception leaves a part unfinished.
    Slotted objects, not closures, since thousands of requests wait in the engine's queue."""

    __slots__ = ("_counted", "_done", "_poll")

    def __init__(self, poll: NodePoll, done: Part) -> None:
        self._poll, self._done = poll, done
        self._counted = False  # the poll has counted the request ended (once, whatever calls)

    @property
    def what(self) -> str:
        """What the request asks for, as an error names it."""
        return self._done.what

    def __call__(self, document: Any, error: FetchError | None) -> None:
        if self._counted:  # a client.get that called back and then raised all the same
            return
        self._counted = True
        self._poll.request_ended(error)
        try:
            self._done(document, error)
        except Exception as failure:
            self._done.fail(as_fetch_error(failure, self._done.what))


class _HealthAnswer:
    """The answer to a poll's /health request."""

    __slots__ = ("_poll",)
    what = "/health"

    def __init__(self, poll: NodePoll) -> None:
        self._poll = poll

    def __call__(self, document: Any, error: FetchError | None) -> None:
        self._poll.health_answered(document, error)

    def fail(self, error: FetchError) -> None:
        self._poll.health_failed(error)


class _ChainAnswer:
    """The callback of a chain status or checkpoint block request: counts the request ended
    and ends its part in one lock round (:meth:`NodePoll.chain_answered`), or, should that
    raise, ends the part with the error, so no exception leaves a part unfinished."""

    __slots__ = ("_poll", "block", "chain", "counted", "recheck")

    def __init__(self, poll: NodePoll, chain: str, block: bool, recheck: bool = False) -> None:
        self._poll, self.chain, self.block, self.recheck = poll, chain, block, recheck
        self.counted = False  # the poll has counted the request ended

    @property
    def what(self) -> str:
        """What the request asks for, as an error names it."""
        return "the block" if self.block else "the chain status"

    def __call__(self, document: Any, error: FetchError | None) -> None:
        try:
            self._poll.chain_answered(self, document, error)
        except Exception as failure:
            self._poll.chain_failed(self, as_fetch_error(failure, self.what), error)


def failed_node(node: NodeConfig, error: FetchError, duration: float) -> NodeResult:
    """A node whose /health failed: configured chains are down too, but were not requested."""
    why = "the node's /health could not be read"
    if error.reason is Reason.IDENTITY_MISMATCH:
        why = "not asked: the node answered as another node"
    chain_error = FetchError(error.reason, why)
    chains = [ChainResult(c, None, chain_error, requested=False) for c in node.blockchains or ()]
    return NodeResult(node, None, error, chains, duration)
