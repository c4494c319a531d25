"""The documentation site (mkdocs.yml over docs/) builds with ``--strict``: a link to a page
that does not exist, or to an anchor a page does not have, fails the build, so the pages
cannot rot apart."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.testdata import REPO


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    command += ["--config-file", str(root / "mkdocs.yml")]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "metrics" / "index.html").is_file()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The site's sources alone, to break."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path


@pytest.mark.parametrize(
    ("link", "complaint"),
    [
        ("[a family](metrics.md#ledger_no_such_family)", "ledger_no_such_family"),
        ("[a page](no-such-page.md)", "no-such-page.md"),
        ("[a heading](#nowhere)", "nowhere"),
    ],
)
def test_a_broken_link_or_anchor_fails_the_build(copy: Path, link: str, complaint: str) -> None:
    (copy / "docs" / "broken.md").write_text(f"# Broken\n\nSee {link}.\n", encoding="utf-8")
    done = build(copy, copy / "site")
    assert done.returncode != 0, f"{link} passes --strict"
    assert complaint in done.stderr
