"""A web-config reload that makes things worse says so: to a server certificate that has
expired or expires within EXPIRY_WARNING_DAYS, a warning naming the file and its notAfter;
to plain HTTP from TLS, a warning that the listeners no longer serve TLS. The reload still
goes ahead (the operator asked for it)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
import yaml

from exporter.config.web import EXPIRY_WARNING_DAYS
from tests.support.certs import KeyPair, Pki
from tests.support.processes import ExporterProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def _web(path: Path, pair: KeyPair | None) -> None:
    tls = {"tls_server_config": {"cert_file": pair.cert, "key_file": pair.key}} if pair else {}
    path.write_text(yaml.safe_dump(tls))


def _reload(exporter: ExporterProcess, times: int) -> list[str]:
    """SIGHUP, then the log's lines once the ``times``-th reload is done."""
    exporter.signal(signal.SIGHUP)
    wait_until(lambda: exporter.log().count('msg="config reloaded"') >= times, message=exporter.log)
    return exporter.log().splitlines()


def test_reloads_to_an_expired_a_soon_expiring_certificate_and_to_plain_http_warn(
    tmp_path: Path, pki: Pki
) -> None:
    lasting = pki.issue_dated("lasting", "20200101000000Z", "20991231000000Z")
    expired = pki.issue_dated("web-expired", "20200101000000Z", "20210101000000Z")
    soon = pki.server  # the session's certificates are valid for two days
    config, web = tmp_path / "config.yml", tmp_path / "web.yml"
    # probe mode only: no node to poll
    config.write_text(yaml.safe_dump({"probe": {"allowed_targets": [r"http://127\.0\.0\.1:1/"]}}))
    _web(web, lasting)
    exporter = ExporterProcess(config, f"--web.config.file={web}")
    try:
        assert "certificate" not in exporter.log()

        _web(web, expired)
        lines = _reload(exporter, 1)
        warning = [line for line in lines if "has expired" in line]
        assert len(warning) == 1, lines
        assert f"file={expired.cert}" in warning[0]
        assert "not_after=2021-01-01T00:00:00Z" in warning[0]
        assert "level=warn" in warning[0]

        _web(web, soon)
        lines = _reload(exporter, 2)
        warning = [line for line in lines if f"expires in under {EXPIRY_WARNING_DAYS} days" in line]
        assert len(warning) == 1, lines
        assert f"file={soon.cert}" in warning[0]
        assert re.search(r"days_left=[012]\.\d", warning[0]), warning[0]

        _web(web, lasting)  # nothing to say
        before = len(_reload(exporter, 3))
        _web(web, None)
        lines = _reload(exporter, 4)
        assert not any("certificate" in line for line in lines[before - 1 : -1])
        off = [line for line in lines if "turns TLS off" in line]
        assert len(off) == 1, lines
        assert f"file={web}" in off[0]
    finally:
        code, log = exporter.stop()
    assert code == 0, log
