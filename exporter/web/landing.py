"""The landing page: a status page an operator keeps open, the worst problem first.

Plain HTML that refreshes itself (no JavaScript): a banner with the problems of a failed
config reload, the network as a whole (forks, splits without a majority, partitions, council
views), then each node's and chain's problems and the watched contracts and wallets, each
list most severe first with the severity and name of the shipped alert it mirrors, linked to
its runbook (:mod:`exporter.web.problems`), one line per incident (what its cause explains
folded under it, as Alertmanager's inhibitions silence those alerts), then every node and
every chain (a down node's chains too, unknown). Ages, not clock times; chain
ids and long names shortened with the full value on hover; long texts wrap, so the page never
scrolls sideways. Everything a node sends and every config problem is escaped, its control
and bidirectional characters shown as ``\\uXXXX`` (:mod:`exporter.text`), and isolated in a
``<bdi>``: no text a node sends can reorder the page around it (an alert's or a node's name).

The page is rendered once per snapshot (:class:`StatusPage`), so a flood of requests costs a
copy of its bytes each: its ages are as of the end of the cycle it shows, and the one line
rendered per request says how long ago that was.
"""

from __future__ import annotations

import re
import time
from html import escape

from exporter import __version__
from exporter.model.fields import (
    BLOCKCHAIN_PEERS,
    COUNCIL_MEMBERS,
    IN_COUNCIL,
    SYNCING,
    VOTE_ROUND,
    ChainReading,
    Field,
)
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.text import ISOLATE_END, ISOLATE_START, visible
from exporter.web.alert_thresholds import SHIPPED, Severity
from exporter.web.problems import Attention, Problem, Scope, age, attention, peers_lost

__all__ = ["StatusPage"]

REFRESH_SECONDS = 10
SHORT_ID = 12  # chain ids (and watched names) longer than this show their first 8 characters
RELOAD_PROBLEMS_SHOWN = 20  # a failed reload's problems in the banner; the rest are counted

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:100em}"
    "table{border-collapse:collapse;margin-bottom:1.5em;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    # numbers, names and short ids never break; free text (errors, versions, problems) wraps
    # anywhere, so a long one makes its own cell taller instead of the page wider
    "td.n,td.k{white-space:nowrap}td.t{overflow-wrap:anywhere}"
    "li,p,.banner{overflow-wrap:anywhere}"
    ".bad{color:#b00;font-weight:bold}.warn{color:#a60}.ok{color:#080}.muted{color:#666}"
    ".banner{background:#fdd;border:1px solid #b00;padding:.6em;margin:1em 0}"
    ".banner ul{margin:.3em 0}"
    "ul.problems{list-style:none;padding-left:0}ul.problems li{margin:.25em 0}"
    # the lines a cause explains, under its line: indented, their badges outlined
    "ul.folded{list-style:none;padding-left:1.6em;margin:.15em 0;font-size:92%}"
    "ul.folded .sev{background:#fff;border:1px solid currentColor}"
    "ul.folded .critical{color:#b00}ul.folded .warning{color:#a60}ul.folded .info{color:#57a}"
    ".sev{display:inline-block;min-width:4.8em;text-align:center;font-size:80%;"
    "font-weight:bold;border-radius:3px;padding:0 .3em;margin-right:.4em;color:#fff}"
    ".critical{background:#b00}.warning{background:#c70}.info{background:#57a}"
    "tr.problem{background:#fff3f3}code{font-size:90%}small.alert,small.alert a{color:#666}"
    # a pending line: its alert has not fired; its badge outlined, its marker in italics
    "li.pending>.sev{background:#fff;border:1px dashed currentColor}"
    "li.pending>.critical{color:#b00}li.pending>.warning{color:#a60}li.pending>.info{color:#57a}"
    ".state{font-style:italic;color:#555;margin-right:.3em}"
)


#: How a table cell shows its row's worst problem.
_TEXT_CLASS = {Severity.CRITICAL: "bad", Severity.WARNING: "warn", Severity.INFO: "muted"}


def _ago(timestamp: float | None, now: float) -> str:
    return "never" if timestamp is None else f"{age(now - timestamp)} ago"


def _shown(text: str) -> str:
    """A value (a node's or the config's) as HTML: visible, escaped and isolated."""
    return f"<bdi>{escape(visible(text))}</bdi>"


#: A value a problem's text marks as isolated (:func:`exporter.text.isolated`).
_ISOLATED = re.compile(f"{ISOLATE_START}([^{ISOLATE_START}{ISOLATE_END}]*){ISOLATE_END}")


