"""Watching a run live: the coordinator's metrics, the embedded Prometheus and exporters, and the
repository's Grafana dashboard rendered outside Grafana (docs/observe.md)."""
