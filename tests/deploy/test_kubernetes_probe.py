"""Offline checks of deploy/kubernetes/probe/, the probe-mode setup (issue 11; no cluster here).

The objects are those the real kustomize builds (`kubectl kustomize`, make tools); the
alternative scrapeconfig.yaml, which no kustomization lists, is read as a file. Core kinds
validate strictly against kubernetes-validate's schemas; the Prometheus Operator's Probe
and ServiceMonitor are checked for their fields and for the references no schema sees.
The Probe's targets go through the exporter's own /probe parameter checks against the
ConfigMap's config, and the scrape config the Operator makes of the Probe is checked by
promtool.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from exporter import __version__
from exporter.config.exporter import parse_config
from exporter.web.probe_endpoint import probe_target
from tests.support.deploy import (
    DURATION,
    Manifest,
    check_manifest,
    kustomize,
    seconds,
)
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO

PROBE_DIR = REPO / "deploy" / "kubernetes" / "probe"
DAEMON_DIR = REPO / "deploy" / "kubernetes"
CORE_KINDS = {"Deployment", "Service", "ConfigMap", "ServiceAccount"}
CRD_KINDS = {"Probe", "ServiceMonitor", "ScrapeConfig"}
#: Files offered instead of one the kustomization lists (never both: nodes probed twice).
ALTERNATIVES = {"scrapeconfig.yaml": "probe.yaml"}
#: Fields of the Probe spec (monitoring.coreos.com/v1) this setup may use.
PROBE_SPEC_KEYS = {"jobName", "prober", "module", "interval", "scrapeTimeout", "targets"}
RELABEL_KEYS = {"sourceLabels", "separator", "regex", "targetLabel", "replacement", "action"}
RELABEL_ACTIONS = {"replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep"}


def manifest_files() -> list[Path]:
    return sorted(path for path in PROBE_DIR.glob("*.yaml") if path.name != "kustomization.yaml")


@functools.cache
def built(directory: Path) -> tuple[Manifest, ...]:
    """`kubectl kustomize directory`, once per directory."""
    return tuple(kustomize(directory))


def load(name: str, directory: Path = PROBE_DIR) -> dict[str, Any]:
    """The built object of the file ``name`` (one object a file, named after its kind:
    servicemonitor.yaml, a ServiceMonitor); an alternative file as it is written."""
    if name in ALTERNATIVES:
        document: dict[str, Any] = yaml.safe_load((directory / name).read_text(encoding="utf-8"))
        return document
    kind = name.removesuffix(".yaml")
    (found,) = [
        o
        for o in built(directory)
        if o["kind"].lower() == kind and "grafana_dashboard" not in o["metadata"]["labels"]
    ]
    return copy.deepcopy(found)  # the tests may change what they get


def workload(directory: Path = PROBE_DIR) -> dict[str, Any]:
    """The object that runs the pods: the probe replicas' Deployment, the daemon pair's
    StatefulSet."""
    return load("statefulset.yaml" if directory == DAEMON_DIR else "deployment.yaml", directory)


def pod_spec(directory: Path = PROBE_DIR) -> dict[str, Any]:
    spec: dict[str, Any] = workload(directory)["spec"]["template"]["spec"]
    return spec


def container(directory: Path = PROBE_DIR) -> dict[str, Any]:
    (only,) = pod_spec(directory)["containers"]
    result: dict[str, Any] = only
    return result


def exporter_config() -> Any:
    return parse_config(load("configmap.yaml")["data"]["config.yml"])


@pytest.mark.parametrize("path", manifest_files(), ids=lambda path: path.name)
def test_each_file_is_one_known_object(path: Path) -> None:
    documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    assert len(documents) == 1
    assert documents[0]["kind"] in CORE_KINDS | CRD_KINDS


def test_every_built_object_validates() -> None:
    """Core kinds strictly against the Kubernetes schemas, the Operator's by their fields;
    the alternative ScrapeConfig is not in the build (never both: nodes probed twice)."""
    kinds = [o["kind"] for o in built(PROBE_DIR)]
    assert sorted(kinds) == sorted(CORE_KINDS | (CRD_KINDS - {"ScrapeConfig"}))
    for manifest in built(PROBE_DIR):
        check_manifest(manifest)


def test_build_holds_every_file_but_the_alternatives() -> None:
    in_build = {o["kind"].lower() + ".yaml" for o in built(PROBE_DIR)}
    assert in_build == {p.name for p in manifest_files() if p.name not in ALTERNATIVES}
    for alternative, instead_of in ALTERNATIVES.items():
        assert instead_of in in_build and alternative not in in_build
    assert container()["image"] == f"ghcr.io/ledger-exporter/ledger-exporter:{__version__}"


def test_several_replicas_as_hardened_as_the_daemon() -> None:
    deployment = load("deployment.yaml")
    assert deployment["spec"]["replicas"] >= 2
    assert pod_spec()["securityContext"] == pod_spec(DAEMON_DIR)["securityContext"]
    assert pod_spec()["automountServiceAccountToken"] is False
    assert container()["securityContext"] == container(DAEMON_DIR)["securityContext"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container()[probe] == container(DAEMON_DIR)[probe]
    account = load("serviceaccount.yaml")
    assert pod_spec()["serviceAccountName"] == account["metadata"]["name"]


def test_config_comes_from_the_configmap_and_is_probe_only() -> None:
    (config_arg,) = [arg for arg in container()["args"] if arg.startswith("--config.file=")]
    (volume,) = [v for v in pod_spec()["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == load("configmap.yaml")["metadata"]["name"]
    (mount,) = [m for m in container()["volumeMounts"] if m["name"] == volume["name"]]
    (item,) = volume["configMap"]["items"]
    assert f"{mount['mountPath']}/{item['path']}" == config_arg.split("=", 1)[1]
    config = exporter_config()
    assert config.nodes == () and config.probe is not None


def test_daemon_and_probe_objects_never_select_each_other() -> None:
    """Both setups can share a namespace: neither Service, Deployment nor ServiceMonitor
    picks up the other's pods or Service."""
    for one, other in ((PROBE_DIR, DAEMON_DIR), (DAEMON_DIR, PROBE_DIR)):
        pods = workload(other)["spec"]["template"]["metadata"]["labels"]
        assert not load("service.yaml", one)["spec"]["selector"].items() <= pods.items()
        selector = workload(one)["spec"]["selector"]["matchLabels"]
        assert not selector.items() <= pods.items()
        monitor = load("servicemonitor.yaml", one)["spec"]["selector"]["matchLabels"]
        assert not monitor.items() <= load("service.yaml", other)["metadata"]["labels"].items()