def _plain(text: str) -> str:
    """A problem's text as HTML: escaped and visible, and each value it marks isolated."""
    parts = _ISOLATED.split(text)  # text, value, text, value, ..., text
    return "".join(
        _shown(part) if index % 2 else escape(visible(part)) for index, part in enumerate(parts)
    )


def _short(text: str) -> str:
    """A chain id or watched name: shortened past SHORT_ID characters, whole on hover."""
    text = visible(text)
    short = text if len(text) <= SHORT_ID else text[:8] + "\u2026"
    return f'<bdi><code title="{escape(text)}">{escape(short)}</code></bdi>'


def _gauge(reading: ChainReading | None, gauge: Field) -> float | None:
    return None if reading is None else reading.gauge(gauge)


def _number(value: float | None) -> str:
    return "&mdash;" if value is None else f"{value:.0f}"


def _flag(value: float | None, yes: str = "yes") -> str:
    return "&mdash;" if value is None else (yes if value else "no")


# --- problems ------------------------------------------------------------------------------


def _where(problem: Problem) -> str:
    """Node, chain and watched object of a problem, as the line's lead."""
    parts = []
    if problem.node is not None:
        parts.append(f"<b>{_shown(problem.node)}</b>")
    if problem.subject is not None:
        parts.append(_short(problem.subject))
    if problem.chain is not None:
        parts.append(f"chain {_short(problem.chain)}")
    return " ".join(parts)


def _alert(name: str) -> str:
    """An alert's name, linked to its runbook (the rule's runbook_url)."""
    link = escape(SHIPPED.runbook(name))
    return f'<small class="alert"><a href="{link}" rel="noreferrer">{_shown(name)}</a></small>'


def _state(problem: Problem) -> str:
    """A pending line's marker: how long until its alert fires (nothing on a firing line)."""
    if not problem.pending or problem.fires_in is None:
        return ""
    when = f"fires in {age(problem.fires_in)}"
    if problem.foreseen:
        return f'<span class="state">likely cause, no alert yet: {when}</span> '
    return f'<span class="state">pending: {when}</span> '


def _line(problem: Problem) -> str:
    severity = problem.severity.label
    alert = f" {_alert(problem.alert)}" if problem.alert else ""
    where = _where(problem)
    folded = ""
    if problem.folded:
        folded = '<ul class="folded">' + "".join(map(_line, problem.folded)) + "</ul>"
    pending = ' class="pending"' if problem.pending else ""
    return (
        f'<li{pending}><span class="sev {severity}">{severity}</span> {_state(problem)}'
        f"{where}{': ' if where else ''}<bdi>{_plain(problem.text)}</bdi>{alert}{folded}</li>"
    )


#: A section without a line of its own, whose problems are folded under another's.
_FOLDED_AWAY = "Each problem here is folded under the line of its cause above."


def _problem_list(
    problems: list[Problem] | tuple[Problem, ...], fine: str, folded_away: bool = False
) -> str:
    if not problems and folded_away:
        return f'<p class="muted">{_FOLDED_AWAY}</p>'
    if not problems:
        return f'<p class="ok">{fine}</p>'
    return '<ul class="problems">' + "".join(_line(problem) for problem in problems) + "</ul>"


def _counts(found: Attention, pending: bool = False, severities: tuple[Severity, ...] = ()) -> str:
    """The top lines of ``severities`` (all by default), firing or ``pending``, counted (a
    likely cause's line apart: :func:`_likely`)."""
    counts = found.counts(pending, foreseen=False)
    listed = [f"{counts[s]} {s.label}" for s in severities or tuple(Severity) if counts[s]]
    return ", ".join(listed)


_ALARMS = (Severity.CRITICAL, Severity.WARNING)


def _heading(found: Attention) -> str:
    """Red for a critical alert firing, amber for a warning one, or for warnings and critical
    ones pending (none has fired yet); calm otherwise. Info lines and pending ones are
    counted below it, plainly."""
    alarms = _counts(found, severities=_ALARMS)
    waiting = found.counts(pending=True)  # a likely cause's line too
    coming = ", ".join(f"{waiting[s]} {s.label}" for s in _ALARMS if waiting[s])
    if alarms:
        firing = found.counts(pending=False)
        tone = "bad" if firing[Severity.CRITICAL] else "warn"
        heading = f'<h2 class="{tone}">Needs attention: {alarms}</h2>'
    elif coming:  # nothing has fired: amber, not red
        heading = f'<h2 class="warn">Needs attention soon: {coming} pending</h2>'
    else:
        heading = '<h2 class="ok">Nothing needs attention</h2>'
    notes = []
    info = _counts(found, severities=(Severity.INFO,))
    if info:
        notes.append(f"Also listed: {info} (no action needed).")
    likely = found.counts(pending=True, foreseen=True)
    if any(likely.values()):
        shown = ", ".join(f"{likely[s]} {s.label}" for s in Severity if likely[s])
        notes.append(f"Likely to come: {shown} (its lines are under it; no alert yet).")
    pending = _counts(found, pending=True)
    if pending:
        notes.append(
            f"Pending: {pending} (the condition holds; the alert fires if it lasts its"
            " <code>for</code>)."
        )
    return heading + (f'<p class="muted">{" ".join(notes)}</p>' if notes else "")


