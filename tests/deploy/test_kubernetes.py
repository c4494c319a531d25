"""Offline checks of deploy/kubernetes/ (no cluster here), as the real kustomize builds it.

`kubectl kustomize` (make tools) builds the kustomization, which `kubectl apply -k` would
send. Core kinds of the build validate strictly against the Kubernetes OpenAPI schemas
that kubernetes-validate bundles. The Prometheus Operator's CRDs (ServiceMonitor,
PrometheusRule) are not in those schemas, so their fields are checked explicitly
(tests/support/deploy.py), as are the references between objects that no schema sees
(selectors, port names, the ConfigMap key the config path relies on).
"""

from __future__ import annotations

import re
from pathlib import Path

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
from tests.support.testdata import REPO

K8S_DIR = REPO / "deploy" / "kubernetes"
CORE_KINDS = {"Deployment", "Service", "ConfigMap", "ServiceAccount", "Secret"}
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
    document = only(built, "Deployment")
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


def test_deployment_is_hardened(built: list[Manifest]) -> None:
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


def test_deployment_probes_and_resources(built: list[Manifest]) -> None:
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
    deployment = load(built, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
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
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "scheme"}
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
