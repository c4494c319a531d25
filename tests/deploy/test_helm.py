"""The Helm chart (deploy/helm/ledger-exporter/) built by the real helm (no cluster here).

`helm lint --strict` and `helm template` run with the defaults and with every
ci/*-values.yaml; each rendered object is validated as the Kustomize manifests are
(tests/support/deploy.py), then the tests assert on the objects: a hardened pod, the config
checked by the exporter's own reader in a copy of the pod's file tree, credentials only
from mounted Secrets, scrapes that follow the web config, the mixin's rules and dashboards
whole, probe targets the exporter's allow-list accepts, and values that a typo fails.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from exporter import __version__
from exporter.config.exporter import parse_config
from exporter.config.web import load_web_config
from exporter.errors import ProbeRefusedError
from exporter.web.probe_endpoint import probe_target
from tests.support.certs import Pki
from tests.support.deploy import (
    Manifest,
    by_kind,
    check_manifest,
    container,
    documents,
    only,
    pod_spec,
    run_tool,
    seconds,
    workload,
)
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch
from tests.support.monitoring import REPLICA_LABEL
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.prometheus import PrometheusServers, Promtool
from tests.support.testdata import REPO
from tests.support.waiting import wait_until
from tools import render_key_folding, render_mixin

CHART = REPO / "deploy" / "helm" / "ledger-exporter"
#: "defaults", then the name of each ci/*-values.yaml.
CASES = ["defaults", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
NAMESPACE = "monitoring"
RELEASE = "ledger"
CONFIG_DIR = "/etc/ledger-exporter/config"
ALERTS = (REPO / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8")


def values_file(case: str) -> dict[str, Any]:
    if case == "defaults":
        return {}
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / case).read_text(encoding="utf-8"))
    return loaded


def helm_template(*args: str) -> list[Manifest]:
    """`helm template` of the chart as release ``ledger`` in ``monitoring``."""
    answer = run_tool("helm", "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    assert answer.returncode == 0, f"helm template {args} failed:\n{answer.stderr}"
    return documents(answer.stdout)


def case_args(case: str) -> list[str]:
    return [] if case == "defaults" else ["-f", str(CHART / "ci" / case)]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Manifest]]:
    """Every case's objects, rendered once for the module."""
    return {case: helm_template(*case_args(case)) for case in CASES}


def flag(objects: list[Manifest], name: str) -> str | None:
    values = [arg.split("=", 1)[1] for arg in container(objects)["args"] if arg.startswith(name)]
    assert len(values) <= 1, f"{name} given twice"
    return values[0] if values else None


def exporter_config(objects: list[Manifest]) -> str:
    """The config.yml the pod reads, from the ConfigMap its config volume names."""
    (volume,) = [v for v in pod_spec(objects)["volumes"] if v["name"] == "config"]
    name = volume["configMap"]["name"]
    (configmap,) = [c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"] == name]
    text: str = configmap["data"]["config.yml"]
    return text


def mounts(objects: list[Manifest]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each volume mount of the container with the volume it mounts: a volume of the pod, or
    a claim template of the StatefulSet (as ``{"name", "volumeClaimTemplate"}``)."""
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    for template in workload(objects)["spec"].get("volumeClaimTemplates", []):
        name = template["metadata"]["name"]
        assert name not in volumes, f"{name}: a volume and a claim template"
        volumes[name] = {"name": name, "volumeClaimTemplate": template}
    for mount in container(objects)["volumeMounts"]:
        yield mount, volumes[mount["name"]]


def referenced(config: Any, suffix: str) -> Iterator[str]:
    """The values of the keys ending in ``suffix`` (_file, _env) anywhere in a config."""
    if isinstance(config, dict):
        for key, value in config.items():
            if key.endswith(suffix) and isinstance(value, str):
                yield value
            else:
                yield from referenced(value, suffix)
    elif isinstance(config, list):
        for item in config:
            yield from referenced(item, suffix)


def selects(selector: dict[str, Any], obj: Manifest) -> bool:
    """Whether a label selector (matchLabels, and matchExpressions' In, NotIn, Exists and
    DoesNotExist) picks ``obj`` by its labels."""
    labels = obj["metadata"].get("labels", {})
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        if operator in ("In", "NotIn"):
            held = (labels.get(key) in expression["values"]) == (operator == "In")
        else:
            held = (key in labels) == (operator == "Exists")
        if not held:
            return False
    return True


# --- the real tools ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_helm_lint_strict(case: str) -> None:
    answer = run_tool("helm", "lint", "--strict", str(CHART), *case_args(case))
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in answer.stdout


@pytest.mark.parametrize("case", CASES)
def test_every_rendered_object_validates(rendered: dict[str, list[Manifest]], case: str) -> None:
    objects = rendered[case]
    assert objects
    for manifest in objects:
        check_manifest(manifest)
        assert manifest["metadata"].get("namespace") == NAMESPACE or (
            manifest["kind"] == "ConfigMap"
            and "grafana_dashboard" in manifest["metadata"]["labels"]
        ), f"{manifest['kind']} {manifest['metadata']['name']} outside the release's namespace"
    names = [(m["kind"], m["metadata"]["name"]) for m in objects]
    assert len(names) == len(set(names)), "two objects of one kind share a name"


def test_the_validators_can_fail(rendered: dict[str, list[Manifest]]) -> None:
    """A misspelt field fails the Kubernetes schema; one in a ServiceMonitor fails too."""
    statefulset = only(rendered["defaults"], "StatefulSet")
    statefulset["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        check_manifest(statefulset)
    monitor = only(helm_template(), "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["scrapeTimout"] = "10s"
    with pytest.raises(AssertionError, match="scrapeTimout"):
        check_manifest(monitor)


def test_the_defaults_and_each_kind_of_case_are_there() -> None:
    """The cases the issue asks for: minimal, TLS with basic auth, probe mode, persistence
    with a network policy."""
    kinds = {case: values_file(case) for case in CASES[1:]}
    assert any(v.get("config", {}).keys() == {"nodes"} and len(v) == 1 for v in kinds.values())
    assert any(
        "tls_server_config" in v.get("webConfig", {}).get("config", {}) for v in kinds.values()
    )
    assert any(
        "basic_auth_users" in v.get("webConfig", {}).get("config", {}) for v in kinds.values()
    )
    assert {v.get("probe", {}).get("kind") for v in kinds.values()} >= {"Probe", "ServiceMonitor"}
    assert any(
        v.get("persistence", {}).get("enabled") and v.get("networkPolicy", {}).get("enabled")
        for v in kinds.values()
    )


# --- values and versions -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--set", "serviceMonitor.intervall=1m"],
        ["--set", "replica=2"],
        ["--set", "probe.kind=Pod"],
        ["--set", "persistence.size=a lot"],
        [
            "--set",
            "probe.enabled=true",
            "--set",
            "probe.targets[0].name=n",
            "--set-string",
            "probe.targets[0].url=ftp://node/",
        ],
    ],
    ids=["typo-nested", "typo-top", "bad-enum", "bad-size", "bad-target-url"],
)
def test_a_values_typo_fails(args: list[str]) -> None:
    """values.schema.json refuses unknown keys and bad values, in install and lint alike."""
    answer = run_tool("helm", "template", RELEASE, str(CHART), *args)
    assert answer.returncode != 0
    assert "values don't meet the specifications of the schema" in answer.stderr
    wrong = args[-1].split("=")[0].split(".")[-1].split("[")[0]
    assert wrong in answer.stderr or "value must be" in answer.stderr, answer.stderr
    assert run_tool("helm", "lint", "--strict", str(CHART), *args).returncode != 0


def test_every_key_of_values_yaml_is_in_the_schema() -> None:
    """The schema forbids unknown keys: the defaults themselves must all be known."""
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        if node.get("additionalProperties") is False and isinstance(value, dict):
            for key, sub in value.items():
                assert key in node["properties"], f"{path}{key} is not in values.schema.json"
                walk(node["properties"][key], sub, f"{path}{key}.")

    walk(schema, values, "")
    assert set(values) == set(schema["properties"]) - {"global"}, "schema keys without default"


def test_chart_version_follows_the_project() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["version"] == __version__
    assert chart["appVersion"] == __version__


def test_image_tag_defaults_to_app_version_and_a_digest_wins(
    rendered: dict[str, list[Manifest]],
) -> None:
    assert container(rendered["defaults"])["image"] == (
        f"ghcr.io/ledger-exporter/ledger-exporter:{__version__}"
    )
    values = values_file("web-config-values.yaml")["image"]
    assert container(rendered["web-config-values.yaml"])["image"] == (
        f"{values['registry']}/ledger-exporter/ledger-exporter@{values['digest']}"
    )


# --- the pod -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_pod_runs_non_root_and_locked_down(rendered: dict[str, list[Manifest]], case: str) -> None:
    objects = rendered[case]
    pod = pod_spec(objects)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532, "the image's fixed uid"
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    security = container(objects)["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    account = only(objects, "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert account["automountServiceAccountToken"] is False
    for kind in ("requests", "limits"):
        assert set(container(objects)["resources"][kind]) == {"cpu", "memory"}


@pytest.mark.parametrize("case", CASES)
def test_service_and_selectors_reach_the_pods(
    rendered: dict[str, list[Manifest]], case: str
) -> None:
    objects = rendered[case]
    pods = workload(objects)["spec"]["template"]["metadata"]["labels"]
    assert workload(objects)["spec"]["selector"]["matchLabels"].items() <= pods.items()
    services = by_kind(objects, "Service")
    (service,) = [s for s in services if s["spec"].get("clusterIP") != "None"]
    for each in services:
        assert each["spec"]["selector"].items() <= pods.items()
        (port,) = each["spec"]["ports"]
        assert port["targetPort"] == "metrics"
        assert f":{port['port']}" == flag(objects, "--web.listen-address")
    for monitor in by_kind(objects, "ServiceMonitor"):
        # through the chart's Service only: the headless one would scrape each pod twice
        assert [s for s in services if selects(monitor["spec"]["selector"], s)] == [service]
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} == {port["name"]}
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for policy in by_kind(objects, kind):
            key = "selector" if kind == "PodDisruptionBudget" else "podSelector"
            assert policy["spec"][key]["matchLabels"].items() <= pods.items()


@pytest.mark.parametrize("case", CASES)
def test_config_is_mounted_and_the_exporter_accepts_it(
    rendered: dict[str, list[Manifest]],
    case: str,
    tmp_path: Path,
    pki: Pki,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pod's file tree is laid out under tmp_path (the ConfigMap's config, a stand-in
    for each file the config names) and its variables set, and the exporter's own reader
    checks the config."""
    objects = rendered[case]
    config_file = flag(objects, "--config.file")
    config_mounts = [m for m, v in mounts(objects) if "configMap" in v and m["name"] == "config"]
    (mount,) = config_mounts  # the node lists' (nodeFiles): tests/deploy/test_live_config.py
    (item,) = next(v for m, v in mounts(objects) if m is mount)["configMap"]["items"]
    assert mount["readOnly"] is True and mount["mountPath"] == CONFIG_DIR
    assert f"{mount['mountPath']}/{item['path']}" == config_file
    text = exporter_config(objects)
    for path in referenced(yaml.safe_load(text), "_file"):
        stand_in = tmp_path / path.lstrip("/")
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith(".crt"):
            shutil.copy(pki.ca, stand_in)
        else:
            stand_in.write_text("secret\n", encoding="utf-8")
    env = {e["name"]: e for e in container(objects).get("env", [])}
    for name in referenced(yaml.safe_load(text), "_env"):
        assert "secretKeyRef" in env[name]["valueFrom"], f"{name}: not from a Secret"
        monkeypatch.setenv(name, "secret")
    config = parse_config(text.replace("/etc/ledger-exporter/", f"{tmp_path}/etc/ledger-exporter/"))
    expected = values_file(case).get("config", {}).get("nodes")
    if expected is None:
        expected = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))["config"][
            "nodes"
        ]
    assert [node.name for node in config.nodes] == [node["name"] for node in expected]


