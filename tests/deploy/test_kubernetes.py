"""Offline checks of deploy/kubernetes/ (no cluster here), as the real kustomize builds it.

`kubectl kustomize` (make tools) builds the kustomization, which `kubectl apply -k` would
send. Core kinds of the build validate strictly against the Kubernetes OpenAPI schemas
that kubernetes-validate bundles. The Prometheus Operator's CRDs (ServiceMonitor,
PrometheusRule) are not in those schemas, so their fields are checked explicitly
(tests/support/deploy.py), as are the references between objects that no schema sees
(selectors, port names, the ConfigMap key the config path relies on).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from exporter import __version__
from tests.support.deploy import (
    DURATION,
    KUBERNETES_VERSION,
    Manifest,
    check_manifest,
    container,
    kustomize,
    only,
    pod_spec,
    seconds,
)
from tests.support.ports import free_port
from tests.support.prometheus import PrometheusServers
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

K8S_DIR = REPO / "deploy" / "kubernetes"
CORE_KINDS = {
    "StatefulSet",
    "PodDisruptionBudget",
    "Service",
    "ConfigMap",
    "ServiceAccount",
    "Secret",
}
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def manifest_files() -> list[Path]:
    return sorted(path for path in K8S_DIR.glob("*.yaml") if path.name != "kustomization.yaml")


@pytest.fixture(scope="module")
def built() -> list[Manifest]:
    """`kubectl kustomize deploy/kubernetes`, once for the module."""
    return kustomize(K8S_DIR)


def load(built: list[Manifest], kind: str, name: str = "ledger-exporter") -> Manifest:
    """The built object of ``kind`` called ``name``."""
    (found,) = [o for o in built if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("path", manifest_files(), ids=lambda path: path.name)
def test_each_file_is_one_known_object(path: Path) -> None:
    documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    assert len(documents) == 1, "one object per file keeps the kustomization readable"
    assert documents[0]["kind"] in CORE_KINDS | CRD_KINDS


def test_every_built_object_validates(built: list[Manifest]) -> None:
    """Core kinds strictly against the Kubernetes schemas, the Operator's by their fields."""
    assert {o["kind"] for o in built} == CORE_KINDS | CRD_KINDS
    for manifest in built:
        check_manifest(manifest)


def test_strict_validation_rejects_unknown_fields_and_wrong_types(built: list[Manifest]) -> None:
    """The validator can fail: a misspelt field and a string port are both errors."""
    document = only(built, "StatefulSet")
    document["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    service = only(kustomize(K8S_DIR), "Service")
    service["spec"]["ports"][0]["port"] = "9877"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES_VERSION, strict=True)


def test_build_holds_every_manifest_once_with_the_project_version(built: list[Manifest]) -> None:
    """Every file of the directory is in the build (kustomize itself refuses a listed file
    that is missing: `make mixin` renders two), and the image gets the project's version."""
    from_files = []
    for path in manifest_files():
        (document,) = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        from_files.append((document["kind"], document["metadata"]["name"]))
    in_build = [(o["kind"], o["metadata"]["name"]) for o in built]
    assert sorted(in_build) == sorted(from_files), "a file is not in kustomization.yaml"
    assert container(built)["image"] == f"ghcr.io/ledger-exporter/ledger-exporter:{__version__}"


def test_pods_are_hardened(built: list[Manifest]) -> None:
    pod = pod_spec(built)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532, "the image's fixed uid"
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = container(built)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["runAsNonRoot"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pods_probes_and_resources(built: list[Manifest]) -> None:
    c = container(built)
    assert c["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": "metrics"}
    assert {"name": "metrics", "containerPort": 9877, "protocol": "TCP"} in c["ports"]
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}


