"""The exporter's YAML configuration: loaded, validated whole, and frozen.

Like blackbox_exporter, unknown keys are refused and every problem is reported at once with
its key path and line, so an operator fixes the file in one pass. Secrets are read from the
file itself, from files, or from environment variables, and never appear in a repr, a log or a
problem: ``_Reader.secret`` names their positions and the problem helpers refuse to show them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from exporter.bounds import (
    DEFAULT_MAX_AUTH_GROUPS_PER_WALLET,
    DEFAULT_MAX_FEATURES_PER_CHAIN,
    DEFAULT_MAX_LABEL_VALUE_LENGTH,
    MAX_TEXT_CHARS,
    Bounds,
)
from exporter.config.schema import (
    NOT_SHOWN,
    ConfigError,
    Reader,
    checking,
    is_text,
    locate,
    read_document,
)
from exporter.config.watch import WATCH_LABELS, WatchConfig, read_watch
from exporter.config.yamlsource import Path

if TYPE_CHECKING:
    from exporter.config.probe import ProbeConfig

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
#: Chains polled per node when its /health lists more (a listing gone wrong must not flood
#: the shared pool and starve the other nodes); configured `blockchains` are not capped.
DEFAULT_MAX_BLOCKCHAINS_PER_NODE = 100
#: Sane ranges: a poll at least every hour (else Prometheus sees stale data between polls)
#: and not more than ten times a second; a timeout long enough for one round trip.
INTERVAL_BOUNDS = ("100ms", 0.1, "1h", 3600.0)
TIMEOUT_BOUNDS = ("10ms", 0.01, "1h", 3600.0)
RESERVED_LABELS = frozenset(
    {
        "node",
        "blockchain",
        "endpoint",
        "reason",
        "feature",
        "version",
        "node_version",
        "node_id",
        "peer_id",
        "consensus_type",
        "key_type",
        "session",
        "kind",
        "job",
        "instance",
    }
)
RESERVED_LABELS |= WATCH_LABELS  # the watch series set these themselves
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SIZE = re.compile(r"(\d{1,15})\s*(B|KiB|MiB|GiB)?", re.ASCII)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Keys whose values are secrets, with all they hold: a URL may carry user-info, and a node's
#: header values may be API keys.
SECRET_KEYS = frozenset({"url", "password", "credentials", "headers"})
#: Credentials blocks: secret whole and in every value but the names of the ``*_file`` and
#: ``*_env`` that hold the secret (so ``basic_auth: "user:pw"`` and a token written as the
#: ``type`` are not shown).
SECRET_BLOCKS = frozenset({"basic_auth", "authorization"})
_BLOCK_KEYS = {
    "basic_auth": ("username", "password", "password_file", "password_env"),
    "authorization": ("type", "credentials", "credentials_file", "credentials_env"),
}
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_TOP_KEYS = (
    "scrape_interval",
    "scrape_timeout",
    "max_concurrency",
    "max_response_bytes",
    "max_blockchains_per_node",
    "max_features_per_chain",
    "max_auth_groups_per_wallet",
    "max_label_value_length",
    "network_checks",
    "nodes",
    "probe",
    "watch",
)
DEFAULT_BLOCK_HASH_FIELDS = ("hash", "blockHash")
_NODE_KEYS = (
    "name",
    "url",
    "labels",
    "blockchains",
    "headers",
    "basic_auth",
    "authorization",
    "tls_config",
)


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings for connections to one node."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True)
class NodeConfig:
    """One node to poll. ``url`` never holds user-info; credentials live in hidden fields."""

    name: str
    url: str
    labels: tuple[tuple[str, str], ...] = ()
    blockchains: tuple[str, ...] | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    tls: TlsConfig = TlsConfig()


@dataclass(frozen=True)
class NetworkChecks:
    """Cross-node checks: how deep below the lowest head block hashes are compared (0: no
    block requests) and which block fields may hold the hash, first present wins."""

    checkpoint_depth: int = 5
    block_hash_fields: tuple[str, ...] = DEFAULT_BLOCK_HASH_FIELDS


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    nodes: tuple[NodeConfig, ...]
    scrape_interval: float = 15.0
    scrape_timeout: float = 10.0
    max_concurrency: int = 512
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_blockchains_per_node: int = DEFAULT_MAX_BLOCKCHAINS_PER_NODE
    network_checks: NetworkChecks = NetworkChecks()
    probe: ProbeConfig | None = None  # /probe is served only when set
    watch: WatchConfig = field(default_factory=WatchConfig)
    max_features_per_chain: int = DEFAULT_MAX_FEATURES_PER_CHAIN
    max_auth_groups_per_wallet: int = DEFAULT_MAX_AUTH_GROUPS_PER_WALLET
    max_label_value_length: int = DEFAULT_MAX_LABEL_VALUE_LENGTH

    @property
    def bounds(self) -> Bounds:
        """The cardinality bounds the readers apply to every node's answers."""
        return Bounds(
            self.max_features_per_chain,
            self.max_auth_groups_per_wallet,
            self.max_label_value_length,
        )


