"""Allows ``python -m exporter.simulator`` (same as ``ledger-exporter simulate``)."""

import sys

from exporter.simulator.cli import main

sys.exit(main(sys.argv[1:]))