def test_config_path_comes_from_the_configmap(built: list[Manifest]) -> None:
    """--config.file names the file that the ConfigMap volume puts there."""
    args = container(built)["args"]
    (config_arg,) = [arg for arg in args if arg.startswith("--config.file=")]
    config_path = config_arg.split("=", 1)[1]
    mounts = {mount["name"]: mount for mount in container(built)["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod_spec(built)["volumes"]}
    configmap = load(built, "ConfigMap")
    (volume,) = [
        v for v in volumes.values() if v.get("configMap", {}).get("name") == "ledger-exporter"
    ]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    (item,) = volume["configMap"]["items"]
    assert item["key"] in configmap["data"]
    assert mounts[volume["name"]]["readOnly"] is True
    assert f"{mounts[volume['name']]['mountPath']}/{item['path']}" == config_path


def test_configmap_config_uses_only_documented_keys(built: list[Manifest]) -> None:
    """The full check is `ledger-exporter --config.check` in tests/deploy/test_wheel.py; the
    nodes are in the node list ConfigMap (tests/deploy/test_live_config.py reads them)."""
    config = yaml.safe_load(load(built, "ConfigMap")["data"]["config.yml"])
    assert set(config) <= {"scrape_interval", "scrape_timeout", "nodes", "node_files"}
    nodes = [
        node
        for text in load(built, "ConfigMap", "ledger-exporter-nodes")["data"].values()
        for node in yaml.safe_load(text)
    ]
    names = [node["name"] for node in config.get("nodes", []) + nodes]
    assert names and len(names) == len(set(names))
    assert all(node["url"].startswith(("http://", "https://")) for node in nodes)


def test_service_account_exists_and_mounts_no_token(built: list[Manifest]) -> None:
    account = load(built, "ServiceAccount")
    assert pod_spec(built)["serviceAccountName"] == account["metadata"]["name"]
    assert account["automountServiceAccountToken"] is False


def test_service_selects_the_pods_and_names_the_port(built: list[Manifest]) -> None:
    service = load(built, "Service")
    pods = load(built, "StatefulSet")
    pod_labels = pods["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert pods["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port == {"name": "metrics", "port": 9877, "targetPort": "metrics", "protocol": "TCP"}
    assert port["targetPort"] in {p["name"] for p in container(built)["ports"]}


def test_servicemonitor_structure_and_references(built: list[Manifest]) -> None:
    monitor = load(built, "ServiceMonitor")
    service = load(built, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "ServiceMonitor"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    assert monitor["metadata"]["name"]
    assert set(monitor["spec"]) <= {"selector", "endpoints", "namespaceSelector", "jobLabel"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    port_names = {port["name"] for port in service["spec"]["ports"]}
    assert monitor["spec"]["endpoints"], "a ServiceMonitor without endpoints scrapes nothing"
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= {
            "port",
            "path",
            "interval",
            "scrapeTimeout",
            "scheme",
            "relabelings",
        }
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        assert DURATION.match(endpoint["interval"])
        assert DURATION.match(endpoint["scrapeTimeout"])
        assert seconds(endpoint["scrapeTimeout"]) <= seconds(endpoint["interval"])


def test_prometheusrule_structure(built: list[Manifest]) -> None:
    """Rendered from the mixin (tests/monitoring/test_mixin.py proves it is the current
    rendering)."""
    path = K8S_DIR / "prometheusrule.yaml"
    assert path.exists(), "deploy/kubernetes/prometheusrule.yaml missing: run `make mixin`"
    rule = load(built, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "ledger-exporter"
    for group in rule["spec"]["groups"]:
        assert group["name"]
        for entry in group["rules"]:
            assert ("record" in entry) != ("alert" in entry)
            assert entry["expr"]


def test_operator_job_name_is_the_one_the_alerts_expect(built: list[Manifest]) -> None:
    """Without `jobLabel` the Operator names the job after the Service; the exporter's alerts
    match `job="..."` on it, and the ledger series' `job=~"..."` matches it and the probe
    setup's job (deploy/kubernetes/probe/)."""
    alerts = (REPO / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8")
    assert "jobLabel" not in load(built, "ServiceMonitor")["spec"]
    job = load(built, "Service")["metadata"]["name"]
    expected_jobs = set(re.findall(r'\bjob="([^"]+)"', alerts))
    assert expected_jobs == {job}, f"alerts expect jobs {expected_jobs}, the Operator gives {job}"
    probe = yaml.safe_load((K8S_DIR / "probe" / "probe.yaml").read_text(encoding="utf-8"))
    for pattern in set(re.findall(r'\bjob=~"([^"]+)"', alerts)):
        for name in (job, probe["spec"]["jobName"]):
            assert re.fullmatch(pattern, name), f"job=~{pattern!r} misses the job {name}"


def test_dashboards_configmap_is_for_grafanas_sidecar(built: list[Manifest]) -> None:
    """Rendered from the mixin; Grafana's dashboard sidecar (kube-prometheus-stack's, for
    one) loads ConfigMaps labelled grafana_dashboard=1, each key a dashboard file."""
    configmap = load(built, "ConfigMap", "ledger-exporter-dashboards")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = sorted(path.name for path in (REPO / "grafana" / "dashboards").glob("*.json"))
    assert sorted(configmap["data"]) == shipped
    size = len((K8S_DIR / "grafana-dashboards.yaml").read_bytes())
    assert size < 256 * 1024, "kubectl apply keeps a copy in a 256 KiB annotation"


# --- the pair: two replicas of one logical exporter -------------------------------------------

PERSISTENT_STATE = K8S_DIR / "persistent-state"
STATE_DIRECTORY = "/var/lib/ledger-exporter"


def state_volume_name(built: list[Manifest]) -> str:
    """The volume mounted where ``--state.file`` is written."""
    (flag,) = [a for a in container(built)["args"] if a.startswith("--state.file=")]
    assert flag.split("=", 1)[1].rpartition("/")[0] == STATE_DIRECTORY
    (mount,) = [m for m in container(built)["volumeMounts"] if m["mountPath"] == STATE_DIRECTORY]
    name: str = mount["name"]
    return name


def test_two_replicas_each_with_its_own_state(built: list[Manifest]) -> None:
    """A StatefulSet of two: each pod its own emptyDir for the state file (no claim unless the
    persistent-state component is added), both started and replaced without waiting for
    each other, one at a time in a rollout."""
    pods = load(built, "StatefulSet")
    spec = pods["spec"]
    assert spec["replicas"] == 2
    assert spec["serviceName"] == load(built, "Service")["metadata"]["name"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}  # one pod at a time
    assert "volumeClaimTemplates" not in spec
    volumes = {volume["name"]: volume for volume in pod_spec(built)["volumes"]}
    assert "emptyDir" in volumes[state_volume_name(built)]


def test_a_disruption_leaves_one_replica(built: list[Manifest]) -> None:
    budget = load(built, "PodDisruptionBudget")
    pods = load(built, "StatefulSet")
    assert budget["spec"]["minAvailable"] == 1 < pods["spec"]["replicas"]
    assert "maxUnavailable" not in budget["spec"]
    pod_labels = pods["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["spec"]["selector"] == pods["spec"]["selector"]


def test_replicas_are_spread_over_nodes_and_zones(built: list[Manifest]) -> None:
    pod_labels = load(built, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    constraints = {c["topologyKey"]: c for c in pod_spec(built)["topologySpreadConstraints"]}
    assert set(constraints) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for constraint in constraints.values():
        assert constraint["maxSkew"] == 1
        assert constraint["labelSelector"]["matchLabels"].items() <= pod_labels.items()


def build_with_persistent_state(tmp_path: Path) -> list[Manifest]:
    """An overlay of the kustomization with the persistent-state component, as a user's
    would be (kustomize takes only relative paths)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(K8S_DIR, overlay)
    component = os.path.relpath(PERSISTENT_STATE, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [base], "components": [component]}), encoding="utf-8"
    )
    return kustomize(overlay)


def test_persistent_state_gives_each_pod_a_claim(tmp_path: Path) -> None:
    """The component swaps the state emptyDir for a ReadWriteOnce claim per pod (a
    volumeClaimTemplate under the same name, so the mount is unchanged), writable by the
    exporter's group; nothing else changes."""
    persistent = build_with_persistent_state(tmp_path)
    for manifest in persistent:
        check_manifest(manifest)
    name = state_volume_name(persistent)
    spec = load(persistent, "StatefulSet")["spec"]
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == name
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"]
    pod = spec["template"]["spec"]
    assert name not in {volume["name"] for volume in pod["volumes"]}
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    # everything else as without it
    plain_build = kustomize(K8S_DIR)  # not the module's `built`, which tests change
    plain = load(plain_build, "StatefulSet")
    del spec["volumeClaimTemplates"]
    for security in (pod["securityContext"], plain["spec"]["template"]["spec"]["securityContext"]):
        security.pop("fsGroup", None)
        security.pop("fsGroupChangePolicy", None)
    plain_pod = plain["spec"]["template"]["spec"]
    plain_pod["volumes"] = [v for v in plain_pod["volumes"] if v["name"] != name]
    assert spec == plain["spec"]
    others = [o for o in persistent if o["kind"] != "StatefulSet"]
    assert others == [o for o in plain_build if o["kind"] != "StatefulSet"]


def snake(rule: dict[str, Any]) -> dict[str, Any]:
    """An Operator relabeling (camelCase) as Prometheus writes it."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {names.get(key, key): value for key, value in rule.items()}


def operator_scrape_config(
    monitor: Manifest, service: Manifest, endpoint: dict[str, Any]
) -> dict[str, Any]:
    """The scrape job the Prometheus Operator generates for one ServiceMonitor endpoint, with
    the discovery replaced by static targets: its own relabeling (its promcfg.go: keep the
    selected Service and port; then namespace, service, pod, container, job and endpoint),
    then the endpoint's ``relabelings``, in that order."""
    rules: list[dict[str, Any]] = []
    for key, value in monitor["spec"]["selector"]["matchLabels"].items():
        label = re.sub(r"[^a-zA-Z0-9_]", "_", key)
        rules.append(
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_service_label_{label}",
                    f"__meta_kubernetes_service_labelpresent_{label}",
                ],
                "regex": f"({value});true",
            }
        )
    rules.append(
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": endpoint["port"],
        }
    )
    for meta, target in (
        ("namespace", "namespace"),
        ("service_name", "service"),
        ("pod_name", "pod"),
        ("pod_container_name", "container"),
        ("service_name", "job"),
    ):
        rules.append({"source_labels": [f"__meta_kubernetes_{meta}"], "target_label": target})
    rules.append({"target_label": "endpoint", "replacement": endpoint["port"]})
    rules += [snake(rule) for rule in endpoint.get("relabelings", [])]
    assert monitor["metadata"]["name"] == service["metadata"]["name"]
    return {
        "job_name": f"serviceMonitor/monitoring/{monitor['metadata']['name']}/0",
        "metrics_path": endpoint["path"],
        "scrape_interval": endpoint["interval"],
        "scrape_timeout": endpoint["scrapeTimeout"],
        "relabel_configs": rules,
    }


def discovered_pod(service: Manifest, pod: str, container_name: str) -> dict[str, str]:
    """The meta labels Kubernetes service discovery (role endpoints) gives a pod behind
    ``service`` in namespace ``monitoring``."""
    labels = {
        "__meta_kubernetes_namespace": "monitoring",
        "__meta_kubernetes_service_name": service["metadata"]["name"],
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_container_name": container_name,
        "__meta_kubernetes_endpoint_port_name": service["spec"]["ports"][0]["name"],
    }
    for key, value in service["metadata"]["labels"].items():
        label = re.sub(r"[^a-zA-Z0-9_]", "_", key)
        labels[f"__meta_kubernetes_service_label_{label}"] = value
        labels[f"__meta_kubernetes_service_labelpresent_{label}"] = "true"
    return labels


@pytest.mark.integration
def test_servicemonitor_makes_the_pods_one_logical_exporter(
    built: list[Manifest], prometheus: PrometheusServers
) -> None:
    """In a real Prometheus, the Operator's scrape job for the ServiceMonitor gives both
    pods the same `instance` (namespace/Service) and each its pod name as
    `exporter_replica`, and no other label that differs between them (the Operator's
    `pod` is dropped), so that folding `exporter_replica` leaves one series."""
    monitor, service = load(built, "ServiceMonitor"), load(built, "Service")
    (endpoint,) = monitor["spec"]["endpoints"]
    job = operator_scrape_config(monitor, service, endpoint)
    name = container(built)["name"]
    pods = [f"{load(built, 'StatefulSet')['metadata']['name']}-{i}" for i in range(2)]
    job["static_configs"] = [
        {"targets": [f"127.0.0.1:{free_port()}"], "labels": discovered_pod(service, pod, name)}
        for pod in pods
    ]
    server = prometheus.create()
    server.config["scrape_configs"] = [job]
    server.start()
    wait_until(
        lambda: len(server.targets()) == 2, timeout=30, message="the pods' targets never appeared"
    )
    labels = sorted((t["labels"] for t in server.targets()), key=lambda t: t["exporter_replica"])
    common = {
        "job": service["metadata"]["name"],
        "instance": f"monitoring/{service['metadata']['name']}",
        "namespace": "monitoring",
        "service": service["metadata"]["name"],
        "container": name,
        "endpoint": endpoint["port"],
    }
    assert labels == [{**common, "exporter_replica": pod} for pod in pods]


def test_probe_replicas_are_one_logical_exporter_too(built: list[Manifest]) -> None:
    """The probe kustomization's replicas' own /metrics (job ledger-exporter too) carry the
    same relabelings: their `LedgerExporterDown` pages only when none is up."""
    (daemon,) = load(built, "ServiceMonitor")["spec"]["endpoints"]
    probe = only(kustomize(K8S_DIR / "probe"), "ServiceMonitor")
    (endpoint,) = probe["spec"]["endpoints"]
    assert endpoint["relabelings"] == daemon["relabelings"]
