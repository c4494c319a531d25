"""Each way to deploy the daemon keeps its state file (``--state.file``, issue 19) where it
persists and where the exporter may write: systemd's StateDirectory, the image's volume owned
by its non-root user, the compose stack's named volume, the Kubernetes emptyDir. Offline, on
the files as shipped; ``test_deploy_{systemd,docker,compose,kubernetes}.py`` validate them
whole (systemd-analyze, hadolint, docker-compose config, the Kubernetes schemas)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import PurePosixPath
from typing import Any

import yaml

from tests.support.testdata import REPO

STATE_DIRECTORY = PurePosixPath("/var/lib/ledger-exporter")
UNIT = REPO / "deploy" / "systemd" / "ledger-exporter.service"
DOCKERFILE = REPO / "Dockerfile"
COMPOSE_FILE = REPO / "deploy" / "compose" / "docker-compose.yml"
STATEFULSET = REPO / "deploy" / "kubernetes" / "statefulset.yaml"


def state_flag(args: list[str]) -> PurePosixPath:
    """The one ``--state.file`` among ``args``, as a path."""
    (flag,) = [arg for arg in args if arg.startswith("--state.file=")]
    return PurePosixPath(flag.split("=", 1)[1])


def unit_directives() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if match := re.fullmatch(r"([A-Za-z]+)=(.*)", line.strip()):
            found.setdefault(match[1], []).append(match[2])
    return found


def final_stage() -> list[tuple[str, str]]:
    """The Dockerfile's last stage as (KEYWORD, arguments), continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in joined.splitlines()]
    parsed = [tuple(line.split(" ", 1)) for line in lines if line and not line.startswith("#")]
    last = max(i for i, (keyword, _) in enumerate(parsed) if keyword == "FROM")
    return [(keyword, args) for keyword, args in parsed[last:]]


def test_systemd_keeps_it_in_the_state_directory_systemd_makes() -> None:
    unit = unit_directives()
    assert unit["StateDirectory"] == ["ledger-exporter"]
    assert unit["StateDirectoryMode"] == ["0700"]
    (start,) = unit["ExecStart"]
    assert state_flag(shlex.split(start)).parent == STATE_DIRECTORY  # /var/lib/ + the name
    assert unit["DynamicUser"] == ["yes"] and unit["ProtectSystem"] == ["strict"]
    assert "ReadWritePaths" not in unit  # the state directory is the one writable path


def test_the_image_keeps_it_on_a_volume_its_non_root_user_owns() -> None:
    final = final_stage()
    keywords = [keyword for keyword, _ in final]
    (volume,) = [json.loads(args) for keyword, args in final if keyword == "VOLUME"]
    assert volume == [str(STATE_DIRECTORY)]
    (made,) = [args for keyword, args in final if keyword == "RUN" and str(STATE_DIRECTORY) in args]
    assert f"install -d -o 65532 -g 65532 -m 0700 {STATE_DIRECTORY}" in made
    assert keywords.index("RUN") < keywords.index("USER") < keywords.index("VOLUME")
    assert ("USER", "65532:65532") in final
    (command,) = [json.loads(args) for keyword, args in final if keyword == "CMD"]
    assert state_flag(command).parent == STATE_DIRECTORY


def test_compose_keeps_it_on_a_named_volume() -> None:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    exporter = document["services"]["exporter"]
    path = state_flag(exporter["command"])
    assert f"exporter-state:{path.parent}" in exporter["volumes"]
    assert "exporter-state" in document["volumes"]  # named: outlives the container
    assert exporter["read_only"] is True  # the volume is the one writable path


def test_kubernetes_keeps_it_on_an_emptydir_that_outlives_container_restarts() -> None:
    text = STATEFULSET.read_text(encoding="utf-8")
    pod = yaml.safe_load(text)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    path = state_flag(container["args"])
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    mount = mounts[str(path.parent)]
    assert not mount.get("readOnly", False)
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    empty_dir = volumes[mount["name"]]["emptyDir"]
    assert "medium" not in empty_dir  # on the node's disk, not counted as the pod's memory
    assert empty_dir["sizeLimit"]
    assert "does not survive" in text and "PersistentVolumeClaim" in text  # said plainly