def load_config(path: str) -> Config:
    """Read and validate the config file at ``path``; raises ConfigError listing every problem."""
    return parse_config(*read_document(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate YAML text into a Config; raises ConfigError listing every problem."""
    reader = _Reader(locate(text, source), None if source == "<config>" else source)
    with checking(source):
        config = reader.config()
    if reader.problems or config is None:
        raise ConfigError(source, reader.problems)
    return config


class _Reader(Reader):
    """Reads the exporter's config document."""

    def secret(self, path: Path) -> bool:
        if any(part in SECRET_KEYS for part in path):
            return True
        for index, part in enumerate(path):
            if part in SECRET_BLOCKS:
                key = path[index + 1] if index + 1 < len(path) else ""
                return not (isinstance(key, str) and key.endswith(("_file", "_env")))
        return False

    def secret_key(self, path: Path) -> bool:
        """A key inside a secret, a key of a credentials block that is none of its keys (a
        ``{password S3CRET}`` without its colon) and a header name that is none (``{X-Key
        S3CRET}``) are not shown."""
        parent, key = path[-2:] if len(path) > 1 else (None, None)
        if not isinstance(key, str):
            return False
        if parent in SECRET_BLOCKS:
            return key not in _BLOCK_KEYS[str(parent)]
        if parent == "headers":
            return not _HEADER_NAME.fullmatch(key)
        return self.secret(path[:-1])

    def config(self) -> Config | None:
        data = self.located.data
        if data is None:
            self.problem((), "the config is empty; it needs at least a 'nodes' list")
            return None
        probing = isinstance(data, dict) and "probe" in data  # then `nodes` may be left out
        top = self.mapping(data, (), _TOP_KEYS, required=() if probing else ("nodes",))
        interval = self.duration(top, "scrape_interval", (), 15.0, INTERVAL_BOUNDS)
        timeout = self.duration(top, "scrape_timeout", (), min(10.0, interval), TIMEOUT_BOUNDS)
        if timeout > interval:
            self.problem(("scrape_timeout",), "must not be longer than scrape_interval")
        concurrency = self.positive_int(top.get("max_concurrency", 512), ("max_concurrency",))
        max_bytes = self.size(top.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES))
        chains = self.positive_int(
            top.get("max_blockchains_per_node", DEFAULT_MAX_BLOCKCHAINS_PER_NODE),
            ("max_blockchains_per_node",),
        )
        bounds = self.bounds(top)
        nodes = self.nodes(top.get("nodes")) if top.get("nodes") or not probing else ()
        checks = self.network_checks(top.get("network_checks"))
        probe = self.probe(top["probe"]) if "probe" in top else None
        names = frozenset(node.name for node in nodes if node.name)
        watch = read_watch(self, top.get("watch"), names)
        return Config(
            nodes,
            interval,
            timeout,
            concurrency,
            max_bytes,
            chains,
            network_checks=checks,
            probe=probe,
            watch=watch,
            max_features_per_chain=bounds.features_per_chain,
            max_auth_groups_per_wallet=bounds.auth_groups_per_wallet,
            max_label_value_length=bounds.label_value_length,
        )

    def bounds(self, top: dict[str, Any]) -> Bounds:
        """The cardinality bounds: whole numbers of at least 1, a label value at most
        MAX_TEXT_CHARS (the longest string the exporter keeps from a node)."""
        features = top.get("max_features_per_chain", DEFAULT_MAX_FEATURES_PER_CHAIN)
        groups = top.get("max_auth_groups_per_wallet", DEFAULT_MAX_AUTH_GROUPS_PER_WALLET)
        length = top.get("max_label_value_length", DEFAULT_MAX_LABEL_VALUE_LENGTH)
        if isinstance(length, bool) or not isinstance(length, int):
            length = 0  # refused below, as any number out of range
        if not 1 <= length <= MAX_TEXT_CHARS:
            path = ("max_label_value_length",)
            shown = self.instead(path, top["max_label_value_length"])
            self.problem(path, f"must be a whole number from 1 to {MAX_TEXT_CHARS}{shown}")
            length = DEFAULT_MAX_LABEL_VALUE_LENGTH
        return Bounds(
            self.positive_int(features, ("max_features_per_chain",)),
            self.positive_int(groups, ("max_auth_groups_per_wallet",)),
            length,
        )

    def network_checks(self, value: Any) -> NetworkChecks:
        if value is None:
            return NetworkChecks()
        path: Path = ("network_checks",)
        data = self.mapping(value, path, ("checkpoint_depth", "block_hash_fields"))
        depth = data.get("checkpoint_depth", 5)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            where = (*path, "checkpoint_depth")
            self.problem(where, f"must be a whole number >= 0{self.instead(where, depth)}")
            depth = 5
        fields = data.get("block_hash_fields", list(DEFAULT_BLOCK_HASH_FIELDS))
        if not isinstance(fields, list) or not fields:
            self.problem((*path, "block_hash_fields"), "must be a non-empty list of field names")
            fields = list(DEFAULT_BLOCK_HASH_FIELDS)
        names = [
            self.string(item, (*path, "block_hash_fields", i)) for i, item in enumerate(fields)
        ]
        if len(set(names)) != len(names):
            self.problem((*path, "block_hash_fields"), "lists a field more than once")
        return NetworkChecks(depth, tuple(dict.fromkeys(n for n in names if n)))

    def probe(self, value: Any) -> ProbeConfig:
        from exporter.config.probe import read_probe  # noqa: PLC0415 - it builds on this module

        return read_probe(self, value)

    def size(self, value: Any) -> int:
        match = _SIZE.fullmatch(value) if isinstance(value, str) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if match and int(match.group(1)) > 0:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2)]
        self.problem(
            ("max_response_bytes",),
            "must be a positive size such as 8MiB or 1048576"
            + self.instead(("max_response_bytes",), value),
        )
        return DEFAULT_MAX_RESPONSE_BYTES

    def nodes(self, value: Any) -> tuple[NodeConfig, ...]:
        if not isinstance(value, list) or not value:
            self.problem(("nodes",), "must be a non-empty list of nodes")
            return ()
        nodes = tuple(self.node(item, ("nodes", index)) for index, item in enumerate(value))
        seen: set[str] = set()
        for index, node in enumerate(nodes):
            if node.name and node.name in seen:
                where = ("nodes", index, "name")
                self.problem(where, f"duplicate node name {self.quote(where, node.name)}")
            seen.add(node.name)
        return nodes

    def node(self, value: Any, path: Path) -> NodeConfig:
        data = self.mapping(value, path, _NODE_KEYS, required=("name", "url"))
        name = self.string(data["name"], (*path, "name")) if "name" in data else ""
        url, url_auth = self.url(data.get("url"), (*path, "url")) if "url" in data else ("", None)
        auth = _CredentialReader(self, path)
        basic_auth = auth.basic_auth(data.get("basic_auth"))
        if url_auth is not None and basic_auth is not None:
            self.problem((*path, "url"), "has user-info and basic_auth is set too; keep one")
        headers = auth.headers(data.get("headers"), data.get("authorization"))
        if (basic_auth or url_auth) and any(key.lower() == "authorization" for key, _ in headers):
            # both would be the Authorization header: one of them would silently win
            self.problem(path, "basic auth and an Authorization header cannot both be set")
        return NodeConfig(
            name=name,
            url=url,
            labels=self.labels(data.get("labels", {}), (*path, "labels")),
            blockchains=self.blockchains(data.get("blockchains"), (*path, "blockchains")),
            headers=headers,
            basic_auth=basic_auth or url_auth,
            tls=self.tls(data.get("tls_config"), (*path, "tls_config")),
        )

    def url(self, value: Any, path: Path) -> tuple[str, tuple[str, str] | None]:
        """The URL without its user-info, and the user-info as basic auth credentials."""
        text = self.string(value, path)
        if not text:
            return "", None
        parts = _split_url(text)
        if isinstance(parts, str):
            self.problem(path, parts)
            return "", None
        if parts.query or parts.fragment:
            self.problem(path, "must not have a query or fragment; API paths are appended to it")
        auth = None
        if parts.username is not None:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")), auth

    def labels(self, value: Any, path: Path) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, dict):
            self.problem(path, "must be a mapping of label names to values")
            return ()
        labels = []
        for name, label_value in value.items():
            if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
                self.problem((*path, name), "is not a valid Prometheus label name")
            elif name in RESERVED_LABELS:
                self.problem((*path, name), "is a label the exporter or Prometheus sets itself")
            elif isinstance(label_value, bool) or not isinstance(label_value, str | int | float):
                self.problem((*path, name), "must be a string")
            else:
                labels.append((name, str(label_value)))
        return tuple(sorted(labels))

    def blockchains(self, value: Any, path: Path) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.problem(path, "must be a non-empty list of blockchain ids (or left out for all)")
            return None
        chains = [self.string(item, (*path, index)) for index, item in enumerate(value)]
        if len(set(chains)) != len(chains):
            self.problem(path, "lists a blockchain id more than once")
        return tuple(dict.fromkeys(chain for chain in chains if chain))

    def tls(self, value: Any, path: Path) -> TlsConfig:
        if value is None:
            return TlsConfig()
        keys = ("ca_file", "cert_file", "key_file", "insecure_skip_verify")
        data = self.mapping(value, path, keys)
        files = {key: self.readable_file(data.get(key), (*path, key)) for key in keys[:3]}
        if (files["cert_file"] is None) != (files["key_file"] is None):
            self.problem(path, "cert_file and key_file must be given together")
        insecure = self.boolean(data.get("insecure_skip_verify", False), (*path, keys[3]))
        return TlsConfig(files["ca_file"], files["cert_file"], files["key_file"], insecure)