@pytest.mark.parametrize("case", CASES)
def test_credentials_come_from_mounted_secrets_never_inlined(
    rendered: dict[str, list[Manifest]], case: str
) -> None:
    """Every file the config names is on a read-only Secret volume; no ConfigMap holds a
    password, a token or a bcrypt hash; the web config is a mounted Secret too."""
    objects = rendered[case]
    secret_dirs = [
        m["mountPath"] for m, v in mounts(objects) if "secret" in v and m.get("readOnly") is True
    ]
    config = yaml.safe_load(exporter_config(objects))
    for path in referenced(config, "_file"):
        assert any(path.startswith(f"{d}/") for d in secret_dirs), f"{path}: on no Secret mount"
    for configmap in by_kind(objects, "ConfigMap"):
        for text in configmap["data"].values():
            assert not re.search(r"\b(password|credentials):", text), configmap["metadata"]["name"]
            assert "$2b$" not in text and "$2y$" not in text
    web_config = flag(objects, "--web.config.file")
    # the opt-in Alertmanager config (alertmanagerConfig.enabled) is for your Alertmanager,
    # not mounted by the exporter: routes and placeholder webhooks, no credential of ours
    ours = [
        s
        for s in by_kind(objects, "Secret")
        if set(s.get("stringData", {})) != {"alertmanager.yaml"}
    ]
    if web_config is None:
        assert not ours
        return
    (secret,) = ours
    (volume,) = [v for m, v in mounts(objects) if web_config.startswith(f"{m['mountPath']}/")]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert web_config.rsplit("/", 1)[1] in secret["stringData"]
    if values_file(case).get("existingSecret"):
        (secrets,) = [
            v for m, v in mounts(objects) if m["mountPath"] == "/etc/ledger-exporter/secrets"
        ]
        assert secrets["secret"]["secretName"] == values_file(case)["existingSecret"]
    assert not container(objects).get("env") or all(
        "value" not in e or not re.search("password|token", e["name"], re.I)
        for e in container(objects)["env"]
    )


SECRET = "s3cret-value"
NODE = {"name": "validator-2", "url": "http://validator-2:7740/"}
FILE_OR_ENV = ("existingSecret", "extraSecretMounts", "extraEnv", "secretKeyRef")


