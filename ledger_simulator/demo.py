"""``ledger-exporter demo``: a simulated network and an exporter polling it, no config needed.

Optionally (``--prometheus``) a Prometheus server too, with the project's alert and recording
rules (package data, copies of deploy/prometheus/ kept equal by a test), when a ``prometheus``
binary is on the PATH. With ``--ha``, two exporter replicas poll the network, a
high-availability pair (each its own state file), scraped as one logical exporter: one
``instance``, an ``exporter_replica`` label each, as deploy/prometheus/ha.yml does.
Everything binds to 127.0.0.1 and stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib.resources
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from exporter.flags import (
    DEFAULT_PORT,
    Parser,
    add_log_flags,
    add_network_flags,
    listen_address,
    positive_duration,
)
from exporter.logs import setup_logging
from exporter.web.httpserver import parse_listen_address
from ledger_simulator import SimulatedNetwork
from ledger_simulator.errors import SimulatorError
from ledger_simulator.stopping import stop_on_signals, wait_until_stopped

#: The project's rule files, shipped in the package (exporter/rules/) for the demo.
RULE_FILES = ("rules.yml", "alerts.yml")
#: A pair's scrape labels, as deploy/prometheus/ha.yml sets them: both replicas' targets carry
#: the pair's ``instance``; the label the rules fold (the mixin's ``replicaLabels``) tells
#: them apart.
PAIR_INSTANCE = "ledger-exporter"
REPLICA_LABEL = "exporter_replica"
#: The replicas of ``--ha``, each with the flag choosing its address.
REPLICAS = (("a", "--web.listen-address"), ("b", "--ha.listen-address"))
DESCRIPTION = (
    "Run a simulated ledger network and an exporter polling it, no config needed; with "
    "--ha two exporter replicas, a high-availability pair; with --prometheus also a "
    "Prometheus server (the 'prometheus' binary on the PATH) loaded with the project's alert "
    "and recording rules. All listen on 127.0.0.1 by default; Ctrl-C stops them."
)


class DemoError(Exception):
    """The demo cannot start; the message names the flag to change."""


def build_parser() -> argparse.ArgumentParser:
    """The demo's flags; each value is checked before anything starts."""
    parser = Parser(prog="ledger-exporter demo", description=DESCRIPTION)
    add = parser.add_argument
    add_network_flags(parser, nodes=4, seed=1)
    add(
        "--web.listen-address",
        dest="listen_address",
        type=listen_address,
        default=f"127.0.0.1:{DEFAULT_PORT}",
        metavar="ADDRESS",
        help="exporter address (with --ha, replica a's)",
    )
    add(
        "--ha",
        action="store_true",
        help="run two exporter replicas polling the network, a high-availability pair, each "
        "with its own state file (scrape them as deploy/prometheus/ha.yml does)",
    )
    add(
        "--ha.listen-address",
        dest="ha_address",
        type=listen_address,
        default=f"127.0.0.1:{DEFAULT_PORT + 1}",
        metavar="ADDRESS",
        help="replica b's address, with --ha",
    )
    add(
        "--scrape-interval",
        type=positive_duration,
        default=5.0,
        metavar="DURATION",
        help="how often the exporter polls the nodes, a Go duration",
    )
    add("--prometheus", action="store_true", help="also start Prometheus with the rules")
    add(
        "--prometheus.listen-address",
        dest="prometheus_address",
        type=listen_address,
        default="127.0.0.1:9090",
        metavar="ADDRESS",
        help="Prometheus address",
    )
    add_log_flags(parser)
    return parser


def demo_config(network: SimulatedNetwork, interval: float) -> Config:
    """A config polling every simulated node, as an operator would write it."""
    nodes = tuple(
        NodeConfig(name=name, url=url, labels=(("env", "demo"),))
        for name, url in network.node_urls.items()
    )
    return Config(
        nodes=nodes,
        scrape_interval=interval,
        scrape_timeout=min(interval, 4.0),
        watch=demo_watch(network),
    )


def demo_watch(network: SimulatedNetwork) -> WatchConfig:
    """The first chain's token contract and first wallet (an admin one, always enabled), as
    config/example.yml lists them for the default seed."""
    chain = network.chain_ids[0]
    token = network.ledger.contract_addresses(0)[0]
    treasury = network.ledger.wallet_addresses()[0]
    keys = ("totalSupply", "holders", "paused")
    return WatchConfig(
        contracts=(WatchedContract(chain, token, "karma-token", keys),),
        wallets=(WatchedWallet(chain, treasury, "treasury"),),
    )


