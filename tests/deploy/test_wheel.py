"""Smoke test of the install the Dockerfile performs, without Docker and offline.

Builds the project's wheel from exactly the files the Dockerfile's builder copies,
installs it into a fresh pip-less venv with `pip --python ... --no-index --find-links`
as the Dockerfile does, and runs the installed console script. The wheelhouse's
dependency wheels are repacked from the development venv's installed distributions, so
no registry is contacted; what this does not prove is that PyPI resolves the same
versions during `docker build`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusApi
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def builder_copy_sources() -> list[str]:
    """Context paths the Dockerfile's builder stage copies (before the second FROM)."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    builder = text.split("\nFROM ", 2)[1]
    sources: list[str] = []
    for line in builder.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.extend(line.split()[1:-1])
    return sources


def dependency_closure(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    """Installed distributions that satisfy the requirements, transitively."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in found:
            continue
        distribution = importlib.metadata.distribution(requirement.name)
        assert requirement.specifier.contains(distribution.version, prereleases=True), (
            f"dev venv has {requirement.name} {distribution.version}, wheel wants {requirement}"
        )
        found[key] = distribution
        pending.extend(Requirement(text) for text in distribution.requires or [])
    return list(found.values())


def repack(distribution: importlib.metadata.Distribution, wheelhouse: Path) -> Path:
    """A wheel of an installed distribution: its site-packages files and dist-info."""
    site = Path(str(distribution.locate_file("")))
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"])
    wheel = wheelhouse / f"{name}-{distribution.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for entry in distribution.files or []:
            if entry.parts[0] == ".." or "__pycache__" in entry.parts:
                continue
            archive.write(site / entry, entry.as_posix())
    return wheel


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(arg) for arg in args], capture_output=True, text=True, check=False, cwd=cwd
    )


@pytest.fixture(scope="module")
def project_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built offline from exactly the files the Dockerfile copies."""
    work = tmp_path_factory.mktemp("image")
    context = work / "src"
    for source in builder_copy_sources():
        target = context / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / source, target)
    wheelhouse = work / "wheels"
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--no-cache-dir",
        "--wheel-dir",
        wheelhouse,
        context,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheelhouse.glob("ledger_exporter-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(project_wheel: Path) -> Path:
    """A fresh venv holding only the project's wheel and its runtime dependencies."""
    work = project_wheel.parent.parent
    wheelhouse = project_wheel.parent
    with zipfile.ZipFile(project_wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    for distribution in dependency_closure(requires):
        repack(distribution, wheelhouse)
    target = work / "venv"
    created = _run(sys.executable, "-m", "venv", "--without-pip", target)
    assert created.returncode == 0, created.stderr
    installed = _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        target / "bin" / "python",
        "install",
        "--no-cache-dir",
        "--no-index",
        "--find-links",
        wheelhouse,
        project_wheel,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return target


def _wheel_metadata(wheel: Path) -> list[tuple[str, str]]:
    """The wheel's METADATA headers, in order, as (name, value) pairs."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    headers = text.split("\n\n", 1)[0]
    pairs = (line.partition(": ") for line in headers.splitlines())
    return [(name, value) for name, _, value in pairs]


def test_the_wheel_ships_the_apache_license_text(project_wheel: Path) -> None:
    """Apache-2.0 requires its text to travel with the work (section 4a)."""
    license_text = (REPO / "LICENSE").read_bytes()
    # The unmodified https://www.apache.org/licenses/LICENSE-2.0.txt
    assert hashlib.sha256(license_text).hexdigest() == (
        "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
    )
    with zipfile.ZipFile(project_wheel) as archive:
        (shipped,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(shipped) == license_text
    metadata = _wheel_metadata(project_wheel)
    assert ("License-Expression", "Apache-2.0") in metadata
    assert ("License-File", "LICENSE") in metadata


def test_both_packages_are_marked_typed(project_wheel: Path, venv: Path) -> None:
    """PEP 561: the simulator is a documented Python API, the exporter is typed throughout."""
    with zipfile.ZipFile(project_wheel) as archive:
        names = set(archive.namelist())
    assert {"exporter/py.typed", "ledger_simulator/py.typed"} <= names
    assert ("Classifier", "Typing :: Typed") in _wheel_metadata(project_wheel)
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "exporter" / "py.typed").is_file()
    assert (site / "ledger_simulator" / "py.typed").is_file()


def test_project_urls_share_the_runbooks_repository(project_wheel: Path) -> None:
    """The alerts' runbook_url and the package's URLs name the same repository."""
    mixin = (REPO / "mixin" / "config.libsonnet").read_text(encoding="utf-8")
    match = re.search(r"^\s*runbookURLPattern: '(https://github\.com/[^/]+/[^/]+)/", mixin, re.M)
    assert match, "no runbookURLPattern default in mixin/config.libsonnet"
    repository = match.group(1)
    metadata = _wheel_metadata(project_wheel)
    urls = dict(value.split(", ", 1) for name, value in metadata if name == "Project-URL")
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}
    for label, url in urls.items():
        assert url == repository or url.startswith(repository + "/"), (label, url)
    classifiers = [value for name, value in metadata if name == "Classifier"]
    # PEP 639: the SPDX expression replaces license classifiers (setuptools refuses both).
    assert not [c for c in classifiers if c.startswith("License ::")]
    for expected in (
        "Intended Audience :: System Administrators",
        "Topic :: System :: Monitoring",
        "Programming Language :: Python :: 3.11",
    ):
        assert expected in classifiers


def test_the_wheel_holds_the_package_not_the_repository(venv: Path, tmp_path: Path) -> None:
    located = _run(
        venv / "bin" / "python", "-c", "import exporter; print(exporter.__file__)", cwd=tmp_path
    )
    assert located.returncode == 0, located.stderr
    assert Path(located.stdout.strip()).is_relative_to(venv)


def test_the_status_page_reads_its_thresholds_from_the_installed_package(
    venv: Path, tmp_path: Path
) -> None:
    """exporter/rules/thresholds.json (rendered by `make mixin`) ships in the wheel, and the
    installed package reads it, far from the source tree."""
    code = (
        "from dataclasses import asdict; from exporter.web.alert_thresholds import SHIPPED; "
        "import json; print(json.dumps(asdict(SHIPPED.thresholds)), len(SHIPPED.severities))"
    )
    result = _run(venv / "bin" / "python", "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    thresholds, severities = result.stdout.rsplit(" ", 1)
    rendered = json.loads((REPO / "exporter" / "rules" / "thresholds.json").read_text())
    assert (
        json.loads(thresholds)["blocks_behind_threshold"]
        == (rendered["thresholds"]["blocksBehindThreshold"])
    )
    assert len(json.loads(thresholds)) == len(rendered["thresholds"])
    assert int(severities) == len(rendered["severities"])


def test_version(venv: Path, tmp_path: Path) -> None:
    result = _run(venv / "bin" / "ledger-exporter", "--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    version = importlib.metadata.version("ledger-exporter")
    assert version in result.stdout + result.stderr


def _configmap_config(tmp_path: Path) -> Path:
    configmap = yaml.safe_load((REPO / "deploy/kubernetes/configmap.yaml").read_text())
    path = tmp_path / "config.yml"
    path.write_text(configmap["data"]["config.yml"], encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "config",
    ["config/example.yml", "config/probe.yml", "deploy/compose/exporter.yml", "configmap"],
)
def test_shipped_configs_pass_config_check(venv: Path, tmp_path: Path, config: str) -> None:
    """The image's config, the compose stack's and the Kubernetes ConfigMap's."""
    path = _configmap_config(tmp_path) if config == "configmap" else REPO / config
    result = _run(
        venv / "bin" / "ledger-exporter", "--config.check", "--config.file", path, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_config_check_rejects_an_unknown_key(venv: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("scrape_interval: 15s\nnodez: []\n", encoding="utf-8")
    result = _run(
        venv / "bin" / "ledger-exporter", "--config.check", "--config.file", bad, cwd=tmp_path
    )
    assert result.returncode == 1
    assert "nodez" in result.stdout + result.stderr


def test_the_wheel_holds_the_simulator_for_the_simulate_command(venv: Path, tmp_path: Path) -> None:
    """The compose stack runs `ledger-exporter simulate` from the image: the wheel needs it."""
    result = _run(venv / "bin" / "ledger-exporter", "simulate", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    located = _run(
        venv / "bin" / "python",
        "-c",
        "import ledger_simulator; print(ledger_simulator.__file__)",
        cwd=tmp_path,
    )
    assert located.returncode == 0, located.stderr
    assert Path(located.stdout.strip()).is_relative_to(venv)


def test_the_wheel_holds_the_rules_the_demo_loads(venv: Path, tmp_path: Path) -> None:
    """`ledger-exporter demo --prometheus` from the installed wheel, far from the source tree,
    starts Prometheus with the project's rule groups (issue 13: it used to load none)."""
    require_program("prometheus")
    expected = sorted(
        group["name"]
        for name in ("rules.yml", "alerts.yml")
        for group in yaml.safe_load((REPO / "deploy/prometheus" / name).read_text())["groups"]
    )
    port = free_port()
    process = subprocess.Popen(
        [
            venv / "bin" / "ledger-exporter",
            "demo",
            f"--web.listen-address=127.0.0.1:{free_port()}",
            "--prometheus",
            f"--prometheus.listen-address=127.0.0.1:{port}",
        ],
        cwd=tmp_path,  # far from the source tree's deploy/
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        api = PrometheusApi(f"http://127.0.0.1:{port}/")

        def prometheus_ready() -> bool:
            assert process.poll() is None, "the demo exited"
            return api.ready()

        wait_until(prometheus_ready, timeout=60, interval=0.2, message="no Prometheus")
        assert sorted(group["name"] for group in api.rules()) == expected
    finally:
        stop_process(process)
