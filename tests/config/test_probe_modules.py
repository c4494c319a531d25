"""The config's ``probe`` section (issue 11): what it accepts; what it refuses is in
testdata/config/invalid-probe-*.yml, checked by tests/config/test_config.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config.exporter import load_config, parse_config
from exporter.config.nodes import NodeConfig, TlsConfig
from exporter.config.probe_modules import MAX_IN_FLIGHT_CEILING, ProbeConfig, ProbeModule
from exporter.web.server import ServerLimits


@pytest.mark.parametrize("nodes", ["", "nodes: []\n", "nodes:\n"], ids=["absent", "empty", "null"])
def test_a_probe_only_config_needs_no_nodes(nodes: str) -> None:
    config = parse_config(nodes + "probe:\n  allowed_targets: ['http://127\\.0\\.0\\.1:[0-9]+/']\n")
    assert config.nodes == ()
    assert config.probe is not None
    assert config.probe.modules == (("default", ProbeModule()),)
    assert config.probe.max_in_flight == ProbeConfig.max_in_flight == 8


def test_nodes_and_probe_together() -> None:
    config = parse_config(
        "nodes: [{name: a, url: 'http://127.0.0.1:7740/'}]\n"
        "probe: {allowed_targets: ['x'], max_in_flight: 3}\n"
    )
    assert [node.name for node in config.nodes] == ["a"]
    assert config.probe is not None and config.probe.max_in_flight == 3


def test_without_probe_section_there_is_no_probe_mode() -> None:
    assert parse_config("nodes: [{name: a, url: 'http://127.0.0.1:7740/'}]\n").probe is None


@pytest.mark.parametrize(
    ("target", "allowed"),
    [
        ("https://node-1.ledger.internal:7740/", True),
        ("https://node-1.ledger.internal:7740", True),
        ("https://node-1.ledger.internal:7740/health", False),
        ("xhttps://node-1.ledger.internal:7740/", False),
        ("https://node-a.ledger.internal:7740/", False),
        ("http://10.1.2.3:7740/", True),
        ("http://10.1.2.3:7741/", False),
    ],
)
def test_allowed_targets_match_whole(target: str, allowed: bool) -> None:
    config = parse_config(
        "probe:\n  allowed_targets:\n"
        "    - 'https://node-[0-9]+\\.ledger\\.internal:7740/?'\n"
        "    - 'http://10\\.1\\.2\\.[0-9]+:7740/'\n"
    )
    assert config.probe is not None
    assert config.probe.allows(target) is allowed


def test_module_settings_are_read_like_a_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_EXPORTER_TEST_PROBE_TOKEN", "s3cret")
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    config_file = tmp_path / "config.yml"
    config_file.write_text(
        "probe:\n"
        "  allowed_targets: ['.*']\n"
        "  modules:\n"
        "    default:\n"
        "    token:\n"
        "      blockchains: [c1, c2]\n"
        "      headers: {X-Tenant: ops}\n"
        "      authorization: {credentials_env: LEDGER_EXPORTER_TEST_PROBE_TOKEN}\n"
        "      tls_config: {ca_file: ca.pem}\n"
        "    basic:\n"
        "      basic_auth: {username: monitor, password: pw}\n"
    )
    probe = load_config(str(config_file)).probe
    assert probe is not None
    assert [name for name, _ in probe.modules] == ["default", "token", "basic"]
    assert probe.module("default") == ProbeModule()
    token = probe.module("token")
    assert token is not None
    assert token.node("n", "https://h:1/") == NodeConfig(
        name="n",
        url="https://h:1/",
        blockchains=("c1", "c2"),
        headers=(("X-Tenant", "ops"), ("Authorization", "Bearer s3cret")),
        tls=TlsConfig(ca_file=str(ca)),
    )
    assert "s3cret" not in repr(probe)
    basic = probe.module("basic")
    assert basic is not None and basic.basic_auth == ("monitor", "pw")
    assert "pw" not in repr(basic)
    assert probe.module("missing") is None


def test_probes_in_flight_always_leave_server_threads_for_metrics() -> None:
    """A probe holds a request thread while it runs: the bound the config may ask for leaves
    some of the server's threads to /metrics and the health checks."""
    handlers = ServerLimits().max_handlers
    assert ProbeConfig.max_in_flight <= MAX_IN_FLIGHT_CEILING <= handlers - 4
    text = f"probe:\n  allowed_targets: ['x']\n  max_in_flight: {MAX_IN_FLIGHT_CEILING}\n"
    config = parse_config(text)
    assert config.probe is not None and config.probe.max_in_flight == MAX_IN_FLIGHT_CEILING
