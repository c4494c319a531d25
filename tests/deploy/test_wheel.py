"""The release's Python artifacts, built as the release workflow builds them, and the install
the Dockerfile performs, without Docker and offline.

`python -m build` makes the sdist and the wheel from it (once per module), from exactly the
files the Dockerfile's builder copies, as the Dockerfile's builder does; `twine check` reads
both as PyPI would. The wheel is installed into a fresh pip-less venv with `pip --python ...
--no-index --find-links` as the Dockerfile does, and its console script runs from a temporary
directory, far from the checkout. The wheelhouse's dependency wheels are repacked from the
development venv's installed distributions, so no registry is contacted; what this does not
prove is that PyPI resolves the same versions during `docker build`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from exporter import __version__
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
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, by `python -m build` (offline: no build
    isolation) from exactly the files the Dockerfile's builder copies."""
    work = tmp_path_factory.mktemp("image")
    context = work / "src"
    for source in builder_copy_sources():
        target = context / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / source, target)
    out = work / "wheels"
    built = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, context)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def project_wheel(dist: Path) -> Path:
    """The project's wheel, as the image and PyPI get it."""
    (wheel,) = dist.glob("ledger_exporter-*.whl")
    return wheel


@pytest.fixture(scope="module")
def sdist(dist: Path) -> Path:
    (archive,) = dist.glob("ledger_exporter-*.tar.gz")
    return archive


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
    read = json.loads(thresholds)
    assert read.pop("time_scale") == 1.0  # the shipped rules' own time: only tests scale it
    assert len(read) == len(rendered["thresholds"])
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


# --- the release's artifacts ---------------------------------------------------------------


def test_twine_check_passes_both_artifacts(dist: Path) -> None:
    """What PyPI would refuse or render badly (the README as the long description)."""
    checked = _run(
        sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.glob("ledger_exporter-*"))
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def _package_files() -> set[str]:
    """What the wheel must hold besides its dist-info: every module of both packages from the
    checkout, the rendered rules and thresholds, the PEP 561 markers and the build's record."""
    wanted = {"exporter/BUILD_INFO", "exporter/py.typed", "ledger_simulator/py.typed"}
    for package in ("exporter", "ledger_simulator"):
        wanted |= {
            path.relative_to(REPO).as_posix()
            for path in (REPO / package).rglob("*.py")
            if "__pycache__" not in path.parts
        }
    wanted |= {p.relative_to(REPO).as_posix() for p in (REPO / "exporter/rules").glob("*.yml")}
    wanted.add("exporter/rules/thresholds.json")
    return wanted


def test_the_wheel_holds_exactly_the_packages(project_wheel: Path) -> None:
    """Every module, the demo's rules, the status page's thresholds, py.typed; nothing from
    tests/ or the repository's other files (a file missing here would only show at a user's
    `pip install`)."""
    with zipfile.ZipFile(project_wheel) as archive:
        names = set(archive.namelist())
    dist_info = {name for name in names if name.split("/", 1)[0].endswith(".dist-info")}
    assert names - dist_info == _package_files()
    assert {"rules.yml", "alerts.yml"} <= {
        Path(name).name for name in names if name.startswith("exporter/rules/")
    }
    assert not [name for name in names if name.startswith("tests/")]


def test_the_sdist_rebuilds_the_wheel(sdist: Path) -> None:
    """The wheel above was built from this sdist (python -m build's order), so it holds what
    a rebuild from PyPI's source needs; and no test or checkout file rides along."""
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "PKG-INFO"):
        assert needed in names
    assert _package_files() - {"exporter/BUILD_INFO"} <= names
    assert not [name for name in names if name.startswith(("tests/", ".git", "deploy/"))]


def test_the_installed_rules_and_thresholds_are_the_rendered_ones(venv: Path) -> None:
    site = next((venv / "lib").glob("python3*/site-packages"))
    shipped = sorted(p.name for p in (REPO / "exporter/rules").iterdir() if p.suffix != ".py")
    assert shipped, "no rendered rules in exporter/rules/"
    for name in shipped:
        assert (site / "exporter/rules" / name).read_bytes() == (
            REPO / "exporter/rules" / name
        ).read_bytes(), name


