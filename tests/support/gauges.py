"""A chain reading's packed gauges from the few a test sets, by their field-table row."""

from __future__ import annotations

import math
from collections.abc import Mapping

from exporter.model.fields import CHAIN_GAUGES, GAUGE_POSITION, Field, pack_gauges


def gauges_packed(values: Mapping[Field, float]) -> bytes:
    """``ChainReading.values`` with the gauges of ``values`` reported, the others not."""
    listed = [math.nan] * len(CHAIN_GAUGES)
    for field, value in values.items():
        listed[GAUGE_POSITION[field]] = value
    return pack_gauges(listed)
