"""What the dashboards show: every panel and its PromQL, as data.

``exporters/dashboards.py`` turns these into Grafana JSON with grafana-foundation-sdk;
the end-to-end test evaluates every expression here (read back from the generated JSON)
against a real Prometheus scraping a real run.

Conventions: driver-side series are summed over drivers (``sum``); server-side series are
reduced per server first (``max by (server)``) because several drivers aimed at one server
each export its counters (see exporters/naming.py).  Rates use a fixed ``[1m]`` window,
which needs a scrape interval of 15 s or less (4 samples a window).  Metric names of
mysqld_exporter (``mysql_global_status_<variable>``) and node_exporter (``node_disk_*``)
are as those exporters publish them (checked against Debian 12's mysqld_exporter 0.14 and
node_exporter 1.5 in tests/exporters/test_end_to_end.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"  # timeseries, stat, table, bargauge
    unit: str = "short"
    width: int = 12
    height: int = 8
    stacked_percent: bool = False
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class RowSpec:
    title: str
    panels: tuple[PanelSpec, ...]


@dataclass(frozen=True)
class AnnotationSpec:
    name: str
    expr: str
    title_format: str
    tag_keys: str
    color: str = "#8ab8ff"


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    file: str
    title: str
    description: str
    tags: tuple[str, ...]
    rows: tuple[RowSpec, ...]
    annotations: tuple[AnnotationSpec, ...] = field(default_factory=tuple)


RUN_LABELS = "tier, placement, page_size, flush_method, doublewrite, clients, warehouses"


def _server_rate(metric: str) -> str:
    return f"max by (server) (rate({metric}[1m]))"


def _log_sync_expr(fsyncs: str, writes: str, by: str) -> str:
    """Redo fsyncs where the server counts them, else redo writes (MariaDB 10.8+ has no fsync counter)."""
    return (f'label_replace({by} (rate({fsyncs}[1m])), "counter", "redo fsyncs", "", "") or '
            f'label_replace({by} (rate({writes}[1m])), "counter", "redo writes (server has no fsync counter)", "", "")')


_MIX_SELECTOR = 'innotier_tpcc_transactions_total{outcome=~"commit|rollback"}'

TPCC = DashboardSpec(
    uid="innotier-tpcc",
    file="innotier-tpcc.json",
    title="innotier / TPC-C runs",
    description="Live TPC-C runs and sweeps from innotier's exporter: throughput, latency, mix, failures, progress.",
    tags=("innotier", "tpcc"),
    annotations=(
        AnnotationSpec(
            name="Runs",
            # a label set of innotier_run_info that did not exist a minute earlier: a new run or sweep cell
            expr=f"group by ({RUN_LABELS}) (innotier_run_info) unless "
                 f"group by ({RUN_LABELS}) (innotier_run_info offset 1m)",
            title_format="run: {{tier}} {{placement}} page {{page_size}} {{flush_method}} dblwr {{doublewrite}}",
            tag_keys="tier,placement,page_size,flush_method,doublewrite,clients,warehouses",
        ),
    ),
    rows=(
        RowSpec("Throughput", (
            PanelSpec("tpmC and NOPM", "tpmC: completed New-Orders (committed + rolled back) per minute (client side, rate of "
                      "innotier_tpcc_new_orders_total). NOPM: orders the schema gained per minute (server side, "
                      "HammerDB's metric).", (
                          Query("sum(rate(innotier_tpcc_new_orders_total[1m])) * 60", "tpmC"),
                          Query("sum(max by (server) (rate(innotier_tpcc_district_orders_total[1m]))) * 60", "NOPM"),
                      ), width=16),
            PanelSpec("Now (60 s window)", "The exporter's sliding-window gauges, for a glance.", (
                Query("sum(innotier_tpcc_tpmc)", "tpmC"),
                Query("sum(max by (server) (innotier_tpcc_nopm))", "NOPM"),
                Query("sum(innotier_tpcc_tpm)", "TPM"),
            ), kind="stat", width=8),
            PanelSpec("TPM: committed transactions per minute", "All five transaction types, committed (client side).", (
                Query('sum(rate(innotier_tpcc_transactions_total{outcome="commit"}[1m])) * 60', "TPM"),
                Query('sum by (txn) (rate(innotier_tpcc_transactions_total{outcome="commit"}[1m])) * 60', "{{txn}}"),
            ), width=24),
        )),
        RowSpec("Latency", (
            PanelSpec("Latency p95 by transaction", "histogram_quantile over the rate of the latency buckets, "
                      "summed over drivers.", (
                          Query("histogram_quantile(0.95, sum by (txn, le) "
                                "(rate(innotier_tpcc_transaction_duration_seconds_bucket[1m])))", "{{txn}}"),
                      ), unit="s"),
            PanelSpec("Latency p99 by transaction", "histogram_quantile over the rate of the latency buckets, "
                      "summed over drivers.", (
                          Query("histogram_quantile(0.99, sum by (txn, le) "
                                "(rate(innotier_tpcc_transaction_duration_seconds_bucket[1m])))", "{{txn}}"),
                      ), unit="s"),
            PanelSpec("Mean latency by transaction", "Sum of latencies over count, per transaction type.", (
                Query("sum by (txn) (rate(innotier_tpcc_transaction_duration_seconds_sum[1m])) / "
                      "sum by (txn) (rate(innotier_tpcc_transaction_duration_seconds_count[1m]))", "{{txn}}"),
            ), unit="s", width=24),
        )),
        RowSpec("Mix and failures", (
            PanelSpec("Transaction mix", "Share of completed transactions by type (TPC-C 5.2.3: New-Order about 45%, "
                      "Payment at least 43%, the others at least 4% each).", (
                          Query(f"sum by (txn) (rate({_MIX_SELECTOR}[1m])) / ignoring (txn) group_left "
                                f"sum(rate({_MIX_SELECTOR}[1m]))", "{{txn}}"),
                      ), unit="percentunit", stacked_percent=True, min=0, max=1),
            PanelSpec("Errors, retries and rollbacks", "Per second, by transaction type and outcome (New-Order "
                      "rolls back 1% by design, TPC-C 2.4.1.4).", (
                          Query('sum by (txn, outcome) (rate(innotier_tpcc_transactions_total'
                                '{outcome=~"error|retry|rollback"}[1m]))', "{{txn}} {{outcome}}"),
                      ), unit="ops"),
        )),
        RowSpec("Run and sweep", (
            PanelSpec("Sweep progress", "Cells done of total, per sweep runner.", (
                Query("max by (driver_id) (innotier_sweep_cells_done) / "
                      "max by (driver_id) (innotier_sweep_cells_total)", "driver {{driver_id}}"),
            ), kind="bargauge", unit="percentunit", width=8, min=0, max=1),
            PanelSpec("Sweep and run phase", "The sweep runner's phase and the driver's phase (warmup, measure, done).", (
                Query("max by (phase) (innotier_sweep_phase) == 1", "sweep: {{phase}}"),
                Query("max by (phase) (innotier_tpcc_run_phase) == 1", "run: {{phase}}"),
            ), width=8),
            PanelSpec("Exporter collectors", "1 when a collector read its source in the last scrape; a failing "
                      "collector does not fail the others.", (
                          Query("min by (collector) (innotier_collector_success)", "{{collector}}"),
                      ), width=8, min=0, max=1),
            PanelSpec("Current run", "innotier_run_info: what is running (one row per driver).", (
                Query(f"max by (driver_id, {RUN_LABELS}, driver, mode, profile) (innotier_run_info)",
                      instant=True),
            ), kind="table", width=24, height=6),
        )),
    ),
)

IO = DashboardSpec(
    uid="innotier-io",
    file="innotier-io.json",
    title="innotier / InnoDB and tier I/O",
    description="What the server under test and its storage tiers did: innotier's InnoDB counters, the same "
                "from mysqld_exporter, and block devices from node_exporter.",
    tags=("innotier", "innodb", "storage"),
    rows=(
        RowSpec("InnoDB (innotier exporter)", (
            PanelSpec("Pages written and doublewrite", "Per second, per server.", (
                Query(_server_rate("innotier_innodb_pages_written_total"), "{{server}} pages written"),
                Query(_server_rate("innotier_innodb_doublewrite_pages_written_total"), "{{server}} doublewrite pages"),
                Query(_server_rate("innotier_innodb_doublewrite_writes_total"), "{{server}} doublewrite batches"),
            ), unit="ops"),
            PanelSpec("Data and redo fsyncs", "Per second, per server.", (
                Query(_server_rate("innotier_innodb_data_fsyncs_total"), "{{server}} data fsyncs"),
                Query(_log_sync_expr("innotier_innodb_log_fsyncs_total", "innotier_innodb_log_writes_total",
                                     "max by (server)"), "{{server}} {{counter}}"),
            ), unit="ops"),
            PanelSpec("Redo and data bytes written", "Bytes per second, per server.", (
                Query(_server_rate("innotier_innodb_log_written_bytes_total"), "{{server}} redo"),
                Query(_server_rate("innotier_innodb_data_written_bytes_total"), "{{server}} all InnoDB writes"),
            ), unit="Bps"),
            PanelSpec("Buffer pool: disk reads vs read requests", "Logical read requests and the ones that went "
                      "to disk, per second.", (
                          Query(_server_rate("innotier_innodb_buffer_pool_read_requests_total"),
                                "{{server}} read requests"),
                          Query(_server_rate("innotier_innodb_buffer_pool_reads_total"), "{{server}} disk reads"),
                      ), unit="ops"),
            PanelSpec("Buffer pool miss ratio", "Disk reads / read requests over the last minute.", (
                Query(f'{_server_rate("innotier_innodb_buffer_pool_reads_total")} / '
                      f'{_server_rate("innotier_innodb_buffer_pool_read_requests_total")}', "{{server}}"),
            ), unit="percentunit"),
            PanelSpec("Dirty pages", "Dirty pages in the buffer pool, per server.", (
                Query("max by (server) (innotier_innodb_buffer_pool_dirty_pages)", "{{server}}"),
            )),
        )),
        RowSpec("InnoDB (mysqld_exporter)", (
            PanelSpec("Pages written and doublewrite (mysqld_exporter)", "Per second, per instance.", (
                Query("sum by (instance) (rate(mysql_global_status_innodb_pages_written[1m]))",
                      "{{instance}} pages written"),
                Query("sum by (instance) (rate(mysql_global_status_innodb_dblwr_pages_written[1m]))",
                      "{{instance}} doublewrite pages"),
                Query("sum by (instance) (rate(mysql_global_status_innodb_dblwr_writes[1m]))",
                      "{{instance}} doublewrite batches"),
            ), unit="ops"),
            PanelSpec("Data and redo fsyncs (mysqld_exporter)", "Per second, per instance.", (
                Query("sum by (instance) (rate(mysql_global_status_innodb_data_fsyncs[1m]))", "{{instance}} data fsyncs"),
                Query(_log_sync_expr("mysql_global_status_innodb_os_log_fsyncs", "mysql_global_status_innodb_log_writes",
                                     "sum by (instance)"), "{{instance}} {{counter}}"),
            ), unit="ops"),
            PanelSpec("Redo bytes written (mysqld_exporter)", "Bytes per second, per instance.", (
                Query("sum by (instance) (rate(mysql_global_status_innodb_os_log_written[1m]))", "{{instance}} redo"),
            ), unit="Bps"),
            PanelSpec("Buffer pool reads (mysqld_exporter)", "Read requests and disk reads per second.", (
                Query("sum by (instance) (rate(mysql_global_status_innodb_buffer_pool_read_requests[1m]))",
                      "{{instance}} read requests"),
                Query("sum by (instance) (rate(mysql_global_status_innodb_buffer_pool_reads[1m]))",
                      "{{instance}} disk reads"),
            ), unit="ops"),
        )),
        RowSpec("Tier devices (node_exporter)", (
            PanelSpec("Device throughput", "Bytes per second read and written, per block device.", (
                Query("sum by (instance, device) (rate(node_disk_written_bytes_total[1m]))", "{{device}} write"),
                Query("sum by (instance, device) (rate(node_disk_read_bytes_total[1m]))", "{{device}} read"),
            ), unit="Bps"),
            PanelSpec("Device IOPS and flushes", "Completed writes, reads and flush requests (fsync reaching the "
                      "device) per second.", (
                          Query("sum by (instance, device) (rate(node_disk_writes_completed_total[1m]))",
                                "{{device}} writes"),
                          Query("sum by (instance, device) (rate(node_disk_reads_completed_total[1m]))",
                                "{{device}} reads"),
                          Query("sum by (instance, device) (rate(node_disk_flush_requests_total[1m]))",
                                "{{device}} flushes"),
                      ), unit="iops"),
            PanelSpec("Device utilization", "Share of time the device had I/O in flight.", (
                Query("sum by (instance, device) (rate(node_disk_io_time_seconds_total[1m]))", "{{device}}"),
            ), unit="percentunit"),
            PanelSpec("Device write latency", "Mean time a write took (write time / writes completed).", (
                Query("sum by (instance, device) (rate(node_disk_write_time_seconds_total[1m])) / "
                      "sum by (instance, device) (rate(node_disk_writes_completed_total[1m]))", "{{device}}"),
            ), unit="s"),
        )),
    ),
)

DASHBOARDS: tuple[DashboardSpec, ...] = (TPCC, IO)
