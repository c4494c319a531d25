"""The chart as the release publishes it: `helm package`, then `helm lint` of the packaged
archive (what `helm push oci://...` uploads and `helm install oci://...` fetches), with the
project's version and the published image as its defaults."""

from __future__ import annotations

import tarfile
from pathlib import Path

import yaml

from exporter import __version__
from tests.support.deploy import run_tool
from tests.support.testdata import REPO

CHART = REPO / "deploy" / "helm" / "ledger-exporter"
PUBLISHED_IMAGE = "ghcr.io/ledger-exporter/ledger-exporter"


def _package(destination: Path) -> Path:
    """`helm package` as the release workflow runs it, the version given explicitly."""
    packaged = run_tool(
        "helm",
        "package",
        str(CHART),
        "--version",
        __version__,
        "--app-version",
        __version__,
        "--destination",
        str(destination),
    )
    assert packaged.returncode == 0, packaged.stdout + packaged.stderr
    archive = destination / f"ledger-exporter-{__version__}.tgz"
    assert archive.is_file(), sorted(destination.iterdir())
    return archive


def test_the_packaged_chart_lints_and_names_the_published_image(tmp_path: Path) -> None:
    archive = _package(tmp_path)
    linted = run_tool("helm", "lint", "--strict", str(archive))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    with tarfile.open(archive) as packaged:
        names = set(packaged.getnames())
        chart = yaml.safe_load(packaged.extractfile("ledger-exporter/Chart.yaml").read())  # type: ignore[union-attr]
        values = yaml.safe_load(packaged.extractfile("ledger-exporter/values.yaml").read())  # type: ignore[union-attr]
    # The package's version and appVersion are the committed ones: the workflow's flags
    # change nothing, so what `make test` lints is what the release pushes.
    assert (chart["version"], chart["appVersion"]) == (__version__, __version__)
    image = values["image"]
    assert f"{image['registry']}/{image['repository']}" == PUBLISHED_IMAGE
    assert image["tag"] == "", "the tag defaults to appVersion: the release's image"
    for needed in ("values.schema.json", "README.md", "templates/deployment.yaml"):
        assert f"ledger-exporter/{needed}" in names
    assert not [name for name in names if "/ci/" in name], "test values stay out (.helmignore)"
    rendered = run_tool("helm", "template", "ledger", str(archive))
    assert rendered.returncode == 0, rendered.stderr
    assert f'image: "{PUBLISHED_IMAGE}:{__version__}"' in rendered.stdout


def test_a_broken_package_fails_the_lint(tmp_path: Path) -> None:
    """The lint of the package can fail: a chart whose template does not parse."""
    archive = _package(tmp_path)
    broken = tmp_path / "broken"
    with tarfile.open(archive) as packaged:
        packaged.extractall(broken, filter="data")
    (broken / "ledger-exporter/templates/broken.yaml").write_text("{{ if }}\n", encoding="utf-8")
    linted = run_tool("helm", "lint", "--strict", str(broken / "ledger-exporter"))
    assert linted.returncode != 0
