"""The polling loop: every node and chain read concurrently, once per interval, never overlapping.

Every request goes through one :class:`~exporter.poll.engine.Engine` (one thread, libcurl's multi
interface). A node's chain requests are sent from the callback of its /health request, so no
thread ever waits on another request. Every request shares the cycle's deadline
(``scrape_timeout``), and a node still unfinished then is reported with what it has so far:
a slow or dead node never delays the others or the snapshot.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from exporter import __version__
from exporter.config.exporter import Config
from exporter.config.maintenance import MaintenanceEntry
from exporter.config.nodes import NodeConfig
from exporter.model.network import Listing, NetworkView, network_view, observe
from exporter.model.snapshot import CycleStage, NodeStatus, Snapshot, wall_offset
from exporter.model.storage import Shared
from exporter.model.watch_readings import UnmatchedEntry, WatchStatus, unmatched_entries
from exporter.poll.client import NodeClient
from exporter.poll.cycle_failures import CycleFailures
from exporter.poll.engine import Engine
from exporter.poll.history import History
from exporter.poll.node import (
    DEADLINE_GRACE_SECONDS,
    BlockPlan,
    Countdown,
    NodePoll,
    failed_node,
    requests_per_node,
)
from exporter.poll.results import FetchError, NodeResult, Reason, exporter_failure
from exporter.poll.state import StateFile
from exporter.poll.watch_poll import watch_status

log = logging.getLogger("ledger_exporter")

#: The longest a node's ``Retry-After`` holds its polls back: a node in maintenance that asks
#: for an hour is asked again after five minutes (the usual ``for`` of an alert), so the
#: exporter notices its return in time, and a wrong or hostile header cannot silence a node
#: for good.
MAX_RETRY_AFTER_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class _BackOff:
    """A node that asked for no request before ``until`` (monotonic): it is not polled
    until then and reads as down with ``error`` (its answer, and when it is asked again)."""

    until: float
    error: FetchError


#: How many scrape intervals (plus one scrape_timeout) a snapshot may grow old before it is
#: stale (/-/ready fails, its node series are dropped): a snapshot is normally replaced
#: within one interval plus one timeout of its cycle's end (the next cycle starts an interval
#: after this one did and ends by its deadline), so two cycles in a row may fail or run late
#: without flapping readiness, and the third makes it stale.
STALE_AFTER_INTERVALS = 3


def stale_after(config: Config) -> float:
    """Seconds after its cycle's end past which a snapshot of ``config``'s cycles is stale."""
    return STALE_AFTER_INTERVALS * config.scrape_interval + config.scrape_timeout


#: How far the wall clock may move against the monotonic clock before the exported
#: timestamps are re-based on it: a step (NTP, an operator) moves it that far; reading the
#: two clocks a moment apart on a loaded machine does not.
WALL_STEP_SECONDS = 1.0


@dataclass(frozen=True)
class _Resources:
    """The per-node clients built for one configuration (the engine outlives them)."""

    config: Config
    clients: dict[str, NodeClient]


def new_engine(config: Config) -> Engine:
    """The engine sized for ``config``: its in-flight limit and one kept-alive connection per
    node host."""
    return Engine(config.max_concurrency, f"ledger-exporter/{__version__}", len(_hosts(config)))


#: Where connections go: scheme, host name and port (no credentials).
Host = tuple[str, str | None, int | None]


def _base_url(node: NodeConfig) -> str:
    """The base URL a node's client sends to (as ``NodeClient.url_for(())`` gives it)."""
    return node.url if node.url.endswith("/") else node.url + "/"


def _hosts(config: Config) -> frozenset[Host]:
    """The node hosts connections go to: scheme, host and port (no credentials)."""
    urls = (urlsplit(node.url) for node in config.nodes)
    return frozenset((url.scheme, url.hostname, url.port) for url in urls)


def _expected_chains(node: NodeConfig) -> frozenset[str] | None:
    """The chains a node's ``expect.blockchains`` names; None when not set."""
    expect = node.expect
    return frozenset(expect.blockchains) if expect is not None and expect.blockchains else None


def _logged(entry: MaintenanceEntry) -> dict[str, str]:
    """A maintenance entry's log fields."""
    what = {"node": entry.node} if entry.node else {"blockchain": entry.blockchain}
    return {**what, "until": entry.until_text, "reason": entry.reason}


