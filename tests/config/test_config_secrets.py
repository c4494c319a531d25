"""No config or web-config problem ever shows a secret: not the loaders' messages, not
``--config.check``, not the log nor the answer of a failed ``POST /-/reload``.

Each case of the tables carries its own secret (``S3CRET-<n>`` or a distinctive number) in a
secret position (URL user-info, a password, credentials, a header value, a web config user's
hash) and names the problem the operator must still see: its line and key path. A walk of
the whole schema checks that every leaf that may hold a secret is classed as one, and that
no hostile value put there comes back.
"""

from __future__ import annotations

import base64
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml

from exporter.app import Exporter
from exporter.config.exporter import _Reader, load_config, parse_config
from exporter.config.web import _WebReader, load_web_config
from exporter.config.yamlsource import load_located
from exporter.errors import ConfigError
from tests.support.http import fetch
from tests.support.ports import closed_port_url
from tests.support.testdata import REPO

NODE = "nodes:\n  - name: a\n"  # a case's node starts on line 2, its next key on line 3
URL = "    url: http://127.0.0.1:7740/\n"

#: (id, config text, the secret it holds, the problem that must be reported).
CONFIG_CASES = [
    (
        "url-password-with-slash",
        NODE + "    url: http://u:S3CRET-1/x@127.0.0.1:7740/\n",
        "S3CRET-1",
        "line 3: nodes[0].url: has an '@' after its host (value not shown)",
    ),
    (
        "url-password-digits-then-slash",  # urlsplit reads host 'u', port 1234, path '/S3..@'
        NODE + "    url: http://u:1234/S3CRET-2@127.0.0.1:7740/\n",
        "S3CRET-2",
        "line 3: nodes[0].url: has an '@' after its host (value not shown)",
    ),
    (
        "url-password-with-hash",
        NODE + "    url: http://u:S3CRET#3@127.0.0.1:7740/\n",
        "S3CRET",
        "line 3: nodes[0].url: has an '@' after its host (value not shown)",
    ),
    (
        "url-password-with-question-mark",
        NODE + "    url: http://u:S3CRET?4@127.0.0.1:7740/\n",
        "S3CRET",
        "line 3: nodes[0].url: has an '@' after its host (value not shown)",
    ),
    (
        "url-password-with-bracket",
        NODE + "    url: http://u:S3CRET[5@127.0.0.1:7740/\n",
        "S3CRET",
        "line 3: nodes[0].url: is not a valid URL (value not shown)",
    ),
    (
        "url-user-info-and-bad-port",
        NODE + "    url: http://S3CRET-6:pw@127.0.0.1:99999/\n",
        "S3CRET-6",
        "line 3: nodes[0].url: has a port that is not a number from 1 to 65535",
    ),
    (
        "url-user-info-and-port-zero",
        NODE + "    url: http://u:S3CRET-7@127.0.0.1:0/\n",
        "S3CRET-7",
        "line 3: nodes[0].url: has a port that is not a number from 1 to 65535",
    ),
    (
        "url-without-scheme",
        NODE + "    url: u:S3CRET-8@127.0.0.1:7740\n",
        "S3CRET-8",
        "line 3: nodes[0].url: must be an http:// or https:// URL with a host",
    ),
    (
        "url-with-space",
        NODE + "    url: 'http://u:S3CRET 9@127.0.0.1:7740/'\n",
        "S3CRET",
        "line 3: nodes[0].url: must not contain spaces or control characters",
    ),
    (
        "url-as-flow-mapping",
        NODE + "    url: {http://u:S3CRET-10@127.0.0.1:7740/}\n",
        "S3CRET-10",
        "line 3: nodes[0].url: must be a non-empty string (value not shown)",
    ),
    (
        "url-as-number",
        NODE + "    url: 9876543211\n",
        "9876543211",
        "line 3: nodes[0].url: must be a non-empty string (value not shown)",
    ),
    (
        "password-as-number",
        NODE + URL + "    basic_auth: {username: u, password: 9876543212}\n",
        "9876543212",
        "line 4: nodes[0].basic_auth.password: must be a non-empty string (value not shown)",
    ),
    (
        "password-as-list",
        NODE + URL + "    basic_auth: {username: u, password: [S3CRET-13]}\n",
        "S3CRET-13",
        "line 4: nodes[0].basic_auth.password: must be a non-empty string (value not shown)",
    ),
    (
        "password-without-its-colon",
        NODE + URL + "    basic_auth: {username: u, password S3CRET-14}\n",
        "S3CRET-14",
        "line 4: nodes[0].basic_auth.<key not shown>: unknown key; did you mean 'password'?",
    ),
    (
        "password-mapping-with-duplicate-keys",
        NODE + URL + "    basic_auth: {username: u, password: {S3CRET-15: 1, S3CRET-15: 2}}\n",
        "S3CRET-15",
        "line 4: nodes[0].basic_auth.password.<key not shown>: key given more than once",
    ),
    (
        "basic-auth-as-one-string",
        NODE + URL + "    basic_auth: 'u:S3CRET-16'\n",
        "S3CRET-16",
        "line 4: nodes[0].basic_auth: must be a mapping of keys to values",
    ),
    (
        "authorization-as-one-string",
        NODE + URL + "    authorization: Bearer S3CRET-17\n",
        "S3CRET-17",
        "line 4: nodes[0].authorization: must be a mapping of keys to values",
    ),
    (
        "token-written-into-type",
        NODE + URL + "    authorization: {type: Bearer S3CRET-18, credentials: x}\n",
        "S3CRET-18",
        "line 4: nodes[0].authorization.type: must be one word such as Bearer (value not shown)",
    ),
    (
        "credentials-as-number",
        NODE + URL + "    authorization: {credentials: 9876543219}\n",
        "9876543219",
        "line 4: nodes[0].authorization.credentials: must be a non-empty string (value not shown)",
    ),
    (
        "credentials-on-two-lines",
        NODE + URL + '    authorization: {credentials: "S3CRET-20\\nX-Injected: 1"}\n',
        "S3CRET-20",
        "line 4: nodes[0].authorization: credentials must be on one line (value not shown)",
    ),
    (
        "credentials-unknown-key",
        NODE + URL + "    authorization: {credentials: x, S3CRET-21: y}\n",
        "S3CRET-21",
        "line 4: nodes[0].authorization.<key not shown>: unknown key",
    ),
    (
        "header-value-as-number",
        NODE + URL + "    headers: {X-Api-Key: 9876543222}\n",
        "9876543222",
        "line 4: nodes[0].headers.X-Api-Key: must be a string on one line (value not shown)",
    ),
    (
        "header-without-its-colon",
        NODE + URL + "    headers: {X-Api-Key S3CRET-23}\n",
        "S3CRET-23",
        "line 4: nodes[0].headers.<key not shown>: is not a valid HTTP header name",
    ),
    (
        "header-value-as-list",
        NODE + URL + "    headers:\n      X-Api-Key: [S3CRET-24]\n",
        "S3CRET-24",
        "line 5: nodes[0].headers.X-Api-Key: must be a string on one line (value not shown)",
    ),
    (
        "password-aliased-into-a-duration",
        "scrape_interval: *pw\n" + NODE + URL + "    basic_auth:\n"
        "      username: u\n      password: &pw S3CRET-25\n",
        "S3CRET-25",
        "invalid YAML: line 1, column 18: an alias (*name) that no anchor defines",
    ),
    (
        "password-anchored-then-aliased-into-a-duration",
        NODE + URL + "    basic_auth: {username: u, password: &pw S3CRET-26}\n"
        "scrape_interval: *pw\n",
        "S3CRET-26",
        "line 5: scrape_interval: must be a duration from 100ms to 1h such as 15s or 1m "
        "(value not shown)",
    ),
    (
        "password-aliased-into-a-watched-node",
        NODE + URL + "    basic_auth: {username: u, password: &pw S3CRET-27}\n"
        "watch:\n  wallets:\n    - {blockchain: c, address: w, nodes: [*pw]}\n",
        "S3CRET-27",
        "line 4: watch.wallets[0].nodes[0]: names no configured node: (value not shown)",
    ),
    (
        "merged-credentials",
        "defaults: &creds {username: u, password: [S3CRET-28]}\n"
        + NODE
        + URL
        + "    basic_auth: {<<: *creds}\n",
        "S3CRET-28",
        "line 1: nodes[0].basic_auth.password: must be a non-empty string (value not shown)",
    ),
    (
        "probe-module-password-and-header",
        "probe:\n  allowed_targets: ['http://127\\.0\\.0\\.1:7740/']\n  modules:\n    m:\n"
        "      basic_auth: {username: u, password: 9876543229}\n"
        "      headers: {X-Api-Key S3CRET-29}\n",
        "9876543229",
        "line 5: probe.modules.m.basic_auth.password: must be a non-empty string",
    ),
    (
        "probe-module-header-without-its-colon",
        "probe:\n  allowed_targets: ['http://127\\.0\\.0\\.1:7740/']\n  modules:\n    m:\n"
        "      headers: {X-Api-Key S3CRET-30}\n",
        "S3CRET-30",
        "line 5: probe.modules.m.headers.<key not shown>: is not a valid HTTP header name",
    ),
    # YAML syntax: a password written unquoted is read as YAML syntax, and PyYAML's message
    # quoted the text it could not use.
    (
        "password-starting-with-star",
        NODE + URL + "    basic_auth:\n      username: u\n      password: *S3CRET-31\n",
        "S3CRET-31",
        "invalid YAML: line 6, column 17: an alias (*name) that no anchor defines; an unquoted"
        " value starting with * is read as an alias: quote it",
    ),
    (
        "password-starting-with-ampersand-twice",
        NODE + URL + "    basic_auth: {username: &S3CRET-32 u, password: &S3CRET-32 x}\n",
        "S3CRET-32",
        "invalid YAML: line 4, column 52: an anchor (&name) defined twice",
    ),
    (
        "password-starting-with-exclamation-mark",
        NODE + URL + "    basic_auth:\n      username: u\n      password: !S3CRET-33\n",
        "S3CRET-33",
        "invalid YAML: line 6, column 17: an unknown tag; an unquoted value starting with !",
    ),
    (
        "password-starting-with-bar",
        NODE + URL + "    basic_auth:\n      username: u\n      password: |S3CRET-34\n",
        "S3CRET-34",
        "invalid YAML: line 6, column 18: a bad block scalar header",
    ),
    (
        "password-with-a-bad-escape",
        NODE + URL + '    basic_auth: {username: u, password: "S3CRET-35\\Q"}\n',
        "'Q'",  # the one character PyYAML quoted
        "invalid YAML: line 4, column 52: while scanning a double-quoted scalar (from line 4),"
        " found unknown escape character (text not shown)",
    ),
    (
        "password-with-a-control-character",
        NODE + URL + "    basic_auth: {username: u, password: S3CRET-36\x01}\n",
        "S3CRET-36",
        "invalid YAML: line 4, column 50: character #x0001 is not allowed",
    ),
]

