"""The exporter's config file: what it accepts, what it refuses, and how it says so.

Invalid cases live in ``testdata/config/invalid-*.yml`` in the style of blackbox_exporter's
testdata: each file begins with one ``# error: <problem>`` line per problem the operator must
see, in order, exactly as ``ConfigError.problems`` gives them (line numbers count those
comment lines too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from exporter.bounds import Bounds
from exporter.config.exporter import (
    _TOP_KEYS,
    Config,
    NetworkChecks,
    load_config,
    parse_config,
)
from exporter.config.keytable import bound_keys, key_names
from exporter.config.nodes import NODE_KEYS, NodeConfig, TlsConfig
from exporter.config.probe_modules import _PROBE_KEYS, ProbeConfig
from exporter.errors import ConfigError
from tests.support.testdata import REPO, TESTDATA, expected_problems

CONFIG_TESTDATA = TESTDATA / "config"
INVALID_FILES = sorted(CONFIG_TESTDATA.glob("invalid-*.yml"))
UNSET_ENV = "LEDGER_EXPORTER_TEST_UNSET_TOKEN"  # named by invalid-credentials-env-unset.yml


def write_config(directory: Path, text: str) -> str:
    path = directory / "config.yml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_invalid_testdata_is_there_and_annotated() -> None:
    assert len(INVALID_FILES) >= 30
    for path in INVALID_FILES:
        assert expected_problems(path), f"{path.name} has no '# error:' line"


#: The allowed-keys lists an ``# error:`` line names instead of spelling out: they grow with
#: every plain key a section declares (exporter/config/keytable.py), so a new key does not
#: touch the invalid files; test_the_allowed_key_lists_are_the_sections_and_the_declared_keys
#: checks how each is made.
KEY_LISTS = {
    "<top-level keys>": _TOP_KEYS,
    "<keys of nodes[]>": NODE_KEYS,
    "<keys of probe>": _PROBE_KEYS,
}


def _with_key_lists(problem: str) -> str:
    for name, keys in KEY_LISTS.items():
        problem = problem.replace(name, ", ".join(keys))
    return problem


@pytest.mark.parametrize("path", INVALID_FILES, ids=lambda path: path.stem)
def test_invalid_config_reports_every_problem(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET_ENV, raising=False)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert caught.value.problems == [_with_key_lists(line) for line in expected_problems(path)]
    assert caught.value.source == str(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_the_allowed_key_lists_are_the_sections_and_the_declared_keys() -> None:
    """What the ``# error:`` lines' placeholders stand for: the keys read by their own code,
    in the docs' order, then the plain keys each section declares."""
    bounds = tuple(item.name for _, item in bound_keys())
    sections = (
        "network_checks",
        "nodes",
        "node_files",
        "dns_sd_configs",
        "probe",
        "watch",
        "maintenance",
    )
    assert (*key_names(Config), *bounds, *sections) == _TOP_KEYS
    assert _TOP_KEYS[:5] == (
        "scrape_interval",
        "scrape_timeout",
        "max_concurrency",
        "max_response_bytes",
        "max_blockchains_per_node",
    )
    assert bounds[:2] == ("max_features_per_chain", "max_auth_groups_per_wallet")
    structural = ("name", "url", "labels", "blockchains", "headers", "basic_auth")
    nested = ("authorization", "tls_config", "expect")
    assert (*structural, *nested, *key_names(NodeConfig)) == NODE_KEYS
    assert ("allowed_targets", "modules", *key_names(ProbeConfig)) == _PROBE_KEYS
    assert "max_in_flight" in _PROBE_KEYS


def _latin1_file(directory: Path) -> Path:
    path = directory / "latin1.yml"
    path.write_bytes(b"r\xe9gion: 1\n")
    return path


