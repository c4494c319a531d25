"""The exporter's landing page: version, links, and each node's state at a glance."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from exporter import __version__
from exporter.snapshot import NodeStatus, Snapshot

_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
    ".up{color:#080}.down{color:#b00}"
)


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _node_row(node: NodeStatus) -> str:
    state = '<span class="up">up</span>' if node.up else '<span class="down">down</span>'
    chains = "<br>".join(
        f"{escape(chain.blockchain)}: "
        + (
            f"height {chain.reading.height:.0f}"
            if chain.reading and chain.reading.height is not None
            else escape(chain.error or "no height reported")
        )
        for chain in node.chains
    )
    return (
        f"<tr><td>{escape(node.name)}</td><td>{state}</td>"
        f"<td>{escape(node.error or '')}</td><td>{_when(node.last_success)}</td>"
        f"<td>{chains or '&mdash;'}</td></tr>"
    )


def landing_page(snapshot: Snapshot) -> str:
    """HTML for ``/``; every value from a node is escaped, URLs are never shown."""
    if snapshot.completed_at is None:
        status = "<p>The first polling cycle has not finished yet.</p>"
    else:
        status = (
            f"<p>Last cycle finished {_when(snapshot.completed_at)} "
            f"in {snapshot.cycle_duration or 0:.3f}s.</p>"
        )
    rows = "".join(_node_row(node) for node in snapshot.nodes)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ledger-exporter</title>"
        f"<style>{_STYLE}</style></head><body><h1>ledger-exporter {escape(__version__)}</h1>"
        "<p><a href='/metrics'>Metrics</a> &middot; <a href='/-/healthy'>Health</a> &middot; "
        f"<a href='/-/ready'>Readiness</a></p>{status}"
        "<table><tr><th>Node</th><th>State</th><th>Last error</th><th>Last success</th>"
        f"<th>Blockchains</th></tr>{rows}</table></body></html>"
    )