ALIAS_CASE = next(case for case in CONFIG_CASES if case[0] == "password-starting-with-star")
ALIAS_PROBLEM = "invalid YAML: line 6, column 17: an alias"

#: (id, web config text, its secret, the problem).
WEB_CASES = [
    (
        "plaintext-number",
        "basic_auth_users:\n  alice: 9876543201\n",
        "9876543201",
        "line 2: basic_auth_users.alice: must be a bcrypt hash ($2b$...) (value not shown)",
    ),
    (
        "plaintext-password",
        "basic_auth_users:\n  alice: S3CRET-w2\n",
        "S3CRET-w2",
        "line 2: basic_auth_users.alice: must be a bcrypt hash ($2b$...) (value not shown)",
    ),
    (
        "hash-as-list",
        "basic_auth_users:\n  alice: [S3CRET-w3]\n",
        "S3CRET-w3",
        "line 2: basic_auth_users.alice: must be a bcrypt hash ($2b$...) (value not shown)",
    ),
    (
        "user-and-hash-without-colon",
        "basic_auth_users: {alice $2b$04$S3CRETw4" + "a" * 45 + "}\n",
        "S3CRETw4",
        "line 1: basic_auth_users.<key not shown>: must be a bcrypt hash",
    ),
    (
        "hash-starting-with-star",
        "basic_auth_users:\n  alice: *S3CRET-w5\n",
        "S3CRET-w5",
        "invalid YAML: line 2, column 10: an alias (*name) that no anchor defines",
    ),
    (
        "users-as-one-string",
        "basic_auth_users: 'alice:S3CRET-w6'\n",
        "S3CRET-w6",
        "line 1: basic_auth_users: must map user names to bcrypt hashes",
    ),
    (
        "hash-aliased-into-a-header",
        "basic_auth_users:\n  alice: &h S3CRET-w7\n"
        "http_server_config:\n  headers: {X-Frame-Options: *h}\n",
        "S3CRET-w7",
        "line 4: http_server_config.headers.X-Frame-Options: must be one of deny, sameorigin"
        " (value not shown)",
    ),
]


