"""Files outside Python that must carry one of the exporter's defaults say what the code says.

The image, the manifests, the chart, the compose stack and the systemd unit cannot import the
default port or telemetry path; each place that writes one is read here and compared with the
one place in code it comes from (exporter/flags.py's DEFAULT_PORT, exporter/cli.py's
DEFAULTS, the config's declared defaults), so changing a default fails here until they follow.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import yaml

from exporter.cli import DEFAULTS
from exporter.config.exporter import Config
from exporter.flags import DEFAULT_PORT
from exporter.values import parse_go_duration
from tests.support.testdata import REPO

PATH = str(DEFAULTS["telemetry_path"])


def _text(relative: str) -> str:
    return (REPO / relative).read_text(encoding="utf-8")


def _documents(relative: str) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(_text(relative)) if doc]


def _dockerfile_expose() -> set[str]:
    return set(re.findall(r"^EXPOSE (\d+)$", _text("Dockerfile"), re.MULTILINE))


def _dockerfile_healthcheck() -> set[str]:
    return set(re.findall(r"http://127\.0\.0\.1:(\d+)/-/healthy", _text("Dockerfile")))


def _manifest_ports(relative: str) -> set[str]:
    """Every listen address's port, container port and Service port of a manifest file."""
    text = _text(relative)
    found = set(re.findall(r"--web\.listen-address=:(\d+)", text))
    found |= set(re.findall(r"containerPort: (\d+)", text))
    for doc in _documents(relative):
        if doc.get("kind") == "Service":
            spec = doc["spec"]
            assert isinstance(spec, dict)
            found |= {str(port["port"]) for port in spec["ports"]}
    return found


def _chart_port() -> set[str]:
    values = yaml.safe_load(_text("deploy/helm/ledger-exporter/values.yaml"))
    return {str(values["service"]["port"])}


def _compose_ports() -> set[str]:
    compose = yaml.safe_load(_text("deploy/compose/docker-compose.yml"))
    ports = compose["services"]["exporter"]["ports"]
    return {part for port in ports for part in str(port).split(":")}


def _prometheus_targets() -> set[str]:
    config = yaml.safe_load(_text("deploy/prometheus/prometheus.yml"))
    job = next(job for job in config["scrape_configs"] if job["job_name"] == "ledger-exporter")
    return {
        target.rpartition(":")[2]
        for static in job["static_configs"]
        for target in static["targets"]
    }


def _systemd_ports() -> set[str]:
    unit = _text("deploy/systemd/ledger-exporter.service")
    found = set(re.findall(r"LISTEN_ADDRESS=127\.0\.0\.1:(\d+)", unit))
    return found | set(re.findall(r"port (\d+) needs", unit))


PORTS: dict[str, Callable[[], set[str]]] = {
    "Dockerfile EXPOSE": _dockerfile_expose,
    "Dockerfile HEALTHCHECK": _dockerfile_healthcheck,
    "deploy/kubernetes/statefulset.yaml": lambda: _manifest_ports(
        "deploy/kubernetes/statefulset.yaml"
    ),
    "deploy/kubernetes/service.yaml": lambda: _manifest_ports("deploy/kubernetes/service.yaml"),
    "deploy/kubernetes/probe/deployment.yaml": lambda: _manifest_ports(
        "deploy/kubernetes/probe/deployment.yaml"
    ),
    "deploy/kubernetes/probe/service.yaml": lambda: _manifest_ports(
        "deploy/kubernetes/probe/service.yaml"
    ),
    "the chart's service.port": _chart_port,
    "the compose stack's ports": _compose_ports,
    "deploy/prometheus/prometheus.yml": _prometheus_targets,
    "the systemd unit's comments": _systemd_ports,
}


@pytest.mark.parametrize("where", list(PORTS))
def test_the_default_port_is_the_code_s(where: str) -> None:
    found = PORTS[where]()
    assert found, f"{where}: no port found (did the file change shape?)"
    assert found == {str(DEFAULT_PORT)}, f"{where} carries {found}, the exporter {DEFAULT_PORT}"


def test_the_default_listen_address_is_on_the_default_port() -> None:
    assert DEFAULTS["listen_address"] == [f":{DEFAULT_PORT}"]


def test_the_chart_scrapes_the_default_telemetry_path() -> None:
    """The chart does not pass --web.telemetry-path: its ServiceMonitor and Probe read the
    exporter's default path."""
    template = _text("deploy/helm/ledger-exporter/templates/servicemonitor.yaml")
    paths = set(re.findall(r"^\s*path: (\S+)$", template, re.MULTILINE))
    assert paths == {PATH}
    pod = _text("deploy/helm/ledger-exporter/templates/_pod.tpl")
    assert "--web.listen-address=" in pod, "the pod's args moved: read them where they are"
    assert "--web.telemetry-path" not in pod


@pytest.mark.parametrize("key", ["scrape_interval", "scrape_timeout"])
def test_the_chart_s_config_states_the_exporter_s_defaults(key: str) -> None:
    """values.yaml's `config` writes these two out, to show where they go: at the defaults."""
    values = yaml.safe_load(_text("deploy/helm/ledger-exporter/values.yaml"))
    assert parse_go_duration(values["config"][key]) == getattr(Config, key), key


def test_the_example_config_s_url_is_the_default_address() -> None:
    urls = set(re.findall(r"http://localhost:(\d+)/", _text("config/example.yml")))
    assert urls == {str(DEFAULT_PORT)}