@pytest.mark.parametrize(
    ("make_path", "problem"),
    [
        (lambda tmp: tmp / "missing.yml", "cannot read the file: [Errno 2] No such file"),
        (lambda tmp: tmp, "cannot read the file: [Errno 21] Is a directory"),
        (_latin1_file, "cannot read the file: 'utf-8' codec can't decode byte 0xe9"),
    ],
    ids=["missing", "directory", "not-utf8"],
)
def test_unreadable_config_file(
    make_path: Callable[[Path], Path], problem: str, tmp_path: Path
) -> None:
    path = make_path(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(problem)
    assert caught.value.source == str(path)


NODE_A = "nodes:\n  - name: a\n    url: http://127.0.0.1:7740/\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            NODE_A,
            Config(
                nodes=(NodeConfig("a", "http://127.0.0.1:7740/"),),
                scrape_interval=15.0,
                scrape_timeout=10.0,
                max_concurrency=512,
                max_response_bytes=8 * 1024 * 1024,
            ),
            id="defaults",
        ),
        pytest.param(
            "scrape_interval: 5s\n" + NODE_A,
            Config((NodeConfig("a", "http://127.0.0.1:7740/"),), 5.0, 5.0),
            id="short-interval-caps-default-timeout",
        ),
        pytest.param(
            "scrape_interval: 1m30s\nscrape_timeout: 1m30s\n" + NODE_A,
            Config((NodeConfig("a", "http://127.0.0.1:7740/"),), 90.0, 90.0),
            id="timeout-equal-to-interval",
        ),
        pytest.param(
            "scrape_interval: 2s\nscrape_timeout: 500ms\nmax_concurrency: 8\n" + NODE_A,
            Config((NodeConfig("a", "http://127.0.0.1:7740/"),), 2.0, 0.5, 8),
            id="durations-and-concurrency",
        ),
        pytest.param(
            "network_checks:\n  checkpoint_depth: 0\n  block_hash_fields: [id]\n" + NODE_A,
            Config(
                (NodeConfig("a", "http://127.0.0.1:7740/"),),
                network_checks=NetworkChecks(checkpoint_depth=0, block_hash_fields=("id",)),
            ),
            id="network-checks",
        ),
        pytest.param(
            "network_checks: {}\n" + NODE_A,
            Config((NodeConfig("a", "http://127.0.0.1:7740/"),), network_checks=NetworkChecks(5)),
            id="network-checks-defaults",
        ),
        *(
            pytest.param(
                f"max_response_bytes: {size}\n" + NODE_A,
                Config((NodeConfig("a", "http://127.0.0.1:7740/"),), max_response_bytes=number),
                id=f"size-{size}",
            )
            for size, number in [
                ("512KiB", 512 * 1024),
                ("8MiB", 8 * 1024 * 1024),
                ("1GiB", 1024**3),
                ("100B", 100),
                ("'2 MiB'", 2 * 1024**2),
                ("'4096'", 4096),
                ("1048576", 1048576),
            ]
        ),
        pytest.param(
            "nodes:\n  - name: a\n    url: http://alice:s%40cret@10.0.0.5:7740/api/\n",
            Config((NodeConfig("a", "http://10.0.0.5:7740/api/", basic_auth=("alice", "s@cret")),)),
            id="user-info-moved-to-basic-auth",
        ),
        pytest.param(
            "nodes:\n  - name: a\n    url: https://bob@10.0.0.5/\n",
            Config((NodeConfig("a", "https://10.0.0.5/", basic_auth=("bob", "")),)),
            id="user-info-without-password",
        ),
        pytest.param(
            "nodes:\n  - name: a\n    url: http://127.0.0.1:7740/nodes/node-1/\n"
            "  - name: b\n    url: http://127.0.0.1:7740/nodes/node-2\n"
            "  - name: c\n    url: http://[::1]:7741\n",
            Config(
                (
                    NodeConfig("a", "http://127.0.0.1:7740/nodes/node-1/"),
                    NodeConfig("b", "http://127.0.0.1:7740/nodes/node-2"),
                    NodeConfig("c", "http://[::1]:7741"),
                )
            ),
            id="path-prefix-kept",
        ),
        pytest.param(
            NODE_A + "    labels: {region: eu-west, rack: 7, weight: 1.5, a_b: x, Zone: z}\n",
            Config(
                (
                    NodeConfig(
                        "a",
                        "http://127.0.0.1:7740/",
                        labels=(
                            ("Zone", "z"),
                            ("a_b", "x"),
                            ("rack", "7"),
                            ("region", "eu-west"),
                            ("weight", "1.5"),
                        ),
                    ),
                )
            ),
            id="labels-sorted-numbers-stringified",
        ),
        pytest.param(
            NODE_A + "    blockchains: [abc123, 'chain/with space', '42']\n",
            Config(
                (
                    NodeConfig(
                        "a",
                        "http://127.0.0.1:7740/",
                        blockchains=("abc123", "chain/with space", "42"),
                    ),
                )
            ),
            id="blockchains",
        ),
        pytest.param(
            NODE_A + "    headers: {X-Scope: monitoring}\n"
            "    authorization: {credentials: inline-token}\n",
            Config(
                (
                    NodeConfig(
                        "a",
                        "http://127.0.0.1:7740/",
                        headers=(
                            ("X-Scope", "monitoring"),
                            ("Authorization", "Bearer inline-token"),
                        ),
                    ),
                )
            ),
            id="headers-and-authorization",
        ),
        pytest.param(
            NODE_A + "    basic_auth: {username: prometheus, password: inline}\n",
            Config(
                (NodeConfig("a", "http://127.0.0.1:7740/", basic_auth=("prometheus", "inline")),)
            ),
            id="basic-auth-inline",
        ),
        pytest.param(
            NODE_A + "    tls_config: {ca_file: /dev/null, insecure_skip_verify: true}\n",
            Config(
                (
                    NodeConfig(
                        "a",
                        "http://127.0.0.1:7740/",
                        tls=TlsConfig(ca_file="/dev/null", insecure_skip_verify=True),
                    ),
                )
            ),
            id="tls-config",
        ),
        pytest.param(
            NODE_A + "    tls_config: {cert_file: /dev/null, key_file: /dev/null}\n",
            Config(
                (
                    NodeConfig(
                        "a",
                        "http://127.0.0.1:7740/",
                        tls=TlsConfig(cert_file="/dev/null", key_file="/dev/null"),
                    ),
                )
            ),
            id="tls-client-certificate",
        ),
    ],
)
def test_valid_config(text: str, expected: Config, tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path, text)) == expected


