"""``ledger-exporter demo`` as a user runs it: the printed URLs work, the printed fault example
switches a fault the metrics show, and Ctrl-C stops everything it started (issue 3)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ledger_simulator.demo import PAIR_INSTANCE, REPLICA_LABEL, RULE_FILES, prometheus_config
from tests.support.http import fetch
from tests.support.ports import free_port, port_is_closed
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusApi
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

LAST_LINE = "Press Ctrl-C to stop."
DEFAULT_NODES = 4


def project_rule_groups() -> list[str]:
    """Names of the groups in deploy/prometheus/{rules,alerts}.yml, the rules' one source."""
    names: list[str] = []
    for name in RULE_FILES:
        document = yaml.safe_load((REPO / "deploy" / "prometheus" / name).read_text())
        names.extend(group["name"] for group in document["groups"])
    assert len(names) >= 2
    return names


class Demo:
    """``python -m exporter demo ARGS`` (or ``command``, in a process group of its own); its
    start-up lines parsed into ``label -> text``."""

    def __init__(self, tmp_path: Path, *args: str, command: list[str] | None = None) -> None:
        self.stderr = (tmp_path / "demo.stderr").open("w")
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "exporter", "demo", *args],
            start_new_session=command is not None,  # make and its demo: one group to stop
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            cwd=REPO,
        )
        self.stderr_path = tmp_path / "demo.stderr"
        self.own_group = command is not None
        assert self.process.stdout is not None
        self._lines: queue.Queue[str] = queue.Queue()
        self._pump = threading.Thread(
            target=_pump, args=(self.process.stdout, self._lines), daemon=True
        )
        self._pump.start()
        try:
            self.lines = self._read_until(LAST_LINE, timeout=15)
        except BaseException:
            self.stop()
            raise
        labelled = (line.partition(":") for line in self.lines if ":" in line)
        self.printed = {label: text.strip() for label, _, text in labelled}

    def _read_until(self, last: str, timeout: float) -> list[str]:
        seen: list[str] = []

        def printed_last() -> bool:
            with contextlib.suppress(queue.Empty):
                seen.append(self._lines.get(timeout=0.1).rstrip())
            return last in seen

        wait_until(
            printed_last,
            timeout=timeout,
            interval=0,
            message=lambda: f"the demo printed only {seen}; {self.log()}",
        )
        return seen

    def log(self) -> str:
        return self.stderr_path.read_text()

    def interrupt(self, timeout: float = 10.0) -> int:
        """Ctrl-C; the exit code (the process is killed if it does not end in time)."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.stop()

    def stop(self) -> None:
        if self.own_group:  # make's demo runs on after make is killed: stop the group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._pump.join(timeout=5)  # it ends at EOF, once the process has exited
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.stderr.close()


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


@pytest.fixture
def start_demo(tmp_path: Path) -> Iterator[Callable[..., Demo]]:
    started: list[Demo] = []

    def start(*args: str) -> Demo:
        started.append(Demo(tmp_path, *args))
        return started[-1]

    yield start
    for demo in started:
        demo.stop()


def ready(landing: str) -> bool:
    """The exporter behind ``landing`` has published its first cycle."""
    return fetch(landing + "-/ready").status == 200


def samples(metrics_url: str, name: str, by: str, **labels: str) -> dict[str, float]:
    """The samples of ``name`` the exporter at ``metrics_url`` serves whose labels include
    ``labels``, by the value of their label ``by``."""
    body = fetch(metrics_url).text
    return {
        sample.labels[by]: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    }


def node_up(metrics_url: str) -> dict[str, float]:
    return samples(metrics_url, "ledger_node_up", "node")


def vote_rounds(metrics_url: str, chain: str) -> dict[str, float]:
    return samples(metrics_url, "ledger_blockchain_vote_round", "node", blockchain=chain)


def reports(metrics_url: str, expected: dict[str, float]) -> bool:
    """The exporter at ``metrics_url`` serves ``ledger_node_up`` as ``expected`` (by node)."""
    return node_up(metrics_url) == expected


def behind_seconds(metrics: str, node: str) -> dict[str, float]:
    """``ledger_blockchain_behind_seconds`` of ``node``, per chain."""
    return samples(metrics, "ledger_blockchain_behind_seconds", "blockchain", node=node)


def test_demo_prints_working_urls_and_a_working_fault_example(
    start_demo: Callable[..., Demo],
) -> None:
    port = free_port()
    demo = start_demo("--web.listen-address", f"127.0.0.1:{port}")
    landing, metrics = demo.printed["Exporter landing page"], demo.printed["Metrics"]
    assert (landing, metrics) == (f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/metrics")
    nodes = [f"node-{i}" for i in range(1, DEFAULT_NODES + 1)]
    wait_until(
        lambda: fetch(landing + "-/ready").status == 200,
        ignoring=(OSError,),
        message="the demo's exporter never got ready",
    )
    page = fetch(landing)
    assert page.status == 200 and all(node in page.text for node in nodes)
    assert node_up(metrics) == dict.fromkeys(nodes, 1.0)

    command = shlex.split(demo.printed["Switch a fault on"])
    assert command[:3] == ["curl", "-X", "POST"] and command[4] == "-d", command
    faults_url, body = command[3], command[5]
    assert faults_url == demo.printed["Simulated network"].split("admin ")[1] + "faults"
    answer = fetch(faults_url, method="POST", body=body.encode())  # the printed example
    assert answer.status == 200
    assert [(f["node"], f["fault"]) for f in answer.json()["faults"]] == [("node-2", "stall")]
    switched = fetch(faults_url, method="POST", json={"node": "node-3", "fault": "down"})
    assert switched.status == 200
    wait_until(
        lambda: node_up(metrics) == {**dict.fromkeys(nodes, 1.0), "node-3": 0.0},
        message="node-3 not reported down",
    )
    stuck = shlex.split(demo.printed["Stick the first chain's vote session"])
    assert stuck[:4] == ["curl", "-X", "POST", faults_url] and stuck[4] == "-d", stuck
    answer = fetch(faults_url, method="POST", body=stuck[5].encode())  # the printed example
    assert answer.status == 200
    chain = json.loads(stuck[5])["chain"]
    assert ("*", "session_stuck", chain) in {
        (f["node"], f["fault"], f["chain"]) for f in answer.json()["faults"]
    }
    wait_until(  # the stuck session's round climbs, a round every consensusTimeout (scaled)
        lambda: max(vote_rounds(metrics, chain).values(), default=0) >= 3,
        timeout=60,
        message=lambda: f"no round climbed on {chain}: {vote_rounds(metrics, chain)}",
    )
    lag = shlex.split(demo.printed["Make node-4 lag 30 s behind"])
    assert lag[:4] == ["curl", "-X", "POST", faults_url] and lag[4] == "-d", lag
    answer = fetch(faults_url, method="POST", body=lag[5].encode())  # the printed example
    assert answer.status == 200
    assert ("node-4", "lag_time") in {(f["node"], f["fault"]) for f in answer.json()["faults"]}
    wait_until(  # issue 37: its blocks arrive 30 s late, on the chain still minting
        lambda: max(behind_seconds(metrics, "node-4").values(), default=0) >= 20,
        timeout=90,
        message=lambda: f"node-4 not behind in time: {behind_seconds(metrics, 'node-4')}",
    )
    assert demo.interrupt(timeout=5) == 0, demo.log()
    assert port_is_closed(port)


def test_demo_with_prometheus_scrapes_the_exporter_and_stops_both(
    start_demo: Callable[..., Demo],
) -> None:
    require_program("prometheus")
    port, prometheus_port = free_port(), free_port()
    demo = start_demo(
        "--web.listen-address",
        f"127.0.0.1:{port}",
        "--prometheus",
        "--prometheus.listen-address",
        f"127.0.0.1:{prometheus_port}",
    )
    url = demo.printed["Prometheus"]
    assert url == f"http://127.0.0.1:{prometheus_port}/"
    api = PrometheusApi(url)
    wait_until(api.ready, message="the demo's Prometheus never got ready")
    page = fetch(url, follow_redirects=True)  # to the UI (/graph, or /classic/graph on Debian)
    assert page.status == 200 and "Prometheus" in page.text
    api.wait_for('up{job="ledger-exporter"} == 1', timeout=20)
    assert api.values("ledger_node_up", "node") == {
        (f"node-{i}",): 1.0 for i in range(1, DEFAULT_NODES + 1)
    }
    assert demo.printed["Prometheus rules"] == "rules.yml, alerts.yml (the project's)"
    groups = api.rules()
    assert sorted(g["name"] for g in groups) == sorted(project_rule_groups()), groups
    broken = [r for g in groups for r in g["rules"] if r["health"] == "err"]
    assert broken == []
    assert demo.interrupt(timeout=15) == 0, demo.log()
    assert port_is_closed(prometheus_port) and port_is_closed(port)


def test_demo_ha_runs_a_pair_that_prometheus_scrapes_as_one_exporter(
    start_demo: Callable[..., Demo],
) -> None:
    """``--ha``: two replicas, each serving every node and following a fault on its own;
    with ``--prometheus`` both scraped in one job as one logical exporter (the pair's
    ``instance``, an ``exporter_replica`` each, the label the shipped rules fold); Ctrl-C
    stops the three."""
    require_program("prometheus")
    ports = {"a": free_port(), "b": free_port()}
    prometheus_port = free_port()
    demo = start_demo(
        "--ha",
        "--web.listen-address",
        f"127.0.0.1:{ports['a']}",
        "--ha.listen-address",
        f"127.0.0.1:{ports['b']}",
        "--prometheus",
        "--prometheus.listen-address",
        f"127.0.0.1:{prometheus_port}",
    )
    nodes = [f"node-{i}" for i in range(1, DEFAULT_NODES + 1)]
    metrics = {}
    for name, port in ports.items():
        landing = demo.printed[f"Replica {name} landing page"]
        assert landing == f"http://127.0.0.1:{port}/", demo.lines
        metrics[name] = demo.printed[f"Replica {name} metrics"]
        assert metrics[name] == f"{landing}metrics"
        wait_until(partial(ready, landing), ignoring=(OSError,),
                   message=f"replica {name} never got ready")  # fmt: skip
        assert node_up(metrics[name]) == dict.fromkeys(nodes, 1.0)
    pair = demo.printed["Scrape as one pair"]
    assert pair.split()[0] == "deploy/prometheus/ha.yml", pair
    assert f'instance="{PAIR_INSTANCE}"' in pair and REPLICA_LABEL in pair, pair
    # the label the demo's pair carries is the one the shipped rules fold away
    assert f"without({REPLICA_LABEL})" in (REPO / "deploy/prometheus/alerts.yml").read_text()

    faults_url = demo.printed["Simulated network"].split("admin ")[1] + "faults"
    switched = fetch(faults_url, method="POST", json={"node": "node-3", "fault": "down"})
    assert switched.status == 200
    down = {**dict.fromkeys(nodes, 1.0), "node-3": 0.0}
    for name, url in metrics.items():
        wait_until(partial(reports, url, down),
                   message=f"node-3 not reported down by replica {name}")  # fmt: skip

    api = PrometheusApi(demo.printed["Prometheus"])
    wait_until(api.ready, message="the demo's Prometheus never got ready")
    up = api.wait_for(
        'up{job="ledger-exporter"} == 1', lambda result: len(result) == len(ports), timeout=20
    )
    assert sorted((s["metric"]["instance"], s["metric"][REPLICA_LABEL]) for s in up) == [
        (PAIR_INSTANCE, name) for name in ports
    ], up
    assert demo.interrupt(timeout=15) == 0, demo.log()
    assert all(port_is_closed(port) for port in [*ports.values(), prometheus_port])


def test_the_demo_pair_scrape_config_labels_each_replica() -> None:
    config = prometheus_config("127.0.0.1:1", RULE_FILES, {"a": "127.0.0.1:1", "b": "127.0.0.1:2"})
    assert config["scrape_configs"] == [{"job_name": "ledger-exporter", "static_configs": [
        {"targets": ["127.0.0.1:1"], "labels": {"instance": PAIR_INSTANCE, REPLICA_LABEL: "a"}},
        {"targets": ["127.0.0.1:2"], "labels": {"instance": PAIR_INSTANCE, REPLICA_LABEL: "b"}},
    ]}]  # fmt: skip


@pytest.mark.parametrize("name", RULE_FILES)
def test_the_packaged_rules_are_those_of_deploy_prometheus(name: str) -> None:
    """exporter/rules/ ships in the wheel for `demo --prometheus`; `make mixin` renders both
    it and deploy/prometheus/ from mixin/ (tests/monitoring/test_mixin.py)."""
    packaged = REPO / "exporter" / "rules" / name
    deployed = REPO / "deploy" / "prometheus" / name
    assert packaged.read_bytes() == deployed.read_bytes(), f"run make mixin ({name})"


def test_prometheus_config_loads_the_rules_it_is_given() -> None:
    config = prometheus_config("127.0.0.1:9877", RULE_FILES)
    assert config["rule_files"] == ["rules.yml", "alerts.yml"]


@pytest.mark.parametrize(
    "flag", ["--web.listen-address", "--ha.listen-address", "--prometheus.listen-address"]
)
def test_a_taken_port_is_one_line_naming_the_flag(flag: str) -> None:
    if flag.startswith("--prometheus"):
        require_program("prometheus")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        others = ["--web.listen-address", f"127.0.0.1:{free_port()}", "--prometheus",
                  "--ha", "--ha.listen-address", f"127.0.0.1:{free_port()}"]  # fmt: skip
        result = subprocess.run(
            [sys.executable, "-m", "exporter", "demo", *others, flag, address],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.splitlines()
    advice = re.fullmatch(
        f"ledger-exporter demo: cannot listen on {re.escape(address)} "
        f"\\(Address already in use\\): choose another with {flag}: "
        "ledger-exporter demo (.+) \\(or make demo ARGS='(.+)'\\)",
        line,
    )
    assert advice is not None, line
    suggested = shlex.split(advice[1])
    assert advice[1] == advice[2] and suggested.count(flag) == 1 and suggested[-2] == flag
    assert "--prometheus" in suggested  # the other arguments kept
    assert suggested[-1].startswith("127.0.0.1:") and suggested[-1] != address


def _make_demo_shim(tmp_path: Path) -> Path:
    """A stand-in for the demo's venv (``make demo DEMO_VENV=...``): its ``ledger-exporter``
    runs this tree's, and its stamp is newer than every source, so make installs nothing."""
    venv = tmp_path / "venv-demo"
    (venv / "bin").mkdir(parents=True)
    program = venv / "bin" / "ledger-exporter"
    program.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m exporter "$@"\n')
    program.chmod(0o755)
    stamp = venv / ".installed"
    stamp.touch()
    later = time.time() + 86400
    os.utime(stamp, (later, later))
    return venv