def rule_texts() -> dict[str, str]:
    """The project's rule files from the installed package; DemoError says why not."""
    folder = importlib.resources.files("exporter") / "rules"
    try:
        return {name: (folder / name).read_text(encoding="utf-8") for name in RULE_FILES}
    except OSError as error:
        raise DemoError(
            f"--prometheus: the project's rules are missing from the installed package "
            f"({error}); reinstall ledger-exporter"
        ) from None


def prometheus_config(
    exporter_address: str, rule_files: Sequence[str], pair: Mapping[str, str] | None = None
) -> dict[str, object]:
    """The project's scrape config pointed at this demo's exporter, with its rule files; or
    at its ``pair`` of replicas (name -> address) scraped as one logical exporter."""
    targets: list[dict[str, object]] = (
        [{"targets": [exporter_address]}]
        if pair is None
        else [
            {"targets": [address], "labels": {"instance": PAIR_INSTANCE, REPLICA_LABEL: name}}
            for name, address in pair.items()
        ]
    )
    return {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "rule_files": list(rule_files),
        "scrape_configs": [{"job_name": "ledger-exporter", "static_configs": targets}],
    }


#: How many ports above a taken one the advice looks through for a free one to suggest.
SUGGESTION_TRIES = 100


def _bind_error(address: str) -> OSError | None:
    """Why ``address`` cannot be bound now (say, already taken), or None."""
    host, port = parse_listen_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host or "0.0.0.0", port))
        except OSError as error:
            return error
    return None


def _with_flag(argv: Sequence[str], flag: str, value: str) -> list[str]:
    """The demo's command-line arguments with ``flag`` set to ``value`` (added if absent)."""
    changed, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True  # its value follows
        elif not arg.startswith(f"{flag}="):
            changed.append(arg)
    return [*changed, flag, value]


def taken_advice(address: str, flag: str, error: OSError, argv: Sequence[str]) -> str:
    """The one line for an address that cannot be bound: which flag chooses another, and the
    command to run, as ``ledger-exporter demo`` and as ``make demo ARGS=...`` (the same
    arguments with a free port above the taken one, on the same host)."""
    host, port = parse_listen_address(address)
    shown_host = f"[{host}]" if ":" in host else host
    free = next(
        (
            candidate
            for number in range(port + 1, min(port + SUGGESTION_TRIES, 65535) + 1)
            if _bind_error(candidate := f"{shown_host}:{number}") is None
        ),
        None,
    )
    advice = f"cannot listen on {address} ({error.strerror}): choose another with {flag}"
    if free is None:
        return advice
    args = shlex.join(_with_flag(argv, flag, free))
    return f"{advice}: ledger-exporter demo {args} (or make demo ARGS={shlex.quote(args)})"


def check_free(address: str, flag: str, argv: Sequence[str] = ()) -> None:
    """Raise DemoError with :func:`taken_advice` when ``address`` cannot be bound."""
    error = _bind_error(address)
    if error is not None:
        raise DemoError(taken_advice(address, flag, error, argv))


def check_prometheus(listen: str, argv: Sequence[str] = ()) -> str:
    """The prometheus binary, once its address is known to be free; else DemoError."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise DemoError(
            "--prometheus: no 'prometheus' binary on the PATH (Debian: apt install prometheus)"
        )
    check_free(listen, "--prometheus.listen-address", argv)
    return binary


def start_prometheus(
    exporter_address: str, listen: str, workdir: Path, pair: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start Prometheus with the rules (scraping the exporter, or the ``pair``) and wait until
    it is ready; DemoError if it fails."""
    binary = check_prometheus(listen)
    for name, text in rule_texts().items():
        (workdir / name).write_text(text, encoding="utf-8")
    config_file = workdir / "prometheus.yml"
    config = prometheus_config(exporter_address, RULE_FILES, pair)
    config_file.write_text(yaml.safe_dump(config))
    log_file = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={listen}",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()  # the child holds its own copy of the descriptor
    try:
        _wait_ready(process, listen, workdir / "prometheus.log")
    except BaseException:  # Ctrl-C while waiting included: never leave Prometheus behind
        _terminate(process)
        raise
    return process