def _ids(cases: list[tuple[str, str, str, str]]) -> list[str]:
    return [case[0] for case in cases]


def _problems(load: Any, path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(str(path))
    return [str(caught.value), *caught.value.problems]


@pytest.mark.parametrize(
    ("name", "text", "secret", "problem"), CONFIG_CASES, ids=_ids(CONFIG_CASES)
)
def test_config_problems_never_show_a_secret(
    name: str, text: str, secret: str, problem: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.yml"
    path.write_text(text, encoding="utf-8")
    message, *problems = _problems(load_config, path)
    assert secret not in message
    assert any(line.startswith(problem) for line in problems), problems


@pytest.mark.parametrize(("name", "text", "secret", "problem"), WEB_CASES, ids=_ids(WEB_CASES))
def test_web_config_problems_never_show_a_secret(
    name: str, text: str, secret: str, problem: str, tmp_path: Path
) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text, encoding="utf-8")
    message, *problems = _problems(load_web_config, path)
    assert secret not in message
    assert any(line.startswith(problem) for line in problems), problems


# --- the whole schema --------------------------------------------------------------------

FULL_CONFIG = """
scrape_interval: 15s
scrape_timeout: 10s
max_concurrency: 8
max_response_bytes: 8MiB
max_blockchains_per_node: 10
network_checks: {checkpoint_depth: 5, block_hash_fields: [hash]}
nodes:
  - name: a
    url: http://u:pw@127.0.0.1:7740/
    labels: {region: eu}
    blockchains: [c1]
    headers: {X-Api-Key: key}
    tls_config: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem, insecure_skip_verify: false}
  - name: b
    url: http://127.0.0.1:7741/
    basic_auth: {username: u, password: pw}
    authorization: {type: Bearer, credentials: token}
  - name: c
    url: http://127.0.0.1:7742/
    basic_auth: {username: u, password_file: pw.txt}
    authorization: {credentials_env: TOKEN_VARIABLE}
  - name: d
    url: http://127.0.0.1:7743/
    basic_auth: {username: u, password_env: PASSWORD_VARIABLE}
    authorization: {credentials_file: token.txt}
probe:
  allowed_targets: ['http://127\\.0\\.0\\.1:.*']
  max_in_flight: 4
  modules:
    m:
      blockchains: [c1]
      headers: {X-Api-Key: key}
      basic_auth: {username: u, password: pw}
      authorization: {type: Bearer, credentials: token}
      tls_config: {insecure_skip_verify: true}
watch:
  contracts: [{blockchain: c1, address: a1, name: n, state_keys: [a.b], nodes: [a]}]
  wallets: [{blockchain: c1, address: w1, name: w, nodes: [a]}]
"""
FULL_WEB_CONFIG = """
tls_server_config:
  cert_file: c.pem
  key_file: k.pem
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.pem
  min_version: TLS12
  max_version: TLS13
basic_auth_users: {alice: hash}
http_server_config: {headers: {X-Frame-Options: deny}}
"""
#: The leaves that hold a secret, by their last key (a header's by "headers.<name>").
SECRET_LEAVES = {"url", "username", "password", "type", "credentials", "headers.X-Api-Key"}
SECRET_WEB_LEAVES = {"basic_auth_users.alice"}
#: A key named like this holds a secret unless it names where one is kept (*_file, *_env).
SECRET_LOOKING = re.compile(r"pass|cred|token|secret|api.?key|user", re.IGNORECASE)
HOSTILE = (["S3CRET-list"], {"S3CRET-map": 1}, 9876543210, "S3CRET str\n")


def _leaves(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _leaves(value, (*path, index))
    else:
        yield path


def _leaf_name(path: tuple[str | int, ...]) -> str:
    keys = [part for part in path if isinstance(part, str)]
    return ".".join(keys[-2:]) if keys[-2:-1] in (["headers"], ["basic_auth_users"]) else keys[-1]


def _replaced(data: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[path[0]] = _replaced(data[path[0]], path[1:], value)  # type: ignore[index]
    return copy


@pytest.mark.parametrize(
    ("text", "reader", "secret_leaves"),
    [(FULL_CONFIG, _Reader, SECRET_LEAVES), (FULL_WEB_CONFIG, _WebReader, SECRET_WEB_LEAVES)],
    ids=["config", "web-config"],
)
def test_every_leaf_of_the_schema_is_classed(
    text: str, reader: type[_Reader | _WebReader], secret_leaves: set[str]
) -> None:
    """Each leaf of a document using every key is a secret exactly when it should be, and a
    key that looks like a credential is one unless it names a file or variable."""
    located = load_located(text)
    classed = reader(located)
    secret = {_leaf_name(path) for path in _leaves(located.data) if classed.is_secret(path)}
    assert secret == secret_leaves
    for path in _leaves(located.data):
        name = _leaf_name(path)
        if SECRET_LOOKING.search(name) and not name.endswith(("_file", "_env")):
            assert classed.is_secret(path), name


def test_no_hostile_value_in_any_leaf_is_shown() -> None:
    """Every leaf of the config in turn gets values a check must refuse: a list or mapping is
    never rendered anywhere, a number or a string with a newline never from a secret leaf."""
    data = yaml.safe_load(FULL_CONFIG)
    reader = _Reader(load_located(FULL_CONFIG))
    for path in _leaves(data):
        for value in HOSTILE:
            text = yaml.safe_dump(_replaced(data, path, value))
            try:
                parse_config(text)
            except ConfigError as error:
                message = str(error)
            else:
                continue  # accepted, e.g. a number as a label value: nothing to show
            if isinstance(value, list | dict) or reader.is_secret(path):
                assert "S3CRET" not in message and "9876543210" not in message, (path, message)


def test_reader_modules_quote_values_only_through_the_helpers() -> None:
    """A new problem that quotes a value must use Reader.quote or Reader.instead, which know
    the secret positions: no ``!r`` format and no ``repr(`` elsewhere in the readers."""
    modules = sorted((REPO / "exporter" / "config").glob("*.py"))
    assert len(modules) >= 6, "the config modules moved"
    for module in modules:
        source = module.read_text(encoding="utf-8")
        assert "!r}" not in source, module.name
        allowed = 2 if module.name == "schema.py" else 0  # the two in Reader.quote
        assert source.count("repr(") == allowed, module.name


# --- nothing but a ConfigError ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            NODE + URL + '    basic_auth: {username: u, password_file: "pw\\0.txt"}\n',
            "line 4: nodes[0].basic_auth.password_file: must not hold NUL or a lone surrogate",
        ),
        (
            NODE + URL + '    authorization: {credentials_env: "\\ud800"}\n',
            "line 4: nodes[0].authorization.credentials_env: must not hold NUL or a lone",
        ),
        (
            NODE + URL + '    headers: {X-Api-Key: "S3CRET\\udc00"}\n',
            "line 4: nodes[0].headers.X-Api-Key: must be a string on one line (value not shown)",
        ),
        (
            "max_response_bytes: " + "9" * 5000 + "MiB\n" + NODE + URL,
            "line 1: max_response_bytes: must be a positive size such as 8MiB",
        ),
        (
            "probe:\n  allowed_targets: ['a{99999999999}', '" + "(" * 2000 + "']\n",
            "line 2: probe.allowed_targets[0]: is a regular expression too large to compile",
        ),
        ("nodes: " + "[" * 5000 + "]" * 5000 + "\n", "invalid YAML: collections are nested"),
    ],
    ids=[
        "nul-in-a-file-name",
        "surrogate-in-a-variable",
        "surrogate-in-a-header",
        "huge-size",
        "huge-patterns",
        "deep-nesting",
    ],
)
def test_odd_values_are_problems_not_crashes(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert any(line.startswith(problem) for line in caught.value.problems), caught.value.problems


def test_an_unforeseen_exception_becomes_a_problem_without_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in a check must not print its exception's text (it might quote a value)."""

    def failing(self: _Reader, value: Any) -> None:
        raise ValueError("invalid literal for int(): 'S3CRET-bug'")

    monkeypatch.setattr(_Reader, "network_checks", failing)
    with pytest.raises(ConfigError) as caught:
        parse_config(NODE + URL)
    assert caught.value.problems == [
        "the check failed unexpectedly (ValueError); please report this as a bug"
    ]


# --- the command line, the log and the reload endpoint ----------------------------------

#: Node cases that stay valid YAML, for one file holding them all (every problem is listed).
_SCHEMA_NODE_CASES = [
    case
    for case in CONFIG_CASES
    if case[1].startswith(NODE) and "invalid YAML" not in case[3] and "*" not in case[1]
]


def _all_in_one() -> tuple[str, list[str], list[str]]:
    """One config holding every node case: its text, their secrets and their key paths."""
    text, secrets, paths = "nodes:\n", [], []
    for index, (_, case_text, secret, problem) in enumerate(_SCHEMA_NODE_CASES):
        node = case_text.removeprefix("nodes:\n").replace("name: a", f"name: n{index}")
        text += node
        secrets.append(secret)
        paths.append(problem.split(": ", 2)[1].replace("nodes[0]", f"nodes[{index}]"))
    return text, secrets, paths


def _web_all_in_one() -> tuple[str, list[str]]:
    cases = [
        case
        for case in WEB_CASES
        if case[1].startswith("basic_auth_users:\n  alice:")
        and case[1].count("\n") == 2
        and "*" not in case[1]
    ]
    assert len(cases) == 3
    text = "basic_auth_users:\n" + "".join(
        case[1].removeprefix("basic_auth_users:\n").replace("alice", f"user{index}")
        for index, case in enumerate(cases)
    )
    return text, [case[2] for case in cases]


def test_config_check_never_prints_a_secret(tmp_path: Path) -> None:
    config, secrets, paths = _all_in_one()
    web, web_secrets = _web_all_in_one()
    (tmp_path / "config.yml").write_text(config, encoding="utf-8")
    (tmp_path / "web.yml").write_text(web, encoding="utf-8")
    (tmp_path / "alias.yml").write_text(ALIAS_CASE[1], encoding="utf-8")
    for files, expected in (
        (("config.yml", "web.yml"), [*paths, "basic_auth_users.user0"]),
        (("alias.yml",), [ALIAS_PROBLEM]),
    ):
        flags = [f"--config.file={tmp_path / files[0]}"]
        flags += [f"--web.config.file={tmp_path / name}" for name in files[1:]]
        result = subprocess.run(
            [sys.executable, "-m", "exporter", "--config.check", *flags],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1
        for secret in (*secrets, *web_secrets, "S3CRET-31"):
            assert secret not in result.stdout + result.stderr
        for path in expected:
            assert path in result.stderr, (path, result.stderr)


class _Records(logging.Handler):
    """Keeps every record of the exporter's logger (whatever its propagation)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def exporter_log() -> Iterator[_Records]:
    logger = logging.getLogger("ledger_exporter")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_failed_reload_never_answers_or_logs_a_secret(
    tmp_path: Path, exporter_log: _Records
) -> None:
    config_file, web_file = tmp_path / "config.yml", tmp_path / "web.yml"
    good_config = f"nodes:\n  - name: a\n    url: {closed_port_url()}\n"
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    good_web = f"basic_auth_users:\n  admin: '{hashed}'\n"
    config_file.write_text(good_config, encoding="utf-8")
    web_file.write_text(good_web, encoding="utf-8")
    exporter = Exporter(load_config(str(config_file)), str(config_file))
    server = exporter.start("127.0.0.1:0", load_web_config(str(web_file)), str(web_file))
    reload_url = f"http://127.0.0.1:{server.port}/-/reload"
    config, secrets, paths = _all_in_one()
    web, web_secrets = _web_all_in_one()
    try:
        for config_text, web_text, expected in (
            (config, good_web, paths),
            (ALIAS_CASE[1], good_web, [ALIAS_PROBLEM]),
            (good_config, web + f"  admin: '{hashed}'\n", ["basic_auth_users.user0"]),
        ):
            config_file.write_text(config_text, encoding="utf-8")
            web_file.write_text(web_text, encoding="utf-8")
            token = base64.b64encode(b"admin:pw").decode()
            reloaded = fetch(
                reload_url, method="POST", headers={"Authorization": f"Basic {token}"}, timeout=30
            )
            status, body = reloaded.status, reloaded.body
            assert status == 500
            answer = body.decode()
            logged = " ".join(repr(record.__dict__) for record in exporter_log.records)
            assert "config reload failed" in logged
            for secret in (*secrets, *web_secrets, "S3CRET-31"):
                assert secret not in answer and secret not in logged
            for path in expected:
                assert path in answer and path in logged, (path, answer)
    finally:
        exporter.stop()
