"""Every link of the README, the CHANGELOG and docs/*.md points into the repository, at a
file it has and, for a page, at a heading that page has: the docs cite nothing a clone
lacks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.testdata import REPO

PAGES = (REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")))
#: The one place outside the repository links may point: the project's public home.
PUBLIC = ("https://github.com/ledger-exporter/ledger-exporter",)
#: Other projects' public documentation the pages cite by name.
PROJECTS = (
    "https://prometheus.io/docs/",
    "https://monitoring.mixins.dev/",
    "https://github.com/monitoring-mixins/mixtool",
    "https://github.com/grafana/dashboard-linter",
    "https://keepachangelog.com/",
    "https://semver.org/",
)


def links(page: Path) -> list[str]:
    """The targets of a page's Markdown links and images, outside code blocks and spans."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"<(https?://[^>]+)>", text)


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub and MkDocs make them."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {
        re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower().replace(" ", "-")
        for heading in re.findall(r"^#{1,6} (.+)$", text, re.M)
    }


def test_the_pages_have_links() -> None:
    """The scanner finds links (a broken pattern must not pass silently)."""
    assert len(links(REPO / "README.md")) > 10
    assert "configuration.md#the-state-file" in links(REPO / "docs" / "deployment.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves_in_the_repository(page: Path) -> None:
    problems = []
    for target in links(page):
        if target.startswith(("http://127.0.0.1", "http://localhost")):
            continue  # what the demo serves on this machine
        if target.startswith(("http://", "https://")):
            if not target.startswith(PUBLIC + PROJECTS):
                problems.append(f"{target}: outside the repository and the projects cited")
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            problems.append(f"{target}: no such file in the repository")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading with that anchor")
    assert not problems, f"{page.relative_to(REPO)}:\n" + "\n".join(problems)
