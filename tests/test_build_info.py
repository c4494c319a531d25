"""Exporter-toolkit conventions of issue 20: ``ledger_exporter_build_info`` with the build's
revision and branch, a Prometheus-style ``--version``, and
``ledger_exporter_config_last_reload_success_timestamp_seconds``.

Where revision and branch come from is checked at each end: the wheel build writes them into
the package (from ``git`` in a checkout, or from the variables the Dockerfile passes), and
the running exporter serves them (from that file, or from the same variables at run time).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app import Exporter
from exporter.build import (
    BuildInfo,
    go_platform,
    parse_build_file,
    read_build_info,
)
from exporter.config.exporter import Config, load_config
from exporter.config.nodes import NodeConfig
from exporter.model.snapshot import Snapshot
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.http import wait_for_text
from tests.support.ports import free_port
from tests.support.testdata import REPO

PYTHON = platform.python_version()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("revision=abc123\nbranch=main\n", {"revision": "abc123", "branch": "main"}),
        ("# a comment\nrevision = abc \n", {"revision": "abc"}),
        ("user=ci@b\ndate=20240102-03:04:05\n", {"user": "ci@b", "date": "20240102-03:04:05"}),
        ("revision=\n", {"revision": ""}),
        ("unknown=1\nrevision\nbranch=a=b\n", {"branch": "a=b"}),
        ("revision=a\x00b\x1bc\n", {"revision": "abc"}),
        ("branch=" + "x" * 500, {"branch": "x" * 200}),
    ],
    ids=["empty", "both", "spaces", "user-date", "empty-value", "odd-lines", "controls", "long"],
)  # fmt: skip
def test_build_file_lines(text: str, expected: dict[str, str]) -> None:
    assert parse_build_file(text) == expected


@pytest.mark.parametrize(
    ("file_text", "environ", "revision", "branch"),
    [
        (None, {}, "", ""),
        ("revision=r1\nbranch=b1\n", {}, "r1", "b1"),
        ("revision=r1\nbranch=b1\n", {"LEDGER_EXPORTER_BUILD_REVISION": "r2"}, "r2", "b1"),
        ("revision=r1\n", {"LEDGER_EXPORTER_BUILD_REVISION": ""}, "", ""),
        (None, {"LEDGER_EXPORTER_BUILD_BRANCH": "release-1.0"}, "", "release-1.0"),
    ],
    ids=["no-file", "file", "env-wins", "env-empty-wins", "env-only"],
)
def test_revision_and_branch_from_the_file_and_the_environment(
    tmp_path: Path, file_text: str | None, environ: dict[str, str], revision: str, branch: str
) -> None:
    path = tmp_path / "BUILD_INFO"
    if file_text is not None:
        path.write_text(file_text)
    build = read_build_info(environ, path)
    assert (build.revision, build.branch) == (revision, branch)
    assert build.python_version == PYTHON
    assert dict(build.labels()) == {
        "version": build.version,
        "revision": revision,
        "branch": branch,
        "python_version": PYTHON,
    }


@pytest.mark.parametrize(
    ("system", "machine", "expected"),
    [
        ("linux", "x86_64", "linux/amd64"),
        ("linux", "aarch64", "linux/arm64"),
        ("linux", "armv7l", "linux/arm"),
        ("darwin", "arm64", "darwin/arm64"),
        ("linux", "i686", "linux/386"),
        ("linux", "mips64", "linux/mips64"),
        ("linux", "", "linux/unknown"),
    ],
)
def test_platform_as_go_names_it(system: str, machine: str, expected: str) -> None:
    assert go_platform(system, machine) == expected


def test_version_text_as_prometheus_prints_it() -> None:
    full = BuildInfo(
        "1.2.3", "abc", "main", "ci@builder", "20240102-03:04:05", "3.11.9", "linux/amd64"
    )
    assert full.version_text().splitlines() == [
        "ledger-exporter, version 1.2.3 (branch: main, revision: abc)",
        "  build user:       ci@builder",
        "  build date:       20240102-03:04:05",
        "  python version:   3.11.9",
        "  platform:         linux/amd64",
    ]
    bare = BuildInfo("1.2.3", python_version="3.11.9", platform="linux/arm64")
    assert bare.version_text().splitlines() == [
        "ledger-exporter, version 1.2.3 (branch: unknown, revision: unknown)",
        "  python version:   3.11.9",
        "  platform:         linux/arm64",
    ]  # fmt: skip


def _clean_environment(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_EXPORTER_")}
    return {**clean, **extra}


def test_version_flag_prints_the_build() -> None:
    env = _clean_environment(
        LEDGER_EXPORTER_BUILD_REVISION="0123abcd", LEDGER_EXPORTER_BUILD_BRANCH="release-1"
    )
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ledger-exporter, version ")
    assert lines[0].endswith(" (branch: release-1, revision: 0123abcd)")
    assert f"  python version:   {PYTHON}" in lines
    assert lines[-1] == f"  platform:         {go_platform()}"


# --- the wheel build records revision and branch ----------------------------------------

#: What a checkout needs to build the wheel (the Dockerfile's builder copies the same).
BUILD_SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "LICENSE",
    "exporter",
    "ledger_simulator",
)


def _source_copy(target: Path) -> Path:
    target.mkdir(parents=True)
    for name in BUILD_SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target / name)
    (target / "exporter" / "BUILD_INFO").unlink(missing_ok=True)
    return target


def _built_build_file(source: Path, wheels: Path, **environ: str) -> dict[str, str]:
    """Build the wheel of ``source`` offline; the BUILD_INFO it holds, parsed."""
    env = _clean_environment(**environ)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--no-cache-dir", "--quiet", "--wheel-dir", str(wheels), str(source)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("ledger_exporter-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return parse_build_file(archive.read("exporter/BUILD_INFO").decode())


def _git(cwd: Path, *args: str) -> str:
    env = _clean_environment(
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
    )  # fmt: skip
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60, check=True
    )
    return result.stdout.strip()


@pytest.mark.integration
def test_a_wheel_built_from_a_git_checkout_records_its_revision_and_branch(
    tmp_path: Path,
) -> None:
    source = _source_copy(tmp_path / "checkout")
    _git(source, "init", "--quiet", "--initial-branch=feature-x")
    _git(source, "add", "--all")
    _git(source, "commit", "--quiet", "--message=build me")
    recorded = _built_build_file(source, tmp_path / "wheels", SOURCE_DATE_EPOCH="1700000000")
    assert recorded["revision"] == _git(source, "rev-parse", "HEAD")
    assert len(recorded["revision"]) == 40
    assert recorded["branch"] == "feature-x"
    assert recorded["date"] == "20231114-22:13:20"  # SOURCE_DATE_EPOCH, as reproducible builds set
    assert "@" in recorded["user"]


@pytest.mark.integration
def test_a_wheel_built_without_git_takes_the_build_arguments(tmp_path: Path) -> None:
    """As in the Dockerfile's builder: no .git, the revision and branch passed in."""
    source = _source_copy(tmp_path / "context")
    recorded = _built_build_file(
        source,
        tmp_path / "wheels",
        LEDGER_EXPORTER_BUILD_REVISION="feedface",
        LEDGER_EXPORTER_BUILD_BRANCH="release-2",
        LEDGER_EXPORTER_BUILD_USER="",
    )
    assert (recorded["revision"], recorded["branch"], recorded["user"]) == (
        "feedface",
        "release-2",
        "",
    )
    bare = _built_build_file(_source_copy(tmp_path / "bare"), tmp_path / "wheels-bare")
    assert (bare["revision"], bare["branch"]) == ("", "")  # unknown: empty, never guessed