def _title(found: Attention) -> str:
    firing = _counts(found, severities=_ALARMS)
    pending = sum(found.counts(pending=True, foreseen=False).values())
    parts = [firing] if firing else []
    return ", ".join([*parts, f"{pending} pending"] if pending else parts)


def _attention(snapshot: Snapshot, found: Attention) -> str:
    """The network section, then nodes and chains, then watched objects: most severe first."""
    if not snapshot.nodes:
        return _probe_only() if snapshot.probe_mode else ""
    heading = _heading(found)
    compared = sum(node.up for node in snapshot.nodes) >= 2
    network = _problem_list(
        found.network,
        "In agreement: one block at each checkpoint, one council and one consensus "
        "configuration per chain, every up node linked to the others, no vote session stuck, "
        "no leader failing, no quorum worn thin (among the nodes this exporter polls)."
        if compared
        else "Nothing to compare: fewer than two polled nodes are up.",
    )
    scopes = {line.scope for line in found.lines()}
    nodes = _problem_list(
        found.node_problems, "Every node is up and in step.", Scope.NODE in scopes
    )
    nodes += _maintenance(found)
    watch = ""
    if snapshot.watch.objects or snapshot.watch.unmatched:
        watch = "<h3>Watched contracts and wallets</h3>" + _problem_list(
            found.watch,
            "Every watched contract is ACTIVE and every watched wallet enabled.",
            Scope.WATCH in scopes,
        )
    # a node answering as another node first: what the rest says of it is on its word
    first = _problem_list(found.identity, "") if found.identity else ""
    return (
        f"{heading}{first}<h3>Network</h3>{network}<h3>Nodes and chains</h3>{nodes}{watch}"
        '<p class="muted"><small>Severities are those of the shipped alerts named on each '
        "line, each name a link to its runbook; a problem is listed from the first cycle its "
        "alert's condition holds, marked pending until the alert's <code>for</code> has passed"
        " (as Prometheus lists it), except syncing, which is info until its alert fires. One "
        "line per incident: the lines its cause explains are under it, as the shipped "
        "Alertmanager config inhibits their alerts, and are not counted; where most nodes of one "
        "chain stand at one height while its consensus fails, that chain's halt is listed from "
        "the first cycle, marked as the likely cause, before its alert's condition holds."
        "</small></p>"
    )


def _maintenance(found: Attention) -> str:
    """The nodes and chains in maintenance, apart from the problems: each entry's until,
    reason and the alerts it holds back, and the council margin where members are away."""
    if not found.maintenance:
        return ""
    lines = "".join(_line(line) for line in found.maintenance)
    return (
        '<h3>In maintenance</h3><ul class="problems maintenance">'
        f"{lines}</ul><p class=muted><small>From the config's <code>maintenance</code> "
        "entries: still polled, their alerts inhibited in Alertmanager.</small></p>"
    )


def _probe_only() -> str:
    return (
        "<h2>Probe mode</h2><p>This exporter polls no nodes of its own: its config has a "
        "<code>probe</code> section and no <code>nodes</code>. Prometheus asks "
        "<code>/probe?target=URL&amp;module=NAME</code> for each node, and each probe is one "
        "poll on its own: there is no fleet to show here. A node's state is in the probes' "
        "series (<code>ledger_probe_success</code>; alerts <code>LedgerProbeFailed</code> and "
        "<code>LedgerProbeBlockHeightStalled</code>).</p>"
    )


def _banner(snapshot: Snapshot) -> str:
    if snapshot.config_reload_ok:
        return ""
    problems = snapshot.config_reload_problems
    shown = "".join(f"<li>{_shown(p)}</li>" for p in problems[:RELOAD_PROBLEMS_SHOWN])
    more = len(problems) - RELOAD_PROBLEMS_SHOWN
    if more > 0:
        shown += f"<li>and {more} more (<code>ledger-exporter --config.check</code>)</li>"
    listed = f"<ul>{shown}</ul>" if shown else ""
    return (
        '<div class="banner"><b class="bad">The last configuration reload failed</b>: the '
        f"previous configuration is still running.{listed}Fix the file, then reload again "
        "(<code>POST /-/reload</code> or <code>SIGHUP</code>). "
        f"{_alert('LedgerExporterConfigReloadFailed')}</div>"
    )


