"""Where a process's CPU goes, split between the interpreter and native code, with Linux perf.

``bench_ratio.py --perf`` samples the CPU both measured processes are pinned to over the
measured intervals. A sample in the interpreter (``libpython``, or the executable itself where
Python is built without one) is interpreted Python: bytecode, small objects' allocation, the
GC. Any other (libcurl, the kernel, libc, zlib, msgspec, the JSON and pycurl extensions) is
native work. The bare poller's native work is what the requests themselves cost, so "the
exporter's native work plus the bare poller's Python" over "the bare poller's total" estimates
what the ratio would read if the exporter ran no more Python than the bare poller: the floor of
changes to the exporter's Python. An estimate, a little high: some native work (libc's
``malloc`` for large objects, page faults of a larger heap, handing the GIL between threads)
would shrink with the Python that causes it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

#: Samples a second of CPU: a few thousand a measured window. ``cpu-clock`` ticks with time
#: spent, so counts are proportional to CPU time (a hardware ``cycles`` event would not be).
FREQUENCY = 999
EVENT = "cpu-clock"
#: Samples over CPU seconds x FREQUENCY outside this range: perf missed part of the window or
#: counted threads of others; the split is not to be trusted.
COVERAGE = (0.8, 1.25)
#: ``perf script -F pid,ip,dso`` lines: ``  22470      7fc45d59d609 (/path/to/libpython.so)``.
_SAMPLE = re.compile(r"^\s*(\d+)\s+\S+\s+\((.*)\)\s*$")


class PerfError(RuntimeError):
    """perf is missing, cannot record, or recorded a window not to be trusted; the message
    says which and what to do."""


def require_perf() -> None:
    """Fail at once, not after the first fleet size, where perf is not installed."""
    if shutil.which("perf") is None:
        raise PerfError("--perf needs Linux perf: apt-get install linux-perf")


class PerfRecording:
    """``perf record`` of CPUs from ``start()`` to ``stop()``, its samples read back per
    process: ``owners`` maps a name to a process id."""

    def __init__(self, output: Path, owners: Mapping[str, int], cpus: set[int],
                 interpreter: str = sys.executable) -> None:  # fmt: skip
        require_perf()
        self.output, self.owners, self.cpus = output, dict(owners), cpus
        self.interpreter = os.path.realpath(interpreter)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Sample everything on ``cpus``; the report keeps the owners' processes. Per CPU, not
        per process: following a process's threads costs it at each of their context
        switches, more for the exporter's several busy threads than the bare poller's one
        (per process, the exporter's CPU per request read ~10 % higher; per CPU, the same)."""
        cpus = ",".join(str(cpu) for cpu in sorted(self.cpus))
        command = ["perf", "record", "--quiet", "-e", EVENT, "-F", str(FREQUENCY),
                   "--all-cpus", "--cpu", cpus, "-o", str(self.output)]  # fmt: skip
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE)
        time.sleep(0.5)  # a perf that may not record says so at once
        if self.process.poll() is not None:
            raise PerfError(f"perf record ended at start: {self._errors(timeout=10)}")

    def stop(self) -> dict[str, Counter[str]]:
        """End sampling (SIGINT: perf writes its file), then each owner's samples by kind."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        errors = self._errors(timeout=60)
        if self.process.returncode not in (0, -signal.SIGINT) or not self.output.exists():
            raise PerfError(f"perf record failed: {errors}")
        script = subprocess.run(
            ["perf", "script", "-i", str(self.output), "-F", "pid,ip,dso"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        by_pid = {pid: owner for owner, pid in self.owners.items()}
        return count_samples(script, by_pid, self.interpreter)

    def close(self) -> None:
        """Stop a recording still going (the run failed before ``stop()``)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self._errors(timeout=10)

    def _errors(self, timeout: float) -> str:
        """Wait for perf to end; what it wrote to stderr (its pipe closed)."""
        assert self.process is not None
        _, errors = self.process.communicate(timeout=timeout)
        return errors.decode(errors="replace").strip()


def count_samples(
    script: str, owners: Mapping[int, str], interpreter: str
) -> dict[str, Counter[str]]:
    """Each owner's samples by kind (see :func:`kind_of`), from ``perf script -F pid,ip,dso``;
    ``owners`` maps a process id to its owner, and samples of other processes (perf's own,
    the idle task) are left out."""
    counts: dict[str, Counter[str]] = {owner: Counter() for owner in owners.values()}
    for line in script.splitlines():
        if (sample := _SAMPLE.match(line)) and (owner := owners.get(int(sample[1]))):
            counts[owner][kind_of(sample[2], interpreter)] += 1
    return counts


def kind_of(dso: str, interpreter: str) -> str:
    """ "interpreted" for the interpreter's library, or its executable where Python is built
    without one; "native" for anything else."""
    if Path(dso).name.startswith("libpython") or dso == interpreter:
        return "interpreted"
    return "native"


def split_rows(nodes: int, samples: Mapping[str, Counter[str]],
               figures: Mapping[str, Mapping[str, float]]) -> list[list[str]]:  # fmt: skip
    """Table rows: each process's samples and their share of its CPU time in /proc; per
    request, its interpreted and native samples as shares of the bare poller's; the floor
    (the exporter's native plus the bare poller's Python). ``figures`` gives each owner's
    ``requests`` served and ``cpu_s`` from /proc over the same window."""
    per_request, coverages = {}, {}
    for owner, count in samples.items():
        coverages[owner] = checked_coverage(owner, count, figures[owner]["cpu_s"])
        requests = max(1.0, figures[owner]["requests"])
        per_request[owner] = {kind: count[kind] / requests for kind in ("interpreted", "native")}
    unit = sum(per_request["bare"].values())
    rows: list[list[str]] = []
    for name, owner in (("bare engine", "bare"), ("exporter", "exporter")):
        share = {kind: value / unit for kind, value in per_request[owner].items()}
        rows.append([str(nodes), name, str(sum(samples[owner].values())),
                     f"{coverages[owner]:.0%}", f"{share['interpreted']:.2f}x",
                     f"{share['native']:.2f}x", f"{sum(share.values()):.2f}x"])  # fmt: skip
    floor = (per_request["exporter"]["native"] + per_request["bare"]["interpreted"]) / unit
    return [*rows, [str(nodes), "floor: exporter native + bare Python", *[""] * 4, f"{floor:.2f}x"]]


def checked_coverage(owner: str, count: Counter[str], cpu_seconds: float) -> float:
    """The samples over what /proc says the process spent (CPU seconds x FREQUENCY); one
    outside COVERAGE, or no sample in the interpreter, raises PerfError: the split would
    mislead."""
    coverage = sum(count.values()) / max(1e-9, cpu_seconds * FREQUENCY)
    if not COVERAGE[0] <= coverage <= COVERAGE[1] or not count["interpreted"]:
        raise PerfError(
            f"perf's samples of the {owner} process cover {coverage:.0%} of its CPU time in "
            f"/proc, {count['interpreted']} of them in the interpreter: not a split to trust "
            "(another perf running? the interpreter neither libpython nor the executable?)"
        )
    return coverage


HEADER = ["nodes", "process", "samples", "of /proc CPU", "interpreted", "native",
          "all (per request, of the bare)"]  # fmt: skip
