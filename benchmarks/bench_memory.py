"""Issue #35: where the exporter's memory goes, holder by holder, at its peak moment.

Run on demand, never in the test suite (2-4 minutes at 3000 nodes):

    .venv/bin/python benchmarks/bench_memory.py --nodes 3000 --answers varied-small
    .venv/bin/python benchmarks/bench_memory.py --nodes 1000 --answers rich --scrape-every 0

The real ``ledger-exporter`` (this tree's ``exporter.cli.main``, default settings, interval
10 s, deadline 5 s) runs in a child process started by this script under ``tracemalloc``,
against ``bench_ratio.py``'s fleet stand-in (``--answers``) and scraped as there (both
formats, gzip, every ``--scrape-every`` seconds). At the end of the ``--cycle``-th cycle's
render, when the process holds the most (the previous snapshot and its pages, still served,
beside the new snapshot and its pages, the history and every cache), the child walks what
each holder keeps and writes a report:

- **by holder and field**: the new snapshot, the pages rendered for it (per variant), the
  previous snapshot (only what it does not share with the new one) and its pages, the
  history (per node and chain between cycles), the renderer's label cache, the readings'
  interning cache, the poller and its engine (Python side); each exporter object broken
  down by its fields (``ChainReading.council``, ``HealthReading.network_peers``...), every
  object counted once, under the first holder that reaches it (in that order);
- **by allocation site**: tracemalloc's top lines at that moment;
- **the allocators**: read first (the walk allocates): VmRSS and VmHWM (which
  tracemalloc's own tables inflate: take the peak RSS from ``bench_ratio.py``, the
  shares from here), the Python heap traced, glibc's heap (in use, free and not handed
  back, mmap'd blocks); then tracemalloc stops (pymalloc reports only unwrapped; the
  exporter runs on untraced) and pymalloc's arenas (used and free) are read; libcurl's
  handles (count).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import dataclasses
import gc
import json
import os
import re
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

# The exporter's process imports only the above: the driver's modules (fleet, scrapes,
# tables) are imported by the functions that use them, so they add nothing to its memory.
MIB = 1024 * 1024
REPO = Path(__file__).resolve().parent.parent

#: Objects never walked into: what every object refers to (its class), and code.
_OPAQUE = (type, type(sys), type(lambda: None), type(print), type((lambda: None).__code__))


class Ledger:
    """Bytes (``sys.getsizeof``) by holder and category, each object counted once: under
    the first holder and category that reach it."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.bytes: dict[str, Counter[str]] = {}
        self.objects: dict[str, Counter[str]] = {}

    def add(self, holder: str, category: str, size: int) -> None:
        self.bytes.setdefault(holder, Counter())[category] += size
        self.objects.setdefault(holder, Counter())[category] += 1

    def deep(self, holder: str, category: str, root: object) -> None:
        """``root`` and everything it refers to, not yet counted, under ``category``."""
        stack = [root]
        while stack:
            obj = stack.pop()
            if id(obj) in self.seen or isinstance(obj, _OPAQUE):
                continue
            self.seen.add(id(obj))
            self.add(holder, category, sys.getsizeof(obj))
            stack.extend(gc.get_referents(obj))

    def walk(self, holder: str, root: object, category: str = "") -> None:
        """``root`` broken down by the fields of the exporter's objects: an exporter object
        counts as its class, each field as ``Class.field``; tuples, lists and dicts of them
        as ``...[]`` (the container) and their members by their own class."""
        stack: list[tuple[object, str]] = [(root, category or _name(root))]
        while stack:
            obj, where = stack.pop()
            if id(obj) in self.seen or isinstance(obj, _OPAQUE):
                continue
            fields = _fields(obj)
            if fields is not None:
                self.seen.add(id(obj))
                cls = type(obj).__name__
                self.add(holder, cls, sys.getsizeof(obj) + _dict_size(obj))
                stack.extend((value, f"{cls}.{name}") for name, value in fields)
            elif isinstance(obj, (tuple, list, frozenset, set)) and _holds_ours(obj):
                self.seen.add(id(obj))
                self.add(holder, f"{where}[]", sys.getsizeof(obj))
                stack.extend((member, where) for member in obj)
            elif isinstance(obj, dict) and _holds_ours(obj.values()):
                self.seen.add(id(obj))
                self.add(holder, f"{where}{{}}", sys.getsizeof(obj))
                for key, value in obj.items():
                    self.deep(holder, f"{where}{{}} keys", key)
                    stack.append((value, where))
            else:
                self.deep(holder, where, obj)


