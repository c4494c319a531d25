"""Where a process's CPU goes, split between the interpreter and native code, with Linux perf.

``bench_ratio.py --perf`` samples the CPU both measured processes are pinned to over the
measured intervals. A sample in ``libpython`` is interpreted Python (bytecode, object
allocation, the GC); any other (libcurl, the kernel, libc, zlib, msgspec, the JSON and pycurl
extensions) is native work. The bare poller's native work is what the requests themselves
cost, so "the exporter's native work plus the bare poller's Python" over "the bare poller's
total" is the least the ratio could read if the exporter ran no more Python than the bare
poller: the floor of any change to the exporter's Python.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

#: Samples a second per CPU: enough for a few thousand samples a measured window.
FREQUENCY = 999


class PerfError(RuntimeError):
    """``perf`` is not installed or may not record; the message says what to do."""


class PerfRecording:
    """``perf record`` of some processes from ``start()`` to ``stop()``, read back per owner."""

    def __init__(self, output: Path, owners: dict[str, int], cpus: set[int]) -> None:
        if shutil.which("perf") is None:
            raise PerfError("--perf needs Linux perf: apt-get install linux-perf")
        self.output, self.owners, self.cpus = output, owners, cpus
        self.threads: dict[str, str] = {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start sampling the CPUs the owners run on (all that runs there; the report keeps
        the owners' threads). Per CPU, not per process: following a process's threads costs
        it at each of their context switches, more for the exporter's several busy threads
        than for the bare poller's one (per process, the exporter's CPU per request read
        ~10 % higher than without perf; per CPU, the same)."""
        self._note_threads()
        cpus = ",".join(str(cpu) for cpu in sorted(self.cpus))
        command = ["perf", "record", "--quiet", "-F", str(FREQUENCY), "-o", str(self.output),
                   "--cpu", cpus, "--all-cpus"]  # fmt: skip
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE)

    def stop(self) -> dict[str, Counter[str]]:
        """End sampling (SIGINT: perf writes its file), then each owner's samples by kind."""
        self._note_threads()
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        _, errors = self.process.communicate(timeout=60)
        if self.process.returncode not in (0, -2) or not self.output.exists():
            raise PerfError(f"perf record failed: {errors.decode(errors='replace').strip()}")
        return self._samples_by_owner()

    def close(self) -> None:
        """Stop a recording still going (the run failed before ``stop()``)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _note_threads(self) -> None:
        """Thread ids are perf's "pid" column; threads started after start() show up here."""
        for owner, pid in self.owners.items():
            for task in Path(f"/proc/{pid}/task").glob("*"):
                self.threads[task.name] = owner

    def _samples_by_owner(self) -> dict[str, Counter[str]]:
        report = subprocess.run(
            ["perf", "report", "-i", str(self.output), "--no-children", "--sort", "pid,dso",
             "--stdio", "-g", "none", "-F", "sample,pid,dso"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return count_samples(report, self.threads, set(self.owners))


def count_samples(
    report: str, threads: dict[str, str], owners: set[str]
) -> dict[str, Counter[str]]:
    """Each owner's samples by kind, from ``perf report -F sample,pid,dso`` lines such as
    ``  2009  22472:python  [kernel.kallsyms]``; ``threads`` maps a thread id to its owner,
    and samples of other threads (perf's own) are left out."""
    counts: dict[str, Counter[str]] = {owner: Counter() for owner in owners}
    for line in report.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdigit():  # comments, blank lines
            continue
        owner = threads.get(fields[1].partition(":")[0])
        if owner is not None:
            counts[owner][kind_of(fields[2])] += int(fields[0])
    return counts


def kind_of(dso: str) -> str:
    """ "interpreted" for the Python interpreter's library, "native" for anything else."""
    return "interpreted" if "libpython" in dso else "native"


def split_rows(nodes: int, counts: dict[str, Counter[str]]) -> list[list[str]]:
    """Table rows: each process's samples, the interpreted and native shares of the bare
    poller's total, and the floor (the exporter's native plus the bare poller's Python)."""
    bare_total = max(1, sum(counts["bare"].values()))
    rows = []
    for name, owner in (("bare engine", "bare"), ("exporter", "exporter")):
        count = counts[owner]
        rows.append([str(nodes), name, str(sum(count.values())),
                     f"{count['interpreted'] / bare_total:.2f}x",
                     f"{count['native'] / bare_total:.2f}x",
                     f"{sum(count.values()) / bare_total:.2f}x"])  # fmt: skip
    floor = (counts["exporter"]["native"] + counts["bare"]["interpreted"]) / bare_total
    rows.append([str(nodes), "floor: exporter native + bare Python", "", "", "", f"{floor:.2f}x"])
    return rows


HEADER = ["nodes", "process", "samples", "interpreted", "native", "all (of the bare total)"]
