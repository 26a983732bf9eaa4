"""Server-side New-Order count from the TPC-C schema: the source of the NOPM gauge.

HammerDB's NOPM is the growth of ``SELECT SUM(d_next_o_id) FROM district`` per minute
(HammerDB docs 3.3 ch03s04: new orders counted by the database, comparable across
databases; HammerDB's src/mysql/mysqlotc.tcl reads it at the start and end of a run).
``innotier_tpcc_district_orders_total`` is that sum minus one per district (orders ever created, loaded ones included), so
``rate(innotier_tpcc_district_orders_total[1m]) * 60`` is NOPM; the ``innotier_tpcc_nopm``
gauge is the same over the sliding window.  Read only when a TPC-C database is named.
"""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporters.collectors.base import Available, SourceCollector
from exporters.collectors.connection import ServerConnection
from exporters.naming import DISTRICT_ORDERS, GAUGE_WINDOW_SECONDS, NOPM
from exporters.window import SlidingRate

# d_next_o_id starts at 3001 after the load (TPC-C spec 4.3.3.1) and grows by one per New-Order commit.
ORDERS_SQL = "SELECT COALESCE(SUM(d_next_o_id) - COUNT(*), 0) FROM {database}.district"


class TpccSchemaCollector(SourceCollector):
    name = "tpcc_schema"
    help = "Orders committed in the TPC-C schema (SUM(district.d_next_o_id)): server-side NOPM"
    needs = ("connection", "database")
    min_version = {"mariadb": "10.6", "mysql": "5.7"}  # the releases innotier supports (README)

    @classmethod
    def from_available(cls, available: Available) -> "TpccSchemaCollector":
        return cls(available.connection, available.database)

    def __init__(self, connection: ServerConnection, database: str, window: float = GAUGE_WINDOW_SECONDS) -> None:
        if not database.replace("_", "").isalnum():
            raise ValueError(f"database name {database!r} is not a plain identifier")
        self.connection = connection
        self.sql = ORDERS_SQL.format(database=f"`{database}`")
        self._nopm = SlidingRate(window)

    def read_orders(self) -> float:
        rows = self.connection.query(self.sql)
        return float(rows[0][0] or 0)

    def sample(self, _measurement=None) -> None:
        try:
            self._nopm.observe(self.read_orders())
        except Exception:
            pass  # the scrape reports failures; sampling between scrapes stays quiet

    def collect_families(self) -> Iterable[Metric]:
        orders = self.read_orders()
        self._nopm.observe(orders)
        server = self.connection.label
        c = CounterMetricFamily(DISTRICT_ORDERS, "Orders created in the TPC-C schema: SUM(district.d_next_o_id) "
                                "minus one per district; NOPM = rate(...[1m]) * 60", labels=["server"])
        c.add_metric([server], orders)
        out: list[Metric] = [c]
        nopm = self._nopm.per_minute()
        if nopm is not None:
            g = GaugeMetricFamily(NOPM, f"New orders per minute in the schema over the last {self._nopm.window:g} s "
                                  "(HammerDB's NOPM)", labels=["server"])
            g.add_metric([server], nopm)
            out.append(g)
        return out

    def close(self) -> None:
        self.connection.close()