def _name(obj: object) -> str:
    return type(obj).__name__


def _fields(obj: object) -> list[tuple[str, Any]] | None:
    """An exporter object's fields as (name, value); None for anything else."""
    if not type(obj).__module__.startswith("exporter."):
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    names = [s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())]
    pairs = [(name, getattr(obj, name)) for name in names if hasattr(obj, name)]
    return pairs + list(getattr(obj, "__dict__", {}).items())


def _dict_size(obj: object) -> int:
    namespace = getattr(obj, "__dict__", None)
    return sys.getsizeof(namespace) if isinstance(namespace, dict) else 0


def _holds_ours(members: Iterable[object]) -> bool:
    """Whether the container's first member is an exporter object (or holds some)."""
    for member in members:
        if isinstance(member, (tuple, list)):
            return _holds_ours(member)
        return _fields(member) is not None
    return False


# --- the allocator ------------------------------------------------------------------------


#: glibc's ``struct mallinfo2``, every field a size_t.
MALLINFO_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                   "uordblks", "fordblks", "keepcost")  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO_FIELDS]


def mallinfo() -> dict[str, int]:
    """glibc's heap: ``arena`` (the heaps' size), ``uordblks`` (in use), ``fordblks`` (free,
    not handed back), ``hblkhd`` (blocks in their own mapping); {} without glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        call = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    call.restype = _MallInfo2
    info = call()
    return {name: int(getattr(info, name)) for name in MALLINFO_FIELDS}


#: The lines of ``sys._debugmallocstats()`` read: pymalloc's arenas and blocks.
PYMALLOC_LINES = {
    "# bytes in allocated blocks": "allocated blocks",
    "# bytes in available blocks": "free blocks",
    "# bytes in unused pools": "unused pools",
    "# bytes lost to pool headers": "pool headers",
    "# bytes lost to quantization": "quantization",
    "# bytes lost to arena alignment": "arena alignment",
    "Total": "arenas (total)",
}


def parse_pymalloc(text: str) -> dict[str, int]:
    """pymalloc's figures of a ``sys._debugmallocstats()`` print-out, by PYMALLOC_LINES."""
    figures = {}
    for line in text.splitlines():
        label, _, value = line.rpartition("=")
        label, value = label.strip(), value.strip().replace(",", "")
        if re.fullmatch(r"\d+ unused pools \* \d+ bytes", label):
            label = "# bytes in unused pools"
        name = PYMALLOC_LINES.get(label)
        if name is not None and name not in figures and value.isdigit():
            figures[name] = int(value)  # the first Total: the arenas' (the next, the map's)
    return figures


def pymalloc() -> dict[str, int]:
    """pymalloc's figures now (its print-out goes to the C stderr: caught in a file)."""
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        return parse_pymalloc(caught.read().decode(errors="replace"))


def proc_status() -> dict[str, int]:
    """This process's VmRSS, VmHWM, RssAnon and RssFile, in bytes."""
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    status = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            status[name] = int(value.split()[0]) * 1024
    return status


# --- the child: the exporter under tracemalloc ----------------------------------------------


class PeakWatch:
    """Samples VmRSS every ``every`` seconds on a thread of its own; at each new peak (by
    1 MiB or more) notes the phase of the cycle (``phase``, set by the hooks) and glibc's
    heap then, so the report says when and in what the process peaks."""

    def __init__(self, every: float = 0.02) -> None:
        self.phase = "starting"
        self.peak: dict[str, Any] = {"rss": 0}
        self.phases: Counter[str] = Counter()  # the highest RSS seen in each phase
        self._every = every

    def start(self) -> None:
        """Start sampling: after the exporter tuned malloc (its arenas are then capped)."""
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(self._every)
            rss = proc_status()["VmRSS"]
            phase = self.phase
            self.phases[phase] = max(self.phases[phase], rss)
            if rss >= self.peak["rss"] + MIB:
                self.peak = {"rss": rss, "phase": phase, "mallinfo": mallinfo()}


