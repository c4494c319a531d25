"""``ledger-exporter demo``: a simulated network and an exporter polling it, no config needed.

Optionally (``--prometheus``) a Prometheus server too, with the project's alert and recording
rules, when a ``prometheus`` binary is on the PATH. Everything binds to 127.0.0.1 and stops on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import yaml

from exporter.app import Exporter
from exporter.config import Config, NodeConfig
from exporter.logs import setup_logging
from exporter.values import parse_go_duration
from exporter.watchconfig import WatchConfig, WatchedContract, WatchedWallet
from ledger_simulator import SimulatedNetwork

RULES_DIR = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ledger-exporter demo", description=__doc__)
    parser.add_argument("--nodes", type=int, default=4, help="simulated nodes (default 4)")
    parser.add_argument("--chains", type=int, default=2, help="blockchains (default 2)")
    parser.add_argument("--block-interval", default="2s", help="time between blocks (Go duration)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulated network")
    parser.add_argument(
        "--web.listen-address",
        dest="listen_address",
        default="127.0.0.1:9877",
        help="exporter address (default 127.0.0.1:9877)",
    )
    parser.add_argument("--scrape-interval", default="5s", help="exporter poll interval")
    parser.add_argument(
        "--prometheus",
        action="store_true",
        help="also start the prometheus binary on the PATH with the project's rules",
    )
    parser.add_argument(
        "--prometheus.listen-address",
        dest="prometheus_address",
        default="127.0.0.1:9090",
        help="Prometheus address (default 127.0.0.1:9090)",
    )
    parser.add_argument("--log.level", dest="log_level", default="info")
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


def prometheus_config(exporter_address: str) -> dict[str, object]:
    """The project's scrape config pointed at this demo's exporter, with the rules if present."""
    config: dict[str, object] = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        "scrape_configs": [
            {"job_name": "ledger-exporter", "static_configs": [{"targets": [exporter_address]}]}
        ],
    }
    rules = [str(RULES_DIR / name) for name in ("rules.yml", "alerts.yml")]
    if all(Path(rule).is_file() for rule in rules):
        config["rule_files"] = rules
    return config


def start_prometheus(exporter_address: str, listen: str, workdir: Path) -> subprocess.Popen[bytes]:
    """Start Prometheus and wait until it is ready; exit with its own words if it fails."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit(
            "--prometheus: no 'prometheus' binary on the PATH (Debian: apt install prometheus)"
        )
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(prometheus_config(exporter_address)))
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
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (workdir / "prometheus.log").read_text(errors="replace")[-2000:]
            raise SystemExit(
                f"--prometheus: prometheus exited with code {process.returncode}:\n{tail}"
            )
        try:
            with urllib.request.urlopen(f"http://{listen}/-/ready", timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    _terminate(process)
    raise SystemExit(f"--prometheus: prometheus was not ready on {listen} within 30s")


def _terminate(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo until Ctrl-C."""
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, "logfmt")
    interval = parse_go_duration(args.scrape_interval)
    network = SimulatedNetwork(
        nodes=args.nodes,
        chains=args.chains,
        block_interval=parse_go_duration(args.block_interval),
        seed=args.seed,
    )
    network.start()
    exporter = Exporter(demo_config(network, interval))
    prometheus = None
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as workdir:
        try:
            server = exporter.start(args.listen_address)
            address = f"127.0.0.1:{server.port}"
            print(f"Simulated network: {len(network.node_urls)} nodes, admin {network.admin_url}")
            print(f"Exporter landing page: http://{address}/")
            print(f"Metrics:               http://{address}/metrics")
            print(
                f"Switch a fault on:     curl -X POST {network.admin_url}faults "
                '-d \'{"node": "node-2", "fault": "stall", "enabled": true}\''
            )
            print(
                f"Pause the watched contract on every node: curl -X POST {network.admin_url}faults "
                '-d \'{"node": "*", "fault": "contract_paused"}\''
            )
            if args.prometheus:
                prometheus = start_prometheus(address, args.prometheus_address, Path(workdir))
                print(f"Prometheus:            http://{args.prometheus_address}/")
            print("Press Ctrl-C to stop.", flush=True)
            _wait_for_signal()
        finally:
            try:
                if prometheus is not None:
                    _terminate(prometheus)
            finally:
                exporter.stop()
                network.stop()
    return 0


def _wait_for_signal() -> None:
    stop = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGTERM, on_stop)
    while not stop.wait(0.5):
        pass
