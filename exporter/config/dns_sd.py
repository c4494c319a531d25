"""``dns_sd_configs``: nodes found in DNS, one per record, as Prometheus' ``dns_sd_configs``.

An entry names DNS names to look up (``SRV``: each record gives a host and a port; ``A`` or
``AAAA``: each address, with the entry's ``port``) and how to reach what they give: the
scheme, a path prefix and every per-node setting of a ``nodes`` entry but ``name`` and
``url`` (labels, TLS, credentials, chains, ...). Each record is a node named by its target,
``host:port``. Lookups go to the system's resolver, or to the entry's ``nameservers``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from typing import Any

from exporter.config.keytable import Duration, Whole, key_names, read_settings, setting
from exporter.config.nodes import TEMPLATE_KEYS, NodeConfig, read_node
from exporter.config.schema import Reader
from exporter.config.yamlsource import Path
from exporter.errors import DnsLookupError

RECORD_TYPES = ("SRV", "A", "AAAA")
#: A host name a record may give: letters, digits, hyphens and dots (no user-info, no path).
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
#: A name to look up: labels of letters, digits, hyphens (and underscores, as SRV names'
#: ``_service._proto`` have), an optional final dot.
_DNS_NAME = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}\.?")
_PATH_PREFIX = re.compile(r"(/[A-Za-z0-9._~!$&'()*+,;=:@%-]*)*")


@dataclass(frozen=True)
class DnsSdConfig:
    """One ``dns_sd_configs`` entry: what to look up, and the node each record makes."""

    names: tuple[str, ...]
    type: str = "SRV"
    port: int | None = None  # required for A and AAAA, refused for SRV
    scheme: str = "http"
    path_prefix: str = ""
    #: ``(host, port)`` of the DNS servers to ask; empty: the system's resolver.
    nameservers: tuple[tuple[str, int], ...] = ()
    #: The settings every discovered node gets (its name and URL come from the record).
    node: NodeConfig = field(default_factory=lambda: NodeConfig("", ""))
    refresh_interval: float = setting(
        30.0,
        Duration(1.0, 86400.0),
        "how often the names are looked up again; a failed lookup keeps the records it last got",
    )
    max_nodes: int = setting(
        100,
        Whole(1),
        "records used per name, the first ones in the answer's order (a warning is logged"
        " for more), so a runaway answer cannot flood the poller",
    )


#: The keys of an entry: its own, then a node's settings.
DNS_SD_KEYS = (
    "names",
    "type",
    "port",
    "scheme",
    "path_prefix",
    "nameservers",
    *key_names(DnsSdConfig),
    *TEMPLATE_KEYS,
)


def read_dns_sd_configs(reader: Reader, value: Any) -> tuple[DnsSdConfig, ...]:
    """Validate ``dns_sd_configs`` (None: none); problems go to ``reader``."""
    if value is None:
        return ()
    if not isinstance(value, list):
        reader.problem(("dns_sd_configs",), "must be a list of entries with names and a type")
        return ()
    return tuple(_entry(reader, item, ("dns_sd_configs", i)) for i, item in enumerate(value))


def _entry(reader: Reader, value: Any, path: Path) -> DnsSdConfig:
    data = reader.mapping(value, path, DNS_SD_KEYS, required=("names",))
    names = _names(reader, data.get("names"), (*path, "names"))
    kind = data.get("type", "SRV")
    if kind not in RECORD_TYPES:
        where = (*path, "type")
        shown = reader.instead(where, kind)
        reader.problem(where, f"must be one of {', '.join(RECORD_TYPES)}{shown}")
        kind = "SRV"
    port = data.get("port")
    if kind == "SRV" and port is not None:
        reader.problem((*path, "port"), "is given by each SRV record: leave it out")
        port = None
    elif kind != "SRV":
        port = _port(reader, port, (*path, "port"))
    scheme = data.get("scheme", "http")
    if scheme not in ("http", "https"):
        where = (*path, "scheme")
        reader.problem(where, f"must be http or https{reader.instead(where, scheme)}")
        scheme = "http"
    prefix = data.get("path_prefix", "")
    if prefix != "" and (not isinstance(prefix, str) or not _PATH_PREFIX.fullmatch(prefix)):
        where = (*path, "path_prefix")
        reader.problem(
            where, f"must be a URL path starting with / such as /api{reader.instead(where, prefix)}"
        )
        prefix = ""
    template = {key: item for key, item in data.items() if key in TEMPLATE_KEYS}
    node = read_node(reader, template, path, named=False, keys=TEMPLATE_KEYS)
    return DnsSdConfig(
        names=names,
        type=kind,
        port=port,
        scheme=scheme,
        path_prefix=prefix.rstrip("/"),
        nameservers=_nameservers(reader, data.get("nameservers"), (*path, "nameservers")),
        node=node,
        **read_settings(reader, data, DnsSdConfig, path),
    )


def _names(reader: Reader, value: Any, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        reader.problem(path, "must be a non-empty list of DNS names")
        return ()
    names = []
    for index, item in enumerate(value):
        name = reader.string(item, (*path, index))
        if name and (len(name) > 253 or not _DNS_NAME.fullmatch(name)):
            where = (*path, index)
            reader.problem(where, f"is not a DNS name{reader.instead(where, name)}")
        elif name:
            names.append(name)
    if len(set(names)) != len(names):
        reader.problem(path, "lists a name more than once")
    return tuple(dict.fromkeys(names))


def _port(reader: Reader, value: Any, path: Path) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return value
    if value is None:
        reader.problem(path[:-1], "needs a port for A and AAAA records")
    else:
        reader.problem(path, f"must be a port from 1 to 65535{reader.instead(path, value)}")
    return None


def _nameservers(reader: Reader, value: Any, path: Path) -> tuple[tuple[str, int], ...]:
    """``['127.0.0.1:5353', '10.0.0.2']``: IP addresses, each with a port (53 if none)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        reader.problem(path, "must be a non-empty list of IP addresses (with :port), or left out")
        return ()
    servers = []
    for index, item in enumerate(value):
        text = reader.string(item, (*path, index))
        host, port = text, "53"
        if text.startswith("["):  # [::1]:5353
            host, _, port = text[1:].partition("]:")
        elif text.count(":") == 1:
            host, _, port = text.partition(":")
        try:
            ipaddress.ip_address(host)
            number = int(port)
            if not 1 <= number <= 65535:
                raise ValueError(port)
        except ValueError:
            if text:
                where = (*path, index)
                reader.problem(
                    where,
                    "must be an IP address with an optional port such as 127.0.0.1:53"
                    f"{reader.instead(where, text)}",
                )
            continue
        servers.append((host, number))
    return tuple(servers)