def run_inside(report: Path, cycle: int, sites: bool, exporter_args: list[str]) -> int:
    """Run ``ledger-exporter`` with ``exporter_args`` (under tracemalloc if ``sites``); at
    the end of the ``cycle``-th cycle's render write the report (JSON) to ``report``. Each
    cycle also appends the traced peak (0 untraced) and VmHWM to ``report``.cycles."""
    if sites:
        tracemalloc.start(1)
    from exporter import app as app_module  # noqa: PLC0415 (traced from here on)
    from exporter.cli import main  # noqa: PLC0415
    from exporter.poll.cycle import Poller  # noqa: PLC0415
    from exporter.web.exposition import Exposition  # noqa: PLC0415

    apps: list[Any] = []
    made = app_module.Exporter.__init__
    watch = PeakWatch()

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        apps.append(self)
        watch.start()

    run_cycle = Poller.run_cycle

    def polled(self: Any) -> Any:
        watch.phase = "polling"
        try:
            return run_cycle(self)
        finally:
            watch.phase = "history done, publishing"

    prepare = Exposition.prepare
    cycles = [0]

    def prepared(self: Exposition, *args: Any, **kwargs: Any) -> Exposition:
        if not apps or self is apps[0].exposition():  # the first one, made at start
            return prepare(self, *args, **kwargs)
        watch.phase = "rendering"
        done = prepare(self, *args, **kwargs)
        watch.phase = "between cycles"
        cycles[0] += 1
        peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else 0
        with Path(f"{report}.cycles").open("a") as out:
            out.write(f"{cycles[0]} {peak} {proc_status()['VmHWM']}\n")
        if tracemalloc.is_tracing():
            tracemalloc.reset_peak()
        if cycles[0] == cycle:
            write_report(report, apps[0], done, watch)
        return done

    app_module.Exporter.__init__ = init  # type: ignore[method-assign]
    Poller.run_cycle = polled  # type: ignore[method-assign]
    Exposition.prepare = prepared  # type: ignore[method-assign]
    return main(exporter_args)


def write_report(report: Path, app: Any, fresh: Any, watch: PeakWatch) -> None:
    """What each holder keeps, the top allocation sites and the allocator, as JSON. The
    allocators are read first (the walk below allocates), pymalloc once tracemalloc stops
    and its snapshot is dropped (pymalloc reports only unwrapped)."""
    started = time.monotonic()
    allocators = {"status": proc_status(), "mallinfo": mallinfo()}
    traced, own, top = 0, 0, []
    if tracemalloc.is_tracing():
        traced = tracemalloc.get_traced_memory()[0]
        own = tracemalloc.get_tracemalloc_memory()
        snapshot = tracemalloc.take_snapshot()
        top = [
            {"site": f"{stat.traceback[0].filename}:{stat.traceback[0].lineno}",
             "bytes": stat.size, "blocks": stat.count}
            for stat in snapshot.statistics("lineno")[:40]
        ]  # fmt: skip
        del snapshot
        tracemalloc.stop()
    allocators["pymalloc"] = pymalloc()
    ledger = Ledger()
    ledger.seen.update(map(id, (app, fresh, fresh.snapshot, app.exposition())))
    old = app.exposition()
    poller = app._poller
    for (openmetrics, gzipped), body in sorted(fresh._cache.items()):
        name = f"{'OpenMetrics' if openmetrics else 'text'}{', gzip' if gzipped else ''}"
        ledger.deep("pages, new snapshot's", name, body)
    ledger.walk("new snapshot", fresh.snapshot.nodes, "Snapshot.nodes")
    ledger.walk("new snapshot", fresh.snapshot.network, "Snapshot.network")
    ledger.walk("new snapshot", fresh.snapshot.watch, "Snapshot.watch")
    ledger.deep("pages, previous snapshot's", "all variants", old._cache)
    ledger.walk("previous snapshot (not shared)", old.snapshot)
    ledger.walk("history", poller._history)
    ledger.walk("renderer", app._renderer)
    ledger.walk("interning cache (Shared)", poller._shared)
    ledger.walk("poller and engine (Python side)", poller)
    handles = sum(type(o).__name__ == "Curl" for o in gc.get_objects())
    chains = sum(c.reading is not None for node in fresh.snapshot.nodes for c in node.chains)
    errors = Counter(
        (c.error or "")[:60] for node in fresh.snapshot.nodes for c in node.chains if c.error
    )
    data = {
        "traced": traced,
        "tracemalloc_own": own,
        "holders": {h: dict(c) for h, c in ledger.bytes.items()},
        "objects": {h: dict(c) for h, c in ledger.objects.items()},
        "top_lines": top,
        "peak": watch.peak,
        "phases": dict(watch.phases),
        **allocators,
        "curl_handles": handles,
        "nodes": len(fresh.snapshot.nodes),
        "chains_read": chains,
        "chain_errors": errors.most_common(5),
        "walk_seconds": time.monotonic() - started,
    }
    report.write_text(json.dumps(data))


