"""docs/configuration.md's flag and settings tables and config/example.yml's settings are
what `make docs` generates from the code (tools/render_docs.py): a default or a key's text
changed by hand in one of them, or in the code without `make docs`, fails here."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from exporter.cli import DEFAULTS
from exporter.config.dns_sd import DnsSdConfig
from exporter.config.exporter import _TOP_KEYS, Config, NetworkChecks
from exporter.config.keytable import Declared, bound_keys, declared
from exporter.config.probe_modules import ProbeConfig
from tests.support.testdata import REPO
from tools import render_docs


@pytest.mark.parametrize("path", [render_docs.CONFIGURATION, render_docs.EXAMPLE], ids=str)
def test_the_committed_file_is_what_the_code_generates(path: Path) -> None:
    committed = (REPO / path).read_text(encoding="utf-8")
    assert committed == render_docs.render_configuration()[path], f"{path}: run `make docs`"


def test_every_plain_key_and_flag_is_in_the_generated_tables() -> None:
    """The tables list what the code declares (the renderer misses no section)."""
    text = render_docs.render_configuration()[render_docs.CONFIGURATION]
    keys = [item.name for item in declared(Config)] + [item.name for _, item in bound_keys()]
    keys += [f"probe.{item.name}" for item in declared(ProbeConfig)]
    keys += [f"dns_sd_configs[].{item.name}" for item in declared(DnsSdConfig)]
    keys += ["network_checks.checkpoint_depth", "network_checks.block_hash_fields"]
    for key in keys:
        assert f"| `{key}` |" in text, key
    sections = {"network_checks", "nodes", "probe", "watch", "maintenance"}
    sections |= {"node_files", "dns_sd_configs"}
    assert set(keys) >= set(_TOP_KEYS) - sections
    assert "| `--web.max-connections` | `LEDGER_EXPORTER_WEB_MAX_CONNECTIONS` | `512` |" in text
    assert DEFAULTS["max_connections"] == 512


@pytest.mark.parametrize(
    ("path", "edit"),
    [
        (
            render_docs.CONFIGURATION,
            ("| `max_concurrency` | `512` |", "| `max_concurrency` | `64` |"),
        ),
        (
            render_docs.CONFIGURATION,
            (
                "| `--log.level` | `LEDGER_EXPORTER_LOG_LEVEL` | `info` |",
                "| `--log.level` | `LEDGER_EXPORTER_LOG_LEVEL` | `warn` |",
            ),
        ),
        (
            render_docs.EXAMPLE,
            ("Default: 512.\nmax_concurrency: 512", "Default: 64.\nmax_concurrency: 64"),
        ),
    ],
    ids=["settings", "flags", "example"],
)
def test_a_default_edited_by_hand_is_found_and_make_docs_restores_it(
    path: Path,
    edit: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``render_docs.py --check`` (make test) fails on the edited file, and ``make docs``
    writes the code's default back."""
    old, new = edit
    for relative in (render_docs.CONFIGURATION, render_docs.EXAMPLE):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / relative, tmp_path / relative)
    text = (tmp_path / path).read_text(encoding="utf-8")
    assert old in text
    (tmp_path / path).write_text(text.replace(old, new), encoding="utf-8")
    monkeypatch.setattr(render_docs, "ROOT", tmp_path)
    monkeypatch.setattr(render_docs, "TARGET", render_docs.CONFIGURATION)  # metrics.md aside
    monkeypatch.setattr(
        render_docs, "render", lambda root: (root / render_docs.TARGET).read_text("utf-8")
    )
    assert render_docs.main(["--check"]) == 1
    assert f"{path} differs from what the code generates" in capsys.readouterr().err
    assert render_docs.main([]) == 0
    assert (tmp_path / path).read_text(encoding="utf-8") == text


def test_missing_markers_are_an_error_that_names_the_block(tmp_path: Path) -> None:
    text = (REPO / render_docs.CONFIGURATION).read_text(encoding="utf-8")
    (tmp_path / "docs").mkdir()
    edited = text.replace("<!-- END GENERATED settings -->", "")
    (tmp_path / render_docs.CONFIGURATION).write_text(edited, encoding="utf-8")
    with pytest.raises(SystemExit, match="'settings' are missing"):
        render_docs.render_configuration(tmp_path)


#: A plain key's default stated in the prose of a page: "`key` (default 5", "**`key`**
#: (default 8 MiB)", "`key` per chain (default 100,", "`key` (8 by default)".
_PROSE_DEFAULT = re.compile(
    r"`(?P<key>[a-z_.]+)`\**(?: [a-z]+){0,3} \("
    r"(?:default `(?P<code>[^`]+)`|default (?P<value>[^,;:)`]+)|(?P<by>\S+) by default)"
)


def prose_defaults() -> list[tuple[str, str, str]]:
    """(page, key, stated default) for every default of a declared key a page states."""
    declared_keys = {key.rpartition(".")[2]: item for key, item in _every_declared()}
    found = []
    for page in sorted((REPO / "docs").glob("*.md")):
        text = " ".join(page.read_text(encoding="utf-8").split())
        for match in _PROSE_DEFAULT.finditer(text):
            key = match["key"].rpartition(".")[2]
            if key in declared_keys:
                found.append(
                    (page.name, match["key"], match["code"] or match["value"] or match["by"])
                )
    return found


def _every_declared() -> list[tuple[str, Declared]]:
    items = [(item.name, item) for item in declared(Config)]
    items += [(f"network_checks.{item.name}", item) for item in declared(NetworkChecks)]
    items += [(f"probe.{item.name}", item) for item in declared(ProbeConfig)]
    return items + [(item.name, item) for _, item in bound_keys()]


def test_the_scanner_finds_the_prose_defaults() -> None:
    pages = {page for page, _, _ in prose_defaults()}
    assert {"network-and-consensus.md", "performance.md", "security.md"} <= pages
    assert len(prose_defaults()) >= 10


@pytest.mark.parametrize(("page", "key", "stated"), prose_defaults())
def test_a_default_the_prose_states_is_the_code_s(page: str, key: str, stated: str) -> None:
    """Pages other than the reference may say a key's default in passing: it must be the
    declared one (written as the config writes it; `8 MiB` reads as `8MiB`)."""
    item = dict(_every_declared()).get(key)
    assert item is not None, f"{page}: `{key}` is not a declared key's full name"
    expected = item.key.check.show(item.default)
    same = stated.replace(" ", "") == expected.replace(" ", "")
    assert same, f"{page}: `{key}` is said to default to {stated}; it defaults to {expected}"
