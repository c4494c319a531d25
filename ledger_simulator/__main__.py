"""Allows ``python -m ledger_simulator`` (same as ``ledger-exporter simulate``)."""

import sys

from ledger_simulator.cli import main

sys.exit(main(sys.argv[1:]))
