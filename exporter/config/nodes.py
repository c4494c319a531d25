"""A node's settings: where it is (URL, name, labels) and how to reach it (headers,
credentials, TLS, chains), read by one function wherever the config describes a node.

An entry of ``nodes`` and a ``probe`` module say the same of how to reach a node, so
:func:`read_node` reads both, with the same checks; an entry also names the node, a module
leaves that to each probe. Secrets (a URL's user-info, passwords, credentials, header values)
never reach a problem: :data:`SECRET_KEYS` and :data:`SECRET_BLOCKS` name their positions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from exporter.bounds import MAX_TEXT_CHARS
from exporter.config.keytable import key_names, read_settings
from exporter.config.schema import NOT_SHOWN, Reader, is_text
from exporter.config.watchlist import WATCH_LABELS
from exporter.config.yamlsource import Path

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


#: The keys of a probe module: how to reach a node, not which (each probe names it), and
#: who must answer there.
MODULE_KEYS = ("headers", "basic_auth", "authorization", "tls_config", "blockchains", "expect")
#: The keys of ``expect``: the node's pinned identity.
EXPECT_KEYS = ("node_id", "blockchains")


@dataclass(frozen=True)
class TlsConfig:
    """TLS settings for connections to one node."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False

    def files(self) -> tuple[str, ...]:
        """The CA, certificate and key files it names."""
        return tuple(name for name in (self.ca_file, self.cert_file, self.key_file) if name)


@dataclass(frozen=True)
class Expectation:
    """Who must answer at a node's URL (``expect``): the ``nodeId`` its /health must report
    (None: any) and chain ids its /health must list. A node that answers otherwise is not
    trusted: it reads as down and none of its readings are kept."""

    node_id: str | None = None
    blockchains: tuple[str, ...] = ()


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
    expect: Expectation | None = None
    #: The files its credentials were read from (``password_file``, ``credentials_file``),
    #: followed on disk by ``--config.auto-reload-interval``.
    secret_files: tuple[str, ...] = ()
    # A plain per-node key is a field declared with exporter.config.keytable.setting(...):
    # read by read_node, listed in NODE_KEYS and documented by `make docs` from here.

    def watched_paths(self) -> tuple[str, ...]:
        """Every file its settings were read from: credentials, CA, certificate and key."""
        return (*self.secret_files, *self.tls.files())


#: The keys of an entry of ``nodes``, in the order the docs list them: the settings read by
#: their own code, then the plain keys :class:`NodeConfig` declares.
NODE_KEYS = (
    "name",
    "url",
    "labels",
    "blockchains",
    "headers",
    "basic_auth",
    "authorization",
    "tls_config",
    "expect",
    *key_names(NodeConfig),
)


def is_secret(path: Path) -> bool:
    """True when the value at ``path`` (of a node's settings, wherever they are in the file)
    is a secret: under a :data:`SECRET_KEYS` key, or in a credentials block other than the
    name of a ``*_file`` or ``*_env``."""
    if any(part in SECRET_KEYS for part in path):
        return True
    for index, part in enumerate(path):
        if part in SECRET_BLOCKS:
            key = path[index + 1] if index + 1 < len(path) else ""
            return not (isinstance(key, str) and key.endswith(("_file", "_env")))
    return False


def is_secret_key(path: Path) -> bool:
    """True when the last key of ``path`` may hold a secret: a key inside a secret, a key of
    a credentials block that is none of its keys (a ``{password S3CRET}`` without its colon)
    and a header name that is none (``{X-Key S3CRET}``)."""
    parent, key = path[-2:] if len(path) > 1 else (None, None)
    if not isinstance(key, str):
        return False
    if parent in SECRET_BLOCKS:
        return key not in _BLOCK_KEYS[str(parent)]
    if parent == "headers":
        return not _HEADER_NAME.fullmatch(key)
    return is_secret(path[:-1])


#: The keys of a node template (a ``dns_sd_configs`` entry's node settings): every key of a
#: node but its name and URL, which each discovered record gives.
TEMPLATE_KEYS = tuple(key for key in NODE_KEYS if key not in ("name", "url"))