@pytest.mark.parametrize(
    ("content", "password"),
    [
        ("s3cret\n", "s3cret"),
        ("s3cret\r\n", "s3cret"),
        ("s3cret", "s3cret"),
        (" spaced secret \n", " spaced secret "),
    ],
    ids=["newline", "crlf", "no-newline", "spaces-kept"],
)
def test_password_file_is_read(content: str, password: str, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(content, encoding="utf-8", newline="")
    text = NODE_A + f"    basic_auth: {{username: prometheus, password_file: '{secret}'}}\n"
    node = load_config(write_config(tmp_path, text)).nodes[0]
    assert node.basic_auth == ("prometheus", password)
    assert node.headers == ()


def test_password_env_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_EXPORTER_TEST_PASSWORD", "from-env")
    text = NODE_A + (
        "    basic_auth: {username: prometheus, password_env: LEDGER_EXPORTER_TEST_PASSWORD}\n"
    )
    node = load_config(write_config(tmp_path, text)).nodes[0]
    assert node.basic_auth == ("prometheus", "from-env")


def test_credentials_file_builds_authorization_header(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("file-token\n", encoding="utf-8")
    text = NODE_A + f"    authorization: {{credentials_file: '{token}'}}\n"
    node = load_config(write_config(tmp_path, text)).nodes[0]
    assert node.headers == (("Authorization", "Bearer file-token"),)
    assert node.basic_auth is None


def test_credentials_env_with_custom_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_EXPORTER_TEST_TOKEN", "env-token")
    text = NODE_A + (
        "    headers: {X-Scope: monitoring}\n"
        "    authorization: {type: Token, credentials_env: LEDGER_EXPORTER_TEST_TOKEN}\n"
    )
    node = load_config(write_config(tmp_path, text)).nodes[0]
    assert dict(node.headers) == {"X-Scope": "monitoring", "Authorization": "Token env-token"}


SECRETS = ("url-password", "inline-password", "file-password", "bearer-token", "api-key-value")


def secret_config(tmp_path: Path) -> str:
    password_file = tmp_path / "password"
    password_file.write_text("file-password\n", encoding="utf-8")
    return (
        "nodes:\n"
        "  - name: with-user-info\n"
        "    url: http://alice:url-password@127.0.0.1:7740/\n"
        "  - name: with-basic-auth\n"
        "    url: http://127.0.0.1:7741/\n"
        "    basic_auth: {username: prometheus, password: inline-password}\n"
        "  - name: with-password-file\n"
        "    url: http://127.0.0.1:7742/\n"
        f"    basic_auth: {{username: prometheus, password_file: '{password_file}'}}\n"
        "  - name: with-token\n"
        "    url: http://127.0.0.1:7743/\n"
        "    headers: {X-Api-Key: api-key-value}\n"
        "    authorization: {credentials: bearer-token}\n"
    )


def test_repr_never_shows_credentials(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, secret_config(tmp_path)))
    # The secrets are really loaded, so not showing them is not an accident of parsing.
    assert config.nodes[0].basic_auth == ("alice", "url-password")
    assert config.nodes[2].basic_auth == ("prometheus", "file-password")
    assert ("X-Api-Key", "api-key-value") in config.nodes[3].headers
    texts = [repr(config), str(config), *(repr(node) for node in config.nodes)]
    for text in texts:
        for secret in SECRETS:
            assert secret not in text
    assert all("@" not in node.url for node in config.nodes)


def test_config_errors_never_show_credentials(tmp_path: Path) -> None:
    text = "scrape_interval: never\n" + secret_config(tmp_path)
    text += "  - name: typed-password\n    url: http://127.0.0.1:7744/\n"
    text += "    basic_auth: {username: prometheus, password: 987654321}\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, text))
    message = str(caught.value)
    assert "scrape_interval" in message
    assert "nodes[4].basic_auth.password: must be a non-empty string (value not shown)" in message
    for secret in (*SECRETS, "987654321"):
        assert secret not in message


def test_example_config_is_valid() -> None:
    """As shipped it polls `ledger-exporter simulate`'s nodes (tests/e2e/test_cli.py runs it)."""
    config = load_config(str(REPO / "config" / "example.yml"))
    assert [(node.name, node.url) for node in config.nodes] == [
        ("validator-1", "http://127.0.0.1:7740/nodes/node-1/"),
        ("validator-2", "http://127.0.0.1:7740/nodes/node-2/"),
        ("observer-1", "http://127.0.0.1:7740/nodes/node-3/"),
    ]
    assert config.nodes[1].labels == (("region", "us-east"), ("role", "validator"))  # merged
    text = " ".join((REPO / "config" / "example.yml").read_text(encoding="utf-8").split())
    assert "are relative to this config file's folder" in text
    assert "working directory" not in text


MERGED = """\
nodes:
  - &validator
    name: a
    url: http://127.0.0.1:7740/nodes/node-1/
    labels: &eu {region: eu, tier: gold}
    blockchains: [c1]
  - <<: *validator
    name: b
    url: http://127.0.0.1:7740/nodes/node-2/
  - <<: [*validator]
    name: c
    url: http://127.0.0.1:7740/nodes/node-3/
    labels: {<<: *eu, region: us}
    blockchains: [c2]
"""


def test_yaml_merge_keys_are_supported() -> None:
    """``<<: *anchor`` (and a list of anchors) merges, the mapping's own keys winning."""
    config = parse_config(MERGED)
    assert [(n.name, n.url[-7:-1], n.labels, n.blockchains) for n in config.nodes] == [
        ("a", "node-1", (("region", "eu"), ("tier", "gold")), ("c1",)),
        ("b", "node-2", (("region", "eu"), ("tier", "gold")), ("c1",)),
        ("c", "node-3", (("region", "us"), ("tier", "gold")), ("c2",)),
    ]


NESTED_KEYS = (
    "username",
    "password",
    "password_file",
    "password_env",
    "type",
    "credentials",
    "credentials_file",
    "credentials_env",
    "ca_file",
    "cert_file",
    "key_file",
    "insecure_skip_verify",
)


@pytest.mark.parametrize("key", [*_TOP_KEYS, *NODE_KEYS, *NESTED_KEYS])
def test_example_config_shows_every_key(key: str) -> None:
    text = (REPO / "config" / "example.yml").read_text(encoding="utf-8")
    # As a setting, possibly commented out: "key:", "- key:", "# key:", "#   key:".
    assert re.search(rf"^\s*(#\s*)*(-\s+)?{key}:", text, re.MULTILINE), key


def uncomment_block(text: str, key: str) -> str:
    """``# key:`` and the ``#   child:`` lines right under it, uncommented."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"# {key}:"))
    indent = lines[start].index("#")
    lines[start] = lines[start][:indent] + lines[start][indent + 2 :]
    for index in range(start + 1, len(lines)):
        body = lines[index][indent:]
        if not body.startswith("#   ") or body.startswith("#   #"):
            break
        lines[index] = lines[index][:indent] + body[2:]
    return "".join(lines)


@pytest.mark.parametrize("block", ["basic_auth", "authorization"])
def test_example_config_commented_settings_are_valid(block: str, tmp_path: Path) -> None:
    """The commented-out settings in the example work once uncommented, with their files."""
    for name in ("validator-2.password", "validator-2.token", "ca.pem", "client.pem", "client.key"):
        (tmp_path / name).write_text("secret-or-pem\n", encoding="utf-8")
    text = (REPO / "config" / "example.yml").read_text(encoding="utf-8")
    text = uncomment_block(text, block)
    text = re.sub(r"^(\s*)# ((ca|cert|key)_file: /)", r"\1\2", text, flags=re.MULTILINE)
    text = text.replace("/etc/ledger-exporter/", f"{tmp_path}/")
    node = load_config(write_config(tmp_path, text)).nodes[1]
    assert node.tls == TlsConfig(
        f"{tmp_path}/ca.pem", f"{tmp_path}/client.pem", f"{tmp_path}/client.key"
    )
    if block == "basic_auth":
        assert node.basic_auth == ("prometheus", "secret-or-pem")
    else:
        assert ("Authorization", "Bearer secret-or-pem") in node.headers


def test_relative_files_are_relative_to_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "password").write_text("from-the-folder\n")
    (folder / "ca.pem").write_text("not checked here")
    config_file = folder / "config.yml"
    config_file.write_text(
        "nodes:\n  - name: a\n    url: https://h/\n"
        "    basic_auth: {username: u, password_file: password}\n"
        "    tls_config: {ca_file: ca.pem}\n"
    )
    monkeypatch.chdir(tmp_path)  # the working directory must not matter
    node = load_config(str(config_file)).nodes[0]
    assert node.basic_auth == ("u", "from-the-folder")
    assert node.tls.ca_file == str(folder / "ca.pem")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Bounds(100, 32, 1024)),
        ("max_features_per_chain: 5\n", Bounds(features_per_chain=5)),
        ("max_auth_groups_per_wallet: 1\n", Bounds(auth_groups_per_wallet=1)),
        ("max_label_value_length: 4096\n", Bounds(label_value_length=4096)),
        ("max_label_value_length: 1\n", Bounds(label_value_length=1)),
        ("max_vote_sessions_per_chain: 2\n", Bounds(vote_sessions_per_chain=2)),
        ("max_leaders_per_chain: 9\n", Bounds(leaders_per_chain=9)),
    ],
    ids=repr,
)
def test_cardinality_bounds(text: str, expected: Bounds) -> None:
    config = parse_config(text + "nodes: [{name: a, url: 'http://h/'}]\n")
    assert config.bounds == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_label_value_length: 0", "must be a whole number from 1 to 4096, not 0"),
        ("max_label_value_length: '64'", "must be a whole number from 1 to 4096, not '64'"),
        ("max_label_value_length: true", "must be a whole number from 1 to 4096, not True"),
        ("max_features_per_chain: -1", "must be a whole number of at least 1, not -1"),
        ("max_auth_groups_per_wallet: 1.5", "must be a whole number of at least 1, not 1.5"),
    ],
)
def test_cardinality_bounds_refused(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text + "\nnodes: [{name: a, url: 'http://h/'}]\n")
    assert caught.value.problems == [f"line 1: {text.partition(':')[0]}: {problem}"]


@pytest.mark.parametrize(("value", "expected"), [(None, 100), (3, 3), (1, 1)])
def test_max_blockchains_per_node(value: int | None, expected: int) -> None:
    line = "" if value is None else f"max_blockchains_per_node: {value}\n"
    config = parse_config(line + "nodes: [{name: a, url: 'http://h/'}]\n")
    assert config.max_blockchains_per_node == expected


def test_header_values_are_never_echoed() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config("nodes: [{name: a, url: 'http://h/', headers: {X-Key: 98765}}]\n")
    assert "98765" not in str(raised.value)


def test_kind_is_a_label_the_exporter_sets() -> None:
    """ledger_exporter_dropped_values_total{kind} carries the node's static labels too."""
    with pytest.raises(ConfigError, match="kind: is a label the exporter or Prometheus sets"):
        parse_config("nodes: [{name: a, url: 'http://h/', labels: {kind: validator}}]\n")
