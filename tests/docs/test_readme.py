"""The commands of the README and docs/*.md, run as a new user would run them, against what
the pages show.

The commands are parsed from README.md and every page of docs/ at test time (``DOCS``, in
that order), so they follow the pages when paths or names change: every fenced ``console``
block (a command after ``$ ``, ``\\`` continuing it, and the lines below it up to the next
prompt what it prints) and every ``sh`` block (each line a command). Each command is then
run by one of the runners below, or skipped by ``SKIPPED``, a reviewed list giving the
reason; a command that is neither fails the test, and so does a ``SKIPPED`` entry that no
longer matches a command.

Runners (``runner_of``): one-shot commands run in the pages' order in a scratch copy of the
checkout (symlinks; what they write stays there); ``ledger-exporter simulate`` and
``make demo`` are started, compared once they have printed what the page shows, and
stopped with Ctrl-C (SIGINT), which must exit 0; the admin commands (``$ADMIN``) run in one
shell against the simulator the docs start. ``python`` blocks run too.

What is changed, and only this (``localise``): the fixed ports 7740 (the simulator) and 9877
(the exporter) become free ones, in the commands and in what they show, and a listen address
is added to the long-running commands; ``venv/bin/`` and ``.venv/bin/`` are the venv these
tests run in, which holds the same package; ``make demo`` runs the command its recipe runs
(checked) rather than building ``.venv-demo`` from PyPI; a ``cat FILE`` of a file the
checkout does not have shows a file the reader wrote, so it is written from what is shown.

Matching (``matches``): line by line; ``NNNNN`` in a page stands for a port number and
``...`` for any text; a printed line that is JSON is compared re-serialised with spaces after
``,`` and ``:`` (as the pages print it). A command with nothing shown below it must exit 0
and must not answer a JSON error.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from tests.support.ports import free_port
from tests.support.testdata import REPO

pytestmark = pytest.mark.integration

README = REPO / "README.md"
#: The pages whose commands are run: the README first, then docs/ in name order.
DOCS = (README, *sorted((REPO / "docs").glob("*.md")))
BIN = Path(sys.executable).parent  # the venv running the tests: holds ledger-exporter
START_TIMEOUT = 60.0  # seconds a long-running command may take to print what is shown
RUN_TIMEOUT = 120.0

#: Commands the test does not run, each with the reason (full match on the command, its
#: continuation lines joined and a trailing comment left out).
SKIPPED: dict[str, str] = {
    r"make test": "the whole suite, which runs this test",
    r"python3\.11 -m venv venv && venv/bin/pip install \.": (
        "installs the dependencies from PyPI; tests/deploy/test_wheel.py builds the wheel "
        "and installs it offline into a fresh venv"
    ),
    r"venv/bin/ledger-exporter --config\.file config\.yml": (
        "a daemon polling the reader's own nodes until stopped; `make demo` runs the same "
        "daemon against simulated ones"
    ),
    r"docker .*": (
        "needs a Docker engine, which CI does not have; tests/deploy/test_docker.py and "
        "tests/deploy/test_compose.py check the Dockerfile and the compose stack offline"
    ),
    r"helm install ledger-exporter oci://.*": (
        "pulls the published chart and needs a cluster; tests/deploy/test_chart_package.py "
        "packages and lints the chart the release pushes"
    ),
    r"pip install ledger-exporter.*": (
        "installs the published package from PyPI; tests/deploy/test_wheel.py installs the "
        "wheel the release builds, offline, into an empty venv"
    ),
    r"cosign verify .*": "asks the registry and the transparency log for the release's signature",
    r"kubectl .*": (
        "needs a Kubernetes cluster; tests/deploy/test_kubernetes*.py check the manifests offline"
    ),
    r"sudo .*": (
        "installs into /opt and /etc and drives the host's systemd; "
        "tests/deploy/test_systemd.py checks the unit offline"
    ),
    r"/opt/ledger-exporter/venv/bin/ledger-exporter .* && sudo systemctl reload .*": (
        "the systemd install above; its --config.check is run here on the shipped configs"
    ),
    r"journalctl .*": "reads the host's journal of the installed service",
    r"\.venv/bin/python benchmarks/.*": (
        "a benchmark: minutes of both cores, measuring the machine (docs/performance.md); "
        "tests/benchmarks/test_perfsplit.py and the soak test run the benchmarks' code"
    ),
}

#: One-shot commands the test runs (full match, as for SKIPPED).
ONE_SHOT = (
    r"(\.?venv/bin/)?ledger-exporter (--version|--help|--config\.check --config\.file \S+)",
    r"cat [\w./-]+",
    r"cp config/[\w.-]+ [\w.-]+",
    r"(\.?venv/bin/)?python tools/render_mixin\.py .*",
)
SIMULATOR = r"(\.?venv/bin/)?(ledger-exporter simulate|python -m ledger_simulator)( .*)?"
DEMO = r"make demo"
ADMIN = r"ADMIN=\S+|.*\$ADMIN\b.*"
#: Probe mode against the simulator: the exporter on config/probe.yml, then probes sent to it.
PROBE_EXPORTER = r"(\.?venv/bin/)?ledger-exporter --config\.file config/probe\.yml( .*)?"
PROBE = r"curl -s 'http://127\.0\.0\.1:9877/probe\?[^']*'( \| .*)?"


@dataclass(frozen=True)
class Command:
    """One command of the docs: where (``page:line``), as written (for the shell), and the
    lines shown below."""

    line: str
    text: str
    shown: tuple[str, ...] = ()

    @property
    def flat(self) -> str:
        """One line, continuations joined, a trailing ``  # comment`` left out."""
        joined = " ".join(part.strip() for part in self.text.split("\\\n"))
        return re.sub(r"\s+#\s.*$", "", joined).strip()