# --- what the running exporter serves ------------------------------------------------------


def _samples(body: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


@pytest.mark.integration
def test_the_running_exporter_serves_the_build_it_was_given(
    fake_nodes: FakeNodes, tmp_path: Path
) -> None:
    node = fake_nodes.start()
    node.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    config = tmp_path / "config.yml"
    config.write_text(
        f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes: [{{name: n, url: '{node.url}'}}]\n"
    )
    env = _clean_environment(
        LEDGER_EXPORTER_BUILD_REVISION="0123abcd", LEDGER_EXPORTER_BUILD_BRANCH="main"
    )
    port = free_port()
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", f"--config.file={config}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip
    try:
        body = wait_for_text(f"http://127.0.0.1:{port}/metrics", "ledger_node_up")
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    samples = _samples(body)
    (labels, value), *_ = samples["ledger_exporter_build_info"]
    assert value == 1.0 and len(samples["ledger_exporter_build_info"]) == 1
    assert labels == {
        "version": labels["version"],
        "revision": "0123abcd",
        "branch": "main",
        "python_version": PYTHON,
    }
    ((_, loaded_at),) = samples["ledger_exporter_config_last_reload_success_timestamp_seconds"]
    assert started - 1 <= loaded_at <= time.time()
    assert "revision=0123abcd branch=main" in stderr  # and the start-up line says which build


# --- the reload-success timestamp ----------------------------------------------------------


class StepClock:
    """A wall clock that moves only when told (the exporter's clock parameter)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _reload_samples(exporter: Exporter) -> tuple[float, float]:
    """(last_reload_successful, last_reload_success_timestamp_seconds) as served now."""
    samples = _samples(exporter.exposition().body(False, False).decode())
    ((_, ok),) = samples["ledger_exporter_config_last_reload_successful"]
    ((_, at),) = samples["ledger_exporter_config_last_reload_success_timestamp_seconds"]
    return ok, at


def test_the_reload_success_timestamp_is_set_at_start_and_by_each_good_reload(
    tmp_path: Path,
) -> None:
    """As Prometheus's prometheus_config_last_reload_success_timestamp_seconds: set when the
    config is first loaded, moved by each successful reload (shown at once, before the next
    cycle), kept by a failed one."""
    config_file = tmp_path / "config.yml"
    config_file.write_text("scrape_interval: 1h\nnodes: [{name: n, url: 'http://127.0.0.1:9/'}]\n")
    clock = StepClock()
    exporter = Exporter(load_config(str(config_file)), str(config_file), clock=clock)
    assert _reload_samples(exporter) == (1.0, 1_700_000_000.0)
    clock.now += 60
    exporter.reload()
    assert _reload_samples(exporter) == (1.0, 1_700_000_060.0)
    clock.now += 60
    config_file.write_text("scrape_interval: 1x\n")
    with pytest.raises(Exception, match="scrape_interval"):
        exporter.reload()
    assert _reload_samples(exporter) == (0.0, 1_700_000_060.0)
    clock.now += 60
    config_file.write_text("scrape_interval: 1h\nnodes: [{name: m, url: 'http://127.0.0.1:9/'}]\n")
    exporter.reload()
    assert _reload_samples(exporter) == (1.0, 1_700_000_180.0)


def test_a_published_cycle_keeps_the_reload_state() -> None:
    """A snapshot published after a reload carries the reload's time (the writer renders the
    state the exporter holds, not the poll's)."""
    clock = StepClock()
    config = Config(nodes=(NodeConfig("n", "http://127.0.0.1:9/"),), scrape_interval=3600.0)
    exporter = Exporter(config, clock=clock)
    exporter._publish(Snapshot(completed_at=clock.now))  # as the poll thread does
    assert _reload_samples(exporter) == (1.0, 1_700_000_000.0)
