"""Flag values checked by argparse, shared by the three commands (main, ``demo``, ``simulate``).

Each checker turns a mistake into a one-line message that says what to write instead (argparse
prints it after the usage and exits with status 2); values that come from the environment go
through the same checkers, so ``LEDGER_EXPORTER_LOG_LEVEL=verbose`` fails like
``--log.level=verbose``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from exporter.errors import DurationError, InvalidListenAddressError
from exporter.logs import DEFAULT_FORMAT, DEFAULT_LEVEL, FORMATS, LEVELS
from exporter.ownfile import NOT_A_FILE, refusal
from exporter.values import format_go_duration, parse_go_duration
from exporter.web.httpserver import parse_listen_address

ENV_PREFIX = "LEDGER_EXPORTER_"
#: The exporter's port (the one registered for it among Prometheus exporters): the main
#: command serves on all interfaces there by default, the demo on loopback.
DEFAULT_PORT = 9877
#: Durations a command line takes: at least a millisecond, at most a day.
MIN_SECONDS, MAX_SECONDS = 0.001, 86400.0


def shown_default(value: object, check: object) -> str:
    """A flag's default as the command line would write it (``10s``, ``:9877``), or ``none``;
    ``check`` is the flag's type, which says a float is a duration."""
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if check in (positive_duration, duration_or_off) and isinstance(value, float):
        return format_go_duration(value)
    return str(value)


class Parser(argparse.ArgumentParser):
    """argparse with kingpin's manners: a mistake is one line on stderr and exit status 2,
    without the usage block burying it (``--help`` still shows the usage). A flag's help
    ends with its default, taken from the flag's own ``default`` (never restated in text)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """Add the flag, and ``(default X)`` to its help when it has a default to show."""
        action = super().add_argument(*args, **kwargs)
        default = action.default
        nothing = default is None or default is False or default is argparse.SUPPRESS
        if action.help and not nothing and default != []:
            action.help += f" (default {shown_default(default, action.type)})"
        return action

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message> (see --help)`` and exit with status 2."""
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def one_of(kind: str, allowed: tuple[str, ...]) -> Callable[[str], str]:
    """A checker accepting exactly one of ``allowed``, suggesting the closest on a typo."""

    def check(text: str) -> str:
        if text in allowed:
            return text
        close = difflib.get_close_matches(text.lower(), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise argparse.ArgumentTypeError(
            f"unknown {kind} {text!r}; {hint}use one of {', '.join(allowed)}"
        )

    check.__name__ = kind  # argparse names the checker in some messages
    return check


log_level = one_of("log level", tuple(LEVELS))
log_format = one_of("log format", FORMATS)


def add_log_flags(
    parser: argparse.ArgumentParser, *, defaults: bool = True, formats: bool = True
) -> None:
    """``--log.level`` (and ``--log.format``), with their help, as every command has them;
    ``defaults=False`` leaves the defaults to apply_environment."""
    parser.add_argument(
        "--log.level",
        dest="log_level",
        type=log_level,
        metavar="LEVEL",
        help=f"least severe level logged: {', '.join(LEVELS)}",
        default=DEFAULT_LEVEL if defaults else argparse.SUPPRESS,
    )
    if formats:
        parser.add_argument(
            "--log.format",
            dest="log_format",
            type=log_format,
            metavar="FORMAT",
            help="log line format on stderr: logfmt (key=value) or json",
            default=DEFAULT_FORMAT if defaults else argparse.SUPPRESS,
        )


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """A checker for a whole number from ``low`` to ``high`` (``--nodes``, ``--chains``): the
    upper bound keeps a slip of the finger (100000000 nodes) from hanging the command."""

    def check(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {low} to {high}, got {text!r}"
            )
        return int(text)

    check.__name__ = "whole number"
    return check


#: Simulated nodes and chains a command accepts (100000 nodes start in about a second).
node_count = whole_number(1, 100_000)
chain_count = whole_number(1, 1_000)


def any_int(text: str) -> int:
    """A whole number, possibly negative (``--seed``)."""
    body = text[1:] if text[:1] in "+-" else text
    if not (body.isascii() and body.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def add_network_flags(parser: argparse.ArgumentParser, nodes: int, seed: int) -> None:
    """``--nodes``, ``--chains``, ``--block-interval`` and ``--seed`` of a simulated network,
    shared by ``simulate`` and ``demo`` so both check them alike."""
    add = parser.add_argument
    add(
        "--nodes",
        type=node_count,
        default=nodes,
        help="simulated nodes, 1 to 100000",
    )
    add("--chains", type=chain_count, default=2, help="blockchains, 1 to 1000")
    add(
        "--block-interval",
        type=positive_duration,
        default=2.0,
        metavar="DURATION",
        help="time between blocks, a Go duration such as 2s or 500ms",
    )
    add("--seed", type=any_int, default=seed, help="seed of every simulated value")


def positive_duration(text: str) -> float:
    """A Go duration between 1ms and 24h, in seconds (``--scrape-interval``, ...)."""
    try:
        seconds = parse_go_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} out of range: use one between 1ms and 24h, such as 2s or 1m"
        )
    return seconds


