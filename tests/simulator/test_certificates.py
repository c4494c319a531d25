"""The simulator's https: the CA and certificates it makes, and the ``cert_expiry`` fault that
reissues a node's certificate while running (expired, or expiring in N days)."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import pytest

from ledger_simulator.certs import CertificateError, SimCertificates, parse_days
from ledger_simulator.faults import FaultError, parse_fault_spec
from ledger_simulator.network import SimulatedNetwork


def _not_after(port: int, ca: str) -> float:
    """The notAfter of the certificate 127.0.0.1:``port`` presents, verified against ``ca``."""
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        cert = tls.getpeercert()
    assert cert is not None
    return ssl.cert_time_to_seconds(str(cert["notAfter"]))


def test_a_node_certificate_is_reissued_by_the_fault_and_back(tmp_path: Path) -> None:
    certificates = SimCertificates(tmp_path, days=30)
    with SimulatedNetwork(2, 1, layout="ports", certificates=certificates) as network:
        assert network.node_url(0).startswith("https://")
        assert network.admin_url.startswith("https://")
        node_2 = network.port + 2
        assert abs(_not_after(node_2, certificates.ca_file) - (time.time() + 30 * 86400)) < 120
        network.set_fault("node-2", "cert_expiry", True, value="5")
        assert abs(_not_after(node_2, certificates.ca_file) - (time.time() + 5 * 86400)) < 120
        assert abs(_not_after(node_2 - 1, certificates.ca_file) - (time.time() + 30 * 86400)) < 120
        network.set_fault("node-2", "cert_expiry", True)  # no value: expired yesterday
        context = ssl.create_default_context(cafile=certificates.ca_file)
        with (
            pytest.raises(ssl.SSLCertVerificationError, match="expired"),
            socket.create_connection(("127.0.0.1", node_2), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            pass
        network.set_fault("node-2", "cert_expiry", False)
        assert abs(_not_after(node_2, certificates.ca_file) - (time.time() + 30 * 86400)) < 120


def test_the_fault_needs_https_and_days() -> None:
    with pytest.raises(FaultError, match="--tls"):
        SimulatedNetwork(1, 1).set_fault("node-1", "cert_expiry", True)
    for bad in ("soon", "nan", True, "1e9"):
        with pytest.raises(CertificateError, match="days until the certificate expires"):
            parse_days(bad)
    assert parse_days(None) < 0
    assert parse_fault_spec("node-1:cert_expiry=5").value == "5"
    assert parse_fault_spec("*:cert_expiry").node == "*"


def test_a_directory_that_cannot_be_made_is_an_error_that_names_it(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file, not a directory")
    for where in (taken, taken / "below"):
        with pytest.raises(CertificateError, match=f"directory '{where}'.*--tls.dir"):
            SimCertificates(where)
