"""HTTP: a generic server, the exporter's endpoints on it, the status page and /probe."""
