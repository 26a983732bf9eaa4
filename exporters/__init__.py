"""Prometheus exporter (one collector per source), textfile output, Grafana dashboard generator."""
