"""Draw a shipped Grafana dashboard from real data, for the README's picture: run
``ledger-exporter demo --prometheus`` (the simulator, the exporter and a real Prometheus with
the project's rules) for a few minutes with faults switched on, run each panel's own PromQL
against that Prometheus, draw the panels where the dashboard places them into an HTML page,
and screenshot it with headless Chromium.

No Grafana runs here: the drawing is this script's (lines for time series and timelines, the
last value for stats, the rows for tables), the data and the queries are the real ones.

    .venv/bin/python tools/render_dashboard.py --rows 2 --output docs/images/fleet-dashboard.png
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DASHBOARD = REPO / "grafana" / "dashboards" / "ledger-fleet.json"
#: Grafana's variables, as "All" selects them, and its interval macros.
VARIABLES = {"job": ".+", "instance": ".+", "node": ".+", "blockchain": ".+"}
MACROS = {"__rate_interval": "1m", "__interval": "15s"}
GRID_COLUMNS = 24
PAGE_WIDTH = 1280
ROW_HEIGHT = 28  # pixels per grid unit of height
COLOURS = ("#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0")

Series = tuple[dict[str, str], list[tuple[float, float]]]


@dataclass
class Panel:
    """One panel of the dashboard: where it sits, what it draws, the data it got."""

    title: str
    kind: str
    grid: dict[str, int]
    unit: str = ""
    targets: list[dict[str, Any]] = field(default_factory=list)
    series: list[tuple[str, list[tuple[float, float]]]] = field(default_factory=list)


def substitute(expr: str, range_seconds: int) -> str:
    """A panel's PromQL with Grafana's variables and macros replaced as Grafana would."""
    values = {**VARIABLES, **MACROS, "__range": f"{range_seconds}s"}

    def one(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        return values.get(name, match[0])

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def legend(template: str | None, labels: dict[str, str]) -> str:
    """A series' name from the target's legendFormat (``{{label}}``), else its labels."""
    if template and template != "__auto":
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), template)
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"


def panels_of(dashboard: dict[str, Any], rows: int | None) -> list[Panel]:
    """The dashboard's panels in order, rows included, up to the ``rows``-th row's end."""
    found: list[Panel] = []
    seen_rows = 0

    def walk(items: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from walk(item.get("panels", []))

    for item in walk(dashboard["panels"]):
        if item["type"] == "row":
            seen_rows += 1
            if rows is not None and seen_rows > rows:
                break
        defaults = (item.get("fieldConfig") or {}).get("defaults", {})
        found.append(
            Panel(item.get("title", ""), item["type"], item["gridPos"], defaults.get("unit") or "")
        )
        found[-1].targets = list(item.get("targets", []))
    return found


def prometheus_query(base: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """One query to the Prometheus HTTP API; its result list."""
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params.get('query')}: {body}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def fetch(panel: Panel, base: str, start: float, end: float) -> None:
    """Run the panel's queries: a range for lines and timelines, an instant for the rest."""
    span = int(end - start)
    for target in panel.targets:
        query = substitute(target["expr"], span)
        if panel.kind in ("timeseries", "state-timeline"):
            params = {"query": query, "start": str(start), "end": str(end), "step": "5"}
            for item in prometheus_query(base, "query_range", params):
                points = [(float(t), float(v)) for t, v in item["values"]]
                panel.series.append((legend(target.get("legendFormat"), item["metric"]), points))
        else:
            for item in prometheus_query(base, "query", {"query": query, "time": str(end)}):
                value = float(item["value"][1])
                name = legend(target.get("legendFormat"), item["metric"])
                if panel.kind == "table":
                    name = legend(None, item["metric"])
                panel.series.append((name, [(end, value)]))


def number(value: float, unit: str) -> str:
    """A value as a panel shows it: durations humanised, other numbers short."""
    if math.isnan(value):
        return "NaN"
    if unit == "s":
        for size, suffix in ((86400, "d"), (3600, "h"), (60, "min")):
            if abs(value) >= size:
                return f"{value / size:.1f} {suffix}"
        return f"{value:.0f} s"
    text = f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.0f}"
    return text + (f" {unit.removeprefix('suffix:').strip()}" if unit.startswith("suffix:") else "")


