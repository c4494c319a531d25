"""Nodes from node files and DNS, in process: what a node file and a ``dns_sd_configs``
entry accept and refuse, and how :class:`NodeSources` keeps each source's last good nodes.

Invalid node files live in ``testdata/node-files/invalid-*.yml``, annotated as the config's
(``# error:`` lines, in order, as ``ConfigError.problems`` gives them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.config.dns_sd import DnsSdConfig
from exporter.config.exporter import parse_config
from exporter.config.node_files import read_node_file
from exporter.config.nodes import NODE_KEYS
from exporter.config.sources import NodeSources
from exporter.errors import ConfigError, DnsLookupError
from tests.support.testdata import TESTDATA, expected_problems

INVALID = sorted((TESTDATA / "node-files").glob("invalid-*.yml"))
LONGEST = 1024


@pytest.mark.parametrize("path", INVALID, ids=lambda path: path.stem)
def test_invalid_node_file_reports_every_problem(path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_node_file(str(path), LONGEST)
    expected = [
        p.replace("<keys of nodes[]>", ", ".join(NODE_KEYS)) for p in expected_problems(path)
    ]
    assert caught.value.problems == expected
    assert caught.value.source == str(path)
    assert "S3CRET" not in str(caught.value)


def test_the_invalid_table_is_there() -> None:
    assert len(INVALID) >= 4
    assert all(expected_problems(path) for path in INVALID)


def test_a_json_node_file_reads_as_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    entry = {"name": "a", "url": "http://u:pw@127.0.0.1:1/", "labels": {"zone": "b"}}
    path.write_text(json.dumps([entry]))
    (node,), lines = read_node_file(str(path), LONGEST)
    assert (node.name, node.url, node.basic_auth, node.labels) == (
        "a",
        "http://127.0.0.1:1/",
        ("u", "pw"),
        (("zone", "b"),),
    )
    assert lines == [1]
    path.write_text(json.dumps([{**entry, "labels": {"node": "x"}}]))
    with pytest.raises(ConfigError) as caught:
        read_node_file(str(path), LONGEST)
    assert caught.value.problems == [
        "line 1: [0].labels.node: is a label the exporter or Prometheus sets itself"
    ]


def test_an_empty_node_file_has_no_nodes_and_a_huge_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yml"
    path.write_text("")
    assert read_node_file(str(path), LONGEST) == ((), [])
    path.write_bytes(b"#" * (5 * 1024 * 1024))
    with pytest.raises(ConfigError, match="larger than 4 MiB"):
        read_node_file(str(path), LONGEST)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            "{names: [x.test], type: MX}",
            "dns_sd_configs[0].type: must be one of SRV, A, AAAA, not 'MX'",
        ),
        ("{names: [x.test], type: A}", "dns_sd_configs[0]: needs a port for A and AAAA records"),
        (
            "{names: [x.test], port: 80}",
            "dns_sd_configs[0].port: is given by each SRV record: leave it out",
        ),
        ("{names: ['a b']}", "dns_sd_configs[0].names[0]: is not a DNS name, not 'a b'"),
        (
            "{names: [x.test], scheme: ftp}",
            "dns_sd_configs[0].scheme: must be http or https, not 'ftp'",
        ),
        (
            "{names: [x.test], path_prefix: api}",
            "dns_sd_configs[0].path_prefix: must be a URL path starting with / such as /api,"
            " not 'api'",
        ),
        (
            "{names: [x.test], nameservers: [dns.test]}",
            "dns_sd_configs[0].nameservers[0]: must be an IP address with an optional port"
            " such as 127.0.0.1:53, not 'dns.test'",
        ),
        ("{names: [x.test], name: a}", "dns_sd_configs[0].name: unknown key;"),
        (
            "{names: [x.test], refresh_interval: 0s}",
            "dns_sd_configs[0].refresh_interval: must be a duration from 1s to 24h",
        ),
        (
            "{names: [x.test], basic_auth: {username: u, password: 7}}",
            "dns_sd_configs[0].basic_auth.password: must be a non-empty string (value not shown)",
        ),
    ],
)
def test_invalid_dns_sd_entries(entry: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"dns_sd_configs:\n  - {entry}\n")
    assert any(found.startswith(f"line 2: {problem}") for found in caught.value.problems), (
        caught.value.problems
    )


def test_a_dns_entry_gives_each_node_its_settings() -> None:
    config = parse_config(
        "dns_sd_configs:\n"
        "  - {names: [nodes.test], type: A, port: 7740, scheme: https, path_prefix: /api/,"
        " nameservers: ['127.0.0.1:5353', '::1'], labels: {role: v}, blockchains: [c]}\n"
    )
    (entry,) = config.dns_sd_configs
    assert entry.nameservers == (("127.0.0.1", 5353), ("::1", 53))
    assert config.nodes == ()
    sources = NodeSources(config, "config.yml", resolve=lambda e, n: (("10.0.0.1:7740",), 0))
    sources.first()
    polled = sources.check()
    assert polled is not None
    (node,) = polled.nodes
    assert (node.name, node.url, node.labels, node.blockchains) == (
        "10.0.0.1:7740",
        "https://10.0.0.1:7740/api",
        (("role", "v"),),
        ("c",),
    )


class FakeDns:
    """Answers from a dict; a name mapped to None fails as a server that does not answer."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[str, ...] | None] = {}

    def __call__(self, entry: DnsSdConfig, name: str) -> tuple[tuple[str, ...], int]:
        found = self.records.get(name, ())
        if found is None:
            raise DnsLookupError("no answer in time (timeout)")
        return found, 0


