"""Grafana's JSON Schemas for the dashboard checks, generated from Grafana's npm package.

Grafana publishes the types of its dashboard model and of each core panel plugin's options
(generated from its CUE kinds) as the npm package ``@grafana/schema``; this tool installs the
version pinned in ``tools/grafana-schema/package-lock.json`` with ``npm ci`` into a git-ignored
cache (``.cache/grafana-schema/``) and turns the types the tests need into JSON Schema (draft 7)
with the pinned ``ts-json-schema-generator``. Nothing of Grafana's is kept in the repository.
``make grafana-schema`` runs it; ``tests/monitoring/test_dashboards_schema.py`` reads what it
writes.
It first checks ``node --version`` against the ``engines.node`` ranges the lock pins (the
generator's dependencies need Node 20 or 22+; Debian 12's nodejs is 18), since ``npm ci`` only
warns about them and the failure would come later and obscure.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "tools" / "grafana-schema"
CACHE = ROOT / ".cache" / "grafana-schema"
PACKAGE = CACHE / "node_modules" / "@grafana" / "schema"
#: Written last: its presence says every schema below was generated from the pinned package.
STAMP = CACHE / "generated.json"


class Source(NamedTuple):
    """One file of ``@grafana/schema`` (under ``dist/esm/``) and the types taken from it."""

    path: str
    types: str  # ``*``: every type of the file


#: Schema name -> its source. The panel plugins are the core ones the shipped dashboards use
#: or may use; ``common`` gives ``DataQuery``, the part of a panel target every data source
#: shares (the Prometheus query's own fields are published only in ``@grafana/prometheus``,
#: whose types need React and ``@grafana/data`` to resolve).
SOURCES = {
    "dashboard": Source("raw/dashboard/x/dashboard_types.gen.d.ts", "*"),
    "timeseries": Source(
        "raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen.d.ts", "*"
    ),
    "stat": Source("raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen.d.ts", "*"),
    "table": Source("raw/composable/table/panelcfg/x/TablePanelCfg_types.gen.d.ts", "*"),
    "statetimeline": Source(
        "raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen.d.ts", "*"
    ),
    "text": Source("raw/composable/text/panelcfg/x/TextPanelCfg_types.gen.d.ts", "*"),
    "gauge": Source("raw/composable/gauge/panelcfg/x/GaugePanelCfg_types.gen.d.ts", "*"),
    "bargauge": Source("raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen.d.ts", "*"),
    "common": Source("common/common.gen.d.ts", "DataQuery"),
}


def schema_path(name: str) -> Path:
    return CACHE / f"{name}.schema.json"


def load(name: str) -> dict[str, Any]:
    """The generated schema ``name``; a clear message when ``make grafana-schema`` has not run."""
    if not STAMP.is_file():
        raise FileNotFoundError(
            f"{STAMP} missing: run `make grafana-schema` (it installs @grafana/schema from npm "
            "and generates the JSON Schemas the dashboard checks read)"
        )
    schema: dict[str, Any] = json.loads(schema_path(name).read_text(encoding="utf-8"))
    return schema


def grafana_version() -> str:
    """The version of ``@grafana/schema`` the schemas were generated from (Grafana's own)."""
    stamp: dict[str, str] = json.loads(STAMP.read_text(encoding="utf-8"))
    return stamp["@grafana/schema"]


def _version(package: Path) -> str:
    manifest: dict[str, Any] = json.loads((package / "package.json").read_text(encoding="utf-8"))
    return str(manifest["version"])


def satisfies(version: tuple[int, int, int], spec: str) -> bool:
    """Whether ``version`` meets an npm ``engines.node`` range of the forms the lock holds:
    alternatives joined by ``||``, each of comparators that must all hold, a comparator
    ``>=X[.Y[.Z]]`` or a bare ``X[.Y[.Z]]`` (that release line, as npm reads it)."""
    for alternative in spec.split("||"):
        comparators = re.sub(r">=\s+", ">=", alternative).split()
        if not comparators:
            raise ValueError(f"engines.node {spec!r}: an empty alternative")
        if all(_meets(version, comparator, spec) for comparator in comparators):
            return True
    return False


def _meets(version: tuple[int, int, int], comparator: str, spec: str) -> bool:
    numbers = comparator.removeprefix(">=")
    if not re.fullmatch(r"\d+(\.\d+){0,2}", numbers):
        raise ValueError(
            f"engines.node {spec!r}: only '>=X.Y.Z', 'X.Y.Z', spaces and '||' are understood;"
            " extend tools/grafana_schema.py for the new lock"
        )
    wanted = tuple(int(part) for part in numbers.split("."))
    if comparator.startswith(">="):
        return version >= (*wanted, 0, 0)[:3]
    return version[: len(wanted)] == wanted


def node_requirements() -> dict[str, str]:
    """``name version`` -> ``engines.node`` of each package in the lock that states one."""
    lock: dict[str, Any] = json.loads((PINS / "package-lock.json").read_text(encoding="utf-8"))
    requirements = {}
    for path, package in lock["packages"].items():
        engines = package.get("engines")
        if path and isinstance(engines, dict) and "node" in engines:
            name = path.rpartition("node_modules/")[2]
            requirements[f"{name} {package.get('version', '?')}"] = str(engines["node"])
    return requirements


def node_problem(found: str, requirements: Mapping[str, str]) -> str | None:
    """What is wrong with the Node that printed ``found`` (``node --version``) for the
    pinned packages, in one line; None when it meets every range."""
    advice = (
        "install Node 20 or 22+ (Debian 12's nodejs is 18; use NodeSource's or nodejs.org's"
        " packages, or Debian 13's nodejs) and put its node and npm first on PATH"
    )
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)\S*", found.strip())
    if match is None:
        return f"`node --version` printed {found.strip()!r}, not a version: {advice}"
    version = (int(match[1]), int(match[2]), int(match[3]))
    unmet: dict[str, list[str]] = {}
    for package, spec in requirements.items():
        if not satisfies(version, spec):
            unmet.setdefault(spec, []).append(package)
    if not unmet:
        return None
    needs = "; ".join(f'"{spec}" ({", ".join(sorted(names))})' for spec, names in unmet.items())
    return (
        f"found Node {found.strip()}, but the npm packages pinned in"
        f" tools/grafana-schema/package-lock.json need Node {needs}: {advice}"
    )


