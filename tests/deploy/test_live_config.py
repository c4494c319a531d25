"""Kubernetes deployments that rely on the exporter following its files live: the Helm
chart and the Kustomize manifests mount the config and the node lists as folders (never
``subPath``, which the kubelet never updates), roll no pod on a config change unless asked
(``rolloutOnConfigChange``), and split a node list into ``node_files`` that the exporter
reads as the pod would see them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from exporter.config.exporter import parse_config
from exporter.config.node_files import matching_files, read_node_file
from tests.support.deploy import (
    Manifest,
    by_kind,
    container,
    documents,
    kustomize,
    only,
    pod_spec,
    run_tool,
    workload,
)
from tests.support.testdata import REPO

CHART = REPO / "deploy" / "helm" / "ledger-exporter"
K8S_DIR = REPO / "deploy" / "kubernetes"
NODE_FILES = CHART / "ci" / "node-files-values.yaml"


def helm_template(*args: str) -> list[Manifest]:
    answer = run_tool("helm", "template", "ledger", str(CHART), "--namespace", "monitoring", *args)
    assert answer.returncode == 0, f"helm template {args} failed:\n{answer.stderr}"
    return documents(answer.stdout)


def pod_annotations(objects: list[Manifest]) -> dict[str, str]:
    found: dict[str, str] = workload(objects)["spec"]["template"]["metadata"].get("annotations", {})
    return found


def mounted(objects: list[Manifest], tmp_path: Path) -> Path:
    """Every ConfigMap the pod mounts, written under ``tmp_path`` at its mount path as the
    kubelet lays it out (each key a file, or the volume's items); returns the config file's
    path there."""
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    maps = {c["metadata"]["name"]: c for c in by_kind(objects, "ConfigMap")}
    for mount in container(objects)["volumeMounts"]:
        source = volumes[mount["name"]].get("configMap")
        if source is None or source["name"] not in maps:
            continue
        data = maps[source["name"]]["data"]
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        folder = tmp_path / mount["mountPath"].lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        for item in items:
            (folder / item["path"]).write_text(data[item["key"]], encoding="utf-8")
    (config_flag,) = [a for a in container(objects)["args"] if a.startswith("--config.file=")]
    config_file: str = config_flag.split("=", 1)[1]
    return tmp_path / config_file.lstrip("/")


def polled_names(config_path: Path, root: Path) -> list[str]:
    """The nodes the exporter polls from the config and node files laid out under ``root``."""
    text = config_path.read_text(encoding="utf-8")
    config = parse_config(text.replace("/etc/ledger-exporter/", f"{root}/etc/ledger-exporter/"))
    names = [node.name for node in config.nodes]
    for path in matching_files(config.node_files):
        nodes, _ = read_node_file(path, config.bounds.label_value_length)
        names += [node.name for node in nodes]
    return names


def every_rendering() -> Iterator[tuple[str, list[Manifest]]]:
    yield "helm defaults", helm_template()
    for values in sorted((CHART / "ci").glob("*-values.yaml")):
        yield f"helm {values.name}", helm_template("-f", str(values))
    yield "kustomize", kustomize(K8S_DIR)
    yield "kustomize probe", kustomize(K8S_DIR / "probe")


def test_nothing_is_mounted_with_subpath() -> None:
    """A subPath mount is a copy the kubelet never updates: a live reload would never see
    the change."""
    for where, objects in every_rendering():
        for mount in container(objects)["volumeMounts"]:
            assert "subPath" not in mount and "subPathExpr" not in mount, (where, mount)


def test_a_config_change_rolls_no_pod_unless_asked() -> None:
    plain = helm_template()
    assert not {"checksum/config", "checksum/web-config"} & pod_annotations(plain).keys()
    changed = helm_template("--set", "config.scrape_interval=30s")
    assert workload(changed)["spec"]["template"] == workload(plain)["spec"]["template"]
    asked = pod_annotations(helm_template("--set", "rolloutOnConfigChange=true"))
    assert re.fullmatch(r"[0-9a-f]{64}", asked["checksum/config"])
    asked_too = pod_annotations(
        helm_template("--set", "rolloutOnConfigChange=true", "--set", "config.scrape_interval=30s")
    )
    assert asked_too["checksum/config"] != asked["checksum/config"]
    for objects in (kustomize(K8S_DIR), kustomize(K8S_DIR / "probe")):
        assert not [k for k in pod_annotations(objects) if k.startswith("checksum/")]
        # names without a generator's hash suffix: an edit changes the files, not the pod
        assert all(
            "configMap" not in v or not re.search(r"-[a-z0-9]{10}$", v["configMap"]["name"])
            for v in pod_spec(objects)["volumes"]
        )


def test_helm_node_files_are_a_configmap_the_exporter_follows(tmp_path: Path) -> None:
    objects = helm_template("-f", str(NODE_FILES))
    values: dict[str, Any] = yaml.safe_load(NODE_FILES.read_text(encoding="utf-8"))
    nodes = only(
        [c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-nodes")],
        "ConfigMap",
    )
    assert set(nodes["data"]) == set(values["nodeFiles"])
    mount = {m["name"]: m for m in container(objects)["volumeMounts"]}["nodes"]
    assert mount == {"name": "nodes", "mountPath": "/etc/ledger-exporter/nodes", "readOnly": True}
    config = mounted(objects, tmp_path)
    assert yaml.safe_load(config.read_text())["node_files"] == ["/etc/ledger-exporter/nodes/*.yml"]
    assert sorted(polled_names(config, tmp_path)) == [
        "gateway-1",
        "observer-1",
        "validator-1",
        "validator-2",
    ]


def test_helm_node_files_refuse_inline_credentials() -> None:
    answer = run_tool(
        "helm",
        "template",
        "ledger",
        str(CHART),
        "--set-json",
        'nodeFiles={"v.yml":[{"name":"v","url":"http://v/","basic_auth":{"username":"u","password":"S3CRET"}}]}',
    )
    assert answer.returncode != 0
    assert "nodeFiles.v.yml[0]" in answer.stderr
    assert "S3CRET" not in answer.stderr


def test_kustomize_splits_the_node_list_into_node_files(tmp_path: Path) -> None:
    objects = kustomize(K8S_DIR)
    mounts = {m["mountPath"]: m for m in container(objects)["volumeMounts"]}
    assert mounts["/etc/ledger-exporter/config"]["readOnly"] is True
    assert mounts["/etc/ledger-exporter/nodes"]["readOnly"] is True
    config = mounted(objects, tmp_path)
    assert config == tmp_path / "etc/ledger-exporter/config/config.yml"
    assert polled_names(config, tmp_path) == ["validator-1", "validator-2"]
