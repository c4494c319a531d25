"""The shipped probe-mode Prometheus configs (deploy/prometheus/probe*.yml, targets/) and the
example exporter config (config/probe.yml) agree with each other and with promtool; the
real-Prometheus runs are in tests/e2e/test_probe_prometheus.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from exporter.config.exporter import load_config
from exporter.web.probe_endpoint import probe_target
from tests.support.monitoring import PROM_DIR
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO

#: Each config and the rule files it loads.
CONFIGS = {
    "probe.yml": ["alerts.yml", "rules.yml"],
    "probe-shard-0.yml": ["alerts.yml"],
    "probe-shard-1.yml": ["alerts.yml"],
    "probe-global.yml": ["rules.yml"],
}


def load(name: str) -> Any:
    return yaml.safe_load((PROM_DIR / name).read_text(encoding="utf-8"))


def probe_job(name: str) -> dict[str, Any]:
    [job] = [job for job in load(name)["scrape_configs"] if job["job_name"] == "ledger-probe"]
    return dict(job)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_promtool_check_config(promtool: Promtool, name: str) -> None:
    promtool.check("check", "config", name, cwd=PROM_DIR)
    assert load(name)["rule_files"] == CONFIGS[name]


@pytest.mark.parametrize("shard", [0, 1])
def test_shards_are_the_probe_config_plus_hashmod(shard: int) -> None:
    """Only the hashmod pair and the shard label differ, so the shards cannot drift."""
    base, sharded = probe_job("probe.yml"), probe_job(f"probe-shard-{shard}.yml")
    hashmod, keep, *rest = sharded.pop("relabel_configs")
    assert rest == base.pop("relabel_configs")
    assert sharded == base
    assert hashmod == {
        "source_labels": ["__address__"],
        "modulus": 2,
        "target_label": "__tmp_hash",
        "action": "hashmod",
    }
    assert keep == {"source_labels": ["__tmp_hash"], "regex": str(shard), "action": "keep"}
    assert load(f"probe-shard-{shard}.yml")["global"]["external_labels"] == {"shard": str(shard)}
    others = [job for job in load(f"probe-shard-{shard}.yml")["scrape_configs"]]
    assert [job["job_name"] for job in others] == ["ledger-probe", "ledger-exporter"]


def test_example_targets_are_allowed_by_the_example_config() -> None:
    """Every URL of the file_sd example passes the exporter's /probe checks with
    config/probe.yml, with the node name the relabeling would pass."""
    probe = load_config(str(REPO / "config" / "probe.yml")).probe
    assert probe is not None
    groups = load("targets/ledger-nodes.yml")
    assert sum(len(group["targets"]) for group in groups) >= 2
    for group in groups:
        for target in group["targets"]:
            params = {"target": target, "node": group.get("labels", {}).get("node", "")}
            node = probe_target(urlencode(params), probe)
            assert node.url == target
            assert node.name == (params["node"] or target.split("/")[2])


def test_the_global_view_federates_only_raw_series() -> None:
    """Recording rules run once, on the global view: federating the shards' own rule
    outputs (names with colons) would clash with them."""
    [job] = load("probe-global.yml")["scrape_configs"]
    assert job["honor_labels"] is True and job["metrics_path"] == "/federate"
    assert job["params"] == {"match[]": ['{__name__=~"ledger_.+"}']}
    assert len(job["static_configs"][0]["targets"]) == 2  # one per shard