def check_node() -> None:
    """Exit with one line when node is missing or older than the pinned packages need."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        sys.exit(
            "node or npm not found: `make tools` installs Debian's nodejs and npm"
            " (Node 20 or 22+ is needed)"
        )
    answer = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    problem = node_problem(answer.stdout, node_requirements())
    if problem is not None:
        sys.exit(f"{node}: {problem}")


def generate() -> None:
    """Install the pinned packages and write one schema per source, then the stamp."""
    check_node()
    CACHE.mkdir(parents=True, exist_ok=True)
    STAMP.unlink(missing_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PINS / name, CACHE / name)
    npm = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run(npm, cwd=CACHE, check=True)
    generator = CACHE / "node_modules" / ".bin" / "ts-json-schema-generator"
    for name, source in SOURCES.items():
        path = PACKAGE / "dist" / "esm" / source.path
        if not path.is_file():
            sys.exit(f"{path} missing: the pinned @grafana/schema has moved its files")
        command = [str(generator), "--path", str(path), "--type", source.types]
        command += ["--no-type-check", "--expose", "all", "--out", str(schema_path(name))]
        subprocess.run(command, cwd=CACHE, check=True)
    versions = {
        "@grafana/schema": _version(PACKAGE),
        "ts-json-schema-generator": _version(CACHE / "node_modules" / "ts-json-schema-generator"),
    }
    STAMP.write_text(json.dumps(versions, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check-node"]:  # `make tools`: is the node it found good enough?
        check_node()
    else:
        generate()
