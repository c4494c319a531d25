"""Command line: ``ledger-exporter [flags]``, ``... simulate`` and ``... demo``.

Flags follow the Prometheus exporters' dotted style; each may also come from an environment
variable ``LEDGER_EXPORTER_<FLAG>`` (dots and dashes as underscores), handy in containers.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from exporter import __version__
from exporter.app import Exporter
from exporter.config import Config, load_config
from exporter.logs import LEVELS, setup_logging
from exporter.schema import ConfigError
from exporter.server import ServerLimits
from exporter.values import parse_go_duration
from exporter.webconfig import WebConfig, load_web_config

log = logging.getLogger("ledger_exporter")


def _env(flag: str, default: str | None = None) -> str | None:
    name = "LEDGER_EXPORTER_" + flag.upper().replace(".", "_").replace("-", "_")
    return os.environ.get(name, default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledger-exporter",
        description="Prometheus exporter for ledger nodes. Sub-commands: demo, simulate "
        "(see 'ledger-exporter demo --help', 'ledger-exporter simulate --help').",
    )
    parser.add_argument(
        "--config.file",
        dest="config_file",
        default=_env("config.file"),
        help="YAML config file (env LEDGER_EXPORTER_CONFIG_FILE)",
    )
    parser.add_argument(
        "--config.check",
        dest="config_check",
        action="store_true",
        help="validate the config (and web config), print every problem, exit",
    )
    parser.add_argument(
        "--web.listen-address",
        dest="listen_address",
        default=_env("web.listen-address", ":9877"),
        help="address to serve metrics on (default :9877)",
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        default=_env("web.config.file"),
        help="exporter-toolkit web config: TLS and basic auth for the endpoints",
    )
    _add_server_limits(parser)
    parser.add_argument(
        "--log.level", dest="log_level", choices=sorted(LEVELS), default=_env("log.level", "info")
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        choices=("logfmt", "json"),
        default=_env("log.format", "logfmt"),
    )
    parser.add_argument("--version", action="version", version=f"ledger-exporter {__version__}")
    return parser


def _positive_duration(text: str) -> float:
    try:
        seconds = parse_go_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive duration such as 10s, not {text!r}")
    return seconds


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def _add_server_limits(parser: argparse.ArgumentParser) -> None:
    """The HTTP server's limits (``exporter.httpserver``): slow or idle clients are closed."""
    add = parser.add_argument
    add(
        "--web.read-header-timeout",
        dest="read_header_timeout",
        type=_positive_duration,
        default=_env("web.read-header-timeout", "10s"),
        help="time a client has to send a request's headers (and finish TLS); default 10s",
    )
    add(
        "--web.idle-timeout",
        dest="idle_timeout",
        type=_positive_duration,
        default=_env("web.idle-timeout", "60s"),
        help="how long an idle keep-alive connection stays open; default 60s",
    )
    add(
        "--web.max-connections",
        dest="max_connections",
        type=_positive_int,
        default=_env("web.max-connections", "512"),
        help="connections open at once; past it the least recently active one is closed "
        "(default 512)",
    )


def _limits(args: argparse.Namespace) -> ServerLimits:
    return ServerLimits(args.read_header_timeout, args.idle_timeout, args.max_connections)


def _load(args: argparse.Namespace) -> tuple[Config, WebConfig | None] | None:
    """Both config files, or None after printing every problem of each."""
    failures: list[ConfigError] = []
    config = web = None
    try:
        config = load_config(args.config_file)
    except ConfigError as error:
        failures.append(error)
    if args.web_config_file:
        try:
            web = load_web_config(args.web_config_file)
        except ConfigError as error:
            failures.append(error)
    for failure in failures:
        for problem in failure.problems:
            print(f"{failure.source}: {problem}", file=sys.stderr)
    if failures or config is None:
        return None
    return config, web


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ledger-exporter`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["simulate"]:
        from ledger_simulator.cli import main as simulate  # noqa: PLC0415

        return simulate(args_list[1:])
    if args_list[:1] == ["demo"]:
        from exporter.demo import main as demo  # noqa: PLC0415

        return demo(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    if not args.config_file:
        parser.error("--config.file is required (or LEDGER_EXPORTER_CONFIG_FILE)")
    loaded = _load(args)
    if loaded is None:
        return 1
    config, web = loaded
    if args.config_check:
        print(f"{args.config_file}: OK, {len(config.nodes)} node(s)")
        return 0
    setup_logging(args.log_level, args.log_format)
    return serve(
        config, args.config_file, args.listen_address, web, args.web_config_file, _limits(args)
    )


def serve(  # noqa: PLR0917 (the last two added for the HTTP server)
    config: Config,
    config_path: str | None,
    listen_address: str,
    web: WebConfig | None,
    web_config_path: str | None = None,
    limits: ServerLimits | None = None,
) -> int:
    """Run until SIGTERM or SIGINT; SIGHUP reloads the config (and the web config)."""
    exporter = Exporter(config, config_path)
    try:
        server = exporter.start(listen_address, web, web_config_path, limits)
    except (OSError, ValueError) as error:
        log.error(
            "cannot listen", extra={"fields": {"address": listen_address, "error": str(error)}}
        )
        return 1
    log.info(
        "ledger-exporter started",
        extra={
            "fields": {
                "version": __version__,
                "address": listen_address,
                "port": server.port,
                "nodes": len(config.nodes),
            }
        },
    )
    stop = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_reload(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=_reload_quietly, args=(exporter,), daemon=True).start()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_reload)
    while not stop.wait(1.0):
        pass
    log.info("shutting down")
    exporter.stop()
    _exit_without_hung_requests(exporter)
    return 0


def _exit_without_hung_requests(exporter: Exporter, grace: float = 1.0) -> None:
    """Exit now if requests still hang (a node dripping its headers is bounded per read, not
    in total): the interpreter would otherwise wait for their threads before exiting."""
    deadline = time.monotonic() + grace
    while exporter.requests_in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    hung = exporter.requests_in_flight()
    if hung:
        log.warning(
            "exiting without waiting for requests that still hang",
            extra={"fields": {"requests": hung}},
        )
        logging.shutdown()
        os._exit(0)


def _reload_quietly(exporter: Exporter) -> None:
    with contextlib.suppress(ConfigError):  # already logged; the running config stays
        exporter.reload()
