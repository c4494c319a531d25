"""What the transport shows, end to end over real sockets: a simulator serving https with
the certificate it makes (``--tls``), a real exporter process trusting its CA and a plain
http node beside it. The expiry is the certificate's notAfter, the info labels are its
names, version, cipher and fingerprint, the phases are there and never negative; the
``cert_expiry`` fault makes the node down with reason ``certificate``; the http node has no
TLS series and no ``tls`` phase."""

from __future__ import annotations

import calendar
import hashlib
import html
import re
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.http import fetch
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.simulator import simulate
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _series(text: str) -> Series:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _of(series: Series, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return {key: value for (n, key), value in series.items() if n == name and wanted <= key}


def _openssl(*args: str) -> bytes:
    return subprocess.run(["openssl", *args], check=True, capture_output=True).stdout


@pytest.fixture(scope="module")
def network(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ExporterProcess, str, Path]]:
    """An https simulator (two nodes on ports of their own), a plain one, and an exporter
    polling all three every second; with the https admin URL and the certificates' folder."""
    tls_dir = tmp_path_factory.mktemp("sim-tls")
    with (
        simulate("--tls", "--tls.dir", str(tls_dir), "--tls.days", "30", "--layout", "ports",
                 "--nodes", "2") as (_, secure),
        simulate("--nodes", "1") as (_, plain),
    ):  # fmt: skip
        tls = {"ca_file": secure["ca"]}
        config = tmp_path_factory.mktemp("config") / "config.yml"
        nodes = [
            {"name": "secure-1", "url": secure["node-1"], "tls_config": tls},
            {"name": "secure-2", "url": secure["node-2"], "tls_config": tls},
            {"name": "plain-1", "url": plain["node-1"]},
        ]
        config.write_text(
            yaml.safe_dump({"scrape_interval": "1s", "scrape_timeout": "1s", "nodes": nodes})
        )
        with ready_exporter(config) as exporter:
            yield exporter, secure["admin"], tls_dir


def _metrics(exporter: ExporterProcess) -> Series:
    return _series(fetch(exporter.base + "/metrics", timeout=20).text)


def test_the_handshake_and_the_phases_are_exported(
    network: tuple[ExporterProcess, str, Path],
) -> None:
    exporter, _, tls_dir = network
    expiry = "ledger_node_tls_cert_expiry_timestamp_seconds"

    def both_secure() -> Series | None:
        found = _metrics(exporter)
        return found if len(_of(found, expiry)) == 2 else None

    series = wait_until(both_secure, timeout=60, message=exporter.log)
    served = tls_dir / "server-1.pem"  # the certificate every port serves from the start
    not_after = _openssl("x509", "-in", str(served), "-noout", "-enddate").decode()
    when = time.strptime(not_after.strip().split("=", 1)[1], "%b %d %H:%M:%S %Y GMT")
    der = ssl.PEM_cert_to_DER_cert(served.read_text())
    for node in ("secure-1", "secure-2"):
        assert _of(series, expiry, node=node) == {
            frozenset({("node", node)}): calendar.timegm(when)
        }
        (info,) = _of(series, "ledger_node_tls_info", node=node)
        labels = dict(info)
        assert labels["version"] == "TLSv1.3"
        assert labels["cipher"].startswith("TLS_")
        assert labels["issuer_cn"] == "ledger-simulator CA"
        assert labels["subject_cn"] == "ledger-simulator"
        assert labels["serial_fingerprint"] == hashlib.sha256(der).hexdigest()
        phases = _of(series, "ledger_node_request_duration_seconds", node=node)
        kinds = {(dict(key)["endpoint"], dict(key)["phase"]) for key in phases}
        names = ("resolve", "connect", "tls", "processing", "transfer")
        assert kinds >= {
            (endpoint, phase) for endpoint in ("health", "blockchain") for phase in names
        }
        assert all(value >= 0 for value in phases.values()), phases
    assert not _of(series, expiry, node="plain-1")
    assert not _of(series, "ledger_node_tls_info", node="plain-1")
    plain = _of(series, "ledger_node_request_duration_seconds", node="plain-1")
    assert {dict(key)["phase"] for key in plain} == {"resolve", "connect", "processing", "transfer"}
    assert all(value >= 0 for value in plain.values())


def test_a_certificate_expiring_soon_is_on_the_status_page(tmp_path: Path) -> None:
    """A node presenting a certificate that expires in 10 days (its own simulator, started
    with it): the page's line of LedgerNodeCertificateExpiring, a warning (under 14 days, not
    under 3), for that node."""
    flags = ("--tls", "--tls.dir", str(tmp_path / "sim-tls"), "--tls.days", "10", "--nodes", "1")
    with simulate(*flags) as (_, secure):
        config = tmp_path / "config.yml"
        node = {"name": "soon", "url": secure["node-1"], "tls_config": {"ca_file": secure["ca"]}}
        config.write_text(
            yaml.safe_dump({"scrape_interval": "1s", "scrape_timeout": "1s", "nodes": [node]})
        )
        with ready_exporter(config) as exporter:

            def flagged() -> list[str] | None:
                page = fetch(exporter.base + "/", timeout=20).text
                items = re.findall(r"<li[^>]*>(.*?)</li>", page, re.DOTALL)
                lines = [html.unescape(re.sub(r"<[^>]+>", " ", item)) for item in items]
                found = [line for line in lines if "LedgerNodeCertificateExpiring" in line]
                return found or None

            (line,) = wait_until(flagged, timeout=60, interval=0.5, message=exporter.log)
    assert "soon" in line and "warning" in line and "expires in 9d" in line, line


def test_an_expired_certificate_makes_the_node_down_with_its_reason(
    network: tuple[ExporterProcess, str, Path],
) -> None:
    exporter, admin, tls_dir = network
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.pem"))
    answer = fetch(
        admin + "faults",
        method="POST",
        json={"node": "node-2", "fault": "cert_expiry", "enabled": True},
        context=context,
    )
    assert answer.status == 200, answer.text
    refused = ("ledger_node_scrape_errors_total", "certificate")

    def refused_for_its_certificate() -> Series | None:
        found = _metrics(exporter)
        counted = _of(found, refused[0], node="secure-2", endpoint="health", reason=refused[1])
        return found if sum(counted.values()) > 0 else None

    series = wait_until(refused_for_its_certificate, timeout=60, message=exporter.log)
    assert _of(series, "ledger_node_up", node="secure-2") == {
        frozenset({("node", "secure-2")}): 0.0
    }
    assert not _of(series, "ledger_node_tls_cert_expiry_timestamp_seconds", node="secure-2")
    assert _of(series, "ledger_node_up", node="secure-1") == {
        frozenset({("node", "secure-1")}): 1.0
    }
    assert "the node's certificate has expired" in exporter.log()