# --- the driver ---------------------------------------------------------------------------


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Fleet, exporter child and scrapes; the child's report once written."""
    import subprocess  # noqa: PLC0415 (the driver's own: see the imports)

    from bench_fleet import _free_port, _proc_mib, _wait_for  # noqa: PLC0415
    from bench_ratio import PINNED, Scraper, start_fleet  # noqa: PLC0415
    from benchlib import PYTHON, stop_process  # noqa: PLC0415

    started: list[subprocess.Popen[bytes]] = []
    scraper = None
    report = workdir / "report.json"
    try:
        fleet = start_fleet(workdir / "fleet.port", args, started)
        config = workdir / "config.yml"
        lines = [f"scrape_interval: {args.interval:g}s", f"scrape_timeout: {args.timeout:g}s"]
        lines += ["nodes:", *(f"  - {{name: n{i}, url: '{fleet}/n{i}/'}}"
                              for i in range(args.nodes))]  # fmt: skip
        config.write_text("\n".join(lines) + "\n")
        port = _free_port()
        exporter_args = ["--config.file", str(config), "--web.listen-address",
                         f"127.0.0.1:{port}", "--log.level", "error"]  # fmt: skip
        command = [*PINNED, PYTHON, __file__, "--inside", str(report), "--cycle",
                   str(args.cycle), *(["--sites"] if args.sites else []),
                   "--", *exporter_args]  # fmt: skip
        child = subprocess.Popen(command, cwd=REPO)
        started.append(child)
        url = f"http://127.0.0.1:{port}"
        scraper = Scraper(url, args.scrape_every or args.interval)

        def written() -> bool:
            if child.poll() is not None:
                raise SystemExit(f"the exporter ended ({child.returncode})")
            return report.exists() and report.stat().st_size > 0

        _wait_for(written, args.interval * (args.cycle + 6) + 120)
        time.sleep(1)  # the report's write is one call; let it close
        data: dict[str, Any] = json.loads(report.read_text())
        data["cycles"] = Path(f"{report}.cycles").read_text().split("\n")
        data["child_hwm"] = _proc_mib(child.pid, "VmHWM")
        return data
    finally:
        if scraper is not None:
            scraper.stop()
        for process in reversed(started):
            stop_process(process)


def holder_rows(holders: dict[str, dict[str, int]], nodes: int, chains: int,
                smallest: int) -> list[list[str]]:  # fmt: skip
    """Rows of the holders' table: each holder's total, then its categories of at least
    ``smallest`` bytes, largest first, in MiB and bytes per node and per chain."""
    rows = []
    for holder, categories in sorted(holders.items(), key=lambda h: -sum(h[1].values())):
        total = sum(categories.values())
        rows.append([f"**{holder}**", "", *_amounts(total, nodes, chains)])
        for category, size in sorted(categories.items(), key=lambda c: -c[1]):
            if size >= smallest:
                rows.append(["", category, *_amounts(size, nodes, chains)])
    return rows


def _amounts(size: int, nodes: int, chains: int) -> list[str]:
    return [f"{size / MIB:.2f}", f"{size / max(1, nodes):.0f}", f"{size / max(1, chains):.0f}"]


def allocator_rows(data: dict[str, Any]) -> list[list[str]]:
    """Where the resident memory is, from the allocators' side."""
    m, p, s = data["mallinfo"], data["pymalloc"], data["status"]
    own = data["tracemalloc_own"]
    rows = [
        ["VmHWM (peak RSS, tracemalloc's tables included)", s.get("VmHWM", 0)],
        ["VmRSS now", s.get("VmRSS", 0)],
        ["  RssFile (code of Python, libcurl, OpenSSL... mapped)", s.get("RssFile", 0)],
        ["  RssAnon (heaps)", s.get("RssAnon", 0)],
        *(
            [
                ["Python heap traced (tracemalloc)", data["traced"]],
                ["tracemalloc's own tables (not there without it)", own],
            ]
            if own
            else []
        ),
        ["pymalloc arenas (objects <= 512 B)", p.get("arenas (total)", 0)],
        ["  in allocated blocks", p.get("allocated blocks", 0)],
        ["  free blocks in used pools (fragmentation)", p.get("free blocks", 0)],
        ["  unused pools in arenas (fragmentation)", p.get("unused pools", 0)],
        ["glibc heap in use (malloc'd, Python's big objects + C)", m.get("uordblks", 0)],
        ["glibc heap free, not handed back (fragmentation)", m.get("fordblks", 0)],
        ["glibc blocks in their own mappings (>= 256 KiB)", m.get("hblkhd", 0)],
    ]
    if own:  # traced: Python's malloc'd objects (over 512 B) are known
        big_python = data["traced"] - p.get("allocated blocks", 0)
        c_side = m.get("uordblks", 0) + m.get("hblkhd", 0) - big_python - own
        rows.append(["C side: malloc'd not by Python (libcurl, OpenSSL, msgspec, ...)", c_side])
    return [[label, f"{size / MIB:.1f}"] for label, size in rows]


