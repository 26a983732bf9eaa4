"""Metric names, label sets and histogram buckets: the exporter's one vocabulary.

Naming follows the Prometheus conventions (https://prometheus.io/docs/practices/naming/):
an ``innotier_`` prefix, base units in names (``_seconds``, ``_bytes``), ``_total`` on
counters, ``_info`` on the one metadata metric.

Telling series apart when several drivers run at once
------------------------------------------------------
Every driver process (or host) that runs TPC-C clients serves its own endpoint, and
Prometheus adds ``instance`` (host:port of the endpoint) and ``job`` to every series it
scrapes.  The exporter adds:

``driver_id``
    on every driver-side series (``innotier_tpcc_*`` counters, gauges and histograms,
    ``innotier_run_info``, ``innotier_sweep_*``).  It defaults to ``"0"`` and is set with
    ``run_info={"driver_id": ...}`` (``tpcc run --driver-id``); give each driver of one run a
    stable, distinct value (``0``, ``1``, ...; never a run UUID) so that series stay apart even
    where ``instance`` is the same (textfile output read by one node_exporter, a proxy).
    Driver-side counters then aggregate with ``sum()``: the cluster's tpmC is
    ``sum(rate(innotier_tpcc_new_orders_total[1m])) * 60`` and latency quantiles are
    ``histogram_quantile(0.99, sum by (txn, le) (rate(innotier_tpcc_transaction_duration_seconds_bucket[1m])))``.

``server``
    on every server-side series (``innotier_innodb_*``, ``innotier_server_*``,
    ``innotier_tpcc_district_orders_total``, ``innotier_tpcc_nopm``): which server they
    describe (``sandbox:NAME``, ``HOST:PORT`` or ``socket:PATH``; never a user or password).
    Several drivers aimed at one server each report the same server counters, so aggregate
    them per server first: ``sum(max by (server) (rate(innotier_innodb_pages_written_total[1m])))``.

Run metadata (tier, placement, page size, ...) lives only in ``innotier_run_info`` (value 1);
join it where needed: ``... * on (instance, driver_id) group_left (tier) innotier_run_info``.
"""

from __future__ import annotations

PREFIX = "innotier"

# Latency buckets (seconds) for OLTP transactions: sub-millisecond to multi-second.
# Prometheus histograms need fixed upper bounds; these follow a 1-2-5 series as
# client_python's defaults do, moved down two decades (its defaults, 5 ms..10 s,
# suit web requests).  The Measurement's ~1% log histogram is folded into them.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
)

# The labels innotier_run_info carries: bounded, one value per run or sweep cell.
# Anything else given in run_info is dropped (run UUIDs, DSNs, paths with secrets).
RUN_INFO_LABELS: tuple[str, ...] = (
    "tier", "placement", "page_size", "flush_method", "doublewrite", "clients", "warehouses",
    "driver", "mode", "profile", "flavor", "version", "sweep", "cell",
)

DEFAULT_DRIVER_ID = "0"
DEFAULT_LISTEN = "127.0.0.1:9623"

# Sliding window of the tpmC / NOPM / TPM gauges (seconds).
GAUGE_WINDOW_SECONDS = 60.0

# Metric names (used by collectors, the dashboards and the tests).
TRANSACTIONS = f"{PREFIX}_tpcc_transactions"  # counter -> _total
NEW_ORDERS = f"{PREFIX}_tpcc_new_orders"  # counter -> _total
DURATION = f"{PREFIX}_tpcc_transaction_duration_seconds"  # histogram
TPMC = f"{PREFIX}_tpcc_tpmc"
TPM = f"{PREFIX}_tpcc_tpm"
NOPM = f"{PREFIX}_tpcc_nopm"
MEASURED_TPMC = f"{PREFIX}_tpcc_measured_tpmc"
RUN_PHASE = f"{PREFIX}_tpcc_run_phase"
DISTRICT_ORDERS = f"{PREFIX}_tpcc_district_orders"  # counter -> _total
RUN_INFO = f"{PREFIX}_run"  # info -> _info
SWEEP_CELLS_TOTAL = f"{PREFIX}_sweep_cells_total"  # a gauge despite the suffix: the size of the sweep
SWEEP_CELLS_DONE = f"{PREFIX}_sweep_cells_done"
SWEEP_PHASE = f"{PREFIX}_sweep_phase"
COLLECTOR_SUCCESS = f"{PREFIX}_collector_success"
COLLECTOR_DURATION = f"{PREFIX}_collector_duration_seconds"

SECRET_WORDS = ("password", "passwd", "secret", "token", "dsn", "credential")


def sanitize_info(info: dict | None) -> dict[str, str]:
    """Keep only the bounded run-info labels, as short strings; drop anything secret-looking."""
    out: dict[str, str] = {}
    for key, value in (info or {}).items():
        k = str(key).strip().lower().replace("-", "_")
        if k not in RUN_INFO_LABELS or value is None:
            continue
        v = str(value)
        if any(w in v.lower() for w in SECRET_WORDS) or "://" in v or "@" in v:
            continue
        out[k] = v[:128]
    return out


def driver_id_from(info: dict | None, default: str = DEFAULT_DRIVER_ID) -> str:
    v = str((info or {}).get("driver_id") or default)
    return v[:64]
