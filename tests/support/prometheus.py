"""Prometheus for tests: a real server, its HTTP API, and promtool.

``PrometheusServer`` writes a ``prometheus.yml`` into its own directory, starts Debian's
``prometheus`` on 127.0.0.1 and a free port, and stops it on exit. A test takes servers from
the ``prometheus`` fixture (``PrometheusServers``), which stops them after it:

.. code-block:: python

    def test_alert_fires(prometheus: PrometheusServers) -> None:
        server = prometheus.start({"ledger-exporter": [exporter_address]}, rule_files=[ALERTS])
        server.wait_for_alert("LedgerNodeDown", state="firing", timeout=20, node="node-2")

``prometheus.create(...)`` gives a server not started yet, whose ``config`` a test may change
first. Prometheus applies new scrape targets only every 5 s, so the first scrape comes 5 to
6 s after start whatever the scrape interval; rules are evaluated every
``evaluation_interval`` from the start. ``PrometheusApi`` alone talks to a Prometheus started
by someone else (the demo). ``pair_member`` makes a server one Prometheus of an HA pair.
``Promtool`` (the ``promtool`` fixture) runs promtool.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.http import fetch
from tests.support.ports import free_port
from tests.support.processes import ServerProcess
from tests.support.programs import require_program
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

START_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.2

Sample = dict[str, Any]  # one element of an instant query's result: {"metric", "value"}


class PrometheusError(AssertionError):
    """Prometheus did not start or answered an error."""


class PrometheusApi:
    """Prometheus's HTTP API at ``url``: queries, targets, rules, alerts, reload."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def ready(self) -> bool:
        """True when ``/-/ready`` answers 200."""
        try:
            return fetch(self.url + "/-/ready", timeout=2).status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data``; PrometheusError on an error."""
        answer = fetch(f"{self.url}/api/v1/{path}", params=params)
        if answer.status != 200:
            raise PrometheusError(f"GET {path} {params}: {answer.status} {answer.text}")
        document = answer.json()
        if document.get("status") != "success":
            raise PrometheusError(f"GET {path} {params}: {document}")
        return document["data"]

    def query(self, expr: str) -> list[Sample]:
        """Instant vector query now: ``[{"metric": {...}, "value": [ts, "1"]}, ...]``."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr!r} gives a {data['resultType']}, not a vector")
        result: list[Sample] = data["result"]
        return result

    def values(self, expr: str, *keys: str) -> dict[tuple[str, ...], float]:
        """Instant query as ``{(values of the labels keys...): value}``."""
        return {
            tuple(sample["metric"].get(key, "") for key in keys): float(sample["value"][1])
            for sample in self.query(expr)
        }

    def wait_for(
        self,
        expr: str,
        predicate: Callable[[list[Sample]], bool] = bool,
        timeout: float = 15.0,
    ) -> list[Sample]:
        """Query ``expr`` until ``predicate(result)`` holds (default: any sample at all)."""
        last: list[list[Sample]] = [[]]

        def matched() -> bool:
            last[0] = self.query(expr)
            return predicate(last[0])

        wait_until(
            matched,
            timeout=timeout,
            interval=POLL_SECONDS,
            message=lambda: f"{expr!r} did not match; last result: {last[0]}",
        )
        return last[0]

    def targets(self) -> list[dict[str, Any]]:
        """Active scrape targets (``labels``, ``health``, ``lastError``, ``scrapeUrl``...)."""
        active: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return active

    def wait_for_targets_up(
        self, jobs: Iterable[str], timeout: float = 20.0
    ) -> list[dict[str, Any]]:
        """Wait until each of ``jobs`` has targets, all scraped and ``up``; return them."""
        wanted = set(jobs)
        last: list[list[dict[str, Any]]] = [[]]

        def all_up() -> bool:
            last[0] = [t for t in self.targets() if t["labels"]["job"] in wanted]
            up = {t["labels"]["job"] for t in last[0] if t["health"] == "up"}
            return up == wanted and all(t["health"] == "up" for t in last[0])

        wait_until(
            all_up,
            timeout=timeout,
            interval=POLL_SECONDS,
            message=lambda: f"targets of {sorted(wanted)} not up: {last[0]}",
        )
        return last[0]

    def metadata(self, job: str, metric: str) -> list[dict[str, Any]]:
        """What the scrapes of ``job`` told Prometheus about ``metric`` (type, help, unit)."""
        found: list[dict[str, Any]] = self.api(
            "targets/metadata", match_target=f'{{job="{job}"}}', metric=metric
        )
        return found

    def rules(self) -> list[dict[str, Any]]:
        """Rule groups (``name``, ``file``, ``rules`` with ``health`` and ``lastError``,
        ``lastEvaluation``)."""
        groups: list[dict[str, Any]] = self.api("rules")["groups"]
        return groups

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (``labels``, ``annotations``, ``state`` pending|firing, ``activeAt``)."""
        found: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return found

    def wait_for_alert(
        self, name: str, state: str = "firing", timeout: float = 15.0, **labels: str
    ) -> dict[str, Any]:
        """Wait until alert ``name`` with (at least) these labels is in ``state``."""
        wanted = {"alertname": name, **labels}

        def in_state() -> dict[str, Any] | None:
            return next(
                (
                    alert
                    for alert in self.alerts()
                    if alert["state"] == state and wanted.items() <= alert["labels"].items()
                ),
                None,
            )

        alert: dict[str, Any] = wait_until(
            in_state, timeout=timeout, interval=POLL_SECONDS, message=f"alert {wanted} not {state}"
        )
        return alert

    def reload(self) -> None:
        """``POST /-/reload`` (needs ``--web.enable-lifecycle``) after changing config or rules."""
        answer = fetch(self.url + "/-/reload", method="POST")
        if answer.status != 200:
            raise PrometheusError(f"reload answered {answer.status}: {answer.text}")


class PrometheusServer(PrometheusApi, ServerProcess):
    """One Prometheus process scraping ``targets`` (job name -> ``host:port`` list)."""

    def __init__(
        self,
        workdir: Path,
        targets: Mapping[str, Sequence[str]],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        extra_flags: Sequence[str] = (),
        retention: str = "1h",
    ) -> None:
        """``retention``: how long its storage keeps samples (longer for a test that writes
        a past into it first)."""
        self.port = free_port()
        super().__init__(f"http://127.0.0.1:{self.port}")
        self.workdir = workdir
        self.config_file = workdir / "prometheus.yml"
        self.log_file = workdir / "prometheus.log"
        self.jobs = tuple(targets)
        self.config: dict[str, Any] = {
            "global": {
                "scrape_interval": scrape_interval,
                "scrape_timeout": scrape_interval,
                "evaluation_interval": evaluation_interval,
            },
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(addresses)}]}
                for job, addresses in targets.items()
            ],
        }
        if rule_files:
            self.config["rule_files"] = [str(Path(path).resolve()) for path in rule_files]
        self._extra_flags = list(extra_flags)
        self._retention = retention

    def start(self) -> PrometheusServer:
        """Write the config, start the process and wait until ``/-/ready`` answers 200."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        command = [
            require_program("prometheus"),
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            f"--storage.tsdb.retention.time={self._retention}",
            "--log.level=warn",
            *self._extra_flags,
        ]
        self.launch(command, self.ready, PrometheusError, START_TIMEOUT_SECONDS)
        return self

    def wait_for_scrapes(self, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Wait until every configured job's targets were scraped and are ``up``."""
        return self.wait_for_targets_up(self.jobs, timeout)


#: The shipped config of one Prometheus of a pair (``deploy/prometheus/ha.yml``): the pair's
#: tests take its external label, its ``alert_relabel_configs`` and its targets' labels, so
#: what they prove is what the file ships.
SHIPPED_PAIR_CONFIG = REPO / "deploy" / "prometheus" / "ha.yml"


def _shipped_pair() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(SHIPPED_PAIR_CONFIG.read_text())
    return document


#: The external label naming each Prometheus of a pair, dropped from the alerts it sends.
(PROMETHEUS_REPLICA_LABEL,) = _shipped_pair()["global"]["external_labels"]


def shipped_pair_targets(job: str) -> list[dict[str, str]]:
    """The labels ``ha.yml`` gives each target of ``job``, in its order: one per exporter
    replica of the pair (its ``instance`` and replica label)."""
    (config,) = [c for c in _shipped_pair()["scrape_configs"] if c["job_name"] == job]
    return [dict(static["labels"]) for static in config["static_configs"]
            for _ in static["targets"]]  # fmt: skip


def pair_member(
    server: PrometheusServer, name: str, target_labels: Mapping[str, Mapping[str, str]]
) -> None:
    """Make ``server`` (not started yet) one Prometheus of an HA pair as ``ha.yml`` makes it:
    its ``prometheus_replica`` external label ``name``, dropped from the alerts it sends by
    the file's ``alert_relabel_configs`` so that both send the same alerts and Alertmanager
    deduplicates them; and each of its jobs' targets (``host:port``) with the labels
    ``target_labels`` gives it (a pair of exporters: one ``instance``, a replica label each,
    ``shipped_pair_targets``)."""
    server.config["global"]["external_labels"] = {PROMETHEUS_REPLICA_LABEL: name}
    alerting = server.config.setdefault("alerting", {})
    alerting["alert_relabel_configs"] = _shipped_pair()["alerting"]["alert_relabel_configs"]
    for job in server.config["scrape_configs"]:
        job["static_configs"] = [
            {"targets": [address], "labels": dict(target_labels.get(address, {}))}
            for config in job["static_configs"]
            for address in config["targets"]
        ]


class PrometheusServers:
    """The Prometheus servers of one test, each in its own directory under ``workdir``; all
    stopped by ``stop_all`` (what the ``prometheus`` fixture is)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: list[PrometheusServer] = []

    def create(
        self,
        targets: Mapping[str, Sequence[str]] | None = None,
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        extra_flags: Sequence[str] = (),
    ) -> PrometheusServer:
        """A server not started yet: change its ``config``, then ``start()`` it."""
        server = PrometheusServer(
            self.workdir / f"prometheus-{len(self.servers)}",
            targets or {},
            rule_files=rule_files,
            scrape_interval=scrape_interval,
            evaluation_interval=evaluation_interval,
            extra_flags=extra_flags,
        )
        self.servers.append(server)
        return server

    def start(
        self,
        targets: Mapping[str, Sequence[str]],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        extra_flags: Sequence[str] = (),
    ) -> PrometheusServer:
        """A started server scraping ``targets`` (job name -> ``host:port`` list)."""
        return self.create(
            targets,
            rule_files=rule_files,
            scrape_interval=scrape_interval,
            evaluation_interval=evaluation_interval,
            extra_flags=extra_flags,
        ).start()

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


#: Go's garbage collector target for promtool: its unit tests of the SLO rules allocate
#: heavily, and the default (100) spends a fifth of their CPU collecting; at 400 they take
#: 12-20% less CPU for a few hundred MB more (``GOGC`` set by the caller wins).
PROMTOOL_GOGC = "400"


def promtool_env() -> dict[str, str]:
    """The environment to run promtool in: this process's, with :data:`PROMTOOL_GOGC` unless
    ``GOGC`` is set already (for a test that runs promtool itself, one unit-test run for many
    files included)."""
    return {**os.environ, "GOGC": os.environ.get("GOGC", PROMTOOL_GOGC)}


class Promtool:
    """Debian's promtool (the ``promtool`` fixture)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def run(
        self, *args: str, cwd: Path = REPO, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``promtool ARGS`` in ``cwd``, whatever its exit status."""
        return subprocess.run(
            [self.path, *args], cwd=cwd, input=input, capture_output=True, text=True,
            env=promtool_env(),
            # the SLO files evaluate every alert each minute over days: ~40 s of CPU each,
            # twice that on two cores shared with the suite's servers
            check=False, timeout=360,
        )  # fmt: skip

    def check(self, *args: str, cwd: Path = REPO, input: str | None = None) -> str:
        """``promtool ARGS``, which must succeed; what it printed on stdout."""
        result = self.run(*args, cwd=cwd, input=input)
        assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"
        return result.stdout

    def check_metrics(self, exposition: str) -> None:
        """``promtool check metrics``: the exposition passes Prometheus's own linter."""
        self.check("check", "metrics", input=exposition)