def main(argv: Sequence[str]) -> int:
    if "--inside" in argv:  # the exporter's process: nothing of the driver's imported
        inside = argparse.ArgumentParser()
        inside.add_argument("--inside")
        inside.add_argument("--cycle", type=int)
        inside.add_argument("--sites", action="store_true")
        known, rest = inside.parse_known_args(argv)
        return run_inside(
            Path(known.inside), known.cycle, known.sites, [a for a in rest if a != "--"]
        )
    from bench_ratio import FLEET_CPUS, add_fleet_arguments  # noqa: PLC0415
    from benchlib import MachineMeter, exporter_version, markdown_table  # noqa: PLC0415
    from fleet_answers import SHAPES  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3000, help="fleet size (3000)")
    add_fleet_arguments(parser)
    parser.add_argument("--answers", choices=sorted(SHAPES), default="varied-small",
                        help="the fleet's answers, as bench_ratio.py's (varied-small)")  # fmt: skip
    parser.add_argument("--scrape-every", type=float, default=0.5,
                        help="scrape both formats (gzip) every this many s (0.5; 0: once "
                        "per interval)")  # fmt: skip
    parser.add_argument("--interval", type=float, default=10.0, help="cycle interval, s (10)")
    parser.add_argument("--cycle", type=int, default=4, help="the cycle reported (4)")
    parser.add_argument("--smallest", type=float, default=0.05,
                        help="categories under this many MiB are left out (0.05)")  # fmt: skip
    parser.add_argument("--json", help="also write the whole report to this file")
    parser.add_argument("--sites", action="store_true",
                        help="run the exporter under tracemalloc and print the top allocation "
                        "sites (its tables add ~10 kB a node to the RSS)")  # fmt: skip
    args = parser.parse_args(argv)
    meter = MachineMeter()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    os.sched_setaffinity(0, FLEET_CPUS)
    with tempfile.TemporaryDirectory() as folder:
        data = measure(args, Path(folder))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    chains = data["nodes"] * 3
    print(
        f"\n{exporter_version()}; {args.nodes} nodes x 3 chains, answers {args.answers}, "
        f"scraped every {args.scrape_every or args.interval:g} s; cycle {args.cycle} reported, "
        f"{data['chains_read']}/{chains} chains read (errors: {data['chain_errors']}); "
        f"{data['curl_handles']} curl handles; "
        f"{meter.report()}; load {load} at start\n"
    )
    print(markdown_table(["holder", "category", "MiB", "B/node", "B/chain"],
                         holder_rows(data["holders"], data["nodes"], chains,
                                     int(args.smallest * MIB))))  # fmt: skip
    print()
    print(markdown_table(["the allocators (at the report)", "MiB"], allocator_rows(data)))
    print()
    peak = data["peak"]
    print(
        f"peak RSS sampled: {peak['rss'] / MIB:.1f} MiB while {peak.get('phase')}; glibc "
        f"then: "
        + ", ".join(
            f"{k} {v / MIB:.1f}"
            for k, v in peak.get("mallinfo", {}).items()
            if k in ("arena", "uordblks", "fordblks", "hblkhd")
        )
        + " MiB"
    )
    print(
        "highest RSS by phase: "
        + "; ".join(f"{phase} {rss / MIB:.1f} MiB" for phase, rss in data["phases"].items())
        + "\n"
    )
    if data["top_lines"]:
        rows = [
            [t["site"].replace(str(REPO) + "/", ""), f"{t['bytes'] / MIB:.2f}", str(t["blocks"])]
            for t in data["top_lines"][:25]
        ]
        print(markdown_table(["allocation site (tracemalloc)", "MiB", "blocks"], rows))
    print("\ncycle, traced peak (MiB), VmHWM (MiB): " + "; ".join(
        f"{c} {int(p) / MIB:.1f} {int(h) / MIB:.1f}"
        for c, p, h in (line.split() for line in data["cycles"] if line)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