def duration_or_off(text: str) -> float:
    """A Go duration between 1ms and 24h, or ``0`` for off, in seconds
    (``--config.auto-reload-interval``)."""
    try:
        if parse_go_duration(text) == 0:
            return 0.0
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    try:
        return positive_duration(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} out of range: use one between 1ms and 24h, such as 30s, or 0"
            " to turn it off"
        ) from None


def listen_address(text: str) -> str:
    """``host:port``, ``:port`` or ``[v6]:port``, checked by the server's own parser."""
    try:
        parse_listen_address(text)
    except InvalidListenAddressError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


#: The exporter's other endpoints (exporter/web/server.py), which the telemetry path must
#: not hide; everything under /-/ is kept for them.
RESERVED_PATHS = ("/", "/-/healthy", "/-/ready", "/-/reload", "/probe")
#: A path as clients send it: RFC 3986 path characters, percent-encodings whole.
_URL_PATH = re.compile(r"(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*)+")


def telemetry_path(path: str) -> str:
    """``/metrics`` or another path the metrics can be served on: absolute, as a client sends
    it (no query, fragment, space or other character to encode), and none of the other
    endpoints."""
    if not path.startswith("/"):
        raise argparse.ArgumentTypeError(
            f"telemetry path {path!r} must start with '/', e.g. /metrics"
        )
    if not _URL_PATH.fullmatch(path):
        raise argparse.ArgumentTypeError(
            f"telemetry path {path!r} may hold only letters, digits, '/' and -._~!$&'()*+,;=:@ "
            "(percent-encode anything else; no query or fragment)"
        )
    if path in RESERVED_PATHS or path.startswith("/-/"):
        raise argparse.ArgumentTypeError(
            f"telemetry path {path!r} would hide another endpoint: not /, /probe or under /-/"
        )
    return path


#: How one environment variable gives a repeatable flag several values: commas, or newlines
#: as kingpin (the Go exporters' flag library) reads them.
VALUES_SEPARATOR = re.compile(r"\s*[,\n]\s*")


def from_environment(action: argparse.Action, text: str) -> Any:
    """A flag's value from its variable, checked as the flag's (each of a repeatable one's)."""
    check: Callable[[str], Any] = action.type if callable(action.type) else str
    if not isinstance(action, argparse._AppendAction):
        return check(text)
    values = VALUES_SEPARATOR.split(text.strip())
    if "" in values:
        raise argparse.ArgumentTypeError("separate the values with commas, none of them empty")
    return [check(value) for value in values]


def state_file(text: str) -> str:
    """A file path for ``--state.file``: not empty, and nothing that is never a file (a
    directory, a FIFO, a device such as ``/dev/null``, a socket: found by ``stat``, never
    opened). Whether it exists, is the exporter's or can be read is found out at start
    (and by ``--config.check``), and never stops the exporter."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected the path of a file, got nothing")
    kind = refusal(text)
    if text.endswith("/") or kind == NOT_A_FILE[stat.S_IFDIR]:
        raise argparse.ArgumentTypeError(
            f"{text!r} is a directory; name a file in it, such as "
            f"{os.path.join(text, 'ledger-exporter-state.json')}"
        )
    if kind is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is {kind}, not a file the exporter can keep its memory in; name a"
            " regular file (to keep no memory across restarts, leave --state.file out)"
        )
    return text


def env_name(flag: str) -> str:
    """``web.listen-address`` -> ``LEDGER_EXPORTER_WEB_LISTEN_ADDRESS``."""
    return ENV_PREFIX + flag.upper().replace(".", "_").replace("-", "_")


def apply_environment(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    defaults: Mapping[str, Any],
    environ: Mapping[str, str],
) -> list[str]:
    """Fill each flag left off the command line (its dest absent: default SUPPRESS) from its
    environment variable, checked as the flag would be, else from ``defaults``.

    Exits with status 2 through ``parser.error`` on a bad value; returns one warning per
    unknown ``LEDGER_EXPORTER_*`` variable that looks like a misspelt flag's.
    """
    known: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if action.dest in defaults:
            known[env_name(action.option_strings[0].lstrip("-"))] = action
    for name, action in known.items():
        if hasattr(args, action.dest):
            continue
        text = environ.get(name)
        if text is None:
            setattr(args, action.dest, defaults[action.dest])
            continue
        try:
            value = from_environment(action, text)
        except argparse.ArgumentTypeError as error:
            parser.error(f"environment variable {name}={text!r}: {error}")
        setattr(args, action.dest, value)
    return [
        f"ignoring unknown environment variable {name}; did you mean {close[0]}?"
        for name in sorted(environ)
        if name.startswith(ENV_PREFIX) and name not in known
        for close in [difflib.get_close_matches(name, tuple(known), n=1, cutoff=0.85)]
        if close  # others may be the operator's own, e.g. a password_env of the config
    ]