# --- tables ---------------------------------------------------------------------------------


def _node_row(node: NodeStatus, problems: list[Problem], now: float) -> str:
    health = node.health
    state = '<span class="ok">up</span>' if node.up else '<span class="bad">down</span>'
    peers = health.peer_count if health else None
    peer_class = " bad" if peers_lost(peers) else ""
    error = _shown(node.error) if node.error else ""
    if node.error and node.last_success is not None:
        error += f" <small>(since last success, {_ago(node.last_success, now)})</small>"
    return (
        f"<tr{' class=problem' if problems else ''}><td class=k>{_shown(node.name)}</td>"
        f'<td class=k>{state}</td><td class="n{peer_class}">{_number(peers)}</td>'
        f"<td class=t>{_shown(health.node_version or '') if health else ''}</td>"
        f"<td class=t>{error}</td><td class=k>{_ago(node.last_success, now)}</td></tr>"
    )


def _chain_row(node: NodeStatus, chain: ChainStatus, now: float, problems: list[Problem]) -> str:
    reading = chain.reading
    height = reading.height if reading else None
    changed = "&mdash;" if chain.height_changed_at is None else _ago(chain.height_changed_at, now)
    council = _flag(_gauge(reading, IN_COUNCIL), "member")
    members = _gauge(reading, COUNCIL_MEMBERS)
    if members is not None:
        council += f" of {members:.0f}"
    numbers = (height, chain.blocks_behind)
    texts = (changed, _flag(_gauge(reading, SYNCING)), council)
    counts = (_gauge(reading, VOTE_ROUND), _gauge(reading, BLOCKCHAIN_PEERS))
    worst = min((p.severity for p in problems if not p.pending), default=Severity.INFO)
    shown = "; ".join(f"<bdi>{_plain(p.text)}</bdi>" for p in problems)
    problem = f'<span class="{_TEXT_CLASS[worst]}">{shown}</span>' if problems else ""
    return (
        f"<tr{' class=problem' if problems else ''}><td class=k>{_shown(node.name)}</td>"
        f"<td class=k>{_short(chain.blockchain)}</td>"
        + "".join(f'<td class="n">{_number(value)}</td>' for value in numbers)
        + "".join(f"<td class=k>{text}</td>" for text in texts)
        + "".join(f'<td class="n">{_number(value)}</td>' for value in counts)
        + f"<td class=t>{problem}</td></tr>"
    )


def _unknown_row(node: NodeStatus, blockchain: str, problems: list[Problem]) -> str:
    """A down node's chain: nothing known this cycle, its line says what was last read."""
    shown = "; ".join(f"<bdi>{_plain(p.text)}</bdi>" for p in problems)
    return (
        f"<tr><td class=k>{_shown(node.name)}</td><td class=k>{_short(blockchain)}</td>"
        + '<td class="n">&mdash;</td>' * 2
        + "<td class=k>&mdash;</td>" * 3
        + '<td class="n">&mdash;</td>' * 2
        + f'<td class=t><span class="muted">{shown}</span></td></tr>'
    )


def _tables(nodes: list[NodeStatus], found: Attention, now: float) -> str:
    if not nodes:
        return ""
    per_node: dict[str, list[Problem]] = {node.name: [] for node in nodes}
    for line in found.lines():  # folded lines too: a row shows all of its own
        if line.node in per_node:
            per_node[line.node].append(line)
    node_rows = "".join(_node_row(node, per_node[node.name], now) for node in nodes)
    chains = []
    for node in nodes:
        for chain in node.chains:
            mine = [p for p in per_node[node.name] if p.chain == chain.blockchain]
            row = _chain_row(node, chain, now, mine)
            chains.append((min((p.severity for p in mine), default=len(Severity)), row))
        for blockchain, _ in node.last_chains:  # the node is down: unknown, after problems
            mine = [p for p in per_node[node.name] if p.chain == blockchain]
            chains.append((Severity.INFO, _unknown_row(node, blockchain, mine)))
    chains.sort(key=lambda row: row[0])
    chain_rows = "".join(row for _, row in chains)
    return (
        "<h2>Nodes</h2><table><tr><th>Node</th><th>State</th><th>Peers</th><th>Version</th>"
        f"<th>Last error</th><th>Last success</th></tr>{node_rows}</table>"
        "<h2>Blockchains</h2><table><tr><th>Node</th><th>Chain</th><th>Height</th>"
        "<th>Blocks behind</th><th>Height changed</th><th>Syncing</th><th>Council</th>"
        f"<th>Vote round</th><th>Peers</th><th>Problem</th></tr>{chain_rows}</table>"
    )


