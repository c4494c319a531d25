"""Every default is stated once in code, and the loader, the flags and ``--help`` read it there.

A plain config key is declared by one ``setting(...)`` field (a bound by one ``_bound(...)``
field of ``Bounds``); no reader may restate its default (``data.get("key", 512)``), the
loader gives exactly the declared default for a file that leaves it out, and the flags'
defaults are ``DEFAULTS`` (the server limits' being the server's own), which ``--help``
shows. Found by reading the package's source (ast) and by introspection, so a second
statement of a default fails here rather than drifting later.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter import cli, flags, logs
from exporter.bounds import DEFAULT_BOUNDS, Bounds
from exporter.config.dns_sd import DnsSdConfig
from exporter.config.exporter import Config, NetworkChecks, parse_config
from exporter.config.keytable import Declared, bound_keys, declared
from exporter.config.nodes import NodeConfig
from exporter.config.probe_modules import ProbeConfig
from exporter.config.web import TlsServerConfig
from exporter.web.httpserver import ServerLimits
from tests.support.testdata import REPO

PACKAGE = REPO / "exporter"
SECTIONS: dict[str, type[Any]] = {
    "": Config,
    "network_checks.": NetworkChecks,
    "nodes[].": NodeConfig,
    "dns_sd_configs[].": DnsSdConfig,
    "probe.": ProbeConfig,
}


def every_key() -> list[str]:
    """The plain keys the code declares: each section's fields, then the bounds'."""
    keys = [f"{prefix}{item.name}" for prefix, cls in SECTIONS.items() for item in declared(cls)]
    return keys + [item.name for _, item in bound_keys()]


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def declarations() -> list[str]:
    """Where the source declares a key: the field a ``setting(...)`` is assigned to, the key
    (its second argument) of a ``_bound(...)``."""
    found = []
    for path, module in _modules():
        for node in ast.walk(module):
            value = node.value if isinstance(node, ast.AnnAssign) else None
            if isinstance(value, ast.Call) and _called(value) == "setting":
                assert isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                found.append(f"{path.name}:{node.target.id}")
            if isinstance(node, ast.Call) and _called(node) == "_bound":
                key = node.args[1]
                assert isinstance(key, ast.Constant) and isinstance(key.value, str), path.name
                found.append(f"{path.name}:{key.value}")
    return found


def test_each_key_is_declared_by_one_field() -> None:
    names = [where.partition(":")[2] for where in declarations()]
    assert sorted(names) == sorted(key.rpartition(".")[2] for key in every_key())
    assert len(set(every_key())) == len(every_key())


def test_no_reader_restates_a_default() -> None:
    """``mapping.get("<a declared key>", <default>)`` anywhere in the package would be the
    default stated a second time: the readers take it from the declaration (the web
    config's TLS keys from TlsServerConfig's fields)."""
    keys = {key.rpartition(".")[2] for key in every_key()}
    keys |= {item.name for item in dataclasses.fields(TlsServerConfig)}  # the web config's
    restated = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path, module in _modules()
        for node in ast.walk(module)
        if isinstance(node, ast.Call)
        and _called(node) == "get"
        and len(node.args) == 2
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in keys
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value is not None
    ]
    assert restated == []


BASE = (
    "nodes: [{name: a, url: 'http://127.0.0.1:9/'}]\nprobe: {allowed_targets: [x]}\n"
    "dns_sd_configs: [{names: [nodes.example]}]\n"
)


def _value(config: Config, prefix: str, name: str) -> Any:
    holder: Any = {
        "": config,
        "network_checks.": config.network_checks,
        "nodes[].": config.nodes[0],
        "dns_sd_configs[].": config.dns_sd_configs[0],
        "probe.": config.probe,
    }[prefix]
    return getattr(holder, name)


@pytest.mark.parametrize(
    ("prefix", "item"),
    [(prefix, item) for prefix, cls in SECTIONS.items() for item in declared(cls)],
    ids=lambda value: value if isinstance(value, str) else value.name,
)
def test_the_loader_gives_the_declared_default(prefix: str, item: Declared) -> None:
    """A file that leaves a key out reads as its declaration says; the dataclass's own
    default is the same object (one statement, not two equal ones)."""
    config = parse_config(BASE)
    assert _value(config, prefix, item.name) == item.default
    cls = SECTIONS[prefix]
    assert getattr(cls, item.name) is item.default


@pytest.mark.parametrize(("field", "item"), list(bound_keys()), ids=lambda v: getattr(v, "name", v))
def test_the_loader_gives_each_bound_s_declared_default(field: str, item: Declared) -> None:
    assert parse_config(BASE).bounds == DEFAULT_BOUNDS
    assert getattr(DEFAULT_BOUNDS, field) == item.default
    assert Bounds.__dataclass_fields__[field].default is item.default


def test_the_server_limits_flags_default_to_the_server_s_own() -> None:
    limits = {item.name: item.default for item in dataclasses.fields(ServerLimits)}
    for dest in ("read_header_timeout", "idle_timeout", "max_connections"):
        assert cli.DEFAULTS[dest] is limits[dest], dest
    assert cli.DEFAULTS["log_level"] is logs.DEFAULT_LEVEL
    assert cli.DEFAULTS["log_format"] is logs.DEFAULT_FORMAT
    assert cli.DEFAULTS["listen_address"] == [f":{flags.DEFAULT_PORT}"]


def test_no_flag_of_the_main_command_states_a_default_of_its_own() -> None:
    """Its flags leave their defaults to DEFAULTS (through apply_environment): a
    ``default=`` on one of them would be a second statement (switches aside)."""
    parser = cli.build_parser()
    own = [
        action.option_strings[0]
        for action in parser._actions
        if action.default is not argparse.SUPPRESS
        and action.default is not False
        and action.default is not None
    ]
    assert own == []


@pytest.mark.parametrize(
    "action",
    [a for a in cli.build_parser()._actions if a.dest in cli.DEFAULTS and a.dest != "config_file"],
    ids=lambda a: a.option_strings[0],
)
def test_help_shows_the_default_from_defaults(
    action: argparse.Action, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--help`` shows the value in DEFAULTS, and follows it when it changes."""
    value = cli.DEFAULTS[action.dest]
    shown = flags.shown_default(value, action.type)
    help_text = " ".join(cli.build_parser().format_help().split())
    assert f"(default {shown}) [env {flags.env_name(action.option_strings[0][2:])}]" in help_text
    changed: Any = {float: 7.5, int: 7, str: "changed", list: [":7"], type(None): "changed"}
    monkeypatch.setitem(cli.DEFAULTS, action.dest, changed[type(value)])
    new_shown = flags.shown_default(cli.DEFAULTS[action.dest], action.type)
    assert new_shown != shown
    assert f"(default {new_shown})" in " ".join(cli.build_parser().format_help().split())


def test_a_sub_command_s_help_shows_its_flags_own_defaults() -> None:
    """flags.Parser adds each flag's own default to its help (``simulate``, ``demo``)."""
    parser = flags.Parser(prog="x")
    parser.add_argument("--every", type=flags.positive_duration, default=90.0, help="how often")
    parser.add_argument("--count", type=int, default=0, help="how many")
    parser.add_argument("--name", help="no default")
    text = " ".join(parser.format_help().split())
    assert "how often (default 90s)" in text
    assert "how many (default 0)" in text
    assert "no default (default" not in text
