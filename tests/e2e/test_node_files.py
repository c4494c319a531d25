"""Nodes from files: the exporter process follows its node files with no signal and no
reload (``--config.auto-reload-interval``): a file added, changed, broken, clashing, swapped
the way the kubelet updates a mounted ConfigMap (a ``..data`` link to a new folder), and
removed. A file that fails keeps its last good nodes, says which file and why in one log
line and in ``ledger_exporter_node_file_last_read_successful{file}``; a node that stays keeps
its memory (a stalled chain's clock is the same through every change).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.http import fetch
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.simulator import simulate
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

STALLED = "ledger_blockchain_height_last_change_timestamp_seconds"
INTERVAL = "1s"  # --config.auto-reload-interval: every change is seen within two of them


def series(process: ExporterProcess, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = fetch(process.base + "/metrics", timeout=20).text
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for parsed in text_string_to_metric_families(text)
        for sample in parsed.samples
        if sample.name == family
    }


def up_nodes(process: ExporterProcess) -> dict[str, float]:
    return {
        dict(labels)["node"]: value for labels, value in series(process, "ledger_node_up").items()
    }


def file_flags(process: ExporterProcess) -> dict[str, float]:
    found = series(process, "ledger_exporter_node_file_last_read_successful")
    return {Path(dict(labels)["file"]).name: value for labels, value in found.items()}


def clocks(process: ExporterProcess, node: str) -> dict[str, float]:
    found = series(process, STALLED)
    return {dict(k)["blockchain"]: v for k, v in found.items() if dict(k)["node"] == node}


@pytest.fixture
def urls() -> Iterator[dict[str, str]]:
    """Three simulated nodes; node-1's chains stall at once."""
    with simulate("--fault", "node-1:stall") as (_, found):
        yield found


def until(process: ExporterProcess, what: str, check: object) -> None:
    """Wait for ``check()`` (a callable) to be true, showing ``what`` and the log if not."""
    assert callable(check)
    wait_until(check, timeout=60, message=lambda: f"{what}: {up_nodes(process)}\n{process.log()}")


def test_node_files_are_followed_without_a_signal(tmp_path: Path, urls: dict[str, str]) -> None:
    # the node files as the kubelet mounts a ConfigMap: files linked through ..data
    mounted = tmp_path / "nodes.d"
    mounted.mkdir()
    (mounted / "..v1").mkdir()
    (mounted / "..data").symlink_to("..v1")
    first = [{"name": "validator-1", "url": urls["node-1"]}]
    (mounted / "..v1" / "validators.yml").write_text(yaml.safe_dump(first), encoding="utf-8")
    (mounted / "validators.yml").symlink_to("..data/validators.yml")
    config = {
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "nodes": [{"name": "validator-2", "url": urls["node-2"]}],
        "node_files": ["nodes.d/*.yml", "extra/*.json"],
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    (tmp_path / "extra").mkdir()
    observer = tmp_path / "extra" / "observer.json"

    with ready_exporter(path, f"--config.auto-reload-interval={INTERVAL}") as process:
        until(process, "start", lambda: up_nodes(process) == {"validator-1": 1, "validator-2": 1})
        stalled = wait_until(lambda: clocks(process, "validator-1"), timeout=30)
        assert file_flags(process) == {"validators.yml": 1.0}

        # a JSON file appears: its node is polled
        observer.write_text(json.dumps([{"name": "observer-1", "url": urls["node-3"]}]))
        everyone = {"validator-1": 1, "validator-2": 1, "observer-1": 1}
        until(process, "new file", lambda: up_nodes(process) == everyone)
        assert file_flags(process) == {"validators.yml": 1.0, "observer.json": 1.0}

        # broken: its last good node stays, the gauge and one log line say which file and why
        observer.write_text(json.dumps([{"name": "observer-1", "url": "ftp://nowhere"}]))
        until(process, "broken file", lambda: file_flags(process).get("observer.json") == 0.0)
        assert up_nodes(process) == everyone
        failed = [line for line in process.log().splitlines() if "node file not used" in line]
        assert len(failed) == 1, failed
        assert f"file={observer}" in failed[0]
        assert "[0].url: must be an http:// or https:// URL with a host" in failed[0]

        # a name another source has: refused, naming both places; the last good node stays
        observer.write_text(json.dumps([{"name": "validator-2", "url": urls["node-3"]}]))
        until(process, "clash", lambda: "is also defined in" in process.log())
        clash = [line for line in process.log().splitlines() if "is also defined in" in line]
        assert f"file={observer}" in clash[0]
        assert f"'validator-2' is also defined in {path} nodes[0]" in clash[0]
        assert up_nodes(process) == everyone
        assert file_flags(process)["observer.json"] == 0.0

        # the ConfigMap updated: a new folder, ..data swapped to it at once
        (mounted / "..v2").mkdir()
        renamed = [{"name": "validator-1", "url": urls["node-1"], "labels": {"zone": "b"}}]
        (mounted / "..v2" / "validators.yml").write_text(yaml.safe_dump(renamed))
        (mounted / "..data_tmp").symlink_to("..v2")
        os.replace(mounted / "..data_tmp", mounted / "..data")
        until(
            process,
            "swapped ..data",
            lambda: any(("zone", "b") in labels for labels in series(process, "ledger_node_up")),
        )

        # the file removed: its node goes, and so does its gauge
        observer.unlink()
        until(process, "removed", lambda: up_nodes(process) == {"validator-1": 1, "validator-2": 1})
        assert file_flags(process) == {"validators.yml": 1.0}

        # validator-1 stayed through every change: its stalled chains' clocks did not move
        assert clocks(process, "validator-1") == stalled
    assert "Traceback" not in process.log()
