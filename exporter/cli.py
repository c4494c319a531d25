"""Command line: ``ledger-exporter [flags]``, and the sub-commands other packages plug in.

Flags follow the Prometheus exporters' dotted style; each may also come from an environment
variable ``LEDGER_EXPORTER_<FLAG>`` (dots and dashes as underscores), handy in containers.
Sub-commands (``simulate`` and ``demo``, from the ``ledger_simulator`` package of the same
distribution) are entry points of the ``ledger_exporter.commands`` group, so the exporter
never imports the simulator: ``ledger-exporter demo`` runs the simulator's demo, which
imports the exporter.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from exporter.build import this_build
from exporter.config.exporter import Config, load_config
from exporter.config.node_files import read_node_file
from exporter.config.web import WebConfig, load_web_config
from exporter.errors import ConfigError
from exporter.flags import (
    DEFAULT_PORT,
    Parser,
    add_log_flags,
    apply_environment,
    duration_or_off,
    env_name,
    listen_address,
    positive_duration,
    shown_default,
    state_file,
    telemetry_path,
    whole_number,
)
from exporter.logs import DEFAULT_FORMAT, DEFAULT_LEVEL, setup_logging
from exporter.web.httpserver import ServerLimits

if TYPE_CHECKING:
    import importlib.metadata

#: The entry point group of the sub-commands: each names a ``main(argv) -> int``.
COMMANDS = "ledger_exporter.commands"

#: What each flag that an environment variable may set defaults to: the one place a flag's
#: default is stated (the server's limits are the server's own defaults); build_parser adds
#: each to its flag's help, and `make docs` writes them into docs/configuration.md.
DEFAULTS: dict[str, str | float | list[str] | None] = {
    "config_file": None,  # required
    "listen_address": [f":{DEFAULT_PORT}"],
    "telemetry_path": "/metrics",
    "web_config_file": None,
    "log_level": DEFAULT_LEVEL,
    "log_format": DEFAULT_FORMAT,
    "read_header_timeout": ServerLimits.read_header_timeout,
    "idle_timeout": ServerLimits.idle_timeout,
    "max_connections": ServerLimits.max_connections,
    "state_file": None,
    # As Prometheus 3's own: a renewed certificate or an edited node list is served within
    # half a minute, and hashing a few small files that often costs next to nothing.
    "auto_reload_interval": 30.0,
}


def sub_commands() -> dict[str, importlib.metadata.EntryPoint]:
    """The installed sub-commands by name (``demo`` and ``simulate`` from this project).
    Imported and scanned only when asked (a sub-command or ``--help``): the daemon that
    never needs them keeps the ~0.8 MiB importlib.metadata costs out of its RSS."""
    import importlib.metadata  # noqa: PLC0415 (see the docstring)

    return {entry.name: entry for entry in importlib.metadata.entry_points(group=COMMANDS)}


class _MainParser(Parser):
    """The main command's parser: the description (listing the sub-commands) is made only
    when the help is shown."""

    def format_help(self) -> str:
        self.description = _description(sorted(sub_commands()))
        return super().format_help()


def _description(commands: Sequence[str]) -> str:
    listed = ""
    if commands:
        helps = ", ".join(f"'ledger-exporter {name} --help'" for name in commands)
        listed = f" Sub-commands: {', '.join(commands)} (see {helps})."
    return (
        f"Prometheus exporter for ledger nodes.{listed} Every flag with a value may also be "
        "set by an environment variable, shown in its help."
    )


def build_parser() -> argparse.ArgumentParser:
    """The main command's flags; each value flag may come from ``LEDGER_EXPORTER_<FLAG>``."""
    parser = _MainParser(
        prog="ledger-exporter",
        argument_default=argparse.SUPPRESS,  # so that apply_environment sees what was given
    )
    add = parser.add_argument
    add("--config.file", dest="config_file", metavar="FILE", help="YAML config file (required)")
    add(
        "--config.check",
        dest="config_check",
        action="store_true",
        default=False,
        help="check the flags, environment, config and web config; print every problem, exit",
    )
    add(
        "--config.auto-reload-interval",
        dest="auto_reload_interval",
        type=duration_or_off,
        metavar="DURATION",
        help="how often the config file, the web config file and every file they name are"
        " compared with what they held at the last reload; a change reloads them as SIGHUP"
        " does (a bad file keeps the running config); 0 turns it off",
    )
    add(
        "--web.listen-address",
        dest="listen_address",
        action="append",
        type=listen_address,
        metavar="ADDRESS",
        help="host:port to serve on, ':port' for all interfaces, '[::1]:port' for IPv6; repeat "
        "it to serve on several (in the variable, separate them with commas)",
    )
    add(
        "--web.telemetry-path",
        dest="telemetry_path",
        type=telemetry_path,
        metavar="PATH",
        help="path under which to serve the metrics: it starts with '/', holds only URL path "
        "characters and is not '/', '/probe' or under '/-/'",
    )
    add(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="exporter-toolkit web config: TLS and basic auth for the endpoints",
    )
    _add_server_limits(parser)
    add(
        "--state.file",
        dest="state_file",
        type=state_file,
        metavar="FILE",
        help="where the memory between cycles (when each chain's height last changed) is "
        "kept across restarts; written atomically once a cycle and on shutdown",
    )
    add_log_flags(parser, defaults=False)
    add(
        "--version",
        action=VersionAction,
        help="print the version, revision, branch, build and Python version, and exit",
    )
    for action in parser._actions:
        if action.dest in DEFAULTS and action.help:
            if not action.help.endswith("(required)"):
                shown = shown_default(DEFAULTS[action.dest], action.type)
                action.help += f" (default {shown})"
            action.help += f" [env {env_name(action.option_strings[0].lstrip('-'))}]"
    return parser