@dataclass
class Blocks:
    """What the docs hold: its commands and its ``python`` blocks (line, code)."""

    commands: list[Command] = field(default_factory=list)
    python: list[tuple[str, str]] = field(default_factory=list)


def _split(body: list[str], first_line: str, prompt: bool) -> Iterator[Command]:
    """Commands of a block body; with ``prompt`` (console) the lines after one are shown."""
    index = 0
    while index < len(body):
        line = body[index]
        is_command = line.startswith("$ ") if prompt else line.strip() and line[0] != "#"
        if not is_command:
            index += 1
            continue
        start, text = index, line.removeprefix("$ ") if prompt else line
        while text.endswith("\\") and index + 1 < len(body):
            index += 1
            text += "\n" + body[index]
        index += 1
        shown: list[str] = []
        while prompt and index < len(body) and not body[index].startswith("$ "):
            shown.append(body[index])
            index += 1
        while shown and not shown[-1].strip():
            shown.pop()
        page, _, number = first_line.rpartition(":")
        yield Command(f"{page}:{int(number) + start}", text, tuple(shown))


def parse_readme(text: str, page: str = "README.md", blocks: Blocks | None = None) -> Blocks:
    """Every console/sh command and python block of a page, in order, added to ``blocks``."""
    lines = text.splitlines()
    blocks = Blocks() if blocks is None else blocks
    index = 0
    while index < len(lines):
        fence = re.fullmatch(r"```(\w+)", lines[index].strip())
        if fence is None:
            index += 1
            continue
        end = lines.index("```", index + 1)
        body, first_line = lines[index + 1 : end], f"{page}:{index + 2}"
        if fence[1] == "console":
            blocks.commands += _split(body, first_line, prompt=True)
        elif fence[1] in ("sh", "bash", "shell"):
            blocks.commands += _split(body, first_line, prompt=False)
        elif fence[1] == "python":
            blocks.python.append((first_line, "\n".join(body)))
        index = end + 1
    return blocks


def parse_docs() -> Blocks:
    """The blocks of every page of ``DOCS``, in order."""
    blocks = Blocks()
    for path in DOCS:
        parse_readme(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)), blocks)
    return blocks


BLOCKS = parse_docs()


def runner_of(command: Command) -> str | None:
    """``one-shot``, ``simulator``, ``demo``, ``admin``, ``probe-exporter``, ``probe``,
    ``skip``, or None (unclassified)."""
    flat = command.flat
    kinds = [
        kind
        for kind, patterns in (
            ("one-shot", ONE_SHOT),
            ("simulator", (SIMULATOR,)),
            ("demo", (DEMO,)),
            ("admin", (ADMIN,)),
            ("probe-exporter", (PROBE_EXPORTER,)),
            ("probe", (PROBE,)),
            ("skip", tuple(SKIPPED)),
        )
        if any(re.fullmatch(pattern, flat) for pattern in patterns)
    ]
    assert len(kinds) <= 1, f"{command.line}: {flat!r} is both {kinds}"
    return kinds[0] if kinds else None


def of_kind(kind: str) -> list[Command]:
    return [command for command in BLOCKS.commands if runner_of(command) == kind]


@dataclass(frozen=True)
class Ports:
    """Free ports standing in for the fixed ones of the docs."""

    simulator: int = field(default_factory=free_port)
    exporter: int = field(default_factory=free_port)

    def localise(self, text: str) -> str:
        """The docs' ports replaced, and its venvs the one running the tests."""
        text = text.replace("127.0.0.1:7740", f"127.0.0.1:{self.simulator}")
        text = text.replace("127.0.0.1:9877", f"127.0.0.1:{self.exporter}")
        return re.sub(r"(?<![\w/])\.?venv/bin/", f"{BIN}/", text)