def test_make_demo_passes_args_and_its_advice_on_a_taken_port_can_be_followed(
    tmp_path: Path,
) -> None:
    require_program("make")
    venv = _make_demo_shim(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        refused = subprocess.run(
            ["make", "--no-print-directory", "demo", f"DEMO_VENV={venv}",
             f"ARGS=--nodes 2 --web.listen-address {address}"],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        assert refused.returncode != 0, refused.stdout
        found = re.search(r"\(or make demo ARGS='([^']+)'\)", refused.stderr)
        assert found is not None, refused.stderr
        args = shlex.split(found[1])
        assert args[:2] == ["--nodes", "2"] and args[2] == "--web.listen-address", args
        followed = args[3]
        demo = Demo(tmp_path, command=["make", "--no-print-directory", "demo",
                                       f"DEMO_VENV={venv}", f"ARGS={found[1]}"])  # fmt: skip
        try:
            landing = demo.printed["Exporter landing page"]
            assert landing == f"http://{followed}/"
            wait_until(
                lambda: fetch(landing + "-/ready").status == 200,
                ignoring=(OSError,),
                message="the demo started by make never got ready",
            )
            assert node_up(demo.printed["Metrics"]) == {"node-1": 1.0, "node-2": 1.0}
        finally:
            demo.stop()
