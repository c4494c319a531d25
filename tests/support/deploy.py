"""What the deployment checks share: the Kubernetes version validated against and the
durations the manifests write."""

from __future__ import annotations

import re

#: The Kubernetes release whose schemas (bundled with kubernetes-validate) the manifests meet.
KUBERNETES_VERSION = "1.34"
#: A Prometheus Operator duration such as ``30s`` or ``1m30s``.
DURATION = re.compile(r"^(\d+(ms|s|m|h))+$")


def seconds(duration: str) -> float:
    """Seconds of a ``DURATION``."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", duration))