def svg_lines(panel: Panel, width: int, height: int) -> str:
    """A time series panel: one polyline per series, the y range written at the left."""
    points = [p for _, series in panel.series for p in series if not math.isnan(p[1])]
    if not points:
        return '<div class="empty">No data</div>'
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    v0, v1 = min(p[1] for p in points), max(p[1] for p in points)
    if v0 == v1:
        v0, v1 = v0 - 1, v1 + 1
    left, plot_w, plot_h = 56, width - 64, height - 8

    def xy(t: float, v: float) -> str:
        x = left + (t - t0) / max(t1 - t0, 1) * plot_w
        return f"{x:.1f},{4 + (v1 - v) / (v1 - v0) * plot_h:.1f}"

    parts = [f'<svg width="{width}" height="{height}">']
    for label, y in ((number(v1, panel.unit), 12), (number(v0, panel.unit), height - 4)):
        parts.append(f'<text x="0" y="{y}" class="axis">{html.escape(label)}</text>')
    for index, (_, series) in enumerate(panel.series):
        line = " ".join(xy(t, v) for t, v in series if not math.isnan(v))
        colour = COLOURS[index % len(COLOURS)]
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def svg_timeline(panel: Panel, width: int, height: int) -> str:
    """A state timeline: a band per series, green for 1, red for 0, grey for no data."""
    if not panel.series:
        return '<div class="empty">No data</div>'
    times = [t for _, series in panel.series for t, _ in series]
    t0, t1 = min(times), max(times)
    band = max(8, min(22, (height - 4) // len(panel.series)))
    label_w = 150
    parts = [f'<svg width="{width}" height="{band * len(panel.series) + 4}">']
    for row, (name, series) in enumerate(panel.series):
        y = row * band + 2
        parts.append(f'<text x="0" y="{y + band - 6}" class="axis">{html.escape(name[:24])}</text>')
        for (t, v), (t_next, _) in zip(series, [*series[1:], (t1 + 5, 0.0)], strict=True):
            x = label_w + (t - t0) / max(t1 - t0, 1) * (width - label_w - 4)
            w = max(1.0, (t_next - t) / max(t1 - t0, 1) * (width - label_w - 4))
            colour = "#73bf69" if v >= 1 else "#f2495c"
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{band - 3}" fill="{colour}"/>'
            )
    parts.append("</svg>")
    return "".join(parts)


def legend_html(panel: Panel) -> str:
    """The names of a time series panel's first lines, in their colours."""
    names = [
        f'<span style="color:{COLOURS[index % len(COLOURS)]}">&#9644; {html.escape(name)}</span>'
        for index, (name, _) in enumerate(panel.series[:6])
    ]
    more = f" +{len(panel.series) - 6}" if len(panel.series) > 6 else ""
    return f'<div class="legend">{" ".join(names)}{more}</div>'


def panel_html(panel: Panel) -> str:
    """One panel placed on the grid as the dashboard places it."""
    grid = panel.grid
    unit_w = PAGE_WIDTH / GRID_COLUMNS
    style = (
        f"left:{grid['x'] * unit_w:.0f}px;top:{grid['y'] * ROW_HEIGHT}px;"
        f"width:{grid['w'] * unit_w - 6:.0f}px;height:{grid['h'] * ROW_HEIGHT - 6}px"
    )
    title = html.escape(panel.title)
    if panel.kind == "row":
        return f'<div class="row" style="{style}">{title}</div>'
    width, height = int(grid["w"] * unit_w - 20), grid["h"] * ROW_HEIGHT - 40
    if panel.kind == "timeseries":
        body = svg_lines(panel, width, height - 18) + legend_html(panel)
    elif panel.kind == "state-timeline":
        body = svg_timeline(panel, width, height)
    elif panel.kind == "stat":
        values = [number(series[-1][1], panel.unit) for _, series in panel.series]
        body = f'<div class="stat">{html.escape(", ".join(values) or "No data")}</div>'
    else:
        rows = "".join(f"<li>{html.escape(name)}</li>" for name, _ in panel.series[:12])
        body = f'<ul class="table">{rows or "<li>No rows</li>"}</ul>'
    return f'<div class="panel" style="{style}"><h3>{title}</h3>{body}</div>'


def page(title: str, panels: Sequence[Panel], note: str) -> str:
    """The whole picture: the dashboard's title, a note saying what was drawn, its panels."""
    bottom = max(p.grid["y"] + p.grid["h"] for p in panels) * ROW_HEIGHT
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #111217; color: #ccccdc; font: 13px sans-serif; }}
header {{ padding: 8px 12px; font-size: 16px; }} header small {{ color: #8e8e9e; }}
main {{ position: relative; height: {bottom}px; margin: 0 4px; }}
.panel {{ position: absolute; background: #181b1f; border: 1px solid #2c3235; overflow: hidden;
  padding: 4px 8px; box-sizing: border-box; }}
.panel h3 {{ margin: 0 0 4px; font-size: 13px; font-weight: 500; }}
.row {{ position: absolute; font-size: 15px; font-weight: 600; padding-top: 6px; }}
.stat {{ font-size: 30px; color: #73bf69; text-align: center; margin-top: 10px; }}
.axis {{ fill: #8e8e9e; font-size: 10px; }} .empty {{ color: #8e8e9e; margin: 20px; }}
.table {{ margin: 0; padding-left: 16px; font-size: 11px; }}
.legend {{ font-size: 10px; white-space: nowrap; overflow: hidden; }}
.legend span {{ margin-right: 8px; }}
</style></head><body><header>{html.escape(title)} <small>{html.escape(note)}</small></header>
<main>{"".join(panel_html(p) for p in panels)}</main></body></html>"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_ready(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} was not ready in time")


def switch_faults(admin: str, chains: list[str]) -> None:
    """The faults of the picture: a fork on node-1, node-4 down, the second chain stuck."""
    faults = [
        {"node": "node-1", "fault": "fork", "chain": chains[0]},
        {"node": "node-4", "fault": "down"},
        {"node": "*", "fault": "session_stuck", "chain": chains[-1]},
    ]
    for fault in faults:
        request = urllib.request.Request(f"{admin}faults", data=json.dumps(fault).encode())
        with urllib.request.urlopen(request, timeout=10):
            pass


def run(args: argparse.Namespace) -> str:
    """Run the demo, let it record, query every panel; the page's HTML."""
    exporter, prometheus = free_port(), free_port()
    binary = Path(sys.executable).parent / "ledger-exporter"
    command = [
        str(binary),
        "demo",
        "--prometheus",
        "--web.listen-address",
        f"127.0.0.1:{exporter}",
        "--prometheus.listen-address",
        f"127.0.0.1:{prometheus}",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as demo:
        try:
            assert demo.stdout is not None
            first = demo.stdout.readline()
            admin = re.search(r"admin (\S+)", first)
            if admin is None:
                raise RuntimeError(f"the demo did not print its admin URL: {first!r}")
            base = f"http://127.0.0.1:{prometheus}"
            wait_ready(f"{base}/-/ready", time.monotonic() + 60)
            start = time.time()
            time.sleep(args.seconds / 3)
            with urllib.request.urlopen(f"{admin[1]}blockchains", timeout=10) as answer:
                chains = list(json.load(answer)["blockchains"])
            switch_faults(admin[1], chains)
            time.sleep(args.seconds * 2 / 3)
            end = time.time()
            dashboard = json.loads(args.dashboard.read_text(encoding="utf-8"))
            panels = panels_of(dashboard, args.rows)
            for panel in panels:
                fetch(panel, base, start, end)
        finally:
            demo.send_signal(signal.SIGINT)  # Ctrl-C: the demo stops what it started
            demo.wait(timeout=60)
    note = (
        f"{args.dashboard.name}: each panel's PromQL run by Prometheus over "
        f"{int(end - start)} s of ledger-exporter demo (fork on node-1, node-4 down and a "
        "stuck vote session from a third of the way), drawn by tools/render_dashboard.py"
    )
    return page(dashboard.get("title", args.dashboard.name), panels, note)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dashboard", type=Path, default=DEFAULT_DASHBOARD)
    parser.add_argument("--rows", type=int, default=None, help="draw only the first N rows")
    parser.add_argument("--seconds", type=float, default=240.0, help="how long the demo records")
    parser.add_argument("--output", type=Path, help="the PNG to write (needs chromium)")
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    parser.add_argument("--chromium", default="chromium")
    args = parser.parse_args(argv)
    text = run(args)
    with tempfile.TemporaryDirectory() as scratch:
        html_path = args.html or Path(scratch) / "dashboard.html"
        html_path.write_text(text, encoding="utf-8")
        if args.output:
            screenshot(args, text, html_path)
    return 0


def screenshot(args: argparse.Namespace, text: str, html_path: Path) -> None:
    """The page as a PNG, the whole of it, by headless Chromium."""
    if True:
        height = int(re.search(r"height: (\d+)px", text)[1]) + 48  # type: ignore[index]
        subprocess.run(
            [
                args.chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--screenshot={args.output.resolve()}",
                f"--window-size={PAGE_WIDTH + 8},{height}",
                html_path.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        print(f"{args.output}: {PAGE_WIDTH + 8}x{height}")


if __name__ == "__main__":
    sys.exit(main())