class VersionAction(argparse.Action):
    """``--version``: the build, in the lines ``prometheus --version`` prints, then exit 0."""

    def __init__(
        self, option_strings: list[str], dest: str, default: object = None, help: str | None = None
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(this_build().version_text(parser.prog))
        parser.exit()


def _add_server_limits(parser: argparse.ArgumentParser) -> None:
    """The HTTP server's limits (``exporter.web.httpserver``): slow or idle clients are closed."""
    add = parser.add_argument
    add(
        "--web.read-header-timeout",
        dest="read_header_timeout",
        type=positive_duration,
        metavar="DURATION",
        help="time a client has to finish TLS and send a whole request (headers and body), "
        "and an answer may wait for the client to take any of it",
    )
    add(
        "--web.idle-timeout",
        dest="idle_timeout",
        type=positive_duration,
        metavar="DURATION",
        help="how long an idle keep-alive connection stays open",
    )
    add(
        "--web.max-connections",
        dest="max_connections",
        type=whole_number(1, 1_000_000),
        metavar="N",
        help="connections open at once; past it the least recently active one is closed",
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


def _check_node_files(config: Config) -> bool:
    """Print each node file's summary or problems (as the exporter would read it now);
    False when one fails."""
    ok = True
    for path in config.node_file_paths():
        try:
            nodes, _ = read_node_file(path, config.bounds.label_value_length)
        except ConfigError as error:
            ok = False
            for problem in error.problems:
                print(f"{path}: {problem}", file=sys.stderr)
            continue
        print(f"{path}: OK, {len(nodes)} node(s)")
    return ok


def _check_state_file(path: str, config: Config) -> bool:
    """Print what a start would do with the state file; False when it would not keep the
    memory there (another program's file, a newer version's, one it cannot read)."""
    from exporter.poll.state import check  # noqa: PLC0415 (only --config.check reads it)

    usable, line = check(path, config)
    print(line, file=sys.stdout if usable else sys.stderr)
    return usable


def _watch_notes(config: Config) -> list[str]:
    """Watch entries on a blockchain that none of the nodes they may ask is configured for
    (``nodes[].blockchains``; a node without it may list any chain, so no note then)."""
    from exporter.model.watch_readings import unmatched_entries  # noqa: PLC0415 (only for the check)

    configured = {node.name: node.blockchains for node in config.nodes if node.blockchains}
    names = [node.name for node in config.nodes]
    return [
        f"watch {entry}: none of the nodes it may ask has that blockchain in "
        "nodes[].blockchains; unless a node's /health lists it, it is never asked"
        for entry in unmatched_entries(config.watch, names, configured, every_node_known=True)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ledger-exporter`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = args_list[0] if args_list else "-"
    command = None if first.startswith("-") else sub_commands().get(first)
    if command is not None:
        run: Callable[[list[str]], int] = command.load()
        return run(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    for warning in apply_environment(parser, args, DEFAULTS, os.environ):
        print(f"ledger-exporter: {warning}", file=sys.stderr)
    if not args.config_file:
        parser.error("--config.file is required (or LEDGER_EXPORTER_CONFIG_FILE)")
    repeated = [a for i, a in enumerate(args.listen_address) if a in args.listen_address[:i]]
    if repeated:
        parser.error(f"--web.listen-address {repeated[0]!r} is given twice")
    loaded = _load(args)
    if loaded is None:
        return 1
    config, web = loaded
    if args.config_check:
        summary = f"{args.config_file}: OK, {len(config.nodes)} node(s)"
        if config.probe:
            summary += f", probe mode ({len(config.probe.modules)} module(s))"
        contracts, wallets = len(config.watch.contracts), len(config.watch.wallets)
        if contracts or wallets:
            summary += f", watching {contracts} contract(s) and {wallets} wallet(s)"
        print(summary)
        for note in _watch_notes(config):
            print(f"{args.config_file}: note: {note}")
        if web is not None:
            print(f"{args.web_config_file}: OK, {web.summary()}")
        files_ok = _check_node_files(config)
        state_ok = args.state_file is None or _check_state_file(args.state_file, config)
        return 0 if files_ok and state_ok else 1
    setup_logging(args.log_level, args.log_format)
    # Only here: a sub-command (the simulator's) never loads the exporter proper (pycurl, ...).
    from exporter.app import serve  # noqa: PLC0415

    return serve(
        config,
        args.config_file,
        args.listen_address,
        web,
        args.web_config_file,
        _limits(args),
        telemetry_path=args.telemetry_path,
        state_file=args.state_file,
        auto_reload_interval=args.auto_reload_interval,
    )
