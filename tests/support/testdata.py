"""Where the repository and the tests' data are, and what a testdata file says of itself."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTDATA = REPO / "tests" / "testdata"

ERROR_PREFIX = "# error: "


def expected_problems(path: Path) -> list[str]:
    """The ``# error:`` lines at the top of an invalid-*.yml testdata file, in order."""
    problems = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith(ERROR_PREFIX):
            break
        problems.append(line.removeprefix(ERROR_PREFIX))
    return problems
