"""InnoDB counters of the server under test, from SHOW GLOBAL STATUS.

The counters that explain a TPC-C result on a storage tier: pages written, doublewrite
pages and batches, data and log fsyncs, redo bytes, buffer-pool disk reads against read
requests.  Status variable meanings: MySQL 8.0 Reference Manual 5.1.10 "Server Status
Variables" and MariaDB "InnoDB Server Status Variables".  MariaDB 10.8 and later have no
``Innodb_os_log_fsyncs`` (absent on 10.11, see tests/exporters/fixtures); where a variable
is absent its metric is simply not exported, and the dashboards fall back to
``innotier_innodb_log_writes_total``.

The same counters appear in mysqld_exporter as ``mysql_global_status_<variable lowercased>``;
the dashboards show both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporters.collectors.base import Available, SourceCollector
from exporters.collectors.connection import ServerConnection, text
from exporters.naming import PREFIX


@dataclass(frozen=True)
class StatusMetric:
    variable: str  # SHOW GLOBAL STATUS Variable_name
    name: str  # metric name without prefix; counters without _total (the family adds it)
    kind: str  # counter or gauge
    help: str


STATUS_METRICS: tuple[StatusMetric, ...] = (
    StatusMetric("Innodb_pages_written", "innodb_pages_written", "counter", "InnoDB pages written to data files"),
    StatusMetric("Innodb_pages_read", "innodb_pages_read", "counter", "InnoDB pages read from data files"),
    StatusMetric("Innodb_pages_created", "innodb_pages_created", "counter", "InnoDB pages created"),
    StatusMetric("Innodb_dblwr_pages_written", "innodb_doublewrite_pages_written", "counter",
                 "Pages written to the doublewrite buffer"),
    StatusMetric("Innodb_dblwr_writes", "innodb_doublewrite_writes", "counter",
                 "Doublewrite batch writes (each one write plus fsync of the doublewrite area)"),
    StatusMetric("Innodb_data_fsyncs", "innodb_data_fsyncs", "counter", "fsync() calls on InnoDB data files"),
    StatusMetric("Innodb_os_log_fsyncs", "innodb_log_fsyncs", "counter",
                 "fsync() calls on the redo log (absent on MariaDB 10.8 and later)"),
    StatusMetric("Innodb_log_writes", "innodb_log_writes", "counter", "Physical writes to the redo log"),
    StatusMetric("Innodb_log_write_requests", "innodb_log_write_requests", "counter", "Redo log write requests"),
    StatusMetric("Innodb_log_waits", "innodb_log_waits", "counter",
                 "Waits because the redo log buffer was too small"),
    StatusMetric("Innodb_os_log_written", "innodb_log_written_bytes", "counter", "Bytes written to the redo log"),
    StatusMetric("Innodb_data_written", "innodb_data_written_bytes", "counter",
                 "Bytes written by InnoDB (data, doublewrite and redo)"),
    StatusMetric("Innodb_data_read", "innodb_data_read_bytes", "counter", "Bytes read by InnoDB"),
    StatusMetric("Innodb_data_writes", "innodb_data_writes", "counter", "Write operations issued by InnoDB"),
    StatusMetric("Innodb_data_reads", "innodb_data_reads", "counter", "Read operations issued by InnoDB"),
    StatusMetric("Innodb_buffer_pool_reads", "innodb_buffer_pool_reads", "counter",
                 "Logical reads the buffer pool could not satisfy (read from disk)"),
    StatusMetric("Innodb_buffer_pool_read_requests", "innodb_buffer_pool_read_requests", "counter",
                 "Logical read requests to the buffer pool"),
    StatusMetric("Innodb_buffer_pool_write_requests", "innodb_buffer_pool_write_requests", "counter",
                 "Writes done to the buffer pool"),
    StatusMetric("Innodb_buffer_pool_pages_flushed", "innodb_buffer_pool_pages_flushed", "counter",
                 "Buffer pool pages flushed"),
    StatusMetric("Innodb_buffer_pool_wait_free", "innodb_buffer_pool_wait_free", "counter",
                 "Waits for a free buffer pool page (flushing cannot keep up)"),
    StatusMetric("Innodb_buffer_pool_pages_dirty", "innodb_buffer_pool_dirty_pages", "gauge",
                 "Dirty pages in the buffer pool"),
    StatusMetric("Innodb_buffer_pool_pages_total", "innodb_buffer_pool_pages", "gauge",
                 "Pages in the buffer pool"),
    StatusMetric("Innodb_checkpoint_age", "innodb_checkpoint_age_bytes", "gauge",
                 "Redo bytes since the last checkpoint (MariaDB)"),
    StatusMetric("Innodb_history_list_length", "innodb_history_list_length", "gauge",
                 "Undo history not yet purged (MariaDB)"),
    StatusMetric("Innodb_row_lock_waits", "innodb_row_lock_waits", "counter", "Row lock waits"),
    StatusMetric("Innodb_deadlocks", "innodb_deadlocks", "counter", "Deadlocks (MariaDB)"),
    StatusMetric("Uptime", "server_uptime_seconds", "gauge", "Seconds since the server started"),
)

# One round trip, only the rows we export (SHOW ... WHERE: MySQL 8.0 manual 13.7.7.37,
# MariaDB SHOW STATUS).  Names are constants from the table above, never user input.
STATUS_SQL = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
              + ", ".join(f"'{m.variable}'" for m in STATUS_METRICS) + ")")


def families_from_status(status: dict[str, str], server: str) -> list[Metric]:
    """Metric families for a SHOW GLOBAL STATUS result (live or a recorded capture)."""
    by_lower = {k.lower(): v for k, v in status.items()}
    out: list[Metric] = []
    for m in STATUS_METRICS:
        raw = by_lower.get(m.variable.lower())
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue  # absent on this server, or not a number
        family_class = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
        fam = family_class(f"{PREFIX}_{m.name}", f"{m.help} (SHOW GLOBAL STATUS {m.variable})", labels=["server"])
        fam.add_metric([server], value)
        out.append(fam)
    return out


class InnodbStatusCollector(SourceCollector):
    name = "innodb"
    help = "InnoDB counters of the server under test (SHOW GLOBAL STATUS)"
    needs = ("connection",)
    min_version = {"mariadb": "10.6", "mysql": "5.7"}  # the releases innotier supports (README)

    @classmethod
    def from_available(cls, available: Available) -> "InnodbStatusCollector":
        return cls(available.connection)

    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection

    def collect_families(self) -> Iterable[Metric]:
        rows = self.connection.query(STATUS_SQL)
        status = {text(k): text(v) for k, v in rows}
        return families_from_status(status, self.connection.label)

    def close(self) -> None:
        self.connection.close()
