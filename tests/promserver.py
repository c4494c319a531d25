"""A real Prometheus server for tests: scrape targets, optional rule files, HTTP API helpers.

``PrometheusServer`` writes a ``prometheus.yml`` into a temporary directory, starts Debian's
``prometheus`` binary on 127.0.0.1 and a free port, and stops it on exit. Use it through
:func:`prometheus_servers`, wrapped in a fixture of your test module:

.. code-block:: python

    @pytest.fixture
    def prometheus(tmp_path: Path) -> Iterator[StartPrometheus]:
        with prometheus_servers(tmp_path) as start:
            yield start


    def test_alert_fires(prometheus: StartPrometheus) -> None:
        server = prometheus({"ledger-exporter": [exporter_address]}, rule_files=[ALERTS])
        server.wait_for_alert("LedgerNodeDown", state="firing", timeout=20, node="node-2")

Prometheus applies new scrape targets only every 5 s, so the first scrape comes 5 to 6 s after
start whatever the scrape interval; rules are evaluated every ``evaluation_interval`` from the
start. ``PrometheusApi`` alone talks to a Prometheus started by someone else (the demo).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import pytest
import yaml

START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.2

Sample = dict[str, Any]  # one element of an instant query's result: {"metric", "value"}


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate a test's child process; kill it when it does not end within ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class PrometheusError(AssertionError):
    """Prometheus did not start, answered an error, or a condition was not met in time."""


def prometheus_binary() -> str:
    """Path of ``prometheus``; fails under CI (``make test`` installs it), skips elsewhere."""
    binary = shutil.which("prometheus")
    if binary is None:
        message = "no 'prometheus' binary on the PATH; make test installs Debian's prometheus"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_closed(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing accepts connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) != 0


def _until(what: str, timeout: float, attempt: Callable[[], Any]) -> Any:
    """Call ``attempt`` until it returns something truthy; PrometheusError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = attempt()
        if result:
            return result
        if time.monotonic() > deadline:
            raise PrometheusError(f"{what} within {timeout}s")
        time.sleep(POLL_SECONDS)


class PrometheusApi:
    """Prometheus's HTTP API at ``url``: queries, targets, rules, alerts, reload."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def ready(self) -> bool:
        """True when ``/-/ready`` answers 200."""
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data``; PrometheusError on an error."""
        query = urllib.parse.urlencode(params)
        url = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                document = json.load(response)
        except urllib.error.HTTPError as error:
            raise PrometheusError(f"GET {url}: {error.code} {error.read().decode()}") from None
        if document.get("status") != "success":
            raise PrometheusError(f"GET {url}: {document}")
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

        def attempt() -> list[Sample] | None:
            last[0] = self.query(expr)
            return last[0] if predicate(last[0]) else None

        try:
            result: list[Sample] = _until(f"{expr!r} did not match", timeout, attempt)
        except PrometheusError as error:
            raise PrometheusError(f"{error}; last result: {last[0]}") from None
        return result

    def targets(self) -> list[dict[str, Any]]:
        """Active scrape targets (``labels``, ``health``, ``lastError``, ``scrapeUrl``...)."""
        active: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return active

    def wait_for_targets_up(
        self, jobs: Iterable[str], timeout: float = 20.0
    ) -> list[dict[str, Any]]:
        """Wait until each of ``jobs`` has targets, all scraped and ``up``; return them."""
        wanted = set(jobs)

        def attempt() -> list[dict[str, Any]] | None:
            targets = [t for t in self.targets() if t["labels"]["job"] in wanted]
            up = {t["labels"]["job"] for t in targets if t["health"] == "up"}
            return targets if up == wanted and all(t["health"] == "up" for t in targets) else None

        found: list[dict[str, Any]] = _until(
            f"targets of {sorted(wanted)} not up", timeout, attempt
        )
        return found

    def metadata(self, job: str, metric: str) -> list[dict[str, Any]]:
        """What the scrapes of ``job`` told Prometheus about ``metric`` (type, help, unit)."""
        found: list[dict[str, Any]] = self.api(
            "targets/metadata", match_target=f'{{job="{job}"}}', metric=metric
        )
        return found

    def rules(self) -> list[dict[str, Any]]:
        """Rule groups (``name``, ``file``, ``rules`` with ``health`` and ``lastError``)."""
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

        def attempt() -> dict[str, Any] | None:
            return next(
                (
                    alert
                    for alert in self.alerts()
                    if alert["state"] == state and wanted.items() <= alert["labels"].items()
                ),
                None,
            )

        alert: dict[str, Any] = _until(f"alert {wanted} not {state}", timeout, attempt)
        return alert

    def reload(self) -> None:
        """``POST /-/reload`` (needs ``--web.enable-lifecycle``) after changing config or rules."""
        request = urllib.request.Request(self.url + "/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status != 200:
                raise PrometheusError(f"reload answered {response.status}")


class PrometheusServer(PrometheusApi):
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
    ) -> None:
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
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        """Write the config, start the process and wait until ``/-/ready`` answers 200."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        command = [
            prometheus_binary(),
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
            *self._extra_flags,
        ]
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        process = self._process

        def attempt() -> bool:
            if process.poll() is not None:
                raise PrometheusError(f"prometheus exited with {process.returncode}: {self.log()}")
            return self.ready()

        try:
            _until("prometheus not ready", START_TIMEOUT_SECONDS, attempt)
        except PrometheusError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate, wait, kill when it does not end in time."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, STOP_TIMEOUT_SECONDS)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def log(self) -> str:
        """What the process wrote (warnings and errors), for failure messages."""
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return "<no log>"

    def wait_for_scrapes(self, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Wait until every configured job's targets were scraped and are ``up``."""
        return self.wait_for_targets_up(self.jobs, timeout)


class StartPrometheus(Protocol):
    """Starts a Prometheus server; see :class:`PrometheusServer` for the arguments."""

    def __call__(
        self,
        targets: Mapping[str, Sequence[str]],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        extra_flags: Sequence[str] = (),
    ) -> PrometheusServer: ...


@contextlib.contextmanager
def prometheus_servers(tmp_path: Path) -> Iterator[StartPrometheus]:
    """A factory of started servers (each in its own directory); all stopped on exit."""
    servers: list[PrometheusServer] = []

    def start(
        targets: Mapping[str, Sequence[str]],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        extra_flags: Sequence[str] = (),
    ) -> PrometheusServer:
        server = PrometheusServer(
            tmp_path / f"prometheus-{len(servers)}",
            targets,
            rule_files=rule_files,
            scrape_interval=scrape_interval,
            evaluation_interval=evaluation_interval,
            extra_flags=extra_flags,
        )
        servers.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
