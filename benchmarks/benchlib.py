"""Shared pieces of the benchmarks: the simulator in its own process, process readings, tables.

The benchmarks measure the exporter's own CPU and memory, so everything that serves nodes (the
simulator, the hostile server) runs in a separate process, and each measurement runs in a
fresh worker process whose only busy threads are the exporter's.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024

# Runs the simulator's own CLI. With nodelay, its handler sets TCP_NODELAY: the simulator
# writes headers and body in two sends, and without it every keep-alive answer waits ~40 ms
# for the client's delayed ACK (see docs/performance.md). A timer bounds its lifetime.
_SIM_BOOT = """
import os, signal, sys, threading
from ledger_simulator import http
http.Handler.disable_nagle_algorithm = {nodelay}
timer = threading.Timer({lifetime}, os.kill, (os.getpid(), signal.SIGTERM))
timer.daemon = True
timer.start()
from ledger_simulator.cli import main
sys.exit(main(sys.argv[1:]))
"""


def read_first_lines(
    stream: IO[str] | None, done: Callable[[str], bool], timeout: float
) -> list[str]:
    """Lines of a child's output until ``done(line)``; raises if that takes too long.

    A daemon thread keeps draining the stream afterwards, so the child never blocks on it.
    """
    assert stream is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if done(line):
            return seen
    raise RuntimeError(f"a benchmark child process did not start; it printed {seen!r}")


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 10 s: only the process this benchmark started."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class SimProcess:
    """``ledger-exporter simulate`` in its own process on 127.0.0.1, port chosen by the OS."""

    def __init__(
        self,
        nodes: int,
        chains: int,
        layout: str = "paths",
        nodelay: bool = True,
        lifetime: float = 1800.0,
    ) -> None:
        self.args = [
            *("--nodes", str(nodes), "--chains", str(chains), "--layout", layout),
            *("--listen-address", "127.0.0.1:0", "--log.level", "error"),
        ]
        self.boot = _SIM_BOOT.format(nodelay=nodelay, lifetime=lifetime)
        self.admin_url = ""
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in __exit__)
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> SimProcess:
        self.process = subprocess.Popen(
            [PYTHON, "-c", self.boot, *self.args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        try:
            lines = read_first_lines(
                self.process.stdout, lambda line: line.startswith("admin: "), 60
            )
        except RuntimeError as error:
            self._stderr.seek(0)
            problem = self._stderr.read()[-2000:]
            self.__exit__(None, None, None)
            raise RuntimeError(f"{error}; simulator stderr: {problem}") from None
        self.admin_url = lines[-1].split(" ", 1)[1]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.process is not None:
            stop_process(self.process)
        self._stderr.close()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Node name -> {"url": base URL, "blockchains": [...]}, in node order."""
        return fetch_nodes(self.admin_url)

    def set_fault(self, node: str, fault: str, delay_seconds: float | None = None) -> None:
        """Switch a node-wide fault on through the admin endpoint."""
        body: dict[str, Any] = {"node": node, "fault": fault, "enabled": True}
        if delay_seconds is not None:
            body["delay_seconds"] = delay_seconds
        request = urllib.request.Request(
            self.admin_url + "faults", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def fetch_nodes(admin_url: str) -> dict[str, dict[str, Any]]:
    """``GET /-/sim/nodes``: node name -> {"url": base URL, "blockchains": [...]}."""
    with urllib.request.urlopen(admin_url + "nodes", timeout=30) as response:
        nodes: dict[str, dict[str, Any]] = json.load(response)["nodes"]
    return nodes


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of another process (from /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def status_mib(field: str, pid: int | str = "self") -> float:
    """A memory field of /proc/PID/status (VmRSS: resident now, VmHWM: peak), in MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` 0.5 = median, 0.99 = p99)."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def run_worker(script: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``script --worker JSON`` in a fresh process; its last stdout line is the result."""
    completed = subprocess.run(
        [PYTHON, script, "--worker", json.dumps(payload)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed ({completed.returncode}):\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def finish_worker(result: dict[str, Any]) -> NoReturn:
    """Print the result and leave at once: a request still hanging in the exporter's thread
    pool would otherwise hold the interpreter's exit (see docs/performance.md)."""
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)


class MachineMeter:
    """CPU the rest of the machine used meanwhile: busy time from /proc/stat minus this
    process and its waited-for children (workers, simulator). Near 0 means a clean run."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.busy, self.own = self._busy(), self._own()

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
        return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS

    @staticmethod
    def _own() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def report(self) -> str:
        wall = time.monotonic() - self.started
        others = max(0.0, (self._busy() - self.busy) - (self._own() - self.own))
        share = others / (wall * (os.cpu_count() or 1))
        return f"took {wall:.0f} s; other processes used {others:.0f} CPU-s ({share:.0%})"


def exporter_version() -> str:
    """The commit the exporter code was measured at, '+dirty' with uncommitted changes."""
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "exporter"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"exporter at {commit or 'unknown commit'}{'+dirty' if dirty else ''}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with padded columns, readable in a terminal and pasteable in docs."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])