#: The longest a lookup of one name may take, whatever the refresh interval.
LOOKUP_SECONDS = 10.0


def lookup(config: DnsSdConfig, name: str) -> tuple[tuple[str, ...], int]:
    """The targets (``host:port``) the records of ``name`` give now, at most ``max_nodes``
    in the answer's order, each once, and how many more there were. A name that does not
    exist, or has no record of the type, gives none; raises DnsLookupError when no answer
    came."""
    # dnspython loads importlib.metadata (~0.8 MiB): only an exporter that looks names up
    # pays for it (tests/test_import_weight.py)
    import dns.exception  # noqa: PLC0415
    import dns.nameserver  # noqa: PLC0415
    import dns.resolver  # noqa: PLC0415

    try:
        # the system's resolver reads /etc/resolv.conf at each lookup: it may change too
        resolver = dns.resolver.Resolver(configure=not config.nameservers)
        if config.nameservers:
            resolver.nameservers = [
                dns.nameserver.Do53Nameserver(host, port) for host, port in config.nameservers
            ]
        resolver.lifetime = min(LOOKUP_SECONDS, config.refresh_interval)
        # a name without a final dot goes through the system's search list, as in Prometheus
        answer = resolver.resolve(name, config.type, search=True)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return (), 0
    except dns.exception.DNSException as error:
        raise DnsLookupError(_why(error)) from None
    targets: dict[str, None] = {}
    for record in answer:
        target = _target(config, record)
        if target is not None:
            targets.setdefault(target)
    kept = tuple(targets)[: config.max_nodes]
    return kept, len(targets) - len(kept)


def node_for(config: DnsSdConfig, target: str) -> NodeConfig:
    """The node a record's target (``host:port``) gives: named by it, reached at it."""
    return replace(config.node, name=target, url=f"{config.scheme}://{target}{config.path_prefix}")


def lookup_key(config: DnsSdConfig, name: str) -> tuple[object, ...]:
    """What a lookup of ``name`` depends on: two entries (or two reloads of one) with the
    same key share its records, whatever node settings they give."""
    return (name, config.type, config.port, config.nameservers, config.max_nodes)


def _target(config: DnsSdConfig, record: Any) -> str | None:
    """``host:port`` of one record, or None for one whose host is no host name."""
    if config.type == "SRV":
        host = record.target.to_text(omit_final_dot=True)
        if not _HOST.fullmatch(host) or record.port == 0:  # "." is "no such service"
            return None
        return f"{host}:{record.port}"
    address = record.address
    return f"[{address}]:{config.port}" if config.type == "AAAA" else f"{address}:{config.port}"


def _why(error: Exception) -> str:
    """What went wrong in a lookup, in one line without the answer's text."""
    import dns.resolver  # noqa: PLC0415 (as in lookup)

    if isinstance(error, dns.resolver.LifetimeTimeout):
        return "no answer in time (timeout)"
    if isinstance(error, dns.resolver.NoNameservers):
        return "every name server failed to answer (SERVFAIL or refused)"
    if isinstance(error, dns.resolver.NoResolverConfiguration):
        return "no name server is configured on this machine"
    return type(error).__name__