@pytest.mark.parametrize(
    ("values", "where", "key", "instead"),
    [
        (
            {"config": {"nodes": [{**NODE, "basic_auth": {"username": "u", "password": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "basic_auth.password",
            ("password_file", "password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "basic_auth": f"u:{SECRET}"}]}},
            "config.nodes[0] (validator-2)",
            "basic_auth must be a mapping",
            ("password_file", "password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "authorization": {"credentials": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "authorization.credentials",
            ("credentials_file", "credentials_env"),
        ),
        (
            {"config": {"nodes": [NODE, {**NODE, "name": "v3", "headers": {"X-Api-Key": SECRET}}]}},
            "config.nodes[1] (v3)",
            "headers.X-Api-Key",
            ("credentials_file", "credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "url": f"https://monitor:{SECRET}@validator-2:7740/"}]}},
            "config.nodes[0] (validator-2)",
            "url has user-info",
            ("basic_auth", "password_file", "password_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [{"name": "validator-2", "url": NODE["url"], "module": "auth"}],
                    "modules": {"auth": {"basic_auth": {"username": "u", "password": SECRET}}},
                }
            },
            "probe.modules.auth",
            "basic_auth.password",
            ("password_file", "password_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [{"name": "validator-2", "url": NODE["url"]}],
                    "modules": {"default": {"authorization": {"credentials": SECRET}}},
                }
            },
            "probe.modules.default",
            "authorization.credentials",
            ("credentials_file", "credentials_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [{"name": "validator-2", "url": NODE["url"]}],
                    "modules": {"default": {"headers": {"Authorization": f"Bearer {SECRET}"}}},
                }
            },
            "probe.modules.default",
            "headers.Authorization",
            ("credentials_file", "credentials_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [
                        {"name": "validator-2", "url": f"http://u:{SECRET}@validator-2:7740/"}
                    ],
                }
            },
            "probe.targets validator-2",
            "url has user-info",
            ("probe.modules", "password_file", "password_env"),
        ),
        # other spellings (the chart's own serviceMonitor.basicAuth among them): the exporter
        # refuses each as an unknown key, but only once the ConfigMap is out
        (
            {"config": {"nodes": [{**NODE, "basicAuth": {"username": "u", "password": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "basicAuth.password",
            ("basic_auth.password_file", "basic_auth.password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "basic_auth": {"username": "u", "Password": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "basic_auth.Password",
            ("password_file", "password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "basic_auth": {"username": "u", "password ": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            'basic_auth."password "',
            ("password_file", "password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "Authorization": {"credentials": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "Authorization.credentials",
            ("authorization.credentials_file", "authorization.credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "Headers": {"X-Api-Key": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            "Headers.X-Api-Key",
            ("credentials_file", "credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "Basic-Auth": {"more": [{"PASS_WORD": SECRET}]}}]}},
            "config.nodes[0] (validator-2)",
            "Basic-Auth.more[0].PASS_WORD",
            ("password_file", "password_env"),
        ),
        (
            {
                "config": {
                    "nodes": [{**NODE, "authorization": {"type": "Bearer"}, "Password": SECRET}]
                }
            },
            "config.nodes[0] (validator-2)",
            "Password would be written",
            ("password_file", "credentials_file", "password_env", "credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "URL": f"https://monitor:{SECRET}@validator-2:7740/"}]}},
            "config.nodes[0] (validator-2)",
            "URL has user-info",
            ("basic_auth", "password_file", "password_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [{"name": "validator-2", "url": NODE["url"]}],
                    "modules": {"default": {"basicauth": {"password": SECRET}}},
                }
            },
            "probe.modules.default",
            "basicauth.password",
            ("password_file", "password_env"),
        ),
        # look-alikes: Unicode-normalised (NFKC) and folded before they are compared
        (
            {
                "config": {
                    "nodes": [{**NODE, "basic_auth": {"username": "u", "p\u0430ssword": SECRET}}]
                }
            },
            "config.nodes[0] (validator-2)",
            'basic_auth."p\u0430ssword"',
            ("password_file", "password_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "authorization": {"credenti\u0430ls": SECRET}}]}},
            "config.nodes[0] (validator-2)",
            'authorization."credenti\u0430ls"',
            ("credentials_file", "credentials_env"),
        ),
        (
            {
                "config": {
                    "nodes": [{**NODE, "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44": SECRET}]
                }
            },
            "config.nodes[0] (validator-2)",
            '"\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44" would be written',
            ("password_file", "credentials_file"),
        ),
        (
            {"config": {"nodes": [{**NODE, "P\u0391SSW\u039fRD": SECRET}]}},
            "config.nodes[0] (validator-2)",
            '"P\u0391SSW\u039fRD" would be written',
            ("password_file", "credentials_file"),
        ),
        (
            {"config": {"nodes": [{**NODE, "pa\u0301ssword": SECRET}]}},
            "config.nodes[0] (validator-2)",
            '"pa\u0301ssword" would be written',
            ("password_file", "credentials_file"),
        ),
        (
            {"config": {"nodes": [{**NODE, "pass\u200bword": SECRET}]}},
            "config.nodes[0] (validator-2)",
            'the key "pass\\u200bword" holds characters outside ASCII',
            ("password_file", "credentials_file"),
        ),
        (
            {"config": {"nodes": [{**NODE, "api_key": SECRET}]}},
            "config.nodes[0] (validator-2)",
            "api_key would be written",
            ("password_file", "credentials_file"),
        ),
        # a secret where the exporter reads none: a token after the scheme, a password
        # after the user name
        (
            {"config": {"nodes": [{**NODE, "authorization": {"type": f"Bearer {SECRET}"}}]}},
            "config.nodes[0] (validator-2)",
            "authorization.type must be the scheme alone",
            ("Secret", "credentials_file", "credentials_env"),
        ),
        (
            {
                "probe": {
                    "enabled": True,
                    "targets": [{"name": "validator-2", "url": NODE["url"]}],
                    "modules": {"default": {"authorization": {"t\u0443pe": f"Bearer\t{SECRET}"}}},
                }
            },
            "probe.modules.default",
            'authorization."t\u0443pe" must be the scheme alone',
            ("credentials_file", "credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "authorization": {"type": "Bearer" + "x" * 40}}]}},
            "config.nodes[0] (validator-2)",
            "authorization.type must be the scheme alone",
            ("credentials_file", "credentials_env"),
        ),
        (
            {"config": {"nodes": [{**NODE, "basic_auth": {"username": f"u:{SECRET}"}}]}},
            "config.nodes[0] (validator-2)",
            "basic_auth.username holds a colon",
            ("password_file", "password_env"),
        ),
    ],
    ids=[
        "password",
        "basic-auth-string",
        "credentials",
        "header",
        "url-user-info",
        "module-password",
        "module-credentials",
        "module-header",
        "probe-target-user-info",
        "camel-case-block",
        "capitalised-password",
        "password-with-a-space",
        "capitalised-authorization",
        "capitalised-headers",
        "nested-deeper-with-underscores",
        "password-beside-the-blocks",
        "capitalised-url",
        "module-lower-case-block",
        "cyrillic-a-in-password",
        "cyrillic-a-in-credentials",
        "full-width-password",
        "greek-capitals-in-password",
        "combining-accent",
        "zero-width-space",
        "api-key",
        "bearer-token-in-type",
        "module-token-in-look-alike-type",
        "token-glued-to-the-scheme",
        "password-in-username",
    ],
)
def test_an_inline_node_credential_fails_the_render(
    tmp_path: Path, values: dict[str, Any], where: str, key: str, instead: tuple[str, ...]
) -> None:
    """Issue 34: node credentials never go into a ConfigMap. Each of the exporter's secret
    positions (exporter/config/nodes.py) written in the values stops `helm template` with a
    message naming the node, the key and what to use instead, without showing the secret."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    answer = run_tool("helm", "template", RELEASE, str(CHART), "-f", str(path))
    assert answer.returncode != 0 and not answer.stdout
    message = answer.stderr
    assert f"{where}: {key}" in message, message
    assert "ConfigMap" in message
    for word in (*instead, *FILE_OR_ENV):
        assert word in message, f"{word} not in {message}"
    assert SECRET not in message


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"watch": [{"blockchain": "c1", "api_key": SECRET}]}, "config.watch[0].api_key"),
        ({"maintenance": [{"T\u043ek\u0435n": SECRET}]}, 'config.maintenance[0]."T\u043ek\u0435n"'),
        ({"network_checks": {"secret": SECRET}}, "config.network_checks.secret"),
    ],
    ids=["api-key-in-watch", "cyrillic-token-in-maintenance", "secret-in-network-checks"],
)
def test_a_credential_key_anywhere_in_the_config_fails_the_render(
    tmp_path: Path, config: dict[str, Any], where: str
) -> None:
    """Outside the nodes too: a key naming a credential, folded as the node keys are."""
    path = tmp_path / "values.yaml"
    values = {"config": {"nodes": [NODE], **config}}
    path.write_text(yaml.safe_dump(values, allow_unicode=True), encoding="utf-8")
    answer = run_tool("helm", "template", RELEASE, str(CHART), "-f", str(path))
    assert answer.returncode != 0 and not answer.stdout
    assert f"{where} names a credential" in answer.stderr, answer.stderr
    for word in ("ConfigMap", "credentials_file", *FILE_OR_ENV):
        assert word in answer.stderr
    assert SECRET not in answer.stderr


@pytest.mark.parametrize(
    "key", ["namespaceOverride", "dashboards.namespace", "alertmanagerConfig.namespace"]
)
def test_a_namespace_cannot_add_a_cluster_role_binding(tmp_path: Path, key: str) -> None:
    """A namespace written unquoted let a newline add objects (ClusterRoleBindings to
    cluster-admin): the schema holds every namespace to a DNS label."""
    binding = (
        "monitoring\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        "metadata: {name: pwned}\nroleRef: {kind: ClusterRole, name: cluster-admin}\n"
    )
    for value in (binding, "x" * 64):
        values: dict[str, Any] = {"alertmanagerConfig": {"enabled": True}}
        *parents, last = key.split(".")
        values.setdefault(parents[0], {}) if parents else None
        (values[parents[0]] if parents else values)[last] = value
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values), encoding="utf-8")
        answer = run_tool("helm", "template", RELEASE, str(CHART), "-f", str(path))
        assert answer.returncode != 0 and "ClusterRoleBinding" not in answer.stdout
        assert "values don't meet the specifications of the schema" in answer.stderr
        assert f"'/{key.replace('.', '/')}'" in answer.stderr, answer.stderr


def test_credentials_from_files_and_variables_still_render(tmp_path: Path) -> None:
    """The ways the refusals point to render: *_file from existingSecret, *_env from extraEnv,
    a username, and a URL with no user-info."""
    secrets = "/etc/ledger-exporter/secrets"
    values = {
        "existingSecret": "ledger-node-credentials",
        "extraEnv": [
            {
                "name": "NODE_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "ledger-node-credentials", "key": "t"}},
            }
        ],
        "config": {
            "nodes": [
                {**NODE, "basic_auth": {"username": "u", "password_file": f"{secrets}/v2"}},
                {
                    "name": "v3",
                    "url": "http://v3:7740/",
                    "authorization": {"type": "Bearer", "credentials_env": "NODE_TOKEN"},
                },
            ]
        },
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    config = yaml.safe_load(exporter_config(helm_template("-f", str(path))))
    assert config["nodes"][0]["basic_auth"]["password_file"] == f"{secrets}/v2"
    assert config["nodes"][1]["authorization"]["credentials_env"] == "NODE_TOKEN"


def test_web_config_secret_is_one_the_exporter_loads(
    rendered: dict[str, list[Manifest]], tmp_path: Path, pki: Pki
) -> None:
    """The rendered web config, with the TLS Secret's files in place, loads."""
    objects = rendered["web-config-values.yaml"]
    (secret,) = by_kind(objects, "Secret")
    tls = tmp_path / "etc/ledger-exporter/tls"
    tls.mkdir(parents=True)
    shutil.copy(pki.server.cert, tls / "tls.crt")
    shutil.copy(pki.server.key, tls / "tls.key")
    path = tmp_path / "web-config.yml"
    text = secret["stringData"]["web-config.yml"]
    path.write_text(text.replace("/etc/ledger-exporter/", f"{tmp_path}/etc/ledger-exporter/"))
    web = load_web_config(str(path))
    assert web.ssl_context() is not None and web.basic_auth_users
    (tls_mount,) = [m for m, v in mounts(objects) if m["mountPath"] == "/etc/ledger-exporter/tls"]
    assert tls_mount["readOnly"] is True


# --- scraping -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_scrapes_follow_the_web_config(rendered: dict[str, list[Manifest]], case: str) -> None:
    """https when the web config serves TLS, basic auth when it has users; the kubelet's
    probes use HTTPS then, and a TCP check when every request wants a password."""
    web = values_file(case).get("webConfig", {})
    tls = bool(web.get("enabled") and "tls_server_config" in web.get("config", {}))
    users = bool(web.get("enabled") and web.get("config", {}).get("basic_auth_users"))
    objects = rendered[case]
    endpoints = [e for m in by_kind(objects, "ServiceMonitor") for e in m["spec"]["endpoints"]]
    endpoints += [
        p["spec"] | {"scheme": p["spec"]["prober"]["scheme"]} for p in by_kind(objects, "Probe")
    ]
    assert endpoints
    for endpoint in endpoints:
        assert endpoint["scheme"] == ("https" if tls else "http")
        assert ("basicAuth" in endpoint) == users
        assert ("tlsConfig" in endpoint) == tls
    for probe in ("livenessProbe", "readinessProbe"):
        settings = container(objects)[probe]
        if users:
            assert settings["tcpSocket"] == {"port": "metrics"}
        else:
            assert settings["httpGet"]["scheme"] == ("HTTPS" if tls else "HTTP")


def test_kubelet_probes_can_be_replaced() -> None:
    """For a web config the defaults cannot pass (client certificates required)."""
    objects = helm_template(
        "--set",
        "livenessProbe.tcpSocket.port=metrics",
        "--set",
        "readinessProbe.tcpSocket.port=metrics",
    )
    for probe in ("livenessProbe", "readinessProbe"):
        assert container(objects)[probe] == {"tcpSocket": {"port": "metrics"}}
    check_manifest(workload(objects))


def test_basic_auth_without_scrape_credentials_fails() -> None:
    answer = run_tool(
        "helm",
        "template",
        RELEASE,
        str(CHART),
        "-f",
        str(CHART / "ci" / "web-config-values.yaml"),
        "--set",
        "serviceMonitor.basicAuth=null",
    )
    assert answer.returncode != 0
    assert "serviceMonitor.basicAuth" in answer.stderr


@pytest.mark.parametrize("case", CASES)
def test_jobs_are_the_ones_the_alerts_expect(
    rendered: dict[str, list[Manifest]], case: str
) -> None:
    """Whatever the release is called, /metrics is scraped as job ledger-exporter (the
    exporter's alerts) and probes as ledger-probe (matched by the ledger alerts' job=~)."""
    exporter_jobs = set(re.findall(r'\bjob="([^"]+)"', ALERTS))
    ledger_patterns = set(re.findall(r'\bjob=~"([^"]+)"', ALERTS))
    objects = rendered[case]
    for monitor in by_kind(objects, "ServiceMonitor"):
        (endpoint,) = monitor["spec"]["endpoints"]
        job = next(r["replacement"] for r in endpoint["relabelings"] if r["targetLabel"] == "job")
        if endpoint["path"] == "/metrics":
            assert {job} == exporter_jobs
        for pattern in ledger_patterns:
            assert re.fullmatch(pattern, job), f"job=~{pattern!r} misses {job}"
    for probe in by_kind(objects, "Probe"):
        for pattern in ledger_patterns:
            assert re.fullmatch(pattern, probe["spec"]["jobName"])


@pytest.mark.parametrize("case", ["probe-values.yaml", "probe-servicemonitor-values.yaml"])
def test_probe_mode_one_object_per_target_each_allowed(
    rendered: dict[str, list[Manifest]], case: str
) -> None:
    """Each target gets its Probe (or ServiceMonitor), and the exporter's own /probe checks
    accept its URL and node name against the rendered allow-list."""
    values = values_file(case)["probe"]
    objects = rendered[case]
    config = parse_config(exporter_config(objects))
    assert config.nodes == () and config.probe is not None
    service = only(objects, "Service")
    seen = []
    for target in values["targets"]:
        name = f"{RELEASE}-ledger-exporter-{target['name']}"
        (obj,) = [
            o for o in objects if o["metadata"]["name"] == name and o["kind"] == values["kind"]
        ]
        if values["kind"] == "Probe":
            spec = obj["spec"]
            assert spec["prober"]["url"] == (
                f"{service['metadata']['name']}.{NAMESPACE}.svc:{service['spec']['ports'][0]['port']}"
            )
            static = spec["targets"]["staticConfig"]
            assert static["static"] == [target["url"]]
            (rule,) = static["relabelingConfigs"]
            assert (rule["targetLabel"], rule["replacement"]) == ("__param_node", target["name"])
            params = {"target": target["url"], "node": target["name"], "module": spec["module"]}
            assert static.get("labels", {}) == target.get("labels", {})
            assert spec["interval"] == target.get("interval", values.get("interval", "30s"))
        else:
            (endpoint,) = obj["spec"]["endpoints"]
            assert endpoint["path"] == "/probe"
            params = {key: value for key, [value] in endpoint["params"].items()}
            labels = {
                r["targetLabel"]: r["replacement"]
                for r in endpoint["relabelings"]
                if "replacement" in r
            }
            assert labels["instance"] == target["url"]
            assert labels.items() >= target.get("labels", {}).items()
        node = probe_target(urlencode(params), config.probe)
        assert (node.url, node.name) == (target["url"], target["name"])
        seen.append(name)
    assert len(by_kind(objects, values["kind"])) - len(seen) == (
        1
        if values["kind"] == "ServiceMonitor"
        and values_file(case).get("serviceMonitor", {}).get("selfMonitor", {}).get("enabled", True)
        else 0
    )
    self_monitors = [
        m
        for m in by_kind(objects, "ServiceMonitor")
        if m["spec"]["endpoints"][0]["path"] == "/metrics"
    ]
    expected = (
        values_file(case).get("serviceMonitor", {}).get("selfMonitor", {}).get("enabled", True)
    )
    assert len(self_monitors) == (1 if expected else 0)


def test_probe_mode_refuses_a_target_off_the_allow_list() -> None:
    """With allowedTargets given, a URL they do not match is refused by the exporter."""
    objects = helm_template("-f", str(CHART / "ci" / "probe-servicemonitor-values.yaml"))
    config = parse_config(exporter_config(objects))
    assert config.probe is not None
    with pytest.raises(ProbeRefusedError):
        probe_target(urlencode({"target": "http://evil.example:7740/"}), config.probe)


def test_probe_mode_needs_targets_or_an_allow_list() -> None:
    answer = run_tool("helm", "template", RELEASE, str(CHART), "--set", "probe.enabled=true")
    assert answer.returncode != 0 and "probe.targets" in answer.stderr


# --- the mixin's rules and dashboards ----------------------------------------------------


def mixin_groups() -> list[dict[str, Any]]:
    mixin = render_mixin.evaluate()
    groups: list[dict[str, Any]] = mixin["rules"]["groups"] + mixin["alerts"]["groups"]
    return groups


def test_prometheusrule_holds_every_rule_and_alert_the_mixin_renders(
    rendered: dict[str, list[Manifest]],
) -> None:
    rule = only(rendered["defaults"], "PrometheusRule")
    groups = rule["spec"]["groups"]
    expected = mixin_groups()
    assert [g["name"] for g in groups] == [g["name"] for g in expected]
    for group, source in zip(groups, expected, strict=True):
        assert group["rules"] == source["rules"], group["name"]
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    assert alerts == {r["alert"] for g in expected for r in g["rules"] if "alert" in r}
    assert len(alerts) > 20


def test_prometheusrule_groups_toggle_and_labels(rendered: dict[str, list[Manifest]]) -> None:
    values = values_file("persistence-network-policy-values.yaml")["prometheusRule"]
    rule = only(rendered["persistence-network-policy-values.yaml"], "PrometheusRule")
    assert rule["metadata"]["labels"].items() >= values["additionalLabels"].items()
    names = [g["name"] for g in rule["spec"]["groups"]]
    assert names == [g["name"] for g in mixin_groups() if g["name"] not in values["disabledGroups"]]
    for group in rule["spec"]["groups"]:
        for entry in group["rules"]:
            if "alert" in entry:
                assert entry["labels"].items() >= values["alertLabels"].items()
                assert "severity" in entry["labels"], "the mixin's own labels are kept"
            else:
                assert not set(entry.get("labels", {})) & set(values["alertLabels"])


def test_promtool_accepts_the_rendered_groups(
    rendered: dict[str, list[Manifest]], tmp_path: Path, promtool: Promtool
) -> None:
    """What the Operator hands Prometheus, extra alert labels included, is a rule file."""
    for case in ("defaults", "persistence-network-policy-values.yaml"):
        rule = only(rendered[case], "PrometheusRule")
        path = tmp_path / f"{case}.rules.yml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}), encoding="utf-8")
        promtool.check("check", "rules", str(path))


def test_an_unknown_rule_group_fails() -> None:
    answer = run_tool(
        "helm",
        "template",
        RELEASE,
        str(CHART),
        "--set",
        "prometheusRule.disabledGroups={ledger-wach}",
    )
    assert answer.returncode != 0
    assert "no group ledger-wach" in answer.stderr and "ledger-watch" in answer.stderr


def test_dashboards_are_the_mixins_for_grafanas_sidecar(
    rendered: dict[str, list[Manifest]],
) -> None:
    shipped = {
        p.name: json.loads(p.read_text()) for p in (REPO / "grafana" / "dashboards").glob("*.json")
    }
    configmaps = [
        c
        for c in by_kind(rendered["defaults"], "ConfigMap")
        if "grafana_dashboard" in c["metadata"]["labels"]
    ]
    assert len(configmaps) == len(shipped)
    seen = {}
    for configmap in configmaps:
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert configmap["metadata"]["annotations"] == {"grafana_folder": "Ledger"}
        ((name, text),) = configmap["data"].items()
        seen[name] = json.loads(text)
    assert seen == shipped
    elsewhere = values_file("persistence-network-policy-values.yaml")["dashboards"]["namespace"]
    for configmap in by_kind(rendered["persistence-network-policy-values.yaml"], "ConfigMap"):
        if "grafana_dashboard" in configmap["metadata"]["labels"]:
            assert configmap["metadata"]["namespace"] == elsewhere


def test_alertmanager_config_secret_is_the_mixins_when_enabled(
    rendered: dict[str, list[Manifest]],
) -> None:
    """Off by default; on, one Secret with the shipped routes and inhibition tree, where the
    values put it."""
    shipped = yaml.safe_load(
        (REPO / "deploy" / "alertmanager" / "alertmanager.yml").read_text(encoding="utf-8")
    )

    def secrets(case: str) -> list[Manifest]:
        return [
            s
            for s in by_kind(rendered[case], "Secret")
            if s["metadata"]["name"].endswith("-alertmanager")
        ]

    assert secrets("defaults") == []
    case = "persistence-network-policy-values.yaml"
    (secret,) = secrets(case)
    assert secret["metadata"]["namespace"] == values_file(case)["alertmanagerConfig"]["namespace"]
    assert yaml.safe_load(secret["stringData"]["alertmanager.yaml"]) == shipped


# --- rollouts, state, policies -----------------------------------------------------------


def checksum(objects: list[Manifest]) -> str:
    annotations = workload(objects)["spec"]["template"]["metadata"]["annotations"]
    value: str = annotations["checksum/config"]
    return value


def test_a_config_change_rolls_the_pod_when_asked(rendered: dict[str, list[Manifest]]) -> None:
    """With rolloutOnConfigChange, checksum/config changes with the config and only with it
    (without it the exporter follows the files live: tests/deploy/test_live_config.py)."""
    asked = ("--set", "rolloutOnConfigChange=true")
    before = checksum(helm_template(*asked))
    assert re.fullmatch(r"[0-9a-f]{64}", before)
    assert checksum(helm_template(*asked, "--set", "config.scrape_interval=30s")) != before
    assert checksum(helm_template(*asked, "--set", "service.annotations.a=b")) == before
    web = helm_template(*case_args("web-config-values.yaml"), *asked)
    annotations = workload(web)["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/web-config"])
    mine = helm_template(*asked, "--set", "existingConfigMap=my-config")
    assert "checksum/config" not in workload(mine)["spec"]["template"]["metadata"].get(
        "annotations", {}
    )
    assert not [c for c in by_kind(mine, "ConfigMap") if "config.yml" in c["data"]]
    (volume,) = [v for v in pod_spec(mine)["volumes"] if v["name"] == "config"]
    assert volume["configMap"]["name"] == "my-config"


def test_state_file_on_an_emptydir_or_a_claim_per_pod(rendered: dict[str, list[Manifest]]) -> None:
    """Daemon mode: each pod's own claim (the StatefulSet's volumeClaimTemplates) with
    persistence, an emptyDir without; never one claim the replicas would share."""
    for case, objects in rendered.items():
        state_dir = flag(objects, "--state.file").rsplit("/", 1)[0]  # type: ignore[union-attr]
        (volume,) = [v for m, v in mounts(objects) if m["mountPath"] == state_dir]
        assert not by_kind(objects, "PersistentVolumeClaim"), "one claim for every replica"
        if values_file(case).get("persistence", {}).get("enabled"):
            claim = volume["volumeClaimTemplate"]
            assert workload(objects)["kind"] == "StatefulSet"
            size = values_file(case)["persistence"]["size"]
            assert claim["spec"]["resources"]["requests"]["storage"] == size
            assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
            assert (
                claim["spec"]["storageClassName"]
                == values_file(case)["persistence"]["storageClassName"]
            )
        else:
            assert "emptyDir" in volume
    mine = helm_template(
        *("--set", "persistence.enabled=true", "--set", "persistence.existingClaim=c"),
        *("--set", "replicas=1"),
    )
    assert not by_kind(mine, "PersistentVolumeClaim")
    assert "volumeClaimTemplates" not in only(mine, "StatefulSet")["spec"]
    (volume,) = [v for v in pod_spec(mine)["volumes"] if v["name"] == "state"]
    assert volume["persistentVolumeClaim"] == {"claimName": "c"}
    assert flag(mine, "--state.file") == "/var/lib/ledger-exporter/state.json"


def test_network_policy_and_disruption_budget(rendered: dict[str, list[Manifest]]) -> None:
    values = values_file("persistence-network-policy-values.yaml")
    objects = rendered["persistence-network-policy-values.yaml"]
    policy = only(objects, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert ingress["from"] == values["networkPolicy"]["ingressFrom"]
    assert policy["spec"]["egress"] == values["networkPolicy"]["egress"]
    assert only(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert not by_kind(rendered["defaults"], "NetworkPolicy")
    args = container(objects)["args"]
    assert args[-len(values["extraArgs"]) :] == values["extraArgs"]
    assert container(objects)["env"] == values["extraEnv"]
    assert values["extraVolumeMounts"][0] in container(objects)["volumeMounts"]
    assert values["extraVolumes"][0] in pod_spec(objects)["volumes"]


# --- the HA pair: daemon mode's StatefulSet -------------------------------------------------

FULLNAME = f"{RELEASE}-ledger-exporter"
#: The `instance` the ServiceMonitor gives every replica: namespace/full name.
PAIR_INSTANCE = f"{NAMESPACE}/{FULLNAME}"


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str]:
    """Prometheus's ``replace`` and ``labeldrop`` relabelings (anchored regexes, ``$1``
    groups), in the Operator's camelCase."""
    labels = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace")
        if action == "labeldrop":
            labels = {k: v for k, v in labels.items() if not re.fullmatch(rule["regex"], k)}
            continue
        assert action == "replace", rule
        value = rule.get("separator", ";").join(
            labels.get(name, "") for name in rule.get("sourceLabels", [])
        )
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if match is not None:
            replacement = re.sub(r"\$(\d)", r"\\\1", rule.get("replacement", "$1"))
            labels[rule["targetLabel"]] = match.expand(replacement)
    return labels


def scraped_labels(endpoint: dict[str, Any], pod: str, address: str) -> dict[str, str]:
    """The labels of a pod's target: what the Operator's own relabelings give it (namespace,
    service, pod, container, endpoint, job: prometheus-operator's ServiceMonitor config),
    then the endpoint's relabelings, then Prometheus's defaults (instance = address)."""
    labels = {
        "__address__": address,
        "__meta_kubernetes_pod_name": pod,
        "namespace": NAMESPACE,
        "service": FULLNAME,
        "pod": pod,
        "container": "ledger-exporter",
        "endpoint": endpoint["port"],
        "job": FULLNAME,
    }
    labels = relabel(labels, endpoint.get("relabelings", []))
    labels.setdefault("instance", labels["__address__"])
    return {k: v for k, v in labels.items() if not k.startswith("__")}


def test_daemon_mode_is_a_statefulset_pair_by_default(rendered: dict[str, list[Manifest]]) -> None:
    """Two replicas, each its own pod name and state, a budget that lets a drain take one,
    spread softly over nodes, and a headless Service governing them."""
    objects = rendered["defaults"]
    assert not by_kind(objects, "Deployment")
    statefulset = only(objects, "StatefulSet")
    spec = statefulset["spec"]
    assert spec["replicas"] == 2
    assert spec["podManagementPolicy"] == "Parallel"
    (headless,) = [s for s in by_kind(objects, "Service") if s["spec"].get("clusterIP") == "None"]
    assert spec["serviceName"] == headless["metadata"]["name"]
    pods = {"metadata": spec["template"]["metadata"]}
    assert selects({"matchLabels": headless["spec"]["selector"]}, pods)
    budget = only(objects, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1 and "minAvailable" not in budget
    assert selects(budget["selector"], pods)
    (spread,) = spec["template"]["spec"]["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == (
        "kubernetes.io/hostname",
        "ScheduleAnyway",
    )
    assert spread["maxSkew"] == 1 and selects(spread["labelSelector"], pods)
    assert flag(objects, "--state.file") == "/var/lib/ledger-exporter/state.json"
    assert "env" not in container(objects)


def test_persistence_gives_each_pod_its_claim() -> None:
    objects = helm_template("--set", "persistence.enabled=true")
    for manifest in objects:
        check_manifest(manifest)
    spec = only(objects, "StatefulSet")["spec"]
    assert spec["replicas"] == 2
    (template,) = spec["volumeClaimTemplates"]
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert template["spec"]["resources"]["requests"]["storage"] == "64Mi"
    assert not [v for v in spec["template"]["spec"]["volumes"] if v["name"] == "state"]
    (mount,) = [m for m in container(objects)["volumeMounts"] if m["name"] == "state"]
    assert template["metadata"]["name"] == "state"
    assert f"{mount['mountPath']}/state.json" == flag(objects, "--state.file")
    assert not by_kind(objects, "PersistentVolumeClaim")


def test_an_upgraded_chart_leaves_the_statefulsets_fixed_fields_alone(tmp_path: Path) -> None:
    """Kubernetes refuses a change to a StatefulSet's selector, serviceName, pod management
    or claim templates: another chart version and other common labels change none of them."""
    copy = tmp_path / "ledger-exporter"
    shutil.copytree(CHART, copy)
    chart = yaml.safe_load((copy / "Chart.yaml").read_text(encoding="utf-8"))
    chart["version"] = chart["appVersion"] = "99.1.0"
    (copy / "Chart.yaml").write_text(yaml.safe_dump(chart), encoding="utf-8")
    args = ("--set", "persistence.enabled=true", "--set", "persistence.annotations.a=b")
    before = only(helm_template(*args), "StatefulSet")
    answer = run_tool(
        "helm", "template", RELEASE, str(copy), "-n", NAMESPACE, *args,
        "--set", "commonLabels.team=ledger",
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    after = only(documents(answer.stdout), "StatefulSet")
    assert after["metadata"]["labels"] != before["metadata"]["labels"], "the test changes labels"
    fixed = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")
    for field in fixed:
        assert after["spec"][field] == before["spec"][field], field


def test_probe_mode_stays_a_deployment(rendered: dict[str, list[Manifest]]) -> None:
    for case in ("probe-values.yaml", "probe-servicemonitor-values.yaml"):
        objects = rendered[case]
        assert workload(objects)["kind"] == "Deployment"
        assert [s["spec"].get("clusterIP") for s in by_kind(objects, "Service")] == [None]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "replicas=1"], None),
        (["--set", "podDisruptionBudget.enabled=false"], None),
        (["--set", "podDisruptionBudget.minAvailable=1"], {"minAvailable": 1}),
        (["--set", "replicas=3"], {"maxUnavailable": 1}),
    ],
    ids=["one-replica", "disabled", "min-available", "three"],
)
def test_a_disruption_budget_whenever_there_are_several_replicas(
    args: list[str], expected: dict[str, int] | None
) -> None:
    budgets = by_kind(helm_template(*args), "PodDisruptionBudget")
    if expected is None:
        assert not budgets
    else:
        (budget,) = budgets
        assert {k: v for k, v in budget["spec"].items() if k != "selector"} == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "replicaSpread=hard"], "DoNotSchedule"),
        (["--set", "replicaSpread=none"], None),
        (["--set", "replicas=1"], None),
        (["--set", "topologySpreadConstraints[0].maxSkew=2"], "mine"),
    ],
    ids=["hard", "none", "one-replica", "own-constraints"],
)
def test_the_replicas_spread_over_nodes_as_asked(args: list[str], expected: str | None) -> None:
    spec = pod_spec(helm_template(*args))
    if expected is None:
        assert "topologySpreadConstraints" not in spec
    elif expected == "mine":
        assert spec["topologySpreadConstraints"] == [{"maxSkew": 2}]
    else:
        (spread,) = spec["topologySpreadConstraints"]
        assert spread["whenUnsatisfiable"] == expected


def test_both_replicas_scrape_as_one_exporter(rendered: dict[str, list[Manifest]]) -> None:
    """The ServiceMonitor gives both pods' targets the same `instance` (namespace/the
    release's full name) and the pod's name in exporter_replica, and drops the Operator's
    `pod`: the two label sets differ in exporter_replica alone, the label the mixin's rules
    fold. Probe
    mode's ServiceMonitor per target does the same for each target's replicas."""
    for case in ("defaults", "probe-servicemonitor-values.yaml"):
        for monitor in by_kind(rendered[case], "ServiceMonitor"):
            (endpoint,) = monitor["spec"]["endpoints"]
            pods = [f"{FULLNAME}-0", f"{FULLNAME}-1"]
            first, second = (
                scraped_labels(endpoint, pod, f"10.0.0.{n}:9877") for n, pod in enumerate(pods)
            )
            assert (first[REPLICA_LABEL], second[REPLICA_LABEL]) == tuple(pods)
            assert "pod" not in first
            del first[REPLICA_LABEL], second[REPLICA_LABEL]
            assert first == second
            if endpoint["path"] == "/metrics":
                assert first["instance"] == PAIR_INSTANCE
                assert first["job"] == "ledger-exporter"
    # the user's relabelings come after the chart's, so they can change these too
    mine = helm_template("--set", "serviceMonitor.relabelings[0].targetLabel=instance",
                         "--set", "serviceMonitor.relabelings[0].replacement=pair-a")  # fmt: skip
    (endpoint,) = only(mine, "ServiceMonitor")["spec"]["endpoints"]
    assert scraped_labels(endpoint, f"{FULLNAME}-0", "10.0.0.1:9877")["instance"] == "pair-a"


def snake_case(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Operator's camelCase relabelings as Prometheus's relabel_configs."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return [{names.get(key, key): value for key, value in rule.items()} for rule in rules]


@pytest.mark.integration
def test_a_real_prometheus_scrapes_the_pair_as_one_exporter(
    tmp_path: Path, fake_node: FakeNode, prometheus: PrometheusServers
) -> None:
    """Two exporter processes stand for the StatefulSet's pods, scraped by a real Prometheus
    with the labels the Operator gives a pod's target (pod, service, namespace, container,
    endpoint, job) and then the ServiceMonitor's relabelings: the two replicas' series differ
    in exporter_replica alone, carry the release's instance and no pod, and the mixin's fold
    (max without exporter_replica) makes them one series per node."""
    fake_node.set("/health", health_doc([]))
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump({"nodes": [{"name": "validator-1", "url": fake_node.url}]}),
        encoding="utf-8",
    )
    (endpoint,) = only(helm_template(), "ServiceMonitor")["spec"]["endpoints"]
    with ready_exporter(config) as first, ready_exporter(config) as second:
        targets = []
        for number, exporter in enumerate((first, second)):
            pod = f"{FULLNAME}-{number}"
            labels = {"__meta_kubernetes_pod_name": pod, "pod": pod, "namespace": NAMESPACE,
                      "service": FULLNAME, "container": "ledger-exporter",
                      "endpoint": endpoint["port"], "job": FULLNAME}  # fmt: skip
            targets.append({"targets": [f"127.0.0.1:{exporter.port}"], "labels": labels})
        server = prometheus.create()
        server.config["scrape_configs"] = [
            {
                "job_name": f"serviceMonitor/{NAMESPACE}/{FULLNAME}/0",
                "static_configs": targets,
                "relabel_configs": snake_case(endpoint["relabelings"]),
            }
        ]
        server.start()
        series = 'ledger_node_up{job="ledger-exporter", node="validator-1"}'
        server.wait_for(series, lambda samples: len(samples) == 2, timeout=30)
        replicas = {}
        for sample in server.query(series):
            labels = dict(sample["metric"])
            replicas[labels.pop(REPLICA_LABEL)] = labels
        assert set(replicas) == {f"{FULLNAME}-0", f"{FULLNAME}-1"}
        first_labels, second_labels = replicas.values()
        assert first_labels == second_labels
        assert first_labels["instance"] == PAIR_INSTANCE and "pod" not in first_labels
        folded = server.query(f"max without({REPLICA_LABEL}) ({series})")
        assert len(folded) == 1 and folded[0]["value"][1] == "1"


PROBE_TARGET = ("--set", "probe.targets[0].name=n", "--set", "probe.targets[0].url=http://n/")


@pytest.mark.parametrize(
    ("args", "alternatives", "message"),
    [
        (
            ["--set", "persistence.existingClaim=mine"],
            ["/persistence/existingClaim", "/replicas", "/persistence/accessModes"],
            [
                "persistence.existingClaim mine would be one claim for all 2 replicas",
                'persistence.existingClaim: ""',
                "replicas: 1",
                "persistence.accessModes: [ReadWriteMany]",
            ],
        ),
        (
            ["--set", "probe.enabled=true", *PROBE_TARGET],
            ["/persistence/enabled", "/replicas", "/persistence/accessModes"],
            [
                "one claim for all 2 replicas of its Deployment",
                "persistence.accessModes: [ReadWriteMany]",
                "replicas: 1",
                "persistence.enabled: false",
            ],
        ),
    ],
    ids=["existing-claim", "probe-mode-claim"],
)
def test_one_readwriteonce_claim_for_several_replicas_is_refused(
    args: list[str], alternatives: list[str], message: list[str]
) -> None:
    """Refused by values.schema.json, which lists each way out (install, upgrade, lint,
    template), and by the template's `fail` (what --skip-schema-validation shows), which
    says what to set."""
    base = ["template", RELEASE, str(CHART), "--set", "persistence.enabled=true", *args]
    answer = run_tool("helm", *base)
    assert answer.returncode != 0
    assert "values don't meet the specifications of the schema" in answer.stderr
    for where in alternatives:
        assert f"at '{where}'" in answer.stderr, answer.stderr
    assert "value must be 'ReadWriteMany'" in answer.stderr
    assert run_tool("helm", "lint", "--strict", str(CHART), *base[3:]).returncode != 0
    unchecked = run_tool("helm", *base, "--skip-schema-validation")
    assert unchecked.returncode != 0
    for part in message:
        assert part in unchecked.stderr, unchecked.stderr


@pytest.mark.parametrize(
    "args",
    [["--set", "persistence.existingClaim=shared"], ["--set", "probe.enabled=true", *PROBE_TARGET]],
    ids=["existing-claim", "probe-mode-claim"],
)
def test_a_readwritemany_claim_is_shared_with_a_state_file_per_pod(args: list[str]) -> None:
    """Every replica mounts the one claim and writes its own state-<pod name>.json in it."""
    objects = helm_template(
        "--set", "persistence.enabled=true", "--set", "persistence.accessModes={ReadWriteMany}",
        *args,
    )  # fmt: skip
    for manifest in objects:
        check_manifest(manifest)
    assert workload(objects)["spec"]["replicas"] == 2
    (volume,) = [v for m, v in mounts(objects) if m["name"] == "state"]
    claims = by_kind(objects, "PersistentVolumeClaim")
    name = claims[0]["metadata"]["name"] if claims else "shared"
    assert volume["persistentVolumeClaim"] == {"claimName": name}
    assert flag(objects, "--state.file") == "/var/lib/ledger-exporter/state-$(POD_NAME).json"
    (variable,) = [e for e in container(objects)["env"] if e["name"] == "POD_NAME"]
    assert variable["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert workload(objects)["spec"].get("strategy", {}).get("type") != "Recreate"


def test_a_statefulset_name_too_long_for_its_pods_fails() -> None:
    answer = run_tool(
        "helm", "template", RELEASE, str(CHART), "--set", f"fullnameOverride={'a' * 53}"
    )
    assert answer.returncode != 0 and "set fullnameOverride" in answer.stderr
    assert (
        run_tool(
            "helm", "template", RELEASE, str(CHART), "--set", f"fullnameOverride={'a' * 52}"
        ).returncode
        == 0
    )


def rendered_notes(tmp_path: Path, *args: str) -> str:
    """NOTES as `helm template` renders them (``--is-upgrade`` included), through a copy of
    the chart with a ConfigMap holding them."""
    copy = tmp_path / "ledger-exporter"
    if not copy.exists():
        shutil.copytree(CHART, copy)
        (copy / "templates" / "zz-notes.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: "
            '{{ include (print $.Template.BasePath "/NOTES.txt") . | toJson }}\n',
            encoding="utf-8",
        )
    answer = run_tool("helm", "template", RELEASE, str(copy), "-n", NAMESPACE,
                      "--show-only", "templates/zz-notes.yaml", *args)  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    text: str = yaml.safe_load(answer.stdout)["data"]["notes"]
    return text


def test_notes_and_values_say_what_the_pair_changes(tmp_path: Path) -> None:
    """The pair and its labels in NOTES; on an upgrade, what becomes of the Deployment and
    its claim; one replica is called out; the old advice to keep one replica is gone."""
    installed = rendered_notes(tmp_path)
    assert f"the StatefulSet {FULLNAME} runs 2 replica(s)" in installed
    assert f"instance {PAIR_INSTANCE}" in installed and "exporter_replica=<its pod>" in installed
    assert f"port-forward pod/{FULLNAME}-0 9877" in installed
    assert "Deployment" not in installed
    upgraded = rendered_notes(tmp_path, "--is-upgrade")
    assert f"the claim {FULLNAME}-state, if any, is not reused" in upgraded
    single = rendered_notes(tmp_path, "--set", "replicas=1")
    assert "One replica: while its pod is rescheduled" in single
    assert "rollout restart statefulset/" in rendered_notes(
        tmp_path, "--set", "existingConfigMap=mine"
    )
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    for text in (values, README):
        assert "keep 1" not in text
        assert "helm.sh/resource-policy=keep" in text, "how to keep the old claim"
        assert "--cascade=orphan" in text, "how to change the claims of a StatefulSet"


# --- alert changes without jsonnet ---------------------------------------------------------


def shipped_rules() -> list[dict[str, Any]]:
    """The mixin's rules as `make mixin` renders them into the chart."""
    text = (CHART / "files" / "prometheus-rules.yaml").read_text(encoding="utf-8")
    groups: list[dict[str, Any]] = yaml.safe_load(text)["groups"]
    return groups


def alert_rules(groups: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if rule.get("alert") == name]


def changed_rules(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "alerts-values.yaml"
    path.write_text(yaml.safe_dump({"prometheusRule": values}), encoding="utf-8")
    groups: list[dict[str, Any]] = only(helm_template("-f", str(path)), "PrometheusRule")["spec"][
        "groups"
    ]
    return groups


def test_alert_changes_apply_to_the_shipped_rules(tmp_path: Path) -> None:
    """`enabled: false` leaves an alert out, `for` and `severity` replace the mixin's on
    every rule of the alert (the budget burns have several), alertLabels still apply, and
    nothing else changes."""
    shipped = shipped_rules()
    burns = [
        n
        for n in {r.get("alert") for g in shipped for r in g["rules"]}
        if n and len(alert_rules(shipped, n)) > 1
    ]
    assert burns, "an alert of several rules"
    groups = changed_rules(
        {
            "alertLabels": {"team": "ledger"},
            "alerts": {
                "LedgerNodeDown": {"enabled": False},
                "LedgerNodeBehind": {"for": "10m", "severity": "critical"},
                burns[0]: {"severity": "info"},
                "LedgerWatchdog": {"enabled": True},
            },
        },
        tmp_path,
    )
    assert alert_rules(shipped, "LedgerNodeDown") and not alert_rules(groups, "LedgerNodeDown")
    (behind,) = alert_rules(groups, "LedgerNodeBehind")
    assert behind["for"] == "10m"
    assert behind["labels"] == {"severity": "critical", "team": "ledger"}
    assert {r["labels"]["severity"] for r in alert_rules(groups, burns[0])} == {"info"}
    assert [r["for"] for r in alert_rules(groups, burns[0])] == [
        r["for"] for r in alert_rules(shipped, burns[0])
    ]
    assert alert_rules(groups, "LedgerWatchdog")
    changed = {"LedgerNodeDown", "LedgerNodeBehind", burns[0]}
    for group, source in zip(groups, shipped, strict=True):
        assert group["name"] == source["name"]
        kept = [r for r in source["rules"] if r.get("alert") not in changed]
        assert [r for r in group["rules"] if r.get("alert") not in changed] == [
            r | ({"labels": {"team": "ledger"} | r.get("labels", {})} if "alert" in r else {})
            for r in kept
        ]


def test_a_group_whose_every_alert_is_off_is_left_out(tmp_path: Path) -> None:
    shipped = shipped_rules()
    group = min(
        (g for g in shipped if all("alert" in r for r in g["rules"])),
        key=lambda g: len(g["rules"]),
    )
    off = {rule["alert"]: {"enabled": False} for rule in group["rules"]}
    names = [g["name"] for g in changed_rules({"alerts": off}, tmp_path)]
    assert names == [g["name"] for g in shipped if g["name"] != group["name"]]


def test_an_unknown_alert_name_fails_the_render() -> None:
    """A typo must not silently change nothing."""
    answer = run_tool("helm", "template", RELEASE, str(CHART),
                      "--set", "prometheusRule.alerts.LedgerNodeDwn.enabled=false")  # fmt: skip
    assert answer.returncode != 0
    assert "prometheusRule.alerts: no alert LedgerNodeDwn" in answer.stderr
    assert "LedgerNodeDown" in answer.stderr, "the message lists the alerts"


@pytest.mark.parametrize(
    "setting",
    [
        "prometheusRule.alerts.LedgerNodeDown.severity=page",
        "prometheusRule.alerts.LedgerNodeDown.for=soon",
        "prometheusRule.alerts.LedgerNodeDown.sevrity=warning",
    ],
    ids=["severity", "for", "typo"],
)
def test_the_schema_holds_alert_changes_to_what_the_mixin_has(setting: str) -> None:
    answer = run_tool("helm", "template", RELEASE, str(CHART), "--set", setting)
    assert answer.returncode != 0
    assert "values don't meet the specifications of the schema" in answer.stderr


def test_the_schemas_severities_are_the_mixins() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    change = schema["properties"]["prometheusRule"]["properties"]["alerts"]
    allowed = set(change["additionalProperties"]["properties"]["severity"]["enum"])
    used = {r["labels"]["severity"] for g in shipped_rules() for r in g["rules"] if "alert" in r}
    assert allowed == used


def promtool_rules(groups: list[dict[str, Any]], path: Path) -> Path:
    """A rule file of the PrometheusRule's groups, annotations left out (promtool's tests
    compare them whole; what is tested here is each alert's `for` and labels)."""
    bare = [
        group
        | {"rules": [{k: v for k, v in r.items() if k != "annotations"} for r in group["rules"]]}
        for group in groups
    ]
    path.write_text(yaml.safe_dump({"groups": bare}), encoding="utf-8")
    return path


def test_promtool_sees_the_changed_for_severity_and_the_disabled_alert(
    tmp_path: Path, promtool: Promtool
) -> None:
    """A node down long enough for the mixin's LedgerNodeDown: with its `for` 10m longer and
    its severity changed it fires only then, with that severity; a down exporter fires no
    LedgerExporterDown once it is off. The same cases on the shipped rules fail (the alerts
    fire as shipped), so the test can fail."""
    (down,) = alert_rules(shipped_rules(), "LedgerNodeDown")
    shipped_for = int(seconds(down["for"]) // 60)
    longer = shipped_for + 10
    severity = "warning" if down["labels"]["severity"] != "warning" else "critical"
    changed = changed_rules(
        {
            "alerts": {
                "LedgerNodeDown": {"for": f"{longer}m", "severity": severity},
                "LedgerExporterDown": {"enabled": False},
            }
        },
        tmp_path,
    )
    promtool.check("check", "rules", str(promtool_rules(changed, tmp_path / "full.yml")))
    promtool_rules(changed, tmp_path / "changed.yml")
    defaults = only(helm_template(), "PrometheusRule")["spec"]["groups"]
    promtool_rules(defaults, tmp_path / "shipped.yml")
    node = {"job": "ledger-exporter", "instance": PAIR_INSTANCE, "node": "validator-1"}
    series = "{" + ", ".join(f'{k}="{v}"' for k, v in node.items()) + "}"
    node_down = {
        "interval": "1m",
        "input_series": [
            {"series": f"ledger_node_up{series}", "values": f"0x{longer + 10}"},
            # the exporter itself is up: only the node is down
            {
                "series": f'up{{job="ledger-exporter", instance="{PAIR_INSTANCE}"}}',
                "values": f"1x{longer + 10}",
            },
        ],
    }
    exporter_down = {
        "interval": "1m",
        "input_series": [
            {"series": f'up{{job="ledger-exporter", instance="{PAIR_INSTANCE}"}}', "values": "0x30"}
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "LedgerExporterDown", "exp_alerts": []}
        ],
    }

    def tests_file(name: str, rules: str, firing: list[tuple[int, str | None]]) -> Path:
        cases = [
            {
                "eval_time": f"{minute}m",
                "alertname": "LedgerNodeDown",
                "exp_alerts": [] if label is None else [{"exp_labels": node | {"severity": label}}],
            }
            for minute, label in firing
        ]
        path = tmp_path / name
        path.write_text(
            yaml.safe_dump(
                {
                    "rule_files": [rules],
                    "evaluation_interval": "1m",
                    "tests": [node_down | {"alert_rule_test": cases}, exporter_down],
                }
            ),
            encoding="utf-8",
        )
        return path

    expected = [(shipped_for + 1, None), (longer + 1, severity)]
    promtool.check(
        "test", "rules", str(tests_file("changed.test.yml", "changed.yml", expected)), cwd=tmp_path
    )
    failed = promtool.run(
        "test", "rules", str(tests_file("shipped.test.yml", "shipped.yml", expected)), cwd=tmp_path
    )
    assert failed.returncode != 0
    assert "LedgerNodeDown" in failed.stdout + failed.stderr
    assert "LedgerExporterDown" in failed.stdout + failed.stderr
    # and as shipped the node's alert fires after the mixin's own `for`, at its severity
    shipped_case = tests_file(
        "control.test.yml", "shipped.yml", [(shipped_for + 1, down["labels"]["severity"])]
    )
    control = yaml.safe_load(shipped_case.read_text(encoding="utf-8"))
    control["tests"] = control["tests"][:1]
    shipped_case.write_text(yaml.safe_dump(control), encoding="utf-8")
    promtool.check("test", "rules", str(shipped_case), cwd=tmp_path)


def notes(*args: str) -> str:
    """The NOTES `helm install` prints for ``args``."""
    answer = run_tool(
        "helm", "install", "--dry-run=client", RELEASE, str(CHART), "--namespace", NAMESPACE, *args
    )
    assert answer.returncode == 0, answer.stderr
    return answer.stdout.split("NOTES:", 1)[1]


def test_notes_say_how_to_reach_the_status_page() -> None:
    text = notes()
    assert f"kubectl -n {NAMESPACE} port-forward service/{RELEASE}-ledger-exporter 9877" in text
    assert "http://127.0.0.1:9877/" in text
    assert "emptyDir" in text
    assert "WARNING" not in text, "the defaults raise a warning"


def test_notes_say_how_to_check_a_new_config_before_it_rolls_out(tmp_path: Path) -> None:
    """Not `--config.check` in the running pod (it reads the config it has): the rendered
    ConfigMap's config.yml checked in a throwaway container of the same image, or the live
    reload, which keeps the running config when it refuses a new one. The commands NOTES
    give work: helm renders the config, and the exporter checks what they extract."""
    text = notes()
    assert "exec deploy/" not in text
    assert "docker run --rm" in text and f"ledger-exporter:{__version__} --config.check" in text
    assert "last_reload_successful 0" in text
    render = re.search(r"helm template (\S+) <chart> -f <your values> (.*?) \\\n", text)
    assert render, text
    answer = run_tool("helm", "template", render[1], str(CHART), *render[2].split())
    assert answer.returncode == 0, answer.stderr
    (configmap,) = documents(answer.stdout)
    assert "| yq -r '.data[\"config.yml\"]' > config.yml" in text
    parse_config(configmap["data"]["config.yml"])  # what the throwaway container checks
    mine = notes("--set", "existingConfigMap=my-config")
    assert "config.yml you will put into my-config" in mine and "helm template" not in mine


@pytest.mark.parametrize(
    ("args", "warning", "reason"),
    [
        (
            ["--set", "securityContext.runAsUser=0"],
            "the pod may run as root",
            "securityContext.runAsUser is 0",
        ),
        (
            ["--set", "podSecurityContext.runAsUser=0", "--set", "securityContext.runAsUser=null"],
            "the pod may run as root",
            "podSecurityContext.runAsUser is 0",
        ),
        (
            [
                *("--set", "securityContext.runAsUser=null", "--set"),
                *(
                    "podSecurityContext.runAsUser=null",
                    "--set",
                    "securityContext.runAsNonRoot=null",
                ),
                *("--set", "podSecurityContext.runAsNonRoot=null"),
            ],
            "the pod may run as root",
            "no runAsUser and no runAsNonRoot",
        ),
        (
            ["--set", "securityContext.privileged=true"],
            "the container is privileged",
            "securityContext.privileged is true",
        ),
        (
            ["--set", "securityContext.allowPrivilegeEscalation=true"],
            "the container is privileged",
            "securityContext.allowPrivilegeEscalation is true",
        ),
        (
            ["--set", "securityContext.capabilities.add={NET_RAW}"],
            "the container is privileged",
            "capabilities.add gives NET_RAW",
        ),
        (["--set", "resources=null"], "resources is empty", "no memory limit"),
        (
            [
                "--set",
                "extraVolumes[0].name=logs",
                "--set",
                "extraVolumes[0].hostPath.path=/var/log",
            ],
            "extraVolumes mounts a hostPath (logs)",
            "node's own files",
        ),
    ],
    ids=[
        "container-root",
        "pod-root",
        "nothing-says-non-root",
        "privileged",
        "privilege-escalation",
        "added-capability",
        "resources-null",
        "host-path",
    ],
)
def test_notes_warn_about_a_pod_that_can_hurt_its_node(
    args: list[str], warning: str, reason: str
) -> None:
    """Each risky setting gets its warning, at the top of NOTES, and no other."""
    text = notes(*args)
    warnings = re.findall(r"^WARNING: (.*)$", text, re.MULTILINE)
    assert len(warnings) == 1 and warnings[0].startswith(warning), warnings
    assert reason in text
    assert text.index("WARNING") < text.index("The status page")


def test_the_key_folding_table_is_generated() -> None:
    """templates/_keyfold.tpl is what tools/render_key_folding.py writes (`make mixin`), and
    folds what it must: look-alikes and NFKC forms of every letter of "password"."""
    assert (REPO / render_key_folding.TARGET).read_text(encoding="utf-8") == (
        render_key_folding.render()
    )
    table = render_key_folding.folding()
    for spelled in (
        "p\u0430ssword",
        "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44",
        "\U0001d429\U0001d41a\U0001d42c\U0001d42c\U0001d430\U0001d428\U0001d42b\U0001d41d",
        "PA\u0405SW\u039fRD",
        "pa\u0301ssword",
    ):
        assert "".join(table.get(c, c) for c in spelled).lower() == "password", spelled


# --- the chart's README --------------------------------------------------------------------

README = (CHART / "README.md").read_text(encoding="utf-8")


def schema_keys(node: dict[str, Any], values: dict[str, Any], path: str = "") -> Iterator[str]:
    """Dotted keys of values.schema.json: a section it closes, whose default in values.yaml
    has keys, is walked into (webConfig.config, empty by default, is one key)."""
    for key, sub in node.get("properties", {}).items():
        default = values.get(key)
        if sub.get("additionalProperties") is False and isinstance(default, dict) and default:
            yield from schema_keys(sub, default, f"{path}{key}.")
        else:
            yield f"{path}{key}"


def test_readme_values_table_lists_every_key_with_its_default() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    rows = dict(re.findall(r"^\| `([^`]+)` \| `([^`]*)` \|", README, re.MULTILINE))
    assert set(rows) == set(schema_keys(schema, values)) - {"global"}
    for key, default in rows.items():
        value = values
        for part in key.split("."):
            value = value[part]
        if default != "see values.yaml":
            assert json.loads(default) == value, f"{key}: the table says {default}"


def test_readme_three_node_install_renders(tmp_path: Path, pki: Pki) -> None:
    """The README's values file for three nodes: helm renders it, every object validates,
    the exporter accepts the config, and the credential comes from the named Secret."""
    example = re.search(r"```yaml\n(image:.*?)```", README, re.DOTALL)
    assert example, "the README's three-node values file"
    path = tmp_path / "ledger-values.yaml"
    path.write_text(example.group(1), encoding="utf-8")
    assert f"-f {path.name}" in README
    objects = helm_template("-f", str(path))
    for manifest in objects:
        check_manifest(manifest)
    text = exporter_config(objects)
    for name in referenced(yaml.safe_load(text), "_file"):
        (tmp_path / name.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name.lstrip("/")).write_text("secret\n", encoding="utf-8")
    config = parse_config(text.replace("/etc/ledger-exporter/", f"{tmp_path}/etc/ledger-exporter/"))
    assert len(config.nodes) == 3
    (secrets,) = [v for m, v in mounts(objects) if m["mountPath"] == "/etc/ledger-exporter/secrets"]
    assert secrets["secret"]["secretName"] in README.split("```sh", 1)[1]


# --- the pod's exporter, run for real ------------------------------------------------------

SCRAPE_USER, SCRAPE_PASSWORD = "prometheus", "scrape-password"  # the hash in web-config-values


@pytest.mark.integration
def test_the_rendered_pod_serves_what_its_servicemonitor_scrapes(
    tmp_path: Path, pki: Pki, fake_node: FakeNode
) -> None:
    """The web-config case's pod, as a process: its args, its config and web config from
    the rendered ConfigMap and Secret, its node password from the mounted Secret's file, and
    the TLS Secret's files, laid out under tmp_path. A scrape made as the ServiceMonitor says
    (https, basic auth) gets the node's series; one without the password gets 401; and the
    node got the password from the Secret's file."""
    values = values_file("web-config-values.yaml")
    values["config"]["nodes"] = [
        {
            "name": "validator-1",
            "url": fake_node.url,
            "basic_auth": {
                "username": "monitoring",
                "password_file": "/etc/ledger-exporter/secrets/validator-1.password",
            },
        }
    ]
    values_path = tmp_path / "values.yaml"
    values_path.write_text(yaml.safe_dump(values), encoding="utf-8")
    objects = helm_template("-f", str(values_path))
    fake_node.set("/health", health_doc([]))

    root = tmp_path / "pod"

    def in_pod(text: str) -> str:
        return text.replace("/etc/ledger-exporter/", f"{root}/etc/ledger-exporter/").replace(
            "/var/lib/ledger-exporter/", f"{root}/var/lib/ledger-exporter/"
        )

    for mount, volume in mounts(objects):
        (root / mount["mountPath"].lstrip("/")).mkdir(parents=True, exist_ok=True)
        assert "hostPath" not in volume
    (root / "etc/ledger-exporter/secrets/validator-1.password").write_text("node-secret\n")
    shutil.copy(pki.server.cert, root / "etc/ledger-exporter/tls/tls.crt")
    shutil.copy(pki.server.key, root / "etc/ledger-exporter/tls/tls.key")
    (secret,) = by_kind(objects, "Secret")
    web_config = flag(objects, "--web.config.file")
    assert web_config is not None
    Path(in_pod(web_config)).write_text(in_pod(secret["stringData"]["web-config.yml"]))
    config_file = Path(in_pod(flag(objects, "--config.file") or ""))
    config_file.write_text(in_pod(exporter_config(objects)), encoding="utf-8")
    flags = [
        in_pod(arg)
        for arg in container(objects)["args"]
        if not arg.startswith(("--config.file=", "--web.listen-address="))
    ]
    exporter = ExporterProcess(config_file, *flags)
    try:
        (monitor,) = by_kind(objects, "ServiceMonitor")
        (endpoint,) = monitor["spec"]["endpoints"]
        url = f"{endpoint['scheme']}://localhost:{exporter.port}{endpoint['path']}"
        context = ssl.create_default_context(cafile=pki.ca)
        login = base64.b64encode(f"{SCRAPE_USER}:{SCRAPE_PASSWORD}".encode()).decode()
        authorized = {"Authorization": f"Basic {login}"}

        def scraped() -> bool:
            answer = fetch(url, context=context, headers=authorized)
            return answer.status == 200 and 'ledger_node_up{node="validator-1"} 1' in (
                answer.body.decode()
            )

        wait_until(scraped, timeout=60, ignoring=(OSError,), message=exporter.log)
        assert fetch(url, context=context).status == 401
        sent = {r.headers.get("Authorization") for r in fake_node.requests}
        assert f"Basic {base64.b64encode(b'monitoring:node-secret').decode()}" in sent
    finally:
        code, log = exporter.stop()
    assert code == 0, log
    assert "node-secret" not in log and SCRAPE_PASSWORD not in log


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["Probe", "ServiceMonitor"])
def test_rendered_probe_mode_answers_the_operators_scrape(
    tmp_path: Path, fake_nodes: FakeNodes, kind: str
) -> None:
    """Probe mode rendered for two nodes, the exporter run on its config: each target's
    scrape, with the parameters its Probe or ServiceMonitor gives, gets that node's series
    under the target's name; a URL the targets do not name is refused unsent."""
    nodes = [fake_nodes.start() for _ in range(3)]
    for height, node in enumerate(nodes, start=10):  # each its own height: the right node
        node.play(health_doc(["c1"]), {"c1": chain_doc(height)})
    targets = [{"name": f"validator-{i}", "url": node.url} for i, node in enumerate(nodes[:2])]
    values = {"config": {"nodes": []}, "probe": {"enabled": True, "kind": kind, "targets": targets}}
    values_path = tmp_path / "values.yaml"
    values_path.write_text(yaml.safe_dump(values), encoding="utf-8")
    objects = helm_template("-f", str(values_path))
    config_file = tmp_path / "config.yml"
    config_file.write_text(exporter_config(objects), encoding="utf-8")
    with ready_exporter(config_file) as exporter:
        for target in targets:
            name = f"{RELEASE}-ledger-exporter-{target['name']}"
            (obj,) = [o for o in by_kind(objects, kind) if o["metadata"]["name"] == name]
            if kind == "Probe":
                spec = obj["spec"]
                (rule,) = spec["targets"]["staticConfig"]["relabelingConfigs"]
                [url] = spec["targets"]["staticConfig"]["static"]
                params = {
                    "target": url,
                    "module": spec["module"],
                    rule["targetLabel"][8:]: rule["replacement"],
                }
                path = spec["prober"]["path"]
            else:
                (endpoint,) = obj["spec"]["endpoints"]
                params = {key: value for key, [value] in endpoint["params"].items()}
                path = endpoint["path"]
            answer = fetch(f"{exporter.base}{path}?{urlencode(params)}", timeout=30)
            assert answer.status == 200, answer.body
            height = 10 + targets.index(target)
            series = (
                f'ledger_blockchain_height{{blockchain="c1",node="{target["name"]}"}} {height}.0'
            )
            assert series in answer.body.decode(), answer.body.decode()
        outsider = nodes[2]
        refused = fetch(f"{exporter.base}/probe?{urlencode({'target': outsider.url})}")
        assert refused.status == 403
        assert outsider.requests == []


# --- values that try to write YAML -------------------------------------------------------------

#: Everything on, with one entry in each list and map the schema describes, so that every
#: string value of the chart is rendered somewhere. The string leaves of values.yaml merged
#: with this are the values each injection test tries.
EVERYTHING: dict[str, Any] = {
    "commonLabels": {"team": "ledger"},
    "imagePullSecrets": [{"name": "regcred"}],
    "serviceAccount": {"annotations": {"example.com/role": "exporter"}},
    "podAnnotations": {"example.com/owner": "ledger"},
    "podLabels": {"tier": "monitoring"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "config": {
        "nodes": [
            {
                "name": "validator-1",
                "url": "https://validator-1.ledger.svc.cluster.local:7740/",
                "basic_auth": {
                    "username": "monitoring",
                    "password_file": "/etc/ledger-exporter/secrets/validator-1.password",
                },
            }
        ]
    },
    "existingSecret": "ledger-node-credentials",
    "extraSecretMounts": [
        {"name": "node-ca", "secretName": "ledger-node-ca", "mountPath": "/etc/ledger/ca"}
    ],
    "webConfig": {
        "enabled": True,
        "tlsSecretName": "ledger-exporter-tls",
        "config": {
            "tls_server_config": {
                "cert_file": "/etc/ledger-exporter/tls/tls.crt",
                "key_file": "/etc/ledger-exporter/tls/tls.key",
            },
            "basic_auth_users": {
                "prometheus": "$2b$10$4OJpN5HyqmgHkXrQO2v3o.Favsm1hjR2N0PIRoNdqukW1mAS8ZEn2"
            },
        },
    },
    "extraArgs": ["--log.level=debug"],
    "service": {"annotations": {"example.com/a": "b"}, "labels": {"exposed": "yes"}},
    "serviceMonitor": {
        "labels": {"release": "kube-prometheus-stack"},
        "basicAuth": {"username": {"name": "s", "key": "u"}, "password": {"name": "s", "key": "p"}},
    },
    "probe": {
        "enabled": True,
        "allowedTargets": ["https://validator-[0-9]+\\.ledger\\.internal:7740/"],
        "targets": [
            {
                "name": "validator-9",
                "url": "https://validator-9.ledger.internal:7740/",
                "module": "default",
                "labels": {"region": "eu"},
                "interval": "1m",
                "scrapeTimeout": "20s",
            }
        ],
        "labels": {"release": "kube-prometheus-stack"},
    },
    "prometheusRule": {
        "additionalLabels": {"release": "kube-prometheus-stack"},
        "alertLabels": {"team": "ledger"},
        "disabledGroups": ["ledger-watch"],
        "alerts": {"LedgerNodeDown": {"for": "10m", "severity": "warning"}},
    },
    "alertmanagerConfig": {"enabled": True},
    "persistence": {
        "enabled": True,
        "annotations": {"example.com/backup": "no"},
        "accessModes": ["ReadWriteMany"],  # one claim the probe-mode replicas share
    },
    "networkPolicy": {"enabled": True},
    "podDisruptionBudget": {"enabled": True, "maxUnavailable": "25%"},
}
#: Values whose being set changes what is rendered (the ConfigMap, the claim, the PDB's
#: field), each tried where it takes effect: the first dict of each pair is merged into
#: EVERYTHING, and only the values under the listed paths are tried there.
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "everything": ({}, ()),
    "probe-servicemonitors": ({"probe": {"kind": "ServiceMonitor"}}, ("probe.",)),
    "existing-objects": (
        {
            "existingConfigMap": "my-config",
            "persistence": {"existingClaim": "my-claim"},
            "podDisruptionBudget": {"minAvailable": "50%"},
        },
        ("existingConfigMap", "persistence.existingClaim", "podDisruptionBudget.minAvailable"),
    ),
    # daemon mode: the StatefulSet's claim template, the headless Service
    "daemon-claims": (
        {"probe": {"enabled": False}, "persistence": {"accessModes": ["ReadWriteOnce"]}},
        ("persistence.size", "persistence.storageClassName", "persistence.annotations", "service."),
    ),
}
#: Left at their value (the schema allows only these, or the chart looks them up), not
#: given a marker: enums, bcrypt hashes, a module and a rule group that must exist.
KEPT = re.compile(
    r"image\.pullPolicy|service\.type|probe\.kind|persistence\.accessModes\[\d+\]"
    r"|webConfig\.config\.basic_auth_users\..*|probe\.targets\[\d+\]\.module"
    r"|prometheusRule\.disabledGroups\[\d+\]|(pod)?[sS]ecurityContext\..*"
    r"|replicaSpread|prometheusRule\.alerts\..*\.severity"
)


def merged(base: Any, extra: Any) -> Any:
    """``extra`` laid over ``base`` (maps merged, anything else replaced)."""
    if isinstance(base, dict) and isinstance(extra, dict):
        return {**base, **{k: merged(base.get(k), v) for k, v in extra.items()}}
    return extra


def string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of the string values in ``value`` (keys and list indices)."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from string_leaves(sub, (*path, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from string_leaves(sub, (*path, index))
    elif isinstance(value, str):
        yield path


def dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def get_at(values: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        values = values[part]
    return values


def set_at(values: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``values`` with ``value`` at ``path``."""
    copy = json.loads(json.dumps(values))
    get_at(copy, path[:-1])[path[-1]] = value
    return copy


def marker(path: tuple[Any, ...], value: str, number: int) -> str:
    """A value for ``path`` found nowhere else in the render and valid where it stands."""
    name = dotted(path)
    if KEPT.fullmatch(name):
        return value
    token = f"zqm{number}x"
    last = str(path[-1])
    if last in ("interval", "scrapeTimeout", "scrape_interval", "scrape_timeout", "for"):
        return f"{1000 + number}s"
    if last == "digest":
        return f"sha256:{number:064x}"
    if last == "url":
        return f"https://{token}.example:7740/"
    if last == "mountPath" or "_file" in last:
        return f"/etc/ledger/{token}"
    if name == "persistence.size":
        return f"{100 + number}Mi"
    if name in ("podDisruptionBudget.maxUnavailable", "podDisruptionBudget.minAvailable"):
        return f"{number % 100}%"
    if name == "image.registry":
        return f"{token}.example"
    if name.startswith("extraArgs"):
        return f"--{token}"
    return token


def variant_values(variant: str) -> dict[str, Any]:
    """values.yaml with EVERYTHING and the variant's values, each string tried given its
    marker."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    values: dict[str, Any] = merged(merged(defaults, EVERYTHING), VARIANTS[variant][0])
    for number, path in enumerate(tried(values, variant)):
        values = set_at(values, path, marker(path, get_at(values, path), number))
    return values


def tried(values: dict[str, Any], variant: str) -> list[tuple[Any, ...]]:
    """The string values of a variant tried there: those it lists, or (with none listed)
    all but those another variant sets."""
    only_these = VARIANTS[variant][1]
    elsewhere = {name for _, names in VARIANTS.values() for name in names}
    return [
        path
        for path in sorted(string_leaves(values), key=dotted)
        if (dotted(path).startswith(only_these) if only_these else dotted(path) not in elsewhere)
    ]


INJECTIONS = [
    (variant, path) for variant in VARIANTS for path in tried(variant_values(variant), variant)
]


def render_values(values: dict[str, Any], tmp_path: Path, name: str) -> tuple[int, str, str]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    answer = run_tool("helm", "template", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(path))
    return answer.returncode, answer.stdout, answer.stderr


def shape(text: str) -> list[tuple[str, str, list[str]]]:
    """Each object's kind, name and every key path it holds (list indices included)."""

    def paths(value: Any, at: str = "") -> Iterator[str]:
        if isinstance(value, dict):
            for key, sub in value.items():
                yield f"{at}/{key}"
                yield from paths(sub, f"{at}/{key}")
        elif isinstance(value, list):
            for index, sub in enumerate(value):
                yield f"{at}/{index}"
                yield from paths(sub, f"{at}/{index}")

    return sorted(
        (doc["kind"], str(doc["metadata"]["name"]), sorted(paths(doc)))
        for doc in yaml.safe_load_all(text)
        if doc
    )


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each variant's render with every string at its marker."""
    where = tmp_path_factory.mktemp("marked")
    rendered = {}
    for variant in VARIANTS:
        code, out, err = render_values(variant_values(variant), where, variant)
        assert code == 0, err
        rendered[variant] = out
    return rendered


def payloads(text: str, value: str) -> list[str]:
    """What to append to ``value`` to try each place it is written: under a key at that
    line's indentation a sibling key, after a list's dash another item (and a key beside
    it); where it shows nowhere, a key at the top; and everywhere a new document."""
    found: list[str] = []
    for line in text.splitlines():
        if value not in line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        if line.lstrip().startswith("- "):
            found += ["\n" + " " * indent + "- injected", "\n" + " " * (indent + 2) + "injected: 1"]
        else:
            found.append("\n" + " " * indent + "injected: 1")
    if not found:
        found = ["\ninjected: 1"]
    document = "\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: injected\n"
    return [*list(dict.fromkeys(found))[:4], document]


def pointer(path: tuple[Any, ...]) -> str:
    """The JSON pointer of a values path, as helm's schema errors name it."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class Injector:
    """Renders a variant with many values injected at once, and finds, by halving a group
    whose render fails or changes, which value did it: the render stays cheap (a few dozen
    `helm template` for ~80 values, not one or more each)."""

    def __init__(self, variant: str, expected: str, tmp_path: Path) -> None:
        self.values = variant_values(variant)
        self.expected = shape(expected)
        self.tmp_path = tmp_path
        self.renders = 0
        self.refused: set[tuple[Any, ...]] = set()  # by the schema or a template's check
        self.problems: list[str] = []

    def render(self, injected: dict[tuple[Any, ...], str]) -> tuple[int, str, str]:
        values = self.values
        for path, payload in injected.items():
            values = set_at(values, path, get_at(self.values, path) + payload)
        self.renders += 1
        return render_values(values, self.tmp_path, f"render-{self.renders}")

    def judge(self, injected: dict[tuple[Any, ...], str]) -> None:
        """Each value of ``injected`` fails the render, or leaves the objects as they were."""
        code, out, err = self.render(injected)
        if code != 0 and "values don't meet the specifications of the schema" in err:
            named = set(re.findall(r"at '([^']*)'", err))
            by_schema = {path for path in injected if pointer(path) in named}
            assert by_schema, err
            self.refused |= by_schema
            rest = {path: p for path, p in injected.items() if path not in by_schema}
            if rest:
                self.judge(rest)
            return
        raw = "YAML parse error" in err or "error converting YAML" in err
        changed = code == 0 and (
            shape(out) != self.expected
            or any("injected" in doc for doc in yaml.safe_load_all(out) if doc)
        )
        if code == 0 and not changed:
            return
        if len(injected) > 1:
            paths = list(injected)
            half = len(paths) // 2
            self.judge({path: injected[path] for path in paths[:half]})
            self.judge({path: injected[path] for path in paths[half:]})
            return
        ((path, payload),) = injected.items()
        if raw:
            self.problems.append(f"{dotted(path)} + {payload!r} is written raw: {err.strip()}")
        elif changed:
            self.problems.append(f"{dotted(path)} + {payload!r} changed the rendered objects")
        else:
            assert "execution error" in err, err  # a template's own check refused it
            self.refused.add(path)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_value_with_a_newline_adds_no_object_and_no_key(
    marked: dict[str, str], tmp_path: Path, variant: str
) -> None:
    """Every string value of the chart (values.yaml's and the schema's: see the test
    below), given a newline and YAML after it (a key where the value is written, at that
    line's indentation; a list item; a document), either fails the render (the schema, or a
    template's check) or renders exactly the objects, kinds, names and keys that the value
    alone does. The values are tried together, then halved down to the one that fails."""
    injector = Injector(variant, marked[variant], tmp_path)
    paths = [path for v, path in INJECTIONS if v == variant]
    tries = {path: payloads(marked[variant], get_at(injector.values, path)) for path in paths}
    for round_ in range(max(len(t) for t in tries.values())):
        injector.judge(
            {
                path: found[round_]
                for path, found in tries.items()
                if round_ < len(found) and path not in injector.refused
            }
        )
    assert not injector.problems, "\n".join(injector.problems)
    # the schema refuses a newline in every namespace and name
    for name in ("namespaceOverride", "nameOverride", "fullnameOverride", "dashboards.namespace"):
        assert variant != "everything" or any(dotted(p) == name for p in injector.refused), name


def schema_strings(node: dict[str, Any], path: str = "") -> Iterator[str]:
    """Dotted paths of the schema's string fields ([] an array's item, * a map's value)."""
    types = node.get("type")
    if (
        types == "string"
        or (isinstance(types, list) and "string" in types)
        or ("enum" in node and all(isinstance(e, str) for e in node["enum"]))
    ):
        yield path
    for key, sub in node.get("properties", {}).items():
        yield from schema_strings(sub, f"{path}.{key}".lstrip("."))
    if isinstance(node.get("items"), dict):
        yield from schema_strings(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_strings(node["additionalProperties"], f"{path}.*")


def test_the_injections_try_every_string_of_values_and_schema() -> None:
    """Every string of values.yaml, and every string field of values.schema.json, is among
    the values the test above tries."""

    def general(path: tuple[Any, ...]) -> str:
        return "".join("[]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")

    covered = {general(path) for _, path in INJECTIONS}
    # a map's key stands for any: commonLabels.team is commonLabels.*, and
    # prometheusRule.alerts.LedgerNodeDown.for is prometheusRule.alerts.*.for
    generic = {
        general((*path[:at], "*", *path[at + 1 :]))
        for _, path in INJECTIONS
        for at in range(len(path))
        if isinstance(path[at], str)
    }
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    missing = [p for p in schema_strings(schema) if p not in covered and p not in generic]
    assert not missing, f"schema strings no injection tries: {missing}"
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    untried = [dotted(p) for p in string_leaves(defaults) if general(p) not in covered]
    assert not untried, f"values.yaml strings no injection tries: {untried}"
    assert len(INJECTIONS) > 60
