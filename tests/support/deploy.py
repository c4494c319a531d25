"""What the deployment checks share: the Kubernetes version validated against, the durations
the manifests write, the real helm and kustomize that build them, and the checks every built
object passes (core kinds against the Kubernetes schemas, the Prometheus Operator's kinds
against the fields and values their CRDs take)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.support.testdata import REPO

#: The Kubernetes release whose schemas (bundled with kubernetes-validate) the manifests meet.
KUBERNETES_VERSION = "1.34"
#: A Prometheus Operator duration such as ``30s`` or ``1m30s``.
DURATION = re.compile(r"^(\d+(ms|s|m|h))+$")
#: helm and kubectl (with kustomize), installed by `make tools` (tools/kube_tools.py).
TOOLS_BIN = REPO / ".tools" / "bin"
#: The kinds kubernetes-validate's schemas hold, and the Operator's (no schema here).
CORE_KINDS = frozenset(
    {
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    }
)
OPERATOR_KINDS = frozenset({"Probe", "PrometheusRule", "ScrapeConfig", "ServiceMonitor"})

Manifest = dict[str, Any]


def seconds(duration: str) -> float:
    """Seconds of a ``DURATION``."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", duration))


def kube_tool(name: str) -> Path:
    """The path of ``helm`` or ``kubectl``; the test fails, naming `make tools`, without it."""
    path = TOOLS_BIN / name
    if not path.is_file():
        pytest.fail(
            f"{path} not found: `make tools` installs helm and kubectl (tools/kube_tools.py)"
        )
    return path


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``helm`` or ``kubectl`` with ``args``, whatever its exit status."""
    return subprocess.run(
        [str(kube_tool(name)), *args], capture_output=True, text=True, check=False, timeout=300
    )


def documents(text: str) -> list[Manifest]:
    """The objects of a multi-document YAML stream, empty documents left out."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kustomize(directory: Path) -> list[Manifest]:
    """`kubectl kustomize directory`: what `kubectl apply -k` would send."""
    built = run_tool("kubectl", "kustomize", str(directory))
    assert built.returncode == 0, f"kustomize build of {directory} failed:\n{built.stderr}"
    return documents(built.stdout)


def by_kind(objects: Iterable[Manifest], kind: str) -> list[Manifest]:
    """The objects of one kind, in their order."""
    return [obj for obj in objects if obj["kind"] == kind]


def only(objects: Iterable[Manifest], kind: str) -> Manifest:
    """The one object of ``kind``."""
    (found,) = by_kind(objects, kind)
    return found


#: The kinds that run the exporter's pods: a Deployment, or a StatefulSet (daemon mode's HA
#: pair, each replica with its own state).
WORKLOAD_KINDS = ("Deployment", "StatefulSet")


def workload(objects: Iterable[Manifest]) -> Manifest:
    """The one Deployment or StatefulSet among ``objects``."""
    (found,) = [obj for obj in objects if obj["kind"] in WORKLOAD_KINDS]
    return found


def pod_spec(objects: Iterable[Manifest]) -> dict[str, Any]:
    """The pod template of the one Deployment or StatefulSet among ``objects``."""
    spec: dict[str, Any] = workload(objects)["spec"]["template"]["spec"]
    return spec


def container(objects: Iterable[Manifest]) -> dict[str, Any]:
    """The one container of that pod."""
    (one,) = pod_spec(objects)["containers"]
    result: dict[str, Any] = one
    return result


# --- the checks every built object passes ----------------------------------------------------

#: Fields of the Operator's objects (monitoring.coreos.com/v1 and v1alpha1) the project's
#: manifests may use: a misspelt one is an error here as the API server's schema makes it one.
SERVICE_MONITOR_SPEC = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels"}
ENDPOINT_KEYS = {
    "port",
    "path",
    "scheme",
    "params",
    "interval",
    "scrapeTimeout",
    "tlsConfig",
    "basicAuth",
    "relabelings",
    "metricRelabelings",
    "honorLabels",
}
PROBE_SPEC = {
    "jobName",
    "prober",
    "module",
    "interval",
    "scrapeTimeout",
    "targets",
    "tlsConfig",
    "basicAuth",
    "metricRelabelings",
}
RELABEL_KEYS = {"sourceLabels", "separator", "regex", "targetLabel", "replacement", "action"}
RELABEL_ACTIONS = {"replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep"}
SECRET_KEY_SELECTOR = {"name", "key"}
RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}


def _check_relabelings(rules: list[Manifest], where: str) -> None:
    for rule in rules:
        assert set(rule) <= RELABEL_KEYS, f"{where}: unknown relabeling keys {rule}"
        assert rule.get("action", "replace") in RELABEL_ACTIONS, f"{where}: {rule}"
        if rule.get("action", "replace") == "replace":
            assert "targetLabel" in rule, f"{where}: a replace relabeling needs targetLabel"