def _split_url(text: str) -> SplitResult | str:
    """The parts of an http(s) URL with a host, or what is wrong with it.

    No part of the URL is quoted: anything before its last ``@`` may be user-info, and a
    password holding ``/``, ``?`` or ``#`` moves that ``@`` out of what urlsplit reads as the
    host, so that the host or port it finds would be the password."""
    shape = "must be an http:// or https:// URL with a host"
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in text):
        return f"must not contain spaces or control characters {NOT_SHOWN}"
    try:
        parts = urlsplit(text)
    except ValueError:  # unbalanced brackets
        return f"is not a valid URL {NOT_SHOWN}"
    host_at = len(parts.scheme) + 3
    if parts.scheme not in ("http", "https") or text[host_at - 3 : host_at] != "://":
        return shape
    if "@" in text[host_at + len(parts.netloc) :]:
        return (
            f"has an '@' after its host {NOT_SHOWN}: in user-info, percent-encode the"
            " password's '/', '?', '#' and '@' (%2F, %3F, %23, %40); in a path write '@' as %40"
        )
    try:
        port_ok = parts.port != 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if not port_ok:
        return f"has a port that is not a number from 1 to 65535 {NOT_SHOWN}"
    return parts if parts.hostname else shape


class _CredentialReader:
    """Reads node credentials: inline, ``*_file`` or ``*_env``, exactly one of them."""

    def __init__(self, reader: _Reader, path: Path) -> None:
        self.reader = reader
        self.path = path

    def secret(self, data: Mapping[str, Any], key: str, path: Path) -> str | None:
        given = [name for name in (key, f"{key}_file", f"{key}_env") if name in data]
        if len(given) > 1:
            self.reader.problem(path, f"set only one of {', '.join(given)}")
        if not given:
            return None
        source = given[0]
        text = self.reader.string(data[source], (*path, source))  # a secret's is not shown
        if not text or source == key:
            return text
        if source.endswith("_env"):
            if text not in os.environ:
                self.reader.problem((*path, source), f"environment variable {text} is not set")
            return os.environ.get(text, "")
        try:
            with open(self.reader.resolve(text), encoding="utf-8") as handle:
                return handle.read().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as error:
            name = self.reader.quote((*path, source), text)
            self.reader.problem(
                (*path, source), f"cannot read {name}: {getattr(error, 'strerror', None) or error}"
            )
            return ""

    def basic_auth(self, value: Any) -> tuple[str, str] | None:
        if value is None:
            return None
        path = (*self.path, "basic_auth")
        keys = ("username", "password", "password_file", "password_env")
        data = self.reader.mapping(value, path, keys, required=("username",))
        username = self.reader.string(data.get("username", "-"), (*path, "username"))
        return username, self.secret(data, "password", path) or ""

    def header(self, name: str, value: Any, path: Path) -> str:
        """A header value, never echoed in a problem (it may be an API key)."""
        if not _HEADER_NAME.fullmatch(name):  # not shown either: "X-Key S3CRET" has a space
            self.reader.problem(path, "is not a valid HTTP header name")
            return ""
        if not isinstance(value, str) or any(c in value for c in "\r\n") or not is_text(value):
            self.reader.problem(path, "must be a string on one line (value not shown)")
            return ""
        return value

    def headers(self, headers: Any, authorization: Any) -> tuple[tuple[str, str], ...]:
        result: dict[str, str] = {}
        if headers is not None:
            path = (*self.path, "headers")
            if not isinstance(headers, dict):
                self.reader.problem(path, "must be a mapping of header names to values")
                headers = {}
            for name, value in headers.items():
                result[name] = self.header(name, value, (*path, name))
        if authorization is not None:
            path = (*self.path, "authorization")
            keys = ("type", "credentials", "credentials_file", "credentials_env")
            data = self.reader.mapping(authorization, path, keys)
            scheme = self.reader.string(data.get("type", "Bearer"), (*path, "type"))
            if scheme and not _HEADER_NAME.fullmatch(scheme):
                where = (*path, "type")
                self.reader.problem(
                    where, f"must be one word such as Bearer{self.reader.instead(where, scheme)}"
                )
            credentials = self.secret(data, "credentials", path)
            if credentials is None:
                self.reader.problem(path, "needs credentials, credentials_file or credentials_env")
            elif any(char in credentials for char in "\r\n\0"):  # it would split the header
                self.reader.problem(path, f"credentials must be on one line {NOT_SHOWN}")
            if any(name.lower() == "authorization" for name in result):
                self.reader.problem(path, "conflicts with an Authorization header in headers")
            result["Authorization"] = f"{scheme} {credentials or ''}"
        return tuple(result.items())
