"""What the status page flags: each problem mirrors a shipped alert, with that alert's
threshold and severity, so the page never says more or less than the pages an operator gets.
Both come from the mixin, rendered into the package (:mod:`exporter.web.alert_thresholds`);
none is stated here.

Three scopes, shown in this order: the network as a whole (no node answering, chains
halted, forks, splits without a majority, partitions, council views, and consensus health: a
thin quorum, consensus settings that drift, a vote session that does not close, a leader
whose rounds keep failing), each node and chain, and the watched contracts and wallets. A
problem is listed from the first cycle its alert's condition holds, pending until the alert's
`for` (the rules', in thresholds.json) has passed since the condition began: when, the
snapshot's own times say where they can (a stall, a session's age), else the page's memory
across cycles (:class:`Held`), which forgets a condition the first cycle it does not hold, as
Prometheus forgets a pending alert. Syncing, whose alert waits long, is info until it fires.
A chain whose consensus fails while most of its nodes stand still has its halt's line from
the first cycle (:func:`likely_halts`), its symptoms under it.

One line per incident: the page folds its lines as the shipped Alertmanager config's
inhibition tree silences the alerts (:data:`INHIBITIONS`): a line whose cause has its own
line is shown under it, not beside it, and not counted. Pure functions of one snapshot: the
page is rendered once per cycle. Every age is a difference of the snapshot's times and
``now_mono``, all on the monotonic clock (``time.monotonic()``), so a wall-clock step neither
raises nor hides a problem.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from enum import Enum

from exporter.config.maintenance import MaintenanceEntry
from exporter.model.fields import (
    CONSENSUS_TIMEOUT,
    COUNCIL_MEMBERS,
    DELAYED_MESSAGES,
    MIN_MEMBERS,
    PENDING_MESSAGES,
    PENDING_TRANSACTIONS,
    TX_MAX_TIME_TRIGGER,
    VOTE_ROUND,
    VOTE_SESSIONS,
    ChainReading,
)
from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.model.watch_readings import ContractReading, WalletReading, WatchedObject, WatchStatus
from exporter.text import isolated
from exporter.web.alert_thresholds import SHIPPED, Severity, Thresholds

#: The shipped alerts' thresholds, unless a caller gives others (a test's rendering).
SHIPPED_THRESHOLDS = SHIPPED.thresholds


class Scope(Enum):
    """Where a problem is listed: the network section first, then nodes, then watch lists."""

    NETWORK = "network"
    NODE = "node"
    WATCH = "watch"


@dataclass(frozen=True)
class Problem:
    """One line of the page. ``alert`` is the shipped alert it mirrors (its severity), or
    None for an info line about an alert that has not fired yet; ``subject`` what the line
    is about beyond a node and a chain: a watched contract's or wallet's name, a leader's
    key. Every text is plain (escaped when rendered), each value a node sent in it marked
    by :func:`exporter.text.isolated` (made visible; the page isolates it). ``folded``: the
    lines this one's cause explains, shown under it (:data:`INHIBITIONS`)."""

    scope: Scope
    severity: Severity
    alert: str | None
    text: str
    node: str | None = None
    chain: str | None = None
    subject: str | None = None
    folded: tuple[Problem, ...] = ()
    #: When the alert's condition began to hold (monotonic), where the snapshot's own times
    #: say (a stall, a session's age), else set by :class:`Held` from the first cycle listed.
    since: float | None = None
    #: Seconds (on the rules' clock) until the alert fires: its `for` less how long the
    #: condition has held; 0 once it fires. None for a line that mirrors no alert.
    fires_in: float | None = None
    #: The line of an alert whose condition does not hold yet, shown as the likely cause of
    #: the lines under it (:func:`likely_halts`); Prometheus does not list it yet.
    foreseen: bool = False

    @property
    def pending(self) -> bool:
        """The condition holds but the alert's `for` has not passed: Prometheus lists it as
        pending, Alertmanager has not been told."""
        return self.fires_in is not None and self.fires_in > 0

    def lines(self) -> Iterator[Problem]:
        """This line, then every line folded under it, depth first."""
        yield self
        for line in self.folded:
            yield from line.lines()


def _alerting(
    alert: str,
    scope: Scope,
    text: str,
    *,
    node: str | None = None,
    chain: str | None = None,
    subject: str | None = None,
) -> Problem:
    return Problem(scope, SHIPPED.severity(alert), alert, text, node, chain, subject)