def test_the_demo_command_is_installed(venv: Path, tmp_path: Path) -> None:
    result = _run(venv / "bin" / "ledger-exporter", "demo", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--prometheus" in result.stdout


def _release_workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((REPO / ".github/workflows/release.yml").read_text())
    return loaded


def test_one_version_everywhere(
    project_wheel: Path, sdist: Path, venv: Path, tmp_path: Path
) -> None:
    """exporter/__init__.py's __version__ is the project's one version: the wheel's and the
    sdist's (pyproject.toml reads it), ledger_exporter_build_info's and --version's in the
    installed package, the chart's version and appVersion (and so the image tag its
    templates default to), and the release workflow refuses a tag that is not v<it>, from
    which it names the image, the chart and the release."""
    version = __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "a release version is MAJOR.MINOR.PATCH"
    assert project_wheel.name.startswith(f"ledger_exporter-{version}-")
    assert sdist.name == f"ledger_exporter-{version}.tar.gz"
    assert ("Version", version) in _wheel_metadata(project_wheel)
    code = "from exporter.build import this_build; print(dict(this_build().labels())['version'])"
    labelled = _run(venv / "bin" / "python", "-c", code, cwd=tmp_path)
    assert labelled.returncode == 0, labelled.stderr
    assert labelled.stdout.strip() == version
    printed = _run(venv / "bin" / "ledger-exporter", "--version", cwd=tmp_path)
    assert f"ledger-exporter, version {version} " in printed.stdout + printed.stderr
    chart = yaml.safe_load((REPO / "deploy/helm/ledger-exporter/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (version, version)
    # Kustomize (both kustomizations) names the image the chart defaults to, at the version;
    # the workloads leave name and tag to it, so no other version is written there.
    values = yaml.safe_load((REPO / "deploy/helm/ledger-exporter/values.yaml").read_text())
    published = f"{values['image']['registry']}/{values['image']['repository']}"
    for kustomize_dir, workload in (
        (REPO / "deploy/kubernetes", "statefulset.yaml"),
        (REPO / "deploy/kubernetes/probe", "deployment.yaml"),
    ):
        kustomization = yaml.safe_load((kustomize_dir / "kustomization.yaml").read_text())
        assert kustomization["images"] == [
            {"name": "ledger-exporter", "newName": published, "newTag": version}
        ], kustomize_dir
        deployment = yaml.safe_load((kustomize_dir / workload).read_text())
        images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
        assert images == ["ledger-exporter"], kustomize_dir
    # The workflow: the tag checked against the package, then the one VERSION everywhere.
    workflow = _release_workflow()
    assert workflow[True]["push"]["tags"] == ["v*"]  # PyYAML reads `on:` as True
    steps = workflow["jobs"]["version"]["steps"]
    check = next(step["run"] for step in steps if step.get("id") == "version")
    assert "exporter/__init__.py" in check
    assert '"${GITHUB_REF_NAME}" != "v${version}"' in check
    assert "exit 1" in check
    text = (REPO / ".github/workflows/release.yml").read_text()
    assert "VERSION=${{ needs.version.outputs.version }}" in text
    assert ":${{ needs.version.outputs.version }}" in text  # the image tag
    # and a tag of another version fails that step
    script = tmp_path / "check.sh"
    script.write_text(check, encoding="utf-8")
    for ref, expected in ((f"v{version}", 0), ("v9.9.9", 1)):
        ran = subprocess.run(
            ["bash", "-e", str(script)],
            cwd=REPO,
            env={
                "GITHUB_REF_NAME": ref,
                "GITHUB_OUTPUT": str(tmp_path / "out"),
                "PATH": "/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == expected, (ref, ran.stdout + ran.stderr)
    assert f"version={version}" in (tmp_path / "out").read_text()