def environment() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def _line_pattern(shown: str) -> re.Pattern[str]:
    parts = re.split(r"(\.\.\.|NNNNN)", shown)
    wild = {"...": ".*", "NNNNN": r"\d+"}
    return re.compile("".join(wild.get(part, re.escape(part)) for part in parts))


def _normalised(printed: str) -> str:
    try:
        return json.dumps(json.loads(printed))
    except ValueError:
        return printed.rstrip()


def matches(shown: Sequence[str], printed: Sequence[str]) -> bool:
    """Whether the printed lines are the shown ones (``NNNNN`` a port, ``...`` any text)."""
    return len(shown) == len(printed) and all(
        _line_pattern(want).fullmatch(_normalised(got))
        for want, got in zip(shown, printed, strict=True)
    )


def json_error(printed: Sequence[str]) -> str | None:
    """The ``error`` of a JSON answer among the printed lines, if there is one."""
    for line in printed:
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and "error" in document:
            return str(document["error"])
    return None


def check(command: Command, ports: Ports, printed: list[str], status: int) -> str | None:
    """What is wrong with a command's run, or None."""
    where = f"{command.line}: {command.flat}"
    if status != 0:
        return f"{where}\n  exit status {status}:\n  " + "\n  ".join(printed)
    if command.shown:
        shown = [ports.localise(line) for line in command.shown]
        if not matches(shown, printed):
            return (
                f"{where}\n  the page shows:\n  "
                + "\n  ".join(shown)
                + ("\n  printed:\n  " + "\n  ".join(printed))
            )
    error = json_error(printed)
    return f"{where}\n  answered an error: {error}" if error else None


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A copy of the checkout made of symlinks: commands read it and write beside it."""
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv", ".venv-demo", "venv", "out", "config.yml"}:
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


class Running:
    """A long-running command of the docs: its stdout read line by line, its stderr in a file."""

    def __init__(self, argv: str, cwd: Path, stderr: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            ["bash", "-c", f"exec {argv}"],
            cwd=cwd,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def first_lines(self, count: int) -> list[str]:
        """The first ``count`` lines printed (fewer if it exits first)."""
        printed: list[str] = []
        while len(printed) < count:
            try:
                line = self.lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                break
            if line is None:
                break
            printed.append(line)
        return printed

    def interrupt(self) -> int:
        """Ctrl-C, as the docs say to stop it; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self._pump_thread.join(timeout=RUN_TIMEOUT)
            assert self.process.stdout is not None
            self.process.stdout.close()


@contextmanager
def started(command: Command, argv: str, ports: Ports, cwd: Path) -> Iterator[str | None]:
    """Start a long-running command and give what is wrong with its first output (None:
    nothing) while it runs; then stop it with Ctrl-C, which must exit 0."""
    name = re.sub(r"[^\w.-]", "_", command.line)
    with open(cwd / f"stderr-{name}.txt", "w+b") as stderr:
        running = Running(argv, cwd, stderr)
        try:
            printed = running.first_lines(max(1, len(command.shown)))
            status = running.process.poll() or 0
            if status:
                stderr.seek(0)
                printed += stderr.read().decode(errors="replace").splitlines()
            yield check(
                command, ports, printed[: len(command.shown)] if not status else printed, status
            )
        finally:
            status = running.interrupt()
        stderr.seek(0)
        errors = stderr.read().decode(errors="replace")
        assert status == 0, f"{command.line}: Ctrl-C exit status {status}\n{errors}"


def run_session(commands: Sequence[Command], ports: Ports, cwd: Path) -> list[str]:
    """Run commands in one shell (variables carry over); the problems found."""
    script = []
    for number, command in enumerate(commands):
        script.append(f"printf '\\036%d\\n' {number}\n{{ {ports.localise(command.text)}\n}} 2>&1")
        script.append("printf '\\n\\036rc=%d\\n' $?")
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    outputs = re.findall(r"\x1e(\d+)\n(.*?)\n\x1erc=(\d+)\n", result.stdout, re.S)
    assert len(outputs) == len(commands), result.stdout + result.stderr
    problems = []
    for (_, output, status), command in zip(outputs, commands, strict=True):
        printed = [line for line in output.splitlines() if line.strip()]
        problem = check(command, ports, printed, int(status))
        if problem:
            problems.append(problem)
    return problems


def test_every_command_is_run_or_skipped_with_a_reason() -> None:
    assert len(BLOCKS.commands) > 20, "the docs' blocks were not found"
    unclassified = [f"{c.line}: {c.flat}" for c in BLOCKS.commands if runner_of(c) is None]
    assert not unclassified, (
        "commands of the docs neither run nor skipped: give them a runner, or a SKIPPED entry "
        "with the reason they cannot run here:\n" + "\n".join(unclassified)
    )
    stale = [p for p in SKIPPED if not any(re.fullmatch(p, c.flat) for c in BLOCKS.commands)]
    assert not stale, f"SKIPPED entries matching no command of the docs: {stale}"