def _stale(snapshot: Snapshot, now: float) -> str:
    """Past the snapshot's stale bound (no cycle has ended since: they fail or hang), a
    banner saying so, how old the page's data is, and what to check; else nothing."""
    if snapshot.completed_at is None or snapshot.stale_after is None:
        return ""
    if not snapshot.is_stale_at(now):
        return ""
    return (
        '<div class="banner"><b class="bad">Stale: no polling cycle has ended for '
        f"{age(now - snapshot.completed_at)}</b>, past this exporter's bound of "
        f"{age(snapshot.stale_after)} (<code>ledger_exporter_stale_after_seconds</code>). "
        "Everything below is as of the last cycle that ended and may no longer be true; "
        "meanwhile <code>/metrics</code> leaves out every node, chain, network and watch "
        "series and <code>/-/ready</code> answers 503. Check the exporter's log (errors "
        "naming the cycle's stage) and <code>ledger_exporter_cycle_failures_total</code>; "
        "if no cycle ends and nothing is logged, the exporter is stuck or starved of CPU: "
        f"restart it. {_alert('LedgerExporterCycleFailing')}</div>"
    )


def _summary(snapshot: Snapshot, now: float) -> str:
    """The one line that follows the clock: how long ago the cycle shown ended (after a
    banner once that is past the stale bound)."""
    if snapshot.completed_at is None:
        return "<p>The first polling cycle has not finished yet.</p>"
    stale = _stale(snapshot, now)
    if not snapshot.nodes:
        finished = _ago(snapshot.completed_at, now)
        return (
            f"{stale}<p>Probe mode, no nodes polled. Last cycle finished {finished}; "
            f"this page refreshes every {REFRESH_SECONDS}s.</p>"
        )
    up = sum(node.up for node in snapshot.nodes)
    probe = " Probe mode is on too (<code>/probe</code>)." if snapshot.probe_mode else ""
    return (
        f"{stale}<p>{up} of {len(snapshot.nodes)} nodes up. Last cycle finished "
        f"{_ago(snapshot.completed_at, now)} and took {snapshot.cycle_duration or 0:.2f}s; "
        f"ages on this page are as of its end; this page refreshes every {REFRESH_SECONDS}s."
        f"{probe}</p>"
    )


class StatusPage:
    """The page for one snapshot, rendered once, as of the end of its cycle (its ages do not
    move until the next cycle's page); :meth:`at` adds the line saying how long ago that was."""

    def __init__(
        self,
        snapshot: Snapshot,
        telemetry_path: str = "/metrics",
        found: Attention | None = None,
    ) -> None:
        """``found``: the snapshot's lines as the web server's :class:`Held` saw them (each
        pending or firing since earlier cycles); without it, computed from this snapshot
        alone."""
        self.snapshot = snapshot
        as_of = snapshot.completed_at if snapshot.completed_at is not None else time.monotonic()
        found = found if found is not None else attention(snapshot, as_of)
        worst: dict[str | None, int] = {}
        for line in found.lines():  # folded lines too: a node's own problems, wherever listed
            worst[line.node] = min(worst.get(line.node, len(Severity)), line.severity)

        def order(node: NodeStatus) -> tuple[int, bool]:
            return worst.get(node.name, len(Severity)), node.up

        nodes = sorted(snapshot.nodes, key=order)
        counts = _title(found) if snapshot.completed_at is not None else ""
        title = f"({counts}) ledger-exporter" if counts else "ledger-exporter"
        self._head = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{REFRESH_SECONDS}'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>ledger-exporter {escape(__version__)}</h1>"
            f"<p><a href='{escape(telemetry_path)}'>Metrics</a> &middot; "
            "<a href='/-/healthy'>Health</a> &middot; "
            f"<a href='/-/ready'>Readiness</a></p>{_banner(snapshot)}"
        ).encode()
        listed = _attention(snapshot, found) if snapshot.completed_at is not None else ""
        self._body = f"{listed}{_tables(nodes, found, as_of)}</body></html>".encode()

    def at(self, now: float) -> bytes:
        """The page as served at ``now`` (``time.monotonic()``, the snapshot's clock): the
        cached bytes around one fresh line."""
        return b"".join((self._head, _summary(self.snapshot, now).encode(), self._body))
