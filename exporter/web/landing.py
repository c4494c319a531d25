"""The landing page: a status page an operator keeps open, problems first.

Plain HTML that refreshes itself (no JavaScript): a banner when the last config reload failed,
a list of what needs attention, then every node (state, peers, version, last error and since
when) and every chain (height, blocks behind, time since the height changed, syncing, council,
vote round, its error). Ages, not clock times; long chain ids shortened with the full id on
hover. Everything a node sends is escaped. Thresholds follow the shipped alert rules.

The page is rendered once per snapshot (:class:`StatusPage`), so a flood of requests costs a
copy of its bytes each: its ages are as of the end of the cycle it shows, and the one line
rendered per request says how long ago that was.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from exporter import __version__
from exporter.model.network import NetworkView
from exporter.model.readings import ChainGauge, ChainReading
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot

REFRESH_SECONDS = 10
SHORT_ID = 12  # chain ids longer than this are shortened to their first 8 characters
#: The shipped alerts' thresholds (mixin/config.libsonnet; tests/test_landing.py ties them):
STALLED_SECONDS = 600  # LedgerBlockHeightStalled: heightStalledSeconds
BEHIND_BLOCKS = 10  # LedgerNodeBehind: blocksBehindThreshold
PEERS_LOST = 0  # LedgerNodePeersLost: no peers at all

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#b00;font-weight:bold}.warn{color:#a60}.ok{color:#080}"
    ".banner{background:#fdd;border:1px solid #b00;padding:.6em;margin:1em 0}"
    "tr.problem{background:#fff3f3}code{font-size:90%}"
)


@dataclass(frozen=True)
class _Problem:
    node: str
    chain: str | None
    text: str


def _age(seconds: float) -> str:
    """``4s``, ``3m 12s``, ``2h 5m``, ``3d 4h``."""
    seconds = max(0, int(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} {seconds % size // sub_size}{sub}"
    return f"{seconds // 60}m {seconds % 60}s" if seconds >= 60 else f"{seconds}s"


def _ago(timestamp: float | None, now: float) -> str:
    return "never" if timestamp is None else f"{_age(now - timestamp)} ago"


def _chain_id(chain: str) -> str:
    short = chain if len(chain) <= SHORT_ID else chain[:8] + "\u2026"
    return f'<code title="{escape(chain)}">{escape(short)}</code>'


def _gauge(reading: ChainReading | None, gauge: ChainGauge) -> float | None:
    return None if reading is None else reading.gauge(gauge)


def _number(value: float | None) -> str:
    return "&mdash;" if value is None else f"{value:.0f}"


def _flag(value: float | None, yes: str = "yes") -> str:
    return "&mdash;" if value is None else (yes if value else "no")


Notes = Mapping[tuple[str, str], list[str]]


def _network_notes(network: NetworkView) -> dict[tuple[str, str], list[str]]:
    """Per (node, chain), where the node disagrees with the majority of the polled nodes."""
    notes: dict[tuple[str, str], list[str]] = {}
    for chain in network.chains:
        for node, agrees in chain.block_agrees:
            if not agrees:
                text = f"block at checkpoint {chain.checkpoint_height} is not the majority's"
                notes.setdefault((node, chain.blockchain), []).append(text)
        for node, agrees in chain.council_agrees:
            if not agrees:
                notes.setdefault((node, chain.blockchain), []).append(
                    "council is not the majority's"
                )
    if len(network.polled_peers) > 1:
        for node, linked in network.polled_peers:
            if linked == 0:
                notes.setdefault((node, ""), []).append("no link to any other polled node")
    return notes


def _chain_problems(
    node: NodeStatus, chain: ChainStatus, now: float, notes: Notes | None = None
) -> list[str]:
    if chain.reading is None:
        return [f"chain down: {chain.error or 'no reading'}"]
    problems = list((notes or {}).get((node.name, chain.blockchain), []))
    syncing = _gauge(chain.reading, ChainGauge.SYNCING)
    if chain.height_changed_at is not None and now - chain.height_changed_at > STALLED_SECONDS:
        problems.append(f"height unchanged for {_age(now - chain.height_changed_at)}")
    elif chain.blocks_behind is not None and chain.blocks_behind > BEHIND_BLOCKS and not syncing:
        problems.append(f"{chain.blocks_behind:.0f} blocks behind")
    if syncing:
        problems.append("syncing")
    return problems


def _node_problems(node: NodeStatus, now: float, notes: Notes) -> list[_Problem]:
    if not node.up:
        since = (
            "never up" if node.last_success is None else f"down for {_age(now - node.last_success)}"
        )
        return [_Problem(node.name, None, f"{since}: {node.error or 'no answer'}")]
    problems = []
    peers = node.health.peer_count if node.health else None
    if peers == PEERS_LOST:
        problems.append(_Problem(node.name, None, "no peers"))
    problems += [_Problem(node.name, None, text) for text in notes.get((node.name, ""), [])]
    for chain in node.chains:
        problems += [
            _Problem(node.name, chain.blockchain, text)
            for text in _chain_problems(node, chain, now, notes)
        ]
    return problems


def _problem_list(problems: list[_Problem]) -> str:
    if not problems:
        return '<h2>Needs attention</h2><p class="ok">Nothing: every node is up and in step.</p>'
    items = "".join(
        f"<li><b>{escape(p.node)}</b>"
        + (f" chain {_chain_id(p.chain)}" if p.chain is not None else "")
        + f": {escape(p.text)}</li>"
        for p in problems
    )
    return f'<h2 class="bad">Needs attention ({len(problems)})</h2><ul>{items}</ul>'


def _node_row(node: NodeStatus, problems: list[_Problem], now: float) -> str:
    health = node.health
    state = '<span class="ok">up</span>' if node.up else '<span class="bad">down</span>'
    peers = health.peer_count if health else None
    peer_class = " bad" if peers == PEERS_LOST else ""
    error = escape(node.error) if node.error else ""
    if node.error and node.last_success is not None:
        error += f" <small>(since last success, {_ago(node.last_success, now)})</small>"
    return (
        f"<tr{' class=problem' if problems else ''}><td>{escape(node.name)}</td><td>{state}</td>"
        f'<td class="n{peer_class}">{_number(peers)}</td>'
        f"<td>{escape(health.node_version or '') if health else ''}</td>"
        f"<td>{error}</td><td>{_ago(node.last_success, now)}</td></tr>"
    )


def _chain_row(node: NodeStatus, chain: ChainStatus, now: float, notes: Notes) -> str:
    reading = chain.reading
    problems = _chain_problems(node, chain, now, notes)
    height = reading.height if reading else None
    changed = _ago(chain.height_changed_at, now) if chain.height_changed_at else "&mdash;"
    council = _flag(_gauge(reading, ChainGauge.IN_COUNCIL), "member")
    members = _gauge(reading, ChainGauge.COUNCIL_MEMBERS)
    if members is not None:
        council += f" of {members:.0f}"
    numbers = (height, chain.blocks_behind)
    texts = (changed, _flag(_gauge(reading, ChainGauge.SYNCING)), council)
    counts = (_gauge(reading, ChainGauge.VOTE_ROUND), _gauge(reading, ChainGauge.PEERS))
    problem = f'<span class="bad">{escape("; ".join(problems))}</span>' if problems else ""
    return (
        f"<tr{' class=problem' if problems else ''}><td>{escape(node.name)}</td>"
        f"<td>{_chain_id(chain.blockchain)}</td>"
        + "".join(f'<td class="n">{_number(value)}</td>' for value in numbers)
        + "".join(f"<td>{text}</td>" for text in texts)
        + "".join(f'<td class="n">{_number(value)}</td>' for value in counts)
        + f"<td>{problem}</td></tr>"
    )


def _tables(
    nodes: list[NodeStatus], problems: dict[str, list[_Problem]], now: float, notes: Notes
) -> str:
    node_rows = "".join(_node_row(node, problems[node.name], now) for node in nodes)
    chains = [(node, chain) for node in nodes for chain in node.chains]
    chains.sort(key=lambda pair: not _chain_problems(pair[0], pair[1], now, notes))
    chain_rows = "".join(_chain_row(node, chain, now, notes) for node, chain in chains)
    return (
        "<h2>Nodes</h2><table><tr><th>Node</th><th>State</th><th>Peers</th><th>Version</th>"
        f"<th>Last error</th><th>Last success</th></tr>{node_rows}</table>"
        "<h2>Blockchains</h2><table><tr><th>Node</th><th>Chain</th><th>Height</th>"
        "<th>Blocks behind</th><th>Height changed</th><th>Syncing</th><th>Council</th>"
        f"<th>Vote round</th><th>Peers</th><th>Problem</th></tr>{chain_rows}</table>"
    )


def _summary(snapshot: Snapshot, now: float) -> str:
    """The one line that follows the clock: how long ago the cycle shown ended."""
    if snapshot.completed_at is None:
        return "<p>The first polling cycle has not finished yet.</p>"
    up = sum(node.up for node in snapshot.nodes)
    return (
        f"<p>{up} of {len(snapshot.nodes)} nodes up. Last cycle finished "
        f"{_ago(snapshot.completed_at, now)} and took {snapshot.cycle_duration or 0:.2f}s; "
        f"ages on this page are as of its end; this page refreshes every {REFRESH_SECONDS}s.</p>"
    )


class StatusPage:
    """The page for one snapshot, rendered once, as of the end of its cycle (its ages do not
    move until the next cycle's page); :meth:`at` adds the line saying how long ago that was."""

    def __init__(self, snapshot: Snapshot, telemetry_path: str = "/metrics") -> None:
        self.snapshot = snapshot
        as_of = snapshot.completed_at if snapshot.completed_at is not None else time.time()
        notes = _network_notes(snapshot.network)
        problems = {node.name: _node_problems(node, as_of, notes) for node in snapshot.nodes}
        nodes = sorted(snapshot.nodes, key=lambda node: (node.up, not problems[node.name]))
        banner = (
            ""
            if snapshot.config_reload_ok
            else '<div class="banner bad">The last configuration reload failed: the previous '
            "configuration is still running. The exporter's log says why.</div>"
        )
        listed = [problem for node in nodes for problem in problems[node.name]]
        self._head = (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{REFRESH_SECONDS}'>"
            f"<title>ledger-exporter</title><style>{_STYLE}</style></head><body>"
            f"<h1>ledger-exporter {escape(__version__)}</h1>"
            f"<p><a href='{escape(telemetry_path)}'>Metrics</a> &middot; "
            "<a href='/-/healthy'>Health</a> &middot; "
            f"<a href='/-/ready'>Readiness</a></p>{banner}"
        ).encode()
        self._body = (
            f"{_problem_list(listed) if snapshot.completed_at is not None else ''}"
            f"{_tables(nodes, problems, as_of, notes)}</body></html>"
        ).encode()

    def at(self, now: float) -> bytes:
        """The page as served at ``now``: the cached bytes around one fresh line."""
        return b"".join((self._head, _summary(self.snapshot, now).encode(), self._body))


def landing_page(snapshot: Snapshot, now: float | None = None) -> str:
    """HTML for ``/``; every value from a node is escaped, URLs are never shown."""
    return StatusPage(snapshot).at(time.time() if now is None else now).decode()
