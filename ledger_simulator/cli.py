"""``ledger-exporter simulate``: serve a simulated ledger network until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from exporter.errors import InvalidListenAddressError
from exporter.flags import Parser, add_log_flags, add_network_flags
from exporter.logs import setup_logging
from exporter.web.httpserver import parse_listen_address as parse_address
from ledger_simulator.certs import DEFAULT_DAYS, CertificateError, SimCertificates, parse_days
from ledger_simulator.errors import SimulatorError
from ledger_simulator.faults import parse_fault_spec
from ledger_simulator.ids import go_duration
from ledger_simulator.network import LAYOUTS, SimulatedNetwork
from ledger_simulator.stopping import stop_on_signals, wait_until_stopped

LISTED_NODES = 10  # more nodes than this are summarised on start
log = logging.getLogger("ledger_exporter.simulator")


def parse_listen_address(text: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (all interfaces) or ``[v6]:port`` -> (host, port), with the
    exporter's parser."""
    try:
        host, port = parse_address(text)
    except InvalidListenAddressError:
        raise argparse.ArgumentTypeError(
            f"invalid listen address {text!r}: use host:port, e.g. 127.0.0.1:7740 (port 0 = free)"
        ) from None
    return host or "0.0.0.0", port


def build_parser() -> argparse.ArgumentParser:
    """The ``simulate`` sub-command's options."""
    parser = Parser(
        prog="ledger-exporter simulate",
        description="Serve simulated ledger nodes (the node HTTP API) for demos and tests.",
    )
    add = parser.add_argument
    add_network_flags(parser, nodes=3, seed=0)
    add(
        "--listen-address",
        type=parse_listen_address,
        default="127.0.0.1:7740",  # read by parse_listen_address, as a given value is
        help="host:port of the admin endpoint (and of the nodes in the paths layout); "
        "port 0 picks free ports",
    )
    add("--layout", choices=LAYOUTS, default="paths", help="paths or ports")
    add(
        "--fault",
        action="append",
        default=[],
        metavar="NODE:FAULT[=VALUE][:CHAIN]",
        help="switch a fault on at start, e.g. node-2:stall, node-3:slow=5s, "
        "'*:session_stuck', '*:leader_failing=node-3' (repeatable)",
    )
    add(
        "--tls",
        action="store_true",
        help="serve https (the admin endpoint too) with a certificate for 127.0.0.1 and "
        "localhost signed by a CA made at start (needs the openssl tool); the CA's file is "
        "printed: point the exporter's tls_config.ca_file at it",
    )
    add(
        "--tls.days",
        dest="tls_days",
        type=_days,
        default=None,
        metavar="DAYS",
        help=f"days until the certificate expires (default {DEFAULT_DAYS:g}; 0 or less: served "
        "expired); the fault cert_expiry=DAYS reissues it while running",
    )
    add(
        "--tls.dir",
        dest="tls_dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the CA and certificates are written (default: a temporary directory, "
        "removed at exit)",
    )
    add_log_flags(parser, formats=False)
    return parser


def _days(text: str) -> float:
    try:
        return parse_days(text)
    except CertificateError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: Sequence[str] | None = None, stop: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM (or ``stop`` is set); 0 on a clean stop, 2 on bad options,
    1 when the sockets cannot be bound."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not args.tls and (args.tls_dir is not None or args.tls_days is not None):
            parser.error("--tls.dir and --tls.days apply to https: add --tls")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    setup_logging(args.log_level, "logfmt")  # the exporter's logfmt output on stderr
    with stop_on_signals(stop or threading.Event()) as stopped:
        return _simulate(args, stopped)


def _simulate(args: argparse.Namespace, stop: threading.Event) -> int:
    """Start the network (over https with --tls, its certificates in --tls.dir or a
    temporary directory) and run it until ``stop``."""
    if not args.tls:
        return _run(args, stop, None)
    if args.tls_dir is not None:
        return _run(args, stop, args.tls_dir)
    with tempfile.TemporaryDirectory(prefix="ledger-simulator-tls-") as directory:
        return _run(args, stop, Path(directory))


def _run(args: argparse.Namespace, stop: threading.Event, tls_dir: Path | None) -> int:
    """Start the network with the faults asked for, print where it is, run until ``stop``."""
    host, port = args.listen_address
    try:
        days = DEFAULT_DAYS if args.tls_days is None else args.tls_days
        certificates = None if tls_dir is None else SimCertificates(tls_dir, days)
    except CertificateError as error:
        print(f"ledger-exporter simulate: {error}", file=sys.stderr)
        return 1
    network = SimulatedNetwork(
        args.nodes,
        args.chains,
        args.block_interval,
        args.seed,
        host,
        port,
        args.layout,
        certificates=certificates,
    )
    try:
        for text in args.fault:
            spec = parse_fault_spec(text)
            network.set_fault(
                spec.node,
                spec.fault,
                True,
                spec.chain,
                spec.delay_seconds,
                spec.height,
                spec.target,
                spec.value,
            )
    except SimulatorError as error:
        print(f"ledger-exporter simulate: {error}", file=sys.stderr)
        return 2
    try:
        network.start()
    except SimulatorError as error:
        print(f"ledger-exporter simulate: {error}", file=sys.stderr)
        return 1
    print_summary(network, args.block_interval)
    wait_until_stopped(stop)
    log.info("stopping the simulated network")
    network.stop()
    return 0


def print_summary(network: SimulatedNetwork, interval: float) -> None:
    """Print the admin URL and the node URLs (a summary when there are many nodes)."""
    urls = network.node_urls
    lines = [
        f"simulating {len(urls)} nodes, {len(network.chain_ids)} blockchains, "
        f"block interval {go_duration(interval)}, layout {network.layout}",
        f"admin: {network.admin_url}",
    ]
    names = list(urls)
    shown = names if len(names) <= LISTED_NODES else [*names[:3], names[-1]]
    for name in shown:
        lines.append(f"{name}: {urls[name]}")
        if len(shown) < len(names) and name == names[2]:
            lines.append(f"... {len(names) - 4} more; GET {network.admin_url}nodes lists them")
    if network.certificates is not None:
        lines.append(f"ca: {network.certificates.ca_file}")
    lines.extend(f"blockchain: {chain}" for chain in network.chain_ids)
    print("\n".join(lines), flush=True)
