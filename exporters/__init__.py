"""Prometheus exporter (one collector per source), textfile output, Grafana dashboard generator.

- ``exporters.live.start_live_exporter``: the endpoint a TPC-C run or sweep serves while it runs.
- ``exporters.standalone`` / ``innotier exporter``: a server's InnoDB counters, standalone.
- ``exporters.textfile.write_textfile``: node_exporter textfile output at the end of a run.
- ``exporters.collectors``: the explicit registry of collectors (tpcc, run_info, sweep, innodb, tpcc_schema).
- ``exporters.naming``: metric names, buckets, and the labels that keep several drivers apart.
- ``exporters.dashboards`` / ``exporters.dashboard_panels``: Grafana dashboards as code.

See docs/observability.md.
"""
