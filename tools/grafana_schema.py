"""Grafana's JSON Schemas for the dashboard checks, generated from Grafana's npm package.

Grafana publishes the types of its dashboard model and of each core panel plugin's options
(generated from its CUE kinds) as the npm package ``@grafana/schema``; this tool installs the
version pinned in ``tools/grafana-schema/package-lock.json`` with ``npm ci`` into a git-ignored
cache (``.cache/grafana-schema/``) and turns the types the tests need into JSON Schema (draft 7)
with the pinned ``ts-json-schema-generator``. Nothing of Grafana's is kept in the repository.
``make grafana-schema`` runs it; ``tests/test_dashboards_schema.py`` reads what it writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
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


def generate() -> None:
    """Install the pinned packages and write one schema per source, then the stamp."""
    if shutil.which("npm") is None:
        sys.exit("npm not found: `make tools` installs Debian's nodejs and npm")
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
    generate()