def test_service_and_servicemonitor_reach_every_replica() -> None:
    service = load("service.yaml")
    pods = load("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pods.items()
    monitor = load("servicemonitor.yaml")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    # the alerts watch job="ledger-exporter": the job comes from this Service label
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "ledger-exporter"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"


def test_probe_resource_structure_and_references() -> None:
    probe = load("probe.yaml")
    assert (probe["apiVersion"], probe["kind"]) == ("monitoring.coreos.com/v1", "Probe")
    spec = probe["spec"]
    assert set(spec) <= PROBE_SPEC_KEYS
    service = load("service.yaml")
    (port,) = service["spec"]["ports"]
    assert spec["prober"] == {
        "url": f"{service['metadata']['name']}:{port['port']}",
        "path": "/probe",
        "scheme": "http",
    }
    assert exporter_config().probe.module(spec["module"]) is not None
    assert DURATION.match(spec["interval"]) and DURATION.match(spec["scrapeTimeout"])
    assert seconds(spec["scrapeTimeout"]) <= seconds(spec["interval"])
    assert set(spec["targets"]) == {"staticConfig"}
    for rule in spec["targets"]["staticConfig"]["relabelingConfigs"]:
        assert set(rule) <= RELABEL_KEYS
        assert rule.get("action", "replace") in RELABEL_ACTIONS


def node_parameter(target: str) -> str:
    """What the Probe's relabeling sets as the `node` parameter (Prometheus anchors regexes)."""
    [rule] = load("probe.yaml")["spec"]["targets"]["staticConfig"]["relabelingConfigs"]
    assert rule["sourceLabels"] == ["__param_target"] and rule["targetLabel"] == "__param_node"
    match = re.fullmatch(rule["regex"], target)
    assert match, f"{target} does not match the node relabeling"
    return str(match.expand(rule["replacement"].replace("$1", r"\1")))


def test_every_probe_target_is_allowed_and_named() -> None:
    """The exporter's own parameter checks accept each target the Probe lists."""
    probe_config = exporter_config().probe
    targets = load("probe.yaml")["spec"]["targets"]["staticConfig"]["static"]
    assert targets
    names = []
    for target in targets:
        name = node_parameter(target)
        node = probe_target(urlencode({"target": target, "node": name}), probe_config)
        assert (node.url, node.name) == (target, name)
        names.append(name)
    assert len(set(names)) == len(names)
    assert names == [f"validator-{i}" for i in range(1, len(names) + 1)]


def operator_scrape_config(probe: dict[str, Any]) -> dict[str, Any]:
    """The scrape job the Operator generates for a static-target Probe (its documented
    relabeling: target parameter, instance, then the prober's address), plus the Probe's
    own relabelings."""
    spec = probe["spec"]
    static = spec["targets"]["staticConfig"]
    relabel = [
        {"source_labels": ["__address__"], "target_label": "__param_target"},
        {"source_labels": ["__param_target"], "target_label": "instance"},
        {"target_label": "__address__", "replacement": spec["prober"]["url"]},
    ]
    for rule in static["relabelingConfigs"]:
        relabel.append(
            {
                "source_labels": rule["sourceLabels"],
                "regex": rule["regex"],
                "target_label": rule["targetLabel"],
                "replacement": rule["replacement"],
                "action": rule["action"],
            }
        )
    return {
        "job_name": spec["jobName"],
        "metrics_path": spec["prober"]["path"],
        "scheme": spec["prober"]["scheme"],
        "params": {"module": [spec["module"]]},
        "scrape_interval": spec["interval"],
        "scrape_timeout": spec["scrapeTimeout"],
        "static_configs": [{"targets": static["static"]}],
        "relabel_configs": relabel,
    }


def test_promtool_accepts_the_scrape_config_of_the_probe(
    promtool: Promtool, tmp_path: Path
) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump({"scrape_configs": [operator_scrape_config(load("probe.yaml"))]})
    )
    promtool.check("check", "config", str(config))


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus's ``replace`` and ``keep`` relabeling (anchored regexes, ``$1`` groups), in
    the Operator's camelCase; None when a ``keep`` drops the target."""
    labels = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(
            labels.get(n, "") for n in rule.get("sourceLabels", [])
        )
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if rule.get("action", "replace") == "keep":
            if match is None:
                return None
            continue
        assert rule.get("action", "replace") == "replace"
        if match is not None:
            replacement = re.sub(r"\$(\d)", r"\\\1", rule.get("replacement", "$1"))
            labels[rule["targetLabel"]] = match.expand(replacement)
    return labels


