"""The config's ``probe`` section: which targets /probe may request, and with which settings.

``allowed_targets`` are regexes that a target must match whole, compiled on load so a bad
pattern is a config error, not a failed scrape. A module holds a node's settings except its
name and URL (those come with each probe), read by the same code as a configured node's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exporter.config.keytable import Flag, Whole, key_names, read_settings, setting
from exporter.config.nodes import Expectation, NodeConfig, TlsConfig, read_node
from exporter.config.schema import Reader
from exporter.config.yamlsource import Path

DEFAULT_MODULE = "default"
#: The most probes a config may let poll at once: the HTTP server answers with 16 threads,
#: and 4 of them stay free for /metrics, health checks and reloads however many probes run.
MAX_IN_FLIGHT_CEILING = 12


@dataclass(frozen=True)
class ProbeModule:
    """Settings applied to every target probed with this module; credentials stay hidden."""

    blockchains: tuple[str, ...] | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    tls: TlsConfig = field(default_factory=TlsConfig)
    expect: Expectation | None = None  # who must answer at every target probed with it
    secret_files: tuple[str, ...] = ()  # where its credentials were read from

    def watched_paths(self) -> tuple[str, ...]:
        """Every file its settings were read from: credentials, CA, certificate and key."""
        return (*self.secret_files, *self.tls.files())

    def node(self, name: str, url: str) -> NodeConfig:
        """The node to poll for one probe: this module's settings at ``url``, labelled ``name``."""
        return NodeConfig(
            name=name,
            url=url,
            blockchains=self.blockchains,
            headers=self.headers,
            basic_auth=self.basic_auth,
            tls=self.tls,
            expect=self.expect,
            secret_files=self.secret_files,
        )


@dataclass(frozen=True)
class ProbeConfig:
    """The validated ``probe`` section."""

    allowed_targets: tuple[re.Pattern[str], ...]
    modules: tuple[tuple[str, ProbeModule], ...] = ((DEFAULT_MODULE, ProbeModule()),)
    #: Probes polling at once: each holds an HTTP server thread while it runs, so the bound
    #: stays well below the server's own, leaving threads for /metrics and health checks.
    max_in_flight: int = setting(
        8,
        Whole(
            1,
            MAX_IN_FLIGHT_CEILING,
            "each probe holds one of the server's 16 request threads; add replicas for more",
        ),
        "probes polling at once; one more gets 503 at once"
        " (each probe holds one of the server's 16 request threads while it runs; with"
        " password checks and reloads waiting too, at most 2 each, the default leaves 4 for"
        " `/metrics` and health checks, the ceiling none:"
        " [Connections](security.md#connections))",
    )
    #: ``&debug=true`` tells why a probe failed: which request got what (refused, timed out,
    #: a status, a TLS error), which also tells an open port from a closed one. Off, it is a
    #: 403 unsent, so an unauthenticated client learns no more than success 0 or 1.
    debug: bool = setting(
        False,
        Flag(),
        "whether `/probe?...&debug=true` answers the probe's log (each request, its status"
        " or error, and why the probe failed); off, it is refused with 403 and nothing is"
        " sent. Turn it on only where `/probe` is reachable by those allowed to see why a"
        " node fails (basic auth or client certificates of the web config, or a network"
        " policy): [Why a probe failed](probe-mode.md#why-a-probe-failed)",
    )

    def module(self, name: str) -> ProbeModule | None:
        """The module called ``name``, or None when the config has none by that name."""
        return dict(self.modules).get(name)

    def allows(self, target: str) -> bool:
        """True when ``target`` matches one allowed pattern whole (not merely a prefix)."""
        return any(pattern.fullmatch(target) for pattern in self.allowed_targets)


_PROBE_KEYS = ("allowed_targets", "modules", *key_names(ProbeConfig))


def read_probe(reader: Reader, value: Any) -> ProbeConfig:
    """Validate the ``probe`` section, reporting problems through ``reader``."""
    path: Path = ("probe",)
    data = reader.mapping(value, path, _PROBE_KEYS, required=("allowed_targets",))
    patterns: tuple[re.Pattern[str], ...] = ()
    if "allowed_targets" in data:
        patterns = _patterns(reader, data["allowed_targets"], (*path, "allowed_targets"))
    modules = ProbeConfig.modules
    if "modules" in data:
        modules = _modules(reader, data["modules"], (*path, "modules"))
    return ProbeConfig(patterns, modules, **read_settings(reader, data, ProbeConfig, path))


def _patterns(reader: Reader, value: Any, path: Path) -> tuple[re.Pattern[str], ...]:
    if not isinstance(value, list) or not value:
        reader.problem(path, "must be a non-empty list of regular expressions")
        return ()
    patterns = []
    for index, item in enumerate(value):
        text = reader.string(item, (*path, index))
        try:
            patterns.append(re.compile(text))
        except re.error as error:
            reader.problem((*path, index), f"is not a valid regular expression: {error}")
        except (OverflowError, RecursionError):  # a{99999999999}, or groups nested too deep
            reader.problem((*path, index), "is a regular expression too large to compile")
    return tuple(pattern for pattern in patterns if pattern.pattern)


def _modules(reader: Reader, value: Any, path: Path) -> tuple[tuple[str, ProbeModule], ...]:
    if not isinstance(value, dict) or not value:
        reader.problem(path, "must be a mapping of module names to settings")
        return ()
    modules = []
    for name, settings in value.items():
        if not isinstance(name, str) or not name:
            reader.problem((*path, str(name)), "a module name must be a non-empty string")
            continue
        modules.append((name, _module(reader, settings, (*path, name))))
    return tuple(modules)


def _module(reader: Reader, value: Any, path: Path) -> ProbeModule:
    value = {} if value is None else value
    for key in ("name", "url"):
        if isinstance(value, dict) and key in value:
            reader.problem((*path, key), "comes with each probe (parameters node and target)")
            value = {k: v for k, v in value.items() if k != key}
    node = read_node(reader, value, path, named=False)
    return ProbeModule(
        node.blockchains, node.headers, node.basic_auth, node.tls, node.expect, node.secret_files
    )
