"""The snapshot as Prometheus series: the metric catalogue, label strings, the one writer."""