def read_node(
    reader: Reader,
    value: Any,
    path: Path,
    *,
    named: bool = True,
    keys: tuple[str, ...] | None = None,
) -> NodeConfig:
    """The node described at ``path``; problems go to ``reader``. ``named``: an entry of
    ``nodes`` (``name`` and ``url`` required, ``labels`` allowed); else a probe module, whose
    name and URL come with each probe (they are left empty). ``keys``, for an unnamed node:
    the keys allowed instead of a probe module's (:data:`TEMPLATE_KEYS` for a template)."""
    keys, required = (NODE_KEYS, ("name", "url")) if named else (keys or MODULE_KEYS, ())
    data = reader.mapping(value, path, keys, required=required)
    node = _NodeReader(reader, path)
    name = reader.string(data["name"], (*path, "name")) if "name" in data else ""
    url, url_auth = node.url(data["url"], (*path, "url")) if "url" in data else ("", None)
    basic_auth = node.basic_auth(data.get("basic_auth"))
    if url_auth is not None and basic_auth is not None:
        reader.problem((*path, "url"), "has user-info and basic_auth is set too; keep one")
    headers = node.headers(data.get("headers"), data.get("authorization"))
    if (basic_auth or url_auth) and any(key.lower() == "authorization" for key, _ in headers):
        # both would be the Authorization header: one of them would silently win
        reader.problem(path, "basic auth and an Authorization header cannot both be set")
    return NodeConfig(
        name=name,
        url=url,
        labels=node.labels(data.get("labels", {}), (*path, "labels")),
        blockchains=node.blockchains(data.get("blockchains"), (*path, "blockchains")),
        headers=headers,
        basic_auth=basic_auth or url_auth,
        tls=node.tls(data.get("tls_config"), (*path, "tls_config")),
        expect=node.expect(data.get("expect"), (*path, "expect")),
        secret_files=tuple(node.files),
        **read_settings(reader, data, NodeConfig, path),
    )


def read_node_list(reader: Reader, value: list[Any], path: Path) -> tuple[NodeConfig, ...]:
    """The nodes of a list of node entries (``nodes`` of the config, or a node file whose
    ``path`` is ``()``), each read by :func:`read_node`; a name given twice is a problem."""
    nodes = tuple(read_node(reader, item, (*path, index)) for index, item in enumerate(value))
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        if node.name and node.name in seen:
            where = (*path, index, "name")
            reader.problem(where, f"duplicate node name {reader.quote(where, node.name)}")
        seen.add(node.name)
    return nodes


def check_pinned_chains(
    reader: Reader, pinned: list[tuple[Path, Expectation | None]], longest: int
) -> None:
    """An expected chain id longer than max_label_value_length (``longest``) is never read
    from a node's /health (such ids are skipped), so the node could never be trusted."""
    for path, expect in pinned:
        for index, chain in enumerate(expect.blockchains if expect is not None else ()):
            if len(chain) > longest:
                reader.problem(
                    (*path, index),
                    f"is longer than max_label_value_length ({longest}): the exporter skips"
                    " such a chain id in a node's listing, so the node could never be trusted",
                )


def _split_url(text: str) -> SplitResult | str:
    """The parts of an http(s) URL with a host, or what is wrong with it.

    No part of the URL is quoted: anything before its last ``@`` may be user-info, and a
    password holding ``/``, ``?`` or ``#`` moves that ``@`` out of what urlsplit reads as the
    host, so that the host or port it finds would be the password."""
    shape = "must be an http:// or https:// URL with a host"
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in text):
        return f"must not contain spaces or control characters {NOT_SHOWN}"
    if not text.isascii():
        return (
            f"must be ASCII {NOT_SHOWN}: percent-encode other characters (UTF-8), and write"
            " an internationalised host name in its xn-- form"
        )
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