class Poller:
    """Runs polling cycles over the configured nodes and hands each snapshot to ``publish``.

    Every age is measured on ``monotonic`` (``time.monotonic()``: what the history and the
    snapshot keep); ``wall`` (``time.time()``) serves only for the timestamps exported and
    the state file, through the snapshot's ``wall_offset``, so a wall-clock step neither
    raises nor hides an age."""

    def __init__(
        self,
        config: Config,
        publish: Callable[[Snapshot], None],
        monotonic: Callable[[], float] = time.monotonic,
        engine: Engine | None = None,
        state: StateFile | None = None,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._publish = publish
        self._monotonic = monotonic
        self._wall = wall
        self._wall_offset = wall_offset(wall(), monotonic())  # re-based when the clock steps
        self._state = state  # the memory kept across restarts, if a file was given
        # read by the first cycle, on the poll thread: a file on a hung mount or a slow disk
        # holds back readiness, never the start or the listeners (and nothing is written
        # before it was read)
        self._unread_state = state
        self._history = History(None, self._wall_offset)
        self._shared = Shared()  # one copy of the readings' values repeated across nodes
        self._owns_engine = engine is None
        self._engine = engine or new_engine(config)
        self._lock = threading.Lock()  # guards the hand-over of a reloaded config
        self._pending_config: Config | None = None
        self._next_early_cycle = 0.0  # a reload may start a cycle at once from then on
        self._resources = self._build(config, _hosts(config), {})
        self._running: dict[str, NodePoll] = {}
        self._timed_out: set[str] = set()
        self._checkpoints: dict[str, int] = {}  # per chain, from the last cycle's heights
        self._block_heights: dict[str, dict[str, int]] = {}  # per node: blocks it can have
        self._listed: dict[str, frozenset[str]] = {}  # per node: the watched chains it lists
        self._unmatched: tuple[UnmatchedEntry, ...] = ()  # watch entries none of them lists
        self._maintenance: tuple[MaintenanceEntry, ...] = ()  # the entries applying, as logged
        # each entry that has started applying: its end on the monotonic clock, fixed then,
        # so a wall-clock step neither extends nor ends it (kept while the entry is configured)
        self._windows: dict[MaintenanceEntry, float] = {}
        self._chains_listed: dict[str, frozenset[str]] = {}  # per node: maintained chains listed
        self._unmatched_maintenance: tuple[str, ...] = ()  # chain entries no node lists
        self._backing_off: dict[str, _BackOff] = {}  # nodes whose Retry-After holds
        self._retry_afters: dict[str, int] = {}  # per node: Retry-After answers honoured
        self._failures = CycleFailures()  # what the cycles caught, by stage
        self._last: Snapshot | None = None  # the last snapshot published
        self._wake = threading.Event()
        self._stopped = threading.Event()

    @property
    def config(self) -> Config:
        """The configuration the next cycle polls with (a pending reload included)."""
        with self._lock:
            return self._pending_config or self._resources.config

    def apply(self, config: Config) -> None:
        """Use ``config`` from the next cycle on. The first reload in a ``scrape_interval``
        starts that cycle now; later ones wait for the regular cycle, so a burst of reloads
        costs at most one extra cycle per interval (and the nodes one extra poll)."""
        now = time.monotonic()
        with self._lock:
            self._pending_config = config
            if now < self._next_early_cycle:
                return
            self._next_early_cycle = now + self._resources.config.scrape_interval
        self._wake.set()

    def _build(
        self, config: Config, old_hosts: frozenset[Host], kept: dict[str, NodeClient]
    ) -> _Resources:
        """The clients for ``config`` (``kept``: the last config's); the engine resized, and
        its connections closed once idle when a host in ``old_hosts`` is no longer
        configured."""
        hosts = _hosts(config)
        self._engine.resize(len(hosts), config.max_concurrency)
        if old_hosts - hosts:
            self._engine.close_idle_connections()
        # each node's last handshake and phases outlive a reload that keeps its name and URL
        # (its kept-alive connection makes no new handshake to read again)
        clients = {}
        for node in config.nodes:
            old = kept.get(node.name)
            same = old is not None and old.url_for(()) == _base_url(node)
            record = old.transport if old is not None and same else None
            client = NodeClient(self._engine, node, config.max_response_bytes, transport=record)
            clients[node.name] = client
        return _Resources(config, clients)

    def _take_pending_config(self) -> _Resources:
        """The resources for this cycle, rebuilt when a reload is pending. Polls still out
        from the old config stay in ``_running``: still guarded, still counted."""
        with self._lock:
            config, self._pending_config = self._pending_config, None
            if config is not None:
                old = self._resources
                self._resources = self._build(config, _hosts(old.config), old.clients)
            return self._resources

    def _start_polls(
        self, resources: _Resources, deadline: float, started: float
    ) -> tuple[list[NodePoll], list[NodeConfig], Countdown]:
        """Start a poll of every node whose earlier poll has ended (the others are ``stuck``);
        the countdown reaches zero once all the started polls have ended."""
        config = resources.config
        self._running = {name: p for name, p in self._running.items() if not p.finished}
        stuck = [node for node in config.nodes if node.name in self._running]
        resting = self._backing_off  # not asked: their Retry-After holds (run_cycle)
        # Nodes that timed out last cycle go last and get at most a quarter of the engine's
        # slots: however many hang, they cannot hold the slots the healthy nodes need.
        suspects = self._timed_out
        ready = [n for n in config.nodes if n.name not in self._running and n.name not in resting]
        ready.sort(key=lambda node: node.name in suspects)
        countdown = Countdown(len(ready))
        polls: list[NodePoll] = []
        for node in ready:
            client = resources.clients[node.name]
            if node.name in suspects:
                client = client.as_suspect()
            poll = NodePoll(
                node,
                client,
                config.max_blockchains_per_node,
                self._block_plan(node),
                watch=config.watch,
                shared=self._shared,
                ended=countdown.count_down,
                bounds=config.bounds,
                max_in_flight=requests_per_node(config.max_concurrency),
            )
            self._running[node.name] = poll
            poll.start(deadline, started)
            polls.append(poll)
        return polls, stuck, countdown

    def _block_plan(self, node: NodeConfig) -> BlockPlan:
        """The checkpoint blocks to ask ``node`` for: only where block checks are on and the
        node had reached the checkpoint last cycle (a block it cannot have is no error); and,
        one cycle in a few, a block it answered before, asked again (block_hashes.py)."""
        checks = self._resources.config.network_checks
        if checks.checkpoint_depth == 0:
            return BlockPlan()
        heights = self._block_heights.get(node.name, {})
        recheck = self._history.recheck
        rechecks = {
            chain: again
            for chain, checkpoint in heights.items()
            if (again := recheck(node.name, chain, checkpoint)) is not None
        }
        return BlockPlan(heights, checks.block_hash_fields, rechecks)

    def _network(self, results: Sequence[NodeResult], nodes: Sequence[NodeStatus]) -> NetworkView:
        """Compare the up nodes, and plan the next cycle's checkpoints from their heights."""
        observed = [
            observe(
                r.node.name, r.health, ((c.blockchain, c.reading, c.block_hash) for c in r.chains)
            )
            for r in results
            if r.health is not None
        ]
        listings = [
            Listing(r.node.name, r.health.blockchain_ids, _expected_chains(r.node))
            for r in results
            if r.health is not None
        ]
        depth = self._resources.config.network_checks.checkpoint_depth
        keys = self._history.node_keys()
        view = network_view(observed, self._checkpoints, depth, keys, listings)
        self._checkpoints = {
            c.blockchain: c.next_checkpoint for c in view.chains if c.next_checkpoint is not None
        }
        self._block_heights = self._plan_blocks(nodes)
        return view

    def _plan_blocks(self, nodes: Sequence[NodeStatus]) -> dict[str, dict[str, int]]:
        """Per node, the checkpoint of each chain it has reached (its block is asked for next
        cycle). Nodes that reached the same chains share one plan (read only): nearly all do,
        so a cycle makes a few dicts, not one a node."""
        checkpoints = self._checkpoints
        plans: dict[tuple[str, ...], dict[str, int]] = {}
        planned = {}
        for node in nodes:
            reached = tuple(
                [
                    chain.blockchain
                    for chain in node.chains
                    if (checkpoint := checkpoints.get(chain.blockchain)) is not None
                    and chain.reading is not None
                    and (height := chain.reading.height) is not None
                    and height >= checkpoint
                ]
            )
            plan = plans.get(reached)
            if plan is None:
                plan = plans[reached] = {chain: checkpoints[chain] for chain in reached}
            planned[node.name] = plan
        return planned

    def run_cycle(self) -> Snapshot:
        """Poll every node once, fold the results into the history, and return the snapshot."""
        self._failures.new_cycle()
        resources = self._take_pending_config()
        state = self._unread_state
        if state is not None:
            restored = state.load(resources.config, self._wall())  # on the wall clock
            self._history = History(restored, self._wall_offset)
            self._unread_state = None  # only now may the memory be written
        started = time.monotonic()
        deadline = started + resources.config.scrape_timeout
        self._shared.clear()
        # nodes whose Retry-After still holds are not asked this cycle (monotonic clock)
        resting = {n: held for n, held in self._backing_off.items() if held.until > started}
        self._backing_off = resting
        polls, stuck, countdown = self._start_polls(resources, deadline, started)
        countdown.wait(max(0.0, deadline + DEADLINE_GRACE_SECONDS - time.monotonic()))
        ended = time.monotonic()
        hung = FetchError(Reason.TIMEOUT, "the previous poll of this node has not ended yet")
        results = [self._result(poll, ended) for poll in polls]
        results += [failed_node(node, hung, ended - started) for node in stuck]
        self._back_off(polls, results, resources.config, ended)
        unasked = {node.name for node in stuck}
        results += [
            replace(failed_node(node, resting[node.name].error, 0.0), asked=False)
            for node in resources.config.nodes
            if node.name in resting and node.name not in unasked
        ]
        self._shared.clear()  # the readings keep what they share; the keys need not wait
        order = {node.name: index for index, node in enumerate(resources.config.nodes)}
        results.sort(key=lambda result: order[result.node.name])
        self._timed_out = {poll.node.name for poll in polls if poll.blamed_for_timeout}
        self._timed_out |= {node.name for node in stuck}
        # only polls still out are kept (to guard and count them); ended ones free their results
        self._running = {name: p for name, p in self._running.items() if not p.finished}
        now_mono, now_wall = self._monotonic(), self._wall()  # read together: one moment
        failures = self._failures
        nodes = self._history.record(
            results,
            now_mono,
            resources.config.bounds,
            lambda name, error: failures.note(CycleStage.NODE, name, error),
        )
        if self._retry_afters:  # few nodes, if any
            counts = self._retry_afters
            nodes = tuple(
                replace(n, retry_afters=counts[n.name]) if n.name in counts else n for n in nodes
            )
        network = failures.guarded(
            CycleStage.NETWORK, "", lambda: self._network(results, nodes), NetworkView
        )
        watch = failures.guarded(
            CycleStage.WATCH, "", lambda: self._watch_status(results, resources.config), WatchStatus
        )
        probing = resources.config.probe is not None
        maintenance = self._maintenance_at(resources.config, now_wall, now_mono)
        failures.guarded(
            CycleStage.MAINTENANCE,
            "",
            lambda: self._check_maintained_chains(results, resources.config),
            lambda: None,
        )
        return Snapshot(
            nodes,
            ended - started,
            now_mono,
            cycle_timeout=resources.config.scrape_timeout,
            state_file_write_failures=None if self._state is None else self._state.write_failures,
            network=network,
            watch=watch,
            probe_mode=probing,
            wall_offset=self._rebase(wall_offset(now_wall, now_mono)),
            maintenance=maintenance,
            cycle_failures=failures.counts(),
            stale_after=stale_after(resources.config),
        )

    def _result(self, poll: NodePoll, ended: float) -> NodeResult:
        """The poll's result, or the node as down (not asked: no scrape error counted) when
        reading it raises: one node's failure is that node's alone."""
        try:
            return poll.result(ended)
        except Exception as error:
            self._failures.note(CycleStage.NODE, poll.node.name, error)
            failed = failed_node(poll.node, exporter_failure(type(error).__name__), 0.0)
            return replace(failed, asked=False)

    def _maintenance_at(
        self, config: Config, wall: float, mono: float
    ) -> tuple[MaintenanceEntry, ...]:
        """The maintenance entries that apply at this cycle's end (``wall`` and ``mono``, read
        together), each start and end logged once: a reload adds or removes one, or its
        ``until`` passes. An entry starts when the wall clock is before its ``until``; from
        then on its end is kept on the monotonic clock (``until`` less the wall time then),
        so a wall-clock step (logged by :meth:`_rebase`) neither extends nor ends it."""
        windows: dict[MaintenanceEntry, float] = {}
        applying = tuple(
            entry for entry in config.maintenance if self._applies(entry, wall, mono, windows)
        )
        self._windows = windows
        if applying != self._maintenance:
            for entry in (entry for entry in self._maintenance if entry not in applying):
                log.info("maintenance ended", extra={"fields": _logged(entry)})
            for entry in applying:
                if entry not in self._maintenance:
                    log.info("maintenance applies", extra={"fields": _logged(entry)})
            self._maintenance = applying
        return applying

    def _applies(
        self,
        entry: MaintenanceEntry,
        wall: float,
        mono: float,
        windows: dict[MaintenanceEntry, float],
    ) -> bool:
        """Whether ``entry`` applies now, its window noted in ``windows`` once started; an
        entry that raises does not apply, this cycle."""

        def applies() -> bool:
            end = self._windows.get(entry)
            if end is None:
                if not entry.applies_at(wall):
                    return False
                end = mono + (entry.until - wall)  # the window's end, on the monotonic clock
            windows[entry] = end
            return mono < end

        subject = entry.node or entry.blockchain
        return self._failures.guarded(CycleStage.MAINTENANCE, subject, applies, lambda: False)

    def _check_maintained_chains(self, results: list[NodeResult], config: Config) -> None:
        """Warn of the chain entries of ``maintenance`` whose chain no polled node lists (each
        node's last /health listing counts while it is down), as of unmatched watch entries:
        once when found, and on every change after. Such an entry holds nothing back."""
        wanted = frozenset(e.blockchain for e in config.maintenance if e.blockchain)
        names = [node.name for node in config.nodes]
        listed = {n: self._chains_listed[n] for n in names if n in self._chains_listed}
        for result in results if wanted else ():
            if result.health is not None:
                listed[result.node.name] = wanted.intersection(result.health.blockchain_ids)
        self._chains_listed = listed
        seen = frozenset().union(*listed.values()) if listed else frozenset()
        unmatched = tuple(sorted(wanted - seen)) if listed else ()
        if unmatched == self._unmatched_maintenance:
            return
        if unmatched:
            log.warning(
                "maintenance entries on a blockchain no polled node lists: they hold nothing"
                " back (check maintenance in the config)",
                extra={"fields": {"count": len(unmatched), "blockchains": ", ".join(unmatched)}},
            )
        else:
            log.info("every maintenance entry's blockchain is listed by a polled node now")
        self._unmatched_maintenance = unmatched

    def _watch_status(self, results: list[NodeResult], config: Config) -> WatchStatus:
        """The cycle's watched objects, and the watch entries whose chain no polled node
        lists (each node's last /health listing counts while it is down), logged when they
        change: at the first cycle that finds any, and on every change after."""
        status = watch_status(results)
        watch = config.watch
        watched = frozenset(e.blockchain for e in watch.contracts) | frozenset(
            e.blockchain for e in watch.wallets
        )
        names = [node.name for node in config.nodes]
        listed = {name: self._listed[name] for name in names if name in self._listed}
        for result in results if watched else ():
            if result.health is not None:  # only the watched chains are kept
                listed[result.node.name] = watched.intersection(result.health.blockchain_ids)
        self._listed = listed
        unmatched = unmatched_entries(config.watch, names, listed)
        if unmatched != self._unmatched:
            if unmatched:
                shown = "; ".join(str(entry) for entry in unmatched)
                log.warning(
                    "watch entries on a blockchain no polled node lists: never asked, "
                    "nothing exported for them (check watch in the config)",
                    extra={"fields": {"count": len(unmatched), "entries": shown}},
                )
            else:
                log.info("every watch entry's blockchain is listed by a polled node now")
            self._unmatched = unmatched
        return replace(status, unmatched=unmatched)

    def _back_off(
        self, polls: list[NodePoll], results: list[NodeResult], config: Config, ended: float
    ) -> None:
        """Forget the back-offs of nodes no longer configured, and start one for each node
        whose answer this cycle asked for time (``Retry-After`` on a 429 or 503), of at most
        MAX_RETRY_AFTER_SECONDS from the cycle's end."""
        names = {node.name for node in config.nodes}
        self._backing_off = {n: held for n, held in self._backing_off.items() if n in names}
        self._retry_afters = {n: c for n, c in self._retry_afters.items() if n in names}
        polled = {poll.node.name for poll in polls}
        for result in results:
            name = result.node.name
            asked = result.asked_for_time() if name in polled else None
            if asked is None:
                continue
            wait = min(asked.retry_after, MAX_RETRY_AFTER_SECONDS)
            again = time.strftime("%H:%M:%SZ", time.gmtime(self._wall() + wait))
            detail = f"{asked.detail}; not asked again for {wait:g} s (until {again})"
            self._backing_off[name] = _BackOff(ended + wait, FetchError(asked.reason, detail))
            self._retry_afters[name] = self._retry_afters.get(name, 0) + 1
            fields = {"node": name, "seconds": f"{wait:g}", "until": again}
            log.info("node asked for time (Retry-After): not asked again until then",
                     extra={"fields": fields})  # fmt: skip

    def _rebase(self, offset: float) -> float:
        """The wall clock minus the monotonic clock as the exported timestamps and the state
        file use it, given ``offset`` as read now: the one kept (so are they) until the wall
        clock steps, then ``offset``, logged once. Ages never use it."""
        step = offset - self._wall_offset
        if abs(step) > WALL_STEP_SECONDS:
            fields = {"step_seconds": round(step, 3)}
            message = "the wall clock stepped; exported timestamps follow it, ages do not"
            log.info(message, extra={"fields": fields})
            self._wall_offset = offset
        return self._wall_offset

    def keep_state(self) -> bool:
        """Write the memory to the state file if it changed since the last write (True when
        written); nothing without a state file. Called after each cycle and on shutdown."""
        state = self._state
        if state is None or self._unread_state is not None:  # never over what was not read
            return False
        return state.save(self._history.state(self._wall_offset))

    def run(self) -> None:
        """Cycle every ``scrape_interval`` until stop(); a late cycle skips missed ticks.
        The state file is written at most once a cycle, and once more when stopped."""
        next_start = time.monotonic()
        while not self._stopped.is_set():
            self._wake.clear()
            try:
                snapshot = self.run_cycle()
                self._publish(snapshot)
                self._last = snapshot
                self.keep_state()
            except Exception as error:  # a bug must not end polling: counted, logged, go on
                self._cycle_failed(error)
            interval = self._resources.config.scrape_interval
            next_start = max(next_start + interval, time.monotonic())
            self._wake.wait(max(0.0, next_start - time.monotonic()))
            if self._wake.is_set():
                next_start = time.monotonic()
        try:
            self.keep_state()
        except Exception:
            log.exception("writing the state file on shutdown failed")

    def _cycle_failed(self, error: Exception) -> None:
        """A cycle failed as a whole: count it, and publish the last snapshot again with the
        count (its series grow older, and stale past ``stale_after``: see exporter.app)."""
        failures = self._failures
        failures.note(CycleStage.CYCLE, "", error)
        last = self._last
        if last is None:
            return  # not ready yet: nothing was ever published
        try:
            self._publish(replace(last, cycle_failures=failures.counts()))
        except Exception as again:
            failures.note(CycleStage.CYCLE, "publish", again)

    def connections_opened(self) -> int:
        """New connections to nodes made so far (kept-alive ones are reused across cycles)."""
        return self._engine.connections_opened()

    def requests_in_flight(self) -> int:
        """Requests sent or queued and not yet ended, across all nodes (hung ones included)."""
        return self._engine.in_flight()

    def stop(self) -> None:
        """End run() after the current cycle; close the engine if this poller made it."""
        self._stopped.set()
        self._wake.set()
        if self._owns_engine:
            self._engine.close()
