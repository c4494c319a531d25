"""ledger-exporter: a Prometheus exporter for permissioned peer-to-peer ledger nodes."""

__version__ = "0.1.0"