class _NodeReader:
    """Reads the settings of the node at ``path``; credentials inline, from ``*_file`` or
    from ``*_env``, exactly one of them."""

    def __init__(self, reader: Reader, path: Path) -> None:
        self.reader = reader
        self.path = path
        self.files: list[str] = []  # the secrets' files, each as opened

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
        self.files.append(self.reader.resolve(text))
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

    def url(self, value: Any, path: Path) -> tuple[str, tuple[str, str] | None]:
        """The URL without its user-info, and the user-info as basic auth credentials."""
        text = self.reader.string(value, path)
        if not text:
            return "", None
        parts = _split_url(text)
        if isinstance(parts, str):
            self.reader.problem(path, parts)
            return "", None
        if parts.query or parts.fragment:
            self.reader.problem(
                path, "must not have a query or fragment; API paths are appended to it"
            )
        auth = None
        if parts.username is not None:
            auth = (unquote(parts.username), unquote(parts.password or ""))
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")), auth

    def labels(self, value: Any, path: Path) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, dict):
            self.reader.problem(path, "must be a mapping of label names to values")
            return ()
        labels = []
        for name, label_value in value.items():
            if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
                self.reader.problem((*path, name), "is not a valid Prometheus label name")
            elif name in RESERVED_LABELS:
                self.reader.problem(
                    (*path, name), "is a label the exporter or Prometheus sets itself"
                )
            elif isinstance(label_value, bool) or not isinstance(label_value, str | int | float):
                self.reader.problem((*path, name), "must be a string")
            else:
                labels.append((name, str(label_value)))
        return tuple(sorted(labels))

    def blockchains(self, value: Any, path: Path) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.reader.problem(
                path, "must be a non-empty list of blockchain ids (or left out for all)"
            )
            return None
        chains = [self.reader.string(item, (*path, index)) for index, item in enumerate(value)]
        if len(set(chains)) != len(chains):
            self.reader.problem(path, "lists a blockchain id more than once")
        return tuple(dict.fromkeys(chain for chain in chains if chain))

    def bounded(self, value: Any, path: Path) -> str:
        """A non-empty string the node's answer can hold: at most MAX_TEXT_CHARS characters
        (the exporter reads no longer one, so a longer expectation could never be met)."""
        text = self.reader.string(value, path)
        if len(text) > MAX_TEXT_CHARS:
            self.reader.problem(
                path, f"must be at most {MAX_TEXT_CHARS} characters, not {len(text)}"
            )
            return ""
        return text

    def expect(self, value: Any, path: Path) -> Expectation | None:
        """The pinned identity: ``node_id``, ``blockchains`` or both."""
        if value is None:
            return None
        data = self.reader.mapping(value, path, EXPECT_KEYS)
        if isinstance(value, dict) and not value:
            self.reader.problem(path, "must set node_id, blockchains or both")
            return None
        node_id = None
        if "node_id" in data:
            node_id = self.bounded(data["node_id"], (*path, "node_id")) or None
        chains: tuple[str, ...] = ()
        if "blockchains" in data:
            where = (*path, "blockchains")
            listed = data["blockchains"]
            if not isinstance(listed, list) or not listed:
                self.reader.problem(where, "must be a non-empty list of blockchain ids")
                listed = []
            found = [self.bounded(item, (*where, index)) for index, item in enumerate(listed)]
            if len(set(found)) != len(found):
                self.reader.problem(where, "lists a blockchain id more than once")
            chains = tuple(dict.fromkeys(chain for chain in found if chain))
        if node_id is None and not chains:
            return None
        return Expectation(node_id, chains)

    def tls(self, value: Any, path: Path) -> TlsConfig:
        if value is None:
            return TlsConfig()
        keys = ("ca_file", "cert_file", "key_file", "insecure_skip_verify")
        data = self.reader.mapping(value, path, keys)
        files = {key: self.reader.readable_file(data.get(key), (*path, key)) for key in keys[:3]}
        if (files["cert_file"] is None) != (files["key_file"] is None):
            self.reader.problem(path, "cert_file and key_file must be given together")
        insecure = self.reader.boolean(data.get("insecure_skip_verify", False), (*path, keys[3]))
        return TlsConfig(files["ca_file"], files["cert_file"], files["key_file"], insecure)