def test_a_failed_lookup_keeps_the_last_records_and_names_clash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [0.0]
    dns = FakeDns()
    config = parse_config(
        "nodes: [{name: 'h:1', url: 'http://h:1/'}]\n"
        "dns_sd_configs: [{names: [a.test], refresh_interval: 10s}]\n"
    )
    sources = NodeSources(config, "config.yml", resolve=dns, monotonic=lambda: clock[0])
    assert [node.name for node in sources.first().nodes] == ["h:1"]
    dns.records["a.test"] = ("h:1", "h:2")
    polled = sources.check()
    assert polled is not None
    assert [node.name for node in polled.nodes] == ["h:1", "h:2"]  # h:1 left out of DNS's
    said = [getattr(record, "fields", {}) for record in caplog.records]
    assert {"source": "config.yml dns_sd_configs[0]", "name": "a.test"}.items() <= said[0].items()
    assert said[0]["problems"] == "node 'h:1' is also defined in config.yml nodes[0]"
    dns.records["a.test"] = None
    assert sources.check() is None  # not due yet
    clock[0] = 10.0
    assert sources.check() is None  # due, failed: the same nodes
    assert "DNS lookup failed, keeping the records it last got" in caplog.text
    dns.records["a.test"] = ()
    clock[0] = 20.0
    polled = sources.check()
    assert polled is not None
    assert [node.name for node in polled.nodes] == ["h:1"]  # the name gone: its nodes too


def test_a_node_file_that_fails_keeps_its_last_good_nodes(tmp_path: Path) -> None:
    (tmp_path / "nodes").mkdir()
    path = tmp_path / "nodes" / "a.yml"
    path.write_text("- {name: a, url: 'http://127.0.0.1:1/'}\n")
    config_path = tmp_path / "config.yml"
    config_path.write_text("node_files: ['nodes/*.yml']\n")
    config = parse_config(config_path.read_text(), str(config_path))
    sources = NodeSources(config, str(config_path))
    assert [node.name for node in sources.first().nodes] == ["a"]
    assert sources.file_status() == ((str(path), True),)
    path.write_text("- {name: a, url: 'nope'}\n- {name: b, url: 'http://127.0.0.1:2/'}\n")
    assert sources.check() is None
    assert sources.file_status() == ((str(path), False),)
    path.write_text("- {name: b, url: 'http://127.0.0.1:2/'}\n# changed\n")
    polled = sources.check()
    assert polled is not None
    assert [node.name for node in polled.nodes] == ["b"]
    assert sources.file_status() == ((str(path), True),)
    assert config.node_file_paths() == (str(path),)


def test_records_that_make_no_node_are_skipped(tmp_path: Path) -> None:
    """A real lookup's answer, read by ``lookup`` (a loopback server is in
    tests/e2e/test_dns_sd.py): an SRV target that is no host name, or port 0, makes no node;
    more records than ``max_nodes`` are counted, not used."""
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype

    from exporter.config import dns_sd

    config = parse_config("dns_sd_configs: [{names: [s.test], max_nodes: 2}]\n")
    (entry,) = config.dns_sd_configs
    texts = ["0 0 7740 a.test.", "0 0 0 b.test.", "0 0 7740 .", "0 0 7741 a.test.", "0 0 1 c."]
    records = [dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.SRV, t) for t in texts]
    targets = [dns_sd._target(entry, record) for record in records]
    assert targets == ["a.test:7740", None, None, "a.test:7741", "c:1"]


def test_no_resolver_configuration_is_a_failed_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    import dns.resolver

    def missing(*args: object, **kwargs: object) -> None:
        raise dns.resolver.NoResolverConfiguration("no /etc/resolv.conf")  # type: ignore[no-untyped-call]

    monkeypatch.setattr(dns.resolver.Resolver, "__init__", missing)
    from exporter.config.dns_sd import lookup

    (entry,) = parse_config("dns_sd_configs: [{names: [s.test]}]\n").dns_sd_configs
    with pytest.raises(DnsLookupError, match="no name server is configured"):
        lookup(entry, "s.test")