def age(seconds: float) -> str:
    """``4s``, ``3m 12s``, ``2h 5m``, ``3d 4h``."""
    seconds = max(0, int(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} {seconds % size // sub_size}{sub}"
    return f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"


# --- the network as a whole ---------------------------------------------------------------


def majority_holds(agreement: Agreement) -> bool:
    """A strict majority of the nodes compared hold one value (the alerts' own test: the
    exporter marks agreement only with such a majority)."""
    return any(agrees for _, agrees in agreement)


def _outliers(agreement: Agreement) -> list[str]:
    return [node for node, agrees in agreement if not agrees]


def _fork(chain: ChainAgreement) -> Problem | None:
    """LedgerBlockchainForked: two or more blocks at the checkpoint with no strict majority,
    or with two or more nodes off it. One node off a majority is that node's
    LedgerNodeOffMajorityBlock line, never the chain's."""
    if not chain.checkpoint_hashes or chain.checkpoint_hashes < 2:
        return None
    at = (
        f"{chain.checkpoint_hashes} different blocks at checkpoint height {chain.checkpoint_height}"
    )
    if majority_holds(chain.block_agrees):
        if len(_outliers(chain.block_agrees)) < 2:
            return None
        text = f"forked: {at}; off the majority: {', '.join(_outliers(chain.block_agrees))}"
    else:
        compared = ", ".join(node for node, _ in chain.block_agrees)
        text = (
            f"forked: {at}, and no block has a majority of the nodes compared ({compared}): "
            "no node is named; compare their blocks before taking any out of service"
        )
    return _alerting("LedgerBlockchainForked", Scope.NETWORK, text, chain=chain.blockchain)


def _council_views(chain: ChainAgreement) -> Problem | None:
    if not chain.council_views or chain.council_views < 2:
        return None
    views = f"{chain.council_views} different council member sets"
    if majority_holds(chain.council_agrees):
        text = f"{views}; off the majority: {', '.join(_outliers(chain.council_agrees))}"
    else:
        text = f"{views}, and none has a majority of the nodes: no node is named"
    return _alerting("LedgerCouncilViewsDiverge", Scope.NETWORK, text, chain=chain.blockchain)


def _partition(view: NetworkView, up: int) -> Problem | None:
    """LedgerNetworkPartitioned: the ``up`` polled nodes form several groups, none holding a
    strict majority of them, and two or more outside the largest. One node cut off is its
    LedgerNodeIsolated line (:func:`isolated_problems`), never the network's."""
    largest = view.largest_partition
    if view.partitions is None or view.partitions < 2 or largest is None:
        return None
    if 2 * largest > up or up - largest < 2:
        return None
    text = (
        f"the up polled nodes form {view.partitions} groups with no peer link between them,"
        f" the largest {largest} of the {up} up nodes: no group holds a majority"
    )
    alone = [node for node, linked in view.polled_peers if linked == 0]
    if alone:
        text += f"; cut off alone: {', '.join(alone)}"
    return _alerting("LedgerNetworkPartitioned", Scope.NETWORK, text)


def network_problems(view: NetworkView, up: int | None = None) -> list[Problem]:
    """The network-wide lines: forks (with or without a majority), partitions of the ``up``
    polled nodes (by default those the view names), council views and consensus
    configurations (the consensus health of each chain is :func:`consensus_problems`')."""
    up = len(view.polled_peers) if up is None else up
    found = [_fork(chain) for chain in view.chains]  # a fork first: the worst news
    found += [_partition(view, up), *(_council_views(chain) for chain in view.chains)]
    found += [_consensus_views(chain) for chain in view.chains]
    return [problem for problem in found if problem is not None]


def isolated_problems(snapshot: Snapshot) -> list[Problem]:
    """LedgerNodeIsolated: an up node linked by peers to none of the other up polled nodes
    while two or more of them are linked together (the largest group), a warning of its
    own; a partition without a majority holds it back (:data:`INHIBITIONS`)."""
    largest = snapshot.network.largest_partition
    if largest is None or largest < 2:
        return []
    up = {node.name for node in snapshot.nodes if node.up}
    text = (
        f"linked by peers to none of the other up polled nodes, while {largest} of them are"
        " linked together: cut off from the network, or it answers with another peerId than"
        " its peers know"
    )
    return [
        _alerting("LedgerNodeIsolated", Scope.NODE, text, node=name)
        for name, linked in snapshot.network.polled_peers
        if linked == 0 and name in up
    ]


def unexpected_problems(snapshot: Snapshot) -> list[Problem]:
    """LedgerNodeUnexpectedBlockchains: an up node lists chains no other up polled node
    lists, or that its ``expect.blockchains`` leaves out; naming how many. Nothing about
    those chains is listed (:func:`expected_chains`)."""
    up = {node.name for node in snapshot.nodes if node.up}
    found = []
    for name, count in snapshot.network.unexpected_chains:
        if count <= 0 or name not in up:
            continue
        chains = "blockchain" if count == 1 else "blockchains"
        text = (
            f"lists {count} {chains} that no other up polled node lists, or that its"
            " expect.blockchains leaves out: nothing about them is alerted on"
        )
        found.append(_alerting("LedgerNodeUnexpectedBlockchains", Scope.NODE, text, node=name))
    return found


def expected_chains(snapshot: Snapshot) -> frozenset[str]:
    """The chains the alerts speak of (lib/consensus.libsonnet ``expected``): those two or
    more up nodes list, or every chain where fewer than two nodes are up. A chain one node
    lists beside other up nodes is that node's LedgerNodeUnexpectedBlockchains line, and no
    line about the chain itself is listed."""
    listed: dict[str, int] = defaultdict(int)
    up = [node for node in snapshot.nodes if node.up]
    for node in up:
        for blockchain in {chain.blockchain for chain in node.chains}:
            listed[blockchain] += 1
    if len(up) < 2:
        return frozenset(listed)
    return frozenset(blockchain for blockchain, count in listed.items() if count > 1)


def _consensus_views(chain: ChainAgreement) -> Problem | None:
    if not chain.consensus_views or chain.consensus_views < 2:
        return None
    views = (
        f"{chain.consensus_views} different consensus configurations "
        "(settings, key type, feature flags)"
    )
    if majority_holds(chain.consensus_agrees):
        text = f"{views}; off the majority: {', '.join(_outliers(chain.consensus_agrees))}"
    else:
        text = f"{views}, and none has a majority of the nodes: no node is named"
    alert = "LedgerConsensusConfigDiverges"
    return _alerting(alert, Scope.NETWORK, text, chain=chain.blockchain)


# --- consensus health of each chain, across the polled nodes -------------------------------

Readers = list[tuple[NodeStatus, ChainStatus]]  # the up nodes that read a chain this cycle


def _readers(snapshot: Snapshot) -> dict[str, Readers]:
    found: dict[str, Readers] = defaultdict(list)
    for node in snapshot.nodes:
        for chain in node.chains if node.up else ():
            if chain.reading is not None:
                found[chain.blockchain].append((node, chain))
    return found


def halted_problems(
    snapshot: Snapshot, now_mono: float, thresholds: Thresholds = SHIPPED_THRESHOLDS
) -> list[Problem]:
    """LedgerBlockchainHalted: a strict majority of the up nodes that read a chain are
    stalled while work waits (:func:`chain_problems`' stall line on each), whatever height
    each stands at: one node, stuck or still rising, neither causes nor hides a halt of a
    network of three or more. One line per chain, the stalled nodes named, its condition
    holding since a strict majority had stalled."""
    found = []
    for blockchain, readers in _readers(snapshot).items():
        seen = [(node, chain) for node, chain in readers if chain.reading is not None]
        stalled = [
            (node, chain)
            for node, chain in seen
            if _stalled(chain, now_mono, thresholds) is not None
        ]
        if not seen or 2 * len(stalled) <= len(seen):
            continue
        still = min(
            thresholds.held(chain.height_changed_at or 0.0, now_mono) for _, chain in stalled
        )
        nodes = ", ".join(node.name for node, _ in stalled)
        text = (
            f"halted at {_heights(stalled)} for {age(still)}: {len(stalled)} of the"
            f" {len(seen)} up nodes that read it ({nodes}) stand stalled while work waits"
        )
        # the condition holds from the moment a strict majority had stalled
        starts = sorted(_stall_start(chain, thresholds) for _, chain in stalled)
        line = _alerting("LedgerBlockchainHalted", Scope.NETWORK, text, chain=blockchain)
        found.append(replace(line, since=starts[len(seen) // 2]))
    return found


def _heights(readers: Readers) -> str:
    """``height 100``, or ``heights 99 to 101`` where the nodes stand at several."""
    heights = sorted({c.reading.height for _, c in readers if c.reading and c.reading.height})
    if not heights:
        return "an unread height"
    if len(heights) == 1:
        return f"height {heights[0]:.0f}"
    return f"heights {heights[0]:.0f} to {heights[-1]:.0f}"


#: The consensus lines that say a chain may be halting before its halt alert's condition
#: holds: a session that does not close, rounds that keep failing, a node's height stalled.
HALT_SYMPTOMS = frozenset(
    {
        "LedgerVoteSessionStuck",
        "LedgerVoteRoundsEscalating",
        "LedgerLeaderFailingRounds",
        "LedgerBlockHeightStalled",
    }
)


#: The lines the rules leave out of a chain while its halt condition holds (the halt is the
#: one incident), and those they leave out for the leader window after the halt fired.
SILENT_WHILE_HALTED = frozenset(
    {*HALT_SYMPTOMS, "LedgerPendingMessagesHigh", "LedgerDelayedMessagesHigh"}
)
SILENT_AFTER_HALT = frozenset(
    {"LedgerVoteSessionStuck", "LedgerVoteRoundsEscalating", "LedgerLeaderFailingRounds"}
)


def _without_halt_symptoms(
    lines: list[Problem | None], halting: frozenset[str], after_halt: frozenset[str]
) -> list[Problem | None]:
    """``lines`` less those of a chain whose halt condition holds (``halting``) that the
    rules leave out then, and less a vote session's, rounds' and leader's lines of a chain
    whose halt fired within the leader window (``after_halt``)."""
    return [
        line
        for line in lines
        if line is None
        or line.chain is None
        or not (
            (line.chain in halting and line.alert in SILENT_WHILE_HALTED)
            or (line.chain in after_halt and line.alert in SILENT_AFTER_HALT)
        )
    ]


def likely_halts(
    snapshot: Snapshot,
    now_mono: float,
    lines: Iterable[Problem],
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
) -> list[Problem]:
    """The likely cause of a chain's consensus lines before LedgerBlockchainHalted's
    condition holds: where ``lines`` hold a :data:`HALT_SYMPTOMS` line of a chain that has no
    halt line yet and a strict majority of the up nodes that read it stand at its highest
    height, unchanged while work waits for longer than a block takes
    (:func:`block_due_within`), a line for the halt to come (``foreseen``: no alert
    yet), so the symptoms fold under it from the first cycle instead of one line each until
    the stall threshold has passed. Pending, firing in the time its condition and `for` need.
    As for the halt itself, whatever height each node stands at."""
    alert = "LedgerBlockchainHalted"
    symptomatic = {line.chain for line in lines if line.alert in HALT_SYMPTOMS and line.chain}
    symptomatic -= {line.chain for line in lines if line.alert == alert}
    found = []
    for blockchain, readers in _readers(snapshot).items():
        if blockchain not in symptomatic:
            continue
        seen = [(node, chain) for node, chain in readers if chain.reading is not None]
        still = [
            (node, chain)
            for node, chain in seen
            if chain.reading is not None
            and chain.height_changed_at is not None
            and not is_idle(chain.reading)
            and thresholds.held(chain.height_changed_at, now_mono)
            > block_due_within(chain.reading, thresholds)
        ]
        if not seen or 2 * len(still) <= len(seen):
            continue
        starts = sorted(_stall_start(chain, thresholds) for _, chain in still)
        due = starts[len(seen) // 2]  # a strict majority stalled then: the condition holds
        unchanged = min(thresholds.held(c.height_changed_at or 0.0, now_mono) for _, c in still)
        nodes = ", ".join(node.name for node, _ in still)
        text = (
            f"likely halting at {_heights(still)}: unchanged for {age(unchanged)} on"
            f" {len(still)} of the {len(seen)} up nodes that read it ({nodes}) while work waits;"
            f" the halt alert's condition holds in {age(thresholds.held(now_mono, due))}"
        )
        line = _alerting(alert, Scope.NETWORK, text, chain=blockchain)
        left = thresholds.held(now_mono, due) + SHIPPED.for_seconds(alert)
        found.append(replace(line, foreseen=True, fires_in=max(left, 0.0)))
    return found


def all_down(snapshot: Snapshot) -> Problem | None:
    """LedgerAllNodesDown: none of two or more polled nodes answers (the exporter's own
    network path, or the network itself); every node's own line goes under it."""
    if len(snapshot.nodes) < 2 or any(node.up for node in snapshot.nodes):
        return None
    text = (
        f"none of the {len(snapshot.nodes)} polled nodes answers: the exporter's own network "
        "path (DNS, routes, firewall, proxy) or the whole network is down"
    )
    return _alerting("LedgerAllNodesDown", Scope.NETWORK, text)


def consensus_problems(
    snapshot: Snapshot,
    now_mono: float,
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
    after_halt: frozenset[str] = frozenset(),
    halted: frozenset[str] = frozenset(),
) -> list[Problem]:
    """Per chain, the lines of the consensus alerts that compare or gather the polled nodes:
    a thin quorum (a warning, critical on the ``halted`` chains), vote sessions that do not
    close (naming the nodes that see them), and
    leaders whose rounds keep failing (once per leader, whichever nodes see it), but not on
    the ``after_halt`` chains: LedgerLeaderFailingRounds leaves out a chain whose
    LedgerBlockchainHalted fired within its window (those rounds failed because of the halt)."""
    readers = _readers(snapshot)
    members = {key: name for name, key in snapshot.network.node_keys}  # down ones too
    members |= {n.health.node_key: n.name for n in snapshot.nodes if n.health and n.health.node_key}
    found = [
        _thin_quorum(chain, readers.get(chain.blockchain, []), now_mono, thresholds, halted)
        for chain in snapshot.network.chains
    ]
    found += [
        _without_margin(chain, readers.get(chain.blockchain, []), now_mono, thresholds)
        for chain in snapshot.network.chains
    ]
    for blockchain, seen in readers.items():
        found.append(_stuck_sessions(blockchain, seen, now_mono, thresholds))
        if blockchain not in after_halt:  # the rule leaves out the rounds of a halt
            found += _failing_leaders(blockchain, seen, now_mono, members, thresholds)
    return [problem for problem in found if problem is not None]


def _majority_council_sizes(chain: ChainAgreement, readers: Readers) -> list[int]:
    """The council sizes the nodes of the chain's council majority report."""
    majority = {node for node, agrees in chain.council_agrees if agrees}
    return [
        len(c.reading.council)
        for n, c in readers
        if n.name in majority and c.reading and c.reading.council
    ]


def _thin_quorum(
    chain: ChainAgreement,
    readers: Readers,
    now_mono: float,
    thresholds: Thresholds,
    halted: frozenset[str] = frozenset(),
) -> Problem | None:
    """LedgerCouncilQuorumThin: a margin lost, members down until those up are no more than
    the votes required, where every member of the majority's council is polled (an unpolled
    member is unknown). As seen by this exporter: while the chain advances its quorum holds
    (the warning rule); once the chain is among the ``halted`` it is the critical rule's,
    folded under the halt."""
    up, polled = chain.council_members_up, chain.council_members_polled
    sizes = _majority_council_sizes(chain, readers)
    required = _required_votes(readers, now_mono, thresholds)
    if up is None or polled is None or not sizes or polled < max(sizes) or required is None:
        return None
    if up > required or up >= max(sizes):  # every member up: a margin zero by design
        return None  # (LedgerCouncilWithoutMargin, info), not one lost
    council = (
        f"{up} of the council's {max(sizes)} members up among the polled nodes, as seen by"
        " this exporter"
    )
    stopped = chain.blockchain in halted
    if stopped:
        text = f"{council}, no more than the {required:.0f} votes a session needs, and the"
        text += " chain has halted"
    elif up < required:
        text = f"{council}, fewer than the {required:.0f} votes a session needs; the chain"
        text += " still advances, so its quorum holds"
    else:
        needs = f"a session needs {required:.0f} votes"
        text = f"{council}, and {needs}; the chain still advances: one more member lost and"
        text += " none can pass"
    return _by_halt("LedgerCouncilQuorumThin", Scope.NETWORK, text, stopped, chain.blockchain)


def _by_halt(
    alert: str, scope: Scope, text: str, halted: bool, chain: str, *, node: str | None = None
) -> Problem:
    """The line of an alert of two rules split by its chain's halt, with the severity of the
    rule that holds (thresholds.json's byHalt): a warning while the chain advances, critical
    once halted (then LedgerBlockchainHalted's line holds it, :data:`INHIBITIONS`)."""
    line = _alerting(alert, scope, text, node=node, chain=chain)
    return replace(line, severity=SHIPPED.severity(alert, halted=halted))


def _without_margin(
    chain: ChainAgreement, readers: Readers, now_mono: float, thresholds: Thresholds
) -> Problem | None:
    """LedgerCouncilWithoutMargin's note: a council no larger than the votes a session needs
    has no margin by its own design (3 members, 3 votes): any member down stops the chain.
    Not an incident (nothing changed), so info, apart from a margin lost."""
    sizes = _majority_council_sizes(chain, readers)
    required = _required_votes(readers, now_mono, thresholds)
    if not sizes or required is None or max(sizes) > required:
        return None
    text = (
        f"the council has {max(sizes)} members and a session needs {required:.0f} votes: no "
        "margin by its own design, any member down stops the chain"
    )
    return _alerting("LedgerCouncilWithoutMargin", Scope.NETWORK, text, chain=chain.blockchain)


def _required_votes(readers: Readers, now_mono: float, thresholds: Thresholds) -> float | None:
    """The highest consensusRequired reported in the last requiredVotesWindow, else
    consensus.minMembers."""
    window = thresholds.required_votes_window_seconds
    recent = [
        value
        for _, chain in readers
        if chain.consensus is not None and chain.consensus.last_required is not None
        for value, at in (chain.consensus.last_required,)
        if thresholds.held(at, now_mono) <= window
    ]
    minimum = [
        m for _, c in readers if c.reading and (m := c.reading.gauge(MIN_MEMBERS)) is not None
    ]
    return max(recent) if recent else max(minimum, default=None)


def session_stuck_after(
    reading: ChainReading, thresholds: Thresholds = SHIPPED_THRESHOLDS
) -> float:
    """Seconds a vote session may stay open (LedgerVoteSessionStuck)."""
    timeout = reading.gauge(CONSENSUS_TIMEOUT)
    if timeout is None:
        return thresholds.vote_session_stuck_seconds
    return thresholds.vote_session_stuck_timeouts * timeout


def _stuck_sessions(
    blockchain: str, readers: Readers, now_mono: float, thresholds: Thresholds
) -> Problem | None:
    """LedgerVoteSessionStuck, one line per chain naming the nodes whose oldest session is
    open longer than their chain's timeouts allow; its condition holds since the first of
    them passed its limit (the session's age says when)."""
    scale = thresholds.time_scale
    stuck = [
        (node.name, chain.consensus.session_age * scale, limit)
        for node, chain in readers
        if chain.reading is not None
        and chain.consensus is not None
        and chain.consensus.session_age is not None
        and chain.consensus.session_age * scale
        > (limit := session_stuck_after(chain.reading, thresholds))
    ]
    if not stuck:
        return None
    oldest = max(age_ for _, age_, _ in stuck)
    limit = min(limit for _, _, limit in stuck)
    over = max(age_ - limit_ for _, age_, limit_ in stuck)
    nodes = ", ".join(name for name, _, _ in stuck)
    text = (
        f"a vote session open for {age(oldest)} on {nodes}, more than "
        f"{thresholds.vote_session_stuck_timeouts:g} consensus timeouts ({age(limit)}): "
        "it does not close"
    )
    line = _alerting("LedgerVoteSessionStuck", Scope.NETWORK, text, chain=blockchain)
    return replace(line, since=now_mono - over / scale)


def _failing_leaders(
    blockchain: str,
    readers: Readers,
    now_mono: float,
    members: dict[str, str],
    thresholds: Thresholds,
) -> list[Problem]:
    """LedgerLeaderFailingRounds, one line per leader (however many nodes see it fail)."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)  # leader -> node -> failures
    window_seconds = thresholds.leader_failed_rounds_window_seconds
    since = now_mono - window_seconds / thresholds.time_scale
    for node, chain in readers:
        for leader, times in chain.consensus.recent_failures if chain.consensus else ():
            counts[leader][node.name] = sum(1 for at in times if at > since)
    found = []
    for leader, by_node in sorted(counts.items()):
        failed = max(by_node.values())
        if failed < thresholds.leader_failed_rounds_threshold:
            continue
        who = f" (node {members[leader]})" if leader in members else ""
        seen = ", ".join(name for name, count in by_node.items() if count == failed)
        window = age(window_seconds).removesuffix(" 0s")
        text = f"leader{who} failed {failed} vote rounds in the last {window}, as {seen} saw them"
        where = {"chain": blockchain, "subject": leader}
        found.append(_alerting("LedgerLeaderFailingRounds", Scope.NETWORK, text, **where))
    return found


def _off_majority(view: NetworkView) -> dict[tuple[str, str], list[Problem]]:
    """Per (node, chain): the node holds another block or council than a strict majority.
    Without a majority no node is named (the network line says so)."""
    found: dict[tuple[str, str], list[Problem]] = defaultdict(list)
    for chain in view.chains:
        block = f"block at checkpoint height {chain.checkpoint_height} is not the majority's"
        council = "council member set is not the majority's"
        consensus = "consensus settings, key type or feature flags are not the majority's"
        for agreement, alert, text in (
            (chain.block_agrees, "LedgerNodeOffMajorityBlock", block),
            (chain.council_agrees, "LedgerNodeOffMajorityCouncil", council),
            (chain.consensus_agrees, "LedgerNodeOffMajorityConsensus", consensus),
        ):
            if not majority_holds(agreement):
                continue
            for node in _outliers(agreement):
                where = {"node": node, "chain": chain.blockchain}
                found[node, chain.blockchain].append(_alerting(alert, Scope.NODE, text, **where))
    return found


# --- each node and chain -------------------------------------------------------------------


def _syncing(node: str, chain: ChainStatus, now_mono: float, thresholds: Thresholds) -> Problem:
    """Syncing is normal for a while: info until the alert's `for`, then its warning."""
    since = chain.syncing_since if chain.syncing_since is not None else now_mono
    text = f"syncing for {age(thresholds.held(since, now_mono))}"
    if thresholds.held(since, now_mono) >= thresholds.syncing_too_long_seconds:
        alert = "LedgerBlockchainSyncingTooLong"
        line = _alerting(alert, Scope.NODE, text, node=node, chain=chain.blockchain)
        return replace(line, since=since)  # its condition, syncing, held from then
    text += f" (alerts after {age(thresholds.syncing_too_long_seconds).removesuffix(' 0s')})"
    return Problem(Scope.NODE, Severity.INFO, None, text, node, chain.blockchain)


def _council_below_minimum(node: str, chain: ChainStatus, halted: bool) -> Problem | None:
    """LedgerCouncilBelowMinMembers, as seen by this exporter: a warning while the chain
    advances (its council still reaches a quorum), critical once it has ``halted``."""
    members = chain.reading.gauge(COUNCIL_MEMBERS) if chain.reading else None
    minimum = chain.reading.gauge(MIN_MEMBERS) if chain.reading else None
    if members is None or minimum is None or members >= minimum:
        return None
    text = (
        f"sees {members:.0f} council members, fewer than consensus.minMembers {minimum:.0f},"
        " as seen by this exporter; "
    )
    text += "the chain has halted" if halted else "the chain still advances, so its quorum holds"
    alert = "LedgerCouncilBelowMinMembers"
    return _by_halt(alert, Scope.NODE, text, halted, chain.blockchain, node=node)


def stall_threshold(reading: ChainReading, thresholds: Thresholds = SHIPPED_THRESHOLDS) -> float:
    """Seconds a chain's height may stay while work waits (LedgerBlockHeightStalled): its
    txMaxTimeTrigger + consensusTimeout + the grace, or the fallback without them."""
    trigger = reading.gauge(TX_MAX_TIME_TRIGGER)
    timeout = reading.gauge(CONSENSUS_TIMEOUT)
    if trigger is None or timeout is None:
        return thresholds.height_stalled_seconds
    return trigger + timeout + thresholds.stall_grace_seconds


def block_due_within(reading: ChainReading, thresholds: Thresholds = SHIPPED_THRESHOLDS) -> float:
    """Seconds within which a chain with work waiting mints its next block if its first
    vote round succeeds: txMaxTimeTrigger + consensusTimeout, the stall threshold without its
    grace (without them, the fallback less the grace). A chain unchanged longer has failed a
    round at least: with consensus lines, the likely start of a halt."""
    return stall_threshold(reading, thresholds) - thresholds.stall_grace_seconds


def is_idle(reading: ChainReading) -> bool:
    """Nothing to mint: no pending transaction and no open vote session, both reported."""
    pending = reading.gauge(PENDING_TRANSACTIONS)
    return pending == 0 and reading.gauge(VOTE_SESSIONS) == 0


def _stalled(chain: ChainStatus, now_mono: float, thresholds: Thresholds) -> str | None:
    """The stall line, as LedgerBlockHeightStalled and LedgerNodeBehind's guard see it."""
    if chain.reading is None or chain.height_changed_at is None or is_idle(chain.reading):
        return None
    still = thresholds.held(chain.height_changed_at, now_mono)
    threshold = stall_threshold(chain.reading, thresholds)
    if still <= threshold:
        return None
    due = f"a block was due within {age(threshold)}"
    return f"height unchanged for {age(still)} while work waits ({due})"


def _stall_start(chain: ChainStatus, thresholds: Thresholds) -> float:
    """When a stalled chain's stall condition began to hold (monotonic): its last height
    change plus the stall threshold, on the rules' clock."""
    assert chain.reading is not None
    assert chain.height_changed_at is not None
    threshold = stall_threshold(chain.reading, thresholds)
    return chain.height_changed_at + threshold / thresholds.time_scale


def chain_problems(
    node: str,
    chain: ChainStatus,
    now_mono: float,
    off: Iterable[Problem] = (),
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
    *,
    halted: frozenset[str] = frozenset(),
) -> list[Problem]:
    """What one chain of an up node shows, by the alerts' thresholds (the council's lines
    by whether the chain is among the ``halted``)."""
    where = {"node": node, "chain": chain.blockchain}
    if chain.reading is None:
        text = f"chain down: {isolated(chain.error) if chain.error else 'no reading'}"
        return [_alerting("LedgerBlockchainDown", Scope.NODE, text, **where)]
    found = list(off)
    syncing = chain.reading.syncing is True
    stalled = _stalled(chain, now_mono, thresholds)
    behind = chain.blocks_behind
    if stalled is not None:
        line = _alerting("LedgerBlockHeightStalled", Scope.NODE, stalled, **where)
        found.append(replace(line, since=_stall_start(chain, thresholds)))
    elif behind is not None and behind > thresholds.blocks_behind_threshold and not syncing:
        text = f"{behind:.0f} blocks behind"
        found.append(_alerting("LedgerNodeBehind", Scope.NODE, text, **where))
    elif _behind_in_time(chain, thresholds) and not syncing:
        text = f"{age((chain.behind_seconds or 0.0) * thresholds.time_scale)} behind the head"
        found.append(_alerting("LedgerNodeBehindTime", Scope.NODE, text, **where))
    if syncing:
        found.append(_syncing(node, chain, now_mono, thresholds))
    below = _council_below_minimum(node, chain, chain.blockchain in halted)
    return found + ([below] if below else []) + _queues_and_rounds(chain, thresholds, where)


def _queues_and_rounds(
    chain: ChainStatus, thresholds: Thresholds, where: dict[str, str]
) -> list[Problem]:
    """LedgerVoteRoundsEscalating, LedgerPendingMessagesHigh, LedgerDelayedMessagesHigh."""
    reading = chain.reading
    if reading is None:
        return []
    found = []
    for field, limit, alert, what in (
        (VOTE_ROUND, thresholds.vote_round_threshold, "LedgerVoteRoundsEscalating", ""),
        (PENDING_MESSAGES, thresholds.pending_messages_threshold, "LedgerPendingMessagesHigh",
         "messages pending"),
        (DELAYED_MESSAGES, thresholds.delayed_messages_threshold, "LedgerDelayedMessagesHigh",
         "messages delayed"),
    ):  # fmt: skip
        value = reading.gauge(field)
        if value is None or value <= limit:
            continue
        if field is VOTE_ROUND:
            text = f"a vote session at round {value:.0f}, past round {limit:g}: rounds keep failing"
        else:
            text = f"{value:.0f} {what}, more than {limit:g}"
        found.append(_alerting(alert, Scope.NODE, text, **where))
    return found


def _unknown_chains(node: NodeStatus) -> Iterator[Problem]:
    """A down node's chains, unknown until it answers again: under its LedgerNodeDown line."""
    for blockchain, height in node.last_chains:
        text = f"unknown while the node is down (last read at height {height:.0f})"
        yield Problem(Scope.NODE, Severity.INFO, None, text, node.name, blockchain)


def _behind_in_time(chain: ChainStatus, thresholds: Thresholds) -> bool:
    """LedgerNodeBehindTime's threshold: the head reached the block the node lacks more than
    behindTime ago."""
    late = chain.behind_seconds
    return late is not None and late * thresholds.time_scale > thresholds.behind_time_seconds


def peers_lost(peer_count: float | None) -> bool:
    """LedgerNodePeersLost's condition: no peer at all (what the alert means, not a setting)."""
    return peer_count == 0


def _certificate_expiring(
    node: NodeStatus, now_wall: float, thresholds: Thresholds
) -> Problem | None:
    """LedgerNodeCertificateExpiring: the earliest notAfter of the chain the node presented at
    its last handshake under certExpiryWarning away (critical under certExpiryCritical)."""
    handshake = node.transport.handshake if node.transport is not None else None
    if handshake is None or handshake.expiry is None:
        return None
    left = handshake.expiry - now_wall
    warning_at, critical_at = (
        thresholds.cert_expiry_warning_seconds,
        thresholds.cert_expiry_critical_seconds,
    )
    if left >= warning_at:
        return None
    critical = left < critical_at
    bound = critical_at if critical else warning_at
    when = f"expires in {age(left)}" if left > 0 else f"expired {age(-left)} ago"
    text = f"TLS certificate {when}, under {bound / 86400:g} days"
    line = _alerting("LedgerNodeCertificateExpiring", Scope.NODE, text, node=node.name)
    return replace(line, severity=Severity.CRITICAL if critical else Severity.WARNING)


def node_problems(
    node: NodeStatus,
    now_mono: float,
    wall_offset: float,
    off: dict[tuple[str, str], list[Problem]] | None = None,
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
    *,
    halted: frozenset[str] = frozenset(),
) -> list[Problem]:
    """What one node and its chains show, most severe first (``wall_offset`` turns
    ``now_mono`` into the Unix time a certificate's expiry is compared with; ``halted``, the
    chains whose halt's condition holds)."""
    if not node.up:
        since = (
            "never up"
            if node.last_success is None
            else f"down for {age(thresholds.held(node.last_success, now_mono))}"
        )
        text = f"{since}: {isolated(node.error) if node.error else 'no answer'}"
        down = _alerting("LedgerNodeDown", Scope.NODE, text, node=node.name)
        return [replace(down, folded=tuple(_unknown_chains(node)))]
    found: list[Problem] = []
    peers = node.health.peer_count if node.health is not None else None
    if peers_lost(peers):
        found.append(_alerting("LedgerNodePeersLost", Scope.NODE, "no peers", node=node.name))
    elif peers is not None and peers < thresholds.peers_low_threshold:
        plural = "" if peers == 1 else "s"
        text = f"{peers:.0f} peer{plural}, fewer than {thresholds.peers_low_threshold:g}"
        found.append(_alerting("LedgerNodePeersLow", Scope.NODE, text, node=node.name))
    expiring = _certificate_expiring(node, now_mono + wall_offset, thresholds)
    if expiring is not None:
        found.append(expiring)
    for chain in node.chains:
        off_majority = (off or {}).get((node.name, chain.blockchain), ())
        found += chain_problems(node.name, chain, now_mono, off_majority, thresholds, halted=halted)
    return sorted(found, key=lambda problem: problem.severity)


# --- who answers ---------------------------------------------------------------------------


def _quoted(value: str) -> str:
    """A value a node sent, quoted and marked isolated."""
    return f"'{isolated(value)}'"


def identity_problems(snapshot: Snapshot) -> list[Problem]:
    """LedgerNodeIdentityMismatch: a node that answered as another node than its ``expect``
    pins. Listed before everything else: whatever else the page could say of that node would
    stand on the word of whoever answers at its URL."""
    return [
        _alerting(
            "LedgerNodeIdentityMismatch",
            Scope.NODE,
            f"another node answers at its URL, not trusted (its readings are left out):"
            f" {node.identity.text(_quoted)}",
            node=node.name,
        )
        for node in snapshot.nodes
        if node.identity is not None
    ]


# --- watched contracts and wallets ----------------------------------------------------------


def _watched(obj: WatchedObject, alert: str, text: str) -> Problem:
    return _alerting(
        alert, Scope.WATCH, text, node=obj.node, chain=obj.blockchain, subject=obj.name
    )


Values = dict[str, list[str]]  # a value as shown -> the nodes that report it


def _contract_values(readers: list[WatchedObject]) -> dict[str, Values]:
    found: dict[str, Values] = {"status": {}, "version": {}, "code hash": {}}
    for obj in readers:
        contract = obj.reading
        if not isinstance(contract, ContractReading):
            continue
        if contract.status is not None:
            found["status"].setdefault(isolated(contract.status), []).append(obj.node)
        if contract.version is not None:
            found["version"].setdefault(f"{contract.version:g}", []).append(obj.node)
        if (contract.address, contract.vm_type, contract.code_hash) != (None, None, None):
            code_hash = isolated(contract.code_hash) if contract.code_hash else "none"
            found["code hash"].setdefault(code_hash, []).append(obj.node)
    return found


def _wallet_values(readers: list[WatchedObject]) -> dict[str, Values]:
    found: dict[str, Values] = {"enabled": {}}
    grants: dict[str, Values] = defaultdict(dict)
    for obj in readers:
        wallet = obj.reading
        if not isinstance(wallet, WalletReading):
            continue
        if wallet.enabled is not None:
            shown = "yes" if wallet.enabled else "no"
            found["enabled"].setdefault(shown, []).append(obj.node)
        for group, permission, granted in wallet.permissions:
            shown = "yes" if granted else "no"
            grants[f"{isolated(group)} {isolated(permission)}"].setdefault(shown, []).append(
                obj.node
            )
    return found | dict(grants)


def _disagreement(kind: str, readers: list[WatchedObject]) -> str | None:
    """How the nodes reading one watched object differ, as the ...NodesDisagree alerts see
    it, naming which nodes report what (``status PAUSED: node-1; ACTIVE: node-2``)."""
    values = _contract_values(readers) if kind == "contract" else _wallet_values(readers)
    split = [
        f"{field} " + "; ".join(f"{value}: {', '.join(nodes)}" for value, nodes in seen.items())
        for field, seen in values.items()
        if len(seen) > 1
    ]
    return f"the nodes disagree: {' / '.join(split)}" if split else None


def _grouped(watch: WatchStatus) -> Iterator[tuple[str, list[WatchedObject]]]:
    """Each watched contract (its metadata) and wallet with every node's outcome."""
    groups: dict[tuple[str, str, str], list[WatchedObject]] = defaultdict(list)
    for obj in watch.objects:
        if isinstance(obj.reading, ContractReading):
            groups["contract", obj.blockchain, obj.name].append(obj)
        elif isinstance(obj.reading, WalletReading):
            groups["wallet", obj.blockchain, obj.name].append(obj)
    for (kind, _, _), readers in groups.items():
        yield kind, readers


def watch_problems(watch: WatchStatus) -> list[Problem]:
    """Watched contracts not ACTIVE, wallets disabled, and objects the nodes disagree on."""
    found: list[Problem] = []
    for kind, readers in _grouped(watch):
        for obj in readers:
            reading = obj.reading
            if isinstance(reading, ContractReading) and reading.status not in (None, "ACTIVE"):
                text = f"contract is {isolated(reading.status)}, not ACTIVE"
                found.append(_watched(obj, "LedgerWatchedContractNotActive", text))
            if isinstance(reading, WalletReading) and reading.enabled == 0:
                found.append(_watched(obj, "LedgerWatchedWalletDisabled", "wallet is disabled"))
        differ = _disagreement(kind, readers)
        if differ:
            alert = f"LedgerWatched{kind.capitalize()}NodesDisagree"
            first = readers[0]
            found.append(
                Problem(
                    Scope.WATCH,
                    SHIPPED.severity(alert),
                    alert,
                    differ,
                    None,
                    first.blockchain,
                    first.name,
                )
            )
    return found


def unmatched_problems(watch: WatchStatus) -> list[Problem]:
    """Watch entries no polled node lists the chain of: never asked, so never alerted on."""
    return [
        Problem(
            Scope.WATCH,
            Severity.INFO,
            None,
            f"{entry.kind} never asked: no polled node lists its blockchain, so nothing is "
            "exported for it (check watch in the config)",
            chain=entry.blockchain,
            subject=entry.name,
        )
        for entry in watch.unmatched
    ]


# --- one line per incident ---------------------------------------------------------------


@dataclass(frozen=True)
class Inhibition:
    """One rule of the shipped Alertmanager config's ``inhibit_rules``, as the page applies
    it: while a ``source`` alert's line is listed, the lines of the ``targets`` alerts (None:
    every other alert; ``of_a_chain``: those about a chain) that share its ``equal`` fields
    (``node``, ``chain``) go under it."""

    source: str
    targets: frozenset[str] | None
    equal: tuple[str, ...] = ()
    of_a_chain: bool = False

    def key(self, line: Problem) -> tuple[str | None, ...]:
        """The fields a source and the lines it hides share."""
        return tuple(getattr(line, field) for field in self.equal)

    def hides(self, source: Problem, line: Problem) -> bool:
        """Whether ``line`` goes under ``source``, a line of this rule's source alert."""
        if line is source or line.alert is None or (self.of_a_chain and line.chain is None):
            return False
        if self.targets is not None and line.alert not in self.targets:
            return False
        return all(getattr(line, field) == getattr(source, field) for field in self.equal)


#: The inhibition tree (deploy/alertmanager/alertmanager.yml, rendered from the mixin), in the
#: order the page folds: a node's own causes first, the exporter-wide one last, so a node
#: down keeps its chains under it when every node is down. The exporter's own alerts
#: (LedgerExporterDown) cannot be shown by the exporter, and a node in maintenance is
#: shown apart from the problems.
INHIBITIONS = (
    Inhibition("LedgerNodeIdentityMismatch", frozenset({"LedgerNodeDown"}), ("node",)),
    Inhibition("LedgerNodeDown", None, ("node",), of_a_chain=True),
    Inhibition(
        "LedgerBlockchainHalted",
        frozenset(
            {
                "LedgerBlockHeightStalled",
                "LedgerVoteSessionStuck",
                "LedgerVoteRoundsEscalating",
                "LedgerLeaderFailingRounds",
                "LedgerPendingMessagesHigh",
                "LedgerDelayedMessagesHigh",
                "LedgerNodeBehind",
                "LedgerCouncilQuorumThin",
                "LedgerCouncilBelowMinMembers",
                "LedgerBlockchainLivenessBudgetBurn",
            }
        ),
        ("chain",),
    ),
    Inhibition("LedgerNodeDown", frozenset({"LedgerNodeAvailabilityBudgetBurn"}), ("node",)),
    Inhibition("LedgerNodeDown", frozenset({"LedgerCouncilQuorumThin"})),
    Inhibition("LedgerNetworkPartitioned", frozenset({"LedgerNodePeersLow", "LedgerNodeIsolated"})),
    Inhibition(
        "LedgerBlockchainForked",
        frozenset({"LedgerWatchedContractNodesDisagree", "LedgerWatchedWalletNodesDisagree"}),
        ("chain",),
    ),
    Inhibition("LedgerAllNodesDown", None),
)


def _fold(sections: list[list[Problem]]) -> list[list[Problem]]:
    """``sections`` (lists of lines) with each line an :data:`INHIBITIONS` rule hides moved
    under the first line of its source with the same ``equal`` fields, whichever section
    either is in. One pass over the lines per rule, however many nodes are down."""
    for rule in INHIBITIONS:
        top = [line for part in sections for line in part]
        sources: dict[tuple[str | None, ...], Problem] = {}
        for line in top:
            if line.alert == rule.source:
                sources.setdefault(rule.key(line), line)
        under: dict[int, list[Problem]] = defaultdict(list)  # id(source) -> lines under it
        for line in top:
            source = sources.get(rule.key(line))
            if source is not None and rule.hides(source, line):
                under[id(source)].append(line)
        if not under:
            continue
        gone = {id(line) for hidden in under.values() for line in hidden}
        sections = [
            [_with_folded(line, under.get(id(line), ())) for line in part if id(line) not in gone]
            for part in sections
        ]
    return sections


def _with_folded(line: Problem, hidden: Iterable[Problem]) -> Problem:
    """``line`` with ``hidden`` folded under it after those it holds already."""
    more = tuple(hidden)
    return replace(line, folded=line.folded + more) if more else line


# --- the whole page -----------------------------------------------------------------------


def _by_severity(lines: Iterable[Problem]) -> list[Problem]:
    """Firing lines first, then pending ones, each most severe first (stable: the order
    found kept)."""
    return sorted(lines, key=lambda problem: (problem.pending, problem.severity))


#: A line's alert as Prometheus tells one from another: its name and labels (its severity
#: too: the two rules of an alert split by the halt are two alerts, each pending anew).
LineKey = tuple[str, str | None, str | None, str | None, Severity]


class Held:
    """What the page remembers from one cycle to the next, as Prometheus does from one
    evaluation to the next: when each listed alert's condition began to hold (dropped the
    first cycle it does not, as Prometheus forgets a pending alert), where the snapshot's own
    times do not say; and when each chain's LedgerBlockchainHalted last fired
    (LedgerLeaderFailingRounds leaves such a chain out for its window). Kept by the web
    server for the process; every time monotonic."""

    def __init__(self, thresholds: Thresholds = SHIPPED_THRESHOLDS) -> None:
        self.thresholds = thresholds
        self.since: dict[LineKey, float] = {}
        self.halt_fired: dict[str, float] = {}
        self.latest: Attention | None = None  # the lines of the last snapshot observed
        self._lock = threading.Lock()

    def observe(self, snapshot: Snapshot) -> Attention:
        """The page's lines for ``snapshot`` (as of the end of its cycle), this memory
        updated with them; one snapshot at a time."""
        now = snapshot.completed_at if snapshot.completed_at is not None else time.monotonic()
        with self._lock:
            self.latest = attention(snapshot, now, self.thresholds, self)
            return self.latest


def _key(line: Problem) -> LineKey | None:
    if line.alert is None:
        return None
    return (line.alert, line.node, line.chain, line.subject, line.severity)


def _timed(
    line: Problem, now: float, thresholds: Thresholds, held: Held, seen: dict[LineKey, float]
) -> Problem:
    """``line`` (and those folded under it) with when its condition began and how long until
    its alert fires: from the snapshot's own times where they say, else from the first cycle
    ``held`` saw it listed; recorded in ``seen``."""
    folded = tuple(_timed(under, now, thresholds, held, seen) for under in line.folded)
    key = _key(line)
    if key is None or line.fires_in is not None:
        return replace(line, folded=folded) if folded != line.folded else line
    since = line.since if line.since is not None else held.since.get(key, now)
    since = min(since, now)
    seen[key] = min(since, seen.get(key, since))
    left = SHIPPED.for_seconds(key[0]) - thresholds.held(since, now)
    return replace(line, since=since, fires_in=max(left, 0.0), folded=folded)


@dataclass(frozen=True)
class Attention:
    """Everything the page flags for one snapshot, per scope, most severe first; each line
    with the lines its cause explains folded under it (only the top lines are counted)."""

    network: tuple[Problem, ...] = ()
    nodes: dict[str, list[Problem]] | None = None  # per node name, in the snapshot's order
    watch: tuple[Problem, ...] = ()
    identity: tuple[Problem, ...] = ()  # nodes answering as another node: shown first
    #: Nodes and chains in maintenance (info lines, not problems: :func:`set_aside`).
    maintenance: tuple[Problem, ...] = ()

    @property
    def node_problems(self) -> list[Problem]:
        return _by_severity(problem for listed in (self.nodes or {}).values() for problem in listed)

    def counts(
        self, pending: bool | None = None, foreseen: bool | None = None
    ) -> dict[Severity, int]:
        """The top lines by severity: every one, or the pending or firing ones alone, the
        likely causes' lines (``foreseen``) or the others alone."""
        every = [*self.identity, *self.network, *self.node_problems, *self.watch]
        listed = [
            p
            for p in every
            if (pending is None or p.pending is pending)
            and (foreseen is None or p.foreseen is foreseen)
        ]
        return {severity: sum(p.severity is severity for p in listed) for severity in Severity}

    def lines(self) -> Iterator[Problem]:
        """Every line, folded ones included, each after the line it is folded under."""
        for problem in (*self.identity, *self.network, *self.node_problems, *self.watch):
            yield from problem.lines()


def attention(
    snapshot: Snapshot,
    now_mono: float,
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
    held: Held | None = None,
) -> Attention:
    """What the page flags for ``snapshot``, as of ``now_mono`` (the end of its cycle), by the
    shipped alerts' thresholds unless ``thresholds`` are given; each line pending or firing
    as ``held`` (the page's memory of earlier cycles, updated here) and the snapshot's own
    times say. Without ``held``, a line whose start no time of the snapshot gives is pending
    from ``now_mono``."""
    held = held if held is not None else Held()
    seen: dict[LineKey, float] = {}
    halted = [_timed(p, now_mono, thresholds, held, seen)
              for p in halted_problems(snapshot, now_mono, thresholds)]  # fmt: skip
    for line in halted:
        if line.chain is not None and not line.pending:
            held.halt_fired[line.chain] = now_mono
    window = thresholds.leader_failed_rounds_window_seconds
    held.halt_fired = {
        chain: at
        for chain, at in held.halt_fired.items()
        if thresholds.held(at, now_mono) <= window
    }
    stopped = frozenset(line.chain for line in halted if line.chain is not None)
    up = sum(1 for node in snapshot.nodes if node.up)
    network = [all_down(snapshot), *halted, *network_problems(snapshot.network, up)]
    network += consensus_problems(
        snapshot, now_mono, thresholds, frozenset(held.halt_fired), stopped
    )
    off = _off_majority(snapshot.network)
    per_node = [node_problems(node, now_mono, snapshot.wall_offset, off, thresholds, halted=stopped)
                for node in snapshot.nodes]  # fmt: skip
    own = isolated_problems(snapshot) + unexpected_problems(snapshot)
    for i, node in enumerate(snapshot.nodes):
        mine = [line for line in own if line.node == node.name]
        per_node[i] = sorted(per_node[i] + mine, key=lambda problem: problem.severity)
    expected = expected_chains(snapshot)
    network = [p for p in network if p is None or p.chain is None or p.chain in expected]
    per_node = [[p for p in lines if p.chain is None or p.chain in expected]
                for lines in per_node]  # fmt: skip
    # the rules leave a halt's symptoms out while its condition holds, and the vote session's,
    # rounds' and leader's for the leader window after it fired (lib/consensus.libsonnet)
    after_halt = frozenset(held.halt_fired)
    network = _without_halt_symptoms(network, stopped, after_halt)
    per_node = [
        [p for p in _without_halt_symptoms(list(lines), stopped, after_halt) if p is not None]
        for lines in per_node
    ]
    symptoms = [p for p in network if p is not None] + [p for own in per_node for p in own]
    network += likely_halts(snapshot, now_mono, symptoms, thresholds)
    watch = watch_problems(snapshot.watch) + unmatched_problems(snapshot.watch)
    identity = identity_problems(snapshot)
    sections = [identity, [p for p in network if p is not None], *per_node, watch]
    sections = [[_timed(p, now_mono, thresholds, held, seen) for p in part] for part in sections]
    held.since = seen
    folded = _fold(sections)  # first: a node's lines go aside with it, folded or not
    nodes = {node.name: folded[2 + i] for i, node in enumerate(snapshot.nodes)}
    listed = Attention(
        tuple(_by_severity(folded[1])), nodes, tuple(_by_severity(folded[-1])), tuple(folded[0])
    )
    return set_aside(listed, snapshot, now_mono, thresholds)


# --- planned work: the config's maintenance entries -----------------------------------------


def set_aside(
    found: Attention,
    snapshot: Snapshot,
    now_mono: float,
    thresholds: Thresholds = SHIPPED_THRESHOLDS,
) -> Attention:
    """``found`` with the problems of nodes and chains in maintenance taken out of the
    problem lists (as Alertmanager's inhibit rules silence their alerts) and named instead
    on each entry's line; the thin-quorum lines say which council members are in
    maintenance."""
    entries = snapshot.maintenance
    if not entries:
        return found
    nodes = {entry.node: entry for entry in entries if entry.node}
    chains = {entry.blockchain: entry for entry in entries if entry.blockchain}
    aside: dict[MaintenanceEntry, list[Problem]] = {entry: [] for entry in entries}

    def listed(problem: Problem) -> bool:
        entry = nodes.get(problem.node or "") or chains.get(problem.chain or "")
        if entry is not None:
            aside[entry].append(problem)
        return entry is None

    away = _council_away(snapshot, nodes) if nodes else {}
    network = tuple(_members_away(p, away) for p in found.network if listed(p))
    per_node = {name: [p for p in own if listed(p)] for name, own in (found.nodes or {}).items()}
    watch = tuple(problem for problem in found.watch if listed(problem))
    identity = tuple(problem for problem in found.identity if listed(problem))
    lines = [_maintenance_line(entry, aside[entry], snapshot, now_mono) for entry in entries]
    lines += _council_margins(snapshot, away, now_mono, thresholds)
    return Attention(network, per_node, watch, identity, tuple(lines))


def _maintenance_line(
    entry: MaintenanceEntry, aside: list[Problem], snapshot: Snapshot, now_mono: float
) -> Problem:
    """An entry as the page lists it: until when, its reason, the alerts it holds back. The
    time left runs to the end the cycle keeps on the monotonic clock, so after a wall-clock
    step it is still the time the window has left (``until`` less the wall time would be off
    by the step, negative after a step forward)."""
    ends = dict(zip(snapshot.maintenance, snapshot.maintenance_ends, strict=False))
    end = ends.get(entry)
    if end is not None:
        left = end - now_mono
    else:
        left = entry.until - (snapshot.unix_time(now_mono) or 0.0)
    text = f"in maintenance until {entry.until_text} ({age(left)} left): {isolated(entry.reason)}"
    alerts = list(dict.fromkeys(problem.alert for problem in aside if problem.alert))
    text += f"; not listed as problems: {', '.join(alerts)}" if alerts else "; no alert now"
    scope = Scope.NODE if entry.node else Scope.NETWORK
    chain = None if entry.node else entry.blockchain
    return Problem(scope, Severity.INFO, None, text, node=entry.node or None, chain=chain)


#: Per chain: the names of its majority council's members whose node is in maintenance, and
#: the council's size.
Away = dict[str, tuple[list[str], int]]


def _council_away(snapshot: Snapshot, nodes: dict[str, MaintenanceEntry]) -> Away:
    """For each chain whose majority council (the council set a strict majority of its
    nodes report) has members in maintenance: their node names and the council's size."""
    majority = {
        chain.blockchain: {node for node, agrees in chain.council_agrees if agrees}
        for chain in snapshot.network.chains
    }
    councils: dict[str, frozenset[str]] = {}
    for node in snapshot.nodes:
        for chain in node.chains:
            if node.name in majority.get(chain.blockchain, ()) and chain.reading:
                councils[chain.blockchain] = chain.reading.council or frozenset()
    keys = dict(snapshot.network.node_keys)  # node name -> nodeId, down ones too
    keys |= {n.name: n.health.node_key for n in snapshot.nodes if n.health and n.health.node_key}
    away: Away = {}
    for blockchain, council in councils.items():
        names = sorted(name for name in nodes if keys.get(name) in council)
        if names:
            away[blockchain] = (names, len(council))
    return away


def _members_away(problem: Problem, away: Away) -> Problem:
    """A thin-quorum line, saying how many of the council's members are in maintenance."""
    if problem.alert != "LedgerCouncilQuorumThin" or problem.chain not in away:
        return problem
    names, _ = away[problem.chain]
    return replace(
        problem, text=f"{problem.text}; in maintenance: {len(names)} ({', '.join(names)})"
    )


def _council_margins(
    snapshot: Snapshot, away: Away, now_mono: float, thresholds: Thresholds
) -> list[Problem]:
    """Per chain whose council has members in maintenance: how many, and the quorum margin
    left (members up among the polled nodes minus the votes a session needs)."""
    readers = _readers(snapshot) if away else {}
    found = []
    for chain in snapshot.network.chains:
        if chain.blockchain not in away:
            continue
        names, size = away[chain.blockchain]
        text = f"{len(names)} of the council's {size} members in maintenance ({', '.join(names)})"
        required = _required_votes(readers.get(chain.blockchain, []), now_mono, thresholds)
        up = chain.council_members_up
        if up is not None and required is not None:
            text += (
                f"; {up} members up among the polled nodes, a session needs {required:.0f}"
                f" votes: quorum margin {up - required:.0f}"
            )
        found.append(Problem(Scope.NETWORK, Severity.INFO, None, text, chain=chain.blockchain))
    return found