def _wait_ready(process: subprocess.Popen[bytes], listen: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            last = (log.read_text(errors="replace").strip().splitlines() or ["(no output)"])[-1]
            raise DemoError(
                f"--prometheus: prometheus exited with code {process.returncode}: {last}"
            )
        try:
            with urllib.request.urlopen(f"http://{listen}/-/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise DemoError(f"--prometheus: prometheus was not ready on {listen} within 30s")


def _terminate(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo until Ctrl-C: 0 then, 2 for a bad flag, 1 when something cannot start."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for the advice on a taken port
    setup_logging(args.log_level, args.log_format)
    with stop_on_signals(threading.Event()) as stop:
        return _demo(args, stop)


def _demo(args: argparse.Namespace, stop: threading.Event) -> int:
    """Start the network, then the exporter (and Prometheus); run until ``stop``."""
    try:
        check_free(args.listen_address, "--web.listen-address", args.argv)
        if args.ha:
            check_free(args.ha_address, "--ha.listen-address", args.argv)
        if args.prometheus:
            check_prometheus(args.prometheus_address, args.argv)
        network = SimulatedNetwork(
            nodes=args.nodes, chains=args.chains, block_interval=args.block_interval, seed=args.seed
        )
        network.start()
    except (DemoError, SimulatorError) as error:
        print(f"ledger-exporter demo: {error}", file=sys.stderr)
        return 1
    try:
        return _run(args, network, stop)
    except DemoError as error:
        print(f"ledger-exporter demo: {error}", file=sys.stderr)
        return 1
    finally:
        network.stop()


def _run(args: argparse.Namespace, network: SimulatedNetwork, stop: threading.Event) -> int:
    """Start the exporter, or the pair's two replicas (and Prometheus), print where they
    are, wait for Ctrl-C."""
    listen = {"a": args.listen_address, "b": args.ha_address}
    started: list[Exporter] = []
    addresses: dict[str, str] = {}  # replica name ("" alone) -> its host:port
    try:
        with tempfile.TemporaryDirectory(prefix="ledger-demo-") as workdir:
            for name, flag in REPLICAS if args.ha else (("", "--web.listen-address"),):
                state = str(Path(workdir) / f"state-{name}.json") if args.ha else None
                exporter = Exporter(demo_config(network, args.scrape_interval), state_file=state)
                address = listen.get(name, args.listen_address)
                try:
                    server = exporter.start(address)
                except OSError as error:  # taken since it was checked
                    raise DemoError(taken_advice(address, flag, error, args.argv)) from None
                started.append(exporter)
                addresses[name] = f"127.0.0.1:{server.port}"
            _serve(args, network, addresses, Path(workdir), stop)
    finally:
        for exporter in started:
            exporter.stop()
    return 0


def _serve(
    args: argparse.Namespace,
    network: SimulatedNetwork,
    addresses: Mapping[str, str],
    workdir: Path,
    stop: threading.Event,
) -> None:
    """Print where everything is, start Prometheus if asked, and wait for Ctrl-C."""
    print(f"Simulated network: {len(network.node_urls)} nodes, admin {network.admin_url}")
    if not args.ha:
        address = addresses[""]
        print(f"Exporter landing page: http://{address}/")
        print(f"Metrics:               http://{address}/metrics")
    else:
        for name, address in addresses.items():
            print(f"Replica {name} landing page: http://{address}/")
            print(f"Replica {name} metrics:      http://{address}/metrics")
        print(
            "Scrape as one pair:     deploy/prometheus/ha.yml "
            f'(one job; instance="{PAIR_INSTANCE}", {REPLICA_LABEL}="a" or "b")'
        )
    print(
        f"Switch a fault on:     curl -X POST {network.admin_url}faults "
        '-d \'{"node": "node-2", "fault": "stall", "enabled": true}\''
    )
    print(
        f"Pause the watched contract on every node: curl -X POST {network.admin_url}faults "
        '-d \'{"node": "*", "fault": "contract_paused"}\''
    )
    print(
        f"Stick the first chain's vote session: curl -X POST {network.admin_url}faults "
        f'-d \'{{"node": "*", "fault": "session_stuck", "chain": "{network.chain_ids[0]}"}}\''
    )
    print(
        f"Make node-4 lag 30 s behind: curl -X POST {network.admin_url}faults "
        '-d \'{"node": "node-4", "fault": "lag_time", "delay_seconds": "30s"}\''
    )
    prometheus = None
    if args.prometheus:
        pair = dict(addresses) if args.ha else None
        first = next(iter(addresses.values()))
        prometheus = start_prometheus(first, args.prometheus_address, workdir, pair)
        print(f"Prometheus:            http://{args.prometheus_address}/")
        print(f"Prometheus rules:      {', '.join(RULE_FILES)} (the project's)")
    print("Press Ctrl-C to stop.", flush=True)
    try:
        wait_until_stopped(stop)
    finally:
        if prometheus is not None:
            _terminate(prometheus)