def test_one_shot_commands_print_what_the_readme_shows(scratch: Path) -> None:
    commands = of_kind("one-shot")
    assert any("--config.check" in c.text for c in commands)
    for command in commands:
        written = re.fullmatch(r"cat ([\w./-]+)", command.flat)
        if written and command.shown and not (REPO / written[1]).exists():
            (scratch / written[1]).write_text("\n".join(command.shown) + "\n", encoding="utf-8")
    problems = run_session(commands, Ports(), scratch)
    assert not problems, "\n\n".join(problems)


def test_the_simulator_and_its_admin_commands(scratch: Path) -> None:
    """The simulator the docs start (the example with its output), then every admin
    command sent to it, in one shell."""
    (simulator,) = [c for c in of_kind("simulator") if c.shown]
    admin = of_kind("admin")
    assert len(admin) >= 5
    ports = Ports()
    argv = ports.localise(simulator.text) + f" --listen-address 127.0.0.1:{ports.simulator}"
    with started(simulator, argv, ports, scratch) as problem:
        assert problem is None, problem
        problems = run_session(admin, ports, scratch)
        assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize(
    "command",
    [c for c in of_kind("simulator") if not c.shown],
    ids=lambda c: c.line,
)
def test_other_simulator_commands_start_and_stop(command: Command, scratch: Path) -> None:
    ports = Ports()
    argv = ports.localise(command.text) + f" --listen-address 127.0.0.1:{ports.simulator}"
    with started(command, argv, ports, scratch) as problem:
        assert problem is None, problem


def test_make_demo_prints_what_the_readme_shows(scratch: Path) -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no demo target in the Makefile"
    assert re.fullmatch(r"\t\$\(DEMO_VENV\)/bin/ledger-exporter demo \$\(ARGS\)\n", recipe[1]), (
        "`make demo` no longer runs `ledger-exporter demo`: update this test"
    )
    demos = of_kind("demo")
    shown = [c for c in demos if c.shown]
    assert shown, "the docs no longer shows what `make demo` prints"
    ports = Ports()
    argv = f"ledger-exporter demo --web.listen-address 127.0.0.1:{ports.exporter}"
    for command in shown:
        with started(command, argv, ports, scratch) as problem:
            assert problem is None, problem


@pytest.mark.parametrize("block", BLOCKS.python, ids=lambda b: b[0])
def test_python_blocks_run(block: tuple[str, str], scratch: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", block[1]],
        cwd=scratch,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, f"{block[0]}\n{result.stdout}{result.stderr}"


def _wait_ready(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the probe-mode exporter was not ready on port {port}")


def test_the_probe_example_against_the_simulator(scratch: Path) -> None:
    """Probe mode as the docs show it: the simulator, the exporter on the shipped
    config/probe.yml (whose allow-list admits the simulator's nodes), then each probe
    command, compared with what the page shows."""
    (exporter_command,) = of_kind("probe-exporter")
    probes = of_kind("probe")
    assert len(probes) >= 2 and any("debug=true" in c.text for c in probes)
    ports = Ports()
    # config/probe.yml admits the simulator on its default port only: here, on the test's
    (scratch / "config").unlink()
    (scratch / "config").mkdir()
    for entry in (REPO / "config").iterdir():
        (scratch / "config" / entry.name).symlink_to(entry)
    shipped = (REPO / "config" / "probe.yml").read_text(encoding="utf-8")
    assert r"127\.0\.0\.1:7740/" in shipped, "the shipped probe config admits no simulator"
    (scratch / "config" / "probe.yml").unlink()
    (scratch / "config" / "probe.yml").write_text(
        shipped.replace(r"127\.0\.0\.1:7740/", rf"127\.0\.0\.1:{ports.simulator}/"),
        encoding="utf-8",
    )
    simulate = f"ledger-exporter simulate --listen-address 127.0.0.1:{ports.simulator}"
    exporter = ports.localise(exporter_command.flat)  # the listen address is the page's
    assert f"127.0.0.1:{ports.exporter}" in exporter
    with (
        open(scratch / "simulator-stderr.txt", "w+b") as simulator_err,
        open(scratch / "exporter-stderr.txt", "w+b") as exporter_err,
    ):
        simulator = Running(simulate, scratch, simulator_err)
        running = Running(exporter, scratch, exporter_err)
        try:
            assert simulator.first_lines(1), "the simulator printed nothing"
            _wait_ready(ports.exporter, running.process)
            problems = run_session(probes, ports, scratch)
        finally:
            statuses = (running.interrupt(), simulator.interrupt())
        exporter_err.seek(0)
        assert statuses == (0, 0), exporter_err.read().decode(errors="replace")
    assert not problems, "\n\n".join(problems)
