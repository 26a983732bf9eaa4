"""After a built-in TPC-C run: the server-side counters NOPM and TPM come from, and the one RunResult
(tpmC from the client counts; NOPM and TPM from the server, as HammerDB defines them)."""

from __future__ import annotations

import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from tuner.core.measure import Measurement, RunResult
from tuner.tpcc import mix, new_order
from tuner.tpcc.config import RunConfig
from tuner.tpcc.run_plan import RunPlan, server_status

SUM_NEXT_O_ID = "SELECT SUM(d_next_o_id) FROM `{db}`.district"


@dataclass(frozen=True)
class ServerCounters:
    orders: int  # sum of D_NEXT_O_ID
    transactions: int  # Com_commit + Com_rollback
    uptime: int  # seconds since the server started
    read_at: float  # monotonic


def server_counters(spec, db: str) -> ServerCounters | None:
    """The server-side counters NOPM and TPM come from, or None if the server cannot be reached."""
    try:
        conn = spec.with_database(None).connect()
    except Exception:
        return None
    try:
        cur = conn.cursor()
        cur.execute(SUM_NEXT_O_ID.format(db=db))
        orders = int(cur.fetchone()[0] or 0)
        st = server_status(cur)
        cur.close()
        return ServerCounters(orders, st.get("Com_commit", 0) + st.get("Com_rollback", 0), st.get("Uptime", 0),
                              time.monotonic())
    except Exception:
        return None
    finally:
        try:
            conn.close()
        except Exception:
            pass


def _server_rates(start: ServerCounters | None, end: ServerCounters | None, secs: float
                  ) -> tuple[float | None, float | None, list[str]]:
    """NOPM, TPM (None when unknown) and the notes saying why one is unknown."""
    if start and end and secs > 0:
        nopm = round((end.orders - start.orders) * 60.0 / secs, 1)
        if end.uptime + 2 >= start.uptime + (end.read_at - start.read_at):
            return nopm, round((end.transactions - start.transactions) * 60.0 / secs, 1), []
        return nopm, None, ["TPM unknown: the server restarted inside the window (its counters restarted at 0)"]
    if secs > 0:
        return None, None, ["NOPM and TPM unknown: the server could not be read at the start or end of the window"]
    return None, None, []


def error_messages(worker_info: dict[int, dict]) -> dict[str, int]:
    total: Counter = Counter()
    for w in worker_info.values():
        total.update(w.get("error_messages", {}))
    return dict(total.most_common(20))


def outages(worker_info: dict[int, dict]) -> list[dict[str, float]]:
    """The windows (wall clock) in which at least one terminal had no connection, merged across workers."""
    spans = sorted(tuple(o) for w in worker_info.values() for o in w.get("outages", []))
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [{"start": round(a, 3), "end": round(b, 3), "seconds": round(b - a, 3)} for a, b in merged]


def _resources(worker_info: dict[int, dict]) -> dict[str, Any]:
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "client_cpu_seconds": round(sum(w.get("cpu_seconds", 0.0) for w in worker_info.values()), 3),
        "parent_cpu_seconds": round(ru_self.ru_utime + ru_self.ru_stime, 3),
        "client_rss_bytes": sum(w.get("max_rss_bytes", 0) for w in worker_info.values()),
        "parent_rss_bytes": ru_self.ru_maxrss * 1024,
    }


def build_result(plan: RunPlan, cfg: RunConfig, m: Measurement, worker_info: dict[int, dict],
                 start: ServerCounters | None, end: ServerCounters | None, failure: str | None) -> RunResult:
    nopm, tpm, notes = _server_rates(start, end, m.measured_seconds)
    extra = {
        "plan": plan.to_dict(),
        "server": plan.server,
        "workers": plan.workers,
        **_resources(worker_info),
        "labels": dict(cfg.labels),
        # exact, mergeable figures for shards (tuner.fleet.merge): the measured window's latency
        # histograms, every attempt from connect to disconnect, the server counters at the window's ends
        "histograms": {op: h.to_dict() for op, h in m.total.items() if h.count},
        "all_counts": {op: dict(v) for op, v in m.all_counts.items()},
        "server_counters": {"start": [start.orders, start.transactions] if start else None,
                            "end": [end.orders, end.transactions] if end else None},
        "measure_started": m.measure_started,
        "deck": mix.DECK_DESCRIPTIONS[plan.deck],
        "realized_mix": mix.realized_mix(m.counts),
        "new_order_lines": new_order.LINE_ORDER,
        "max_retries": plan.max_retries,
        "error_messages": error_messages(worker_info),
        "reconnects": sum(w.get("reconnects", 0) for w in worker_info.values()),
        # clause 2.7.4.2: districts the Deliveries found without an undelivered order, warm-up included
        "delivery_skipped_districts": sum(w.get("delivery_skipped_districts", 0) for w in worker_info.values()),
        "outages": outages(worker_info),
        "notes": notes,
    }
    if getattr(m, "interval_histograms", None) is not None:
        extra["interval_histograms"] = m.interval_histograms
    if plan.shard:
        extra["shard"] = plan.shard
        extra["home_warehouses"] = list(plan.home_warehouses or ())
        extra["start_at"] = plan.start_at
    return RunResult.from_measurement(
        m, driver="builtin", mode=plan.mode, warehouses=plan.warehouses, clients=plan.clients,
        warmup_seconds=plan.warmup, nopm=nopm, tpm=tpm, complete=failure is None, failure=failure, extra=extra)