def test_scrapeconfig_structure() -> None:
    scrape = load("scrapeconfig.yaml")
    assert (scrape["apiVersion"], scrape["kind"]) == (
        "monitoring.coreos.com/v1alpha1",
        "ScrapeConfig",
    )
    spec = scrape["spec"]
    probe = load("probe.yaml")["spec"]
    assert spec["jobName"] == probe["jobName"]  # the same job, whichever file is used
    assert spec["metricsPath"] == "/probe"
    assert spec["params"] == {"module": [probe["module"]]}
    assert seconds(spec["scrapeTimeout"]) <= seconds(spec["scrapeInterval"])
    [sd] = spec["kubernetesSDConfigs"]
    assert sd["role"] == "Service"
    for rule in spec["relabelings"]:
        assert set(rule) <= RELABEL_KEYS and rule["action"] in RELABEL_ACTIONS
    service = load("service.yaml")
    assert spec["relabelings"][-1] == {
        "targetLabel": "__address__",
        "replacement": f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}",
        "action": "replace",
    }


@pytest.mark.parametrize(
    ("service", "port_name", "probed"),
    [("validator-2", "api", True), ("validator-7", "metrics", False)],
)
def test_discovered_services_become_allowed_probes(
    service: str, port_name: str, probed: bool
) -> None:
    """A Service as Kubernetes SD reports it, through the ScrapeConfig's relabeling and the
    exporter's own /probe checks against the ConfigMap's allow-list."""
    meta = {
        "__address__": f"{service}.ledger.svc:7740",
        "__meta_kubernetes_namespace": "ledger",
        "__meta_kubernetes_service_name": service,
        "__meta_kubernetes_service_port_name": port_name,
        "__meta_kubernetes_service_port_number": "7740",
    }
    labels = relabel(meta, load("scrapeconfig.yaml")["spec"]["relabelings"])
    if not probed:
        assert labels is None
        return
    assert labels is not None
    target = f"http://{service}.ledger.svc:7740/"
    assert labels["__param_target"] == labels["instance"] == target
    assert labels["__address__"] == "ledger-exporter-probe:9877"
    params = {"target": target, "node": labels["__param_node"]}
    node = probe_target(urlencode(params), exporter_config().probe)
    assert (node.name, node.url) == (service, target)


def test_promtool_accepts_the_scrape_config_of_the_scrapeconfig(
    promtool: Promtool, tmp_path: Path
) -> None:
    spec = load("scrapeconfig.yaml")["spec"]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    job = {
        "job_name": spec["jobName"],
        "metrics_path": spec["metricsPath"],
        "params": spec["params"],
        "scrape_interval": spec["scrapeInterval"],
        "scrape_timeout": spec["scrapeTimeout"],
        # Debian's Prometheus is built without Kubernetes SD: the discovery is checked by
        # test_scrapeconfig_structure, the relabeling (what promtool parses) here.
        "static_configs": [{"targets": ["validator-1.ledger.svc:7740"]}],
        "relabel_configs": [
            {keys.get(key, key): value for key, value in rule.items()}
            for rule in spec["relabelings"]
        ],
    }
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    promtool.check("check", "config", str(config))