def _check_scrape_auth(settings: Manifest, where: str) -> None:
    if "basicAuth" in settings:
        assert set(settings["basicAuth"]) == {"username", "password"}, where
        for part in settings["basicAuth"].values():
            assert set(part) == SECRET_KEY_SELECTOR, f"{where}: basicAuth takes Secret keys"
    if "tlsConfig" in settings:
        assert set(settings["tlsConfig"]) <= {
            "ca",
            "cert",
            "keySecret",
            "serverName",
            "insecureSkipVerify",
        }, where


def _check_timing(settings: Manifest, where: str) -> None:
    assert DURATION.match(settings["interval"]), f"{where}: interval {settings['interval']}"
    assert DURATION.match(settings["scrapeTimeout"]), where
    assert seconds(settings["scrapeTimeout"]) <= seconds(settings["interval"]), where


def check_service_monitor(monitor: Manifest) -> None:
    """A ServiceMonitor's fields, endpoints and relabelings."""
    where = f"ServiceMonitor {monitor['metadata']['name']}"
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC, f"{where}: {set(spec) - SERVICE_MONITOR_SPEC}"
    assert spec["selector"]["matchLabels"], f"{where} selects nothing"
    assert spec["endpoints"], f"{where}: without endpoints it scrapes nothing"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= ENDPOINT_KEYS, f"{where}: {set(endpoint) - ENDPOINT_KEYS}"
        assert endpoint["path"] in {"/metrics", "/probe"}, where
        assert endpoint.get("scheme", "http") in {"http", "https"}, where
        for values in endpoint.get("params", {}).values():
            assert isinstance(values, list) and all(isinstance(v, str) for v in values)
        _check_timing(endpoint, where)
        _check_scrape_auth(endpoint, where)
        _check_relabelings(endpoint.get("relabelings", []), where)
        _check_relabelings(endpoint.get("metricRelabelings", []), where)


def check_probe(probe: Manifest) -> None:
    """A Probe's fields, prober and static targets."""
    where = f"Probe {probe['metadata']['name']}"
    spec = probe["spec"]
    assert set(spec) <= PROBE_SPEC, f"{where}: {set(spec) - PROBE_SPEC}"
    assert set(spec["prober"]) <= {"url", "path", "scheme"}, where
    assert spec["prober"]["path"] == "/probe", where
    assert spec["prober"].get("scheme", "http") in {"http", "https"}, where
    _check_timing(spec, where)
    _check_scrape_auth(spec, where)
    assert set(spec["targets"]) == {"staticConfig"}, where
    static = spec["targets"]["staticConfig"]
    assert set(static) <= {"static", "labels", "relabelingConfigs"}, where
    assert static["static"], f"{where} lists no target"
    assert all(isinstance(v, str) for v in static.get("labels", {}).values()), where
    _check_relabelings(static.get("relabelingConfigs", []), where)


def check_prometheus_rule(rule: Manifest) -> None:
    """A PrometheusRule's groups: unique names, each rule a record or an alert."""
    where = f"PrometheusRule {rule['metadata']['name']}"
    assert set(rule["spec"]) == {"groups"}, where
    names = [group["name"] for group in rule["spec"]["groups"]]
    assert len(names) == len(set(names)), f"{where}: Prometheus needs unique group names"
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules"}, where
        for entry in group["rules"]:
            assert set(entry) <= RULE_KEYS, f"{where}: {set(entry) - RULE_KEYS}"
            assert ("record" in entry) != ("alert" in entry), f"{where}: {entry}"
            assert isinstance(entry["expr"], str) and entry["expr"].strip(), where
            for labels in (entry.get("labels", {}), entry.get("annotations", {})):
                assert all(isinstance(v, str) for v in labels.values()), f"{where}: {entry}"


def check_manifest(manifest: Manifest) -> None:
    """Core kinds strictly against the Kubernetes schemas, the Operator's kinds by their
    fields; any other kind is an error (nothing ships that nothing checks)."""
    kind = manifest["kind"]
    assert manifest["metadata"]["name"], f"a {kind} without a name"
    if kind in CORE_KINDS:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        return
    assert kind in OPERATOR_KINDS, f"{kind}: a kind no test validates"
    assert manifest["apiVersion"].startswith("monitoring.coreos.com/"), manifest["apiVersion"]
    assert set(manifest) == {"apiVersion", "kind", "metadata", "spec"}, kind
    checks = {
        "ServiceMonitor": check_service_monitor,
        "Probe": check_probe,
        "PrometheusRule": check_prometheus_rule,
    }
    if kind in checks:
        checks[kind](manifest)
