"""The real ``ledger-exporter`` process against local nodes: what an operator runs and sees."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.cli import DEFAULTS
from exporter.cli import build_parser as main_parser
from exporter.flags import env_name
from ledger_simulator.cli import build_parser as simulate_parser
from ledger_simulator.demo import build_parser as demo_parser
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.http import fetch, wait_for_text
from tests.support.ports import closed_port_url, free_port
from tests.support.processes import ExporterProcess, exporter_command
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO, TESTDATA
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def network(fake_nodes: FakeNodes, tmp_path: Path) -> Path:
    """Three nodes (healthy, slow past the timeout, down) and a config polling them."""
    healthy = fake_nodes.start()
    healthy.play(health_doc(["c1"]), {"c1": chain_doc(500)})
    slow = fake_nodes.start()
    slow.play(health_doc(["c1"]), {"c1": chain_doc(498)})
    slow.set("/health", health_doc(["c1"]), held=True)  # never answers
    secret_url = healthy.url.replace("http://", "http://operator:hunter2@")
    config = tmp_path / "config.yml"
    config.write_text(
        "scrape_interval: 2s\nscrape_timeout: 1s\nnodes:\n"
        f"  - {{name: healthy, url: '{secret_url}', labels: {{region: eu}}}}\n"
        f"  - {{name: slow, url: '{slow.url}'}}\n"
        f"  - {{name: down, url: '{closed_port_url()}'}}\n"
    )
    return config


def test_serves_healthy_metrics_within_one_timeout_and_marks_the_others_down(
    network: Path, promtool: Promtool
) -> None:
    """The slow node never answers: the first cycle can only end at its 1 s deadline."""
    exporter = ExporterProcess(network)
    try:
        body = wait_for_text(exporter.base + "/metrics", 'ledger_node_up{node="slow"} 0.0')
        assert 'ledger_node_up{node="healthy",region="eu"} 1.0' in body
        assert 'ledger_blockchain_height{blockchain="c1",node="healthy",region="eu"} 500.0' in body
        assert 'ledger_node_up{node="down"} 0.0' in body
        assert (
            'ledger_node_scrape_errors_total{endpoint="health",node="down",reason="connection"}'
            in body
        )
        assert 'ledger_blockchain_height{blockchain="c1",node="slow"}' not in body
        assert "hunter2" not in body and "operator" not in body
        promtool.check_metrics(body)
    finally:
        code, stderr = exporter.stop()
    assert code == 0, stderr
    assert "hunter2" not in stderr and "operator:" not in stderr
    assert stderr.count('msg="node slow is down"') == 1
    assert "reason=timeout" in stderr and 'msg="shutting down"' in stderr


def test_sighup_reloads_and_a_bad_config_keeps_the_old_one(network: Path) -> None:
    exporter = ExporterProcess(network)
    try:
        exporter.wait_ready()
        good = network.read_text()
        network.write_text("nodes: [{name: x, url: 'ftp://x'}]\n")
        exporter.signal(signal.SIGHUP)
        body = wait_for_text(exporter.base + "/metrics", "reload_successful 0.0")
        assert 'ledger_node_up{node="healthy",region="eu"}' in body
        network.write_text(good.replace("name: healthy", "name: renamed"))
        exporter.signal(signal.SIGHUP)
        body = wait_for_text(exporter.base + "/metrics", 'node="renamed"')
        assert "reload_successful 1.0" in body
    finally:
        code, stderr = exporter.stop()
    assert code == 0
    assert "config reload failed" in stderr and "must be an http:// or https:// URL" in stderr


def test_json_logs(network: Path) -> None:
    exporter = ExporterProcess(network, "--log.format=json", "--log.level=debug")
    try:
        exporter.wait_ready()
    finally:
        _, stderr = exporter.stop()
    lines = [line for line in stderr.splitlines() if '"node down is down"' in line]
    assert (
        len(lines) == 1 and '"level": "warn"' in lines[0] and '"reason": "connection"' in lines[0]
    )


@pytest.mark.parametrize(
    ("config", "code", "expected"),
    [
        (
            REPO / "config" / "example.yml",
            0,
            "OK, 3 node(s), watching 1 contract(s) and 1 wallet(s)",
        ),
        (TESTDATA / "golden" / "documented" / "config.yml", 0, "OK, 1 node(s)"),
        (Path("/nonexistent.yml"), 1, "cannot read the file"),
    ],
)
def test_config_check(config: Path, code: int, expected: str) -> None:
    result = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == code, result.stderr
    assert expected in result.stdout + result.stderr


def test_config_check_prints_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.yml"
    config.write_text("scrape_interval: 1x\nnodes:\n  - {name: a, url: 'ftp://h'}\n  - {name: a}\n")
    result = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{config}: line 1: scrape_interval: must be a duration from 100ms to 1h such as 15s "
        "or 1m, not '1x'",
        f"{config}: line 3: nodes[0].url: must be an http:// or https:// URL with a host",
        f"{config}: line 4: nodes[1]: missing required key 'url'",
        f"{config}: line 4: nodes[1].name: duplicate node name 'a'",
    ]


def test_config_check_reads_the_node_files(tmp_path: Path) -> None:
    """Each node file the globs match is checked as the exporter would read it."""
    (tmp_path / "nodes.d").mkdir()
    good, bad = tmp_path / "nodes.d" / "good.yml", tmp_path / "nodes.d" / "bad.json"
    good.write_text("- {name: a, url: 'http://127.0.0.1:1/'}\n")
    bad.write_text('[{"name": "b", "url": "ftp://h"}]')
    config = tmp_path / "config.yml"
    config.write_text("node_files: [nodes.d/*.yml, nodes.d/*.json]\n")
    result = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert f"{good}: OK, 1 node(s)" in result.stdout.splitlines()
    assert result.stderr.splitlines() == [
        f"{bad}: line 1: [0].url: must be an http:// or https:// URL with a host"
    ]
    bad.unlink()
    again = subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"), capture_output=True
    )
    assert again.returncode == 0


def test_version_and_env_overrides(tmp_path: Path) -> None:
    result = subprocess.run(exporter_command("--version"), capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("ledger-exporter, version ")
    env = {**os.environ, "LEDGER_EXPORTER_CONFIG_FILE": "/nonexistent.yml"}
    result = subprocess.run(
        exporter_command("--config.check"), capture_output=True, text=True, env=env
    )
    assert result.returncode == 1 and "/nonexistent.yml" in result.stderr


def test_a_taken_port_is_reported(network: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            exporter_command(f"--config.file={network}", f"--web.listen-address=127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=20,
        )
    assert result.returncode == 1 and "cannot listen" in result.stderr


def _hung_node(listener: socket.socket, stop: threading.Event, drip: bool) -> None:
    """Answer no request of any connection: with ``drip``, send a header line one byte at a
    time (each read brings a byte, so only the deadline ends it); without, nothing at all."""
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            connection, _ = listener.accept()
        except OSError:  # no connection yet, or the test closed the listener
            continue
        threading.Thread(target=_hang, args=(connection, stop, drip), daemon=True).start()


def _hang(connection: socket.socket, stop: threading.Event, drip: bool) -> None:
    with connection, contextlib.suppress(OSError):  # the exporter gave up and hung up
        if drip:
            connection.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.2):
            if drip:
                connection.sendall(b"X")  # an endless header line


def test_sigterm_ends_the_process_while_nodes_hang(tmp_path: Path) -> None:
    """Requests to nodes that never finish their answers are still out when SIGTERM comes
    (the timeout is the interval, so the second cycle's are out by then): the engine ends
    them (and every other request) at shutdown, so the process exits on its own, with
    status 0, however long the nodes would hang."""
    stop = threading.Event()
    listeners, nodes = [], []
    for name, drip in (("dripping", True), ("silent", False)):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listeners.append(listener)
        threading.Thread(target=_hung_node, args=(listener, stop, drip), daemon=True).start()
        nodes.append(f"{{name: {name}, url: 'http://127.0.0.1:{listener.getsockname()[1]}/'}}")
    config = tmp_path / "config.yml"
    config.write_text(f"scrape_interval: 2s\nscrape_timeout: 2s\nnodes: [{', '.join(nodes)}]\n")
    exporter = ExporterProcess(config)
    try:
        for name in ("dripping", "silent"):
            wait_for_text(exporter.base + "/metrics", f'ledger_node_up{{node="{name}"}} 0.0')
        exporter.signal(signal.SIGTERM)
        try:
            exporter.process.wait(timeout=60)  # generous: it only has to end by itself
        except subprocess.TimeoutExpired:
            exporter.process.kill()
        stderr = exporter.log()
    finally:
        stop.set()
        for listener in listeners:
            listener.close()
    assert exporter.process.returncode == 0, stderr
    assert "shutting down" in stderr


# --- Every flag and variable of every command, mistyped: one line that says what to fix. ---

EXAMPLE = str(REPO / "config" / "example.yml")
CHECK = ("--config.check", f"--config.file={EXAMPLE}")
# (argv, environment, exit status, the one line on stderr must contain this)
MISTAKES: list[tuple[tuple[str, ...], dict[str, str], int, str]] = [
    ((), {}, 2, "ledger-exporter: error: --config.file is required"),
    (("--config.file", "/nonexistent.yml", "--config.check"), {}, 1, "cannot read the file"),
    (("--config.check=yes", f"--config.file={EXAMPLE}"), {}, 2, "ignored explicit argument"),
    ((*CHECK, "--web.listen-address", "9877"), {}, 2, "must be host:port"),
    ((*CHECK, "--web.listen-address", ":99999"), {}, 2, "':99999': port out of range"),
    ((*CHECK, "--web.listen-address", ":1", "--web.listen-address", ":1"), {}, 2, "given twice"),
    ((*CHECK, "--web.telemetry-path", "metrics"), {}, 2, "must start with '/'"),
    ((*CHECK, "--web.telemetry-path", "/-/ready"), {}, 2, "would hide another endpoint"),
    ((*CHECK, "--web.telemetry-path", "/a b"), {}, 2, "percent-encode anything else"),
    ((*CHECK, "--web.config.file", "/nonexistent.yml"), {}, 1, "cannot read the file"),
    ((*CHECK, "--log.level", "verbose"), {}, 2, "unknown log level 'verbose'; use one of"),
    ((*CHECK, "--log.level", "warning"), {}, 2, "did you mean 'warn'?"),
    ((*CHECK, "--log.format", "xml"), {}, 2, "unknown log format 'xml'; use one of logfmt"),
    ((*CHECK, "--bogus"), {}, 2, "unrecognized arguments: --bogus"),
    (("--config.check",), {"LEDGER_EXPORTER_CONFIG_FILE": "/nonexistent.yml"}, 1, "cannot read"),
    (CHECK, {"LEDGER_EXPORTER_WEB_LISTEN_ADDRESS": "x"}, 2, "LEDGER_EXPORTER_WEB_LISTEN_ADDRESS="),
    (CHECK, {"LEDGER_EXPORTER_WEB_LISTEN_ADDRESS": ":1,,:2"}, 2, "separate the values with"),
    (CHECK, {"LEDGER_EXPORTER_WEB_LISTEN_ADDRESS": ":1,:70000"}, 2, "port out of range"),
    (CHECK, {"LEDGER_EXPORTER_WEB_TELEMETRY_PATH": "/"}, 2, "TELEMETRY_PATH='/': telemetry"),
    (CHECK, {"LEDGER_EXPORTER_WEB_CONFIG_FILE": "/nonexistent.yml"}, 1, "cannot read the file"),
    (CHECK, {"LEDGER_EXPORTER_LOG_LEVEL": "verbose"}, 2, "LEDGER_EXPORTER_LOG_LEVEL='verbose'"),
    (CHECK, {"LEDGER_EXPORTER_LOG_FORMAT": "xml"}, 2, "LEDGER_EXPORTER_LOG_FORMAT='xml'"),
    ((*CHECK, "--web.read-header-timeout", "0s"), {}, 2, "duration '0s' out of range"),
    ((*CHECK, "--web.idle-timeout", "5"), {}, 2, "--web.idle-timeout: invalid duration '5'"),
    ((*CHECK, "--web.max-connections", "0"), {}, 2, "expected a whole number from 1 to"),
    ((*CHECK, "--config.auto-reload-interval", "30"), {}, 2, "invalid duration '30'"),
    ((*CHECK, "--config.auto-reload-interval", "25h"), {}, 2, "or 0 to turn it off"),
    (CHECK, {"LEDGER_EXPORTER_CONFIG_AUTO_RELOAD_INTERVAL": "-1s"}, 2, "AUTO_RELOAD_INTERVAL="),
    (CHECK, {"LEDGER_EXPORTER_WEB_READ_HEADER_TIMEOUT": "x"}, 2, "READ_HEADER_TIMEOUT='x'"),
    (CHECK, {"LEDGER_EXPORTER_WEB_IDLE_TIMEOUT": "-1s"}, 2, "LEDGER_EXPORTER_WEB_IDLE_TIMEOUT="),
    (CHECK, {"LEDGER_EXPORTER_WEB_MAX_CONNECTIONS": "many"}, 2, "WEB_MAX_CONNECTIONS='many'"),
    ((*CHECK, "--state.file", "/tmp"), {}, 2, "--state.file: '/tmp' is a directory; name a file"),
    (CHECK, {"LEDGER_EXPORTER_STATE_FILE": ""}, 2, "STATE_FILE='': expected the path of a file"),
    (("demo", "--nodes", "0"), {}, 2, "--nodes: expected a whole number from 1 to 100000, got '0'"),
    (("demo", "--chains", "two"), {}, 2, "--chains: expected a whole number from 1 to 1000"),
    (("demo", "--nodes", "100000000"), {}, 2, "--nodes: expected a whole number from 1 to 100000"),
    (("demo", "--block-interval", "0s"), {}, 2, "--block-interval: duration '0s' out of range"),
    (("demo", "--seed", "x"), {}, 2, "--seed: expected a whole number, got 'x'"),
    (("demo", "--web.listen-address", "localhost"), {}, 2, "--web.listen-address: listen"),
    (("demo", "--scrape-interval", "5"), {}, 2, "--scrape-interval: invalid duration '5': missing"),
    (("demo", "--scrape-interval", "9" * 20 + "h"), {}, 2, "longer than Go's limit"),
    (("demo", "--prometheus=yes"), {}, 2, "--prometheus: ignored explicit argument 'yes'"),
    (("demo", "--prometheus.listen-address", "x:y"), {}, 2, "--prometheus.listen-address: "),
    (("demo", "--ha=yes"), {}, 2, "--ha: ignored explicit argument 'yes'"),
    (("demo", "--ha.listen-address", "x:y"), {}, 2, "--ha.listen-address: "),
    (("demo", "--log.level", "bogus"), {}, 2, "--log.level: unknown log level 'bogus'"),
    (("demo", "--log.format", "xml"), {}, 2, "--log.format: unknown log format 'xml'"),
    (("simulate", "--nodes", "0"), {}, 2, "--nodes: expected a whole number from 1 to 100000"),
    (("simulate", "--chains", "-1"), {}, 2, "--chains: expected a whole number from 1 to 1000"),
    (("simulate", "--chains", "1001"), {}, 2, "--chains: expected a whole number from 1 to 1000"),
    (("simulate", "--block-interval", "5"), {}, 2, "--block-interval: invalid duration '5'"),
    (("simulate", "--seed", "1.5"), {}, 2, "--seed: expected a whole number, got '1.5'"),
    (("simulate", "--listen-address", "7740"), {}, 2, "--listen-address: invalid listen address"),
    (("simulate", "--layout", "grid"), {}, 2, "--layout: invalid choice: 'grid'"),
    (("simulate", "--fault", "node-2"), {}, 2, "invalid --fault 'node-2': use NODE:FAULT"),
    (("simulate", "--log.level", "loud"), {}, 2, "--log.level: unknown log level 'loud'"),
    (("simulate", "--tls=yes"), {}, 2, "argument --tls: ignored explicit argument 'yes'"),
    (("simulate", "--tls.days", "soon"), {}, 2, "--tls.days: cert_expiry takes the days until"),
    (("simulate", "--tls", f"--tls.dir={EXAMPLE}"), {}, 1, "give --tls.dir a directory"),
]


PARSERS = {"main": main_parser, "demo": demo_parser, "simulate": simulate_parser}


def _flags(command: str) -> set[str]:
    options = {o for a in PARSERS[command]()._actions for o in a.option_strings}
    return {o for o in options if o.startswith("--") and o not in ("--help", "--version")}


@pytest.mark.parametrize("command", ["main", "demo", "simulate"])
def test_the_mistakes_table_covers_every_flag_and_variable(command: str) -> None:
    covered = {
        word.partition("=")[0]
        for argv, env, _, _ in MISTAKES
        if (argv[:1] == (command,))
        or (command == "main" and argv[:1] not in (("demo",), ("simulate",)))
        for word in (*argv, *env)
    }
    assert _flags(command) <= covered
    if command == "main":
        options = {o.lstrip("-") for o in _flags("main") if o != "--config.check"}
        assert {env_name(flag) for flag in options} <= covered
        assert len(options) == len(DEFAULTS)


@pytest.mark.parametrize(
    ("argv", "env", "code", "expected"),
    MISTAKES,
    ids=[
        " ".join(argv) + "".join(f" {k}={v}" for k, v in env.items())
        for argv, env, _, _ in MISTAKES
    ],
)
def test_a_mistake_is_one_line_that_says_what_to_fix(
    argv: tuple[str, ...], env: dict[str, str], code: int, expected: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_EXPORTER_")}
    result = subprocess.run(
        exporter_command(*argv), capture_output=True, text=True, env={**clean, **env}, timeout=60
    )
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert result.stdout == ""


def test_a_misspelt_variable_is_named_with_the_right_one() -> None:
    env = {**os.environ, "LEDGER_EXPORTER_LOG_LEVLE": "debug", "LEDGER_EXPORTER_MY_TOKEN": "x"}
    result = subprocess.run(exporter_command(*CHECK), capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "ledger-exporter: ignoring unknown environment variable LEDGER_EXPORTER_LOG_LEVLE; "
        "did you mean LEDGER_EXPORTER_LOG_LEVEL?"
    ]


def test_flags_win_over_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "LEDGER_EXPORTER_LOG_FORMAT": "xml", "LEDGER_EXPORTER_CONFIG_FILE": "/x"}
    result = subprocess.run(
        exporter_command(*CHECK, "--log.format=json"), capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{EXAMPLE}: OK")


def test_help_lists_the_sub_commands_the_simulator_plugs_in() -> None:
    """`simulate` and `demo` are entry points of the simulator, found at run time: the
    exporter never imports ledger_simulator, and its --help still names them."""
    help_text = " ".join(main_parser().format_help().split())
    assert "Sub-commands: demo, simulate (see 'ledger-exporter demo --help'," in help_text


@pytest.mark.parametrize("command", ["main", "demo", "simulate"])
def test_help_describes_every_flag_without_markup(command: str) -> None:
    argv = () if command == "main" else (command,)
    result = subprocess.run(exporter_command(*argv, "--help"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout and ":func:" not in result.stdout
    for flag in _flags(command):
        line = next(line for line in result.stdout.splitlines() if line.strip().startswith(flag))
        index = result.stdout.splitlines().index(line)
        described = line.split(flag, 1)[1].split(maxsplit=1)[1:] or [
            result.stdout.splitlines()[index + 1].strip()
        ]
        assert described[0], f"{command} {flag} has no help text"


def test_the_example_config_polls_the_simulator_as_shipped(tmp_path: Path) -> None:
    """config/example.yml against `ledger-exporter simulate` with its defaults: every node
    up. Only the port moves (tests bind free ports); the example's 7740 is simulate's."""
    text = (REPO / "config" / "example.yml").read_text(encoding="utf-8")
    assert len(re.findall(r"url: http://127\.0\.0\.1:7740/nodes/node-[123]/\n", text)) == 3
    port = free_port()
    config = tmp_path / "example.yml"
    text = text.replace("scrape_interval: 15s", "scrape_interval: 1s")
    text = text.replace("scrape_timeout: 10s", "scrape_timeout: 1s")
    config.write_text(text.replace("127.0.0.1:7740", f"127.0.0.1:{port}"), encoding="utf-8")
    command = exporter_command("simulate", f"--listen-address=127.0.0.1:{port}")
    expected = {
        ("validator-1", "eu-west", "validator"): 1.0,
        ("validator-2", "us-east", "validator"): 1.0,
        ("observer-1", "eu-west", "observer"): 1.0,
    }
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as simulator:
        exporter = ExporterProcess(config)
        seen: list[dict[tuple[str, ...], float]] = [{}]

        def all_up() -> bool:
            seen[0] = node_up(exporter.base + "/metrics")
            return seen[0] == expected

        try:
            wait_until(all_up, ignoring=(OSError,), message=lambda: f"ledger_node_up: {seen[0]}")
        finally:
            code, stderr = exporter.stop()
            simulator.terminate()
            simulator.communicate(timeout=30)
    assert code == 0, stderr


def node_up(url: str) -> dict[tuple[str, ...], float]:
    """``ledger_node_up`` by (node, region, role)."""
    return {
        tuple(s.labels.get(k, "") for k in ("node", "region", "role")): s.value
        for family in text_string_to_metric_families(fetch(url).text)
        for s in family.samples
        if s.name == "ledger_node_up"
    }
