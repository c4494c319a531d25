"""Offline checks of the compose demo stack and its high-availability layer (no Docker
engine runs here).

`docker-compose config` (Debian's v1.29, which needs no engine for it) validates the files
against the compose schema and resolves them (the HA file merged over the demo's, as
`docker compose -f ... -f ...` does); the other tests check what the schema cannot: that
every mounted or built path exists in the repository, that the services point at each
other with the right names and ports, and that the Prometheus and Alertmanager configs
pass their own tools.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.programs import require_program
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO

COMPOSE_DIR = REPO / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
HA_FILE = COMPOSE_DIR / "docker-compose.ha.yml"
PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"


@functools.cache
def _resolved(compose_files: tuple[Path, ...]) -> dict[str, Any]:
    command = [require_program("docker-compose")]
    for compose_file in compose_files:
        command += ["-f", str(compose_file)]
    result = subprocess.run(
        [*command, "config"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "GRAFANA_ADMIN_PASSWORD": "test"},
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


def compose_config(*compose_files: Path) -> dict[str, Any]:
    """The files as docker-compose resolves them, each later one merged over the ones
    before: validated, anchors merged, paths absolute (resolved once per module)."""
    return copy.deepcopy(_resolved(compose_files))


def referenced_paths(config: dict[str, Any]) -> list[Path]:
    """Host paths a resolved compose config needs: bind-mount sources and build contexts."""
    paths: list[Path] = []
    for service in config["services"].values():
        build = service.get("build")
        if build:
            context = Path(build["context"])
            paths.extend([context, context / build.get("dockerfile", "Dockerfile")])
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source")
            if source and source.startswith("/"):
                paths.append(Path(source))
    return paths


def missing_paths(*compose_files: Path) -> list[Path]:
    """Referenced host paths that do not exist (compose would create empty dirs instead)."""
    return [path for path in referenced_paths(compose_config(*compose_files)) if not path.exists()]


def services() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    result: dict[str, Any] = document["services"]
    return result


def test_compose_file_is_valid() -> None:
    config = compose_config(COMPOSE_FILE)
    assert set(config["services"]) == {
        "simulator",
        "fault-injector",
        "exporter",
        "prometheus",
        "alertmanager",
        "grafana",
    }


def test_compose_validation_rejects_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  x:\n    image: busybox\n    ports: 80\n", encoding="utf-8")
    result = subprocess.run(
        [require_program("docker-compose"), "-f", str(bad), "config"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "ports" in result.stderr


def test_missing_paths_finds_absent_mounts_and_contexts(tmp_path: Path) -> None:
    """The path check on a fixture: one present mount, one absent, a context without a
    Dockerfile (docker-compose itself rejects a missing context, not these)."""
    (tmp_path / "present.yml").write_text("a: 1\n", encoding="utf-8")
    (tmp_path / "context").mkdir()
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(
        "services:\n"
        "  a:\n    image: busybox\n"
        "    volumes: ['./present.yml:/p.yml:ro', './absent/dir:/d:ro']\n"
        "  b:\n    build: {context: ./context}\n",
        encoding="utf-8",
    )
    assert sorted(missing_paths(compose)) == sorted(
        [tmp_path / "absent" / "dir", tmp_path / "context" / "Dockerfile"]
    )


def test_every_mounted_and_built_path_exists_in_the_repository() -> None:
    """Fails until deploy/prometheus/* and grafana/* are merged: they are mounted."""
    assert missing_paths(COMPOSE_FILE) == []
    assert missing_paths(COMPOSE_FILE, HA_FILE) == []


def test_grafana_mounts_provisioning_and_dashboards_with_anonymous_viewer() -> None:
    grafana = services()["grafana"]
    assert "../../grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    assert "../../grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"


def test_exporter_config_polls_the_simulator_nodes() -> None:
    """exporter.yml's URLs match the simulator's command: paths layout, its port, N nodes."""
    simulator = services()["simulator"]["command"]
    node_count = int(simulator[simulator.index("--nodes") + 1])
    port = int(simulator[simulator.index("--listen-address") + 1].rsplit(":", 1)[1])
    config = yaml.safe_load((COMPOSE_DIR / "exporter.yml").read_text(encoding="utf-8"))
    assert set(config) <= {"scrape_interval", "scrape_timeout", "nodes"}
    urls = [node["url"] for node in config["nodes"]]
    expected = [f"http://simulator:{port}/nodes/node-{i}/" for i in range(1, node_count + 1)]
    assert urls == expected
    mounts = services()["exporter"]["volumes"]
    assert mounts[0] == "./exporter.yml:/etc/ledger-exporter/config.yml:ro"
    assert mounts[1:] == ["exporter-state:/var/lib/ledger-exporter"]  # tests/deploy/test_state.py


def test_prometheus_scrapes_the_exporter_and_alerts_to_alertmanager() -> None:
    """Fails until deploy/prometheus/prometheus.yml is merged (the compose stack's config)."""
    assert PROMETHEUS_CONFIG.exists(), f"{PROMETHEUS_CONFIG} missing (monitoring branch)"
    prometheus = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    targets = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in prometheus["scrape_configs"]
    }
    assert targets["ledger-exporter"] == ["exporter:9877"]
    alertmanagers = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alertmanagers == ["alertmanager:9093"]
    mounts = services()["prometheus"]["volumes"]
    assert "../prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    for rule_file in prometheus["rule_files"]:
        assert f"../prometheus/{rule_file}:/etc/prometheus/{rule_file}:ro" in mounts


@pytest.mark.parametrize("files", [(COMPOSE_FILE,), (COMPOSE_FILE, HA_FILE)], ids=["demo", "ha"])
def test_depends_on_names_services_with_healthchecks(files: tuple[Path, ...]) -> None:
    """A `service_healthy` condition only resolves if the dependency has a healthcheck."""
    all_services = compose_config(*files)["services"]
    image_has_healthcheck = {  # the ledger image's HEALTHCHECK
        name for name, service in all_services.items() if service["image"] == "ledger-exporter:dev"
    }
    assert {"simulator", "fault-injector", "exporter"} <= image_has_healthcheck
    for name, service in all_services.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in all_services, f"{name} depends on unknown {dependency}"
            if condition["condition"] == "service_healthy":
                target = all_services[dependency]
                assert "healthcheck" in target or dependency in image_has_healthcheck


@pytest.mark.parametrize("service", ["simulator", "fault-injector"])
def test_inline_python_compiles(service: str) -> None:
    definition = services()[service]
    if service == "simulator":
        code = definition["healthcheck"]["test"][3]
    else:
        code = definition["command"][0]
    compile(code, f"<{service}>", "exec")


def test_alertmanager_mounts_the_shipped_config_which_passes_amtool() -> None:
    """The stack's Alertmanager runs the mixin's routes and inhibition tree, unchanged."""
    mounts = {
        target: COMPOSE_DIR / source
        for source, target, _ in (m.split(":") for m in services()["alertmanager"]["volumes"])
    }
    config = mounts["/etc/alertmanager/alertmanager.yml"]
    assert config.resolve() == REPO / "deploy" / "alertmanager" / "alertmanager.yml"
    result = subprocess.run(
        [require_program("amtool"), "check-config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "inhibit rules" in result.stdout


def test_compose_prometheus_layout_passes_promtool(tmp_path: Path, promtool: Promtool) -> None:
    """The container's /etc/prometheus, rebuilt from the mounts, passes promtool.

    Fails until deploy/prometheus/{prometheus,alerts,rules}.yml are merged.
    """
    layout = {
        Path(target).name: COMPOSE_DIR / source
        for source, target, _ in (m.split(":") for m in services()["prometheus"]["volumes"])
        if target.startswith("/etc/prometheus/")
    }
    missing = sorted(str(path) for path in layout.values() if not path.exists())
    assert not missing, f"files the compose Prometheus mounts are missing: {missing}"
    for name, source in layout.items():
        shutil.copy(source, tmp_path / name)
    printed = promtool.check("check", "config", str(tmp_path / "prometheus.yml"))
    assert "SUCCESS: 2 rule files found" in printed


# --- the high-availability pair (docker-compose.ha.yml over docker-compose.yml) --------------

HA_PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "ha.yml"
PAIRS = {"exporter": 9877, "prometheus": 9090, "alertmanager": 9093}  # container ports


def ha_services() -> dict[str, Any]:
    """The services of the HA stack, as docker-compose resolves the two files."""
    found: dict[str, Any] = compose_config(COMPOSE_FILE, HA_FILE)["services"]
    return found


def halves(kind: str) -> dict[str, dict[str, Any]]:
    """The two services of one pair: the demo's (its first half) and the HA file's `-b`."""
    all_services = ha_services()
    return {name: all_services[name] for name in (kind, f"{kind}-b")}


def host_names(name: str, service: dict[str, Any]) -> set[str]:
    """The names a service answers to inside the stack: its own and its aliases."""
    aliases = service.get("networks", {}).get("default") or {}
    return {name, *aliases.get("aliases", [])}


def resolved_mounts(service: dict[str, Any]) -> dict[str, str]:
    """A resolved service's mounts: container path -> host path or volume name."""
    return {parts[1]: parts[0] for parts in (volume.split(":") for volume in service["volumes"])}


def test_ha_stack_adds_the_second_half_of_each_pair() -> None:
    assert set(ha_services()) == set(compose_config(COMPOSE_FILE)["services"]) | {
        "exporter-b",
        "prometheus-b",
        "alertmanager-b",
    }
    published = [
        port["published"] for service in ha_services().values() for port in service.get("ports", [])
    ]
    assert len(published) == len(set(published)), "two services publish one host port"
    for kind, port in PAIRS.items():
        for service in halves(kind).values():
            assert [p["target"] for p in service["ports"]] == [port]


def test_ha_exporters_poll_the_same_nodes_each_with_its_own_state() -> None:
    """The same image, command and config; each its own named volume for its state file
    (tests/deploy/test_state.py: the demo's), the only path it may write."""
    demo, second = halves("exporter").values()
    assert second["command"] == demo["command"] and second["image"] == demo["image"]
    assert second["build"] == demo["build"]
    for key in ("read_only", "cap_drop", "security_opt", "depends_on", "restart"):
        assert second[key] == demo[key], key
    mounts = [resolved_mounts(service) for service in (demo, second)]
    assert (
        mounts[0]["/etc/ledger-exporter/config.yml"]
        == (mounts[1]["/etc/ledger-exporter/config.yml"])
    )
    states = [found["/var/lib/ledger-exporter"] for found in mounts]
    assert states == ["exporter-state", "exporter-b-state"]
    assert set(states) <= set(compose_config(COMPOSE_FILE, HA_FILE)["volumes"])


def test_ha_prometheus_pair_runs_ha_yml_each_with_its_name() -> None:
    """Both run deploy/prometheus/ha.yml with its rule files, with the flag that fills its
    external label, each from its own PROMETHEUS_REPLICA."""
    names = []
    for service in halves("prometheus").values():
        mounts = resolved_mounts(service)
        assert Path(mounts["/etc/prometheus/prometheus.yml"]) == HA_PROMETHEUS_CONFIG
        for rule_file in yaml.safe_load(HA_PROMETHEUS_CONFIG.read_text())["rule_files"]:
            assert Path(mounts[f"/etc/prometheus/{rule_file}"]).parent == REPO / "deploy/prometheus"
        assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]
        assert "--enable-feature=expand-external-labels" in service["command"]
        names.append(service["environment"]["PROMETHEUS_REPLICA"])
    assert len(set(names)) == 2 and all(names)


def test_ha_yml_targets_are_the_stack_s_services() -> None:
    """Every exporter and Alertmanager that ha.yml names is a service (or alias) of the
    stack, on its container port, and each pair's two halves are both named."""
    config = yaml.safe_load(HA_PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    [exporters] = [j for j in config["scrape_configs"] if j["job_name"] == "ledger-exporter"]
    scraped = [t for group in exporters["static_configs"] for t in group["targets"]]
    [alerting] = config["alerting"]["alertmanagers"]
    alerted = [t for group in alerting["static_configs"] for t in group["targets"]]
    for kind, targets in (("exporter", scraped), ("alertmanager", alerted)):
        pair = halves(kind)
        hosts = [target.rpartition(":")[0] for target in targets]
        assert {target.rpartition(":")[2] for target in targets} == {str(PAIRS[kind])}
        owners = [
            [name for name, service in pair.items() if host in host_names(name, service)]
            for host in hosts
        ]
        assert sorted(owner for found in owners for owner in found) == sorted(pair), (
            f"{kind}: {hosts} are not the two services {sorted(pair)}"
        )


def test_ha_alertmanagers_form_one_cluster() -> None:
    """Each listens for gossip and names the other as its peer; both run the shipped
    config."""
    pair = halves("alertmanager")
    for name, service in pair.items():
        flags = dict(flag.split("=", 1) for flag in service["command"])
        assert flags["--config.file"] == "/etc/alertmanager/alertmanager.yml"
        listen_port = flags["--cluster.listen-address"].rpartition(":")[2]
        peer_host, _, peer_port = flags["--cluster.peer"].rpartition(":")
        [other] = [other for other in pair if other != name]
        assert peer_host in host_names(other, pair[other]), f"{name} peers {peer_host}"
        other_flags = dict(flag.split("=", 1) for flag in pair[other]["command"])
        assert peer_port == other_flags["--cluster.listen-address"].rpartition(":")[2]
        assert listen_port == peer_port
        mounted = Path(resolved_mounts(service)["/etc/alertmanager/alertmanager.yml"])
        assert mounted == REPO / "deploy" / "alertmanager" / "alertmanager.yml"


@pytest.mark.parametrize("name", ["prometheus", "prometheus-b"])
def test_ha_prometheus_layout_passes_promtool(
    tmp_path: Path, promtool: Promtool, name: str
) -> None:
    """The container's /etc/prometheus, rebuilt from the resolved mounts, passes promtool."""
    for target, source in resolved_mounts(ha_services()[name]).items():
        if target.startswith("/etc/prometheus/"):
            shutil.copy(source, tmp_path / Path(target).name)
    printed = promtool.check("check", "config", str(tmp_path / "prometheus.yml"))
    assert "SUCCESS: 2 rule files found" in printed
